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

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize, Serializer};
use tokio::sync::Semaphore;

use crate::discover::{self, Found, IncidentKey};
use crate::manifest::{LoadedManifest, ManifestError, ManifestLimits};
use crate::metrics::Metrics;
use crate::process::{self, ChildSpec, Identity, MemoryScope, ResourceLimits};
use crate::result::{self, AttemptResult, ExceptionInfo, KernelAssertion};

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

#[derive(Default)]
struct Admission {
    per_job: HashMap<String, VecDeque<Instant>>,
    seen: HashMap<(String, u64, String), Instant>,
}

const HOUR: Duration = Duration::from_secs(3600);
const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

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

/// Holds one GPU for the duration of a ladder.
struct GpuGuard<'a> {
    set: &'a Mutex<HashSet<String>>,
    key: String,
}

impl Drop for GpuGuard<'_> {
    fn drop(&mut self) {
        if let Ok(mut s) = self.set.lock() {
            s.remove(&self.key);
        }
    }
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
                tracing::warn!(error = %e, "Debug-state manifest rejected.");
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
            tracing::debug!(error = %e, "Debug-state manifest rejected.");
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

    /// Per-job hourly limit and duplicate suppression, counted when a replay is admitted.
    fn admit(&self, job: &str, step: u64, category: &str) -> Result<(), &'static str> {
        let now = Instant::now();
        let Ok(mut a) = self.inner.admission.lock() else {
            return Err("busy");
        };
        a.seen.retain(|_, t| now.duration_since(*t) < HOUR);
        a.per_job.retain(|_, q| {
            while q.front().is_some_and(|t| now.duration_since(*t) >= HOUR) {
                q.pop_front();
            }
            !q.is_empty()
        });
        let dedupe = (job.to_owned(), step, category.to_owned());
        if a.seen.contains_key(&dedupe) {
            return Err("duplicate");
        }
        let q = a.per_job.entry(job.to_owned()).or_default();
        if q.len() >= self.inner.cfg.max_per_hour as usize {
            return Err("rate_limited");
        }
        q.push_back(now);
        a.seen.insert(dedupe, now);
        Ok(())
    }

    fn lock_gpu(&self, key: &str) -> Option<GpuGuard<'_>> {
        let mut set = self.inner.gpus.lock().ok()?;
        if !set.insert(key.to_owned()) {
            return None;
        }
        Some(GpuGuard {
            set: &self.inner.gpus,
            key: key.to_owned(),
        })
    }

    /// The ladder (reproduction.md Part 2 (b), "Default ladder per incident").
    fn ladder(&self, found: &Found, req: &ReproRequest, gpu: Option<&str>, dir: &Path) -> Vec<Rec> {
        let cfg = &self.inner.cfg;
        let mut steps: Vec<&LoadedManifest> = vec![&found.flagged];
        steps.extend(found.previous.as_ref());
        let mut recs: Vec<Rec> = Vec::new();
        let mut spawned = 0usize;
        let mut exact = false;
        let mut gpu_hit: Option<usize> = None;
        let mut gpu_clean: HashSet<usize> = HashSet::new();
        let mut cpu_done = false;
        let wants_gpu = cfg.modes.iter().any(|m| m.is_gpu());
        let gpu_key = gpu.unwrap_or("default").to_owned();
        let guard = (wants_gpu && !req.gpu_unhealthy)
            .then(|| self.lock_gpu(&gpu_key))
            .flatten();
        // The GPU is checked once it is ours and before anything runs on it.
        let probe_failed = guard.is_some()
            && cfg
                .gpu_check
                .as_ref()
                .is_some_and(|check| !(check.0)(&gpu_key));
        let n = |recs: &Vec<Rec>| recs.len() + 1;
        for &mode in &cfg.modes {
            if exact || (gpu_hit.is_some() && cpu_done) {
                break;
            }
            if mode.is_gpu() {
                if gpu_hit.is_some() {
                    continue;
                }
                let skip = if req.gpu_unhealthy {
                    Some("gpu_unhealthy")
                } else if probe_failed {
                    Some("gpu_probe_failed")
                } else if guard.is_none() {
                    Some("gpu_busy")
                } else {
                    None
                };
                if let Some(reason) = skip {
                    recs.push(self.not_started(&found.flagged, mode, reason));
                    continue;
                }
                for (i, m) in steps.iter().enumerate() {
                    if spawned >= cfg.max_attempts {
                        break;
                    }
                    spawned += 1;
                    let rec = self.attempt(m, mode, dir, n(&recs), gpu, &req.category);
                    let outcome = rec.attempt.outcome;
                    let frame = rec.res.python_frame.is_some();
                    recs.push(rec);
                    match outcome {
                        Outcome::Reproduced => {
                            gpu_hit = Some(i);
                            exact = frame;
                            break;
                        }
                        Outcome::NotReproduced => {
                            gpu_clean.insert(i);
                        }
                        Outcome::HarnessError => {}
                        _ => break,
                    }
                }
            } else {
                cpu_done = true;
                // The step that failed on the GPU; otherwise the flagged one, then the one before
                // it unless the GPU already ran that one clean.
                let targets: Vec<usize> = match gpu_hit {
                    Some(i) => vec![i],
                    None => (0..steps.len())
                        .filter(|i| *i == 0 || !gpu_clean.contains(i))
                        .collect(),
                };
                for i in targets {
                    if spawned >= cfg.max_attempts {
                        break;
                    }
                    spawned += 1;
                    let rec = self.attempt(steps[i], mode, dir, n(&recs), gpu, &req.category);
                    let outcome = rec.attempt.outcome;
                    let frame = rec.res.python_frame.is_some();
                    recs.push(rec);
                    match outcome {
                        Outcome::ReproducedCpuOnly => {
                            exact = exact || frame;
                            break;
                        }
                        Outcome::NotReproduced | Outcome::HarnessError => {}
                        _ => break,
                    }
                }
            }
        }
        drop(guard);
        recs
    }

    fn not_started(&self, m: &LoadedManifest, mode: Mode, reason: &str) -> Rec {
        self.count(mode, Outcome::Skipped, None);
        Rec {
            attempt: Attempt {
                mode,
                outcome: Outcome::Skipped,
                reason: Some(reason.to_owned()),
                step: m.doc.step.global_step,
                duration: Duration::ZERO,
                manifest: m.path.clone(),
                result_path: None,
            },
            res: AttemptResult::default(),
        }
    }

    fn count(&self, mode: Mode, outcome: Outcome, took: Option<Duration>) {
        let mx = &self.inner.metrics;
        mx.runs
            .with_label_values(&[mode.as_str(), outcome.as_str()])
            .inc();
        if let Some(d) = took {
            mx.duration
                .with_label_values(&[mode.as_str()])
                .observe(d.as_secs_f64());
        }
    }

    /// The attempt's time limit: the configured `timeout`, or less when the manifest estimates its
    /// step time: 5 × step + 120 s (`sync-gpu`), 50 × step + 120 s (`cpu`), 60 × step + 300 s
    /// (`sanitizer`), per the mode table of reproduction.md Part 2 (b).
    fn attempt_timeout(&self, mode: Mode, m: &LoadedManifest) -> Duration {
        let cap = self.inner.cfg.timeout;
        let Some(step) = m.doc.replay.estimates.as_ref().and_then(|e| e.step_seconds) else {
            return cap;
        };
        let (k, base) = match mode {
            Mode::SyncGpu => (5.0, 120.0),
            Mode::Cpu => (50.0, 120.0),
            Mode::Sanitizer => (60.0, 300.0),
        };
        // step_seconds is validated finite and within 0..=1e9, so this is a finite positive value.
        cap.min(Duration::from_secs_f64(k * step + base))
    }

    /// Who the child runs as: the job's uid/gid when the daemon is root, never root unless
    /// `allow_root_jobs`; a non-root daemon runs only its own user's manifests.
    fn identity_for(&self, m: &LoadedManifest) -> Result<Option<Identity>, ManifestError> {
        let job = &m.doc.job;
        if job.uid == 0 && !self.inner.cfg.allow_root_jobs {
            return Err(ManifestError::RootJob {
                path: m.path.clone(),
            });
        }
        // SAFETY: geteuid has no preconditions.
        let euid = unsafe { libc::geteuid() };
        if euid == 0 {
            // job.uid/gid are range-checked to at most 2^32 - 2 by the manifest rules.
            let (uid, gid) = (job.uid as u32, job.gid as u32);
            return Ok((uid != 0).then_some(Identity { uid, gid }));
        }
        if job.uid == u64::from(euid) {
            return Ok(None);
        }
        Err(ManifestError::ForeignUid {
            path: m.path.clone(),
            uid: job.uid,
            daemon: euid,
        })
    }

    /// Creates `<incident>/<n>-<mode>[-k]` (0755, the daemon's) and its `out` (0700, the job's).
    fn attempt_dirs(
        &self,
        dir: &Path,
        n: usize,
        mode: Mode,
        id: Option<Identity>,
    ) -> std::io::Result<(PathBuf, PathBuf)> {
        let mut b = std::fs::DirBuilder::new();
        b.recursive(true).mode(0o755).create(dir)?;
        let mut one = std::fs::DirBuilder::new();
        one.mode(0o755);
        let base = format!("{n}-{mode}");
        let mut attempt_dir = dir.join(&base);
        let mut k = 0;
        loop {
            match one.create(&attempt_dir) {
                Ok(()) => break,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && k < 100 => {
                    k += 1;
                    attempt_dir = dir.join(format!("{base}-{k}"));
                }
                Err(e) => return Err(e),
            }
        }
        let out = attempt_dir.join("out");
        std::fs::DirBuilder::new().mode(0o700).create(&out)?;
        if let Some(id) = id {
            std::os::unix::fs::chown(&out, Some(id.uid), Some(id.gid))?;
        }
        Ok((attempt_dir, out))
    }

    fn env_for(
        &self,
        m: &LoadedManifest,
        mode: Mode,
        gpu: Option<&str>,
        home: &Path,
    ) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> = vec![
            (
                "PATH".into(),
                std::env::var("PATH").unwrap_or_else(|_| DEFAULT_PATH.into()),
            ),
            ("HOME".into(), home.to_string_lossy().into_owned()),
            (
                "LANG".into(),
                std::env::var("LANG").unwrap_or_else(|_| "C.UTF-8".into()),
            ),
        ];
        env.extend(m.doc.replay.env.iter().map(|(k, v)| (k.clone(), v.clone())));
        env.push(("PYTHONUNBUFFERED".into(), "1".into()));
        env.push(("PYTHONFAULTHANDLER".into(), "1".into()));
        // Read once at CUDA/c10 initialisation, so they must be in the environment at exec time
        // (c10/cuda/CUDAMiscFunctions.cpp, reproduction.md §1.1). PYTORCH_USE_CUDA_DSA is the
        // runtime switch; TORCH_USE_CUDA_DSA is a build-time macro kept for parity (§1.2).
        // TORCH_COMPILE_DISABLE keeps the replay eager, out of CUDA graphs.
        let pin = gpu.map(|g| ("CUDA_VISIBLE_DEVICES".to_owned(), g.to_owned()));
        match mode {
            Mode::SyncGpu => {
                for k in [
                    "CUDA_LAUNCH_BLOCKING",
                    "PYTORCH_USE_CUDA_DSA",
                    "TORCH_USE_CUDA_DSA",
                    "TORCH_COMPILE_DISABLE",
                ] {
                    env.push((k.into(), "1".into()));
                }
                env.extend(pin);
            }
            // An empty CUDA_VISIBLE_DEVICES hides every GPU (CUDA environment variables doc).
            Mode::Cpu => {
                env.push(("CUDA_VISIBLE_DEVICES".into(), String::new()));
                env.push(("TORCH_COMPILE_DISABLE".into(), "1".into()));
            }
            // The harness sets the sanitizer's variables and wraps its worker in
            // compute-sanitizer; the daemon only pins the GPU.
            Mode::Sanitizer => env.extend(pin),
        }
        env
    }

    /// One attempt: checks, directories, the child, and what its result says.
    fn attempt(
        &self,
        m: &LoadedManifest,
        mode: Mode,
        dir: &Path,
        n: usize,
        gpu: Option<&str>,
        category: &str,
    ) -> Rec {
        let cfg = &self.inner.cfg;
        let t0 = Instant::now();
        let mut attempt = Attempt {
            mode,
            outcome: Outcome::HarnessError,
            reason: None,
            step: m.doc.step.global_step,
            duration: Duration::ZERO,
            manifest: m.path.clone(),
            result_path: None,
        };
        let finish = |mut attempt: Attempt,
                      outcome: Outcome,
                      reason: Option<String>,
                      res: AttemptResult,
                      ran: bool| {
            attempt.outcome = outcome;
            attempt.reason = reason;
            attempt.duration = t0.elapsed();
            self.count(mode, outcome, ran.then_some(attempt.duration));
            Rec { attempt, res }
        };
        if !m.supports(mode.as_str()) {
            return finish(
                attempt,
                Outcome::Skipped,
                Some("mode_not_supported".into()),
                AttemptResult::default(),
                false,
            );
        }
        if m.doc.replay.requires_world_size.unwrap_or(1) > 1 {
            return finish(
                attempt,
                Outcome::Skipped,
                Some("needs_distributed".into()),
                AttemptResult::default(),
                false,
            );
        }
        let checked = self
            .identity_for(m)
            .and_then(|id| m.verify_files(&cfg.manifest).map(|()| id));
        let identity = match checked {
            Ok(id) => id,
            Err(e) => {
                self.reject(&e);
                tracing::warn!(error = %e, "Debug-state manifest rejected.");
                return finish(
                    attempt,
                    Outcome::HarnessError,
                    Some(e.reason().into()),
                    AttemptResult::default(),
                    false,
                );
            }
        };
        let (attempt_dir, out_dir) = match self.attempt_dirs(dir, n, mode, identity) {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "Cannot create the replay directory.");
                return finish(
                    attempt,
                    Outcome::HarnessError,
                    Some("out_dir_unusable".into()),
                    AttemptResult::default(),
                    false,
                );
            }
        };
        let result_path = out_dir.join("result.json");
        attempt.result_path = Some(result_path.clone());
        let python = cfg
            .python
            .as_ref()
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_else(|| m.doc.software.executable.clone());
        let timeout = self.attempt_timeout(mode, m);
        let timeout_s = format!("{}", timeout.as_secs_f64());
        // Placeholders replace whole elements only; the manifest rules guarantee no other brace.
        let argv: Vec<String> = m
            .argv
            .iter()
            .map(|a| match a.as_str() {
                "{python}" => python.clone(),
                "{manifest}" => m.path.to_string_lossy().into_owned(),
                "{mode}" => mode.as_str().to_owned(),
                "{result}" => result_path.to_string_lossy().into_owned(),
                "{out_dir}" => out_dir.to_string_lossy().into_owned(),
                "{timeout_s}" => timeout_s.clone(),
                other => other.to_owned(),
            })
            .collect();
        let home = if identity.is_some() {
            out_dir.clone()
        } else {
            std::env::var_os("HOME").map_or_else(|| out_dir.clone(), PathBuf::from)
        };
        let cwd = Path::new(&m.doc.replay.cwd);
        let spec = ChildSpec {
            argv,
            env: self.env_for(m, mode, gpu, &home),
            cwd: if cwd.is_dir() {
                cwd.to_path_buf()
            } else {
                out_dir.clone()
            },
            identity,
            limits: cfg.limits,
            memory_scope: cfg.memory_scope.clone(),
            stdout_path: attempt_dir.join("harness.stdout.log"),
            stderr_path: attempt_dir.join("harness.stderr.log"),
            output_cap: cfg.output_cap,
            timeout: timeout + cfg.harness_margin,
            grace: cfg.grace,
        };
        let report = match process::run(&spec) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "Cannot start the replay harness.");
                return finish(
                    attempt,
                    Outcome::HarnessError,
                    Some("spawn_failed".into()),
                    AttemptResult::default(),
                    false,
                );
            }
        };
        if report.survivors > 0 {
            tracing::warn!(
                pgid = report.pid,
                survivors = report.survivors,
                "Replay processes survived SIGKILL."
            );
        }
        let parsed =
            result::read(&result_path, cfg.result_max_bytes).map(|v| result::interpret(&v, mode));
        let (outcome, reason, res) = if report.timed_out {
            (
                Outcome::Timeout,
                Some("deadline".to_owned()),
                parsed.unwrap_or_default(),
            )
        } else {
            match parsed {
                Some(res) if res.outcome.is_some() => {
                    let outcome = res.outcome.unwrap_or(Outcome::HarnessError);
                    (outcome, res.reason.clone(), res)
                }
                _ => {
                    let (o, r) = result::from_exit(report.exit);
                    (o, Some(r.to_owned()), AttemptResult::default())
                }
            }
        };
        let (outcome, reason) = unrelated(outcome, reason, &res, category);
        finish(attempt, outcome, reason, res, true)
    }
}

