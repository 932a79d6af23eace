//! The real daemon against real files: rotation, truncation, restarts, the kernel log, config
//! errors, a full state disk, reload and shutdown. Each test runs `assertwatch run` in a temp dir
//! and talks to it over HTTP only.

// Tests start the real binary and real servers; the ban on Command::new guards the daemon's code.
#![allow(clippy::disallowed_methods)]

mod common;

use common::{assert_block, ordinary, Daemon, TAIL_CONFIG};
use std::io::Write;
use std::path::Path;
use std::time::Duration;

fn append(path: &Path, text: &str) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    f.write_all(text.as_bytes()).unwrap();
    f.sync_all().unwrap();
}

/// Writes one assert block after enough ordinary lines that it is its own incident.
fn write_failure(path: &Path, n: u64) {
    append(path, &ordinary(n * 1000, 60));
    append(path, &assert_block(n));
}

fn blocks_seen(d: &Daemon) -> Vec<u64> {
    let mut v: Vec<u64> = d
        .incidents()
        .iter()
        .filter(|i| i["kind"] == "device_assert")
        .map(|i| i["block"][0].as_u64().unwrap())
        .collect();
    v.sort_unstable();
    v
}

fn wait_blocks(d: &Daemon, want: &[u64]) {
    let ok = d.wait_for(20, |d| blocks_seen(d) == want);
    assert!(
        ok,
        "want blocks {want:?}, have {:?}\nlog:\n{}",
        blocks_seen(d),
        d.log()
    );
}

#[test]
fn rotations_truncation_and_kill9_restarts_give_each_failure_exactly_once() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    let log = dir.join("logs/train.log");
    let mut want = Vec::new();
    let d = Daemon::start(dir, TAIL_CONFIG);
    for n in 1..=2 {
        write_failure(&log, n);
        want.push(n);
    }
    wait_blocks(&d, &want);

    // Rename rotation: the old file is drained, the new one starts at 0.
    write_failure(&log, 3);
    want.push(3);
    std::fs::rename(&log, dir.join("logs/train.log.1")).unwrap();
    write_failure(&log, 4);
    want.push(4);
    wait_blocks(&d, &want);

    // copytruncate: logrotate copies then truncates in place.
    std::fs::copy(&log, dir.join("logs/train.log.2")).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&log)
        .unwrap()
        .set_len(0)
        .unwrap();
    write_failure(&log, 5);
    want.push(5);
    wait_blocks(&d, &want);

    // Delete and recreate.
    std::fs::remove_file(&log).unwrap();
    std::thread::sleep(Duration::from_millis(400));
    write_failure(&log, 6);
    want.push(6);
    wait_blocks(&d, &want);

    for kind in ["rename", "truncate"] {
        assert!(
            d.metric(
                "assertwatch_log_rotations_total",
                &[("source", "jobs"), ("kind", kind)]
            ) >= 1.0,
            "{kind}: {}",
            d.metrics()
        );
    }

    // kill -9, write while down, restart: what was written meanwhile is read, nothing twice.
    let port = d.port;
    let config = d.config.clone();
    d.kill9();
    write_failure(&log, 7);
    want.push(7);
    let d = Daemon::start_with(dir, &config, port);
    wait_blocks(&d, &want);
    // A second kill -9 right after more writes, and a restart.
    write_failure(&log, 8);
    want.push(8);
    std::thread::sleep(Duration::from_millis(150));
    d.kill9();
    let d = Daemon::start_with(dir, &config, port);
    wait_blocks(&d, &want);
    // Give a late duplicate every chance to appear.
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(blocks_seen(&d), want, "log:\n{}", d.log());

    // The checkpoint never points past what exists in the file.
    let (status, _) = d.stop();
    assert!(status.success());
    let ck: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("state/checkpoints.json")).unwrap())
            .unwrap();
    let size = std::fs::metadata(&log).unwrap().len();
    for f in ck["files"].as_array().unwrap() {
        if f["path"].as_str().is_some_and(|p| p.ends_with("train.log")) {
            assert!(f["offset"].as_u64().unwrap() <= size);
        }
    }
}

