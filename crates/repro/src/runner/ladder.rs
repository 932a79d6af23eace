//! The ladder of attempts for one incident and the fold of their results into its answer.

use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::discover::Found;
use crate::manifest::LoadedManifest;
use crate::result::AttemptResult;

use super::{Attempt, Mode, Outcome, Rec, ReproRequest, ReproResult, ReproRunner};

impl ReproRunner {
    /// The ladder (reproduction.md Part 2 (b), "Default ladder per incident").
    pub(super) fn ladder(
        &self,
        found: &Found,
        req: &ReproRequest,
        gpu: Option<&str>,
        dir: &Path,
    ) -> Vec<Rec> {
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

    pub(super) fn count(&self, mode: Mode, outcome: Outcome, took: Option<Duration>) {
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
}

/// Folds the attempts into the incident's answer.
pub(super) fn fold(recs: Vec<Rec>, gpu_unhealthy: bool, t0: Instant) -> ReproResult {
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
