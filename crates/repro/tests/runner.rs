//! The runner end to end with real Python: outcomes, timeouts and process-group cleanup,
//! admission limits under a flood, output caps, and (with torch) the example job's planted bug.

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use assertwatch_repro::manifest::ManifestLimits;
use assertwatch_repro::{Metrics, Mode, Outcome, ReproConfig, ReproRequest, ReproRunner};
use common::*;
use prometheus::Registry;
use serde_json::json;

const LOG: &str = "/data/jobs/42/train.log";

fn config(state: &Path, root: &Path) -> ReproConfig {
    let mut cfg = ReproConfig::new(state);
    cfg.enabled = true;
    cfg.roots = vec![root.to_string_lossy().into_owned()];
    cfg.python = Some(python());
    // The test process may be root; the entries it writes then carry job.uid 0.
    cfg.allow_root_jobs = true;
    cfg.timeout = Duration::from_secs(60);
    cfg.harness_margin = Duration::from_secs(5);
    cfg.grace = Duration::from_secs(1);
    cfg
}

fn runner(cfg: ReproConfig) -> (ReproRunner, Registry) {
    let registry = Registry::new();
    let metrics = Metrics::new(&registry).unwrap();
    (ReproRunner::new(cfg, metrics), registry)
}

fn request(id: &str) -> ReproRequest {
    let mut r = ReproRequest::new(id, SystemTime::now());
    r.log_path = Some(PathBuf::from(LOG));
    r.category = "nll_target_out_of_range".into();
    r
}

fn counter(registry: &Registry, name: &str, labels: &[(&str, &str)]) -> f64 {
    registry
        .gather()
        .iter()
        .filter(|f| f.name() == name)
        .flat_map(|f| f.get_metric().iter())
        .filter(|m| {
            labels.iter().all(|(k, v)| {
                m.get_label()
                    .iter()
                    .any(|l| l.name() == *k && l.value() == *v)
            })
        })
        .map(|m| m.get_counter().get_value())
        .sum()
}

#[tokio::test]
async fn no_manifest_gives_no_debug_state() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    std::fs::create_dir_all(&root).unwrap();
    let (r, registry) = runner(config(&tmp.path().join("state"), &root));
    let res = r.run_for(request("inc-1")).await;
    assert_eq!(res.outcome, Outcome::NoDebugState);
    assert!(res.attempts.is_empty());
    let v = serde_json::to_value(&res).unwrap();
    assert_eq!(v["outcome"], "no_debug_state");
    assert_eq!(
        counter(
            &registry,
            "assertwatch_repro_runs_total",
            &[("outcome", "no_debug_state")]
        ),
        1.0
    );
}

#[tokio::test]
async fn disabled_runner_skips() {
    let tmp = tempfile::tempdir().unwrap();
    let mut cfg = config(tmp.path(), tmp.path());
    cfg.enabled = false;
    let (r, _) = runner(cfg);
    let res = r.run_for(request("inc-1")).await;
    assert_eq!(
        (res.outcome, res.reason.as_deref()),
        (Outcome::Skipped, Some("disabled"))
    );
}

fn pgid_alive(pgid: i32) -> Vec<i32> {
    assertwatch_repro::process::group_members(pgid)
}

fn pid_alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => {
            let state = s[s.rfind(')').unwrap() + 2..].chars().next().unwrap();
            state != 'Z' && state != 'X'
        }
        Err(_) => false,
    }
}

