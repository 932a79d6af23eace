//! The read loop: discovery, identity, rotation, bounded reading, checkpoint writes.
//!
//! One task owns every followed file. A pass visits the files round-robin and reads at most
//! `read_bytes_per_pass` from each (Vector's fair read loop); when a pass finds nothing the loop
//! sleeps with a backoff capped at `poll_interval`, and an inotify event cuts the sleep short.
//! Every `rescan_interval` (or sooner, on a create, remove or rename event) the globs are expanded
//! again and the matches are matched to followed files by (device, inode), then verified by the
//! head checksum.
//!
//! File I/O here is synchronous on purpose: each call is bounded (a `stat`, or a `pread` of at most
//! one chunk), and the only await points are the channel sends and the idle sleep. Run the tailer
//! on the multi-threaded runtime.
//!
//! What happens on each kind of rotation:
//! - rename (`app.log` → `app.log.1`, new `app.log`): the old inode is found at its new path
//!   (`Renamed`) or at no path; either way its descriptor is kept and it is read to its end, then
//!   `Closed` once no glob has matched it for `rotate_wait` and it stopped growing. The new
//!   `app.log` is a new inode, read from 0.
//! - copytruncate: the inode shrinks below our position or its head checksum changes →
//!   `Reset(Truncated)`, read again from 0.
//! - delete and recreate: the new inode is a new file; the deleted one is drained through its
//!   descriptor and closed.
//! - inode reuse: a known (device, inode) whose head no longer matches while we did not hold it
//!   open → `Reset(Recreated)`; after a restart, simply a new file.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::{File, Metadata};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use tokio::sync::mpsc::Sender;
use tokio::time::{sleep, Duration, Instant};
use tokio_util::sync::CancellationToken;

use crate::ack::AckHandle;
use crate::checkpoint::{self, Entry};
use crate::fingerprint::{self, Head, HeadCheck, FINGERPRINT_BYTES};
use crate::lines::{split, Piece};
use crate::paths::{Matcher, ScanError};
use crate::ratelimit::RateLimit;
use crate::stats::TailStats;
use crate::wake::Wake;
use crate::{FileId, ResetKind, TailConfig, TailError, TailEvent};

/// How long a reset waits for the consumer to acknowledge everything sent before it. Past this,
/// the reset goes ahead; a late acknowledgement of old content could then be checkpointed.
const RESET_ACK_WAIT: Duration = Duration::from_secs(30);

/// With `start_at_end`, how far back from the end to look for the last line boundary.
const START_AT_END_LOOKBACK: u64 = 64 << 10;

/// Shortest idle sleep; it doubles up to `poll_interval`.
const MIN_BACKOFF: Duration = Duration::from_millis(1);

type Key = (u64, u64);

/// Follows the files of a [`TailConfig`]; see the crate documentation.
pub struct Tailer {
    cfg: TailConfig,
    matcher: Matcher,
    acks: AckHandle,
    stats: Arc<TailStats>,
    /// Positions of files not followed right now: loaded from the checkpoint file and not found
    /// yet, or closed and kept for `checkpoint_retention`.
    known: HashMap<FileId, Entry>,
    /// Whether the checkpoint file held positions (then `start_at_end` does not apply).
    had_state: bool,
    next_id: u64,
    /// When this tailer was built, seconds since the epoch.
    started_secs: u64,
}

/// Skipping the rest of an over-long line.
#[derive(Debug, Clone, Copy)]
struct Skip {
    line_start: u64,
    /// Deliver the head once the newline is found (not for the partial line a start at the end
    /// lands in).
    emit_head: bool,
}

#[derive(Debug)]
struct Watcher {
    id: FileId,
    source: usize,
    path: PathBuf,
    key: Key,
    head: Head,
    file: Option<File>,
    /// Set when the descriptor was closed after the head was last verified: a head mismatch may
    /// then be inode reuse.
    reopened: bool,
    /// Next byte to read: the start of a held-back partial line, or the skip position.
    offset: u64,
    skip: Option<Skip>,
    /// End of the last chunk sent in the current generation.
    sent_end: u64,
    /// Size and mtime when last checked.
    size: u64,
    mtime: Option<SystemTime>,
    /// A read found only an unterminated line at this size; wait for growth.
    stalled_at: Option<u64>,
    last_activity: Instant,
    next_stat: Instant,
    /// No glob has matched this file since.
    lost_since: Option<Instant>,
    pending_reset: Option<(ResetKind, Instant)>,
    error_reported: bool,
}

