//! Discovery: expanding the globs, matching what they find to followed files by identity,
//! resuming known files from their checkpoints, and closing files no glob matches any more.

use std::collections::{BTreeMap, HashMap};
use std::fs::{File, Metadata};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::SystemTime;

use tokio::time::Instant;

use super::{key_of, open_file, read_exact_at, unix_secs, Key, Skip, State, Stop, Watcher};
use crate::checkpoint::Entry;
use crate::fingerprint::{self, Head, FINGERPRINT_BYTES};
use crate::paths::ScanError;
use crate::stats::TailStats;
use crate::{FileId, ResetKind, TailEvent};

/// With `start_at_end`, how far back from the end to look for the last line boundary.
const START_AT_END_LOOKBACK: u64 = 64 << 10;

impl State {
    pub(super) async fn scan(&mut self) -> Result<(), Stop> {
        let mut errors = Vec::new();
        let matches = self.t.matcher.expand(&mut errors);
        let mut out = Vec::new();
        self.still_bad.clear();
        for ScanError {
            source,
            path,
            error,
        } in errors
        {
            self.report(&mut out, source, path, error);
        }

        // Group the matches by identity; one inode may be reachable by several paths.
        let mut found: BTreeMap<Key, Vec<(PathBuf, usize, Metadata)>> = BTreeMap::new();
        for (path, source) in matches {
            match std::fs::metadata(&path) {
                Ok(m) if m.is_file() => {
                    found.entry(key_of(&m)).or_default().push((path, source, m));
                }
                Ok(_) => {
                    self.report(&mut out, source, path, "not a regular file".into());
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => {
                    self.report(&mut out, source, path, e.to_string());
                }
            }
        }

        // Followed files: renamed, still there, or gone from every glob.
        let now = Instant::now();
        let ids: Vec<FileId> = self.watchers.keys().copied().collect();
        for id in ids {
            let Some(w) = self.watchers.get_mut(&id) else {
                continue;
            };
            match found.get(&w.key) {
                Some(paths) => {
                    w.lost_since = None;
                    let moved = !paths.iter().any(|(p, _, _)| *p == w.path);
                    if let (true, Some((new_path, _, _))) = (moved, paths.first()) {
                        let new_path = new_path.clone();
                        w.path = new_path.clone();
                        if let Some(s) = self.t.stats.source(w.source) {
                            TailStats::bump(&s.rotations_rename, 1);
                        }
                        tracing::debug!(file = id, path = %new_path.display(), "Log file renamed.");
                        out.push(TailEvent::Renamed { file: id, new_path });
                        self.structure_dirty = true;
                    }
                }
                None if w.lost_since.is_none() => {
                    w.lost_since = Some(now);
                    let deleted = match &w.file {
                        Some(f) => f.metadata().map(|m| m.nlink() == 0).unwrap_or(true),
                        None => !w.path.exists(),
                    };
                    if let Some(s) = self.t.stats.source(w.source) {
                        let c = if deleted {
                            &s.rotations_recreate
                        } else {
                            &s.rotations_rename
                        };
                        TailStats::bump(c, 1);
                    }
                    tracing::debug!(file = id, path = %w.path.display(), deleted,
                        "Log file no longer matched; reading it to its end.");
                }
                None => {}
            }
        }

        // New identities.
        let first_scan = std::mem::replace(&mut self.first_scan, false);
        let mut index: Option<KnownIndex> = None;
        for (key, paths) in found {
            if self.by_key.contains_key(&key) {
                continue;
            }
            let Some((path, source, _)) = paths.into_iter().next() else {
                continue;
            };
            let index = index.get_or_insert_with(|| KnownIndex::new(&self.t.known));
            self.add_file(&mut out, index, key, path, source, first_scan);
        }
        let still_bad = std::mem::take(&mut self.still_bad);
        self.bad_paths.retain(|p| still_bad.contains(p));
        self.expire_known();
        self.flush_if_needed();
        self.send_all(out).await
    }

    /// Opens a newly matched identity, resumes it from the checkpoints if its fingerprint is
    /// known, and sends `Opened`.
    fn add_file(
        &mut self,
        out: &mut Vec<TailEvent>,
        index: &KnownIndex,
        key: Key,
        path: PathBuf,
        source: usize,
        first_scan: bool,
    ) {
        let file = match open_file(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return,
            Err(e) => {
                self.report(out, source, path, e.to_string());
                return;
            }
        };
        let meta = match file.metadata() {
            Ok(m) => m,
            Err(e) => {
                self.report(out, source, path, e.to_string());
                return;
            }
        };
        if key_of(&meta) != key {
            return; // replaced between stat and open; the next scan sees the new one
        }
        let mut head_buf = [0u8; FINGERPRINT_BYTES];
        let head_bytes = match fingerprint::read_head(&file, &mut head_buf) {
            Ok(b) => b,
            Err(e) => {
                self.report(out, source, path, e.to_string());
                return;
            }
        };
        let head = Head::of(head_bytes);
        let size = meta.len();

        // Resume: same device and inode and the stored head is a prefix of the current one. A
        // fallback accepts a changed device number (renumbered after a reboot) when the inode,
        // the path and a full-length fingerprint all agree.
        let path_str = path.to_string_lossy().into_owned();
        let known = &self.t.known;
        let candidates = |ids: Option<&Vec<FileId>>| -> Vec<&Entry> {
            ids.map(|v| v.iter().filter_map(|id| known.get(id)).collect())
                .unwrap_or_default()
        };
        let resumed = candidates(index.by_key.get(&key))
            .into_iter()
            .find(|e| stored_head(e).is_prefix_of(head_bytes))
            .or_else(|| {
                candidates(index.by_ino_path.get(&(key.1, path_str.clone())))
                    .into_iter()
                    .find(|e| stored_head(e).is_full() && stored_head(e).is_prefix_of(head_bytes))
            })
            .map(|e| (e.id, e.offset, e.lines));
        // A stored identity with the same inode but other content: the inode was reused.
        for id in index.by_key.get(&key).into_iter().flatten() {
            if Some(*id) != resumed.map(|r| r.0) && self.t.known.remove(id).is_some() {
                self.acks.remove(*id);
                self.structure_dirty = true;
            }
        }

        let (id, mut offset, lines, mut skip) = match resumed {
            Some((id, offset, lines)) => {
                self.t.known.remove(&id);
                (id, offset, lines, None)
            }
            None => {
                let id = self.t.next_id;
                self.t.next_id += 1;
                let (offset, skip) = if first_scan && self.t.cfg.start_at_end && !self.t.had_state {
                    start_at_end(&file, size)
                } else {
                    (0, None)
                };
                (id, offset, 0, skip)
            }
        };
        out.push(TailEvent::Opened {
            file: id,
            source,
            path: path.clone(),
            offset,
            lines,
        });
        self.acks.set(id, offset, lines);
        let now = Instant::now();
        if offset > size {
            // Truncated while we were away; nothing of the new content was sent yet.
            tracing::debug!(file = id, path = %path.display(), "Log file shrank while not followed.");
            out.push(TailEvent::Reset {
                file: id,
                kind: ResetKind::Truncated,
            });
            if let Some(s) = self.t.stats.source(source) {
                TailStats::bump(&s.rotations_truncate, 1);
            }
            self.acks.set(id, 0, 0);
            offset = 0;
            skip = None;
        }
        let keep_fd = self.open_files < self.t.cfg.max_open_files || self.evict_one(None);
        let w = Watcher {
            id,
            source,
            path,
            key,
            head,
            file: keep_fd.then_some(file),
            reopened: !keep_fd,
            offset,
            skip,
            sent_end: offset,
            size,
            mtime: meta.modified().ok(),
            stalled_at: None,
            last_activity: now,
            next_stat: now,
            lost_since: None,
            pending_reset: None,
            error_reported: false,
        };
        if keep_fd {
            self.set_open_files(self.open_files + 1);
        }
        if let Some(s) = self.t.stats.source(source) {
            TailStats::bump(&s.files_watched, 1);
        }
        tracing::debug!(file = id, path = %w.path.display(), offset, "Following log file.");
        self.by_key.insert(key, id);
        self.watchers.insert(id, w);
        self.structure_dirty = true;
        self.checkpoint_now = true;
    }

    /// Closes the descriptor of the least recently active file that can be reopened by name
    /// (matched by a glob, read to its end), other than `except`. Returns whether one was closed.
    pub(super) fn evict_one(&mut self, except: Option<FileId>) -> bool {
        let victim = self
            .watchers
            .values()
            .filter(|w| {
                w.file.is_some()
                    && w.lost_since.is_none()
                    && w.pending_reset.is_none()
                    && w.at_eof()
                    && Some(w.id) != except
            })
            .min_by_key(|w| w.last_activity)
            .map(|w| w.id);
        let Some(id) = victim else {
            return false;
        };
        if let Some(w) = self.watchers.get_mut(&id) {
            w.file = None;
            w.reopened = true;
            w.next_stat = Instant::now();
        }
        self.set_open_files(self.open_files.saturating_sub(1));
        true
    }

    fn expire_known(&mut self) {
        let now = unix_secs(SystemTime::now());
        let keep = self.t.cfg.checkpoint_retention.as_secs();
        let before = self.t.known.len();
        let acks = &self.acks;
        // An entry loaded at start gets the full retention from then: a file that is missing
        // only because its filesystem is not mounted yet keeps its position.
        let started = self.t.started_secs;
        self.t.known.retain(|id, e| {
            let keep_it = now.saturating_sub(e.last_seen.max(started)) <= keep;
            if !keep_it {
                acks.remove(*id);
            }
            keep_it
        });
        if self.t.known.len() != before {
            self.structure_dirty = true;
        }
    }

    /// Closes files that no glob has matched for `rotate_wait` once they are read to the end
    /// and have stopped growing.
    pub(super) async fn close_lost(&mut self) -> Result<(), Stop> {
        let wait = self.t.cfg.rotate_wait;
        let now = Instant::now();
        let done: Vec<FileId> = self
            .watchers
            .values()
            .filter(|w| match w.lost_since {
                Some(since) => {
                    let quiet = now.duration_since(since.max(w.last_activity)) >= wait;
                    quiet && (w.file.is_none() || (w.at_eof() && w.pending_reset.is_none()))
                }
                None => false,
            })
            .map(|w| w.id)
            .collect();
        let mut out = Vec::new();
        for id in done {
            let Some(w) = self.watchers.remove(&id) else {
                continue;
            };
            self.by_key.remove(&w.key);
            if w.file.is_some() {
                self.set_open_files(self.open_files.saturating_sub(1));
            }
            if let Some(s) = self.t.stats.source(w.source) {
                s.files_watched
                    .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
            }
            if w.offset < w.size && w.file.is_some() {
                tracing::debug!(file = id, path = %w.path.display(),
                    "Closing rotated log file with an unterminated last line.");
            }
            let entry = self.entry_of(&w, unix_secs(SystemTime::now()));
            self.t.known.insert(id, entry);
            tracing::debug!(file = id, path = %w.path.display(), "Stopped following log file.");
            out.push(TailEvent::Closed { file: id });
            self.structure_dirty = true;
        }
        self.send_all(out).await
    }
}

/// Lookup of checkpointed identities, built once per scan that finds new files.
struct KnownIndex {
    by_key: HashMap<Key, Vec<FileId>>,
    by_ino_path: HashMap<(u64, String), Vec<FileId>>,
}

impl KnownIndex {
    fn new(known: &HashMap<FileId, Entry>) -> Self {
        let mut by_key: HashMap<Key, Vec<FileId>> = HashMap::new();
        let mut by_ino_path: HashMap<(u64, String), Vec<FileId>> = HashMap::new();
        for e in known.values() {
            by_key.entry((e.dev, e.ino)).or_default().push(e.id);
            by_ino_path
                .entry((e.ino, e.path.clone()))
                .or_default()
                .push(e.id);
        }
        Self {
            by_key,
            by_ino_path,
        }
    }
}

fn stored_head(e: &Entry) -> Head {
    Head {
        len: e.head_len,
        crc: e.fingerprint,
    }
}

/// Where a file first seen with `start_at_end` starts: just past its last newline. If the tail
/// holds no newline within the lookback, reading starts at the end and the line in progress is
/// skipped silently; a file with no newline at all that fits the lookback starts at 0.
fn start_at_end(file: &File, size: u64) -> (u64, Option<Skip>) {
    let from = size.saturating_sub(START_AT_END_LOOKBACK);
    let mut buf = vec![0u8; (size - from) as usize];
    match read_exact_at(file, &mut buf, from) {
        Ok(n) => match memchr::memrchr(b'\n', &buf[..n]) {
            Some(i) => (from + i as u64 + 1, None),
            None if from == 0 => (0, None),
            None => (
                size,
                Some(Skip {
                    line_start: size,
                    emit_head: false,
                }),
            ),
        },
        Err(_) => (size, None),
    }
}
