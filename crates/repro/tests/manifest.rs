//! Manifest rejection cases, each with its reason code, checked against the Python validator too
//! (the two sides load one contract file and must refuse the same documents), and discovery of
//! the flagged and previous step.

mod common;

use std::path::Path;

use assertwatch_repro::discover::{self, IncidentKey};
use assertwatch_repro::manifest::{self, ManifestLimits};
use common::*;
use serde_json::{json, Value};

const LOG: &str = "/data/jobs/42/train.log";

/// Writes an entry edited by `edit`, loads it, and returns the reason of the rejection (from
/// loading or from the state-file checks).
fn reason_of(edit: impl FnOnce(&mut Value)) -> (String, std::path::PathBuf, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    let path = write_entry(tmp.path(), 5, LOG, default_argv(), ago(60), edit);
    let limits = ManifestLimits::default();
    let reason = match manifest::load(&path, &limits) {
        Err(e) => {
            // The message names the manifest; bounded length even for hostile input.
            assert!(e.to_string().len() < 1024, "{e}");
            e.reason().to_owned()
        }
        Ok(m) => match m.verify_files(&limits) {
            Err(e) => e.reason().to_owned(),
            Ok(()) => "accepted".to_owned(),
        },
    };
    (reason, path, tmp)
}

/// The Python side's verdict: `python -m assertwatch_replay validate` exits 0 or 2.
fn python_accepts(path: &Path) -> bool {
    let out = command(&python().to_string_lossy())
        .args(["-m", "assertwatch_replay", "validate"])
        .arg(path)
        .env("PYTHONPATH", repo_python_dir())
        .output()
        .unwrap();
    out.status.success()
}

fn rejected_by_both(edit: impl FnOnce(&mut Value), want: &str) {
    let (reason, path, _tmp) = reason_of(edit);
    assert_eq!(reason, want);
    assert!(
        !python_accepts(&path),
        "the Python validator accepted a {want} manifest"
    );
}

#[test]
fn a_valid_entry_is_accepted_by_both_sides() {
    let (reason, path, _tmp) = reason_of(|_| {});
    assert_eq!(reason, "accepted");
    assert!(python_accepts(&path));
}

#[test]
fn the_python_example_manifest_parses() {
    let path = repo_python_dir().join("tests/fixtures/manifest-example.json");
    let data = std::fs::read(&path).unwrap();
    let (doc, argv, _) = manifest::parse(&data, &path).unwrap();
    assert_eq!(doc.job.name, "train-42");
    assert_eq!(argv.last().map(String::as_str), Some("{timeout_s}"));
}

#[test]
fn shell_string_argv_is_rejected() {
    rejected_by_both(
        |d| d["replay"]["argv"] = json!("python -m assertwatch_replay run --manifest x"),
        "shell_string",
    );
}

#[test]
fn unknown_keys_are_rejected_at_every_level() {
    rejected_by_both(|d| d["surprise"] = json!(1), "unknown_key");
    rejected_by_both(|d| d["job"]["surprise"] = json!(1), "unknown_key");
    rejected_by_both(
        |d| d["replay"]["estimates"] = json!({"vram": 1}),
        "unknown_key",
    );
    // ...but not inside `extra`.
    let (reason, _, _t) = reason_of(|d| d["extra"] = json!({"anything": {"goes": [1, 2]}}));
    assert_eq!(reason, "accepted");
}

#[test]
fn path_escapes_are_rejected() {
    rejected_by_both(
        |d| d["files"][0]["path"] = json!("../batch.pt"),
        "path_escape",
    );
    rejected_by_both(
        |d| d["files"][0]["path"] = json!("/etc/passwd"),
        "path_escape",
    );
    rejected_by_both(
        |d| d["files"][0]["path"] = json!("sub/batch.pt"),
        "path_escape",
    );
}

#[test]
fn a_symlinked_state_file_is_not_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let path = write_entry(tmp.path(), 5, LOG, default_argv(), ago(60), |_| {});
    let dir = path.parent().unwrap();
    let outside = tmp.path().join("outside.pt");
    std::fs::rename(dir.join("batch.pt"), &outside).unwrap();
    std::os::unix::fs::symlink(&outside, dir.join("batch.pt")).unwrap();
    let limits = ManifestLimits::default();
    let m = manifest::load(&path, &limits).unwrap();
    assert_eq!(m.verify_files(&limits).unwrap_err().reason(), "path_escape");
}

