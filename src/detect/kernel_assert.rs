//! Parses the line CUDA's device `assert` prints once per failing thread.
//!
//! The CUDA C Programming Guide ("Assertion") documents the shape: the source file and line,
//! the function, `block: [x,y,z], thread: [x,y,z]`, then ``Assertion `expr` failed.``. The function
//! field varies (`operator()`, a templated THC signature, `(null)`, Triton's `unknown`), so the
//! parser anchors on the assertion and the `File.cu:LINE` token, never on the function.
//!
//! Pasted reports rarely keep that shape exactly: glibc-style ``Assertion `expr' failed``, quotes
//! turned into `'…'` or lost to Markdown, emphasis (`**Assertion**`, `_…_`), escapes (`\_`,
//! `\*`), `> ` quote markers, and several threads' lines flattened into one. [`parse_all`] finds
//! every site on a line and reduces each expression to the same clean text; an expression the
//! catalog of PyTorch's assertion sites knows is given in the catalog's own spelling.

#[path = "assert_catalog.rs"]
pub mod assert_catalog;

use super::prose::cached;
use super::rules::{ASSERT_FAMILIES, CUSTOM_ASSERT_HINT, UNKNOWN_ASSERT_HINT};
use crate::model::Evidence;
use memchr::memmem;
use regex::Regex;
use std::sync::OnceLock;

/// Literals every form of the assertion line this module parses contains (for a literal gate):
/// the backticks and quotes after "Assertion" are optional in pasted text.
/// HIP's device `assert` says "Device-side assertion", and TorchInductor's Triton kernels check
/// indices with a message of their own that titles quote without the assertion around it.
pub const LINE_LITERALS: &[&str] = &["Assertion", DEVICE_SIDE, INDUCTOR_BOUNDS];

/// What ROCm's device library prints for a failed `assert` in a HIP kernel: ``file:line:
/// function: Device-side assertion `expr' failed.`` (LLVM's AMDGPU device libc, `__assert_fail`).
/// The kernel names no block or thread, and its file is a `.cpp` or `.hip` source.
const DEVICE_SIDE: &str = "Device-side assertion";

/// How far into [`DEVICE_SIDE`] its word "assertion" starts.
const DEVICE_SIDE_WORD_AT: usize = DEVICE_SIDE.len() - "assertion".len();

/// TorchInductor's generated bounds check: `tl.device_assert(…, "index out of bounds: 0 <= tmp4 <
/// 32000")` (torch/_inductor/codegen/triton.py `indirect_assert`). The temporary `tmpN` is the
/// code generator's own name, so the message cannot be anyone's prose.
const INDUCTOR_BOUNDS: &str = "index out of bounds: 0 <= tmp";

/// Byte ranges of the words that make `line` a kernel assertion ("Assertion", HIP's
/// "Device-side assertion", Inductor's bounds message): what `detect::prose` and `detect::code`
/// judge when they decide whether the line shows an assertion rather than quotes one.
pub fn assertion_hits(line: &str) -> Vec<std::ops::Range<usize>> {
    let mut hits: Vec<_> = assertion_tokens(line)
        .into_iter()
        .map(|(s, e)| s..e)
        .collect();
    // (HIP's "Device-side assertion" is among the tokens already.)
    hits.extend(
        memmem::find_iter(line.as_bytes(), INDUCTOR_BOUNDS).map(|s| s..s + INDUCTOR_BOUNDS.len()),
    );
    hits
}

struct Patterns {
    kernel_file: Regex,
    block_thread: Regex,
}

fn patterns() -> &'static Patterns {
    static P: OnceLock<Patterns> = OnceLock::new();
    P.get_or_init(|| Patterns {
        kernel_file: Regex::new(r"([A-Za-z0-9_+\-.]+\.(?:cu|cuh|hip|h|hpp|cpp|cc|c)):(\d+)")
            .expect("static regex"),
        block_thread: Regex::new(
            r"block:\s*\\?\[(\d+),\s*(\d+),\s*(\d+)\\?\],\s*thread:\s*\\?\[(\d+),\s*(\d+),\s*(\d+)\\?\]",
        )
        .expect("static regex"),
    })
}

/// Returns the evidence of the first kernel assertion on a line, or `None` if there is none.
pub fn parse(line: &str) -> Option<Evidence> {
    parse_all(line).into_iter().next()
}

/// Returns the evidence of every kernel assertion on a line (a paste that lost its newlines holds
/// one per failing thread), in order. Linear in the line's length.
pub fn parse_all(line: &str) -> Vec<Evidence> {
    // The NVIDIA kernel driver's own checks ("NVRM: nvAssertOkFailedNoLog: Assertion failed: Out
    // of memory [NV_ERR_NO_MEMORY] … @ kernel_gsp.c:4615") run on the CPU, not in a kernel.
    if line.contains("NVRM: ") {
        return Vec::new();
    }
    let tokens = assertion_tokens(line);
    if tokens.is_empty() {
        return inductor_message(line).into_iter().collect();
    }
    let mut out = Vec::new();
    let mut prefix_start = 0;
    for (i, &(start, end)) in tokens.iter().enumerate() {
        let seg_end = tokens.get(i + 1).map_or(line.len(), |t| t.0);
        let segment = &line[end..seg_end];
        if let Some((expr, used)) = glued_form(segment) {
            // Markdown that ate a title's backticks with the spaces around them
            // (`….cu:1008 Assertionfalsefailed.`): only in PaddlePaddle's printf shape.
            let prefix = &line[prefix_start..start];
            if enforce_shape(prefix) {
                out.extend(evidence(prefix, expr.to_owned(), &segment[used..]));
                prefix_start = end + used;
            }
            continue;
        }
        if let Some((expr, used)) = printf_form(segment) {
            if let Some(assertion) = clean_expression(expr) {
                out.extend(evidence(&line[prefix_start..start], assertion, ""));
                prefix_start = end + used;
                continue;
            }
        }
        let Some(failed) = last_failed(segment) else {
            // A title cut after the expression: `File.cu:536 Assertion `expr`` with nothing
            // after (or a first piece of "failed": GitHub cuts a long title mid-word), in the
            // printf shape that names the file and line right before "Assertion", or in the
            // device's own shape with its `block: […], thread: […]` before it.
            let t = cut_failed(segment.trim_end());
            let quoted = t.trim_start().starts_with('`') && t.ends_with('`') && t.len() > 2;
            let prefix = &line[prefix_start..start];
            if quoted && ((enforce_shape(prefix) && enforce_label(prefix)) || device_shape(prefix))
            {
                if let Some(assertion) = clean_expression(t) {
                    out.extend(evidence(prefix, assertion, ""));
                }
            }
            continue;
        };
        let prefix = &line[prefix_start..start];
        let assertion = match clean_expression(&segment[..failed]) {
            Some(a) => a,
            // "block: [0,0,0], thread: [0,0,0] Assertion  failed.": a build that printed no
            // expression (Lua Torch's cutorch in some toolchains). The device's own shape before
            // it makes it a kernel's assertion all the same.
            None if segment[..failed].trim().is_empty() && device_shape(prefix) => String::new(),
            None => continue,
        };
        prefix_start = end + failed + "failed".len();
        let message = segment.get(failed + "failed".len()..).unwrap_or("");
        out.extend(evidence(prefix, assertion, message));
    }
    out
}

