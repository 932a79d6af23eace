//! Which paths the sources name right now: glob expansion of the include patterns minus the
//! excludes, and the directories inotify should watch to notice changes early.
//!
//! Like Vector's `paths_provider`, this is recomputed on every rescan and is the ground truth for
//! which files exist; nothing here keeps state between scans.

use std::collections::HashSet;
use std::path::{Component, Path, PathBuf};

use glob::{MatchOptions, Pattern};

use crate::{TailError, TailSource};

const MATCH: MatchOptions = MatchOptions {
    case_sensitive: true,
    require_literal_separator: true,
    require_literal_leading_dot: false,
};

#[derive(Debug)]
struct CompiledSource {
    include: Vec<String>,
    exclude_path: Vec<Pattern>,
    exclude_name: Vec<Pattern>,
}

/// The compiled patterns of all sources.
#[derive(Debug)]
pub(crate) struct Matcher {
    sources: Vec<CompiledSource>,
}

/// A glob match that could not be listed (for example a directory without read permission).
#[derive(Debug)]
pub(crate) struct ScanError {
    pub(crate) source: usize,
    pub(crate) path: PathBuf,
    pub(crate) error: String,
}

fn compile(source: &TailSource, pattern: &str) -> Result<Pattern, TailError> {
    Pattern::new(pattern).map_err(|error| TailError::Pattern {
        source_name: source.name.clone(),
        pattern: pattern.to_owned(),
        error,
    })
}

impl Matcher {
    /// # Errors
    /// [`TailError::Pattern`] naming the source and the pattern that does not parse.
    pub(crate) fn new(sources: &[TailSource]) -> Result<Self, TailError> {
        let mut out = Vec::with_capacity(sources.len());
        for s in sources {
            for p in &s.include {
                compile(s, p)?;
            }
            let mut exclude_path = Vec::new();
            let mut exclude_name = Vec::new();
            for p in &s.exclude {
                let pat = compile(s, p)?;
                if p.contains('/') {
                    exclude_path.push(pat);
                } else {
                    exclude_name.push(pat);
                }
            }
            out.push(CompiledSource {
                include: s.include.clone(),
                exclude_path,
                exclude_name,
            });
        }
        Ok(Self { sources: out })
    }

    fn excluded(src: &CompiledSource, path: &Path) -> bool {
        if src
            .exclude_path
            .iter()
            .any(|p| p.matches_path_with(path, MATCH))
        {
            return true;
        }
        match path.file_name().and_then(|n| n.to_str()) {
            Some(name) => src.exclude_name.iter().any(|p| p.matches_with(name, MATCH)),
            None => false,
        }
    }

    /// Expands every include pattern. A path matched by several sources belongs to the first;
    /// the result is sorted by path. Listing failures are appended to `errors`.
    pub(crate) fn expand(&self, errors: &mut Vec<ScanError>) -> Vec<(PathBuf, usize)> {
        let mut seen = HashSet::new();
        let mut out = Vec::new();
        for (i, src) in self.sources.iter().enumerate() {
            for pattern in &src.include {
                let Ok(paths) = glob::glob_with(pattern, MATCH) else {
                    continue; // validated in `new`
                };
                for entry in paths {
                    match entry {
                        Ok(p) => {
                            if !Self::excluded(src, &p) && seen.insert(p.clone()) {
                                out.push((p, i));
                            }
                        }
                        Err(e) => errors.push(ScanError {
                            source: i,
                            path: e.path().to_owned(),
                            error: e.error().to_string(),
                        }),
                    }
                }
            }
        }
        out.sort();
        out
    }

    /// Directories to watch with inotify: for each include pattern, the part before the first
    /// wildcard, and whether files can appear below it at more than one level.
    pub(crate) fn roots(&self) -> Vec<(PathBuf, bool)> {
        let mut out: Vec<(PathBuf, bool)> = Vec::new();
        for src in &self.sources {
            for p in &src.include {
                let r = root_of(p);
                if !out.contains(&r) {
                    out.push(r);
                }
            }
        }
        out
    }
}

fn has_wildcard(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

/// The non-wildcard directory prefix of `pattern`, and whether a wildcard sits in a directory
/// component (then the watch must be recursive).
pub(crate) fn root_of(pattern: &str) -> (PathBuf, bool) {
    let path = Path::new(pattern);
    let comps: Vec<Component> = path.components().collect();
    let first_wild = comps
        .iter()
        .position(|c| has_wildcard(&c.as_os_str().to_string_lossy()));
    let (prefix, recursive) = match first_wild {
        Some(i) => (&comps[..i], i + 1 < comps.len()),
        None => (&comps[..comps.len().saturating_sub(1)], false),
    };
    let mut root: PathBuf = prefix.iter().collect();
    if root.as_os_str().is_empty() {
        root = PathBuf::from(".");
    }
    (root, recursive)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn source(include: &[&str], exclude: &[&str]) -> TailSource {
        TailSource {
            name: "t".into(),
            include: include.iter().map(|s| s.to_string()).collect(),
            exclude: exclude.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn include_minus_exclude_first_source_wins() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        for n in ["a.log", "b.log", "b.log.1", "c.log.gz", "skip.log"] {
            fs::write(d.join(n), b"x\n").unwrap();
        }
        let base = d.to_str().unwrap();
        let m = Matcher::new(&[
            source(&[&format!("{base}/*.log")], &[&format!("{base}/skip.log")]),
            source(&[&format!("{base}/*.log*")], &["*.gz"]),
        ])
        .unwrap();
        let mut errors = Vec::new();
        let got: Vec<(String, usize)> = m
            .expand(&mut errors)
            .into_iter()
            .map(|(p, s)| (p.file_name().unwrap().to_str().unwrap().to_owned(), s))
            .collect();
        assert!(errors.is_empty());
        assert_eq!(
            got,
            vec![
                ("a.log".into(), 0),
                ("b.log".into(), 0),
                ("b.log.1".into(), 1),
                ("skip.log".into(), 1),
            ]
        );
    }

    #[test]
    fn star_does_not_cross_directories() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("x/y")).unwrap();
        fs::write(dir.path().join("x/y/deep.log"), b"").unwrap();
        let m =
            Matcher::new(&[source(&[&format!("{}/*.log", dir.path().display())], &[])]).unwrap();
        assert!(m.expand(&mut Vec::new()).is_empty());
    }

    #[test]
    fn bad_pattern_names_source_and_pattern() {
        let e = Matcher::new(&[source(&["/var/log/[.log"], &[])]).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("[.log") && msg.contains("source t"), "{msg}");
    }

    #[test]
    fn roots_stop_at_the_first_wildcard() {
        assert_eq!(
            root_of("/var/log/pods/*/*/*.log"),
            (PathBuf::from("/var/log/pods"), true)
        );
        assert_eq!(
            root_of("/data/jobs/train*.log"),
            (PathBuf::from("/data/jobs"), false)
        );
        assert_eq!(
            root_of("/var/log/kern.log"),
            (PathBuf::from("/var/log"), false)
        );
        assert_eq!(root_of("*.log"), (PathBuf::from("."), false));
    }
}