impl Watcher {
    fn at_eof(&self) -> bool {
        self.offset >= self.size || self.stalled_at == Some(self.size)
    }
}

/// Why the loop stops.
enum Stop {
    Shutdown,
}

fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn key_of(m: &Metadata) -> Key {
    (m.dev(), m.ino())
}

/// Reads from `offset` into `buf`: up to `per_pass` bytes, or up to `buf.len()` when no newline
/// shows up within `per_pass` (so that a line up to `max_line_bytes` can always complete).
fn read_chunk(file: &File, offset: u64, buf: &mut [u8], per_pass: usize) -> io::Result<usize> {
    let mut got = 0;
    let mut limit = per_pass.min(buf.len());
    loop {
        while got < limit {
            match file.read_at(&mut buf[got..limit], offset + got as u64) {
                Ok(0) => return Ok(got),
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if limit < buf.len() && memchr::memchr(b'\n', &buf[..got]).is_none() {
            limit = buf.len();
            continue;
        }
        return Ok(got);
    }
}

impl Tailer {
    /// Validates the settings, compiles the patterns and loads the checkpoint file.
    ///
    /// # Errors
    /// A zero bound, a pattern that does not parse, a checkpoint directory that cannot be created,
    /// a checkpoint file that cannot be read or has a newer version. A corrupt checkpoint file is
    /// not an error: it is logged and the tailer starts without positions.
    pub fn new(cfg: TailConfig) -> Result<Self, TailError> {
        let positive = [
            ("max_open_files", cfg.max_open_files == 0),
            ("read_bytes_per_pass", cfg.read_bytes_per_pass == 0),
            ("max_line_bytes", cfg.max_line_bytes == 0),
            ("rescan_interval", cfg.rescan_interval.is_zero()),
            ("checkpoint_interval", cfg.checkpoint_interval.is_zero()),
            ("poll_interval", cfg.poll_interval.is_zero()),
        ];
        for (field, bad) in positive {
            if bad {
                return Err(TailError::Config {
                    field,
                    reason: "must be greater than zero".into(),
                });
            }
        }
        let matcher = Matcher::new(&cfg.sources)?;
        if let Some(dir) = cfg.checkpoint_path.parent() {
            if !dir.as_os_str().is_empty() {
                std::fs::create_dir_all(dir).map_err(|error| TailError::CheckpointDir {
                    path: dir.to_owned(),
                    error,
                })?;
            }
        }
        let loaded = checkpoint::load(&cfg.checkpoint_path)?;
        if let Some(why) = &loaded.corrupt {
            tracing::warn!(path = %cfg.checkpoint_path.display(), error = %why,
                "Checkpoint file is corrupt; starting without positions.");
        }
        if loaded.from_tmp {
            tracing::info!(path = %cfg.checkpoint_path.display(),
                "Recovered checkpoints from an interrupted write.");
        }
        let acks = AckHandle::default();
        let mut known = HashMap::new();
        let mut max_id = 0;
        for e in loaded.entries {
            max_id = max_id.max(e.id);
            known.insert(e.id, e);
        }
        let now_micros = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(0);
        let stats = Arc::new(TailStats::new(cfg.sources.len()));
        Ok(Self {
            had_state: !known.is_empty(),
            next_id: now_micros.max(max_id.saturating_add(1)),
            started_secs: now_micros / 1_000_000,
            cfg,
            matcher,
            acks,
            stats,
            known,
        })
    }

    /// The handle the consumer acknowledges processed data with.
    pub fn ack_handle(&self) -> AckHandle {
        self.acks.clone()
    }

    /// Counters, shared with the running tailer.
    pub fn stats(&self) -> Arc<TailStats> {
        self.stats.clone()
    }

    /// Follows the files until `shutdown` fires, sending events on `tx`. When `tx` is full the
    /// tailer waits (the files are the buffer). Checkpoints are written every
    /// `checkpoint_interval` when acknowledgements changed, and once more before returning.
    /// Returns when `shutdown` fires or the receiver is dropped.
    ///
    /// `acks` should be the handle from [`Tailer::ack_handle`]; another handle would never be
    /// consulted for positions.
    ///
    /// # Errors
    /// None at present: every failure while running is counted, logged and reported as an
    /// event. The `Result` leaves room for fatal conditions.
    pub async fn run(
        self,
        tx: Sender<TailEvent>,
        acks: AckHandle,
        shutdown: CancellationToken,
    ) -> Result<(), TailError> {
        let mut rl = RateLimit::default();
        let wake = Wake::new(&mut rl);
        let buf_len = self
            .cfg
            .read_bytes_per_pass
            .max(self.cfg.max_line_bytes.saturating_add(1));
        let mut st = State {
            acks,
            tx,
            shutdown,
            buf: vec![0; buf_len],
            watchers: BTreeMap::new(),
            by_key: HashMap::new(),
            bad_paths: HashSet::new(),
            still_bad: HashSet::new(),
            rl,
            wake,
            open_files: 0,
            rr: 0,
            first_scan: true,
            written_version: None,
            structure_dirty: true,
            checkpoint_now: false,
            t: self,
        };
        let result = st.main_loop().await;
        st.write_checkpoint();
        st.stats_reset_gauges();
        match result {
            Ok(()) | Err(Stop::Shutdown) => Ok(()),
        }
    }
}

/// Everything the running loop owns.
struct State {
    t: Tailer,
    acks: AckHandle,
    tx: Sender<TailEvent>,
    shutdown: CancellationToken,
    buf: Vec<u8>,
    watchers: BTreeMap<FileId, Watcher>,
    by_key: HashMap<Key, FileId>,
    /// Paths with an error already reported; cleared when the path recovers or vanishes.
    bad_paths: HashSet<PathBuf>,
    /// Paths that failed during the current scan.
    still_bad: HashSet<PathBuf>,
    rl: RateLimit,
    wake: Wake,
    open_files: usize,
    rr: usize,
    first_scan: bool,
    written_version: Option<u64>,
    structure_dirty: bool,
    /// A new identity or a reset must reach the checkpoint file before its event is sent:
    /// otherwise a crash right after would resume the file under another id, or pair the old
    /// offset with the new content.
    checkpoint_now: bool,
}

impl State {
    async fn main_loop(&mut self) -> Result<(), Stop> {
        let cfg = self.t.cfg.clone();
        let roots = self.t.matcher.roots();
        let mut next_scan = Instant::now();
        let mut next_checkpoint = Instant::now() + cfg.checkpoint_interval;
        let mut backoff = MIN_BACKOFF;
        loop {
            if self.shutdown.is_cancelled() {
                return Err(Stop::Shutdown);
            }
            let now = Instant::now();
            if now >= next_scan || self.wake.take_rescan() {
                self.wake.watch_roots(&roots, &mut self.rl);
                self.scan().await?;
                next_scan = Instant::now() + cfg.rescan_interval;
            }
            let progressed = self.read_pass().await?;
            self.close_lost().await?;
            if Instant::now() >= next_checkpoint {
                self.write_checkpoint();
                next_checkpoint = Instant::now() + cfg.checkpoint_interval;
            }
            if progressed {
                backoff = MIN_BACKOFF;
                tokio::task::yield_now().await;
                continue;
            }
            let until_scan = next_scan.saturating_duration_since(Instant::now());
            let nap = backoff.min(until_scan).max(Duration::from_micros(100));
            tokio::select! {
                _ = self.shutdown.cancelled() => return Err(Stop::Shutdown),
                _ = sleep(nap) => {}
                _ = self.wake.notified() => { backoff = MIN_BACKOFF; continue; }
            }
            backoff = (backoff * 2).min(cfg.poll_interval);
        }
    }

    async fn send(&self, ev: TailEvent) -> Result<(), Stop> {
        tokio::select! {
            biased;
            _ = self.shutdown.cancelled() => Err(Stop::Shutdown),
            r = self.tx.send(ev) => r.map_err(|_| Stop::Shutdown),
        }
    }

    async fn send_all(&self, events: Vec<TailEvent>) -> Result<(), Stop> {
        for ev in events {
            self.send(ev).await?;
        }
        Ok(())
    }

    fn stats_reset_gauges(&self) {
        use std::sync::atomic::Ordering;
        for s in &self.t.stats.sources {
            s.files_watched.store(0, Ordering::Relaxed);
        }
        self.t.stats.open_files.store(0, Ordering::Relaxed);
    }

    fn set_open_files(&mut self, n: usize) {
        self.open_files = n;
        self.t
            .stats
            .open_files
            .store(n as u64, std::sync::atomic::Ordering::Relaxed);
    }

    fn count_error(&self, source: usize) {
        if let Some(s) = self.t.stats.source(source) {
            TailStats::bump(&s.read_errors, 1);
        }
    }

    /// An error event for `path`, once until a scan finds the path healthy or gone.
    fn report(&mut self, out: &mut Vec<TailEvent>, source: usize, path: PathBuf, error: String) {
        self.still_bad.insert(path.clone());
        if self.bad_paths.insert(path.clone()) {
            self.count_error(source);
            if let Some(suppressed) = self.rl.allow("file_error") {
                tracing::warn!(path = %path.display(), %error, suppressed, "Cannot read log file.");
            }
            out.push(TailEvent::Error {
                source,
                path,
                error,
            });
        }
    }

    // ---------------------------------------------------------------- discovery

    async fn scan(&mut self) -> Result<(), Stop> {
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
    fn evict_one(&mut self, except: Option<FileId>) -> bool {
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
    async fn close_lost(&mut self) -> Result<(), Stop> {
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

    // ---------------------------------------------------------------- reading

    /// One pass over every followed file. Returns whether any file made progress.
    async fn read_pass(&mut self) -> Result<bool, Stop> {
        let ids: Vec<FileId> = self.watchers.keys().copied().collect();
        if ids.is_empty() {
            return Ok(false);
        }
        self.rr = (self.rr + 1) % ids.len();
        let mut progressed = false;
        for i in 0..ids.len() {
            let id = ids[(self.rr + i) % ids.len()];
            let Some(mut w) = self.watchers.remove(&id) else {
                continue;
            };
            let mut out = Vec::new();
            progressed |= self.poll_file(&mut w, &mut out);
            self.watchers.insert(id, w);
            self.flush_if_needed();
            self.send_all(out).await?;
        }
        Ok(progressed)
    }

    /// Makes sure `w` has a descriptor if it may have new data. Returns false when it should be
    /// skipped this pass.
    fn ensure_open(&mut self, w: &mut Watcher, out: &mut Vec<TailEvent>) -> bool {
        if w.file.is_some() {
            return true;
        }
        if w.lost_since.is_some() {
            return false; // cannot be reopened by name
        }
        let now = Instant::now();
        if now < w.next_stat {
            return false;
        }
        w.next_stat = now + self.t.cfg.poll_interval;
        let meta = match std::fs::metadata(&w.path) {
            Ok(m) => m,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return false,
            Err(e) => {
                self.read_error(w, out, e.to_string());
                return false;
            }
        };
        if key_of(&meta) != w.key {
            return false; // the name points elsewhere now; the next scan sorts it out
        }
        let unchanged = meta.len() == w.size && meta.modified().ok() == w.mtime;
        if unchanged && w.pending_reset.is_none() && (w.at_eof() || w.stalled_at.is_some()) {
            return false;
        }
        if self.open_files >= self.t.cfg.max_open_files && !self.evict_one(Some(w.id)) {
            return false;
        }
        match open_file(&w.path) {
            Ok(f) => {
                match f.metadata() {
                    Ok(m) if key_of(&m) == w.key => {}
                    _ => return false,
                }
                w.file = Some(f);
                self.set_open_files(self.open_files + 1);
                true
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => false,
            Err(e) => {
                self.read_error(w, out, e.to_string());
                false
            }
        }
    }

    fn read_error(&mut self, w: &mut Watcher, out: &mut Vec<TailEvent>, error: String) {
        if !w.error_reported {
            w.error_reported = true;
            self.count_error(w.source);
            if let Some(suppressed) = self.rl.allow("read_error") {
                tracing::warn!(path = %w.path.display(), %error, suppressed, "Cannot read log file.");
            }
            out.push(TailEvent::Error {
                source: w.source,
                path: w.path.clone(),
                error,
            });
        }
    }

    /// Checks identity, applies a due reset and reads one chunk. Returns whether it progressed.
    fn poll_file(&mut self, w: &mut Watcher, out: &mut Vec<TailEvent>) -> bool {
        if !self.ensure_open(w, out) {
            return false;
        }
        // Taken out for the duration of the poll so that `w` stays mutable.
        let Some(file) = w.file.take() else {
            return false;
        };
        let progressed = self.poll_open(w, &file, out);
        w.file = Some(file);
        progressed
    }

    fn poll_open(&mut self, w: &mut Watcher, file: &File, out: &mut Vec<TailEvent>) -> bool {
        let meta = match file.metadata() {
            Ok(m) => m,
            Err(e) => {
                self.read_error(w, out, e.to_string());
                return false;
            }
        };
        let size = meta.len();
        let mtime = meta.modified().ok();
        let changed = size != w.size || mtime != w.mtime || w.reopened;

        if w.pending_reset.is_none() && (changed || size < w.offset) {
            let mut head_buf = [0u8; FINGERPRINT_BYTES];
            match fingerprint::read_head(file, &mut head_buf) {
                Ok(bytes) => match fingerprint::check(w.head, bytes) {
                    HeadCheck::Same(h) if size >= w.offset => w.head = h,
                    HeadCheck::Same(_) => {
                        w.pending_reset = Some((ResetKind::Truncated, Instant::now()));
                    }
                    HeadCheck::Changed(_) => {
                        let kind = if w.reopened {
                            ResetKind::Recreated
                        } else {
                            ResetKind::Truncated
                        };
                        w.pending_reset = Some((kind, Instant::now()));
                    }
                },
                Err(e) => {
                    self.read_error(w, out, e.to_string());
                    return false;
                }
            }
            w.reopened = false;
        }
        w.size = size;
        w.mtime = mtime;

        if let Some((kind, since)) = w.pending_reset {
            let acked = self.acks.get(w.id).map(|a| a.offset).unwrap_or(0);
            if acked < w.sent_end {
                if since.elapsed() < RESET_ACK_WAIT {
                    return false; // the consumer still works on the old content
                }
                if let Some(suppressed) = self.rl.allow("reset_unacked") {
                    tracing::warn!(path = %w.path.display(), acked, sent = w.sent_end, suppressed,
                        "Log file was replaced but its old content is not acknowledged; resetting anyway.");
                }
            }
            let mut head_buf = [0u8; FINGERPRINT_BYTES];
            let head = match fingerprint::read_head(file, &mut head_buf) {
                Ok(b) => Head::of(b),
                Err(e) => {
                    self.read_error(w, out, e.to_string());
                    return false;
                }
            };
            tracing::debug!(file = w.id, path = %w.path.display(), ?kind, "Log file content replaced; reading from the start.");
            if let Some(s) = self.t.stats.source(w.source) {
                let c = match kind {
                    ResetKind::Truncated => &s.rotations_truncate,
                    ResetKind::Recreated => &s.rotations_recreate,
                };
                TailStats::bump(c, 1);
            }
            out.push(TailEvent::Reset { file: w.id, kind });
            self.acks.set(w.id, 0, 0);
            w.head = head;
            w.offset = 0;
            w.sent_end = 0;
            w.skip = None;
            w.stalled_at = None;
            w.pending_reset = None;
            self.structure_dirty = true;
            self.checkpoint_now = true;
        }

        if w.offset >= size || w.stalled_at == Some(size) {
            return false;
        }
        let per_pass = self.t.cfg.read_bytes_per_pass;
        let max_line = self.t.cfg.max_line_bytes;
        let n = match read_chunk(file, w.offset, &mut self.buf, per_pass) {
            Ok(n) => n,
            Err(e) => {
                self.read_error(w, out, e.to_string());
                return false;
            }
        };
        w.error_reported = false;
        if n == 0 {
            return false;
        }
        let base = w.offset;
        let mut start = 0usize;
        let mut delivered = 0u64;
        let mut truncated = 0u64;

        if let Some(skip) = w.skip {
            match memchr::memchr(b'\n', &self.buf[..n]) {
                Some(i) => {
                    let end = base + i as u64 + 1;
                    if skip.emit_head {
                        let mut head = vec![0u8; max_line];
                        match read_exact_at(file, &mut head, skip.line_start) {
                            Ok(got) => {
                                head.truncate(got);
                                delivered += head.len() as u64;
                                truncated += 1;
                                out.push(TailEvent::Data {
                                    file: w.id,
                                    offset: skip.line_start,
                                    end,
                                    data: Bytes::from(head),
                                    truncated_head: true,
                                    mtime,
                                });
                                w.sent_end = end;
                            }
                            Err(e) => {
                                self.read_error(w, out, e.to_string());
                                return false;
                            }
                        }
                    }
                    w.skip = None;
                    w.offset = end;
                    start = i + 1;
                }
                None => {
                    w.offset = base + n as u64;
                    w.last_activity = Instant::now();
                    return true;
                }
            }
        }

        let chunk = &self.buf[start..n];
        let chunk_base = base + start as u64;
        let s = split(chunk, max_line);
        for p in &s.pieces {
            let ev = match p {
                Piece::Lines(r) => {
                    delivered += r.len() as u64;
                    TailEvent::Data {
                        file: w.id,
                        offset: chunk_base + r.start as u64,
                        end: chunk_base + r.end as u64,
                        data: Bytes::copy_from_slice(&chunk[r.clone()]),
                        truncated_head: false,
                        mtime,
                    }
                }
                Piece::Long { head, end } => {
                    delivered += head.len() as u64;
                    truncated += 1;
                    TailEvent::Data {
                        file: w.id,
                        offset: chunk_base + head.start as u64,
                        end: chunk_base + *end as u64,
                        data: Bytes::copy_from_slice(&chunk[head.clone()]),
                        truncated_head: true,
                        mtime,
                    }
                }
            };
            out.push(ev);
        }
        let mut progressed = start > 0;
        if s.consumed > 0 {
            w.offset = chunk_base + s.consumed as u64;
            w.sent_end = w.offset;
            progressed = true;
        }
        if s.rest_too_long {
            w.skip = Some(Skip {
                line_start: w.offset,
                emit_head: true,
            });
            w.offset = chunk_base + chunk.len() as u64;
            progressed = true;
        }
        if progressed {
            w.stalled_at = None;
            w.last_activity = Instant::now();
        } else {
            // Only an unterminated line: wait until the file grows.
            w.stalled_at = Some(size);
        }
        if let Some(st) = self.t.stats.source(w.source) {
            TailStats::bump(&st.bytes, delivered);
            TailStats::bump(&st.truncated_lines, truncated);
        }
        self.acks.sent(w.id, w.sent_end);
        progressed
    }

    // ---------------------------------------------------------------- checkpoints

    fn entry_of(&self, w: &Watcher, last_seen: u64) -> Entry {
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

    fn flush_if_needed(&mut self) {
        if std::mem::take(&mut self.checkpoint_now) {
            self.write_checkpoint();
        }
    }

    /// Writes acknowledged positions if they changed. Failures are counted, logged rate-limited
    /// and retried at the next interval.
    fn write_checkpoint(&mut self) {
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

/// Opens a log file for reading. `O_NONBLOCK` has no effect on regular files; it keeps the loop
/// from hanging if a path turns into a FIFO between the `stat` that vetted it and the `open`.
fn open_file(path: &std::path::Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
}

/// Reads up to `buf.len()` bytes at `offset`; returns how many were read (short at EOF).
fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
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
