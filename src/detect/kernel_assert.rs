//! Parses the line CUDA's device `assert` prints once per failing thread.
//!
//! The CUDA C Programming Guide ("Assertion") documents the shape: the source file and line,
//! the function, `block: [x,y,z], thread: [x,y,z]`, then ``Assertion `expr` failed.``. The function
//! field varies (`operator()`, a templated THC signature, `(null)`, Triton's `unknown`), so the
//! parser anchors on the assertion and the `File.cu:LINE` token, never on the function.

use super::rules::{ASSERT_FAMILIES, UNKNOWN_ASSERT_HINT};
use crate::model::Evidence;
use regex::Regex;
use std::sync::OnceLock;

struct Patterns {
    assertion: Regex,
    kernel_file: Regex,
    block_thread: Regex,
}

fn patterns() -> &'static Patterns {
    static P: OnceLock<Patterns> = OnceLock::new();
    P.get_or_init(|| Patterns {
        // Greedy up to the last "` failed": some expressions contain backticks themselves
        // (`probability tensor contains either `inf`, `nan` or element < 0`).
        assertion: Regex::new(r"Assertion `(.*)` failed").expect("static regex"),
        kernel_file: Regex::new(r"([A-Za-z0-9_+\-.]+\.(?:cu|cuh|h|hpp|cpp|cc|c)):(\d+)")
            .expect("static regex"),
        block_thread: Regex::new(
            r"block: \[(\d+),\s*(\d+),\s*(\d+)\],\s*thread: \[(\d+),\s*(\d+),\s*(\d+)\]",
        )
        .expect("static regex"),
    })
}

/// Returns the evidence of a kernel assertion line, or `None` if the line is not one.
pub fn parse(line: &str) -> Option<Evidence> {
    let p = patterns();
    let caps = p.assertion.captures(line)?;
    let whole = caps.get(0)?;
    let assertion = caps.get(1)?.as_str().to_owned();
    let prefix = &line[..whole.start()];
    let kernel_file = p
        .kernel_file
        .captures(prefix)
        .map(|c| format!("{}:{}", &c[1], &c[2]));
    let (block, thread) = match p.block_thread.captures(prefix) {
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
    let (category, hint) = classify(&assertion, kernel_file.as_deref());
    Some(Evidence::KernelAssert {
        kernel_file,
        assertion,
        block,
        thread,
        category: category.into(),
        hint: hint.into(),
    })
}

/// Picks the root-cause family of an assertion from its expression, then its kernel file.
pub fn classify(assertion: &str, kernel_file: Option<&str>) -> (&'static str, &'static str) {
    for fam in ASSERT_FAMILIES {
        if fam.expression_has.iter().any(|e| assertion.contains(e)) {
            return (fam.category, fam.hint);
        }
    }
    if let Some(file) = kernel_file {
        let name = file.split(':').next().unwrap_or(file);
        for fam in ASSERT_FAMILIES {
            if fam.kernel_files.contains(&name) {
                return (fam.category, fam.hint);
            }
        }
    }
    ("unknown", UNKNOWN_ASSERT_HINT)
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn unknown_family_falls_back() {
        let (_, _, c) =
            get("Foo.cu:1: k: block: [0,0,0], thread: [0,0,0] Assertion `x > 3` failed.");
        assert_eq!(c, "unknown");
    }
}