/// The evidence of one assertion, or `None` for an assertion of host code: glibc's `assert`
/// prints `prog: file.h:295: function: Assertion 'expr' failed.` without the block and thread
/// that CUDA's device `assert` always prints, from a C/C++ file that is not one of the catalog's
/// kernel sources, with an expression the catalog does not know (LLVM inside Triton's compiler,
/// a C++ extension's host code).
/// `message` is what the kernel printed after "failed." (PaddlePaddle's `PADDLE_ENFORCE` in
/// device code prints its own sentence there).
fn evidence(prefix: &str, assertion: String, message: &str) -> Option<Evidence> {
    let p = patterns();
    let file_line = p.kernel_file.captures_iter(prefix).last();
    let basename = file_line
        .as_ref()
        .and_then(|c| c.get(1))
        .map(|m| m.as_str());
    let kernel_file = file_line.as_ref().map(|c| format!("{}:{}", &c[1], &c[2]));
    let (block, thread) = match p.block_thread.captures_iter(prefix).last() {
        Some(c) => {
            let n = |i: usize| {
                c.get(i)
                    .and_then(|m| m.as_str().parse::<u32>().ok())
                    .unwrap_or(0)
            };
            (Some([n(1), n(2), n(3)]), Some([n(4), n(5), n(6)]))
        }
        None => (None, None),
    };
    let site = assert_catalog::site_for(&assertion, basename);
    let host_file = basename.is_some_and(|b| {
        !b.ends_with(".cu") && !b.ends_with(".cuh") && !assert_catalog::is_known_file(b)
    });
    // glibc's host `assert` prints nothing after "failed."; a range-check sentence there is
    // PaddlePaddle's device-side enforce, whatever file it is in, and so is its printf shape.
    // HIP's device library names its kernel's `assert` as device-side, whatever the file.
    let device_side = prefix.ends_with(&DEVICE_SIDE[..DEVICE_SIDE_WORD_AT]);
    if block.is_none()
        && host_file
        && !device_side
        && site.is_none()
        && family_of_message(message).is_none()
        && !enforce_shape(prefix)
    {
        return None;
    }
    let assertion = match site {
        Some(site) => site.expression.to_owned(),
        None => assertion,
    };
    let (mut category, mut hint) = classify(&assertion, kernel_file.as_deref());
    if category == "unknown" && assertion.is_empty() {
        if let Some(f) = family_of_function(prefix) {
            (category, hint) = family_hint(f);
        }
    }
    if category == "unknown" && checks_a_label_range(&assertion) {
        (category, hint) = family_hint("nll_target_out_of_range");
    }
    if category == "unknown" {
        if let Some(f) = family_of_message(message) {
            (category, hint) = family_hint(f);
        }
    }
    if category == "unknown" {
        if let Some(f) = basename.and_then(family_of_sampling_file) {
            (category, hint) = family_hint(f);
        }
    }
    // Another framework's or an extension's kernel (PaddlePaddle's own kernels are a framework's
    // checks, as uncatalogued PyTorch ones are).
    let foreign = basename.filter(|b| {
        !is_pytorch_file(b)
            && !pytorch_path(prefix)
            && !prefix.contains("paddle/")
            && !prefix.contains("paddle\\")
    });
    if let (Some(b), "unknown") = (foreign, category) {
        (category, hint) = match family_of_file_name(b, &assertion) {
            Some(f) => family_hint(f),
            None => ("custom_kernel_assert", CUSTOM_ASSERT_HINT),
        };
    }
    Some(Evidence::KernelAssert {
        kernel_file,
        assertion,
        block,
        thread,
        category: category.into(),
        hint: hint.into(),
    })
}

/// The family of a kernel that the assertion's prefix names, for an assertion printed without
/// its expression: THC's index kernels (lib/THC/THCTensorIndex.cu, Lua Torch's cutorch and
/// PyTorch up to 1.4) are one per operation, `indexSelectSmallIndex`/`indexSelectLargeIndex`
/// asserting `srcIndex < srcSelectDimSize`, `indexAdd…`, `indexCopy…` and `indexFill…` their
/// destination's bound (the expressions in assert_sites.tsv).
fn family_of_function(prefix: &str) -> Option<&'static str> {
    INDEX_KERNELS
        .iter()
        .find(|(name, _)| prefix.contains(name))
        .map(|&(_, family)| family)
}

/// THC's index kernels by the start of their names ([`family_of_function`]).
const INDEX_KERNELS: [(&str, &str); 4] = [
    (" indexSelect", "embedding_index"),
    (" indexAdd", "index_add_out_of_range"),
    (" indexCopy", "index_add_out_of_range"),
    (" indexFill", "index_fill_out_of_range"),
];

/// The family that another framework's kernel file names, for a bounds check in it: MindSpore's
/// `gather_grad.cu` asserting `j_read < output_shape.shape[dim]`, a `scatter_nd` or `embedding`
/// kernel of TensorFlow, PaddlePaddle or an extension. The file says which lookup the index
/// belongs to, as PyTorch's own `ScatterGatherKernel.cu` or `Indexing.cu` do.
fn family_of_file_name(basename: &str, assertion: &str) -> Option<&'static str> {
    let name = basename.to_ascii_lowercase();
    // An index compared with a size, shape or dimension: `j_read < output_shape.shape[dim]`,
    // `id < vocab_size` (not `blockDim.x <= 1024` or `offset < total_bytes`).
    static BOUND: OnceLock<Regex> = OnceLock::new();
    let bound = cached(
        &BOUND,
        r"(?i)<=?\s*[\w.>\[\]()-]{0,40}?(?:size|shape|dim|len|num_|count|vocab|n_class|classes)",
    );
    if !bound.is_match(assertion) {
        return None;
    }
    let words: Vec<&str> = name
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let has = |w: &str| words.contains(&w);
    if has("gather") || has("scatter") {
        Some("scatter_gather_index")
    } else if has("embedding") || name.contains("lookup_table") {
        Some("embedding_index")
    } else if has("nll") || name.contains("cross_entropy") {
        Some("nll_target_out_of_range")
    } else if has("index") || has("indices") || has("indexing") || index_operand(assertion) {
        // DGL's "array_index_select.cuh: … Assertion `index[tx] >= 0 && index[tx] < arr_len`
        // failed." (src/array/cuda/array_index_select.cuh), an index kernel's own bound, and an
        // index checked against a container's size in any file (XGBoost's `Span::operator[]`,
        // include/xgboost/span.h: "Assertion `((_idx) < (size()))` failed.").
        Some("index_out_of_bounds")
    } else {
        None
    }
}

/// The family of a sampling kernel's file, whose checks are of its probabilities: PaddlePaddle's
/// "multinomial_op.cu:42 Assertion `in_data[id] >= 0.0` failed. The input of multinomial
/// distribution should be >= 0, but got -0.038249." (paddle/fluid/operators/multinomial_op.cu),
/// as PyTorch's `MultinomialKernel.cu` and `DistributionBernoulli.cu` check theirs.
fn family_of_sampling_file(basename: &str) -> Option<&'static str> {
    let name = basename.to_ascii_lowercase();
    if name.contains("multinomial") {
        Some("multinomial_invalid_probability")
    } else if name.contains("bernoulli") {
        Some("bernoulli_invalid_probability")
    } else {
        None
    }
}

