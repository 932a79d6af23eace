//! Scores the real `assertwatch scan` on the held-out evaluation sets `tests/fresh/` (round two)
//! through `tests/fresh52/` (read in round thirty-six), all spent and kept for regressions,
//! and `tests/fresh53/`, which round thirty-six collected and left unread: for an unread set (its
//! README says `**Status: unread.**`) the figures are printed, the misses are not.
//!
//! A fresh set is kept apart from the rule-writing material so that it measures how detection
//! generalises. This test therefore asserts nothing about accuracy: it checks that the set parses
//! and that every sample carries the required fields, then prints kind accuracy, family accuracy,
//! false positives on the `none` samples, a per-kind table and the list of misses. Run it with
//! `cargo test --test fresh_corpus -- --nocapture --test-threads 1` to see the figures.

// Tests start the real binary; the ban on Command::new guards the daemon's code.
#![allow(clippy::disallowed_methods)]

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The set's files and the stream each one's samples may use.
const FILES: [(&str, &[&str]); 3] = [
    ("training-log.jsonl", &["training-log"]),
    ("kernel-log.jsonl", &["kernel-log"]),
    ("negatives.jsonl", &["training-log", "kernel-log"]),
];

/// Kinds a sample may expect; `sxid` is the NVSwitch kind the set already anticipates.
const KINDS: [&str; 8] = [
    "device_assert",
    "cuda_error",
    "oom",
    "nccl_error",
    "numeric",
    "xid",
    "sxid",
    "none",
];

/// Fields every `expect` object carries (`sxid` is required only for `kind: sxid`).
const EXPECT_FIELDS: [&str; 7] = [
    "kind",
    "category",
    "xid",
    "pci",
    "assertion",
    "kernel_file",
    "pid",
];

/// The shared corpus's category vocabulary (its README), besides the `xid_<N>_<name>` pattern.
const SHARED_VOCABULARY: [&str; 40] = [
    "index_out_of_bounds",
    "nll_target_out_of_range",
    "embedding_index",
    "index_add_out_of_range",
    "scatter_gather_index",
    "bce_input_range",
    "bce_target_range",
    "multinomial_invalid_probability",
    "dynamic_cast",
    "unknown",
    "illegal_memory_access",
    "misaligned_address",
    "illegal_instruction",
    "unspecified_launch_failure",
    "ecc_uncorrectable",
    "cublas_execution_failed",
    "cudnn_execution_failed",
    "cudnn_internal_error",
    "cudnn_mapping_error",
    "no_kernel_image",
    "launch_out_of_resources",
    "device_unavailable",
    "nvlink_uncorrectable",
    "cuda_oom",
    "nccl_watchdog_timeout",
    "nccl_unhandled_system_error",
    "nccl_unhandled_cuda_error",
    "nccl_ib_completion_error",
    "nccl_connection_refused",
    "non_finite_loss",
    "inf_loss",
    "nan_grad_norm",
    "loss_scale_collapse",
    "gpu_fallen_off_bus_no_xid",
    "none",
    "nvrm_non_xid",
    "xid_79_fallen_off_bus",
    "xid_13_graphics_engine_exception",
    "xid_31_mmu_fault",
    "xid_119_gsp_rpc_timeout",
];

struct Sample {
    file: &'static str,
    id: String,
    stream: String,
    text: String,
    expect: Value,
}

#[derive(Default)]
struct Tally {
    total: u32,
    kind_ok: u32,
    family_ok: u32,
    fields_ok: u32,
}

fn set_dir(set: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(set)
}

/// Categories `tests/fresh/README.md` lists in the table of its "## Categories" section (rows
/// starting "| `name`").
fn listed_categories(readme: &str) -> BTreeSet<String> {
    readme
        .lines()
        .skip_while(|l| l.trim() != "## Categories")
        .skip(1)
        .take_while(|l| !l.starts_with("## "))
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|rest| rest.split_once('`').map(|(name, _)| name.to_owned()))
        .collect()
}