#[test]
fn bad_placeholders_are_rejected() {
    rejected_by_both(
        |d| d["replay"]["argv"][5] = json!("--manifest={manifest}"),
        "bad_placeholder",
    );
    rejected_by_both(
        |d| d["replay"]["argv"][0] = json!("{pythn}"),
        "bad_placeholder",
    );
    rejected_by_both(
        |d| d["replay"]["argv"][2] = json!("$(reboot)}"),
        "bad_placeholder",
    );
}

#[test]
fn oversized_manifests_are_rejected_without_reading_them_whole() {
    let tmp = tempfile::tempdir().unwrap();
    let path = write_entry(tmp.path(), 5, LOG, default_argv(), ago(60), |_| {});
    let mut text = std::fs::read(&path).unwrap();
    text.extend(std::iter::repeat_n(b' ', 65 * 1024));
    std::fs::write(&path, &text).unwrap();
    let e = manifest::load(&path, &ManifestLimits::default()).unwrap_err();
    assert_eq!(e.reason(), "too_large");
    assert!(!python_accepts(&path));
    // A FIFO named manifest.json must not block the reader.
    let fifo = tmp.path().join("fifo.json");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid C string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    assert_eq!(
        manifest::load(&fifo, &ManifestLimits::default())
            .unwrap_err()
            .reason(),
        "not_regular"
    );
}

#[test]
fn a_hash_mismatch_is_rejected() {
    let tmp = tempfile::tempdir().unwrap();
    let path = write_entry(tmp.path(), 5, LOG, default_argv(), ago(60), |_| {});
    let batch = path.parent().unwrap().join("batch.pt");
    let mut data = std::fs::read(&batch).unwrap();
    data[0] ^= 1; // same size, different content
    std::fs::write(&batch, &data).unwrap();
    let limits = ManifestLimits::default();
    let m = manifest::load(&path, &limits).unwrap();
    assert_eq!(m.verify_files(&limits).unwrap_err().reason(), "bad_hash");
    std::fs::write(&batch, b"short").unwrap();
    assert_eq!(m.verify_files(&limits).unwrap_err().reason(), "bad_size");
    std::fs::remove_file(&batch).unwrap();
    assert_eq!(
        m.verify_files(&limits).unwrap_err().reason(),
        "missing_file"
    );
}

#[test]
fn other_contract_rules() {
    rejected_by_both(
        |d| d["schema"] = json!("assertwatch.debug-state/v2"),
        "schema_version",
    );
    rejected_by_both(
        |d| d["replay"]["env"] = json!({"LD_PRELOAD": "/x.so"}),
        "env_not_allowed",
    );
    rejected_by_both(|d| d["pid"] = json!(0), "bad_field");
    rejected_by_both(|d| d["pid"] = json!(12.0), "bad_field");
    rejected_by_both(|d| d["job"]["uid"] = json!(true), "bad_field");
    rejected_by_both(
        |d| d["created_at"] = json!("2026-02-30T00:00:00Z"),
        "bad_field",
    );
    rejected_by_both(|d| d["replay"]["modes"] = json!(null), "bad_field");
    rejected_by_both(
        |d| {
            d.as_object_mut().unwrap().remove("log_file");
        },
        "bad_field",
    );
    rejected_by_both(|d| d["replay"]["argv"][0] = json!("python3"), "bad_field");
    rejected_by_both(
        |d| d["extra"] = json!({"a": {"b": {"c": {"d": {"e": {"f": {"g": {"h": {}}}}}}}}}),
        "bad_field",
    );
}

