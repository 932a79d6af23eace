//! Detection of one line: the literal gate, `DetectorSet::inspect` and the parsers behind it.
//!
//! `inspect` only reaches a parser when the line holds that parser's literal, so the parsers are
//! also called directly to fuzz them on text that lacks it. Checks: the two gate entry points
//! agree, and inspection is a pure function of the line.

#![no_main]

use assertwatch::detect::{kernel_assert, numeric, traceback, xid, DetectorSet};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

fn detectors() -> &'static DetectorSet {
    static DET: OnceLock<DetectorSet> = OnceLock::new();
    DET.get_or_init(DetectorSet::builtin)
}

fuzz_target!(|line: &str| {
    let d = detectors();
    let bytes = line.as_bytes();
    let hit = d.next_gate_hit(bytes, 0);
    assert_eq!(d.gate_matches(bytes), hit.is_some());
    if let Some(p) = hit {
        assert!(p < bytes.len());
    }
    let ev = d.inspect(line);
    assert_eq!(ev, d.inspect(line));

    let _ = kernel_assert::parse(line);
    let _ = numeric::parse(line, 1.0);
    let _ = traceback::parse_frame(line);
    let _ = xid::parse_xid(line);
    let _ = xid::parse_identity(line);
    let _ = xid::parse_mention(line);
    let _ = xid::parse_fallen_off_bus(line);
    if let Some((a, b)) = line.split_once('|') {
        let _ = xid::same_bus(a, b);
    }
});
