//! One handler per kind of evidence: how each line shape opens, extends or annotates incidents.
//!
//! The engine dispatches here from `Engine::observe`; each handler sees one stream's state and
//! the shared bounds ([`Cx`]). Window expiry and closing on time live in the engine itself.

use super::{EngineConfig, Open, PendingTraceback, StreamState, Update, MAX_IDENTITIES};
use crate::detect::numeric::PROVISIONAL_RULE;
use crate::detect::rules::{MPI_SUMMARIES, SOCKET_ERROR_IN_C10D_TRACEBACK};
use crate::detect::{elastic, sxid as sxidcat, xid as xidparse, xid_catalog};
use crate::model::{
    truncate_utf8, AssertSite, Blame, Finding, GpuDriverEventKind, Incident, Kind, RootCause,
    SxidSeverity,
};
use std::collections::BTreeMap;

/// What every handler shares: the bounds, the key allocator and the change lists.
pub(super) struct Cx<'a> {
    pub cfg: &'a EngineConfig,
    pub next_key: &'a mut u64,
    pub dirty: &'a mut Vec<u64>,
    pub done: &'a mut Vec<Update>,
    pub stream: u64,
}

impl Cx<'_> {
    /// Opens `inc` as the stream's training-log incident, closing the one it replaces.
    fn open(&mut self, st: &mut StreamState, inc: Incident, f: &Finding) {
        let o = fresh(self.next_key, self.stream, inc, f);
        if let Some(old) = st.open.replace(o) {
            self.done.push(close(old));
        }
    }

    /// Opens `inc` as a new Xid incident of the stream.
    fn open_xid(&mut self, st: &mut StreamState, inc: Incident, f: &Finding) {
        let o = fresh(self.next_key, self.stream, inc, f);
        self.dirty.push(o.key);
        push_xid(&mut st.xids, o, self.cfg.max_open_xid, self.done);
    }
}

/// A kernel assertion site as the evidence carries it.
pub(super) struct Site<'a> {
    pub kernel_file: &'a Option<String>,
    pub assertion: &'a str,
    pub block: Option<[u32; 3]>,
    pub thread: Option<[u32; 3]>,
    pub category: &'a str,
    pub hint: &'a str,
}

/// `Traceback (most recent call last):` starts a pending traceback.
pub(super) fn traceback_start(st: &mut StreamState, f: &Finding, cx: &Cx<'_>) {
    st.tb = PendingTraceback {
        start_line: Some(f.line),
        start_offset: f.offset,
        last_line: f.line,
        last_seq: f.seq,
        ..Default::default()
    };
    st.tb
        .lines
        .push_back(truncate_utf8(&f.text, cx.cfg.excerpt_line_bytes));
}

/// A Python frame joins the pending traceback (bounded).
pub(super) fn frame(
    st: &mut StreamState,
    f: &Finding,
    file: &str,
    line: u32,
    user_code: bool,
    cx: &Cx<'_>,
) {
    let cfg = cx.cfg;
    if st.tb.start_line.is_none() {
        st.tb.start_line = Some(f.line);
        st.tb.start_offset = f.offset;
    }
    st.tb.last_line = f.line;
    st.tb.last_seq = f.seq;
    if st.tb.frames.len() == cfg.max_frames {
        st.tb.frames.pop_front();
    }
    st.tb.frames.push_back((file.to_owned(), line, user_code));
    if st.tb.lines.len() < cfg.max_frames {
        st.tb
            .lines
            .push_back(truncate_utf8(&f.text, cfg.excerpt_line_bytes));
    }
}

/// A hint line or C++ frame joins the open incident, never starts one. The lines of torchrun's
/// `ChildFailedError` summary also name the failure's root cause (the first rank that failed),
/// which then heads the incident's message.
pub(super) fn continuation(st: &mut StreamState, f: &Finding, cx: &mut Cx<'_>) {
    if st.open.is_none() && MPI_SUMMARIES.iter().any(|m| f.text.contains(m)) {
        // An MPI launcher's summary with no failure before it: the launcher's word is all this
        // stream has of the failure.
        headline(
            st,
            f,
            Kind::NcclError,
            "mpirun_job_aborted",
            Blame::Unknown,
            MPI_ABORTED_HINT,
            "mpirun_job_aborted",
            cx,
        );
        return;
    }
    if st.open.is_none()
        && (CHILD_FAILED.iter().any(|m| f.text.contains(m))
            || elastic::flattened_record(&f.text)
            || elastic::record_traceback_field(&f.text))
    {
        // torchrun's summary with no failure of its own before it (the worker's error went to
        // a log this stream does not carry): the summary is the incident, headed by its root
        // cause once the fields below arrive. A record cut from its header opens it at its
        // last field.
        headline(
            st,
            f,
            Kind::NcclError,
            "torchrun_child_failed",
            Blame::Unknown,
            CHILD_FAILED_HINT,
            "torchrun_child_failed",
            cx,
        );
        // A flattened summary carries its header and fields on the line that opened it.
        if let Some(o) = st.open.as_mut() {
            fold_root_cause(o, &f.text, cx.cfg.excerpt_line_bytes);
        }
        return;
    }
    if let Some(o) = st.open.as_mut() {
        extend(o, f, cx.cfg);
        fold_root_cause(o, &f.text, cx.cfg.excerpt_line_bytes);
        cx.dirty.push(o.key);
    }
}