/// Every `snake_case` name in backticks in `text` (the category names a document lists).
fn documented_names(text: &str) -> BTreeSet<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|t| {
            !t.is_empty()
                && t.contains('_')
                && t.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        })
        .map(str::to_owned)
        .collect()
}

/// `xid_<N>_…` / `sxid_<N>_…` → the numeric prefix, which decides the family for those kinds.
fn numbered_prefix(category: &str) -> Option<&str> {
    let (head, rest) = category.split_once('_')?;
    if head != "xid" && head != "sxid" {
        return None;
    }
    let digits = rest.split('_').next()?;
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| &category[..head.len() + 1 + digits.len()])
}

fn is_known_category(category: &str, listed: &BTreeSet<String>) -> bool {
    SHARED_VOCABULARY.contains(&category)
        || listed.contains(category)
        || numbered_prefix(category).is_some_and(|p| p.starts_with("xid_"))
}

/// Same family: equal categories, or the same Xid/SXid number whatever name follows it.
fn same_family(want: &str, got: &str) -> bool {
    want == got
        || matches!((numbered_prefix(want), numbered_prefix(got)), (Some(a), Some(b)) if a == b)
}

/// The samples of the set in `tests/<set>/`. A category must be in the shared vocabulary, in the
/// table of `tests/fresh/README.md` (later sets reuse its names) or of the set's own README, named
/// in the project's documentation, an Xid name, or flagged `novel_category: true` by the set's
/// collector.
fn load(set: &str) -> Vec<Sample> {
    let dir = set_dir(set);
    let readme =
        std::fs::read_to_string(set_dir("fresh").join("README.md")).expect("tests/fresh/README.md");
    let mut listed = listed_categories(&readme);
    // A later set may list categories of its own in its README's `## Categories` table.
    if let Ok(own) = std::fs::read_to_string(dir.join("README.md")) {
        listed.extend(listed_categories(&own));
    }
    // Later sets may also use the categories this project documents.
    for doc in [
        "docs/assert-catalog.md",
        "docs/detection.md",
        "docs/kernel-events.md",
    ] {
        let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(doc))
            .unwrap_or_else(|e| panic!("{doc}: {e}"));
        listed.extend(documented_names(&text));
    }
    let mut ids = HashSet::new();
    let mut samples = Vec::new();
    for (file, streams) in FILES {
        let text = std::fs::read_to_string(dir.join(file))
            .unwrap_or_else(|e| panic!("tests/{set}/{file}: {e}"));
        for (n, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let at = format!("{file}:{}", n + 1);
            let s: Value =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("{at}: bad JSON: {e}"));
            let field = |k: &str| {
                s[k].as_str()
                    .filter(|v| !v.is_empty())
                    .unwrap_or_else(|| panic!("{at}: missing string field {k}"))
                    .to_owned()
            };
            let (id, source, stream, text) =
                (field("id"), field("source"), field("stream"), field("text"));
            assert!(ids.insert(id.clone()), "{at}: duplicate id {id}");
            assert!(
                source.starts_with("https://") || source.starts_with("http://"),
                "{id}: source is not a URL"
            );
            assert!(
                streams.contains(&stream.as_str()),
                "{id}: stream {stream} not allowed in {file}"
            );
            let exp = s["expect"]
                .as_object()
                .unwrap_or_else(|| panic!("{id}: no expect object"));
            for f in EXPECT_FIELDS {
                assert!(exp.contains_key(f), "{id}: expect.{f} missing");
            }
            let kind = exp["kind"]
                .as_str()
                .unwrap_or_else(|| panic!("{id}: expect.kind not a string"));
            assert!(KINDS.contains(&kind), "{id}: unknown kind {kind}");
            let category = exp["category"]
                .as_str()
                .unwrap_or_else(|| panic!("{id}: expect.category not a string"));
            let novel = exp.get("novel_category").and_then(Value::as_bool) == Some(true);
            assert!(novel || is_known_category(category, &listed), "{id}: category {category} is neither in the shared vocabulary nor listed in tests/fresh/README.md or the docs, nor flagged novel_category");
            if kind == "sxid" {
                assert!(
                    exp.get("sxid").is_some_and(Value::is_u64),
                    "{id}: kind sxid needs a numeric expect.sxid"
                );
                assert!(
                    exp["xid"].is_null(),
                    "{id}: kind sxid needs expect.xid null"
                );
            }
            if file == "negatives.jsonl" {
                assert_eq!(kind, "none", "{id}: negatives.jsonl holds only kind none");
            }
            samples.push(Sample {
                file,
                id,
                stream,
                text,
                expect: s["expect"].clone(),
            });
        }
    }
    samples
}

