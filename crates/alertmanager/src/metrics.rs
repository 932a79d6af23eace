//! The notifier's Prometheus metric families and the closed sets of their label values.
//!
//! Names follow the project's metric contract. `receiver` values come from the configured URLs
//! (`host:port`), `reason` values from [`DropReason`]; nothing from alert content ever becomes a
//! label value, so every family stays bounded.

use prometheus::{IntCounterVec, IntGauge, Opts, Registry};

/// Alert batches (one `POST /api/v2/alerts`) accepted by an Alertmanager.
pub const ALERTS_SENT_TOTAL: &str = "assertwatch_alerts_sent_total";
/// Pushes that failed (and are retried, unless the receiver refused the content).
pub const ALERTS_FAILED_TOTAL: &str = "assertwatch_alerts_failed_total";
/// Alerts, or parts of alerts, dropped by a bound.
pub const ALERTS_DROPPED_TOTAL: &str = "assertwatch_alerts_dropped_total";
/// Alerts currently held active (re-sent every resend interval).
pub const ALERTS_ACTIVE: &str = "assertwatch_alerts_active";

/// Why something was dropped; the `reason` label of [`ALERTS_DROPPED_TOTAL`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// A new key arrived while the active set held `queue_capacity` alerts.
    QueueFull,
    /// A label or annotation entry had an invalid name (the entry is dropped, the alert kept).
    InvalidLabelName,
    /// The generator URL was not an absolute URL or too long (the field is dropped).
    InvalidGeneratorUrl,
    /// No usable label was left, so Alertmanager would refuse the alert.
    InvalidAlert,
    /// A receiver already had `2 × queue_capacity` alerts waiting, so a resolve for it was
    /// dropped. Alertmanager still resolves the alert once its last `endsAt` passes.
    ReceiverBacklog,
    /// A receiver answered with a 4xx status other than 408 or 429: retrying cannot help.
    Rejected,
}

impl DropReason {
    /// Every reason, so each series exists from the start.
    pub const ALL: [DropReason; 6] = [
        DropReason::QueueFull,
        DropReason::InvalidLabelName,
        DropReason::InvalidGeneratorUrl,
        DropReason::InvalidAlert,
        DropReason::ReceiverBacklog,
        DropReason::Rejected,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::QueueFull => "queue_full",
            DropReason::InvalidLabelName => "invalid_label_name",
            DropReason::InvalidGeneratorUrl => "invalid_generator_url",
            DropReason::InvalidAlert => "invalid_alert",
            DropReason::ReceiverBacklog => "receiver_backlog",
            DropReason::Rejected => "rejected",
        }
    }
}

/// Handles to the notifier's metric families. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Metrics {
    sent: IntCounterVec,
    failed: IntCounterVec,
    dropped: IntCounterVec,
    active: IntGauge,
}

impl Metrics {
    /// Creates the families and registers them with `registry`.
    ///
    /// # Errors
    /// The registry refuses a family, e.g. because one of the same name is already registered.
    pub fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let metrics = Self::unregistered()?;
        registry.register(Box::new(metrics.sent.clone()))?;
        registry.register(Box::new(metrics.failed.clone()))?;
        registry.register(Box::new(metrics.dropped.clone()))?;
        registry.register(Box::new(metrics.active.clone()))?;
        Ok(metrics)
    }

    /// Creates the families without registering them (for callers that do not export metrics).
    ///
    /// # Errors
    /// Only if a family definition is invalid, which the fixed names here never are.
    pub fn unregistered() -> Result<Self, prometheus::Error> {
        let sent = IntCounterVec::new(
            Opts::new(
                ALERTS_SENT_TOTAL,
                "Alert batches accepted by an Alertmanager.",
            ),
            &["receiver"],
        )?;
        let failed = IntCounterVec::new(
            Opts::new(
                ALERTS_FAILED_TOTAL,
                "Failed pushes to an Alertmanager (retried).",
            ),
            &["receiver"],
        )?;
        let dropped = IntCounterVec::new(
            Opts::new(
                ALERTS_DROPPED_TOTAL,
                "Alerts or alert fields dropped by a bound.",
            ),
            &["reason"],
        )?;
        let active = IntGauge::new(ALERTS_ACTIVE, "Alerts currently held active and re-sent.")?;
        for reason in DropReason::ALL {
            dropped.with_label_values(&[reason.as_str()]);
        }
        Ok(Self {
            sent,
            failed,
            dropped,
            active,
        })
    }

    pub(crate) fn init_receiver(&self, receiver: &str) {
        self.sent.with_label_values(&[receiver]);
        self.failed.with_label_values(&[receiver]);
    }

    pub(crate) fn sent(&self, receiver: &str) {
        self.sent.with_label_values(&[receiver]).inc();
    }

    pub(crate) fn failed(&self, receiver: &str) {
        self.failed.with_label_values(&[receiver]).inc();
    }

    pub(crate) fn dropped(&self, reason: DropReason, n: u64) {
        if n > 0 {
            self.dropped.with_label_values(&[reason.as_str()]).inc_by(n);
        }
    }

    pub(crate) fn set_active(&self, n: usize) {
        self.active.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// Current value of `assertwatch_alerts_sent_total{receiver}`.
    pub fn sent_count(&self, receiver: &str) -> u64 {
        self.sent.with_label_values(&[receiver]).get()
    }

    /// Current value of `assertwatch_alerts_failed_total{receiver}`.
    pub fn failed_count(&self, receiver: &str) -> u64 {
        self.failed.with_label_values(&[receiver]).get()
    }

    /// Current value of `assertwatch_alerts_dropped_total{reason}`.
    pub fn dropped_count(&self, reason: DropReason) -> u64 {
        self.dropped.with_label_values(&[reason.as_str()]).get()
    }

    /// Current value of `assertwatch_alerts_active`.
    pub fn active_count(&self) -> i64 {
        self.active.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_register_with_the_contract_names() {
        let registry = Registry::new();
        let metrics = Metrics::register(&registry).unwrap();
        metrics.init_receiver("127.0.0.1:9093");
        let names: Vec<String> = registry
            .gather()
            .iter()
            .map(|f| f.name().to_string())
            .collect();
        for name in [
            ALERTS_ACTIVE,
            ALERTS_DROPPED_TOTAL,
            ALERTS_FAILED_TOTAL,
            ALERTS_SENT_TOTAL,
        ] {
            assert!(
                names.iter().any(|n| n == name),
                "{name} missing from {names:?}"
            );
        }
        assert!(
            Metrics::register(&registry).is_err(),
            "double registration must fail"
        );
    }

    #[test]
    fn every_drop_reason_series_starts_at_zero() {
        let metrics = Metrics::unregistered().unwrap();
        for reason in DropReason::ALL {
            assert_eq!(metrics.dropped_count(reason), 0);
        }
        metrics.dropped(DropReason::QueueFull, 2);
        assert_eq!(metrics.dropped_count(DropReason::QueueFull), 2);
    }
}