/// Is the bound's left side an index by its name (`_idx`, `index[tx]`, `indices[i]`), however
/// many parentheses a macro put around it?
fn index_operand(assertion: &str) -> bool {
    static R: OnceLock<Regex> = OnceLock::new();
    cached(
        &R,
        r"(?i)(?:^|[^a-z0-9])_?(?:idx|index|indices)(?:\[[^\]]{0,20}\])?\)*\s*<",
    )
    .is_match(assertion)
}

/// Does the text before an assertion name a path inside PyTorch's sources or its installed
/// headers (`aten/src/ATen/…`, `c10/…`, `torch/include/…`, on Linux or Windows)? Such a kernel
/// is PyTorch's own even where the catalog has no site in it.
fn pytorch_path(prefix: &str) -> bool {
    const MARKS: [&str; 8] = [
        "aten/src/",
        "ATen/native/",
        "/c10/",
        "torch/include/",
        "aten\\src\\",
        "ATen\\native\\",
        "\\c10\\",
        "torch\\include\\",
    ];
    MARKS.iter().any(|m| prefix.contains(m))
}

/// Is `basename` one of PyTorch's kernel sources: a file of the assertion catalog (generated from
/// PyTorch's own `aten/src/ATen/native/cuda`, THC and THCUNN) or of a built-in family? An
/// assertion elsewhere is an extension's, a library's or the user's own check.
fn is_pytorch_file(basename: &str) -> bool {
    assert_catalog::is_known_file(basename)
        || ASSERT_FAMILIES
            .iter()
            .any(|f| f.kernel_files.contains(&basename))
}

/// PaddlePaddle's device-side `PADDLE_ASSERT` / `PADDLE_ASSERT_MSG` (paddle/fluid/platform/
/// assert.h) print ``%s:%d Assertion `%s` failed (%s).`` and trap: the file and line come right
/// before "Assertion", with no function between them as glibc's host `assert` prints
/// (`file.h:295: fn: Assertion …`). Does `prefix` end in that shape?
fn enforce_shape(prefix: &str) -> bool {
    static R: OnceLock<Regex> = OnceLock::new();
    cached(&R, r"[A-Za-z0-9_+\-]\.(?:cu|cuh|h|hpp|cc|cpp):\d+\s*$").is_match(prefix)
}

/// PaddlePaddle's label before the file (`Error: ` since 2.0, `Exception: ` before): a title cut
/// after the expression must keep it, or a comment naming a file and an assertion would count.
fn enforce_label(prefix: &str) -> bool {
    prefix.contains("Error: ") || prefix.contains("Exception: ")
}

/// An expression that range-checks a label or target against zero (`label >= 0 && label <
/// feature_size_`, `labels_[i] >= 0 && labels_[i] < d_`): the target is outside the classes,
/// whichever loss kernel checks it.
fn checks_a_label_range(assertion: &str) -> bool {
    static R: OnceLock<Regex> = OnceLock::new();
    cached(
        &R,
        r"(?i)\b(?:labels?|targets?|lbl|tgt)\w*(?:\[[^\]]{0,40}\])?\s*>=\s*0\b",
    )
    .is_match(assertion)
}

/// Byte ranges of the word "Assertion" (not "AssertionError"; glued to its expression only
/// where "failed" ends the same word) and of the "assertion" of HIP's "Device-side assertion".
fn assertion_tokens(line: &str) -> Vec<(usize, usize)> {
    const WORD: &str = "Assertion";
    let mut tokens: Vec<(usize, usize)> = memmem::find_iter(line.as_bytes(), WORD)
        .filter(|&s| {
            let rest = &line.as_bytes()[s + WORD.len()..];
            !rest.first().is_some_and(|b| b.is_ascii_alphanumeric())
                || glued_form(&line[s + WORD.len()..]).is_some()
        })
        .map(|s| (s, s + WORD.len()))
        .collect();
    tokens.extend(
        memmem::find_iter(line.as_bytes(), DEVICE_SIDE)
            .map(|s| (s + DEVICE_SIDE_WORD_AT, s + DEVICE_SIDE.len())),
    );
    tokens.sort_unstable();
    tokens
}

/// An expression glued to both words around it, `falsefailed` after "Assertion": the expression
/// and how far into `segment` "failed" ends.
fn glued_form(segment: &str) -> Option<(&str, usize)> {
    // A glued expression is short (`false`, `0`); looking no further keeps a line of many
    // "AssertionError"s linear.
    const GLUED_MAX: usize = 64;
    let end = segment
        .char_indices()
        .take(GLUED_MAX)
        .find(|(_, c)| c.is_whitespace())
        .map_or_else(|| segment.len().min(GLUED_MAX), |(i, _)| i);
    let word = segment.get(..end)?;
    if !word.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return None;
    }
    let at = word.find("failed").filter(|&at| at > 0)?;
    Some((&word[..at], at + "failed".len()))
}

/// TorchInductor's bounds message on its own, without the assertion around it (an issue title,
/// a line that lost its head): the message is the assertion.
fn inductor_message(line: &str) -> Option<Evidence> {
    let at = memmem::find(line.as_bytes(), INDUCTOR_BOUNDS.as_bytes())?;
    let text = line[at..]
        .trim_end()
        .trim_end_matches(['`', '"', '\'', '*']);
    let assertion = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let (category, hint) = classify(&assertion, None);
    Some(Evidence::KernelAssert {
        kernel_file: None,
        assertion,
        block: None,
        thread: None,
        category: category.into(),
        hint: hint.into(),
    })
}

/// PyTorch's `CUDA_KERNEL_ASSERT_PRINTF` (c10/macros/Macros.h, 2.6 and later) prints
/// ``[CUDA_KERNEL_ASSERT] File.cu:L: fn: block: [..], thread: [..]: Assertion failed: `cond`: msg``
/// before the usual line: the expression follows the word "failed". Returns it (backticks
/// included) and how far into `segment` it ends.
fn printf_form(segment: &str) -> Option<(&str, usize)> {
    let lead = segment.len() - segment.trim_start().len();
    let rest = segment[lead..].strip_prefix("failed:")?;
    let lead2 = rest.len() - rest.trim_start().len();
    let body = &rest[lead2..];
    let inner = body.strip_prefix('`')?;
    let close = inner.find("`:").or_else(|| inner.rfind('`'))?;
    let expr = &body[..close + 2];
    let used = lead + "failed:".len() + lead2 + expr.len();
    Some((expr, used))
}

/// Does `prefix` end in the device's `block: [x,y,z], thread: [x,y,z]` (the text right before
/// "Assertion")? Only its tail is read: a line of many cut assertions keeps a growing prefix, and
/// reading all of it for each would be quadratic.
fn device_shape(prefix: &str) -> bool {
    static R: OnceLock<Regex> = OnceLock::new();
    let mut from = prefix.len().saturating_sub(160);
    while !prefix.is_char_boundary(from) {
        from += 1;
    }
    cached(
        &R,
        r"block:\s*\\?\[\d+,\s*\d+,\s*\d+\\?\],\s*thread:\s*\\?\[\d+,\s*\d+,\s*\d+\\?\]\s*$",
    )
    .is_match(&prefix[from..])
}

/// `text` without a first piece of the word "failed" that ends it after a space (`… `expr` fai`,
/// a title cut mid-word).
fn cut_failed(text: &str) -> &str {
    match text.rsplit_once(' ') {
        Some((head, tail)) if !tail.is_empty() && "failed".starts_with(tail) => head.trim_end(),
        _ => text,
    }
}

