//! Small state files, replaced atomically, and the recovery of a replacement a crash cut short.
//!
//! Every file the daemon persists its position in (this crate's checkpoints, the kernel log
//! reader's position) goes through here, so there is one write procedure and one recovery rule.
//!
//! Writing follows Vector's checkpointer (`lib/file-source/src/checkpointer.rs`): the new content
//! goes to `<path>.tmp`, is fsynced, renamed over `<path>`, and the directory is fsynced, so a
//! crash at any point leaves either the old or the new file whole, plus perhaps the `.tmp`.
//!
//! Recovery prefers the `.tmp` only where it can be trusted: it must parse completely (a crash
//! during the write leaves it cut short), and it must be at least as new as the main file, or the
//! main file must be missing or unreadable as state. Then it means the writer died between the
//! fsync and the rename, and it holds the latest state. A `.tmp` older than a good main file is
//! ignored: the main file was written after it, and taking the `.tmp` would move a position
//! backwards (lines read twice, incidents reported twice).

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// `<path>.tmp`: the name is appended, so `a.json` and `a.yaml` never share a temporary file.
pub fn tmp_path(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".tmp");
    PathBuf::from(s)
}

/// Writes `bytes` to `path` atomically: `<path>.tmp`, fsync, rename over `path`, fsync of the
/// directory. A crash leaves either the old or the new content, never a torn file.
///
/// # Errors
/// Any I/O failure (for example ENOSPC or a missing directory); the previous file is left in
/// place.
pub fn atomic_write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = tmp_path(path);
    {
        let mut f = File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    // The rename is durable only once the directory entry is.
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()
}

/// What the caller's parser made of one file's bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed<T> {
    /// Complete, usable state.
    Valid(T),
    /// Not state (cut short, garbage); the reason, for logs.
    Invalid(String),
}

/// What [`load`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovered<T> {
    /// The state to resume from; `None` when neither file holds valid state.
    pub state: Option<T>,
    /// `state` came from `<path>.tmp` (an interrupted write).
    pub from_tmp: bool,
    /// Why the main file was not used, when it exists but did not parse and no `.tmp` stood in.
    pub invalid: Option<String>,
}

/// A failure of [`load`] that is not "no usable state".
#[derive(Debug, thiserror::Error)]
pub enum LoadError<E: std::error::Error + 'static> {
    /// The main file exists but cannot be read.
    #[error("cannot read {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        error: io::Error,
    },
    /// The parser refused a file outright (for example a format version it does not know).
    #[error(transparent)]
    Parse(E),
}

