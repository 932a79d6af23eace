//! Every sample of the shared real-world corpus through the real `assertwatch scan`.
//!
//! Each sample names the primary incident a correct detector reports; `kind: none` samples must
//! yield nothing. The test prints recall per kind, precision on the negatives and category
//! accuracy, and requires all of them to be 100% on this corpus.

// Tests start the real binary and real servers; the ban on Command::new guards the daemon's code.
#![allow(clippy::disallowed_methods)]

mod common;

use serde_json::Value;
use std::collections::BTreeMap;

#[derive(Default)]
struct Tally {
    total: u32,
    kind_ok: u32,
    fields_ok: u32,
}

#[test]
fn corpus_samples_classify_as_expected() {
    let Some(dir) = common::corpus_dir() else {
        assert!(
            !common::in_ci(),
            "the corpus (../shared/corpus) is required under CI"
        );
        eprintln!("SKIP: corpus not found");
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let mut tallies: BTreeMap<String, Tally> = BTreeMap::new();
    let mut failures = Vec::new();
    let mut neg_total = 0;
    let mut neg_clean = 0;
    for file in ["training-log.jsonl", "kernel-log.jsonl", "negatives.jsonl"] {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let s: Value = serde_json::from_str(line).unwrap();
            let id = s["id"].as_str().unwrap();
            let path = tmp.path().join(format!("{id}.log"));
            std::fs::write(&path, s["text"].as_str().unwrap()).unwrap();
            let out = common::run(
                &[
                    "scan",
                    "--format",
                    "jsonl",
                    "--stream",
                    s["stream"].as_str().unwrap(),
                    path.to_str().unwrap(),
                ],
                None,
            );
            assert!(
                out.status.success(),
                "{id}: exit {:?}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
            let incs = common::jsonl(&out.stdout);
            let exp = &s["expect"];
            let kind = exp["kind"].as_str().unwrap();
            if kind == "none" {
                neg_total += 1;
                if incs.is_empty() {
                    neg_clean += 1;
                } else {
                    failures.push(format!("{id}: expected nothing, got {}", incs[0]));
                }
                continue;
            }
            let t = tallies.entry(kind.to_owned()).or_default();
            t.total += 1;
            let Some(got) = incs.first() else {
                failures.push(format!("{id}: expected {kind}, got nothing"));
                continue;
            };
            if got["kind"] != exp["kind"] {
                failures.push(format!("{id}: kind {} != {kind}", got["kind"]));
                continue;
            }
            t.kind_ok += 1;
            let mut bad = Vec::new();
            for field in ["category", "xid", "pci", "assertion", "kernel_file", "pid"] {
                if got[field] != exp[field] {
                    bad.push(format!("{field}: got {} want {}", got[field], exp[field]));
                }
            }
            for field in ["blame", "hint", "message", "first_line", "last_line"] {
                assert!(!got[field].is_null(), "{id}: {field} missing in {got}");
            }
            if bad.is_empty() {
                t.fields_ok += 1;
            } else {
                failures.push(format!("{id}: {}", bad.join("; ")));
            }
        }
    }
    eprintln!("\ncorpus results (recall = right kind; fields = category, xid, pci, assertion, kernel_file, pid all right):");
    let (mut all, mut fields) = (0, 0);
    for (k, t) in &tallies {
        eprintln!(
            "  {k:<14} recall {:>3}/{:<3} ({:5.1}%)  fields {:>3}/{:<3}",
            t.kind_ok,
            t.total,
            100.0 * f64::from(t.kind_ok) / f64::from(t.total),
            t.fields_ok,
            t.total
        );
        all += t.total;
        fields += t.fields_ok;
    }
    eprintln!(
        "  negatives: {neg_clean}/{neg_total} produced no incident (precision on negatives {:.1}%)",
        100.0 * f64::from(neg_clean) / f64::from(neg_total.max(1))
    );
    eprintln!(
        "  category and field accuracy: {fields}/{all} ({:.1}%)",
        100.0 * f64::from(fields) / f64::from(all.max(1))
    );
    assert!(
        failures.is_empty(),
        "{} corpus failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
