//! Code: tells a line of source code, a script or a definition that holds an error's text from a
//! line a program printed.
//!
//! Threads, READMEs and documentation paste the code that looks for an error as often as the
//! error itself: `if "CUDA out of memory" in str(e):`, `OOM_PATTERNS = ["…", "…"]`,
//! `raise RuntimeError("…")`, `printf("CUDA error: %s\n", cudaGetErrorString(e))`,
//! `except torch.cuda.OutOfMemoryError:`, and the error enums' own definitions
//! (`cudaErrorIllegalAddress = 700`, "700 is CUDA_ERROR_ILLEGAL_ADDRESS"). None of them is an
//! event. Only the shape of a statement is recognised, never a particular error's wording:
//!
//! - a statement that starts with a keyword of control flow, raising or printing, with every error
//!   literal inside a string literal; an `except …:` / `catch (…)` clause or a `#define`, whatever
//!   it names;
//! - an assignment of a string literal (or a list of them) at the start of the line;
//! - a string literal compared, searched for or matched (`==`, `in`, `.startswith(`,
//!   `re.compile(`, `grep`);
//! - a format string: the literal that holds the error also holds a placeholder (`%s`, `{}`,
//!   `{size}`, `${VAR}`);
//! - an enum value defined or glossed: `NAME = 700` at the start of a line, "700 is NAME",
//!   "NAME means …";
//! - a template whose numbers are placeholders (`Tried to allocate XXX MiB`, `X/Y clients`).
//!
//! A logfmt line (`time=… level=error msg="CUDA error: …"`) is output, not an assignment: it has
//! several `key=value` pairs, and its first one is not the quoted error.

use super::prose::cached;
use regex::Regex;
use std::ops::Range;
use std::sync::OnceLock;

/// A statement that starts with a keyword of control flow, raising, asserting or printing
/// (Python, C/C++/CUDA, shell, JavaScript, Rust), after indentation, a REPL prompt or a
/// Markdown bullet.
fn statement_start() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    cached(
        &R,
        r"^(?:>>>\s|\.\.\.\s|[-*+]\s+)?\s*(?:\}\s*)?(?:if|elif|else\s+if|while|assert|raise|throw|return|yield|case|print|printf|fprintf|sprintf|snprintf|puts|echo|std::cerr|std::cout|cerr|cout|console\.\w+|logger\.\w+|logging\.\w+|log\.\w+|LOG\(\w+\)|warnings\.warn|self\.assert\w*|assert\w*!|panic!|println!|eprintln!|TORCH_CHECK|AOTI_TORCH_CHECK|AT_ERROR|TORCH_WARN|tl\.device_assert|tl\.static_assert)\b",
    )
}

/// Code whatever it names: an exception clause (Python's `except …:`, the C-family
/// `catch (…)`), a test of an exception's class (`isinstance(e, torch.cuda.OutOfMemoryError)`,
/// `pytest.raises(…)`), a preprocessor macro (`#define CUDA_CHECK(x) … cudaGetErrorString(e)`)
/// or a C-family line comment (`// CudaError - a Go version of the CUDA error state`): no
/// program prints its output behind `//`. A unified diff's `+` or `-` may open the line.
fn handler_clause() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    cached(
        &R,
        r"^(?:>>>\s|\.\.\.\s|[-+])?\s*(?:except\b[^#]*:\s*(?:#.*|pass\s*)?$|(?:\}\s*)?catch\s*\(|#\s*define\s+\w|//)|\b(?:isinstance|issubclass|pytest\.raises|assertRaises\w*)\s*\(",
    )
}

/// The start of an assignment whose value is a string literal or a list, tuple or map of them,
/// or an object built from a double-quoted one: `name = "`, `const char *msg = "`,
/// `self.msg: str = r'`, `PATTERNS = [`, `err = RuntimeError("` (Python's repr, which
/// `f"{e = }"` prints, quotes with `'`), and the shell's `NAME="` / `export name='`. Without spaces around `=` only the shell's upper-case or
/// exported names count: `msg='CUDA out of memory …'` is what Python's `f"{msg=}"` prints.
fn assignment_start() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    cached(
        &R,
        r#"^\s*(?:(?:(?:const|let|var|static|final|constexpr|auto|char|std::string|string|String|str|val)\s+\**)*[A-Za-z_][\w.\[\]'"]*(?:\s*:\s*[\w.]+(?:\[[^\]]*\])?)?\s+(?:\+|\|\|)?=\s+(?:(?:new\s+)?[A-Za-z_][\w.:]*\(\s*(?:[rRbBfFuUL]{1,2})?"|[\[({]*\s*(?:[rRbBfFuUL]{1,2})?["'`])|(?:(?:export|local|readonly)\s+[A-Za-z_]\w*|[A-Z][A-Z0-9_]*)=[\[({]*\s*(?:[rRbBfFuUL]{1,2})?["'`])"#,
    )
}

/// Just before a literal that is compared, searched for or matched: `== "`, `!= '`, `in (`,
/// `.startswith("`, `re.compile(r"`, `grep -E "`, `strstr(msg, "`, and GoogleTest's string
/// matchers (`HasSubstr("CUDA device-side assertion failures were found …")` in PyTorch's own
/// tests), and the pattern a test expects an exception's message to match (pytest's
/// `pytest.raises(RuntimeError, match="CUDA error: …")`, `assertRaisesRegex`'s
/// `expected_regex=`).
fn compared_before() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    cached(
        &R,
        r#"(?:(?:==|!=|===|!==)\s*|\b(?:startswith|endswith|contains|includes|find|rfind|index|count|search|match|fullmatch|findall|finditer|compile|sub|split|strstr|strcmp|strncmp|test|Regex::new|is_match|HasSubstr|StartsWith|EndsWith|ContainsRegex|MatchesRegex)\s*\(\s*(?:\w+\s*,\s*)?[rRbBfFuU]{0,2}|\bgrep(?:\s+-\w+)*\s+|\b(?:match|expected_regex|expected_message)\s*=\s*[rRbBfFuU]{0,2})$"#,
    )
}

/// Just after a literal that is compared or tested for membership, with a code operand:
/// `" in str(e):`, `" in stderr`, `" == msg)`, `" in exception.args[0]`. ("caught 'CUDA out of
/// memory' in step 1200" is a sentence.)
fn compared_after() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    cached(
        &R,
        r"^\s*(?:not\s+in|in|==|!=|===|!==)\s+[\w.]+(?:\([^)]*\))?(?:\[[^\]]*\])*\s*(?:[:),\]]|\band\b|\bor\b|\bif\b|\belse\b|$)",
    )
}

/// A placeholder of a format string or template: printf's `%s`/`%d`/`%zu`, Python's `{}`,
/// `{0}`, `{size}`, `{:.2f}`, `{loss:.4f}`, and the shell's `${VAR}`. A percentage is not one:
/// `%` after a digit (`99% used`) never starts a placeholder.
fn placeholder() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    cached(
        &R,
        r"(?:^|[^\d.%])%(?:[-+#0]*\d*(?:\.\d+)?(?:l|ll|z|h)?[sdiufgxXpc])|\{(?:\w*(?::[^{}\s]{0,8})?)\}|\$\{\w+\}",
    )
}

