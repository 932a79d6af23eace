//! The whole `scan` pipeline over arbitrary bytes: `ChunkReader` → `StreamScanner` → `Engine`,
//! driven the way `assertwatch scan` drives it (drain after every chunk, then `finish`,
//! `flush_stream` and a last drain).
//!
//! Input layout: byte 0 picks the stream format (`% 5`); byte 1 the max line (`1 + 2 * b`, so
//! 1..=511 bytes); byte 2 how many bytes each `read` returns (1..=256), so lines straddle reads
//! and over-long lines straddle the reader's buffer; the rest is the stream.
//!
//! Checks, beyond "never panics":
//! - every chunk is a verbatim slice of the input at its `offset`, chunks never overlap or go
//!   back, a cut chunk is exactly `max_line` bytes, an unterminated chunk is at most `max_line`
//!   bytes with no newline, any other chunk ends in a newline;
//! - every finding's text is at most `3 * max_line` bytes (a cut line, each invalid byte possibly
//!   widened to U+FFFD) and its line number lies in the input;
//! - the scanner counts exactly the input's lines (newlines, plus an unterminated last line),
//!   whatever was cut or skipped;
//! - every incident's line range lies in the input and is ordered.

#![no_main]

use assertwatch::detect::DetectorSet;
use assertwatch::incidents::{Engine, EngineConfig};
use assertwatch::sources::decode::Format;
use assertwatch::sources::reader::ChunkReader;
use assertwatch::sources::stream::StreamScanner;
use libfuzzer_sys::fuzz_target;
use std::io::Read;
use std::sync::OnceLock;

const FORMATS: [Format; 5] = [
    Format::Auto,
    Format::Plain,
    Format::Cri,
    Format::DockerJson,
    Format::Kmsg,
];

fn detectors() -> &'static DetectorSet {
    static DET: OnceLock<DetectorSet> = OnceLock::new();
    DET.get_or_init(DetectorSet::builtin)
}

/// A reader that returns at most `step` bytes per call.
struct Trickle<'a> {
    data: &'a [u8],
    step: usize,
}

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.step.min(buf.len()).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let format = FORMATS[usize::from(data[0] % 5)];
    let max_line = 1 + 2 * usize::from(data[1]);
    let step = 1 + usize::from(data[2]);
    let input = &data[3..];
    let total_lines = bytecount(input) + u64::from(input.last().is_some_and(|&b| b != b'\n'));

    let det = detectors();
    let mut rd = ChunkReader::new(
        Trickle { data: input, step },
        max_line,
        // The reader reads at least 4096 bytes at a time; the trickle makes reads short.
        4096,
        0,
    );
    let mut sc = StreamScanner::new(format, max_line, 1);
    let mut engine = Engine::new(EngineConfig::default());
    let mut findings = Vec::new();
    let mut incidents = Vec::new();
    let mut next = 0u64;
    while let Some(c) = rd.next_chunk().expect("reading a slice cannot fail") {
        let start = usize::try_from(c.offset).unwrap();
        assert!(c.offset >= next, "chunk at {} overlaps {next}", c.offset);
        assert_eq!(c.data, &input[start..start + c.data.len()]);
        next = c.offset + c.data.len() as u64;
        if c.truncated {
            assert_eq!(c.data.len(), max_line);
        } else if c.unterminated {
            assert!(c.data.len() <= max_line && !c.data.contains(&b'\n'));
        } else {
            assert_eq!(c.data.last(), Some(&b'\n'));
        }
        sc.feed(&c, det, 0, &mut findings);
        for f in findings.drain(..) {
            assert!(
                f.text.len() <= 3 * max_line,
                "finding text of {} bytes",
                f.text.len()
            );
            assert!(
                f.line >= 1 && f.line <= total_lines,
                "finding at line {}",
                f.line
            );
            engine.observe(0, f);
        }
        incidents.extend(engine.drain().into_iter().filter(|u| u.closed));
    }
    sc.finish(det, 0, &mut findings);
    for f in findings.drain(..) {
        assert!(f.text.len() <= 3 * max_line);
        assert!(f.line >= 1 && f.line <= total_lines);
        engine.observe(0, f);
    }
    engine.flush_stream(0);
    incidents.extend(engine.drain().into_iter().filter(|u| u.closed));
    assert_eq!(engine.open_count(), 0);
    assert_eq!(sc.line_count(), total_lines, "line count");
    for u in &incidents {
        let i = &u.incident;
        assert!(1 <= i.first_line && i.first_line <= i.last_line && i.last_line <= total_lines);
    }
});

fn bytecount(b: &[u8]) -> u64 {
    b.iter().filter(|&&c| c == b'\n').count() as u64
}