/// Offset of the last word "failed" in `segment` that ends the expression.
fn last_failed(segment: &str) -> Option<usize> {
    let b = segment.as_bytes();
    memmem::rfind_iter(b, "failed").find(|&i| {
        let before_ok = i == 0 || !b[i - 1].is_ascii_alphanumeric();
        let after_ok = !b.get(i + 6).is_some_and(|c| c.is_ascii_alphanumeric());
        before_ok && after_ok
    })
}

/// Reduces the text between "Assertion" and "failed" to the expression the device printed.
fn clean_expression(raw: &str) -> Option<String> {
    let mut s = unescape_markdown(raw);
    // "**Assertion** `x` **failed**": emphasis glued to the two words belongs to them.
    let glued_front = s.len() - s.trim_start_matches(['*', '_']).len();
    s.drain(..glued_front);
    let kept = s.trim_end_matches(['*', '_']).len();
    s.truncate(kept);
    let mut t = s.as_str();
    loop {
        let before = t.len();
        t = t.trim();
        for (open, close) in [
            ("**", "**"),
            ("__", "__"),
            ("*", "*"),
            ("_", "_"),
            ("'", "'"),
        ] {
            if t.len() >= open.len() + close.len() && t.starts_with(open) && t.ends_with(close) {
                t = &t[open.len()..t.len() - close.len()];
            }
        }
        if let Some(inner) = t
            .strip_prefix('\u{2018}')
            .and_then(|x| x.strip_suffix('\u{2019}'))
        {
            t = inner;
        }
        if t.starts_with('`') {
            let inner = t.trim_start_matches('`');
            // Closed by backticks, or by a quote as glibc's "`expr'" does.
            t = if inner.ends_with('`') {
                inner.trim_end_matches('`')
            } else {
                inner
                    .strip_suffix('\'')
                    .or_else(|| inner.strip_suffix('\u{2019}'))
                    .unwrap_or(inner)
            };
        }
        if t.len() == before {
            break;
        }
    }
    let collapsed = t.split_whitespace().collect::<Vec<_>>().join(" ");
    (!collapsed.is_empty()).then_some(collapsed)
}

/// Drops the backslash of a Markdown escape (`\_`, `\*`, `` \` ``, `\[` …).
fn unescape_markdown(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\'
            && chars
                .peek()
                .is_some_and(|n| "`*_[]<>#\\!|{}()".contains(*n))
        {
            continue;
        }
        out.push(c);
    }
    out
}

/// Picks the root-cause family of an assertion: the catalog's site for its expression first,
/// then the built-in families by expression, then by kernel file (built-in, then catalog).
pub fn classify(assertion: &str, kernel_file: Option<&str>) -> (&'static str, &'static str) {
    let name = kernel_file.map(|f| f.split(':').next().unwrap_or(f));
    if let Some(site) = assert_catalog::site_for(assertion, name) {
        return family_hint(site.family);
    }
    for fam in ASSERT_FAMILIES {
        if fam.expression_has.iter().any(|e| assertion.contains(e)) {
            return (fam.category, fam.hint);
        }
    }
    if let Some(name) = name {
        for fam in ASSERT_FAMILIES {
            if fam.kernel_files.contains(&name) {
                return (fam.category, fam.hint);
            }
        }
        if let Some(f) = assert_catalog::family_of_file(name) {
            return family_hint(f);
        }
    }
    ("unknown", UNKNOWN_ASSERT_HINT)
}

/// The family of a device assertion whose expression a headline quotes without the
/// `Assertion `…` failed` frame: in parentheses, a code span or quotation marks ("CUDA
/// device-side assert (srcIndex < srcSelectDimSize) on custom PDB"). Only an expression the
/// catalog of PyTorch's assertion sites knows on its own counts ([`assert_catalog::site_for`]
/// without a file), so a parenthesised aside names nothing.
pub fn family_quoted_in(line: &str) -> Option<(&'static str, &'static str)> {
    /// Spans longer than this are prose, not an expression.
    const LONGEST: usize = 160;
    /// Spans looked at per line: a flood of brackets stays linear.
    const MOST: usize = 16;
    let pairs = [
        ('(', ')'),
        ('`', '`'),
        ('"', '"'),
        ('\'', '\''),
        ('\u{201c}', '\u{201d}'),
    ];
    let mut looked = 0;
    for (open, close) in pairs {
        let mut rest = line;
        while let Some(i) = rest.find(open) {
            let after = &rest[i + open.len_utf8()..];
            let Some(j) = after.find(close) else {
                break;
            };
            let span = after[..j].trim();
            looked += 1;
            if looked > MOST {
                return None;
            }
            if !span.is_empty() && span.len() <= LONGEST {
                if let Some(site) = assert_catalog::site_for(span, None) {
                    return Some(family_hint(site.family));
                }
            }
            rest = &after[j + close.len_utf8()..];
        }
    }
    None
}

/// The family a device assertion's own message names, for an expression that names none
/// (PaddlePaddle prints ``Assertion `false` failed.`` or the bare condition, then its
/// `PADDLE_ENFORCE` sentence: "Variable value (label) of OP(fluid.layers.cross_entropy)
/// expected `>= 0 and < %ld`, but got %ld. Please check label value.", "… (input) of
/// OP(fluid.layers.embedding) expected `>= 0 and < %ld` …. Please check input value." in
/// paddle/phi/kernels/gpu and paddle/fluid/operators). A range check on a label is a target
/// outside the classes; one on an input or index is an index out of bounds.
fn family_of_message(message: &str) -> Option<&'static str> {
    // Only the kernel's own sentence: text a later message put on the same line does not count.
    let m = message
        .split(['\n', '\r'])
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    // PADDLE_ASSERT_MSG's message in parentheses: "(The label is out of the range. 1)".
    let range_check = ((m.contains("expected >= 0") || m.contains("expected to be"))
        && m.contains("please check"))
        || (m.trim_start().starts_with('(') && m.contains("out of the range"));
    if !range_check {
        return None;
    }
    if m.contains("label") {
        Some("nll_target_out_of_range")
    } else if m.contains("index") || m.contains("(input)") || m.contains("input value") {
        Some("index_out_of_bounds")
    } else {
        None
    }
}