/// An enum's value defined right after its name: `cudaErrorIllegalAddress = 700`,
/// `CUDA_ERROR_ILLEGAL_ADDRESS = 700,`, `ncclSystemError = 2`, and with its type between them
/// as bindgen writes Rust constants (`pub const cudaError_cudaErrorAssert: cudaError = 710;`).
fn defined_after() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    cached(&R, r"^[`'\x22]?\s*(?::\s*[\w:]+\s*)?=\s*-?\d+\b")
}

/// An enum's name opening a line of a reference's list, its description right after it: the
/// runtime API's "cudaErrorMissingConfiguration The device function being invoked (usually via
/// cudaLaunch()) was not previously configured …" (a sentence of four words or more), or a
/// translation after it ("cudaErrorLaunchFailure执行内核时设备上发生了异常", "cudaErrorMemoryAllocation
/// API调用失败").
fn described_after() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    cached(
        &R,
        r"^(?:\s+[A-Z][a-z]+(?:\s+[A-Za-z,.'()-]+){3,}|\s*(?:[A-Za-z]+\s*)?\p{Han}{4})",
    )
}

/// What may come before an enum value's name that opens its definition: indentation, a bullet
/// or table bar, and the declaration's keywords and type in the languages that bind the CUDA
/// enums: Swift's and C#'s `case cudaErrorInvalidValue = 1`, Java's `public static final int
/// CUDA_ERROR_ASSERT = 710;`, C++'s `static constexpr int … = 700;`.
fn declaration_start() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    cached(
        &R,
        r"^[\s\-*+|`]*(?:(?:case|public|private|protected|internal|static|final|const|constexpr|readonly|export|pub|let|var|val|enum|int|long|short|unsigned|u?int(?:8|16|32|64)_t|U?Int(?:8|16|32|64)?|CUresult|cudaError_t)\s+)*\w*$",
    )
}

/// A `switch` label on an enum's value, as error-to-string tables in C, C++, Java and C# write
/// them: `case cudaErrorIllegalAddress:` (also qualified, `case cudaError::X:`), with nothing, a
/// block, a `return` or a statement ending in `;` after the colon. A label is never output.
fn switch_label(before: &str, after: &str) -> bool {
    static CASE: OnceLock<Regex> = OnceLock::new();
    static COLON: OnceLock<Regex> = OnceLock::new();
    cached(&CASE, r"^\s*case\s+(?:\w+(?:::|\.))*$").is_match(before)
        && cached(&COLON, r"^\s*:(?:\s*$|\s*\{|\s*return\b|[^:].*;\s*$)").is_match(after)
}

/// An enum's name that a sentence goes on to define: "CUDA_ERROR_OUT_OF_MEMORY means the driver
/// could not …", "`cudaErrorLaunchFailure` (719) indicates …", "ncclSystemError is returned
/// when …", and in Chinese after a comma or colon ("CUDA_ERROR_INVALID_VALUE，表示传递了无效参数",
/// … indicates an invalid argument was passed; 意味着 and 即, "that is", say the same; 即使,
/// "even if", does not). 提示 and 说明 gloss a name too, but reports use them for what the error
/// said ("报错 …，提示显存不足"): [`prompted_gloss`] reads them.
fn explained_after() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    cached(
        &R,
        r"^[`'\x22]?\s*(?:\(\d+\)\s*)?(?:(?:means|indicates|signals|signifies|stands\s+for|is\s+returned|is\s+raised|is\s+thrown|occurs\s+when|is\s+reported\s+when)\b|[,\x{ff0c}:\x{ff1a}\x{3001}]\s*(?:表示|意味着|意味著|即(?:[^使将將可便]|$)))",
    )
}

/// The other Chinese glosses of an enum's name, 提示 ("it prompts") and 说明 ("it shows"), after
/// a comma or colon, counted as a definition only where nothing before the name says that the
/// writer met the error (报错 "reported an error", 出现 "appeared", 遇到 "ran into", …).
fn prompted_gloss(before: &str, after: &str) -> bool {
    static GLOSS: OnceLock<Regex> = OnceLock::new();
    static MET: OnceLock<Regex> = OnceLock::new();
    cached(
        &GLOSS,
        r"^[`'\x22]?\s*[,\x{ff0c}:\x{ff1a}\x{3001}]\s*(?:提示|说明|說明)",
    )
    .is_match(after)
        && !cached(
            &MET,
            r"报错|報錯|出现|出現|遇到|碰到|发生|發生|得到|运行|運行|执行|執行|训练|訓練",
        )
        .is_match(before)
}

/// A number in a template where a program prints a value: `Tried to allocate XXX MiB`,
/// `XXXX bytes`, `after XX seconds`, `X/Y clients joined`. Redactions hide names and addresses,
/// not sizes, so a unit after the placeholder marks documentation, unless the line says that
/// someone met the error ("The deployment fails with the following error: RuntimeError: CUDA
/// out of memory. Tried to allocate XX GiB", a reporter who hid the sizes).
fn template_number() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    cached(
        &R,
        r"\b(?:X+|N)\s?(?:[KMGT]i?B|bytes?|seconds?|secs?|ms|minutes?)\b|\b[XN]/[YM]\b",
    )
}

/// An enum's name in the first cell of a documentation table, with a sentence describing it in
/// the next (after an optional value cell): `CUBLAS_STATUS_EXECUTION_FAILED | The GPU program
/// failed to execute. …`, `| cudaErrorIllegalAddress | 700 | The device encountered a load …`.
fn described_in_table() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    cached(
        &R,
        r"^[`'\x22]?\s*\|\s*(?:`?-?\d+`?\s*\|\s*)?[A-Z][a-z]+(?:\s+[A-Za-z,.'()-]+){3,}",
    )
}

/// A number glossed right before an enum's name: "700 is `CUDA_ERROR_ILLEGAL_ADDRESS`",
/// "error 2 means ncclSystemError", "code 700 corresponds to the cudaErrorIllegalAddress".
fn glossed_before() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    cached(
        &R,
        r"(?i)\b\d+\)?\s+(?:is|means|=|corresponds\s+to|stands\s+for|maps\s+to)\s+(?:the\s+|an?\s+)?(?:code\s+(?:for|of)\s+)?[`'\x22]?$",
    )
}

/// Content ranges of the string literals of `line`: double-, single- and backtick-quoted,
/// honouring backslash escapes. A single quote counts only where it cannot be an apostrophe (not
/// preceded by a letter or digit).
fn literals(line: &str) -> Vec<Range<usize>> {
    let bytes = line.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let q = bytes[i];
        let opens = match q {
            b'"' | b'`' => true,
            b'\'' => i == 0 || !bytes[i - 1].is_ascii_alphanumeric(),
            _ => false,
        };
        if !opens {
            i += 1;
            continue;
        }
        let start = i + 1;
        let mut j = start;
        let mut closed = None;
        while j < bytes.len() {
            match bytes[j] {
                b'\\' => j += 2,
                c if c == q => {
                    closed = Some(j);
                    break;
                }
                _ => j += 1,
            }
        }
        match closed {
            Some(end) => {
                out.push(start..end);
                i = end + 1;
            }
            None => break,
        }
    }
    out
}

