//! The reproduction runner: admission, the ladder of attempts, and the incident's answer.
//!
//! One [`ReproRunner`] per daemon. For each incident it finds the recorded step
//! ([`crate::discover`]), decides whether a replay may start at all (enabled, a global
//! concurrency limit, a per-job hourly limit, one replay per GPU, duplicate suppression), runs the
//! ladder of reproduction.md Part 2 (b) — synchronous GPU on the flagged step, then on the step
//! before it, then the CPU (always once when the GPU gave only a kernel assertion, for the
//! readable message), with GPU modes skipped when the caller says the GPU is unhealthy — and folds
//! the attempts into one [`ReproResult`] for the incident's `repro` field. Admission never waits:
//! a flood of forged asserts gets `skipped` answers (`busy`, `rate_limited`, `duplicate`) at once
//! instead of a flood of processes. Each attempt is the same code path whether the daemon or
//! `assertwatch replay --manifest` asked for it ([`ReproRunner::replay_manifest`]).
//!
//! This module holds the public types and the entry points; `admission` the limits, `ladder`
//! the order of attempts and the fold of their results, `attempt` one sandboxed replay.

use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize, Serializer};
use tokio::sync::Semaphore;

use crate::discover::{self, IncidentKey};
use crate::manifest::{ManifestError, ManifestLimits};
use crate::metrics::Metrics;
use crate::process::{MemoryScope, ResourceLimits};
use crate::result::{self, AttemptResult, ExceptionInfo, KernelAssertion};

mod admission;
mod attempt;
mod ladder;

use admission::Admission;
pub use admission::ExternalSlot;
use ladder::fold;

/// `error` and its causes, outermost first, joined by `": "` (what `anyhow` prints for `{:#}`),
/// for log lines: each error's own text names only its own context.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

/// How a step is replayed. Spelled as in the manifest contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Mode {
    #[serde(rename = "sync-gpu")]
    SyncGpu,
    #[serde(rename = "cpu")]
    Cpu,
    #[serde(rename = "sanitizer")]
    Sanitizer,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::SyncGpu => "sync-gpu",
            Mode::Cpu => "cpu",
            Mode::Sanitizer => "sanitizer",
        }
    }

    /// Whether the mode needs the GPU.
    pub fn is_gpu(self) -> bool {
        !matches!(self, Mode::Cpu)
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "sync-gpu" => Ok(Mode::SyncGpu),
            "cpu" => Ok(Mode::Cpu),
            "sanitizer" => Ok(Mode::Sanitizer),
            _ => Err(format!(
                "{s:?} is not a mode; use sync-gpu, cpu or sanitizer"
            )),
        }
    }
}

