//! Hostile input and exposure: the API off the network without auth, basic auth through the web
//! config, bounded metric cardinality under forged Xids, a forged-assert flood, and the privilege
//! drop observed in `/proc/<pid>/status`. Each test runs the real daemon.

// Tests start the real binary; the ban on Command::new guards the daemon's code.
#![allow(clippy::disallowed_methods)]

mod common;

use common::{assert_block, ordinary, Daemon};
use std::time::Duration;

/// bcrypt (cost 4) of "correct horse"; a low cost keeps the test fast.
const HASH: &str = "$2b$04$Du3N44Y.euoZtAdd.MIyH.GoZcR6ww3Z9fJW.hMn/mi90gWZV4LXC";

fn base(listen: &str) -> String {
    format!("listen: \"{listen}:{{port}}\"\nstate_dir: ./state\nlogs:\n  - name: jobs\n    paths: [\"./logs/*.log\"]\ngpu:\n  backend: none\nincidents:\n  quiet_period: 300ms\n")
}

fn get_auth(url: &str, user: &str, pass: &str) -> u16 {
    let mut b64 = String::new();
    let raw = format!("{user}:{pass}");
    // Minimal base64 for the Authorization header.
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for c in raw.as_bytes().chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                b64.push(T[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                b64.push('=');
            }
        }
    }
    match common::http()
        .get(url)
        .header("Authorization", &format!("Basic {b64}"))
        .call()
    {
        Ok(r) => r.status().as_u16(),
        Err(_) => 0,
    }
}

#[test]
fn api_is_off_the_network_without_auth_while_metrics_serve() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("logs")).unwrap();
    let port = common::free_port();
    let cfg = tmp.path().join("config.yaml");
    std::fs::write(&cfg, base("0.0.0.0").replace("{port}", &port.to_string())).unwrap();
    let d = Daemon::start_with(tmp.path(), &cfg, port);
    assert_eq!(common::get(&d.url("/metrics")).0, 200);
    assert_eq!(common::get(&d.url("/healthz")).0, 200);
    let (s, body) = common::get(&d.url("/api/v1/incidents"));
    assert_eq!(s, 403, "{body}");
    assert!(body.contains("basic_auth_users"));
    assert_eq!(common::get(&d.url("/")).0, 403);
}

#[test]
fn basic_auth_protects_the_api_and_leaves_metrics_open() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    std::fs::write(
        dir.join("web.yml"),
        format!("basic_auth_users:\n  ops: '{HASH}'\n"),
    )
    .unwrap();
    let port = common::free_port();
    let cfg = dir.join("config.yaml");
    std::fs::write(&cfg, base("0.0.0.0").replace("{port}", &port.to_string())).unwrap();
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("daemon.log"))
        .unwrap();
    let child = std::process::Command::new(common::bin())
        .args(["run", "--config"])
        .arg(&cfg)
        .arg("--web.config.file")
        .arg(dir.join("web.yml"))
        .current_dir(dir)
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    let d = Daemon {
        child,
        port,
        dir: dir.to_path_buf(),
        config: cfg,
    };
    d.wait_ready();
    assert_eq!(common::get(&d.url("/metrics")).0, 200, "metrics stay open");
    assert_eq!(
        common::get(&d.url("/api/v1/incidents")).0,
        401,
        "missing credentials"
    );
    assert_eq!(
        get_auth(&d.url("/api/v1/incidents"), "ops", "wrong"),
        401,
        "wrong password"
    );
    assert_eq!(
        get_auth(&d.url("/api/v1/incidents"), "ops", "correct horse"),
        200,
        "right password"
    );
    assert_eq!(get_auth(&d.url("/"), "ops", "correct horse"), 200);
    // An invalid web config is refused at start with the field named, exit 2.
    std::fs::write(
        dir.join("bad.yml"),
        "basic_auth_users:\n  ops: not-a-hash\n",
    )
    .unwrap();
    let out = common::run(
        &[
            "run",
            "--config",
            d.config.to_str().unwrap(),
            "--web.config.file",
            dir.join("bad.yml").to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("basic_auth_users"));
}