/// A field that holds a pattern to look for, not output: a knowledge base's or a detector's
/// `SIGNATURE=RuntimeError: …`, `REGEX=CUDA error: …`, YAML's `pattern: "…"` and
/// `error_regex: …`, and camel-case keys (`userLogRegex: "(?i)…"`, OpenPAI's exit specs), at
/// the start of the line, also as a diff's added or removed line (lower- or upper-case keys; a
/// capitalised "Signature:" or "Pattern:" may be a label of output). A quoted value that opens
/// with a regex's inline flags (`"(?i)CUDA_ERROR_ECC_UNCORRECTABLE: …"`) is a pattern whatever
/// its key.
fn pattern_field() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    cached(
        &R,
        r#"^[+-]?\s*(?:[-*]\s+)?["']?(?:(?:[a-z]+[_-])*(?:signature|regexp?|patterns?|fingerprint|SIGNATURE|REGEXP?|PATTERNS?|FINGERPRINT)(?:[_-][a-z]+)*|[a-z]+(?:[A-Z][a-z0-9]*)*(?:Signature|Regexp?|Patterns?|Fingerprint))["']?\s*[:=]|[:=]\s*[rR]?["'`]\(\?[imsux]{1,5}\)"#,
    )
}

/// An exception class's bare name on a line of its own (a heading or a glossary entry:
/// "RendezvousTimeoutError" above the paragraph that explains it). Python prints a raised
/// exception with its module (`torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError`)
/// and a message after a colon, so output never looks like that.
fn class_alone(line: &str) -> bool {
    static R: OnceLock<Regex> = OnceLock::new();
    cached(
        &R,
        r"^\s*(?:#{1,6}\s+)?(?:\*\*|__)?`?[A-Z][A-Za-z0-9]*(?:Error|Exception)`?(?:\*\*|__)?\s*$",
    )
    .is_match(line)
}

/// One field of a struct, map or call whose whole value is a string literal, ending in the comma
/// that separates it from the next: Go's and Rust's `input: "…",`, JavaScript's `message:
/// '…',`, a keyword argument `msg="…",`. A test table or a fixture holds a kernel log line as
/// data this way: the kernel prints neither the key nor the comma. A program's own error may be
/// printed in this shape (Rust's `{:#?}`, Node's inspect), so callers apply it to kernel
/// evidence and to the wrap join only. (JSON's quoted keys are left to the other shapes: a
/// pretty-printed log record is output.)
pub fn string_field(line: &str) -> bool {
    static R: OnceLock<Regex> = OnceLock::new();
    cached(
        &R,
        r#"^\s*(?P<key>[A-Za-z_]\w*)\s*[:=]\s*(?:"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')\s*,\s*$"#,
    )
    .captures(line)
    // An exception's name before its quoted message is output (`KeyError: 'loss'`).
    .and_then(|c| c.name("key"))
    .is_some_and(|k| {
        !["Error", "Exception", "Warning"]
            .iter()
            .any(|s| k.as_str().ends_with(s))
    })
}

/// A message of a sequence diagram (Mermaid's `J->>SM: Log: "GPU 0000:b3:00.0 fallen off the
/// bus"`, PlantUML's `Monitor -> Handler : …`): a design document draws a log line passing
/// between its parts, and no program or kernel prints the arrow between two names before it.
pub fn diagram_message(line: &str) -> bool {
    static R: OnceLock<Regex> = OnceLock::new();
    cached(
        &R,
        r"^\s*[A-Za-z_][\w.]*\s*(?:<<)?-{1,2}(?:>>|>|x|\))[+-]?\s*[A-Za-z_][\w.]*\s*:",
    )
    .is_match(line)
}

/// A line of source that holds only a string literal: an element of a list of patterns
/// (`"CUDA out of memory.",  # CUDA OOM`) or a piece of a message built over several lines (`"Some
/// NCCL operations have failed or timed out. Due to the ",`), that is the literal and the
/// punctuation of the list, call or concatenation it sits in, perhaps with a comment; or a
/// literal alone that is a format string (`'Loss is NaN or inf at step %d, will terminate within
/// the'`, a piece of Python's implicit concatenation). Also behind a unified diff's `+`/`-` or a
/// bullet. A program prints no comment and no separator after its message. A literal that holds
/// an escaped newline is captured output held as data (a notebook's `"…\n",`), and is left to
/// the rest.
pub fn literal_line(line: &str) -> bool {
    static R: OnceLock<Regex> = OnceLock::new();
    cached(
        &R,
        r#"^[-+*]?\s*(?:[rRbBfFuUL]{1,2})?(?:"(?:[^"\\]|\\[^n])*"|'(?:[^'\\]|\\[^n])*')\s*(?P<tail>(?:[,+;\])]\s*)+(?:(?:#|//).*)?)?$"#,
    )
    .captures(line)
    .is_some_and(|c| c.name("tail").is_some() || placeholder().is_match(line))
        || concatenated_literal(line)
}

/// A piece of a string that source builds by concatenation, escaped newline and all: Go's and
/// Java's `message: "[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0\n" +`, a test table's
/// multi-line kernel message. (A notebook's captured output, `"…\n",`, has no `+`.)
fn concatenated_literal(line: &str) -> bool {
    static R: OnceLock<Regex> = OnceLock::new();
    cached(
        &R,
        r#"^\s*(?:[A-Za-z_]\w*\s*[:=]\s*)?(?:"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')\s*\+\s*$"#,
    )
    .is_match(line)
}

/// A comment of source or of a shell script whose own text is kernel text: `# NVRM: Xid
/// (PCI:0000:08:00): 79, GPU has fallen off the bus` under "# Example line:" in a health checker,
/// `// NVRM: Xid …` in Go or C. The kernel never starts a line with a comment marker, and a shell
/// prompt (`# dmesg`) is followed by a command, not by the kernel's text; so for kernel text this
/// marks data. Lines indented inside a comment (`#     NVRM: GPU0 …`) are a block quoted in the
/// comment's prose, as a note of what a machine logged, and are read as ever.
pub fn commented_out(line: &str) -> bool {
    let t = line.trim_start();
    t.strip_prefix("# ")
        .or_else(|| t.strip_prefix("// "))
        .or_else(|| t.strip_prefix("-- "))
        .is_some_and(|rest| {
            rest.starts_with("NVRM")
                || rest.starts_with("nvidia-nvswitch")
                || rest.starts_with('[') && rest.contains("] NVRM")
                || rest.starts_with("kernel: ")
        })
}

/// Several `key=value` pairs with no spaces around `=`, as logfmt output has
/// (`time=… level=error msg="…"`): output of a program, not an assignment.
fn logfmt(line: &str) -> bool {
    static R: OnceLock<Regex> = OnceLock::new();
    cached(&R, r"(?:^|\s)[A-Za-z_][\w.]*=\S")
        .find_iter(line)
        .count()
        >= 2
}

