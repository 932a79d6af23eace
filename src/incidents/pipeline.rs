//! The pipeline task: the single owner of detection state, incident state and acknowledgements.
//!
//! Tail events and kernel batches come in; per-stream scanners turn bytes into findings; the
//! engine groups them; every update is written to the store *before* the source position is
//! acknowledged, so a checkpoint never points past data whose incidents are not persisted. The
//! acknowledged position also never passes the first line of an incident still open, so a restart
//! rebuilds that incident from its first line and updates the same row (same dedup key).

use crate::config::Config;
use crate::detect::{xid_catalog, DetectorSet};
use crate::incidents::store::{now_ms, GpuRef, IncidentRecord, Store};
use crate::incidents::{Engine, Update};
use crate::metrics::Metrics;
use crate::model::{Blame, Finding, Kind};
use crate::sources::decode::Format;
use crate::sources::k8s::{parse_pod_log_path, PodRef};
use crate::sources::kmsg::reader::KernelBatch;
use crate::sources::reader::Chunk;
use crate::sources::stream::StreamScanner;
use assertwatch_tail::{AckHandle, TailEvent};
use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Stream id of the kernel log in the engine (file streams use their tail file ids).
pub const KERNEL_STREAM: u64 = u64::MAX - 1;

struct StreamCtx {
    source_name: String,
    path: PathBuf,
    pod: Option<PodRef>,
    scanner: StreamScanner,
    dedup_prefix: String,
}

struct Recent {
    id: i64,
    kind: Kind,
    xid: Option<u32>,
    pid: Option<u32>,
    at_ms: i64,
    key: Option<u64>,
}

pub struct Pipeline {
    det: Arc<DetectorSet>,
    engine: Engine,
    store: Arc<Store>,
    metrics: Metrics,
    acks: Option<AckHandle>,
    node: String,
    formats: Vec<Format>,
    source_names: Vec<String>,
    max_line: usize,
    streams: HashMap<u64, StreamCtx>,
    ids: HashMap<u64, (i64, String)>,
    rate: HashMap<String, (i64, u32)>,
    suppressed_keys: std::collections::HashSet<u64>,
    recent: VecDeque<Recent>,
    related: HashMap<i64, Vec<i64>>,
    max_per_minute: u32,
    /// Per-source overrides of `max_per_minute`, by source name.
    source_limits: HashMap<String, u32>,
    correlation_ms: i64,
    started: Instant,
    /// Chunk arrival times by stream, for detection latency of the next incident there.
    arrived: HashMap<u64, Instant>,
    pub kernel_checkpoint: Option<crate::sources::kmsg::reader::KernelCheckpoint>,
    /// The newest kernel position, held back while the store fails.
    kernel_pending: Option<crate::sources::kmsg::reader::KernelCheckpoint>,
    pub store_failures: u64,
    /// Per file: end offset and line count of everything scanned so far.
    progress: HashMap<u64, (u64, u64)>,
    /// Writes that failed (e.g. disk full), retried on every tick; bounded by `MAX_RETRY`.
    retry: VecDeque<(String, IncidentRecord)>,
    /// Latest GPU snapshot, to name the GPU (index, UUID, NVML bus id) of kernel-log Xids.
    gpus: Option<watch::Receiver<Arc<assertwatch_gpu::GpuSnapshot>>>,
    /// Last line number seen on the kernel stream (NVML events are placed after it).
    last_kernel_line: u64,
    /// Xid incidents blamed on hardware or driver whose GPU should be probed (index).
    pub probe_requests: Vec<u32>,
    alerts: Option<AlertSink>,
    /// Where replay requests go (bounded; full → the incident gets `skipped`/`queue_full`).
    repro: Option<tokio::sync::mpsc::Sender<crate::actions::repro::Job>>,
    /// Dedup keys of incidents waiting for a replay result (bounded by the replay queue and limits).
    awaiting_repro: HashMap<i64, String>,
    /// When a Xid that calls for draining the GPU was last seen (replays then skip GPU modes).
    last_drain_xid: Option<Instant>,
    /// Finished replay results by incident id, so later updates of the incident keep them.
    repro_done: HashMap<i64, serde_json::Value>,
}