#[test]
fn forged_xids_cannot_blow_up_metric_cardinality() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    let mut kern = String::new();
    for i in 0..40u32 {
        kern.push_str(&format!(
            "[ 1.{i}] NVRM: Xid (PCI:0000:{:02x}:00): {}, pid={i}, name=x, forged\n",
            i,
            200 + i
        ));
    }
    std::fs::write(dir.join("kern.log"), kern).unwrap();
    let cfg = format!(
        "{}kernel_log:\n  path: ./kern.log\nlimits:\n  max_series_per_family: 5\n",
        base("127.0.0.1")
    );
    let d = Daemon::start(dir, &cfg);
    assert!(
        d.wait_for(10, |d| d.metric(
            "assertwatch_metric_series_dropped_total",
            &[("family", "assertwatch_xid_errors_total")]
        ) >= 35.0),
        "{}",
        d.metrics()
    );
    let series = d
        .metrics()
        .lines()
        .filter(|l| l.starts_with("assertwatch_xid_errors_total{"))
        .count();
    assert_eq!(series, 5);
    assert_eq!(
        d.incidents().iter().filter(|i| i["kind"] == "xid").count(),
        40,
        "incidents are kept; only series are bounded"
    );
}

#[test]
fn a_forged_assert_flood_collapses_into_counted_suppressions() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    let d = Daemon::start(dir, &format!("{}  max_per_minute: 50\n", base("127.0.0.1")));
    let mut text = String::new();
    for n in 0..1000 {
        text.push_str(&ordinary(n * 100, 42));
        text.push_str(&assert_block(n));
    }
    std::fs::write(dir.join("logs/flood.log"), text).unwrap();
    assert!(
        d.wait_for(20, |d| d.metric(
            "assertwatch_incidents_suppressed_total",
            &[("reason", "rate_limit")]
        ) >= 950.0),
        "{}",
        d.metrics()
    );
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(d.incidents().len(), 50);
    assert_eq!(d.metric("assertwatch_incidents_total", &[]), 50.0);
}

#[test]
fn started_as_root_it_drops_to_run_as_after_opening_its_inputs() {
    if unsafe { libc::geteuid() } != 0 {
        assert!(!common::in_ci(), "this test needs root under CI");
        eprintln!("SKIP: not root");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    // The temp dir must be reachable by the unprivileged user.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(dir.join("logs"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(
        dir.join("kern.log"),
        "[ 1.0] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.\n",
    )
    .unwrap();
    let cfg = format!(
        "{}kernel_log:\n  path: ./kern.log\nrun_as: \"65534:65534\"\n",
        base("127.0.0.1")
    );
    let d = Daemon::start(dir, &cfg);
    let status = |d: &Daemon| {
        std::fs::read_to_string(format!("/proc/{}/status", d.child.id())).unwrap_or_default()
    };
    assert!(
        d.wait_for(10, |d| status(d).lines().any(
            |l| l.starts_with("Uid:") && l.split_whitespace().skip(1).all(|u| u == "65534")
        )),
        "{}",
        status(&d)
    );
    let st = status(&d);
    assert!(
        st.lines()
            .any(|l| l.starts_with("Gid:") && l.split_whitespace().skip(1).all(|g| g == "65534")),
        "{st}"
    );
    assert!(
        st.lines()
            .any(|l| l.starts_with("CapEff:") && l.ends_with("0000000000000000")),
        "{st}"
    );
    // It still works as the user: the kernel log opened before the drop, new logs, the store.
    assert!(d.wait_for(10, |d| d.incidents().iter().any(|i| i["xid"] == 79)));
    std::fs::write(dir.join("logs/a.log"), assert_block(1)).unwrap();
    assert!(
        d.wait_for(10, |d| d
            .incidents()
            .iter()
            .any(|i| i["kind"] == "device_assert")),
        "{}",
        d.log()
    );
}
