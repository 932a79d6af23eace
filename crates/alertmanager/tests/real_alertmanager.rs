//! End-to-end tests against the real Alertmanager binary (Debian package
//! `prometheus-alertmanager`).
//!
//! Each test starts its own Alertmanager on 127.0.0.1 with a free port, a temporary storage
//! path and clustering disabled (`--cluster.listen-address=` empty), routed to a webhook
//! receiver that the test itself runs (a tiny HTTP server recording POSTed bodies). Short
//! `group_wait`/`group_interval` keep each test to a few seconds.
//!
//! Without the binary the Alertmanager tests print a notice and pass, except under `CI=true`,
//! where a missing binary is a failure. The tests that only need an HTTP stand-in (auth
//! headers, body shape) always run. All traffic stays on 127.0.0.1 and every wait is bounded.

use std::io::Write;
use std::net::{SocketAddr, TcpListener as StdListener};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, SystemTime};

use assertwatch_alertmanager::{Alert, AlertmanagerConfig, Auth, Metrics, Notifier};
use tokio::process::{Child, Command};
use tokio::time::sleep;

mod common;
use common::{Recorder, Request};

// ---------------------------------------------------------------------------------------------
// The real Alertmanager.

/// The Alertmanager binary on `PATH`, if any. Under `CI=true` its absence fails the test.
fn alertmanager_binary() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        for name in ["prometheus-alertmanager", "alertmanager"] {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return Some(candidate);
            }
        }
    }
    let in_ci = std::env::var("CI").is_ok_and(|v| v == "true");
    assert!(
        !in_ci,
        "CI=true but no alertmanager binary on PATH (install the Debian package \
         prometheus-alertmanager)"
    );
    // Written to the real stderr, not `eprintln!`, so the test harness does not swallow it.
    let _ = writeln!(
        std::io::stderr(),
        "NOTICE: skipping: no prometheus-alertmanager or alertmanager binary on PATH"
    );
    None
}