/// The outcome classes of DESIGN.md "Reproduction outcomes".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Reproduced,
    ReproducedCpuOnly,
    NotReproduced,
    NoDebugState,
    HarnessError,
    Timeout,
    Skipped,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Reproduced => "reproduced",
            Outcome::ReproducedCpuOnly => "reproduced_cpu_only",
            Outcome::NotReproduced => "not_reproduced",
            Outcome::NoDebugState => "no_debug_state",
            Outcome::HarnessError => "harness_error",
            Outcome::Timeout => "timeout",
            Outcome::Skipped => "skipped",
        }
    }

    /// An outcome the harness may write in `result.json` (never `no_debug_state`).
    pub fn from_harness(s: &str) -> Option<Outcome> {
        Some(match s {
            "reproduced" => Outcome::Reproduced,
            "reproduced_cpu_only" => Outcome::ReproducedCpuOnly,
            "not_reproduced" => Outcome::NotReproduced,
            "harness_error" => Outcome::HarnessError,
            "timeout" => Outcome::Timeout,
            "skipped" => Outcome::Skipped,
            _ => return None,
        })
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Validated runner settings.
#[derive(Debug, Clone)]
pub struct ReproConfig {
    pub enabled: bool,
    /// Globs of state roots (the recorder's `root`), or of `manifest.json` files.
    pub roots: Vec<String>,
    /// Modes in the order the ladder may use them.
    pub modes: Vec<Mode>,
    /// Time limit of one attempt, passed to the harness as `{timeout_s}`.
    pub timeout: Duration,
    /// Extra time the daemon gives the harness past `timeout` to kill its worker and write its
    /// own `timeout` result before the daemon kills the harness's process group.
    pub harness_margin: Duration,
    /// Time between SIGTERM and SIGKILL when the daemon kills a replay.
    pub grace: Duration,
    /// The interpreter `{python}` stands for; `None` uses the manifest's `software.executable`.
    pub python: Option<PathBuf>,
    /// Replays running at once on this node (requests past it are `skipped`/`busy`).
    pub max_concurrent: usize,
    /// Replays started per job per hour (requests past it are `skipped`/`rate_limited`).
    pub max_per_hour: u32,
    /// Processes started per incident at most.
    pub max_attempts: usize,
    /// Largest `result.json` read.
    pub result_max_bytes: u64,
    /// Bytes kept of each of the harness's own stdout and stderr (the worker's streams are
    /// capped by the harness itself).
    pub output_cap: u64,
    /// The daemon's state directory; attempts go to `<state_dir>/replays/<incident>/<n>-<mode>/`.
    pub state_dir: PathBuf,
    pub manifest: ManifestLimits,
    /// Replay manifests whose `job.uid` is 0 (as root). Off by default.
    pub allow_root_jobs: bool,
    pub limits: ResourceLimits,
    /// Memory limit through `systemd-run --scope`; `None` leaves memory unlimited.
    pub memory_scope: Option<MemoryScope>,
    /// Checks a GPU (UUID or index, as it will be pinned) right before a GPU-mode replay on it;
    /// `false` skips the GPU modes (reason `gpu_probe_failed`) and the ladder goes on to `cpu`.
    /// The daemon plugs its CUDA health probe in here.
    pub gpu_check: Option<GpuCheck>,
}

/// A health check of one GPU, blocking; see [`ReproConfig::gpu_check`].
#[derive(Clone)]
pub struct GpuCheck(pub std::sync::Arc<dyn Fn(&str) -> bool + Send + Sync>);

impl std::fmt::Debug for GpuCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("GpuCheck(..)")
    }
}

/// Default of [`ReproConfig::modes`].
pub const DEFAULT_MODES: [Mode; 2] = [Mode::SyncGpu, Mode::Cpu];
/// Default of [`ReproConfig::timeout`].
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);
/// Default of [`ReproConfig::max_concurrent`].
pub const DEFAULT_MAX_CONCURRENT: usize = 1;
/// Default of [`ReproConfig::max_per_hour`].
pub const DEFAULT_MAX_PER_HOUR: u32 = 10;

impl ReproConfig {
    /// Defaults (reproduction.md "Sane default limits") with the given state directory.
    pub fn new(state_dir: impl Into<PathBuf>) -> Self {
        ReproConfig {
            enabled: false,
            roots: Vec::new(),
            modes: DEFAULT_MODES.to_vec(),
            timeout: DEFAULT_TIMEOUT,
            harness_margin: Duration::from_secs(15),
            grace: Duration::from_secs(10),
            python: None,
            max_concurrent: DEFAULT_MAX_CONCURRENT,
            max_per_hour: DEFAULT_MAX_PER_HOUR,
            max_attempts: 3,
            result_max_bytes: result::DEFAULT_MAX_RESULT_BYTES,
            output_cap: 1024 * 1024,
            state_dir: state_dir.into(),
            manifest: ManifestLimits::default(),
            allow_root_jobs: false,
            limits: ResourceLimits::default(),
            memory_scope: None,
            gpu_check: None,
        }
    }
}

/// What the daemon knows about an incident when it asks for a reproduction.
#[derive(Debug, Clone)]
pub struct ReproRequest {
    /// Names the attempt directories; characters outside `[A-Za-z0-9._-]` are replaced.
    pub incident_id: String,
    /// The log the incident was read from; matched against the manifests' `log_file`.
    pub log_path: Option<PathBuf>,
    /// The pid in the incident, matched against the manifests' `pid`.
    pub pid: Option<u32>,
    pub at: SystemTime,
    /// GPU UUID (preferred) or index to pin with `CUDA_VISIBLE_DEVICES`.
    pub gpu: Option<String>,
    /// The incident's category (bounded snake_case); used for duplicate suppression and to tell
    /// an unrelated error (an OOM in a replay of an index assert) from a reproduction.
    pub category: String,
    /// The GPU's latest Xid says drain or reset: no GPU modes.
    pub gpu_unhealthy: bool,
}

