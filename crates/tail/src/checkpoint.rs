//! The checkpoint file: the acknowledged position of every known file, versioned JSON, written
//! atomically.
//!
//! Format (`version` is a string so that a later format can change everything else):
//! `{"version":"1","files":[{"id":…,"fingerprint":…,"head_len":…,"dev":…,"ino":…,"path":…,
//! "offset":…,"lines":…,"last_seen":…}]}`. `fingerprint` is the CRC32 of the first `head_len`
//! bytes; together with `dev` and `ino` it is the key. `path` is informational (a file is found
//! again by identity, wherever it now lives). `last_seen` is in seconds since the Unix epoch and
//! lets entries of vanished files expire.
//!
//! Writing and recovery are [`crate::persist`]'s: `<path>.tmp`, fsync, rename, fsync of the
//! directory; on load, a valid `.tmp` at least as new as the main file wins (the previous process
//! died between the fsync and the rename).

use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::persist::{self, LoadError, Parsed};
use crate::{FileId, TailError};

/// The only format this crate writes.
pub(crate) const VERSION: &str = "1";

/// One file's acknowledged position.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Entry {
    pub(crate) id: FileId,
    pub(crate) fingerprint: u32,
    pub(crate) head_len: u32,
    pub(crate) dev: u64,
    pub(crate) ino: u64,
    pub(crate) path: String,
    pub(crate) offset: u64,
    pub(crate) lines: u64,
    pub(crate) last_seen: u64,
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StateV1 {
    version: String,
    files: Vec<Entry>,
}

/// Only the version, to tell "newer format" from "corrupt".
#[derive(Debug, Deserialize)]
struct VersionOnly {
    version: String,
}

/// What [`load`] found.
#[derive(Debug, Default)]
pub(crate) struct Loaded {
    pub(crate) entries: Vec<Entry>,
    /// The state came from `<path>.tmp` (an interrupted write).
    pub(crate) from_tmp: bool,
    /// Set when the main file existed but did not parse; the tailer starts without positions.
    pub(crate) corrupt: Option<String>,
}

fn parse(path: &Path, bytes: &[u8]) -> Result<Parsed<Vec<Entry>>, TailError> {
    match serde_json::from_slice::<VersionOnly>(bytes) {
        Ok(v) if v.version != VERSION => {
            return Err(TailError::CheckpointVersion {
                path: path.to_owned(),
                version: v.version,
            })
        }
        Ok(_) => {}
        Err(e) => return Ok(Parsed::Invalid(e.to_string())),
    }
    match serde_json::from_slice::<StateV1>(bytes) {
        Ok(s) => Ok(Parsed::Valid(s.files)),
        Err(e) => Ok(Parsed::Invalid(e.to_string())),
    }
}

/// Loads the checkpoint state, preferring a valid `.tmp` that is at least as new as the main
/// file. A missing file is an empty state; a corrupt one is reported in [`Loaded::corrupt`].
///
/// # Errors
/// The main file cannot be read (other than not existing), or either file carries a version this
/// crate does not know (it would be overwritten by an older format otherwise).
pub(crate) fn load(path: &Path) -> Result<Loaded, TailError> {
    let r = persist::load(path, parse).map_err(|e| match e {
        LoadError::Read { path, error } => TailError::CheckpointRead { path, error },
        LoadError::Parse(e) => e,
    })?;
    Ok(Loaded {
        entries: r.state.unwrap_or_default(),
        from_tmp: r.from_tmp,
        corrupt: r.invalid,
    })
}

/// Writes `entries` atomically to `path` ([`persist::atomic_write`]).
///
/// # Errors
/// Any I/O failure (for example ENOSPC); the previous file is left in place.
pub(crate) fn store(path: &Path, entries: &[Entry]) -> io::Result<()> {
    let state = StateV1 {
        version: VERSION.to_owned(),
        files: entries.to_vec(),
    };
    let bytes = serde_json::to_vec(&state).map_err(io::Error::other)?;
    persist::atomic_write(path, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::persist::tmp_path;
    use std::fs;

    fn entry(id: u64, offset: u64) -> Entry {
        Entry {
            id,
            fingerprint: 0xdead_beef,
            head_len: 256,
            dev: 1,
            ino: 2 + id,
            path: format!("/logs/{id}.log"),
            offset,
            lines: offset / 10,
            last_seen: 1_700_000_000,
        }
    }

    #[test]
    fn round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("checkpoints.json");
        let entries = vec![entry(1, 100), entry(2, 0)];
        store(&p, &entries).unwrap();
        let l = load(&p).unwrap();
        assert_eq!(l.entries, entries);
        assert!(!l.from_tmp);
        assert!(l.corrupt.is_none());
        assert!(!tmp_path(&p).exists());
        let text = fs::read_to_string(&p).unwrap();
        assert!(text.starts_with(r#"{"version":"1","files":[{"id":1,"fingerprint":"#));
    }

    #[test]
    fn missing_file_is_empty() {
        let dir = tempfile::tempdir().unwrap();
        let l = load(&dir.path().join("none.json")).unwrap();
        assert!(l.entries.is_empty() && l.corrupt.is_none());
    }

    #[test]
    fn interrupted_write_prefers_valid_tmp() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.json");
        store(&p, &[entry(1, 100)]).unwrap();
        // A complete tmp file written after the main one: the rename never happened.
        let newer = serde_json::to_vec(&StateV1 {
            version: "1".into(),
            files: vec![entry(1, 200)],
        })
        .unwrap();
        fs::write(tmp_path(&p), newer).unwrap();
        let l = load(&p).unwrap();
        assert!(l.from_tmp);
        assert_eq!(l.entries[0].offset, 200);
    }

    #[test]
    fn half_written_tmp_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.json");
        store(&p, &[entry(1, 100)]).unwrap();
        fs::write(tmp_path(&p), br#"{"version":"1","files":[{"id":1,"fing"#).unwrap();
        let l = load(&p).unwrap();
        assert!(!l.from_tmp);
        assert_eq!(l.entries[0].offset, 100);
    }

    #[test]
    fn corrupt_main_without_tmp_starts_empty() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.json");
        fs::write(&p, b"\x00\x01garbage").unwrap();
        let l = load(&p).unwrap();
        assert!(l.entries.is_empty());
        assert!(l.corrupt.is_some());
        // A valid tmp rescues it even if older.
        store(&dir.path().join("other.json"), &[entry(3, 30)]).unwrap();
        fs::rename(dir.path().join("other.json"), tmp_path(&p)).unwrap();
        let l = load(&p).unwrap();
        assert!(l.from_tmp);
        assert_eq!(l.entries[0].id, 3);
    }

    #[test]
    fn unknown_version_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.json");
        fs::write(&p, br#"{"version":"2","files":{}}"#).unwrap();
        let e = load(&p).unwrap_err();
        assert!(matches!(e, TailError::CheckpointVersion { ref version, .. } if version == "2"));
        assert!(e.to_string().contains("c.json"));
    }

    #[test]
    fn write_into_missing_directory_fails_without_panicking() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("no/such/dir/c.json");
        assert!(store(&p, &[entry(1, 1)]).is_err());
    }
}
