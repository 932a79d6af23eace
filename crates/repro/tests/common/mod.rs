//! Shared test code: ring entries written in the recorder's layout, the real interpreter, the
//! stub harness, and the torch gate (`CI=true` turns a missing torch into a failure).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

pub fn repo_python_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../python")
}

pub fn stub_harness() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/stub_harness.py")
}

/// Runs a command in a test (the spawn rule in clippy.toml is for the daemon's code).
#[allow(clippy::disallowed_methods)]
pub fn command(program: &str) -> std::process::Command {
    std::process::Command::new(program)
}

/// The real interpreter behind `python3` (not a shim that needs its own environment).
pub fn python() -> PathBuf {
    let out = command("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 on PATH");
    assert!(out.status.success(), "python3 failed");
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// Whether torch imports; under `CI=true` a missing torch fails the test instead.
pub fn torch_available(test: &str) -> bool {
    let ok = command("python3")
        .args(["-c", "import torch"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("{test}: torch is required under CI=true (python3 -c 'import torch' failed)");
        }
        eprintln!("{test}: skipped, torch is not installed (set CI=true to make this a failure)");
    }
    ok
}

pub fn sha256_hex(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

pub fn rfc3339(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).unwrap().as_secs() as i64;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // civil_from_days (H. Hinnant)
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.000Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

pub fn euid() -> u64 {
    // SAFETY: no preconditions.
    u64::from(unsafe { libc::geteuid() })
}

pub fn egid() -> u64 {
    // SAFETY: no preconditions.
    u64::from(unsafe { libc::getegid() })
}

/// A valid manifest document for `step`, with state files named batch.pt and rng.pt whose
/// contents are `batch` and `rng`.
pub fn manifest_doc(
    step: u64,
    log_file: &str,
    argv: Value,
    batch: &[u8],
    rng: &[u8],
    created: SystemTime,
) -> Value {
    json!({
        "schema": "assertwatch.debug-state/v1",
        "job": {"name": "train-42", "uid": euid(), "gid": egid(), "hostname": "node-1", "rank": 0, "world_size": 1},
        "step": {"epoch": 0, "global_step": step, "batch_index": step},
        "created_at": rfc3339(created),
        "pid": 4242,
        "cuda_device": null,
        "log_file": log_file,
        "software": {"python": "3.11.7", "executable": python().to_string_lossy(), "torch": null},
        "files": [
            {"role": "batch", "path": "batch.pt", "bytes": batch.len(), "sha256": sha256_hex(batch), "format": "torch.save"},
            {"role": "rng", "path": "rng.pt", "bytes": rng.len(), "sha256": sha256_hex(rng)}
        ],
        "model_state": {"kind": "none", "exact": false},
        "determinism": {"rng_restored": ["cpu"], "deterministic_algorithms": false, "compiled": false},
        "replay": {
            "argv": argv,
            "entrypoint": "proj.train:replay_step",
            "env": {"PYTHONPATH": repo_python_dir().to_string_lossy()},
            "cwd": "/",
            "modes": ["sync-gpu", "cpu", "sanitizer"]
        }
    })
}

/// The harness's default argv.
pub fn default_argv() -> Value {
    json!([
        "{python}",
        "-m",
        "assertwatch_replay",
        "run",
        "--manifest",
        "{manifest}",
        "--mode",
        "{mode}",
        "--result",
        "{result}",
        "--out-dir",
        "{out_dir}",
        "--timeout",
        "{timeout_s}"
    ])
}

/// The stub harness's argv with extra literal arguments.
pub fn stub_argv(extra: &[&str]) -> Value {
    let mut v = vec![
        json!("{python}"),
        json!(stub_harness().to_string_lossy()),
        json!("--manifest"),
        json!("{manifest}"),
        json!("--mode"),
        json!("{mode}"),
        json!("--result"),
        json!("{result}"),
        json!("--out-dir"),
        json!("{out_dir}"),
    ];
    v.extend(extra.iter().map(|s| json!(s)));
    Value::Array(v)
}

/// Writes a committed ring entry `<root>/train-42/rank-00000/ring/step-<12 digits>/` and returns
/// the manifest path. `edit` may change the document before it is written.
pub fn write_entry(
    root: &Path,
    step: u64,
    log_file: &str,
    argv: Value,
    created: SystemTime,
    edit: impl FnOnce(&mut Value),
) -> PathBuf {
    let dir = root
        .join("train-42")
        .join("rank-00000")
        .join("ring")
        .join(format!("step-{step:012}"));
    std::fs::create_dir_all(&dir).unwrap();
    let batch = format!("batch of step {step}").into_bytes();
    let rng = vec![7u8; 64];
    std::fs::write(dir.join("batch.pt"), &batch).unwrap();
    std::fs::write(dir.join("rng.pt"), &rng).unwrap();
    let mut doc = manifest_doc(step, log_file, argv, &batch, &rng, created);
    edit(&mut doc);
    let path = dir.join("manifest.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    path
}

pub fn ago(secs: u64) -> SystemTime {
    SystemTime::now() - Duration::from_secs(secs)
}
