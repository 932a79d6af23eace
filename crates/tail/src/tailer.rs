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
//!
//! This module holds the loop and the state it owns; `discovery` finds and closes files,
//! `watch` reads them, `checkpoints` writes their positions.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::{File, Metadata};
use std::io;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::sync::mpsc::Sender;
use tokio::time::{sleep, Duration, Instant};
use tokio_util::sync::CancellationToken;

use crate::ack::AckHandle;
use crate::checkpoint::{self, Entry};
use crate::fingerprint::Head;
use crate::paths::Matcher;
use crate::ratelimit::RateLimit;
use crate::stats::TailStats;
use crate::wake::Wake;
use crate::{FileId, ResetKind, TailConfig, TailError, TailEvent};

mod checkpoints;
mod discovery;
mod watch;

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
