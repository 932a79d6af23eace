//! The debug-state manifest (`assertwatch.debug-state/v1`) read as untrusted input.
//!
//! A training job writes `manifest.json` into a directory it owns; the daemon runs as root. This
//! module owns everything between "a path that a glob matched" and "a manifest whose every field
//! is within the contract": a bounded read (never more than the size cap, no symlinks, no FIFOs),
//! strict JSON (duplicate keys refused, unknown keys refused at every level except inside
//! `extra`), the field rules of `docs/manifest.md` §3–§4 mirrored from the Python harness
//! (`python/assertwatch_replay/manifest.py`, which wins where the two disagree), the argv
//! placeholder rule, and the state-file checks (plain names in the manifest's own directory,
//! ownership, size, streamed SHA-256). Every rejection is a [`ManifestError`] whose
//! [`reason`](ManifestError::reason) is a short code from a closed set, used as a metric label;
//! the `Display` text names the field for humans.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// The only schema this reader accepts; a v2 is a new schema, not an extension (docs §6).
pub const SCHEMA: &str = "assertwatch.debug-state/v1";
/// File name of a committed ring entry's manifest.
pub const MANIFEST_NAME: &str = "manifest.json";
/// Default size cap of a manifest (docs/manifest.md §2).
pub const DEFAULT_MAX_MANIFEST_BYTES: u64 = 64 * 1024;

const MAX_EXTRA_BYTES: usize = 16 * 1024;
const MAX_EXTRA_DEPTH: usize = 8;
const MAX_FILES: usize = 16;
const MAX_PATH_CHARS: usize = 4096;
const MAX_STRING_CHARS: usize = 4096;
const MAX_ARGV: usize = 64;
const MAX_ENV: usize = 32;
/// JSON integers above 2^53 − 1 lose precision in common parsers.
const MAX_SAFE_INT: u64 = (1 << 53) - 1;
/// Linux `PID_MAX_LIMIT` on 64-bit kernels (include/linux/threads.h).
const MAX_PID: u64 = 4_194_304;
/// uid/gid: 2^32 − 1 is the kernel's "no id" value.
const MAX_ID: u64 = (1 << 32) - 2;
/// How much of an offending value or parser message is repeated in an error.
const MAX_ECHO: usize = 96;

/// Replay modes, in the contract's spelling.
pub const MODES: [&str; 3] = ["sync-gpu", "cpu", "sanitizer"];
const FILE_ROLES: [&str; 5] = ["batch", "rng", "model", "optimizer", "extra_state"];
const RNG_STREAMS: [&str; 4] = ["cpu", "cuda", "python", "numpy"];
const MODEL_STATE_KINDS: [&str; 3] = ["full", "checkpoint_ref", "none"];
/// Whole-element argv placeholders (docs §4; the Python side also accepts `{timeout_s}`).
pub const PLACEHOLDERS: [&str; 6] = [
    "{python}",
    "{manifest}",
    "{mode}",
    "{result}",
    "{out_dir}",
    "{timeout_s}",
];
const REQUIRED_PLACEHOLDERS: [&str; 4] = ["{manifest}", "{mode}", "{result}", "{out_dir}"];
/// Variables a job may ask the replay to carry (docs §3.9). Mode variables belong to the harness;
/// loader variables such as `LD_PRELOAD` have no business in a replay.
pub const ENV_ALLOW: [&str; 12] = [
    "PYTHONPATH",
    "PYTHONHASHSEED",
    "LD_LIBRARY_PATH",
    "CUBLAS_WORKSPACE_CONFIG",
    "PYTORCH_CUDA_ALLOC_CONF",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "TOKENIZERS_PARALLELISM",
    "NVIDIA_TF32_OVERRIDE",
    "HF_HOME",
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
];

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
    #[error("{}: schema: must be {SCHEMA:?}, found {found}", path.display())]
    SchemaVersion { path: PathBuf, found: String },
    #[error("{}: {field}: {detail}", path.display())]
    BadField {
        path: PathBuf,
        field: String,
        detail: String,
    },
    #[error("{}: replay.argv: is a string; it must be a list of strings (never a shell string)", path.display())]
    ShellString { path: PathBuf },
    #[error("{}: {field}: braces are allowed only as a whole-element placeholder ({}), found {element}", path.display(), PLACEHOLDERS.join(", "))]
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
            max_bytes: DEFAULT_MAX_MANIFEST_BYTES,
            check_owner: true,
        }
    }
}

