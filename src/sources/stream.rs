//! Turns the bytes of one stream into findings: decoding, line numbering, the literal gate and
//! detector inspection. The same scanner serves `assertwatch scan` and the daemon's tailers.
//!
//! Plain text takes the fast path: the gate runs over a whole chunk, newlines are counted in bulk
//! (`bytecount`), and only gated lines — plus the `follow_lines` lines after each — are
//! materialised and inspected. Formats that wrap each line (CRI, Docker JSON, kmsg records) are
//! decoded line by line first.
//!
//! Over-long lines are cut before they get here, by the one bounded reader of the tail crate
//! (the tailer's pass, or [`assertwatch_tail::ChunkReader`]): a chunk marked `truncated` is one cut
//! line, and any other chunk holds no line longer than `max_line`. The scanner only counts the
//! cut lines; its own length checks are a guard that keeps findings bounded should a caller
//! break that contract.

use super::decode::{Decoder, Format};
use super::reader::Chunk;
use crate::detect::DetectorSet;
use crate::model::Finding;

/// Counters of one stream's scanner.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ScanStats {
    pub lines: u64,
    pub bytes: u64,
    pub truncated_lines: u64,
    pub malformed_lines: u64,
}

/// Scanner state for one stream. See the module docs.
#[derive(Debug)]
pub struct StreamScanner {
    decoder: Decoder,
    max_line: usize,
    /// Lines completed so far (the next line is `lines + 1`).
    lines: u64,
    follow: u32,
    /// Physical lines folded into a later logical line (CRI/Docker partials, kmsg continuations):
    /// `lines - joined` is the logical position the grouping windows use.
    joined: u64,
    stats: ScanStats,
}

impl StreamScanner {
    pub fn new(format: Format, max_line: usize, first_line: u64) -> Self {
        StreamScanner {
            decoder: Decoder::new(format, max_line),
            max_line,
            lines: first_line.saturating_sub(1),
            follow: 0,
            joined: 0,
            stats: ScanStats::default(),
        }
    }

    pub fn stats(&self) -> ScanStats {
        let mut s = self.stats;
        s.lines = self.lines;
        s.malformed_lines = self.decoder.malformed;
        s.truncated_lines += self.decoder.truncated;
        s
    }

    /// Number of complete lines seen (the checkpoint's line counter).
    pub fn line_count(&self) -> u64 {
        self.lines
    }

    pub fn format(&self) -> Format {
        self.decoder.format()
    }

    /// Scans one chunk, appending findings to `out`. `at_ms` stamps them.
    pub fn feed(
        &mut self,
        chunk: &Chunk<'_>,
        det: &DetectorSet,
        at_ms: u64,
        out: &mut Vec<Finding>,
    ) {
        self.stats.bytes += chunk.data.len() as u64;
        if chunk.truncated {
            self.stats.truncated_lines += 1;
            self.per_line(chunk.data, chunk.offset, det, at_ms, out, true);
            return;
        }
        match self.decoder.format() {
            Format::Plain => self.fast(chunk, det, at_ms, out),
            Format::Auto => {
                // The first non-blank line decides; until then lines are plain.
                self.per_lines(chunk, det, at_ms, out);
            }
            _ => self.per_lines(chunk, det, at_ms, out),
        }
    }

    /// Flushes partial records buffered by the decoder (end of input).
    pub fn finish(&mut self, det: &DetectorSet, at_ms: u64, out: &mut Vec<Finding>) {
        for l in self.decoder.finish() {
            let seq = self.lines.saturating_sub(self.joined) + 1;
            self.inspect(&l.text, l.first_line, seq, l.offset, det, at_ms, out, true);
        }
    }

