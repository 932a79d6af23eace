//! The debug-state manifest (`assertwatch.debug-state/v1`) read as untrusted input.
//!
//! A training job writes `manifest.json` into a directory it owns; the daemon runs as root. This
//! module owns everything between "a path that a glob matched" and "a manifest whose every field
//! is within the contract": a bounded read (never more than the size cap, no symlinks, no FIFOs),
//! strict JSON (duplicate keys refused at every depth), the field rules of the shared contract
//! file ([`contract`], also loaded by the Python harness, so both sides refuse the same
//! documents), and the checks only the daemon can make: the state files are plain names in the
//! manifest's own directory, owned by the job, of the declared size and SHA-256. Every rejection
//! is a [`ManifestError`] whose [`reason`](ManifestError::reason) is a short code from a closed
//! set, used as a metric label; the `Display` text names the field for humans.

mod contract;

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

pub use contract::{contract, parse_created_at, Contract, Kind, Node, Rule, CONTRACT_JSON};

/// File name of a committed ring entry's manifest (the contract's `manifest_name`; a unit test
/// holds the two equal, and this one is a constant so it can name files in patterns).
pub const MANIFEST_NAME: &str = "manifest.json";
/// How much of an offending value or parser message is repeated in an error.
const MAX_ECHO: usize = 96;

/// Why a manifest was rejected. The `reason()` codes form a closed set (metric label values).
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("{}: cannot read", path.display())]
    Unreadable {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{}: not a regular file (symlinks and special files are refused)", path.display())]
    NotRegular { path: PathBuf },
    #[error("{}: larger than the limit of {limit} bytes", path.display())]
    TooLarge { path: PathBuf, limit: u64 },
    #[error("{}: not valid JSON: {detail}", path.display())]
    BadJson { path: PathBuf, detail: String },
    #[error("{}: {field}: duplicate key", path.display())]
    DuplicateKey { path: PathBuf, field: String },
    #[error("{}: {field}: unknown key", path.display())]
    UnknownKey { path: PathBuf, field: String },
    #[error("{}: schema: must be {:?}, found {found}", path.display(), contract().schema)]
    SchemaVersion { path: PathBuf, found: String },
    #[error("{}: {field}: {detail}", path.display())]
    BadField {
        path: PathBuf,
        field: String,
        detail: String,
    },
    #[error("{}: replay.argv: is a string; it must be a list of strings (never a shell string)", path.display())]
    ShellString { path: PathBuf },
    #[error("{}: {field}: braces are allowed only as a whole-element placeholder ({}), found {element}", path.display(), contract().placeholders.join(", "))]
    BadPlaceholder {
        path: PathBuf,
        field: String,
        element: String,
    },
    #[error("{}: replay.env.{var}: variable is not on the allow-list", path.display())]
    EnvNotAllowed { path: PathBuf, var: String },
    #[error("{}: {field}: {detail}", path.display())]
    PathEscape {
        path: PathBuf,
        field: String,
        detail: String,
    },
    #[error("{}: state file {file} is missing or not a regular file", path.display())]
    MissingFile { path: PathBuf, file: String },
    #[error("{}: state file {file} has {actual} bytes, the manifest says {expected}", path.display())]
    BadSize {
        path: PathBuf,
        file: String,
        expected: u64,
        actual: u64,
    },
    #[error("{}: state file {file}: SHA-256 differs from the manifest", path.display())]
    BadHash { path: PathBuf, file: String },
    #[error("{}: {file} is owned by uid {owner}, the manifest's job.uid is {expected}", path.display())]
    BadOwner {
        path: PathBuf,
        file: String,
        owner: u32,
        expected: u64,
    },
    #[error("{}: {file} is group- or world-writable", path.display())]
    Writable { path: PathBuf, file: String },
    #[error("{}: job.uid is 0; replays as root are refused unless allowed in the configuration", path.display())]
    RootJob { path: PathBuf },
    #[error("{}: the manifest is not under a configured state root", path.display())]
    OutsideRoots { path: PathBuf },
    #[error("{}: job.uid {uid} is not the daemon's uid {daemon}, and only root can switch users", path.display())]
    ForeignUid {
        path: PathBuf,
        uid: u64,
        daemon: u32,
    },
}

