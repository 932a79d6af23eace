//! The reproduction runner's Prometheus families.
//!
//! `assertwatch_repro_runs_total{mode,outcome}` and `assertwatch_repro_duration_seconds{mode}`
//! are also defined by the daemon's own metrics module; [`Metrics::from_handles`] takes those
//! handles and registers only the family this crate adds,
//! `assertwatch_repro_rejected_manifests_total{reason}`, so nothing is registered twice.
//! [`Metrics::new`] registers all three, for tests and embedders without the daemon.
//! Label values come only from closed sets: [`crate::Mode`], [`crate::Outcome`] and
//! [`crate::manifest::ManifestError::reason`].

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry};

use crate::manifest::ManifestError;

pub const RUNS_TOTAL: &str = "assertwatch_repro_runs_total";
pub const DURATION_SECONDS: &str = "assertwatch_repro_duration_seconds";
pub const REJECTED_MANIFESTS_TOTAL: &str = "assertwatch_repro_rejected_manifests_total";

/// Handles the runner counts with.
#[derive(Clone)]
pub struct Metrics {
    pub runs: IntCounterVec,
    pub duration: HistogramVec,
    pub rejected: IntCounterVec,
}

fn rejected_family(registry: &Registry) -> Result<IntCounterVec, prometheus::Error> {
    let rejected = IntCounterVec::new(
        Opts::new(
            REJECTED_MANIFESTS_TOTAL,
            "Debug-state manifests refused by the reproduction runner, by reason.",
        ),
        &["reason"],
    )?;
    registry.register(Box::new(rejected.clone()))?;
    for reason in ManifestError::REASONS {
        rejected.with_label_values(&[reason]);
    }
    Ok(rejected)
}

impl Metrics {
    /// Registers all three families on `registry`.
    ///
    /// # Errors
    /// A family of the same name is already registered.
    pub fn new(registry: &Registry) -> Result<Self, prometheus::Error> {
        let runs = IntCounterVec::new(
            Opts::new(RUNS_TOTAL, "Reproduction attempts by mode and outcome."),
            &["mode", "outcome"],
        )?;
        registry.register(Box::new(runs.clone()))?;
        let duration = HistogramVec::new(
            HistogramOpts::new(DURATION_SECONDS, "Wall time of one reproduction attempt.").buckets(
                vec![1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0],
            ),
            &["mode"],
        )?;
        registry.register(Box::new(duration.clone()))?;
        Ok(Metrics {
            runs,
            duration,
            rejected: rejected_family(registry)?,
        })
    }

    /// Uses the daemon's existing `runs` (labels `mode`, `outcome`) and `duration` (label `mode`)
    /// handles and registers only the rejected-manifests family on `registry`.
    ///
    /// # Errors
    /// The rejected-manifests family is already registered.
    pub fn from_handles(
        runs: IntCounterVec,
        duration: HistogramVec,
        registry: &Registry,
    ) -> Result<Self, prometheus::Error> {
        Ok(Metrics {
            runs,
            duration,
            rejected: rejected_family(registry)?,
        })
    }
}