/// Where the two sides used to disagree: whole-string ASCII patterns, seconds 60 and 61, year 0,
/// `-0` as an integer, escaped lone surrogates.
#[test]
fn former_disagreements_are_rejected_by_both() {
    rejected_by_both(|d| d["job"]["name"] = json!("train-42\n"), "bad_field");
    rejected_by_both(
        |d| d["replay"]["entrypoint"] = json!("proj.train:replay_step\n"),
        "bad_field",
    );
    for bad in [
        "2026-03-01T12:00:60Z",
        "2026-03-01T12:00:61Z",
        "0000-01-01T00:00:00Z",
        "٢٠٢٦-03-01T12:00:00Z",
        "2026-03-01T12:00:00Z\n",
    ] {
        rejected_by_both(|d| d["created_at"] = json!(bad), "bad_field");
    }
    for (from, to, want) in [
        ("\"epoch\": 0", "\"epoch\": -0", "bad_field"),
        ("\"node-1\"", "\"node-\\ud800\"", "bad_json"),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let path = write_entry(tmp.path(), 5, LOG, default_argv(), ago(60), |_| {});
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(from), "{from}");
        std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
        let e = manifest::load(&path, &ManifestLimits::default()).unwrap_err();
        assert_eq!(e.reason(), want, "{to}: {e}");
        assert!(!python_accepts(&path), "the Python validator accepted {to}");
    }
}

/// `extra` is measured as compact JSON on both sides: at the limit it passes, one byte over it
/// fails, whatever spaces a pretty printer would add.
#[test]
fn extra_is_measured_the_same_way_on_both_sides() {
    let limit = manifest::contract()
        .node(&["extra"])
        .and_then(|n| n.max_bytes)
        .unwrap();
    // {"a":1,"b":2,"blob":"…"} is 23 bytes plus the blob.
    let extra = |n: usize| json!({"a": 1, "b": 2, "blob": "x".repeat(n)});
    assert_eq!(serde_json::to_vec(&extra(0)).unwrap().len(), 23);
    let (reason, path, _t) = reason_of(|d| d["extra"] = extra(limit - 23));
    assert_eq!(reason, "accepted");
    assert!(python_accepts(&path));
    rejected_by_both(|d| d["extra"] = extra(limit - 22), "bad_field");
}

/// Both sides load the same contract file: the same bytes, version, schema and modes.
#[test]
fn both_sides_load_the_same_contract() {
    let script = "import json; from assertwatch_replay import manifest as m; \
                  print(json.dumps([m.CONTRACT_VERSION, m.CONTRACT_SHA256, m.SCHEMA, list(m.MODES), \
                  m.MAX_MANIFEST_BYTES, m.__file__]))";
    let out = command(&python().to_string_lossy())
        .args(["-c", script])
        .env("PYTHONPATH", repo_python_dir())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let py: Value = serde_json::from_slice(&out.stdout).unwrap();
    let c = manifest::contract();
    // The module under test is the repository's, not an installed copy.
    let module = Path::new(py[5].as_str().unwrap()).canonicalize().unwrap();
    assert!(module.starts_with(repo_python_dir().canonicalize().unwrap()));
    assert_eq!(py[0], json!(c.version));
    assert_eq!(py[1], json!(sha256_hex(manifest::CONTRACT_JSON.as_bytes())));
    assert_eq!(py[2], json!(c.schema));
    assert_eq!(py[3], json!(c.modes()));
    assert_eq!(py[4], json!(c.max_manifest_bytes));
    let on_disk =
        std::fs::read(repo_python_dir().join("assertwatch_replay/manifest-contract.json"));
    assert_eq!(on_disk.unwrap(), manifest::CONTRACT_JSON.as_bytes());
}

#[test]
fn duplicate_keys_are_rejected() {
    let tmp = tempfile::tempdir().unwrap();
    let path = write_entry(tmp.path(), 5, LOG, default_argv(), ago(60), |_| {});
    let text = std::fs::read_to_string(&path).unwrap();
    let text = text.replacen(
        "\"PYTHONPATH\"",
        "\"PYTHONHASHSEED\": \"0\", \"PYTHONHASHSEED\"",
        1,
    );
    std::fs::write(&path, text).unwrap();
    let e = manifest::load(&path, &ManifestLimits::default()).unwrap_err();
    assert_eq!(e.reason(), "duplicate_key");
    assert!(!python_accepts(&path));
}

