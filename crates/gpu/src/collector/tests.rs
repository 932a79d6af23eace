//! Golden-output tests for the collector, driven by the shipped fake script at fixed times.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use prometheus::{Encoder, Registry, TextEncoder};
use tokio::sync::watch;

use super::*;
use crate::fake::{FakeBackend, FakeClock, FakeScript};
use crate::monitor::poll_once;
use crate::probe::{ProbeMetrics, ProbeReport};

fn snapshot_at(secs: u64) -> GpuSnapshot {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/fake-gpus.yaml");
    let clock = FakeClock::manual();
    let mut backend = FakeBackend::with_clock(FakeScript::from_file(&path).unwrap(), clock.clone());
    clock.set(Duration::from_secs(secs));
    let mut s = poll_once(&mut backend);
    // Fixed so the golden text does not depend on how fast this machine is.
    s.collect_duration = Duration::from_millis(3);
    s
}

fn scrape(snapshot: GpuSnapshot, probes: ProbeMetrics) -> String {
    let (_tx, rx) = watch::channel(Arc::new(snapshot));
    let registry = Registry::new();
    registry
        .register(Box::new(GpuCollector::new(rx, probes).unwrap()))
        .unwrap();
    let mut out = Vec::new();
    TextEncoder::new()
        .encode(&registry.gather(), &mut out)
        .unwrap();
    String::from_utf8(out).unwrap()
}

fn golden(name: &str, text: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with UPDATE_GOLDEN=1 to create it)",
            path.display()
        )
    });
    assert_eq!(
        text,
        want,
        "rendered metrics differ from {}",
        path.display()
    );
}

/// Runs `promtool check metrics` on `text`. Under `CI=true` a missing promtool fails the test;
/// elsewhere it prints a notice and skips.
fn promtool_check(text: &str) {
    use std::io::Write;
    use std::process::Stdio;
    let ci = std::env::var("CI").is_ok_and(|v| v == "true");
    // Test-only use of a subprocess: the daemon's own children go through its process module.
    #[allow(clippy::disallowed_methods)]
    let child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) if !ci => {
            eprintln!("notice: promtool not found ({e}); skipping the lint check");
            return;
        }
        Err(e) => panic!("promtool is required under CI=true: {e}"),
    };
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
        "promtool check metrics found problems:\n{findings}"
    );
}

#[test]
fn fake_at_10s_renders_the_golden_text() {
    let text = scrape(snapshot_at(10), ProbeMetrics::default());
    golden("fake_at_10s.prom", &text);
    promtool_check(&text);
}

#[test]
fn lost_gpu_is_flagged_and_the_other_still_rendered() {
    let text = scrape(snapshot_at(30), ProbeMetrics::default());
    golden("fake_at_30s.prom", &text);
    let gpu0 =
        r#"gpu="0",uuid="GPU-5a1c0e9e-61f2-4c7a-9a0b-1f3b2c4d5e60",pci_bus_id="00000000:17:00.0""#;
    let gpu1 =
        r#"gpu="1",uuid="GPU-9b7d3f21-0c4e-4d8a-b1e2-7f6a5c4b3a21",pci_bus_id="00000000:2A:00.0""#;
    assert!(
        text.contains(&format!("assertwatch_gpu_lost{{{gpu1}}} 1\n")),
        "{text}"
    );
    assert!(
        text.contains(&format!("assertwatch_gpu_lost{{{gpu0}}} 0\n")),
        "{text}"
    );
    assert!(text.contains(&format!(
        "assertwatch_gpu_utilization_ratio{{{gpu0}}} 0.97\n"
    )));
    assert!(!text.contains(&format!("assertwatch_gpu_utilization_ratio{{{gpu1}}}")));
    promtool_check(&text);
}

