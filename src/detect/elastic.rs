//! torchrun's `ChildFailedError` summary: the "Root Cause (first observed failure)" section,
//! read field by field into a [`RootCause`].
//!
//! The summary is printed by torch.distributed.elastic (`ChildFailedError.format_msg`,
//! torch/distributed/elastic/multiprocessing/errors/__init__.py) from this template:
//!
//! ```text
//! Root Cause (first observed failure):
//! [0]:
//!   time      : 2024-01-01_12:00:00
//!   host      : node01
//!   rank      : 3 (local_rank: 3)
//!   exitcode  : -6 (pid: 12345)
//!   error_file: <N/A>
//!   traceback : Signal 6 (SIGABRT) received by PID 12345
//! ```
//!
//! The same field lines also list the other failures above it (under "Failures:"); only the
//! ones after the "Root Cause" header describe the root cause.

use crate::model::RootCause;

/// What one line of the summary says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SummaryLine {
    /// `Root Cause (first observed failure):` — the fields that follow are the root cause's.
    RootCauseHeader,
    /// `host      : node01`
    Host(String),
    /// `rank      : 3 (local_rank: 3)`
    Rank { rank: u32, local_rank: Option<u32> },
    /// `exitcode  : -6 (pid: 12345)`
    ExitCode { exitcode: i32, pid: Option<u32> },
    /// `error_file: /tmp/torchelastic_…/error.json` (`<N/A>` when there is none).
    ErrorFile(Option<String>),
    /// `time      : 2024-01-01_12:00:00`
    Time(String),
}

/// The value after `name` and its padding colon, if `line` is that field's line. The line may
/// carry a launcher prefix (`[rank0]:`, a timestamp) before the indentation.
fn field<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let at = line.find(name)?;
    let rest = line[at + name.len()..].trim_start_matches(' ');
    let rest = rest.strip_prefix(':')?;
    Some(rest.trim())
}

/// A leading unsigned number of `s`, and what follows it.
fn number(s: &str) -> Option<(&str, &str)> {
    let neg = usize::from(s.starts_with('-'));
    let n = s[neg..].bytes().take_while(u8::is_ascii_digit).count();
    (n > 0 && n <= 10).then(|| s.split_at(neg + n))
}

/// The number after `key` in `s` (`(local_rank: 3)`, `(pid: 12345)`).
fn after<T: std::str::FromStr>(s: &str, key: &str) -> Option<T> {
    let at = s.find(key)?;
    let (n, _) = number(s[at + key.len()..].trim_start())?;
    n.parse().ok()
}

/// Parses one line of the summary, if it is one of the lines this module reads.
pub fn parse(line: &str) -> Option<SummaryLine> {
    if line.contains("Root Cause (first observed failure)") {
        return Some(SummaryLine::RootCauseHeader);
    }
    if let Some(v) = field(line, "error_file") {
        let v = v.trim();
        let none = v.is_empty() || v == "<N/A>";
        return Some(SummaryLine::ErrorFile((!none).then(|| v.to_owned())));
    }
    if let Some(v) = field(line, "exitcode") {
        let (n, rest) = number(v)?;
        return Some(SummaryLine::ExitCode {
            exitcode: n.parse().ok()?,
            pid: after(rest, "pid:"),
        });
    }
    if line.contains("(local_rank:") {
        let v = field(line, "rank")?;
        let (n, rest) = number(v)?;
        return Some(SummaryLine::Rank {
            rank: n.parse().ok()?,
            local_rank: after(rest, "local_rank:"),
        });
    }
    if let Some(v) = field(line, "host") {
        if !v.is_empty() && !v.contains(' ') {
            return Some(SummaryLine::Host(v.to_owned()));
        }
    }
    if let Some(v) = field(line, "time") {
        if v.len() <= 40 && v.bytes().next().is_some_and(|b| b.is_ascii_digit()) {
            return Some(SummaryLine::Time(v.to_owned()));
        }
    }
    None
}

/// The summary's field names, as the template prints them before their colons.
const FIELD_NAMES: [&str; 6] = [
    "time",
    "host",
    "rank",
    "exitcode",
    "error_file",
    "traceback",
];
/// The root-cause header, which a flattened summary runs into its fields.
const ROOT_CAUSE: &str = "Root Cause (first observed failure)";