#[test]
fn discovery_picks_the_newest_complete_entry_before_the_incident_and_the_one_before_it() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    for (step, age) in [(3, 40), (4, 30), (5, 20)] {
        write_entry(root, step, LOG, default_argv(), ago(age), |_| {});
    }
    // Created after the incident: not a candidate.
    write_entry(
        root,
        7,
        LOG,
        default_argv(),
        ago(0) + std::time::Duration::from_secs(60),
        |_| {},
    );
    // Incomplete (a state file missing): skipped.
    let torn = write_entry(root, 6, LOG, default_argv(), ago(10), |_| {});
    std::fs::remove_file(torn.parent().unwrap().join("rng.pt")).unwrap();
    // Rejected manifest: counted, skipped.
    let bad = write_entry(root, 8, LOG, default_argv(), ago(5), |d| {
        d["surprise"] = json!(1)
    });
    let roots = vec![root.to_string_lossy().into_owned()];
    let key = IncidentKey {
        log_path: Some(Path::new(LOG)),
        pid: None,
        at: ago(1),
    };
    let s = discover::find(&roots, &key, &ManifestLimits::default());
    let found = s.found.expect("an entry");
    assert_eq!(found.flagged.doc.step.global_step, 5);
    assert_eq!(found.previous.unwrap().doc.step.global_step, 4);
    assert_eq!(s.rejected.len(), 1);
    assert_eq!(s.rejected[0].reason(), "unknown_key");
    assert!(s.rejected[0]
        .to_string()
        .contains(&bad.to_string_lossy().to_string()));

    // By pid instead of log path; and a different log matches nothing.
    let by_pid = IncidentKey {
        log_path: None,
        pid: Some(4242),
        at: ago(1),
    };
    assert!(discover::find(&roots, &by_pid, &ManifestLimits::default())
        .found
        .is_some());
    let other = IncidentKey {
        log_path: Some(Path::new("/other.log")),
        pid: None,
        at: ago(1),
    };
    assert!(discover::find(&roots, &other, &ManifestLimits::default())
        .found
        .is_none());
}

#[test]
fn discovery_refuses_a_job_directory_that_links_outside_the_root() {
    let tmp = tempfile::tempdir().unwrap();
    let elsewhere = tmp.path().join("elsewhere");
    write_entry(&elsewhere, 5, LOG, default_argv(), ago(20), |_| {});
    let root = tmp.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    std::os::unix::fs::symlink(elsewhere.join("train-42"), root.join("train-42")).unwrap();
    let roots = vec![root.to_string_lossy().into_owned()];
    let key = IncidentKey {
        log_path: Some(Path::new(LOG)),
        pid: None,
        at: ago(1),
    };
    let s = discover::find(&roots, &key, &ManifestLimits::default());
    assert!(s.found.is_none());
    assert_eq!(s.rejected[0].reason(), "outside_roots");
}

/// Mutated manifests (byte flips, insertions, truncations) never panic the parser and every
/// rejection carries a reason from the closed set.
#[test]
fn mutated_manifests_never_panic() {
    let tmp = tempfile::tempdir().unwrap();
    let path = write_entry(tmp.path(), 5, LOG, default_argv(), ago(60), |_| {});
    let original = std::fs::read(&path).unwrap();
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let alphabet = b"{}[]\",:0123456789-.eE truenfals\\u0000{python}";
    for _ in 0..3000 {
        let mut data = original.clone();
        for _ in 0..(next() % 4 + 1) {
            let at = (next() % data.len() as u64) as usize;
            let byte = alphabet[(next() % alphabet.len() as u64) as usize];
            match next() % 3 {
                0 => data[at] = byte,
                1 => data.insert(at, byte),
                _ => data.truncate(at.max(1)),
            }
        }
        if let Err(e) = manifest::parse(&data, &path) {
            assert!(assertwatch_repro::manifest::ManifestError::REASONS.contains(&e.reason()));
            assert!(e.to_string().len() < 1024);
        }
    }
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let path = Path::new("deep.json");
    let mut text = String::from("{\"extra\": ");
    text.push_str(&"[".repeat(30_000));
    text.push_str(&"]".repeat(30_000));
    text.push('}');
    let e = manifest::parse(text.as_bytes(), path).unwrap_err();
    assert_eq!(e.reason(), "bad_json");
}
