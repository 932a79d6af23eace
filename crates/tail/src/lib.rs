//! Follows log files named by glob patterns and hands their complete lines to one consumer,
//! without losing or repeating a line across rotations and restarts.
//!
//! This crate owns everything between "a set of globs" and "a stream of line chunks": discovery
//! (periodic glob rescans, woken early by inotify), file identity (device, inode and a checksum of
//! the file's head), rotation handling (rename, copytruncate, delete and recreate, inode reuse),
//! bounded reading (a shared read buffer, an over-long line keeps only its head) and durable
//! positions (checkpoints that store only what the consumer acknowledged).
//!
//! The design follows Vector's `file-source` crates, the tailer most Rust log shippers point to:
//! identity by fingerprint instead of path, a position stored per fingerprint, an atomic and
//! versioned checkpoint file, a cap on bytes read per file per pass so that one busy file cannot
//! starve the others, and a model-based test that replays random file-system actions. It differs
//! where our daemon needs it to: the fingerprint combines (device, inode) with the head checksum, so
//! two jobs whose logs start with the same banner are never mistaken for one file; checkpoints hold
//! acknowledged offsets, not read offsets; and inotify wakes the loop early while the rescan stays
//! the ground truth.
//!
//! Two pieces serve the rest of the daemon too: [`ChunkReader`], the same bounded line reading
//! over any `std::io::Read`, and [`persist`], the atomic state-file writes and their recovery.
//!
//! The crate does not know the daemon's metrics or line model: it publishes counters in
//! [`TailStats`] and events on a channel, and the daemon maps them.
//!
//! ```no_run
//! # async fn demo() -> Result<(), assertwatch_tail::TailError> {
//! use assertwatch_tail::{TailConfig, TailEvent, TailSource, Tailer};
//! let cfg = TailConfig::new(
//!     vec![TailSource::new("jobs", vec!["/var/log/pods/*/*/*.log".into()])],
//!     "/var/lib/assertwatch/checkpoints.json".into(),
//! );
//! let tailer = Tailer::new(cfg)?;
//! let acks = tailer.ack_handle();
//! let (tx, mut rx) = tokio::sync::mpsc::channel(64);
//! let shutdown = tokio_util::sync::CancellationToken::new();
//! let task = tokio::spawn(tailer.run(tx, acks.clone(), shutdown.clone()));
//! while let Some(event) = rx.recv().await {
//!     if let TailEvent::Data { file, end, data, .. } = event {
//!         let lines = data.iter().filter(|b| **b == b'\n').count() as u64;
//!         // ... process, then acknowledge (a real consumer keeps a running line count).
//!         acks.ack(file, end, lines);
//!     }
//! }
//! # let _ = task.await;
//! # Ok(())
//! # }
//! ```

#![forbid(unsafe_code)]

mod ack;
mod checkpoint;
mod error;
mod fingerprint;
mod lines;
mod paths;
pub mod persist;
mod ratelimit;
mod stats;
mod tailer;
mod wake;

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

pub use ack::AckHandle;
pub use error::TailError;
pub use fingerprint::FINGERPRINT_BYTES;
pub use lines::{Chunk, ChunkReader};
pub use stats::{SourceStats, TailStats};
pub use tailer::Tailer;

/// Stable identity of one followed file. It survives renames, and restarts through the
/// checkpoint file. A file whose content is replaced under the same inode keeps its id and gets a
/// [`TailEvent::Reset`].
pub type FileId = u64;

/// One named group of files, for example all training logs of a cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TailSource {
    /// Name used in logs; the index of the source in [`TailConfig::sources`] tags events and stats.
    pub name: String,
    /// Glob patterns (syntax of the `glob` crate). A file matched by several sources belongs to the
    /// first.
    pub include: Vec<String>,
    /// Patterns removed from the matches. A pattern that contains `/` is matched against the whole
    /// path; one without `/` (such as `*.gz`) against the file name.
    pub exclude: Vec<String>,
}

impl TailSource {
    /// A source with include patterns and no excludes.
    pub fn new(name: impl Into<String>, include: Vec<String>) -> Self {
        Self {
            name: name.into(),
            include,
            exclude: Vec::new(),
        }
    }
}

/// Settings of one [`Tailer`]. Every bound says what it protects against.
#[derive(Debug, Clone)]
pub struct TailConfig {
    /// The groups of files to follow.
    pub sources: Vec<TailSource>,
    /// JSON file holding the acknowledged position of each file; its parent is created if missing.
    pub checkpoint_path: PathBuf,
    /// How often the globs are expanded again. The rescan is the ground truth; inotify events only
    /// make it happen sooner.
    pub rescan_interval: Duration,
    /// Upper bound on descriptors held open. Past it, the least recently active files are closed
    /// and watched with `stat` until they grow; rotated files still being drained are never closed
    /// early, since they could not be opened again by name.
    pub max_open_files: usize,
    /// Most bytes read from one file per pass, so that one busy file cannot starve the others.
    pub read_bytes_per_pass: usize,
    /// Longest line delivered whole. A longer line is delivered as its first `max_line_bytes`
    /// bytes with `truncated_head` set, and the rest of it is skipped. Protects memory against
    /// binary files and runaway writers.
    pub max_line_bytes: usize,
    /// On a first start (the checkpoint file holds no positions), files found by the first scan
    /// start just past their last complete line instead of at 0. Files that appear later, and
    /// every file after a restart with positions, are read from 0: a rotation or a job creates
    /// them while we watch or while we are down, and their first lines matter.
    pub start_at_end: bool,
    /// How often acknowledged positions are written to `checkpoint_path` (only when changed).
    pub checkpoint_interval: Duration,
    /// How often idle files are checked for growth when no inotify event arrives.
    pub poll_interval: Duration,
    /// How long a file that no glob matches any more (renamed away or deleted) is kept open after
    /// it stopped growing, so that a writer still holding it can finish.
    pub rotate_wait: Duration,
    /// How long the position of a file that has gone is remembered.
    pub checkpoint_retention: Duration,
}

