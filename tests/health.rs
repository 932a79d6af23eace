//! GPU health end to end: the real daemon on a scripted fake GPU that reports Xid 79, is lost,
//! and comes back; `assertwatch health` (exit codes and reason), `/api/v1/gpus` and the
//! `assertwatch_gpu_health` gauge follow it, and recovery happens on evidence (NVML sees the GPU
//! again), not on a timer.

// Tests start the real binary; the ban on Command::new guards the daemon's code.
#![allow(clippy::disallowed_methods)]

mod common;

use common::{bin, Daemon};
use std::process::Command;
use std::time::{Duration, Instant};

const FAKE: &str = r#"
gpus:
  - index: 0
    uuid: GPU-00000000-0000-0000-0000-000000000001
    pci_bus_id: "00000000:B3:00.0"
    name: NVIDIA H100 80GB HBM3
    lost_at: 2s
    back_at: 7s
events:
  - { at: 1s, gpu: 0, xid: 79, pid: 4242 }
"#;

const CONFIG: &str = r#"
listen: "127.0.0.1:{port}"
state_dir: ./state
logs: []
gpu:
  backend: fake
  fake_file: ./fake.yaml
  poll_interval: 200ms
incidents:
  quiet_period: 200ms
"#;

fn health(dir: &std::path::Path, format: &str) -> (i32, String, Duration) {
    let t = Instant::now();
    let out = Command::new(bin())
        .args(["health", "--config", "config.yaml", "--format", format])
        .current_dir(dir)
        .output()
        .expect("run health");
    let took = t.elapsed();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).trim().to_owned(),
        took,
    )
}

#[test]
fn xid_79_makes_the_gpu_unhealthy_until_it_is_back() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("fake.yaml"), FAKE).unwrap();
    let d = Daemon::start(dir.path(), CONFIG);
    // Healthy (nothing recorded yet, or a healthy GPU) before the Xid.
    let unhealthy = d.wait_for(15, |d| {
        d.metric("assertwatch_gpu_health", &[("state", "unhealthy")]) == 1.0
    });
    assert!(unhealthy, "never unhealthy; log:\n{}", d.log());
    let (code, reason, took) = health(dir.path(), "text");
    assert_eq!(code, 1, "{reason}");
    assert!(reason.contains("unhealthy"), "{reason}");
    assert!(
        reason.contains("Xid 79") || reason.contains("lost"),
        "{reason}"
    );
    assert!(reason.contains("0000:b3:00"), "{reason}");
    println!("assertwatch health answered in {took:?}: {reason}");
    let (s, body) = common::get(&d.url("/api/v1/gpus"));
    assert_eq!(s, 200);
    let gpus: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(gpus[0]["health"], "unhealthy", "{body}");
    assert!(gpus[0]["health_reason"].is_string(), "{body}");
    // Still unhealthy while lost; healthy once NVML sees it again.
    let recovered = d.wait_for(20, |d| {
        d.metric("assertwatch_gpu_health", &[("state", "healthy")]) == 1.0
    });
    assert!(recovered, "never recovered; log:\n{}", d.log());
    let (code, json, _) = health(dir.path(), "json");
    assert_eq!(code, 0, "{json}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["healthy"], true);
    assert_eq!(v["gpus"][0]["state"], "healthy");
    assert_eq!(
        v["gpus"][0]["reason"],
        "seen again by NVML after it was lost"
    );
    // The daemon is stopped: the last state is still answered.
    drop(d);
    assert_eq!(health(dir.path(), "text").0, 0);
}
