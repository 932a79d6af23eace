//! The GPU probe sink: checks a GPU directly after a hardware- or driver-blamed Xid.
//!
//! A CUDA health probe (context, copy, a kernel with a known answer) tells whether the GPU still
//! works after the Xid. It runs at most once per GPU per [`MIN_INTERVAL`], on a blocking thread
//! (it can take up to a minute on a sick GPU), and its result feeds `assertwatch_gpu_probe_*`.

use crate::detect::xid_catalog;
use crate::model::Blame;
use crate::sinks::{IncidentEvent, IncidentSink};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Shortest time between two probes of one GPU.
pub const MIN_INTERVAL: Duration = Duration::from_secs(600);
/// Longest a probe may run.
const PROBE_TIMEOUT: Duration = Duration::from_secs(60);

pub struct ProbeSink {
    probes: assertwatch_gpu::ProbeMetrics,
    last: HashMap<u32, Instant>,
}

impl ProbeSink {
    pub fn new(probes: assertwatch_gpu::ProbeMetrics) -> Self {
        ProbeSink {
            probes,
            last: HashMap::new(),
        }
    }

    /// The GPU index to probe for `event`, if it calls for a probe now.
    fn due(&mut self, event: &IncidentEvent, now: Instant) -> Option<u32> {
        if !event.is_new() {
            return None;
        }
        let xid = event.record.incident.xid?;
        if !matches!(xid_catalog::blame(xid), Blame::Hardware | Blame::Driver) {
            return None;
        }
        let idx = event.gpu.as_ref()?.index;
        if self
            .last
            .get(&idx)
            .is_some_and(|t| now.duration_since(*t) < MIN_INTERVAL)
        {
            return None;
        }
        self.last.insert(idx, now);
        Some(idx)
    }
}

impl IncidentSink for ProbeSink {
    fn name(&self) -> &'static str {
        "gpu_probe"
    }

    async fn handle(&mut self, event: Arc<IncidentEvent>) {
        let Some(idx) = self.due(&event, Instant::now()) else {
            return;
        };
        let probes = self.probes.clone();
        // Not awaited: the next event need not wait for a minute-long probe.
        tokio::task::spawn_blocking(move || {
            let t = std::time::Instant::now();
            match assertwatch_gpu::probe::probe(idx, PROBE_TIMEOUT) {
                Ok(r) => {
                    tracing::info!(gpu = idx, ok = r.ok, error = ?r.error, "GPU health probe after an Xid.");
                    probes.record(&r);
                }
                Err(e) => {
                    tracing::warn!(gpu = idx, error = %e, "GPU health probe could not run.");
                    probes.record_failure(idx, t.elapsed());
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Kind;
    use crate::sinks::Change;

    fn event(xid: u32, index: Option<u32>) -> IncidentEvent {
        let mut record = crate::incidents::store::test_record();
        record.incident.kind = Kind::Xid;
        record.incident.xid = Some(xid);
        IncidentEvent {
            change: Change::Opened,
            record,
            gpu: index.map(|index| assertwatch_gpu::GpuId {
                index,
                uuid: format!("GPU-{index}"),
                pci_bus_id: String::new(),
            }),
        }
    }

    #[test]
    fn probes_hardware_xids_once_per_gpu_and_interval() {
        let mut s = ProbeSink::new(assertwatch_gpu::ProbeMetrics::default());
        let t0 = Instant::now();
        assert_eq!(s.due(&event(79, Some(0)), t0), Some(0));
        assert_eq!(
            s.due(&event(79, Some(0)), t0 + Duration::from_secs(1)),
            None
        );
        assert_eq!(s.due(&event(79, Some(1)), t0), Some(1));
        assert_eq!(s.due(&event(79, Some(0)), t0 + MIN_INTERVAL), Some(0));
        // Application-class Xids and GPUs NVML does not know are not probed.
        assert_eq!(s.due(&event(13, Some(3)), t0), None);
        assert_eq!(s.due(&event(79, None), t0), None);
    }
}