/// Folds a summary line into the open incident's root cause and, when that changed, heads the
/// incident's message with it.
fn fold_root_cause(o: &mut Open, text: &str, max_bytes: usize) {
    if !elastic::fold(&mut o.inc.root_cause, text) {
        return;
    }
    if let Some(rc) = &o.inc.root_cause {
        let head = root_cause_headline(rc);
        let msg = o.inc.message.take().unwrap_or_default();
        let rest = msg
            .split_once(ROOT_CAUSE_SEP)
            .map_or(msg.as_str(), |(_, r)| r);
        let joined = if rest.is_empty() {
            head
        } else {
            format!("{head}{ROOT_CAUSE_SEP}{rest}")
        };
        o.inc.message = Some(truncate_utf8(&joined, max_bytes));
    }
}

/// The exception torchrun raises when a worker fails (torch/distributed/elastic/
/// multiprocessing/errors/__init__.py), printed ahead of its summary, and the elastic agent's
/// log line before it: "api.py:869] failed (exitcode: -6) local_rank: 0 (pid: 218624) of binary: …"
/// (multiprocessing/api.py; `…api:failed (exitcode: …` in Python's bare logging format), and the
/// summary's root-cause header. A log cut off before or inside the summary still shows the
/// failure.
const CHILD_FAILED: [&str; 4] = [
    "ChildFailedError",
    " failed (exitcode: ",
    ":failed (exitcode: ",
    "Root Cause (first observed failure)",
];
const CHILD_FAILED_HINT: &str = "torchrun stopped the job because a worker process failed: the \
    summary's root cause names the first rank that failed, its host and exit code; read that \
    rank's own output (its error_file, or its log) for the real error.";

const MPI_ABORTED_HINT: &str = "The MPI launcher stopped the job because a rank exited with an \
    error or a signal: the summary names the rank, its node and the signal or exit code; read that \
    rank's own output for the first error (signal 9 is often the kernel's OOM killer or the \
    scheduler, 11 a crash in native code).";

/// Separates the root-cause headline from the failure's own message.
const ROOT_CAUSE_SEP: &str = " | ";

/// "root cause: rank 3 (local_rank 3) on node01, exitcode -6": what a person reads first.
fn root_cause_headline(rc: &RootCause) -> String {
    let mut s = String::from("root cause: rank ");
    s.push_str(&rc.rank.map_or("?".to_owned(), |r| r.to_string()));
    if let Some(l) = rc.local_rank {
        s.push_str(&format!(" (local_rank {l})"));
    }
    if let Some(h) = &rc.host {
        s.push_str(&format!(" on {h}"));
    }
    if let Some(e) = rc.exitcode {
        s.push_str(&format!(", exitcode {e}"));
    }
    s
}

/// Does the line at `seq` end a pending traceback (its last frame at most three lines above: the
/// frame's code line, and Python 3.11's carets under it, come between) whose frames run through
/// `torch/distributed/`?
fn after_c10d_frames(tb: &PendingTraceback, seq: u64) -> bool {
    !tb.frames.is_empty()
        && seq > tb.last_seq
        && seq <= tb.last_seq + 3
        && tb.frames.iter().any(|(file, _, _)| {
            file.contains("torch/distributed/") || file.contains("torch\\distributed\\")
        })
}

/// A device `assert` line: opens a device-assert incident or joins the open one.
pub(super) fn kernel_assert(st: &mut StreamState, f: &Finding, site: Site<'_>, cx: &mut Cx<'_>) {
    let joins = st
        .open
        .as_ref()
        .is_some_and(|o| o.inc.kind == Kind::DeviceAssert);
    if joins {
        if let Some(o) = st.open.as_mut() {
            extend(o, f, cx.cfg);
        }
    } else {
        let inc = new_incident(
            f,
            Kind::DeviceAssert,
            site.category,
            Blame::Application,
            site.hint,
            cx.cfg,
        );
        cx.open(st, inc, f);
    }
    if let Some(o) = st.open.as_mut() {
        add_site(o, &site, cx.cfg);
        if o.inc.message.is_none() {
            o.inc.message = Some(truncate_utf8(f.text.trim(), cx.cfg.excerpt_line_bytes));
        }
        attach_traceback(&mut st.tb, o, f.seq, cx.cfg);
        cx.dirty.push(o.key);
    }
}

/// The rule of the generic CUDA row (`detect::rules`), whose incident an OOM right after it may
/// take over.
const GENERIC_CUDA_RULE: &str = "cuda_error_generic";

