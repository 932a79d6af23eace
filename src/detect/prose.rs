//! Prose: tells a sentence that names an error in passing from a line that reports one.
//!
//! Issue threads and forum answers explain errors as often as they paste them: "once any earlier
//! kernel faults with `misaligned address`, every later call returns it", "there are known
//! `CUDA_ERROR_ILLEGAL_ADDRESS` bugs in ptxas", "this error `Check failed: … out of memory`
//! indicates OOM on the GPU". A headline literal in such a sentence is the error's *name*, not an
//! event. A report shows the error as the program printed it (a line of its own, a title that
//! starts with it) or says that someone met it ("I get `…`", "training crashes with `…`", "it
//! throws `…`"). Only the shape of a mention is dropped: every headline literal is quoted (a code
//! span or double quotes) after at least [`WORDS_BEFORE`] plain words of a sentence of at least
//! [`SENTENCE_WORDS`], and the sentence says nobody met it. A log line's prefix (timestamps,
//! `[rank0]:`, `file.py:12]`, `ERROR`) has no plain words, so log text never reads as a sentence.
//! Chinese, Japanese and Korean put no spaces between words, so there a sentence is counted in
//! characters, and a first-person pronoun or a question says that someone met the error.

use regex::Regex;
use std::ops::Range;
use std::sync::OnceLock;

/// Words of prose before the first mention: a title or a report puts the error first ("Getting
/// `X` when …"), an explanation gets to it mid-sentence.
const WORDS_BEFORE: usize = 4;
/// Words of prose outside code spans for a line to be a sentence rather than a short title.
const SENTENCE_WORDS: usize = 8;
/// Plain words enough around a quotation that the words right after it explain.
const EXPLAINED_WORDS: usize = 4;
/// Longest quotation that is still a quoted error rather than a pasted block.
const QUOTE_BYTES: usize = 240;
/// Plain words for a line to be a paragraph of prose: far more than any log line, title or
/// error message has.
const PARAGRAPH_WORDS: usize = 30;
/// Plain words before the first mention in such a paragraph: it may start with an article
/// ("The CUDA error … you encountered indicates …"), but not with the error itself.
const PARAGRAPH_WORDS_BEFORE: usize = 1;
/// CJK characters outside the quotations for a line to be a sentence in Chinese, Japanese or
/// Korean (which separate no words by spaces, so [`words`] cannot count them): more than a
/// title's ("训练时出现 …").
const CJK_SENTENCE_CHARS: usize = 12;

/// The regex of a static pattern, compiled on first use.
pub(crate) fn cached(cell: &'static OnceLock<Regex>, pattern: &str) -> &'static Regex {
    cell.get_or_init(|| Regex::new(pattern).expect("static regex"))
}

/// Words that explain what an error is rather than tell that it happened: "this error typically
/// signifies …", "… is usually caused by …", "… indicates …", and the generic reader of an
/// article or answer: "developers may encounter …", "you've hit this error: …".
fn explanation() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    cached(
        &R,
        r"(?i)\b(?:typically|typical|usually|generally|common|commonly|normally|mostly|signif(?:y|ies)|indicates?|means|is caused by|are caused by|refers to|such (?:an )?error|(?:may|might|can|could|will) (?:encounter|hit|see|run into|face)|(?:may|might|can|could|will|would) (?:\w+ )?(?:fail|crash|abort)\w* with|catch(?:es|ing)? (?:a |an |the )?\w*(?:Error|Exception)\b|try[- ]except|you(?:'ve| have| may| might| will| can| could)? (?:hit|encounter\w*|run into|face)|this (?:pr |patch |change |commit )?(?:should |will |would )?(?:fix|fixes|resolve|resolves|address|addresses|avoid|avoids))\b",
    )
}

/// What follows a quoted error in an explanation: "`X` usually happens when …", "`X` means …",
/// "\"X\" and \"Y\" are the strings obtained by `ncclGetErrorString`" (a second quotation
/// may come first).
fn explained_after() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    cached(
        &R,
        r#"(?i)^\W{0,3}\s*(?:(?:and|or)\s+["`\x{201c}][^"`\x{201d}]{1,80}["`\x{201d}]\s*)?(?:(?:usually|typically|often|generally|normally|mostly|commonly|exactly|really|actually|precisely|basically)\s+)?(?:happens|means|indicates|is raised|is thrown|is caused|comes from|refers to|is a sign|(?:is|are)\s+(?:the|a|an)\s+(?:\w+\s+)?(?:strings?|messages?|texts?|names?|values?)\s+(?:\w+\s+)?(?:returned|obtained|produced|printed|given|generated|emitted|defined))\b"#,
    )
}

/// Someone met the error: first person with a verb of running into something (an adverb may
/// come between them: "I am unexpectedly getting", "we randomly hit"; the contraction with a
/// typographic apostrophe too, "I’m getting", as editors and word processors set it), a program that
/// crashed or failed with it, one that printed, threw or gave it (or where it "occured", as
/// reporters often spell it), one that "encounters an error" (the run's own words for it: "on the
/// 1080 system it encounters an error: `…`"), one that keeps doing so ("it keeps showing `CUDA out of
/// memory`"), a second verb of the reporter's sentence ("I am trying to run X
/// and encountered this error: …"), or a plea for help ("any ideas", "please help"; not "can
/// you …", which maintainers ask as often as reporters). "happened" counts only as an event's verb ("happened
/// again", "happened when …"), not as "whatever call happened to run next". ("Gave up" is no report: "the layer where NCCL gave up".) (Explanations describe what
/// an error means or where it comes from: "a kernel faults with …", "it indicates …". The
/// participle "reported" is left out: it is mostly an adjective there, "the reported location";
/// so is "got" without a subject: "the context got corrupted".)
pub(super) fn report_cue() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    cached(
        &R,
        r"(?i)\b(?:i|we)(?:['’]m|['’]ve|['’]d| am| are| have| had| was| were| keep| still| also| now| always| sometimes| often| just| then)*(?:\s+[a-z]+ly)?\s+(?:get|gets|got|getting|see|saw|seeing|seen|encounter\w*|hit|hitting|ran into|run into|running into|face[ds]?|facing|receiv\w*|meet|met|meeting|observ\w*|experienc\w*|notic\w*|found|obtain\w*)\b|\b(?:crash\w*|fail(?:s|ed|ing)?|die[sd]?|dying|abort\w*|exit(?:s|ed)?|terminat\w*|stops?|stopped)\s+(?:\w+\s+){0,4}with\b|\b(?:my|our)\s+(?:\w+\s+){0,2}(?:crash\w*|fail\w*|die[sd]?|abort\w*|throw\w*|rais\w*)|\b(?:throws|threw|thrown|raised|prints|printed|shows|showed|outputs|reports|occurs|occurred|occured|yields|yielded)\b|\bencounter(?:s|ed)\s+(?:an?|the|this)\s+error\b|\b(?:keeps?|kept)\s+(?:on\s+)?(?:showing|getting|throwing|giving|raising|printing|reporting|hitting|crashing|failing|telling|saying|returning|producing|outputting)\b|\b(?:gives|gave)\b(?:\s*$|\s*[^\su]|\s+u(?:$|[^p]|p\w))|\bhappened(?:$|[.,;:!)]|\s+(?:when|while|after|during|again|on|at|in|with|for|today|yesterday|randomly|sometimes|twice))|\bthen\s+(?:it\s+)?(?:print|throw|rais|show|giv|output|report)(?:s|es|ed|e)?\s+(?:an?|the|this|that)\s+(?:error|exception)\b|\bany\s+(?:ideas?|help|suggestions?|advice|hints?)\b|\bplease\s+help\b|\bhelp\s+me\b|\b(?:when|after|while|whenever)\s+(?:i|we)\b|\bfollowing (?:error|exception|output|log|message)|\bbefore\s+(?:getting|hitting|running\s+into|encountering)\b|\band\s+(?:then\s+|now\s+|still\s+|always\s+)?(?:got|get|encountered|encounter|received|receive|ran into|run into|met|meet|saw|see|faced|face|obtained)(?:\s+(?:this|these|the|an?|such|same)\b|\s*[\x22'`\x{201c}])|\b(?:in|on) my\b|\bmy (?:\w+ ){0,2}(?:job|run|training|model|code|script|program|process|setup|node|machine|server|gpu|cluster|case)s?\b",
    )
}

/// Does `text` say that someone met an error ([`report_cue`])? A consequence foretold ("…
/// applications will fail with the `CUDA_ERROR_SYSTEM_NOT_READY` error", "jobs may crash with
/// …") is an explanation, not a report.
pub fn has_report_cue(text: &str) -> bool {
    report_cue()
        .find_iter(text)
        .any(|m| !foretold(&text[..m.start()]))
}

/// Does the clause that `before` ends put a modal verb shortly before the verb that follows, or
/// "to" right before it, so that the verb is a prediction or an infinitive ("will fail with",
/// "will result in the manager failing to start with", "is likely to crash with")?
fn foretold(before: &str) -> bool {
    const MODALS: [&str; 9] = [
        "will", "would", "may", "might", "can", "could", "should", "won't", "can't",
    ];
    let clause = before
        .rsplit(['.', ';', ':', ',', '!', '?'])
        .next()
        .unwrap_or("");
    let mut words = clause
        .split(|c: char| !c.is_alphanumeric() && c != '\'')
        .filter(|w| !w.is_empty())
        .rev();
    let last = words.next().unwrap_or("");
    last.eq_ignore_ascii_case("to")
        || std::iter::once(last)
            .chain(words.take(3))
            .any(|w| MODALS.iter().any(|m| w.eq_ignore_ascii_case(m)))
}

/// Content ranges of the quotations of `line`: inline code spans, then double-quoted strings
/// outside them (straight or curly quotes, the corner brackets 「」『』 of Chinese and Japanese,
/// guillemets « »).
/// Marks that open a quotation ([`quoted_spans`]), and those that close one.
const OPENING_QUOTES: [char; 5] = ['"', '\u{201c}', '\u{300c}', '\u{300e}', '\u{ab}'];
const CLOSING_QUOTES: [char; 5] = ['"', '\u{201d}', '\u{300d}', '\u{300f}', '\u{bb}'];

fn quoted_spans(line: &str) -> Vec<Range<usize>> {
    let mut spans = code_spans(line);
    let mut open: Option<usize> = None;
    let mut quotes = Vec::new();
    // Code spans come in order and do not overlap: one cursor walks them.
    let mut next_span = 0;
    for (i, c) in line.char_indices() {
        while spans.get(next_span).is_some_and(|s| s.end <= i) {
            next_span += 1;
        }
        if spans.get(next_span).is_some_and(|s| s.start <= i) {
            continue;
        }
        match (c, open) {
            (c, None) if OPENING_QUOTES.contains(&c) => open = Some(i + c.len_utf8()),
            (c, Some(o)) if CLOSING_QUOTES.contains(&c) => {
                quotes.push(o..i);
                open = None;
            }
            _ => {}
        }
    }
    spans.extend(quotes);
    spans.sort_by_key(|s| s.start);
    spans
}

/// Content ranges of the inline code spans of `line` (`` `x` ``, ``` ``x`` ```): a run of N
/// backticks closed by the next run of exactly N. (A span that a hard wrap left open is judged
/// with the next line by the scanner.)
fn code_spans(line: &str) -> Vec<Range<usize>> {
    let b = line.as_bytes();
    let run_at = |i: usize| b[i..].iter().take_while(|&&c| c == b'`').count();
    let mut spans = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'`' {
            i += 1;
            continue;
        }
        let n = run_at(i);
        let start = i + n;
        let mut j = start;
        let mut close = None;
        while j < b.len() {
            if b[j] == b'`' {
                let m = run_at(j);
                if m == n {
                    close = Some(j);
                    break;
                }
                j += m;
            } else {
                j += 1;
            }
        }
        match close {
            Some(c) => {
                spans.push(start..c);
                i = c + n;
            }
            None => break,
        }
    }
    spans
}

/// Plain words in `text`: whitespace-separated tokens made of letters only (an apostrophe, and
/// one trailing punctuation mark, allowed), capitalised at most on the first letter. Paths,
/// identifiers, numbers, `[tags]` and `ERROR` are not plain words.
fn words(text: &str) -> usize {
    text.split_whitespace()
        .filter(|t| {
            let t = t.trim_end_matches([',', '.', ';', ':', '!', '?']);
            let mut cs = t.chars();
            cs.next().is_some_and(char::is_alphabetic) && cs.all(|c| c.is_lowercase() || c == '\'')
        })
        .count()
}