#[tokio::test]
async fn a_hanging_harness_times_out_and_its_process_group_is_gone() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    write_entry(
        &root,
        5,
        LOG,
        stub_argv(&["--behaviour", "hang"]),
        ago(30),
        |_| {},
    );
    let mut cfg = config(&tmp.path().join("state"), &root);
    cfg.modes = vec![Mode::Cpu];
    cfg.timeout = Duration::from_secs(1);
    cfg.harness_margin = Duration::ZERO;
    cfg.grace = Duration::from_millis(500);
    let (r, registry) = runner(cfg);
    let t0 = Instant::now();
    let res = r.run_for(request("inc-hang")).await;
    assert_eq!(res.outcome, Outcome::Timeout, "{res:?}");
    assert_eq!(res.reason.as_deref(), Some("deadline"));
    assert!(t0.elapsed() < Duration::from_secs(20));
    let out = res.attempts[0]
        .result_path
        .as_ref()
        .unwrap()
        .parent()
        .unwrap();
    let pids = std::fs::read_to_string(out.join("pids")).unwrap();
    let pids: Vec<i32> = pids
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    // The harness led its own group; neither it nor its SIGTERM-ignoring child survived.
    assert!(
        pgid_alive(pids[0]).is_empty(),
        "group {} still has members",
        pids[0]
    );
    assert!(!pid_alive(pids[0]) && !pid_alive(pids[1]));
    assert_eq!(
        counter(
            &registry,
            "assertwatch_repro_runs_total",
            &[("mode", "cpu"), ("outcome", "timeout")]
        ),
        1.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_flood_of_requests_starts_at_most_max_per_hour_replays() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    write_entry(
        &root,
        5,
        LOG,
        stub_argv(&["--behaviour", "result", "--sleep", "0.2"]),
        ago(30),
        |_| {},
    );
    let mut cfg = config(&tmp.path().join("state"), &root);
    cfg.modes = vec![Mode::Cpu];
    cfg.max_concurrent = 200;
    cfg.max_per_hour = 3;
    let (r, _) = runner(cfg);
    let t0 = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..100 {
        let r = r.clone();
        // Distinct categories, so duplicate suppression does not hide the hourly limit.
        let mut req = request(&format!("flood-{i}"));
        req.category = format!("category_{i}");
        tasks.push(tokio::spawn(async move { r.run_for(req).await }));
    }
    let mut started = 0;
    let mut limited = 0;
    for t in tasks {
        let res = t.await.unwrap();
        if res.attempts.is_empty() {
            assert_eq!(res.outcome, Outcome::Skipped);
            assert_eq!(res.reason.as_deref(), Some("rate_limited"));
            limited += 1;
        } else {
            started += 1;
        }
    }
    assert_eq!(started, 3);
    assert_eq!(limited, 97);
    assert!(t0.elapsed() < Duration::from_secs(30));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn past_the_concurrency_limit_requests_are_busy_at_once() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    write_entry(
        &root,
        5,
        LOG,
        stub_argv(&["--behaviour", "result", "--sleep", "1"]),
        ago(30),
        |_| {},
    );
    let mut cfg = config(&tmp.path().join("state"), &root);
    cfg.modes = vec![Mode::Cpu];
    cfg.max_concurrent = 1;
    let (r, _) = runner(cfg);
    let first = {
        let r = r.clone();
        tokio::spawn(async move { r.run_for(request("first")).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let t0 = Instant::now();
    let mut busy = 0;
    for i in 0..100 {
        let res = r.run_for(request(&format!("excess-{i}"))).await;
        if res.reason.as_deref() == Some("busy") {
            busy += 1;
        }
    }
    assert!(busy >= 99, "only {busy} busy");
    assert!(
        t0.elapsed() < Duration::from_millis(500),
        "busy answers must not wait"
    );
    assert_eq!(first.await.unwrap().attempts.len(), 1);
    // The same step and category again: suppressed as a duplicate.
    let again = r.run_for(request("first-again")).await;
    assert_eq!(again.reason.as_deref(), Some("duplicate"));
}

#[tokio::test]
async fn output_capture_is_capped_but_counted() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    write_entry(
        &root,
        5,
        LOG,
        stub_argv(&["--behaviour", "noise", "--bytes", "300000"]),
        ago(30),
        |_| {},
    );
    let mut cfg = config(&tmp.path().join("state"), &root);
    cfg.modes = vec![Mode::Cpu];
    cfg.output_cap = 4096;
    let (r, _) = runner(cfg);
    let res = r.run_for(request("inc-noise")).await;
    assert_eq!(res.outcome, Outcome::NotReproduced, "{res:?}");
    let attempt_dir = res.attempts[0]
        .result_path
        .as_ref()
        .unwrap()
        .parent()
        .unwrap()
        .parent()
        .unwrap();
    for name in ["harness.stdout.log", "harness.stderr.log"] {
        let len = std::fs::metadata(attempt_dir.join(name)).unwrap().len();
        assert_eq!(len, 4096, "{name}");
    }
}

#[test]
fn a_harness_that_dies_without_a_result_is_a_harness_error() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let m = write_entry(
        &root,
        5,
        LOG,
        stub_argv(&["--behaviour", "exit", "--code", "3"]),
        ago(30),
        |_| {},
    );
    let (r, _) = runner(config(&tmp.path().join("state"), &root));
    let res = r.replay_manifest(&m, Mode::Cpu);
    assert_eq!(res.outcome, Outcome::HarnessError);
    assert_eq!(res.reason.as_deref(), Some("state_unusable"));
}

#[test]
fn root_jobs_are_refused_unless_allowed() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let m = write_entry(&root, 5, LOG, stub_argv(&[]), ago(30), |d| {
        d["job"]["uid"] = json!(0)
    });
    let mut cfg = config(&tmp.path().join("state"), &root);
    cfg.allow_root_jobs = false;
    cfg.manifest = ManifestLimits {
        check_owner: false,
        ..ManifestLimits::default()
    };
    let (r, registry) = runner(cfg);
    let res = r.replay_manifest(&m, Mode::Cpu);
    assert_eq!(
        (res.outcome, res.reason.as_deref()),
        (Outcome::HarnessError, Some("root_job"))
    );
    assert_eq!(
        counter(
            &registry,
            "assertwatch_repro_rejected_manifests_total",
            &[("reason", "root_job")]
        ),
        1.0
    );
}