/// The headline of a failure: opens an incident of its kind, or joins (and refines) the open one.
#[allow(clippy::too_many_arguments)]
pub(super) fn headline(
    st: &mut StreamState,
    f: &Finding,
    kind: Kind,
    category: &str,
    blame: Blame,
    hint: &str,
    rule: &str,
    cx: &mut Cx<'_>,
) {
    // A socket error that only a traceback through torch.distributed makes c10d's: the frames
    // must be pending and end right above it (the last frame's code line comes between).
    if rule == SOCKET_ERROR_IN_C10D_TRACEBACK && !after_c10d_frames(&st.tb, f.seq) {
        return;
    }
    // A CUDA check that named no error (cutorch's "THCudaCheck FAIL file=… line=" whose "error=2
    // : out of memory" a wrap moved to the next line, a "CUDA error: " whose message was cut)
    // followed at once by an out-of-memory headline is one failure: the allocation the check saw
    // fail. Only the generic CUDA row's incident, and only within two lines: an OOM further on,
    // another rank's perhaps, is a failure of its own.
    // A device-side assert is a CUDA error too (`cudaErrorAssert`): a report that says "a CUDA
    // error" first and quotes "device-side assert triggered" a few lines on tells one failure,
    // whose family the assert names.
    let refines_generic_check = st.open.as_ref().is_some_and(|o| {
        o.inc.kind == Kind::CudaError
            && o.inc.category == "unknown"
            && o.headline_rule.as_deref() == Some(GENERIC_CUDA_RULE)
            && ((kind == Kind::Oom && f.seq <= o.last_seq + 2) || kind == Kind::DeviceAssert)
    });
    // A family that is a guess (`numeric::PROVISIONAL_RULE`) yields to the first line of its
    // kind that names one, as `unknown` does; a guess joins an open incident of its kind
    // whatever its family (tensorboardX warns for every non-finite value it logs).
    let provisional = |o: &Open| {
        o.inc.category == "unknown" || o.headline_rule.as_deref() == Some(PROVISIONAL_RULE)
    };
    let joins = refines_generic_check
        || st.open.as_ref().is_some_and(|o| {
            o.inc.kind == kind
                && (o.headline_rule.is_none()
                    || o.headline_rule.as_deref() == Some(rule)
                    || o.inc.category == category
                    || category == "unknown"
                    || rule == PROVISIONAL_RULE
                    || provisional(o))
        });
    if joins {
        if let Some(o) = st.open.as_mut() {
            extend(o, f, cx.cfg);
        }
    } else {
        let inc = new_incident(f, kind, category, blame, hint, cx.cfg);
        cx.open(st, inc, f);
    }
    if let Some(o) = st.open.as_mut() {
        if o.headline_rule.is_none() {
            o.headline_rule = Some(rule.to_owned());
            o.inc.message = Some(truncate_utf8(f.text.trim(), cx.cfg.excerpt_line_bytes));
        }
        if refines_generic_check {
            o.inc.kind = kind;
        }
        // A specific family refines a generic one ("CUDA error: …" → illegal address).
        if provisional(o) && category != "unknown" && o.inc.kind == kind && rule != PROVISIONAL_RULE
        {
            // The incident is now the specific family's: its further lines join it.
            o.headline_rule = Some(rule.to_owned());
            o.inc.category = category.to_owned();
            o.inc.blame = blame;
            o.inc.hint = hint.to_owned();
        }
        attach_traceback(&mut st.tb, o, f.seq, cx.cfg);
        cx.dirty.push(o.key);
    }
}

/// One Xid line as the evidence carries it.
pub(super) struct XidLine<'a> {
    pub xid: u32,
    pub pci: &'a Option<String>,
    pub pid: Option<u32>,
    pub process: &'a Option<String>,
    pub detail: &'a str,
}

/// Do two optional bus ids name the same GPU? (Both must be known.)
fn same_gpu(a: &Option<String>, b: &Option<String>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => xidparse::same_bus(a, b),
        _ => false,
    }
}

/// An Xid line: repeats of one Xid on one GPU join one incident within the window. Xid 79 also
/// joins a "fallen off the bus" incident of the same GPU that came first.
pub(super) fn xid(st: &mut StreamState, f: &Finding, x: XidLine<'_>, cx: &mut Cx<'_>) {
    let XidLine {
        xid,
        pci,
        pid,
        process,
        detail,
    } = x;
    let pos = st.xids.iter().position(|o| {
        o.inc.kind == Kind::Xid
            && o.inc.xid == Some(xid)
            && (o.inc.pci.as_deref() == pci.as_deref() || same_gpu(&o.inc.pci, pci))
    });
    let pos = pos.or_else(|| {
        if xid != 79 {
            return None;
        }
        // A bus-loss line that named no GPU (a quotation that elided the bus id, "NVRM: GPU
        // ...: GPU has fallen off the bus.") is the same event as the Xid 79 that names one.
        st.xids.iter().position(|o| {
            o.inc.xid.is_none()
                && o.inc.category == FALLEN_NO_XID
                && (same_gpu(&o.inc.pci, pci) || o.inc.pci.is_none())
        })
    });
    if let Some(i) = pos {
        let o = &mut st.xids[i];
        extend(o, f, cx.cfg);
        if o.inc.xid.is_none() {
            // The bus-loss block came first; the Xid names the event.
            o.inc.xid = Some(xid);
            o.inc.category = xid_catalog::category(xid);
            o.inc.hint = xid_catalog::hint(xid);
            o.inc.message = Some(truncate_utf8(f.text.trim(), cx.cfg.excerpt_line_bytes));
            if o.inc.pci.is_none() {
                o.inc.pci.clone_from(pci);
                o.inc.gpu_uuid = pci
                    .as_ref()
                    .and_then(|p| lookup_identity(&st.identities, p));
            }
        }
        if o.inc.pid.is_none() {
            o.inc.pid = pid;
            o.inc.process_name.clone_from(process);
        }
        if (144..=150).contains(&xid) || xid == 154 {
            escalate_xid(o, xid, detail, f, cx.cfg);
        }
        cx.dirty.push(o.key);
        return;
    }
    let mut inc = new_incident(
        f,
        Kind::Xid,
        &xid_catalog::category(xid),
        xid_catalog::blame(xid),
        &xid_catalog::hint_for_line(xid, detail),
        cx.cfg,
    );
    inc.xid = Some(xid);
    inc.pci.clone_from(pci);
    inc.pid = pid;
    inc.process_name.clone_from(process);
    inc.message = Some(truncate_utf8(f.text.trim(), cx.cfg.excerpt_line_bytes));
    inc.gpu_uuid = pci
        .as_ref()
        .and_then(|p| lookup_identity(&st.identities, p));
    cx.open_xid(st, inc, f);
}

