//! Bounded lines: the one place that decides where a line longer than the limit is cut, for
//! every reader of log bytes.
//!
//! Two readers share it: the tailer's pass over a followed file ([`split`]) and [`ChunkReader`]
//! over any [`std::io::Read`] (the kernel-log file reader and `assertwatch scan`). A line whose
//! bytes before the newline number more than `max_line` is over-long: its first `max_line` bytes
//! are delivered, marked as cut, and the rest is skipped up to the next newline and counted,
//! never held. This is Vector's `read_until_with_max_size` idea (`lib/file-source/src/buffer.rs`).
//!
//! Over-long lines are found without visiting every line. Any line of more than `max_line` bytes
//! covers a whole newline-free window of `max_line / 2` bytes on a grid that starts at a line
//! start, so one `memchr` per window finds them all, and ordinary text costs one short search
//! per window instead of one per line.

use std::io::{self, Read};
use std::ops::Range;

/// One deliverable piece of a chunk, as byte ranges into it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Piece {
    /// Complete lines, newline included, none of them over-long.
    Lines(Range<usize>),
    /// A line longer than the limit: deliver `head`, account up to `end` (past its newline).
    Long { head: Range<usize>, end: usize },
}

/// Result of [`split`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Split {
    pub(crate) pieces: Vec<Piece>,
    /// Bytes accounted for by `pieces` (a prefix of the chunk ending at a newline).
    pub(crate) consumed: usize,
    /// The unterminated rest of the chunk is already longer than the limit: skip it.
    pub(crate) rest_too_long: bool,
}

/// Splits `chunk`, which starts at a line boundary, into pieces; lines longer than `max_line`
/// bytes (newline excluded) become [`Piece::Long`].
pub(crate) fn split(chunk: &[u8], max_line: usize) -> Split {
    let mut pieces = Vec::new();
    let mut pos = 0;
    while let Some(p) = first_piece(&chunk[pos..], max_line) {
        let (p, next) = match p {
            Piece::Lines(r) => (Piece::Lines(pos + r.start..pos + r.end), pos + r.end),
            Piece::Long { head, end } => (
                Piece::Long {
                    head: pos + head.start..pos + head.end,
                    end: pos + end,
                },
                pos + end,
            ),
        };
        pieces.push(p);
        pos = next;
    }
    Split {
        pieces,
        consumed: pos,
        rest_too_long: chunk.len() - pos > max_line,
    }
}

/// The first piece of `chunk` (which starts at a line boundary); `None` when it holds no
/// complete line that is not over-long. A [`Piece::Lines`] runs up to the first over-long line
/// or the last newline.
///
/// Each call costs a search up to the first over-long line only, and the search for the last
/// newline happens once there is none left, so splitting a chunk stays linear however many
/// over-long lines it holds.
fn first_piece(chunk: &[u8], max_line: usize) -> Option<Piece> {
    match first_long_line(chunk, max_line) {
        Some((0, Some(nl))) => Some(Piece::Long {
            head: 0..max_line,
            end: nl + 1,
        }),
        // One unterminated over-long line: the caller cuts it.
        Some((0, None)) => None,
        Some((start, _)) => Some(Piece::Lines(0..start)),
        None => memchr::memrchr(b'\n', chunk).map(|i| Piece::Lines(0..i + 1)),
    }
}

/// The first line in `data` longer than `max_line`: its start, and its newline's index unless
/// it runs to the end of `data` unterminated.
fn first_long_line(data: &[u8], max_line: usize) -> Option<(usize, Option<usize>)> {
    let window = (max_line / 2).max(1);
    let mut w = 0;
    while w < data.len() {
        let we = (w + window).min(data.len());
        if memchr::memchr(b'\n', &data[w..we]).is_some() {
            w = we;
            continue;
        }
        // The window lies inside one line; measure that line.
        let start = memchr::memrchr(b'\n', &data[..w]).map_or(0, |i| i + 1);
        let nl = memchr::memchr(b'\n', &data[we..]).map(|i| we + i);
        let end = nl.unwrap_or(data.len());
        if end - start > max_line {
            return Some((start, nl));
        }
        w = end + 1;
    }
    None
}

