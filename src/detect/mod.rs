//! Detection: turns one line of text into at most one piece of evidence.
//!
//! Two literal passes keep ordinary lines cheap. The *gate* is one Aho-Corasick automaton over a
//! short list of opener literals (few enough for its SIMD "Teddy" searcher); a chunk scanner runs
//! it over whole buffers, so an ordinary line costs no per-line work at all. Only a line the gate
//! hits — and the few lines right after it, where hint lines live — goes to [`DetectorSet::inspect`],
//! which finds every detailed literal on that line and runs the regexes of the families they
//! belong to, in a fixed precedence order.

pub mod kernel_assert;
pub mod numeric;
pub mod rules;
pub mod sxid;
pub mod traceback;
pub mod xid;
pub mod xid_catalog;

use crate::model::{Blame, Evidence, Kind};
use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use regex::Regex;
use rules::{CONTINUATION_LITERALS, HEADLINE_RULES, NUMERIC_LITERALS};

/// Opener literals: a failure's first line (or a traceback that precedes its headline) always
/// contains one of these. Hint lines that follow are caught by the follow window instead.
const GATE_LITERALS: &[&str] = &[
    "Assertion `",
    "device-side assert",
    "CUDA error",
    "CUDA Error",
    // Old THC wording "cuda runtime error (N) : …"; keyed on "runtime error (" so the gate does not
    // share a prefix with the ubiquitous lowercase "cuda" of ordinary lines ("device cuda:0").
    "runtime error (",
    "CUDA_ERROR_",
    "ErrorAssert",
    "CUBLAS_STATUS_",
    "CUDNN_STATUS_",
    "out of memory",
    "OutOfMemoryError",
    "busy or unavailable",
    "illegal memory access",
    "misaligned address",
    "illegal instruction",
    "unspecified launch failure",
    "uncorrectable",
    "no kernel image",
    "too many resources",
    "driver version is insufficient",
    "Watchdog caught",
    "NCCL error",
    "NCCL WARN",
    "ncclUnhandled",
    "ncclSystemError",
    "ncclInternalError",
    "ncclInvalidUsage",
    "ncclRemoteError",
    "unhandled system error",
    "unhandled cuda error",
    "remote process exited",
    "NVRM",
    "fallen off the bus",
    // NVSwitch errors (`nvidia-nvswitchN: SXid (PCI:…): …`); GPU driver events are `NVRM` lines.
    "SXid (",
    "Traceback (most recent",
    "File \"",
    "Cell In[",
];

/// A rule from the configuration's `rules:` list.
#[derive(Debug, Clone)]
pub struct UserRule {
    pub name: String,
    pub regex: Regex,
    /// Literals one of which every match contains (given in config or extracted from the regex).
    pub literals: Vec<String>,
    pub kind: Kind,
    pub category: String,
    pub blame: Blame,
    pub hint: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Owner {
    Assert,
    Headline(usize),
    User(usize),
    Continuation,
    Numeric,
    TracebackStart,
    Frame,
    Xid,
    GpuAt,
    Mention,
    Fallen,
    Sxid,
    GpuEvent,
}

/// Options that change what detection reports.
#[derive(Debug, Clone)]
pub struct DetectOptions {
    /// A loss scale at or below this is a collapse (`loss_scale_collapse`).
    pub min_loss_scale: f64,
    /// Lines after a gate hit that are inspected even without an opener literal.
    pub follow_lines: u32,
}

impl Default for DetectOptions {
    fn default() -> Self {
        DetectOptions {
            min_loss_scale: 1.0,
            follow_lines: 8,
        }
    }
}

/// Error building a detector set (only user rules can cause one).
#[derive(Debug, thiserror::Error)]
pub enum DetectError {
    #[error("building the literal prefilter")]
    Automaton(#[source] aho_corasick::BuildError),
}

/// All detectors, compiled once and shared read-only.
#[derive(Debug)]
pub struct DetectorSet {
    gate: AhoCorasick,
    detail: AhoCorasick,
    owners: Vec<Owner>,
    user: Vec<UserRule>,
    options: DetectOptions,
}

impl DetectorSet {
    /// Builds the built-in detectors plus `user` rules.
    pub fn new(user: Vec<UserRule>, options: DetectOptions) -> Result<Self, DetectError> {
        let mut gate: Vec<String> = GATE_LITERALS.iter().map(|s| (*s).to_owned()).collect();
        gate.extend(NUMERIC_LITERALS.iter().map(|s| (*s).to_owned()));
        let mut detail: Vec<String> = Vec::new();
        let mut owners = Vec::new();
        let mut add = |lit: &str, o: Owner| {
            detail.push(lit.to_owned());
            owners.push(o);
        };
        add("Assertion `", Owner::Assert);
        for (i, r) in HEADLINE_RULES.iter().enumerate() {
            for l in r.literals {
                add(l, Owner::Headline(i));
            }
        }
        for (i, r) in user.iter().enumerate() {
            for l in &r.literals {
                add(l, Owner::User(i));
                gate.push(l.clone());
            }
        }
        for l in CONTINUATION_LITERALS {
            add(l, Owner::Continuation);
        }
        for l in NUMERIC_LITERALS {
            add(l, Owner::Numeric);
        }
        add("Traceback (most recent call last)", Owner::TracebackStart);
        add("File \"", Owner::Frame);
        add("Cell In[", Owner::Frame);
        add("Cell In [", Owner::Frame);
        add("NVRM: Xid", Owner::Xid);
        add("NVRM: GPU at PCI:", Owner::GpuAt);
        add("NVRM: The NVIDIA GPU", Owner::Mention);
        add("fallen off the bus", Owner::Fallen);
        add("SXid (", Owner::Sxid);
        for l in [
            "RmInitAdapter failed",
            "rm_init_adapter",
            "heartbeat timed out",
            "Heartbeat timed out",
            "rpcRecvPoll timedout",
            "training complete!",
            "Pre Link Training ALI",
        ] {
            add(l, Owner::GpuEvent);
        }
        gate.sort();
        gate.dedup();
        let gate = AhoCorasickBuilder::new()
            .match_kind(MatchKind::LeftmostFirst)
            .build(&gate)
            .map_err(DetectError::Automaton)?;
        let detail = AhoCorasickBuilder::new()
            .match_kind(MatchKind::Standard)
            .build(&detail)
            .map_err(DetectError::Automaton)?;
        Ok(DetectorSet {
            gate,
            detail,
            owners,
            user,
            options,
        })
    }

