//! Values that cross module boundaries: what a finding says, what an incident is.
//!
//! Nothing here does I/O or knows about tasks; sources, detection, the incident engine, the
//! store and the sinks all speak in these types, so each of them can be tested alone.

mod record;

pub use record::{
    AttemptReport, ExceptionReport, GpuRef, IncidentRecord, IncidentSource, KernelAssertionReport,
    KernelSourceKind, KubeRef, NvmlSourceKind, ReplayDone, ReplayRuntime, ReproReport, SlurmRef,
};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::fmt;

/// Text that is usually a built-in constant (a family name, a hint) and only sometimes owned
/// (user rules): no allocation per finding for the built-in case.
pub type RuleText = Cow<'static, str>;

/// The incident families of the public contract (`scan --format jsonl`, the API, metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    DeviceAssert,
    CudaError,
    Oom,
    NcclError,
    Numeric,
    Xid,
    /// An NVSwitch error (`SXid`) from the `nvidia-nvswitch` driver.
    Sxid,
}

impl Kind {
    pub const ALL: [Kind; 7] = [
        Kind::DeviceAssert,
        Kind::CudaError,
        Kind::Oom,
        Kind::NcclError,
        Kind::Numeric,
        Kind::Xid,
        Kind::Sxid,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::DeviceAssert => "device_assert",
            Kind::CudaError => "cuda_error",
            Kind::Oom => "oom",
            Kind::NcclError => "nccl_error",
            Kind::Numeric => "numeric",
            Kind::Xid => "xid",
            Kind::Sxid => "sxid",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whose fault an incident most likely is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Blame {
    Application,
    Hardware,
    Driver,
    Unknown,
}

impl Blame {
    pub fn as_str(self) -> &'static str {
        match self {
            Blame::Application => "application",
            Blame::Hardware => "hardware",
            Blame::Driver => "driver",
            Blame::Unknown => "unknown",
        }
    }

    pub fn parse(s: &str) -> Option<Blame> {
        [
            Blame::Application,
            Blame::Hardware,
            Blame::Driver,
            Blame::Unknown,
        ]
        .into_iter()
        .find(|b| b.as_str() == s)
    }
}

impl fmt::Display for Blame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One piece of evidence found on one line.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    /// 1-based line number within the stream (physical: what people and editors count).
    pub line: u64,
    /// Logical position within the stream: like `line`, but a record split by a container runtime
    /// (CRI `P`, Docker's 16 KiB pieces) counts once. Grouping windows measure in these, so a
    /// wrapped log groups exactly like the plain one.
    pub seq: u64,
    /// Byte offset of the line's start in its source, where the source has offsets.
    pub offset: Option<u64>,
    /// Milliseconds on the caller's clock when the line was read (0 in one-shot scans).
    pub at_ms: u64,
    /// The line as decoded, cut to [`MAX_FINDING_TEXT`] bytes: the excerpt and the message
    /// keep at most that much, so a finding never carries a whole over-long line.
    pub text: String,
    /// CRC-32 of the whole line (before the cut): what anchors an incident's identity.
    pub text_crc: u32,
    pub evidence: Evidence,
}

/// The most of a line a finding keeps (at least the engine's excerpt line bound).
pub const MAX_FINDING_TEXT: usize = 4096;

impl Finding {
    /// A finding for the line `full`, keeping at most [`MAX_FINDING_TEXT`] bytes of it.
    pub fn new(
        line: u64,
        seq: u64,
        offset: Option<u64>,
        at_ms: u64,
        full: &str,
        evidence: Evidence,
    ) -> Finding {
        Finding {
            line,
            seq,
            offset,
            at_ms,
            text: truncate_utf8(full, MAX_FINDING_TEXT),
            text_crc: crc32fast::hash(full.as_bytes()),
            evidence,
        }
    }
}

