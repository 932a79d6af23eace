//! Turns the bytes of one stream into findings: decoding, line numbering, the literal gate and
//! detector inspection. The same scanner serves `assertwatch scan` and the daemon's tailers.
//!
//! Plain text takes the fast path: the gate runs over a whole chunk, newlines are counted in bulk
//! (`bytecount`), and only gated lines — plus the `follow_lines` lines after each — are
//! materialised and inspected. Formats that wrap each line (CRI, Docker JSON, kmsg records) are
//! decoded line by line first.
//!
//! Hard-wrapped text (a terminal or log viewer that broke lines at 80–140 columns, copied into
//! a report) can cut a literal in two. A line that is inspected is therefore also tried joined
//! with the line before and the line after it — past up to [`LOOKAROUND`] lines of other ranks,
//! and without the `[rankN]:` prefix of the continuation — and the join wins when a detail
//! literal spans the break and the joined text says more than the line alone. Only the plain-text
//! fast path has neighbours at hand; wrapped container formats are not terminal output.
//!
//! Over-long lines are cut before they get here, by the one bounded reader of the tail crate
//! (the tailer's pass, or [`assertwatch_tail::ChunkReader`]): a chunk marked `truncated` is one cut
//! line, and any other chunk holds no line longer than `max_line`. The scanner only counts the
//! cut lines; its own length checks are a guard that keeps findings bounded should a caller
//! break that contract.

use super::decode::{Decoder, Format};
use super::reader::Chunk;
use crate::detect::DetectorSet;
use crate::model::{Evidence, Finding};

/// Lines looked at past other ranks' lines for the other piece of a wrapped line.
const LOOKAROUND: usize = 8;
/// A piece that a hard wrap cut is at least this long (wraps happen at 80 columns or more).
const WRAP_MIN: usize = 72;
/// Longest line considered as one piece of a wrapped line.
const PIECE_MAX: usize = 1024;

/// The lines around an inspected line, where the scanner has them.
#[derive(Debug, Default, Clone, Copy)]
struct Around<'a> {
    /// The closest earlier line (of the same rank, when the line has a rank prefix).
    prev: Option<&'a [u8]>,
    /// The line before `prev` that `prev` may continue (a line cut in three or more).
    prev2: Option<&'a [u8]>,
    /// The closest later line (likewise).
    next: Option<&'a [u8]>,
    /// The closest earlier line with text, past blank lines and code fences: what introduces
    /// the line in a report or an article.
    intro: Option<&'a [u8]>,
    /// The closest later line with text (likewise).
    after: Option<&'a [u8]>,
    /// The line is inside a C-family block comment ([`in_block_comment`]).
    in_comment: bool,
}

/// Lines looked back through for the `/*` that opens a block comment.
const COMMENT_LOOKBACK: usize = 64;

/// A line of a block comment's body as C, C++, CUDA, Java, Go and Swift write them: `*` after
/// indentation, then a space or nothing (`*/` closes the comment).
fn star_line(l: &[u8]) -> bool {
    let t = l.trim_ascii_start();
    t.first() == Some(&b'*') && matches!(t.get(1), None | Some(b' ' | b'\t'))
}

/// Is the line `[ls, ..)` (text `raw`) inside a C-family block comment: it opens one (`/** …`),
/// or it and the lines before it are the comment's `*` lines back to the `/*` that opens it?
/// Headers and language bindings document the CUDA error enums so ("/** * A device-side assert
/// triggered during kernel execution. …", cuda.h's `CUDA_ERROR_ASSERT`); a Markdown bullet list
/// has no `/*` above its `*` items.
fn in_block_comment(data: &[u8], ls: usize, raw: &[u8]) -> bool {
    if raw.trim_ascii_start().starts_with(b"/*") {
        return true;
    }
    if !star_line(raw) {
        return false;
    }
    let mut start = ls;
    for _ in 0..COMMENT_LOOKBACK {
        let Some(end) = start.checked_sub(1) else {
            return false;
        };
        start = memchr::memrchr(b'\n', &data[..end]).map_or(0, |i| i + 1);
        let l = trim_cr(&data[start..end]);
        let t = l.trim_ascii_start();
        if t.starts_with(b"/*") {
            // `/* repro */` closes on its own line: the `*` lines under it are a list.
            return memchr::memmem::find(&t[2..], b"*/").is_none();
        }
        if !star_line(l) {
            return false;
        }
    }
    false
}

/// The `[rank3]:` / `[default3]:` prefix that torchrun and PyTorch put before each line of a
/// rank's output, if `line` starts with one.
fn rank_prefix(line: &[u8]) -> Option<&[u8]> {
    let rest = line.strip_prefix(b"[")?;
    let rest = rest
        .strip_prefix(b"rank")
        .or_else(|| rest.strip_prefix(b"default"))?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || digits > 6 || rest.get(digits..digits + 2) != Some(b"]:".as_slice()) {
        return None;
    }
    Some(&line[..line.len() - rest.len() + digits + 2])
}

fn trim_cr(l: &[u8]) -> &[u8] {
    l.strip_suffix(b"\r").unwrap_or(l)
}

/// May `l` be the other piece of a wrapped line with rank `prefix`? The adjacent line may (a
/// terminal wraps without repeating the prefix, and a line without one continues any); past
/// other ranks' lines, only a line of the same rank.
fn continues(l: &[u8], prefix: Option<&[u8]>, adjacent: bool) -> bool {
    match prefix {
        None => adjacent,
        Some(p) => l.starts_with(p) || (adjacent && rank_prefix(l).is_none()),
    }
}

/// The first line after `[.., le)` in `data`, within [`LOOKAROUND`] lines, that `wanted(line,
/// adjacent)` accepts.
fn find_after(data: &[u8], le: usize, wanted: impl Fn(&[u8], bool) -> bool) -> Option<&[u8]> {
    let mut pos = le + 1;
    for _ in 0..LOOKAROUND {
        if pos >= data.len() {
            return None;
        }
        let e = memchr::memchr(b'\n', &data[pos..]).map_or(data.len(), |i| pos + i);
        let l = trim_cr(&data[pos..e]);
        if wanted(l, pos == le + 1) {
            return Some(l);
        }
        pos = e + 1;
    }
    None
}

/// The closest line before `[ls, ..)` in `data`, within [`LOOKAROUND`] lines, that `wanted(line,
/// adjacent)` accepts; `carry` is the last line of the previous chunk. Also returns where the
/// line starts in `data` (`None` for `carry`).
fn find_before<'a>(
    data: &'a [u8],
    ls: usize,
    carry: &'a [u8],
    wanted: impl Fn(&[u8], bool) -> bool,
) -> Option<(&'a [u8], Option<usize>)> {
    let mut end = ls;
    for _ in 0..LOOKAROUND {
        if end == 0 {
            let ok = !carry.is_empty() && wanted(carry, ls == 0);
            return ok.then_some((carry, None));
        }
        let e = end - 1;
        let s = memchr::memrchr(b'\n', &data[..e]).map_or(0, |i| i + 1);
        let l = trim_cr(&data[s..e]);
        if wanted(l, end == ls) {
            return Some((l, Some(s)));
        }
        end = s;
    }
    None
}

/// The line after `[.., le)` in `data` that may continue it: the next line, or with a rank
/// prefix the next line of the same rank within [`LOOKAROUND`] lines.
fn next_piece<'a>(data: &'a [u8], le: usize, prefix: Option<&[u8]>) -> Option<&'a [u8]> {
    find_after(data, le, |l, adjacent| continues(l, prefix, adjacent))
}

/// The line before `[ls, ..)` in `data` that it may continue (see [`next_piece`]); `carry` is
/// the last line of the previous chunk. Also returns where the line starts in `data` (`None`
/// for `carry`).
fn prev_piece<'a>(
    data: &'a [u8],
    ls: usize,
    prefix: Option<&[u8]>,
    carry: &'a [u8],
) -> Option<(&'a [u8], Option<usize>)> {
    find_before(data, ls, carry, |l, adjacent| {
        continues(l, prefix, adjacent)
    })
}

/// Does `gap` (the bytes from the end of one line to the start of a later one) hold only lines
/// with text, and few of them: the two lines are in one paragraph.
fn same_paragraph(gap: &[u8]) -> bool {
    let Some(rest) = gap.strip_prefix(b"\n") else {
        return false;
    };
    if rest.is_empty() {
        return true;
    }
    let Some(lines) = rest.strip_suffix(b"\n") else {
        return false;
    };
    rest.len() <= PIECE_MAX * 2
        && bytecount::count(rest, b'\n') <= 4
        && lines.split(|&b| b == b'\n').all(|l| !is_filler(trim_cr(l)))
}

/// Lines skipped when looking for the text around a line: blank lines and Markdown code fences.
fn is_filler(l: &[u8]) -> bool {
    let t = l.trim_ascii();
    t.is_empty() || t.starts_with(b"```") || t.starts_with(b"~~~")
}

