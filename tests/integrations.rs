//! The daemon with the real programs it works with: Alertmanager (alerts delivered to a webhook
//! this test runs), Prometheus (scraping the daemon, queried over its HTTP API) and promtool
//! (linting the exposition). Under `CI=true` a missing program fails the test.

// Tests start the real binary and real servers; the ban on Command::new guards the daemon's code.
#![allow(clippy::disallowed_methods)]

mod common;

use common::{assert_block, ordinary, Daemon};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A webhook receiver on 127.0.0.1 that records every POSTed JSON body.
fn webhook() -> (u16, Arc<Mutex<Vec<serde_json::Value>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    std::thread::spawn(move || {
        for stream in l.incoming().flatten() {
            let mut r = BufReader::new(stream);
            let mut len = 0usize;
            loop {
                let mut line = String::new();
                if r.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0u8; len.min(1 << 20)];
            if r.read_exact(&mut body).is_ok() {
                if let Ok(v) = serde_json::from_slice(&body) {
                    g.lock().unwrap().push(v);
                }
            }
            let mut s = r.into_inner();
            let _ =
                s.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        }
    });
    (port, got)
}

fn start_alertmanager(bin: &Path, dir: &Path, port: u16, hook: u16) -> Killed {
    let cfg = dir.join("am.yml");
    std::fs::write(
        &cfg,
        format!(
            "route:\n  receiver: hook\n  group_by: ['alertname', 'category']\n  group_wait: 100ms\n  group_interval: 500ms\n  repeat_interval: 1h\n\
             receivers:\n  - name: hook\n    webhook_configs:\n      - url: 'http://127.0.0.1:{hook}/hook'\n        send_resolved: true\n"
        ),
    )
    .unwrap();
    let log = std::fs::File::create(dir.join("am.log")).unwrap();
    let child = Command::new(bin)
        .arg(format!("--config.file={}", cfg.display()))
        .arg(format!("--storage.path={}", dir.join("am-data").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--cluster.listen-address=")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start alertmanager");
    Killed(child)
}

fn alerts_with(
    got: &Mutex<Vec<serde_json::Value>>,
    status: &str,
    alertname: &str,
) -> Vec<serde_json::Value> {
    got.lock()
        .unwrap()
        .iter()
        .flat_map(|b| b["alerts"].as_array().cloned().unwrap_or_default())
        .filter(|a| a["status"] == status && a["labels"]["alertname"] == alertname)
        .collect()
}

fn wait(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

#[test]
fn alertmanager_receives_fires_and_resolves_even_when_started_late() {
    let Some(am_bin) = common::require_tool("prometheus-alertmanager")
        .or_else(|| common::require_tool("alertmanager"))
    else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    let (hook, got) = webhook();
    let am_port = common::free_port();
    let cfg = format!(
        "listen: \"127.0.0.1:{{port}}\"\nstate_dir: ./state\nnode_name: gpu-node-7\nlogs:\n  - name: jobs\n    paths: [\"./logs/pods/*/*/*.log\"]\ngpu:\n  backend: none\n\
         incidents:\n  quiet_period: 300ms\ntailing:\n  rescan_interval: 200ms\n\
         alertmanager:\n  url: \"http://127.0.0.1:{am_port}\"\n  resend_interval: 1s\n  resolve_after: 10s\n"
    );
    // Alertmanager is not running yet: the alert must wait and arrive once it is up.
    let d = Daemon::start(dir, &cfg);
    let pod_dir = dir.join("logs/pods/ml-team_trainer-0_6a7b/trainer");
    std::fs::create_dir_all(&pod_dir).unwrap();
    let log = pod_dir.join("0.log");
    std::fs::write(&log, format!("{}{}", ordinary(0, 5), assert_block(3))).unwrap();
    assert!(d.wait_for(10, |d| !d.incidents().is_empty()), "{}", d.log());
    std::thread::sleep(Duration::from_millis(1500));
    let _am = start_alertmanager(&am_bin, dir, am_port, hook);
    assert!(
        wait(20, || !alerts_with(&got, "firing", "CudaDeviceSideAssert")
            .is_empty()),
        "no firing alert; daemon metrics:\n{}",
        d.metrics()
    );
    let a = &alerts_with(&got, "firing", "CudaDeviceSideAssert")[0];
    assert_eq!(a["labels"]["node"], "gpu-node-7");
    assert_eq!(a["labels"]["kind"], "device_assert");
    assert_eq!(a["labels"]["category"], "index_out_of_bounds");
    assert_eq!(a["labels"]["blame"], "application");
    assert_eq!(a["labels"]["namespace"], "ml-team");
    assert_eq!(a["labels"]["pod"], "trainer-0");
    assert_eq!(a["annotations"]["failing_line"], "/job/train.py:88");
    assert!(a["annotations"]["assertion"]
        .as_str()
        .unwrap()
        .contains("IndexKernel.cu:92"));
    assert!(a["annotations"]["hint"]
        .as_str()
        .unwrap()
        .contains("out-of-range index"));
    assert!(a["annotations"]["runbook_url"]
        .as_str()
        .unwrap()
        .ends_with("#cudadevicesideassert"));
    // No new activity: the daemon resolves the alert after resolve_after.
    assert!(
        wait(40, || !alerts_with(
            &got,
            "resolved",
            "CudaDeviceSideAssert"
        )
        .is_empty()),
        "no resolve"
    );
    assert!(d.metric("assertwatch_alerts_sent_total", &[]) >= 1.0);
}

#[test]
fn prometheus_scrapes_incident_counters() {
    let Some(prom) = common::require_tool("prometheus") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    let d = Daemon::start(dir, "listen: \"127.0.0.1:{port}\"\nstate_dir: ./state\nlogs:\n  - name: jobs\n    paths: [\"./logs/*.log\"]\ngpu:\n  backend: none\n");
    let prom_port = common::free_port();
    std::fs::write(
        dir.join("prometheus.yml"),
        format!("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: assertwatch\n    static_configs:\n      - targets: ['127.0.0.1:{}']\n", d.port),
    )
    .unwrap();
    let _p = Killed(
        Command::new(prom)
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{prom_port}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("prom.log")).unwrap())
            .spawn()
            .expect("start prometheus"),
    );
    let query = |q: &str| -> Option<f64> {
        let (s, body) = common::get(&format!(
            "http://127.0.0.1:{prom_port}/api/v1/query?query={q}"
        ));
        if s != 200 {
            return None;
        }
        let v: serde_json::Value = serde_json::from_str(&body).ok()?;
        v["data"]["result"].as_array()?.first()?["value"][1]
            .as_str()?
            .parse()
            .ok()
    };
    assert!(
        wait(30, || query("up%7Bjob%3D%22assertwatch%22%7D") == Some(1.0)),
        "prometheus never scraped the daemon"
    );
    std::fs::write(
        dir.join("logs/train.log"),
        format!("{}{}", ordinary(0, 3), assert_block(1)),
    )
    .unwrap();
    let q = "sum(assertwatch_incidents_total%7Bkind%3D%22device_assert%22%7D)";
    assert!(
        wait(30, || query(q) == Some(1.0)),
        "incident counter not seen through Prometheus: {:?}",
        query(q)
    );
}