fn read_optional(path: &Path) -> io::Result<Option<(Vec<u8>, Option<SystemTime>)>> {
    match fs::read(path) {
        Ok(b) => {
            let mtime = fs::metadata(path).and_then(|m| m.modified()).ok();
            Ok(Some((b, mtime)))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Loads the state written by [`atomic_write`] to `path`, applying the recovery rule of the
/// module docs. `parse` is given each file's path and bytes; it returns [`Parsed::Invalid`] for
/// bytes that are not state and an error for a file that must not be overwritten. A missing main
/// file with no usable `.tmp` is an empty state, not an error.
///
/// # Errors
/// The main file exists but cannot be read ([`LoadError::Read`]; an unreadable `.tmp` counts as
/// absent, the main file being whole), or `parse` failed on either file ([`LoadError::Parse`]).
pub fn load<T, E: std::error::Error + 'static>(
    path: &Path,
    mut parse: impl FnMut(&Path, &[u8]) -> Result<Parsed<T>, E>,
) -> Result<Recovered<T>, LoadError<E>> {
    let main = read_optional(path).map_err(|error| LoadError::Read {
        path: path.to_owned(),
        error,
    })?;
    let tmp_p = tmp_path(path);
    let tmp = read_optional(&tmp_p).ok().flatten();

    let main_parsed = match &main {
        Some((b, _)) => Some(parse(path, b).map_err(LoadError::Parse)?),
        None => None,
    };
    if let Some((b, tmp_mtime)) = &tmp {
        if let Parsed::Valid(state) = parse(&tmp_p, b).map_err(LoadError::Parse)? {
            let main_time = main.as_ref().and_then(|(_, t)| *t);
            let main_ok = matches!(main_parsed, Some(Parsed::Valid(_)));
            let not_older = match (tmp_mtime, main_time) {
                (Some(t), Some(m)) => *t >= m,
                _ => true,
            };
            if !main_ok || not_older {
                return Ok(Recovered {
                    state: Some(state),
                    from_tmp: true,
                    invalid: None,
                });
            }
        }
    }
    Ok(match main_parsed {
        Some(Parsed::Valid(state)) => Recovered {
            state: Some(state),
            from_tmp: false,
            invalid: None,
        },
        Some(Parsed::Invalid(why)) => Recovered {
            state: None,
            from_tmp: false,
            invalid: Some(why),
        },
        None => Recovered {
            state: None,
            from_tmp: false,
            invalid: None,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;
    use std::time::Duration;

    /// State is a decimal number; anything else is invalid.
    fn number(_: &Path, b: &[u8]) -> Result<Parsed<u64>, Infallible> {
        Ok(std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .map_or_else(|| Parsed::Invalid("not a number".into()), Parsed::Valid))
    }

    /// Loads after writing the main file and the `.tmp` (where given) directly, the `.tmp`
    /// `tmp_age` older than the main file.
    fn recover(main: Option<&[u8]>, tmp: Option<&[u8]>, tmp_age: Duration) -> Recovered<u64> {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s");
        let now = SystemTime::now();
        for (path, bytes, mtime) in [(&p, main, now), (&tmp_path(&p), tmp, now - tmp_age)] {
            if let Some(b) = bytes {
                fs::write(path, b).unwrap();
                let f = File::options().write(true).open(path).unwrap();
                f.set_modified(mtime).unwrap();
            }
        }
        load(&p, number).unwrap()
    }

    #[test]
    fn write_replaces_whole_and_leaves_no_tmp() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("state.json");
        atomic_write(&p, b"1").unwrap();
        atomic_write(&p, b"22").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"22");
        assert!(!tmp_path(&p).exists());
        assert_eq!(tmp_path(&p), dir.path().join("state.json.tmp"));
        let r = load(&p, number).unwrap();
        assert_eq!((r.state, r.from_tmp), (Some(22), false));
    }

    #[test]
    fn complete_tmp_not_older_than_main_wins() {
        let r = recover(Some(b"1"), Some(b"2"), Duration::ZERO);
        assert_eq!((r.state, r.from_tmp), (Some(2), true));
    }

    #[test]
    fn cut_short_tmp_is_ignored() {
        let r = recover(Some(b"1"), Some(b"2x"), Duration::ZERO);
        assert_eq!((r.state, r.from_tmp), (Some(1), false));
    }

    #[test]
    fn tmp_older_than_a_good_main_file_is_ignored() {
        let r = recover(Some(b"2"), Some(b"1"), Duration::from_secs(60));
        assert_eq!((r.state, r.from_tmp), (Some(2), false));
    }

    #[test]
    fn valid_tmp_rescues_an_invalid_main_file_even_if_older() {
        let r = recover(Some(b"garbage"), Some(b"7"), Duration::from_secs(60));
        assert_eq!((r.state, r.from_tmp, r.invalid), (Some(7), true, None));
        let r = recover(Some(b"garbage"), None, Duration::ZERO);
        assert_eq!(r.state, None);
        assert_eq!(r.invalid.as_deref(), Some("not a number"));
    }

    #[test]
    fn nothing_on_disk_is_an_empty_state() {
        let dir = tempfile::tempdir().unwrap();
        let r = load(&dir.path().join("none"), number).unwrap();
        assert_eq!(r.state, None);
        assert!(!r.from_tmp && r.invalid.is_none());
    }
}