/// A later line of an NVLink5 (144–150) or recovery-action (154) burst decides differently: the
/// incident takes the later decision when it is more severe, or when Xid 154 changes the action
/// (the latest recovery action is the one that holds).
fn escalate_xid(o: &mut Open, xid: u32, detail: &str, f: &Finding, cfg: &EngineConfig) {
    let now = xid_catalog::decide(xid, detail);
    let before = o
        .inc
        .message
        .as_deref()
        .and_then(|m| m.split_once(&format!("): {xid}, ")))
        .map(|(_, d)| xid_catalog::decide(xid, d));
    let replace = match before {
        Some(b) if xid == 154 => b.action != now.action,
        Some(b) => now.out_of_service && !b.out_of_service,
        None => true,
    };
    if replace {
        o.inc.hint = xid_catalog::hint_for_line(xid, detail);
        o.inc.message = Some(truncate_utf8(f.text.trim(), cfg.excerpt_line_bytes));
    }
}

/// The category of the driver's multi-line "fallen off the bus" message without an Xid.
const FALLEN_NO_XID: &str = "gpu_fallen_off_bus_no_xid";

/// "GPU has fallen off the bus" without an Xid number: joins an Xid 79 (or an earlier bus-loss
/// incident) of the same GPU, or opens an incident of its own (the bus id may come from the
/// preceding mention line).
pub(super) fn fallen_off_bus(
    st: &mut StreamState,
    f: &Finding,
    pci: &Option<String>,
    cx: &mut Cx<'_>,
) {
    let pci = pci.clone().or_else(|| {
        st.mention
            .as_ref()
            .filter(|(_, _, q)| f.seq <= q + 4)
            .map(|(p, _, _)| p.clone())
    });
    // A line that names no GPU joins the latest bus loss open.
    let existing = st.xids.iter_mut().rev().find(|o| {
        (o.inc.xid == Some(79) || (o.inc.xid.is_none() && o.inc.category == FALLEN_NO_XID))
            && o.inc.kind == Kind::Xid
            && (same_gpu(&o.inc.pci, &pci) || pci.is_none())
    });
    if let Some(o) = existing {
        extend(o, f, cx.cfg);
        cx.dirty.push(o.key);
        st.mention = None;
        return;
    }
    let mut inc = new_incident(
        f,
        Kind::Xid,
        FALLEN_NO_XID,
        Blame::Hardware,
        &xid_catalog::hint(79),
        cx.cfg,
    );
    inc.gpu_uuid = pci
        .as_ref()
        .and_then(|p| lookup_identity(&st.identities, p));
    inc.pci = pci;
    inc.message = Some(truncate_utf8(f.text.trim(), cx.cfg.excerpt_line_bytes));
    if let Some((_, l, _)) = st.mention.take() {
        inc.first_line = inc.first_line.min(l);
    }
    cx.open_xid(st, inc, f);
}