#[test]
fn a_rejected_manifest_by_hand_is_counted() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let m = write_entry(&root, 5, LOG, json!("python -m x"), ago(30), |_| {});
    let (r, registry) = runner(config(&tmp.path().join("state"), &root));
    let res = r.replay_manifest(&m, Mode::Cpu);
    assert_eq!(
        (res.outcome, res.reason.as_deref()),
        (Outcome::HarnessError, Some("shell_string"))
    );
    assert_eq!(
        counter(
            &registry,
            "assertwatch_repro_rejected_manifests_total",
            &[("reason", "shell_string")]
        ),
        1.0
    );
}

#[test]
fn metrics_can_reuse_the_daemons_handles() {
    let registry = Registry::new();
    let full = Metrics::new(&registry).unwrap();
    // A second full registration would collide; from_handles registers only its own family.
    let other = Registry::new();
    let m = Metrics::from_handles(full.runs.clone(), full.duration.clone(), &other).unwrap();
    m.runs.with_label_values(&["cpu", "timeout"]).inc();
    assert_eq!(
        counter(
            &registry,
            "assertwatch_repro_runs_total",
            &[("mode", "cpu")]
        ),
        1.0
    );
    assert!(Metrics::new(&registry).is_err());
}

fn planted_line(file: &Path, bug: &str) -> usize {
    let text = std::fs::read_to_string(file).unwrap();
    let marker = format!("# PLANTED-BUG: {bug}");
    text.lines()
        .position(|l| l.contains(&marker))
        .expect("marker")
        + 1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_jobs_planted_label_bug_reproduces_on_the_cpu() {
    if !torch_available("the_example_jobs_planted_label_bug_reproduces_on_the_cpu") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let state_root = tmp.path().join("debug-state");
    let log = tmp.path().join("train.log");
    let example = repo_python_dir()
        .join("examples/tiny_train.py")
        .canonicalize()
        .unwrap();
    let out = command(&python().to_string_lossy())
        .arg(&example)
        .args([
            "--state-dir",
            state_root.to_str().unwrap(),
            "--log-file",
            log.to_str().unwrap(),
        ])
        .args(["--bug", "label", "--bad-step", "5", "--device", "cpu"])
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "the planted bug should have failed the job"
    );

    let mut cfg = config(&tmp.path().join("state"), &state_root);
    cfg.python = None; // `{python}` is the job's own interpreter (software.executable)
    let (r, _) = runner(cfg);
    let mut req = request("inc-tiny");
    req.log_path = Some(log.clone());
    // Default ladder: sync-gpu first, then cpu. Without a GPU the harness answers the sync-gpu
    // attempt with `skipped` (no_cuda_device) and the CPU gives the answer; with one, the
    // synchronous GPU replay already names the line.
    let res = r.run_for(req).await;
    let pretty = serde_json::to_string_pretty(&res).unwrap();
    assert_eq!(res.attempts[0].mode, Mode::SyncGpu, "{pretty}");
    let line = planted_line(&example, "label");
    let frame = format!("{}:{line}", example.display());
    assert_eq!(
        res.python_frame.as_deref(),
        Some(frame.as_str()),
        "{pretty}"
    );
    assert_eq!(res.step, Some(5));
    if res.attempts[0].outcome == Outcome::Skipped {
        assert_eq!(
            res.attempts[0].reason.as_deref(),
            Some("no_cuda_device"),
            "{pretty}"
        );
        assert_eq!(res.outcome, Outcome::ReproducedCpuOnly, "{pretty}");
        assert_eq!(res.mode, Some(Mode::Cpu));
    } else {
        assert_eq!(res.outcome, Outcome::Reproduced, "{pretty}");
    }

    // The by-hand path in cpu mode: the explicit CPU error at the planted line.
    let manifest = res.attempts[0].manifest.clone();
    let by_hand = r.replay_manifest(&manifest, Mode::Cpu);
    assert_eq!(by_hand.outcome, Outcome::ReproducedCpuOnly);
    assert_eq!(by_hand.python_frame.as_deref(), Some(frame.as_str()));
    let exc = by_hand.exception.as_ref().unwrap();
    assert_eq!(exc.kind, "IndexError");
    assert!(
        exc.message.contains("Target 5 is out of bounds"),
        "{}",
        exc.message
    );
}