    /// The built-in detectors alone, with default options.
    pub fn builtin() -> Self {
        // The built-in literal lists are static and tested; building them cannot fail.
        match DetectorSet::new(Vec::new(), DetectOptions::default()) {
            Ok(d) => d,
            Err(e) => unreachable!("built-in detector set failed to build: {e}"),
        }
    }

    pub fn options(&self) -> &DetectOptions {
        &self.options
    }

    /// Position of the first gate literal in `hay` at or after `from`, if any.
    #[inline]
    pub fn next_gate_hit(&self, hay: &[u8], from: usize) -> Option<usize> {
        let input = aho_corasick::Input::new(hay).range(from..);
        self.gate.find(input).map(|m| m.start())
    }

    /// Does `line` contain an opener literal?
    #[inline]
    pub fn gate_matches(&self, line: &[u8]) -> bool {
        self.gate.is_match(line)
    }

    /// Returns the evidence `line` carries, if any.
    pub fn inspect(&self, line: &str) -> Option<Evidence> {
        let mut flags = 0u16;
        let mut headlines: Vec<usize> = Vec::new();
        let mut users: Vec<usize> = Vec::new();
        for m in self.detail.find_overlapping_iter(line) {
            match self.owners[m.pattern().as_usize()] {
                Owner::Headline(i) => headlines.push(i),
                Owner::User(i) => users.push(i),
                o => flags |= flag(o),
            }
        }
        if flags == 0 && headlines.is_empty() && users.is_empty() {
            return None;
        }
        let has = |o: Owner| flags & flag(o) != 0;
        if has(Owner::Xid) {
            if let Some(e) = xid::parse_xid(line) {
                return Some(e);
            }
        }
        if has(Owner::GpuAt) {
            if let Some(e) = xid::parse_identity(line) {
                return Some(e);
            }
        }
        if has(Owner::Sxid) {
            if let Some(e) = sxid::parse(line) {
                return Some(e);
            }
        }
        if has(Owner::GpuEvent) {
            if let Some(e) = xid::parse_gpu_event(line) {
                return Some(e);
            }
        }
        if has(Owner::Assert) {
            if let Some(e) = kernel_assert::parse(line) {
                return Some(e);
            }
        }
        users.sort_unstable();
        users.dedup();
        for i in users {
            let r = &self.user[i];
            if r.regex.is_match(line) {
                return Some(Evidence::Headline {
                    kind: r.kind,
                    category: r.category.clone().into(),
                    blame: r.blame,
                    hint: r.hint.clone().into(),
                    rule: r.name.clone().into(),
                });
            }
        }
        let best = headlines
            .iter()
            .map(|&i| &HEADLINE_RULES[i])
            .filter(|r| {
                r.requires_any.is_empty() || r.requires_any.iter().any(|s| line.contains(s))
            })
            .max_by_key(|r| r.priority);
        if let Some(r) = best {
            return Some(Evidence::Headline {
                kind: r.kind,
                category: r.category.into(),
                blame: r.blame,
                hint: r.hint.into(),
                rule: r.name.into(),
            });
        }
        if has(Owner::Numeric) {
            if let Some(e) = numeric::parse(line, self.options.min_loss_scale) {
                return Some(e);
            }
        }
        if has(Owner::Fallen) {
            if let Some(e) = xid::parse_fallen_off_bus(line) {
                return Some(e);
            }
        }
        if has(Owner::Mention) {
            if let Some(e) = xid::parse_mention(line) {
                return Some(e);
            }
        }
        if has(Owner::TracebackStart) {
            return Some(Evidence::TracebackStart);
        }
        if has(Owner::Frame) {
            if let Some(e) = traceback::parse_frame(line) {
                return Some(e);
            }
        }
        if has(Owner::Continuation) {
            return Some(Evidence::Continuation);
        }
        None
    }
}

fn flag(o: Owner) -> u16 {
    match o {
        Owner::Assert => 1,
        Owner::Continuation => 1 << 1,
        Owner::Numeric => 1 << 2,
        Owner::TracebackStart => 1 << 3,
        Owner::Frame => 1 << 4,
        Owner::Xid => 1 << 5,
        Owner::GpuAt => 1 << 6,
        Owner::Mention => 1 << 7,
        Owner::Fallen => 1 << 8,
        Owner::Sxid => 1 << 9,
        Owner::GpuEvent => 1 << 10,
        Owner::Headline(_) | Owner::User(_) => 0,
    }
}

/// Literals usable as a prefilter for `pattern`: every match of the regex contains one of them.
///
/// Returns `None` when no such finite set of literals of at least 3 bytes exists; the config
/// validator then asks the user for an explicit `contains:` list.
pub fn required_literals(pattern: &str) -> Option<Vec<String>> {
    use regex_syntax::hir::literal::Extractor;
    let hir = regex_syntax::ParserBuilder::new()
        .build()
        .parse(pattern)
        .ok()?;
    let seq = Extractor::new().extract(&hir);
    let lits = seq.literals()?;
    if lits.is_empty() {
        return None;
    }
    let mut out = Vec::new();
    for l in lits {
        let s = std::str::from_utf8(l.as_bytes()).ok()?;
        if s.len() < 3 {
            return None;
        }
        out.push(s.to_owned());
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_lines_pass_the_gate_unseen() {
        let d = DetectorSet::builtin();
        for l in [
            "Epoch 3:  45%|#####     | 450/1000 [01:23<01:42,  5.36it/s, loss=0.4211]",
            "step 412 loss 1.2345 lr 3.0e-04 grad_norm 0.512 tokens/s 123456",
            "[rank3]:[W1202 10:00:01.123456 ProcessGroupNCCL.cpp:1234] Warning: using default stream",
            "cuda available: True, device count: 8, using device cuda:3",
        ] {
            assert!(!d.gate_matches(l.as_bytes()), "{l}");
            assert_eq!(d.inspect(l), None, "{l}");
        }
    }

    #[test]
    fn specific_headline_beats_generic() {
        let d = DetectorSet::builtin();
        match d.inspect("RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasSgemm(...)`") {
            Some(Evidence::Headline { category, .. }) => assert_eq!(category, "cublas_execution_failed"),
            other => panic!("{other:?}"),
        }
        match d.inspect("RuntimeError: CUDA error: out of memory") {
            Some(Evidence::Headline { kind, .. }) => assert_eq!(kind, Kind::Oom),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn hint_lines_are_continuations() {
        let d = DetectorSet::builtin();
        assert_eq!(
            d.inspect("Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions."),
            Some(Evidence::Continuation)
        );
        assert_eq!(
            d.inspect("CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect."),
            Some(Evidence::Continuation)
        );
    }

    #[test]
    fn connection_refused_needs_nccl_context() {
        let d = DetectorSet::builtin();
        assert_eq!(
            d.inspect("wandb: Network error (ConnectionError), Connection refused"),
            None
        );
        assert!(matches!(
            d.inspect("NCCL WARN socketStartConnect: Connect to 10.0.0.2<4321> failed : Connection refused"),
            Some(Evidence::Headline { .. })
        ));
    }

    #[test]
    fn required_literals_from_regex() {
        assert_eq!(
            required_literals("MyLib fatal: (.*)"),
            Some(vec!["MyLib fatal: ".to_owned()])
        );
        assert_eq!(required_literals(".*"), None);
    }
}
