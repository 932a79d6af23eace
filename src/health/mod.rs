//! GPU health: one state per GPU (`healthy`, `degraded`, `unhealthy`), with the reason and since
//! when, changed only on evidence.
//!
//! The most common complaint about GPU exporters is a GPU that never returns to healthy after a
//! transient Xid, and an Xid gauge that never resets. Here every state has a way in and a way out,
//! both on evidence:
//!
//! | evidence | state |
//! |---|---|
//! | an Xid whose decision takes the GPU out of service (reset, drain, reboot; the line decides for Xid 154 and NVLink5's 144–150), fallen off the bus, an SXid that takes the fabric out of service (for the NVSwitch), NVML reporting the GPU lost | `unhealthy` |
//! | another hardware- or driver-class Xid | `degraded` (watch) |
//! | application-class Xids (13, 31, 43, 45) on one GPU from [`REPEAT_PROCESSES`] different processes within [`REPEAT_WINDOW`] | `degraded`, reason "repeats across jobs": the signal that tells a bad GPU from bad code |
//!
//! Recovery: an `unhealthy` GPU recovers when NVML sees it again after it was lost (a reset or a
//! reboot brought it back), when its pending row remaps clear, or when a CUDA probe passes
//! after the event; a `degraded` one also after [`QUIET_WINDOW`] without new evidence. Never on a
//! timer alone for `unhealthy`. A GPU known only from a kernel-log line (no NVML) counts too, keyed
//! by its PCI bus id. The model is a plain value with time passed in; `sink` runs it in the daemon.

pub mod check;
pub mod sink;

use crate::detect::xid::normalize_bus;
use crate::detect::xid_catalog;
use crate::model::{Blame, IncidentRecord, Kind};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// Application-class Xids from this many different processes on one GPU make it `degraded`.
pub const REPEAT_PROCESSES: usize = 3;
/// ... within this window.
pub const REPEAT_WINDOW: Duration = Duration::from_secs(3600);
/// A `degraded` GPU with no new evidence for this long is `healthy` again.
pub const QUIET_WINDOW: Duration = Duration::from_secs(900);
/// Application-class Xids remembered per GPU for the repeat rule.
const MAX_REPEATS: usize = 64;

/// The Xids NVIDIA's catalog attributes to the application (user code faults on the GPU).
const APPLICATION_XIDS: [u32; 4] = [13, 31, 43, 45];

/// Health states, worst last (so `max` is the worst).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HealthState {
    Healthy,
    Degraded,
    Unhealthy,
}

impl HealthState {
    pub const ALL: [HealthState; 3] = [
        HealthState::Healthy,
        HealthState::Degraded,
        HealthState::Unhealthy,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            HealthState::Healthy => "healthy",
            HealthState::Degraded => "degraded",
            HealthState::Unhealthy => "unhealthy",
        }
    }

    pub fn parse(s: &str) -> Option<HealthState> {
        HealthState::ALL.into_iter().find(|h| h.as_str() == s)
    }
}

/// One GPU's health, as the API, the page, `assertwatch health` and the scheduler see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuHealth {
    /// Bus id in the kernel's short form (`0000:3b:00`): the key, known for every GPU.
    pub pci_bus_id: String,
    pub index: Option<u32>,
    pub uuid: Option<String>,
    pub state: HealthState,
    /// What made it so: `Xid 79`, `SXid 20034`, `lost`, `repeats across jobs (Xid 13 from 3
    /// processes)`; for a recovery, what showed it (`seen again by NVML`, `probe passed`, …).
    pub reason: Option<String>,
    /// Wall-clock milliseconds of the last change of state.
    pub since_ms: i64,
    /// The incident that caused the state, where one did.
    pub incident: Option<i64>,
}

/// A change of one GPU's state (for the scheduler integrations and the log).
#[derive(Debug, Clone, PartialEq)]
pub struct Transition {
    pub gpu: GpuHealth,
    pub from: HealthState,
}

#[derive(Debug, Clone, Default)]
struct Entry {
    index: Option<u32>,
    uuid: Option<String>,
    state: Option<HealthState>,
    reason: Option<String>,
    since_ms: i64,
    incident: Option<i64>,
    /// When the evidence behind a degraded state was last seen.
    last_evidence_ms: i64,
    /// NVML reported the GPU lost at or after the event.
    seen_lost: bool,
    /// Application-class Xids: (time, pid).
    repeats: VecDeque<(i64, u32)>,
}

