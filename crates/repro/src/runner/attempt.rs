//! One attempt: its timeout, identity, directories, environment and the sandboxed child.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::manifest::{LoadedManifest, ManifestError};
use crate::process::{self, ChildSpec, Identity};
use crate::result::{self, AttemptResult};

use super::{error_chain, Attempt, Mode, Outcome, Rec, ReproRunner};

const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

impl ReproRunner {
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
        // SAFETY: geteuid takes no arguments, touches no memory and cannot fail (POSIX).
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
    pub(super) fn attempt(
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
                tracing::warn!(error = %error_chain(&e), "Debug-state manifest rejected.");
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
                tracing::warn!(dir = %dir.display(), error = %error_chain(&e), "Cannot create the replay directory.");
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
                tracing::warn!(error = %error_chain(&e), "Cannot start the replay harness.");
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
