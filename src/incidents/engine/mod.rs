//! The grouping engine: evidence in, incident updates out.
//!
//! One failure prints many lines: hundreds of per-thread assertion lines, a Python traceback, the
//! `RuntimeError`/`AcceleratorError` headline and hint lines, often a C++ `terminate` block. The
//! engine folds them into one incident per failure and starts a new one when a different failure
//! begins or the stream goes quiet. State is bounded: per stream one open training-log incident,
//! at most `max_open_xid` open Xid incidents, a traceback buffer of `max_frames` frames, and a
//! bounded excerpt per incident.
//!
//! Boundaries:
//! - a training-log incident closes when the next evidence is more than `gap_lines` lines after
//!   its last line, when `quiet_ms` passes without evidence (daemon only), or when evidence of a
//!   different failure arrives (another kind, or a second headline of another family);
//! - an Xid incident is keyed by (bus id, Xid number) and closes after `xid_window_ms` without a
//!   repeat (daemon) or `xid_gap_lines` lines (scan), so a burst of one Xid is one incident while
//!   different GPUs stay separate. NVSwitch SXid incidents are keyed by (switch bus id, SXid
//!   number) and GPU driver events without an Xid by (GPU, event) in the same way; the "fallen off
//!   the bus" block and Xid 79 of one GPU are one incident in either order.

mod evidence;

use crate::model::{Evidence, Finding, Incident};
use evidence::close;
use std::collections::{BTreeMap, VecDeque};

/// Bounds and windows of grouping.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Evidence further than this many lines after an incident's last line starts a new one.
    pub gap_lines: u64,
    /// A training-log incident with no new evidence for this long is closed (0: no clock).
    pub quiet_ms: u64,
    /// Repeats of one Xid on one GPU within this window join one incident.
    pub xid_window_ms: u64,
    /// Line-based equivalent of `xid_window_ms` for one-shot scans.
    pub xid_gap_lines: u64,
    /// Excerpt lines kept per incident (the rest is counted, not kept).
    pub excerpt_lines: usize,
    /// Bytes kept per excerpt line.
    pub excerpt_line_bytes: usize,
    /// Open Xid incidents kept per stream; the oldest is closed when a new one needs room.
    pub max_open_xid: usize,
    /// Traceback frames kept while waiting for the headline they belong to.
    pub max_frames: usize,
    /// A traceback belongs to a headline at most this many lines after its last frame.
    pub traceback_attach_lines: u64,
    /// Distinct assertion sites kept per incident.
    pub max_assert_sites: usize,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            gap_lines: 40,
            quiet_ms: 3_000,
            xid_window_ms: 60_000,
            xid_gap_lines: 2_000,
            excerpt_lines: 60,
            excerpt_line_bytes: 1_024,
            max_open_xid: 64,
            max_frames: 64,
            traceback_attach_lines: 6,
            max_assert_sites: 8,
        }
    }
}

/// A change to one incident, as seen after a batch of evidence.
#[derive(Debug, Clone, PartialEq)]
pub struct Update {
    /// Engine-local key, stable for the life of the incident.
    pub key: u64,
    pub stream: u64,
    pub incident: Incident,
    /// The incident is complete; no further updates will follow.
    pub closed: bool,
    /// This is the first update of this incident (count it now).
    pub first: bool,
}

#[derive(Debug)]
struct Open {
    key: u64,
    stream: u64,
    inc: Incident,
    /// Logical position of the incident's last evidence (windows are measured in these).
    last_seq: u64,
    last_at_ms: u64,
    headline_rule: Option<String>,
    reported: bool,
    /// The driver's GPU tag (`GPU6`) of a driver-event incident whose lines carry no bus id.
    gpu_tag: Option<String>,
}

#[derive(Debug, Default)]
struct PendingTraceback {
    start_line: Option<u64>,
    start_offset: Option<u64>,
    last_line: u64,
    last_seq: u64,
    frames: VecDeque<(String, u32, bool)>,
    lines: VecDeque<String>,
}

#[derive(Debug, Default)]
struct StreamState {
    open: Option<Open>,
    xids: Vec<Open>,
    tb: PendingTraceback,
    mention: Option<(String, u64, u64)>,
    identities: BTreeMap<String, String>,
    /// Where the last driver line that reported a failed step was (its `seq`).
    driver_failure: Option<u64>,
}

