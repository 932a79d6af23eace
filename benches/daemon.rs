//! The daemon under load, measured from outside: detection latency (append → incident counted in
//! `/metrics`), sustained tail throughput over 100 files appended concurrently (with the daemon's
//! CPU time), idle cost with 1,000 watched files (RSS and CPU), and the `/metrics` render time
//! with 8 fake GPUs, and `/metrics` and the API while the store stalls. Prints numbers; asserts
//! nothing. `cargo bench --bench daemon` (`ASSERTWATCH_BENCH=slow_store,render` picks cases).

// The benchmark runs the real binary; the ban on Command::new guards the daemon's code.
#![allow(clippy::disallowed_methods)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Daemon {
    child: Child,
    port: u16,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(19999)
}

fn http_get(port: u16, path: &str) -> String {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return String::new();
    };
    let _ = write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    );
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(name) && !l.starts_with('#'))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn start(dir: &Path, extra: &str) -> Daemon {
    let port = free_port();
    let cfg = format!(
        "listen: \"127.0.0.1:{port}\"\nstate_dir: ./state\nlogs:\n  - name: jobs\n    paths: [\"./logs/*.log\"]\n    max_incidents_per_minute: 1000000\n\
         incidents:\n  quiet_period: 200ms\ntailing:\n  max_open_files: 2048\n  rescan_interval: 5s\n{extra}"
    );
    std::fs::write(dir.join("config.yaml"), cfg).expect("config");
    let child = Command::new(env!("CARGO_BIN_EXE_assertwatch"))
        .args(["run", "--config", "config.yaml"])
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("daemon.log")).expect("log"))
        .spawn()
        .expect("start daemon");
    let d = Daemon { child, port };
    let t = Instant::now();
    while !http_get(port, "/readyz").contains("200 OK") && t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    d
}

/// (utime + stime) seconds and VmRSS KiB of a pid.
fn proc_usage(pid: u32) -> (f64, u64) {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = 100.0; // sysconf(_SC_CLK_TCK) is 100 on Linux
    let cpu = (f.get(11).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0)
        + f.get(12).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0))
        / ticks;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0);
    (cpu, rss)
}

