//! Reading: one fair pass over the followed files, reopening by name, identity checks, resets
//! after truncation or replacement, and turning each chunk into line events.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use bytes::Bytes;
use tokio::time::{Duration, Instant};

use super::{key_of, open_file, read_exact_at, Skip, State, Stop, Watcher};
use crate::fingerprint::{self, Head, HeadCheck, FINGERPRINT_BYTES};
use crate::lines::{split, Piece};
use crate::stats::TailStats;
use crate::{FileId, ResetKind, TailEvent};

/// How long a reset waits for the consumer to acknowledge everything sent before it. Past this,
/// the reset goes ahead; a late acknowledgement of old content could then be checkpointed.
const RESET_ACK_WAIT: Duration = Duration::from_secs(30);

impl State {
    /// One pass over every followed file. Returns whether any file made progress.
    pub(super) async fn read_pass(&mut self) -> Result<bool, Stop> {
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
