//! The stream table: one scanner per input stream, what each stream has been read up to, and
//! the acknowledgements sent back to the sources.
//!
//! Tail events, kernel-log batches and NVML events come in; each stream's scanner turns bytes
//! into findings, which go straight into the engine. A file is acknowledged up to what was
//! scanned, but never past the first line of an incident still open there, and not at all while
//! the store refuses writes: a checkpoint never points past data whose incidents are not stored,
//! and a restart rebuilds an open incident from its first line under the same dedup key.

use crate::detect::DetectorSet;
use crate::incidents::Engine;
use crate::metrics::Metrics;
use crate::model::{Evidence, Finding, IncidentSource};
use crate::sources::decode::Format;
use crate::sources::k8s::{parse_pod_log_path, PodRef};
use crate::sources::kmsg::reader::{KernelBatch, KernelCheckpoint};
use crate::sources::reader::Chunk;
use crate::sources::stream::StreamScanner;
use assertwatch_tail::{AckHandle, TailEvent};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::time::Instant;

/// Stream id of the kernel log in the engine (file streams use their tail file ids).
pub const KERNEL_STREAM: u64 = u64::MAX - 1;

/// Longest kernel-log line scanned whole.
const KERNEL_MAX_LINE: usize = 1 << 16;

/// What the rest of the daemon needs to know about one stream.
#[derive(Debug, Clone)]
pub struct StreamInfo {
    /// `logs[].name`, or `kernel`.
    pub source_name: String,
    pub path: PathBuf,
    /// Namespace, pod and container, for logs under the kubelet's pod log directory.
    pub pod: Option<PodRef>,
    /// Prefix of the dedup keys of this stream's incidents (file fingerprint, or boot id).
    pub dedup_prefix: String,
    /// The Slurm job whose output file this is (by its name), where it is one.
    pub slurm: Option<crate::model::SlurmRef>,
}

struct StreamCtx {
    info: StreamInfo,
    scanner: StreamScanner,
}

/// Per-source settings the table needs, by the tailer's source index.
#[derive(Debug, Clone)]
pub struct SourceSettings {
    pub name: String,
    pub format: Format,
}

/// See the module docs.
pub struct StreamTable {
    det: Arc<DetectorSet>,
    metrics: Metrics,
    acks: Option<AckHandle>,
    sources: Vec<SourceSettings>,
    max_line: usize,
    slurm_patterns: Vec<crate::sources::slurm::OutputPattern>,
    streams: HashMap<u64, StreamCtx>,
    /// Per file: end offset and line count of everything scanned so far.
    progress: HashMap<u64, (u64, u64)>,
    /// When each stream's latest data arrived, for the detection latency of what it opens.
    arrived: HashMap<u64, Instant>,
    /// Last line number seen on the kernel stream (NVML events are placed after it).
    last_kernel_line: u64,
    /// The kernel reader's newest position (held back from saving while the store fails).
    kernel_pending: Option<KernelCheckpoint>,
    kernel_checkpoint: Option<KernelCheckpoint>,
}

impl StreamTable {
    pub fn new(
        det: Arc<DetectorSet>,
        metrics: Metrics,
        acks: Option<AckHandle>,
        sources: Vec<SourceSettings>,
        max_line: usize,
        slurm_patterns: Vec<crate::sources::slurm::OutputPattern>,
    ) -> Self {
        StreamTable {
            det,
            metrics,
            acks,
            sources,
            max_line,
            slurm_patterns,
            streams: HashMap::new(),
            progress: HashMap::new(),
            arrived: HashMap::new(),
            last_kernel_line: 0,
            kernel_pending: None,
            kernel_checkpoint: None,
        }
    }

    /// The stream's identity and place, while it is followed.
    pub fn info(&self, stream: u64) -> Option<&StreamInfo> {
        self.streams.get(&stream).map(|c| &c.info)
    }

    /// When the stream's latest data arrived.
    pub fn arrived(&self, stream: u64) -> Option<Instant> {
        self.arrived.get(&stream).copied()
    }

    /// Where an incident that starts at `first_pos` of `stream` came from.
    pub fn source_of(&self, stream: u64, first_pos: u64, from_nvml: bool) -> IncidentSource {
        match self.streams.get(&stream) {
            _ if stream == KERNEL_STREAM && from_nvml => IncidentSource::nvml(),
            _ if stream == KERNEL_STREAM => IncidentSource::kmsg(first_pos),
            Some(c) => IncidentSource::file(c.info.path.display().to_string(), first_pos),
            None => IncidentSource::file(String::new(), first_pos),
        }
    }