/// Default of [`TailConfig::rescan_interval`].
pub const DEFAULT_RESCAN_INTERVAL: Duration = Duration::from_secs(5);
/// Default of [`TailConfig::max_open_files`].
pub const DEFAULT_MAX_OPEN_FILES: usize = 256;
/// Default of [`TailConfig::read_bytes_per_pass`]: 256 KiB.
pub const DEFAULT_READ_BYTES_PER_PASS: usize = 256 << 10;
/// Default of [`TailConfig::max_line_bytes`], and of every other reader of log lines (the
/// daemon's `detection.max_line_bytes`, the kernel log, `assertwatch scan`): 1 MiB. CUDA
/// device-side assert blocks and Python tracebacks fit; a binary file or a runaway writer costs
/// at most this much per file.
pub const DEFAULT_MAX_LINE_BYTES: usize = 1 << 20;
/// Smallest accepted `max_line_bytes` setting: shorter would cut ordinary log lines.
pub const MIN_MAX_LINE_BYTES: usize = 256;
/// Largest accepted `max_line_bytes` setting: memory per followed file stays bounded.
pub const MAX_MAX_LINE_BYTES: usize = 64 << 20;
/// Default of [`TailConfig::checkpoint_interval`].
pub const DEFAULT_CHECKPOINT_INTERVAL: Duration = Duration::from_secs(1);
/// Default of [`TailConfig::poll_interval`].
pub const DEFAULT_POLL_INTERVAL: Duration = Duration::from_secs(1);
/// Default of [`TailConfig::rotate_wait`].
pub const DEFAULT_ROTATE_WAIT: Duration = Duration::from_secs(5);
/// Default of [`TailConfig::checkpoint_retention`].
pub const DEFAULT_CHECKPOINT_RETENTION: Duration = Duration::from_secs(3600);

impl TailConfig {
    /// The `DEFAULT_*` settings of this crate: rescan 5 s, 256 open files, 256 KiB per pass,
    /// 1 MiB lines, start at 0, checkpoints every second, poll every second, rotate_wait 5 s,
    /// retention 1 h.
    pub fn new(sources: Vec<TailSource>, checkpoint_path: PathBuf) -> Self {
        Self {
            sources,
            checkpoint_path,
            rescan_interval: DEFAULT_RESCAN_INTERVAL,
            max_open_files: DEFAULT_MAX_OPEN_FILES,
            read_bytes_per_pass: DEFAULT_READ_BYTES_PER_PASS,
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            start_at_end: false,
            checkpoint_interval: DEFAULT_CHECKPOINT_INTERVAL,
            poll_interval: DEFAULT_POLL_INTERVAL,
            rotate_wait: DEFAULT_ROTATE_WAIT,
            checkpoint_retention: DEFAULT_CHECKPOINT_RETENTION,
        }
    }
}

impl Default for TailConfig {
    /// No sources, `checkpoints.json` in the working directory, and the defaults of
    /// [`TailConfig::new`].
    fn default() -> Self {
        Self::new(Vec::new(), PathBuf::from("checkpoints.json"))
    }
}

/// Why reading of a file restarted at offset 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResetKind {
    /// Same file, shorter than the position or with a different head while we held it open
    /// (copytruncate).
    Truncated,
    /// The inode now holds different content and we had not kept it open: the file was replaced
    /// (deleted, and the inode reused).
    Recreated,
}

/// What the tailer tells its consumer. Events of one file arrive in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TailEvent {
    /// A file is being followed from `offset`; `lines` is what the consumer acknowledged for it
    /// last time (0 for new files). A consumer that keeps a line count sets it to `lines`.
    Opened {
        file: FileId,
        source: usize,
        path: PathBuf,
        offset: u64,
        lines: u64,
    },
    /// Complete lines (`data` ends with `\n`), or, with `truncated_head`, the first
    /// `max_line_bytes` of one over-long line (no newline; the rest of that line is skipped).
    /// `offset` is the file offset of `data[0]`; `end` is the offset just past everything this
    /// event accounts for (for a truncated line, past its newline) and is what to acknowledge.
    Data {
        file: FileId,
        offset: u64,
        end: u64,
        data: bytes::Bytes,
        truncated_head: bool,
        mtime: Option<SystemTime>,
    },
    /// The file's content was replaced: reading restarts at 0 and the consumer resets its line
    /// count. Sent only after every earlier chunk of the file was acknowledged (or after a long
    /// wait), so that a checkpoint never pairs an old offset with the new content.
    Reset { file: FileId, kind: ResetKind },
    /// The file is now found at `new_path` (rename rotation); it keeps its id and position.
    Renamed { file: FileId, new_path: PathBuf },
    /// The file is gone (no glob matches it) and was read to its end; forget it.
    Closed { file: FileId },
    /// An open, read or stat failure, or a glob match that is not a regular file. Never fatal;
    /// repeated errors for one path are reported once until the path recovers.
    Error {
        source: usize,
        path: PathBuf,
        error: String,
    },
}
