//! Admission: the per-job hourly limit, duplicate suppression and one replay per GPU, for the
//! local ladder and for replays that run elsewhere (a Kubernetes pod, [`ExternalSlot`]).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::{Mode, Outcome, ReproRunner};

const HOUR: Duration = Duration::from_secs(3600);

#[derive(Default)]
pub(super) struct Admission {
    per_job: HashMap<String, VecDeque<Instant>>,
    seen: HashMap<(String, u64, String), Instant>,
}

/// Holds one GPU for the duration of a ladder (or of an [`ExternalSlot`]).
pub(super) struct GpuGuard<'a> {
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

impl ReproRunner {
    /// Per-job hourly limit and duplicate suppression, counted when a replay is admitted.
    pub(super) fn admit(&self, job: &str, step: u64, category: &str) -> Result<(), &'static str> {
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

    pub(super) fn lock_gpu(&self, key: &str) -> Option<GpuGuard<'_>> {
        let mut set = self.inner.gpus.lock().ok()?;
        if !set.insert(key.to_owned()) {
            return None;
        }
        Some(GpuGuard {
            set: &self.inner.gpus,
            key: key.to_owned(),
        })
    }
}

/// Admission of a replay that runs outside this runner (a pod on the cluster): the GPU it uses
/// stays held until the slot is dropped.
pub struct ExternalSlot<'a> {
    _gpu: Option<GpuGuard<'a>>,
}

impl ReproRunner {
    /// Admits a replay that runs elsewhere under the limits the local ladder obeys: the per-job
    /// hourly limit and duplicate suppression (`job` is `name/rank` of the manifest's job,
    /// `step` its global step), and, when `gpu` is given (a GPU mode), one replay per GPU.
    /// `Err` is the `skipped` reason: `rate_limited`, `duplicate`, `gpu_busy` or `disabled`.
    /// A refusal is counted in `assertwatch_repro_runs_total{mode,outcome="skipped"}`.
    pub fn admit_external(
        &self,
        job: &str,
        step: u64,
        category: &str,
        mode: Mode,
        gpu: Option<&str>,
    ) -> Result<ExternalSlot<'_>, &'static str> {
        let refuse = |reason| {
            self.count(mode, Outcome::Skipped, None);
            Err(reason)
        };
        if !self.inner.cfg.enabled {
            return refuse("disabled");
        }
        let gpu = match gpu {
            Some(g) => match self.lock_gpu(g) {
                Some(guard) => Some(guard),
                None => return refuse("gpu_busy"),
            },
            None => None,
        };
        // On a refusal here the GPU guard is dropped with the error.
        if let Err(reason) = self.admit(job, step, category) {
            return refuse(reason);
        }
        Ok(ExternalSlot { _gpu: gpu })
    }

    /// Counts an attempt that ran elsewhere in the runner's metrics, as the ladder counts its own.
    pub fn count_external(&self, mode: Mode, outcome: Outcome, took: Option<std::time::Duration>) {
        self.count(mode, outcome, took);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Metrics, ReproConfig};

    fn runner() -> (ReproRunner, prometheus::Registry) {
        let reg = prometheus::Registry::new();
        let mut cfg = ReproConfig::new(std::env::temp_dir().join("aw-admission-test"));
        cfg.enabled = true;
        cfg.max_per_hour = 2;
        (ReproRunner::new(cfg, Metrics::new(&reg).unwrap()), reg)
    }

    fn skipped(reg: &prometheus::Registry, mode: &str) -> u64 {
        let text = prometheus::TextEncoder::new()
            .encode_to_string(&reg.gather())
            .unwrap();
        let want = format!(
            "{}{{mode=\"{mode}\",outcome=\"skipped\"}} ",
            crate::metrics::RUNS_TOTAL
        );
        text.lines()
            .find_map(|l| l.strip_prefix(&want))
            .map_or(0, |v| v.trim().parse().unwrap())
    }

    #[test]
    fn external_replays_share_the_ladders_limits() {
        let (r, reg) = runner();
        let slot = r
            .admit_external(
                "train/0",
                7,
                "embedding_index",
                Mode::SyncGpu,
                Some("GPU-a"),
            )
            .unwrap();
        // The same GPU is held while the pod runs.
        assert_eq!(
            r.admit_external("other/0", 1, "x", Mode::SyncGpu, Some("GPU-a"))
                .err(),
            Some("gpu_busy")
        );
        drop(slot);
        // The same job, step and family again: a duplicate.
        assert_eq!(
            r.admit_external(
                "train/0",
                7,
                "embedding_index",
                Mode::SyncGpu,
                Some("GPU-a")
            )
            .err(),
            Some("duplicate")
        );
        // The second distinct replay of the job this hour is admitted, the third is not.
        assert!(r
            .admit_external("train/0", 8, "embedding_index", Mode::Cpu, None)
            .is_ok());
        assert_eq!(
            r.admit_external("train/0", 9, "embedding_index", Mode::Cpu, None)
                .err(),
            Some("rate_limited")
        );
        // The GPU is free again after a refusal for another reason.
        assert!(r
            .admit_external("third/0", 1, "x", Mode::SyncGpu, Some("GPU-a"))
            .is_ok());
        assert_eq!(skipped(&reg, "sync-gpu"), 2);
        assert_eq!(skipped(&reg, "cpu"), 1);
    }
}
