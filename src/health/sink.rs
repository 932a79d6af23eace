//! The health sink: runs the [`HealthModel`](super::HealthModel) in the daemon.
//!
//! It consumes incidents like every sink, and on its tick the latest NVML snapshot and CUDA probe
//! results. Each change of state is logged, shown in `assertwatch_gpu_health{state}` (one series
//! per state, 1 for the current one), saved to `state_dir/health.json` (written atomically off the
//! async workers: `assertwatch health` reads it, and a restart resumes from it), and published on
//! a watch channel for the page, `/api/v1/gpus` and the scheduler integrations (Slurm drain,
//! Kubernetes node conditions).

use super::{GpuHealth, HealthModel, HealthState, NvmlView, Transition};
use crate::incidents::store::now_ms;
use crate::metrics::Metrics;
use crate::sinks::{IncidentEvent, IncidentSink};
use assertwatch_gpu::probe::ProbeResult;
use assertwatch_gpu::{GpuSnapshot, ProbeMetrics};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// The file under the state dir that holds the last published health.
pub const FILE: &str = "health.json";

/// What `health.json` holds (versioned, like every persisted state).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "version")]
pub enum SavedHealth {
    #[serde(rename = "1")]
    V1 {
        /// Wall-clock milliseconds of the save.
        saved_ms: i64,
        gpus: Vec<GpuHealth>,
    },
}

/// The published health of every known GPU.
pub type HealthReport = Arc<Vec<GpuHealth>>;

/// Reads `state_dir/health.json`.
///
/// # Errors
/// When the file cannot be read or parsed.
pub fn load(state_dir: &Path) -> Result<SavedHealth, LoadError> {
    let path = state_dir.join(FILE);
    let text = std::fs::read(&path).map_err(|source| LoadError::Read {
        path: path.clone(),
        source,
    })?;
    serde_json::from_slice(&text).map_err(|source| LoadError::Parse { path, source })
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a saved health state")]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
}

pub struct HealthSink {
    model: HealthModel,
    metrics: Metrics,
    publish: watch::Sender<HealthReport>,
    gpus: Option<watch::Receiver<Arc<GpuSnapshot>>>,
    probes: ProbeMetrics,
    last_probes: Vec<(u32, ProbeResult)>,
    state_dir: PathBuf,
    dirty: bool,
}

