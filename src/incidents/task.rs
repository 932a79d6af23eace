//! The incident task: the one owner of incident state, and the loop that moves it.
//!
//! Inputs (tail events, kernel-log batches, NVML events, replay results) go through the stages
//! in order: the [`StreamTable`] scans them into the [`Engine`], the engine's updates pass the
//! [`FloodLimits`], the [`Recorder`] stores them, the [`Correlator`] links new ones, and every
//! stored change is published to the [`Sinks`]. The stages are plain values with their own unit
//! tests; this file only sequences them, so it knows no sink, no source format and no SQL.

use crate::incidents::correlate::{blame_with_links, Correlator};
use crate::incidents::limits::{FloodLimits, Verdict};
use crate::incidents::pods::{attribute, gpu_process_pod, PodAttribution};
use crate::incidents::recorder::{Recorder, Written};
use crate::incidents::store::now_ms;
use crate::incidents::streams::StreamTable;
use crate::incidents::{Engine, Update};
use crate::metrics::Metrics;
use crate::model::{Blame, GpuRef, IncidentRecord, Kind, ReplayDone, SlurmRef};
use crate::sinks::{Change, IncidentEvent, Sinks};
use crate::sources::kmsg::reader::{self as kreader, KernelBatch};
use assertwatch_gpu::{GpuEvent, GpuId, GpuSnapshot};
use assertwatch_tail::TailEvent;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

/// How often quiet incidents are closed, retries run and deadlines are checked.
const TICK: Duration = Duration::from_millis(250);

/// What feeds the incident task. A closed channel is a source that ended.
pub struct Inputs {
    pub tail: mpsc::Receiver<TailEvent>,
    pub kernel: mpsc::Receiver<KernelBatch>,
    pub gpu: mpsc::Receiver<GpuEvent>,
    pub replays: Option<mpsc::Receiver<ReplayDone>>,
    /// Fired at shutdown: store and acknowledge what was processed, then stop.
    pub drain: oneshot::Receiver<()>,
}

/// Where the kernel-log position is saved, and how often.
pub struct KernelCheckpointing {
    pub state_dir: PathBuf,
    pub every: Duration,
}

/// The stages and what they share. Built by the daemon's assembly; see the module docs.
pub struct IncidentTask {
    pub engine: Engine,
    pub streams: StreamTable,
    pub limits: FloodLimits,
    pub correlator: Correlator,
    pub recorder: Recorder,
    pub sinks: Sinks,
    pub metrics: Metrics,
    /// This node's name, on every record.
    pub node: String,
    /// The latest GPU snapshot, to name the GPU (index, UUID, NVML bus id) of an incident.
    pub gpus: Option<watch::Receiver<Arc<GpuSnapshot>>>,
    pub kernel_checkpoints: KernelCheckpointing,
    /// Bumped every tick; the systemd watchdog pings only while it moves.
    pub heartbeat: Arc<AtomicU64>,
    /// Where process information is read (`/proc`), for Slurm attribution by pid.
    pub proc_root: PathBuf,
    /// Slurm attribution by pid, cached (a pid is looked up once per burst of incidents).
    pub slurm_by_pid: HashMap<u32, Option<SlurmRef>>,
    /// This node's pod cache (with `kubernetes.enabled`): the pod's uid, image and workload on
    /// each record, and the failing pod captured when its incident opens.
    pub pods: Option<PodAttribution>,
}

/// Pids whose Slurm attribution is cached; the cache is cleared when full.
const MAX_SLURM_PIDS: usize = 1024;

