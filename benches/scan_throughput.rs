//! Scan throughput against ripgrep and mtail, in one run, on the same generated logs.
//!
//! Generates synthetic training logs with `../shared/research/gen_log.py` (seed 7: progress
//! bars, loss lines, checkpoints, NCCL warnings, and a device-side assert block every 100k
//! lines), then times `assertwatch scan --format jsonl` (full detection, grouping and
//! classification, single-threaded), `rg -c -f pats.txt` and `mtail --one_shot` with the
//! research programs. Prints MiB/s per tool and the ratios. `cargo bench --bench scan_throughput`;
//! `ASSERTWATCH_BENCH_SIZES_MIB=256,1024` picks the sizes (default 256,1024);
//! `ASSERTWATCH_BENCH_BASELINE=/path/to/assertwatch` also times another build (an earlier
//! release, say) on the same logs in the same run, for before/after figures.

// The benchmark runs the real binary and its peers; the ban on Command::new guards the daemon.
#![allow(clippy::disallowed_methods)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

fn research() -> PathBuf {
    std::env::var_os("ASSERTWATCH_RESEARCH")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/research"))
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

fn time_best(runs: usize, mut cmd: impl FnMut() -> Command) -> Option<(f64, String)> {
    let mut best = f64::INFINITY;
    let mut out = String::new();
    for _ in 0..runs {
        let t = Instant::now();
        let o = cmd().stderr(Stdio::null()).output().ok()?;
        let dt = t.elapsed().as_secs_f64();
        if !o.status.success() && o.status.code() != Some(1) {
            return None;
        }
        best = best.min(dt);
        out = String::from_utf8_lossy(&o.stdout).into_owned();
    }
    Some((best, out))
}

fn main() {
    let sizes: Vec<u64> = std::env::var("ASSERTWATCH_BENCH_SIZES_MIB")
        .unwrap_or_else(|_| "256,1024".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-data");
    std::fs::create_dir_all(&dir).expect("bench data dir");
    let gen = research().join("gen_log.py");
    let pats = research().join("pats.txt");
    let progs = research().join("mtail-progs");
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_assertwatch"));
    println!("scan throughput (single core; best of 3 for scan and rg, 1 run for mtail)");
    println!(
        "{:>8}  {:<34} {:>9} {:>10}  result",
        "size", "tool", "wall s", "MiB/s"
    );
    for mib in sizes {
        let log = dir.join(format!("gen-{mib}m.log"));
        if !log.exists() {
            let st = Command::new("python3")
                .arg(&gen)
                .arg(&log)
                .arg(mib.to_string())
                .status()
                .expect("python3 gen_log.py");
            assert!(st.success(), "gen_log.py failed");
        }
        let bytes = std::fs::metadata(&log).expect("log").len() as f64;
        let mibs = |s: f64| bytes / (1024.0 * 1024.0) / s;
        let ours = time_best(3, || {
            let mut c = Command::new(&bin);
            c.args(["scan", "--format", "jsonl"]).arg(&log);
            c
        });
        let Some((ours_s, out)) = ours else {
            panic!("assertwatch scan failed")
        };
        let incidents = out.lines().count();
        println!(
            "{mib:>6}MiB  {:<34} {ours_s:>9.3} {:>10.0}  {incidents} incidents",
            "assertwatch scan (full classify)",
            mibs(ours_s)
        );
        if let Some(base) = std::env::var_os("ASSERTWATCH_BENCH_BASELINE") {
            let base = PathBuf::from(base);
            match time_best(3, || {
                let mut c = Command::new(&base);
                c.args(["scan", "--format", "jsonl"]).arg(&log);
                c
            }) {
                Some((s, out)) => println!(
                    "{mib:>6}MiB  {:<34} {s:>9.3} {:>10.0}  {} incidents; this build takes {:.2}x its time",
                    "baseline build (same command)",
                    mibs(s),
                    out.lines().count(),
                    ours_s / s
                ),
                None => println!("{mib:>6}MiB  baseline {} failed", base.display()),
            }
        }
        let rg = which("rg").and_then(|rg| {
            time_best(3, || {
                let mut c = Command::new(&rg);
                c.arg("-c").arg("-f").arg(&pats).arg(&log);
                c
            })
        });
        match &rg {
            Some((s, out)) => println!(
                "{mib:>6}MiB  {:<34} {s:>9.3} {:>10.0}  {} matching lines",
                "rg -c -f pats.txt",
                mibs(*s),
                out.trim()
            ),
            None => println!("{mib:>6}MiB  rg not installed (apt-get install ripgrep)"),
        }
        let mtail = if mib <= 256 {
            which("mtail").and_then(|m| {
                time_best(1, || {
                    let mut c = Command::new(&m);
                    c.arg("--one_shot")
                        .arg("--progs")
                        .arg(&progs)
                        .arg("--logs")
                        .arg(&log)
                        .arg("--logtostderr");
                    c
                })
            })
        } else {
            None
        };
        match &mtail {
            Some((s, _)) => println!(
                "{mib:>6}MiB  {:<34} {s:>9.3} {:>10.0}",
                "mtail --one_shot (11 regexes)",
                mibs(*s)
            ),
            None if mib > 256 => println!(
                "{mib:>6}MiB  mtail skipped above 256 MiB (about 17 MB/s: over a minute per GiB)"
            ),
            None => println!("{mib:>6}MiB  mtail not installed (apt-get install mtail)"),
        }
        let mut ratios = Vec::new();
        if let Some((s, _)) = rg {
            ratios.push(format!("{:.2}x ripgrep", s / ours_s));
        }
        if let Some((s, _)) = mtail {
            ratios.push(format!("{:.0}x mtail", s / ours_s));
        }
        println!(
            "{mib:>6}MiB  assertwatch speed = {}",
            if ratios.is_empty() {
                "n/a".into()
            } else {
                ratios.join(", ")
            }
        );
    }
}