impl Entry {
    fn state(&self) -> HealthState {
        self.state.unwrap_or(HealthState::Healthy)
    }
}

/// What NVML says about one GPU at one poll.
#[derive(Debug, Clone, PartialEq)]
pub struct NvmlView {
    pub index: u32,
    pub uuid: String,
    pub pci_bus_id: String,
    pub lost: bool,
    pub remaps_pending: Option<bool>,
}

/// See the module docs.
#[derive(Debug, Default)]
pub struct HealthModel {
    gpus: BTreeMap<String, Entry>,
}

/// Bound on GPUs tracked (a node has at most a few dozen; kernel lines can name anything).
const MAX_GPUS: usize = 256;

impl HealthModel {
    pub fn new() -> Self {
        HealthModel::default()
    }

    fn entry(&mut self, key: &str) -> Option<&mut Entry> {
        if !self.gpus.contains_key(key) && self.gpus.len() >= MAX_GPUS {
            return None;
        }
        Some(self.gpus.entry(key.to_owned()).or_default())
    }

    fn view(key: &str, e: &Entry) -> GpuHealth {
        GpuHealth {
            pci_bus_id: key.to_owned(),
            index: e.index,
            uuid: e.uuid.clone(),
            state: e.state(),
            reason: e.reason.clone(),
            since_ms: e.since_ms,
            incident: e.incident,
        }
    }

    /// Every GPU known, by bus id.
    pub fn gpus(&self) -> Vec<GpuHealth> {
        self.gpus.iter().map(|(k, e)| Self::view(k, e)).collect()
    }

    /// Moves `key` to `state`; returns the transition when it changed.
    fn set(
        &mut self,
        key: &str,
        state: HealthState,
        reason: String,
        incident: Option<i64>,
        now_ms: i64,
    ) -> Option<Transition> {
        let e = self.entry(key)?;
        let from = e.state();
        e.last_evidence_ms = now_ms;
        if from == state {
            return None;
        }
        e.state = Some(state);
        e.reason = Some(reason);
        e.since_ms = now_ms;
        e.incident = incident;
        if state != HealthState::Healthy {
            e.seen_lost = false;
        }
        let view = Self::view(key, e);
        Some(Transition { gpu: view, from })
    }