/// A family's name and hint: the built-in table's hint for its own families, else the catalog's.
fn family_hint(family: &'static str) -> (&'static str, &'static str) {
    if let Some(b) = ASSERT_FAMILIES.iter().find(|f| f.category == family) {
        return (b.category, b.hint);
    }
    match assert_catalog::family(family) {
        Some(f) => (f.name, f.hint),
        None => ("unknown", UNKNOWN_ASSERT_HINT),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_code_assertions_are_not_device_asserts() {
        // glibc's assert in LLVM inside Triton's compiler (published in triton-lang/triton#7244).
        let host = "python: /root/.triton/llvm/llvm-a66376b0-almalinux-x64/include/llvm/ADT/SmallVector.h:295: const_reference llvm::SmallVectorTemplateCommon<long>::operator[](size_type) const [T = long]: Assertion 'idx < size()' failed.";
        assert_eq!(parse(host), None);
        // The same shape from a kernel source, a catalog header or with block and thread stays.
        for device in [
            "/pytorch/aten/src/ATen/native/cuda/Loss.cu:242: nll_loss_forward_reduce_cuda_kernel_2d: Assertion `t >= 0 && t < n_classes` failed.",
            "/pytorch/aten/src/ATen/native/cuda/DistributionTemplates.h:591: operator(): Assertion `0 <= p4 && p4 <= 1` failed.",
            "my_ext.cpp:12: kern: block: [0,0,0], thread: [1,0,0] Assertion `i < n` failed.",
            "Assertion `srcIndex < srcSelectDimSize` failed.",
        ] {
            assert!(parse(device).is_some(), "{device}");
        }
    }

    fn get(line: &str) -> (Option<String>, String, String) {
        match parse(line) {
            Some(Evidence::KernelAssert {
                kernel_file,
                assertion,
                category,
                ..
            }) => (kernel_file, assertion, category.into_owned()),
            other => panic!("not an assert: {other:?}"),
        }
    }

    #[test]
    fn aten_line_with_windows_path() {
        let (f, a, c) = get(
            r"D:\a\pytorch\aten\src\ATen\native\cuda\NLLLoss2d.cu:106: block: [1,0,0], thread: [3,0,0] Assertion `t >= 0 && t < n_classes` failed.",
        );
        assert_eq!(f.as_deref(), Some("NLLLoss2d.cu:106"));
        assert_eq!(a, "t >= 0 && t < n_classes");
        assert_eq!(c, "nll_target_out_of_range");
    }

    #[test]
    fn nested_backticks_keep_the_whole_expression() {
        let (_, a, c) = get("Distributions.cu:9: _assert_async_cuda_kernel: block: [0,0,0], thread: [0,0,0] Assertion `probability tensor contains either `inf`, `nan` or element < 0` failed.");
        assert_eq!(
            a,
            "probability tensor contains either `inf`, `nan` or element < 0"
        );
        assert_eq!(c, "multinomial_invalid_probability");
    }

    #[test]
    fn hip_device_side_assertion() {
        // LLVM's AMDGPU device libc (`__assert_fail`): "%s:%u: %s: Device-side assertion `%s'
        // failed.\n", from a .cpp or .hip source and without block or thread.
        let line = "kernels.hip:88: void scale(float*, int): Device-side assertion `i < n' failed.";
        let (f, a, c) = get(line);
        assert_eq!(f.as_deref(), Some("kernels.hip:88"));
        assert_eq!(a, "i < n");
        assert_eq!(c, "custom_kernel_assert");
        let (f, a, _) = get(
            "main.cpp:50: void k(const float *__restrict, int): Device-side assertion `0' failed.",
        );
        assert_eq!((f.as_deref(), a.as_str()), (Some("main.cpp:50"), "0"));
        assert_eq!(parse_all(&format!("{line} {line}")).len(), 2);
        // glibc's host assert in the same kind of file stays host code.
        assert!(parse("main.cpp:50: int main(): Assertion `argc > 1' failed.").is_none());
    }

    #[test]
    fn expression_glued_to_both_words() {
        // A rendered title that lost the backticks and the spaces around them, in PaddlePaddle's
        // printf shape; the enforce sentence still names the family.
        let line = "Error: /paddle/phi/kernels/gpu/loss_kernel.cu:77 Assertionfalsefailed. The value of label expected >= 0 and < 10, or == -100, but got 12. Please check label value.";
        let (f, a, c) = get(line);
        assert_eq!(f.as_deref(), Some("loss_kernel.cu:77"));
        assert_eq!(a, "false");
        assert_eq!(c, "nll_target_out_of_range");
        // Not the shape: "AssertionError" and a glued word elsewhere are no assertions.
        assert!(parse("AssertionError: check failed").is_none());
        assert!(parse("see foo.cu:12 and the Assertionsfailed list").is_none());
        assert!(parse("Assertionfalsefailed.").is_none());
    }

    #[test]
    fn inductor_bounds_message_alone() {
        let (f, a, c) = get("index out of bounds: 0 <= tmp4 < libdevice.trunc(0.12*(ks0.to(tl.float64))).to(tl.int32)");
        assert_eq!(f, None);
        assert_eq!(a, "index out of bounds: 0 <= tmp4 < libdevice.trunc(0.12*(ks0.to(tl.float64))).to(tl.int32)");
        assert_eq!(c, "index_out_of_bounds");
        let (_, a, _) = get("`index out of bounds: 0 <= tmp12 < ks1`  ");
        assert_eq!(a, "index out of bounds: 0 <= tmp12 < ks1");
        // Plain English and other checks are not the generated message.
        assert!(parse("index out of bounds: 0 <= i < n").is_none());
    }

    #[test]
    fn printf_form_of_newer_pytorch() {
        // CUDA_KERNEL_ASSERT_PRINTF (c10/macros/Macros.h) at the repeat_interleave site.
        let line = "[CUDA_KERNEL_ASSERT] /pytorch/aten/src/ATen/native/cuda/Repeat.cu:25: compute_cuda_kernel: block: [0,0,0], thread: [0,0,0]: Assertion failed: `result_size == cumsum_ptr[size - 1]`: Invalid input! In `repeat_interleave`, the `output_size` argument (10) must be the same as the sum of the elements in the `repeats` tensor (12).";
        let (f, a, _) = get(line);
        assert_eq!(f.as_deref(), Some("Repeat.cu:25"));
        assert_eq!(a, "result_size == cumsum_ptr[size - 1]");
        assert_eq!(parse_all(line).len(), 1);
    }

    #[test]
    fn triton_kernel_has_no_file() {
        let (f, a, c) = get("unknown:0: unknown: block: [0,0,0], thread: [213,0,0] Assertion `index out of bounds: 0 <= tmp4 < 32000` failed.");
        assert_eq!(f, None);
        assert_eq!(a, "index out of bounds: 0 <= tmp4 < 32000");
        assert_eq!(c, "index_out_of_bounds");
    }

    #[test]
    fn driver_assertion_wording_is_not_a_kernel_assert() {
        assert!(parse("NVRM: nvAssertOkFailedNoLog: Assertion failed: Reset required").is_none());
    }

    #[test]
    fn paddle_enforce_messages_name_the_family() {
        // PADDLE_ENFORCE's sentences in device code (paddle/phi/kernels/gpu/cross_entropy_kernel.cu,
        // embedding kernels).
        let (_, a, c) = get("Error: /paddle/paddle/phi/kernels/gpu/cross_entropy_kernel.cu:1008 Assertion `false` failed. The value of label expected >= 0 and < 10, or == 255, but got 12. Please check label value.");
        assert_eq!(
            (a.as_str(), c.as_str()),
            ("false", "nll_target_out_of_range")
        );
        let (_, _, c) = get("Error: /paddle/paddle/fluid/operators/cross_entropy_op.h:102 Assertion `label >= 0 && label < feature_size_` failed. Variable value (label) of OP(fluid.layers.cross_entropy) expected >= 0 and < 2, but got 5. Please check label value.");
        assert_eq!(c, "nll_target_out_of_range");
        let (_, _, c) = get("Error: /paddle/paddle/phi/kernels/gpu/embedding_kernel.cu:56 Assertion `false` failed. Variable value (input) of OP(fluid.layers.embedding) expected >= 0 and < 100, but got 100. Please check input value.");
        assert_eq!(c, "index_out_of_bounds");
        // A host assert with an unrelated error after it on the same line stays host code.
        assert!(parse("python: /src/tokenizer/vocab.cpp:88: int f(): Assertion `idx < size_' failed. IndexError: list index out of range").is_none());
        // PADDLE_ASSERT_MSG's shape: file and line right before "Assertion", message in
        // parentheses; a header file does not make it host code.
        let (f, a, c) = get("Exception: /paddle/paddle/fluid/operators/some_loss_op.h:77 Assertion `label >= 0 && label < num_classes_` failed (The label is out of the range. 7).");
        assert_eq!(f.as_deref(), Some("some_loss_op.h:77"));
        assert_eq!(a, "label >= 0 && label < num_classes_");
        assert_eq!(c, "nll_target_out_of_range");
        // A title cut after the expression, in the same shape.
        let (f, _, c) = get("训练出错：Error: /paddle/paddle/fluid/operators/some_ce_op.cu:120 Assertion `lbl[i] >= 0 && lbl[i] < n_ || lbl[i] == ignore_`");
        assert_eq!(f.as_deref(), Some("some_ce_op.cu:120"));
        assert_eq!(c, "nll_target_out_of_range");
        // Without the file and line right before it, or without Paddle's label, a cut assertion
        // is nothing.
        assert!(parse("see the Assertion `x < n` in the docs").is_none());
        assert!(parse("// see kernels/softmax.cuh:120 Assertion `tid < blockDim.x`").is_none());
        // In the device's own shape, a title cut after the expression or inside "failed".
        for cut in ["", " f", " fail", " faile"] {
            let line = format!("/opt/conda/conda-bld/pytorch_1708025847130/work/aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], thread: [14,0,0] Assertion `t >= 0 && t < n_classes`{cut}");
            let (f, a, c) = get(&line);
            assert_eq!(f.as_deref(), Some("Loss.cu:250"), "{line}");
            assert_eq!(a, "t >= 0 && t < n_classes");
            assert_eq!(c, "nll_target_out_of_range");
        }
        assert!(parse(
            "Loss.cu:250: k: block: [0,0,0], thread: [14,0,0] Assertion `t >= 0` fails sometimes"
        )
        .is_none());
        // A message that checks no range names nothing.
        let (_, _, c) = get("Error: /paddle/paddle/phi/kernels/gpu/foo_kernel.cu:12 Assertion `false` failed. Something else went wrong.");
        assert_eq!(c, "unknown");
    }

    #[test]
    fn unknown_family_falls_back() {
        // In a kernel file of PyTorch's catalog, an assertion the catalog lacks stays unknown.
        let (_, _, c) = get(
            "/pytorch/aten/src/ATen/native/cuda/Loss.cu:1: k: block: [0,0,0], thread: [0,0,0] Assertion `x > 3` failed.",
        );
        assert_eq!(c, "unknown");
        // Outside PyTorch's kernels (an extension, a library, the user's own) it is the
        // custom kernel's check.
        for line in [
            "Foo.cu:1: k: block: [0,0,0], thread: [0,0,0] Assertion `x > 3` failed.",
            "/tmp/pip-build/ext/csrc/cuda/segment_csr_cuda.cu:58: void seg_kernel(const float *, float *): block: [2,0,0], thread: [9,0,0] Assertion `lo <= hi` failed.",
        ] {
            let (_, _, c) = get(line);
            assert_eq!(c, "custom_kernel_assert", "{line}");
        }
        // Another framework's kernel file names the lookup its bounds check guards.
        for (line, want) in [
            ("/build/mindspore/ccsrc/plugin/device/gpu/kernel/cuda_impl/cuda_ops/gather_grad.cu:35: GatherGradKernel: block: [1,0,0], thread: [2,0,0] Assertion `j_read < output_shape.shape[dim]` failed.", "scatter_gather_index"),
            ("/src/ops/sparse_embedding_lookup.cu:80: k: block: [0,0,0], thread: [1,0,0] Assertion `id < vocab_size` failed.", "embedding_index"),
            // Not an index against a size, or a file that names no lookup: the extension's own.
            ("/src/ops/gather_utils.cu:12: k: block: [0,0,0], thread: [1,0,0] Assertion `ptr != nullptr` failed.", "custom_kernel_assert"),
            ("/home/u/proj/csrc/moe_gather.cu:45: k: block: [0,0,0], thread: [1,0,0] Assertion `blockDim.x <= 1024` failed.", "custom_kernel_assert"),
            ("/src/gatherv_allgather.cu:12: k: block: [0,0,0], thread: [1,0,0] Assertion `offset < total_size` failed.", "custom_kernel_assert"),
            ("dgl/src/array/cuda/uvm/../array_index_select.cuh:23: void dgl::aten::impl::IndexSelectSingleKernel(const DType *, const IdType *, signed long, signed long, DType *) [with DType = signed long; IdType = signed long]: block: [0,0,0], thread: [735,0,0] Assertion `index[tx] >= 0 && index[tx] < arr_len` failed.", "index_out_of_bounds"),
            ("../include/xgboost/span.h:540: T &xgboost::common::Span<T, Extent>::operator[](unsigned long) const [with T = const xgboost::FeatureType, Extent = 18446744073709551615UL]: block: [166,0,0], thread: [0,0,0] Assertion `((_idx) < (size()))` failed.", "index_out_of_bounds"),
            // PyTorch's own kernels stay unknown where the catalog lacks the site.
            ("/pytorch/aten/src/ATen/native/sparse/ValidateCompressedIndicesCommon.h:44: _assert: block: [0,0,0], thread: [3,0,0] Assertion `cond && message` failed.", "unknown"),
            ("C:\\pytorch\\aten\\src\\ATen\\native\\cuda\\Bucketization.cu:52: k: block: [0,0,0], thread: [3,0,0] Assertion `x < y` failed.", "unknown"),
        ] {
            let (_, _, c) = get(line);
            assert_eq!(c, want, "{line}");
        }
        // Without a file there is nothing to tell it by.
        let (_, _, c) = get("block: [0,0,0], thread: [0,0,0] Assertion `x > 3` failed.");
        assert_eq!(c, "unknown");
    }

    /// Kernel file, assertion, category and thread of one parsed site.
    type Got = (Option<String>, String, String, Option<[u32; 3]>);

    fn all(line: &str) -> Vec<Got> {
        parse_all(line)
            .into_iter()
            .map(|e| match e {
                Evidence::KernelAssert {
                    kernel_file,
                    assertion,
                    category,
                    thread,
                    ..
                } => (kernel_file, assertion, category.into_owned(), thread),
                other => panic!("not an assert: {other:?}"),
            })
            .collect()
    }

    // Expression from PyTorch's DistributionTemplates.h (bernoulli_tensor_cuda_kernel), in the line
    // shape CUDA prints; the same text is quoted in public reports of torch.bernoulli on NaN input.
    #[test]
    fn bernoulli_probability() {
        let (_, a, c) = get("/pytorch/aten/src/ATen/native/cuda/DistributionTemplates.h:595: operator(): block: [0,0,0], thread: [5,0,0] Assertion `0 <= p4 && p4 <= 1` failed.");
        assert_eq!(a, "0 <= p4 && p4 <= 1");
        assert_eq!(c, "bernoulli_invalid_probability");
        // Older builds: the same check in Distributions.cu, which alone would read as multinomial.
        let (_, _, c) = get("/pytorch/aten/src/ATen/native/cuda/Distributions.cu:305: block: [0,0,0], thread: [0,0,0] Assertion `0 <= p1 && p1 <= 1` failed.");
        assert_eq!(c, "bernoulli_invalid_probability");
    }

    #[test]
    fn an_assertion_printed_without_its_expression() {
        let line = "/src/lib/THC/THCTensorIndex.cu:275: void indexSelectSmallIndex(TensorInfo<T, IndexType>, long) [with T = float, IndexType = unsigned int]: block: [0,0,0], thread: [1,0,0] Assertion  failed.";
        match parse(line) {
            Some(Evidence::KernelAssert {
                assertion,
                kernel_file,
                category,
                ..
            }) => {
                assert_eq!(assertion, "");
                assert_eq!(kernel_file.as_deref(), Some("THCTensorIndex.cu:275"));
                assert_eq!(category, "embedding_index");
            }
            other => panic!("{other:?}"),
        }
        for (_, family) in INDEX_KERNELS {
            assert_eq!(family_hint(family).0, family);
        }
        // Without the device's block and thread, "Assertion failed." is anyone's.
        assert!(parse("main.cpp:12: Assertion  failed.").is_none());
    }

    // PyTorch's IndexKernel.cu take/put kernel (the WrapIndexOp check of THC's THCTensorIndex.cu).
    #[test]
    fn take_put_index() {
        let (_, a, c) = get("/pytorch/aten/src/ATen/native/cuda/IndexKernel.cu:256: operator(): block: [0,0,0], thread: [1,0,0] Assertion `idx < numel && idx >= -numel && \"cuda_take_put_kernel() index out of bounds\"` failed.");
        assert_eq!(
            a,
            "idx < numel && idx >= -numel && \"cuda_take_put_kernel() index out of bounds\""
        );
        assert_eq!(c, "take_put_index");
        let (_, _, c) = get("/pytorch/aten/src/THC/THCTensorIndex.cu:394: block: [0,0,0], thread: [3,0,0] Assertion `idx < size && idx >= -size` failed.");
        assert_eq!(c, "take_put_index");
    }

    // https://github.com/KevinMusgrave/pytorch-metric-learning/issues/172
    #[test]
    fn embedding_bag() {
        let (f, a, c) = get("/pytorch/aten/src/ATen/native/cuda/EmbeddingBag.cu:57: EmbeddingBag_updateOutputKernel: block: [863,0,0], thread: [20,7,0] Assertion `end >= begin` failed.");
        assert_eq!(f.as_deref(), Some("EmbeddingBag.cu:57"));
        assert_eq!(a, "end >= begin");
        assert_eq!(c, "embedding_bag_offsets");
    }

    // PyTorch's Repeat.cu (compute_cuda_kernel of repeat_interleave).
    #[test]
    fn repeat_interleave() {
        let (_, _, c) = get("/pytorch/aten/src/ATen/native/cuda/Repeat.cu:27: compute_cuda_kernel: block: [0,0,0], thread: [0,0,0] Assertion `repeat >= 0` failed.");
        assert_eq!(c, "repeat_interleave_repeats");
    }

    // Kernel files without a catalogued expression still name their family.
    #[test]
    fn family_by_kernel_file() {
        for (file, fam) in [
            ("LossCTC.cu", "ctc_loss_target"),
            ("SummaryOps.cu", "histc_range"),
            ("SortingRadixSelect.cuh", "sort_scan_internal"),
            ("FractionalMaxPool2d.cu", "fractional_max_pool_samples"),
        ] {
            let line = format!(
                "/x/{file}:10: k: block: [0,0,0], thread: [0,0,0] Assertion `some_new_check` failed."
            );
            assert_eq!(get(&line).2, fam, "{file}");
        }
        // THC's sort kernel asserts `false`: only its file says which family.
        let (_, _, c) = get("/pytorch/aten/src/THC/generic/THCTensorSort.cu:104: block: [0,0,0], thread: [0,0,0] Assertion `false` failed.");
        assert_eq!(c, "sort_scan_internal");
    }

    // https://github.com/bubbliiiing/yolox-pytorch/issues/121 (THCUNN, templated function field).
    #[test]
    fn thc_bce_with_template_signature() {
        let (f, a, c) = get("/tmp/pip-req-build-p5q91txh/aten/src/THCUNN/BCECriterion.cu:57: void bce_updateOutput_no_reduce_functor<Dtype, Acctype>::operator()(const Dtype *, const Dtype *, Dtype *) [with Dtype = float, Acctype = float]: block: [305,0,0], thread: [158,0,0] Assertion `*input >= 0. && *input <= 1.` failed.");
        assert_eq!(f.as_deref(), Some("BCECriterion.cu:57"));
        assert_eq!(a, "*input >= 0. && *input <= 1.");
        assert_eq!(c, "bce_input_range");
    }

    // Quote styles seen in public reports: glibc's "`x'", THC-era "'x'" (e.g. "Assertion
    // 't >= 0 && t < n_classes' failed" quoted in troubleshooting notes), and none at all, as in
    // the title of https://github.com/ThetaCursed/clean-ui/issues/4 after Markdown ate the code span.
    #[test]
    fn quote_styles_give_one_text() {
        let want = "t >= 0 && t < n_classes";
        for line in [
            "ClassNLLCriterion.cu:106: block: [0,0,0], thread: [0,0,0] Assertion `t >= 0 && t < n_classes` failed.",
            "ClassNLLCriterion.cu:106: block: [0,0,0], thread: [0,0,0] Assertion `t >= 0 && t < n_classes' failed.",
            "ClassNLLCriterion.cu:106: block: [0,0,0], thread: [0,0,0] Assertion 't >= 0 && t < n_classes' failed.",
            "ClassNLLCriterion.cu:106: block: [0,0,0], thread: [0,0,0] Assertion t >= 0 && t < n_classes failed.",
            "ClassNLLCriterion.cu:106: block: [0,0,0], thread: [0,0,0] Assertion ``t >= 0 && t < n_classes`` failed.",
        ] {
            let (f, a, c) = get(line);
            assert_eq!(a, want, "{line}");
            assert_eq!(c, "nll_target_out_of_range");
            assert_eq!(f.as_deref(), Some("ClassNLLCriterion.cu:106"));
        }
        let (_, a, c) = get(
            "Assertion -sizes[i] <= index && index < sizes[i] && \"index out of bounds\" failed",
        );
        assert_eq!(
            a,
            "-sizes[i] <= index && index < sizes[i] && \"index out of bounds\""
        );
        assert_eq!(c, "index_out_of_bounds");
    }

    // Markdown that ate the inner backticks and quotes: the catalog restores its own spelling.
    #[test]
    fn markdown_eaten_text_is_restored_from_the_catalog() {
        let (_, a, c) = get("/pytorch/aten/src/ATen/native/cuda/TensorCompare.cu:112: _assert_async_cuda_kernel: block: [0,0,0], thread: [0,0,0] Assertion probability tensor contains either inf, nan or element < 0 failed.");
        assert_eq!(
            a,
            "probability tensor contains either `inf`, `nan` or element < 0"
        );
        assert_eq!(c, "multinomial_invalid_probability");
        let (_, a, _) = get("IndexKernel.cu:92: operator(): block: [0,0,0], thread: [0,0,0] Assertion `-sizes[i] <= index && index < sizes[i] && index out of bounds` failed.");
        assert_eq!(
            a,
            "-sizes[i] <= index && index < sizes[i] && \"index out of bounds\""
        );
        // Underscores eaten as emphasis: "cur_target ... cur_target" rendered as italics.
        let (_, a, _) = get("ClassNLLCriterion.cu:57: block: [0,0,0], thread: [0,0,0] Assertion curtarget >= 0 && cur_target < n_classes failed.");
        assert_eq!(a, "cur_target >= 0 && cur_target < n_classes");
    }

    // https://github.com/KaihuaTang/Scene-Graph-Benchmark.pytorch/issues/207: a paste that lost
    // its newlines, one site per failing thread on a single line.
    #[test]
    fn flattened_line_yields_every_site() {
        let line = "/tmp/pip-req-build-ufslq_a9/aten/src/ATen/native/cuda/IndexKernel.cu:60: lambda ->auto::operator()(int)->auto: block: [36,0,0], thread: [104,0,0] Assertion `index >= -sizes[i] && index < sizes[i] && \"index out of bounds\"` failed. /tmp/pip-req-build-ufslq_a9/aten/src/ATen/native/cuda/IndexKernel.cu:60: lambda ->auto::operator()(int)->auto: block: [36,0,0], thread: [105,0,0] Assertion `index >= -sizes[i] && index < sizes[i] && \"index out of bounds\"` failed. /tmp/pip-req-build-ufslq_a9/aten/src/ATen/native/cuda/EmbeddingBag.cu:57: k: block: [36,0,0], thread: [106,0,0] Assertion `end >= begin` failed.";
        let got = all(line);
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].3, Some([104, 0, 0]));
        assert_eq!(got[1].3, Some([105, 0, 0]));
        assert_eq!(got[2].3, Some([106, 0, 0]));
        assert_eq!(
            got[1].1,
            "index >= -sizes[i] && index < sizes[i] && \"index out of bounds\""
        );
        assert_eq!(got[2].0.as_deref(), Some("EmbeddingBag.cu:57"));
        assert_eq!(got[2].2, "embedding_bag_offsets");
    }

    #[test]
    fn assertion_error_and_msvc_wording_are_not_sites() {
        assert!(parse("AssertionError: shapes differ, check failed").is_none());
        assert!(parse("Assertion failed: x, file a.cpp, line 3").is_none());
    }

    #[test]
    fn a_flood_of_sites_stays_linear() {
        let one = "IndexKernel.cu:92: operator(): block: [0,0,0], thread: [1,0,0] Assertion `-sizes[i] <= index && index < sizes[i] && \"index out of bounds\"` failed. ";
        let line = one.repeat(20_000);
        let t = std::time::Instant::now();
        assert_eq!(parse_all(&line).len(), 20_000);
        // Generous bound for a debug build on a shared machine; quadratic work would take minutes.
        assert!(t.elapsed().as_secs() < 20, "{:?}", t.elapsed());
        let no_failed = "Assertion `x` ".repeat(50_000);
        let t = std::time::Instant::now();
        assert!(parse_all(&no_failed).is_empty());
        assert!(t.elapsed().as_secs() < 20, "{:?}", t.elapsed());
    }

    mod decorations {
        use super::*;
        use proptest::prelude::*;

        const LINES: &[(&str, &str)] = &[
            ("/pytorch/aten/src/THCUNN/ClassNLLCriterion.cu:105: cunn_ClassNLLCriterion_updateOutput_kernel: block: [0,0,0], thread: [1,0,0] ", "cur_target >= 0 && cur_target < n_classes"),
            ("../aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [109,0,0], thread: [124,0,0] ", "-sizes[i] <= index && index < sizes[i] && \"index out of bounds\""),
            ("/pytorch/aten/src/ATen/native/cuda/TensorCompare.cu:112: _assert_async_cuda_kernel: block: [0,0,0], thread: [0,0,0] ", "probability tensor contains either `inf`, `nan` or element < 0"),
            ("/tmp/x/aten/src/THCUNN/BCECriterion.cu:57: f: block: [305,0,0], thread: [158,0,0] ", "*input >= 0. && *input <= 1."),
            ("k.cu:1: f: block: [0,0,0], thread: [0,0,0] ", "some_uncatalogued_check(x_1) > 0"),
        ];

        /// Writes `expr` as a Markdown source would escape it (`\_`, `\*`, `` \` ``).
        fn md_escape(s: &str) -> String {
            let mut o = String::new();
            for c in s.chars() {
                if matches!(c, '_' | '*' | '`') {
                    o.push('\\');
                }
                o.push(c);
            }
            o
        }

        fn decorate(prefix: &str, expr: &str, d: &[u8; 6]) -> String {
            let quoted = match d[0] % 6 {
                0 => format!("`{expr}`"),
                1 => format!("`{expr}'"),
                2 => format!("``{expr}``"),
                3 => format!("'{expr}'"),
                4 => format!("\\`{}\\`", md_escape(expr)),
                _ => format!("`{expr}`"),
            };
            let (a, f) = match d[1] % 4 {
                0 => ("Assertion", "failed"),
                1 => ("**Assertion**", "**failed**"),
                2 => ("_Assertion_", "_failed_"),
                _ => ("Assertion", "failed"),
            };
            let body = format!("{prefix}{a} {quoted} {f}.");
            let body = match d[2] % 3 {
                0 => body,
                1 => format!("**{body}**"),
                _ => format!("_{body}_"),
            };
            let quote = "> ".repeat(usize::from(d[3] % 3));
            let spaces = " ".repeat(usize::from(d[4] % 3));
            format!("{quote}{spaces}{body}")
        }

        proptest! {
            #[test]
            fn decorated_asserts_give_the_same_text(i in 0usize..LINES.len(), d in any::<[u8; 6]>()) {
                let (prefix, expr) = LINES[i];
                let line = decorate(prefix, expr, &d);
                let got = all(&line);
                prop_assert_eq!(got.len(), 1, "{}", line);
                prop_assert_eq!(&got[0].1, expr, "{}", line);
                prop_assert!(got[0].0.is_some(), "{}", line);
                prop_assert!(got[0].3.is_some(), "{}", line);
            }

            #[test]
            fn flattened_decorated_asserts_are_all_found(
                picks in proptest::collection::vec((0usize..LINES.len(), any::<[u8; 6]>()), 1..6),
                sep in prop::sample::select(vec![" ", "", "  ", "\t", " > "]),
            ) {
                let lines: Vec<String> = picks
                    .iter()
                    .map(|(i, d)| {
                        let mut d = *d;
                        d[3] = 0; // quote markers only at the start of the flattened line
                        decorate(LINES[*i].0, LINES[*i].1, &d)
                    })
                    .collect();
                let line = lines.join(sep);
                let got = all(&line);
                prop_assert_eq!(got.len(), picks.len(), "{}", line);
                for (g, (i, _)) in got.iter().zip(&picks) {
                    prop_assert_eq!(&g.1, LINES[*i].1, "{}", line);
                }
            }
        }
    }

    /// The NVIDIA kernel driver's own assertions run on the CPU.
    #[test]
    fn driver_assertions_are_not_kernel_asserts() {
        assert_eq!(
            parse("[ 812.000001] NVRM: nvAssertOkFailedNoLog: Assertion failed: Out of memory [NV_ERR_NO_MEMORY] (0x00000051) returned from status @ kernel_gsp.c:4615"),
            None
        );
        assert_eq!(
            parse("NVRM: nvAssertFailedNoLog: Assertion failed: 0 @ gpu_mgr.c:296"),
            None
        );
    }
}
