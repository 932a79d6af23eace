//! The metrics sink: incident counters and the per-GPU Xid series.
//!
//! Counts each incident once, when it opens: `assertwatch_incidents_total{kind,category,blame}`
//! and, for Xids, `assertwatch_xid_errors_total{gpu,uuid,pci_bus_id,xid}` and
//! `assertwatch_gpu_last_xid`. A burst of one Xid on one GPU is one incident, and the same event
//! seen by NVML and the kernel log is one incident, so each counts once. Every series passes the
//! per-family bound (`limits.max_series_per_family`) first.

use crate::metrics::Metrics;
use crate::sinks::{IncidentEvent, IncidentSink};
use std::sync::Arc;

pub struct MetricsSink {
    metrics: Metrics,
}

impl MetricsSink {
    pub fn new(metrics: Metrics) -> Self {
        MetricsSink { metrics }
    }

    fn count(&self, ev: &IncidentEvent) {
        let inc = &ev.record.incident;
        let m = &self.metrics;
        let labels = [inc.kind.as_str(), inc.category.as_str(), inc.blame.as_str()];
        if m.admit("assertwatch_incidents_total", &labels) {
            m.incidents.with_label_values(&labels).inc();
        }
        let Some(x) = inc.xid else { return };
        // NVML's names where the GPU is known; the kernel line's otherwise.
        let (index, uuid, pci) = match &ev.gpu {
            Some(g) => (g.index.to_string(), g.uuid.clone(), g.pci_bus_id.clone()),
            None => (
                String::new(),
                inc.gpu_uuid.clone().unwrap_or_default(),
                inc.pci.clone().unwrap_or_default(),
            ),
        };
        let xs = x.to_string();
        if m.admit("assertwatch_xid_errors_total", &[&index, &uuid, &pci, &xs]) {
            m.xid_errors
                .with_label_values(&[&index, &uuid, &pci, &xs])
                .inc();
        }
        if m.admit("assertwatch_gpu_last_xid", &[&index, &uuid, &pci]) {
            m.last_xid
                .with_label_values(&[&index, &uuid, &pci])
                .set(i64::from(x));
        }
    }
}

impl IncidentSink for MetricsSink {
    fn name(&self) -> &'static str {
        "metrics"
    }

    async fn handle(&mut self, event: Arc<IncidentEvent>) {
        if event.is_new() {
            self.count(&event);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Kind;
    use crate::sinks::Change;

    fn event(
        change: Change,
        xid: Option<u32>,
        gpu: Option<assertwatch_gpu::GpuId>,
    ) -> Arc<IncidentEvent> {
        let mut record = crate::incidents::store::test_record();
        if xid.is_some() {
            record.incident.kind = Kind::Xid;
            record.incident.xid = xid;
            record.incident.pci = Some("0000:3b:00".into());
        }
        Arc::new(IncidentEvent {
            change,
            record,
            gpu,
        })
    }

    #[tokio::test]
    async fn counts_each_incident_once_when_it_opens() {
        let m = Metrics::new();
        let mut s = MetricsSink::new(m.clone());
        s.handle(event(Change::Opened, None, None)).await;
        s.handle(event(Change::Updated, None, None)).await;
        s.handle(event(Change::Closed, None, None)).await;
        assert_eq!(
            m.incidents
                .with_label_values(&["oom", "unknown", "unknown"])
                .get(),
            1
        );
    }

    #[tokio::test]
    async fn xids_are_labelled_with_nvml_names_when_the_gpu_is_known() {
        let m = Metrics::new();
        let mut s = MetricsSink::new(m.clone());
        let gpu = assertwatch_gpu::GpuId {
            index: 2,
            uuid: "GPU-2".into(),
            pci_bus_id: "00000000:3B:00.0".into(),
        };
        s.handle(event(Change::Opened, Some(79), Some(gpu))).await;
        s.handle(event(Change::Opened, Some(13), None)).await;
        let known = ["2", "GPU-2", "00000000:3B:00.0", "79"];
        assert_eq!(m.xid_errors.with_label_values(&known).get(), 1);
        let unknown = ["", "", "0000:3b:00", "13"];
        assert_eq!(m.xid_errors.with_label_values(&unknown).get(), 1);
        assert_eq!(
            m.last_xid
                .with_label_values(&["2", "GPU-2", "00000000:3B:00.0"])
                .get(),
            79
        );
    }
}