/// The closest line with text before `[ls, ..)` within [`LOOKAROUND`] lines; `carry` is the last
/// line of the previous chunk.
fn prev_text<'a>(data: &'a [u8], ls: usize, carry: &'a [u8]) -> Option<&'a [u8]> {
    find_before(data, ls, carry, |l, _| !is_filler(l)).map(|(l, _)| l)
}

/// The closest line with text after `[.., le)` within [`LOOKAROUND`] lines.
fn next_text(data: &[u8], le: usize) -> Option<&[u8]> {
    find_after(data, le, |l, _| !is_filler(l))
}

/// `first` followed by `second` without the rank prefix they share.
fn join_pieces(first: &[u8], second: &[u8]) -> String {
    if first.is_empty() {
        return String::from_utf8_lossy(second).into_owned();
    }
    let second = match rank_prefix(first) {
        Some(p) => second.strip_prefix(p).unwrap_or(second),
        None => second,
    };
    let mut b = Vec::with_capacity(first.len() + second.len());
    b.extend_from_slice(first);
    b.extend_from_slice(second);
    String::from_utf8_lossy(&b).into_owned()
}

/// Does `text` end a sentence: a full-width 。！？, or ! ? . after a letter or a closing mark (a
/// citation's `[4].`, a parenthesis, a quotation, emphasis), not the decimal point of a number a
/// wrap cut (`14.` / `21 GiB`)?
fn ends_a_sentence(text: &str) -> bool {
    let mut rev = text.trim_end().chars().rev();
    match rev.next() {
        Some('\u{3002}' | '\u{ff01}' | '\u{ff1f}' | '!' | '?') => true,
        Some('.') => rev.next().is_some_and(|c| {
            c.is_alphabetic() || matches!(c, ')' | ']' | '"' | '`' | '*' | '\u{201d}')
        }),
        _ => false,
    }
}

/// The line joined with the pieces a hard wrap cut from it, and the evidence of the join; `None`
/// when the line alone says as much. A join counts only when it says more than each of its
/// pieces alone, so a neighbour's own evidence is never borrowed by an unrelated line.
fn best_join(
    det: &DetectorSet,
    text: &str,
    alone: Option<&Evidence>,
    around: Around<'_>,
) -> Option<(String, Evidence)> {
    let line = text.as_bytes();
    if line.len() > PIECE_MAX {
        return None;
    }
    // Strength first, then completeness (a join that restores a cut kernel file name wins).
    let score = |e: &Evidence| u16::from(det.strength(e)) * 8 + u16::from(det.completeness(e));
    let strength = |b: &[u8]| {
        det.inspect(&String::from_utf8_lossy(b))
            .map_or(0, |e| score(&e))
    };
    // A piece before the line's own break must be a full wrap width. A line that ends by saying
    // it retries has ended its sentence: the next line is not the rest of it, and gluing it on
    // would hide the notice that keeps the line from being a failure. Nor is the next line the
    // rest of one that ends a sentence (unless a literal runs across the break): an article's
    // next paragraph ("even I, a veteran engineer, …") would lend the quoted error a first
    // person it does not have.
    let next = around.next.filter(|n| {
        n.len() <= PIECE_MAX
            && line.len() >= WRAP_MIN
            && !crate::detect::says_it_retries(text)
            && (!ends_a_sentence(text) || det.literal_spans(&join_pieces(line, n), line.len()))
    });
    // Likewise a line before that ended its sentence does not go on in this one when this one
    // starts another (an article's paragraph before the one that quotes the error would lend
    // it a report's words), unless a literal runs across the break. A line that starts in lower
    // case goes on with whatever the dot ended (`[node01.cluster.` / `local]:29500`).
    let mut prevs: Vec<&[u8]> = Vec::new();
    let mut after: &[u8] = line;
    for p in [around.prev, around.prev2].into_iter().flatten() {
        if p.len() < WRAP_MIN || p.len() > PIECE_MAX {
            break;
        }
        if ends_a_sentence(&String::from_utf8_lossy(p))
            && !after.first().is_some_and(u8::is_ascii_lowercase)
            && !det.literal_spans(&join_pieces(p, after), p.len())
        {
            break;
        }
        prevs.push(p);
        after = p;
    }
    if next.is_none() && prevs.is_empty() {
        return None;
    }
    // Nothing on the line for a neighbour to complete, and no literal cut at its breaks: no join
    // can say more. (Keeps a gate hit that no literal confirms cheap.)
    let cut_at_break = || {
        next.is_some_and(|n| det.literal_spans(&join_pieces(line, n), line.len()))
            || prevs
                .first()
                .is_some_and(|p| det.literal_spans(&join_pieces(p, line), p.len()))
    };
    if !det.has_detail_literal(text) && !cut_at_break() {
        return None;
    }
    // A line whose literal its own shape puts in code or a definition (a row of an error table)
    // stays ruled out: a neighbour glued on would only move the literal away from the start
    // that showed it. A literal the break cut is read joined, as ever.
    if alone.is_none() && det.holds_error_in_code(text) && !cut_at_break() {
        return None;
    }
    let floor_line = alone.map_or(0, score);
    let floor_next = next.map_or(0, strength);
    let floor_prevs: Vec<u16> = prevs.iter().map(|p| strength(p)).collect();
    let mut best: Option<(String, Evidence, u16)> = None;
    // Longest joins first, so that a tie keeps the one with the most context.
    for k in (0..=prevs.len()).rev() {
        for with_next in [true, false] {
            if (k == 0 && !with_next) || (with_next && next.is_none()) {
                continue;
            }
            let mut floor = floor_line;
            let mut joined = String::new();
            for (i, p) in prevs[..k].iter().enumerate().rev() {
                joined = join_pieces(joined.as_bytes(), p);
                floor = floor.max(floor_prevs[i]);
            }
            joined = join_pieces(joined.as_bytes(), line);
            if let Some(n) = next.filter(|_| with_next) {
                joined = join_pieces(joined.as_bytes(), n);
                floor = floor.max(floor_next);
            }
            if let Some(ev) = det.inspect(&joined) {
                let s = score(&ev);
                if s > floor && best.as_ref().is_none_or(|b| s > b.2) {
                    best = Some((joined, ev, s));
                }
            }
        }
    }
    best.map(|(t, e, _)| (t, e))
}

