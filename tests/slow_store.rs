//! A store that blocks for 5 s must not stall the HTTP side: the real daemon, a real SQLite lock
//! held by another connection (the writer then waits in its busy handler, exactly as on a stalled
//! disk), and `/metrics`, `/healthz` and the incidents API timed while it waits.

// Tests start the real binary and real servers; the ban on Command::new guards the daemon's code.
#![allow(clippy::disallowed_methods)]

mod common;

use common::{assert_block, get, ordinary, Daemon};
use std::io::Write;
use std::time::{Duration, Instant};

const CONFIG: &str = r#"
listen: "127.0.0.1:{port}"
state_dir: ./state
logs:
  - name: jobs
    paths: ["./logs/*.log"]
gpu:
  backend: none
incidents:
  quiet_period: 200ms
tailing:
  rescan_interval: 200ms
"#;

fn append(path: &std::path::Path, text: &str) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    f.write_all(text.as_bytes()).unwrap();
}

#[test]
fn metrics_health_and_api_answer_while_the_store_blocks() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("logs")).unwrap();
    let log = dir.path().join("logs/train.log");
    append(&log, &ordinary(0, 10));
    let d = Daemon::start(dir.path(), CONFIG);
    // One incident stored before the stall, so the API has something to read.
    append(&log, &assert_block(1));
    assert!(d.wait_for(20, |d| d.incidents().len() == 1), "{}", d.log());

    let locker = rusqlite::Connection::open(dir.path().join("state/incidents.sqlite")).unwrap();
    locker.busy_timeout(Duration::from_secs(5)).unwrap();
    locker.execute_batch("BEGIN IMMEDIATE").unwrap();
    let held = Instant::now();
    // A failure arrives while the store is blocked: its write waits for the lock.
    append(&log, &ordinary(100, 60));
    append(&log, &assert_block(2));

    let mut worst = [Duration::ZERO; 3];
    let mut samples = 0;
    while held.elapsed() < Duration::from_secs(5) {
        for (i, path) in ["/metrics", "/healthz", "/api/v1/incidents"]
            .iter()
            .enumerate()
        {
            let t = Instant::now();
            let (status, _) = get(&d.url(path));
            let took = t.elapsed();
            assert_eq!(status, 200, "{path} failed while the store was blocked");
            worst[i] = worst[i].max(took);
        }
        samples += 1;
        std::thread::sleep(Duration::from_millis(20));
    }
    // Still exactly one incident visible: the second is waiting for the store, not lost.
    assert_eq!(d.incidents().len(), 1);
    locker.execute_batch("COMMIT").unwrap();
    drop(locker);
    println!(
        "{samples} rounds during a 5 s store stall: worst /metrics {:?}, /healthz {:?}, /api/v1/incidents {:?}",
        worst[0], worst[1], worst[2]
    );
    for (w, path) in worst
        .iter()
        .zip(["/metrics", "/healthz", "/api/v1/incidents"])
    {
        assert!(
            *w < Duration::from_millis(100),
            "{path} took {w:?} while the store was blocked"
        );
    }
    assert!(samples > 20, "only {samples} rounds in 5 s");
    // Once the store takes writes again, the waiting incident arrives.
    assert!(d.wait_for(20, |d| d.incidents().len() == 2), "{}", d.log());
}
