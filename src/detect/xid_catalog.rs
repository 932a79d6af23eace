//! The Xid catalog, built into the binary: number → name, description, typical cause, action.
//!
//! Names, descriptions and resolution buckets are NVIDIA's, from the Xid catalog for Ampere and
//! newer GPUs (https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html); the data
//! file `xid_catalog.tsv` keeps each row's source. The `typical_cause` column is a coarse reading
//! of NVIDIA's description and buckets. The hints below are this project's wording.

use crate::model::Blame;
use regex::Regex;
use std::sync::OnceLock;

const TSV: &str = include_str!("xid_catalog.tsv");

/// NVIDIA's NVLink5 decode table for Xid 144–150 (the catalog's second sheet): unit, IntrInfo bit
/// patterns for drivers before R575 (V1) and from R575 (V2), ErrorStatus, resolution bucket and
/// severity. Rows are NVIDIA's, transcribed from the machine-readable copy of the catalog that
/// leptonai/gpud generated on 2025-10-29 (commit 4a8de33a3f02e207f39e9023d67125592d599731,
/// `components/accelerator/nvidia/xid/catalog_generated.go`); the "action 2" patterns of the
/// RLW_RXPIPE rows are from the catalog page itself.
const NVLINK5_TSV: &str = include_str!("xid_nvlink5.tsv");

/// What to do right away about an Xid: this project's reading of NVIDIA's immediate resolution
/// bucket (the `action` column of `xid_catalog.tsv`, which says where it departs from the bucket).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Action {
    /// No immediate action; watch for repeats.
    Ignore,
    /// Check something (support case, cabling, configuration) without taking the GPU away.
    Investigate,
    /// Restart the application; the GPU stays usable.
    RestartApp,
    /// Update the driver/firmware; the GPU cannot serve (vGPU) work until then.
    UpdateSwfw,
    /// Stop peer-to-peer work on the GPU (Xid 154 "Drain P2P").
    DrainP2p,
    /// Drain the GPU and reset it.
    ResetGpu,
    /// Drain the GPU, then reset it (Xid 154 "Drain and Reset").
    DrainAndReset,
    /// Restart the VM (which drains it).
    RestartVm,
    /// Drain the node and reboot (or power-cycle) it.
    Reboot,
    /// The line itself says (Xid 154's new action, the NVLink5 decode of 144–150).
    FromLine,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Ignore => "ignore",
            Action::Investigate => "investigate",
            Action::RestartApp => "restart_app",
            Action::UpdateSwfw => "update_swfw",
            Action::DrainP2p => "drain_p2p",
            Action::ResetGpu => "reset_gpu",
            Action::DrainAndReset => "drain_and_reset",
            Action::RestartVm => "restart_vm",
            Action::Reboot => "reboot",
            Action::FromLine => "from_line",
        }
    }

    fn parse(s: &str) -> Option<Action> {
        [
            Action::Ignore,
            Action::Investigate,
            Action::RestartApp,
            Action::UpdateSwfw,
            Action::DrainP2p,
            Action::ResetGpu,
            Action::DrainAndReset,
            Action::RestartVm,
            Action::Reboot,
            Action::FromLine,
        ]
        .into_iter()
        .find(|a| a.as_str() == s)
    }

    /// Does this action take the GPU out of service until it is done?
    pub fn takes_out_of_service(self) -> bool {
        matches!(
            self,
            Action::UpdateSwfw
                | Action::DrainP2p
                | Action::ResetGpu
                | Action::DrainAndReset
                | Action::RestartVm
                | Action::Reboot
        )
    }

    fn advice(self) -> &'static str {
        match self {
            Action::Ignore => "no immediate action; watch for repeats.",
            Action::Investigate => "no immediate action on the GPU; investigate (collect an nvidia-bug-report, check cabling and configuration) if it repeats.",
            Action::RestartApp => "restart the job; the GPU stays usable. Fix the application if it repeats.",
            Action::UpdateSwfw => "take the GPU out of (vGPU) service and update the driver and firmware.",
            Action::DrainP2p => "stop peer-to-peer (NVLink/P2P) work on the GPU until it is reset.",
            Action::ResetGpu => "drain the GPU and reset it (nvidia-smi -r) or reboot the node before scheduling work again.",
            Action::DrainAndReset => "drain the GPU's work, then reset it before scheduling work again.",
            Action::RestartVm => "drain the VM and restart it.",
            Action::Reboot => "drain the node and reboot (power-cycle) it; have the GPU checked if it repeats.",
            Action::FromLine => "act on what the line itself says (assertwatch decodes it into the incident's hint).",
        }
    }
}

