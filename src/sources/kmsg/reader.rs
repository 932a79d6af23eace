//! The kernel-log source: `/dev/kmsg`, or a kern.log-style file (which may hold raw records).
//!
//! `/dev/kmsg` facts (kernel ABI doc `dev-kmsg`): one record per `read()`; the first read after
//! `open` returns the oldest record in the ring and `SEEK_END` skips to new ones; when unread
//! records were overwritten, `read()` fails with `EPIPE` once and continues at the next available
//! record; with `O_NONBLOCK`, "nothing new" is `EAGAIN`. Sequence numbers are consecutive, so a
//! gap is the number of records lost. A restart resumes after the last sequence number
//! processed in the same boot (boot id from `/proc/sys/kernel/random/boot_id`), so old Xids are
//! not reported twice; on a new boot it starts at the end of the ring, or `lookback` back.
//!
//! Runs on its own thread: reads block or poll, and must not occupy the async runtime.

use super::record;
use crate::sources::reader::ChunkReader;
use serde::{Deserialize, Serialize};
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// One line of kernel log.
#[derive(Debug, Clone)]
pub struct KernelLine {
    /// Sequence number (device) or line number (file): the engine's line counter.
    pub line: u64,
    /// Sequence number (device) or byte offset (file): the dedup position.
    pub pos: u64,
    pub text: String,
}

/// Where the kernel source stands after a batch; the pipeline persists it once processed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "version")]
pub enum KernelCheckpoint {
    #[serde(rename = "1")]
    V1 {
        boot_id: String,
        path: String,
        seq: Option<u64>,
        offset: Option<u64>,
        lines: Option<u64>,
    },
}

#[derive(Debug)]
pub struct KernelBatch {
    pub lines: Vec<KernelLine>,
    /// Records lost to ring overruns (sequence gaps) before and within this batch.
    pub lost: u64,
    pub records: u64,
    pub checkpoint: KernelCheckpoint,
    pub read_at: Instant,
    /// Identifies the stream for dedup keys (`kmsg:<boot>` or `file:<path>`).
    pub stream_key: String,
}

pub fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

pub fn checkpoint_path(state_dir: &Path) -> PathBuf {
    state_dir.join("kernel-log.json")
}

/// The saved position, recovered by the rule every state file follows
/// ([`assertwatch_tail::persist::load`]); `None` when there is none to trust.
fn load_checkpoint(state_dir: &Path) -> Option<KernelCheckpoint> {
    use assertwatch_tail::persist::{self, Parsed};
    let parse = |_: &Path, b: &[u8]| {
        Ok::<_, std::convert::Infallible>(
            serde_json::from_slice(b)
                .map_or_else(|e| Parsed::Invalid(e.to_string()), Parsed::Valid),
        )
    };
    persist::load(&checkpoint_path(state_dir), parse)
        .ok()?
        .state
}

/// Starts the reader thread. `ready` is called once the source is open (or found absent).
pub fn spawn(
    path: PathBuf,
    lookback: Option<Duration>,
    state_dir: PathBuf,
    max_line: usize,
    tx: mpsc::Sender<KernelBatch>,
    stop: CancellationToken,
    ready: Box<dyn FnOnce() + Send>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("kernel-log".into())
        .spawn(move || {
            let is_dev = std::fs::metadata(&path)
                .map(|m| m.file_type().is_char_device())
                .unwrap_or(false);
            let ck = load_checkpoint(&state_dir);
            if is_dev {
                run_device(&path, lookback, ck, tx, &stop, ready);
            } else {
                run_file(&path, ck, max_line, tx, &stop, ready);
            }
        })
}

fn run_device(
    path: &Path,
    lookback: Option<Duration>,
    ck: Option<KernelCheckpoint>,
    tx: mpsc::Sender<KernelBatch>,
    stop: &CancellationToken,
    ready: Box<dyn FnOnce() + Send>,
) {
    let boot = boot_id();
    let resume = match &ck {
        Some(KernelCheckpoint::V1 {
            boot_id,
            seq: Some(s),
            ..
        }) if *boot_id == boot => Some(*s),
        _ => None,
    };
    let mut ready = Some(ready);
    let mut backoff = Duration::from_secs(1);
    while !stop.is_cancelled() {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path);
        let mut file = match file {
            Ok(f) => f,
            Err(e) => {
                tracing::error!(path = %path.display(), error = %e, "Cannot open the kernel log; Xids from it are missed until it opens (needs CAP_SYSLOG when kernel.dmesg_restrict=1).");
                if let Some(r) = ready.take() {
                    r();
                }
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(Duration::from_secs(60));
                continue;
            }
        };
        // Without a checkpoint of this boot: start at the end, or `lookback` before it.
        let min_usec = match (resume, lookback) {
            (Some(_), _) => None,
            (None, Some(lb)) => Some(uptime_usec().saturating_sub(lb.as_micros() as u64)),
            (None, None) => {
                let _ = file.seek(SeekFrom::End(0));
                None
            }
        };
        if let Some(r) = ready.take() {
            r();
        }
        let mut last_seq = resume;
        let mut buf = vec![0u8; 16 * 1024];
        let mut batch: Vec<KernelLine> = Vec::new();
        let mut lost = 0u64;
        let mut records = 0u64;
        loop {
            if stop.is_cancelled() {
                return;
            }
            match file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    let text = String::from_utf8_lossy(&buf[..n]);
                    let first = text.lines().next().unwrap_or("");
                    let Some(r) = record::parse(first) else {
                        continue;
                    };
                    if resume.is_some_and(|s| r.seq <= s) && last_seq.is_some_and(|s| r.seq <= s) {
                        continue;
                    }
                    if min_usec.is_some_and(|m| r.usec < m) {
                        last_seq = Some(r.seq);
                        continue;
                    }
                    if let Some(prev) = last_seq {
                        if r.seq > prev + 1 {
                            lost += r.seq - prev - 1;
                        }
                    }
                    last_seq = Some(r.seq);
                    records += 1;
                    batch.push(KernelLine {
                        line: r.seq,
                        pos: r.seq,
                        text: record::unescape(r.message),
                    });
                    if batch.len() >= 256 {
                        send(
                            &tx,
                            &mut batch,
                            &mut lost,
                            &mut records,
                            &boot,
                            path,
                            last_seq,
                        );
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if !batch.is_empty() || lost > 0 {
                        send(
                            &tx,
                            &mut batch,
                            &mut lost,
                            &mut records,
                            &boot,
                            path,
                            last_seq,
                        );
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
                // EPIPE: records were overwritten; the next read continues, and the sequence gap
                // tells how many were lost.
                Err(e) if e.raw_os_error() == Some(libc::EPIPE) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    tracing::warn!(error = %e, "Reading the kernel log failed; reopening.");
                    break;
                }
            }
        }
        std::thread::sleep(backoff);
    }
}

