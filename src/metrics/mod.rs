//! The daemon's own metrics: every family is defined once here, with its help text and labels.
//!
//! Label values come from closed sets (`Kind::as_str`, outcome names) or from configuration
//! (a log source's `name`), never from log text, so every family stays bounded. Names follow
//! docs/metrics.md. GPU families are rendered by the GPU layer's own collector.

use prometheus::{
    Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry,
};

/// Handles to every pipeline metric; cheap to clone.
#[derive(Clone)]
pub struct Metrics {
    pub registry: Registry,
    pub build_info: IntGaugeVec,
    pub up: IntGauge,
    pub config_reload_ok: IntGauge,
    pub config_reloads: IntCounterVec,
    pub incidents: IntCounterVec,
    pub suppressed: IntCounterVec,
    pub findings: IntCounterVec,
    pub detection_latency: Histogram,
    pub files_watched: IntGaugeVec,
    pub log_bytes: IntCounterVec,
    pub log_lines: IntCounterVec,
    pub log_truncated: IntCounterVec,
    pub log_rotations: IntCounterVec,
    pub log_read_errors: IntCounterVec,
    pub log_read_lag: HistogramVec,
    pub kmsg_records: IntCounter,
    pub kmsg_lost: IntCounter,
    pub store_errors: IntCounterVec,
    pub store_pruned: IntCounterVec,
    pub checkpoint_errors: IntCounter,
    pub xid_errors: IntCounterVec,
    pub last_xid: IntGaugeVec,
    pub repro_runs: IntCounterVec,
    pub repro_duration: HistogramVec,
    pub series_dropped: IntCounterVec,
    pub sink_events: IntCounterVec,
    pub gpu_health: IntGaugeVec,
    pub gpu_health_transitions: IntCounterVec,
    pub slurm_commands: IntCounterVec,
    pub sink_dropped: IntCounterVec,
    guard: SeriesGuard,
}

/// Label sets seen per family.
type SeenSeries = std::collections::HashMap<&'static str, std::collections::HashSet<Vec<String>>>;

/// Bounds the series of families whose label values come from log text (a forged kernel line can
/// carry any Xid number or bus id): past `max` distinct label sets per family, new ones are not
/// created and `assertwatch_metric_series_dropped_total{family}` counts them.
#[derive(Clone)]
struct SeriesGuard {
    max: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    seen: std::sync::Arc<std::sync::Mutex<SeenSeries>>,
}

fn counter_vec(r: &Registry, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
    let c = IntCounterVec::new(Opts::new(name, help), labels).expect("metric definition");
    r.register(Box::new(c.clone()))
        .expect("metric registered once");
    c
}

fn gauge_vec(r: &Registry, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
    let g = IntGaugeVec::new(Opts::new(name, help), labels).expect("metric definition");
    r.register(Box::new(g.clone()))
        .expect("metric registered once");
    g
}