/// One catalog row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XidEntry {
    pub xid: u32,
    pub short_name: String,
    pub description: String,
    pub typical_cause: String,
    pub recommended_action: String,
    pub source_url: String,
    /// The immediate action this project takes (see [`Action`]).
    pub action: Action,
    /// Whether the GPU leaves service: `None` where the line decides (144–150, 154).
    pub out_of_service: Option<bool>,
    /// Where the decision comes from, and why where it differs from NVIDIA's bucket.
    pub decision: String,
}

fn entries() -> &'static [XidEntry] {
    static E: OnceLock<Vec<XidEntry>> = OnceLock::new();
    E.get_or_init(|| {
        TSV.lines()
            .skip(1)
            .filter_map(|l| {
                let f: Vec<&str> = l.split('\t').collect();
                if f.len() < 9 {
                    return None;
                }
                Some(XidEntry {
                    xid: f[0].trim().parse().ok()?,
                    short_name: f[1].to_owned(),
                    description: f[2].to_owned(),
                    typical_cause: f[3].to_owned(),
                    recommended_action: f[4].to_owned(),
                    source_url: f[5].to_owned(),
                    action: Action::parse(f[6])?,
                    out_of_service: match f[7] {
                        "yes" => Some(true),
                        "no" => Some(false),
                        _ => None,
                    },
                    decision: f[8].to_owned(),
                })
            })
            .collect()
    })
}

/// All catalog entries, by number.
pub fn all() -> &'static [XidEntry] {
    entries()
}

/// The catalog entry for `xid`, if NVIDIA lists it.
pub fn lookup(xid: u32) -> Option<&'static XidEntry> {
    entries().iter().find(|e| e.xid == xid)
}

/// Short names for the Xids operators meet most, where NVIDIA's description is long or generic.
const SLUGS: &[(u32, &str)] = &[
    (31, "mmu_fault"),
    (45, "preemptive_cleanup"),
    (48, "double_bit_ecc"),
    (63, "row_remapping_event"),
    (64, "memory_retirement_failure"),
    (74, "nvlink_error"),
    (79, "fallen_off_bus"),
    (92, "high_sbe_rate"),
    (94, "contained_ecc_error"),
    (95, "uncontained_ecc_error"),
    (109, "ctx_switch_timeout"),
];

/// The incident category of an Xid: `xid_<N>_<name>`, stable for a given number.
pub fn category(xid: u32) -> String {
    if let Some((_, s)) = SLUGS.iter().find(|(n, _)| *n == xid) {
        return format!("xid_{xid}_{s}");
    }
    match lookup(xid) {
        Some(e) if !e.description.starts_with("Unused") => {
            format!("xid_{xid}_{}", slug(&e.description))
        }
        Some(e) => {
            let name = e.short_name.split(" / ").next().unwrap_or(&e.short_name);
            format!(
                "xid_{xid}_{}",
                slug(name.trim_start_matches("ROBUST_CHANNEL_"))
            )
        }
        None => format!("xid_{xid}_unknown"),
    }
}

fn slug(s: &str) -> String {
    let words: Vec<String> = s
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .take(5)
        .map(str::to_ascii_lowercase)
        .collect();
    let mut out = words.join("_");
    if out.is_empty() {
        out.push_str("unknown");
    }
    out
}

/// Whose fault an Xid usually is, from the catalog's typical cause.
pub fn blame(xid: u32) -> Blame {
    match lookup(xid).map(|e| e.typical_cause.as_str()) {
        Some("application") => Blame::Application,
        Some("driver") => Blame::Driver,
        Some("hardware" | "thermal" | "nvlink" | "memory") => Blame::Hardware,
        _ => Blame::Unknown,
    }
}

/// Does this Xid mean the GPU should not take new work until it is reset or checked?
///
/// This is the catalog's decision for the number alone. For Xids whose decision depends on the
/// line (144–150, 154) it is `false`; use [`decide`] with the line's detail for those.
pub fn needs_drain(xid: u32) -> bool {
    lookup(xid).is_some_and(|e| e.out_of_service == Some(true))
}