    fn per_lines(
        &mut self,
        chunk: &Chunk<'_>,
        det: &DetectorSet,
        at_ms: u64,
        out: &mut Vec<Finding>,
    ) {
        let data = chunk.data;
        let mut s = 0;
        while s < data.len() {
            let e = memchr::memchr(b'\n', &data[s..]).map_or(data.len(), |i| s + i);
            self.per_line(&data[s..e], chunk.offset + s as u64, det, at_ms, out, false);
            s = e + 1;
            // Once auto-detection picked plain text, the rest of the chunk takes the fast path.
            if self.decoder.format() == Format::Plain && s < data.len() {
                let rest = Chunk {
                    data: &data[s..],
                    offset: chunk.offset + s as u64,
                    truncated: false,
                    unterminated: chunk.unterminated,
                };
                self.fast(&rest, det, at_ms, out);
                return;
            }
        }
    }

    fn per_line(
        &mut self,
        raw: &[u8],
        offset: u64,
        det: &DetectorSet,
        at_ms: u64,
        out: &mut Vec<Finding>,
        cut: bool,
    ) {
        self.lines += 1;
        let line_no = self.lines;
        let raw = if raw.len() > self.max_line {
            if !cut {
                self.stats.truncated_lines += 1;
            }
            &raw[..self.max_line]
        } else {
            raw
        };
        match self.decoder.push(raw, line_no, offset) {
            Some(l) => {
                let seq = line_no - self.joined;
                self.inspect(&l.text, l.first_line, seq, l.offset, det, at_ms, out, false);
            }
            None => self.joined += 1,
        }
    }

    /// Scans one line that arrives already decoded and numbered (a kernel log record): the same
    /// gate, follow window and inspection as lines read from bytes.
    pub fn feed_line(
        &mut self,
        text: &str,
        line: u64,
        offset: u64,
        det: &DetectorSet,
        at_ms: u64,
        out: &mut Vec<Finding>,
    ) {
        self.lines = self.lines.max(line);
        self.inspect(text, line, line, offset, det, at_ms, out, false);
    }

    #[allow(clippy::too_many_arguments)]
    fn inspect(
        &mut self,
        text: &str,
        line_no: u64,
        seq: u64,
        offset: u64,
        det: &DetectorSet,
        at_ms: u64,
        out: &mut Vec<Finding>,
        force: bool,
    ) {
        let gated = det.gate_matches(text.as_bytes());
        if !(gated || force || self.follow > 0) {
            return;
        }
        if gated {
            self.follow = det.options().follow_lines;
        } else {
            self.follow = self.follow.saturating_sub(1);
        }
        if let Some(ev) = det.inspect(text) {
            out.push(Finding {
                line: line_no,
                seq,
                offset: Some(offset),
                at_ms,
                text: text.to_owned(),
                evidence: ev,
            });
        }
    }

    fn fast(&mut self, chunk: &Chunk<'_>, det: &DetectorSet, at_ms: u64, out: &mut Vec<Finding>) {
        let data = chunk.data;
        let mut counted = 0usize;
        let mut pos = 0usize;
        while pos < data.len() {
            let ls = if self.follow > 0 {
                pos
            } else {
                match det.next_gate_hit(data, pos) {
                    None => break,
                    Some(p) => memchr::memrchr(b'\n', &data[pos..p]).map_or(pos, |i| pos + i + 1),
                }
            };
            let le = memchr::memchr(b'\n', &data[ls..]).map_or(data.len(), |i| ls + i);
            self.lines += bytecount::count(&data[counted..ls], b'\n') as u64;
            let line_no = self.lines + 1;
            let mut raw = &data[ls..le];
            if let Some(r) = raw.strip_suffix(b"\r") {
                raw = r;
            }
            if raw.len() > self.max_line {
                raw = &raw[..self.max_line];
            }
            let text = String::from_utf8_lossy(raw);
            let seq = line_no - self.joined;
            self.inspect(
                &text,
                line_no,
                seq,
                chunk.offset + ls as u64,
                det,
                at_ms,
                out,
                false,
            );
            if le < data.len() {
                self.lines += 1;
                counted = le + 1;
            } else {
                counted = data.len();
                if chunk.unterminated {
                    self.lines += 1;
                }
            }
            pos = le + 1;
        }
        if counted < data.len() {
            let tail = &data[counted..];
            self.lines += bytecount::count(tail, b'\n') as u64;
            if chunk.unterminated && tail.last() != Some(&b'\n') {
                self.lines += 1;
            }
        }
    }
}
