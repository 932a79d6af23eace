//! Python traceback frames, and which of them is the job's own code.
//!
//! The deepest frame of user code is what a person opens first: frames under site-packages,
//! dist-packages, the standard library or torch itself are the framework's, not the job's.

use crate::model::Evidence;
use regex::Regex;
use std::sync::OnceLock;

struct Patterns {
    frame: Regex,
    cell: Regex,
    library: Regex,
}

fn patterns() -> &'static Patterns {
    static P: OnceLock<Patterns> = OnceLock::new();
    P.get_or_init(|| Patterns {
        frame: Regex::new(r#"File "([^"]{1,1024})", line (\d{1,9})(?:, in ([^\s]{1,256}))?"#)
            .expect("static regex"),
        // Jupyter / IPython: `Cell In[8], line 2` (VS Code renders the number as a link).
        cell: Regex::new(r"Cell In\s?\[(\d{1,9})\],\s*\[?line (\d{1,9})").expect("static regex"),
        library: Regex::new(
            r"(?i)(?:site-packages|dist-packages|[/\\]lib[/\\]python\d|[/\\]lib[/\\]site|[/\\]torch[/\\]|<frozen|^<string>$|^<stdin>$|[/\\]Lib[/\\])",
        )
        .expect("static regex"),
    })
}

/// Is `file` the job's code rather than a library's?
pub fn is_user_code(file: &str) -> bool {
    !patterns().library.is_match(file)
}

/// Parses one frame line (`File "...", line N, in fn` or a notebook cell reference).
pub fn parse_frame(line: &str) -> Option<Evidence> {
    let p = patterns();
    if let Some(c) = p.frame.captures(line) {
        let file = c.get(1)?.as_str().to_owned();
        let line_no = c.get(2)?.as_str().parse().ok()?;
        let user_code = is_user_code(&file);
        return Some(Evidence::Frame {
            file,
            line: line_no,
            function: c.get(3).map(|m| m.as_str().to_owned()),
            user_code,
        });
    }
    let c = p.cell.captures(line)?;
    Some(Evidence::Frame {
        file: format!("Cell In[{}]", &c[1]),
        line: c.get(2)?.as_str().parse().ok()?,
        function: None,
        user_code: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_frames_are_not_user_code() {
        assert!(!is_user_code(
            "/usr/local/lib/python3.7/dist-packages/torch/_tensor.py"
        ));
        assert!(!is_user_code(
            r"C:\Users\u\anaconda3\lib\site-packages\torch\cuda\__init__.py"
        ));
        assert!(is_user_code("train.py"));
        assert!(is_user_code(r"D:\Project\main.py"));
    }

    #[test]
    fn parses_frames_with_prefixes() {
        match parse_frame(r#"[rank0]:   File "/w/train.py", line 88, in <module>"#) {
            Some(Evidence::Frame {
                file,
                line,
                function,
                user_code,
            }) => {
                assert_eq!((file.as_str(), line, user_code), ("/w/train.py", 88, true));
                assert_eq!(function.as_deref(), Some("<module>"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn parses_notebook_cells() {
        match parse_frame("Cell In[8], [line 2](vscode-notebook-cell:?execution_count=8&line=2)") {
            Some(Evidence::Frame { file, line, .. }) => {
                assert_eq!((file.as_str(), line), ("Cell In[8]", 2))
            }
            other => panic!("{other:?}"),
        }
    }
}
