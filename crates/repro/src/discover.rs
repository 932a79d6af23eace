//! Finding the ring entry that belongs to an incident.
//!
//! Log text only *selects*: the daemon never takes a path from a log line. It enumerates
//! `manifest.json` files under the configured state-root globs (the fixed layout
//! `<root>/<job>/rank-<n>/ring/<entry>/manifest.json` of docs/manifest.md §1, or globs that name
//! manifests directly), refuses any whose canonical directory is not under the root it was found
//! in (a symlinked job directory pointing elsewhere), validates each one, skips incomplete entries
//! (a state file missing or of the wrong size: a torn write or an entry being removed), and
//! picks the newest entry created before the incident whose `log_file` is the incident's log
//! (or whose `pid` is the incident's pid). It also returns the entry before it in the same ring,
//! because an asynchronous CUDA error can surface one step late (reproduction.md §0.2, citing
//! PyTorch's *Asynchronous execution* note and Megatron's rerun state machine).

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::manifest::{self, LoadedManifest, ManifestError, ManifestLimits, MANIFEST_NAME};

/// Manifests examined per search at most; a root with more is cut short (and logged).
pub const MAX_CANDIDATES: usize = 4096;

/// What identifies the failing job in an incident.
#[derive(Debug, Clone)]
pub struct IncidentKey<'a> {
    /// The log file the daemon read the incident from.
    pub log_path: Option<&'a Path>,
    /// The pid the incident names (the job's own pid namespace; see docs/manifest.md §3.1).
    pub pid: Option<u32>,
    /// When the incident was seen; entries created later are not candidates.
    pub at: SystemTime,
}

/// The flagged step's entry and the one before it in the same ring.
#[derive(Debug, Clone)]
pub struct Found {
    pub flagged: LoadedManifest,
    pub previous: Option<LoadedManifest>,
}

/// The outcome of one search: what was found and every manifest that was rejected on the way.
#[derive(Debug, Default)]
pub struct Search {
    pub found: Option<Found>,
    pub rejected: Vec<ManifestError>,
}

/// Lists candidate manifest paths with the canonical root each was found under.
pub fn candidates(roots: &[String]) -> Vec<(PathBuf, PathBuf)> {
    let mut out = Vec::new();
    for pattern in roots {
        let Ok(paths) = glob::glob(pattern) else {
            tracing::warn!(pattern = %pattern, "Invalid state-root glob; skipped.");
            continue;
        };
        for root in paths.flatten() {
            if out.len() >= MAX_CANDIDATES {
                tracing::warn!(
                    limit = MAX_CANDIDATES,
                    "Too many debug-state manifests; the search was cut short."
                );
                return out;
            }
            if root.file_name().is_some_and(|n| n == MANIFEST_NAME) {
                let base = root
                    .parent()
                    .and_then(|p| p.canonicalize().ok())
                    .unwrap_or_default();
                out.push((root, base));
                continue;
            }
            let Ok(base) = root.canonicalize() else {
                continue;
            };
            let Some(root_str) = root.to_str() else {
                continue;
            };
            let inner = format!(
                "{}/*/rank-*/ring/*/{MANIFEST_NAME}",
                glob::Pattern::escape(root_str.trim_end_matches('/'))
            );
            let Ok(found) = glob::glob(&inner) else {
                continue;
            };
            for m in found.flatten() {
                if out.len() >= MAX_CANDIDATES {
                    tracing::warn!(
                        limit = MAX_CANDIDATES,
                        "Too many debug-state manifests; the search was cut short."
                    );
                    return out;
                }
                out.push((m, base.clone()));
            }
        }
    }
    out
}

/// Loads one candidate and checks that it stays under its root after canonicalisation.
///
/// # Errors
/// The manifest's rejection, or `outside_roots`.
pub fn load_under(
    path: &Path,
    root: &Path,
    limits: &ManifestLimits,
) -> Result<LoadedManifest, ManifestError> {
    let m = manifest::load(path, limits)?;
    if root.as_os_str().is_empty() || !m.dir.starts_with(root) {
        return Err(ManifestError::OutsideRoots {
            path: path.to_path_buf(),
        });
    }
    Ok(m)
}

fn matches(m: &LoadedManifest, key: &IncidentKey) -> bool {
    let by_log = match (key.log_path, m.doc.log_file.as_deref()) {
        (Some(incident), Some(job)) => {
            Path::new(job) == incident
                || match (Path::new(job).canonicalize(), incident.canonicalize()) {
                    (Ok(a), Ok(b)) => a == b,
                    _ => false,
                }
        }
        _ => false,
    };
    let by_pid = key.pid.is_some_and(|p| u64::from(p) == m.doc.pid);
    by_log || by_pid
}

/// Orders entries: newest step first (docs/manifest.md §1: highest `global_step`, ties broken by
/// `created_at`).
fn newer(a: &LoadedManifest, b: &LoadedManifest) -> bool {
    (a.created, a.doc.step.global_step) > (b.created, b.doc.step.global_step)
}

/// Searches `roots` for the incident's entry.
pub fn find(roots: &[String], key: &IncidentKey, limits: &ManifestLimits) -> Search {
    let mut search = Search::default();
    if key.log_path.is_none() && key.pid.is_none() {
        return search;
    }
    let mut all: Vec<LoadedManifest> = Vec::new();
    for (path, root) in candidates(roots) {
        match load_under(&path, &root, limits) {
            Ok(m) => all.push(m),
            Err(e) => search.rejected.push(e),
        }
    }
    let mut flagged: Option<&LoadedManifest> = None;
    for m in &all {
        if m.created > key.at || !matches(m, key) || !m.files_present() {
            continue;
        }
        if flagged.is_none_or(|f| newer(m, f)) {
            flagged = Some(m);
        }
    }
    let Some(flagged) = flagged else {
        return search;
    };
    // The previous step: same ring directory, a lower step, complete, also before the incident.
    let ring = flagged.dir.parent();
    let mut previous: Option<&LoadedManifest> = None;
    for m in &all {
        if m.dir.parent() != ring
            || m.doc.step.global_step >= flagged.doc.step.global_step
            || m.created > key.at
            || !m.files_present()
        {
            continue;
        }
        if previous.is_none_or(|p| m.doc.step.global_step > p.doc.step.global_step) {
            previous = Some(m);
        }
    }
    search.found = Some(Found {
        flagged: flagged.clone(),
        previous: previous.cloned(),
    });
    search
}