/// The decision for one Xid line: what to do, whether the GPU leaves service, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    pub action: Action,
    pub out_of_service: bool,
    /// What the line said that decided it ("NETIR_LINK_EVT Fatal, ErrorStatus 0x0: RESET_GPU"),
    /// empty where the catalog entry alone decided.
    pub reason: String,
}

/// Decides what to do about one Xid line (`detail` is the text after the number).
///
/// Xid 154 carries the new recovery action; Xid 144–150 are decoded with NVIDIA's NVLink5 table.
/// Every other Xid follows its catalog entry.
pub fn decide(xid: u32, detail: &str) -> Decision {
    if xid == 154 {
        if let Some(d) = decide_154(detail) {
            return d;
        }
    }
    if (144..=150).contains(&xid) {
        if let Some(d) = decide_nvlink5(xid, detail) {
            return d;
        }
    }
    let (action, out) = match lookup(xid) {
        Some(e) => (e.action, e.out_of_service.unwrap_or(false)),
        None => (Action::Investigate, false),
    };
    Decision {
        action,
        out_of_service: out,
        reason: String::new(),
    }
}

/// Xid 154: `GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)`.
///
/// The values are NVML's `nvmlDeviceGpuRecoveryAction_t` (0 None, 1 GPU reset, 2 node reboot,
/// 3 drain P2P, 4 drain and reset); the names are those NVIDIA's catalog lists for Xid 154.
/// "to 0x0 (None)" means the GPU recovered: nothing is left to do.
fn decide_154(detail: &str) -> Option<Decision> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(r"(?i)\bto\s+(?:0x([0-9a-f]{1,8})\s*)?(?:\(([^)]{1,40})\)|([A-Za-z][A-Za-z0-9 ]{1,40}))")
            .expect("static regex")
    });
    let c = re.captures(detail)?;
    let code = c
        .get(1)
        .and_then(|m| u32::from_str_radix(m.as_str(), 16).ok());
    let name = c
        .get(2)
        .or_else(|| c.get(3))
        .map_or("", |m| m.as_str().trim())
        .to_ascii_lowercase();
    let action = match (code, name.as_str()) {
        (Some(0), _) | (None, "none") => Action::Ignore,
        (Some(1), _) | (None, "gpu reset required") => Action::ResetGpu,
        (Some(2), _) | (None, "node reboot required" | "os reboot") => Action::Reboot,
        (Some(3), _) | (None, "drain p2p") => Action::DrainP2p,
        (Some(4), _) | (None, "drain and reset") => Action::DrainAndReset,
        _ if name.contains("reboot") => Action::Reboot,
        _ if name.contains("reset") => Action::ResetGpu,
        _ => return None,
    };
    let shown = c.get(0).map_or("", |m| m.as_str()).trim().to_owned();
    Some(Decision {
        action,
        out_of_service: action.takes_out_of_service(),
        reason: format!("recovery action changed {shown}"),
    })
}

/// One row of the NVLink5 decode table.
struct Nvlink5Rule {
    xid: u32,
    units: Vec<String>,
    v1: String,
    v2: String,
    error_status: u32,
    resolution: String,
    action2: String,
    action2_v1: String,
    action2_v2: String,
    severity: String,
}

fn nvlink5_rules() -> &'static [Nvlink5Rule] {
    static R: OnceLock<Vec<Nvlink5Rule>> = OnceLock::new();
    R.get_or_init(|| {
        NVLINK5_TSV
            .lines()
            .skip(1)
            .filter_map(|l| {
                let f: Vec<&str> = l.split('\t').collect();
                if f.len() < 10 {
                    return None;
                }
                Some(Nvlink5Rule {
                    xid: f[0].parse().ok()?,
                    units: f[1].split('/').map(str::to_owned).collect(),
                    v1: f[2].to_owned(),
                    v2: f[3].to_owned(),
                    error_status: u32::from_str_radix(f[4].trim_start_matches("0x"), 16).ok()?,
                    resolution: f[5].to_owned(),
                    action2: f[6].to_owned(),
                    severity: f[7].to_owned(),
                    action2_v1: f[8].to_owned(),
                    action2_v2: f[9].to_owned(),
                })
            })
            .collect()
    })
}

/// Does the 32-character pattern (`1`, `0`, `-` for "any", most significant bit first) match?
fn bits_match(pattern: &str, value: u32) -> bool {
    if pattern.len() != 32 {
        return false;
    }
    pattern.bytes().enumerate().all(|(i, b)| {
        let bit = (value >> (31 - i)) & 1;
        match b {
            b'1' => bit == 1,
            b'0' => bit == 0,
            _ => true,
        }
    })
}