// ------------------------------------------------------------------------------ serde shapes

/// A validated manifest. Field meanings: docs/manifest.md §3.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub schema: String,
    pub job: Job,
    pub step: Step,
    pub created_at: String,
    pub pid: u64,
    #[serde(deserialize_with = "nullable")]
    pub cuda_device: Option<CudaDevice>,
    #[serde(deserialize_with = "nullable")]
    pub log_file: Option<String>,
    pub software: Software,
    pub files: Vec<FileEntry>,
    pub model_state: ModelState,
    pub determinism: Determinism,
    pub replay: Replay,
    #[serde(default, deserialize_with = "present")]
    pub extra: Option<Map<String, Value>>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Job {
    pub name: String,
    pub uid: u64,
    pub gid: u64,
    pub hostname: String,
    #[serde(default)]
    pub rank: Option<u64>,
    #[serde(default)]
    pub world_size: Option<u64>,
    #[serde(default)]
    pub kubernetes: Option<Kubernetes>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Kubernetes {
    pub namespace: String,
    pub pod: String,
    #[serde(default)]
    pub container: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    pub epoch: u64,
    pub global_step: u64,
    #[serde(default)]
    pub batch_index: Option<u64>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CudaDevice {
    pub index: u64,
    #[serde(default)]
    pub uuid: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub pci_bus_id: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Software {
    pub python: String,
    pub executable: String,
    #[serde(default)]
    pub torch: Option<String>,
    #[serde(default)]
    pub cuda_runtime: Option<String>,
    #[serde(default)]
    pub assertwatch_replay: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FileEntry {
    pub role: String,
    pub path: String,
    pub bytes: u64,
    pub sha256: String,
    #[serde(default, deserialize_with = "present")]
    pub format: Option<String>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ModelState {
    pub kind: String,
    pub exact: bool,
    #[serde(default, rename = "ref")]
    pub reference: Option<String>,
    #[serde(default)]
    pub step: Option<u64>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Determinism {
    pub rng_restored: Vec<String>,
    pub deterministic_algorithms: bool,
    pub compiled: bool,
    #[serde(default)]
    pub seed: Option<u64>,
    #[serde(default, deserialize_with = "present")]
    pub cudnn_deterministic: Option<bool>,
    #[serde(default, deserialize_with = "present")]
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
    #[serde(default, deserialize_with = "present")]
    pub modes: Option<Vec<String>>,
    #[serde(default, deserialize_with = "present")]
    pub requires_world_size: Option<u64>,
    #[serde(default)]
    pub estimates: Option<Estimates>,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Estimates {
    #[serde(default)]
    pub step_seconds: Option<f64>,
    #[serde(default)]
    pub gpu_memory_bytes: Option<u64>,
}

/// A key that must be present but may be `null` ("req, nullable"): with `deserialize_with`,
/// serde reports a missing key instead of defaulting it to `None`.
fn nullable<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    Option::<T>::deserialize(d)
}

/// A key that may be absent but, when present, must not be `null` ("opt").
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
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
            None => MODES.contains(&mode),
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
    let p = || path.to_path_buf();
    let text = std::str::from_utf8(data).map_err(|e| ManifestError::BadJson {
        path: p(),
        detail: format!("not UTF-8 ({e})"),
    })?;
    // Pass 1: syntax, duplicate keys at every depth, and the schema string before anything else,
    // so a future version is reported as such rather than as a pile of unknown keys.
    let mut de = serde_json::Deserializer::from_str(text);
    let scan = Scan::deserialize(&mut de)
        .and_then(|s| de.end().map(|()| s))
        .map_err(|e| json_error(path, &e))?;
    if let Some(field) = scan.duplicate {
        return Err(ManifestError::DuplicateKey { path: p(), field });
    }
    match scan.schema {
        ScanSchema::NotObject => {
            return Err(ManifestError::BadField {
                path: p(),
                field: "(top level)".into(),
                detail: "the manifest must be a JSON object".into(),
            })
        }
        ScanSchema::Other(found) => return Err(ManifestError::SchemaVersion { path: p(), found }),
        ScanSchema::Absent | ScanSchema::V1 => {}
    }
    // Pass 2: the typed shape, with the path of the offending field.
    let mut de = serde_json::Deserializer::from_str(text);
    let doc: Manifest = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let field = echo(&e.path().to_string());
        let msg = e.inner().to_string();
        if msg.starts_with("unknown field") {
            let key = msg.split('`').nth(1).unwrap_or("?");
            let field = if field == "." {
                echo(key)
            } else {
                format!("{field}.{}", echo(key))
            };
            ManifestError::UnknownKey { path: p(), field }
        } else {
            ManifestError::BadField {
                path: p(),
                field: if field == "." {
                    "(top level)".into()
                } else {
                    field
                },
                detail: echo(&msg),
            }
        }
    })?;
    let argv = validate(&doc, path)?;
    let created = parse_created_at(&doc.created_at).ok_or_else(|| ManifestError::BadField {
        path: p(),
        field: "created_at".into(),
        detail: "must be RFC 3339 UTC with a literal Z, e.g. 2026-03-01T12:00:00.123Z".into(),
    })?;
    Ok((doc, argv, created))
}

fn json_error(path: &Path, e: &serde_json::Error) -> ManifestError {
    ManifestError::BadJson {
        path: path.to_path_buf(),
        detail: echo(&e.to_string()),
    }
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

// ------------------------------------------------------------------------------ pass 1

enum ScanSchema {
    NotObject,
    Absent,
    V1,
    Other(String),
}

struct Scan {
    duplicate: Option<String>,
    schema: ScanSchema,
}

impl<'de> Deserialize<'de> for Scan {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(TopVisitor)
    }
}

struct TopVisitor;

impl<'de> Visitor<'de> for TopVisitor {
    type Value = Scan;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("JSON")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Scan, A::Error> {
        let mut seen = std::collections::HashSet::new();
        let mut duplicate = None;
        let mut schema = ScanSchema::Absent;
        while let Some(key) = map.next_key::<String>()? {
            if key == "schema" {
                let v: DupCheck = map.next_value()?;
                schema = match v.string {
                    Some(s) if s == SCHEMA => ScanSchema::V1,
                    Some(s) => ScanSchema::Other(format!("{:?}", echo(&s))),
                    None => ScanSchema::Other("a non-string value".into()),
                };
                duplicate = duplicate.or(v.duplicate);
            } else {
                let v: DupCheck = map.next_value()?;
                duplicate = duplicate.or(v.duplicate.map(|d| format!("{}.{d}", echo(&key))));
            }
            if !seen.insert(key.clone()) && duplicate.is_none() {
                duplicate = Some(echo(&key));
            }
        }
        Ok(Scan { duplicate, schema })
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Scan, A::Error> {
        while seq.next_element::<de::IgnoredAny>()?.is_some() {}
        Ok(not_object())
    }
    fn visit_bool<E>(self, _: bool) -> Result<Scan, E> {
        Ok(not_object())
    }
    fn visit_i64<E>(self, _: i64) -> Result<Scan, E> {
        Ok(not_object())
    }
    fn visit_u64<E>(self, _: u64) -> Result<Scan, E> {
        Ok(not_object())
    }
    fn visit_f64<E>(self, _: f64) -> Result<Scan, E> {
        Ok(not_object())
    }
    fn visit_str<E>(self, _: &str) -> Result<Scan, E> {
        Ok(not_object())
    }
    fn visit_unit<E>(self) -> Result<Scan, E> {
        Ok(not_object())
    }
}

fn not_object() -> Scan {
    Scan {
        duplicate: None,
        schema: ScanSchema::NotObject,
    }
}

/// Walks any JSON value and remembers the first duplicate key (serde_json keeps the last value of
/// a repeated key in maps; the contract rejects the document instead).
struct DupCheck {
    duplicate: Option<String>,
    string: Option<String>,
}

impl<'de> Deserialize<'de> for DupCheck {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(DupVisitor)
    }
}

struct DupVisitor;

fn plain() -> DupCheck {
    DupCheck {
        duplicate: None,
        string: None,
    }
}

impl<'de> Visitor<'de> for DupVisitor {
    type Value = DupCheck;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("JSON")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<DupCheck, A::Error> {
        let mut seen = std::collections::HashSet::new();
        let mut duplicate = None;
        while let Some(key) = map.next_key::<String>()? {
            let v: DupCheck = map.next_value()?;
            if duplicate.is_none() {
                duplicate = v.duplicate.map(|d| format!("{}.{d}", echo(&key)));
            }
            if !seen.insert(key.clone()) && duplicate.is_none() {
                duplicate = Some(echo(&key));
            }
        }
        Ok(DupCheck {
            duplicate,
            string: None,
        })
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<DupCheck, A::Error> {
        let mut duplicate = None;
        let mut i = 0usize;
        while let Some(v) = seq.next_element::<DupCheck>()? {
            if duplicate.is_none() {
                duplicate = v.duplicate.map(|d| format!("[{i}].{d}"));
            }
            i += 1;
        }
        Ok(DupCheck {
            duplicate,
            string: None,
        })
    }
    fn visit_str<E>(self, s: &str) -> Result<DupCheck, E> {
        Ok(DupCheck {
            duplicate: None,
            string: Some(s.to_owned()),
        })
    }
    fn visit_bool<E>(self, _: bool) -> Result<DupCheck, E> {
        Ok(plain())
    }
    fn visit_i64<E>(self, _: i64) -> Result<DupCheck, E> {
        Ok(plain())
    }
    fn visit_u64<E>(self, _: u64) -> Result<DupCheck, E> {
        Ok(plain())
    }
    fn visit_f64<E>(self, _: f64) -> Result<DupCheck, E> {
        Ok(plain())
    }
    fn visit_unit<E>(self) -> Result<DupCheck, E> {
        Ok(plain())
    }
}

// ------------------------------------------------------------------------------ field rules

/// A character rule and how it is described in messages.
type Rule = (fn(&str) -> bool, &'static str);

struct Check<'a> {
    path: &'a Path,
}

impl Check<'_> {
    fn bad(&self, field: &str, detail: impl Into<String>) -> ManifestError {
        ManifestError::BadField {
            path: self.path.to_path_buf(),
            field: field.to_owned(),
            detail: detail.into(),
        }
    }

    fn int(&self, v: u64, field: &str, lo: u64, hi: u64) -> Result<(), ManifestError> {
        if v < lo || v > hi {
            return Err(self.bad(field, format!("must be between {lo} and {hi}")));
        }
        Ok(())
    }

    fn opt_int(&self, v: Option<u64>, field: &str, lo: u64, hi: u64) -> Result<(), ManifestError> {
        v.map_or(Ok(()), |v| self.int(v, field, lo, hi))
    }

    /// Python's `_str`: non-empty unless `allow_empty`, at most `max` characters, no NUL, and
    /// an optional character-class rule.
    fn string(
        &self,
        s: &str,
        field: &str,
        max: usize,
        allow_empty: bool,
        rule: Option<Rule>,
    ) -> Result<(), ManifestError> {
        if s.is_empty() && !allow_empty {
            return Err(self.bad(field, "must not be empty"));
        }
        if s.chars().count() > max {
            return Err(self.bad(field, format!("longer than {max} characters")));
        }
        if s.contains('\0') {
            return Err(self.bad(field, "contains a NUL character"));
        }
        if let Some((ok, what)) = rule {
            if !s.is_empty() && !ok(s) {
                return Err(self.bad(field, format!("must match {what}")));
            }
        }
        Ok(())
    }

    fn opt_string(
        &self,
        s: &Option<String>,
        field: &str,
        max: usize,
        rule: Option<Rule>,
    ) -> Result<(), ManifestError> {
        s.as_deref()
            .map_or(Ok(()), |s| self.string(s, field, max, false, rule))
    }

    fn abs_path(&self, s: &str, field: &str) -> Result<(), ManifestError> {
        self.string(s, field, MAX_PATH_CHARS, false, None)?;
        if !s.starts_with('/') {
            return Err(self.bad(field, "must be an absolute path"));
        }
        Ok(())
    }
}

fn is_job_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 128
        && b[0].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
}

fn is_file_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 128
        && (b[0].is_ascii_alphanumeric() || b[0] == b'_')
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
}

fn is_k8s_name(s: &str) -> bool {
    let b = s.as_bytes();
    let end_ok = |c: &u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    !b.is_empty()
        && b.len() <= 253
        && b.first().is_some_and(end_ok)
        && b.last().is_some_and(end_ok)
        && b.iter().all(|c| end_ok(c) || matches!(c, b'-' | b'.'))
}

fn is_sha256(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c))
}