/// The Alertmanager push handle and what the alerts need.
pub struct AlertSink {
    pub handle: assertwatch_alertmanager::NotifierHandle,
    pub runbook_base: String,
    pub api_base: String,
    /// An alert resolves this long after its last incident activity.
    pub hold: Duration,
    deadlines: HashMap<String, Instant>,
}

impl AlertSink {
    pub fn new(
        handle: assertwatch_alertmanager::NotifierHandle,
        runbook_base: String,
        api_base: String,
        hold: Duration,
    ) -> Self {
        AlertSink {
            handle,
            runbook_base,
            api_base,
            hold,
            deadlines: HashMap::new(),
        }
    }
}

/// Incident writes kept for retry while the store fails; beyond this the oldest is dropped and
/// counted (`assertwatch_store_errors_total{op="dropped"}`).
const MAX_RETRY: usize = 10_000;

impl Pipeline {
    pub fn new(
        cfg: &Config,
        det: Arc<DetectorSet>,
        store: Arc<Store>,
        metrics: Metrics,
        acks: Option<AckHandle>,
    ) -> Pipeline {
        Pipeline {
            det,
            engine: Engine::new(cfg.engine.clone()),
            store,
            metrics,
            acks,
            node: cfg.node_name.clone(),
            formats: cfg.logs.iter().map(|l| l.format).collect(),
            source_names: cfg.logs.iter().map(|l| l.name.clone()).collect(),
            max_line: cfg.max_line_bytes,
            streams: HashMap::new(),
            ids: HashMap::new(),
            rate: HashMap::new(),
            suppressed_keys: Default::default(),
            recent: VecDeque::new(),
            related: HashMap::new(),
            max_per_minute: cfg.retention.max_per_minute,
            source_limits: cfg
                .logs
                .iter()
                .filter_map(|l| l.max_incidents_per_minute.map(|m| (l.name.clone(), m)))
                .collect(),
            correlation_ms: i64::try_from(cfg.retention.correlation_window.as_millis())
                .unwrap_or(120_000),
            started: Instant::now(),
            arrived: HashMap::new(),
            kernel_checkpoint: None,
            kernel_pending: None,
            store_failures: 0,
            progress: HashMap::new(),
            retry: VecDeque::new(),
            gpus: None,
            last_kernel_line: 0,
            probe_requests: Vec::new(),
            alerts: None,
            repro: None,
            awaiting_repro: HashMap::new(),
            last_drain_xid: None,
            repro_done: HashMap::new(),
        }
    }