impl HealthSink {
    /// Resumes from `state_dir/health.json` where present. Returns the sink and the channel
    /// readers subscribe to.
    pub fn new(
        state_dir: PathBuf,
        metrics: Metrics,
        gpus: Option<watch::Receiver<Arc<GpuSnapshot>>>,
        probes: ProbeMetrics,
    ) -> (HealthSink, watch::Receiver<HealthReport>) {
        let mut model = HealthModel::new();
        match load(&state_dir) {
            Ok(SavedHealth::V1 { gpus, .. }) => model.restore(&gpus),
            Err(LoadError::Read { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(error = %format!("{e:#}"), "Ignoring the saved GPU health."),
        }
        let (tx, rx) = watch::channel(Arc::new(model.gpus()));
        let last_probes = probes.results();
        let sink = HealthSink {
            model,
            metrics,
            publish: tx,
            gpus,
            probes,
            last_probes,
            state_dir,
            dirty: true,
        };
        (sink, rx)
    }

    fn apply(&mut self, transitions: Vec<Transition>) {
        for t in transitions {
            let g = &t.gpu;
            let level = if g.state == HealthState::Healthy {
                tracing::Level::INFO
            } else {
                tracing::Level::WARN
            };
            let reason = g.reason.as_deref().unwrap_or("");
            if level == tracing::Level::WARN {
                tracing::warn!(gpu = %g.pci_bus_id, index = ?g.index, from = t.from.as_str(), to = g.state.as_str(), reason, incident = ?g.incident, "GPU health changed.");
            } else {
                tracing::info!(gpu = %g.pci_bus_id, index = ?g.index, from = t.from.as_str(), to = g.state.as_str(), reason, "GPU health recovered.");
            }
            self.metrics
                .gpu_health_transitions
                .with_label_values(&[g.state.as_str()])
                .inc();
            self.dirty = true;
        }
    }

    /// Publishes, exports and saves the current state if it changed.
    async fn flush(&mut self) {
        if !self.dirty {
            return;
        }
        self.dirty = false;
        let gpus = self.model.gpus();
        for g in &gpus {
            let index = g.index.map(|i| i.to_string()).unwrap_or_default();
            let uuid = g.uuid.clone().unwrap_or_default();
            for s in HealthState::ALL {
                let labels = [
                    index.as_str(),
                    uuid.as_str(),
                    g.pci_bus_id.as_str(),
                    s.as_str(),
                ];
                if self.metrics.admit("assertwatch_gpu_health", &labels) {
                    self.metrics
                        .gpu_health
                        .with_label_values(&labels)
                        .set(i64::from(g.state == s));
                }
            }
        }
        let saved = SavedHealth::V1 {
            saved_ms: now_ms(),
            gpus: gpus.clone(),
        };
        self.publish.send_replace(Arc::new(gpus));
        let path = self.state_dir.join(FILE);
        let wrote = tokio::task::spawn_blocking(move || {
            let bytes = serde_json::to_vec_pretty(&saved).map_err(std::io::Error::other)?;
            crate::fsutil::atomic_write(&path, &bytes)
        })
        .await;
        if !matches!(wrote, Ok(Ok(()))) {
            self.metrics.checkpoint_errors.inc();
            tracing::warn!("Could not save the GPU health state.");
        }
    }

    fn poll_gpus(&mut self) {
        let now = now_ms();
        if let Some(rx) = self.gpus.as_mut() {
            if rx.has_changed().unwrap_or(false) {
                let snap = rx.borrow_and_update().clone();
                if snap.nvml_up {
                    let views: Vec<NvmlView> = snap
                        .gpus
                        .iter()
                        .map(|g| NvmlView {
                            index: g.id.index,
                            uuid: g.id.uuid.clone(),
                            pci_bus_id: g.id.pci_bus_id.clone(),
                            lost: g.lost,
                            remaps_pending: g.sample.remapped_rows_pending,
                        })
                        .collect();
                    let t = self.model.observe_nvml(&views, now);
                    self.apply(t);
                }
            }
        }
        let probes = self.probes.results();
        if probes != self.last_probes {
            for (idx, r) in &probes {
                if self.last_probes.iter().any(|(i, p)| i == idx && p == r) {
                    continue;
                }
                let pci = r.pci_bus_id.clone().or_else(|| {
                    let snap = self.gpus.as_ref()?.borrow().clone();
                    snap.gpus
                        .iter()
                        .find(|g| g.id.index == *idx)
                        .map(|g| g.id.pci_bus_id.clone())
                });
                if let Some(pci) = pci {
                    let t = self.model.observe_probe(&pci, r.ok, now);
                    self.apply(t.into_iter().collect());
                }
            }
            self.last_probes = probes;
        }
        let t = self.model.tick(now);
        self.apply(t);
    }
}

impl IncidentSink for HealthSink {
    fn name(&self) -> &'static str {
        "gpu_health"
    }

    async fn handle(&mut self, event: Arc<IncidentEvent>) {
        if event.is_new() {
            let t = self.model.observe_incident(&event.record, now_ms());
            self.apply(t.into_iter().collect());
            self.flush().await;
        }
    }

    fn tick_every(&self) -> Option<Duration> {
        Some(Duration::from_secs(1))
    }

    async fn tick(&mut self) {
        self.poll_gpus();
        self.flush().await;
    }

    async fn finish(&mut self) {
        self.flush().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{GpuRef, Kind};
    use crate::sinks::Change;

    #[tokio::test]
    async fn publishes_saves_and_resumes() {
        let dir = tempfile::tempdir().unwrap();
        let metrics = Metrics::new();
        let (mut sink, rx) = HealthSink::new(
            dir.path().to_path_buf(),
            metrics.clone(),
            None,
            ProbeMetrics::default(),
        );
        let mut record = crate::incidents::store::test_record();
        record.id = 9;
        record.incident.kind = Kind::Xid;
        record.incident.xid = Some(79);
        record.incident.pci = Some("0000:b3:00".into());
        record.gpu = Some(GpuRef {
            index: None,
            uuid: None,
            pci_bus_id: Some("0000:b3:00".into()),
        });
        sink.handle(Arc::new(IncidentEvent {
            change: Change::Opened,
            record,
            gpu: None,
        }))
        .await;
        let now = rx.borrow().clone();
        assert_eq!(now.len(), 1);
        assert_eq!(now[0].state, HealthState::Unhealthy);
        assert_eq!(
            metrics
                .gpu_health
                .with_label_values(&["", "", "0000:b3:00", "unhealthy"])
                .get(),
            1
        );
        let SavedHealth::V1 { gpus, .. } = load(dir.path()).unwrap();
        assert_eq!(gpus[0].incident, Some(9));
        // A new sink resumes the saved state.
        let (_sink2, rx2) = HealthSink::new(
            dir.path().to_path_buf(),
            Metrics::new(),
            None,
            ProbeMetrics::default(),
        );
        assert_eq!(rx2.borrow()[0].state, HealthState::Unhealthy);
    }
}
