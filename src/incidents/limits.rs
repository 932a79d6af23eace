//! Flood limits: at most so many new incidents per source and minute.
//!
//! A forged or runaway log can print thousands of failures a minute. Past the bound, new
//! incidents of that source are not stored, alerted or counted as incidents; they are counted in
//! `assertwatch_incidents_suppressed_total{reason="rate_limit"}`, and their later updates are
//! dropped too until they close. Time is an argument, so the bound is tested without a clock.

use std::collections::{HashMap, HashSet};

/// Length of one counting window.
const WINDOW_MS: i64 = 60_000;

/// Engine keys of suppressed incidents remembered until they close; beyond this the set is
/// cleared (a later update of a forgotten one is then stored as an update of nothing: harmless).
const MAX_SUPPRESSED: usize = 100_000;

/// See the module docs.
#[derive(Debug)]
pub struct FloodLimits {
    default_per_minute: u32,
    per_source: HashMap<String, u32>,
    windows: HashMap<String, (i64, u32)>,
    suppressed: HashSet<u64>,
}

/// What to do with an incident update.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Admit,
    /// Suppressed: the first update of an incident over the bound (count it).
    SuppressNew,
    /// Suppressed: a later update of an incident that was suppressed when it opened.
    SuppressUpdate,
}

impl FloodLimits {
    /// `default_per_minute` for every source, except those named in `per_source`.
    pub fn new(default_per_minute: u32, per_source: HashMap<String, u32>) -> Self {
        FloodLimits {
            default_per_minute,
            per_source,
            windows: HashMap::new(),
            suppressed: HashSet::new(),
        }
    }

    /// Decides on one update of the incident `key` from `source` at `now_ms` (wall clock).
    pub fn check(
        &mut self,
        source: &str,
        key: u64,
        first: bool,
        closed: bool,
        now_ms: i64,
    ) -> Verdict {
        if !first {
            if self.suppressed.contains(&key) {
                if closed {
                    self.suppressed.remove(&key);
                }
                return Verdict::SuppressUpdate;
            }
            return Verdict::Admit;
        }
        let w = match self.windows.get_mut(source) {
            Some(w) => w,
            None => self.windows.entry(source.to_owned()).or_insert((now_ms, 0)),
        };
        if now_ms - w.0 > WINDOW_MS {
            *w = (now_ms, 0);
        }
        w.1 += 1;
        let limit = self
            .per_source
            .get(source)
            .copied()
            .unwrap_or(self.default_per_minute);
        if w.1 > limit {
            if !closed {
                if self.suppressed.len() >= MAX_SUPPRESSED {
                    self.suppressed.clear();
                }
                self.suppressed.insert(key);
            }
            return Verdict::SuppressNew;
        }
        Verdict::Admit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admits_up_to_the_bound_per_minute_and_source() {
        let mut l = FloodLimits::new(2, HashMap::from([("noisy".to_owned(), 1)]));
        assert_eq!(l.check("a", 1, true, false, 0), Verdict::Admit);
        assert_eq!(l.check("a", 2, true, false, 10), Verdict::Admit);
        assert_eq!(l.check("a", 3, true, false, 20), Verdict::SuppressNew);
        // Another source has its own window and its own bound.
        assert_eq!(l.check("noisy", 4, true, false, 20), Verdict::Admit);
        assert_eq!(l.check("noisy", 5, true, false, 20), Verdict::SuppressNew);
        // A new minute starts a new window.
        assert_eq!(l.check("a", 6, true, false, 60_100), Verdict::Admit);
    }

    #[test]
    fn updates_of_a_suppressed_incident_stay_suppressed_until_it_closes() {
        let mut l = FloodLimits::new(0, HashMap::new());
        assert_eq!(l.check("a", 1, true, false, 0), Verdict::SuppressNew);
        assert_eq!(l.check("a", 1, false, false, 1), Verdict::SuppressUpdate);
        assert_eq!(l.check("a", 1, false, true, 2), Verdict::SuppressUpdate);
        // Forgotten once closed; an admitted incident's updates pass.
        assert_eq!(l.check("a", 1, false, false, 3), Verdict::Admit);
    }
}