/// Is every one of `hits` (byte ranges of headline literals in `line`) the name of an error
/// mentioned in a sentence, rather than a report of it?
pub fn names_error_in_passing(line: &str, hits: &[Range<usize>]) -> bool {
    if hits.is_empty() {
        return false;
    }
    // Program output, however many words its message has: PyTorch's own messages run to
    // paragraphs that explain themselves ("… This typically indicates a NCCL/CUDA API hang …").
    if among_possible_causes(line, hits) {
        return true;
    }
    let first = hits.iter().map(|h| h.start).min().unwrap_or(0);
    if line.get(..first).is_some_and(log_shaped) {
        return false;
    }
    if announces_a_fix(line)
        || named_as_avoided(line, hits)
        || quantified_class(line, hits)
        || plural_in_general(line, hits)
        || plural_as_a_cause(line, hits)
        || introduced_as_kinds(line, hits)
        || set_with_its_default(line, hits)
        || asked_about(line, hits)
        || second_person_scenario(line)
        || listed_as_a_topic(line, hits)
        || (names_a_class(line) && !has_report_cue(line))
        || met_if_you(line, hits)
        || failure_foretold(line, hits)
        || named_as_a_pattern(line, hits)
        || supposed_in_chinese(line, hits)
    {
        return true;
    }
    if hits.iter().all(|h| bare_exception_class(line, h))
        || reference_description(line)
        || reference_table_row(line, hits)
        || advice_table_row(line, hits)
        || names_its_messages(line, hits)
    {
        return true;
    }
    if subjects_explained(line, hits) {
        return true;
    }
    if explained_to_the_reader(line, hits) {
        return true;
    }
    if named_as_a_common_error(line, hits) {
        return true;
    }
    if !(line.contains('`') || line.contains(OPENING_QUOTES)) {
        return explained_in_a_paragraph(line, hits);
    }
    let spans = quoted_spans(line);
    // A bare type name (`cudaError` in "is there a way to debug cudaError in …") names no error.
    let hits: Vec<Range<usize>> = hits
        .iter()
        .filter(|h| !bare_type_name(line, h))
        .cloned()
        .collect();
    if hits.is_empty() {
        return false;
    }
    if !named_by(&spans, &hits) {
        return explained_in_a_paragraph(line, &hits);
    }
    // The prose around the spans.
    let mut outside = String::with_capacity(line.len());
    let mut at = 0;
    for s in &spans {
        // Spans are char-aligned; a quotation may hold a code span, so never step back.
        outside.push_str(line.get(at..s.start.max(at)).unwrap_or(""));
        outside.push(' ');
        at = at.max(s.end);
    }
    outside.push_str(line.get(at..).unwrap_or(""));
    let first = hits.iter().map(|h| h.start).min().unwrap_or(0);
    let span = spans
        .iter()
        .find(|s| s.start <= first && first < s.end.max(s.start + 1));
    let before = span.map_or(first, |s| s.start);
    // A closing quote mark follows the span's end; `explained_after` skips it.
    let explained = span
        .and_then(|s| line.get(s.end..))
        .is_some_and(|rest| explained_after().is_match(rest));
    let article = article_voice().is_match(&outside);
    // Guillemets and corner brackets quote in prose that the English cues cannot read: an
    // explaining word must say it is an explanation.
    let strongly_quoted = named_by(&strong_spans(line, &spans), &hits);
    if cjk_chars(&outside) >= CJK_SENTENCE_CHARS {
        let (person, plea) = cjk_cues(&outside);
        return !person
            && (article || !plea)
            && (strongly_quoted || explains_in_other_words(&outside))
            && !has_report_cue(&outside);
    }
    if !strongly_quoted && !explains_in_other_words(&outside) {
        return false;
    }
    // A sentence whose verb right after the quotation explains it may be short ("\"X\" is the
    // string returned by ncclGetErrorString.").
    let enough = if explained {
        EXPLAINED_WORDS
    } else {
        SENTENCE_WORDS
    };
    (explained || article || line.get(..before).map_or(0, words) >= WORDS_BEFORE)
        && words(&outside) >= enough
        && !has_report_cue(&outside)
}

/// Does `text` (what comes before an error on a line) carry a log record's marks: a glog header
/// (`E0205 18:11:06`, `[E205 18:11:06`), a torchrun rank tag opening the line (`[rank4]:`, after a
/// collector's time at most), a source location in
/// brackets (`ProcessGroupNCCL.cpp:1870]`) or an NCCL level? Prose has none of them before the
/// error it talks about. (A clock time alone is not enough: chat transcripts carry one.)
fn log_shaped(text: &str) -> bool {
    static R: OnceLock<Regex> = OnceLock::new();
    cached(
        &R,
        r"(?:^|[\s\[])[IWEF]\d{3,4} \d{2}:|^[\d:.,T -]*\[(?:rank|default)\d+\]:|\.(?:cpp|cc|cu|h|hpp|py):\d+\]|\bNCCL (?:WARN|INFO)\b",
    )
    .is_match(text)
}

/// A changelog entry, commit subject or pull-request title that announces a fix for the error
/// ("- Fixed a crash with `…`", "[Bugfix] Fix illegal memory access in …", "fix(attn): avoid …",
/// "Prevent CUDA out of memory during …", "Summary: Address `…` error", "- Add FAQ for …",
/// "[python] Handle torch.cuda.OutOfMemoryError", "Show NCCL error if failed."): after a
/// bullet, a `Summary:` label, `[Tag]` groups and a conventional-commit type, it starts with a
/// verb of fixing, handling or showing the error, or with adding documentation, tests or
/// handling for it, or a tag or type says it is a fix. A question ("How to fix …?", "… fix?")
/// and a plea ("Fix needed: …") are reports.
pub(super) fn announces_a_fix(line: &str) -> bool {
    static R: OnceLock<Regex> = OnceLock::new();
    let r = cached(
        &R,
        r"(?i)^\s*(?:[-*+\u{2022}]\s+)?(?:(?:summary|title|subject)\s*:\s*)?(?:\[[\w /-]{1,24}\]\s*:?\s*)*(?:(?:(?P<type>fix|bugfix|hotfix|feat|perf|refactor|chore|build|ci|docs|tests?|style|revert)(?:\([\w ./-]{1,30}\))?!?:\s*))?(?:(?P<verb>fix|fixed|fixes|fixing|resolve[ds]?|prevent(?:s|ed)?|avoid(?:s|ed)?|mitigate[ds]?|address(?:es|ed)?|work\s*around|workaround|handles?|catch(?:es)?|prints?|shows?|surfaces?|expos(?:e|es)|propagates?|translates?)|(?P<adds>(?:add(?:s|ed|ing)?|document(?:s|ed|ing)?|updat(?:e|es|ed|ing)|improv(?:e|es|ed|ing)|clarif(?:y|ies|ied|ying))\s+(?:(?:a|an|the|more|some|new|better)\s+)?(?:faq|docs?|documentation|tests?|unit\s+tests?|hints?|notes?|comments?|sections?|examples?|guides?|troubleshooting|error\s+messages?|warnings?|checks?|handling|handlers?|retr(?:y|ies)|logging)))?\b(?P<next>\s+\w+)?",
    );
    if line.contains('?') {
        return false;
    }
    let Some(c) = r.captures(line) else {
        return false;
    };
    let head = c.get(0).map_or("", |m| m.as_str()).to_ascii_lowercase();
    let tagged = ["[bugfix]", "[bug fix]", "[fix]", "[hotfix]"]
        .iter()
        .any(|t| head.contains(t))
        || c.name("type").is_some_and(|t| {
            matches!(
                t.as_str().to_ascii_lowercase().as_str(),
                "fix" | "bugfix" | "hotfix"
            )
        });
    // "Fix needed: …" is a plea; "Address 0x7f…: CUDA error …" is a log line ("Fix 4bit
    // quantization …" is a fix).
    let verb = c.name("verb").is_some_and(|v| {
        let address = v.as_str().eq_ignore_ascii_case("address");
        !c.name("next").is_some_and(|n| {
            let n = n.as_str().trim();
            n.eq_ignore_ascii_case("needed")
                || (address && n.starts_with(|ch: char| ch.is_ascii_digit()))
        })
    });
    tagged || verb || c.name("adds").is_some()
}

/// An article speaking of itself ("this article explains …", 本文将介绍 …, この記事では …) or
/// opening with a question to its reader about the reader's trouble (〜で困っていませんか?,
/// 你是否遇到过 …, … 겪고 계신가요?): its sentences explain errors, even where they say how to
/// solve them (如何解决, which in a report asks for help) or end in a question mark.
fn article_voice() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    cached(
        &R,
        r"(?i)\bthis (?:article|post|blog post|guide|tutorial)\b|в этой статье|(?:^|[\s。，、！？：,.!?:])本文(?:将|主要|介绍|記|记录|中|では|は|の)|本篇文章|这篇文章|この記事|本記事|이 글에서|이 포스트|(?:悩んで|困って|抱えて)い?ませんか|お(?:困り|悩み)ではありませんか|(?:你|您)是否也?(?:曾经?)?(?:遇到|碰到)|(?:겪고|고민하고)\s?(?:계신가요|계시나요|있으신가요)",
    )
}

/// Is `hit` a bare type or prefix name (`cudaError`, `cudaError_t`, `CUDA_ERROR_`) rather than
/// the name of one error?
fn bare_type_name(line: &str, hit: &Range<usize>) -> bool {
    let rest = line.get(hit.end..).unwrap_or("");
    let tail: String = rest
        .chars()
        .take(3)
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    let name = format!("{}{tail}", line.get(hit.clone()).unwrap_or(""));
    name == "cudaError" || name == "cudaError_t" || name.ends_with('_')
}

/// Is `hit` the name of an exception class spoken of, not raised: no message after it (Python and
/// C++ print the class, a colon and the message: "torch.OutOfMemoryError: CUDA out of memory …";
/// `Name(` is code, judged elsewhere), no label in front that makes it a report's field
/// ("**Exception Type:** torch.OutOfMemoryError" in ComfyUI's error report, "type ->
/// NCudaLib::TOutOfMemoryError"), and either named as a class (documentation's "exception
/// torch.cuda.OutOfMemoryError", a permalink's `#` after it, "a class (`…`)") or quoted in a code
/// span inside a sentence that tells no one met it ("We should just rethrow the existing
/// `OutOfMemoryError`."). Program output names a class after "of type" (torch.distributed's "due
/// to an error of type RendezvousConnectionError") or "instance of" (C++'s terminate handler). A title
/// that opens with the class says where the reporter met it ("cupy.cuda.memory.OutOfMemoryError in
/// forward"), and a class alone on a line is what a traceback prints for an exception raised
/// without a message.
fn bare_exception_class(line: &str, hit: &Range<usize>) -> bool {
    let Some(name) = line.get(hit.clone()) else {
        return false;
    };
    if !(name.ends_with("Error") || name.ends_with("Exception"))
        || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        return false;
    }
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    // The literal must end the name (`hipError` is the start of `hipErrorIllegalAddress`).
    if line[hit.end..].starts_with(ident) {
        return false;
    }
    let rest = line[hit.end..].trim_start_matches(['`', '*', '_', '\'', '"', ']', '\u{201d}']);
    let next = rest.trim_start().chars().next();
    if matches!(next, Some(':' | '(' | '\u{ff1a}')) {
        return false;
    }
    // The qualified name's start, and what comes before it.
    let start = line[..hit.start]
        .trim_end_matches(|c: char| ident(c) || c == '.' || c == ':')
        .len();
    let before = line[..start].trim_end_matches(['`', '*', '_', '\'', '"', '(', '[', '\u{201c}']);
    static LABEL: OnceLock<Regex> = OnceLock::new();
    if cached(
        &LABEL,
        r"(?i)(?:(?:type|exception|error|class|kind)\W{0,4}(?::|->|=)\s*(?:\*\*|__)?|\bof type|\binstance of)\s*$",
    )
    .is_match(before)
    {
        return false;
    }
    static CLASS: OnceLock<Regex> = OnceLock::new();
    // The object of a change to code (a pull request's "align torch.cuda.OutOfMemoryError",
    // "Expose CUDAOutOfMemoryError to Python", "adds `NcclTimeoutError`") is the class itself.
    static CHANGED: OnceLock<Regex> = OnceLock::new();
    let named_as_class = rest.starts_with(['#', '\u{b6}'])
        || cached(&CLASS, r"(?i)(?:^|\s)(?:class|exception)\s*$").is_match(before)
        || cached(
            &CHANGED,
            r"(?i)(?:^|[\s\]:])(?:align|add|support|expose|implement|export|convert|wrap|rename|deprecate|introduce|define|register|subclass|inherit\s+from)(?:s|ed)?\s*$",
        )
        .is_match(before);
    if named_as_class {
        return true;
    }
    let opens_line = before
        .trim_start_matches(|c: char| c.is_whitespace() || "-*#>".contains(c))
        .is_empty();
    // What an API does with the class ("… that gets thrown for OOM errors", "an OOM that a caller
    // re-raised") is said in the passive or of a caller, and tells of no run.
    static PASSIVE: OnceLock<Regex> = OnceLock::new();
    let told = cached(
        &PASSIVE,
        r"(?i)\b(?:is|are|was|were|gets?|got|be|been|being)\s+(?:thrown|raised)\b|\bre-raised\b",
    )
    .replace_all(line, " ");
    let in_code = code_spans(line)
        .iter()
        .any(|s| s.start <= hit.start && hit.end <= s.end);
    in_code && !opens_line && words(line) >= WORDS_BEFORE && !has_report_cue(&told)
}