/// Parses every part of `line` that is a line of the summary, in order. A paste or a log shipper
/// that lost the summary's newlines (CloudWatch, a one-line JSON `message`) runs one failure's
/// fields into one line: "[2]: time : 2024-08-23_22:22:58 host : algo-2 rank : 2 (local_rank: 2)
/// exitcode : -6 (pid: 189) error_file: <N/A> traceback : Signal 6 (SIGABRT) received by PID
/// 189". The line is cut before each field name that a colon follows (`local_rank:` and `pid:`
/// are inside the values) and each piece read as a field line.
pub fn parse_all(line: &str) -> Vec<SummaryLine> {
    let mut cuts: Vec<usize> = line.match_indices(ROOT_CAUSE).map(|(at, _)| at).collect();
    for name in FIELD_NAMES {
        for (at, _) in line.match_indices(name) {
            let starts = line[..at]
                .chars()
                .next_back()
                .is_none_or(|c| c.is_whitespace() || matches!(c, ':' | ']' | '|'));
            let colon = line[at + name.len()..]
                .trim_start_matches(' ')
                .starts_with(':');
            if starts && colon {
                cuts.push(at);
            }
        }
    }
    cuts.sort_unstable();
    cuts.dedup();
    if cuts.len() < 2 {
        return parse(line).into_iter().collect();
    }
    cuts.iter()
        .zip(cuts.iter().skip(1).chain(std::iter::once(&line.len())))
        .filter_map(|(&a, &b)| parse(&line[a..b]))
        .collect()
}

/// Is `line` one failed process's record with its fields run together ([`parse_all`]): its rank
/// and a non-zero exit code at least?
pub fn flattened_record(line: &str) -> bool {
    // The engine asks this of every continuation line while no incident is open; a rank field
    // only parses where `(local_rank:` is, so most lines need no cutting.
    if !line.contains("(local_rank:") {
        return false;
    }
    let fields = parse_all(line);
    fields.iter().any(|f| matches!(f, SummaryLine::Rank { .. }))
        && fields
            .iter()
            .any(|f| matches!(f, SummaryLine::ExitCode { exitcode, .. } if *exitcode != 0))
}

/// The text torchelastic puts in a record's `traceback` field when the failed process left no
/// error file (`_FAILURE_FORMAT_TEMPLATE`'s default, torch/distributed/elastic/multiprocessing/
/// errors/__init__.py).
pub const NO_ERROR_FILE_TRACEBACK: &str =
    "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html";

/// Is `line` the last field of one failed process's record, `traceback : To enable traceback
/// see: …`? A summary that a paste or a log collector cut before its header (only the record's
/// `time`, `host`, `rank`, `exitcode`, `error_file` and `traceback` lines kept, each behind a
/// timestamp) still tells that a worker failed; only the template writes this field so.
pub fn record_traceback_field(line: &str) -> bool {
    line.contains(NO_ERROR_FILE_TRACEBACK)
        && field(line, "traceback").is_some_and(|v| v.starts_with(NO_ERROR_FILE_TRACEBACK))
}

/// Folds `line` into `rc`; returns whether it changed anything. Field lines only count once a
/// root-cause header opened `rc`.
pub fn fold(rc: &mut Option<RootCause>, line: &str) -> bool {
    let mut changed = false;
    for l in parse_all(line) {
        changed |= fold_one(rc, l);
    }
    changed
}

