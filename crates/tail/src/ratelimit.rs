//! Rate limiting for repeated warnings: the first occurrence of a kind is logged, later ones at
//! most once per window with the number suppressed in between. Counters in [`crate::TailStats`]
//! still count every occurrence (the instrumentation rule Vector's spec states: log drops
//! rate-limited to ten seconds, count them all).

use std::collections::HashMap;
use tokio::time::{Duration, Instant};

/// Window between two log lines of the same kind.
pub(crate) const WINDOW: Duration = Duration::from_secs(10);

#[derive(Debug, Default)]
pub(crate) struct RateLimit {
    last: HashMap<&'static str, (Instant, u64)>,
}

impl RateLimit {
    /// Returns `Some(suppressed)` when a line of `kind` may be logged now.
    pub(crate) fn allow(&mut self, kind: &'static str) -> Option<u64> {
        let now = Instant::now();
        match self.last.get_mut(kind) {
            Some((at, suppressed)) if now.duration_since(*at) < WINDOW => {
                *suppressed += 1;
                None
            }
            Some((at, suppressed)) => {
                let n = *suppressed;
                *at = now;
                *suppressed = 0;
                Some(n)
            }
            None => {
                self.last.insert(kind, (now, 0));
                Some(0)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn second_warning_within_window_is_suppressed() {
        let mut rl = RateLimit::default();
        assert_eq!(rl.allow("a"), Some(0));
        assert_eq!(rl.allow("a"), None);
        assert_eq!(rl.allow("b"), Some(0));
        tokio::time::advance(WINDOW).await;
        assert_eq!(rl.allow("a"), Some(1));
    }
}