/// What a line says. Strong evidence opens incidents; context only joins them.
#[derive(Debug, Clone, PartialEq)]
pub enum Evidence {
    /// A CUDA device `assert` line: `File.cu:L: fn: block: [..], thread: [..] Assertion `e` failed.`
    KernelAssert {
        kernel_file: Option<String>,
        assertion: String,
        block: Option<[u32; 3]>,
        thread: Option<[u32; 3]>,
        category: RuleText,
        hint: RuleText,
    },
    /// The headline of a failure (an exception line, an NCCL error, a numeric blow-up).
    Headline {
        kind: Kind,
        category: RuleText,
        blame: Blame,
        hint: RuleText,
        rule: RuleText,
    },
    /// A line that belongs to an open failure but never starts one (hint lines, C++ frames).
    Continuation,
    /// `Traceback (most recent call last):`
    TracebackStart,
    /// One Python frame `File "f", line N, in fn` (or a notebook `Cell In[N], line L`).
    Frame {
        file: String,
        line: u32,
        function: Option<String>,
        user_code: bool,
    },
    /// `NVRM: Xid (PCI:dddd:bb:dd): N, pid=…, name=…, …`
    Xid {
        xid: u32,
        pci: Option<String>,
        pid: Option<u32>,
        process: Option<String>,
        detail: String,
    },
    /// The driver's "has fallen off the bus" wording without an Xid number on the line.
    FallenOffBus { pci: Option<String> },
    /// `nvidia-nvswitchN: SXid (PCI:dddd:bb:dd.f): NNNNN, <severity>, Link LL <detail>` and the
    /// `Severity …`/`Data {…}` lines that follow it.
    Sxid {
        sxid: u32,
        /// The switch's PCI id, as written.
        pci: Option<String>,
        /// The `N` of `nvidia-nvswitchN`.
        switch: Option<u32>,
        link: Option<u32>,
        severity: Option<SxidSeverity>,
        detail: String,
    },
    /// A driver event about one GPU that carries no Xid number (a failed initialisation, a GSP
    /// firmware timeout, an NVLink training failure).
    GpuDriverEvent {
        event: GpuDriverEventKind,
        /// The GPU's PCI id where the line names it.
        pci: Option<String>,
        /// The driver's own GPU tag (`GPU0`, `GPU6`) where the line has no PCI id.
        gpu_tag: Option<String>,
    },
    /// `NVRM: GPU at PCI:dddd:bb:dd: GPU-<uuid>`: ties a bus id to a UUID.
    GpuIdentity { pci: String, uuid: String },
    /// `NVRM: The NVIDIA GPU dddd:bb:dd.f`: the first line of the multi-line bus-loss message.
    GpuMention { pci: String },
    /// An `NVRM:` line that reports a failed step of the driver without being an event of its
    /// own (`NVRM: failed to copy vbios to system memory.`, `RmInitAdapter: Cannot initialize
    /// GSP firmware RM`, an `nvAssertOkFailedNoLog` timeout): the cause whose outcome a
    /// following `RmInitAdapter failed` reports.
    DriverFailure,
}

/// The severity word of an SXid line, as the NVSwitch driver prints it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SxidSeverity {
    Fatal,
    NonFatal,
    Correctable,
}

/// Driver events about a GPU that come without an Xid number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuDriverEventKind {
    /// `RmInitAdapter failed!`: the GPU failed to initialise.
    InitFailed,
    /// `GSP RM heartbeat timed out`, `Heartbeat timed out`: the GSP firmware's heartbeat stopped
    /// (`_kgspIsHeartbeatTimedOut`, kernel_gsp.c): the firmware itself is hung.
    GspHeartbeatTimeout,
    /// `rpcRecvPoll timedout for fn N`: one RPC to the GSP firmware went unanswered.
    GspRpcTimeout,
    /// `Timedout while checking to see if training complete!` and similar NVLink training errors.
    NvlinkTrainingFailed,
}