/// Two ring entries (steps 4 and 5) whose stub harness answers per mode as `argv4`/`argv5` say.
fn ladder_setup(argv4: &[&str], argv5: &[&str]) -> (tempfile::TempDir, ReproRunner) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let mut a4 = vec!["--behaviour", "result"];
    a4.extend_from_slice(argv4);
    let mut a5 = vec!["--behaviour", "result"];
    a5.extend_from_slice(argv5);
    write_entry(&root, 4, LOG, stub_argv(&a4), ago(40), |_| {});
    write_entry(&root, 5, LOG, stub_argv(&a5), ago(30), |_| {});
    let (r, _) = runner(config(&tmp.path().join("state"), &root));
    (tmp, r)
}

fn modes_and_steps(res: &assertwatch_repro::ReproResult) -> Vec<(Mode, u64, Outcome)> {
    res.attempts
        .iter()
        .map(|a| (a.mode, a.step, a.outcome))
        .collect()
}

#[tokio::test]
async fn ladder_replays_the_previous_step_when_the_flagged_one_runs_clean() {
    let (_tmp, r) = ladder_setup(
        &[
            "--outcome-sync-gpu",
            "reproduced",
            "--frame-sync-gpu",
            "/proj/model.py:8",
        ],
        &["--outcome", "not_reproduced"],
    );
    let res = r.run_for(request("inc-async")).await;
    assert_eq!(
        modes_and_steps(&res),
        [
            (Mode::SyncGpu, 5, Outcome::NotReproduced),
            (Mode::SyncGpu, 4, Outcome::Reproduced)
        ]
    );
    assert_eq!(res.outcome, Outcome::Reproduced);
    assert_eq!(res.step, Some(4));
    assert_eq!(res.python_frame.as_deref(), Some("/proj/model.py:8"));
}

#[tokio::test]
async fn ladder_runs_the_cpu_once_after_a_kernel_assertion_without_a_frame() {
    let (_tmp, r) = ladder_setup(
        &[],
        &[
            "--outcome-sync-gpu",
            "reproduced",
            "--kernel-sync-gpu",
            "1",
            "--exception-sync-gpu",
            "torch.AcceleratorError|CUDA error: device-side assert triggered",
            "--outcome-cpu",
            "reproduced_cpu_only",
            "--frame-cpu",
            "/proj/model.py:8",
            "--exception-cpu",
            "IndexError|Target 5 is out of bounds.",
        ],
    );
    let res = r.run_for(request("inc-kernel")).await;
    assert_eq!(
        modes_and_steps(&res),
        [
            (Mode::SyncGpu, 5, Outcome::Reproduced),
            (Mode::Cpu, 5, Outcome::ReproducedCpuOnly)
        ]
    );
    assert_eq!(
        (res.outcome, res.mode),
        (Outcome::Reproduced, Some(Mode::SyncGpu))
    );
    assert_eq!(res.python_frame.as_deref(), Some("/proj/model.py:8"));
    let ka = res.kernel_assertion.as_ref().unwrap();
    assert!(ka.location.ends_with("Loss.cu:242"));
    assert_eq!(
        res.exception.as_ref().unwrap().message,
        "Target 5 is out of bounds."
    );
}