#[test]
fn metrics_with_fake_gpus_pass_promtool_check() {
    let Some(promtool) = common::require_tool("promtool") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    let fake = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/fake-gpus.yaml");
    let d = Daemon::start(
        dir,
        &format!(
            "listen: \"127.0.0.1:{{port}}\"\nstate_dir: ./state\nlogs:\n  - name: jobs\n    paths: [\"./logs/*.log\"]\ngpu:\n  backend: fake\n  fake_file: {}\n  poll_interval: 200ms\nkernel_log:\n  path: ./kern.log\n",
            fake.display()
        ),
    );
    std::fs::write(
        dir.join("kern.log"),
        "[ 1.0] NVRM: Xid (PCI:0000:3b:00): 13, pid=77, name=python, Graphics Exception\n",
    )
    .unwrap();
    std::fs::write(dir.join("logs/train.log"), assert_block(2)).unwrap();
    assert!(
        d.wait_for(15, |d| d.metric("assertwatch_incidents_total", &[]) >= 2.0
            && d.metric("assertwatch_nvml_up", &[]) == 1.0),
        "{}",
        d.metrics()
    );
    let text = d.metrics();
    for family in [
        "assertwatch_gpu_utilization_ratio",
        "assertwatch_gpu_info",
        "assertwatch_xid_errors_total",
        "assertwatch_build_info",
        "assertwatch_detection_latency_seconds_bucket",
    ] {
        assert!(text.contains(family), "{family} missing");
    }
    let mut child = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let findings = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && findings.trim().is_empty(),
        "promtool findings:\n{findings}"
    );
}

#[test]
fn the_same_xid_from_nvml_and_the_kernel_log_is_one_incident() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    // The shipped fake script with its Xid 79 on GPU 1 moved to 1 s (and the loss to 3 s).
    let script = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("config/fake-gpus.yaml"),
    )
    .unwrap()
    .replace(
        "{ at: 20s, gpu: 1, xid: 79, pid: 4243 }",
        "{ at: 1s, gpu: 1, xid: 79, pid: 4243 }",
    )
    .replace("lost_at: 25s", "lost_at: 3s");
    std::fs::write(dir.join("fake.yaml"), script).unwrap();
    // The driver's kernel-log line for the same event, bus id in the kernel's form.
    std::fs::write(dir.join("kern.log"), "[ 20.1] NVRM: Xid (PCI:0000:2a:00): 79, pid=4243, name=python, GPU has fallen off the bus.\n").unwrap();
    let d = Daemon::start(
        dir,
        "listen: \"127.0.0.1:{port}\"\nstate_dir: ./state\nlogs:\n  - name: jobs\n    paths: [\"./logs/*.log\"]\ngpu:\n  backend: fake\n  fake_file: ./fake.yaml\n  poll_interval: 200ms\nkernel_log:\n  path: ./kern.log\n",
    );
    assert!(
        d.wait_for(15, |d| d.metric("assertwatch_gpu_lost", &[("gpu", "1")])
            == 1.0),
        "{}",
        d.metrics()
    );
    std::thread::sleep(Duration::from_millis(500));
    let xids: Vec<_> = d
        .incidents()
        .into_iter()
        .filter(|i| i["kind"] == "xid")
        .collect();
    assert_eq!(xids.len(), 1, "{xids:#?}");
    let x = &xids[0];
    assert_eq!(x["xid"], 79);
    assert_eq!(x["gpu"]["index"], 1);
    assert!(x["gpu"]["uuid"].as_str().unwrap().starts_with("GPU-"));
    assert!(
        x["evidence_lines"].as_u64().unwrap() >= 2,
        "kernel line, NVML event and the loss fold into one: {x:#}"
    );
    assert_eq!(
        d.metric(
            "assertwatch_xid_errors_total",
            &[("xid", "79"), ("gpu", "1")]
        ),
        1.0
    );
}