/// One chunk of input from a [`ChunkReader`].
///
/// A chunk that is not `truncated` holds no line longer than the reader's `max_line`: every
/// over-long line comes as a `truncated` chunk of its own.
#[derive(Debug)]
pub struct Chunk<'a> {
    pub data: &'a [u8],
    /// Byte offset of `data[0]` in the stream.
    pub offset: u64,
    /// `data` is the cut head of an over-long line (the rest was skipped).
    pub truncated: bool,
    /// `data` ends with a line that has no newline (only at the end of input).
    pub unterminated: bool,
}

/// Reads any [`Read`] in large chunks that end on line boundaries, so that a scanner can search
/// a whole chunk at once, with over-long lines cut as the module docs say. Memory stays at about
/// `read_size + max_line` whatever the input: a 100 MB line with no newline costs the same as a
/// short one.
#[derive(Debug)]
pub struct ChunkReader<R> {
    inner: R,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// Offset in the stream of `buf[end]`.
    pos: u64,
    eof: bool,
    skipping: bool,
    max_line: usize,
    read_size: usize,
    /// When false, a trailing line without a newline at EOF is held back (tailing a live file).
    emit_unterminated: bool,
    /// The last read returned less than asked: the end of the input may be next.
    short_read: bool,
}

impl<R: Read> ChunkReader<R> {
    /// `start_offset` is the stream offset of the first byte `inner` will return. `max_line` is
    /// at least 1 and `read_size` at least 4096.
    pub fn new(inner: R, max_line: usize, read_size: usize, start_offset: u64) -> Self {
        let max_line = max_line.max(1);
        ChunkReader {
            inner,
            buf: Vec::with_capacity(read_size + 1024),
            start: 0,
            end: 0,
            pos: start_offset,
            eof: false,
            skipping: false,
            max_line,
            read_size: read_size.max(4096),
            emit_unterminated: true,
            short_read: false,
        }
    }

    /// Holds back an unterminated last line instead of returning it (for tailing).
    pub fn hold_unterminated(mut self) -> Self {
        self.emit_unterminated = false;
        self
    }

    /// Stream offset up to which everything has been returned (a safe checkpoint).
    pub fn committed_offset(&self) -> u64 {
        self.pos - (self.end - self.start) as u64
    }