/// The grouping engine. See the module docs.
#[derive(Debug)]
pub struct Engine {
    cfg: EngineConfig,
    streams: BTreeMap<u64, StreamState>,
    next_key: u64,
    dirty: Vec<u64>,
    done: Vec<Update>,
}

const MAX_IDENTITIES: usize = 256;

impl Engine {
    pub fn new(cfg: EngineConfig) -> Self {
        Engine {
            cfg,
            streams: BTreeMap::new(),
            next_key: 1,
            dirty: Vec::new(),
            done: Vec::new(),
        }
    }

    /// Folds one finding of `stream` into the incidents: one handler per kind of evidence, in
    /// [`evidence`].
    pub fn observe(&mut self, stream: u64, f: Finding) {
        self.expire(stream, f.seq, f.at_ms);
        let Engine {
            cfg,
            streams,
            next_key,
            dirty,
            done,
        } = self;
        let st = streams.entry(stream).or_default();
        let mut cx = evidence::Cx {
            cfg,
            next_key,
            dirty,
            done,
            stream,
        };
        match &f.evidence {
            Evidence::TracebackStart => evidence::traceback_start(st, &f, &cx),
            Evidence::Frame {
                file,
                line,
                user_code,
                ..
            } => evidence::frame(st, &f, file, *line, *user_code, &cx),
            Evidence::Continuation => evidence::continuation(st, &f, &mut cx),
            Evidence::KernelAssert {
                kernel_file,
                assertion,
                block,
                thread,
                category,
                hint,
            } => evidence::kernel_assert(
                st,
                &f,
                evidence::Site {
                    kernel_file,
                    assertion,
                    block: *block,
                    thread: *thread,
                    category,
                    hint,
                },
                &mut cx,
            ),
            Evidence::Headline {
                kind,
                category,
                blame,
                hint,
                rule,
            } => evidence::headline(st, &f, *kind, category, *blame, hint, rule, &mut cx),
            Evidence::Xid {
                xid,
                pci,
                pid,
                process,
                detail,
            } => evidence::xid(
                st,
                &f,
                evidence::XidLine {
                    xid: *xid,
                    pci,
                    pid: *pid,
                    process,
                    detail,
                },
                &mut cx,
            ),
            Evidence::Sxid {
                sxid,
                pci,
                link,
                severity,
                ..
            } => evidence::sxid(st, &f, *sxid, pci, *link, *severity, &mut cx),
            Evidence::GpuDriverEvent {
                event,
                pci,
                gpu_tag,
            } => evidence::gpu_event(st, &f, *event, pci, gpu_tag, &mut cx),
            Evidence::FallenOffBus { pci } => evidence::fallen_off_bus(st, &f, pci, &mut cx),
            Evidence::GpuIdentity { pci, uuid } => evidence::identity(st, pci, uuid, &mut cx),
            Evidence::GpuMention { pci } => st.mention = Some((pci.clone(), f.line, f.seq)),
            Evidence::DriverFailure => st.driver_failure = Some(f.seq),
        }
    }

    /// Closes incidents of `stream` that `line`/`at_ms` puts past their windows.
    fn expire(&mut self, stream: u64, seq: u64, at_ms: u64) {
        let cfg = &self.cfg;
        let Some(st) = self.streams.get_mut(&stream) else {
            return;
        };
        if let Some(o) = &st.open {
            let by_lines = seq > o.last_seq + cfg.gap_lines;
            let by_time =
                cfg.quiet_ms > 0 && at_ms > 0 && at_ms.saturating_sub(o.last_at_ms) > cfg.quiet_ms;
            if by_lines || by_time {
                if let Some(o) = st.open.take() {
                    self.done.push(close(o));
                }
            }
        }
        let mut i = 0;
        while i < st.xids.len() {
            let o = &st.xids[i];
            let by_lines = seq > o.last_seq + cfg.xid_gap_lines;
            let by_time = at_ms > 0 && at_ms.saturating_sub(o.last_at_ms) > cfg.xid_window_ms;
            if by_lines || by_time {
                let o = st.xids.remove(i);
                self.done.push(close(o));
            } else {
                i += 1;
            }
        }
        if st.tb.start_line.is_some() && seq > st.tb.last_seq + cfg.gap_lines {
            st.tb = PendingTraceback::default();
        }
    }

