//! Log line formats: plain text, Kubernetes CRI, Docker json-file, and raw `/dev/kmsg` records.
//!
//! - CRI (kubelet/containerd): `<RFC3339Nano> <stdout|stderr> <F|P> <message>`; `P` marks a
//!   partial line that continues in the next record of the same stream, `F` the final part
//!   (Kubernetes CRI logging format, `kubelet/kuberuntime/logs`).
//! - Docker json-file: `{"log":"…\n","stream":"stderr","time":"…"}`; a `log` value that does not
//!   end in `\n` was split by the engine and continues in the next record.
//! - kmsg records: `prio,seq,usec,flags;message` followed by continuation lines that start with a
//!   space and carry `KEY=value` device properties (kernel ABI doc `dev-kmsg`).
//!
//! `auto` decides per stream from its first non-empty line. A line that does not parse in the
//! chosen format is passed on as plain text and counted, never dropped.

use crate::sources::kmsg::record;
use serde::Deserialize;
use std::borrow::Cow;

/// A training-log format as configured (`logs[].format`) or chosen by `auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Auto,
    Plain,
    Cri,
    DockerJson,
    /// Raw `/dev/kmsg` records (as `cat /dev/kmsg` prints them).
    Kmsg,
}

impl Format {
    pub fn parse(s: &str) -> Option<Format> {
        match s {
            "auto" => Some(Format::Auto),
            "plain" => Some(Format::Plain),
            "cri" => Some(Format::Cri),
            "docker-json" => Some(Format::DockerJson),
            "kmsg" => Some(Format::Kmsg),
            _ => None,
        }
    }
}

/// Guesses the format of a stream from one of its lines.
pub fn sniff(line: &[u8]) -> Format {
    let t = trim_cr(line);
    if t.first() == Some(&b'{') && serde_json::from_slice::<DockerRecord<'_>>(t).is_ok() {
        return Format::DockerJson;
    }
    if parse_cri(t).is_some() {
        return Format::Cri;
    }
    if record::parse(&String::from_utf8_lossy(t)).is_some() {
        return Format::Kmsg;
    }
    Format::Plain
}

fn trim_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

#[derive(Deserialize)]
struct DockerRecord<'a> {
    #[serde(borrow)]
    log: Cow<'a, str>,
    #[serde(default)]
    stream: Option<Cow<'a, str>>,
}

/// `(stream, partial, message)` of a CRI line.
fn parse_cri(line: &[u8]) -> Option<(bool, bool, &[u8])> {
    let sp1 = memchr::memchr(b' ', line)?;
    let ts = &line[..sp1];
    // RFC 3339: "2016-10-06T00:17:09.669794202Z" — check the shape cheaply.
    if ts.len() < 20 || ts.get(4) != Some(&b'-') || ts.get(10) != Some(&b'T') {
        return None;
    }
    let rest = &line[sp1 + 1..];
    let (stderr, rest) = if let Some(r) = rest.strip_prefix(b"stdout ") {
        (false, r)
    } else if let Some(r) = rest.strip_prefix(b"stderr ") {
        (true, r)
    } else {
        return None;
    };
    let (partial, msg) = match rest {
        [b'P', b' ', m @ ..] => (true, m),
        [b'F', b' ', m @ ..] => (false, m),
        [b'P'] => (true, &rest[1..]),
        [b'F'] => (false, &rest[1..]),
        _ => return None,
    };
    Some((stderr, partial, msg))
}

/// A complete logical line, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Logical {
    pub text: String,
    /// Physical line number (1-based) where the logical line began.
    pub first_line: u64,
    /// Byte offset of that physical line.
    pub offset: u64,
}

#[derive(Debug)]
struct Pending {
    line: Logical,
    cut: bool,
}

/// Streaming decoder for one stream; joins partial records with bounded buffers.
#[derive(Debug)]
pub struct Decoder {
    format: Format,
    max_line: usize,
    /// Partial CRI/docker records per output stream (stdout, stderr).
    partial: [Option<Pending>; 2],
    /// Lines that did not parse in the stream's format (passed on as plain text).
    pub malformed: u64,
    /// Logical lines cut at `max_line` bytes while joining partials.
    pub truncated: u64,
}

impl Decoder {
    pub fn new(format: Format, max_line: usize) -> Self {
        Decoder {
            format,
            max_line,
            partial: [None, None],
            malformed: 0,
            truncated: 0,
        }
    }

    pub fn format(&self) -> Format {
        self.format
    }

    /// Decides the format from `raw` while it is still undecided and `raw` is not blank (the
    /// line itself is then fed as usual).
    pub fn settle(&mut self, raw: &[u8]) -> Format {
        let raw = trim_cr(raw);
        if self.format == Format::Auto && !raw.iter().all(u8::is_ascii_whitespace) {
            self.format = sniff(raw);
        }
        self.format
    }

