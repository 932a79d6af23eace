//! Cost of one fake poll of 8 GPUs and of one scrape (render + text encoding) of 8 GPUs.
//!
//! Run with `cargo bench -p assertwatch-gpu --bench poll`. The goal is under 2 ms for each; the
//! numbers printed are the median and p99 over many iterations.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use assertwatch_gpu::collector::render;
use assertwatch_gpu::{poll_once, FakeBackend, FakeClock, FakeScript, GpuCollector, ProbeMetrics};
use prometheus::{Encoder, Registry, TextEncoder};
use tokio::sync::watch;

const GPUS: u32 = 8;
const ITERATIONS: usize = 2000;

/// A script with 8 fully populated GPUs, 8 NVLinks and 2 processes each.
fn script() -> String {
    let mut s =
        String::from("driver_version: \"550.54.15\"\ncuda_driver_version: \"12.4\"\ngpus:\n");
    for i in 0..GPUS {
        let _ = write!(
            s,
            r#"  - index: {i}
    uuid: GPU-00000000-0000-0000-0000-0000000000{i:02}
    pci_bus_id: "00000000:{bus:02X}:00.0"
    name: NVIDIA H100 80GB HBM3
    vbios_version: 96.00.74.00.01
    keyframes:
      - at: 0s
        set:
          utilization_ratio: 0.97
          memory_utilization_ratio: 0.61
          memory_used_bytes: 72477573120
          memory_free_bytes: 12998017024
          memory_total_bytes: 85520809984
          temperature_gpu_celsius: 64
          temperature_memory_celsius: 71
          power_watts: 612.25
          power_limit_watts: 700
          energy_joules: 1253000
          clock_sm_hertz: 1980000000
          clock_memory_hertz: 2619000000
          clock_graphics_hertz: 1980000000
          pstate: 0
          throttle_reasons: {{ gpu_idle: false, applications_clocks_setting: false, sw_power_cap: true, hw_slowdown: false, sync_boost: false, sw_thermal_slowdown: false, hw_thermal_slowdown: false, hw_power_brake_slowdown: false }}
          fan_speed_ratio: [0.4, 0.41]
          ecc_corrected_volatile: 0
          ecc_uncorrected_volatile: 0
          ecc_corrected_aggregate: 3
          ecc_uncorrected_aggregate: 0
          retired_pages_single_bit_ecc: 0
          retired_pages_double_bit_ecc: 0
          retired_pages_pending: false
          remapped_rows_correctable: 1
          remapped_rows_uncorrectable: 0
          remapped_rows_pending: false
          remapped_rows_failure: false
          pcie_replay_errors: 0
          pcie_link_generation: 5
          pcie_link_width: 16
          nvlink_errors:
"#,
            bus = 0x17 + i * 0x10,
        );
        for link in 0..8 {
            let _ = writeln!(
                s,
                "            - {{ link: {link}, crc_flit: 0, crc_data: 0, replay: 0, recovery: 0 }}"
            );
        }
        let _ = writeln!(s, "    processes:");
        for p in 0..2 {
            let _ = writeln!(
                s,
                "      - {{ pid: {}, name: python, used_memory_bytes: 1073741824 }}",
                1000 + i * 10 + p
            );
        }
    }
    s
}

fn stats(name: &str, mut samples: Vec<Duration>) {
    samples.sort_unstable();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize];
    println!(
        "{name:<36} median {:>9.1} µs   p99 {:>9.1} µs   (n = {}, goal < 2000 µs)",
        at(0.5).as_secs_f64() * 1e6,
        at(0.99).as_secs_f64() * 1e6,
        samples.len()
    );
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let script = FakeScript::parse(&script(), "bench")?;
    let mut backend = FakeBackend::with_clock(script, FakeClock::manual());

    let mut polls = Vec::with_capacity(ITERATIONS);
    let mut snapshot = poll_once(&mut backend);
    for _ in 0..ITERATIONS {
        let t = Instant::now();
        snapshot = std::hint::black_box(poll_once(&mut backend));
        polls.push(t.elapsed());
    }
    stats("fake poll, 8 GPUs", polls);

    let probes = ProbeMetrics::default();
    let mut renders = Vec::with_capacity(ITERATIONS);
    for _ in 0..ITERATIONS {
        let t = Instant::now();
        std::hint::black_box(render(&snapshot, &probes));
        renders.push(t.elapsed());
    }
    stats("collector render, 8 GPUs", renders);

    let (_tx, rx) = watch::channel(Arc::new(snapshot));
    let registry = Registry::new();
    registry.register(Box::new(GpuCollector::new(rx, probes)?))?;
    let mut scrapes = Vec::with_capacity(ITERATIONS);
    let mut bytes = 0;
    for _ in 0..ITERATIONS {
        let t = Instant::now();
        let mut out = Vec::with_capacity(64 * 1024);
        TextEncoder::new().encode(&registry.gather(), &mut out)?;
        bytes = out.len();
        scrapes.push(t.elapsed());
    }
    stats("scrape (gather + text), 8 GPUs", scrapes);
    println!("exposition size: {bytes} bytes");
    Ok(())
}