/// Is the line (with `evidence`) an error that the text around it shows rather than reports
/// (docs/detection.md, "Errors framed by the lines around them")? Program output is never
/// judged by its neighbours: a line with a rank prefix, and for the heading rule a line that
/// names an exception class or starts with a log prefix.
fn framed_by_neighbours(
    det: &DetectorSet,
    text: &str,
    evidence: &Evidence,
    around: Around<'_>,
) -> Frame {
    if around.in_comment {
        return Frame::Shown;
    }
    if rank_prefix(text.as_bytes()).is_some() {
        return Frame::Reported;
    }
    // An entry of a troubleshooting page: the error as a Markdown heading or after a
    // "Description:" / "Symptom:" label, with the next text a "Cause:" / "Solution:" label
    // (problem, cause, fix). A report pastes its error and goes on in its own words.
    if matches!(evidence, Evidence::Headline { .. })
        && (atx_heading(text)
            || around
                .intro
                .is_some_and(|i| docs_label(i, DocsLabel::Problem)))
        && around
            .after
            .is_some_and(|a| docs_label(a, DocsLabel::Answer))
    {
        return Frame::Shown;
    }
    // An FAQ's entry titled by a quoted phrase alone on a list item (`- "GPU out of memory when
    // validation"`) with its answer indented under it. Errors a report lists as bullets are
    // followed by the next bullet or by the report's own lines.
    if matches!(evidence, Evidence::Headline { .. })
        && quoted_list_item(text)
        && around.next.is_some_and(|n| answer_under_item(det, text, n))
    {
        return Frame::Shown;
    }
    // A Markdown heading that is an error's name ("## CUDA out of memory" in a troubleshooting
    // page) followed at once by advice to the reader ("If you see out of memory (OOM) errors,
    // you can try …") titles a section of a document. An issue's title shown as a heading is
    // followed by the reporter's own text or log.
    // A numbered heading ("### 1. **RuntimeError: CUDA out of memory**") is an entry of a list
    // of problems, an FAQ's; it may quote the exception as it is printed. The advice may come
    // after a blank line.
    if matches!(evidence, Evidence::Headline { .. })
        && (markdown_heading(text) || numbered_markdown_heading(text))
        && around
            .next
            .filter(|n| !n.trim_ascii().is_empty())
            .or(around.after)
            .is_some_and(|n| advises_the_reader(&String::from_utf8_lossy(n)))
    {
        return Frame::Shown;
    }
    // TensorFlow's allocator warning with its disclaimer on a line of its own (a paste that
    // broke the line): "Allocator (GPU_0_bfc) ran out of memory trying to allocate 2.14GiB." /
    // "The caller indicates that this is not a failure, but …" (detect's `NOT_A_FAILURE`).
    if matches!(
        evidence,
        Evidence::Headline {
            kind: crate::model::Kind::Oom,
            ..
        }
    ) && around.after.is_some_and(|a| {
        let sentence = crate::detect::NOT_A_FAILURE_SENTENCE;
        String::from_utf8_lossy(a)
            .trim_start()
            .get(..sentence.len())
            .is_some_and(|p| p.eq_ignore_ascii_case(sentence))
    }) {
        return Frame::Shown;
    }
    // The first entry under a changelog's or release notes' fixes heading ("Bug Fixes",
    // "### Fixed", "Known Issues") names a bug the release fixed or knows of, not a failure on
    // this node.
    if matches!(evidence, Evidence::Headline { .. })
        && !log_prefixed(text)
        && around
            .intro
            .is_some_and(|i| changelog_heading(&String::from_utf8_lossy(i)))
    {
        return Frame::Shown;
    }
    // A string literal alone on a line, after a line that opens a call
    // (`err = RuntimeError(` / `"CUDA out of memory …"`): an argument in code. (A JSON array's
    // `"text": [` or a bare `[` opens data, which may be a program's output.)
    let opens_call = around.intro.is_some_and(|i| {
        let t = i.trim_ascii_end();
        t.ends_with(b"(")
            && t.len() >= 2
            && (t[t.len() - 2].is_ascii_alphanumeric() || t[t.len() - 2] == b'_')
    });
    if opens_call && string_literal_alone(text) {
        return Frame::Shown;
    }
    // An article's or a pull request's example of the error. (Cheap checks first: the intro
    // must end in a colon.)
    let colon = around.intro.is_some_and(|i| {
        let t = i.trim_ascii_end();
        t.ends_with(b":") || t.ends_with("\u{ff1a}".as_bytes())
    });
    if colon {
        let intro = around.intro.map(String::from_utf8_lossy);
        let after = around.after.map(String::from_utf8_lossy);
        if crate::detect::prose::framed_as_example(intro.as_deref(), after.as_deref()) {
            return Frame::Example;
        }
    }
    let (Evidence::Headline { kind, .. }, Some(n)) = (evidence, around.next) else {
        return Frame::Reported;
    };
    let open_span = text.bytes().filter(|&b| b == b'`').count() % 2 == 1;
    let heading = heading_shaped(text);
    // The next line must pass the gate to name any error at all.
    if !(open_span || heading) || n.len() > PIECE_MAX || !det.gate_matches(n) {
        return Frame::Reported;
    }
    // A sentence that a hard wrap cut inside a code span is judged whole.
    if open_span
        && det
            .kinds_named_in_passing(&join_pieces(text.as_bytes(), n))
            .contains(kind)
    {
        return Frame::Shown;
    }
    // An article's heading that the very next line goes on to explain ("CUDA error:
    // device-side assert triggered" / "… you may meet the "device-side assert triggered" error;
    // this article explains …"). Only the adjacent line (a report's own prose comes after a
    // blank line or a code fence), and only a heading's shape: a pasted exception line
    // (`RuntimeError: …`) or log line followed by the reporter's musings stays an event.
    if heading
        && det
            .kinds_named_in_passing(&String::from_utf8_lossy(n))
            .contains(kind)
    {
        return Frame::Shown;
    }
    Frame::Reported
}

/// How the text around a line frames it ([`framed_by_neighbours`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Frame {
    /// Nothing frames it: the line reports what it says.
    Reported,
    /// Shown, not reported (a heading, a quotation inside a sentence, code).
    Shown,
    /// The first line of an example an intro presents; the lines right after it may continue it.
    Example,
}

/// Is `line` the heading of a changelog's or release notes' section of fixed or known bugs
/// ("Bug Fixes", "## Bug fixes", "**Known Issues:**", "🐛 Bug Fixes", "Resolved Issues", Keep a
/// Changelog's "### Fixed"), alone on its line? No program prints one before its own error. A bare
/// "Fixed" or "Fixes" counts only as a Markdown heading: a reporter writes it as a sentence.
fn changelog_heading(line: &str) -> bool {
    static R: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    crate::detect::prose::cached(
        &R,
        r"(?i)^\s*(?:(?:#{1,6}\s*)?(?:\*\*|__)?\s*(?:[\p{So}\x{fe0f}]\s*)*(?:bug\s?-?fix(?:es)?|fixed\s+(?:issues|bugs)|bugs?\s+fixed|resolved\s+issues|known\s+issues|what's\s+fixed)|#{1,6}\s*(?:[\p{So}\x{fe0f}]\s*)*(?:fixed|fixes))\s*:?\s*(?:\*\*|__)?\s*:?\s*$",
    )
    .is_match(line)
}

/// Does `text` start as a log record does (after a list bullet): a bracket, a digit (a time or a
/// date), a glog header, a level, or a JSON object?
fn log_prefixed(text: &str) -> bool {
    static R: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    crate::detect::prose::cached(
        &R,
        r"^\s*(?:[-*+]\s+)?(?:\[|\{|\d|[IWEF]\d{4}\s|(?:INFO|WARN|WARNING|ERROR|FATAL|DEBUG)\b)",
    )
    .is_match(text)
}

/// Does `line` speak to the reader as a document does under a heading, with advice ("If you see
/// … errors, you can try …", "You can lower …", "To avoid it, …", "Try …") or a general
/// explanation ("This error may be due to …", "This error usually means …", "It occurs when …"),
/// and without a report's words after its opening (whose "occurs" is the general present)?
fn advises_the_reader(line: &str) -> bool {
    static R: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let opening = R.get_or_init(|| {
        regex::Regex::new(
            r"(?i)^\s*(?:(?:if|when|whenever|once)\s+you\b|you\s+(?:can|may|might|should|could)\b|to\s+(?:fix|avoid|resolve|solve|prevent)\b|try\s|(?:it|this)\s+(?:error\s+)?(?:occurs|happens|appears|means)\s+(?:when|if|because)\b|this\s+(?:error|exception|message)\s+(?:may|might|can|could|usually|typically|often|generally|is\s+(?:usually|typically|often|generally))\b)",
        )
        .expect("static regex")
    })
    .find(line);
    opening.is_some_and(|m| !crate::detect::prose::has_report_cue(&line[m.end()..]))
}

/// Is `text` a Markdown ATX heading (one to six `#` and a space), whatever its words?
fn atx_heading(text: &str) -> bool {
    atx_heading_words(text).is_some()
}

/// The words of a Markdown ATX heading (after its one to six `#` and the spaces), if `text` is one.
fn atx_heading_words(text: &str) -> Option<&str> {
    let t = text.trim_start();
    let hashes = t.bytes().take_while(|&b| b == b'#').count();
    ((1..=6).contains(&hashes) && t[hashes..].starts_with(' ')).then(|| t[hashes..].trim_start())
}

/// Which label of a troubleshooting entry [`docs_label`] looks for.
#[derive(Clone, Copy)]
enum DocsLabel {
    /// What the reader sees: "Description:", "Symptom:", "Error message:".
    Problem,
    /// What the page tells them: "Cause:", "Solution:", "Fix:", "Workaround:".
    Answer,
}

/// Does `line` open with a troubleshooting entry's label, as a list item or in emphasis or not
/// ("* **Solution**: Reduce …", "**Cause:** GPU memory exhausted", "解决方法：…")?
fn docs_label(line: &[u8], which: DocsLabel) -> bool {
    static PROBLEM: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    static ANSWER: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let (cell, words) = match which {
        DocsLabel::Problem => (
            &PROBLEM,
            r"description|symptoms?|problem|error\s+messages?|现象|问题描述|报错信息",
        ),
        DocsLabel::Answer => (
            &ANSWER,
            r"causes?|root\s+cause|reasons?|solutions?|fix(?:es)?|how\s+to\s+fix|resolution|workaround|remedy|原因|解决方法|解决方案|解决办法",
        ),
    };
    let r = cell.get_or_init(|| {
        regex::Regex::new(&format!(
            r"(?i)^\s*(?:[-*+]\s+|\d{{1,2}}[.)]\s+)?(?:\*\*|__|\*|_)?\s*(?:{words})\s*(?:(?:\*\*|__|\*|_)\s*[:：]|[:：])"
        ))
        .expect("static regex")
    });
    // A label opens its line: its first bytes are enough.
    r.is_match(&String::from_utf8_lossy(&line[..line.len().min(96)]))
}