    fn clock_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64 + 1
    }

    /// Gives the pipeline the GPU snapshot channel (for naming the GPU of kernel-log Xids).
    pub fn with_gpus(mut self, rx: watch::Receiver<Arc<assertwatch_gpu::GpuSnapshot>>) -> Self {
        self.gpus = Some(rx);
        self
    }

    /// Requests replays of job failures through `tx`.
    pub fn with_repro(mut self, tx: tokio::sync::mpsc::Sender<crate::actions::repro::Job>) -> Self {
        self.repro = Some(tx);
        self
    }

    fn request_repro(&mut self, id: i64, dedup: &str, rec: &IncidentRecord) {
        use crate::actions::repro::Job;
        let Some(tx) = &self.repro else { return };
        if !matches!(rec.incident.kind, Kind::DeviceAssert | Kind::CudaError)
            || rec.source.get("path").is_none()
        {
            return;
        }
        let mut req =
            assertwatch_repro::ReproRequest::new(id.to_string(), std::time::SystemTime::now());
        req.log_path = rec
            .source
            .get("path")
            .and_then(|p| p.as_str())
            .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| PathBuf::from(p)));
        req.pid = rec.incident.pid;
        req.category = rec.incident.category.clone();
        req.gpu_unhealthy = self
            .last_drain_xid
            .is_some_and(|t| t.elapsed() < Duration::from_secs(3600));
        match tx.try_send(Job {
            incident_id: id,
            request: req,
        }) {
            Ok(()) => {
                self.awaiting_repro.insert(id, dedup.to_owned());
            }
            Err(_) => {
                self.metrics
                    .repro_runs
                    .with_label_values(&["none", "skipped"])
                    .inc();
                let mut r = rec.clone();
                r.repro = Some(serde_json::json!({ "outcome": "skipped", "reason": "queue_full" }));
                let _ = self.store.put(dedup, now_ms(), &r);
            }
        }
    }

    /// Attaches a finished replay to its incident (store, API, page, alert annotation).
    pub fn on_repro(&mut self, done: crate::actions::repro::Done) {
        let Some(dedup) = self.awaiting_repro.remove(&done.incident_id) else {
            return;
        };
        let Ok(Some(mut rec)) = self.store.get(done.incident_id) else {
            return;
        };
        rec.repro = serde_json::to_value(&done.result).ok();
        if let Some(v) = &rec.repro {
            if self.repro_done.len() >= 1024 {
                self.repro_done.clear();
            }
            self.repro_done.insert(done.incident_id, v.clone());
        }
        if let Some(f) = &done.result.python_frame {
            // The replay's line is the real one; the traceback's was asynchronous.
            rec.incident.hint = format!(
                "{} Replay located the failing line: {f}.",
                rec.incident.hint
            );
        }
        match self.store.put(&dedup, now_ms(), &rec) {
            Ok(_) => self.alert(&rec),
            Err(e) => {
                self.metrics.store_errors.with_label_values(&["put"]).inc();
                tracing::warn!(error = %format!("{e:#}"), "Could not store a reproduction result.");
            }
        }
    }

    /// Sends every incident to Alertmanager through `sink`.
    pub fn with_alerts(mut self, sink: AlertSink) -> Self {
        self.alerts = Some(sink);
        self
    }

    fn alert(&mut self, rec: &IncidentRecord) {
        let Some(a) = self.alerts.as_mut() else {
            return;
        };
        let (key, alert) = crate::sinks::alertmanager::alert_for(rec, &a.runbook_base, &a.api_base);
        a.deadlines.insert(key.clone(), Instant::now() + a.hold);
        a.handle.fire(key, alert);
    }

    fn resolve_quiet_alerts(&mut self) {
        let Some(a) = self.alerts.as_mut() else {
            return;
        };
        let now = Instant::now();
        let due: Vec<String> = a
            .deadlines
            .iter()
            .filter(|(_, d)| **d <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for k in due {
            a.deadlines.remove(&k);
            a.handle.resolve(&k);
        }
    }

    /// The GPU a bus id belongs to, from the latest snapshot.
    fn gpu_for_bus(&self, pci: &str) -> Option<assertwatch_gpu::GpuId> {
        let snap = self.gpus.as_ref()?.borrow().clone();
        snap.gpus
            .iter()
            .find(|g| crate::detect::xid::same_bus(&g.id.pci_bus_id, pci))
            .map(|g| g.id.clone())
    }

    /// The kernel stream's context. Its dedup prefix names the kernel log's own stream (boot id or
    /// file) as soon as one is known, whatever arrived first, so kmsg dedup keys are stable across
    /// restarts; NVML-opened incidents are anchored on the event's time and text.
    fn kernel_ctx(&mut self, key: &str) {
        let ctx = self
            .streams
            .entry(KERNEL_STREAM)
            .or_insert_with(|| StreamCtx {
                source_name: "kernel".into(),
                path: PathBuf::from("kernel"),
                pod: None,
                scanner: StreamScanner::new(Format::Plain, 1 << 16, 1),
                dedup_prefix: format!("k:{key}"),
            });
        if key != "nvml" {
            ctx.dedup_prefix = format!("k:{key}");
        }
    }

    /// Handles an NVML event. Xids join the kernel-log stream of the engine under the kernel's
    /// bus-id form, so the same Xid seen by NVML and in the kernel log is one incident.
    pub fn on_gpu(&mut self, ev: assertwatch_gpu::GpuEvent) {
        use crate::model::Evidence;
        let at = self.clock_ms();
        self.kernel_ctx("nvml");
        let line = self.last_kernel_line;
        let (gpu, when, evidence, text) = match ev {
            assertwatch_gpu::GpuEvent::Xid {
                gpu,
                xid,
                pid,
                at: when,
            } => {
                let text = format!(
                    "NVML: Xid {xid} on GPU {} ({}, {})",
                    gpu.index, gpu.pci_bus_id, gpu.uuid
                );
                let ev = Evidence::Xid {
                    xid,
                    pci: Some(crate::detect::xid::normalize_bus(&gpu.pci_bus_id)),
                    pid,
                    process: None,
                    detail: "reported by NVML".into(),
                };
                (gpu, when, ev, text)
            }
            assertwatch_gpu::GpuEvent::Lost { gpu, at: when } => {
                let text = format!(
                    "NVML: GPU {} ({}, {}) is lost (GPU_IS_LOST)",
                    gpu.index, gpu.pci_bus_id, gpu.uuid
                );
                let ev = Evidence::FallenOffBus {
                    pci: Some(crate::detect::xid::normalize_bus(&gpu.pci_bus_id)),
                };
                (gpu, when, ev, text)
            }
        };
        let when_ms = when
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let ident = Evidence::GpuIdentity {
            pci: crate::detect::xid::normalize_bus(&gpu.pci_bus_id),
            uuid: gpu.uuid.clone(),
        };
        self.engine.observe(
            KERNEL_STREAM,
            Finding {
                line,
                seq: line,
                offset: None,
                at_ms: at,
                text: String::new(),
                evidence: ident,
            },
        );
        self.arrived.insert(KERNEL_STREAM, Instant::now());
        self.observe_all(
            KERNEL_STREAM,
            vec![Finding {
                line,
                seq: line,
                offset: Some(when_ms),
                at_ms: at,
                text,
                evidence,
            }],
        );
        self.flush_updates();
    }

    /// Handles one tail event.
    pub fn on_tail(&mut self, ev: TailEvent) {
        match ev {
            TailEvent::Opened {
                file,
                source,
                path,
                offset: _,
                lines,
            } => {
                let name = self.source_names.get(source).cloned().unwrap_or_default();
                let fmt = self.formats.get(source).copied().unwrap_or(Format::Auto);
                let pod = parse_pod_log_path(&path);
                // A new file at the path of a file still being drained: a rename rotation.
                if self
                    .streams
                    .values()
                    .any(|c| c.path == path && c.source_name == name)
                {
                    self.metrics
                        .log_rotations
                        .with_label_values(&[&name, "rename"])
                        .inc();
                }
                self.metrics.files_watched.with_label_values(&[&name]).inc();
                self.streams.insert(
                    file,
                    StreamCtx {
                        source_name: name,
                        path,
                        pod,
                        scanner: StreamScanner::new(fmt, self.max_line, lines + 1),
                        dedup_prefix: format!("f:{file:x}"),
                    },
                );
            }
            TailEvent::Data {
                file,
                offset,
                end,
                data,
                truncated_head,
                mtime,
            } => {
                let now = Instant::now();
                let at = self.clock_ms();
                let Some(ctx) = self.streams.get_mut(&file) else {
                    return;
                };
                if let Some(m) = mtime {
                    if let Ok(lag) = std::time::SystemTime::now().duration_since(m) {
                        self.metrics
                            .log_read_lag
                            .with_label_values(&[&ctx.source_name])
                            .observe(lag.as_secs_f64());
                    }
                }
                let before = ctx.scanner.stats();
                let chunk = Chunk {
                    data: &data,
                    offset,
                    truncated: truncated_head,
                    unterminated: false,
                };
                let mut findings = Vec::new();
                ctx.scanner.feed(&chunk, &self.det, at, &mut findings);
                let after = ctx.scanner.stats();
                let name = ctx.source_name.clone();
                self.metrics
                    .log_bytes
                    .with_label_values(&[&name])
                    .inc_by(after.bytes - before.bytes);
                self.metrics
                    .log_lines
                    .with_label_values(&[&name])
                    .inc_by(after.lines.saturating_sub(before.lines));
                if after.truncated_lines > before.truncated_lines {
                    self.metrics
                        .log_truncated
                        .with_label_values(&[&name])
                        .inc_by(after.truncated_lines - before.truncated_lines);
                }
                let lines = after.lines;
                self.arrived.insert(file, now);
                self.progress.insert(file, (end, lines));
                self.observe_all(file, findings);
                self.flush_updates();
                self.ack(file);
            }
            TailEvent::Reset { file, kind } => {
                self.engine.flush_stream(file);
                self.flush_updates();
                self.progress.insert(file, (0, 0));
                if let Some(ctx) = self.streams.get_mut(&file) {
                    let fmt = ctx.scanner.format();
                    ctx.scanner = StreamScanner::new(fmt, self.max_line, 1);
                    let k = format!("{kind:?}").to_ascii_lowercase();
                    let k = if k.contains("trunc") {
                        "truncate"
                    } else {
                        "recreate"
                    };
                    self.metrics
                        .log_rotations
                        .with_label_values(&[&ctx.source_name, k])
                        .inc();
                }
            }
            TailEvent::Renamed { file, new_path } => {
                if let Some(ctx) = self.streams.get_mut(&file) {
                    // A rotated name that still matches a glob arrives here first; one that does
                    // not is counted when the new file opens at the old path (see `Opened`).
                    self.metrics
                        .log_rotations
                        .with_label_values(&[&ctx.source_name, "rename"])
                        .inc();
                    ctx.path = new_path;
                }
            }
            TailEvent::Closed { file } => {
                let mut out = Vec::new();
                if let Some(ctx) = self.streams.get_mut(&file) {
                    ctx.scanner.finish(&self.det, 0, &mut out);
                }
                self.observe_all(file, out);
                self.engine.flush_stream(file);
                self.flush_updates();
                self.ack(file);
                if let Some(ctx) = self.streams.remove(&file) {
                    self.metrics
                        .files_watched
                        .with_label_values(&[&ctx.source_name])
                        .dec();
                }
                self.arrived.remove(&file);
                self.progress.remove(&file);
            }
            TailEvent::Error {
                source,
                path,
                error,
            } => {
                let name = self.source_names.get(source).cloned().unwrap_or_default();
                self.metrics
                    .log_read_errors
                    .with_label_values(&[&name])
                    .inc();
                tracing::debug!(source = %name, path = %path.display(), %error, "Log read error.");
            }
        }
    }

    /// Handles one batch of kernel-log lines.
    pub fn on_kernel(&mut self, b: KernelBatch) {
        let at = self.clock_ms();
        self.metrics.kmsg_records.inc_by(b.records);
        self.metrics.kmsg_lost.inc_by(b.lost);
        self.kernel_ctx(&b.stream_key);
        if let Some(l) = b.lines.last() {
            self.last_kernel_line = l.line;
        }
        self.arrived.insert(KERNEL_STREAM, b.read_at);
        let mut findings = Vec::new();
        if let Some(ctx) = self.streams.get_mut(&KERNEL_STREAM) {
            for l in &b.lines {
                ctx.scanner
                    .feed_line(&l.text, l.line, l.pos, &self.det, at, &mut findings);
            }
        }
        self.observe_all(KERNEL_STREAM, findings);
        self.flush_updates();
        self.kernel_pending = Some(b.checkpoint);
        if self.store_failures == 0 {
            self.kernel_checkpoint = self.kernel_pending.clone();
        }
    }

    /// Acknowledges `file` up to what was scanned, but never past the first line of an incident
    /// still open there (nor while the store is failing).
    fn ack(&self, file: u64) {
        if self.store_failures > 0 {
            return;
        }
        let Some(&(end, lines)) = self.progress.get(&file) else {
            return;
        };
        let (off, l) = match self.engine.open_floor(file) {
            Some((off, line)) if off < end => (off, line.saturating_sub(1)),
            _ => (end, lines),
        };
        if let Some(a) = &self.acks {
            a.ack(file, off, l);
        }
    }

    /// The kernel checkpoint to persist: the last batch's position, floored at the first line of
    /// a still-open kernel incident.
    pub fn kernel_checkpoint_to_save(
        &self,
    ) -> Option<crate::sources::kmsg::reader::KernelCheckpoint> {
        use crate::sources::kmsg::reader::KernelCheckpoint;
        let ck = self.kernel_checkpoint.clone()?;
        let Some((floor, line)) = self.engine.open_floor(KERNEL_STREAM) else {
            return Some(ck);
        };
        let KernelCheckpoint::V1 {
            boot_id,
            path,
            seq,
            offset,
            lines,
        } = ck;
        Some(match offset {
            // Device: positions are sequence numbers; resume after the one before the floor.
            None => KernelCheckpoint::V1 {
                boot_id,
                path,
                seq: seq.map(|s| s.min(floor.saturating_sub(1))),
                offset,
                lines,
            },
            // File: positions are byte offsets.
            Some(o) if floor < o => KernelCheckpoint::V1 {
                boot_id,
                path,
                seq: None,
                offset: Some(floor),
                lines: Some(line.saturating_sub(1)),
            },
            Some(_) => KernelCheckpoint::V1 {
                boot_id,
                path,
                seq,
                offset,
                lines,
            },
        })
    }

    fn observe_all(&mut self, stream: u64, findings: Vec<Finding>) {
        for f in findings {
            let label = match &f.evidence {
                crate::model::Evidence::KernelAssert { .. } => "kernel_assert",
                crate::model::Evidence::Headline { .. } => "headline",
                crate::model::Evidence::Xid { .. } => "xid",
                crate::model::Evidence::Frame { .. } | crate::model::Evidence::TracebackStart => {
                    "traceback"
                }
                _ => "context",
            };
            self.metrics.findings.with_label_values(&[label]).inc();
            self.engine.observe(stream, f);
        }
    }

    /// Closes quiet incidents; call periodically.
    /// Retries writes that failed; once all are in, acknowledgements resume for every file (not
    /// only the next one to get data: an idle file would otherwise keep a stale checkpoint) and the
    /// kernel checkpoint held back meanwhile is released.
    fn retry_writes(&mut self) {
        while let Some((dedup, rec)) = self.retry.front() {
            match self.store.put(dedup, now_ms(), rec) {
                Ok(_) => {
                    self.retry.pop_front();
                }
                Err(_) => {
                    self.metrics.store_errors.with_label_values(&["put"]).inc();
                    return;
                }
            }
        }
        if self.store_failures > 0 {
            tracing::info!(
                failures = self.store_failures,
                "The incident store accepts writes again; retried writes are in."
            );
            self.store_failures = 0;
            let files: Vec<u64> = self.progress.keys().copied().collect();
            for f in files {
                self.ack(f);
            }
            if self.kernel_pending.is_some() {
                self.kernel_checkpoint = self.kernel_pending.clone();
            }
        }
    }

    pub fn tick(&mut self) {
        self.resolve_quiet_alerts();
        if !self.retry.is_empty() {
            self.retry_writes();
        }
        let now = self.clock_ms();
        self.engine.tick(now);
        let closed = self.flush_updates();
        for s in closed {
            self.ack(s);
        }
    }

    /// Closes everything (shutdown), persists it and acknowledges every file to its end.
    pub fn finish(&mut self) {
        self.engine.flush_all();
        self.flush_updates();
        let files: Vec<u64> = self.progress.keys().copied().collect();
        for f in files {
            self.ack(f);
        }
    }

    /// Applies pending updates; returns the streams in which an incident closed.
    fn flush_updates(&mut self) -> Vec<u64> {
        let mut closed = Vec::new();
        for u in self.engine.drain() {
            if u.closed && !closed.contains(&u.stream) {
                closed.push(u.stream);
            }
            self.apply(u);
        }
        closed
    }

    fn apply(&mut self, u: Update) {
        let inc = &u.incident;
        let Some(ctx) = self.streams.get(&u.stream) else {
            return;
        };
        let source_name = ctx.source_name.clone();
        if u.first {
            // Flood bound: at most `max_per_minute` incidents per source and minute.
            let now = now_ms();
            let e = self.rate.entry(source_name.clone()).or_insert((now, 0));
            if now - e.0 > 60_000 {
                *e = (now, 0);
            }
            e.1 += 1;
            let limit = self
                .source_limits
                .get(&source_name)
                .copied()
                .unwrap_or(self.max_per_minute);
            if e.1 > limit {
                self.metrics
                    .suppressed
                    .with_label_values(&["rate_limit"])
                    .inc();
                self.suppressed_keys.insert(u.key);
                return;
            }
            if self.metrics.admit(
                "assertwatch_incidents_total",
                &[inc.kind.as_str(), &inc.category, inc.blame.as_str()],
            ) {
                self.metrics
                    .incidents
                    .with_label_values(&[inc.kind.as_str(), &inc.category, inc.blame.as_str()])
                    .inc();
            }
            if let Some(t) = self.arrived.get(&u.stream) {
                self.metrics
                    .detection_latency
                    .observe(t.elapsed().as_secs_f64());
            }
            if let Some(x) = inc.xid {
                // One count per Xid incident: a burst of one Xid on one GPU within `xid_window`,
                // and the same event seen by NVML and the kernel log, count once.
                let gpu = inc.pci.as_deref().and_then(|p| self.gpu_for_bus(p));
                let (index, uuid, pci) = match &gpu {
                    Some(g) => (g.index.to_string(), g.uuid.clone(), g.pci_bus_id.clone()),
                    None => (
                        String::new(),
                        inc.gpu_uuid.clone().unwrap_or_default(),
                        inc.pci.clone().unwrap_or_default(),
                    ),
                };
                let xs = x.to_string();
                if self
                    .metrics
                    .admit("assertwatch_xid_errors_total", &[&index, &uuid, &pci, &xs])
                {
                    self.metrics
                        .xid_errors
                        .with_label_values(&[&index, &uuid, &pci, &xs])
                        .inc();
                }
                if self
                    .metrics
                    .admit("assertwatch_gpu_last_xid", &[&index, &uuid, &pci])
                {
                    self.metrics
                        .last_xid
                        .with_label_values(&[&index, &uuid, &pci])
                        .set(i64::from(x));
                }
                if xid_catalog::needs_drain(x) {
                    self.last_drain_xid = Some(Instant::now());
                }
                if matches!(xid_catalog::blame(x), Blame::Hardware | Blame::Driver) {
                    if let Some(g) = &gpu {
                        self.probe_requests.push(g.index);
                    }
                }
            }
        } else if self.suppressed_keys.contains(&u.key) {
            if u.closed {
                self.suppressed_keys.remove(&u.key);
            }
            return;
        }
        let first_pos = inc.first_offset.unwrap_or(0);
        // The dedup key is fixed when the incident is first seen and anchored on the line that
        // opened it, so later updates and re-reads after a restart hit the same row.
        let dedup = match self.ids.get(&u.key) {
            Some((_, d)) => d.clone(),
            None => {
                let (off, crc) = inc.anchor.unwrap_or((first_pos, 0));
                format!("{}:{off}:{crc:08x}", ctx.dedup_prefix)
            }
        };
        let from_nvml = inc.excerpt.first().is_some_and(|l| l.starts_with("NVML: "));
        let source = if u.stream == KERNEL_STREAM && from_nvml {
            serde_json::json!({ "kind": "nvml" })
        } else if u.stream == KERNEL_STREAM {
            serde_json::json!({ "kind": "kmsg", "seq": first_pos })
        } else {
            serde_json::json!({ "path": ctx.path.display().to_string(), "offset": first_pos })
        };
        let id_known = self.ids.get(&u.key).map(|(id, _)| *id);
        let related = id_known
            .and_then(|id| self.related.get(&id).cloned())
            .unwrap_or_default();
        let mut rec = IncidentRecord {
            id: 0,
            time: String::new(),
            node: self.node.clone(),
            source,
            source_name,
            namespace: ctx.pod.as_ref().map(|p| p.namespace.clone()),
            pod: ctx.pod.as_ref().map(|p| p.pod.clone()),
            container: ctx.pod.as_ref().map(|p| p.container.clone()),
            gpu: (inc.pci.is_some() || inc.gpu_uuid.is_some()).then(|| {
                let g = inc.pci.as_deref().and_then(|p| self.gpu_for_bus(p));
                GpuRef {
                    index: g.as_ref().map(|g| g.index),
                    uuid: inc
                        .gpu_uuid
                        .clone()
                        .or_else(|| g.as_ref().map(|g| g.uuid.clone())),
                    pci_bus_id: inc.pci.clone(),
                }
            }),
            related,
            repro: None,
            open: !u.closed,
            incident: inc.clone(),
        };
        if !rec.related.is_empty()
            && rec.incident.kind == Kind::Xid
            && xid_catalog::blame(rec.incident.xid.unwrap_or(0)) != Blame::Hardware
        {
            rec.incident.blame = Blame::Application;
        }
        if let Some(v) = id_known.and_then(|id| self.repro_done.get(&id)) {
            rec.repro = Some(v.clone());
        }
        if !self.retry.is_empty() {
            self.retry_writes();
        }
        match self.store.put(&dedup, now_ms(), &rec) {
            Ok((id, created)) if self.retry.is_empty() => {
                self.store_failures = 0;
                let mut shown = rec.clone();
                shown.id = id;
                shown.time = crate::incidents::store::rfc3339_ms(created);
                self.alert(&shown);
                if u.first {
                    self.request_repro(id, &dedup, &shown);
                }
                if u.first {
                    self.correlate(id, &rec, u.key);
                }
                if u.closed {
                    self.ids.remove(&u.key);
                } else {
                    self.ids.insert(u.key, (id, dedup));
                }
            }
            Ok((id, _)) => {
                if u.closed {
                    self.ids.remove(&u.key);
                } else {
                    self.ids.insert(u.key, (id, dedup));
                }
            }
            Err(e) => {
                self.store_failures += 1;
                self.metrics.store_errors.with_label_values(&["put"]).inc();
                if !u.closed {
                    self.ids.insert(u.key, (-1, dedup.clone()));
                } else {
                    self.ids.remove(&u.key);
                }
                self.retry.retain(|(d, _)| *d != dedup);
                if self.retry.len() >= MAX_RETRY {
                    self.retry.pop_front();
                    self.metrics
                        .store_errors
                        .with_label_values(&["dropped"])
                        .inc();
                }
                self.retry.push_back((dedup, rec));
                if self.store_failures == 1 || self.store_failures % 100 == 0 {
                    tracing::error!(error = %format!("{e:#}"), failures = self.store_failures, "Cannot write an incident to the store; positions are not acknowledged until it works again.");
                }
            }
        }
    }

    /// Links a new incident with application-caused Xids (or device errors) seen on this node
    /// within the correlation window; where both carry a pid, the pids must match.
    fn correlate(&mut self, id: i64, rec: &IncidentRecord, key: u64) {
        let now = now_ms();
        while self
            .recent
            .front()
            .is_some_and(|r| now - r.at_ms > self.correlation_ms)
        {
            self.recent.pop_front();
        }
        let inc = &rec.incident;
        let is_job_error = matches!(inc.kind, Kind::DeviceAssert | Kind::CudaError);
        let is_app_xid = inc.kind == Kind::Xid
            && inc
                .xid
                .is_some_and(|x| xid_catalog::blame(x) != Blame::Hardware);
        let mut links = Vec::new();
        for r in &self.recent {
            let pair = (is_job_error
                && r.kind == Kind::Xid
                && r.xid
                    .is_some_and(|x| xid_catalog::blame(x) != Blame::Hardware))
                || (is_app_xid && matches!(r.kind, Kind::DeviceAssert | Kind::CudaError));
            let pid_ok = match (inc.pid, r.pid) {
                (Some(a), Some(b)) => a == b,
                _ => true,
            };
            if pair && pid_ok {
                links.push((r.id, r.key));
            }
        }
        for (other, other_key) in &links {
            self.related.entry(id).or_default().push(*other);
            self.related.entry(*other).or_default().push(id);
            // Rewrite the other record with the link (and the application blame for an Xid).
            if let Ok(Some(mut o)) = self.store.get(*other) {
                o.related.push(id);
                if o.incident.kind == Kind::Xid {
                    o.incident.blame = Blame::Application;
                }
                let dedup = other_key.and_then(|k| self.ids.get(&k).map(|(_, d)| d.clone()));
                if let Some(d) = dedup {
                    let _ = self.store.put(&d, now, &o);
                } else {
                    let _ = self.store.put(&format!("id:{other}"), now, &o);
                }
            }
        }
        if !links.is_empty() {
            let mut r2 = rec.clone();
            r2.related = links.iter().map(|(i, _)| *i).collect();
            if r2.incident.kind == Kind::Xid {
                r2.incident.blame = Blame::Application;
            }
            if let Some((_, d)) = self.ids.get(&key) {
                let _ = self.store.put(d, now, &r2);
            }
        }
        if self.recent.len() >= 512 {
            self.recent.pop_front();
        }
        self.recent.push_back(Recent {
            id,
            kind: inc.kind,
            xid: inc.xid,
            pid: inc.pid,
            at_ms: now,
            key: Some(key),
        });
    }

    pub fn prune(&self, max_age: Duration, max_count: u64, max_bytes: u64) {
        match self.store.prune(now_ms(), max_age, max_count, max_bytes) {
            Ok(p) => {
                for (reason, n) in [("age", p.age), ("count", p.count), ("size", p.size)] {
                    if n > 0 {
                        self.metrics
                            .store_pruned
                            .with_label_values(&[reason])
                            .inc_by(n as u64);
                    }
                }
            }
            Err(e) => {
                self.metrics
                    .store_errors
                    .with_label_values(&["prune"])
                    .inc();
                tracing::warn!(error = %format!("{e:#}"), "Pruning the incident store failed.");
            }
        }
    }
}