/// An NVSwitch SXid line: the lines of one SXid on one switch (the headline, its `Severity` and
/// `Data` lines, repeats) join one incident within the Xid window.
pub(super) fn sxid(
    st: &mut StreamState,
    f: &Finding,
    sxid: u32,
    pci: &Option<String>,
    link: Option<u32>,
    severity: Option<SxidSeverity>,
    cx: &mut Cx<'_>,
) {
    let pos = st.xids.iter().position(|o| {
        o.inc.kind == Kind::Sxid
            && o.inc.sxid == Some(sxid)
            && (o.inc.pci.as_deref() == pci.as_deref() || same_gpu(&o.inc.pci, pci))
    });
    if let Some(i) = pos {
        let o = &mut st.xids[i];
        extend(o, f, cx.cfg);
        if o.inc.link.is_none() {
            o.inc.link = link;
        }
        // A headline after a `Data` line, or a fatal line in a non-fatal burst, decides.
        let had = o.inc.message.as_deref().and_then(sxidcat::severity_of);
        let worse = severity == Some(SxidSeverity::Fatal) && had != Some(SxidSeverity::Fatal);
        if severity.is_some() && (had.is_none() || worse) {
            o.inc.message = Some(truncate_utf8(f.text.trim(), cx.cfg.excerpt_line_bytes));
            o.inc.hint = sxidcat::hint(sxid, severity);
        }
        cx.dirty.push(o.key);
        return;
    }
    let mut inc = new_incident(
        f,
        Kind::Sxid,
        &sxidcat::category(sxid),
        Blame::Hardware,
        &sxidcat::hint(sxid, severity),
        cx.cfg,
    );
    inc.sxid = Some(sxid);
    inc.pci.clone_from(pci);
    inc.link = link;
    inc.message = Some(truncate_utf8(f.text.trim(), cx.cfg.excerpt_line_bytes));
    cx.open_xid(st, inc, f);
}

/// What to do about a driver event without an Xid.
fn gpu_event_hint(event: GpuDriverEventKind) -> &'static str {
    match event {
        GpuDriverEventKind::InitFailed => "The driver could not initialise the GPU (RmInitAdapter failed): it is unusable. Drain it, reset the GPU or reboot the node; check the driver/firmware match and have the GPU checked if it repeats.",
        GpuDriverEventKind::GspHeartbeatTimeout => "The GPU's GSP firmware stopped sending its heartbeat (the firmware is hung), without an Xid being logged: drain the GPU and reset it (or reboot the node); update the driver if it repeats (an Xid 119/120 may follow).",
        GpuDriverEventKind::GspRpcTimeout => "A call from the driver to the GPU's GSP firmware timed out without an Xid being logged: drain the GPU and reset it (or reboot the node); update the driver if it repeats (an Xid 119/120 may follow).",
        GpuDriverEventKind::NvlinkTrainingFailed => "The driver could not train the GPU's NVLinks: NVLink/P2P traffic of this GPU will not work. Drain the node, reset the GPUs (and NVSwitches) or reboot, and check the NVLink connections if it repeats.",
    }
}

/// How many lines before a failed initialisation the driver's line about its cause may be (one
/// boot's or one probe's burst of driver lines).
const INIT_CAUSE_LINES: u64 = 100;

/// Whether a driver event opens an incident by itself. A failed initialisation opens one where
/// the driver said what failed first, in the lines before it (`failed to copy vbios`, `Cannot
/// initialize GSP firmware RM`, a timed-out GSP call: [`Evidence::DriverFailure`]), and
/// otherwise joins an open incident of its GPU (a re-initialisation that fails after an Xid 79,
/// 119 …): the shared real-world corpus labels a bare `RmInitAdapter failed` block, with no
/// cause, as not an incident (`nvrm_non_xid`), and detection keeps to that label.
///
/// [`Evidence::DriverFailure`]: crate::model::Evidence::DriverFailure
fn opens_alone(event: GpuDriverEventKind, st: &StreamState, f: &Finding) -> bool {
    !matches!(event, GpuDriverEventKind::InitFailed)
        || st
            .driver_failure
            .is_some_and(|at| f.seq.saturating_sub(at) <= INIT_CAUSE_LINES)
}

/// A driver event about one GPU that came without an Xid (see [`GpuDriverEventKind`]): repeats on
/// one GPU join one incident; a failed initialisation joins any open incident of its GPU.
pub(super) fn gpu_event(
    st: &mut StreamState,
    f: &Finding,
    event: GpuDriverEventKind,
    pci: &Option<String>,
    gpu_tag: &Option<String>,
    cx: &mut Cx<'_>,
) {
    let category = event.category();
    let alone = opens_alone(event, st, f);
    let same = |o: &Open| {
        same_gpu(&o.inc.pci, pci)
            || (gpu_tag.is_some() && o.gpu_tag.as_deref() == gpu_tag.as_deref())
    };
    // A GPU that a line of the event did not name is the one the next line names
    // ("RmInitAdapter: Cannot initialize GSP firmware RM", then "GPU 0000:01:00.0: RmInitAdapter
    // failed!").
    let unnamed = |o: &Open| o.inc.pci.is_none() && o.gpu_tag.is_none();
    let pos = st
        .xids
        .iter()
        .position(|o| {
            o.inc.kind == Kind::Xid && o.inc.category == category && (same(o) || unnamed(o))
        })
        .or_else(|| {
            if alone {
                return None;
            }
            st.xids
                .iter()
                .rposition(|o| o.inc.kind == Kind::Xid && same(o))
        });
    if let Some(i) = pos {
        let o = &mut st.xids[i];
        extend(o, f, cx.cfg);
        if o.inc.pci.is_none() && o.gpu_tag.is_none() {
            o.inc.pci.clone_from(pci);
            o.gpu_tag.clone_from(gpu_tag);
        }
        cx.dirty.push(o.key);
        return;
    }
    if !alone {
        return;
    }
    let mut inc = new_incident(
        f,
        Kind::Xid,
        category,
        Blame::Driver,
        gpu_event_hint(event),
        cx.cfg,
    );
    if event == GpuDriverEventKind::NvlinkTrainingFailed {
        inc.blame = Blame::Hardware;
    }
    inc.gpu_uuid = pci
        .as_ref()
        .and_then(|p| lookup_identity(&st.identities, p));
    inc.pci.clone_from(pci);
    inc.message = Some(truncate_utf8(f.text.trim(), cx.cfg.excerpt_line_bytes));
    let o = fresh(cx.next_key, cx.stream, inc, f);
    let mut o = o;
    o.gpu_tag.clone_from(gpu_tag);
    cx.dirty.push(o.key);
    push_xid(&mut st.xids, o, cx.cfg.max_open_xid, cx.done);
}