#[test]
fn kernel_log_file_in_kmsg_format_counts_sequence_gaps() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    std::fs::write(
        dir.join("kmsg.txt"),
        "6,100,1000,-;NVRM: GPU at PCI:0000:3b:00: GPU-11111111-2222-3333-4444-555555555555\n\
         4,101,1001,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=123, name=python, GPU has fallen off the bus.\n \
         SUBSYSTEM=pci\n\
         6,105,1002,-;IPv6: eth0: link becomes ready\n",
    )
    .unwrap();
    let cfg = format!("{TAIL_CONFIG}kernel_log:\n  path: ./kmsg.txt\n");
    let d = Daemon::start(dir, &cfg);
    assert!(
        d.wait_for(10, |d| d.incidents().iter().any(|i| i["xid"] == 79)),
        "{}",
        d.log()
    );
    let x = d.incidents().into_iter().find(|i| i["xid"] == 79).unwrap();
    assert_eq!(x["blame"], "hardware");
    assert_eq!(x["pid"], 123);
    assert_eq!(x["gpu"]["uuid"], "GPU-11111111-2222-3333-4444-555555555555");
    assert_eq!(x["source"]["kind"], "kmsg");
    assert!(
        d.wait_for(5, |d| d.metric("assertwatch_kmsg_lost_records_total", &[])
            == 3.0),
        "{}",
        d.metrics()
    );
    assert_eq!(
        d.metric(
            "assertwatch_xid_errors_total",
            &[("xid", "79"), ("pci_bus_id", "0000:3b:00")]
        ),
        1.0
    );
    // A restart does not report the same Xid again.
    let port = d.port;
    let config = d.config.clone();
    let (st, _) = d.stop();
    assert!(st.success());
    let d = Daemon::start_with(dir, &config, port);
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(d.incidents().iter().filter(|i| i["xid"] == 79).count(), 1);
    assert_eq!(
        d.metric("assertwatch_incidents_total", &[("kind", "xid")]),
        0.0,
        "re-reported after restart"
    );
}

#[test]
fn bad_config_names_the_field_and_exits_2() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("bad.yaml");
    std::fs::write(&p, "listen: \"127.0.0.1:1\"\nlogs:\n  - name: jobs\n    paths: [\"/x/*.log\"]\n    format: xml\nincidents:\n  quiet_period: soon\n").unwrap();
    for args in [
        vec!["check-config", p.to_str().unwrap()],
        vec!["run", "--config", p.to_str().unwrap()],
    ] {
        let out = common::run(&args, None);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("logs[0].format (line 5)"), "{err}");
        assert!(err.contains("incidents.quiet_period (line 7)"), "{err}");
    }
    let unknown = tmp.path().join("unknown.yaml");
    std::fs::write(&unknown, "listen: \"127.0.0.1:1\"\nlogz: []\n").unwrap();
    let out = common::run(&["check-config", unknown.to_str().unwrap()], None);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("logz") && err.contains("line 2"), "{err}");
}

#[test]
fn directories_and_vanishing_files_are_counted_not_fatal() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("logs/not-a-file.log")).unwrap();
    let d = Daemon::start(dir, TAIL_CONFIG);
    assert!(
        d.wait_for(10, |d| d
            .metric("assertwatch_log_read_errors_total", &[("source", "jobs")])
            >= 1.0),
        "{}",
        d.metrics()
    );
    let log = dir.join("logs/a.log");
    write_failure(&log, 1);
    std::fs::remove_file(&log).unwrap();
    write_failure(&dir.join("logs/b.log"), 2);
    assert!(d.wait_for(10, |d| blocks_seen(d).contains(&2)));
    assert_eq!(common::get(&d.url("/healthz")).0, 200);
}