    /// Feeds one physical line (without its `\n`); returns a logical line when one is complete.
    pub fn push(&mut self, raw: &[u8], line_no: u64, offset: u64) -> Option<Logical> {
        let raw = trim_cr(raw);
        if self.format == Format::Auto {
            if raw.iter().all(u8::is_ascii_whitespace) {
                return Some(plain(raw, line_no, offset));
            }
            self.format = sniff(raw);
        }
        match self.format {
            Format::Plain | Format::Auto => Some(plain(raw, line_no, offset)),
            Format::Kmsg => {
                let s = String::from_utf8_lossy(raw);
                if record::is_continuation(&s) {
                    return None;
                }
                match record::parse(&s) {
                    Some(r) => Some(Logical {
                        text: record::unescape(r.message),
                        first_line: line_no,
                        offset,
                    }),
                    None => Some(Logical {
                        text: s.into_owned(),
                        first_line: line_no,
                        offset,
                    }),
                }
            }
            Format::Cri => match parse_cri(raw) {
                Some((stderr, partial, msg)) => self.join(
                    usize::from(stderr),
                    partial,
                    &String::from_utf8_lossy(msg),
                    line_no,
                    offset,
                ),
                None => {
                    self.malformed += 1;
                    Some(plain(raw, line_no, offset))
                }
            },
            Format::DockerJson => match serde_json::from_slice::<DockerRecord<'_>>(raw) {
                Ok(rec) => {
                    let idx = usize::from(rec.stream.as_deref() == Some("stderr"));
                    let (msg, partial) = match rec.log.strip_suffix('\n') {
                        Some(m) => (m, false),
                        None => (rec.log.as_ref(), true),
                    };
                    let msg = msg.strip_suffix('\r').unwrap_or(msg);
                    self.join(idx, partial, msg, line_no, offset)
                }
                Err(_) => {
                    self.malformed += 1;
                    Some(plain(raw, line_no, offset))
                }
            },
        }
    }

    fn join(
        &mut self,
        idx: usize,
        partial: bool,
        msg: &str,
        line_no: u64,
        offset: u64,
    ) -> Option<Logical> {
        let slot = &mut self.partial[idx];
        let cur = slot.get_or_insert_with(|| Pending {
            line: Logical {
                text: String::new(),
                first_line: line_no,
                offset,
            },
            cut: false,
        });
        let room = self.max_line.saturating_sub(cur.line.text.len());
        if msg.len() > room {
            let mut end = room;
            while end > 0 && !msg.is_char_boundary(end) {
                end -= 1;
            }
            cur.line.text.push_str(&msg[..end]);
            if !cur.cut {
                cur.cut = true;
                self.truncated += 1;
            }
        } else {
            cur.line.text.push_str(msg);
        }
        if partial {
            None
        } else {
            slot.take().map(|p| p.line)
        }
    }

    /// Returns a partial line still buffered at end of input.
    pub fn finish(&mut self) -> Vec<Logical> {
        self.partial
            .iter_mut()
            .filter_map(Option::take)
            .map(|p| p.line)
            .collect()
    }
}

fn plain(raw: &[u8], line_no: u64, offset: u64) -> Logical {
    Logical {
        text: String::from_utf8_lossy(raw).into_owned(),
        first_line: line_no,
        offset,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffs_formats() {
        assert_eq!(
            sniff(br#"{"log":"hi\n","stream":"stdout","time":"2024-01-01T00:00:00Z"}"#),
            Format::DockerJson
        );
        assert_eq!(
            sniff(b"2024-01-01T00:00:00.123456789Z stderr F hello"),
            Format::Cri
        );
        assert_eq!(
            sniff(b"6,3985,241965979,-;IPv6: link becomes ready"),
            Format::Kmsg
        );
        assert_eq!(sniff(b"Epoch 1 loss 0.3"), Format::Plain);
    }

    #[test]
    fn cri_partials_join() {
        let mut d = Decoder::new(Format::Cri, 1 << 20);
        assert_eq!(
            d.push(b"2024-01-01T00:00:00.1Z stderr P RuntimeError: CUDA ", 1, 0),
            None
        );
        let l = d
            .push(
                b"2024-01-01T00:00:00.2Z stderr F error: misaligned address",
                2,
                50,
            )
            .unwrap();
        assert_eq!(l.text, "RuntimeError: CUDA error: misaligned address");
        assert_eq!(l.first_line, 1);
    }

    #[test]
    fn docker_split_records_join_and_unescape() {
        let mut d = Decoder::new(Format::DockerJson, 1 << 20);
        assert_eq!(
            d.push(
                br#"{"log":"  File \"/w/t.py\", line 3,","stream":"stderr"}"#,
                1,
                0
            ),
            None
        );
        let l = d
            .push(br#"{"log":" in f\n","stream":"stderr"}"#, 2, 40)
            .unwrap();
        assert_eq!(l.text, r#"  File "/w/t.py", line 3, in f"#);
    }

    #[test]
    fn malformed_lines_pass_as_plain_and_are_counted() {
        let mut d = Decoder::new(Format::Cri, 1 << 20);
        let l = d.push(b"not a cri line", 1, 0).unwrap();
        assert_eq!(l.text, "not a cri line");
        assert_eq!(d.malformed, 1);
    }

    #[test]
    fn joined_partials_are_bounded() {
        let mut d = Decoder::new(Format::Cri, 10);
        for i in 0..100 {
            assert_eq!(
                d.push(b"2024-01-01T00:00:00.1Z stdout P 0123456789", i, 0),
                None
            );
        }
        let l = d
            .push(b"2024-01-01T00:00:00.1Z stdout F end", 101, 0)
            .unwrap();
        assert_eq!(l.text.len(), 10);
    }
}