    /// Folds in a new incident. Only incidents with a GPU (bus id) count.
    pub fn observe_incident(&mut self, rec: &IncidentRecord, now_ms: i64) -> Option<Transition> {
        let inc = &rec.incident;
        let pci = inc
            .pci
            .as_deref()
            .or_else(|| rec.gpu.as_ref().and_then(|g| g.pci_bus_id.as_deref()))?;
        let key = normalize_bus(pci);
        if let Some(e) = self.entry(&key) {
            if let Some(g) = &rec.gpu {
                e.index = e.index.or(g.index);
                if e.uuid.is_none() {
                    e.uuid.clone_from(&g.uuid);
                }
            }
        }
        let id = Some(rec.id).filter(|i| *i > 0);
        let line = inc.message.as_deref().unwrap_or("");
        if inc.kind == Kind::Sxid {
            // An NVSwitch: tracked like a GPU, by its bus id. Its decision follows NVIDIA's
            // NVSwitch catalog, or the line's own Fatal/Non-fatal where the catalog is silent.
            let n = inc.sxid?;
            let action = crate::detect::sxid::decide(n, crate::detect::sxid::severity_of(line));
            if !action.takes_out_of_service() {
                return None;
            }
            return self.set(
                &key,
                HealthState::Unhealthy,
                format!("SXid {n}"),
                id,
                now_ms,
            );
        }
        if inc.kind != Kind::Xid {
            return None;
        }
        let Some(xid) = inc.xid else {
            // The driver's bus-loss wording without an Xid number.
            return (inc.category == "gpu_fallen_off_bus_no_xid").then(|| {
                self.set(
                    &key,
                    HealthState::Unhealthy,
                    "fallen off the bus".into(),
                    id,
                    now_ms,
                )
            })?;
        };
        let current = self
            .gpus
            .get(&key)
            .map(Entry::state)
            .unwrap_or(HealthState::Healthy);
        let decision = xid_catalog::decide(xid, line);
        if decision.out_of_service {
            return self.set(
                &key,
                HealthState::Unhealthy,
                format!("Xid {xid}"),
                id,
                now_ms,
            );
        }
        if xid == 154
            && decision.action == xid_catalog::Action::Ignore
            && current != HealthState::Healthy
        {
            // The driver changed the GPU's recovery action to "none": it recovered.
            return self.set(
                &key,
                HealthState::Healthy,
                "Xid 154: recovery action cleared".into(),
                id,
                now_ms,
            );
        }
        if APPLICATION_XIDS.contains(&xid) {
            let e = self.entry(&key)?;
            if let Some(pid) = inc.pid {
                while e
                    .repeats
                    .front()
                    .is_some_and(|(t, _)| now_ms - t > REPEAT_WINDOW.as_millis() as i64)
                {
                    e.repeats.pop_front();
                }
                if e.repeats.len() >= MAX_REPEATS {
                    e.repeats.pop_front();
                }
                e.repeats.push_back((now_ms, pid));
                let mut pids: Vec<u32> = e.repeats.iter().map(|(_, p)| *p).collect();
                pids.sort_unstable();
                pids.dedup();
                if pids.len() >= REPEAT_PROCESSES && current < HealthState::Degraded {
                    let reason = format!(
                        "repeats across jobs (application-class Xid {xid} from {} processes within {})",
                        pids.len(),
                        humantime::format_duration(REPEAT_WINDOW)
                    );
                    return self.set(&key, HealthState::Degraded, reason, id, now_ms);
                }
            }
            return None;
        }
        if matches!(xid_catalog::blame(xid), Blame::Hardware | Blame::Driver)
            && current < HealthState::Degraded
        {
            return self.set(
                &key,
                HealthState::Degraded,
                format!("Xid {xid}"),
                id,
                now_ms,
            );
        }
        if current == HealthState::Degraded {
            // More evidence of the same kind keeps the quiet window from closing.
            if let Some(e) = self.entry(&key) {
                e.last_evidence_ms = now_ms;
            }
        }
        None
    }

    /// Folds in one NVML poll: a lost GPU is unhealthy; one seen again after it was lost, or
    /// whose pending remaps cleared, has recovered.
    pub fn observe_nvml(&mut self, gpus: &[NvmlView], now_ms: i64) -> Vec<Transition> {
        let mut out = Vec::new();
        for g in gpus {
            let key = normalize_bus(&g.pci_bus_id);
            let Some(e) = self.entry(&key) else { continue };
            e.index = Some(g.index);
            e.uuid = Some(g.uuid.clone());
            let state = e.state();
            if g.lost {
                e.seen_lost = true;
                if state != HealthState::Unhealthy {
                    out.extend(self.set(
                        &key,
                        HealthState::Unhealthy,
                        "lost (NVML)".into(),
                        None,
                        now_ms,
                    ));
                }
                continue;
            }
            if state == HealthState::Healthy {
                continue;
            }
            let recovered = if e.seen_lost {
                Some("seen again by NVML after it was lost")
            } else if g.remaps_pending == Some(false)
                && e.reason
                    .as_deref()
                    .is_some_and(|r| r.starts_with("Xid 63") || r.starts_with("Xid 64"))
            {
                Some("pending row remaps applied")
            } else {
                None
            };
            if let Some(why) = recovered {
                out.extend(self.set(&key, HealthState::Healthy, why.into(), None, now_ms));
            }
        }
        out
    }

    /// A CUDA probe of the GPU with bus id `pci` finished after the event.
    pub fn observe_probe(&mut self, pci: &str, ok: bool, now_ms: i64) -> Option<Transition> {
        let key = normalize_bus(pci);
        let e = self.gpus.get(&key)?;
        if !ok || e.state() == HealthState::Healthy || e.seen_lost {
            return None;
        }
        self.set(
            &key,
            HealthState::Healthy,
            "CUDA probe passed".into(),
            None,
            now_ms,
        )
    }

