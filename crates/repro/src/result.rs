//! Reading what one replay attempt produced.
//!
//! The harness writes `result.json` (schema `assertwatch.repro-result/v1`, docs/replay.md) as the
//! job's user, so the daemon reads it like any other untrusted file: no symlinks, a regular file,
//! at most the size cap, and only the few fields the incident needs, each bounded. When the file
//! is missing or invalid, the outcome comes from the exit status instead, per the table in
//! reproduction.md Part 2 (b): the daemon trusts `result.json` first, and a harness that did not
//! write one is a `harness_error` (or `timeout` when the daemon killed it).

use std::fs::OpenOptions;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use crate::process::Exit;
use crate::{Mode, Outcome};

/// The result schema this reader understands.
pub const RESULT_SCHEMA: &str = "assertwatch.repro-result/v1";
/// Default cap of `result.json` (reproduction.md "Sane default limits").
pub const DEFAULT_MAX_RESULT_BYTES: u64 = 256 * 1024;

const MAX_MESSAGE_CHARS: usize = 2048;
const MAX_SHORT_CHARS: usize = 512;

/// The exception the replay raised.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExceptionInfo {
    #[serde(rename = "type")]
    pub kind: String,
    pub message: String,
}

/// The first CUDA kernel assertion line the harness captured.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KernelAssertion {
    /// `file:line` as printed by the device `assert`, e.g. `…/Loss.cu:95`.
    pub location: String,
    pub function: Option<String>,
    pub assertion: Option<String>,
    /// Failing threads counted by the harness.
    pub threads: Option<u64>,
}

/// The parts of one attempt's result that the runner uses.
#[derive(Debug, Clone, Default)]
pub struct AttemptResult {
    pub outcome: Option<Outcome>,
    pub reason: Option<String>,
    pub python_frame: Option<String>,
    pub exception: Option<ExceptionInfo>,
    pub kernel_assertion: Option<KernelAssertion>,
    pub weights_exact: Option<bool>,
    pub compiled: Option<bool>,
}

fn bounded(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_owned();
    }
    let mut out: String = s.chars().take(max).collect();
    out.push('…');
    out
}

fn str_field(v: &Value, key: &str, max: usize) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(|s| bounded(s, max))
}

/// Reads `result.json` safely. `None` when it is missing, too large, not a regular file, not
/// JSON, or not the v1 schema.
pub fn read(path: &Path, max_bytes: u64) -> Option<Value> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut data = Vec::new();
    file.take(max_bytes + 1).read_to_end(&mut data).ok()?;
    if data.len() as u64 > max_bytes {
        return None;
    }
    let v: Value = serde_json::from_slice(&data).ok()?;
    (v.get("schema").and_then(Value::as_str) == Some(RESULT_SCHEMA)).then_some(v)
}

/// Picks the incident's fields out of a parsed `result.json`. The outcome is normalised to the
/// mode that ran: a raised error in `cpu` is `reproduced_cpu_only`, in a GPU mode `reproduced`.
pub fn interpret(v: &Value, mode: Mode) -> AttemptResult {
    let outcome = v
        .get("outcome")
        .and_then(Value::as_str)
        .and_then(Outcome::from_harness)
        .map(|o| match o {
            Outcome::Reproduced | Outcome::ReproducedCpuOnly if mode == Mode::Cpu => {
                Outcome::ReproducedCpuOnly
            }
            Outcome::Reproduced | Outcome::ReproducedCpuOnly => Outcome::Reproduced,
            other => other,
        });
    let python_frame = v.get("failing_frame").and_then(|f| {
        let file = f.get("file")?.as_str()?;
        let line = f.get("line")?.as_u64()?;
        Some(format!("{}:{line}", bounded(file, MAX_SHORT_CHARS)))
    });
    let exception = v.get("exception").and_then(|e| {
        Some(ExceptionInfo {
            kind: str_field(e, "type", MAX_SHORT_CHARS)?,
            message: str_field(e, "message", MAX_MESSAGE_CHARS).unwrap_or_default(),
        })
    });
    let kernel_assertion = v
        .get("kernel_assertions")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .and_then(|k| {
            let file = k.get("file")?.as_str()?;
            let location = match k.get("line").and_then(Value::as_u64) {
                Some(line) => format!("{}:{line}", bounded(file, MAX_SHORT_CHARS)),
                None => bounded(file, MAX_SHORT_CHARS),
            };
            Some(KernelAssertion {
                location,
                function: str_field(k, "function", MAX_SHORT_CHARS),
                assertion: str_field(k, "assertion", MAX_SHORT_CHARS),
                threads: k.get("threads").and_then(Value::as_u64),
            })
        });
    let det = v.get("determinism");
    AttemptResult {
        outcome,
        reason: str_field(v, "reason", 64).filter(|r| is_code(r)),
        python_frame,
        exception,
        kernel_assertion,
        weights_exact: det
            .and_then(|d| d.get("weights_exact"))
            .and_then(Value::as_bool),
        compiled: det.and_then(|d| d.get("compiled")).and_then(Value::as_bool),
    }
}

/// A reason from the harness is kept only if it looks like a snake_case code.
fn is_code(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_')
}

/// The outcome when `result.json` is missing or invalid (reproduction.md Part 2 (b), exit codes).
pub fn from_exit(exit: Option<Exit>) -> (Outcome, &'static str) {
    match exit {
        Some(Exit::Code(0)) => (Outcome::HarnessError, "result_missing"),
        Some(Exit::Code(2)) => (Outcome::HarnessError, "manifest_rejected"),
        Some(Exit::Code(3)) => (Outcome::HarnessError, "state_unusable"),
        // Environment mismatch (torch/CUDA version, device absent): the step could not run here.
        Some(Exit::Code(4)) => (Outcome::Skipped, "environment_mismatch"),
        Some(Exit::Code(5)) => (Outcome::HarnessError, "entrypoint_failed"),
        Some(Exit::Code(_)) => (Outcome::HarnessError, "harness_failed"),
        Some(Exit::Signal(_)) | None => (Outcome::HarnessError, "harness_crashed"),
    }
}