    fn source_settings(&self, source: usize) -> (String, Format) {
        self.sources
            .get(source)
            .map(|s| (s.name.clone(), s.format))
            .unwrap_or_else(|| (String::new(), Format::Auto))
    }

    /// Feeds findings to the engine, counting them by evidence type.
    fn observe_all(&self, engine: &mut Engine, stream: u64, findings: Vec<Finding>) {
        for f in findings {
            let label = match &f.evidence {
                Evidence::KernelAssert { .. } => "kernel_assert",
                Evidence::Headline { .. } => "headline",
                Evidence::Xid { .. } => "xid",
                Evidence::Frame { .. } | Evidence::TracebackStart => "traceback",
                _ => "context",
            };
            self.metrics.findings.with_label_values(&[label]).inc();
            engine.observe(stream, f);
        }
    }

    /// Handles one tail event. `at_ms` is the daemon clock. Returns the file to acknowledge
    /// once the resulting updates are stored.
    pub fn on_tail(&mut self, ev: TailEvent, engine: &mut Engine, at_ms: u64) -> Option<u64> {
        match ev {
            TailEvent::Opened {
                file,
                source,
                path,
                offset: _,
                lines,
            } => {
                let (name, fmt) = self.source_settings(source);
                let pod = parse_pod_log_path(&path);
                let slurm = crate::sources::slurm::attribute_log_file(&self.slurm_patterns, &path);
                // A new file at the path of a file still being drained: a rename rotation.
                if self
                    .streams
                    .values()
                    .any(|c| c.info.path == path && c.info.source_name == name)
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
                        info: StreamInfo {
                            source_name: name,
                            path,
                            pod,
                            dedup_prefix: format!("f:{file:x}"),
                            slurm,
                        },
                        scanner: StreamScanner::new(fmt, self.max_line, lines + 1),
                    },
                );
                None
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
                let ctx = self.streams.get_mut(&file)?;
                let name = &ctx.info.source_name;
                if let Some(m) = mtime {
                    if let Ok(lag) = std::time::SystemTime::now().duration_since(m) {
                        self.metrics
                            .log_read_lag
                            .with_label_values(&[name])
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
                ctx.scanner.feed(&chunk, &self.det, at_ms, &mut findings);
                let after = ctx.scanner.stats();
                self.metrics
                    .log_bytes
                    .with_label_values(&[name])
                    .inc_by(after.bytes - before.bytes);
                self.metrics
                    .log_lines
                    .with_label_values(&[name])
                    .inc_by(after.lines.saturating_sub(before.lines));
                if after.truncated_lines > before.truncated_lines {
                    self.metrics
                        .log_truncated
                        .with_label_values(&[name])
                        .inc_by(after.truncated_lines - before.truncated_lines);
                }
                self.arrived.insert(file, now);
                self.progress.insert(file, (end, after.lines));
                self.observe_all(engine, file, findings);
                Some(file)
            }
            TailEvent::Reset { file, kind } => {
                engine.flush_stream(file);
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
                        .with_label_values(&[&ctx.info.source_name, k])
                        .inc();
                }
                None
            }
            TailEvent::Renamed { file, new_path } => {
                if let Some(ctx) = self.streams.get_mut(&file) {
                    // A rotated name that still matches a glob arrives here first; one that does
                    // not is counted when the new file opens at the old path (see `Opened`).
                    self.metrics
                        .log_rotations
                        .with_label_values(&[&ctx.info.source_name, "rename"])
                        .inc();
                    ctx.info.path = new_path;
                }
                None
            }
            TailEvent::Closed { file } => {
                let mut out = Vec::new();
                if let Some(ctx) = self.streams.get_mut(&file) {
                    ctx.scanner.finish(&self.det, 0, &mut out);
                }
                self.observe_all(engine, file, out);
                engine.flush_stream(file);
                Some(file)
            }
            TailEvent::Error {
                source,
                path,
                error,
            } => {
                let (name, _) = self.source_settings(source);
                self.metrics
                    .log_read_errors
                    .with_label_values(&[&name])
                    .inc();
                tracing::debug!(source = %name, path = %path.display(), %error, "Log read error.");
                None
            }
        }
    }

    /// Forgets a closed file (after its last updates were applied and it was acknowledged).
    pub fn forget_closed(&mut self, file: u64) {
        if let Some(ctx) = self.streams.remove(&file) {
            self.metrics
                .files_watched
                .with_label_values(&[&ctx.info.source_name])
                .dec();
            self.arrived.remove(&file);
            self.progress.remove(&file);
        }
    }

    /// The kernel stream's context. Its dedup prefix names the kernel log's own stream (boot id
    /// or file) as soon as one is known, whatever arrived first, so kmsg dedup keys are stable
    /// across restarts; NVML-opened incidents are anchored on the event's time and text.
    fn kernel_ctx(&mut self, key: &str) {
        let ctx = self
            .streams
            .entry(KERNEL_STREAM)
            .or_insert_with(|| StreamCtx {
                info: StreamInfo {
                    source_name: "kernel".into(),
                    path: PathBuf::from("kernel"),
                    pod: None,
                    dedup_prefix: format!("k:{key}"),
                    slurm: None,
                },
                scanner: StreamScanner::new(Format::Plain, KERNEL_MAX_LINE, 1),
            });
        if key != "nvml" {
            ctx.info.dedup_prefix = format!("k:{key}");
        }
    }

    /// Handles one batch of kernel-log lines. `store_ok`: whether the store accepts writes (the
    /// batch's position is saved only then).
    pub fn on_kernel(&mut self, b: KernelBatch, engine: &mut Engine, at_ms: u64, store_ok: bool) {
        self.metrics.kmsg_records.inc_by(b.records);
        self.metrics.kmsg_lost.inc_by(b.lost);
        self.kernel_ctx(&b.stream_key);
        if let Some(l) = b.lines.last() {
            self.last_kernel_line = l.line;
        }
        self.arrived.insert(KERNEL_STREAM, b.read_at.into());
        let mut findings = Vec::new();
        if let Some(ctx) = self.streams.get_mut(&KERNEL_STREAM) {
            for l in &b.lines {
                ctx.scanner
                    .feed_line(&l.text, l.line, l.pos, &self.det, at_ms, &mut findings);
            }
        }
        self.observe_all(engine, KERNEL_STREAM, findings);
        self.kernel_pending = Some(b.checkpoint);
        if store_ok {
            self.kernel_checkpoint = self.kernel_pending.clone();
        }
    }

    /// Handles an NVML event. Xids join the kernel-log stream of the engine under the kernel's
    /// bus-id form, so the same Xid seen by NVML and in the kernel log is one incident.
    pub fn on_gpu(&mut self, ev: assertwatch_gpu::GpuEvent, engine: &mut Engine, at_ms: u64) {
        use crate::detect::xid::normalize_bus;
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
                    pci: Some(normalize_bus(&gpu.pci_bus_id)),
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
                    pci: Some(normalize_bus(&gpu.pci_bus_id)),
                };
                (gpu, when, ev, text)
            }
        };
        let when_ms = when
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0);
        // The identity is context, not a finding of its own: it names the GPU's UUID.
        engine.observe(
            KERNEL_STREAM,
            Finding::new(
                line,
                line,
                None,
                at_ms,
                "",
                Evidence::GpuIdentity {
                    pci: normalize_bus(&gpu.pci_bus_id),
                    uuid: gpu.uuid.clone(),
                },
            ),
        );
        self.arrived.insert(KERNEL_STREAM, Instant::now());
        self.observe_all(
            engine,
            KERNEL_STREAM,
            vec![Finding::new(
                line,
                line,
                Some(when_ms),
                at_ms,
                &text,
                evidence,
            )],
        );
    }

    /// Acknowledges `file` up to what was scanned, but never past the first line of an incident
    /// still open there.
    pub fn ack(&self, file: u64, engine: &Engine) {
        let Some(&(end, lines)) = self.progress.get(&file) else {
            return;
        };
        let (off, l) = match engine.open_floor(file) {
            Some((off, line)) if off < end => (off, line.saturating_sub(1)),
            _ => (end, lines),
        };
        if let Some(a) = &self.acks {
            a.ack(file, off, l);
        }
    }

    /// Acknowledges every followed file (after the store recovers, and at shutdown).
    pub fn ack_all(&self, engine: &Engine) {
        for f in self.progress.keys() {
            self.ack(*f, engine);
        }
    }

    /// The store accepts writes again: the kernel position held back meanwhile may be saved.
    pub fn release_kernel_position(&mut self) {
        if self.kernel_pending.is_some() {
            self.kernel_checkpoint = self.kernel_pending.clone();
        }
    }

    /// The kernel checkpoint to persist: the last batch's position, floored at the first line of
    /// a still-open kernel incident.
    pub fn kernel_checkpoint_to_save(&self, engine: &Engine) -> Option<KernelCheckpoint> {
        let ck = self.kernel_checkpoint.clone()?;
        let Some((floor, line)) = engine.open_floor(KERNEL_STREAM) else {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::incidents::EngineConfig;

    fn table() -> (StreamTable, Engine) {
        let det = Arc::new(DetectorSet::new(Vec::new(), Default::default()).unwrap());
        let t = StreamTable::new(
            det,
            Metrics::new(),
            None,
            vec![SourceSettings {
                name: "jobs".into(),
                format: Format::Plain,
            }],
            4096,
            crate::config::slurm::DEFAULT_LOG_PATTERNS
                .iter()
                .map(|p| crate::sources::slurm::OutputPattern::compile(p).unwrap())
                .collect(),
        );
        (t, Engine::new(EngineConfig::default()))
    }

    fn opened(file: u64, path: &str) -> TailEvent {
        TailEvent::Opened {
            file,
            source: 0,
            path: PathBuf::from(path),
            offset: 0,
            lines: 0,
        }
    }

    fn data(file: u64, offset: u64, text: &str) -> TailEvent {
        TailEvent::Data {
            file,
            offset,
            end: offset + text.len() as u64,
            data: bytes::Bytes::copy_from_slice(text.as_bytes()),
            truncated_head: false,
            mtime: None,
        }
    }

    #[test]
    fn scans_files_into_the_engine_and_reports_what_to_ack() {
        let (mut t, mut e) = table();
        assert_eq!(
            t.on_tail(opened(7, "/var/log/pods/ml_p-0_uid/c/0.log"), &mut e, 1),
            None
        );
        let info = t.info(7).unwrap();
        assert_eq!(info.source_name, "jobs");
        assert_eq!(info.pod.as_ref().unwrap().namespace, "ml");
        let text = "ok\nRuntimeError: CUDA error: device-side assert triggered\n";
        assert_eq!(t.on_tail(data(7, 0, text), &mut e, 2), Some(7));
        e.flush_all();
        let ups = e.drain();
        assert_eq!(ups.len(), 1);
        assert_eq!(ups[0].stream, 7);
        assert!(t.arrived(7).is_some());
        assert_eq!(
            t.source_of(7, 3, false),
            IncidentSource::file("/var/log/pods/ml_p-0_uid/c/0.log", 3)
        );
        assert_eq!(t.metrics.log_lines.with_label_values(&["jobs"]).get(), 2);
        t.forget_closed(7);
        assert!(t.info(7).is_none());
        assert_eq!(
            t.metrics.files_watched.with_label_values(&["jobs"]).get(),
            0
        );
    }

    #[test]
    fn slurm_output_files_name_their_job() {
        let (mut t, mut e) = table();
        t.on_tail(opened(3, "/scratch/run/slurm-4242.out"), &mut e, 1);
        let s = t.info(3).unwrap().slurm.clone().unwrap();
        assert_eq!(s.slurm_job_id.as_deref(), Some("4242"));
        t.on_tail(opened(4, "/scratch/run/train.log"), &mut e, 1);
        assert!(t.info(4).unwrap().slurm.is_none());
    }

    #[test]
    fn data_for_an_unknown_file_is_ignored() {
        let (mut t, mut e) = table();
        assert_eq!(t.on_tail(data(9, 0, "x\n"), &mut e, 1), None);
    }

    #[test]
    fn nvml_events_land_on_the_kernel_stream() {
        let (mut t, mut e) = table();
        let gpu = assertwatch_gpu::GpuId {
            index: 0,
            uuid: "GPU-1".into(),
            pci_bus_id: "00000000:3B:00.0".into(),
        };
        t.on_gpu(
            assertwatch_gpu::GpuEvent::Xid {
                gpu,
                xid: 79,
                pid: None,
                at: std::time::SystemTime::now(),
            },
            &mut e,
            5,
        );
        e.flush_all();
        let ups = e.drain();
        assert_eq!(ups.len(), 1);
        assert_eq!(ups[0].stream, KERNEL_STREAM);
        assert_eq!(ups[0].incident.xid, Some(79));
        assert_eq!(ups[0].incident.gpu_uuid.as_deref(), Some("GPU-1"));
        assert_eq!(t.source_of(KERNEL_STREAM, 0, true), IncidentSource::nvml());
    }
}