fn block(n: u64) -> String {
    format!(
        "../aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [{n},0,0], thread: [0,0,0] Assertion `index out of bounds` failed.\n\
         RuntimeError: CUDA error: device-side assert triggered\n"
    )
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn latency(dir: &Path) {
    std::fs::create_dir_all(dir.join("logs")).expect("logs");
    let d = start(dir, "gpu:\n  backend: none\n");
    let path = dir.join("logs/latency.log");
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .expect("log");
    let mut samples = Vec::new();
    for n in 0..200u64 {
        let before = metric(&http_get(d.port, "/metrics"), "assertwatch_incidents_total");
        let filler: String = (0..50)
            .map(|i| format!("step {n} {i} loss 0.5\n"))
            .collect();
        f.write_all(filler.as_bytes()).expect("write");
        let t = Instant::now();
        f.write_all(block(n).as_bytes()).expect("write");
        loop {
            if metric(&http_get(d.port, "/metrics"), "assertwatch_incidents_total") > before {
                break;
            }
            if t.elapsed() > Duration::from_secs(10) {
                break;
            }
            std::thread::sleep(Duration::from_micros(500));
        }
        samples.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let m = http_get(d.port, "/metrics");
    let internal = metric(&m, "assertwatch_detection_latency_seconds_sum")
        / metric(&m, "assertwatch_detection_latency_seconds_count").max(1.0)
        * 1e3;
    let (p50, p99, max) = (
        pct(&mut samples, 0.5),
        pct(&mut samples, 0.99),
        pct(&mut samples, 1.0),
    );
    println!("latency: append -> counted in /metrics, 200 failures: p50 {p50:.1} ms, p99 {p99:.1} ms, max {max:.1} ms (daemon's own read->counted mean {internal:.2} ms)");
}

fn throughput(dir: &Path) {
    std::fs::create_dir_all(dir.join("logs")).expect("logs");
    let d = start(dir, "gpu:\n  backend: none\n");
    let per_file: usize = std::env::var("ASSERTWATCH_BENCH_FILE_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10)
        << 20;
    let line = "Epoch 3:  45%|#####     | 450/1000 [01:23<01:42,  5.36it/s, loss=0.4211, grad_norm 0.512]\n";
    let chunk: String = line.repeat((1 << 20) / line.len());
    let (cpu0, _) = proc_usage(d.child.id());
    let t = Instant::now();
    let handles: Vec<_> = (0..100)
        .map(|i| {
            let p = dir.join(format!("logs/f{i:03}.log"));
            let chunk = chunk.clone();
            std::thread::spawn(move || {
                let mut f = std::fs::File::create(p).expect("file");
                let mut written = 0;
                let mut n = 0u64;
                while written < per_file {
                    f.write_all(chunk.as_bytes()).expect("write");
                    written += chunk.len();
                    if n % 4 == 0 {
                        f.write_all(block(i * 1000 + n).as_bytes()).expect("write");
                    }
                    n += 1;
                }
                written
            })
        })
        .collect();
    let total: usize = handles.into_iter().map(|h| h.join().unwrap_or(0)).sum();
    let written_at = t.elapsed().as_secs_f64();
    loop {
        let m = http_get(d.port, "/metrics");
        if metric(&m, "assertwatch_log_bytes_total") as usize >= total
            || t.elapsed() > Duration::from_secs(300)
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let wall = t.elapsed().as_secs_f64();
    let (cpu1, rss) = proc_usage(d.child.id());
    let mib = total as f64 / (1 << 20) as f64;
    println!(
        "throughput: 100 files x {} MiB appended concurrently ({mib:.0} MiB, writers done at {written_at:.2} s): all read in {wall:.2} s = {:.0} MiB/s; daemon CPU {:.2} s = {:.2} cores; RSS {:.1} MiB; {} incidents",
        per_file >> 20,
        mib / wall,
        cpu1 - cpu0,
        (cpu1 - cpu0) / wall,
        rss as f64 / 1024.0,
        metric(&http_get(d.port, "/metrics"), "assertwatch_incidents_total")
    );
}

fn idle(dir: &Path) {
    std::fs::create_dir_all(dir.join("logs")).expect("logs");
    for i in 0..1000 {
        std::fs::write(
            dir.join(format!("logs/idle{i:04}.log")),
            "step 0 loss 1.0\n",
        )
        .expect("file");
    }
    let d = start(dir, "gpu:\n  backend: none\n");
    let t = Instant::now();
    while metric(
        &http_get(d.port, "/metrics"),
        "assertwatch_log_files_watched",
    ) < 1000.0
        && t.elapsed() < Duration::from_secs(30)
    {
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(2));
    let (c0, _) = proc_usage(d.child.id());
    let window = 30.0;
    std::thread::sleep(Duration::from_secs_f64(window));
    let (c1, rss) = proc_usage(d.child.id());
    println!(
        "idle: 1000 watched files, {window:.0} s: CPU {:.2}% of a core, RSS {:.1} MiB",
        (c1 - c0) / window * 100.0,
        rss as f64 / 1024.0
    );
}

fn render(dir: &Path) {
    std::fs::create_dir_all(dir.join("logs")).expect("logs");
    let fake = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/fake-8gpu.yaml");
    let mut kern = String::new();
    for i in 0..1000u32 {
        kern.push_str(&format!(
            "[ 1.{i}] NVRM: Xid (PCI:0000:{:02x}:00): {}, pid={i}, name=python, x\n",
            i % 256,
            13 + (i % 40)
        ));
    }
    std::fs::write(dir.join("kern.log"), kern).expect("kern");
    let d = start(dir, &format!("gpu:\n  backend: fake\n  fake_file: {}\n  poll_interval: 1s\nkernel_log:\n  path: ./kern.log\nlimits:\n  max_series_per_family: 2000\n", fake.display()));
    std::thread::sleep(Duration::from_secs(3));
    let mut v = Vec::new();
    let mut bytes = 0;
    for _ in 0..200 {
        let t = Instant::now();
        bytes = http_get(d.port, "/metrics").len();
        v.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let gpus = http_get(d.port, "/metrics")
        .lines()
        .filter(|l| l.starts_with("assertwatch_gpu_info{"))
        .count();
    println!(
        "render: GET /metrics with {gpus} fake GPUs and 1000 Xid incidents ({} KiB): median {:.2} ms, p99 {:.2} ms (client-measured, over loopback)",
        bytes / 1024,
        pct(&mut v, 0.5),
        pct(&mut v, 0.99)
    );
}

/// `/metrics` and the incidents API while the store is stalled: another connection holds the
/// database's write lock for 5 s (the writer waits in its busy handler, as on a stalled disk)
/// while failures keep arriving. Figures with and without the stall, in the same run.
fn slow_store(dir: &Path) {
    std::fs::create_dir_all(dir.join("logs")).expect("logs");
    let d = start(dir, "gpu:\n  backend: none\n");
    let path = dir.join("logs/slow.log");
    let mut f = std::fs::File::create(&path).expect("log");
    f.write_all(block(0).as_bytes()).expect("write");
    let t = Instant::now();
    while metric(&http_get(d.port, "/metrics"), "assertwatch_incidents_total") < 1.0
        && t.elapsed() < Duration::from_secs(20)
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let sample = |secs: f64, writer: &mut std::fs::File, mut n: u64| {
        let (mut m, mut api) = (Vec::new(), Vec::new());
        let t = Instant::now();
        while t.elapsed().as_secs_f64() < secs {
            let filler: String = (0..50)
                .map(|i| format!("step {n} {i} loss 0.5\n"))
                .collect();
            writer.write_all(filler.as_bytes()).expect("write");
            writer.write_all(block(n).as_bytes()).expect("write");
            n += 1;
            let s = Instant::now();
            http_get(d.port, "/metrics");
            m.push(s.elapsed().as_secs_f64() * 1e3);
            let s = Instant::now();
            http_get(d.port, "/api/v1/incidents?limit=50");
            api.push(s.elapsed().as_secs_f64() * 1e3);
            std::thread::sleep(Duration::from_millis(5));
        }
        (m, api)
    };
    let (mut m0, mut a0) = sample(5.0, &mut f, 1000);
    let locker = rusqlite::Connection::open(dir.join("state/incidents.sqlite")).expect("db");
    locker.execute_batch("BEGIN IMMEDIATE").expect("lock");
    let (mut m1, mut a1) = sample(5.0, &mut f, 2000);
    locker.execute_batch("COMMIT").expect("unlock");
    println!(
        "slow store: /metrics p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms ({} requests) while the store's write lock is held for 5 s; unstalled p99 {:.2} ms",
        pct(&mut m1, 0.5),
        pct(&mut m1, 0.99),
        pct(&mut m1, 1.0),
        m1.len(),
        pct(&mut m0, 0.99)
    );
    println!(
        "slow store: /api/v1/incidents p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms while stalled; unstalled p99 {:.2} ms",
        pct(&mut a1, 0.5),
        pct(&mut a1, 0.99),
        pct(&mut a1, 1.0),
        pct(&mut a0, 0.99)
    );
}

fn main() {
    let only = std::env::var("ASSERTWATCH_BENCH").unwrap_or_default();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench-daemon");
    let _ = std::fs::remove_dir_all(&root);
    for (name, f) in [
        ("latency", latency as fn(&Path)),
        ("throughput", throughput),
        ("idle", idle),
        ("render", render),
        ("slow_store", slow_store),
    ] {
        if !only.is_empty() && !only.split(',').any(|o| o == name) {
            continue;
        }
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).expect("bench dir");
        f(&dir);
    }
}
