//! The shipped Alertmanager configuration, in a real Alertmanager, driven with amtool: while a
//! job's root-cause alert fires, its NCCL cascade alerts from other nodes are inhibited; another
//! job's NCCL alert is not.

// The test starts real servers; the ban on Command::new guards the daemon's code.
#![allow(clippy::disallowed_methods)]

mod common;

use common::{free_port, require_tool};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Kill(Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn amtool(url: &str, args: &[&str]) -> String {
    let out = Command::new("amtool")
        .args(args)
        .arg(format!("--alertmanager.url={url}"))
        .output()
        .expect("amtool");
    assert!(
        out.status.success(),
        "amtool {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_jobs_cascade_alerts_are_inhibited_while_its_root_cause_fires() {
    let Some(_) = require_tool("amtool") else {
        return;
    };
    let Some(am) = require_tool("prometheus-alertmanager").or_else(|| require_tool("alertmanager"))
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/alertmanager");
    for f in ["alertmanager.yml", "assertwatch.tmpl"] {
        std::fs::copy(shipped.join(f), dir.path().join(f)).unwrap();
    }
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let _am = Kill(
        Command::new(am)
            .arg(format!(
                "--config.file={}",
                dir.path().join("alertmanager.yml").display()
            ))
            .arg(format!(
                "--storage.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--cluster.listen-address=")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("alertmanager"),
    );
    let t = Instant::now();
    while common::get(&format!("{url}/-/ready")).0 != 200 {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "Alertmanager did not start"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // As the daemons on three nodes push them.
    amtool(
        &url,
        &[
            "alert",
            "add",
            "alertname=CudaDeviceSideAssert",
            "node=gpu1",
            "kind=device_assert",
            "blame=application",
            "severity=warning",
            "training_job=slurm:42",
        ],
    );
    amtool(
        &url,
        &[
            "alert",
            "add",
            "alertname=NcclError",
            "node=gpu2",
            "kind=nccl_error",
            "blame=application",
            "severity=warning",
            "training_job=slurm:42",
        ],
    );
    amtool(
        &url,
        &[
            "alert",
            "add",
            "alertname=NcclError",
            "node=gpu3",
            "kind=nccl_error",
            "blame=application",
            "severity=warning",
            "training_job=slurm:43",
        ],
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let json = amtool(
            &url,
            &["alert", "query", "--active", "--inhibited", "-o", "json"],
        );
        let alerts: serde_json::Value = serde_json::from_str(&json).unwrap();
        let state = |job: &str, name: &str| {
            alerts
                .as_array()
                .unwrap()
                .iter()
                .find(|a| a["labels"]["training_job"] == job && a["labels"]["alertname"] == name)
                .map(|a| {
                    a["status"]["inhibitedBy"]
                        .as_array()
                        .is_some_and(|v| !v.is_empty())
                })
        };
        if state("slurm:42", "NcclError") == Some(true) {
            assert_eq!(state("slurm:43", "NcclError"), Some(false), "{json}");
            assert_eq!(
                state("slurm:42", "CudaDeviceSideAssert"),
                Some(false),
                "{json}"
            );
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the cascade alert was never inhibited: {json}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
