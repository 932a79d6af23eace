//! Bounded reading of line-oriented bytes in large chunks.
//!
//! Returns chunks that end on a line boundary, so a scanner can search a whole chunk at once.
//! A line longer than `max_line` bytes is never held in memory whole: its first `max_line` bytes
//! come back as a chunk of their own marked `truncated`, the rest is skipped up to the next
//! newline and counted. Memory stays at about `read_size + max_line` whatever the input: a
//! 100 MB line with no newline costs the same as a short one.

use std::io::{self, Read};

/// One chunk of input.
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

/// Reads `R` in chunks that end on line boundaries. See the module docs.
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
}

impl<R: Read> ChunkReader<R> {
    /// `start_offset` is the stream offset of the first byte `inner` will return.
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
                if let Some(i) = memchr::memrchr(b'\n', &self.buf[self.start..self.end]) {
                    let s = self.start;
                    let e = self.start + i + 1;
                    self.start = e;
                    let offset = self.pos - (self.end - s) as u64;
                    return Ok(Some(Chunk {
                        data: &self.buf[s..e],
                        offset,
                        truncated: false,
                        unterminated: false,
                    }));
                }
                let partial = self.end - self.start;
                if partial > self.max_line {
                    let s = self.start;
                    let offset = self.pos - (self.end - s) as u64;
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
                        let s = self.start;
                        let offset = self.pos - (self.end - s) as u64;
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
        self.end += n;
        self.pos += n as u64;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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
    fn offsets_point_at_chunk_starts() {
        let mut r = ChunkReader::new(&b"ab\ncd\nef"[..], 100, 4096, 10);
        let c = r.next_chunk().unwrap().unwrap();
        assert_eq!((c.offset, c.data), (10, &b"ab\ncd\n"[..]));
        let c = r.next_chunk().unwrap().unwrap();
        assert_eq!((c.offset, c.data, c.unterminated), (16, &b"ef"[..], true));
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
    }
}