#[tokio::test]
async fn ladder_skips_gpu_modes_on_an_unhealthy_gpu() {
    let (_tmp, r) = ladder_setup(
        &[],
        &[
            "--outcome-cpu",
            "reproduced_cpu_only",
            "--frame-cpu",
            "/proj/model.py:8",
        ],
    );
    let mut req = request("inc-xid");
    req.gpu_unhealthy = true;
    let res = r.run_for(req).await;
    assert_eq!(
        modes_and_steps(&res),
        [
            (Mode::SyncGpu, 5, Outcome::Skipped),
            (Mode::Cpu, 5, Outcome::ReproducedCpuOnly)
        ]
    );
    assert_eq!(res.attempts[0].reason.as_deref(), Some("gpu_unhealthy"));
    assert_eq!(res.outcome, Outcome::ReproducedCpuOnly);
}

#[tokio::test]
async fn ladder_reports_not_reproduced_after_every_mode_ran_clean() {
    let (_tmp, r) = ladder_setup(&[], &[]);
    let res = r.run_for(request("inc-clean")).await;
    // The CPU skips step 4: the GPU already ran it clean.
    assert_eq!(
        modes_and_steps(&res),
        [
            (Mode::SyncGpu, 5, Outcome::NotReproduced),
            (Mode::SyncGpu, 4, Outcome::NotReproduced),
            (Mode::Cpu, 5, Outcome::NotReproduced)
        ]
    );
    assert_eq!(res.outcome, Outcome::NotReproduced);
    assert_eq!(res.reason.as_deref(), Some("data_elsewhere"));
}

#[test]
fn step_estimates_shorten_the_time_limit_per_mode() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let argv = stub_argv(&["--behaviour", "result", "--timeout", "{timeout_s}"]);
    let m = write_entry(&root, 5, LOG, argv, ago(30), |d| {
        d["replay"]["estimates"] = json!({"step_seconds": 0.5, "gpu_memory_bytes": null});
    });
    let mut cfg = config(&tmp.path().join("state"), &root);
    cfg.timeout = Duration::from_secs(600);
    let (r, _) = runner(cfg);
    for (mode, want) in [
        (Mode::SyncGpu, "122.5"),
        (Mode::Cpu, "145"),
        (Mode::Sanitizer, "330"),
    ] {
        let res = r.replay_manifest(&m, mode);
        let path = res.result_path.clone().unwrap();
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
        assert_eq!(v["timeout_s"], want, "{mode}");
    }
}

