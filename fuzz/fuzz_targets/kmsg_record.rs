//! `/dev/kmsg` records: header parsing, continuation lines and `\xNN` unescaping.
//!
//! Besides "never panics", checks what callers rely on: the message is exactly the text after the
//! first `;`, unescaping leaves text without `\x` alone and never grows a message by more than
//! one U+FFFD (3 bytes) per input byte.

#![no_main]

use assertwatch::sources::kmsg::record::{is_continuation, parse, unescape};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let line = String::from_utf8_lossy(data);
    if let Some(r) = parse(&line) {
        let semi = line.find(';').expect("a parsed record has a ';'");
        assert_eq!(&line[semi + 1..], r.message);
        let u = unescape(r.message);
        assert!(u.len() <= 3 * r.message.len());
    }
    if is_continuation(&line) {
        assert!(line.starts_with(' ') && line.contains('='));
    }
    let u = unescape(&line);
    if !line.contains("\\x") {
        assert_eq!(u, line);
    }
    assert!(u.len() <= 3 * line.len());
});