impl IncidentTask {
    /// Runs until every source has ended or `drain` fires; then closes every open incident,
    /// stores it, acknowledges every file and saves the kernel position. Returns the sinks so
    /// the caller can drain them within its shutdown deadline.
    pub async fn run(mut self, mut inputs: Inputs) -> Sinks {
        let started = Instant::now();
        let clock = move || u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX) + 1;
        let mut tick = tokio::time::interval(TICK);
        let mut last_kernel_save = Instant::now();
        let (mut tail_open, mut kernel_open, mut gpu_open) = (true, true, true);
        while tail_open || kernel_open {
            tokio::select! {
                // Drain: persist and acknowledge what was processed, then stop consuming;
                // events still queued are re-read after the restart (never acknowledged).
                _ = &mut inputs.drain => break,
                ev = inputs.tail.recv(), if tail_open => match ev {
                    Some(ev) => self.on_tail(ev, clock()).await,
                    None => tail_open = false,
                },
                b = inputs.kernel.recv(), if kernel_open => match b {
                    Some(b) => {
                        let healthy = self.recorder.healthy();
                        self.streams.on_kernel(b, &mut self.engine, clock(), healthy);
                        self.apply_updates().await;
                    }
                    None => kernel_open = false,
                },
                g = inputs.gpu.recv(), if gpu_open => match g {
                    Some(g) => {
                        self.streams.on_gpu(g, &mut self.engine, clock());
                        self.apply_updates().await;
                    }
                    None => gpu_open = false,
                },
                Some(done) = recv_opt(&mut inputs.replays) => self.on_replay(done).await,
                _ = tick.tick() => {
                    self.heartbeat.fetch_add(1, Ordering::Relaxed);
                    self.engine.tick(clock());
                    let closed = self.apply_updates().await;
                    let retried = self.recorder.retry_pending().await;
                    for w in retried {
                        self.after_write(w).await;
                    }
                    if self.recorder.take_recovered() {
                        self.streams.ack_all(&self.engine);
                        self.streams.release_kernel_position();
                    } else if self.recorder.healthy() {
                        for s in closed {
                            self.streams.ack(s, &self.engine);
                        }
                    }
                    self.recorder.prune_if_due(Instant::now()).await;
                    if last_kernel_save.elapsed() >= self.kernel_checkpoints.every {
                        self.save_kernel_checkpoint().await;
                        last_kernel_save = Instant::now();
                    }
                }
            }
        }
        self.engine.flush_all();
        self.apply_updates().await;
        if self.recorder.healthy() {
            self.streams.ack_all(&self.engine);
        }
        self.save_kernel_checkpoint().await;
        self.sinks
    }

    async fn on_tail(&mut self, ev: TailEvent, at_ms: u64) {
        let closing = matches!(ev, TailEvent::Closed { .. });
        let Some(file) = self.streams.on_tail(ev, &mut self.engine, at_ms) else {
            self.apply_updates().await;
            return;
        };
        self.apply_updates().await;
        if self.recorder.healthy() {
            self.streams.ack(file, &self.engine);
        }
        if closing {
            self.streams.forget_closed(file);
        }
    }

    /// Applies what the engine produced; returns the streams in which an incident closed.
    async fn apply_updates(&mut self) -> Vec<u64> {
        let mut closed = Vec::new();
        for u in self.engine.drain() {
            if u.closed && !closed.contains(&u.stream) {
                closed.push(u.stream);
            }
            self.apply(u).await;
        }
        closed
    }

    /// The GPU a bus id belongs to, from the latest snapshot.
    fn gpu_for_bus(&self, pci: &str) -> Option<GpuId> {
        let snap = self.gpus.as_ref()?.borrow().clone();
        snap.gpus
            .iter()
            .find(|g| crate::detect::xid::same_bus(&g.id.pci_bus_id, pci))
            .map(|g| g.id.clone())
    }

    /// The Slurm job of process `pid` (cgroup, then environment), cached.
    fn slurm_for_pid(&mut self, pid: u32) -> Option<SlurmRef> {
        if let Some(hit) = self.slurm_by_pid.get(&pid) {
            return hit.clone();
        }
        if self.slurm_by_pid.len() >= MAX_SLURM_PIDS {
            self.slurm_by_pid.clear();
        }
        let r = crate::sources::slurm::attribute_pid(&self.proc_root, pid);
        self.slurm_by_pid.insert(pid, r.clone());
        r
    }

    /// The Slurm job an incident hit: its log file's job, else its pid's, else (an Xid without a
    /// pid) the job of a process NVML lists on its GPU.
    fn slurm_for(
        &mut self,
        from_log: Option<SlurmRef>,
        pid: Option<u32>,
        pci: Option<&str>,
    ) -> SlurmRef {
        if let Some(s) = from_log {
            return s;
        }
        if let Some(s) = pid.and_then(|p| self.slurm_for_pid(p)) {
            return s;
        }
        let pids: Vec<u32> = match (pci, self.gpus.as_ref()) {
            (Some(pci), Some(rx)) => rx
                .borrow()
                .gpus
                .iter()
                .filter(|g| crate::detect::xid::same_bus(&g.id.pci_bus_id, pci))
                .flat_map(|g| g.processes.iter().map(|p| p.pid))
                .collect(),
            _ => Vec::new(),
        };
        pids.into_iter()
            .find_map(|p| self.slurm_for_pid(p))
            .unwrap_or_default()
    }

    async fn apply(&mut self, u: Update) {
        let Some(info) = self.streams.info(u.stream).cloned() else {
            return;
        };
        match self
            .limits
            .check(&info.source_name, u.key, u.first, u.closed, now_ms())
        {
            Verdict::Admit => {}
            Verdict::SuppressNew => {
                self.metrics
                    .suppressed
                    .with_label_values(&["rate_limit"])
                    .inc();
                return;
            }
            Verdict::SuppressUpdate => return,
        }
        if u.first {
            if let Some(t) = self.streams.arrived(u.stream) {
                self.metrics
                    .detection_latency
                    .observe(t.elapsed().as_secs_f64());
            }
        }
        let inc = u.incident;
        let first_pos = inc.first_offset.unwrap_or(0);
        // The dedup key is fixed when the incident is first seen and anchored on the line that
        // opened it, so later updates and re-reads after a restart hit the same row.
        let dedup = match self.recorder.dedup_of(u.key) {
            Some(d) => d.to_owned(),
            None => {
                let (off, crc) = inc.anchor.unwrap_or((first_pos, 0));
                format!("{}:{off}:{crc:08x}", info.dedup_prefix)
            }
        };
        let from_nvml = inc.excerpt.first().is_some_and(|l| l.starts_with("NVML: "));
        let source = self.streams.source_of(u.stream, first_pos, from_nvml);
        let gpu = (inc.pci.is_some() || inc.gpu_uuid.is_some()).then(|| {
            let g = inc.pci.as_deref().and_then(|p| self.gpu_for_bus(p));
            GpuRef {
                index: g.as_ref().map(|g| g.index),
                uuid: inc.gpu_uuid.clone().or_else(|| g.map(|g| g.uuid)),
                pci_bus_id: inc.pci.clone(),
            }
        });
        let id = self.recorder.id_of(u.key);
        let related = id.map(|id| self.correlator.related(id)).unwrap_or_default();
        let gpu_pod = match (&info.pod, &self.pods, &self.gpus) {
            (None, Some(_), Some(rx)) => gpu_process_pod(&rx.borrow(), inc.pid),
            _ => None,
        };
        let pod = info.pod.as_ref().or(gpu_pod.as_ref());
        let (kube, cached) = attribute(self.pods.as_ref(), pod);
        let slurm = self.slurm_for(info.slurm.clone(), inc.pid, inc.pci.as_deref());
        let training_job = crate::incidents::correlate::training_job(
            slurm.slurm_job_id.as_deref(),
            pod.map(|p| p.namespace.as_str()),
            pod.map(|p| p.pod.as_str()),
            kube.workload_kind
                .as_deref()
                .zip(kube.workload_name.as_deref()),
            source.path(),
        );
        let caused_by = id.and_then(|id| self.correlator.caused_by(id));
        let mut rec = IncidentRecord {
            training_job,
            caused_by,
            slurm,
            id: 0,
            time: String::new(),
            node: self.node.clone(),
            source,
            source_name: info.source_name.clone(),
            namespace: pod.map(|p| p.namespace.clone()),
            pod: pod.map(|p| p.pod.clone()),
            container: pod
                .map(|p| p.container.clone())
                .filter(|c| !c.is_empty() || info.pod.is_some()),
            kube,
            gpu,
            repro: id.and_then(|id| self.recorder.replay_of(id).cloned()),
            open: !u.closed,
            incident: inc,
            related,
        };
        rec.incident.blame = blame_with_links(&rec.incident, !rec.related.is_empty());
        let change = if u.first {
            Change::Opened
        } else if u.closed {
            Change::Closed
        } else {
            Change::Updated
        };
        for w in self.recorder.record(u.key, dedup, change, rec).await {
            // The failing pod, kept for the replay: it is often deleted seconds later.
            if let (Change::Opened, Some(attr), Some(c)) = (w.change, &self.pods, &cached) {
                attr.captured.insert(w.record.id, c.clone());
            }
            self.after_write(w).await;
        }
    }

    /// Links a newly stored incident with its partners, then hands the change to the sinks.
    async fn after_write(&mut self, w: Written) {
        let mut rec = w.record;
        if w.change == Change::Opened {
            let cascade = self.correlator.cascade(
                rec.id,
                &rec.incident,
                rec.training_job.as_deref(),
                now_ms(),
            );
            if let Some((root, blame)) = cascade {
                // A follow-on failure of the same job: blamed on what caused it, linked to it,
                // and not alerted on its own (the root cause's alert covers the job).
                rec.caused_by = Some(root);
                rec.incident.blame = blame;
                self.recorder.replace(&rec).await;
            }
            let links = self.correlator.link(rec.id, &rec.incident, now_ms());
            if !links.is_empty() {
                for other in &links {
                    if let Some(mut o) = self.recorder.get(*other).await {
                        o.related.push(rec.id);
                        if o.incident.kind == Kind::Xid {
                            o.incident.blame = Blame::Application;
                        }
                        self.recorder.replace(&o).await;
                    }
                }
                rec.related = links;
                rec.incident.blame = blame_with_links(&rec.incident, true);
                self.recorder.replace(&rec).await;
            }
        }
        self.publish(w.change, rec);
    }

    fn publish(&mut self, change: Change, record: IncidentRecord) {
        let gpu = record
            .incident
            .pci
            .as_deref()
            .and_then(|p| self.gpu_for_bus(p));
        self.sinks.publish(IncidentEvent {
            change,
            record,
            gpu,
        });
    }

    /// Attaches a finished replay to its incident (store, API, page, sinks).
    async fn on_replay(&mut self, done: ReplayDone) {
        let Some(mut rec) = self.recorder.get(done.incident_id).await else {
            return;
        };
        if let Some(f) = &done.report.python_frame {
            // The replay's line is the real one; the traceback's was asynchronous.
            rec.incident.hint = format!(
                "{} Replay located the failing line: {f}.",
                rec.incident.hint
            );
        }
        rec.repro = Some(done.report.clone());
        self.recorder.remember_replay(done.incident_id, done.report);
        if self.recorder.replace(&rec).await {
            self.publish(Change::Replayed, rec);
        }
    }

    /// Saves the kernel-log position (floored at open incidents) off the async workers.
    async fn save_kernel_checkpoint(&self) {
        let Some(ck) = self.streams.kernel_checkpoint_to_save(&self.engine) else {
            return;
        };
        let path = kreader::checkpoint_path(&self.kernel_checkpoints.state_dir);
        let errors = self.metrics.checkpoint_errors.clone();
        let wrote = tokio::task::spawn_blocking(move || {
            let bytes = serde_json::to_vec(&ck).map_err(std::io::Error::other)?;
            crate::fsutil::atomic_write(&path, &bytes)
        })
        .await;
        match wrote {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                errors.inc();
                tracing::debug!(error = %e, "Kernel log checkpoint write failed.");
            }
            Err(e) => tracing::debug!(error = %e, "Kernel log checkpoint task failed."),
        }
    }
}

async fn recv_opt<T>(rx: &mut Option<mpsc::Receiver<T>>) -> Option<T> {
    match rx.as_mut() {
        Some(r) => r.recv().await,
        None => std::future::pending().await,
    }
}
