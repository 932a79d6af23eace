//! One `/dev/kmsg` record: `prio,seq,usec,flags[,…];message`, then continuation lines.
//!
//! Kernel ABI doc `Documentation/ABI/testing/dev-kmsg`: each read returns exactly one record;
//! the header fields are comma-separated and end at `;`; further comma-separated fields may be
//! added in future kernels and must be ignored; non-printable bytes in the message are escaped as
//! `\xNN`; continuation lines start with a space and carry `KEY=value` device properties.

/// A parsed record header and its message (still escaped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record<'a> {
    /// Syslog priority and facility, as the kernel writes them (`prio & 7` is the level).
    pub prio: u32,
    pub seq: u64,
    /// Microseconds since boot.
    pub usec: u64,
    pub message: &'a str,
}

/// Parses a record header. Returns `None` for anything that is not one.
pub fn parse(line: &str) -> Option<Record<'_>> {
    let (header, message) = line.split_once(';')?;
    let mut f = header.split(',');
    let prio = f.next()?.parse().ok()?;
    let seq = f.next()?.parse().ok()?;
    let usec = f.next()?.parse().ok()?;
    let flags = f.next()?;
    if flags.len() > 4 || !flags.bytes().all(|b| b == b'-' || b == b'c' || b == b'+') {
        return None;
    }
    Some(Record {
        prio,
        seq,
        usec,
        message,
    })
}

/// Is `line` a continuation line (` KEY=value`) of the previous record?
pub fn is_continuation(line: &str) -> bool {
    let Some(rest) = line.strip_prefix(' ') else {
        return false;
    };
    let key = rest.split('=').next().unwrap_or("");
    rest.contains('=')
        && !key.is_empty()
        && key
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
}

/// Undoes the kernel's `\xNN` escaping; bytes that do not form UTF-8 become U+FFFD.
pub fn unescape(msg: &str) -> String {
    if !msg.contains("\\x") {
        return msg.to_owned();
    }
    let b = msg.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && b.get(i + 1) == Some(&b'x') {
            let hex = b
                .get(i + 2..i + 4)
                .and_then(|h| std::str::from_utf8(h).ok());
            if let Some(v) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_header() {
        let r =
            parse("6,3964,206764307,-;NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.")
                .unwrap();
        assert_eq!((r.prio, r.seq, r.usec), (6, 3964, 206764307));
        assert!(r.message.starts_with("NVRM: Xid"));
    }

    #[test]
    fn header_fields_added_by_future_kernels_are_ignored() {
        let r = parse("4,1,2,c,extra;msg").unwrap();
        assert_eq!((r.prio, r.seq, r.usec, r.message), (4, 1, 2, "msg"));
        let r = parse("4,1,2,-,caller=T1,more;a;b").unwrap();
        assert_eq!((r.prio, r.seq, r.usec, r.message), (4, 1, 2, "a;b"));
    }

    #[test]
    fn prose_with_semicolons_is_not_a_record() {
        assert!(parse("loss=0.3; lr=1e-4").is_none());
    }

    #[test]
    fn continuation_and_unescape() {
        assert!(is_continuation(" SUBSYSTEM=pci"));
        assert!(!is_continuation(
            "               NVRM: (PCI ID: 10de:26b5) installed"
        ));
        assert_eq!(unescape("a\\x41b\\x0a"), "aAb\n");
        assert_eq!(unescape("bad\\xZZ"), "bad\\xZZ");
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,200}") {
            if let Some(r) = parse(&s) {
                // The message is everything after the first `;`, untouched.
                prop_assert_eq!(Some(r.message), s.split_once(';').map(|(_, m)| m));
            }
            let _ = is_continuation(&s);
            let u = unescape(&s);
            if !s.contains("\\x") {
                prop_assert_eq!(u, s);
            }
        }

        #[test]
        fn written_headers_round_trip(
            prio in 0u32..1024,
            seq in any::<u64>(),
            usec in any::<u64>(),
            flags in "[-c+]",
            extra in proptest::collection::vec("[a-z0-9=]{0,8}", 0..3),
            message in "\\PC{0,100}",
        ) {
            let mut line = format!("{prio},{seq},{usec},{flags}");
            for e in &extra {
                line.push(',');
                line.push_str(e);
            }
            line.push(';');
            line.push_str(&message);
            let r = parse(&line);
            prop_assert_eq!(
                r,
                Some(Record { prio, seq, usec, message: message.as_str() }),
                "{}", line
            );
        }
    }
}