#[test]
fn unsupported_fields_are_absent_not_zero() {
    let text = scrape(snapshot_at(10), ProbeMetrics::default());
    // Both GPUs list fan_speed_ratio as unsupported; GPU 1 also lacks HBM temperature.
    assert!(!text.contains("assertwatch_gpu_fan_speed_ratio"), "{text}");
    assert!(text.contains(r#"pci_bus_id="00000000:17:00.0",sensor="memory"} 71"#));
    assert!(!text.contains(r#"pci_bus_id="00000000:2A:00.0",sensor="memory"}"#));
}

#[test]
fn down_backend_renders_only_nvml_up_zero() {
    let text = scrape(GpuSnapshot::down("nvml"), ProbeMetrics::default());
    assert_eq!(
        text,
        "# HELP assertwatch_nvml_up 1 if the GPU backend answered at the last poll, 0 if the driver is missing or failed.\n\
         # TYPE assertwatch_nvml_up gauge\n\
         assertwatch_nvml_up 0\n"
    );
}

#[test]
fn probe_results_take_the_gpu_labels_from_the_snapshot() {
    let probes = ProbeMetrics::default();
    probes.record(&ProbeReport {
        gpu: 0,
        name: None,
        uuid: Some("GPU-9b7d3f21-0c4e-4d8a-b1e2-7f6a5c4b3a21".into()),
        pci_bus_id: None,
        ok: true,
        duration: Duration::from_millis(250),
        phases: Vec::new(),
        mismatches: 0,
        error: None,
    });
    probes.record_failure(5, Duration::from_secs(30));
    let text = scrape(snapshot_at(10), probes);
    assert!(text.contains(
        r#"assertwatch_gpu_probe_success{gpu="1",uuid="GPU-9b7d3f21-0c4e-4d8a-b1e2-7f6a5c4b3a21",pci_bus_id="00000000:2A:00.0"} 1"#
    ), "{text}");
    assert!(text.contains(r#"assertwatch_gpu_probe_duration_seconds{gpu="1","#));
    assert!(text.contains(r#"assertwatch_gpu_probe_success{gpu="5",uuid="",pci_bus_id=""} 0"#));
    promtool_check(&text);
}

#[test]
fn every_family_is_declared_once_with_a_valid_name() {
    let mut names: Vec<_> = FAMILIES.iter().map(|f| f.name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), FAMILIES.len());
    for f in FAMILIES {
        assert_eq!(f.counter, f.name.ends_with("_total"), "{}", f.name);
    }
    let (_tx, rx) = watch::channel(Arc::new(GpuSnapshot::down("none")));
    assert_eq!(
        GpuCollector::new(rx, ProbeMetrics::default())
            .unwrap()
            .desc()
            .len(),
        FAMILIES.len()
    );
}

/// Every family name in the GPU section of docs/metrics.md, with the `a` / `_b` shorthand expanded.
fn documented_gpu_families() -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/metrics.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let section = text.split("\n## GPUs").nth(1).unwrap();
    let section = section.split("\n## ").next().unwrap();
    let mut names = Vec::new();
    for line in section.lines().filter(|l| l.starts_with("| `")) {
        let cell = line.split('|').nth(1).unwrap();
        let tokens: Vec<&str> = cell.split('`').skip(1).step_by(2).collect();
        let first = tokens[0];
        for t in tokens {
            if let Some(suffix) = t.strip_prefix('_') {
                let n = suffix.split('_').count();
                let base: Vec<&str> = first.split('_').collect();
                names.push(format!("{}_{suffix}", base[..base.len() - n].join("_")));
            } else {
                names.push(t.to_owned());
            }
        }
    }
    names
}

#[test]
fn every_documented_gpu_family_is_defined_and_nothing_else() {
    let documented = documented_gpu_families();
    assert!(documented.len() > 20, "{documented:?}");
    let defined: Vec<&str> = FAMILIES.iter().map(|f| f.name).collect();
    for name in &documented {
        assert!(
            defined.contains(&name.as_str()),
            "{name} is documented but not rendered"
        );
    }
    for name in &defined {
        assert!(
            documented.iter().any(|d| d == name),
            "{name} is rendered but not documented"
        );
    }
}