/// The fields of an NVLink5 Xid line:
/// `NETIR_LINK_EVT Fatal XC0 i0 Link 08 (0x004505c6 0x00000000 …)` → unit, fatal, link,
/// IntrInfo, ErrorStatus.
pub struct Nvlink5Fields {
    pub unit: String,
    pub fatal: bool,
    pub link: Option<i32>,
    pub intr_info: u32,
    pub error_status: u32,
}

/// Parses the NVLink5 fields out of an Xid 144–150 line's detail.
pub fn nvlink5_fields(detail: &str) -> Option<Nvlink5Fields> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(r"\b([A-Z][A-Z0-9_]{1,40})\s+(Nonfatal|Non-fatal|Fatal)\s+XC\d+\s+i\d+\s+Link\s+(-?\d{1,3})\s+\((0x[0-9a-fA-F]{1,8})\s+(0x[0-9a-fA-F]{1,8})")
            .expect("static regex")
    });
    let c = re.captures(detail)?;
    let hex = |i: usize| {
        c.get(i)
            .and_then(|m| u32::from_str_radix(m.as_str().trim_start_matches("0x"), 16).ok())
    };
    Some(Nvlink5Fields {
        unit: c[1].to_owned(),
        fatal: &c[2] == "Fatal",
        link: c[3].parse().ok(),
        intr_info: hex(4)?,
        error_status: hex(5)?,
    })
}

fn bucket_action(bucket: &str) -> Action {
    match bucket {
        "RESET_GPU" => Action::ResetGpu,
        "RESTART_BM" => Action::Reboot,
        // "Evaluate the Xid 154 that follows": nothing to do on this line alone.
        "XID_154_EVAL" | "IGNORE" => Action::Ignore,
        _ => Action::Investigate,
    }
}

/// Xid 144–150: finds the NVLink5 decode row for the line's unit, ErrorStatus and IntrInfo
/// (either driver generation's bit layout); without a row, the line's own Fatal/Nonfatal word
/// decides (fatal: reset the GPU; non-fatal: no action).
fn decide_nvlink5(xid: u32, detail: &str) -> Option<Decision> {
    let f = nvlink5_fields(detail)?;
    let rule = nvlink5_rules().iter().find(|r| {
        r.xid == xid
            && r.error_status == f.error_status
            && r.units.iter().any(|u| u == &f.unit)
            && (bits_match(&r.v2, f.intr_info)
                || bits_match(&r.v1, f.intr_info)
                || bits_match(&r.action2_v2, f.intr_info)
                || bits_match(&r.action2_v1, f.intr_info))
    });
    let sev = if f.fatal { "Fatal" } else { "Nonfatal" };
    let (action, why) = match rule {
        Some(r) => {
            let second = !r.action2.is_empty()
                && (bits_match(&r.action2_v2, f.intr_info) || bits_match(&r.action2_v1, f.intr_info));
            let bucket = if second { &r.action2 } else { &r.resolution };
            (
                bucket_action(bucket),
                format!(
                    "{} {sev}, IntrInfo {:#010x}, ErrorStatus {:#010x}: NVIDIA's NVLink5 table says {} ({})",
                    f.unit, f.intr_info, f.error_status, bucket, r.severity
                ),
            )
        }
        None => (
            if f.fatal {
                Action::ResetGpu
            } else {
                Action::Ignore
            },
            format!(
                "{} {sev}, IntrInfo {:#010x}, ErrorStatus {:#010x}: not in NVIDIA's NVLink5 table, decided by the line's severity",
                f.unit, f.intr_info, f.error_status
            ),
        ),
    };
    Some(Decision {
        action,
        out_of_service: action.takes_out_of_service(),
        reason: why,
    })
}

/// What to do, for the person on call, for one Xid line: [`hint`], refined by what the line says
/// for the Xids whose decision depends on it (144–150, 154).
pub fn hint_for_line(xid: u32, detail: &str) -> String {
    let d = decide(xid, detail);
    if d.reason.is_empty() {
        return hint(xid);
    }
    if xid == 154 && d.action == Action::Ignore {
        return format!(
            "Xid 154: the GPU's {}: it recovered, nothing left to do.",
            d.reason
        );
    }
    format!("Xid {xid}: {}; {}", d.reason, d.action.advice())
}

