//! File identity: (device, inode) plus a CRC32 of the file's first [`FINGERPRINT_BYTES`] bytes.
//!
//! The inode alone is not an identity: after a file is deleted the kernel hands the same number
//! to the next file, and copytruncate keeps the inode while replacing the content. The head
//! checksum alone is not one either: two training jobs that print the same banner have the same
//! first bytes (the weakness of Vector's checksum-only strategy, which it patches with
//! `ignored_header_bytes`). Together they tell "same file, moved" from "new content".
//!
//! A file shorter than [`FINGERPRINT_BYTES`] is fingerprinted over the bytes it has (`len` below)
//! and identified by device and inode until it grows; each time it grows the checksum of the old
//! prefix is verified and the fingerprint is extended. This plays the role of Vector's
//! `known_small_files`: a short file is not an error and is not mistaken for another.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// How many leading bytes of a file are checksummed.
pub const FINGERPRINT_BYTES: usize = 256;

/// Checksum of a file's first `len` bytes (`len` is at most [`FINGERPRINT_BYTES`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Head {
    pub(crate) len: u32,
    pub(crate) crc: u32,
}

impl Head {
    pub(crate) fn of(bytes: &[u8]) -> Head {
        let n = bytes.len().min(FINGERPRINT_BYTES);
        Head {
            len: n as u32,
            crc: crc32fast::hash(&bytes[..n]),
        }
    }

    /// Whether this fingerprint covers all [`FINGERPRINT_BYTES`].
    pub(crate) fn is_full(&self) -> bool {
        self.len as usize >= FINGERPRINT_BYTES
    }

    /// Whether `bytes` (the file's current head) starts with the bytes this fingerprint was taken
    /// over. `false` when the file is now shorter than that.
    pub(crate) fn is_prefix_of(&self, bytes: &[u8]) -> bool {
        let n = self.len as usize;
        bytes.len() >= n && crc32fast::hash(&bytes[..n]) == self.crc
    }
}

/// Reads up to [`FINGERPRINT_BYTES`] from the start of `file` into `buf` and returns them.
pub(crate) fn read_head<'a>(
    file: &File,
    buf: &'a mut [u8; FINGERPRINT_BYTES],
) -> io::Result<&'a [u8]> {
    let mut got = 0;
    while got < buf.len() {
        match file.read_at(&mut buf[got..], got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(&buf[..got])
}

/// Outcome of comparing a known fingerprint with the file's current head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HeadCheck {
    /// Same content; the fingerprint may have been extended (returned).
    Same(Head),
    /// The first `len` bytes changed or the file is shorter than `len`.
    Changed(Head),
}

/// Compares `known` with `current` (the file's first bytes as read now).
pub(crate) fn check(known: Head, current: &[u8]) -> HeadCheck {
    let now = Head::of(current);
    if known.is_prefix_of(current) {
        HeadCheck::Same(now)
    } else {
        HeadCheck::Changed(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn short_file_fingerprint_extends_as_it_grows() {
        let a = Head::of(b"hello\n");
        assert_eq!(a.len, 6);
        assert!(!a.is_full());
        match check(a, b"hello\nworld\n") {
            HeadCheck::Same(h) => assert_eq!(h.len, 12),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn rewritten_head_is_detected() {
        let a = Head::of(b"hello\n");
        assert!(matches!(check(a, b"jello\nworld\n"), HeadCheck::Changed(_)));
        // Shorter than the fingerprinted prefix: truncated.
        assert!(matches!(check(a, b"hel"), HeadCheck::Changed(_)));
    }

    #[test]
    fn only_the_first_bytes_count() {
        let mut long = vec![b'x'; FINGERPRINT_BYTES];
        let a = Head::of(&long);
        assert!(a.is_full());
        long.extend_from_slice(b"more\n");
        assert_eq!(Head::of(&long), a);
        assert_eq!(check(a, &long), HeadCheck::Same(a));
    }

    #[test]
    fn empty_file_matches_anything() {
        let empty = Head::of(b"");
        assert_eq!(empty, Head { len: 0, crc: 0 });
        assert!(matches!(check(empty, b"abc"), HeadCheck::Same(_)));
    }

    #[test]
    fn read_head_reads_at_most_the_fingerprint_length() {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(&vec![b'a'; 1000]).unwrap();
        let mut buf = [0u8; FINGERPRINT_BYTES];
        assert_eq!(read_head(&f, &mut buf).unwrap().len(), FINGERPRINT_BYTES);
        let g = tempfile::tempfile().unwrap();
        assert_eq!(read_head(&g, &mut buf).unwrap().len(), 0);
    }
}
