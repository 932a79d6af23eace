//! Reproduction end to end: the example job records its debug state and dies; its log carries the
//! device-side assert text a GPU run prints; the real daemon detects the incident, replays the
//! flagged step with the real Python harness in `cpu` mode, and the incident's `repro` names the
//! planted line and the explicit CPU error. Needs Python with torch (fails under `CI=true` if
//! missing).

// Tests start the real binary and real servers; the ban on Command::new guards the daemon's code.
#![allow(clippy::disallowed_methods)]

mod common;

use common::{ordinary, Daemon};
use std::path::Path;
use std::process::Command;

fn torch_available() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import torch"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(!common::in_ci(), "python3 with torch is required under CI=true (pip install -r python/requirements-test.txt)");
        eprintln!("SKIP: python3 with torch not available");
    }
    ok
}

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn planted_line(bug: &str) -> String {
    let src = std::fs::read_to_string(repo().join("python/examples/tiny_train.py")).unwrap();
    let n = src
        .lines()
        .position(|l| l.contains(&format!("# PLANTED-BUG: {bug}")))
        .expect("marker")
        + 1;
    format!("tiny_train.py:{n}")
}

/// What the job prints on a GPU when its labels exceed the class count (corpus wording).
const GPU_FAILURE: &str = "/opt/conda/conda-bld/pytorch/work/aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], thread: [5,0,0] Assertion `t >= 0 && t < n_classes` failed.
Traceback (most recent call last):
  File \"examples/tiny_train.py\", line 140, in <module>
    main()
RuntimeError: CUDA error: device-side assert triggered
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
";

/// Runs the example job with the label bug planted at step 5 on the CPU; it records its debug
/// state under `dbg` and dies at the bad step.
fn run_example_job(dbg: &Path, log: &Path) {
    let out = Command::new("python3")
        .arg(repo().join("python/examples/tiny_train.py"))
        .args([
            "--bug",
            "label",
            "--bad-step",
            "5",
            "--device",
            "cpu",
            "--state-dir",
        ])
        .arg(dbg)
        .arg("--log-file")
        .arg(log)
        .current_dir(repo().join("python"))
        .output()
        .unwrap();
    assert!(!out.status.success(), "the planted bug should end the job");
}

fn config(dbg: &Path) -> String {
    format!(
        "listen: \"127.0.0.1:{{port}}\"\nstate_dir: ./state\nlogs:\n  - name: jobs\n    paths: [\"./logs/*.log\"]\ngpu:\n  backend: none\nincidents:\n  quiet_period: 300ms\n\
         repro:\n  enabled: true\n  roots: [\"{}\"]\n  modes: [cpu]\n  timeout: 120s\n  max_per_hour: 3\n  allow_root_jobs: true\n",
        dbg.display()
    )
}

#[test]
fn daemon_replays_the_flagged_step_and_names_the_planted_line() {
    if !torch_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    let dbg = dir.join("dbg");
    let log = dir.join("logs/train.log");
    run_example_job(&dbg, &log);
    // On a GPU the job would have printed this instead of the CPU's explicit error.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(&log)
        .unwrap();
    std::io::Write::write_all(&mut f, GPU_FAILURE.as_bytes()).unwrap();
    drop(f);
    // A second job's log with the same failure but no debug state.
    std::fs::write(
        dir.join("logs/other.log"),
        format!("{}{GPU_FAILURE}", ordinary(0, 3)),
    )
    .unwrap();

    let d = Daemon::start(dir, &config(&dbg));
    let done = |d: &Daemon| {
        let incs = d.incidents();
        incs.len() == 2 && incs.iter().all(|i| i["repro"]["outcome"].is_string())
    };
    assert!(
        d.wait_for(120, done),
        "incidents: {:#?}\n{}",
        d.incidents(),
        d.log()
    );
    let incs = d.incidents();
    let with_state = incs
        .iter()
        .find(|i| i["source"]["path"].as_str().unwrap().ends_with("train.log"))
        .unwrap();
    let r = &with_state["repro"];
    assert_eq!(r["outcome"], "reproduced_cpu_only", "{r:#}");
    assert!(
        r["python_frame"]
            .as_str()
            .unwrap()
            .ends_with(&planted_line("label")),
        "{r:#}"
    );
    assert!(
        r["exception"]["message"]
            .as_str()
            .unwrap()
            .contains("Target 5 is out of bounds"),
        "{r:#}"
    );
    assert_eq!(with_state["category"], "nll_target_out_of_range");
    let other = incs
        .iter()
        .find(|i| i["source"]["path"].as_str().unwrap().ends_with("other.log"))
        .unwrap();
    assert_eq!(other["repro"]["outcome"], "no_debug_state");
    assert!(
        d.metric(
            "assertwatch_repro_runs_total",
            &[("outcome", "reproduced_cpu_only")]
        ) >= 1.0
    );
    assert!(d.metric("assertwatch_repro_duration_seconds_count", &[]) >= 1.0);
    // The page shows the result.
    assert!(common::get(&d.url("/")).1.contains("reproduced_cpu_only"));
}

#[test]
fn a_forged_assert_flood_starts_at_most_the_rate_limit_of_replays() {
    if !torch_available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    let dbg = dir.join("dbg");
    let log = dir.join("logs/train.log");
    run_example_job(&dbg, &log);
    let d = Daemon::start(dir, &config(&dbg));
    // 100 forged failures within a second, each its own incident.
    let mut text = String::new();
    for n in 0..100 {
        text.push_str(&ordinary(n * 100, 45));
        text.push_str(GPU_FAILURE);
    }
    let mut f = std::fs::OpenOptions::new().append(true).open(&log).unwrap();
    std::io::Write::write_all(&mut f, text.as_bytes()).unwrap();
    drop(f);
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert!(
        d.wait_for(90, |d| d.metric("assertwatch_repro_runs_total", &[])
            >= 60.0
            && d.metric("assertwatch_repro_runs_total", &[("mode", "cpu")])
                >= 1.0)
    );
    let started = d.metric("assertwatch_repro_runs_total", &[("mode", "cpu")]);
    assert!(
        started <= 3.0,
        "{started} replays started for a flood; metrics:\n{}",
        d.metrics()
    );
    assert_eq!(common::get(&d.url("/healthz")).0, 200);
    let incidents = d.incidents().len();
    assert!(
        incidents <= 60,
        "{incidents} incidents stored; the per-minute bound is 60"
    );
    assert!(
        d.metric(
            "assertwatch_incidents_suppressed_total",
            &[("reason", "rate_limit")]
        ) >= 40.0
    );
}