/// Is `text` a list item whose whole content is one quoted phrase?
fn quoted_list_item(text: &str) -> bool {
    let t = text.trim();
    let Some(item) = t
        .strip_prefix(['-', '*', '+'])
        .filter(|i| i.starts_with(' '))
    else {
        return false;
    };
    let item = item.trim();
    let mut cs = item.chars();
    let (Some(open), Some(close)) = (cs.next(), cs.next_back()) else {
        return false;
    };
    matches!((open, close), ('"', '"') | ('\u{201c}', '\u{201d}'))
        && !item[open.len_utf8()..item.len() - close.len_utf8()]
            .contains(['"', '\u{201c}', '\u{201d}'])
}

/// Is `next` the answer indented under the list item `item`: deeper than the item's bullet, not
/// a bullet itself, and naming no error of its own?
fn answer_under_item(det: &DetectorSet, item: &str, next: &[u8]) -> bool {
    let indent = |b: &[u8]| b.iter().take_while(|c| **c == b' ' || **c == b'\t').count();
    let depth = indent(next);
    let rest = &next[depth..];
    depth > indent(item.as_bytes())
        && !rest.is_empty()
        && !matches!(rest[0], b'-' | b'*' | b'+')
        && !det.gate_matches(next)
}

/// Is `text` one quoted string and nothing else but a trailing `,` or `)`? (A string that ends
/// in a `\n` escape is a line of captured output, as notebooks store stderr.)
fn string_literal_alone(text: &str) -> bool {
    let t = text.trim().trim_end_matches([',', ')', ';']).trim_end();
    let Some(q) = t.chars().next().filter(|c| matches!(c, '"' | '\'')) else {
        return false;
    };
    t.len() >= 2
        && t.ends_with(q)
        && !t[1..t.len() - 1].contains(q)
        && !t[..t.len() - 1].ends_with("\\n")
}

/// A Markdown ATX heading (`## …`, up to six `#` and a space) whose text is an error's name in
/// words: [`heading_shaped`], and no digit, quote, `=`, path or bracket. (A title pasted under
/// `###` keeps the message's numbers and fields — `"THCudaCheck FAIL file=… error=4 : …"` — and
/// programs that print `# ` before their own messages print codes: `# SWAN : FATAL : Cuda driver
/// error 700 : …`.)
fn markdown_heading(text: &str) -> bool {
    let Some(words) = atx_heading_words(text.trim_end()) else {
        return false;
    };
    words.len() <= 120
        && words
            .chars()
            .all(|c| c.is_alphabetic() || matches!(c, ' ' | ':' | ',' | '.' | '-' | '!'))
        && heading_shaped(words)
}

/// A Markdown ATX heading whose text starts with an item number ("### 1. …", "## 2) …"), with
/// or without emphasis around the rest, and holds no path, quote or `=`. (Read by hand: a regex
/// with a counted repetition of a Unicode class costs tens of milliseconds to build.)
fn numbered_markdown_heading(text: &str) -> bool {
    let t = text.trim_end();
    let t = t
        .strip_prefix("   ")
        .or_else(|| t.strip_prefix("  "))
        .or_else(|| t.strip_prefix(' '))
        .unwrap_or(t);
    let hashes = t.bytes().take_while(|&b| b == b'#').count();
    if !(1..=6).contains(&hashes) {
        return false;
    }
    let rest = &t[hashes..];
    let after_hashes = rest.trim_start();
    if after_hashes.len() == rest.len() {
        return false;
    }
    let digits = after_hashes.bytes().take_while(u8::is_ascii_digit).count();
    if !(1..=2).contains(&digits) {
        return false;
    }
    let Some(item) = after_hashes[digits..].strip_prefix(['.', ')']) else {
        return false;
    };
    let words = item.trim_start();
    if words.len() == item.len() {
        return false;
    }
    let words = words
        .strip_prefix("**")
        .or_else(|| words.strip_prefix("__"))
        .unwrap_or(words);
    let words = words
        .strip_suffix("**")
        .or_else(|| words.strip_suffix("__"))
        .unwrap_or(words);
    (3..=120).contains(&words.chars().count())
        && words
            .chars()
            .all(|c| c.is_alphanumeric() || matches!(c, '_' | ' ' | '.' | ',' | ':' | '!' | '-'))
}

/// Is the line one inline code span and nothing else (`` `RuntimeError: NCCL error …` ``)?
fn code_span_line(text: &str) -> bool {
    let t = text.trim();
    t.len() > 2
        && t.starts_with('`')
        && t.ends_with('`')
        && t.bytes().filter(|&b| b == b'`').count() == 2
}

/// A line that may be a heading: no exception class name (`RuntimeError`, `OutOfMemoryError`),
/// no log prefix (a timestamp, a `[tag]`, a level), and no measured size: a heading names the
/// error, while a program's message says how much it tried to allocate ("Error CUDA out of
/// memory. Tried to allocate 1.34 GiB (GPU 0; …)", Real-ESRGAN's, whose next line is its own
/// advice).
fn heading_shaped(text: &str) -> bool {
    static R: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let r = R.get_or_init(|| {
        regex::Regex::new(r"\b[A-Z]\w*(?:Error|Exception)\b|^\s*(?:\[|\d|[IWEF]\d{4}\s|(?:INFO|WARN|WARNING|ERROR|FATAL|DEBUG)\b)|\d\s?(?:[KMGT]i?B|bytes)\b")
            .expect("static regex")
    });
    !r.is_match(text)
}

/// Counters of one stream's scanner.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ScanStats {
    pub lines: u64,
    pub bytes: u64,
    pub truncated_lines: u64,
    pub malformed_lines: u64,
}

/// Scanner state for one stream. See the module docs.
#[derive(Debug)]
pub struct StreamScanner {
    decoder: Decoder,
    max_line: usize,
    /// Lines completed so far (the next line is `lines + 1`).
    lines: u64,
    follow: u32,
    /// Physical lines folded into a later logical line (CRI/Docker partials, kmsg continuations):
    /// `lines - joined` is the logical position the grouping windows use.
    joined: u64,
    stats: ScanStats,
    /// The last line of the previous plain-text chunk (bounded), for joining wrapped lines.
    carry: Vec<u8>,
    /// Where, in the chunk being scanned, the last line that the text around it framed as a
    /// quoted example ends: the lines right after it belong to the same quotation.
    quoted_until: Option<usize>,
    /// Set by `inspect` when it dropped a line as a quotation.
    framed: bool,
}

impl StreamScanner {
    pub fn new(format: Format, max_line: usize, first_line: u64) -> Self {
        StreamScanner {
            decoder: Decoder::new(format, max_line),
            max_line,
            lines: first_line.saturating_sub(1),
            follow: 0,
            joined: 0,
            stats: ScanStats::default(),
            carry: Vec::new(),
            quoted_until: None,
            framed: false,
        }
    }

    pub fn stats(&self) -> ScanStats {
        let mut s = self.stats;
        s.lines = self.lines;
        s.malformed_lines = self.decoder.malformed;
        s.truncated_lines += self.decoder.truncated;
        s
    }

    /// Number of complete lines seen (the checkpoint's line counter).
    pub fn line_count(&self) -> u64 {
        self.lines
    }

    pub fn format(&self) -> Format {
        self.decoder.format()
    }

    /// Scans one chunk, appending findings to `out`. `at_ms` stamps them.
    pub fn feed(
        &mut self,
        chunk: &Chunk<'_>,
        det: &DetectorSet,
        at_ms: u64,
        out: &mut Vec<Finding>,
    ) {
        self.stats.bytes += chunk.data.len() as u64;
        if chunk.truncated {
            self.stats.truncated_lines += 1;
            self.per_line(chunk.data, chunk.offset, det, at_ms, out, true);
            return;
        }
        match self.decoder.format() {
            Format::Plain => self.fast(chunk, det, at_ms, out),
            Format::Auto => {
                // The first non-blank line decides; until then lines are plain.
                self.per_lines(chunk, det, at_ms, out);
            }
            _ => self.per_lines(chunk, det, at_ms, out),
        }
    }

    /// Flushes partial records buffered by the decoder (end of input).
    pub fn finish(&mut self, det: &DetectorSet, at_ms: u64, out: &mut Vec<Finding>) {
        for l in self.decoder.finish() {
            let seq = self.lines.saturating_sub(self.joined) + 1;
            self.inspect(
                &l.text,
                l.first_line,
                seq,
                l.offset,
                det,
                at_ms,
                out,
                true,
                None,
                Around::default(),
            );
        }
    }