/// Is every one of `hits` (byte ranges of error literals in `line`) part of a line of code, a
/// format string or an enum's definition, rather than text a program printed?
pub fn holds_error_in_code(line: &str, hits: &[Range<usize>]) -> bool {
    if hits.is_empty() {
        return false;
    }
    if handler_clause().is_match(line)
        || diagram_message(line)
        || pattern_field().is_match(line)
        || class_alone(line)
        || literal_line(line)
    {
        return true;
    }
    if hits.iter().all(|h| {
        defined_or_glossed(line, h)
            || calls_a_function(line, h)
            || passed_alone(line, h)
            || raised_or_caught(line, h)
            || assigned_name(line, h)
            || used_as_a_type(line, h)
    }) || (template_number().is_match(line) && !super::prose::report_cue().is_match(line))
        || enum_listing(line, hits)
    {
        return true;
    }
    let lits = literals(line);
    let literal_of = |h: &Range<usize>| {
        lits.iter()
            .find(|l| l.start <= h.start && h.end <= l.end)
            .cloned()
    };
    let Some(held) = hits.iter().map(literal_of).collect::<Option<Vec<_>>>() else {
        return false;
    };
    if statement_start().is_match(line) && !super::prose::report_cue().is_match(line) {
        return true;
    }
    if assignment_start().is_match(line) && !logfmt(line) {
        return true;
    }
    hits.iter().zip(&held).all(|(h, l)| {
        let before = line.get(..l.start.saturating_sub(1)).unwrap_or("");
        let after = line.get(l.end + 1..).unwrap_or("");
        placeholder().is_match(escaped_line_of(line, l, h))
            || class_path_argument(line, l)
            || compared_before().is_match(before)
            || compared_after().is_match(after)
    })
}

/// Is literal `lit` a double-quoted class path alone, an argument that a call goes on from
/// (`"torch.cuda.CUDAOutOfMemoryError", nullptr, nullptr));`, the name PyTorch registers its
/// exception under)? Output prints a class before its message, not between a quote and a
/// comma.
fn class_path_argument(line: &str, lit: &Range<usize>) -> bool {
    let Some(inner) = line.get(lit.clone()) else {
        return false;
    };
    let quoted = lit.start > 0 && line.as_bytes()[lit.start - 1] == b'"';
    let after = line.get(lit.end + 1..).unwrap_or("").trim_start();
    quoted
        && inner.contains('.')
        && inner
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')
        && (inner.ends_with("Error") || inner.ends_with("Exception"))
        && after.starts_with([',', ')'])
}

/// The part of literal `lit` that holds `hit`, between the `\n` escapes around it: a JSON log
/// record's traceback holds source lines (`f"step {step}"`) beside the error in one string.
fn escaped_line_of<'a>(line: &'a str, lit: &Range<usize>, hit: &Range<usize>) -> &'a str {
    let inner = line.get(lit.clone()).unwrap_or("");
    let at = hit.start.saturating_sub(lit.start);
    let end = hit.end.saturating_sub(lit.start);
    let start = inner
        .get(..at)
        .and_then(|s| s.rfind("\\n"))
        .map_or(0, |i| i + 2);
    let stop = inner
        .get(end..)
        .and_then(|s| s.find("\\n"))
        .map_or(inner.len(), |i| end + i);
    inner.get(start..stop).unwrap_or(inner)
}

/// Is `hit` the start of a function or macro that the line calls, rather than an error's
/// name: `cudaErrorToString(result)`, `CUDA_ERROR_CHECK(cudaMalloc(…));`? The identifier that
/// the hit begins runs on into `(`, the call closes before source's punctuation or the line's
/// end, and the identifier is not one of the CUDA enums' names (a wrapper may print
/// `CUDA_ERROR_ILLEGAL_ADDRESS(700)`).
fn calls_a_function(line: &str, hit: &Range<usize>) -> bool {
    // A literal of words names a message, whatever call it goes on to name ("CUDNN error
    // executing cudnnConvolutionForward(s_.handle, …)", ONNX Runtime's output).
    if line
        .get(hit.clone())
        .is_none_or(|n| n.contains(char::is_whitespace))
    {
        return false;
    }
    let after = line.get(hit.end..).unwrap_or("");
    let rest = after.trim_start_matches(|c: char| c.is_ascii_alphanumeric() || c == '_');
    // The literal is a prefix of a longer identifier (`cudaError` of `cudaErrorToString`); a
    // call of a literal itself is the traceback's source line, which other checks read.
    if !rest.starts_with('(') || rest.len() == after.len() {
        return false;
    }
    // A value in the parentheses is an enum printed with its value (CUDA.jl's
    // `cudaError_enum(0x000002bc)`), not a call.
    if rest[1..]
        .trim_start()
        .starts_with(|c: char| c.is_ascii_digit() || c == '-')
    {
        return false;
    }
    let Some(ident) = line.get(hit.start..line.len() - rest.len()) else {
        return false;
    };
    // Source goes on after the call with an argument separator, the statement's end or a block;
    // a check macro's output goes on in words ("CUDA_ERROR_CHECK(cuCtxSynchronize()) failed
    // with error 719").
    let mut depth = 0usize;
    let mut tail = "";
    for (i, c) in rest.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    tail = rest.get(i + 1..).unwrap_or("");
                    break;
                }
            }
            _ => {}
        }
    }
    if depth != 0
        || !(tail.trim().is_empty() || tail.trim_start().starts_with([';', ',', '{', ')']))
    {
        return false;
    }
    !super::cuda_catalog::errors()
        .iter()
        .any(|e| e.runtime_name == ident || e.driver_name == Some(ident))
}

/// The identifier that `hit` starts, with the text before it and after it: `None` where the hit
/// is not an identifier (a message in words is never an enum value). The identifier may continue
/// past the literal (`CUDA_ERROR_ILLEGAL_ADDRESS` from a `CUDA_ERROR_` literal).
fn identifier_at<'a>(line: &'a str, hit: &Range<usize>) -> Option<(&'a str, &'a str, &'a str)> {
    let name = line.get(hit.clone())?;
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return None;
    }
    let before = line.get(..hit.start)?;
    let after = line.get(hit.end..)?;
    let rest = after.trim_start_matches(|c: char| c.is_ascii_alphanumeric() || c == '_');
    let full = line.get(hit.start..line.len() - rest.len())?;
    Some((before, full, rest))
}

/// The text around the class name that `hit` starts: the last `tail` characters before it, past
/// its module path (`torch.cuda.`, `CUDA::`), and what follows the name. Only a short tail is read,
/// so a line of many hits stays linear.
fn class_in_context<'a>(
    line: &'a str,
    hit: &Range<usize>,
    tail: usize,
) -> Option<(&'a str, &'a str)> {
    let (before, _, after) = identifier_at(line, hit)?;
    let before = before.trim_end_matches(|c: char| c.is_ascii_alphanumeric() || "_.:".contains(c));
    let from = before.char_indices().rev().nth(tail).map_or(0, |(i, _)| i);
    Some((&before[from..], after))
}