/// `GPU at PCI:… GPU-<uuid>`: remembers the UUID and names it on open Xids of that GPU.
pub(super) fn identity(st: &mut StreamState, pci: &str, uuid: &str, cx: &mut Cx<'_>) {
    if st.identities.len() >= MAX_IDENTITIES && !st.identities.contains_key(pci) {
        st.identities.pop_first();
    }
    st.identities
        .insert(pci.to_ascii_lowercase(), uuid.to_owned());
    for o in st.xids.iter_mut() {
        if o.inc.gpu_uuid.is_none()
            && o.inc
                .pci
                .as_deref()
                .is_some_and(|p| xidparse::same_bus(p, pci))
        {
            o.inc.gpu_uuid = Some(uuid.to_owned());
            cx.dirty.push(o.key);
        }
    }
}

/// A new open incident with the next key, starting at finding `f`.
fn fresh(next_key: &mut u64, stream: u64, inc: Incident, f: &Finding) -> Open {
    let key = *next_key;
    *next_key += 1;
    Open {
        key,
        stream,
        inc,
        last_seq: f.seq,
        last_at_ms: f.at_ms,
        headline_rule: None,
        reported: false,
        gpu_tag: None,
    }
}

/// Adds an open Xid incident, closing the oldest when `max` are open.
fn push_xid(xids: &mut Vec<Open>, o: Open, max: usize, done: &mut Vec<Update>) {
    if xids.len() >= max {
        let old = xids.remove(0);
        done.push(close(old));
    }
    xids.push(o);
}

fn lookup_identity(ids: &BTreeMap<String, String>, pci: &str) -> Option<String> {
    ids.iter()
        .find(|(p, _)| xidparse::same_bus(p, pci))
        .map(|(_, u)| u.clone())
}

pub(super) fn close(o: Open) -> Update {
    Update {
        key: o.key,
        stream: o.stream,
        incident: o.inc,
        closed: true,
        first: !o.reported,
    }
}

fn new_incident(
    f: &Finding,
    kind: Kind,
    category: &str,
    blame: Blame,
    hint: &str,
    cfg: &EngineConfig,
) -> Incident {
    Incident {
        kind,
        category: category.to_owned(),
        xid: None,
        sxid: None,
        link: None,
        pci: None,
        pid: None,
        assertion: None,
        kernel_file: None,
        python_frame: None,
        message: None,
        first_line: f.line,
        last_line: f.line,
        blame,
        hint: hint.to_owned(),
        process_name: None,
        gpu_uuid: None,
        block: None,
        thread: None,
        evidence_lines: 1,
        assert_sites: Vec::new(),
        first_offset: f.offset,
        excerpt: vec![truncate_utf8(&f.text, cfg.excerpt_line_bytes)],
        excerpt_truncated: false,
        first_at_ms: f.at_ms,
        anchor: f.offset.map(|o| (o, f.text_crc)),
        root_cause: None,
    }
}

fn extend(o: &mut Open, f: &Finding, cfg: &EngineConfig) {
    o.inc.evidence_lines += 1;
    o.inc.last_line = o.inc.last_line.max(f.line);
    o.last_seq = o.last_seq.max(f.seq);
    o.last_at_ms = o.last_at_ms.max(f.at_ms);
    push_excerpt(&mut o.inc, &f.text, cfg);
}

fn push_excerpt(inc: &mut Incident, text: &str, cfg: &EngineConfig) {
    if inc.excerpt.len() < cfg.excerpt_lines {
        inc.excerpt
            .push(truncate_utf8(text, cfg.excerpt_line_bytes));
    } else {
        inc.excerpt_truncated = true;
    }
}

