//! A 100 MB line with no newline must cost bounded memory and must not hide what follows it.
//!
//! Runs the real binary: `assertwatch scan --format jsonl -` with stdin fed from a thread in
//! 1 MiB pieces (the input is never held whole here either): 100 MiB of `x`, a newline, then a
//! device-side assert block. The reader keeps the first `max_line` bytes (default 1 MiB) of the
//! long line and skips the rest, so the child's peak RSS must stay far below the input size.
//!
//! Peak RSS is measured twice: `VmHWM` from `/proc/<pid>/status`, polled while the child runs,
//! and `ru_maxrss` of `getrusage(RUSAGE_CHILDREN)` after it was waited for (the larger wins; this
//! file holds one test, so no other child of the test process can raise it).

mod common;

use std::io::{Read, Write};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const LONG_LINE_MIB: usize = 100;
const LIMIT_KIB: u64 = 64 * 1024;

const BLOCK: &str = "/build/aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [3,0,0], thread: [7,0,0] Assertion `-sizes[i] <= index && index < sizes[i] && \"index out of bounds\"` failed.
Traceback (most recent call last):
  File \"/srv/job/train.py\", line 41, in run_step
    logits = model(batch[\"x\"])
RuntimeError: CUDA error: device-side assert triggered
Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.
";

/// `VmHWM` (peak resident set) of a live process, in KiB.
fn vm_hwm_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Largest peak RSS among waited-for children, in KiB (`ru_maxrss` is in KiB on Linux).
fn children_maxrss_kib() -> u64 {
    // SAFETY: `getrusage` only writes the `rusage` struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    assert_eq!(rc, 0, "getrusage failed");
    u64::try_from(ru.ru_maxrss).unwrap_or(0)
}

#[test]
fn hundred_megabyte_line_costs_bounded_memory() {
    let started = Instant::now();
    #[allow(clippy::disallowed_methods)] // the test runs the real binary, nothing else
    let mut child = std::process::Command::new(common::bin())
        .args(["scan", "--format", "jsonl", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn assertwatch");
    let pid = child.id();

    let mut stdin = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || -> std::io::Result<()> {
        let piece = vec![b'x'; 1 << 20];
        for _ in 0..LONG_LINE_MIB {
            stdin.write_all(&piece)?;
        }
        stdin.write_all(b"\n")?;
        stdin.write_all(BLOCK.as_bytes())
    });

    let done = Arc::new(AtomicBool::new(false));
    let poller = {
        let done = Arc::clone(&done);
        std::thread::spawn(move || {
            let mut peak = 0;
            while !done.load(Ordering::Relaxed) {
                if let Some(k) = vm_hwm_kib(pid) {
                    peak = peak.max(k);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            peak
        })
    };

    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let mut out = Vec::new();
    stdout.read_to_end(&mut out).expect("read stdout");
    let status = child.wait().expect("wait assertwatch");
    done.store(true, Ordering::Relaxed);
    let polled = poller.join().expect("poller");
    let err = err_reader.join().expect("stderr reader");
    writer
        .join()
        .expect("writer")
        .expect("the child read all of stdin");
    let rusage = children_maxrss_kib();
    let peak = polled.max(rusage);
    eprintln!(
        "peak RSS {:.1} MiB (VmHWM polled {polled} KiB, ru_maxrss {rusage} KiB) for a {LONG_LINE_MIB} MiB line, {:.1}s",
        peak as f64 / 1024.0,
        started.elapsed().as_secs_f64()
    );

    assert!(status.success(), "exit {status:?}: {err}");
    let incidents = common::jsonl(&out);
    assert_eq!(incidents.len(), 1, "{incidents:?}");
    let inc = &incidents[0];
    assert_eq!(inc["kind"], "device_assert", "{inc}");
    assert_eq!(
        inc["assertion"], "-sizes[i] <= index && index < sizes[i] && \"index out of bounds\"",
        "{inc}"
    );
    assert_eq!(inc["kernel_file"], "IndexKernel.cu:92", "{inc}");
    // The long line is line 1; the block starts on line 2.
    assert_eq!(inc["first_line"], 2, "{inc}");
    assert!(
        peak < LIMIT_KIB,
        "peak RSS {peak} KiB is not below {LIMIT_KIB} KiB"
    );
}