/// Is `hit` the class of an exception that code raises, throws or catches: Python's `raise
/// torch.cuda.OutOfMemoryError(…)` and `except torch.cuda.OutOfMemoryError`, Julia's
/// `throw(OutOfGPUMemoryError())`, the C family's `throw new CudaException(` and `catch
/// (const CudaError&`, also quoted in a sentence ("`except torch.cuda.OutOfMemoryError` raises
/// AttributeError")? A program prints an exception's class before its message, never after one
/// of these keywords. The class may be qualified by its module (`torch.cuda.`, `CUDA::`).
fn raised_or_caught(line: &str, hit: &Range<usize>) -> bool {
    static KEYWORD: OnceLock<Regex> = OnceLock::new();
    // The keyword and its parenthesis sit just before the class.
    let Some((before, after)) = class_in_context(line, hit, 16) else {
        return false;
    };
    cached(
        &KEYWORD,
        r"(?:^|[^\w.])(?:raise|throw|except|catch)\s*(?:\(\s*)?(?:(?:new|const)\s+)?$",
    )
    .is_match(before)
        && (after.trim().is_empty()
            || after
                .trim_start()
                .starts_with(['(', ')', ':', '`', ',', ';', '&']))
}

/// Is `hit` an exception class that code uses as a type, or that Python's own type errors name
/// as an object's class: `class OutOfMemoryError(RuntimeError):`, `super(OutOfMemoryError,
/// self).__init__(msg)` (a diff of an exception's definition), `isinstance(e,
/// torch.cuda.OutOfMemoryError)`, and "'OutOfMemoryError' object has no attribute 'encode'" (an
/// `AttributeError` raised by a handler that caught the error and went on)? A program prints an
/// error's class before its message, not as a type's argument.
fn used_as_a_type(line: &str, hit: &Range<usize>) -> bool {
    static BEFORE: OnceLock<Regex> = OnceLock::new();
    static AFTER: OnceLock<Regex> = OnceLock::new();
    let Some((before, after)) = class_in_context(line, hit, 48) else {
        return false;
    };
    let typed = cached(
        &BEFORE,
        r"(?:(?:^|[^\w.])(?:super|isinstance|issubclass)\(\s*(?:[\w.]+\s*,\s*)?|(?:^|[^\w.])class\s+)$",
    );
    let attribute_error = cached(
        &AFTER,
        r"^['\x22]\s+object\s+(?:has no attribute|is not (?:callable|subscriptable|iterable))\b",
    );
    (typed.is_match(before) && after.trim_start().starts_with([',', ')', '(', ':']))
        || (before.ends_with(['\'', '"']) && attribute_error.is_match(after))
}

/// Is `hit` part of a name that a statement assigns to: `THPException_CUDAOutOfMemoryError =
/// PyErr_NewException(` (PyTorch's registration of its exception class, quoted in a review or a
/// diff), `OOM_ERROR = torch.cuda.OutOfMemoryError`? The name opens the statement, after a
/// diff's `+`/`-` and indentation, and `=` (not `==`) follows it. A program prints an error's
/// name before a colon or its message, not as an assignment's target.
fn assigned_name(line: &str, hit: &Range<usize>) -> bool {
    let Some((before, _, after)) = identifier_at(line, hit) else {
        return false;
    };
    let head = before.trim_end_matches(|c: char| c.is_ascii_alphanumeric() || "_.".contains(c));
    let after = after.trim_start();
    // The value is code (a call, a name, a literal), not a number that `printf("cudaError =
    // %d")` printed.
    let value = after.strip_prefix('=').unwrap_or("").trim_start();
    head.trim_start_matches(['+', '-']).trim().is_empty()
        && after.starts_with('=')
        && !after.starts_with("==")
        && value.starts_with(|c: char| c.is_ascii_alphabetic() || "_\"'[{".contains(c))
}

/// Is `hit` an enum value passed as the only argument of a call in a statement:
/// `cout << cudaGetErrorString(cudaErrorMemoryAllocation) << endl;`,
/// `printf("%s", cudaGetErrorName(cudaErrorIllegalAddress));`? A tutorial shows what a value
/// prints that way. Output writes a value inside parentheses after a number or a word and goes on
/// in words (`code=2(cudaErrorMemoryAllocation) "cudaMalloc(&p, n)"`, cudarc's
/// `DriverError(CUDA_ERROR_OUT_OF_MEMORY, "out of memory")`, with a second argument), never
/// closes a statement with `;`.
fn passed_alone(line: &str, hit: &Range<usize>) -> bool {
    static CALL: OnceLock<Regex> = OnceLock::new();
    let Some((before, _, after)) = identifier_at(line, hit) else {
        return false;
    };
    cached(&CALL, r"[A-Za-z_][\w.:]*\(\s*$").is_match(before)
        && after.trim_start().starts_with(')')
        && (line.trim_end().ends_with(';') || statement_start().is_match(line))
}

/// Does the line list the error enum's values rather than report one: three or more distinct
/// names of `cudaError_t` or `CUresult` values (`cudaSuccess` among them), as a reference or a
/// translation of one runs them together ("cudaSuccess: 성공cudaErrorMissingConfiguration: 설정
/// 누락cudaErrorMemoryAllocation: 메모리 부족…")? A program's error names one value, or two
/// (a runtime's and a driver's name of it, a check's expected and actual value). Every hit must
/// be one of the names.
fn enum_listing(line: &str, hits: &[Range<usize>]) -> bool {
    static NAME: OnceLock<Regex> = OnceLock::new();
    const LISTED: usize = 3;
    let names: Vec<Range<usize>> = cached(
        &NAME,
        r"cudaSuccess|cudaError[A-Z][A-Za-z]*|CUDA_SUCCESS|CUDA_ERROR_[A-Z_]+",
    )
    .find_iter(line)
    .map(|m| m.range())
    .collect();
    let mut distinct: Vec<&str> = names.iter().filter_map(|r| line.get(r.clone())).collect();
    distinct.sort_unstable();
    distinct.dedup();
    distinct.len() >= LISTED
        && hits
            .iter()
            .all(|h| names.iter().any(|n| n.start <= h.start && h.start < n.end))
}

/// Is `hit` an enum name defined with its value (`NAME = 700` opening the line) or glossed by
/// one ("700 is NAME")? Only identifiers qualify: a message in words is never an enum.
fn defined_or_glossed(line: &str, hit: &Range<usize>) -> bool {
    let Some((before, full, after)) = identifier_at(line, hit) else {
        return false;
    };
    // A bare type or prefix is no enum value: `printf("cudaError = %d\n", err)` prints
    // `cudaError = 2`.
    if full == "cudaError" || full.ends_with("_t") || full.ends_with('_') {
        return false;
    }
    let opens_line = declaration_start().is_match(before);
    // A statement that assigns or returns the value (`ret = ncclUnhandledCudaError;`, `return
    // cudaErrorMemoryAllocation;`): output never ends an error's name with `;`.
    let statement_value = after.trim() == ";"
        && (before.trim_end().ends_with('=') || before.trim_end().ends_with("return"));
    // IPython's traceback opens with the exception's class and, after padding, "Traceback (most
    // recent call last)" (IPython/core/ultratb.py): output, not a reference's description.
    let ipython_header = after
        .trim_start()
        .starts_with("Traceback (most recent call last)");
    statement_value
        || (opens_line
            && (defined_after().is_match(after)
                || described_in_table().is_match(after)
                || (described_after().is_match(after) && !ipython_header)))
        || switch_label(before, after)
        || glossed_before().is_match(before)
        || explained_after().is_match(after)
        || prompted_gloss(before, after)
        || (numbered_heading().is_match(before) && heading_end().is_match(after))
        || compared(before, after)
}