/// Is every one of `hits` the object of a purpose clause that says what a change or a setting is
/// for: "adds a `timeout` argument … to avoid Socket Timeouts when using …", "set
/// PYTORCH_CUDA_ALLOC_CONF to prevent CUDA out of memory errors", "in order to handle NCCL
/// timeouts", a feature request's "Reliable way to check for CUDA out of memory"? (Up to two words may come between the verb and the name: "to avoid the CUDA …".) What a change avoids has not happened; a report cue anywhere on the line ("I
/// lowered the batch size to avoid OOM but got …") keeps it a report.
fn named_as_avoided(line: &str, hits: &[Range<usize>]) -> bool {
    static R: OnceLock<Regex> = OnceLock::new();
    let purpose = cached(
        &R,
        r"(?i)\bto\s+(?:(?:reliably|properly|correctly|safely)\s+)?(?:avoid|prevent|fix|handle|catch|mitigate|work\s*around|guard\s+against|recover\s+from|tolerate|reduce|check\s+for|detect|recogni[sz]e|tell\s+apart)\s+(?:[\w.-]+\s+){0,2}[`'\x22*]*$",
    );
    // What a handler catches, named with its exception's class ("to catch RuntimeError: CUDA
    // error: out of memory"); "How to fix RuntimeError: …?" asks about one met.
    static CAUGHT: OnceLock<Regex> = OnceLock::new();
    let caught = cached(
        &CAUGHT,
        r"(?i)\bto\s+(?:catch|handle|tolerate|recover\s+from)\s+(?:[\w.]+(?:Error|Exception):\s+)(?:[\w.-]+:?\s+){0,2}[`'\x22*]*$",
    );
    // What a recovery is triggered by: "Restart `clearml-serving-inference` on
    // `torch.cuda.OutOfMemoryError: CUDA out of memory.` helps …", "- retry on NCCL timeout".
    // The verb opens the line, a list item or an infinitive: a run that "restarted on" an error
    // is told in the past.
    static TRIGGER: OnceLock<Regex> = OnceLock::new();
    let trigger = cached(
        &TRIGGER,
        r"(?i)(?:^\s*(?:[-*+]\s+)?|\bto\s+)(?:restart|retry|reset|reload|recover|fall\s*back|skip)\b[^.!?]{0,80}\b(?:on|upon)\s+(?:an?\s+|the\s+)?[`'\x22*]*(?:[\w.-]+:?\s+|\w+\.){0,4}$",
    );
    hits.iter().all(|h| {
        line.get(..h.start)
            .is_some_and(|b| purpose.is_match(b) || caught.is_match(b) || trigger.is_match(b))
    }) && !report_cue().is_match(&without_negated_sightings(line))
}

/// `text` without a sighting that the writer negates ("Currently I see no way to …", "we found
/// no reliable way"): the words of a report cue that report nothing.
fn without_negated_sightings(text: &str) -> std::borrow::Cow<'_, str> {
    static R: OnceLock<Regex> = OnceLock::new();
    cached(
        &R,
        r"(?i)\b(?:i|we)\s+(?:see|saw|found|find|get|got|have|had)\s+no\b",
    )
    .replace_all(text, " ")
}

/// Is the first of `hits` (and with it the list it opens, "`A` or `B`") a text that something
/// looks for or that must not exist, rather than an error met: the object of a verb of matching ("the job's log contains `torch.OutOfMemoryError`
/// or `CUDA out of memory`", "greps for `NCCL WARN`"; not "search for", which PyTorch's own hint
/// after an error says: "Search for `cudaErrorIllegalAddress' in …"), or of a negated existence ("There should
/// never be a CUDA_ERROR_LAUNCH_FAILED error.", an issue template's expected behaviour)? A report
/// cue keeps it a report ("my log contains …").
fn named_as_a_pattern(line: &str, hits: &[Range<usize>]) -> bool {
    static R: OnceLock<Regex> = OnceLock::new();
    let sought = cached(
        &R,
        r"(?i)(?:\b(?:contains?|containing|match(?:es|ing)?|grep(?:s|ping)?(?:\s+for)?|looks?\s+for|looking\s+for|scan(?:s|ning)?\s+for)\s+(?:(?:the|a|an)\s+)?[`'\x22\x{201c}*]*(?:[\w]+[.:]{1,2})*|\b(?:should|must|would|will|can|could|shall)\s+(?:never|not)\s+(?:be|see|get|happen|occur|throw|raise|hit)\b[^.!?;]{0,40}|\bthere\s+(?:is|are|was|were)\s+no\b[^.!?;]{0,40})$",
    );
    let Some(first) = hits.iter().map(|h| h.start).min() else {
        return false;
    };
    line.get(..first).is_some_and(|b| sought.is_match(b)) && !has_report_cue(line)
}

/// Is every one of `hits` the error that a modal verb foretells a failure with: a release note's
/// fixed issue ("… could fail with CUDNN_STATUS_NOT_SUPPORTED during the execution. This issue
/// has been fixed."), a guide's warning ("applications will fail with
/// CUDA_ERROR_SYSTEM_NOT_READY until …", "large batches may crash with …")? What can happen, not
/// what did. "Would" is no such verb: reporters tell with it what their run did each time ("it
/// would crash with …"), and so are "will" and "can" with an adverb of frequency ("it will randomly
/// crash with …"); a line that reports otherwise ("any ideas?", "I keep getting …") stays a report.
/// The exception's class or "CUDA error:" may come between "with" and the error. The look-back is
/// bounded, so a line of many hits stays linear.
fn failure_foretold(line: &str, hits: &[Range<usize>]) -> bool {
    static R: OnceLock<Regex> = OnceLock::new();
    let r = cached(
        &R,
        r#"(?i)\b(?:will|may|might|can|could|won['’]t|cannot|can['’]t)\s+(?:(?:not|also|then|still|eventually|either|likely|only|potentially)\s+)?(?:fail|crash|abort|error out|die|exit|terminate|stop)\s+with\s+(?:an?\s+|the\s+)?(?:error\s+)?["'`\x{201c}]?(?:[A-Za-z]+(?:Error|Exception):\s*)?(?:CUDA error:\s*)?$"#,
    );
    !hits.is_empty()
        && hits
            .iter()
            .all(|h| r.is_match(window_before(line, h.start, 160)))
        && !has_report_cue(line)
}

/// Is every one of `hits` what a conditional addressed to the reader supposes they meet, in the
/// same sentence: "If you happen to run into this error — cuda runtime error (59): device-side
/// assert triggered — you know how frustrating it can be", "When you see CUDA out of memory,
/// lower the batch size", or, with no subject, "When encountering RuntimeError: CUDA out of
/// memory, especially when …"? A supposition, not a run; the writer in the first person before the
/// error ("if you run my script you get …", a reproduction) keeps it a report.
fn met_if_you(line: &str, hits: &[Range<usize>]) -> bool {
    static R: OnceLock<Regex> = OnceLock::new();
    let supposed = cached(
        &R,
        r"(?i)\b(?:(?:if|when|whenever|once|in case)\s+you\s+(?:ever\s+)?(?:happen\s+to\s+|are\s+|still\s+)?(?:run(?:ning)?\s+into|encounter\w*|get(?:ting)?|see(?:ing)?|hit(?:ting)?|come\s+across|fac(?:e|ing)|receive|meet|experienc\w*)|(?:if|when|whenever|upon|on|while)\s+(?:encountering|facing|getting|seeing|hitting|running\s+into|receiving|experiencing)|(?:have|did)\s+you\s+ever\s+(?:run\s+into|encounter\w*|got(?:ten)?|get|seen|see|hit|faced?|received?|met|experienced?|been\s+(?:hit|stopped|interrupted)\s+by))\b[^.!?;]{0,80}$",
    );
    let me = english_first_person();
    // The end-anchored pattern is searched backwards from each hit; the first person, once, up
    // to the last hit (a line of many hits stays linear).
    let last = hits.iter().map(|h| h.start).max().unwrap_or(0);
    hits.iter()
        .all(|h| line.get(..h.start).is_some_and(|b| supposed.is_match(b)))
        && line.get(..last).is_some_and(|b| !me.is_match(b))
}

/// [`met_if_you`] in Chinese: is every one of `hits` what a sentence supposes the reader meets
/// ("当你在深夜进行训练时,突然看到"NCCL timeout"或"unhandled cuda error"的红色报错信息", when you
/// see …) or what may be met ("可能会遇到Assertion '…' failed这样的断言错误", you may meet …), in
/// the same sentence, with no first person before it? A report says what it met, in the perfect
/// ("我遇到了", "出现了") and in the first person.
pub fn supposed_in_chinese(line: &str, hits: &[Range<usize>]) -> bool {
    static R: OnceLock<Regex> = OnceLock::new();
    let supposed = cached(
        &R,
        r"(?:(?:当|如果|若|一旦|假如|要是)(?:你|您)|(?:可能|也许|或许)会?)[^。！？!?；;\n]{0,60}?(?:遇到|碰到|看到|见到|收到|出现)[^了。！？!?；;\n]{0,80}$|(?:你|您)(?:是否|有没有|有沒有|是不是)[^。！？!?；;\n]{0,60}$",
    );
    !hits.is_empty()
        && hits.iter().all(|h| {
            line.get(..h.start).is_some_and(|b| {
                let sentence = b
                    .rfind(['。', '！', '？', '!', '?', '；', ';'])
                    .map_or(b, |i| &b[i..]);
                supposed.is_match(sentence) && !cjk_cues(sentence).0
            })
        })
}

/// Is every one of `hits` a plural that a quantifier makes a class of errors: "Most NCCL errors
/// aren't NCCL bugs", "Many CUDA errors are reported asynchronously", "all cuDNN errors …"? A
/// statement about errors in general; a report cue on the line keeps it a report ("some NCCL
/// errors occurred on rank 3").
fn quantified_class(line: &str, hits: &[Range<usize>]) -> bool {
    static R: OnceLock<Regex> = OnceLock::new();
    let quantifier = cached(
        &R,
        r"(?i)(?:^|\W)(?:most|many|all|some|these|those|such|other|several|common|typical|various|certain)\s+(?:\w+\s+)?$",
    );
    hits.iter().all(|h| {
        let after = line.get(h.end..).unwrap_or("");
        after.starts_with('s')
            && !after[1..].starts_with(|c: char| c.is_alphanumeric())
            && line.get(..h.start).is_some_and(|b| quantifier.is_match(b))
    }) && !report_cue().is_match(line)
}

/// Is every one of `hits` a plural that a general statement makes a class of errors, by what
/// such errors do or are expected to do: "I'd expect NCCL errors only to occur in multi GPU
/// settings", "CUDA errors are reported asynchronously", "NCCL timeouts usually mean a rank is
/// stuck"? The plural's predicate is in the general present or behind a modal. A report cue on
/// the line keeps it a report ("NCCL errors are thrown on rank 3", "when I run it, CUDA errors
/// appear").
fn plural_in_general(line: &str, hits: &[Range<usize>]) -> bool {
    static R: OnceLock<Regex> = OnceLock::new();
    let predicate = cached(
        &R,
        r"(?i)^s\s+(?:(?:only|usually|often|typically|generally|normally|mostly|sometimes|commonly|rarely|always|never|just)\s+)*(?:to\s+)?(?:occur|happen|arise|appear|are|can|could|may|might|should|would|will|tend|mean|indicate|come)\b",
    );
    all_followed_by(line, hits, predicate) && !report_cue().is_match(line)
}

