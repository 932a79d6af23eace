//! Positions on disk: the entries the loop writes to the checkpoint file and when it writes
//! them. The file format itself belongs to `crate::checkpoint`.

use std::time::SystemTime;

use super::{unix_secs, State, Watcher};
use crate::checkpoint::{self, Entry};
use crate::stats::TailStats;

impl State {
    pub(super) fn entry_of(&self, w: &Watcher, last_seen: u64) -> Entry {
        let acked = self.acks.get(w.id).unwrap_or_default();
        Entry {
            id: w.id,
            fingerprint: w.head.crc,
            head_len: w.head.len,
            dev: w.key.0,
            ino: w.key.1,
            path: w.path.to_string_lossy().into_owned(),
            offset: acked.offset,
            lines: acked.lines,
            last_seen,
        }
    }

    pub(super) fn flush_if_needed(&mut self) {
        if std::mem::take(&mut self.checkpoint_now) {
            self.write_checkpoint();
        }
    }

    /// Writes acknowledged positions if they changed. Failures are counted, logged rate-limited
    /// and retried at the next interval.
    pub(super) fn write_checkpoint(&mut self) {
        let version = self.acks.version();
        if !self.structure_dirty && self.written_version == Some(version) {
            return;
        }
        let now = unix_secs(SystemTime::now());
        let mut entries: Vec<Entry> = self
            .watchers
            .values()
            .map(|w| self.entry_of(w, now))
            .collect();
        for e in self.t.known.values() {
            let mut e = e.clone();
            if let Some(a) = self.acks.get(e.id) {
                e.offset = a.offset;
                e.lines = a.lines;
            }
            entries.push(e);
        }
        entries.sort_by_key(|e| e.id);
        match checkpoint::store(&self.t.cfg.checkpoint_path, &entries) {
            Ok(()) => {
                self.written_version = Some(version);
                self.structure_dirty = false;
                TailStats::bump(&self.t.stats.checkpoint_writes, 1);
            }
            Err(error) => {
                TailStats::bump(&self.t.stats.checkpoint_write_errors, 1);
                if let Some(suppressed) = self.rl.allow("checkpoint_write") {
                    tracing::warn!(path = %self.t.cfg.checkpoint_path.display(), %error, suppressed,
                        "Cannot write checkpoint file; will retry.");
                }
            }
        }
    }
}