    fn per_lines(
        &mut self,
        chunk: &Chunk<'_>,
        det: &DetectorSet,
        at_ms: u64,
        out: &mut Vec<Finding>,
    ) {
        let data = chunk.data;
        let mut s = 0;
        while s < data.len() {
            let e = memchr::memchr(b'\n', &data[s..]).map_or(data.len(), |i| s + i);
            // Plain text from its first line on takes the fast path, which has the neighbours
            // that a hard-wrapped first line needs.
            if self.decoder.format() == Format::Auto
                && self.decoder.settle(&data[s..e]) == Format::Plain
            {
                let rest = Chunk {
                    data: &data[s..],
                    offset: chunk.offset + s as u64,
                    truncated: false,
                    unterminated: chunk.unterminated,
                };
                self.fast(&rest, det, at_ms, out);
                return;
            }
            self.per_line(&data[s..e], chunk.offset + s as u64, det, at_ms, out, false);
            s = e + 1;
            // Once auto-detection picked plain text, the rest of the chunk takes the fast path.
            if self.decoder.format() == Format::Plain && s < data.len() {
                let rest = Chunk {
                    data: &data[s..],
                    offset: chunk.offset + s as u64,
                    truncated: false,
                    unterminated: chunk.unterminated,
                };
                self.fast(&rest, det, at_ms, out);
                return;
            }
        }
    }

    fn per_line(
        &mut self,
        raw: &[u8],
        offset: u64,
        det: &DetectorSet,
        at_ms: u64,
        out: &mut Vec<Finding>,
        cut: bool,
    ) {
        self.lines += 1;
        let line_no = self.lines;
        let raw = if raw.len() > self.max_line {
            if !cut {
                self.stats.truncated_lines += 1;
            }
            &raw[..self.max_line]
        } else {
            raw
        };
        match self.decoder.push(raw, line_no, offset) {
            Some(l) => {
                let seq = line_no - self.joined;
                self.inspect(
                    &l.text,
                    l.first_line,
                    seq,
                    l.offset,
                    det,
                    at_ms,
                    out,
                    false,
                    None,
                    Around::default(),
                );
            }
            None => self.joined += 1,
        }
    }

    /// Scans one line that arrives already decoded and numbered (a kernel log record): the same
    /// gate, follow window and inspection as lines read from bytes.
    pub fn feed_line(
        &mut self,
        text: &str,
        line: u64,
        offset: u64,
        det: &DetectorSet,
        at_ms: u64,
        out: &mut Vec<Finding>,
    ) {
        self.lines = self.lines.max(line);
        self.inspect(
            text,
            line,
            line,
            offset,
            det,
            at_ms,
            out,
            false,
            None,
            Around::default(),
        );
    }

    /// Inspects one line: when it passes the gate (`gated`, or the gate run here when `None`), is
    /// forced, or lies in the follow window of an earlier finding.
    #[allow(clippy::too_many_arguments)]
    fn inspect(
        &mut self,
        text: &str,
        line_no: u64,
        seq: u64,
        offset: u64,
        det: &DetectorSet,
        at_ms: u64,
        out: &mut Vec<Finding>,
        force: bool,
        gated: Option<bool>,
        around: Around<'_>,
    ) {
        let gated = gated.unwrap_or_else(|| det.gate_matches(text.as_bytes()));
        if !(gated || force || self.follow > 0) {
            return;
        }
        self.follow = self.follow.saturating_sub(1);
        let alone = det.inspect(text);
        let found = match best_join(det, text, alone.as_ref(), around) {
            Some((joined, ev)) => Some((joined, ev)),
            None => alone.map(|ev| (text.to_owned(), ev)),
        };
        if let Some((text, evidence)) = found {
            match framed_by_neighbours(det, &text, &evidence, around) {
                Frame::Reported => {}
                Frame::Shown => return,
                Frame::Example => {
                    self.framed = true;
                    return;
                }
            }
            // A gate hit that a detail literal confirms opens the follow window; an anchor alone
            // (a false candidate) costs this one inspection and nothing more.
            if gated {
                self.follow = det.options().follow_lines;
            }
            if matches!(evidence, crate::model::Evidence::KernelAssert { .. }) {
                // A paste that lost its newlines holds several assert lines in one: each site
                // (and each thread) counts.
                let sites = crate::detect::kernel_assert::parse_all(&text);
                if sites.len() > 1 {
                    for ev in sites {
                        out.push(Finding::new(line_no, seq, Some(offset), at_ms, &text, ev));
                    }
                    return;
                }
            }
            out.push(Finding::new(
                line_no,
                seq,
                Some(offset),
                at_ms,
                &text,
                evidence,
            ));
        }
    }