/// Is every one of `hits` a plural that a sentence gives as the cause of something, as a class:
/// "debugging failed training jobs due to NCCL errors", "restarts caused by CUDA errors"? A
/// report names the error it met, or says whose run it was ("my job failed due to NCCL
/// errors", which the report cue keeps).
fn plural_as_a_cause(line: &str, hits: &[Range<usize>]) -> bool {
    static R: OnceLock<Regex> = OnceLock::new();
    let cause = cached(
        &R,
        r"(?i)(?:^|\W)(?:due\s+to|caused\s+by|because\s+of|owing\s+to|resulting\s+from)\s+(?:\w+\s+)?$",
    );
    !hits.is_empty()
        && hits.iter().all(|h| {
            let after = line.get(h.end..).unwrap_or("");
            let before = window_before(line, h.start, 64);
            after.starts_with('s')
                && !after[1..].starts_with(|c: char| c.is_alphanumeric())
                && cause.is_match(before)
        })
        && !has_report_cue(line)
}

/// Is every one of `hits` named in a sentence that lists kinds of errors: "Other errors include
/// unhandled system error from failed IB verbs, … and invalid usage from mismatched calls", "The
/// most common NCCL error is the watchdog timeout", or the plural class such a sentence defines
/// ("NCCL errors are failures in …")? A glossary or an article sorts errors so; a report says
/// which one it met, and the report cue keeps it.
fn introduced_as_kinds(line: &str, hits: &[Range<usize>]) -> bool {
    static R: OnceLock<Regex> = OnceLock::new();
    let kinds = cached(
        &R,
        r"(?i)\b(?:(?:errors|failures|exceptions)\s+(?:include|including|such\s+as)|(?:the\s+)?most\s+(?:common|frequent|typical)\s+(?:\w+\s+){0,2}?(?:error|failure|exception)s?\s+(?:is|are))\b",
    );
    if hits.is_empty() || has_report_cue(line) {
        return false;
    }
    // One pass over the line: does it sort errors at all?
    let sorts = kinds.is_match(line);
    sorts
        && hits.iter().all(|h| {
            // The class itself as the plural subject, on a line that sorts errors ("NCCL errors
            // are failures in …. Other errors include …").
            let after = line.get(h.end..).unwrap_or("");
            if after.starts_with("s are ") || after.starts_with("s include ") {
                return true;
            }
            // The sentence up to the hit and a few words past it: the hit may be the class the
            // sentence sorts ("The most common NCCL error is …").
            let end = (h.end + 24..=line.len().min(h.end + 28))
                .find(|&i| line.is_char_boundary(i))
                .unwrap_or(line.len());
            let before = window_before(line, end, 240 + end - h.start);
            let start = before[..before.len() - (end - h.start)]
                .rfind(['.', '!', '?'])
                .map_or(0, |i| i + 1);
            kinds
                .find(&before[start..])
                .is_some_and(|m| m.start() + start <= before.len() - (end - h.start))
        })
}

/// The up to `bytes` bytes of `line` that end at `at` (shortened to a character boundary): a
/// bounded look-back keeps a line of many hits linear.
pub(super) fn window_before(line: &str, at: usize, bytes: usize) -> &str {
    (at.saturating_sub(bytes)..=at)
        .find(|&i| line.is_char_boundary(i))
        .and_then(|i| line.get(i..at))
        .unwrap_or("")
}

/// Is each of `hits` (one at least) followed by text that `after`, anchored at its start,
/// matches?
fn all_followed_by(line: &str, hits: &[Range<usize>], after: &Regex) -> bool {
    !hits.is_empty()
        && hits
            .iter()
            .all(|h| after.is_match(line.get(h.end..).unwrap_or("")))
}

/// Is every one of `hits` the name of a setting given with its default in parentheses: a
/// launcher's "# NCCL timeout (30 minutes - increased from default 10 minutes)", a doc's "NCCL
/// timeout (default: 600 s)"? A program that times out says what it waited for, not what it
/// would have waited by default.
fn set_with_its_default(line: &str, hits: &[Range<usize>]) -> bool {
    static R: OnceLock<Regex> = OnceLock::new();
    all_followed_by(
        line,
        hits,
        cached(&R, r"(?i)^s?\s*\([^()]*\bdefault\b[^()]*\)"),
    )
}

/// Is every one of `hits` what a question or an explanation asks about in general: "What is an
/// NCCL watchdog timeout, and why is it hard to resolve?", "it is important to understand what
/// causes the GPU out of memory error", "Why do CUDA errors show up later"? The error is the
/// subject of the wh-clause, with an article or up to three words before it; a report asks about
/// its own error with a demonstrative ("what causes this error: …") or a report cue.
fn asked_about(line: &str, hits: &[Range<usize>]) -> bool {
    static R: OnceLock<Regex> = OnceLock::new();
    let asked = cached(
        &R,
        r"(?i)\b(?:what\s+(?:is|are)\s+(?:an?|the)|what\s+(?:causes|triggers|leads\s+to)(?:\s+(?:an?|the))?|why\s+(?:do|does|would)(?:\s+(?:an?|the))?)\s+(?:[\w-]+\s+){0,3}?[`'\x22*]*$",
    );
    !hits.is_empty()
        && hits.iter().all(|h| {
            line.get(..h.start).is_some_and(|b| asked.is_match(b))
                && !report_cue().is_match(sentence_around(line, h))
        })
}

/// The sentence of `line` that holds `hit`: from the full stop, question or exclamation mark
/// before it (and a space) to the one after it.
fn sentence_around<'a>(line: &'a str, hit: &Range<usize>) -> &'a str {
    let start = line
        .get(..hit.start)
        .and_then(|b| b.rfind(['.', '?', '!']).map(|i| i + 1))
        .unwrap_or(0);
    let end = line
        .get(hit.end..)
        .and_then(|a| a.find(['.', '?', '!']).map(|i| hit.end + i))
        .unwrap_or(line.len());
    line.get(start..end).unwrap_or(line)
}

/// Does `line` tell a scenario in the second person, a problem statement's or a tutorial's "You
/// train a model in bf16 … At step 8,000, the loss suddenly jumps to NaN. … You add gradient
/// clipping. … You lower the learning rate."? Two sentences or more open with "You" and a verb
/// in the present that is not a modal ("you can", "you should" are advice, which other checks
/// read): a reader's imagined run, not the writer's.
pub fn second_person_scenario(line: &str) -> bool {
    static R: OnceLock<Regex> = OnceLock::new();
    const SENTENCES: usize = 2;
    cached(&R, r"(?:^|[.!?]\s+)You\s+([a-z]+)\b")
        .captures_iter(line)
        .filter(|c| {
            !matches!(
                c.get(1).map_or("", |m| m.as_str()),
                "can"
                    | "could"
                    | "may"
                    | "might"
                    | "will"
                    | "would"
                    | "should"
                    | "must"
                    | "need"
                    | "are"
                    | "were"
                    | "have"
                    | "had"
                    | "got"
                    | "get"
                    | "see"
                    | "saw"
            )
        })
        .count()
        >= SENTENCES
}

/// A row of a troubleshooting table: the error alone in its cell and, in another cell, the advice
/// that an imperative opens ("| `CUDA out of memory` | Reduce batch_size or image_size |", "|
/// NCCL timeout | Check the network | …"). A report's table of runs holds values and outcomes
/// ("| 64 | OOM |"), not instructions.
fn advice_table_row(line: &str, hits: &[Range<usize>]) -> bool {
    const ADVICE: [&str; 36] = [
        "reduce",
        "lower",
        "increase",
        "decrease",
        "use",
        "set",
        "check",
        "restart",
        "reinstall",
        "install",
        "upgrade",
        "downgrade",
        "update",
        "try",
        "enable",
        "disable",
        "add",
        "remove",
        "verify",
        "ensure",
        "make",
        "run",
        "call",
        "switch",
        "limit",
        "free",
        "clear",
        "move",
        "export",
        "unset",
        "rebuild",
        "reboot",
        "retry",
        "delete",
        "pass",
        "avoid",
    ];
    let t = line.trim();
    if !t.starts_with('|') || !t.ends_with('|') || t.matches('|').count() < 3 {
        return false;
    }
    let Some(first) = hits.iter().map(|h| h.start).min() else {
        return false;
    };
    let mut start = 0;
    let cells: Vec<(Range<usize>, &str)> = line
        .split('|')
        .map(|cell| {
            let range = start..start + cell.len();
            start = range.end + 1;
            (range, cell)
        })
        .collect();
    let Some((hit_cell, text)) = cells.iter().find(|(r, _)| r.contains(&first)) else {
        return false;
    };
    // The error and little else: its name, perhaps behind an exception's class.
    if text.split_whitespace().count() > 10 {
        return false;
    }
    cells.iter().any(|(r, cell)| {
        r != hit_cell
            && cell
                .trim()
                .trim_start_matches(['*', '`', '-', ' '])
                .split(|c: char| !c.is_alphabetic())
                .next()
                .is_some_and(|w| ADVICE.contains(&w.to_ascii_lowercase().as_str()))
    })
}

/// Is every one of `hits` one of the alternatives that a list of possible causes offers, a
/// comma before it and "or" closing the list after it: Omniverse's "A GPU crash occurred. …
/// Reasons for the failure: a device lost, out of memory, or an unexpected bug." A program that
/// says what may have happened names no error it met, so this holds in a log record too.
fn among_possible_causes(line: &str, hits: &[Range<usize>]) -> bool {
    !hits.is_empty()
        && hits.iter().all(|h| {
            let before = line.get(..h.start).unwrap_or("").trim_end();
            let after = line.get(h.end..).unwrap_or("").trim_start();
            before.ends_with(',')
                && (after.starts_with(", or ")
                    || after.starts_with(",or ")
                    || after.starts_with("or "))
        })
}

/// Is every one of `hits` a bare name between two separators of an enumeration: "covers NCCL
/// hang, NCCL error, slow bandwidth", a Chinese article's "NCCL hang、NCCL error、性能退化"? A
/// printed error goes on after its name (a colon and the message, "in:" and the place), so a
/// name that a list separator both precedes and follows is one topic of several. A report cue
/// keeps the line a report.
fn listed_as_a_topic(line: &str, hits: &[Range<usize>]) -> bool {
    const SEPARATORS: [char; 5] = [',', '、', '，', ';', '；'];
    hits.iter().all(|h| {
        let before = line.get(..h.start).unwrap_or("").trim_end();
        let after = line.get(h.end..).unwrap_or("").trim_start();
        before.ends_with(SEPARATORS) && after.starts_with(SEPARATORS)
    }) && !has_report_cue(line)
}

/// A line of the CUDA reference's descriptions of its enum values, which all open "This
/// indicates that …" (driver_types.h and cuda.h doc comments, and the bindings that copy them:
/// "This indicates that an uncorrectable ECC error was detected during execution."), also inside
/// a comment.
fn reference_description(line: &str) -> bool {
    line.trim_start_matches(|c: char| c.is_whitespace() || "/*!#-".contains(c))
        .starts_with("This indicates")
}

/// A row of a documentation table that describes the error in a cell of its own: TotalView's
/// "CUDA_EXCEPTION_1: “Lane Illegal Address” | Precise (Requires memcheck on) | Per lane/thread
/// error | A thread has accessed an illegal (out of bounds) global address. |". The row ends
/// with its bar and has three cells or more, one of them a sentence of six words or more that
/// holds none of `hits`. A report's table of the errors it got has values and messages in its
/// cells, not descriptions of them.
fn reference_table_row(line: &str, hits: &[Range<usize>]) -> bool {
    let t = line.trim_end();
    if !t.ends_with('|') || t.matches('|').count() < 3 {
        return false;
    }
    let mut start = 0;
    t.split('|').any(|cell| {
        let range = start..start + cell.len();
        start = range.end + 1;
        let c = cell.trim();
        !hits
            .iter()
            .any(|h| h.start < range.end && range.start < h.end)
            && c.starts_with(|ch: char| ch.is_ascii_uppercase())
            && c.split_whitespace().count() >= 6
    })
}

