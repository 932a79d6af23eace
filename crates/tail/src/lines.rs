//! Splitting a read chunk into deliverable pieces: runs of complete lines, and over-long lines
//! that keep only their head. This is the pure part of Vector's `read_until_with_max_size`
//! idea: bytes past `max_line_bytes` are never held, only skipped to the next newline and counted.

use std::ops::Range;

/// One deliverable piece of a chunk, as byte ranges into it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Piece {
    /// Complete lines, newline included.
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
    let mut run_start = 0;
    while let Some(i) = memchr::memchr(b'\n', &chunk[pos..]) {
        let nl = pos + i;
        if nl - pos > max_line {
            if run_start < pos {
                pieces.push(Piece::Lines(run_start..pos));
            }
            pieces.push(Piece::Long {
                head: pos..pos + max_line,
                end: nl + 1,
            });
            run_start = nl + 1;
        }
        pos = nl + 1;
    }
    if run_start < pos {
        pieces.push(Piece::Lines(run_start..pos));
    }
    Split {
        pieces,
        consumed: pos,
        rest_too_long: chunk.len() - pos > max_line,
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
}
