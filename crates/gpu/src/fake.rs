//! [`FakeBackend`]: a GPU driver that replays a YAML script, for tests and for the demo config on
//! machines without a GPU.
//!
//! A script names GPUs with static info, keyframes of readings (`at: 30s`, each keyframe changes
//! the fields it names and the others hold), fields the GPU "does not support" (always absent),
//! processes with a lifetime, a time at which a GPU is lost (and when it is back), and Xid events. Time counts from the
//! backend's start, or from a [`FakeClock`] that a test drives by hand so that nothing sleeps.
//! `config/fake-gpus.yaml` is the reference script.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Deserializer};

use crate::backend::{GpuBackend, GpuError};
use crate::{GpuEvent, GpuId, GpuInfo, GpuProcess, GpuSample, PodRef};

/// A script that could not be read or does not describe valid GPUs.
#[derive(Debug, thiserror::Error)]
pub enum FakeScriptError {
    /// The file could not be read.
    #[error("cannot read the fake GPU script {file}")]
    Read {
        /// The script's path.
        file: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The YAML does not have the script's shape; `field` is the path to the bad value
    /// (`gpus[1].keyframes[0].set.power_watts`) and `message` says what was wrong and where.
    #[error("{file}: {field}: {message}")]
    Parse {
        /// The script's path (or the name given to [`FakeScript::parse`]).
        file: String,
        /// Path to the offending value.
        field: String,
        /// What was wrong, with the YAML line and column.
        message: String,
    },
    /// The YAML parsed but a value breaks a rule (duplicate index, unknown field name, …).
    #[error("{file}: {field}: {message}")]
    Invalid {
        /// The script's path.
        file: String,
        /// Path to the offending value.
        field: String,
        /// The rule it breaks.
        message: String,
    },
}

/// A duration written like `30s` or `1m 30s` (humantime).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
struct At(Duration);

impl<'de> Deserialize<'de> for At {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<At, D::Error> {
        let text = String::deserialize(d)?;
        humantime::parse_duration(&text).map(At).map_err(|e| {
            serde::de::Error::custom(format!(
                "{text:?} is not a duration ({e}); write it like \"30s\""
            ))
        })
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScript {
    #[serde(default)]
    driver_version: Option<String>,
    #[serde(default)]
    cuda_driver_version: Option<String>,
    gpus: Vec<RawGpu>,
    #[serde(default)]
    events: Vec<RawEvent>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGpu {
    index: u32,
    uuid: String,
    pci_bus_id: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    vbios_version: Option<String>,
    #[serde(default)]
    unsupported: Vec<String>,
    #[serde(default)]
    keyframes: Vec<RawKeyframe>,
    #[serde(default)]
    processes: Vec<RawProcess>,
    #[serde(default)]
    lost_at: Option<At>,
    /// The GPU answers again from this time on (a reset or reboot brought it back).
    #[serde(default)]
    back_at: Option<At>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawKeyframe {
    at: At,
    set: GpuSample,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProcess {
    pid: u32,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    used_memory_bytes: Option<u64>,
    #[serde(default)]
    from: Option<At>,
    #[serde(default)]
    until: Option<At>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(default)]
    pod: Option<String>,
    #[serde(default)]
    container: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEvent {
    at: At,
    gpu: u32,
    xid: u32,
    #[serde(default)]
    pid: Option<u32>,
}

/// A parsed and checked fake GPU script.
#[derive(Debug)]
pub struct FakeScript {
    driver_version: Option<String>,
    cuda_driver_version: Option<String>,
    gpus: Vec<RawGpu>,
    /// Sorted by time.
    events: Vec<RawEvent>,
}

impl FakeScript {
    /// Reads and checks a script file.
    ///
    /// # Errors
    /// [`FakeScriptError`] naming the file and, for bad content, the field.
    pub fn from_file(path: &Path) -> Result<FakeScript, FakeScriptError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| FakeScriptError::Read {
            file: file.clone(),
            source,
        })?;
        FakeScript::parse(&text, &file)
    }

    /// Parses and checks script text; `file` names it in errors.
    ///
    /// # Errors
    /// [`FakeScriptError::Parse`] or [`FakeScriptError::Invalid`] naming the field.
    pub fn parse(text: &str, file: &str) -> Result<FakeScript, FakeScriptError> {
        let de = serde_yaml::Deserializer::from_str(text);
        let raw: RawScript = serde_path_to_error::deserialize(de).map_err(|e| {
            let field = match e.path().to_string() {
                p if p == "." => "(top level)".to_owned(),
                p => p,
            };
            // serde_yaml already starts its message with the path; keep it once.
            let inner = e.inner().to_string();
            let message = inner
                .strip_prefix(&format!("{field}: "))
                .map_or(inner.clone(), str::to_owned);
            FakeScriptError::Parse {
                file: file.to_owned(),
                field,
                message,
            }
        })?;
        check(raw, file)
    }

    /// The GPUs the script declares, in index order.
    pub fn gpu_ids(&self) -> Vec<GpuId> {
        self.gpus.iter().map(raw_id).collect()
    }
}

fn raw_id(g: &RawGpu) -> GpuId {
    GpuId {
        index: g.index,
        uuid: g.uuid.clone(),
        pci_bus_id: g.pci_bus_id.clone(),
    }
}

fn check(mut raw: RawScript, file: &str) -> Result<FakeScript, FakeScriptError> {
    let invalid = |field: String, message: String| FakeScriptError::Invalid {
        file: file.to_owned(),
        field,
        message,
    };
    raw.gpus.sort_by_key(|g| g.index);
    for pair in raw.gpus.windows(2) {
        if let [a, b] = pair {
            if a.index == b.index {
                return Err(invalid(
                    "gpus".to_owned(),
                    format!("GPU index {} appears twice", a.index),
                ));
            }
        }
    }
    for (i, g) in raw.gpus.iter().enumerate() {
        match (g.lost_at, g.back_at) {
            (None, Some(_)) => {
                return Err(invalid(
                    format!("gpus[{i}].back_at"),
                    "back_at needs a lost_at before it".to_owned(),
                ))
            }
            (Some(l), Some(b)) if b <= l => {
                return Err(invalid(
                    format!("gpus[{i}].back_at"),
                    "back_at must be later than lost_at".to_owned(),
                ))
            }
            _ => {}
        }
        for (j, name) in g.unsupported.iter().enumerate() {
            if !GpuSample::FIELD_NAMES.contains(&name.as_str()) {
                return Err(invalid(
                    format!("gpus[{i}].unsupported[{j}]"),
                    format!(
                        "{name:?} is not a GPU field; known fields: {}",
                        GpuSample::FIELD_NAMES.join(", ")
                    ),
                ));
            }
        }
        for (j, pair) in g.keyframes.windows(2).enumerate() {
            if let [a, b] = pair {
                if b.at < a.at {
                    return Err(invalid(
                        format!("gpus[{i}].keyframes[{}].at", j + 1),
                        "keyframes must be in time order".to_owned(),
                    ));
                }
            }
        }
    }
    for (i, ev) in raw.events.iter().enumerate() {
        if !raw.gpus.iter().any(|g| g.index == ev.gpu) {
            return Err(invalid(
                format!("events[{i}].gpu"),
                format!("no GPU with index {} in `gpus`", ev.gpu),
            ));
        }
    }
    raw.events.sort_by_key(|e| e.at);
    Ok(FakeScript {
        driver_version: raw.driver_version,
        cuda_driver_version: raw.cuda_driver_version,
        gpus: raw.gpus,
        events: raw.events,
    })
}

/// The fake's notion of "time since start": the real monotonic clock, or a value a test sets.
///
/// Clones share the same time, so a test keeps one clone and moves the backend into the GPU
/// thread.
#[derive(Debug, Clone)]
pub struct FakeClock(ClockKind);

#[derive(Debug, Clone)]
enum ClockKind {
    Real { start: Instant, wall: SystemTime },
    Manual(Arc<AtomicU64>),
}

impl FakeClock {
    /// Real time, starting now.
    pub fn real() -> FakeClock {
        FakeClock(ClockKind::Real {
            start: Instant::now(),
            wall: SystemTime::now(),
        })
    }

    /// A clock that stands still at 0 until [`FakeClock::set`] moves it. Event times are then
    /// `UNIX_EPOCH + elapsed`, so tests can compare them exactly.
    pub fn manual() -> FakeClock {
        FakeClock(ClockKind::Manual(Arc::new(AtomicU64::new(0))))
    }

    /// Moves a manual clock to `elapsed` since start. Returns false (and does nothing) on a real
    /// clock.
    pub fn set(&self, elapsed: Duration) -> bool {
        match &self.0 {
            ClockKind::Real { .. } => false,
            ClockKind::Manual(nanos) => {
                let n = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
                nanos.store(n, Ordering::SeqCst);
                true
            }
        }
    }

    /// Time since start.
    pub fn elapsed(&self) -> Duration {
        match &self.0 {
            ClockKind::Real { start, .. } => start.elapsed(),
            ClockKind::Manual(nanos) => Duration::from_nanos(nanos.load(Ordering::SeqCst)),
        }
    }

    fn wall_at(&self, elapsed: Duration) -> SystemTime {
        match &self.0 {
            ClockKind::Real { wall, .. } => *wall + elapsed,
            ClockKind::Manual(_) => UNIX_EPOCH + elapsed,
        }
    }

    fn is_manual(&self) -> bool {
        matches!(self.0, ClockKind::Manual(_))
    }
}

/// A [`GpuBackend`] that replays a [`FakeScript`].
#[derive(Debug)]
pub struct FakeBackend {
    script: FakeScript,
    clock: FakeClock,
    next_event: usize,
}

impl FakeBackend {
    /// Replays `script` in real time from now.
    pub fn new(script: FakeScript) -> FakeBackend {
        FakeBackend::with_clock(script, FakeClock::real())
    }

    /// Replays `script` against `clock` (see [`FakeClock::manual`]).
    pub fn with_clock(script: FakeScript, clock: FakeClock) -> FakeBackend {
        FakeBackend {
            script,
            clock,
            next_event: 0,
        }
    }

    /// Reads a script file and replays it in real time.
    ///
    /// # Errors
    /// [`FakeScriptError`] naming the file and the field.
    pub fn from_file(path: &Path) -> Result<FakeBackend, FakeScriptError> {
        Ok(FakeBackend::new(FakeScript::from_file(path)?))
    }

    fn gpu(&self, id: &GpuId) -> Result<&RawGpu, GpuError> {
        self.script
            .gpus
            .iter()
            .find(|g| g.index == id.index)
            .ok_or_else(|| GpuError::Other(format!("no GPU with index {} in the script", id.index)))
    }

    fn check_lost(&self, g: &RawGpu) -> Result<(), GpuError> {
        let now = self.clock.elapsed();
        let back = g.back_at.is_some_and(|At(b)| now >= b);
        match g.lost_at {
            Some(At(t)) if now >= t && !back => Err(GpuError::Lost { gpu: g.index }),
            _ => Ok(()),
        }
    }

    fn due_event(&mut self) -> Option<GpuEvent> {
        let ev = self.script.events.get(self.next_event)?;
        if ev.at.0 > self.clock.elapsed() {
            return None;
        }
        self.next_event += 1;
        let gpu = self
            .script
            .gpus
            .iter()
            .find(|g| g.index == ev.gpu)
            .map(raw_id)?;
        Some(GpuEvent::Xid {
            gpu,
            xid: ev.xid,
            pid: ev.pid,
            at: self.clock.wall_at(ev.at.0),
        })
    }
}

impl GpuBackend for FakeBackend {
    fn name(&self) -> &'static str {
        "fake"
    }

    fn devices(&mut self) -> Result<Vec<GpuId>, GpuError> {
        Ok(self.script.gpu_ids())
    }

    fn info(&mut self, gpu: &GpuId) -> Result<GpuInfo, GpuError> {
        let g = self.gpu(gpu)?;
        Ok(GpuInfo {
            name: g.name.clone(),
            driver_version: self.script.driver_version.clone(),
            vbios_version: g.vbios_version.clone(),
            cuda_driver_version: self.script.cuda_driver_version.clone(),
        })
    }

    fn sample(&mut self, gpu: &GpuId) -> Result<GpuSample, GpuError> {
        let g = self.gpu(gpu)?;
        self.check_lost(g)?;
        let now = self.clock.elapsed();
        let mut sample = GpuSample::default();
        for kf in g.keyframes.iter().take_while(|kf| kf.at.0 <= now) {
            sample.overlay(&kf.set);
        }
        for name in &g.unsupported {
            sample.clear_field(name);
        }
        Ok(sample)
    }

    fn wait_event(&mut self, timeout: Duration) -> Result<Option<GpuEvent>, GpuError> {
        if let Some(ev) = self.due_event() {
            return Ok(Some(ev));
        }
        if self.clock.is_manual() {
            // Time only moves when the test moves it; wait out the timeout so a GPU thread
            // driven by a manual clock does not spin.
            std::thread::sleep(timeout);
            return Ok(self.due_event());
        }
        let deadline = Instant::now() + timeout;
        loop {
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            let until_next = self
                .script
                .events
                .get(self.next_event)
                .map(|ev| ev.at.0.saturating_sub(self.clock.elapsed()))
                .unwrap_or(Duration::MAX);
            std::thread::sleep(until_next.min(deadline - now));
            if let Some(ev) = self.due_event() {
                return Ok(Some(ev));
            }
        }
    }

    fn processes(&mut self, gpu: &GpuId) -> Result<Vec<GpuProcess>, GpuError> {
        let g = self.gpu(gpu)?;
        self.check_lost(g)?;
        let now = self.clock.elapsed();
        Ok(g.processes
            .iter()
            .filter(|p| p.from.is_none_or(|At(t)| t <= now))
            .filter(|p| p.until.is_none_or(|At(t)| now < t))
            .map(|p| GpuProcess {
                pid: p.pid,
                name: p.name.clone(),
                used_memory_bytes: p.used_memory_bytes,
                pod: match (&p.namespace, &p.pod) {
                    (Some(namespace), Some(pod)) => Some(PodRef {
                        namespace: namespace.clone(),
                        pod: pod.clone(),
                        container: p.container.clone(),
                    }),
                    _ => None,
                },
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCRIPT: &str = r#"
driver_version: "550.54.15"
cuda_driver_version: "12.4"
gpus:
  - index: 0
    uuid: GPU-00000000-0000-0000-0000-000000000000
    pci_bus_id: "00000000:17:00.0"
    name: Test GPU
    unsupported: [temperature_memory_celsius]
    keyframes:
      - at: 0s
        set: { utilization_ratio: 0.0, temperature_memory_celsius: 40 }
      - at: 30s
        set: { utilization_ratio: 0.9 }
    processes:
      - { pid: 10, name: python, used_memory_bytes: 1024, from: 5s, until: 50s }
  - index: 1
    uuid: GPU-11111111-1111-1111-1111-111111111111
    pci_bus_id: "00000000:2A:00.0"
    lost_at: 45s
events:
  - { at: 20s, gpu: 1, xid: 79, pid: 10 }
"#;

    fn backend() -> (FakeBackend, FakeClock) {
        let clock = FakeClock::manual();
        let script = FakeScript::parse(SCRIPT, "test.yaml").unwrap();
        (FakeBackend::with_clock(script, clock.clone()), clock)
    }

    #[test]
    fn keyframes_hold_until_changed_and_unsupported_fields_stay_absent() {
        let (mut b, clock) = backend();
        let gpus = b.devices().unwrap();
        let s = b.sample(&gpus[0]).unwrap();
        assert_eq!(s.utilization_ratio, Some(0.0));
        assert_eq!(s.temperature_memory_celsius, None);
        clock.set(Duration::from_secs(31));
        assert_eq!(b.sample(&gpus[0]).unwrap().utilization_ratio, Some(0.9));
    }

    #[test]
    fn processes_live_between_from_and_until() {
        let (mut b, clock) = backend();
        let gpus = b.devices().unwrap();
        assert!(b.processes(&gpus[0]).unwrap().is_empty());
        clock.set(Duration::from_secs(5));
        assert_eq!(b.processes(&gpus[0]).unwrap()[0].pid, 10);
        clock.set(Duration::from_secs(50));
        assert!(b.processes(&gpus[0]).unwrap().is_empty());
    }

    #[test]
    fn xid_is_delivered_once_at_its_time() {
        let (mut b, clock) = backend();
        clock.set(Duration::from_secs(19));
        assert_eq!(b.wait_event(Duration::ZERO).unwrap(), None);
        clock.set(Duration::from_secs(20));
        let ev = b.wait_event(Duration::ZERO).unwrap();
        match ev {
            Some(GpuEvent::Xid { gpu, xid, pid, at }) => {
                assert_eq!(gpu.index, 1);
                assert_eq!(xid, 79);
                assert_eq!(pid, Some(10));
                assert_eq!(at, UNIX_EPOCH + Duration::from_secs(20));
            }
            other => panic!("expected an Xid, got {other:?}"),
        }
        assert_eq!(b.wait_event(Duration::ZERO).unwrap(), None);
    }

    #[test]
    fn a_lost_gpu_comes_back_at_back_at() {
        let text = SCRIPT.replace("lost_at: 45s", "lost_at: 45s\n    back_at: 60s");
        let script = FakeScript::parse(&text, "t.yaml").unwrap();
        let clock = FakeClock::manual();
        let mut b = FakeBackend::with_clock(script, clock.clone());
        let gpus = b.devices().unwrap();
        clock.set(Duration::from_secs(50));
        assert!(matches!(b.sample(&gpus[1]), Err(GpuError::Lost { gpu: 1 })));
        clock.set(Duration::from_secs(60));
        assert!(b.sample(&gpus[1]).is_ok());
        let bad = SCRIPT.replace("lost_at: 45s", "lost_at: 45s\n    back_at: 40s");
        let err = FakeScript::parse(&bad, "t.yaml").unwrap_err().to_string();
        assert!(err.contains("gpus[1].back_at"), "{err}");
    }

    #[test]
    fn gpu_is_lost_from_its_time_on() {
        let (mut b, clock) = backend();
        let gpus = b.devices().unwrap();
        assert!(b.sample(&gpus[1]).is_ok());
        clock.set(Duration::from_secs(45));
        assert!(matches!(b.sample(&gpus[1]), Err(GpuError::Lost { gpu: 1 })));
        assert!(b.sample(&gpus[0]).is_ok());
    }

    #[test]
    fn bad_value_error_names_the_field() {
        let text = SCRIPT.replace("utilization_ratio: 0.9", "utilization_ratio: high");
        let err = FakeScript::parse(&text, "test.yaml")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("gpus[0].keyframes[1].set.utilization_ratio"),
            "{err}"
        );
        assert!(err.starts_with("test.yaml: "), "{err}");
        assert_eq!(err.matches("utilization_ratio").count(), 1, "{err}");
    }

    #[test]
    fn unknown_key_and_unknown_unsupported_field_are_named() {
        let text = SCRIPT.replace("lost_at: 45s", "lost_after: 45s");
        let err = FakeScript::parse(&text, "t").unwrap_err().to_string();
        assert!(
            err.contains("gpus[1]") && err.contains("lost_after"),
            "{err}"
        );

        let text = SCRIPT.replace("[temperature_memory_celsius]", "[temp]");
        let err = FakeScript::parse(&text, "t").unwrap_err().to_string();
        assert!(err.contains("gpus[0].unsupported[0]"), "{err}");
    }

    #[test]
    fn bad_duration_and_unknown_event_gpu_are_named() {
        let text = SCRIPT.replace("at: 20s", "at: soon");
        let err = FakeScript::parse(&text, "t").unwrap_err().to_string();
        assert!(
            err.contains("events[0].at") && err.contains("\"soon\""),
            "{err}"
        );

        let text = SCRIPT.replace("gpu: 1, xid", "gpu: 7, xid");
        let err = FakeScript::parse(&text, "t").unwrap_err().to_string();
        assert!(err.contains("events[0].gpu"), "{err}");
    }

    proptest::proptest! {
        #[test]
        fn parse_never_panics_on_a_mangled_script(cut in 0usize..SCRIPT.len(), junk in "\\PC{0,20}") {
            let mut text = SCRIPT.as_bytes()[..cut].to_vec();
            text.extend_from_slice(junk.as_bytes());
            let _ = FakeScript::parse(&String::from_utf8_lossy(&text), "t");
        }
    }

    #[test]
    fn shipped_script_parses() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/fake-gpus.yaml");
        let script = FakeScript::from_file(&path).unwrap();
        assert!(script.gpu_ids().len() >= 2);
    }
}