/// Are all of `hits` a noun compound that speaks of the error's text, not of an occurrence:
/// "cuBLAS error message", "Improve NCCL error messages", "CUDA error handling"? A report cue
/// keeps it a report ("I got this CUDA error message"), and so does a colon that introduces the
/// message itself ("NCCL error message: unhandled system error").
fn names_its_messages(line: &str, hits: &[Range<usize>]) -> bool {
    static R: OnceLock<Regex> = OnceLock::new();
    let compound = cached(
        &R,
        r"^[`'\x22]?\s*(?:messages?|handling|handlers?)\b\s*(?:[^:\s]|$)",
    );
    hits.iter()
        .all(|h| compound.is_match(line.get(h.end..).unwrap_or("")))
        && !report_cue().is_match(line)
}

/// Are all of `hits` the subject of a sentence that says what they mean, alone or in a list
/// joined by "and", "or" or commas: a reference's "ncclUnhandledCudaError and ncclSystemError
/// indicate that a call to an external library failed" (NCCL's troubleshooting guide),
/// "CUDA_ERROR_OUT_OF_MEMORY and cudaErrorMemoryAllocation raise this class"?
fn subjects_explained(line: &str, hits: &[Range<usize>]) -> bool {
    static VERB: OnceLock<Regex> = OnceLock::new();
    static JOIN: OnceLock<Regex> = OnceLock::new();
    let verb = cached(
        &VERB,
        r"(?i)^[\w`'\x22*)\]]*\s+(?:(?:usually|typically|often|generally|normally|mostly|commonly|both|all)\s+)?(?:indicates?|means?|signals?|signif(?:y|ies)|denotes?|raise this|map to|maps to|(?:is|are) returned (?:when|if))\b",
    );
    let join = cached(
        &JOIN,
        r"(?i)^[\w`'\x22*)\]]*\s*(?:,|and|or|/|,\s*and|,\s*or)\s*[`'\x22*(\[]*$",
    );
    // Overlapping hits (`CUDA_ERROR_` and `CUDA_ERROR_OUT_OF_MEMORY`) are one name.
    let mut sorted: Vec<Range<usize>> = hits.to_vec();
    sorted.sort_by_key(|h| h.start);
    let mut hs: Vec<Range<usize>> = Vec::with_capacity(sorted.len());
    for h in sorted {
        match hs.last_mut() {
            Some(last) if h.start < last.end => last.end = last.end.max(h.end),
            _ => hs.push(h),
        }
    }
    hs.iter().enumerate().all(|(i, h)| {
        let rest = line.get(h.end..).unwrap_or("");
        hs.get(i + 1)
            .and_then(|n| line.get(h.end..n.start))
            .is_some_and(|between| join.is_match(between))
            || verb.is_match(rest)
    }) && !report_cue().is_match(line)
}

/// The line before a quoted error frames it as an example, not as output someone got: a sentence
/// that ends in a colon and says "for example", "e.g.", "such as", "like:" in the Romance
/// languages (Spanish and Portuguese "como:", French "comme :", Italian "come:"; English "like:"
/// ends reports' "the traceback looks like:" as often) or "instead of" (a pull request
/// showing a message before and after a change), or that the error "commonly appears as", in one
/// of the languages articles are written in (sites publish machine translations of one article in
/// a dozen: Indonesian "seperti", Polish "taki jak", Dutch "zoals", …),
/// in a generic or hypothetical voice ("you may see errors such as:", "errors can look different,
/// for example:", "instead of:") that no report cue claims. A report introduces its own errors
/// the same way ("Logs from the failed ranks contain errors such as:", "多个节点随机报错，例如：")
/// and stays a report. Plain "the
/// error is as follows:", "it looks like this:" or "similar errors:" are left alone: reporters
/// write them as often as authors do, in Chinese without a pronoun ("多次遇到类似报错，如：").
/// [`framed_as_example`] has checked the colon.
fn introduces_an_example(t: &str) -> bool {
    // An intro that calls what follows examples of a class of errors it has described presents
    // them as illustrations, whoever speaks ("Here are some examples of such errors that I'm
    // referring to:"), unless it says they came from a run someone had ("here are some examples
    // I got:"). A singular "an example of the error" or "Example errors from journalctl:" shows
    // the writer's own errors as often, and stays a report.
    static EXAMPLES: OnceLock<Regex> = OnceLock::new();
    let examples = cached(
        &EXAMPLES,
        r"(?i)\b(?:here\s+(?:are|is)\s+(?:some|a\s+few|two|three|several|more)\s+examples|examples\s+of\s+(?:such|these|those)\s+(?:\w+\s+)?(?:errors|messages|failures|exceptions))\b",
    );
    // The report cue is read in the intro's sentence that says "examples" only: the sentences
    // before it set the scene ("… error messages raised by the NCCL library.").
    if let Some(m) = examples.find(t) {
        let sentence = t[..m.start()]
            .rfind(['.', '!', '?'])
            .map_or(t, |i| &t[i + 1..]);
        if !report_cue().is_match(sentence) {
            return true;
        }
    }
    static R: OnceLock<Regex> = OnceLock::new();
    let r = cached(
        &R,
        r"(?i)\b(?:for example|for instance|e\.\s?g\.|such as|instead of|similar to (?:this|these|the following)|(?:looks?|looking) like one of|one of (?:these|the following)|commonly\s+(?:appears?|shows? up|is (?:displayed|shown|printed)|manifests?)\s+(?:as|like)|par exemple|tel(?:le)?s? que|por ejemplo|por exemplo|tal(?:es)? como|zum beispiel|z\.\s?b\.|wie etwa|ad esempio|per esempio|bijvoorbeeld|zoals|na przykład|np\.|tak(?:i|ie|a|ich) jak|například|jako např\.|misalnya|contohnya|seperti|örneğin|gibi|ví dụ|chẳng hạn như|till exempel|t\.\s?ex\.|såsom|например|к примеру|так(?:ие|ой|ая|их) как|наприклад|так(?:і|ий|а) як)(?:\W|$)|例如|比如|譬如|例えば|たとえば|예를 들어|예를 들면",
    );
    // The Romance languages' "like:" closing the intro: reporters end their own sentences so too
    // ("normalmente me sale un error como:", "geralmente recebo um erro como:"), with the first
    // person in the verb, so it needs the reader addressed or an impersonal "it is likely that".
    static LIKE: OnceLock<Regex> = OnceLock::new();
    static READER: OnceLock<Regex> = OnceLock::new();
    let like = cached(&LIKE, r"(?i)\b(?:como|comme|come)\s?[:\x{ff1a}]\s*$");
    let reader = cached(
        &READER,
        r"(?i)\b(?:usted|ustedes|tú|você|vocês|vous|es probable que|é provável que|il est probable que|è probabile che)\b",
    );
    if like.is_match(t) {
        return reader.is_match(t)
            && !report_cue().is_match(t)
            && !first_person_elsewhere(t)
            && !cjk_report_cue(t);
    }
    static GENERIC: OnceLock<Regex> = OnceLock::new();
    let generic = cached(
        &GENERIC,
        r"(?i)\b(?:instead of|you|your|may|might|can|could|would|will (?:show|print|display|log|report|output|emit)|typically|usually|often|common|commonly|various|different|vous|votre|peut|pourrait|probablement|généralement|usted|puede|podría|probable|probablemente|normalmente|você|pode|provável|provavelmente|geralmente|sie|kann|könnte|wahrscheinlich|potresti|può|probabilmente|jij|kunt|kunnen|waarschijnlijk|prawdopodobnie|może|możesz|zwykle|pravděpodobně|můžete|obvykle|anda|kamu|mungkin|kemungkinan|biasanya|muhtemelen|genellikle|bạn|có thể|förmodligen)\b|\bвы\b|\bвас\b|\bваш|\bмож|обычно|\bви\b|можливо|зазвичай|你|您|可能|通常|常见|各种|よく|場合|수 있|보통",
    );
    r.is_match(t)
        && generic.is_match(t)
        && (!report_cue().is_match(t) || tells_the_reader(t))
        && !cjk_report_cue(t)
        && !first_person_elsewhere(t)
}

/// A sentence addressed to the reader, with no first person in it: "NCCL prints errors to your
/// training log that look like one of these exact strings:" describes what a program does in
/// general, so its verbs of printing and showing are no report.
fn tells_the_reader(t: &str) -> bool {
    static YOU: OnceLock<Regex> = OnceLock::new();
    cached(&YOU, r"(?i)\byou(?:r|rs)?\b").is_match(t) && !english_first_person().is_match(t)
}

/// An English first-person pronoun: the writer speaks of their own run.
fn english_first_person() -> &'static Regex {
    static ME: OnceLock<Regex> = OnceLock::new();
    cached(
        &ME,
        r"(?i)\b(?:i|i'm|i've|me|my|mine|we|we're|we've|us|our|ours)\b",
    )
}

/// A first-person word in one of the languages [`introduces_an_example`] reads ("Ik krijg …
/// zoals:", "Saya mendapatkan error seperti ini …:"): the writer's own errors, a report. English
/// is [`report_cue`]'s.
fn first_person_elsewhere(t: &str) -> bool {
    static R: OnceLock<Regex> = OnceLock::new();
    cached(
        &R,
        r"(?i)\b(?:ik|mijn|wij|ons|ich|mein\w*|wir|unser\w*|je|j'|mon|nous|notre|nos|yo|mis?|nosotros|nuestr\w*|eu|meu|minha|nós|noss\w*|io|mio|mia|noi|nostr\w*|ja|mój|moj\w*|my|já|můj|saya|aku|kami|ben|benim|biz|tôi|jag|mitt|vi|vår\w*)\b|\b(?:я|мой|моя|мои|мы|наш\w*|мій|ми)\b",
    )
    .is_match(t)
}

/// Is a line that reads as an error a quotation the text around it frames as one? `intro` is the
/// closest earlier line with text, `after` the closest later one (blank lines and code fences
/// skipped). Either the intro presents it as an example ([`introduces_an_example`]), or it sits
/// inside a sentence: the intro ends in a colon and the sentence goes on after it with a comma
/// ("… suddenly reports:" / the error / ", and then every CUDA call fails"). A program's output
/// never continues on the next line with a comma.
pub fn framed_as_example(intro: Option<&str>, after: Option<&str>) -> bool {
    // Both shapes need an intro that ends in a colon.
    let Some(t) = intro
        .map(str::trim_end)
        .filter(|t| t.ends_with(':') || t.ends_with('\u{ff1a}'))
    else {
        return false;
    };
    introduces_an_example(t)
        || after.is_some_and(|a| {
            a.trim_start().starts_with([',', '\u{ff0c}', '\u{3001}'])
                && !report_cue().is_match(a)
                && !cjk_report_cue(a)
        })
}

/// An error named, unquoted, as the subject of a sentence that tells the reader when it happens:
/// "The RuntimeError: CUDA out of memory occurs when your GPU doesn't have enough memory …",
/// "This error happens if you pass labels …". Addressed to "you", with the error as the subject
/// the sentence opens with, it is an explanation; a title says when it happens to the reporter's
/// own run ("CUDA out of memory occurs when fine-tuning with LoRA", "… happens when you call
/// generate()"), and a first-person report cue elsewhere keeps the line a report.
fn explained_to_the_reader(line: &str, hits: &[Range<usize>]) -> bool {
    // Said of the error: when it happens, to "you".
    const WHEN_YOU: &str = r"(?:occurs|happens|appears|arises|is raised|is thrown)\s+(?:\w+\s+)?(?:when|if|because)\s+(?:you|your)\b";
    static R: OnceLock<Regex> = OnceLock::new();
    static SUBJECT: OnceLock<Regex> = OnceLock::new();
    static NEXT: OnceLock<Regex> = OnceLock::new();
    let r = R.get_or_init(|| Regex::new(&format!(r"(?i)\b{WHEN_YOU}")).expect("static regex"));
    let next = NEXT.get_or_init(|| {
        Regex::new(&format!(
            r"(?i)[.!?]\s+this(?:\s+(?:error|exception|issue|problem))?\s+(?:(?:usually|typically|often|generally|mostly)\s+)?{WHEN_YOU}"
        ))
        .expect("static regex")
    });
    let first = hits.iter().map(|h| h.end).min().unwrap_or(0);
    let start = hits.iter().map(|h| h.start).min().unwrap_or(0);
    // Either the error is named inside a sentence (two plain words before it: a pasted error
    // opens its line) and the next sentence takes it up as its subject and says the same: "Ah,
    // the dreaded CUDA out of memory error! This happens when your GPU runs out of memory …";
    // or the error is the sentence's subject: "The …", "This error …" (a report's title or repro
    // line starts with the error or with its own words: "… happens when you call generate()").
    let named_inside = line.get(..start).map_or(0, words) >= 2;
    let said = named_inside
        .then(|| next.find_at(line, first))
        .flatten()
        .or_else(|| {
            cached(&SUBJECT, r"^\s*(?i:the|this|that|a|an)\s")
                .is_match(line)
                .then(|| r.find_at(line, first))
                .flatten()
        });
    let Some(m) = said else {
        return false;
    };
    let rest = format!("{} {}", &line[..m.start()], &line[m.end()..]);
    !report_cue().is_match(&rest)
}