impl Metrics {
    /// Creates and registers every family. Panics only on a programming error (a duplicate name).
    pub fn new() -> Metrics {
        let r = Registry::new();
        let build_info = gauge_vec(
            &r,
            "assertwatch_build_info",
            "Build of the running assertwatch; always 1.",
            &["version", "revision"],
        );
        build_info
            .with_label_values(&[
                env!("CARGO_PKG_VERSION"),
                option_env!("ASSERTWATCH_REVISION").unwrap_or("unknown"),
            ])
            .set(1);
        let up = IntGauge::new("assertwatch_up", "1 while the daemon serves.")
            .expect("metric definition");
        r.register(Box::new(up.clone()))
            .expect("metric registered once");
        let config_reload_ok = IntGauge::new(
            "assertwatch_config_last_reload_successful",
            "1 if the last configuration reload was applied, 0 if it was rejected.",
        )
        .expect("metric definition");
        r.register(Box::new(config_reload_ok.clone()))
            .expect("metric registered once");
        config_reload_ok.set(1);
        let latency = Histogram::with_opts(
            HistogramOpts::new("assertwatch_detection_latency_seconds", "Time from the daemon reading a failure's first line to the incident being counted.")
                .buckets(vec![0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0]),
        )
        .expect("metric definition");
        r.register(Box::new(latency.clone()))
            .expect("metric registered once");
        let lag = HistogramVec::new(
            HistogramOpts::new(
                "assertwatch_log_read_lag_seconds",
                "Time from a log file's modification to the daemon reading the new bytes.",
            )
            .buckets(vec![
                0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
            ]),
            &["source"],
        )
        .expect("metric definition");
        r.register(Box::new(lag.clone()))
            .expect("metric registered once");
        let kmsg_records =
            IntCounter::new("assertwatch_kmsg_records_total", "Kernel log records read.")
                .expect("metric definition");
        r.register(Box::new(kmsg_records.clone()))
            .expect("metric registered once");
        let kmsg_lost = IntCounter::new(
            "assertwatch_kmsg_lost_records_total",
            "Kernel log records overwritten before they were read (sequence gaps).",
        )
        .expect("metric definition");
        r.register(Box::new(kmsg_lost.clone()))
            .expect("metric registered once");
        let checkpoint_errors = IntCounter::new(
            "assertwatch_checkpoint_errors_total",
            "Checkpoint writes that failed (retried).",
        )
        .expect("metric definition");
        r.register(Box::new(checkpoint_errors.clone()))
            .expect("metric registered once");
        let repro_duration = HistogramVec::new(
            HistogramOpts::new(
                "assertwatch_repro_duration_seconds",
                "Wall time of one reproduction attempt.",
            )
            .buckets(vec![
                1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0,
            ]),
            &["mode"],
        )
        .expect("metric definition");
        r.register(Box::new(repro_duration.clone()))
            .expect("metric registered once");
        Metrics {
            build_info,
            up,
            config_reload_ok,
            config_reloads: counter_vec(
                &r,
                "assertwatch_config_reloads_total",
                "Configuration reloads (SIGHUP or file change) by result.",
                &["result"],
            ),
            incidents: counter_vec(
                &r,
                "assertwatch_incidents_total",
                "Incidents opened, by kind, root-cause category and blame.",
                &["kind", "category", "blame"],
            ),
            suppressed: counter_vec(
                &r,
                "assertwatch_incidents_suppressed_total",
                "Incidents folded away by a flood bound, by reason.",
                &["reason"],
            ),
            findings: counter_vec(
                &r,
                "assertwatch_findings_total",
                "Evidence lines recognised, by kind of evidence.",
                &["evidence"],
            ),
            detection_latency: latency,
            files_watched: gauge_vec(
                &r,
                "assertwatch_log_files_watched",
                "Log files currently followed.",
                &["source"],
            ),
            log_bytes: counter_vec(
                &r,
                "assertwatch_log_bytes_total",
                "Bytes read from training logs.",
                &["source"],
            ),
            log_lines: counter_vec(
                &r,
                "assertwatch_log_lines_total",
                "Lines read from training logs.",
                &["source"],
            ),
            log_truncated: counter_vec(
                &r,
                "assertwatch_log_lines_truncated_total",
                "Lines longer than max_line_bytes (cut, rest skipped).",
                &["source"],
            ),
            log_rotations: counter_vec(
                &r,
                "assertwatch_log_rotations_total",
                "Log rotations handled, by kind.",
                &["source", "kind"],
            ),
            log_read_errors: counter_vec(
                &r,
                "assertwatch_log_read_errors_total",
                "Failed opens or reads of log files.",
                &["source"],
            ),
            log_read_lag: lag,
            kmsg_records,
            kmsg_lost,
            store_errors: counter_vec(
                &r,
                "assertwatch_store_errors_total",
                "Incident store failures (e.g. disk full), by operation.",
                &["op"],
            ),
            store_pruned: counter_vec(
                &r,
                "assertwatch_store_pruned_total",
                "Incidents deleted from the store by retention, by reason (age, count, size).",
                &["reason"],
            ),
            checkpoint_errors,
            xid_errors: counter_vec(
                &r,
                "assertwatch_xid_errors_total",
                "NVIDIA Xid events, kernel log and NVML merged.",
                &["gpu", "uuid", "pci_bus_id", "xid"],
            ),
            last_xid: gauge_vec(
                &r,
                "assertwatch_gpu_last_xid",
                "Number of the last Xid seen on the GPU.",
                &["gpu", "uuid", "pci_bus_id"],
            ),
            repro_runs: counter_vec(
                &r,
                "assertwatch_repro_runs_total",
                "Reproduction attempts by mode and outcome.",
                &["mode", "outcome"],
            ),
            repro_duration,
            series_dropped: counter_vec(
                &r,
                "assertwatch_metric_series_dropped_total",
                "Label sets not created because their family reached limits.max_series_per_family.",
                &["family"],
            ),
            gpu_health: gauge_vec(
                &r,
                "assertwatch_gpu_health",
                "GPU health: 1 for the GPU's current state (healthy, degraded, unhealthy), 0 for the others.",
                &["gpu", "uuid", "pci_bus_id", "state"],
            ),
            gpu_health_transitions: counter_vec(
                &r,
                "assertwatch_gpu_health_transitions_total",
                "Changes of GPU health, by the state entered.",
                &["state"],
            ),
            slurm_commands: counter_vec(
                &r,
                "assertwatch_slurm_commands_total",
                "scontrol runs of the Slurm node sink, by command (show, drain, resume) and result.",
                &["command", "result"],
            ),
            sink_events: counter_vec(
                &r,
                "assertwatch_sink_events_total",
                "Incident changes delivered to a sink (alertmanager, replay, probe, metrics, …).",
                &["sink"],
            ),
            sink_dropped: counter_vec(
                &r,
                "assertwatch_sink_dropped_total",
                "Incident changes a sink never saw because its queue was full (the sink was too slow).",
                &["sink"],
            ),
            guard: SeriesGuard {
                max: std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(500)),
                seen: Default::default(),
            },
            registry: r,
        }
    }

    /// Sets the per-family series bound (from `limits.max_series_per_family`).
    pub fn set_max_series(&self, max: usize) {
        self.guard
            .max
            .store(max.max(1), std::sync::atomic::Ordering::Relaxed);
    }

    /// May `family` get a series with `labels`? False (and counted) past the bound.
    pub fn admit(&self, family: &'static str, labels: &[&str]) -> bool {
        let max = self.guard.max.load(std::sync::atomic::Ordering::Relaxed);
        let Ok(mut seen) = self.guard.seen.lock() else {
            return false;
        };
        let set = seen.entry(family).or_default();
        let key: Vec<String> = labels.iter().map(|s| (*s).to_owned()).collect();
        if set.contains(&key) {
            return true;
        }
        if set.len() >= max {
            self.series_dropped.with_label_values(&[family]).inc();
            return false;
        }
        set.insert(key);
        true
    }

    /// Renders the registry in the Prometheus text format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let enc = prometheus::TextEncoder::new();
        if let Err(e) = enc.encode_utf8(&self.registry.gather(), &mut out) {
            tracing::error!(error = %e, "Could not render metrics.");
        }
        out
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

/// Mirrors the tailer's count of failed checkpoint writes into `counter` once a second until
/// `stop`. The counter may also count other checkpoint failures; only the tailer's increase is
/// added here.
pub fn mirror_counter(
    stats: std::sync::Arc<assertwatch_tail::TailStats>,
    counter: IntCounter,
    stop: tokio_util::sync::CancellationToken,
) {
    tokio::spawn(async move {
        let mut seen = 0;
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => {}
            }
            let now = stats
                .checkpoint_write_errors
                .load(std::sync::atomic::Ordering::Relaxed);
            if now > seen {
                counter.inc_by(now - seen);
                seen = now;
            }
        }
    });
}