impl ManifestError {
    /// A short, bounded code for the `reason` metric label.
    pub fn reason(&self) -> &'static str {
        match self {
            ManifestError::Unreadable { .. } => "unreadable",
            ManifestError::NotRegular { .. } => "not_regular",
            ManifestError::TooLarge { .. } => "too_large",
            ManifestError::BadJson { .. } => "bad_json",
            ManifestError::DuplicateKey { .. } => "duplicate_key",
            ManifestError::UnknownKey { .. } => "unknown_key",
            ManifestError::SchemaVersion { .. } => "schema_version",
            ManifestError::BadField { .. } => "bad_field",
            ManifestError::ShellString { .. } => "shell_string",
            ManifestError::BadPlaceholder { .. } => "bad_placeholder",
            ManifestError::EnvNotAllowed { .. } => "env_not_allowed",
            ManifestError::PathEscape { .. } => "path_escape",
            ManifestError::MissingFile { .. } => "missing_file",
            ManifestError::BadSize { .. } => "bad_size",
            ManifestError::BadHash { .. } => "bad_hash",
            ManifestError::BadOwner { .. } => "bad_owner",
            ManifestError::Writable { .. } => "writable",
            ManifestError::RootJob { .. } => "root_job",
            ManifestError::OutsideRoots { .. } => "outside_roots",
            ManifestError::ForeignUid { .. } => "foreign_uid",
        }
    }

    /// Every reason code, for pre-registering metric label values.
    pub const REASONS: [&'static str; 20] = [
        "unreadable",
        "not_regular",
        "too_large",
        "bad_json",
        "duplicate_key",
        "unknown_key",
        "schema_version",
        "bad_field",
        "shell_string",
        "bad_placeholder",
        "env_not_allowed",
        "path_escape",
        "missing_file",
        "bad_size",
        "bad_hash",
        "bad_owner",
        "writable",
        "root_job",
        "outside_roots",
        "foreign_uid",
    ];
}

/// What the loader enforces beyond the schema.
#[derive(Debug, Clone)]
pub struct ManifestLimits {
    /// Bytes read at most; a larger file is rejected without parsing.
    pub max_bytes: u64,
    /// Require the manifest and its state files to be owned by `job.uid` and not group- or
    /// world-writable (docs/manifest.md §5).
    pub check_owner: bool,
}

impl Default for ManifestLimits {
    fn default() -> Self {
        ManifestLimits {
            max_bytes: contract().max_manifest_bytes,
            check_owner: true,
        }
    }
}

// ------------------------------------------------------------------------------ serde shapes

