//! Cascades on one node: one rank's device-side assert, then another rank's NCCL watchdog timeout
//! in the same run directory. The timeout is linked to the assert (`caused_by`), blamed on it,
//! and not counted as an alert of its own; a timeout in another run's directory is independent.

// Tests start the real binary; the ban on Command::new guards the daemon's code.
#![allow(clippy::disallowed_methods)]

mod common;

use common::{assert_block, Daemon};
use std::io::Write;

const CONFIG: &str = r#"
listen: "127.0.0.1:{port}"
state_dir: ./state
logs:
  - name: jobs
    paths: ["./runs/*/*.log"]
gpu:
  backend: none
incidents:
  quiet_period: 200ms
tailing:
  rescan_interval: 100ms
"#;

const WATCHDOG: &str = "[E ProcessGroupNCCL.cpp:475] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600010 milliseconds before timing out.\n";

fn append(path: &std::path::Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

#[test]
fn nccl_timeouts_after_an_assert_of_the_same_run_follow_from_it() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    std::fs::create_dir_all(&runs).unwrap();
    let d = Daemon::start(dir.path(), CONFIG);
    append(&runs.join("r1/rank0.log"), &assert_block(1));
    assert!(d.wait_for(20, |d| d.incidents().len() == 1), "{}", d.log());
    append(&runs.join("r1/rank1.log"), WATCHDOG);
    append(&runs.join("r2/rank0.log"), WATCHDOG);
    assert!(d.wait_for(20, |d| d.incidents().len() == 3), "{}", d.log());
    let all = d.incidents();
    let assert = all.iter().find(|i| i["kind"] == "device_assert").unwrap();
    let nccl: Vec<_> = all.iter().filter(|i| i["kind"] == "nccl_error").collect();
    let follow = nccl
        .iter()
        .find(|i| i["source"]["path"].as_str().unwrap().contains("/r1/"))
        .unwrap();
    let other = nccl
        .iter()
        .find(|i| i["source"]["path"].as_str().unwrap().contains("/r2/"))
        .unwrap();
    assert_eq!(follow["caused_by"], assert["id"], "{follow}");
    assert_eq!(follow["blame"], "application");
    assert_eq!(follow["training_job"], assert["training_job"]);
    assert!(other["caused_by"].is_null(), "{other}");
    assert_ne!(other["training_job"], assert["training_job"]);
    // The daemon's log goes to a file here, not a terminal: no colour codes in it.
    let log = d.log();
    assert!(log.contains("assertwatch started"), "{log}");
    assert!(
        !log.contains('\u{1b}'),
        "ANSI escape codes in a non-terminal log"
    );
}
