//! Admission: the per-job hourly limit, duplicate suppression and one replay per GPU.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::ReproRunner;

const HOUR: Duration = Duration::from_secs(3600);

#[derive(Default)]
pub(super) struct Admission {
    per_job: HashMap<String, VecDeque<Instant>>,
    seen: HashMap<(String, u64, String), Instant>,
}

/// Holds one GPU for the duration of a ladder.
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