impl GpuDriverEventKind {
    /// The incident category of the event.
    pub fn category(self) -> &'static str {
        match self {
            GpuDriverEventKind::InitFailed => "rm_init_adapter_failed",
            GpuDriverEventKind::GspHeartbeatTimeout => "gsp_heartbeat_timeout",
            GpuDriverEventKind::GspRpcTimeout => "gsp_rpc_timeout",
            GpuDriverEventKind::NvlinkTrainingFailed => "nvlink_training_failed",
        }
    }
}

/// A deduplicated kernel assertion seen in an incident, with how many threads reported it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AssertSite {
    pub kernel_file: Option<String>,
    pub assertion: String,
    pub threads: u64,
    pub first_block: Option<[u32; 3]>,
    pub first_thread: Option<[u32; 3]>,
}

/// The first failed worker named by torchrun's `ChildFailedError` summary ("Root Cause (first
/// observed failure)"): which rank failed first, where, and how.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RootCause {
    pub rank: Option<u32>,
    pub local_rank: Option<u32>,
    pub exitcode: Option<i32>,
    pub pid: Option<u32>,
    pub host: Option<String>,
    pub error_file: Option<String>,
    pub time: Option<String>,
}

/// One failure, grouped from all its lines. The public fields follow DESIGN.md's `scan` contract.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Incident {
    pub kind: Kind,
    pub category: String,
    pub xid: Option<u32>,
    /// NVSwitch SXid number (kind `sxid` only); `xid` is null for these.
    #[serde(default)]
    pub sxid: Option<u32>,
    /// NVLink port of the switch (SXid) where the line names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<u32>,
    pub pci: Option<String>,
    pub pid: Option<u32>,
    pub assertion: Option<String>,
    pub kernel_file: Option<String>,
    pub python_frame: Option<String>,
    pub message: Option<String>,
    pub first_line: u64,
    pub last_line: u64,
    pub blame: Blame,
    pub hint: String,
    /// Extra detail beyond the contract.
    pub process_name: Option<String>,
    pub gpu_uuid: Option<String>,
    pub block: Option<[u32; 3]>,
    pub thread: Option<[u32; 3]>,
    /// Number of evidence lines folded into this incident.
    pub evidence_lines: u64,
    pub assert_sites: Vec<AssertSite>,
    /// Byte offset of the first evidence line in its source, where known.
    pub first_offset: Option<u64>,
    /// Bounded excerpt of the evidence lines (see `EngineConfig::excerpt_lines`).
    pub excerpt: Vec<String>,
    pub excerpt_truncated: bool,
    /// When the first evidence line was read, on the caller's clock (ms).
    pub first_at_ms: u64,
    /// Offset and CRC-32 of the line that opened the incident. Unlike `first_line`, which moves
    /// back when a preceding traceback is attached, the anchor never changes: it is what makes
    /// an incident's identity stable across re-reads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anchor: Option<(u64, u32)>,
    /// The root cause torchrun's `ChildFailedError` summary names, when the failure has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_cause: Option<RootCause>,
}

/// Cuts `s` to at most `max` bytes on a character boundary, appending `…` when it cut.
pub fn truncate_utf8(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max;
    while end > 0 && !s.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = s[..end].to_owned();
    out.push('…');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn findings_keep_at_least_the_excerpt_and_hash_the_whole_line() {
        let cfg = crate::incidents::EngineConfig::default();
        assert!(cfg.excerpt_line_bytes <= MAX_FINDING_TEXT);
        let long = "x".repeat(100_000);
        let f = Finding::new(1, 1, None, 0, &long, Evidence::Continuation);
        assert!(f.text.len() <= MAX_FINDING_TEXT + '…'.len_utf8());
        assert_eq!(f.text_crc, crc32fast::hash(long.as_bytes()));
    }

    #[test]
    fn kind_round_trips() {
        for k in Kind::ALL {
            assert_eq!(Kind::parse(k.as_str()), Some(k));
        }
    }

    #[test]
    fn truncate_respects_char_boundaries() {
        assert_eq!(truncate_utf8("héllo", 2), "h…");
        assert_eq!(truncate_utf8("abc", 3), "abc");
    }
}
