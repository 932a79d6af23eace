//! The line decoder (plain, CRI, Docker json-file, kmsg, auto) over arbitrary physical lines.
//!
//! Input layout: the first byte picks the format (`% 5`) and the max line (`1 + 4 * (b / 5)`,
//! so 1..=205 bytes, small enough to hit the join bound); the rest is split on `\n` into physical
//! lines fed to `Decoder::push`, then `finish` flushes partial records.
//!
//! Checks: a logical line never starts after the physical line that completed it, nor before
//! line 1; its offset is the offset of its first physical line; a line joined from several
//! records (or flushed by `finish`) is at most `max_line` bytes; `finish` leaves nothing behind.

#![no_main]

use assertwatch::sources::decode::{Decoder, Format, Logical};
use libfuzzer_sys::fuzz_target;

const FORMATS: [Format; 5] = [
    Format::Auto,
    Format::Plain,
    Format::Cri,
    Format::DockerJson,
    Format::Kmsg,
];

fn check(l: &Logical, completed_at: u64, offsets: &[u64], max_line: usize, joined: bool) {
    assert!(l.first_line >= 1 && l.first_line <= completed_at, "{l:?}");
    assert_eq!(l.offset, offsets[(l.first_line - 1) as usize], "{l:?}");
    if joined {
        assert!(l.text.len() <= max_line, "joined line over max_line: {l:?}");
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let format = FORMATS[usize::from(sel % 5)];
    let max_line = 1 + 4 * usize::from(sel / 5);
    let mut d = Decoder::new(format, max_line);
    let mut offsets = Vec::new();
    let mut offset = 0u64;
    let mut n = 0u64;
    for raw in rest.split(|&b| b == b'\n') {
        n += 1;
        offsets.push(offset);
        if let Some(l) = d.push(raw, n, offset) {
            check(&l, n, &offsets, max_line, l.first_line < n);
        }
        offset += raw.len() as u64 + 1;
    }
    for l in d.finish() {
        check(&l, n, &offsets, max_line, true);
    }
    assert!(d.finish().is_empty());
});