fn add_site(o: &mut Open, site: &Site<'_>, cfg: &EngineConfig) {
    let Site {
        kernel_file,
        assertion,
        block,
        thread,
        category,
        hint,
    } = *site;
    let inc = &mut o.inc;
    let text = truncate_utf8(assertion, cfg.excerpt_line_bytes);
    // The first assertion gives the incident its site; the same assertion quoted first without
    // one ("Assertion `…` failed." above the kernel's own lines) takes it from the first line that
    // has one.
    let first = inc.assertion.is_none();
    let site_of_quoted =
        inc.kernel_file.is_none() && kernel_file.is_some() && inc.assertion.as_ref() == Some(&text);
    if first || site_of_quoted {
        // A kernel that printed no expression leaves the field empty for a later line's.
        inc.assertion = (!text.is_empty()).then_some(text);
        inc.kernel_file.clone_from(kernel_file);
        inc.block = block;
        inc.thread = thread;
    }
    if inc.category == "unknown" && category != "unknown" {
        inc.category = category.to_owned();
        inc.hint = hint.to_owned();
    }
    if let Some(s) = inc
        .assert_sites
        .iter_mut()
        .find(|s| s.assertion == assertion && &s.kernel_file == kernel_file)
    {
        s.threads += 1;
    } else if inc.assert_sites.len() < cfg.max_assert_sites {
        inc.assert_sites.push(AssertSite {
            kernel_file: kernel_file.clone(),
            assertion: truncate_utf8(assertion, cfg.excerpt_line_bytes),
            threads: 1,
            first_block: block,
            first_thread: thread,
        });
    }
}

/// Gives the incident the traceback that ended just before logical position `seq`, if any.
fn attach_traceback(tb: &mut PendingTraceback, o: &mut Open, seq: u64, cfg: &EngineConfig) {
    let Some(start) = tb.start_line else { return };
    if tb.frames.is_empty() || seq > tb.last_seq + cfg.traceback_attach_lines || seq < tb.last_seq {
        return;
    }
    if let Some((file, l, _)) = tb.frames.iter().rev().find(|(_, _, user)| *user) {
        o.inc.python_frame = Some(format!("{file}:{l}"));
    }
    let tb_lines: Vec<String> = tb.lines.drain(..).collect();
    if start < o.inc.first_line {
        // The traceback precedes the incident's first line: it leads the excerpt.
        o.inc.first_line = start;
        o.inc.first_offset = tb.start_offset.or(o.inc.first_offset);
        let mut excerpt = tb_lines;
        excerpt.append(&mut o.inc.excerpt);
        excerpt.truncate(cfg.excerpt_lines);
        o.inc.excerpt = excerpt;
    } else {
        for l in tb_lines {
            push_excerpt(&mut o.inc, &l, cfg);
        }
    }
    *tb = PendingTraceback::default();
}

#[cfg(test)]
mod tests {
    use super::super::{Engine, EngineConfig};
    use crate::detect::DetectorSet;
    use crate::model::{Finding, Incident, Kind};

    fn run(text: &str) -> Vec<Incident> {
        let d = DetectorSet::builtin();
        let mut e = Engine::new(EngineConfig::default());
        for (i, l) in text.lines().enumerate() {
            if let Some(ev) = d.inspect(l) {
                let n = i as u64 + 1;
                e.observe(0, Finding::new(n, n, None, 0, l, ev));
            }
        }
        e.flush_all();
        e.drain()
            .into_iter()
            .filter(|u| u.closed)
            .map(|u| u.incident)
            .collect()
    }

    #[test]
    fn an_assertion_quoted_without_its_site_takes_the_site_of_the_next_line() {
        let text = "Assertion `idx_dim >= 0 && idx_dim < index_size && \"index out of bounds\"` failed.
/pytorch/aten/src/ATen/native/cuda/ScatterGatherKernel.cu:115: operator(): block: [14592,0,0], thread: [21,0,0] Assertion `idx_dim >= 0 && idx_dim < index_size && \"index out of bounds\"` failed.
";
        let incs = run(text);
        assert_eq!(incs.len(), 1, "{incs:#?}");
        assert_eq!(incs[0].category, "scatter_gather_index");
        assert_eq!(
            incs[0].kernel_file.as_deref(),
            Some("ScatterGatherKernel.cu:115")
        );
        assert_eq!(incs[0].block, Some([14592, 0, 0]));
    }

    #[test]
    fn a_generic_cuda_check_then_its_out_of_memory_is_one_oom_incident() {
        assert!(crate::detect::rules::HEADLINE_RULES
            .iter()
            .any(|r| r.name == super::GENERIC_CUDA_RULE));
        // cutorch's check, hard-wrapped so that its error code went to the next line.
        let text =
            "THCudaCheck FAIL file=/home/u/torch/extra/cutorch/lib/THC/generic/THCStorage.cu line=
66 error=2 : out of memory
./networks/modules/SpatialConvolution1_fw.lua:19: cuda runtime error (2) : out of memory
";
        let incs = run(text);
        assert_eq!(incs.len(), 1, "{incs:#?}");
        assert_eq!(
            (incs[0].kind, incs[0].category.as_str()),
            (Kind::Oom, "cuda_oom")
        );
        // A named CUDA error stays its own incident before an out-of-memory.
        let text = "RuntimeError: CUDA error: an illegal memory access was encountered
RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB
";
        let incs = run(text);
        assert_eq!(incs.len(), 2, "{incs:#?}");
        assert_eq!(incs[0].category, "illegal_memory_access");
        // An OOM further on (another rank's) does not take over an unnamed CUDA error.
        let text = "[rank3]: RuntimeError: CUDA error: something this catalog does not know
[rank3]: Traceback (most recent call last):
[rank3]:   File \"train.py\", line 10, in <module>
[rank5]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB
";
        let incs = run(text);
        assert_eq!(
            incs.iter().map(|i| i.kind).collect::<Vec<_>>(),
            vec![Kind::CudaError, Kind::Oom],
            "{incs:#?}"
        );
    }