/// Runs `assertwatch scan --format jsonl --stream <stream> -` on `text`.
fn scan(stream: &str, text: &str) -> Result<Vec<Value>, String> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_assertwatch"))
        .args(["scan", "--format", "jsonl", "--stream", stream, "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("spawn: {e}"))?;
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    let data = text.as_bytes().to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&data));
    let out = child.wait_with_output().map_err(|e| format!("wait: {e}"))?;
    let _ = writer.join();
    if !out.status.success() {
        return Err(format!(
            "exit {:?}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).map_err(|e| format!("bad JSON line {l:?}: {e}")))
        .collect()
}

fn pct(n: u32, d: u32) -> f64 {
    100.0 * f64::from(n) / f64::from(d.max(1))
}

/// Round two's set: spent (its misses were read while writing rules), kept as a regression set.
#[test]
fn fresh_set_scores() {
    score("fresh");
}

/// Round three's set, collected before the round's rule changes and scored once after them.
#[test]
fn fresh2_set_scores() {
    score("fresh2");
}

/// Round four's set, collected by someone who had not read the rules and scored once after the
/// round's first rule changes; spent since (its misses were read for the rest of the round).
#[test]
fn fresh3_set_scores() {
    score("fresh3");
}

/// Round five's set, collected by someone who had not read the rules, before the round's rule
/// changes were scored.
#[test]
fn fresh4_set_scores() {
    score("fresh4");
}

/// Round six's set, collected by someone who had not read the rules, after the round's rules
/// from upstream sources were written and before any of its samples was read.
#[test]
fn fresh5_set_scores() {
    score("fresh5");
}

/// Round seven's set, collected by someone who had not read the rules, scored once after the
/// round's first rules (code and changelog lines) and before any of its samples was read; spent
/// since.
#[test]
fn fresh6_set_scores() {
    score("fresh6");
}

fn score(set: &str) {
    let samples = load(set);
    let mut per_kind: BTreeMap<String, Tally> = BTreeMap::new();
    let (mut shared_fam, mut new_fam) = (Tally::default(), Tally::default());
    let (mut neg_total, mut neg_fp) = (0u32, 0u32);
    let mut misses = Vec::new();
    for s in &samples {
        let want_kind = s.expect["kind"].as_str().unwrap_or_default();
        let want_cat = s.expect["category"].as_str().unwrap_or_default();
        let got = match scan(&s.stream, &s.text) {
            Ok(incs) => incs,
            Err(e) => {
                misses.push(format!("{:<58} scan failed: {e}", s.id));
                if want_kind != "none" {
                    per_kind.entry(want_kind.to_owned()).or_default().total += 1;
                }
                continue;
            }
        };
        if want_kind == "none" {
            neg_total += 1;
            if let Some(first) = got.first() {
                neg_fp += 1;
                misses.push(format!(
                    "{:<58} false positive ({}): {} / {}",
                    s.id, s.file, first["kind"], first["category"]
                ));
            }
            continue;
        }
        let t = per_kind.entry(want_kind.to_owned()).or_default();
        t.total += 1;
        let shared_vocab = SHARED_VOCABULARY.contains(&want_cat)
            || numbered_prefix(want_cat).is_some_and(|p| p.starts_with("xid_"));
        let fam = if shared_vocab {
            &mut shared_fam
        } else {
            &mut new_fam
        };
        fam.total += 1;
        let Some(first) = got.first() else {
            misses.push(format!(
                "{:<58} want {want_kind}/{want_cat}, got nothing",
                s.id
            ));
            continue;
        };
        let got_kind = first["kind"].as_str().unwrap_or_default();
        let got_cat = first["category"].as_str().unwrap_or_default();
        if got_kind != want_kind {
            misses.push(format!(
                "{:<58} want {want_kind}/{want_cat}, got {got_kind}/{got_cat}",
                s.id
            ));
            continue;
        }
        t.kind_ok += 1;
        fam.kind_ok += 1;
        if !same_family(want_cat, got_cat) {
            misses.push(format!(
                "{:<58} kind ok, family: want {want_cat}, got {got_cat}",
                s.id
            ));
            continue;
        }
        t.family_ok += 1;
        fam.family_ok += 1;
        let mut bad = Vec::new();
        for f in ["xid", "sxid", "pci", "assertion", "kernel_file", "pid"] {
            if let Some(want) = s.expect.get(f) {
                let g = first.get(f).unwrap_or(&Value::Null);
                if g != want {
                    bad.push(format!("{f}: got {g} want {want}"));
                }
            }
        }
        if bad.is_empty() {
            t.fields_ok += 1;
        } else {
            misses.push(format!(
                "{:<58} family ok, fields: {}",
                s.id,
                bad.join("; ")
            ));
        }
    }

    let all = per_kind.values().fold(Tally::default(), |a, t| Tally {
        total: a.total + t.total,
        kind_ok: a.kind_ok + t.kind_ok,
        family_ok: a.family_ok + t.family_ok,
        fields_ok: a.fields_ok + t.fields_ok,
    });
    eprintln!(
        "\nevaluation set tests/{set}: {} samples ({} with an incident, {} none)",
        samples.len(),
        all.total,
        neg_total
    );
    eprintln!(
        "  {:<15} {:>5} {:>15} {:>15} {:>15}",
        "kind", "n", "kind ok", "family ok", "fields ok"
    );
    for (k, t) in &per_kind {
        eprintln!(
            "  {k:<15} {:>5} {:>8} {:>5.1}% {:>8} {:>5.1}% {:>8} {:>5.1}%",
            t.total,
            t.kind_ok,
            pct(t.kind_ok, t.total),
            t.family_ok,
            pct(t.family_ok, t.total),
            t.fields_ok,
            pct(t.fields_ok, t.total)
        );
    }
    eprintln!(
        "  {:<15} {:>5} {:>8} {:>5.1}% {:>8} {:>5.1}% {:>8} {:>5.1}%",
        "all",
        all.total,
        all.kind_ok,
        pct(all.kind_ok, all.total),
        all.family_ok,
        pct(all.family_ok, all.total),
        all.fields_ok,
        pct(all.fields_ok, all.total)
    );
    eprintln!(
        "  family on shared-vocabulary categories: {}/{} ({:.1}%); on categories this set proposes: {}/{} ({:.1}%)",
        shared_fam.family_ok, shared_fam.total, pct(shared_fam.family_ok, shared_fam.total),
        new_fam.family_ok, new_fam.total, pct(new_fam.family_ok, new_fam.total)
    );
    eprintln!(
        "  false positives on none samples: {neg_fp}/{neg_total} ({:.1}%)",
        pct(neg_fp, neg_total)
    );
    // A set that no one has read yet keeps its misses to itself: listing them would spend it.
    if unread(set) {
        eprintln!(
            "\nmisses: {} (not listed: tests/{set} is unread; see its README)",
            misses.len()
        );
        return;
    }
    eprintln!("\nmisses ({}):", misses.len());
    for m in &misses {
        eprintln!("  {m}");
    }
}

/// Does the set's README mark it unread (`**Status: unread.**`): collected and scored, but not yet
/// looked at while writing rules?
fn unread(set: &str) -> bool {
    std::fs::read_to_string(set_dir(set).join("README.md"))
        .is_ok_and(|r| r.contains("**Status: unread.**"))
}

#[cfg(test)]
mod helpers {
    use super::*;

    #[test]
    fn numbered_prefix_reads_xid_and_sxid_numbers() {
        assert_eq!(numbered_prefix("xid_79_fallen_off_bus"), Some("xid_79"));
        assert_eq!(numbered_prefix("sxid_12028_egress"), Some("sxid_12028"));
        assert_eq!(numbered_prefix("xid_"), None);
        assert_eq!(numbered_prefix("cuda_oom"), None);
    }

    #[test]
    fn same_family_accepts_other_names_for_one_xid() {
        assert!(same_family("xid_62_pmu_halt_error", "xid_62_pmu_halt"));
        assert!(!same_family(
            "xid_62_pmu_halt_error",
            "xid_61_pmu_breakpoint"
        ));
        assert!(!same_family("cuda_oom", "nccl_watchdog_timeout"));
    }

    #[test]
    fn listed_categories_reads_the_readme_table() {
        let md = "| `file.jsonl` | a |\n## Categories\n\n| category | meaning |\n|---|---|\n| `c10d_store_connect_failed` | x |\n## Known gaps\n| `other` | y |\n";
        let got = listed_categories(md);
        assert!(got.contains("c10d_store_connect_failed"));
        assert!(!got.contains("file.jsonl") && !got.contains("other"));
    }
}

/// Round eight's set, collected by someone who had not read the rules, scored once after the
/// round's first rule (examples framed by the line before) and before any of its samples was
/// read; spent since.
#[test]
fn fresh7_set_scores() {
    score("fresh7");
}

/// Round nine's set, collected by two people who had not read the rules (one for the kernel log),
/// scored once before any rule of the round was written; spent since.
#[test]
fn fresh8_set_scores() {
    score("fresh8");
}

/// Round ten's set, collected by three people who had not read the rules, and scored once before
/// the round's rule changes (see `docs/detection-eval.md`); spent since.
#[test]
fn fresh9_set_scores() {
    score("fresh9");
}

/// Round eleven's set, collected by four people who had not read the rules (two for training-log
/// incidents, one for negatives, one for the kernel log), scored once with the build the round
/// started from (see `docs/detection-eval.md`); spent since.
#[test]
fn fresh10_set_scores() {
    score("fresh10");
}

/// Round twelve's set, collected by four people who had not read the rules (two for training-log
/// incidents, one for negatives, one for the kernel log), scored once with the build the round
/// started from and once with the round's first changes, before any sample was read (see
/// `docs/detection-eval.md`); spent since.
#[test]
fn fresh11_set_scores() {
    score("fresh11");
}

/// Round thirteen's set, collected by four people who had not read the rules (two for
/// training-log incidents, one for negatives, one for the kernel log), scored with the build the
/// round started from and with the round's first change, before any sample was read (see
/// `docs/detection-eval.md`); spent since.
#[test]
fn fresh12_set_scores() {
    score("fresh12");
}

/// Round fourteen's set, collected by four people who had not read the rules (two for
/// training-log incidents, one for negatives, one for the kernel log), scored with the build the
/// round started from before any sample was read (see `docs/detection-eval.md`); spent since.
#[test]
fn fresh13_set_scores() {
    score("fresh13");
}

/// Round fifteen's set, collected by five people who had not read the rules (two for
/// training-log incidents, one for negatives, two for the kernel log), scored with the build the
/// round started from before any sample was read (see `docs/detection-eval.md`); spent since.
#[test]
fn fresh14_set_scores() {
    score("fresh14");
}

/// Round sixteen's set, collected by four people who had not read the rules (two for
/// training-log incidents, one for negatives, one for the kernel log), scored with the build the
/// round started from before any sample was read (see `docs/detection-eval.md`); spent since.
#[test]
fn fresh15_set_scores() {
    score("fresh15");
}

/// Round seventeen's set, collected by four people who had not read the rules (two for
/// training-log incidents, one for negatives, one for the kernel log), scored with the build the
/// round started from before any sample was read (see `docs/detection-eval.md`); spent since.
#[test]
fn fresh16_set_scores() {
    score("fresh16");
}

#[test]
fn fresh17_set_scores() {
    score("fresh17");
}

#[test]
fn fresh18_set_scores() {
    score("fresh18");
}

#[test]
fn fresh19_set_scores() {
    score("fresh19");
}

#[test]
fn fresh20_set_scores() {
    score("fresh20");
}

#[test]
fn fresh21_set_scores() {
    score("fresh21");
}

#[test]
fn fresh22_set_scores() {
    score("fresh22");
}

#[test]
fn fresh23_set_scores() {
    score("fresh23");
}

#[test]
fn fresh24_set_scores() {
    score("fresh24");
}

#[test]
fn fresh25_set_scores() {
    score("fresh25");
}

#[test]
fn fresh26_set_scores() {
    score("fresh26");
}

#[test]
fn fresh27_set_scores() {
    score("fresh27");
}

#[test]
fn fresh28_set_scores() {
    score("fresh28");
}

#[test]
fn fresh29_set_scores() {
    score("fresh29");
}

#[test]
fn fresh30_set_scores() {
    score("fresh30");
}

#[test]
fn fresh31_set_scores() {
    score("fresh31");
}

#[test]
fn fresh32_set_scores() {
    score("fresh32");
}

#[test]
fn fresh33_set_scores() {
    score("fresh33");
}

#[test]
fn fresh34_set_scores() {
    score("fresh34");
}

#[test]
fn fresh35_set_scores() {
    score("fresh35");
}

#[test]
fn fresh36_set_scores() {
    score("fresh36");
}

#[test]
fn fresh37_set_scores() {
    score("fresh37");
}

#[test]
fn fresh38_set_scores() {
    score("fresh38");
}

#[test]
fn fresh39_set_scores() {
    score("fresh39");
}

#[test]
fn fresh40_set_scores() {
    score("fresh40");
}

#[test]
fn fresh41_set_scores() {
    score("fresh41");
}

/// Round twenty-nine's first set, scored once before any of its samples was read; spent since.
#[test]
fn fresh42_set_scores() {
    score("fresh42");
}

/// Round twenty-nine's second set, collected with the first and scored once with the round's
/// rules before any of its samples was read; round thirty read it, so it is spent.
#[test]
fn fresh43_set_scores() {
    score("fresh43");
}

/// Round thirty's first set, scored once before any of its samples was read; spent since.
#[test]
fn fresh44_set_scores() {
    score("fresh44");
}

/// Round thirty's second set, scored before and after the round's rules, then read in round
/// thirty-one.
#[test]
fn fresh45_set_scores() {
    score("fresh45");
}

/// Round thirty-one's first set, scored with round thirty's rules before the round wrote any, then
/// read.
#[test]
fn fresh46_set_scores() {
    score("fresh46");
}

/// Round thirty-one's second set, scored before the rules drawn from `fresh46` and at the round's
/// end, then read in round thirty-two.
#[test]
fn fresh47_set_scores() {
    score("fresh47");
}

/// Round thirty-two's first set, scored with round thirty-one's last build before the round wrote
/// any rule, and with the rules drawn from `fresh47`; unread, so the test prints its figures but
/// not its misses.
#[test]
fn fresh48_set_scores() {
    score("fresh48");
}

/// Round thirty-two's second set, scored with the rules drawn from `fresh47` before `fresh48` was
/// read; unread, so the test prints its figures but not its misses.
#[test]
fn fresh49_set_scores() {
    score("fresh49");
}

/// Round thirty-three's set, scored with the rules of round thirty-two before `fresh49` was read,
/// and read in round thirty-four.
#[test]
fn fresh50_set_scores() {
    score("fresh50");
}

/// Round thirty-four's set, scored with the rules of round thirty-three before `fresh50` was read,
/// and read in round thirty-five.
#[test]
fn fresh51_set_scores() {
    score("fresh51");
}

/// Round thirty-five's set, scored with the rules of round thirty-four before `fresh51` was read,
/// and read in round thirty-six.
#[test]
fn fresh52_set_scores() {
    score("fresh52");
}

/// Round thirty-six's set, scored with the rules of round thirty-five before `fresh52` was read;
/// unread, so the test prints its figures but not its misses.
#[test]
fn fresh53_set_scores() {
    score("fresh53");
}