impl ReproRequest {
    pub fn new(incident_id: impl Into<String>, at: SystemTime) -> Self {
        ReproRequest {
            incident_id: incident_id.into(),
            log_path: None,
            pid: None,
            at,
            gpu: None,
            category: "unknown".into(),
            gpu_unhealthy: false,
        }
    }
}

fn secs<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64((d.as_secs_f64() * 1000.0).round() / 1000.0)
}

/// One process (or one decision not to start one) of the ladder.
#[derive(Debug, Clone, Serialize)]
pub struct Attempt {
    pub mode: Mode,
    pub outcome: Outcome,
    pub reason: Option<String>,
    /// `step.global_step` of the replayed entry.
    pub step: u64,
    #[serde(rename = "duration_s", serialize_with = "secs")]
    pub duration: Duration,
    pub manifest: PathBuf,
    pub result_path: Option<PathBuf>,
}

/// The answer for the incident's `repro` field.
#[derive(Debug, Clone, Serialize)]
pub struct ReproResult {
    pub outcome: Outcome,
    pub reason: Option<String>,
    /// The mode of the decisive attempt.
    pub mode: Option<Mode>,
    pub attempts: Vec<Attempt>,
    /// `file:line` of the failing user frame.
    pub python_frame: Option<String>,
    pub exception: Option<ExceptionInfo>,
    pub kernel_assertion: Option<KernelAssertion>,
    /// `step.global_step` of the decisive attempt.
    pub step: Option<u64>,
    #[serde(rename = "duration_s", serialize_with = "secs")]
    pub duration: Duration,
    pub result_path: Option<PathBuf>,
}

impl ReproResult {
    fn bare(outcome: Outcome, reason: &str, duration: Duration) -> Self {
        ReproResult {
            outcome,
            reason: Some(reason.to_owned()),
            mode: None,
            attempts: Vec::new(),
            python_frame: None,
            exception: None,
            kernel_assertion: None,
            step: None,
            duration,
            result_path: None,
        }
    }
}

/// An attempt and what its result said.
struct Rec {
    attempt: Attempt,
    res: AttemptResult,
}

struct Inner {
    cfg: ReproConfig,
    metrics: Metrics,
    permits: Arc<Semaphore>,
    admission: Mutex<Admission>,
    gpus: Mutex<HashSet<String>>,
}

/// The runner. Cheap to clone; clones share limits and state.
#[derive(Clone)]
pub struct ReproRunner {
    inner: Arc<Inner>,
}

fn sanitize_id(id: &str) -> String {
    let s: String = id
        .chars()
        .take(64)
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.starts_with('.') {
        format!("incident{s}")
    } else {
        s
    }
}

impl ReproRunner {
    pub fn new(cfg: ReproConfig, metrics: Metrics) -> Self {
        let permits = Arc::new(Semaphore::new(cfg.max_concurrent.max(1)));
        ReproRunner {
            inner: Arc::new(Inner {
                cfg,
                metrics,
                permits,
                admission: Mutex::new(Admission::default()),
                gpus: Mutex::new(HashSet::new()),
            }),
        }
    }

    pub fn config(&self) -> &ReproConfig {
        &self.inner.cfg
    }