    /// Closes incidents whose quiet period ended by `now_ms` (daemon clock).
    pub fn tick(&mut self, now_ms: u64) {
        let cfg = &self.cfg;
        for st in self.streams.values_mut() {
            if let Some(o) = &st.open {
                if cfg.quiet_ms > 0 && now_ms.saturating_sub(o.last_at_ms) > cfg.quiet_ms {
                    if let Some(o) = st.open.take() {
                        self.done.push(close(o));
                    }
                }
            }
            let mut i = 0;
            while i < st.xids.len() {
                if now_ms.saturating_sub(st.xids[i].last_at_ms) > cfg.xid_window_ms {
                    let o = st.xids.remove(i);
                    self.done.push(close(o));
                } else {
                    i += 1;
                }
            }
        }
    }

    /// Closes everything open on `stream` (end of input).
    pub fn flush_stream(&mut self, stream: u64) {
        if let Some(mut st) = self.streams.remove(&stream) {
            if let Some(o) = st.open.take() {
                self.done.push(close(o));
            }
            for o in st.xids.drain(..) {
                self.done.push(close(o));
            }
        }
    }

    /// Closes everything open on every stream.
    pub fn flush_all(&mut self) {
        let keys: Vec<u64> = self.streams.keys().copied().collect();
        for k in keys {
            self.flush_stream(k);
        }
    }

    /// The earliest (offset, line) of `stream` that an open incident or pending traceback still
    /// needs: acknowledging past it would let a restart rebuild the incident differently.
    pub fn open_floor(&self, stream: u64) -> Option<(u64, u64)> {
        let st = self.streams.get(&stream)?;
        let mut best: Option<(u64, u64)> = None;
        let mut consider = |off: Option<u64>, line: u64| {
            if let Some(o) = off {
                if best.is_none_or(|(b, _)| o < b) {
                    best = Some((o, line));
                }
            }
        };
        for o in st.open.iter().chain(st.xids.iter()) {
            consider(o.inc.first_offset, o.inc.first_line);
        }
        if let Some(l) = st.tb.start_line {
            consider(st.tb.start_offset, l);
        }
        best
    }

    /// The smallest `first_line` among open incidents and pending tracebacks of any stream.
    pub fn min_open_first_line(&self) -> Option<u64> {
        self.streams
            .values()
            .flat_map(|s| {
                s.open
                    .iter()
                    .chain(s.xids.iter())
                    .map(|o| o.inc.first_line)
                    .chain(s.tb.start_line)
            })
            .min()
    }

    /// Number of incidents currently open (all streams).
    pub fn open_count(&self) -> usize {
        self.streams
            .values()
            .map(|s| usize::from(s.open.is_some()) + s.xids.len())
            .sum()
    }

