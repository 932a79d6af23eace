//! Row guards: the tests a headline row's words must pass on a line before the row counts,
//! for rows whose literal is also everyday wording ("Allocation on device", "NCCL timeout",
//! "the CUDA error was"). A row names its guard in [`super::rules::HeadlineRule::guard`]; the
//! tests live here so that the table stays data.

use super::prose;

/// Do a report's own words for a collective timeout ("NCCL timeout during validation",
/// "32B PPO Training: WorkNCCL Timeout", "[RLLib] NCCL rank desync timeout with …") tell of one
/// that happened, rather than name a setting or advise on it? The line is one sentence of a
/// title's length (a changelog's or an article's paragraph runs on), the words are no setting's
/// noun ("NCCL timeout of 30 minutes", "the NCCL timeout is set to …", "NCCL timeout value"), no
/// plural or class of them ("fall back on NCCL timeouts", "NCCL watchdog timeout errors are
/// often observed"), and no verb of changing, avoiding or explaining and no "like" of an example
/// comes up to three words before them ("increase the NCCL timeout", "Increase the time of NCCL
/// timeout", "Prevent NCCL timeout", "how to debug NCCL timeout", "Error messages like NCCL
/// watchdog timeout"), nor a setting's adjective after them ("make NCCL timeout configurable").
pub fn timeout_named_as_event(line: &str) -> bool {
    static WORDS: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    static AFTER: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    static BEFORE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    static SENTENCES: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let text = line.trim();
    if text.len() > 200
        || prose::cached(&SENTENCES, r"[.!?;]\s+[A-Z]").is_match(text)
        || prose::announces_a_fix(text)
    {
        return false;
    }
    let Some(m) = prose::cached(
        &WORDS,
        r"(?i)\w*(?:ccl|watchdog|desync|collective)\s+time\s?out",
    )
    .find(text) else {
        return false;
    };
    let after = &text[m.end()..];
    let before = &text[..m.start()];
    !prose::cached(
        &AFTER,
        r"(?i)^(?:s\b|\s*(?:=|:?\s*\d|of\s+\d|\(s\)|values?\b|settings?\b|configurable\b|adjustable\b|tunable\b|parameters?\b|env\w*|variables?\b|flags?\b|defaults?\b|options?\b|configs?\b|configuration\b|errors\b|issues\b|problems\b|messages\b|(?:is|was|can be|should be)\s+(?:set|configured|controlled|changed|increased|\d)))",
    )
    .is_match(after)
        && !prose::cached(
            &BEFORE,
            r"(?i)\b(?:increas\w*|rais\w*|set|setting|extend\w*|lengthen\w*|chang\w*|configur\w*|adjust\w*|prevent\w*|avoid\w*|fix|fixe[sd]|fixing|handl\w*|reduc\w*|detect\w*|debug\w*|troubleshoot\w*|add|adds|added|adding|bump\w*|support\w*|document\w*|customi[sz]\w*|tun(?:e|es|ed|ing)|disabl\w*|enabl\w*|diagnos\w*|understand\w*|explain\w*|about|custom|default|longer|shorter|larger|higher|lower|like|such as|e\.g\.|including)(?:\s+\S+){0,3}\s*$",
        )
        .is_match(before)
}

/// Is the generic CUDA wording on `line` an error printed, rather than "CUDA error" as the
/// subject of a sentence about one ("Buffer allocation should be a recoverable error, but the CUDA
/// error was not cleared, which may cause the next operation to fail.", "this CUDA error is
/// sticky")? A determiner before the words and a verb after them make them a noun phrase; a
/// printed error has its message after them. A report cue on the line keeps it a report.
pub fn error_printed(line: &str) -> bool {
    static R: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let subject = !line.contains("CUDA error:")
        && prose::cached(
            &R,
            r"(?i)\b(?:the|this|that|any|no|each|every|such)\s+CUDA error\s+(?:is|was|were|are|has|had|should|would|could|will|may|might|can|must|remains|persists|becomes|did|does)\b",
        )
        .is_match(line)
        && !prose::has_report_cue(line);
    !subject
}

/// Whether PyTorch's "Allocation on device" on `line` is its allocator's limit message: the
/// words go on with "would exceed allowed memory", or end the text where the device index, written
/// as a byte, cut the message (see the `torch_allocation_limit` row).
pub fn allocation_limit_tail(line: &str) -> bool {
    const WORDS: &str = "Allocation on device";
    line.match_indices(WORDS).any(|(at, _)| {
        let rest = &line[at + WORDS.len()..];
        rest.contains("would exceed allowed memory")
            || rest
                .trim_end_matches(|c: char| c.is_whitespace() || "'\"`*_.\\".contains(c))
                .is_empty()
    })
}

/// Does a CUDA driver call follow the words "in" on `line`, as Blender Cycles prints a failed one
/// (`Illegal address in cuCtxSynchronize() (…)`)? "Invalid value in current config" and "Unknown
/// error in curl_easy_perform()" are other programs' words.
pub fn driver_call_follows(line: &str) -> bool {
    static R: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    prose::cached(&R, r"\bin cu[A-Z][A-Za-z0-9_]*\(").is_match(line)
}

/// Does `line` tell, in the first person, that its writer met the error ("I'm getting a CUDA
/// out-of-memory error")? For wordings that only writers use: a program prints "CUDA out of
/// memory", while articles, docstrings and changelogs write the hyphenated adjective too ("PyTorch
/// then throws the dreaded CUDA out-of-memory error", "checks if the exception relates to CUDA
/// out-of-memory").
pub fn first_person_report(line: &str) -> bool {
    static R: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    prose::has_report_cue(line)
        && prose::cached(&R, r"(?i)\b(?:i|i'm|i've|we|we're|we've|my|our)\b").is_match(line)
}

/// Does `line` say that its writer's run ran out of GPU memory ("We ran out of GPU memory at
/// batch size 64", "I keep running out of CUDA memory", "I'm running out of GPU memory")? The
/// writer must be the subject at the start of a sentence or clause, in the past or the
/// progressive: the present is what code or a guide says happens ("when we run out of GPU
/// memory, the batch is split", "# we run out of GPU memory here, so chunk the batch").
pub fn ran_out_in_first_person(line: &str) -> bool {
    static R: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    prose::cached(
        &R,
        r"(?i)(?:^\s*|[.!?;,]\s+|\b(?:and|but|then|now|again|also|still|after|today|suddenly|unfortunately)\s+)(?:i|we)\s*(?:(?:['’]m|['’]re|am|are|was|were|keep|kept|still|always|often|just|also|then|now|quickly|eventually|constantly|frequently)\s+)*(?:ran|running|ha(?:ve|d)\s+run)\s+out\s+of\s+(?:GPU|CUDA)\s+memory\b",
    )
    .is_match(line)
}