    #[test]
    fn child_failed_summary_names_the_root_cause() {
        // Template: torch/distributed/elastic/multiprocessing/errors/__init__.py.
        let text = "[rank1]: RuntimeError: CUDA error: an illegal memory access was encountered
E1202 10:00:05.000000 100 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: 1) local_rank: 1 (pid: 4242) of binary: /usr/bin/python3
torch.distributed.elastic.multiprocessing.errors.ChildFailedError: 
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2024-12-02_10:00:05
  host      : gpu-node-7
  rank      : 1 (local_rank: 1)
  exitcode  : 1 (pid: 4242)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================
";
        let incs = run(text);
        assert_eq!(incs.len(), 1, "{incs:#?}");
        let i = &incs[0];
        assert_eq!(i.kind, Kind::CudaError);
        assert_eq!(i.category, "illegal_memory_access");
        let rc = i.root_cause.as_ref().unwrap();
        assert_eq!(
            (rc.rank, rc.local_rank, rc.exitcode),
            (Some(1), Some(1), Some(1))
        );
        assert_eq!(rc.host.as_deref(), Some("gpu-node-7"));
        assert_eq!(rc.error_file, None);
        let msg = i.message.as_deref().unwrap();
        assert!(
            msg.starts_with("root cause: rank 1 (local_rank 1) on gpu-node-7, exitcode 1 | "),
            "{msg}"
        );
        assert!(msg.contains("illegal memory access"), "{msg}");
    }

    #[test]
    fn agent_line_in_bare_logging_format_is_a_child_failure() {
        // Python's default logging format, indented as a paste in a report keeps it.
        let text = "        WARNING:torch.distributed.elastic.multiprocessing.api:Sending process 77 closing signal SIGTERM
        ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 0 (pid: 76) of binary: /usr/bin/python3
        Traceback (most recent call last):
";
        let incs = run(text);
        assert_eq!(incs.len(), 1, "{incs:#?}");
        assert_eq!(
            (incs[0].kind, incs[0].category.as_str()),
            (Kind::NcclError, "torchrun_child_failed")
        );
    }

    #[test]
    fn other_launchers_summaries_open_an_incident_or_join_one() {
        for (text, category) in [
            (
                "Primary job  terminated normally, but 1 process returned
a non-zero exit code. Per user-direction, the job has been aborted.
--------------------------------------------------------------------------
",
                "mpirun_job_aborted",
            ),
            (
                "[1,0]<stderr>:RuntimeError: Horovod detected that one or more processes exited with non-zero status, thus causing the job to be terminated. The first process to do so was:
Process name: elastic-test-worker-1[0]
Exit code: 137
",
                "mpirun_job_aborted",
            ),
        ] {
            let incs = run(text);
            assert_eq!(incs.len(), 1, "{incs:#?}");
            assert_eq!(
                (incs[0].kind, incs[0].category.as_str()),
                (Kind::NcclError, category),
                "{text}"
            );
        }
        // After the rank's own error the summary is part of that incident, not another one.
        let incs = run("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 79.15 GiB total capacity)
[1,0]<stderr>:RuntimeError: Horovod detected that one or more processes exited with non-zero status, thus causing the job to be terminated. The first process to do so was:
");
        assert_eq!(incs.len(), 1, "{incs:#?}");
        assert_eq!(incs[0].kind, Kind::Oom);
    }

    #[test]
    fn child_failed_summary_alone_is_its_own_incident() {
        // The worker's error went elsewhere; the launcher's stream carries only the summary.
        let text = "E1202 10:00:05.000000 100 torch/distributed/elastic/multiprocessing/api.py:869] failed (exitcode: -6) local_rank: 3 (pid: 5151) of binary: /usr/bin/python3
Traceback (most recent call last):
  File \"/usr/local/bin/torchrun\", line 8, in <module>
    sys.exit(main())
torch.distributed.elastic.multiprocessing.errors.ChildFailedError: 
============================================================
train.py FAILED
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2024-12-02_10:00:05
  host      : gpu-node-9
  rank      : 11 (local_rank: 3)
  exitcode  : -6 (pid: 5151)
  error_file: <N/A>
  traceback : Signal 6 (SIGABRT) received by PID 5151
============================================================
";
        let incs = run(text);
        assert_eq!(incs.len(), 1, "{incs:#?}");
        let i = &incs[0];
        assert_eq!(
            (i.kind, i.category.as_str()),
            (Kind::NcclError, "torchrun_child_failed")
        );
        let rc = i.root_cause.as_ref().unwrap();
        assert_eq!(
            (rc.rank, rc.local_rank, rc.exitcode),
            (Some(11), Some(3), Some(-6))
        );
        let msg = i.message.as_deref().unwrap();
        assert!(
            msg.starts_with("root cause: rank 11 (local_rank 3) on gpu-node-9, exitcode -6"),
            "{msg}"
        );
    }
}
