//! Counters the tailer publishes for the daemon's metrics. They are plain atomics so that the
//! crate stays free of any metrics library; the daemon reads them at scrape time.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of one source (same index as in [`crate::TailConfig::sources`]).
#[derive(Debug, Default)]
pub struct SourceStats {
    /// Files followed right now (a gauge).
    pub files_watched: AtomicU64,
    /// Bytes delivered in `Data` events (truncated heads count their delivered bytes).
    pub bytes: AtomicU64,
    /// Rename rotations: a followed file found at a new path, or gone from every glob while its
    /// inode still exists.
    pub rotations_rename: AtomicU64,
    /// Copytruncate: a followed file became shorter than its position or its head changed.
    pub rotations_truncate: AtomicU64,
    /// Delete (and recreate) or inode reuse.
    pub rotations_recreate: AtomicU64,
    /// Open, stat and read failures, and glob matches that are not regular files.
    pub read_errors: AtomicU64,
    /// Lines longer than `max_line_bytes`, delivered as their head only.
    pub truncated_lines: AtomicU64,
}

/// All counters of one tailer.
#[derive(Debug, Default)]
pub struct TailStats {
    /// Per source, by index.
    pub sources: Vec<SourceStats>,
    /// Descriptors held open right now (a gauge).
    pub open_files: AtomicU64,
    /// Checkpoint writes that failed (for example ENOSPC); each is retried at the next interval.
    pub checkpoint_write_errors: AtomicU64,
    /// Checkpoint writes that succeeded.
    pub checkpoint_writes: AtomicU64,
}

impl TailStats {
    pub(crate) fn new(sources: usize) -> Self {
        Self {
            sources: (0..sources).map(|_| SourceStats::default()).collect(),
            ..Self::default()
        }
    }

    pub(crate) fn source(&self, i: usize) -> Option<&SourceStats> {
        self.sources.get(i)
    }

    pub(crate) fn bump(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}