/// An error that the sentence naming it calls a common or typical one, the way articles introduce
/// the error they go on to explain: "When working with PyTorch, a common error encountered is the
/// OutOfMemoryError: …" (also in a code span: "… is `torch.OutOfMemoryError: …`"),
/// "开发者遇到了一个典型的深度学习训练错误：RuntimeError: …。这个错误通常 …", and the same in
/// Japanese (よくあるエラー … 。このエラーは通常 …) and Korean (가장 많이 겪는 문제는 … 오류입니다. 이는
/// … 때 발생해요): in these languages the next sentence must take the error up and explain it
/// (a reporter's "このエラーは…消えません", the error does not go away, tells of their run).
/// A report speaks of its own run (in the first person, or asking for help), and a title that
/// says its run "fails with a common error: …" names no error as the thing the sentence is about.
fn named_as_a_common_error(line: &str, hits: &[Range<usize>]) -> bool {
    static EN: OnceLock<Regex> = OnceLock::new();
    static CJK: OnceLock<Regex> = OnceLock::new();
    let first = hits.iter().map(|h| h.start).min().unwrap_or(0);
    let before = line.get(..first).unwrap_or("");
    // The sentence that names the error: from the last sentence end before it.
    // A full stop ends a sentence before a space (or in CJK), not inside `torch.OutOfMemoryError`.
    let sentence = before
        .char_indices()
        .rev()
        .find(|&(i, c)| {
            matches!(c, '\u{3002}' | '\u{ff01}' | '\u{ff1f}') || full_stop_at(before, i, c)
        })
        .and_then(|(i, c)| before.get(i + c.len_utf8()..))
        .unwrap_or(before);
    // English: the sentence says what the common error is, right up to it ("a common error
    // encountered is the …"). CJK: the typical error is named, and the next sentence explains it
    // ("。这个错误通常 …").
    static NEXT: OnceLock<Regex> = OnceLock::new();
    let last = hits.iter().map(|h| h.end).max().unwrap_or(first);
    let after = line.get(last..).unwrap_or("");
    let common = cached(
        &EN,
        r#"(?i)\b(?:a|an|one of the(?: most)?)\s+(?:very\s+)?(?:common|typical|frequent|frequently encountered)\s+(?:[\w-]+\s+){0,3}?(?:error|exception|problem|issue)s?\s+(?:[\w-]+\s+){0,2}?(?:is|are)\s+(?:the\s+|an?\s+)?[`'"\x{201c}\x{2018}]?(?:[\w.]+(?:Error|Exception):\s*|(?:\w+\.)+)?$"#,
    )
    .is_match(sentence)
        || (cached(
            &CJK,
            r"(?:常见|常見|典型|よくある|よく(?:見る|遭遇する|発生する|出る)|가장\s*(?:많이|흔(?:히|한)|자주)|흔한|흔히\s*(?:발생하는|겪는|보는)|자주\s*(?:발생하는|겪는|보는))(?:的|な)?[^，。,.！？!?]{0,12}?(?:错误|錯誤|报错|報錯|问题|問題|异常|異常|エラー|오류|에러|문제)",
        )
        .is_match(sentence)
            && explains_in_other_words(after)
            && cached(
                &NEXT,
                r"[。．.!！]\s*(?:(?:这个|這個|该|該|此|这类|這類|这种|這種)(?:错误|錯誤|报错|報錯|问题|問題|异常|異常)|この(?:エラー|問題)|これは|이는|이것은|이\s*(?:오류|에러|문제))",
            )
            .is_match(after));
    // Only a person or a plea counts against it: an article's next sentence says when the error
    // "occurs", which [`report_cue`] reads as a report.
    static PERSON: OnceLock<Regex> = OnceLock::new();
    let person = cached(
        &PERSON,
        r"(?i)\b(?:i|i'm|i've|we|we're|we've|my|our|me|us)\b|\bany\s+(?:ideas?|help|suggestions?)\b|\bplease\s+help\b",
    );
    if common && !person.is_match(line) && !cjk_report_cue(line) {
        return true;
    }
    // The sentence that names the error ends at the first full stop after it.
    let end = after
        .char_indices()
        .find(|&(i, c)| full_stop_at(after, i, c))
        .map_or(after.len(), |(i, _)| i);
    // An article's topic, named with the adjectives that writers put on a well-known error: "The
    // frustrating \"CUDA out of memory\" error has become a rite of passage …", "the dreaded
    // NCCL timeout", as the subject that opens the sentence. A report that calls its own error
    // that puts it after its own words ("Getting the dreaded …", "I hit the infamous …") or shows
    // a report cue or a person in that sentence; an article's next sentence may say when the
    // error "occurs", a report cue elsewhere.
    static EVALUATED: OnceLock<Regex> = OnceLock::new();
    if cached(
        &EVALUATED,
        r#"(?i)^[\s*#>_-]*(?:the|this|that|an?)\s+(?:(?:infamous|dreaded|notorious|frustrating|annoying|classic|familiar|feared|inevitable|ubiquitous|all-too-common|ever-present)\s+)+[`'"\x{201c}\x{2018}]?$"#,
    )
    .is_match(sentence)
        && !person.is_match(line)
        && !has_report_cue(&format!("{sentence} {}", &after[..end]))
        && !cjk_report_cue(line)
    {
        return true;
    }
    // The error first and what kind of error it is after it: "torch.cuda.OutOfMemoryError: CUDA
    // out of memory is one of those errors that lies to you", "… is a common error when …". A
    // report says what its run did, not what kind of error it met, so only a person or a plea in
    // that sentence counts against it (an article quotes its readers elsewhere: "your first
    // instinct — \"I just need a bigger GPU\" — is often wrong").
    static KIND: OnceLock<Regex> = OnceLock::new();
    let kind = cached(
        &KIND,
        r"(?i)^[`'\x22\x{201d}\x{2019}*]{0,3}\s+(?:errors?\s+|exceptions?\s+)?(?:is|are)\s+(?:one\s+of\s+(?:the|those|these)\s+(?:most\s+)?(?:[\w-]+\s+){0,2}?|(?:a|an)\s+(?:very\s+|really\s+)?(?:common|typical|frequent|notorious|classic|well-known|familiar|dreaded|frustrating|confusing|misleading)\s+(?:[\w-]+\s+){0,2}?)(?:errors?|exceptions?|issues?|problems?|failures?|messages?)\b",
    );
    kind.is_match(after)
        && !person.is_match(sentence)
        && !person.is_match(&after[..end])
        && !cjk_report_cue(line)
}

/// Does the `.`, `!` or `?` at byte `i` of `text` end a sentence: a space follows it (a full stop
/// inside `torch.OutOfMemoryError` ends none)?
fn full_stop_at(text: &str, i: usize, c: char) -> bool {
    matches!(c, '.' | '!' | '?') && text[i + 1..].starts_with(char::is_whitespace)
}

/// Han, kana and hangul characters in `text`.
fn cjk_chars(text: &str) -> usize {
    text.chars()
        .filter(|c| {
            matches!(*c as u32,
                0x3040..=0x30FF      // hiragana, katakana
                | 0x3400..=0x4DBF    // CJK extension A
                | 0x4E00..=0x9FFF    // CJK unified ideographs
                | 0xAC00..=0xD7AF) // hangul syllables
        })
        .count()
}

/// Someone met the error, in Chinese, Japanese or Korean: a first-person pronoun (我, 俺, 私,
/// 僕, 저는/제가/나는) or a question or plea for help (？, 求助, 请问, 怎么, 如何解决).
fn cjk_report_cue(text: &str) -> bool {
    let (person, plea) = cjk_cues(text);
    person || plea
}

/// [`cjk_report_cue`]'s two halves: a first-person pronoun, and a question or plea.
fn cjk_cues(text: &str) -> (bool, bool) {
    const PERSON: [&str; 7] = ["我", "俺", "私", "僕", "저는", "제가", "나는"];
    const PLEA: [&str; 9] = [
        "？",
        "?",
        "求助",
        "请问",
        "請問",
        "怎么",
        "怎麼",
        "如何解决",
        "如何解決",
    ];
    (
        PERSON.iter().any(|c| text.contains(c)),
        PLEA.iter().any(|c| text.contains(c)),
    )
}

/// Words that explain an error, in the languages whose quotation marks only [`quoted_spans`]'s
/// corner brackets and guillemets are: cause, meaning, "usually", "indicates".
fn explains_in_other_words(text: &str) -> bool {
    static R: OnceLock<Regex> = OnceLock::new();
    cached(
        &R,
        r"(?i)原因|通常|意味|とは|表示|说明|說明|由于|由於|多い|常见|常見|場合に|원인|의미|보통|일반적으로|때 발생|경우에|означает|обычно|причин|указывает|связан|signifie|indique|généralement|significa|indica|normalmente",
    )
    .is_match(text)
        || explanation().is_match(text)
        || article_voice().is_match(text)
}

/// The quotations among `spans` (of `line`) that are code spans or double quotes (straight or
/// curly).
fn strong_spans(line: &str, spans: &[Range<usize>]) -> Vec<Range<usize>> {
    spans
        .iter()
        .filter(|s| {
            let open = line.get(..s.start).and_then(|b| b.chars().next_back());
            matches!(open, Some('`' | '"' | '\u{201c}'))
        })
        .cloned()
        .collect()
}

/// Is every hit inside one of `spans` (of quotation length)?
fn named_by(spans: &[Range<usize>], hits: &[Range<usize>]) -> bool {
    hits.iter().all(|h| {
        spans
            .iter()
            .any(|s| s.start <= h.start && h.end <= s.end && s.len() <= QUOTE_BYTES)
    })
}

/// A paragraph of prose that names the error without quoting it and explains it ("developers
/// often encounter the CUDA runtime error (59) : device-side assert triggered. This error is
/// typically caused by …"): at least [`PARAGRAPH_WORDS`] plain words, [`PARAGRAPH_WORDS_BEFORE`] of them
/// before the first mention, an explaining word and no report cue. Log lines and titles never have
/// that many plain words. (A class of errors to handle, [`names_a_class`], is judged before this,
/// in a sentence of any length.)
fn explained_in_a_paragraph(line: &str, hits: &[Range<usize>]) -> bool {
    let first = hits.iter().map(|h| h.start).min().unwrap_or(0);
    words(line) >= PARAGRAPH_WORDS
        && line.get(..first).map_or(0, words) >= PARAGRAPH_WORDS_BEFORE
        && explanation().is_match(line)
        && !report_cue().is_match(line)
}