    /// Reproduces an incident: discovery, admission, the ladder. Never waits for a slot: past
    /// the limits the answer is `skipped` with reason `busy`, `rate_limited`, `duplicate` or
    /// `disabled`, at once. The work runs on a blocking thread.
    pub async fn run_for(&self, request: ReproRequest) -> ReproResult {
        let t0 = Instant::now();
        if !self.inner.cfg.enabled {
            return self.early(Outcome::Skipped, "disabled", t0);
        }
        let Ok(permit) = self.inner.permits.clone().try_acquire_owned() else {
            return self.early(Outcome::Skipped, "busy", t0);
        };
        let this = self.clone();
        let job = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            this.run_blocking(&request, t0)
        });
        match job.await {
            Ok(r) => r,
            Err(_) => self.early(Outcome::HarnessError, "runner_failed", t0),
        }
    }

    /// One replay by hand (`assertwatch replay --manifest FILE --mode M`): the same attempt code
    /// as the daemon's ladder, one mode, no discovery, no admission limits, and no state-root
    /// check (the operator named the file). Blocking.
    pub fn replay_manifest(&self, manifest: &Path, mode: Mode) -> ReproResult {
        let t0 = Instant::now();
        let m = match crate::manifest::load(manifest, &self.inner.cfg.manifest) {
            Ok(m) => m,
            Err(e) => {
                self.reject(&e);
                tracing::warn!(error = %error_chain(&e), "Debug-state manifest rejected.");
                return self.early(Outcome::HarnessError, e.reason(), t0);
            }
        };
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        let dir = self.incident_dir(&format!("manual-{ms}-{}", std::process::id()));
        let gpu = m.doc.cuda_device.as_ref().and_then(|d| d.uuid.clone());
        let rec = self.attempt(&m, mode, &dir, 1, gpu.as_deref(), "unknown");
        fold(vec![rec], false, t0)
    }

    fn early(&self, outcome: Outcome, reason: &str, t0: Instant) -> ReproResult {
        self.inner
            .metrics
            .runs
            .with_label_values(&["none", outcome.as_str()])
            .inc();
        ReproResult::bare(outcome, reason, t0.elapsed())
    }

    fn reject(&self, e: &ManifestError) {
        self.inner
            .metrics
            .rejected
            .with_label_values(&[e.reason()])
            .inc();
    }

    fn incident_dir(&self, id: &str) -> PathBuf {
        self.inner
            .cfg
            .state_dir
            .join("replays")
            .join(sanitize_id(id))
    }

    fn run_blocking(&self, req: &ReproRequest, t0: Instant) -> ReproResult {
        let cfg = &self.inner.cfg;
        let key = IncidentKey {
            log_path: req.log_path.as_deref(),
            pid: req.pid,
            at: req.at,
        };
        let search = discover::find(&cfg.roots, &key, &cfg.manifest);
        for e in &search.rejected {
            self.reject(e);
            tracing::debug!(error = %error_chain(&e), "Debug-state manifest rejected.");
        }
        let Some(found) = search.found else {
            return self.early(Outcome::NoDebugState, "no_manifest", t0);
        };
        let job = &found.flagged.doc.job;
        let job_key = format!("{}/{}", job.name, job.rank.unwrap_or(0));
        if let Err(reason) = self.admit(&job_key, found.flagged.doc.step.global_step, &req.category)
        {
            return self.early(Outcome::Skipped, reason, t0);
        }
        let gpu = req.gpu.clone().or_else(|| {
            found
                .flagged
                .doc
                .cuda_device
                .as_ref()
                .and_then(|d| d.uuid.clone())
        });
        let dir = self.incident_dir(&req.incident_id);
        let recs = self.ladder(&found, req, gpu.as_deref(), &dir);
        fold(recs, req.gpu_unhealthy, t0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incident_ids_become_safe_directory_names() {
        assert_eq!(sanitize_id("inc-42"), "inc-42");
        assert_eq!(sanitize_id("../../etc"), "incident.._.._etc");
        assert_eq!(sanitize_id(""), "incident");
        assert_eq!(sanitize_id("a/b c"), "a_b_c");
    }

    #[test]
    fn result_serialises_in_snake_case() {
        let r = ReproResult::bare(Outcome::ReproducedCpuOnly, "x", Duration::from_millis(1500));
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["outcome"], "reproduced_cpu_only");
        assert_eq!(v["duration_s"], 1.5);
        let a = serde_json::to_value(Mode::SyncGpu).unwrap();
        assert_eq!(a, "sync-gpu");
    }
}