#[test]
fn full_state_disk_is_counted_and_the_daemon_keeps_serving() {
    if unsafe { libc::geteuid() } != 0 {
        assert!(
            !common::in_ci(),
            "this test mounts a tmpfs and needs root under CI"
        );
        eprintln!("SKIP: needs root to mount a tiny tmpfs");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    let state = dir.join("state");
    std::fs::create_dir_all(&state).unwrap();
    let st = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
        .arg(&state)
        .status()
        .unwrap();
    assert!(st.success(), "mount tmpfs");
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount")
                .arg("-l")
                .arg(&self.0)
                .status();
        }
    }
    let _guard = Unmount(state.clone());
    let d = Daemon::start(dir, TAIL_CONFIG);
    // Fill the state disk.
    let mut filler = std::fs::File::create(state.join("filler")).unwrap();
    let chunk = vec![0u8; 64 * 1024];
    while filler.write_all(&chunk).is_ok() {}
    drop(filler);
    let log = dir.join("logs/train.log");
    for n in 1..=30 {
        write_failure(&log, n);
    }
    let failed = d.wait_for(15, |d| {
        d.metric("assertwatch_checkpoint_errors_total", &[]) > 0.0
    });
    assert!(failed, "no checkpoint failure counted:\n{}", d.metrics());
    assert_eq!(common::get(&d.url("/healthz")).0, 200);
    assert_eq!(common::get(&d.url("/metrics")).0, 200);
    // Space comes back: nothing was lost, incidents arrive, and the file that got no new data
    // since is acknowledged to its end too (its checkpoint catches up without a restart).
    std::fs::remove_file(state.join("filler")).unwrap();
    write_failure(&dir.join("logs/other.log"), 31);
    assert!(
        d.wait_for(20, |d| blocks_seen(d).len() == 31),
        "have {:?}\n{}",
        blocks_seen(&d),
        d.log()
    );
    let size = std::fs::metadata(&log).unwrap().len();
    let caught_up = d.wait_for(10, |_| {
        std::fs::read_to_string(state.join("checkpoints.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
            .is_some_and(|ck| {
                ck["files"].as_array().into_iter().flatten().any(|f| {
                    f["path"].as_str().is_some_and(|p| p.ends_with("train.log"))
                        && f["offset"].as_u64() == Some(size)
                })
            })
    });
    assert!(
        caught_up,
        "idle file's checkpoint did not catch up: {:?}",
        std::fs::read_to_string(state.join("checkpoints.json"))
    );
}

#[test]
fn reload_keeps_the_old_config_when_the_new_one_is_invalid() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    let d = Daemon::start(dir, TAIL_CONFIG);
    let good = std::fs::read_to_string(&d.config).unwrap();
    std::fs::write(&d.config, format!("{good}\nbogus_key: 1\n")).unwrap();
    d.signal(libc::SIGHUP);
    assert!(
        d.wait_for(10, |d| d.metric(
            "assertwatch_config_reloads_total",
            &[("result", "failure")]
        ) >= 1.0),
        "{}",
        d.log()
    );
    assert_eq!(
        d.metric("assertwatch_config_last_reload_successful", &[]),
        0.0
    );
    write_failure(&dir.join("logs/a.log"), 1);
    assert!(d.wait_for(10, |d| blocks_seen(d) == vec![1]));
    // A valid change: the daemon re-executes itself in place (same pid) with the new settings.
    let pid = d.child.id();
    std::fs::write(
        &d.config,
        good.replace("quiet_period: 300ms", "quiet_period: 400ms"),
    )
    .unwrap();
    d.signal(libc::SIGHUP);
    std::thread::sleep(Duration::from_millis(300));
    d.wait_ready();
    assert_eq!(d.child.id(), pid);
    assert!(d.wait_for(10, |d| d
        .metric("assertwatch_config_last_reload_successful", &[])
        == 1.0));
    write_failure(&dir.join("logs/a.log"), 2);
    assert!(
        d.wait_for(10, |d| blocks_seen(d) == vec![1, 2]),
        "{:?}\n{}",
        blocks_seen(&d),
        d.log()
    );
}

#[test]
fn sigterm_during_a_burst_persists_everything_and_exits_promptly() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    let d = Daemon::start(dir, TAIL_CONFIG);
    let log = dir.join("logs/burst.log");
    for n in 1..=40 {
        write_failure(&log, n);
    }
    std::thread::sleep(Duration::from_millis(200));
    let port = d.port;
    let config = d.config.clone();
    let (status, took) = d.stop();
    assert!(status.success(), "exit {status:?}");
    assert!(took < Duration::from_secs(6), "shutdown took {took:?}");
    let d = Daemon::start_with(dir, &config, port);
    wait_blocks(&d, &(1..=40).collect::<Vec<_>>());
}

#[test]
fn systemd_notify_ready_then_watchdog_pings() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    let sock_path = dir.join("notify.sock");
    let sock = std::os::unix::net::UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let port = common::free_port();
    let cfg = dir.join("config.yaml");
    std::fs::write(&cfg, TAIL_CONFIG.replace("{port}", &port.to_string())).unwrap();
    let mut child = std::process::Command::new(common::bin())
        .args(["run", "--config"])
        .arg(&cfg)
        .current_dir(dir)
        .env("NOTIFY_SOCKET", &sock_path)
        .env("WATCHDOG_USEC", "200000")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 256];
    while got
        .iter()
        .filter(|m: &&String| m.as_str() == "WATCHDOG=1")
        .count()
        < 2
    {
        let Ok(n) = sock.recv(&mut buf) else { break };
        got.push(String::from_utf8_lossy(&buf[..n]).into_owned());
    }
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let n = sock
        .recv(&mut buf)
        .map(|n| String::from_utf8_lossy(&buf[..n]).into_owned());
    let _ = child.wait();
    assert_eq!(got.first().map(String::as_str), Some("READY=1"), "{got:?}");
    assert!(
        got.iter().filter(|m| m.as_str() == "WATCHDOG=1").count() >= 2,
        "{got:?}"
    );
    assert_eq!(n.ok().as_deref(), Some("STOPPING=1"));
}
