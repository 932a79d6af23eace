//! The incident detail page in a real browser: the daemon reads a failure whose log lines carry
//! markup, and headless Chromium loads `/incidents/{id}`. The rendered DOM must show the failing
//! line, show the markup as text, and hold no element that came from the log; a screenshot must
//! come out.

// Tests start the real binary and real tools; the ban on Command::new guards the daemon's code.
#![allow(clippy::disallowed_methods)]

mod common;

use common::{ordinary, Daemon, TAIL_CONFIG};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A device-side assert whose assertion text and exception message carry HTML.
const FAILURE: &str = "../aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [5,0,0], thread: [0,0,0] Assertion `idx < <b>bold</b>` failed.\n\
Traceback (most recent call last):\n  File \"/job/train.py\", line 88, in <module>\n    loss.backward()\n\
RuntimeError: CUDA error: device-side assert triggered <img src=x onerror=alert(1)> <b>bold</b>\n\
For debugging consider passing CUDA_LAUNCH_BLOCKING=1.\n";

fn append(path: &Path, text: &str) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    f.write_all(text.as_bytes()).unwrap();
    f.sync_all().unwrap();
}

/// Runs `cmd`, killing it after `limit` so a wedged browser fails the test instead of hanging it.
fn output_within(cmd: &mut Command, limit: Duration) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn chromium");
    // Drain both pipes on threads, so a chatty process never blocks on a full pipe.
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out_t = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut out, &mut v).map(|_| v)
    });
    let err_t = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut err, &mut v).map(|_| v)
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    Output {
        status,
        stdout: out_t.join().unwrap().unwrap(),
        stderr: err_t.join().unwrap().unwrap(),
    }
}

/// Headless Chromium with a throwaway profile, nothing fetched but the page under test.
fn chromium(bin: &Path, profile: &Path) -> Command {
    let mut c = Command::new(bin);
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    c
}

#[test]
fn detail_page_renders_the_failing_line_and_log_markup_as_text_in_chromium() {
    let Some(browser) = common::require_tool("chromium") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    std::fs::create_dir_all(dir.join("logs")).unwrap();
    let log = dir.join("logs/train.log");
    let d = Daemon::start(dir, TAIL_CONFIG);
    append(&log, &ordinary(1, 60));
    append(&log, FAILURE);
    append(&log, &ordinary(100, 60));

    // Wait until the incident is closed, so the page shows all of its lines.
    let mut found = None;
    let ok = d.wait_for(20, |d| {
        found = d
            .incidents()
            .into_iter()
            .find(|i| i["kind"] == "device_assert" && i["open"] == false);
        found.is_some()
    });
    assert!(ok, "no closed device_assert incident; log:\n{}", d.log());
    let inc = found.unwrap();
    let id = inc["id"].as_i64().unwrap();
    assert_eq!(inc["python_frame"], "/job/train.py:88", "{inc}");
    let message = inc["message"].as_str().unwrap_or_default();
    assert!(message.contains("<img src=x onerror=alert(1)>"), "{inc}");

    // Over plain HTTP: the page, its policy, and the index's link to it.
    let page = d.url(&format!("/incidents/{id}"));
    let resp = common::http().get(&page).call().unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(
        resp.headers()
            .get("content-security-policy")
            .and_then(|v| v.to_str().ok()),
        Some("default-src 'none'; style-src 'unsafe-inline'")
    );
    let (_, index) = common::get(&d.url("/"));
    assert!(
        index.contains(&format!("href=\"/incidents/{id}\"")),
        "{index}"
    );
    assert!(index.contains(&format!("href=\"/api/v1/incidents/{id}\"")));
    assert_eq!(common::get(&d.url("/incidents/999999")).0, 404);
    assert_eq!(common::get(&d.url("/incidents/abc")).0, 400);

    // The DOM after Chromium parsed and rendered the page.
    let dom = output_within(
        chromium(&browser, &dir.join("profile-dom"))
            .arg("--dump-dom")
            .arg(&page),
        Duration::from_secs(90),
    );
    assert!(
        dom.status.success(),
        "chromium --dump-dom failed: {}",
        String::from_utf8_lossy(&dom.stderr)
    );
    let dom = String::from_utf8(dom.stdout).unwrap();
    // The failing line, in the prominent block.
    assert!(
        dom.contains("class=\"line\"><code>/job/train.py:88</code>"),
        "{dom}"
    );
    assert!(dom.contains("reported (asynchronous)"), "{dom}");
    // The log's markup is text: serialised escaped, and never an element.
    assert!(
        dom.contains("&lt;img src=x onerror=alert(1)&gt; &lt;b&gt;bold&lt;/b&gt;"),
        "{dom}"
    );
    assert!(!dom.contains("<img"), "an img element was created: {dom}");
    assert!(!dom.contains("<b>bold"), "a b element from the log: {dom}");
    assert!(!dom.contains("<script"), "{dom}");
    assert_eq!(
        dom.matches("onerror").count(),
        dom.matches("&lt;img src=x onerror").count(),
        "onerror outside escaped text: {dom}"
    );
    // The excerpt shows the raw log lines, escaped too.
    assert!(dom.contains("Assertion `idx &lt; &lt;b&gt;bold&lt;/b&gt;` failed."));

    // A screenshot, kept under the target dir for people to look at.
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("page_browser");
    std::fs::create_dir_all(&shots).unwrap();
    let png = shots.join("incident.png");
    let _ = std::fs::remove_file(&png);
    let shot = output_within(
        chromium(&browser, &dir.join("profile-shot"))
            .arg(format!("--screenshot={}", png.display()))
            .arg("--window-size=1200,900")
            .arg("--hide-scrollbars")
            .arg(&page),
        Duration::from_secs(90),
    );
    assert!(
        shot.status.success(),
        "chromium --screenshot failed: {}",
        String::from_utf8_lossy(&shot.stderr)
    );
    let bytes = std::fs::read(&png).unwrap();
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    // A blank 1200x900 page compresses to a few KB; text and tables make it far larger.
    assert!(
        bytes.len() > 20_000,
        "screenshot is {} bytes: a blank page?",
        bytes.len()
    );
    eprintln!("screenshot: {}", png.display());
}