/// A replay that failed with an out-of-memory error did not reproduce an assert: that is an
/// unrelated error (`harness_error`, reproduction.md Part 2 (c)), unless the incident was an OOM.
fn unrelated(
    outcome: Outcome,
    reason: Option<String>,
    res: &AttemptResult,
    category: &str,
) -> (Outcome, Option<String>) {
    let reproduced = matches!(outcome, Outcome::Reproduced | Outcome::ReproducedCpuOnly);
    let oom = res.exception.as_ref().is_some_and(|e| {
        e.message.contains("out of memory") || e.kind.contains("OutOfMemoryError")
    });
    if reproduced && oom && !category.contains("oom") {
        return (Outcome::HarnessError, Some("unrelated_error".into()));
    }
    (outcome, reason)
}

/// Folds the attempts into the incident's answer.
fn fold(recs: Vec<Rec>, gpu_unhealthy: bool, t0: Instant) -> ReproResult {
    let find = |o: Outcome| recs.iter().find(|r| r.attempt.outcome == o);
    let gpu = find(Outcome::Reproduced);
    let cpu = find(Outcome::ReproducedCpuOnly);
    let mut out = ReproResult::bare(Outcome::Skipped, "no_mode", Duration::ZERO);
    if let Some(g) = gpu.or(cpu) {
        out.outcome = g.attempt.outcome;
        out.reason = g.attempt.reason.clone();
        out.mode = Some(g.attempt.mode);
        out.step = Some(g.attempt.step);
        out.result_path = g.attempt.result_path.clone();
        out.python_frame = g
            .res
            .python_frame
            .clone()
            .or_else(|| cpu.and_then(|c| c.res.python_frame.clone()));
        // The CPU's message is the readable one (reproduction.md §1.12); the GPU's otherwise.
        out.exception = cpu
            .and_then(|c| c.res.exception.clone())
            .or_else(|| g.res.exception.clone());
        out.kernel_assertion = gpu.and_then(|g| g.res.kernel_assertion.clone());
    } else if let Some(r) = find(Outcome::NotReproduced) {
        out.outcome = Outcome::NotReproduced;
        let weak = recs
            .iter()
            .any(|r| r.res.weights_exact == Some(false) || r.res.compiled == Some(true));
        out.reason = Some(
            if gpu_unhealthy {
                "hardware_suspected"
            } else if weak {
                "nondeterministic_suspected"
            } else {
                "data_elsewhere"
            }
            .into(),
        );
        out.mode = Some(r.attempt.mode);
        out.step = Some(r.attempt.step);
        out.result_path = r.attempt.result_path.clone();
    } else if let Some(r) = find(Outcome::Timeout)
        .or_else(|| find(Outcome::HarnessError))
        .or_else(|| recs.last())
    {
        out.outcome = r.attempt.outcome;
        out.reason = r.attempt.reason.clone();
        out.mode = Some(r.attempt.mode);
        out.step = Some(r.attempt.step);
        out.result_path = r.attempt.result_path.clone();
        out.kernel_assertion = r.res.kernel_assertion.clone();
        out.python_frame = r.res.python_frame.clone();
        out.exception = r.res.exception.clone();
    }
    out.attempts = recs.into_iter().map(|r| r.attempt).collect();
    out.duration = t0.elapsed();
    out
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