/// An enum value in a comparison inside a statement, as code tests a call's result:
/// `if(cudaMalloc(&p, size) == cudaErrorMemoryAllocation) {`, `while (err != cudaSuccess)`,
/// `return status == CUDA_ERROR_OUT_OF_MEMORY;`. A failed check prints its comparison too (glog's
/// "Check failed: cusolverDnCreate(&h) == CUSOLVER_STATUS_SUCCESS", an assertion's message), so
/// only the statement's keyword or its closing `{` or `;` makes it code.
fn compared(before: &str, after: &str) -> bool {
    static STATEMENT: OnceLock<Regex> = OnceLock::new();
    let b = before.trim_end();
    let a = after.trim_start();
    let comparison =
        b.ends_with("==") || b.ends_with("!=") || a.starts_with("==") || a.starts_with("!=");
    comparison
        && (cached(&STATEMENT, r"(?:^|[^\w])(?:if|while|return)\s*\(?").is_match(b)
            || a.trim_end().ends_with(['{', ';']))
}

/// What opens an enum's name that is a document's heading, alone on its line: a numbered
/// list's "1. ", "2) ", a Markdown heading's "### " (an article's "常见CUDA错误类型" / "1.
/// CUDA_ERROR_OUT_OF_MEMORY" / "这是最常见的情况 …"), with emphasis or a code span around it. A
/// bullet is left out: a report lists the errors it got as bullets; so is a name with nothing
/// before it, which a report's title may be ("ncclRemoteError" / "Who can help me?") as well as
/// a reference's entry.
fn numbered_heading() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    cached(&R, r"^\s*(?:#{1,6}|\d{1,3}[.)、]|[IVX]{1,4}\.)\s*[*_`]*$")
}