    /// Degraded GPUs quiet for [`QUIET_WINDOW`] are healthy again.
    pub fn tick(&mut self, now_ms: i64) -> Vec<Transition> {
        let quiet = QUIET_WINDOW.as_millis() as i64;
        let due: Vec<String> = self
            .gpus
            .iter()
            .filter(|(_, e)| {
                e.state() == HealthState::Degraded && now_ms - e.last_evidence_ms >= quiet
            })
            .map(|(k, _)| k.clone())
            .collect();
        due.into_iter()
            .filter_map(|k| {
                self.set(
                    &k,
                    HealthState::Healthy,
                    "quiet window passed".into(),
                    None,
                    now_ms,
                )
            })
            .collect()
    }

    /// Restores states saved by a previous run.
    pub fn restore(&mut self, saved: &[GpuHealth]) {
        for g in saved.iter().take(MAX_GPUS) {
            let e = self.gpus.entry(g.pci_bus_id.clone()).or_default();
            e.index = g.index;
            e.uuid.clone_from(&g.uuid);
            e.state = Some(g.state);
            e.reason.clone_from(&g.reason);
            e.since_ms = g.since_ms;
            e.incident = g.incident;
            e.last_evidence_ms = g.since_ms;
        }
    }
}

/// One line for `assertwatch health` and the Slurm drain reason: the worst GPU and why.
pub fn summary(gpus: &[GpuHealth]) -> Option<String> {
    let worst = gpus
        .iter()
        .filter(|g| g.state != HealthState::Healthy)
        .max_by_key(|g| g.state)?;
    let name = match (worst.index, &worst.uuid) {
        (Some(i), _) => format!("GPU {i} ({})", worst.pci_bus_id),
        (None, Some(u)) => format!("GPU {u} ({})", worst.pci_bus_id),
        (None, None) => format!("GPU {}", worst.pci_bus_id),
    };
    let others = gpus
        .iter()
        .filter(|g| g.state != HealthState::Healthy)
        .count()
        - 1;
    let more = if others > 0 {
        format!("; {others} more not healthy")
    } else {
        String::new()
    };
    Some(format!(
        "{} {}: {}{more}",
        name,
        worst.state.as_str(),
        worst.reason.as_deref().unwrap_or("unknown reason")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::GpuRef;

    fn xid(x: u32, pci: &str, pid: Option<u32>, id: i64) -> IncidentRecord {
        let mut r = crate::incidents::store::test_record();
        r.id = id;
        r.incident.kind = Kind::Xid;
        r.incident.xid = Some(x);
        r.incident.pci = Some(pci.into());
        r.incident.pid = pid;
        r.gpu = Some(GpuRef {
            index: Some(1),
            uuid: Some("GPU-1".into()),
            pci_bus_id: Some(pci.into()),
        });
        r
    }

    fn nvml(lost: bool) -> Vec<NvmlView> {
        vec![NvmlView {
            index: 1,
            uuid: "GPU-1".into(),
            pci_bus_id: "00000000:3B:00.0".into(),
            lost,
            remaps_pending: Some(false),
        }]
    }

    #[test]
    fn xid_79_makes_the_gpu_unhealthy_until_nvml_sees_it_back() {
        let mut m = HealthModel::new();
        let t = m
            .observe_incident(&xid(79, "0000:3b:00", None, 5), 1_000)
            .unwrap();
        assert_eq!(
            (t.from, t.gpu.state),
            (HealthState::Healthy, HealthState::Unhealthy)
        );
        assert_eq!(t.gpu.reason.as_deref(), Some("Xid 79"));
        assert_eq!(t.gpu.incident, Some(5));
        // Present and not lost is no evidence of recovery by itself; no timer either.
        assert!(m.observe_nvml(&nvml(false), 2_000).is_empty());
        assert!(m.tick(10_000_000).is_empty());
        assert!(m.observe_nvml(&nvml(true), 3_000).is_empty());
        let back = m.observe_nvml(&nvml(false), 4_000);
        assert_eq!(back.len(), 1);
        assert_eq!(back[0].gpu.state, HealthState::Healthy);
        assert_eq!(m.gpus()[0].index, Some(1));
    }

    #[test]
    fn a_lost_gpu_is_unhealthy_even_without_an_xid() {
        let mut m = HealthModel::new();
        let t = m.observe_nvml(&nvml(true), 1);
        assert_eq!(t[0].gpu.state, HealthState::Unhealthy);
        assert_eq!(t[0].gpu.pci_bus_id, "0000:3b:00");
    }

    #[test]
    fn application_xids_from_several_processes_escalate() {
        let mut m = HealthModel::new();
        assert!(m
            .observe_incident(&xid(13, "0000:3b:00", Some(10), 1), 0)
            .is_none());
        assert!(m
            .observe_incident(&xid(13, "0000:3b:00", Some(10), 2), 1)
            .is_none());
        assert!(m
            .observe_incident(&xid(43, "0000:3b:00", Some(11), 3), 2)
            .is_none());
        let t = m
            .observe_incident(&xid(13, "0000:3b:00", Some(12), 4), 3)
            .unwrap();
        assert_eq!(t.gpu.state, HealthState::Degraded);
        assert!(t.gpu.reason.unwrap().starts_with("repeats across jobs"));
        // Another GPU is not affected, and old repeats expire.
        let mut m2 = HealthModel::new();
        m2.observe_incident(&xid(13, "0000:3b:00", Some(10), 1), 0);
        m2.observe_incident(&xid(13, "0000:3b:00", Some(11), 2), 1);
        let late = REPEAT_WINDOW.as_millis() as i64 + 10;
        assert!(m2
            .observe_incident(&xid(13, "0000:3b:00", Some(12), 3), late)
            .is_none());
    }

    #[test]
    fn degraded_recovers_after_a_quiet_window_or_a_passing_probe() {
        let mut m = HealthModel::new();
        let mut m2 = HealthModel::new();
        // Find a hardware-class Xid that does not take the GPU out of service.
        let x = (1..200)
            .find(|x| {
                !xid_catalog::needs_drain(*x)
                    && matches!(xid_catalog::blame(*x), Blame::Hardware | Blame::Driver)
                    && !APPLICATION_XIDS.contains(x)
            })
            .unwrap();
        assert_eq!(
            m.observe_incident(&xid(x, "0000:3b:00", None, 1), 0)
                .unwrap()
                .gpu
                .state,
            HealthState::Degraded
        );
        m2.observe_incident(&xid(x, "0000:3b:00", None, 1), 0);
        let quiet = QUIET_WINDOW.as_millis() as i64;
        assert!(m.tick(quiet - 1).is_empty());
        assert_eq!(m.tick(quiet).len(), 1);
        let t = m2.observe_probe("00000000:3B:00.0", true, 5).unwrap();
        assert_eq!(t.gpu.reason.as_deref(), Some("CUDA probe passed"));
    }

    #[test]
    fn the_line_decides_for_xid_154_and_a_fatal_sxid_takes_the_switch_out() {
        let mut m = HealthModel::new();
        let mut r = xid(154, "0000:3b:00", None, 1);
        r.incident.message = Some("NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)".into());
        assert_eq!(
            m.observe_incident(&r, 0).unwrap().gpu.state,
            HealthState::Unhealthy
        );
        r.incident.message = Some("NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)".into());
        let t = m.observe_incident(&r, 5).unwrap();
        assert_eq!(t.gpu.state, HealthState::Healthy);
        let mut s = xid(0, "0000:05:00.0", None, 2);
        s.incident.kind = Kind::Sxid;
        s.incident.xid = None;
        s.incident.sxid = Some(20034);
        s.incident.message = Some(
            "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 20034, Fatal, Link 30 LTSSM Fault Up"
                .into(),
        );
        let t = m.observe_incident(&s, 9).unwrap();
        assert_eq!(
            (t.gpu.state, t.gpu.reason.as_deref()),
            (HealthState::Unhealthy, Some("SXid 20034"))
        );
    }

    #[test]
    fn summary_names_the_worst_gpu() {
        let mut m = HealthModel::new();
        assert_eq!(summary(&m.gpus()), None);
        m.observe_incident(&xid(79, "0000:3b:00", None, 5), 0);
        assert_eq!(
            summary(&m.gpus()).unwrap(),
            "GPU 1 (0000:3b:00) unhealthy: Xid 79"
        );
    }

    #[test]
    fn states_survive_a_restart() {
        let mut m = HealthModel::new();
        m.observe_incident(&xid(79, "0000:3b:00", None, 5), 0);
        let saved = m.gpus();
        let mut m2 = HealthModel::new();
        m2.restore(&saved);
        assert_eq!(m2.gpus(), saved);
    }
}