/// A free TCP port on 127.0.0.1 (released before use; good enough for a test).
fn free_port() -> u16 {
    StdListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct Alertmanager {
    _child: Child,
    _dir: tempfile::TempDir,
    url: String,
}

impl Alertmanager {
    /// Starts Alertmanager on `port`, routing every alert to `webhook`.
    async fn start(binary: &Path, port: u16, webhook: SocketAddr) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = format!(
            "route:\n  receiver: hook\n  group_by: ['alertname']\n  group_wait: 100ms\n  \
             group_interval: 500ms\n  repeat_interval: 1h\nreceivers:\n  - name: hook\n    \
             webhook_configs:\n      - url: 'http://{webhook}/hook'\n        send_resolved: true\n"
        );
        let config_path = dir.path().join("alertmanager.yml");
        std::fs::write(&config_path, config).unwrap();
        let log = std::fs::File::create(dir.path().join("alertmanager.log")).unwrap();
        // The daemon spawns children only through its repro process module. A test fixture is
        // not one of them, and tokio's `kill_on_drop` makes sure the server dies with the test.
        let child = Command::new(binary)
            .arg(format!("--config.file={}", config_path.display()))
            .arg(format!(
                "--storage.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--cluster.listen-address=")
            .arg("--log.level=warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        Self {
            _child: child,
            _dir: dir,
            url: format!("http://127.0.0.1:{port}"),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Configuration and alerts shared by the tests.

fn notifier_config(urls: Vec<String>) -> AlertmanagerConfig {
    AlertmanagerConfig {
        urls,
        timeout: Duration::from_secs(2),
        resend_interval: Duration::from_secs(2),
        resolve_after: Duration::from_secs(30),
        initial_backoff: Duration::from_millis(100),
        max_backoff: Duration::from_millis(500),
        shutdown_timeout: Duration::from_secs(2),
        ..AlertmanagerConfig::default()
    }
}

fn test_alert(name: &str) -> Alert {
    Alert::new(SystemTime::now())
        .label("alertname", name)
        .label("node", "gpu-07")
        .label("severity", "critical")
        .annotation("summary", "device-side assert in IndexKernel.cu:92")
        .annotation("hint", "an index is out of range; check the embedding size")
        .generator_url("http://gpu-07:9949/api/v1/incidents/1")
}

/// The webhook payload's alerts named `name` with `status`.
fn has_alert(request: &Request, name: &str, status: &str) -> bool {
    let payload = request.json();
    payload["alerts"].as_array().is_some_and(|alerts| {
        alerts
            .iter()
            .any(|a| a["labels"]["alertname"] == name && a["status"] == status)
    })
}

// ---------------------------------------------------------------------------------------------
// Tests.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alert_reaches_the_webhook_and_then_resolves() {
    let Some(binary) = alertmanager_binary() else {
        return;
    };
    let webhook = Recorder::default();
    let hook_addr = webhook.start().await;
    let am = Alertmanager::start(&binary, free_port(), hook_addr).await;
    let metrics = Metrics::unregistered().unwrap();
    let (notifier, task) =
        Notifier::spawn(notifier_config(vec![am.url.clone()]), metrics.clone()).unwrap();

    // The invalid label name is dropped here; Alertmanager would refuse the whole alert.
    let alert = test_alert("AssertwatchE2E").label("bad-name", "x");
    notifier.fire("incident-1".into(), alert);
    let firing = webhook
        .wait_for("the firing alert", |r| {
            has_alert(r, "AssertwatchE2E", "firing")
        })
        .await;
    assert_eq!(firing.path, "/hook");
    let payload = firing.json();
    let alert = &payload["alerts"][0];
    assert_eq!(alert["labels"]["node"], "gpu-07");
    assert_eq!(alert["labels"]["severity"], "critical");
    assert!(alert["labels"]["bad-name"].is_null());
    assert_eq!(
        alert["annotations"]["summary"],
        "device-side assert in IndexKernel.cu:92"
    );
    assert_eq!(
        alert["generatorURL"],
        "http://gpu-07:9949/api/v1/incidents/1"
    );

    notifier.resolve("incident-1");
    let resolved = webhook
        .wait_for("the resolved alert", |r| {
            has_alert(r, "AssertwatchE2E", "resolved")
        })
        .await;
    assert_eq!(resolved.json()["status"], "resolved");
    assert_eq!(notifier.active_len(), 0);

    notifier.shutdown();
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
    let receiver = am.url.trim_start_matches("http://");
    assert!(metrics.sent_count(receiver) >= 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alerts_fired_before_alertmanager_starts_arrive_once_it_is_up() {
    let Some(binary) = alertmanager_binary() else {
        return;
    };
    let webhook = Recorder::default();
    let hook_addr = webhook.start().await;
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let metrics = Metrics::unregistered().unwrap();
    let (notifier, task) = Notifier::spawn(notifier_config(vec![url]), metrics.clone()).unwrap();

    notifier.fire("early".into(), test_alert("AssertwatchEarly"));
    sleep(Duration::from_secs(2)).await;
    let receiver = format!("127.0.0.1:{port}");
    assert!(
        metrics.failed_count(&receiver) >= 1,
        "pushes must have failed while it was down"
    );
    assert_eq!(metrics.sent_count(&receiver), 0);

    let _am = Alertmanager::start(&binary, port, hook_addr).await;
    webhook
        .wait_for("the alert fired before start-up", |r| {
            has_alert(r, "AssertwatchEarly", "firing")
        })
        .await;
    assert!(metrics.sent_count(&receiver) >= 1);
    notifier.shutdown();
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_members_of_an_ha_pair_receive_the_alert() {
    let Some(binary) = alertmanager_binary() else {
        return;
    };
    let (hook_a, hook_b) = (Recorder::default(), Recorder::default());
    let addr_a = hook_a.start().await;
    let addr_b = hook_b.start().await;
    let am_a = Alertmanager::start(&binary, free_port(), addr_a).await;
    let am_b = Alertmanager::start(&binary, free_port(), addr_b).await;
    let config = notifier_config(vec![am_a.url.clone(), am_b.url.clone()]);
    let (notifier, task) = Notifier::spawn(config, Metrics::unregistered().unwrap()).unwrap();

    notifier.fire("ha".into(), test_alert("AssertwatchHa"));
    hook_a
        .wait_for("member A's webhook", |r| {
            has_alert(r, "AssertwatchHa", "firing")
        })
        .await;
    hook_b
        .wait_for("member B's webhook", |r| {
            has_alert(r, "AssertwatchHa", "firing")
        })
        .await;
    notifier.shutdown();
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn basic_auth_and_the_v2_body_reach_the_receiver() {
    let stand_in = Recorder::default();
    let addr = stand_in.start().await;
    let config = AlertmanagerConfig {
        // The worked example of RFC 7617, section 2: "Aladdin" / "open sesame".
        auth: Auth::Basic {
            username: "Aladdin".into(),
            password: "open sesame".into(),
        },
        ..notifier_config(vec![format!("http://{addr}/prefix")])
    };
    let (notifier, task) = Notifier::spawn(config, Metrics::unregistered().unwrap()).unwrap();
    notifier.fire("auth".into(), test_alert("AssertwatchAuth"));
    let request = stand_in.wait_for("a push", |_| true).await;
    assert_eq!(request.path, "/prefix/api/v2/alerts");
    assert_eq!(
        request.header("authorization"),
        Some("Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==")
    );
    assert_eq!(request.header("content-type"), Some("application/json"));
    let body = request.json();
    let alert = &body.as_array().expect("a JSON array of postable alerts")[0];
    assert_eq!(alert["labels"]["alertname"], "AssertwatchAuth");
    for field in ["annotations", "startsAt", "endsAt", "generatorURL"] {
        assert!(!alert[field].is_null(), "{field} missing from {alert}");
    }
    notifier.shutdown();
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn bearer_tokens_are_sent() {
    let stand_in = Recorder::default();
    let addr = stand_in.start().await;
    let config = AlertmanagerConfig {
        auth: Auth::Bearer {
            token: "t0ken".into(),
        },
        ..notifier_config(vec![format!("http://{addr}")])
    };
    let (notifier, task) = Notifier::spawn(config, Metrics::unregistered().unwrap()).unwrap();
    notifier.fire("bearer".into(), test_alert("AssertwatchBearer"));
    let request = stand_in.wait_for("a push", |_| true).await;
    assert_eq!(request.header("authorization"), Some("Bearer t0ken"));
    notifier.shutdown();
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
}