/// What may close such a heading: its emphasis or code span and a colon.
fn heading_end() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    cached(&R, r"^[*_`]*\s*[:\x{ff1a}]?\s*$")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn in_code(line: &str, lit: &str) -> bool {
        let hits: Vec<_> = line
            .match_indices(lit)
            .map(|(i, m)| i..i + m.len())
            .collect();
        assert!(!hits.is_empty(), "{lit:?} not in {line:?}");
        holds_error_in_code(line, &hits)
    }

    #[test]
    fn an_enum_name_as_a_numbered_heading_is_documentation() {
        assert!(in_code("1. CUDA_ERROR_OUT_OF_MEMORY", "CUDA_ERROR_"));
        assert!(in_code("## **cudaErrorIllegalAddress**:", "cudaError"));
        // A bullet is a report's list of what it got; a message after the name is output.
        assert!(!in_code("- CUDA_ERROR_OUT_OF_MEMORY", "CUDA_ERROR_"));
        assert!(!in_code(
            "1. CUDA_ERROR_OUT_OF_MEMORY: out of memory",
            "CUDA_ERROR_"
        ));
    }

    #[test]
    fn objects_built_from_an_error_message_are_code() {
        assert!(in_code(
            r#"        oom = RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")"#,
            "CUDA out of memory"
        ));
        assert!(in_code(
            r#"    err = torch.cuda.OutOfMemoryError("CUDA out of memory.")"#,
            "CUDA out of memory"
        ));
        // What Python's repr prints in a log line is not code.
        assert!(!in_code(
            "2024-05-02 11:02:13 ERROR step 1200 failed: RuntimeError('CUDA out of memory. Tried to allocate 2.00 GiB')",
            "CUDA out of memory"
        ));
    }

    #[test]
    fn statements_that_look_for_errors_are_code() {
        assert!(in_code(
            r#"    if "CUDA out of memory" in str(e):"#,
            "CUDA out of memory"
        ));
        assert!(in_code(
            r#"        raise RuntimeError("CUDA error: an illegal memory access was encountered")"#,
            "an illegal memory access"
        ));
        assert!(in_code(
            r#"    assert "device-side assert triggered" in stderr"#,
            "device-side assert triggered"
        ));
        assert!(in_code(
            r#"            logger.error("NCCL error: unhandled system error, retrying")"#,
            "unhandled system error"
        ));
        assert!(in_code(
            "except torch.cuda.OutOfMemoryError:",
            "OutOfMemoryError"
        ));
        assert!(in_code(
            "    except (RuntimeError, torch.cuda.OutOfMemoryError) as e:  # retry smaller",
            "OutOfMemoryError"
        ));
        assert!(in_code(
            "} catch (const c10::OutOfMemoryError& e) {",
            "OutOfMemoryError"
        ));
        assert!(in_code(
            r#"grep -E "NCCL WARN|unhandled cuda error" train.log"#,
            "unhandled cuda error"
        ));
        assert!(in_code(
            r#"    if msg.startswith("CUDA error: out of memory"):"#,
            "out of memory"
        ));
    }

    #[test]
    fn pattern_fields_and_bare_class_names_are_not_output() {
        for (line, lit) in [
            (
                "SIGNATURE=RuntimeError: CUDA error: device-side assert triggered",
                "device-side assert triggered",
            ),
            (
                "REGEX=CUDA error: an illegal memory access was encountered",
                "an illegal memory access",
            ),
            (
                "  - pattern: \"NCCL error: unhandled system error\"",
                "unhandled system error",
            ),
            ("    error_regex: CUDA out of memory", "CUDA out of memory"),
            (
                "\"pattern\": \"Watchdog caught collective operation timeout\",",
                "collective operation timeout",
            ),
            ("RendezvousTimeoutError", "RendezvousTimeoutError"),
            ("## OutOfMemoryError", "OutOfMemoryError"),
            ("**DistStoreError**", "DistStoreError"),
        ] {
            assert!(in_code(line, lit), "{line}");
        }
        for (line, lit) in [
            // Output: a qualified class, a message after it, a log line with a `match` word later.
            (
                "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError",
                "RendezvousTimeoutError",
            ),
            (
                "RendezvousTimeoutError: timed out waiting for nodes",
                "RendezvousTimeoutError",
            ),
            (
                "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 MiB",
                "CUDA out of memory",
            ),
            (
                "Error: no match for CUDA error: an illegal memory access was encountered",
                "an illegal memory access",
            ),
            (
                "Patterns of failure: CUDA error: an illegal memory access was encountered",
                "an illegal memory access",
            ),
        ] {
            assert!(!in_code(line, lit), "{line}");
        }
    }

    #[test]
    fn assignments_and_templates_are_code() {
        assert!(in_code(
            r#"OOM_PATTERNS = ["CUDA out of memory", "RESOURCE_EXHAUSTED: Out of memory"]"#,
            "CUDA out of memory"
        ));
        assert!(in_code(
            r#"ERROR_MESSAGE="RuntimeError: CUDA error: device-side assert triggered""#,
            "device-side assert triggered"
        ));
        assert!(in_code(
            r#"export NCCL_ERR='unhandled system error'"#,
            "unhandled system error"
        ));
        assert!(in_code(
            r#"    #define CUDA_CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA error: %s\n", cudaGetErrorString(e)); exit(1);} } while (0)"#,
            "CUDA error: "
        ));
        assert!(in_code(
            "#define CHECK(call) if ((call) != cudaSuccess) { cudaError_t err = cudaGetLastError(); abort(); }",
            "cudaError"
        ));
        assert!(in_code(
            r#"  "msg": "CUDA out of memory. Tried to allocate {size}","#,
            "CUDA out of memory"
        ));
        assert!(in_code(
            r#"  fprintf(stderr, "illegal memory access at %s:%d\n", file, line);"#,
            "illegal memory access"
        ));
    }

    #[test]
    fn templates_and_class_tests_are_not_events() {
        assert!(in_code(
            "RuntimeError: CUDA out of memory. Tried to allocate XXX MiB (GPU XXX; XXX GiB total capacity)",
            "CUDA out of memory"
        ));
        assert!(in_code(
            "RuntimeError: Timed out after XX seconds waiting for clients. X/Y clients joined.",
            "waiting for clients"
        ));
        assert!(in_code(
            "        isinstance(exception, torch.cuda.OutOfMemoryError)",
            "OutOfMemoryError"
        ));
        assert!(in_code(
            "    with pytest.raises(torch.cuda.OutOfMemoryError):",
            "OutOfMemoryError"
        ));
        assert!(in_code(
            "RuntimeError: CUDA out of memory. Tried to allocate N MiB",
            "CUDA out of memory"
        ));
        assert!(in_code(
            "OOM_PATTERN: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate X GiB",
            "CUDA out of memory"
        ));
        // Redacted names are not templates.
        assert!(!in_code(
            "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 15.78 GiB total capacity) on host xxx-XXX",
            "CUDA out of memory"
        ));
    }

    #[test]
    fn enum_definitions_and_glosses_are_not_events() {
        assert!(in_code(
            "cudaErrorIllegalAddress = 700",
            "cudaErrorIllegalAddress"
        ));
        // A documentation table that describes the enum in its next cell.
        assert!(in_code(
            "CUBLAS_STATUS_EXECUTION_FAILED | The kernel did not run to completion on the device.",
            "CUBLAS_STATUS_EXECUTION_FAILED"
        ));
        assert!(in_code(
            "| `cudaErrorIllegalAddress` | 700 | The kernel dereferenced an address it does not own. |",
            "cudaErrorIllegalAddress"
        ));
        // A log line that goes on after a pipe is not a table, nor is a status with a step.
        assert!(!in_code(
            "CUBLAS_STATUS_EXECUTION_FAILED | Failed at step 1200 on rank 3",
            "CUBLAS_STATUS_EXECUTION_FAILED"
        ));
        assert!(!in_code(
            "cuBLAS call failed: CUBLAS_STATUS_EXECUTION_FAILED | rank 3 | step 1200",
            "CUBLAS_STATUS_EXECUTION_FAILED"
        ));
        assert!(in_code(
            "    CUDA_ERROR_ILLEGAL_ADDRESS = 700,",
            "CUDA_ERROR_ILLEGAL_ADDRESS"
        ));
        // The bindings' declarations: Swift's enum case, Java's constant.
        assert!(in_code(
            "  case cudaErrorInvalidValue = 1",
            "cudaErrorInvalidValue"
        ));
        assert!(in_code(
            "    public static final int CUDA_ERROR_ASSERT                         = 710;",
            "CUDA_ERROR_ASSERT"
        ));
        // A Chinese gloss after a comma or colon: the name is being defined.
        assert!(in_code(
            "- 运行阶段：CUDA_ERROR_ILLEGAL_ADDRESS，表示内核访问了非法地址",
            "CUDA_ERROR_ILLEGAL_ADDRESS"
        ));
        assert!(in_code(
            "cudaErrorLaunchFailure: 即内核启动失败",
            "cudaErrorLaunchFailure"
        ));
        assert!(in_code(
            "2. 分配阶段：CUDA_ERROR_OUT_OF_MEMORY，提示显存不足",
            "CUDA_ERROR_OUT_OF_MEMORY"
        ));
        assert!(!in_code(
            "CUDA_ERROR_ILLEGAL_ADDRESS，训练在第 3 步中断",
            "CUDA_ERROR_ILLEGAL_ADDRESS"
        ));
        // A report says what the error prompted, or goes on with "even if".
        assert!(!in_code(
            "运行时报错 CUDA_ERROR_OUT_OF_MEMORY，提示显存不足",
            "CUDA_ERROR_OUT_OF_MEMORY"
        ));
        assert!(!in_code(
            "遇到 CUDA_ERROR_ILLEGAL_ADDRESS，即使把 batch size 调小也一样",
            "CUDA_ERROR_ILLEGAL_ADDRESS"
        ));
        // A function or macro named after the enum, called: code. An enum name with its value
        // in parentheses is output.
        assert!(in_code(
            "                file, line, static_cast<unsigned int>(result), cudaErrorToString(result), func);",
            "cudaError"
        ));
        assert!(in_code(
            "    CUDA_ERROR_CHECK(cudaMalloc(&ptr, bytes));",
            "CUDA_ERROR_"
        ));
        assert!(!in_code(
            "Fatal: CUDA_ERROR_ILLEGAL_ADDRESS(700) in kernel launch",
            "CUDA_ERROR_"
        ));
        assert!(!in_code(
            "CUDA.CuError(code=CUDA.cudaError_enum(0x000002bc), details=CUDA.Optional{String}(data=nothing))",
            "cudaError"
        ));
        // An error-to-string table's switch labels, bare or qualified, with the branch after.
        assert!(in_code(
            "        case cudaErrorIllegalAddress:",
            "cudaErrorIllegalAddress"
        ));
        assert!(in_code(
            "        case cudaErrorNvlinkUncorrectable :",
            "cudaErrorNvlinkUncorrectable"
        ));
        assert!(in_code(
            "    case CUresult::CUDA_ERROR_ILLEGAL_ADDRESS: return \"illegal address\";",
            "CUDA_ERROR_ILLEGAL_ADDRESS"
        ));
        // A check macro's output names its call and goes on in words.
        assert!(!in_code(
            "[rank3] CUDA_ERROR_CHECK(cuCtxSynchronize()) failed with error 719 at ops.cu:57",
            "CUDA_ERROR_"
        ));
        assert!(!in_code(
            "what(): cudaErrorCheck(cudaStreamSynchronize(s)) failed",
            "cudaError"
        ));
        assert!(!in_code(
            "case cudaErrorIllegalAddress: kernel crashed at step 3",
            "cudaErrorIllegalAddress"
        ));
        // Output that happens to follow the word, or a path after the name, is no label.
        assert!(!in_code(
            "test case cudaErrorIllegalAddress: kernel crashed at step 3",
            "cudaErrorIllegalAddress"
        ));
        assert!(!in_code(
            "case cudaErrorIllegalAddress::foo",
            "cudaErrorIllegalAddress"
        ));
        // A sentence's words before the name are no declaration.
        assert!(!in_code(
            "got cudaErrorInvalidValue = 1 from cudaMemcpy",
            "cudaErrorInvalidValue"
        ));
        assert!(in_code(
            "`CUDA_ERROR_ILLEGAL_ADDRESS = 700`: While executing a kernel, the device encountered a load or store instruction on an invalid memory address.",
            "CUDA_ERROR_ILLEGAL_ADDRESS"
        ));
        assert!(in_code(
            "Error 700 is CUDA_ERROR_ILLEGAL_ADDRESS, which means a kernel dereferenced a bad pointer.",
            "CUDA_ERROR_ILLEGAL_ADDRESS"
        ));
        assert!(in_code(
            "700 is `cudaErrorIllegalAddress`.",
            "cudaErrorIllegalAddress"
        ));
        assert!(in_code(
            "CUDA_ERROR_OUT_OF_MEMORY means the driver could not obtain some resource;",
            "CUDA_ERROR_OUT_OF_MEMORY"
        ));
        assert!(in_code(
            "`cudaErrorLaunchFailure` (719) indicates an exception while executing a kernel.",
            "cudaErrorLaunchFailure"
        ));
    }

    #[test]
    fn printed_errors_are_not_code() {
        // What programs print, with quotes, `=` and the error's code beside the name.
        for (line, lit) in [
            (
                r#"time=2024-05-01T10:00:00Z level=ERROR source=server.go:512 msg="llama runner process has terminated: CUDA error: out of memory""#,
                "out of memory",
            ),
            (
                r#"CUDA error at cudaMemcpy.cu:52 code=700(cudaErrorIllegalAddress) "cudaDeviceSynchronize()""#,
                "cudaErrorIllegalAddress",
            ),
            (
                "RuntimeError: CUDA error: an illegal memory access was encountered",
                "an illegal memory access",
            ),
            (
                "misc/nvmlwrap.c:123 NCCL WARN Cuda failure 'out of memory'",
                "out of memory",
            ),
            (
                r#"I get "CUDA error: device-side assert triggered" when training with a batch of 64"#,
                "device-side assert triggered",
            ),
            (
                "CUDA_ERROR_ILLEGAL_ADDRESS (700) in cuCtxSynchronize()",
                "CUDA_ERROR_ILLEGAL_ADDRESS",
            ),
            (
                "Error: cuMemcpyDtoH failed: CUDA_ERROR_ILLEGAL_ADDRESS = 700",
                "CUDA_ERROR_ILLEGAL_ADDRESS",
            ),
            (
                r#"{"level":"error","msg":"CUDA out of memory. Tried to allocate 2.00 GiB"}"#,
                "CUDA out of memory",
            ),
            (
                r#"ValueError: Expected parameter probs (Tensor of shape (64, 10)) of distribution Categorical(probs: torch.Size([64, 10])) to satisfy the constraint Simplex(), but found invalid values"#,
                "found invalid values",
            ),
            (
                r#"while training on 8 GPUs i get "CUDA error: out of memory" after an hour"#,
                "out of memory",
            ),
            // Percentages, Python's `f"{msg=}"`, sentences with "in", a JSON record whose
            // traceback quotes an f-string, and a bare type printed with its value.
            (
                r#"{"level":"error","msg":"GPU memory 99% used, CUDA out of memory on rank 3"}"#,
                "CUDA out of memory",
            ),
            (
                r#"time=2024-05-01T10:00:00Z level=ERROR msg="llama runner process has terminated: CUDA error: out of memory (VRAM 100% used)""#,
                "out of memory",
            ),
            (
                "msg='CUDA out of memory. Tried to allocate 2.00 GiB'",
                "CUDA out of memory",
            ),
            (
                r#"WARNING: step 1200 skipped, reason = "CUDA out of memory""#,
                "CUDA out of memory",
            ),
            (
                "[rank3]: caught 'CUDA out of memory' in step 1200, retrying with micro batch 2",
                "CUDA out of memory",
            ),
            (
                r#"{"levelname":"ERROR","exc_info":"Traceback:\n    logger.info(f\"step {step}\")\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"}"#,
                "CUDA out of memory",
            ),
            ("cudaError = 2", "cudaError"),
            (
                r#"I can't find "unhandled cuda error" anywhere in the NCCL log"#,
                "unhandled cuda error",
            ),
            ("    return forward_call(*args, **kwargs)", "forward_call"),
        ] {
            assert!(!in_code(line, lit), "{line}");
        }
    }

    #[test]
    fn string_fields_of_code_are_data() {
        for line in [
            "\t\t\tinput:    \"[1.1] NVRM: Xid (PCI:0000:05:00): 79, pid='<unknown>', GPU has fallen off the bus.\",",
            "    message: 'CUDA error: an illegal memory access was encountered',",
            "        msg=\"RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\",",
            "  line: \"with \\\"escaped\\\" quotes\" ,",
        ] {
            assert!(string_field(line), "{line}");
        }
        for line in [
            // JSON's quoted key: a pretty-printed record is output.
            "  \"message\": \"CUDA error: an illegal memory access was encountered\",",
            // YAML, logfmt and a log line with a key: no closing comma.
            "pattern: \"CUDA error\"",
            "time=1 level=error msg=\"CUDA error: out of memory\"",
            "RuntimeError: \"CUDA out of memory\",",
            "[rank0]: error: \"CUDA error: misaligned address\", retrying",
        ] {
            assert!(!string_field(line), "{line}");
        }
    }

    #[test]
    fn literals_skip_apostrophes_and_escapes() {
        let line = r#"it's "a \"quoted\" text" and 'one more'"#;
        let got: Vec<&str> = literals(line).into_iter().map(|r| &line[r]).collect();
        assert_eq!(got, vec![r#"a \"quoted\" text"#, "one more"]);
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// Any line and any char-aligned hits: no panic, and a line with no quote, no `=`, no
        /// keyword and no digit is never code.
        #[test]
        fn any_line_and_hits_are_handled(
            line in "[ -~\u{201c}\u{4e00}é]{0,120}",
            cuts in proptest::collection::vec((0usize..130, 0usize..130), 1..4),
        ) {
            let bounds: Vec<usize> = line.char_indices().map(|(i, _)| i).chain([line.len()]).collect();
            let hits: Vec<Range<usize>> = cuts
                .iter()
                .map(|&(a, b)| {
                    let (a, b) = (bounds[a % bounds.len()], bounds[b % bounds.len()]);
                    a.min(b)..a.max(b)
                })
                .collect();
            let code = holds_error_in_code(&line, &hits);
            let plain: String = line
                .chars()
                .filter(|c| c.is_ascii_lowercase() || *c == ' ')
                .collect();
            let plain_hits = vec![Range { start: 0, end: plain.len() }];
            let starts_with_keyword = statement_start().is_match(&plain)
                || handler_clause().is_match(&plain);
            proptest::prop_assert!(
                starts_with_keyword || !holds_error_in_code(&plain, &plain_hits),
                "{plain:?} ({code})"
            );
        }
    }
}