    /// Returns the next chunk, or `None` at end of input.
    ///
    /// # Errors
    /// A read error of the inner reader (`Interrupted` is retried).
    pub fn next_chunk(&mut self) -> io::Result<Option<Chunk<'_>>> {
        loop {
            if self.skipping {
                match memchr::memchr(b'\n', &self.buf[self.start..self.end]) {
                    Some(i) => {
                        self.start += i + 1;
                        self.skipping = false;
                    }
                    None => self.start = self.end,
                }
            }
            if !self.skipping {
                let s = self.start;
                let offset = self.pos - (self.end - s) as u64;
                if let Some(piece) = first_piece(&self.buf[s..self.end], self.max_line) {
                    if let Piece::Lines(r) = &piece {
                        // Lines followed by the start of another: read on, so that at the end
                        // of the input the last, unterminated line comes in the same chunk as
                        // the lines before it (a scanner joins a hard-wrapped line with its
                        // neighbours only within a chunk). Only after a short read (the end may
                        // be next), so that big inputs read in full chunks pay nothing. Bounded:
                        // it reads on while less than two reads' worth is buffered, so a chunk
                        // is shorter than three reads (or one read past a carried partial line).
                        let tail = self.end - (s + r.end);
                        if tail > 0 && self.emit_unterminated {
                            if !self.eof && self.short_read && self.end - s < 2 * self.read_size {
                                self.fill()?;
                                continue;
                            }
                            if self.eof && r.start == 0 && tail <= self.max_line {
                                self.start = self.end;
                                return Ok(Some(Chunk {
                                    data: &self.buf[s..self.end],
                                    offset,
                                    truncated: false,
                                    unterminated: true,
                                }));
                            }
                        }
                    }
                    let (data, next, truncated) = match piece {
                        Piece::Lines(r) => (s + r.start..s + r.end, s + r.end, false),
                        Piece::Long { head, end } => (s + head.start..s + head.end, s + end, true),
                    };
                    self.start = next;
                    return Ok(Some(Chunk {
                        data: &self.buf[data],
                        offset,
                        truncated,
                        unterminated: false,
                    }));
                }
                let partial = self.end - s;
                if partial > self.max_line {
                    self.start = self.end;
                    self.skipping = true;
                    return Ok(Some(Chunk {
                        data: &self.buf[s..s + self.max_line],
                        offset,
                        truncated: true,
                        unterminated: false,
                    }));
                }
                if self.eof {
                    if partial > 0 && self.emit_unterminated {
                        self.start = self.end;
                        return Ok(Some(Chunk {
                            data: &self.buf[s..self.end],
                            offset,
                            truncated: false,
                            unterminated: true,
                        }));
                    }
                    return Ok(None);
                }
            } else if self.eof {
                return Ok(None);
            }
            self.fill()?;
        }
    }

    fn fill(&mut self) -> io::Result<()> {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        let want = self.end + self.read_size;
        if self.buf.len() < want {
            self.buf.resize(want, 0);
        }
        let n = loop {
            match self.inner.read(&mut self.buf[self.end..want]) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        };
        if n == 0 {
            self.eof = true;
        }
        self.short_read = n < want - self.end;
        self.end += n;
        self.pos += n as u64;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn holds_back_the_unterminated_tail() {
        let s = split(b"a\nbb\ncc", 10);
        assert_eq!(s.pieces, vec![Piece::Lines(0..5)]);
        assert_eq!(s.consumed, 5);
        assert!(!s.rest_too_long);
    }

    #[test]
    fn long_line_in_the_middle_keeps_its_head() {
        let s = split(b"a\n0123456789\nb\n", 4);
        assert_eq!(
            s.pieces,
            vec![
                Piece::Lines(0..2),
                Piece::Long {
                    head: 2..6,
                    end: 13
                },
                Piece::Lines(13..15)
            ]
        );
    }

    #[test]
    fn line_of_exactly_the_limit_is_whole() {
        assert_eq!(split(b"abcd\n", 4).pieces, vec![Piece::Lines(0..5)]);
        assert!(split(b"abcde", 4).rest_too_long);
        assert!(!split(b"abcd", 4).rest_too_long);
    }

    proptest! {
        /// Reassembling the pieces gives back every short line, in order, and every long line's
        /// head; nothing is delivered twice.
        #[test]
        fn pieces_cover_the_chunk(lines in proptest::collection::vec("[a-z]{0,12}", 0..20), max in 1usize..8) {
            let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
            let s = split(text.as_bytes(), max);
            let mut got = Vec::new();
            let mut last_end = 0;
            for p in &s.pieces {
                match p {
                    Piece::Lines(r) => {
                        prop_assert_eq!(r.start, last_end);
                        for l in text[r.clone()].split_terminator('\n') { got.push(l.to_owned()); }
                        last_end = r.end;
                    }
                    Piece::Long { head, end } => {
                        prop_assert_eq!(head.start, last_end);
                        got.push(text[head.clone()].to_owned());
                        last_end = *end;
                    }
                }
            }
            prop_assert_eq!(last_end, text.len());
            prop_assert_eq!(s.consumed, text.len());
            let want: Vec<String> = lines.iter().map(|l| if l.len() > max { l[..max].to_owned() } else { l.clone() }).collect();
            prop_assert_eq!(got, want);
        }
    }

    fn collect(input: &[u8], max_line: usize, read: usize) -> (Vec<Vec<u8>>, usize) {
        let mut r = ChunkReader::new(input, max_line, read, 0);
        let mut lines = Vec::new();
        let mut truncated = 0;
        while let Some(c) = r.next_chunk().unwrap() {
            if c.truncated {
                truncated += 1;
                lines.push(c.data.to_vec());
                continue;
            }
            for l in c.data.split_inclusive(|&b| b == b'\n') {
                lines.push(l.strip_suffix(b"\n").unwrap_or(l).to_vec());
            }
        }
        (lines, truncated)
    }

    #[test]
    fn long_line_is_cut_and_rest_skipped() {
        let mut input = b"a\n".to_vec();
        input.extend(std::iter::repeat_n(b'x', 100_000));
        input.extend(b"\nb\n");
        let (lines, t) = collect(&input, 1000, 4096);
        assert_eq!(t, 1);
        assert_eq!(lines[0], b"a");
        assert_eq!(lines[1].len(), 1000);
        assert_eq!(lines[2], b"b");
        assert_eq!(lines.len(), 3);
    }

    #[test]
    fn long_line_inside_one_read_is_cut_too() {
        let input = b"a\n0123456789\nb\n";
        let mut r = ChunkReader::new(&input[..], 4, 4096, 0);
        let mut got = Vec::new();
        while let Some(c) = r.next_chunk().unwrap() {
            got.push((c.offset, c.data.to_vec(), c.truncated));
        }
        assert_eq!(
            got,
            vec![
                (0, b"a\n".to_vec(), false),
                (2, b"0123".to_vec(), true),
                (13, b"b\n".to_vec(), false)
            ]
        );
    }

    #[test]
    fn many_long_lines_before_an_unterminated_one() {
        let mut input = Vec::new();
        for _ in 0..100 {
            input.extend([b'x'; 300]);
            input.push(b'\n');
        }
        input.extend([b'y'; 100_000]);
        let (lines, t) = collect(&input, 256, 1 << 20);
        assert_eq!((lines.len(), t), (101, 101));
        assert!(lines.iter().all(|l| l.len() == 256));
        let s = split(&input, 256);
        assert_eq!((s.pieces.len(), s.consumed), (100, 30_100));
        assert!(s.rest_too_long);
    }

    #[test]
    fn offsets_point_at_chunk_starts() {
        // At the end of the input the unterminated last line comes with the lines before it.
        let mut r = ChunkReader::new(&b"ab\ncd\nef"[..], 100, 4096, 10);
        let c = r.next_chunk().unwrap().unwrap();
        assert_eq!(
            (c.offset, c.data, c.unterminated),
            (10, &b"ab\ncd\nef"[..], true)
        );
        assert!(r.next_chunk().unwrap().is_none());
        // Tailing holds it back.
        let mut r = ChunkReader::new(&b"ab\ncd\nef"[..], 100, 4096, 10).hold_unterminated();
        let c = r.next_chunk().unwrap().unwrap();
        assert_eq!((c.offset, c.data), (10, &b"ab\ncd\n"[..]));
        assert!(r.next_chunk().unwrap().is_none());
        assert_eq!(r.committed_offset(), 16);
    }

    proptest! {
        #[test]
        fn lines_survive_any_read_size(lines in proptest::collection::vec("[a-z ]{0,40}", 0..50), read in 1usize..64) {
            let mut input = Vec::new();
            for l in &lines { input.extend(l.as_bytes()); input.push(b'\n'); }
            let (got, t) = collect(&input, 1 << 20, read);
            prop_assert_eq!(t, 0);
            let want: Vec<Vec<u8>> = lines.iter().map(|l| l.as_bytes().to_vec()).collect();
            prop_assert_eq!(got, want);
        }

        /// The reader and `split` cut the same lines the same way, whatever the read size.
        #[test]
        fn reader_and_split_agree(lines in proptest::collection::vec("[a-z]{0,700}", 0..12), max in 1usize..600) {
            let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
            let (got, t) = collect(text.as_bytes(), max, 4096);
            let s = split(text.as_bytes(), max);
            let mut want = Vec::new();
            for p in &s.pieces {
                match p {
                    Piece::Lines(r) => want.extend(text[r.clone()].split_terminator('\n').map(|l| l.as_bytes().to_vec())),
                    Piece::Long { head, .. } => want.push(text.as_bytes()[head.clone()].to_vec()),
                }
            }
            prop_assert_eq!(got, want);
            prop_assert_eq!(t, lines.iter().filter(|l| l.len() > max).count());
        }
    }
}