/// As root: the child runs as the manifest's uid/gid with no supplementary groups, a clean
/// environment, `NoNewPrivs`, and the rlimits. The program is `/bin/sh` because the test's
/// interpreter may live where an unprivileged user cannot reach it.
#[test]
fn the_child_runs_as_the_job_user_with_a_clean_environment_and_limits() {
    if euid() != 0 {
        eprintln!("skipped: switching users needs root");
        return;
    }
    const NOBODY: u32 = 65534;
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        tmp.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let root = tmp.path().join("root");
    let script = "id -u > \"$0/uid\"; id -G > \"$0/groups\"; env > \"$0/env\"; \
                  ulimit -c > \"$0/core\"; ulimit -n > \"$0/nofile\"; \
                  grep NoNewPrivs /proc/self/status > \"$0/nnp\"";
    let argv = json!([
        "/bin/sh",
        "-c",
        script,
        "{out_dir}",
        "{manifest}",
        "{mode}",
        "{result}"
    ]);
    let m = write_entry(&root, 5, LOG, argv, ago(30), |d| {
        d["job"]["uid"] = json!(NOBODY);
        d["job"]["gid"] = json!(NOBODY);
    });
    let dir = m.parent().unwrap();
    for f in ["manifest.json", "batch.pt", "rng.pt"] {
        std::os::unix::fs::chown(dir.join(f), Some(NOBODY), Some(NOBODY)).unwrap();
    }
    let mut cfg = config(&tmp.path().join("state"), &root);
    cfg.allow_root_jobs = false;
    let (r, _) = runner(cfg);
    let res = r.replay_manifest(&m, Mode::Cpu);
    // The script writes no result.json: exit 0 without a result.
    assert_eq!(
        (res.outcome, res.reason.as_deref()),
        (Outcome::HarnessError, Some("result_missing")),
        "{res:?}"
    );
    let out = res
        .result_path
        .as_ref()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    let read = |name: &str| {
        std::fs::read_to_string(out.join(name))
            .unwrap()
            .trim()
            .to_owned()
    };
    assert_eq!(read("uid"), NOBODY.to_string());
    assert_eq!(read("groups"), NOBODY.to_string());
    assert_eq!(read("core"), "0");
    assert_eq!(read("nofile"), "4096");
    assert!(read("nnp").ends_with('1'), "{}", read("nnp"));
    let env = read("env");
    let keys: Vec<&str> = env
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .collect();
    for k in [
        "PATH",
        "HOME",
        "LANG",
        "PYTHONPATH",
        "PYTHONUNBUFFERED",
        "PYTHONFAULTHANDLER",
        "CUDA_VISIBLE_DEVICES",
        "TORCH_COMPILE_DISABLE",
    ] {
        assert!(keys.contains(&k), "{k} missing from {keys:?}");
    }
    // Nothing of the daemon's own environment leaks beyond those (the shell adds PWD, SHLVL, _).
    for k in &keys {
        assert!(
            [
                "PATH",
                "HOME",
                "LANG",
                "PYTHONPATH",
                "PYTHONUNBUFFERED",
                "PYTHONFAULTHANDLER",
                "CUDA_VISIBLE_DEVICES",
                "TORCH_COMPILE_DISABLE",
                "PWD",
                "SHLVL",
                "_",
                "OLDPWD"
            ]
            .contains(k),
            "unexpected variable {k}"
        );
    }
    assert!(env.contains(&format!("HOME={}", out.display())));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_replay_per_gpu_at_a_time() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    write_entry(
        &root,
        5,
        LOG,
        stub_argv(&["--behaviour", "result", "--sleep", "1"]),
        ago(30),
        |_| {},
    );
    let mut cfg = config(&tmp.path().join("state"), &root);
    cfg.max_concurrent = 2;
    let (r, _) = runner(cfg);
    let mut a = request("gpu-a");
    a.gpu = Some("GPU-8932f937".into());
    let first = {
        let r = r.clone();
        tokio::spawn(async move { r.run_for(a).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut b = request("gpu-b");
    b.gpu = Some("GPU-8932f937".into());
    b.category = "other_category".into();
    let second = r.run_for(b).await;
    assert_eq!(second.attempts[0].mode, Mode::SyncGpu);
    assert_eq!(second.attempts[0].reason.as_deref(), Some("gpu_busy"));
    assert_eq!(second.attempts[1].mode, Mode::Cpu);
    let first = first.await.unwrap();
    assert_eq!(first.attempts[0].outcome, Outcome::NotReproduced);
}

#[tokio::test]
async fn a_gpu_that_fails_its_health_check_is_not_used_for_the_replay() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    let a5 = [
        "--behaviour",
        "result",
        "--outcome-cpu",
        "reproduced_cpu_only",
        "--frame-cpu",
        "/proj/model.py:8",
    ];
    write_entry(&root, 5, LOG, stub_argv(&a5), ago(30), |_| {});
    let checked = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let seen = checked.clone();
    let mut cfg = config(&tmp.path().join("state"), &root);
    cfg.gpu_check = Some(assertwatch_repro::GpuCheck(std::sync::Arc::new(
        move |gpu: &str| {
            seen.lock().unwrap().push(gpu.to_owned());
            false
        },
    )));
    let (r, _) = runner(cfg);
    let mut req = request("inc-probe");
    req.gpu = Some("GPU-00000000-1111-2222-3333-444444444444".into());
    let res = r.run_for(req).await;
    assert_eq!(
        checked.lock().unwrap().as_slice(),
        ["GPU-00000000-1111-2222-3333-444444444444"]
    );
    assert_eq!(res.attempts[0].mode, Mode::SyncGpu);
    assert_eq!(res.attempts[0].reason.as_deref(), Some("gpu_probe_failed"));
    assert_eq!(res.outcome, Outcome::ReproducedCpuOnly);
}
