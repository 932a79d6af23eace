//! Reads the real GPUs once through NVML and prints what the daemon would export, the time one
//! full poll takes, and (with `--probe`) the CUDA probe of every GPU. Used by
//! `scripts/device-check.sh`; runs on its own, without the daemon.
//!
//! ```text
//! cargo run --release -p assertwatch-gpu --example nvml_check -- [--iterations N] [--metrics FILE] [--probe]
//! ```
//!
//! Exit codes: 0 done, 3 NVML (or, with `--probe`, libcuda) not available, 1 a probe failed,
//! 2 bad arguments.

use std::sync::Arc;
use std::time::{Duration, Instant};

use assertwatch_gpu::{
    poll_once, probe, GpuBackend, GpuCollector, NvmlBackend, ProbeError, ProbeMetrics,
};
use prometheus::{Encoder, Registry, TextEncoder};
use tokio::sync::watch;

struct Args {
    iterations: usize,
    metrics: Option<String>,
    probe: bool,
}

fn args() -> Result<Args, String> {
    let mut out = Args {
        iterations: 20,
        metrics: None,
        probe: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--iterations" => {
                let v = it.next().ok_or("--iterations needs a number")?;
                out.iterations = v.parse().map_err(|e| format!("--iterations {v:?}: {e}"))?;
            }
            "--metrics" => out.metrics = Some(it.next().ok_or("--metrics needs a file")?),
            "--probe" => out.probe = true,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok(out)
}

fn main() {
    let args = match args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("nvml_check: {e}");
            std::process::exit(2);
        }
    };
    let mut backend = match NvmlBackend::open() {
        Ok(b) => b,
        Err(e) => {
            eprintln!("nvml_check: {e}");
            std::process::exit(3);
        }
    };
    let gpus = backend.devices().map(|d| d.len()).unwrap_or(0);
    let mut snapshot = poll_once(&mut backend);
    let mut times: Vec<Duration> = (0..args.iterations.max(1))
        .map(|_| {
            let t = Instant::now();
            snapshot = poll_once(&mut backend);
            t.elapsed()
        })
        .collect();
    times.sort_unstable();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "nvml poll ({gpus} GPUs, {} runs): min {:.2} ms, median {:.2} ms, max {:.2} ms",
        times.len(),
        ms(times[0]),
        ms(times[times.len() / 2]),
        ms(times[times.len() - 1])
    );

    let probes = ProbeMetrics::default();
    let mut code = 0;
    if args.probe {
        for gpu in 0..gpus as u32 {
            match probe::probe(gpu, Duration::from_secs(60)) {
                Ok(report) => {
                    println!(
                        "probe gpu {gpu}: ok={} duration={:.1} ms mismatches={} name={:?} uuid={:?} error={:?}",
                        report.ok,
                        ms(report.duration),
                        report.mismatches,
                        report.name,
                        report.uuid,
                        report.error
                    );
                    for p in &report.phases {
                        println!("  {:<12} {:>9.2} ms", p.name, ms(p.duration));
                    }
                    if !report.ok {
                        code = 1;
                    }
                    probes.record(&report);
                }
                Err(e @ ProbeError::NoDriver { .. }) => {
                    eprintln!("probe gpu {gpu}: {e}");
                    code = 3;
                    break;
                }
                Err(e) => {
                    eprintln!("probe gpu {gpu}: {e}");
                    code = 1;
                }
            }
        }
    }

    let (_tx, rx) = watch::channel(Arc::new(snapshot));
    let registry = Registry::new();
    let mut text = Vec::new();
    let rendered = GpuCollector::new(rx, probes)
        .map_err(|e| e.to_string())
        .and_then(|c| registry.register(Box::new(c)).map_err(|e| e.to_string()))
        .and_then(|()| {
            TextEncoder::new()
                .encode(&registry.gather(), &mut text)
                .map_err(|e| e.to_string())
        });
    if let Err(e) = rendered {
        eprintln!("nvml_check: cannot render metrics: {e}");
        std::process::exit(1);
    }
    match &args.metrics {
        Some(path) => {
            if let Err(e) = std::fs::write(path, &text) {
                eprintln!("nvml_check: cannot write {path}: {e}");
                std::process::exit(1);
            }
        }
        None => print!("{}", String::from_utf8_lossy(&text)),
    }
    std::process::exit(code);
}
