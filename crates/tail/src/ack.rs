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
/// restart from 0). Acknowledgements for files the tailer has forgotten are ignored.
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
            *a = Acked { offset, lines };
            self.inner.version.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Starts tracking `file` at a known position (tailer side).
    pub(crate) fn set(&self, file: FileId, offset: u64, lines: u64) {
        self.map().insert(file, Acked { offset, lines });
        self.inner.version.fetch_add(1, Ordering::Relaxed);
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
        let v = h.version();
        h.clone().ack(7, 10, 1);
        assert_eq!(
            h.get(7),
            Some(Acked {
                offset: 10,
                lines: 1
            })
        );
        assert!(h.version() > v);
    }
}