/// A validated manifest. Field meanings: docs/manifest.md §3. The contract file decides what is
/// accepted; these shapes only give the accepted document types (a unit test holds the two to
/// the same keys).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub schema: String,
    pub job: Job,
    pub step: Step,
    pub created_at: String,
    pub pid: u64,
    pub cuda_device: Option<CudaDevice>,
    pub log_file: Option<String>,
    pub software: Software,
    pub files: Vec<FileEntry>,
    pub model_state: ModelState,
    pub determinism: Determinism,
    pub replay: Replay,
    pub extra: Option<Map<String, Value>>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Job {
    pub name: String,
    pub uid: u64,
    pub gid: u64,
    pub hostname: String,
    pub rank: Option<u64>,
    pub world_size: Option<u64>,
    pub kubernetes: Option<Kubernetes>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Kubernetes {
    pub namespace: String,
    pub pod: String,
    pub container: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    pub epoch: u64,
    pub global_step: u64,
    pub batch_index: Option<u64>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CudaDevice {
    pub index: u64,
    pub uuid: Option<String>,
    pub name: Option<String>,
    pub pci_bus_id: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Software {
    pub python: String,
    pub executable: String,
    pub torch: Option<String>,
    pub cuda_runtime: Option<String>,
    pub assertwatch_replay: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FileEntry {
    pub role: String,
    pub path: String,
    pub bytes: u64,
    pub sha256: String,
    pub format: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ModelState {
    pub kind: String,
    pub exact: bool,
    #[serde(rename = "ref")]
    pub reference: Option<String>,
    pub step: Option<u64>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Determinism {
    pub rng_restored: Vec<String>,
    pub deterministic_algorithms: bool,
    pub compiled: bool,
    pub seed: Option<u64>,
    pub cudnn_deterministic: Option<bool>,
    pub cudnn_benchmark: Option<bool>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Replay {
    /// Kept raw so a shell string can be told apart from other type errors.
    pub argv: Value,
    pub entrypoint: String,
    pub env: std::collections::BTreeMap<String, String>,
    pub cwd: String,
    pub modes: Option<Vec<String>>,
    pub requires_world_size: Option<u64>,
    pub estimates: Option<Estimates>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Estimates {
    pub step_seconds: Option<f64>,
    pub gpu_memory_bytes: Option<u64>,
}

// ------------------------------------------------------------------------------ loaded manifest

/// A manifest that passed every check that needs no state file, plus where it lives.
#[derive(Debug, Clone)]
pub struct LoadedManifest {
    /// Canonical path of `manifest.json`.
    pub path: PathBuf,
    /// Canonical directory of the ring entry.
    pub dir: PathBuf,
    pub doc: Manifest,
    /// `created_at` as a point in time.
    pub created: SystemTime,
    /// The validated `replay.argv`.
    pub argv: Vec<String>,
    /// Owner uid of the manifest file.
    pub owner: u32,
}

impl LoadedManifest {
    /// Modes the job supports (`replay.modes`, default all three).
    pub fn supports(&self, mode: &str) -> bool {
        match &self.doc.replay.modes {
            Some(m) => m.iter().any(|x| x == mode),
            None => contract().modes().iter().any(|m| m == mode),
        }
    }

    /// Checks every state file: a plain name in the manifest's directory, a regular file (opened
    /// without following symlinks), owned by `job.uid` and not group/world-writable when
    /// `limits.check_owner`, the declared size, and the declared SHA-256 (hashed as a stream, so
    /// a multi-GiB file costs a buffer, not its size in memory).
    ///
    /// # Errors
    /// The first problem found: `missing_file`, `not_regular`, `bad_owner`, `writable`,
    /// `bad_size` or `bad_hash`.
    pub fn verify_files(&self, limits: &ManifestLimits) -> Result<(), ManifestError> {
        for entry in &self.doc.files {
            self.verify_file(entry, limits)?;
        }
        Ok(())
    }

    fn verify_file(&self, entry: &FileEntry, limits: &ManifestLimits) -> Result<(), ManifestError> {
        let full = self.dir.join(&entry.path);
        let file = match open_nofollow(&full) {
            Ok(f) => f,
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Err(ManifestError::PathEscape {
                    path: self.path.clone(),
                    field: "files[].path".into(),
                    detail: format!("{} is a symlink", echo(&entry.path)),
                })
            }
            Err(_) => {
                return Err(ManifestError::MissingFile {
                    path: self.path.clone(),
                    file: echo(&entry.path),
                })
            }
        };
        let meta = file.metadata().map_err(|_| ManifestError::MissingFile {
            path: self.path.clone(),
            file: echo(&entry.path),
        })?;
        if !meta.is_file() {
            return Err(ManifestError::MissingFile {
                path: self.path.clone(),
                file: echo(&entry.path),
            });
        }
        if limits.check_owner {
            check_owner(&self.path, &entry.path, &meta, self.doc.job.uid)?;
        }
        if meta.len() != entry.bytes {
            return Err(ManifestError::BadSize {
                path: self.path.clone(),
                file: echo(&entry.path),
                expected: entry.bytes,
                actual: meta.len(),
            });
        }
        let digest = sha256_stream(file, entry.bytes).map_err(|_| ManifestError::MissingFile {
            path: self.path.clone(),
            file: echo(&entry.path),
        })?;
        if digest != entry.sha256 {
            return Err(ManifestError::BadHash {
                path: self.path.clone(),
                file: echo(&entry.path),
            });
        }
        Ok(())
    }

    /// Whether every state file exists with its declared size (no hashing): the cheap test for
    /// "this ring entry is complete" used while choosing an entry.
    pub fn files_present(&self) -> bool {
        self.doc.files.iter().all(|e| {
            std::fs::symlink_metadata(self.dir.join(&e.path))
                .map(|m| m.is_file() && m.len() == e.bytes)
                .unwrap_or(false)
        })
    }
}

/// Hashes at most `expected + 1` bytes so a file that grows while it is read cannot keep the
/// reader busy; the extra byte makes such a file mismatch.
fn sha256_stream(file: File, expected: u64) -> io::Result<String> {
    let mut reader = file.take(expected.saturating_add(1));
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = reader.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    let out = hasher.finalize();
    let mut hex = String::with_capacity(64);
    for b in out {
        hex.push_str(&format!("{b:02x}"));
    }
    Ok(hex)
}

/// Opens a file for reading without following a final symlink and without blocking on a FIFO.
fn open_nofollow(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
}

fn check_owner(
    manifest: &Path,
    name: &str,
    meta: &std::fs::Metadata,
    uid: u64,
) -> Result<(), ManifestError> {
    if u64::from(meta.uid()) != uid {
        return Err(ManifestError::BadOwner {
            path: manifest.to_path_buf(),
            file: echo(name),
            owner: meta.uid(),
            expected: uid,
        });
    }
    if meta.mode() & 0o022 != 0 {
        return Err(ManifestError::Writable {
            path: manifest.to_path_buf(),
            file: echo(name),
        });
    }
    Ok(())
}

/// Reads, bounds, parses and validates a manifest file. State files are not opened here (see
/// [`LoadedManifest::verify_files`]).
///
/// # Errors
/// Any [`ManifestError`]; nothing of a rejected manifest is used.
pub fn load(path: &Path, limits: &ManifestLimits) -> Result<LoadedManifest, ManifestError> {
    let unreadable = |source| ManifestError::Unreadable {
        path: path.to_path_buf(),
        source,
    };
    let file = match open_nofollow(path) {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(ManifestError::NotRegular {
                path: path.to_path_buf(),
            })
        }
        Err(e) => return Err(unreadable(e)),
    };
    let meta = file.metadata().map_err(unreadable)?;
    if !meta.is_file() {
        return Err(ManifestError::NotRegular {
            path: path.to_path_buf(),
        });
    }
    // Read at most one byte past the cap: enough to know it is too large, never more.
    let mut data = Vec::with_capacity(meta.len().min(limits.max_bytes + 1) as usize);
    file.take(limits.max_bytes + 1)
        .read_to_end(&mut data)
        .map_err(unreadable)?;
    if data.len() as u64 > limits.max_bytes {
        return Err(ManifestError::TooLarge {
            path: path.to_path_buf(),
            limit: limits.max_bytes,
        });
    }
    let canonical = path.canonicalize().map_err(unreadable)?;
    let dir = canonical
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("/"));
    let (doc, argv, created) = parse(&data, &canonical)?;
    if limits.check_owner {
        check_owner(&canonical, MANIFEST_NAME, &meta, doc.job.uid)?;
    }
    Ok(LoadedManifest {
        path: canonical,
        dir,
        doc,
        created,
        argv,
        owner: meta.uid(),
    })
}

/// Parses and validates manifest bytes. `path` only names the manifest in errors.
///
/// # Errors
/// Any [`ManifestError`] about the content.
pub fn parse(
    data: &[u8],
    path: &Path,
) -> Result<(Manifest, Vec<String>, SystemTime), ManifestError> {
    let c = contract::Check {
        path,
        c: contract(),
    };
    let text = std::str::from_utf8(data).map_err(|e| ManifestError::BadJson {
        path: path.to_path_buf(),
        detail: format!("not UTF-8 ({e})"),
    })?;
    // Syntax and duplicate keys at every depth first, then the schema string before anything
    // else, so a future version is reported as such rather than as a pile of unknown keys.
    let mut de = serde_json::Deserializer::from_str(text);
    let strict = Strict::deserialize(&mut de)
        .and_then(|s| de.end().map(|()| s))
        .map_err(|e| ManifestError::BadJson {
            path: path.to_path_buf(),
            detail: echo(&e.to_string()),
        })?;
    if let Some(field) = strict.duplicate {
        return Err(ManifestError::DuplicateKey {
            path: path.to_path_buf(),
            field,
        });
    }
    let value = strict.value;
    if !value.is_object() {
        return Err(c.bad("", "the manifest must be a JSON object"));
    }
    match value.get("schema") {
        Some(Value::String(s)) if *s == c.c.schema => {}
        None => {}
        Some(other) => {
            let found = match other {
                Value::String(s) => format!("{:?}", echo(s)),
                _ => "a non-string value".into(),
            };
            return Err(ManifestError::SchemaVersion {
                path: path.to_path_buf(),
                found,
            });
        }
    }
    c.walk(&c.c.document, &value, "", &value)?;
    // The walk has accepted the document, so the typed shapes take it as it is.
    let doc: Manifest =
        serde_json::from_value(value).map_err(|e| c.bad("", echo(&e.to_string())))?;
    let argv = match &doc.replay.argv {
        Value::Array(a) => a
            .iter()
            .filter_map(|v| v.as_str().map(str::to_owned))
            .collect(),
        _ => Vec::new(),
    };
    let created =
        parse_created_at(&doc.created_at).ok_or_else(|| c.bad("created_at", "not RFC 3339"))?;
    Ok((doc, argv, created))
}

/// Cuts a value from the input to a bounded, printable length for messages.
fn echo(s: &str) -> String {
    let mut out: String = s
        .chars()
        .take(MAX_ECHO)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if s.chars().count() > MAX_ECHO {
        out.push('…');
    }
    out
}

// ------------------------------------------------------------------------------ strict JSON

/// Any JSON value, plus the first duplicate key in it (`serde_json` keeps the last value of a
/// repeated key; the contract rejects the document instead).
struct Strict {
    value: Value,
    duplicate: Option<String>,
}

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor)
    }
}

struct StrictVisitor;

fn scalar(value: Value) -> Strict {
    Strict {
        value,
        duplicate: None,
    }
}

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Strict;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("JSON")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Strict, A::Error> {
        let mut out = Map::new();
        let mut duplicate = None;
        while let Some(key) = map.next_key::<String>()? {
            let v: Strict = map.next_value()?;
            if duplicate.is_none() {
                duplicate = v.duplicate.map(|d| format!("{}.{d}", echo(&key)));
            }
            if out.insert(key.clone(), v.value).is_some() && duplicate.is_none() {
                duplicate = Some(echo(&key));
            }
        }
        Ok(Strict {
            value: Value::Object(out),
            duplicate,
        })
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Strict, A::Error> {
        let mut out = Vec::new();
        let mut duplicate = None;
        while let Some(v) = seq.next_element::<Strict>()? {
            if duplicate.is_none() {
                duplicate = v.duplicate.map(|d| format!("[{}].{d}", out.len()));
            }
            out.push(v.value);
        }
        Ok(Strict {
            value: Value::Array(out),
            duplicate,
        })
    }
    fn visit_str<E>(self, s: &str) -> Result<Strict, E> {
        Ok(scalar(Value::String(s.to_owned())))
    }
    fn visit_string<E>(self, s: String) -> Result<Strict, E> {
        Ok(scalar(Value::String(s)))
    }
    fn visit_bool<E>(self, b: bool) -> Result<Strict, E> {
        Ok(scalar(Value::Bool(b)))
    }
    fn visit_i64<E>(self, n: i64) -> Result<Strict, E> {
        Ok(scalar(n.into()))
    }
    fn visit_u64<E>(self, n: u64) -> Result<Strict, E> {
        Ok(scalar(n.into()))
    }
    fn visit_f64<E>(self, n: f64) -> Result<Strict, E> {
        // JSON text cannot spell a non-finite number, so `from_f64` always succeeds here.
        Ok(scalar(
            serde_json::Number::from_f64(n).map_or(Value::Null, Value::Number),
        ))
    }
    fn visit_unit<E>(self) -> Result<Strict, E> {
        Ok(scalar(Value::Null))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = include_str!("../../../../python/tests/fixtures/manifest-example.json");

    /// The typed shapes and the contract name the same keys at every level: the example fixture
    /// fills every key, so its typed form serialises back to exactly the contract's key sets.
    #[test]
    fn the_typed_shapes_have_the_contract_keys() {
        fn same(n: &Node, v: &Value, at: &str) {
            match (n.kind, v) {
                (Kind::Object, Value::Object(m)) => {
                    let want: Vec<&str> = n.keys.iter().map(|(k, _)| k.as_str()).collect();
                    let mut want = want;
                    want.sort_unstable();
                    let got: Vec<&str> = m.keys().map(String::as_str).collect();
                    assert_eq!(got, want, "keys of {at}");
                    for (k, c) in &n.keys {
                        same(c, &m[k], &format!("{at}.{k}"));
                    }
                }
                (Kind::List, Value::Array(a)) => {
                    if let (Some(items), Some(first)) = (&n.items, a.first()) {
                        same(items, first, &format!("{at}[0]"));
                    }
                }
                _ => {}
            }
        }
        let (doc, _, _) = parse(EXAMPLE.as_bytes(), Path::new("example.json")).unwrap();
        let v = serde_json::to_value(&doc).unwrap();
        same(&contract().document, &v, "(document)");
    }

    #[test]
    fn duplicates_are_found_at_any_depth() {
        let s: Strict = serde_json::from_str(r#"{"a": [{"b": 1, "b": 2}], "c": 3}"#).unwrap();
        assert_eq!(s.duplicate.as_deref(), Some("a.[0].b"));
        assert_eq!(s.value["c"], 3);
    }
}
