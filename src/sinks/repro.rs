//! The replay requester: asks the reproduction runner to replay each new job failure.
//!
//! A new device-side assert or CUDA error read from a log file becomes a replay request. The
//! runner's queue is bounded: when it is full, the incident gets `skipped` (`queue_full`) at
//! once, sent back like any other result. A drain-class Xid seen in the last hour marks the GPU
//! unhealthy for the runner, which then replays on the CPU only.

use crate::actions::repro::Job;
use crate::detect::xid_catalog;
use crate::metrics::Metrics;
use crate::model::{Kind, ReplayDone, ReproReport};
use crate::sinks::{IncidentEvent, IncidentSink};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// How long after a drain-class Xid GPU replay modes are avoided.
const UNHEALTHY_FOR: Duration = Duration::from_secs(3600);

pub struct ReplaySink {
    jobs: mpsc::Sender<Job>,
    results: mpsc::Sender<ReplayDone>,
    metrics: Metrics,
    last_drain_xid: Option<Instant>,
}

impl ReplaySink {
    /// Requests go to `jobs`; immediate answers (a full queue) go back through `results`.
    pub fn new(
        jobs: mpsc::Sender<Job>,
        results: mpsc::Sender<ReplayDone>,
        metrics: Metrics,
    ) -> Self {
        ReplaySink {
            jobs,
            results,
            metrics,
            last_drain_xid: None,
        }
    }

    /// The replay request for `event`, if it calls for one.
    async fn request(&mut self, event: &IncidentEvent) -> Option<Job> {
        if !event.is_new() {
            return None;
        }
        let inc = &event.record.incident;
        let line = inc.message.as_deref().unwrap_or("");
        if inc
            .xid
            .is_some_and(|x| xid_catalog::decide(x, line).out_of_service)
        {
            self.last_drain_xid = Some(Instant::now());
        }
        if !matches!(inc.kind, Kind::DeviceAssert | Kind::CudaError) {
            return None;
        }
        let path = event.record.source.path()?;
        let id = event.record.id;
        let mut req =
            assertwatch_repro::ReproRequest::new(id.to_string(), std::time::SystemTime::now());
        req.log_path = Some(
            tokio::fs::canonicalize(path)
                .await
                .unwrap_or_else(|_| PathBuf::from(path)),
        );
        req.pid = inc.pid;
        req.category = inc.category.clone();
        req.gpu_unhealthy = self
            .last_drain_xid
            .is_some_and(|t| t.elapsed() < UNHEALTHY_FOR);
        let rec = &event.record;
        let pod = match (&rec.namespace, &rec.pod) {
            (Some(ns), Some(pod)) => Some(crate::actions::repro::JobPod {
                namespace: ns.clone(),
                pod: pod.clone(),
                container: rec.container.clone(),
            }),
            _ => None,
        };
        Some(Job {
            incident_id: id,
            request: req,
            pod,
        })
    }
}

impl IncidentSink for ReplaySink {
    fn name(&self) -> &'static str {
        "replay"
    }

    async fn handle(&mut self, event: Arc<IncidentEvent>) {
        let Some(job) = self.request(&event).await else {
            return;
        };
        let incident_id = job.incident_id;
        if self.jobs.try_send(job).is_err() {
            self.metrics
                .repro_runs
                .with_label_values(&["none", "skipped"])
                .inc();
            let done = ReplayDone {
                incident_id,
                report: ReproReport::skipped("queue_full"),
            };
            if self.results.send(done).await.is_err() {
                tracing::debug!(incident = incident_id, "Replay result dropped at shutdown.");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::IncidentSource;
    use crate::sinks::Change;

    fn event(kind: Kind, source: IncidentSource) -> Arc<IncidentEvent> {
        let mut record = crate::incidents::store::test_record();
        record.id = 7;
        record.incident.kind = kind;
        record.source = source;
        Arc::new(IncidentEvent {
            change: Change::Opened,
            record,
            gpu: None,
        })
    }

    #[tokio::test]
    async fn requests_replays_of_new_job_failures_from_files_only() {
        let (jtx, mut jrx) = mpsc::channel(4);
        let (rtx, _rrx) = mpsc::channel(4);
        let mut s = ReplaySink::new(jtx, rtx, Metrics::new());
        s.handle(event(
            Kind::DeviceAssert,
            IncidentSource::file("/no/such.log", 0),
        ))
        .await;
        s.handle(event(Kind::Oom, IncidentSource::file("/no/such.log", 0)))
            .await;
        s.handle(event(Kind::DeviceAssert, IncidentSource::kmsg(1)))
            .await;
        let job = jrx.try_recv().unwrap();
        assert_eq!(job.incident_id, 7);
        assert_eq!(job.request.log_path, Some(PathBuf::from("/no/such.log")));
        assert!(jrx.try_recv().is_err());
    }

    #[tokio::test]
    async fn the_records_pod_goes_with_the_request() {
        let (jtx, mut jrx) = mpsc::channel(4);
        let (rtx, _rrx) = mpsc::channel(4);
        let mut s = ReplaySink::new(jtx, rtx, Metrics::new());
        let mut e = event(Kind::DeviceAssert, IncidentSource::file("/no/such.log", 0));
        let r = &mut Arc::get_mut(&mut e).unwrap().record;
        r.namespace = Some("ml".into());
        r.pod = Some("w-3".into());
        r.container = Some("trainer".into());
        s.handle(e).await;
        let job = jrx.try_recv().unwrap();
        assert_eq!(
            job.pod,
            Some(crate::actions::repro::JobPod {
                namespace: "ml".into(),
                pod: "w-3".into(),
                container: Some("trainer".into()),
            })
        );
    }

    #[tokio::test]
    async fn a_full_runner_queue_answers_skipped_at_once() {
        let (jtx, _jrx) = mpsc::channel(1);
        let (rtx, mut rrx) = mpsc::channel(4);
        let m = Metrics::new();
        let mut s = ReplaySink::new(jtx, rtx, m.clone());
        let e = event(Kind::CudaError, IncidentSource::file("/x.log", 0));
        s.handle(e.clone()).await;
        s.handle(e).await;
        let done = rrx.try_recv().unwrap();
        assert_eq!(done.report, ReproReport::skipped("queue_full"));
        assert_eq!(
            m.repro_runs.with_label_values(&["none", "skipped"]).get(),
            1
        );
    }
}