/// Is an error named as a class of errors that something should handle ("the trainer should
/// catch CUDA OOM errors and …", "retrying NCCL failures"): the plural after a verb of handling,
/// in a sentence of any length (a paragraph's other signs are not needed for it); also what a
/// check looks for, singular too ("Instead of only checking for NCCL error based on the timeout,
/// …").
/// A report says its run "runs into CUDA out of memory errors", which names the class too, so
/// the plural alone is not enough.
fn names_a_class(line: &str) -> bool {
    /// The names a class of errors goes by.
    const CLASS: &str =
        r"(?:OOM|out[- ]of[- ]memory|CUDA|NCCL|cuDNN|cuBLAS|NaN|device[- ]side assert(?:ion)?)";
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| {
        Regex::new(&format!(
            r"(?i)\b(?:(?:catch|catching|handle|handling|detect|detecting|surface|surfacing|retry|retrying|recover from|recovering from)\s+(?:\w+\s+){{0,2}}?{CLASS}\s+(?:\w+\s+)?(?:errors|exceptions|failures)|check(?:s|ed|ing)?\s+for\s+(?:an?\s+|the\s+)?{CLASS}\s+(?:\w+\s+)?(?:errors?|exceptions?|failures?))\b"
        ))
        .expect("static regex")
    })
    .is_match(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hits(line: &str, lit: &str) -> Vec<Range<usize>> {
        line.match_indices(lit)
            .map(|(i, m)| i..i + m.len())
            .collect()
    }

    fn mention(line: &str, lit: &str) -> bool {
        names_error_in_passing(line, &hits(line, lit))
    }

    #[test]
    fn round_eight_shapes_of_mentions() {
        // A code span left open at the end of a line is not a quotation by itself (the scanner
        // judges a wrapped sentence with its next line).
        assert!(!mention(
            "Training on 8 GPUs after the upgrade to 2.3 ends in `RuntimeError: CUDA error: an illegal memory access was encountered",
            "illegal memory access"
        ));
        // Corner brackets and guillemets quote as double quotes do.
        assert!(mention(
            "分散学習で発生する「RuntimeError: NCCL error in: ... unhandled system error」は、ライブラリの競合が原因であることが多いです。",
            "unhandled system error"
        ));
        assert!(mention(
            "Эта статья объясняет, почему при обучении возникает ошибка «CUDA error: out of memory» и что она обычно означает",
            "out of memory"
        ));
        // … but only with a word that explains: reports quote with them too.
        assert!(!mention(
            "学習中に「RuntimeError: CUDA error: an illegal memory access was encountered」というエラーが出て止まってしまいました。",
            "illegal memory access"
        ));
        assert!(!mention(
            "После обновления драйвера обучение падает с ошибкой «RuntimeError: CUDA error: an illegal memory access was encountered» на второй эпохе",
            "illegal memory access"
        ));
        // Any adverb before the explaining verb; a bare type name names no error.
        assert!(mention(
            "Nobody knows what `ncclUnhandledCudaError` exactly means, and printing cudaError values in XLA tells little.",
            "ncclUnhandledCudaError"
        ));
        // An article speaking of itself, even where it says how to solve the error.
        assert!(mention(
            "本文将介绍在训练时遇到\"CUDA error: device-side assert triggered\"时应该如何解决这个问题。",
            "device-side assert triggered"
        ));
        assert!(mention(
            "In this article we look at `CUDA error: device-side assert triggered` and its causes",
            "device-side assert triggered"
        ));
        // 本文 inside other words (文本文件, 日本文学) is no article, and a first person stays a
        // report in an article's words too.
        assert!(!mention(
            "读取文本文件后训练报错\"CUDA error: device-side assert triggered\"，我该怎么办？",
            "device-side assert triggered"
        ));
        assert!(!mention(
            "日本文学のデータセットで学習すると「CUDA out of memory」が出ます。私の環境は以下です。",
            "CUDA out of memory"
        ));
        // An adverb of a report ("only", "suddenly") is no explanation.
        assert!(!mention(
            "`RuntimeError: CUDA out of memory` only happens on rank 0 after resuming from a checkpoint",
            "CUDA out of memory"
        ));
        // Told to the reader, unquoted; a title about one's own run stays a report.
        assert!(mention(
            "The RuntimeError: CUDA out of memory occurs when your GPU cannot hold the batch.",
            "CUDA out of memory"
        ));
        assert!(!mention(
            "CUDA out of memory occurs when fine-tuning with LoRA on 2 GPUs",
            "CUDA out of memory"
        ));
        assert!(!mention(
            "RuntimeError: CUDA error: an illegal memory access was encountered happens when you call model.generate() with batch size 2",
            "illegal memory access"
        ));
        // The next sentence explains it to the reader; a pasted error line opens with the error.
        assert!(mention(
            "Ah, the dreaded CUDA out of memory error--every deep learning enthusiast's nightmare! This happens when your GPU runs out of memory while training your PyTorch model.",
            "CUDA out of memory"
        ));
        assert!(!mention(
            "RuntimeError: CUDA out of memory. This happens when you set the batch size to 64 on one GPU.",
            "CUDA out of memory"
        ));
        assert!(!mention(
            "Training dies with the CUDA out of memory error. This happens when I set the batch size to 64.",
            "CUDA out of memory"
        ));
        // Commit summaries and change bullets that address the error or add help for it.
        assert!(mention(
            "Summary: Address `CUDA error: misaligned address` in the fused kernel",
            "misaligned address"
        ));
        assert!(mention(
            "- Add FAQ entry for CUDA error: no kernel image is available for execution on the device",
            "no kernel image is available"
        ));
        assert!(mention(
            "- Add retries for NCCL error: unhandled system error",
            "unhandled system error"
        ));
        assert!(!mention(
            "Summary: CUDA error: an illegal memory access was encountered at step 300",
            "illegal memory access"
        ));
        // A paragraph that says the change fixes an error once met.
        assert!(mention(
            "Earlier runs of the solver hit the too many resources error (CUDA error in compute_flux: too many resources requested for launch) on older cards when too many threads were launched per block, and this patch fixes it by capping the block size at 256 threads.",
            "too many resources requested for launch"
        ));
        // A report's paragraph that guesses a cause stays a report.
        assert!(!mention(
            "Since yesterday the training job on our cluster of eight H100 nodes crashes at step 300 with RuntimeError: CUDA error: an illegal memory access was encountered, and it is probably due to the new attention kernel that the last release enabled by default.",
            "illegal memory access"
        ));
        // "Address 0x…" is a log line.
        assert!(!mention(
            "Address 0x7f3a00001000: CUDA error: an illegal memory access was encountered",
            "illegal memory access"
        ));
    }

    #[test]
    fn round_ten_shapes_of_mentions() {
        // A program's own message explains itself at paragraph length; its log prefix says it
        // was printed (ProcessGroupNCCL's watchdog message).
        assert!(!mention(
            "[rank2]:[E1203 09:14:55.120000 ProcessGroupNCCL.cpp:1870] [PG ID 0 PG GUID 0 Rank 2] ProcessGroupNCCL's watchdog got stuck for 600 seconds without making progress in monitoring enqueued collectives. This typically indicates a NCCL/CUDA API hang blocking the watchdog, and could be triggered by another thread holding the GIL inside a CUDA api, or other deadlock-prone behaviors.",
            "watchdog got stuck for"
        ));
        // A changelog entry whose first word after the verb is a number is still a fix; an
        // address is still a log line.
        assert!(mention(
            "- Fix 8bit optimizer state loading on multi-GPU runs, where an illegal memory access was encountered. (#512)",
            "an illegal memory access"
        ));
        assert!(!mention(
            "Address 0x7f3a00001000: CUDA error: an illegal memory access was encountered",
            "an illegal memory access"
        ));
        assert!(mention(
            "Adding comments to explain why CUDA out of memory is retried",
            "CUDA out of memory"
        ));
        // A paragraph about a class of errors, in the plural.
        assert!(mention(
            "New users who train large models on small cards often do not understand why their jobs run out of memory in the middle of an epoch. The trainer should catch CUDA OOM errors and print a message that lists the settings they can lower, such as the batch size.",
            "out of memory"
        ));
        // … while a report of the same length stays one.
        assert!(!mention(
            "After upgrading to the new driver on our cluster the job runs out of memory in the middle of the first epoch every time, even with a batch size of one, and I keep getting CUDA OOM errors on every rank even though nothing else runs there.",
            "out of memory"
        ));
    }

    #[test]
    fn examples_an_article_or_a_pull_request_shows_are_framed() {
        let ex = |intro: &str, after: Option<&str>| framed_as_example(Some(intro), after);
        assert!(ex("Runs can print other errors too, for example:", None));
        assert!(ex("You may see a different wording, e.g.:", None));
        assert!(ex(
            "With this change the allocator raises a clearer error instead of:",
            None
        ));
        assert!(ex("Вы можете увидеть разные ошибки, например:", None));
        // A program described to the reader: its verb of printing reports nothing.
        assert!(ex(
            "NCCL prints errors to your training log that look like one of these exact strings:",
            None
        ));
        assert!(!ex(
            "My job prints errors to the log that look like one of these:",
            None
        ));
        assert!(ex("训练时可能会出现各种错误，例如：", None));
        // A sentence that goes on after the quoted error.
        assert!(ex(
            "训练到一半突然报错:",
            Some("，然后后面的调用都失败了。")
        ));
        assert!(ex(
            "Halfway through, the run prints:",
            Some(", and every later call fails too.")
        ));
        // Machine translations of one article (Indonesian, Polish, Dutch), and an article's
        // "the error commonly appears as:".
        assert!(ex(
            "Jika Anda bekerja dengan model pembelajaran mendalam di PyTorch, kemungkinan besar Anda menemukan pesan kesalahan yang membingungkan seperti:",
            None
        ));
        assert!(ex(
            "Jeśli pracujesz z modelami głębokiego uczenia się w PyTorch, prawdopodobnie natknąłeś się na zagadkowy komunikat o błędzie, taki jak:",
            None
        ));
        assert!(ex("U kunt foutmeldingen zien zoals:", None));
        // The Romance "like:" frames an example only for a reader addressed or "it is likely
        // that"; a reporter's verb carries the first person.
        for (intro, example) in [
            (
                "Si usa PyTorch en una GPU pequeña, es probable que vea un mensaje de error como:",
                true,
            ),
            (
                "Se você treina modelos grandes, provavelmente verá uma mensagem como:",
                true,
            ),
            ("Me sale este error como:", false),
            ("Eu recebo uma mensagem de erro como:", false),
            (
                "Al entrenar el modelo, normalmente me sale un error como:",
                false,
            ),
            (
                "Quando treino o modelo, geralmente recebo um erro como:",
                false,
            ),
            (
                "Ogni volta che lancio il training, può capitare che esca un errore come:",
                false,
            ),
        ] {
            assert_eq!(ex(intro, None), example, "{intro}");
        }
        assert!(ex(
            "In machine learning frameworks, the error commonly appears as:",
            None
        ));
        // Reports stay reports.
        assert!(!ex("I get errors such as:", None));
        assert!(!ex("The error appears as:", None));
        assert!(!ex("Mój trening kończy się błędem taki jak:", None));
        assert!(!ex(
            "After about 2 hours on 64 GPUs the job dies and the traceback usually looks like:",
            None
        ));
        assert!(!ex(
            "Ik krijg soms foutmeldingen zoals deze, waarschijnlijk door het geheugen:",
            None
        ));
        assert!(!ex(
            "Saya mendapatkan error seperti ini saat training, mungkin karena memori:",
            None
        ));
        assert!(!ex("训练到第3个epoch时报错：", Some("，请问怎么解决？")));
        // A report introduces its own errors the same way.
        assert!(!ex(
            "Logs from the failed ranks contain errors such as:",
            None
        ));
        assert!(!ex("多个节点随机报错，例如：", None));
        assert!(!ex("Our job fails with errors such as:", None));
        assert!(!ex("The error is as follows:", None));
        assert!(!ex("It looks like this:", None));
        assert!(!ex("Full log:", Some("Traceback (most recent call last):")));
        assert!(!ex("for example we train with batch size 8", None));
        assert!(!framed_as_example(None, Some(", and then")));
    }

    #[test]
    fn explanations_name_errors() {
        // Maintainers' answers in public threads (flash-linear-attention, jax).
        assert!(mention(
            "CUDA errors are asynchronous and sticky — once any earlier kernel faults with `misaligned address`, every subsequent CUDA call in that context returns the same error.",
            "misaligned address"
        ));
        assert!(mention(
            "There are a number of known `CUDA_ERROR_ILLEGAL_ADDRESS` bugs for CUDA < 11.1 that are out of our control (they are bugs in `ptxas`).",
            "CUDA_ERROR_ILLEGAL_ADDRESS"
        ));
        // Quoting a whole message, in a code span or double quotes, to explain it.
        assert!(mention(
            "Please note that this error `Check failed: error == cudaSuccess (2 vs. 0) out of memory` indicates OOM on the GPU, not your system RAM.",
            "out of memory"
        ));
        assert!(mention(
            "I briefly searched for some information about it. It seems that it is a simple \"out of memory\" error, but the traceback did not say so.",
            "out of memory"
        ));
        assert!(mention(
            "After a kernel faults with \u{201c}an illegal memory access was encountered\u{201d} the context is gone and cannot be used again.",
            "an illegal memory access was encountered"
        ));
        assert!(mention(
            "As the programming guide notes, ``cudaErrorIllegalAddress`` leaves the context unusable, so the process has to restart.",
            "cudaErrorIllegalAddress"
        ));
    }

    #[test]
    fn common_errors_named_by_articles_are_mentions() {
        assert!(mention(
            "When working with deep learning frameworks like PyTorch or TensorFlow, a common error encountered is the OutOfMemoryError: CUDA out of memory. This occurs when the GPU's memory is insufficient.",
            "CUDA out of memory"
        ));
        assert!(mention(
            "在项目的训练过程中,开发者遇到了一个典型的深度学习训练错误：RuntimeError: CUDA error: device-side assert triggered。这个错误通常与张量操作有关。",
            "device-side assert triggered"
        ));
        // In a code span with its module path; in Korean and Japanese.
        assert!(mention(
            "On shared notebooks a very common error users face is `torch.OutOfMemoryError: CUDA out of memory`. It happens when the batch does not fit.",
            "CUDA out of memory"
        ));
        assert!(mention(
            "대형 모델을 학습할 때 가장 흔한 오류는 RuntimeError: CUDA error: device-side assert triggered 에러입니다. 이 에러는 보통 라벨 범위 문제로 발생합니다.",
            "device-side assert triggered"
        ));
        assert!(mention(
            "分散学習でよくあるエラーが RuntimeError: CUDA out of memory です。このエラーは通常、バッチサイズが大きすぎる場合に発生します。",
            "CUDA out of memory"
        ));
        // A reporter's "common error" whose next sentence tells of their own run.
        assert!(!mention(
            "よくあるエラーかもしれませんが、RuntimeError: CUDA out of memory が出ました。このエラーはバッチサイズを小さくしても消えません。",
            "CUDA out of memory"
        ));
        assert!(!mention(
            "가장 흔한 오류인 것 같은데 RuntimeError: CUDA out of memory 가 발생했습니다. 이 오류가 계속 나옵니다.",
            "CUDA out of memory"
        ));
        // Titles and log lines of the writer's own run.
        assert!(!mention(
            "제가 학습할 때 가장 많이 겪는 문제는 RuntimeError: CUDA out of memory 오류입니다. 이는 매번 3 epoch에서 발생합니다.",
            "CUDA out of memory"
        ));
        assert!(!mention(
            "Training fails with a common error: RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB",
            "CUDA out of memory"
        ));
        assert!(!mention(
            "Getting a common error when fine-tuning llama: RuntimeError: CUDA error: device-side assert triggered",
            "device-side assert triggered"
        ));
        assert!(!mention(
            "训练第3个epoch出现典型错误：RuntimeError: CUDA error: device-side assert triggered",
            "device-side assert triggered"
        ));
        // A sentence end of several bytes before the error.
        assert!(!mention(
            "想问一下这个问题大概可能是什么版本出错了呀？RuntimeError: cuDNN error: CUDNN_STATUS_EXECUTION_FAILED",
            "CUDNN_STATUS_EXECUTION_FAILED"
        ));
        // The reporter's own run: a report cue, or the error before the words.
        assert!(!mention(
            "I keep hitting a common error on my cluster: RuntimeError: CUDA out of memory",
            "CUDA out of memory"
        ));
        assert!(!mention(
            "我在训练时遇到了一个常见的错误：RuntimeError: CUDA out of memory",
            "CUDA out of memory"
        ));
        assert!(!mention(
            "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB. One of the most common issues with this model.",
            "CUDA out of memory"
        ));
    }

    #[test]
    fn announced_fixes_are_not_reports() {
        // Changelog entries, commit subjects and pull-request titles.
        for (line, lit) in [
            (
                "- Fixed a crash with `CUDA error: misaligned address` in the fused attention kernel.",
                "misaligned address",
            ),
            (
                "fix(attention): avoid CUDA error: an illegal memory access was encountered for long prompts",
                "an illegal memory access",
            ),
            (
                "* Fixes \"RuntimeError: CUDA error: device-side assert triggered\" when labels contain -1 (#4521)",
                "device-side assert triggered",
            ),
            (
                "Resolved NCCL timeout (Watchdog caught collective operation timeout) on multi-node jobs",
                "Watchdog caught collective operation timeout",
            ),
            (
                "[BugFix] Prevent CUDA out of memory during profiling run",
                "CUDA out of memory",
            ),
            (
                "[Kernel][Bugfix] CUDA error: an illegal memory access was encountered with fp8 KV cache",
                "an illegal memory access",
            ),
        ] {
            assert!(mention(line, lit), "{line}");
        }
        // Reports that contain a fixing verb.
        for (line, lit) in [
            (
                "Fix needed: RuntimeError: CUDA error: an illegal memory access was encountered",
                "an illegal memory access",
            ),
            (
                "How to fix RuntimeError: CUDA error: device-side assert triggered?",
                "device-side assert triggered",
            ),
            (
                "[Bug]: CUDA out of memory when loading Llama-3-70B with tensor_parallel_size=4",
                "CUDA out of memory",
            ),
            (
                "RuntimeError: CUDA error: device-side assert triggered (fixed by upgrading?)",
                "device-side assert triggered",
            ),
            (
                "feat: CUDA error: an illegal memory access was encountered after enabling fusion",
                "an illegal memory access",
            ),
            // Log levels are no commit types, and "Handled exception" is output.
            (
                "ERROR: Handled exception in request 42: CUDA error: an illegal memory access was encountered",
                "an illegal memory access",
            ),
            (
                "[INFO] Handled RuntimeError: CUDA error: device-side assert triggered",
                "device-side assert triggered",
            ),
        ] {
            assert!(!mention(line, lit), "{line}");
        }
    }

    #[test]
    fn paragraphs_and_answers_explain_errors() {
        // Articles that explain the error without quoting it.
        assert!(mention(
            "While working with PyTorch and CUDA, developers may encounter several cryptic errors that can be hard to debug. One such error is the dreaded RuntimeError: CUDA Error: Device-side assert triggered. This error typically signifies a problem during the execution of a kernel on the GPU.",
            "CUDA Error: "
        ));
        // An answer that quotes the error and says what it means right after it.
        assert!(mention(
            "Hey @someone, `ResourceExhaustedError` usually happens when there's no GPU memory available to schedule a task.",
            "ResourceExhaustedError"
        ));
        // A first-person report in a paragraph stays a report.
        assert!(!mention(
            "Running prefill and decode in separate pools with the cache enabled at a batch of five hundred requests leads to `CUDA error: uncorrectable ECC error encountered` which blocks the GPU and in my case the node must be restarted.",
            "uncorrectable ECC error encountered"
        ));
        assert!(!mention(
            "During training of the detection model on the custom dataset with four GPUs and mixed precision and a batch of sixty four the run usually stops at the third epoch and when I look at the log it says RuntimeError: CUDA error: device-side assert triggered and nothing else.",
            "CUDA error: "
        ));
    }
    #[test]
    fn articles_address_a_generic_reader() {
        // A blog's and an article's opening (second person, "developers may encounter").
        assert!(mention(
            "If you have trained a model in PyTorch, you have hit this error: RuntimeError: CUDA out of memory. It is the most common error in deep learning, and this guide covers the fixes from the simplest to the most advanced ones so you can get back to training.",
            "CUDA out of memory"
        ));
        // An answer that starts with an article and explains the error it names.
        assert!(mention(
            "The CUDA error cudaErrorIllegalAddress (error code 700) you encountered indicates that the program accessed an invalid memory address, so please make sure that the grid size settings are correct and that the box size fits the size of the ligand and the receptor.",
            "cudaErrorIllegalAddress"
        ));
        // A paragraph that starts with the error is a paste, not an explanation.
        assert!(!mention(
            "RuntimeError: CUDA out of memory. it happens at the first step of every epoch and the memory is never freed even though the batch is small and the model is the one from the tutorial that everybody uses, which usually works on this card.",
            "CUDA out of memory"
        ));
    }

    #[test]
    fn cjk_sentences_quote_errors_unless_someone_met_them() {
        // A symptom list in an article, and a review note, that quote errors.
        assert!(mention(
            "- 运行任务时直接报\u{201c}CUDA error: unknown error\u{201d}或\u{201c}CUDA out of memory\u{201d}(注意,这并非真实的显存不足)",
            "CUDA out of memory"
        ));
        assert!(mention(
            "后果:一次性检查在这种坏节点上通过,而真正建立上下文的测试正确失败,报 `CUDA-capable device(s) is/are busy or unavailable`。",
            "busy or unavailable"
        ));
        // An article's question to its reader about the reader's trouble.
        assert!(mention(
            "学習中に「CUDA error: an illegal memory access was encountered」というエラーが出て困っていませんか?原因はカーネル内の範囲外アクセスであることが多いです。",
            "an illegal memory access was encountered"
        ));
        assert!(mention(
            "你是否也遇到过\u{201c}CUDA out of memory\u{201d}这个报错?本文介绍几种常见的解决办法。",
            "CUDA out of memory"
        ));
        // First person or a question: someone met it.
        assert!(!mention(
            "学習中に「CUDA error: an illegal memory access was encountered」というエラーが出ます。誰か分かりませんか?",
            "an illegal memory access was encountered"
        ));
        assert!(!mention(
            "我在训练的时候一直报错\u{201c}CUDA out of memory\u{201d},显存明明还有很多剩余的",
            "CUDA out of memory"
        ));
        assert!(!mention(
            "运行训练脚本的时候出现 `CUDA error: device-side assert triggered` 这个错误怎么解决",
            "device-side assert triggered"
        ));
        // A short title is not a sentence.
        assert!(!mention(
            "训练时出现\u{201c}CUDA out of memory\u{201d}",
            "CUDA out of memory"
        ));
    }

    #[test]
    fn reports_are_not_mentions() {
        // The program's own line.
        assert!(!mention(
            "RuntimeError: CUDA error: misaligned address",
            "misaligned address"
        ));
        // A pasted line in a code span carries its `Error:` prefix.
        assert!(!mention(
            "After a few hundred steps the run stops and prints `RuntimeError: CUDA error: misaligned address` on every rank.",
            "misaligned address"
        ));
        // First person, or a program that crashed with it.
        assert!(!mention(
            "When running the benchmark with a batch of 64 I get `CUDA_ERROR_ILLEGAL_ADDRESS` from the second step on.",
            "CUDA_ERROR_ILLEGAL_ADDRESS"
        ));
        assert!(!mention(
            "Training on the new nodes with eight GPUs crashes with `CUDA_ERROR_ILLEGAL_ADDRESS` after the first epoch.",
            "CUDA_ERROR_ILLEGAL_ADDRESS"
        ));
        // A title puts the error first.
        assert!(!mention(
            "Getting `CUDA_ERROR_ILLEGAL_ADDRESS` when running jax.jit with pmap on eight A100 GPUs",
            "CUDA_ERROR_ILLEGAL_ADDRESS"
        ));
        // A sentence that introduces the pasted error.
        assert!(!mention(
            "Training ran for two hours on the cluster and then stopped with the following error: `CUDA error: out of memory` on rank three.",
            "out of memory"
        ));
        // Log text: its prefix has no plain words.
        assert!(!mention(
            "[2024-01-01 10:00:00,123][ERROR][train.py:42] step=5 \"CUDA error: out of memory\"",
            "out of memory"
        ));
        // Outside a quotation the literal is as the program printed it.
        assert!(!mention(
            "Once any earlier kernel faults with misaligned address, every later call returns the same error.",
            "misaligned address"
        ));
    }

    #[test]
    fn code_spans_pair_runs_of_equal_length() {
        let l = "a `x` b ``y`z`` c `unclosed";
        let s: Vec<&str> = code_spans(l).into_iter().map(|r| &l[r]).collect();
        assert_eq!(s, vec!["x", "y`z"]);
        assert!(code_spans("no spans").is_empty());
        assert!(code_spans("```").is_empty());
    }

    proptest::proptest! {
        /// Any text: no panic, and a line without quotation marks is never a mention unless it
        /// explains the error to the reader or calls it a common one. Sentence ends of several
        /// bytes (。？！) sit next to the hit as often as letters do.
        #[test]
        fn never_panics(
            line in "\\PC{0,200}|([a-zA-Z]{1,6}|`{1,3}|\"|\u{201c}|\u{201d}| |: |\u{3002}|\u{ff1f}|\u{ff01}|典型的错误){0,60}",
            a in 0usize..200,
            n in 0usize..40,
        ) {
            let a = line.char_indices().map(|(i, _)| i).find(|&i| i >= a).unwrap_or(line.len());
            let e = line.char_indices().map(|(i, _)| i).find(|&i| i >= a + n).unwrap_or(line.len());
            let r = a..e;
            let h = [r];
            let _ = names_error_in_passing(&line, &h);
            if !line.contains(['`', '"', '\u{201c}'])
                && words(&line) < PARAGRAPH_WORDS
                && !explained_to_the_reader(&line, &h)
                && !named_as_a_common_error(&line, &h)
            {
                proptest::prop_assert!(!names_error_in_passing(&line, &h));
            }
        }
    }
}