    fn fast(&mut self, chunk: &Chunk<'_>, det: &DetectorSet, at_ms: u64, out: &mut Vec<Finding>) {
        let data = chunk.data;
        let mut counted = 0usize;
        let mut pos = 0usize;
        let carry = std::mem::take(&mut self.carry);
        self.quoted_until = None;
        while pos < data.len() {
            // A line found by the gate search is known to pass the gate: no second gate run.
            let (ls, gated) = if self.follow > 0 {
                (pos, None)
            } else {
                match det.next_gate_hit(data, pos) {
                    None => break,
                    Some(p) => (
                        memchr::memrchr(b'\n', &data[pos..p]).map_or(pos, |i| pos + i + 1),
                        Some(true),
                    ),
                }
            };
            let le = memchr::memchr(b'\n', &data[ls..]).map_or(data.len(), |i| ls + i);
            self.lines += bytecount::count(&data[counted..ls], b'\n') as u64;
            let line_no = self.lines + 1;
            let mut raw = &data[ls..le];
            if let Some(r) = raw.strip_suffix(b"\r") {
                raw = r;
            }
            if raw.len() > self.max_line {
                raw = &raw[..self.max_line];
            }
            let text = String::from_utf8_lossy(raw);
            let seq = line_no - self.joined;
            let prefix = rank_prefix(raw);
            let prev = prev_piece(data, ls, prefix, &carry);
            let prev2 = prev
                .and_then(|(_, s)| s)
                .and_then(|s| prev_piece(data, s, prefix, &[]))
                .map(|(l, _)| l);
            let around = Around {
                prev: prev.map(|(l, _)| l),
                prev2,
                next: next_piece(data, le, prefix),
                intro: prev_text(data, ls, &carry),
                after: next_text(data, le),
                in_comment: in_block_comment(data, ls, raw),
            };
            // The rest of a quoted example: an article's multi-line error message after the
            // line its intro framed, up to the next blank line, as long as no line has a log
            // record's or an exception's shape (a new program output starts there); or the
            // next of a list of examples, each a code span of its own line ("Here are some
            // examples:" / `RuntimeError: …` / `RuntimeError: …`).
            if prefix.is_none()
                && self
                    .quoted_until
                    .is_some_and(|e| same_paragraph(&data[e.min(ls)..ls]))
                && (heading_shaped(&text) || code_span_line(&text))
            {
                self.quoted_until = Some(le);
            } else {
                self.framed = false;
                self.inspect(
                    &text,
                    line_no,
                    seq,
                    chunk.offset + ls as u64,
                    det,
                    at_ms,
                    out,
                    false,
                    gated,
                    around,
                );
                // A line judged on its own ends any quotation before it.
                self.quoted_until = std::mem::take(&mut self.framed).then_some(le);
            }
            if le < data.len() {
                self.lines += 1;
                counted = le + 1;
            } else {
                counted = data.len();
                if chunk.unterminated {
                    self.lines += 1;
                }
            }
            pos = le + 1;
        }
        if counted < data.len() {
            let tail = &data[counted..];
            self.lines += bytecount::count(tail, b'\n') as u64;
            if chunk.unterminated && tail.last() != Some(&b'\n') {
                self.lines += 1;
            }
        }
        // Keep the chunk's last complete line for a wrapped line that continues in the next.
        self.carry = carry;
        self.carry.clear();
        if let Some(body) = data.strip_suffix(b"\n") {
            let s = memchr::memrchr(b'\n', body).map_or(0, |i| i + 1);
            let last = trim_cr(&body[s..]);
            if last.len() <= PIECE_MAX {
                self.carry.extend_from_slice(last);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::incidents::{Engine, EngineConfig};
    use crate::model::Kind;
    use proptest::prelude::*;
    use std::sync::OnceLock;

    /// Failures with long lines, in the wordings upstream code prints (sources beside each).
    const FAILURES: &[&str] = &[
        // ProcessGroupNCCL.cpp WorkNCCL::checkTimeout.
        "[rank3]:[E1202 10:00:01.123456 ProcessGroupNCCL.cpp:1590] [PG 0 (default_pg) Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600005 milliseconds before timing out.",
        // c10/cuda/CUDACachingAllocator.cpp OOM message.
        "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 79.15 GiB of which 6.25 MiB is free. Process 12345 has 79.14 GiB memory in use.",
        // aten/src/ATen/native/cuda/IndexKernel.cu assert, then the c10 CUDA error.
        "../aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [3,0,0], thread: [17,0,0] Assertion `-sizes[i] <= index && index < sizes[i] && \"index out of bounds\"` failed.\nTraceback (most recent call last):\n  File \"/workspace/train.py\", line 88, in <module>\n    loss.backward()\n[2024-12-02 10:00:01,123] [ERROR] [worker.py:311] [rank0]: RuntimeError: CUDA error: device-side assert triggered\nCUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
        // NCCL transport/net_ib.cc.
        "node01:1234:5678 [3] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.0.0.2<52362> with error 12, opcode 0, len 0, vendor err 129 (Send) localGid ::ffff:10.0.0.1 remoteGid ::ffff:10.0.0.2",
        // tensorflow/core/framework/op_kernel.cc OP_REQUIRES with the BFC allocator's OOM.
        "2024-01-01 10:00:00.000000: W tensorflow/core/framework/op_kernel.cc:1780] OP_REQUIRES failed at matmul_op_impl.h:731 : RESOURCE_EXHAUSTED: OOM when allocating tensor with shape[8192,8192] and type float on /job:localhost/replica:0/task:0/device:GPU:0 by allocator GPU_0_bfc",
        // torch/csrc/distributed/c10d/socket.cpp.
        "[W1202 10:00:00.000000 100 torch/csrc/distributed/c10d/socket.cpp:752] [c10d] The client socket has failed to connect to [node01.cluster.local]:29500 (errno: 111 - Connection refused).",
        // XLA surfacing a CUDA driver error.
        "E1202 10:00:00.000000    1234 pjrt_stream_executor_client.cc:2809] Execution of replica 0 failed: INTERNAL: Failed to complete all kernels launched on stream 0x55d1: CUDA error: Could not synchronize CUDA stream: CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered",
        // jax/xla BFC allocator.
        "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 17179869184 bytes. BufferAssignment OOM Debugging.",
        // ProcessGroupNCCL.cpp heartbeatMonitor.
        "[rank5]:[E1202 10:00:00.000000 200 ProcessGroupNCCL.cpp:1444] [PG 0 Rank 5] Heartbeat monitor timed out! Process will be terminated after dumping debug info. workMetaList_.size()=1",
        // Hugging Face Trainer metrics dict.
        "{'loss': 0.0, 'grad_norm': nan, 'learning_rate': 1.9999e-05, 'epoch': 0.01, 'num_input_tokens_seen': 123456}",
    ];

    fn det() -> &'static DetectorSet {
        static D: OnceLock<DetectorSet> = OnceLock::new();
        D.get_or_init(DetectorSet::builtin)
    }

    /// The (kind, category) of the first incident `text` yields through scanner and engine.
    pub(super) fn first(text: &str) -> Option<(Kind, String)> {
        let mut sc = StreamScanner::new(Format::Plain, 1 << 16, 1);
        let mut findings = Vec::new();
        let chunk = Chunk {
            data: text.as_bytes(),
            offset: 0,
            truncated: false,
            unterminated: !text.ends_with('\n'),
        };
        sc.feed(&chunk, det(), 0, &mut findings);
        sc.finish(det(), 0, &mut findings);
        let mut e = Engine::new(EngineConfig::default());
        for f in findings {
            e.observe(0, f);
        }
        e.flush_all();
        e.drain()
            .into_iter()
            .filter(|u| u.closed)
            .map(|u| (u.incident.kind, u.incident.category))
            .next()
    }

    /// Hard-wraps every line at `width` characters; with `prefix_pieces`, continuation pieces
    /// repeat the line's rank prefix (as when a rank's own output was wrapped before the
    /// launcher prefixed it).
    fn wrap(text: &str, width: usize, prefix_pieces: bool) -> Vec<String> {
        let mut out = Vec::new();
        for line in text.lines() {
            let prefix = rank_prefix(line.as_bytes())
                .and_then(|p| std::str::from_utf8(p).ok())
                .unwrap_or("");
            let chars: Vec<char> = line.chars().collect();
            for (i, piece) in chars.chunks(width).enumerate() {
                let piece: String = piece.iter().collect();
                if i > 0 && prefix_pieces {
                    out.push(format!("{prefix}{piece}"));
                } else {
                    out.push(piece);
                }
            }
        }
        out
    }

    #[test]
    fn a_finished_sentence_borrows_no_person_from_the_next_line() {
        // An article's opening question to its reader, then a paragraph in the writer's own
        // voice: the first line is a quotation, and the next paragraph is not its continuation.
        let article = "学習中に突然「CUDA error: an illegal memory access was encountered」というエラーが出て、困っていませんか?デバッグしにくいエラーなので、どこから手をつけていいか分からないこともよくあります。\n大丈夫、私も同じエラーで何度も苦労しました。順番に原因を見ていきましょう。\n";
        assert_eq!(first(article), None);
        // A report's line that ends a sentence keeps its own reading.
        let report = "RuntimeError: CUDA error: an illegal memory access was encountered. Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\nI see this on every run.\n";
        assert_eq!(
            first(report),
            Some((Kind::CudaError, "illegal_memory_access".to_owned()))
        );
        assert!(ends_a_sentence("… 解決していきましょう。"));
        assert!(ends_a_sentence("It was encountered. "));
        assert!(!ends_a_sentence("14.21 GiB already allocated; 12."));
        assert!(!ends_a_sentence("see /src/IndexKernel"));
    }

    #[test]
    fn every_failure_is_recognised_unwrapped() {
        for f in FAILURES {
            assert!(first(f).is_some(), "{f}");
        }
    }

    #[test]
    fn every_wrap_width_keeps_kind_and_family() {
        for f in FAILURES {
            let want = first(f);
            for width in 80..=140 {
                for prefix_pieces in [false, true] {
                    let wrapped = wrap(f, width, prefix_pieces).join("\n");
                    assert_eq!(first(&wrapped), want, "width {width}:\n{wrapped}");
                }
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// Two ranks' wrapped output interleaved piece by piece still gives each failure's kind
        /// and family.
        #[test]
        fn interleaved_ranks_keep_kind_and_family(
            which in 0..FAILURES.len(),
            width in 80usize..=140,
            seed in any::<u64>(),
        ) {
            let f = FAILURES[which];
            let want = first(f);
            let mut a = Vec::new();
            let mut b = Vec::new();
            for l in f.lines() {
                let body = rank_prefix(l.as_bytes()).map_or(l, |p| &l[p.len()..]);
                a.push(format!("[rank0]:{body}"));
                b.push(format!("[rank1]:NCCL INFO Channel {seed:x} via P2P/IPC/read {body:.20}"));
            }
            let a = wrap(&a.join("\n"), width, true);
            let b = wrap(&b.join("\n"), width, true);
            let mut mixed = Vec::new();
            let mut bits = seed;
            let (mut i, mut j) = (0, 0);
            while i < a.len() || j < b.len() {
                if j >= b.len() || (i < a.len() && bits & 1 == 0) {
                    mixed.push(a[i].clone());
                    i += 1;
                } else {
                    mixed.push(b[j].clone());
                    j += 1;
                }
                bits = bits.rotate_right(1);
            }
            prop_assert_eq!(first(&mixed.join("\n")), want);
        }
    }
}
#[cfg(test)]
mod first_line {
    use super::*;

    /// Lines of documents, code and quotations that frame the lines around them.
    const NOISE: &[&str] = &[
        "Jobs can fail in several ways, for example:",
        "",
        "```",
        "## CUDA out of memory",
        "If you see it during prefill, you can lower the chunk size.",
        "This error may be due to a kernel bug.",
        "        err = RuntimeError(",
        "            \"RuntimeError: CUDA error: out of memory\"",
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "Original reason for failure was: Watchdog caught collective operation timeout:",
        "The run then stops, and every later call fails.",
        ", and every later call fails too.",
    ];

    /// Single-line failures as a rank prints them.
    const RANK_FAILURES: &[&str] = &[
        "[rank3]:[E1202 10:00:01.123456 ProcessGroupNCCL.cpp:1590] [PG 0 Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600005 milliseconds before timing out.",
        "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 79.15 GiB of which 6.25 MiB is free.",
        "[rank1]: RuntimeError: CUDA error: an illegal memory access was encountered",
    ];

    /// The findings of `text` scanned as one chunk of an input whose format is auto-detected.
    fn auto_findings(text: &str) -> Vec<Finding> {
        static DET: std::sync::OnceLock<DetectorSet> = std::sync::OnceLock::new();
        let det = DET.get_or_init(DetectorSet::builtin);
        let mut sc = StreamScanner::new(Format::Auto, 1 << 16, 1);
        let mut findings = Vec::new();
        let chunk = Chunk {
            data: text.as_bytes(),
            offset: 0,
            truncated: false,
            unterminated: false,
        };
        sc.feed(&chunk, det, 0, &mut findings);
        sc.finish(det, 0, &mut findings);
        findings
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// Whatever documents, code and quotations surround it, a rank's failure line (program
        /// output) is reported on its own line: no framing of its neighbours swallows it.
        #[test]
        fn a_rank_failure_is_never_swallowed_by_its_neighbours(
            picks in proptest::collection::vec(0usize..NOISE.len(), 0..12),
            at in 0usize..13,
            which in 0usize..RANK_FAILURES.len(),
        ) {
            let mut lines: Vec<&str> = picks.iter().map(|&i| NOISE[i]).collect();
            let at = at.min(lines.len());
            lines.insert(at, RANK_FAILURES[which]);
            let text = format!("{}\n", lines.join("\n"));
            let found = auto_findings(&text);
            let line = at as u64 + 1;
            proptest::prop_assert!(
                found.iter().any(|f| f.line == line),
                "line {} not reported in\n{}\n{:#?}", line, text, found
            );
        }
    }

    /// A hard wrap in the first line of an input whose format is still being detected: the
    /// first line needs its neighbour like any other.
    #[test]
    fn wrapped_first_line_of_auto_detected_input_is_joined() {
        let text = "../aten/src/ATen/native/cuda/Indexing.cu:1141: indexSelectLargeIndex: block: [194,0,0], thread: [96,0,0] Assertion `srcIndex < srcSelectDimSize\n` failed.\n";
        let findings = auto_findings(text);
        assert_eq!(findings.len(), 1, "{findings:#?}");
        match &findings[0].evidence {
            Evidence::KernelAssert {
                assertion,
                kernel_file,
                ..
            } => {
                assert_eq!(assertion, "srcIndex < srcSelectDimSize");
                assert_eq!(kernel_file.as_deref(), Some("Indexing.cu:1141"));
            }
            other => panic!("{other:?}"),
        }
    }

    /// Each text yields the number of findings given beside it.
    fn assert_counts(cases: &[(&str, usize)]) {
        for (text, n) in cases {
            let found = auto_findings(text);
            assert_eq!(found.len(), *n, "{text}\n{found:#?}");
        }
    }

    /// A connect warning that ends by saying it retries stays a notice when lines of the same
    /// width surround it: the next line is not the rest of its sentence. The failure that ends
    /// the attempts (c10d socket.cpp's "has failed to connect") is still reported.
    #[test]
    fn a_retry_notice_is_not_glued_to_the_next_line() {
        let notice = "[I socket.cpp:580] [c10d] The client socket is attempting to connect to [node07]:29500 now.\n[W socket.cpp:663] [c10d] The server socket on [node07]:29500 is not yet listening (errno: 111 - Connection refused), retrying...\n[I socket.cpp:591] [c10d] The client socket will attempt to connect to an IPv4 address of (node07, 29500).\n";
        let failed = format!("{notice}[E socket.cpp:860] [c10d] The client socket has failed to connect to [node07]:29500 (errno: 111 - Connection refused).\n");
        assert_counts(&[(notice, 0), (&failed, 1)]);
    }

    /// A header's or a binding's block comment documents an error; a Markdown list's `*` items
    /// with an error in them are a report.
    #[test]
    fn block_comments_document_errors_and_bullets_report_them() {
        let javadoc = "    /**\n     * A device-side assert triggered during kernel execution. The context\n     * cannot be used anymore, and must be destroyed.\n     */\n    public static final int CUDA_ERROR_ASSERT                         = 710;\n";
        let deeper = "/*\n * Error codes\n *\n * cudaErrorIllegalAddress: an illegal memory access was encountered\n */\n";
        let opener = "/** CUDA error: an illegal memory access was encountered */\n";
        let bullets = "* Environment: 8x A100\n  * Driver 535\n  * RuntimeError: CUDA error: device-side assert triggered\n";
        let after_closed =
            "/* repro */\n* Env: A100\n* RuntimeError: CUDA error: device-side assert triggered\n";
        assert_counts(&[
            (javadoc, 0),
            (deeper, 0),
            (opener, 0),
            (bullets, 1),
            (after_closed, 1),
        ]);
    }

    /// A troubleshooting page's section heading names an error and the next line advises the
    /// reader; an issue's title shown as a heading, a heading that holds a pasted message with
    /// its fields, or a program's `# ` output, is still a report.
    #[test]
    fn a_markdown_heading_that_names_an_error_is_a_section_title() {
        assert_counts(&[
            ("## CUDA out of memory\nIf you see it during prefill, you can lower the chunk size.\n", 0),
            ("## CUDA error: an illegal memory access was encountered\nThis error may be due to a kernel bug or to running out of memory.\n", 0),
            ("# CUDA error: an illegal memory access was encountered\nThis error usually shows up when I resume from a checkpoint.\n", 1),
            ("# CUDA out of memory\nTraining stops after 3 epochs on two cards.\n", 1),
            ("### CUDA out of memory\ntorch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 1.02 GiB is free.\n", 2),
            ("### \"THCudaCheck FAIL file=/src/THC/THCGeneral.c line=70 error=2 : out of memory\"\n", 1),
            ("# APP : FATAL : Cuda driver error 700 : CUDA_ERROR_ILLEGAL_ADDRESS : an illegal memory access was encountered\n", 1),
            // An FAQ's numbered entry may quote the exception; its advice may follow a blank line.
            ("### 1. **RuntimeError: CUDA out of memory**\n\nIt occurs when your GPU has no available memory, try to decrease `batch size`\n", 0),
            ("## CUDA out of memory\n\nYou can lower the batch size.\n", 0),
            // The general present only opens the advice: a report's words after it still count.
            ("### 1. RuntimeError: CUDA out of memory\nIt occurs when I run train.py on my node.\n", 1),
            ("### RuntimeError: CUDA out of memory\n\nIt occurs when your GPU has no available memory.\n", 1),
        ]);
    }

    /// A message that says how much it tried to allocate is no heading, even when the program's
    /// own advice follows it (Real-ESRGAN prints "If you encounter CUDA out of memory, try to
    /// set --tile with a smaller number." after the error); a heading followed by the same
    /// advice titles a section.
    #[test]
    fn a_message_with_its_sizes_is_no_heading() {
        assert_counts(&[
            ("Error CUDA out of memory. Tried to allocate 1.34 GiB (GPU 0; 3.94 GiB total capacity; 2.23 GiB already allocated; 479.00 MiB free; 2.38 GiB reserved in total by PyTorch)\nIf you encounter CUDA out of memory, try to set --tile with a smaller number.\n", 1),
            ("CUDA out of memory\nIf you encounter CUDA out of memory, try to set --tile with a smaller number.\n", 0),
        ]);
    }

    /// TensorFlow's allocator warning disowns the shortage it reports, also when a paste put its
    /// disclaimer on a line of its own; the failure's own summary is still an incident.
    #[test]
    fn an_allocator_warning_with_its_disclaimer_apart_is_no_shortage() {
        assert_counts(&[
            ("2020-02-10 13:01:25.447825: W tensorflow/core/common_runtime/bfc_allocator.cc:219] Allocator (GPU_0_bfc) ran out of memory trying to allocate 2.14GiB.\n\nThe caller indicates that this is not a failure, but may mean that there could be performance gains if more memory were available.\n", 0),
            ("2020-02-10 13:01:25.447825: W tensorflow/core/common_runtime/bfc_allocator.cc:219] Allocator (GPU_0_bfc) ran out of memory trying to allocate 2.14GiB (rounded to 2298478592).  Current allocation summary follows.\n", 1),
        ]);
    }

    /// Release notes list fixed and known bugs under their own headings; a report's or a log's
    /// heading-like line is no changelog's.
    #[test]
    fn an_entry_under_a_changelog_heading_is_a_fixed_bug() {
        assert_counts(&[
            ("Release Highlights\nBug Fixes\nRuntimeError: cudaErrorIllegalAddress: an illegal memory access was encountered\n", 0),
            ("### \u{1f41b} Bug fixes\n\n- RuntimeError: CUDA error: an illegal memory access was encountered with fp8 KV cache\n", 0),
            ("**Known Issues:**\nCUDA error: misaligned address on Hopper with head_dim 96\n", 0),
            ("### Fixed\n\n- NCCL WARN NET/IB : Got completion from peer 10.0.0.2<1234> with error 12, opcode 0, len 0, vendor err 129\n", 0),
            // Not a heading of its own, a reporter's own words, a bare "Fixed" line, and log
            // records under a heading.
            ("Fixed\nRuntimeError: CUDA error: an illegal memory access was encountered\n", 1),
            ("Known Issues:\n2024-06-14 11:14:03,123 ERROR train.py:88 RuntimeError: CUDA error: an illegal memory access was encountered\n", 1),
            ("Bug Fixes\n{\"loss\": nan, \"step\": 10}\n", 1),
            ("Bug fixes did not help, still getting:\nRuntimeError: CUDA error: an illegal memory access was encountered\n", 1),
            ("Fixed the data loader, then:\nRuntimeError: CUDA error: an illegal memory access was encountered\n", 1),
        ]);
    }

    /// Rows of an error table are ruled out one by one; gluing a long row to the next must not
    /// read the next row's error name as a report (`every_wrap_width_keeps_kind_and_family` keeps
    /// literals that a wrap did cut).
    #[test]
    fn a_finished_sentence_before_is_not_a_wrapped_piece() {
        // An article's paragraph, then advice that quotes the error in single quotes: the first
        // paragraph's "shows" must not make the second a report.
        let text = "torch.cuda.empty_cache() clears the memory pool but does NOT defragment already-allocated tensors. The fixed code shows autocast() but omits the scaler.\n\
                    For dynamic batch size reduction: wrap the training step in try-except, catch RuntimeError with 'CUDA out of memory' in the message, then halve batch_size and retry (torch.cuda.empty_cache(), optimizer.zero_grad(), retry the forward pass). Peak usage often matters more for OOM prevention\n";
        assert_eq!(super::tests::first(text), None);
        // A sentence that ends in a citation (`[1].`) is finished too: the list item before
        // lends its "occurs" to none of the next item's quoted names.
        let text = "2. **Improves Error Reporting**: This can help in identifying the exact point where an error occurs, as the error messages will be generated at once [1].\n\
                    3. **Common Use Cases**: This setting is particularly useful when dealing with errors like \"device-side assert triggered\" or \"cudaErrorLaunchFailure.\" It can help developers find issues in their code [5].\n";
        assert_eq!(super::tests::first(text), None);
    }

    #[test]
    fn a_ruled_out_line_is_not_read_again_joined() {
        let table = "| cudaErrorMissingConfiguration | 1 | The device function being invoked (usually via cudaLaunch()) was not previously configured via the cudaConfigureCall() function. |\n| cudaErrorMemoryAllocation | 2 |\tThe API call failed because it was unable to allocate enough memory to perform the requested operation. |\n";
        assert_counts(&[(table, 0)]);
    }

    /// A troubleshooting page's entries: an error under a heading or a "Description:" label with a
    /// "Cause:" / "Solution:" label next, and an FAQ's quoted title with its answer indented under
    /// it. A report that pastes the same error and goes on in its own words stays an event.
    #[test]
    fn troubleshooting_entries_are_not_events() {
        let wiki = "* #### Running out of GPU memory\n   * **Description**:\n   ERROR : CUDA ERROR : out of memory !!\n   * **Solution**: Reduce GPU_NSTREAM until the issue is resolved.\n";
        assert!(auto_findings(wiki).is_empty(), "{:?}", auto_findings(wiki));
        let guide = "## Common Error Messages\n\n### `torch.cuda.OutOfMemoryError`\n\n**Cause:** GPU memory exhausted\n**Solution:** Use CPU evaluation or smaller model\n\n### `RuntimeError: CUDA error: out of memory`\n\n**Cause:** GPU memory allocation failed\n";
        assert!(
            auto_findings(guide).is_empty(),
            "{:?}",
            auto_findings(guide)
        );
        let faq = "- \"GPU out of memory when validation\"  \n  Decrease `test_micro_batch_size` and run a short epoch first.\n";
        assert!(auto_findings(faq).is_empty(), "{:?}", auto_findings(faq));
        let doc = "If insufficient shared memory is available, NCCL will fail to initialize. Running with NCCL_DEBUG=WARN will show a message similar to this:\n\nNCCL WARN Error: failed to extend /dev/shm/nccl-03v824 to 4194660 bytes\n";
        assert!(auto_findings(doc).is_empty(), "{:?}", auto_findings(doc));
        for report in [
            "### Training crashes\n\nRuntimeError: CUDA error: out of memory\nI reduced the batch size but it still fails.\n",
            "I got these errors:\n- \"GPU out of memory when validation\"\n- \"CUDA error: an illegal memory access was encountered\"\n",
            "When I run it, it shows a message similar to this:\n\nNCCL WARN Error: failed to extend /dev/shm/nccl-03v824 to 4194660 bytes\n",
        ] {
            assert!(!auto_findings(report).is_empty(), "{report}");
        }
    }

    /// A guide's example that spans lines is one quotation, up to the blank line; a line with a
    /// log record's or an exception's shape, and what comes after the blank line, is judged on
    /// its own.
    #[test]
    fn the_rest_of_a_framed_example_is_quoted_too() {
        let guide = "A job on two nodes can fail in several ways, for example:\n\nRuntimeError: NCCL communicator was aborted on rank 3.\nOriginal reason for failure was: Watchdog caught collective operation timeout:\nWorkNCCL(SeqNum=7, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.\n";
        let then_log = "A job can fail in several ways, for example:\nRuntimeError: CUDA error: unspecified launch failure\n2024-05-02 11:02:14 ERROR [rank 1] torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n";
        let then_real = format!("{guide}\n[rank1]:[E1203 10:00:00.000000 ProcessGroupNCCL.cpp:1590] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=BROADCAST) ran for 600001 milliseconds before timing out.\n");
        assert_counts(&[(guide, 0), (then_log, 1), (&then_real, 1)]);
    }

    /// A string alone on a line after one that opens a call is an argument in code; a
    /// notebook's stored stderr and a reporter's quoted error are not.
    #[test]
    fn a_string_argument_on_its_own_line_is_code() {
        assert_counts(&[
            ("        err = RuntimeError(\n            \"RuntimeError: CUDA error: out of memory\"\n        )\n", 0),
            ("   \"text\": [\n    \"RuntimeError: CUDA error: device-side assert triggered\\n\",\n", 1),
            ("My job dies with this error:\n\"RuntimeError: CUDA error: out of memory\"\n", 1),
        ]);
    }

    /// A wrap inside the kernel file's name: the join restores the name the catalog knows.
    #[test]
    fn wrap_inside_the_kernel_file_name_is_joined() {
        let text = "noise\n/opt/conda/conda-bld/pytorch_1591914880026/work/aten/src/THC/THCTensorIn\ndex.cu:361: indexSelectLargeIndex: block: [44,0,0], thread: [96,0,0] Assertion `srcIndex < srcSelectDimSize` failed.\n";
        let findings = auto_findings(text);
        match &findings.first().map(|f| &f.evidence) {
            Some(Evidence::KernelAssert { kernel_file, .. }) => {
                assert_eq!(kernel_file.as_deref(), Some("THCTensorIndex.cu:361"));
            }
            other => panic!("{other:?}"),
        }
    }

    /// An article's or a pull request's example of an error, framed by the line before it (past
    /// blank lines and a code fence), is not an event; the same line introduced by a report is.
    #[test]
    fn examples_framed_by_the_line_before_are_not_events() {
        let example = "Jobs can fail in several ways, for example:\n\n```\nRuntimeError: CUDA error: an illegal memory access was encountered\n```\n";
        assert!(auto_findings(example).is_empty());
        let report = "After two hours the run died with:\n\n```\nRuntimeError: CUDA error: an illegal memory access was encountered\n```\n";
        assert_eq!(auto_findings(report).len(), 1);
        let mid_sentence = "训练途中突然报错：\nRuntimeError: CUDA error: device-side assert triggered\n，之后所有调用都失败。\n";
        assert!(auto_findings(mid_sentence).is_empty());
        // A heading that the next line explains, and a sentence cut inside its code span.
        let heading = "CUDA error: device-side assert triggered\nThis article explains where the \"device-side assert triggered\" error comes from and how to find the kernel behind it.\n";
        assert!(auto_findings(heading).is_empty());
        let wrapped = "- After the upgrade the script goes from `CUDA error: an illegal memory access was\n  encountered` to a clean run on every card we tried.\n";
        assert!(auto_findings(wrapped).is_empty());
        // A pasted exception line followed by the reporter's own musings stays an event, and so
        // does a rank's line after another rank's example framing.
        let musing = "RuntimeError: CUDA error: device-side assert triggered\nGoogling suggests that the \"device-side assert triggered\" error usually means a label is out of range, but num_classes is right.\n";
        assert!(!auto_findings(musing).is_empty());
        let ranks = "[rank1]: Possible causes vary, for example:\n[rank0]: RuntimeError: CUDA error: an illegal memory access was encountered\n";
        assert!(!auto_findings(ranks).is_empty());
        // A report introduces its own errors with "such as:" too.
        let report = "Logs from the failed ranks contain errors such as:\n\nRuntimeError: CUDA error: an illegal memory access was encountered\n";
        assert!(!auto_findings(report).is_empty());
        let report_zh = "多个节点随机报错，例如：\nRuntimeError: CUDA error: an illegal memory access was encountered\n";
        assert!(!auto_findings(report_zh).is_empty());
        let plea_after = "训练到第3个epoch时报错：\nRuntimeError: CUDA error: device-side assert triggered\n，请问怎么解决？\n";
        assert!(!auto_findings(plea_after).is_empty());
        // A pasted log line followed by the log's next line stays an event.
        let log = "RuntimeError: CUDA error: device-side assert triggered\nCUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.\n";
        assert!(!auto_findings(log).is_empty());
    }
}
