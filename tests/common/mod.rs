//! Shared helpers for integration tests: the real binary, temp dirs, the corpus, required tools.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Path of the `assertwatch` binary cargo built for these tests.
pub fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_assertwatch"))
}

/// Runs the binary with `args` and optional stdin bytes.
pub fn run(args: &[&str], stdin: Option<&[u8]>) -> Output {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = Command::new(bin())
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn assertwatch");
    if let Some(data) = stdin {
        let mut s = child.stdin.take().expect("stdin");
        let data = data.to_vec();
        std::thread::spawn(move || {
            let _ = s.write_all(&data);
        });
    }
    child.wait_with_output().expect("wait assertwatch")
}

/// The shared real-world corpus (`$ASSERTWATCH_CORPUS`, else `../shared/corpus` beside the repo).
pub fn corpus_dir() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("ASSERTWATCH_CORPUS") {
        return Some(PathBuf::from(p));
    }
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus");
    p.is_dir().then_some(p)
}

/// True when running under CI, where a missing tool or fixture is a failure, not a skip.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// Finds `name` on PATH; under CI a missing tool panics, elsewhere the caller skips.
pub fn require_tool(name: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        assert!(
            !in_ci(),
            "{name} is required under CI=true but is not on PATH"
        );
        eprintln!("SKIP: {name} not found on PATH (set CI=true to make this a failure)");
    }
    found
}

/// Parses JSON Lines output.
pub fn jsonl(out: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(out)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON line {l:?}: {e}")))
        .collect()
}