fn fold_one(rc: &mut Option<RootCause>, l: SummaryLine) -> bool {
    if l == SummaryLine::RootCauseHeader {
        *rc = Some(RootCause::default());
        return true;
    }
    let Some(r) = rc.as_mut() else { return false };
    match l {
        SummaryLine::RootCauseHeader => {}
        SummaryLine::Host(h) => r.host = Some(h),
        SummaryLine::Rank { rank, local_rank } => {
            r.rank = Some(rank);
            r.local_rank = local_rank;
        }
        SummaryLine::ExitCode { exitcode, pid } => {
            r.exitcode = Some(exitcode);
            r.pid = pid;
        }
        SummaryLine::ErrorFile(f) => r.error_file = f,
        SummaryLine::Time(t) => r.time = Some(t),
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    // Shape of the summary as printed by torchrun (template in
    // torch/distributed/elastic/multiprocessing/errors/__init__.py; e.g. the report in
    // https://github.com/pytorch/pytorch/issues/103212).
    const SUMMARY: &str = "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: 
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
[1]:
  time      : 2023-06-08_10:11:12
  host      : gpu-node-2
  rank      : 1 (local_rank: 1)
  exitcode  : -6 (pid: 4242)
  error_file: <N/A>
  traceback : Signal 6 (SIGABRT) received by PID 4242
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2023-06-08_10:11:10
  host      : gpu-node-1
  rank      : 0 (local_rank: 0)
  exitcode  : 1 (pid: 4241)
  error_file: /tmp/torchelastic_ab/none_cd/attempt_0/0/error.json
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================";

    #[test]
    fn a_record_cut_from_its_header_ends_in_its_traceback_field() {
        assert!(record_traceback_field("2024-11-20 14:38:16   traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"));
        assert!(!record_traceback_field(
            "To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html"
        ));
        assert!(!record_traceback_field(
            "Read https://pytorch.org/docs/stable/elastic/errors.html on the traceback : field"
        ));
    }

    #[test]
    fn reads_a_summary_that_lost_its_newlines() {
        // A log shipper's row (CloudWatch) of one failure under "Failures:".
        let row = "  | 2024-08-23T22:22:58.879Z | [2]: time : 2024-08-23_22:22:58 host : algo-2 rank : 2 (local_rank: 2) exitcode : -6 (pid: 189) error_file: <N/A> traceback : Signal 6 (SIGABRT) received by PID 189";
        assert!(flattened_record(row));
        assert_eq!(
            parse_all(row),
            vec![
                SummaryLine::Time("2024-08-23_22:22:58".into()),
                SummaryLine::Host("algo-2".into()),
                SummaryLine::Rank {
                    rank: 2,
                    local_rank: Some(2)
                },
                SummaryLine::ExitCode {
                    exitcode: -6,
                    pid: Some(189)
                },
                SummaryLine::ErrorFile(None),
            ]
        );
        // Not under a root-cause header: the other failures do not name the root cause.
        let mut rc = None;
        assert!(!fold(&mut rc, row));
        assert!(rc.is_none());
        // The whole summary on one line: its root cause is the one after the header.
        let flat = SUMMARY.replace('\n', " ");
        let mut rc = None;
        assert!(fold(&mut rc, &flat));
        let rc = rc.unwrap();
        assert_eq!(
            (rc.rank, rc.exitcode, rc.pid),
            (Some(0), Some(1), Some(4241))
        );
        assert_eq!(rc.host.as_deref(), Some("gpu-node-1"));
        // Prose that names the fields is no record.
        assert!(!flattened_record(
            "the rank and exitcode fields of the summary"
        ));
        assert!(!flattened_record("  rank      : 1 (local_rank: 1)"));
        // A process that exited cleanly did not fail.
        assert!(!flattened_record("time : 12:00 host : node1 rank : 1 (local_rank: 1) exitcode : 0 (pid: 99) error_file: <N/A> traceback : <N/A>"));
    }

    #[test]
    fn reads_the_root_cause_not_the_other_failures() {
        let mut rc = None;
        for l in SUMMARY.lines() {
            fold(&mut rc, l);
        }
        let rc = rc.unwrap();
        assert_eq!(rc.rank, Some(0));
        assert_eq!(rc.local_rank, Some(0));
        assert_eq!(rc.exitcode, Some(1));
        assert_eq!(rc.pid, Some(4241));
        assert_eq!(rc.host.as_deref(), Some("gpu-node-1"));
        assert_eq!(
            rc.error_file.as_deref(),
            Some("/tmp/torchelastic_ab/none_cd/attempt_0/0/error.json")
        );
        assert_eq!(rc.time.as_deref(), Some("2023-06-08_10:11:10"));
    }

    #[test]
    fn prefixed_lines_and_signals() {
        assert_eq!(
            parse("[default0]:  exitcode  : -9 (pid: 77)"),
            Some(SummaryLine::ExitCode {
                exitcode: -9,
                pid: Some(77)
            })
        );
        assert_eq!(
            parse("  error_file: <N/A>"),
            Some(SummaryLine::ErrorFile(None))
        );
        assert_eq!(parse("the host is down: retrying"), None);
    }
}