    /// Returns what changed since the last call: updates of open incidents, then closed ones,
    /// each in the order it happened.
    pub fn drain(&mut self) -> Vec<Update> {
        let mut out = Vec::new();
        let mut dirty = std::mem::take(&mut self.dirty);
        dirty.sort_unstable();
        dirty.dedup();
        for st in self.streams.values_mut() {
            for o in st.open.iter_mut().chain(st.xids.iter_mut()) {
                if dirty.binary_search(&o.key).is_ok() {
                    out.push(Update {
                        key: o.key,
                        stream: o.stream,
                        incident: o.inc.clone(),
                        closed: false,
                        first: !o.reported,
                    });
                    o.reported = true;
                }
            }
        }
        out.sort_by_key(|u| u.key);
        out.append(&mut self.done);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::detect::DetectorSet;
    use crate::model::{Blame, Kind};

    fn run(text: &str) -> Vec<Incident> {
        let d = DetectorSet::builtin();
        let mut e = Engine::new(EngineConfig::default());
        for (i, l) in text.lines().enumerate() {
            if let Some(ev) = d.inspect(l) {
                e.observe(0, Finding::new(i as u64 + 1, i as u64 + 1, None, 0, l, ev));
            }
        }
        e.flush_all();
        e.drain()
            .into_iter()
            .filter(|u| u.closed)
            .map(|u| u.incident)
            .collect()
    }

    const ASSERT_BLOCK: &str = "../aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [0,0,0], thread: [1,0,0] Assertion `index out of bounds` failed.
../aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [0,0,0], thread: [2,0,0] Assertion `index out of bounds` failed.
Traceback (most recent call last):
  File \"/workspace/train.py\", line 88, in <module>
    loss.backward()
  File \"/usr/lib/python3.10/site-packages/torch/_tensor.py\", line 5, in backward
RuntimeError: CUDA error: device-side assert triggered
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1.
";

    #[test]
    fn one_failure_is_one_incident() {
        let incs = run(ASSERT_BLOCK);
        assert_eq!(incs.len(), 1, "{incs:#?}");
        let i = &incs[0];
        assert_eq!(i.kind, Kind::DeviceAssert);
        assert_eq!(i.category, "index_out_of_bounds");
        assert_eq!(i.kernel_file.as_deref(), Some("IndexKernel.cu:92"));
        assert_eq!(i.python_frame.as_deref(), Some("/workspace/train.py:88"));
        assert_eq!(
            i.message.as_deref(),
            Some("RuntimeError: CUDA error: device-side assert triggered")
        );
        assert_eq!((i.first_line, i.last_line), (1, 9));
        assert_eq!(i.assert_sites[0].threads, 2);
    }

    #[test]
    fn two_failures_far_apart_are_two() {
        let mut text = String::from(ASSERT_BLOCK);
        for n in 0..100 {
            text.push_str(&format!("step {n} loss 0.5\n"));
        }
        text.push_str(ASSERT_BLOCK);
        assert_eq!(run(&text).len(), 2);
    }

    #[test]
    fn different_kinds_split() {
        let incs = run("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\nRuntimeError: CUDA error: an illegal memory access was encountered\n");
        assert_eq!(incs.len(), 2);
        assert_eq!(incs[0].kind, Kind::Oom);
        assert_eq!(incs[1].category, "illegal_memory_access");
    }

    #[test]
    fn a_provisional_numeric_family_yields_and_joins() {
        // tensorboardX warns for every non-finite value it logs, before and after the line
        // that names the value: one incident, the named value's family.
        let warn = "WARNING:root:NaN or Inf found in input tensor.";
        let text = format!(
            "{warn}\nstep 10 | grad_norm: nan | loss 2.31\n{warn}\n{warn}\nstep 11 | grad_norm: nan | loss 2.30\n{warn}\n"
        );
        let incs = run(&text);
        assert_eq!(incs.len(), 1, "{incs:#?}");
        assert_eq!(incs[0].category, "nan_grad_norm");
        assert_eq!((incs[0].first_line, incs[0].last_line), (1, 6));
        // Alone, the warning keeps the loss's family.
        let incs = run(&format!("{warn}\n{warn}\n"));
        assert_eq!(incs.len(), 1);
        assert_eq!(incs[0].category, "non_finite_loss");
    }

    #[test]
    fn a_bare_socket_error_is_c10d_s_only_after_its_frames() {
        // PyTorch 1.x's store raised its socket errors as a bare RuntimeError.
        let c10d = "Traceback (most recent call last):\n  File \"/app/train.py\", line 10, in <module>\n    dist.init_process_group(backend=\"nccl\", init_method=\"tcp://10.0.0.2:23456\")\n  File \"/usr/lib/python3.9/site-packages/torch/distributed/distributed_c10d.py\", line 611, in init_process_group\n    default_pg._set_sequence_number_for_group()\nRuntimeError: Connection reset by peer\n";
        let incs = run(c10d);
        assert_eq!(incs.len(), 1, "{incs:#?}");
        assert_eq!(incs[0].category, "c10d_store_recv_failed");
        // Any other program's traceback, and the words alone or far below the frames.
        let other = c10d.replace("torch/distributed/distributed_c10d.py", "aiohttp/client.py");
        assert!(run(&other).is_empty(), "{:#?}", run(&other));
        assert!(run("RuntimeError: Connection reset by peer\n").is_empty());
        let far = c10d.replace(
            "RuntimeError: Connection reset by peer",
            "retrying\nretrying\nretrying\nRuntimeError: Connection reset by peer",
        );
        assert!(run(&far).is_empty(), "{:#?}", run(&far));
    }

    #[test]
    fn xid_bursts_group_per_gpu() {
        let incs = run("NVRM: Xid (PCI:0000:dc:00): 45, pid=1, name=python3, Ch 1\nNVRM: Xid (PCI:0000:ed:00): 45, pid=2, name=python3, Ch 2\nNVRM: Xid (PCI:0000:dc:00): 45, pid=1, name=python3, Ch 3\n");
        assert_eq!(incs.len(), 2);
        assert_eq!(incs[0].pci.as_deref(), Some("0000:dc:00"));
        assert_eq!(incs[0].evidence_lines, 2);
    }

    #[test]
    fn bus_loss_line_joins_xid_79_and_identity_gives_uuid() {
        let incs = run("NVRM: GPU at PCI:0000:01:00: GPU-ccdb674e-0f5b-c678-9099-59940ccd0641\nNVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.\nNVRM: GPU 0000:01:00.0: GPU has fallen off the bus.\n");
        assert_eq!(incs.len(), 1);
        assert_eq!(
            incs[0].gpu_uuid.as_deref(),
            Some("GPU-ccdb674e-0f5b-c678-9099-59940ccd0641")
        );
        assert_eq!(incs[0].blame, Blame::Hardware);
    }

    /// The driver's bus-loss block (https://github.com/NVIDIA/NVSentinel/issues/155) with the bus
    /// id spelled `bus`.
    fn bus_loss_block(bus: &str) -> String {
        format!("[ 1843.308145] NVRM: The NVIDIA GPU {bus}\n               NVRM: (PCI ID: 10de:26b5) installed in this system has\n               NVRM: fallen off the bus and is not responding to commands.\n")
    }

    #[test]
    fn bus_loss_and_xid_79_are_one_incident_in_either_order_and_any_spelling() {
        let spellings = ["0000:b3:00", "0000:b3:00.0", "b3:00.0"];
        for block_bus in spellings {
            for xid_bus in spellings {
                let xid = format!("NVRM: Xid (PCI:{xid_bus}): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n");
                let single = format!("NVRM: GPU {block_bus}: GPU has fallen off the bus.\n");
                for text in [
                    format!("{}{xid}", bus_loss_block(block_bus)),
                    format!("{xid}{}", bus_loss_block(block_bus)),
                    format!("{single}{xid}"),
                    format!("{xid}{single}"),
                    format!("{single}{xid}{single}"),
                ] {
                    let incs = run(&text);
                    assert_eq!(incs.len(), 1, "{text}\n{incs:#?}");
                    let i = &incs[0];
                    assert_eq!(i.xid, Some(79), "{text}");
                    assert_eq!(i.category, "xid_79_fallen_off_bus", "{text}");
                    assert_eq!(i.blame, Blame::Hardware);
                    let pci = i.pci.as_deref().unwrap_or("");
                    assert!(crate::detect::xid::same_bus(pci, "0000:b3:00"), "{pci}");
                    assert!(pci.starts_with("0000:"), "{pci}");
                }
            }
        }
    }

    #[test]
    fn bus_loss_of_another_gpu_stays_apart() {
        let text = format!(
            "{}NVRM: Xid (PCI:0000:b4:00): 79, GPU has fallen off the bus.\n",
            bus_loss_block("0000:b3:00.0")
        );
        assert_eq!(run(&text).len(), 2);
    }

    #[test]
    fn bus_loss_without_xid_keeps_its_category() {
        let incs = run(&bus_loss_block("b3:00.0"));
        assert_eq!(incs.len(), 1);
        assert_eq!(incs[0].category, "gpu_fallen_off_bus_no_xid");
        assert_eq!(incs[0].xid, None);
        assert_eq!(incs[0].pci.as_deref(), Some("0000:b3:00.0"));
        assert_eq!(incs[0].first_line, 1);
    }

    #[test]
    fn sxid_burst_is_one_incident_per_switch_and_number() {
        // https://github.com/NVIDIA/nvtrust/issues/124
        let text = "[   25.948274] nvidia-nvswitch1: SXid (PCI:0000:02:00.0): 22013, Non-fatal, Link 00 Minion Link DLREQ interrupt
[   25.950244] nvidia-nvswitch1: SXid (PCI:0000:02:00.0): 22013, Severity 0 Engine instance 00 Sub-engine instance 00
[   25.952303] nvidia-nvswitch1: SXid (PCI:0000:02:00.0): 22013, Data {0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x80005302, 0x00000000, 0x00000000, 0x00000000, 0x00000000}
[   25.955391] nvidia-nvswitch1: SXid (PCI:0000:02:00.0): 22013, Non-fatal, Link 01 Minion Link DLREQ interrupt
[   25.957361] nvidia-nvswitch1: SXid (PCI:0000:02:00.0): 22013, Severity 0 Engine instance 01 Sub-engine instance 00
[   25.962000] nvidia-nvswitch2: SXid (PCI:0000:03:00.0): 22013, Non-fatal, Link 05 Minion Link DLREQ interrupt
";
        let incs = run(text);
        assert_eq!(incs.len(), 2, "{incs:#?}");
        let i = &incs[0];
        assert_eq!(i.kind, Kind::Sxid);
        assert_eq!(i.sxid, Some(22013));
        assert_eq!(i.xid, None);
        assert_eq!(i.pci.as_deref(), Some("0000:02:00.0"));
        assert_eq!(i.link, Some(0));
        assert_eq!(i.blame, Blame::Hardware);
        assert_eq!(i.category, "sxid_22013_minion_link_dlreq_interrupt");
        assert_eq!(i.evidence_lines, 5);
        assert!(i.hint.contains("no immediate action"), "{}", i.hint);
        assert_eq!(incs[1].pci.as_deref(), Some("0000:03:00.0"));
        assert_eq!(incs[1].link, Some(5));
    }

    #[test]
    fn sxid_jsonl_has_sxid_and_null_xid() {
        let incs = run("nvidia-nvswitch3: SXid (PCI:0000:c4:00.0): 12020, Fatal, Link 31 egress sequence ID error\n");
        let v = serde_json::to_value(&incs[0]).unwrap();
        assert_eq!(v["kind"], "sxid");
        assert_eq!(v["sxid"], 12020);
        assert!(v["xid"].is_null());
        assert_eq!(v["link"], 31);
        assert!(
            incs[0].hint.contains("restart the host"),
            "{}",
            incs[0].hint
        );
    }

    #[test]
    fn gsp_timeouts_without_xid_group_per_gpu() {
        // https://github.com/ublue-os/bazzite/issues/4449
        let text = "Mar 21 21:42:01 kernel: NVRM: GPU0 _kgspIsHeartbeatTimedOut: Heartbeat timed out, currentTimeMs 322227881 heartbeat 0 heartbeatWithOffsetMs 318098841 diff 4129040 timeout 5200
Mar 21 21:42:01 kernel: NVRM: GPU0 _kgspRpcRecvPoll: GSP RM heartbeat timed out
Mar 21 21:43:01 kernel: NVRM: GPU1 _kgspRpcRecvPoll: GSP RM heartbeat timed out
";
        let incs = run(text);
        assert_eq!(incs.len(), 2, "{incs:#?}");
        assert_eq!(incs[0].kind, Kind::Xid);
        assert_eq!(incs[0].category, "gsp_heartbeat_timeout");
        assert_eq!(incs[0].xid, None);
        assert_eq!(incs[0].blame, Blame::Driver);
        assert_eq!(incs[0].evidence_lines, 2);
    }

    #[test]
    fn nvlink_training_failure_is_a_hardware_incident() {
        let incs = run("NVRM: GPU 0000:18:00.0: knvlinkCheckTrainingIsComplete: Timedout while checking to see if training complete!\n");
        assert_eq!(incs.len(), 1);
        assert_eq!(incs[0].category, "nvlink_training_failed");
        assert_eq!(incs[0].pci.as_deref(), Some("0000:18:00.0"));
        assert_eq!(incs[0].blame, Blame::Hardware);
    }

    #[test]
    fn init_failure_joins_its_gpu_but_opens_nothing_alone() {
        // https://github.com/NVIDIA/gpu-operator/issues/1146 (a corpus negative on its own).
        let init = "NVRM: GPU 0000:0a:00.0: RmInitAdapter failed! (0x24:0x72:1568)\nNVRM: GPU 0000:0a:00.0: rm_init_adapter failed, device minor number 5\n";
        assert!(run(init).is_empty());
        let text = format!("NVRM: Xid (PCI:0000:0a:00): 79, GPU has fallen off the bus.\n{init}");
        let incs = run(&text);
        assert_eq!(incs.len(), 1);
        assert_eq!(incs[0].evidence_lines, 3);
    }

    #[test]
    fn a_cuda_error_then_its_device_assert_is_one_incident() {
        let text =
            "I'm encountering a CUDA error when trying to use GPU operations. My environment:
PyTorch version: 2.3.1+cu121
GPU: NVIDIA L4
Even simple operations fail with the error: 'CUDA error: device-side assert triggered'.
";
        let incs = run(text);
        assert_eq!(incs.len(), 1, "{incs:#?}");
        assert_eq!(incs[0].kind, Kind::DeviceAssert);
    }

    #[test]
    fn init_failure_after_its_cause_opens_an_incident() {
        // The driver says what failed, then that the GPU did not initialise.
        let text = "NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  570.172.08  Release Build
NVRM: nvAssertOkFailedNoLog: Assertion failed: Call timed out [NV_ERR_TIMEOUT] (0x00000065) returned from kgspWaitForRmInitDone(pGpu, pKernelGsp) @ kernel_gsp_gh100.c:928
NVRM: RmInitAdapter: Cannot initialize GSP firmware RM
NVRM: GPU 0000:01:00.0: RmInitAdapter failed! (0x62:0x65:1859)
NVRM: GPU 0000:01:00.0: rm_init_adapter failed, device minor number 0
";
        let incs = run(text);
        assert_eq!(incs.len(), 1, "{incs:#?}");
        assert_eq!(incs[0].kind, Kind::Xid);
        assert_eq!(incs[0].category, "rm_init_adapter_failed");
        assert_eq!(incs[0].blame, Blame::Driver);
        assert_eq!(incs[0].pci.as_deref(), Some("0000:01:00.0"));
        // The driver's banner and notices are no cause.
        let notices = "NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  570.172.08  Release Build
NVRM: testIfDsmSubFunctionEnabled: GPS ACPI DSM called before _acpiDsmSupportedFuncCacheInit subfunction = 11.
NVRM: GPU 0000:0a:00.0: RmInitAdapter failed! (0x24:0x72:1568)
";
        assert!(run(notices).is_empty());
        // A cause far before the failure is another burst's.
        let far = format!(
            "NVRM: failed to copy vbios to system memory.\n{}NVRM: GPU 0000:0a:00.0: RmInitAdapter failed! (0x24:0x72:1568)\n",
            "kernel: usb 1-1: new high-speed USB device\n".repeat(150)
        );
        assert!(run(&far).is_empty());
    }

    #[test]
    fn xid_154_takes_the_latest_action() {
        let text = "NVRM: Xid (PCI:0000:97:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)
NVRM: Xid (PCI:0000:97:00): 154, GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)
";
        let incs = run(text);
        assert_eq!(incs.len(), 1);
        assert!(incs[0].hint.contains("recovered"), "{}", incs[0].hint);
    }

    #[test]
    fn nvlink5_burst_escalates_to_the_fatal_line() {
        // https://github.com/leptonai/gpud/pull/1160
        let text = "NVRM: Xid (PCI:0000:00:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x026001c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)
NVRM: Xid (PCI:0000:00:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x025001c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)
";
        let incs = run(text);
        assert_eq!(incs.len(), 1);
        assert!(incs[0].hint.contains("RESET_GPU"), "{}", incs[0].hint);
        assert!(incs[0].message.as_deref().unwrap().contains("0x025001c6"));
    }

    #[test]
    fn quiet_period_closes_in_daemon_mode() {
        let d = DetectorSet::builtin();
        let mut e = Engine::new(EngineConfig::default());
        let l = "RuntimeError: CUDA error: misaligned address";
        e.observe(
            1,
            Finding::new(1, 1, Some(0), 1_000, l, d.inspect(l).unwrap()),
        );
        let u = e.drain();
        assert_eq!(u.len(), 1);
        assert!(u[0].first && !u[0].closed);
        e.tick(2_000);
        assert!(e.drain().is_empty());
        e.tick(10_000);
        let u = e.drain();
        assert!(u[0].closed && !u[0].first);
    }
}
