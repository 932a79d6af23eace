//! Acknowledgements: the consumer says how far it has fully processed each file, and only those
//! positions reach the checkpoint file. After a crash the tailer re-reads what was sent but not
//! acknowledged, so a line can be delivered again but is never skipped.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::FileId;

/// A file's acknowledged position: the offset just past the last processed line, and the number
/// of lines the consumer counted up to there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Acked {
    pub(crate) offset: u64,
    pub(crate) lines: u64,
    /// End of what was sent of the file's current content: nothing past it can be acknowledged.
    pub(crate) limit: u64,
}

#[derive(Debug, Default)]
struct Inner {
    map: Mutex<HashMap<FileId, Acked>>,
    /// Bumped on every change, so the checkpoint writer can skip unchanged states.
    version: AtomicU64,
}

/// Shared by the tailer and its consumer; cheap to clone.
///
/// Acknowledge in event order: each call replaces the file's previous position, and the value
/// must describe everything processed so far (after a [`crate::TailEvent::Reset`], positions
/// restart from 0). A position may move back (a consumer that holds an open incident may
/// acknowledge only up to its first line). Ignored: acknowledgements for files the tailer has
/// forgotten, and positions past what was sent of the file's current content, which can only be
/// stale ones from before a reset.
#[derive(Debug, Clone, Default)]
pub struct AckHandle {
    inner: Arc<Inner>,
}

impl AckHandle {
    fn map(&self) -> MutexGuard<'_, HashMap<FileId, Acked>> {
        // A panic while holding this lock cannot leave the map half-updated (every update is a
        // single insert), so a poisoned lock is still safe to use.
        self.inner.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records that `file` is processed up to byte `offset` (use [`crate::TailEvent::Data`]'s
    /// `end`), with `lines` lines counted since offset 0.
    pub fn ack(&self, file: FileId, offset: u64, lines: u64) {
        let mut map = self.map();
        if let Some(a) = map.get_mut(&file) {
            if offset <= a.limit {
                a.offset = offset;
                a.lines = lines;
                self.inner.version.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Starts tracking `file` at a known position, or restarts it after a reset (tailer side).
    pub(crate) fn set(&self, file: FileId, offset: u64, lines: u64) {
        self.map().insert(
            file,
            Acked {
                offset,
                lines,
                limit: offset,
            },
        );
        self.inner.version.fetch_add(1, Ordering::Relaxed);
    }

    /// Records that data up to `limit` was sent (tailer side, before the events go out).
    pub(crate) fn sent(&self, file: FileId, limit: u64) {
        if let Some(a) = self.map().get_mut(&file) {
            a.limit = a.limit.max(limit);
        }
    }

    pub(crate) fn get(&self, file: FileId) -> Option<Acked> {
        self.map().get(&file).copied()
    }

    pub(crate) fn remove(&self, file: FileId) {
        self.map().remove(&file);
        self.inner.version.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn version(&self) -> u64 {
        self.inner.version.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ack_of_unknown_file_is_ignored() {
        let h = AckHandle::default();
        h.ack(7, 10, 1);
        assert_eq!(h.get(7), None);
        h.set(7, 0, 0);
        h.sent(7, 10);
        let v = h.version();
        h.clone().ack(7, 10, 1);
        assert_eq!(h.get(7).map(|a| (a.offset, a.lines)), Some((10, 1)));
        assert!(h.version() > v);
    }

    #[test]
    fn stale_ack_past_what_was_sent_is_ignored() {
        let h = AckHandle::default();
        h.set(1, 0, 0);
        h.sent(1, 100);
        h.ack(1, 100, 5);
        // A reset: the tailer restarts the file at 0 and has sent 20 bytes of new content.
        h.set(1, 0, 0);
        h.sent(1, 20);
        // A late acknowledgement of the old content must not be checkpointed.
        h.ack(1, 100, 5);
        assert_eq!(h.get(1).map(|a| (a.offset, a.lines)), Some((0, 0)));
        h.ack(1, 20, 1);
        assert_eq!(h.get(1).map(|a| (a.offset, a.lines)), Some((20, 1)));
    }
}