fn is_ident(s: &str) -> bool {
    let mut b = s.bytes();
    b.next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == b'_')
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

fn is_entrypoint(s: &str) -> bool {
    let mut parts = s.split(':');
    let (Some(module), Some(func), None) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    module.split('.').all(is_ident) && func.split('.').all(is_ident)
}

fn is_created_at(s: &str) -> bool {
    parse_created_at(s).is_some()
}

/// `YYYY-MM-DDTHH:MM:SS[.fraction]Z` with 0–9 fraction digits and a real calendar date.
/// Seconds up to 61 are accepted because the Python side (`strptime`'s `%S`) accepts them.
pub fn parse_created_at(s: &str) -> Option<SystemTime> {
    let b = s.as_bytes();
    if b.len() < 20 || b.len() > 40 || *b.last()? != b'Z' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<u64> {
        let part = b.get(r)?;
        if !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(part).ok()?.parse().ok()
    };
    if b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let frac = &b[19..b.len() - 1];
    let nanos = if frac.is_empty() {
        0
    } else {
        if frac[0] != b'.' || frac.len() < 2 || frac.len() > 10 {
            return None;
        }
        let digits = &frac[1..];
        if !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let mut n: u64 = std::str::from_utf8(digits).ok()?.parse().ok()?;
        for _ in digits.len()..9 {
            n *= 10;
        }
        n
    };
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let month_days = [
        31,
        if leap { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if y < 1 || !(1..=12).contains(&mo) || h > 23 || mi > 59 || sec > 61 {
        return None;
    }
    if d < 1 || d > month_days[(mo - 1) as usize] {
        return None;
    }
    let days = days_from_civil(y as i64, mo as i64, d as i64);
    let secs = days * 86_400 + (h * 3600 + mi * 60 + sec) as i64;
    if secs >= 0 {
        Some(UNIX_EPOCH + Duration::new(secs as u64, nanos as u32))
    } else {
        UNIX_EPOCH.checked_sub(Duration::from_secs(secs.unsigned_abs()))
    }
}

/// Days since 1970-01-01 for a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The field rules that serde's shapes cannot express. Returns the validated argv.
fn validate(doc: &Manifest, path: &Path) -> Result<Vec<String>, ManifestError> {
    let c = Check { path };
    if doc.schema != SCHEMA {
        return Err(ManifestError::SchemaVersion {
            path: path.to_path_buf(),
            found: format!("{:?}", echo(&doc.schema)),
        });
    }
    check_job(&c, &doc.job)?;
    c.int(doc.step.epoch, "step.epoch", 0, MAX_SAFE_INT)?;
    c.int(doc.step.global_step, "step.global_step", 0, MAX_SAFE_INT)?;
    c.opt_int(doc.step.batch_index, "step.batch_index", 0, MAX_SAFE_INT)?;
    c.string(
        &doc.created_at,
        "created_at",
        40,
        false,
        Some((is_created_at, "YYYY-MM-DDTHH:MM:SS[.fraction]Z")),
    )?;
    c.int(doc.pid, "pid", 1, MAX_PID)?;
    if let Some(dev) = &doc.cuda_device {
        c.int(dev.index, "cuda_device.index", 0, 1023)?;
        c.opt_string(&dev.uuid, "cuda_device.uuid", 128, None)?;
        c.opt_string(&dev.name, "cuda_device.name", 256, None)?;
        c.opt_string(&dev.pci_bus_id, "cuda_device.pci_bus_id", 64, None)?;
    }
    if let Some(log) = &doc.log_file {
        c.abs_path(log, "log_file")?;
    }
    let sw = &doc.software;
    c.string(&sw.python, "software.python", 64, false, None)?;
    c.abs_path(&sw.executable, "software.executable")?;
    c.opt_string(&sw.torch, "software.torch", 64, None)?;
    c.opt_string(&sw.cuda_runtime, "software.cuda_runtime", 64, None)?;
    c.opt_string(
        &sw.assertwatch_replay,
        "software.assertwatch_replay",
        64,
        None,
    )?;
    let roles = check_files(&c, &doc.files)?;
    check_model_state(&c, &doc.model_state, &roles)?;
    check_determinism(&c, &doc.determinism)?;
    let argv = check_replay(&c, &doc.replay)?;
    if let Some(extra) = &doc.extra {
        check_extra(&c, extra)?;
    }
    Ok(argv)
}

fn check_job(c: &Check, job: &Job) -> Result<(), ManifestError> {
    c.string(
        &job.name,
        "job.name",
        128,
        false,
        Some((is_job_name, "^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")),
    )?;
    c.int(job.uid, "job.uid", 0, MAX_ID)?;
    c.int(job.gid, "job.gid", 0, MAX_ID)?;
    c.string(&job.hostname, "job.hostname", 255, false, None)?;
    c.opt_int(job.rank, "job.rank", 0, 1_000_000)?;
    c.opt_int(job.world_size, "job.world_size", 1, 1_000_000)?;
    if let Some(k) = &job.kubernetes {
        let rule: Option<Rule> = Some((is_k8s_name, "a Kubernetes DNS name"));
        c.string(&k.namespace, "job.kubernetes.namespace", 63, false, rule)?;
        c.string(&k.pod, "job.kubernetes.pod", 253, false, rule)?;
        c.opt_string(&k.container, "job.kubernetes.container", 63, rule)?;
    }
    Ok(())
}

fn check_files(c: &Check, files: &[FileEntry]) -> Result<Vec<String>, ManifestError> {
    if files.is_empty() || files.len() > MAX_FILES {
        return Err(c.bad("files", format!("must hold 1 to {MAX_FILES} entries")));
    }
    let mut roles: Vec<String> = Vec::new();
    let mut names: Vec<&str> = Vec::new();
    for (i, e) in files.iter().enumerate() {
        let field = format!("files[{i}]");
        if !FILE_ROLES.contains(&e.role.as_str()) {
            return Err(c.bad(
                &format!("{field}.role"),
                format!("must be one of {}", FILE_ROLES.join(", ")),
            ));
        }
        if roles.contains(&e.role) {
            return Err(c.bad(&format!("{field}.role"), "duplicate role"));
        }
        roles.push(e.role.clone());
        c.string(&e.path, &format!("{field}.path"), 128, false, None)?;
        if e.path.starts_with('/') || e.path.contains('/') || e.path == ".." || e.path == "." {
            return Err(ManifestError::PathEscape {
                path: c.path.to_path_buf(),
                field: format!("{field}.path"),
                detail: format!(
                    "{:?} leaves the manifest's directory: a plain file name is required",
                    echo(&e.path)
                ),
            });
        }
        if !is_file_name(&e.path) || e.path == MANIFEST_NAME {
            return Err(c.bad(
                &format!("{field}.path"),
                "must be a plain file name in the manifest's directory (letters, digits, '.', '_', '-'; not starting with '.' or '-')",
            ));
        }
        if names.contains(&e.path.as_str()) {
            return Err(c.bad(&format!("{field}.path"), "duplicate path"));
        }
        names.push(&e.path);
        c.int(e.bytes, &format!("{field}.bytes"), 0, MAX_SAFE_INT)?;
        if !is_sha256(&e.sha256) {
            return Err(c.bad(
                &format!("{field}.sha256"),
                "must be 64 lowercase hex digits",
            ));
        }
        if let Some(f) = &e.format {
            if f != "torch.save" {
                return Err(c.bad(&format!("{field}.format"), "must be \"torch.save\""));
            }
        }
    }
    for needed in ["batch", "rng"] {
        if !roles.iter().any(|r| r == needed) {
            return Err(c.bad("files", format!("no entry with role {needed:?}")));
        }
    }
    Ok(roles)
}

fn check_model_state(c: &Check, ms: &ModelState, roles: &[String]) -> Result<(), ManifestError> {
    if !MODEL_STATE_KINDS.contains(&ms.kind.as_str()) {
        return Err(c.bad(
            "model_state.kind",
            format!("must be one of {}", MODEL_STATE_KINDS.join(", ")),
        ));
    }
    c.opt_string(&ms.reference, "model_state.ref", MAX_PATH_CHARS, None)?;
    c.opt_int(ms.step, "model_state.step", 0, MAX_SAFE_INT)?;
    let has_model = roles.iter().any(|r| r == "model");
    if ms.kind == "full" && !has_model {
        return Err(c.bad(
            "model_state.kind",
            "is \"full\" but no file has role \"model\"",
        ));
    }
    if ms.kind != "full" && has_model {
        return Err(c.bad(
            "model_state.kind",
            "must be \"full\" when a file has role \"model\"",
        ));
    }
    if ms.kind == "checkpoint_ref" && ms.reference.as_deref().is_none_or(str::is_empty) {
        return Err(c.bad(
            "model_state.ref",
            "required when kind is \"checkpoint_ref\"",
        ));
    }
    if ms.kind != "full" && ms.exact {
        return Err(c.bad(
            "model_state.exact",
            "can only be true when kind is \"full\"",
        ));
    }
    Ok(())
}

fn check_determinism(c: &Check, det: &Determinism) -> Result<(), ManifestError> {
    for (i, s) in det.rng_restored.iter().enumerate() {
        if !RNG_STREAMS.contains(&s.as_str()) {
            return Err(c.bad(
                &format!("determinism.rng_restored[{i}]"),
                format!("must be one of {}", RNG_STREAMS.join(", ")),
            ));
        }
        if det.rng_restored[..i].contains(s) {
            return Err(c.bad("determinism.rng_restored", "has duplicates"));
        }
    }
    Ok(())
}

fn check_argv(c: &Check, argv: &Value) -> Result<Vec<String>, ManifestError> {
    let list = match argv {
        Value::String(_) => {
            return Err(ManifestError::ShellString {
                path: c.path.to_path_buf(),
            })
        }
        Value::Array(list) => list,
        _ => return Err(c.bad("replay.argv", "must be a list of strings")),
    };
    if list.is_empty() || list.len() > MAX_ARGV {
        return Err(c.bad("replay.argv", format!("must hold 1 to {MAX_ARGV} elements")));
    }
    let mut out = Vec::with_capacity(list.len());
    for (i, v) in list.iter().enumerate() {
        let field = format!("replay.argv[{i}]");
        let Value::String(arg) = v else {
            return Err(c.bad(&field, "must be a string"));
        };
        c.string(arg, &field, MAX_STRING_CHARS, true, None)?;
        if (arg.contains('{') || arg.contains('}')) && !PLACEHOLDERS.contains(&arg.as_str()) {
            return Err(ManifestError::BadPlaceholder {
                path: c.path.to_path_buf(),
                field,
                element: format!("{:?}", echo(arg)),
            });
        }
        out.push(arg.clone());
    }
    if out[0] != "{python}" && !out[0].starts_with('/') {
        return Err(c.bad("replay.argv[0]", "must be \"{python}\" or an absolute path"));
    }
    for needed in REQUIRED_PLACEHOLDERS {
        if !out.iter().any(|a| a == needed) {
            return Err(c.bad(
                "replay.argv",
                format!("must contain the placeholder {needed}"),
            ));
        }
    }
    Ok(out)
}

fn check_replay(c: &Check, rp: &Replay) -> Result<Vec<String>, ManifestError> {
    let argv = check_argv(c, &rp.argv)?;
    c.string(
        &rp.entrypoint,
        "replay.entrypoint",
        256,
        false,
        Some((is_entrypoint, "module.path:function")),
    )?;
    if rp.env.len() > MAX_ENV {
        return Err(c.bad("replay.env", format!("more than {MAX_ENV} entries")));
    }
    for (k, v) in &rp.env {
        if !ENV_ALLOW.contains(&k.as_str()) {
            return Err(ManifestError::EnvNotAllowed {
                path: c.path.to_path_buf(),
                var: echo(k),
            });
        }
        c.string(v, &format!("replay.env.{k}"), MAX_STRING_CHARS, true, None)?;
    }
    c.abs_path(&rp.cwd, "replay.cwd")?;
    if let Some(modes) = &rp.modes {
        if modes.is_empty() {
            return Err(c.bad("replay.modes", "must be a non-empty list"));
        }
        for (i, m) in modes.iter().enumerate() {
            if !MODES.contains(&m.as_str()) {
                return Err(c.bad(
                    &format!("replay.modes[{i}]"),
                    format!("must be one of {}", MODES.join(", ")),
                ));
            }
            if modes[..i].contains(m) {
                return Err(c.bad("replay.modes", "has duplicates"));
            }
        }
    }
    c.opt_int(
        rp.requires_world_size,
        "replay.requires_world_size",
        1,
        1_000_000,
    )?;
    if let Some(est) = &rp.estimates {
        if let Some(s) = est.step_seconds {
            if !s.is_finite() || !(0.0..=1e9).contains(&s) {
                return Err(c.bad(
                    "replay.estimates.step_seconds",
                    "must be a finite number between 0 and 1e9",
                ));
            }
        }
        c.opt_int(
            est.gpu_memory_bytes,
            "replay.estimates.gpu_memory_bytes",
            0,
            MAX_SAFE_INT,
        )?;
    }
    Ok(argv)
}

/// `extra`: at most 16 KiB serialised and 8 levels deep. The size is measured the way the Python
/// side measures it, `json.dumps(extra, ensure_ascii=False)` with its default `", "` and `": "`
/// separators, so both sides accept and reject the same documents.
fn check_extra(c: &Check, extra: &Map<String, Value>) -> Result<(), ManifestError> {
    let value = Value::Object(extra.clone());
    let compact = serde_json::to_vec(&value)
        .map(|v| v.len())
        .unwrap_or(usize::MAX);
    let size = compact.saturating_add(separator_spaces(&value));
    if size > MAX_EXTRA_BYTES {
        return Err(c.bad(
            "extra",
            format!("{size} bytes when serialised; the limit is {MAX_EXTRA_BYTES}"),
        ));
    }
    if json_depth(&value, 0) > MAX_EXTRA_DEPTH {
        return Err(c.bad(
            "extra",
            format!("nested deeper than {MAX_EXTRA_DEPTH} levels"),
        ));
    }
    Ok(())
}

/// The spaces Python's default separators add over compact JSON: one per `:` and one per `,`.
fn separator_spaces(v: &Value) -> usize {
    match v {
        Value::Object(m) => {
            m.len() + m.len().saturating_sub(1) + m.values().map(separator_spaces).sum::<usize>()
        }
        Value::Array(a) => {
            a.len().saturating_sub(1) + a.iter().map(separator_spaces).sum::<usize>()
        }
        _ => 0,
    }
}

/// Python's `_json_depth`: containers count one level each, scalars none.
fn json_depth(v: &Value, depth: usize) -> usize {
    match v {
        Value::Object(m) => m
            .values()
            .map(|x| json_depth(x, depth + 1))
            .max()
            .unwrap_or(0)
            .max(depth + 1),
        Value::Array(a) => a
            .iter()
            .map(|x| json_depth(x, depth + 1))
            .max()
            .unwrap_or(0)
            .max(depth + 1),
        _ => depth,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_at_accepts_the_contract_forms() {
        assert!(parse_created_at("2026-03-01T12:00:00Z").is_some());
        assert!(parse_created_at("2026-03-01T12:00:00.123456789Z").is_some());
        assert!(parse_created_at("2024-02-29T00:00:00Z").is_some());
        assert!(parse_created_at("2026-02-29T00:00:00Z").is_none());
        assert!(parse_created_at("2026-03-01T12:00:00+00:00").is_none());
        assert!(parse_created_at("2026-03-01T24:00:00Z").is_none());
        assert!(parse_created_at("2026-03-01T12:00:00.Z").is_none());
        let t = parse_created_at("1970-01-02T00:00:01.5Z").unwrap();
        assert_eq!(t, UNIX_EPOCH + Duration::from_millis(86_401_500));
    }

    #[test]
    fn entrypoint_rule() {
        assert!(is_entrypoint("examples.tiny_train:replay_step"));
        assert!(is_entrypoint("a:b.c"));
        assert!(!is_entrypoint("a:b:c"));
        assert!(!is_entrypoint("a.:b"));
        assert!(!is_entrypoint("1a:b"));
    }

    #[test]
    fn extra_size_matches_python_separators() {
        let v: Value = serde_json::from_str(r#"{"a": 1, "b": [1, 2, {"c": null}]}"#).unwrap();
        // json.dumps gives {"a": 1, "b": [1, 2, {"c": null}]}: 34 bytes.
        let compact = serde_json::to_vec(&v).unwrap().len();
        assert_eq!(compact + separator_spaces(&v), 34);
        assert_eq!(json_depth(&v, 0), 3);
    }
}
