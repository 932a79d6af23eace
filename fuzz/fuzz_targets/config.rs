//! Configuration text: YAML parsing, unknown-key reporting, validation and line location.
//!
//! Paths resolve against an empty base directory. Checks: every reported issue names a field
//! path, and any line it gives lies inside the text. Lines are counted as YAML counts them: CR,
//! LF, CRLF, NEL, LS and PS all break lines (the YAML parser's numbers use that rule; a first
//! run of this target stopped on a CR-only file whose error named line 78 of 14 `\n` lines).

#![no_main]

use assertwatch::config::{parse, validate};
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|text: &str| {
    if let Err(e) = parse(text, None, Path::new("")) {
        let breaks = text
            .chars()
            .filter(|c| matches!(c, '\n' | '\r' | '\u{85}' | '\u{2028}' | '\u{2029}'))
            .count();
        let lines = breaks + 1;
        for issue in &e.issues {
            assert!(!issue.path.is_empty(), "{issue:?}");
            if let Some(l) = issue.line {
                assert!(l >= 1 && l <= lines + 1, "{issue:?} in {lines} lines");
            }
        }
        let _ = e.to_string();
    }
    let _ = validate::parse_duration(text);
    if let Some((path, _)) = text.split_once('\n') {
        let _ = validate::locate(text, path);
    }
});