/// What to do, for the person on call.
pub fn hint(xid: u32) -> String {
    let specific = match xid {
        79 => Some("The GPU fell off the bus: drain the node and have the GPU checked (reseat or replace); a reboot is needed to recover it."),
        48 => Some("An uncorrectable double-bit ECC error: drain the GPU, reset it so the page is retired or the row remapped, and replace it if it repeats."),
        63 => Some("A memory row was marked for remapping: no immediate action and the GPU stays in service; the remap is applied at the next GPU reset (reset it when it is idle). No data was lost."),
        64 => Some("Memory row remapping/page retirement failed: drain the node and have the GPU replaced."),
        74 => Some("An NVLink error: drain the node and check NVLink error counters; reset the GPU, and have the link or board checked if it repeats."),
        78 => Some("The GPU failed to start a vGPU: take it out of vGPU service and update the host driver and firmware (and check the vGPU configuration) before placing vGPUs on it again."),
        94 => Some("A contained ECC error killed the affected application only: restart the job; the GPU stays usable."),
        95 => Some("An uncontained ECC error: drain the GPU and reset it before scheduling work again."),
        13 => Some("A graphics engine exception, usually the application's own fault (an out-of-bounds access in a kernel): check the job's log for a device-side assert or illegal address at the same time."),
        31 => Some("A GPU memory page fault, usually an illegal address in the application's kernel: check the job's log for an illegal memory access at the same time."),
        43 => Some("The GPU stopped the faulting application's work (it usually follows the job's own error): the GPU stays usable; look at the job's error."),
        45 => Some("The driver cleaned up a channel after an earlier error: look for the Xid it follows (its detail may say which) and act on that one."),
        119 | 120 => Some("The GPU's GSP firmware stopped responding: drain the GPU and reset it (or reboot the node); update the driver if it repeats."),
        92 => Some("A high single-bit ECC error rate: no immediate action (the GPU stays in service); watch the GPU's ECC counters and plan a replacement if it continues."),
        151 => Some("A confidential-computing key rotation failed: drain the VM and restart it."),
        154 => Some("The GPU's recovery action changed: the line names the new action (None means it recovered; GPU Reset / Node Reboot / Drain mean take it out of service)."),
        144..=150 => Some("An NVLink5 error: each line's IntrInfo and ErrorStatus decide, per NVIDIA's NVLink5 decode table, whether it is fatal (drain and reset the GPU) or not (no action); the incident's hint carries that decision."),
        _ => None,
    };
    if let Some(s) = specific {
        return s.to_owned();
    }
    let Some(e) = lookup(xid) else {
        return format!("Xid {xid} is not in NVIDIA's Xid catalog: collect an nvidia-bug-report and check the driver's release notes.");
    };
    format!("Xid {xid} ({}): {}", e.description, e.action.advice())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_covers_1_to_173() {
        assert_eq!(all().len(), 173);
        assert!(all()
            .iter()
            .enumerate()
            .all(|(i, e)| e.xid as usize == i + 1));
    }

    #[test]
    fn categories_match_the_vocabulary() {
        assert_eq!(category(13), "xid_13_graphics_engine_exception");
        assert_eq!(category(43), "xid_43_gpu_stopped_processing");
        assert_eq!(category(119), "xid_119_gsp_rpc_timeout");
        assert_eq!(category(145), "xid_145_nvlink_rlw_error");
        assert_eq!(category(149), "xid_149_nvlink_netir_error");
        assert_eq!(category(79), "xid_79_fallen_off_bus");
        assert_eq!(category(999), "xid_999_unknown");
    }

    #[test]
    fn blame_follows_typical_cause() {
        assert_eq!(blame(13), Blame::Application);
        assert_eq!(blame(79), Blame::Hardware);
        assert_eq!(blame(119), Blame::Driver);
        assert_eq!(blame(48), Blame::Hardware);
        assert_eq!(blame(999), Blame::Unknown);
    }

    #[test]
    fn every_row_has_a_decision_and_a_source() {
        for e in all() {
            assert!(!e.decision.is_empty(), "{}", e.xid);
            assert!(e.source_url.starts_with("https://"), "{}", e.xid);
            // "Line decides" only where the line carries the decision.
            assert_eq!(
                e.out_of_service.is_none(),
                e.action == Action::FromLine,
                "{}",
                e.xid
            );
        }
    }

    #[test]
    fn drain_follows_the_catalog_actions() {
        // NVIDIA: IGNORE (92, 63), RESTART_APP (94): the GPU stays in service.
        for x in [92, 94, 63, 13, 31, 43, 45] {
            assert!(!needs_drain(x), "{x}");
        }
        assert_eq!(lookup(92).unwrap().action, Action::Ignore);
        assert_eq!(lookup(94).unwrap().action, Action::RestartApp);
        assert_eq!(lookup(63).unwrap().action, Action::Ignore);
        // RESET_GPU / RESTART_BM / RESTART_VM / the vGPU start error take it out.
        for x in [
            48, 62, 64, 74, 79, 95, 109, 119, 120, 140, 143, 151, 158, 78,
        ] {
            assert!(needs_drain(x), "{x}");
        }
        assert_eq!(lookup(151).unwrap().action, Action::RestartVm);
        assert_eq!(lookup(78).unwrap().action, Action::UpdateSwfw);
        // The line decides for 154 and 144-150.
        assert!(!needs_drain(154));
        assert!(!needs_drain(149));
        assert!(!needs_drain(999));
    }

    #[test]
    fn new_entries_162_to_173() {
        for x in 162..=173 {
            assert!(lookup(x).is_some(), "{x}");
        }
        assert_eq!(lookup(173).unwrap().short_name, "C2C_FATAL_LINK_FAILURE");
        assert!(needs_drain(173));
        assert!(needs_drain(171) && needs_drain(172));
        assert!(!needs_drain(162) && !needs_drain(163));
        assert_eq!(category(173), "xid_173_c2c_fatal_link_failure");
    }

    #[test]
    fn xid_154_reads_the_new_action() {
        // Wordings from https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1151 and NVIDIA's
        // catalog entry for Xid 154.
        let d = decide(
            154,
            "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)",
        );
        assert_eq!(d.action, Action::Reboot);
        assert!(d.out_of_service);
        let d = decide(
            154,
            "GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)",
        );
        assert_eq!(d.action, Action::ResetGpu);
        let d = decide(
            154,
            "GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)",
        );
        assert_eq!(d.action, Action::Ignore);
        assert!(!d.out_of_service);
        assert!(hint_for_line(
            154,
            "GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)"
        )
        .contains("recovered"));
        assert_eq!(
            decide(
                154,
                "GPU recovery action changed from 0x0 (None) to 0x3 (Drain P2P)"
            )
            .action,
            Action::DrainP2p
        );
        assert_eq!(
            decide(
                154,
                "GPU recovery action changed from 0x0 (None) to 0x4 (Drain and Reset)"
            )
            .action,
            Action::DrainAndReset
        );
        // Without the hex code.
        assert_eq!(
            decide(154, "GPU recovery action changed to GPU Reset Required").action,
            Action::ResetGpu
        );
    }

    #[test]
    fn nvlink5_lines_decode_per_nvidia_table() {
        // Lines from https://github.com/leptonai/gpud/pull/1160 and /pull/1174.
        let d = decide(
            144,
            "SAW_MVB Nonfatal XC0 i0 Link 0 (0x00000001 0x00000008 0x00000000 0x00000000 0x00000000 0x00000000)",
        );
        assert_eq!(d.action, Action::Ignore, "{d:?}");
        assert!(!d.out_of_service);
        let d = decide(
            145,
            "RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2 0x00000008 0x00000001 0x00000000 0x00000000 0x00000000)",
        );
        assert!(!d.out_of_service, "{d:?}");
        // NETIR_LINK_EVT with IntrInfo bits 25:20 = 100110 (0x026…): IGNORE in the table.
        let d = decide(
            149,
            "NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x026001c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)",
        );
        assert_eq!(d.action, Action::Ignore, "{d:?}");
        // bits 25:20 = 100101 (0x025…): RESET_GPU.
        let d = decide(
            149,
            "NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x025001c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)",
        );
        assert_eq!(d.action, Action::ResetGpu, "{d:?}");
        assert!(d.out_of_service);
        assert!(d.reason.contains("NETIR_LINK_EVT"));
        // A unit the table does not know: the line's severity decides.
        let d = decide(
            149,
            "NETIR Fatal XC0 i0 Link -1 (0x000fe406 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)",
        );
        assert!(d.out_of_service, "{d:?}");
        // The hint no longer points back at itself.
        assert!(!hint(149).contains("explain-xid"));
    }

    #[test]
    fn unknown_numbers_say_so() {
        assert!(hint(999).contains("not in NVIDIA's Xid catalog"));
    }
}