fn send(
    tx: &mpsc::Sender<KernelBatch>,
    batch: &mut Vec<KernelLine>,
    lost: &mut u64,
    records: &mut u64,
    boot: &str,
    path: &Path,
    seq: Option<u64>,
) {
    let b = KernelBatch {
        lines: std::mem::take(batch),
        lost: std::mem::take(lost),
        records: std::mem::take(records),
        checkpoint: KernelCheckpoint::V1 {
            boot_id: boot.to_owned(),
            path: path.display().to_string(),
            seq,
            offset: None,
            lines: None,
        },
        read_at: Instant::now(),
        stream_key: format!("kmsg:{boot}"),
    };
    let _ = tx.blocking_send(b);
}

fn uptime_usec() -> u64 {
    std::fs::read_to_string("/proc/uptime")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .next()
                .and_then(|v| v.parse::<f64>().ok())
        })
        .map(|s| (s * 1e6) as u64)
        .unwrap_or(0)
}

fn run_file(
    path: &Path,
    ck: Option<KernelCheckpoint>,
    max_line: usize,
    tx: mpsc::Sender<KernelBatch>,
    stop: &CancellationToken,
    ready: Box<dyn FnOnce() + Send>,
) {
    let pstr = path.display().to_string();
    let (mut offset, mut lines, mut last_seq) = match ck {
        Some(KernelCheckpoint::V1 {
            path: p,
            offset: Some(o),
            lines,
            seq,
            ..
        }) if p == pstr => (o, lines.unwrap_or(0), seq),
        _ => (0, 0, None),
    };
    let mut ready = Some(ready);
    let mut warned = false;
    while !stop.is_cancelled() {
        let mut f = match std::fs::File::open(path) {
            Ok(f) => f,
            Err(e) => {
                if !warned {
                    tracing::warn!(path = %path.display(), error = %e, "Cannot open the kernel log file; retrying.");
                    warned = true;
                }
                if let Some(r) = ready.take() {
                    r();
                }
                std::thread::sleep(Duration::from_millis(500));
                continue;
            }
        };
        warned = false;
        let size = f.metadata().map(|m| m.len()).unwrap_or(0);
        if size < offset {
            // Truncated or replaced: start over.
            offset = 0;
            lines = 0;
            last_seq = None;
        }
        if f.seek(SeekFrom::Start(offset)).is_err() {
            std::thread::sleep(Duration::from_millis(500));
            continue;
        }
        if let Some(r) = ready.take() {
            r();
        }
        let mut rd = ChunkReader::new(&mut f, max_line, 256 * 1024, offset).hold_unterminated();
        let mut batch = Vec::new();
        let (mut lost, mut records) = (0u64, 0u64);
        loop {
            let chunk = match rd.next_chunk() {
                Ok(Some(c)) => c,
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!(error = %e, "Reading the kernel log file failed.");
                    break;
                }
            };
            let base = chunk.offset;
            let mut s = 0;
            let data = chunk.data;
            while s < data.len() {
                let e = memchr::memchr(b'\n', &data[s..]).map_or(data.len(), |i| s + i);
                let raw = String::from_utf8_lossy(&data[s..e]);
                lines += 1;
                let pos = base + s as u64;
                if record::is_continuation(&raw) {
                    s = e + 1;
                    continue;
                }
                let text = match record::parse(&raw) {
                    Some(r) => {
                        if let Some(prev) = last_seq {
                            if r.seq > prev + 1 {
                                lost += r.seq - prev - 1;
                            }
                        }
                        last_seq = Some(r.seq);
                        record::unescape(r.message)
                    }
                    None => raw.into_owned(),
                };
                records += 1;
                batch.push(KernelLine {
                    line: lines,
                    pos,
                    text,
                });
                s = e + 1;
            }
            offset = base + data.len() as u64;
            if chunk.truncated {
                offset = rd.committed_offset();
            }
        }
        if !batch.is_empty() || lost > 0 {
            let b = KernelBatch {
                lines: std::mem::take(&mut batch),
                lost,
                records,
                checkpoint: KernelCheckpoint::V1 {
                    boot_id: String::new(),
                    path: pstr.clone(),
                    seq: last_seq,
                    offset: Some(offset),
                    lines: Some(lines),
                },
                read_at: Instant::now(),
                stream_key: format!("file:{pstr}"),
            };
            if tx.blocking_send(b).is_err() {
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
