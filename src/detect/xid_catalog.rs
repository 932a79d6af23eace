//! The Xid catalog, built into the binary: number → name, description, typical cause, action.
//!
//! Names, descriptions and resolution buckets are NVIDIA's, from the Xid catalog for Ampere and
//! newer GPUs (https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html); the data
//! file `xid_catalog.tsv` keeps each row's source. The `typical_cause` column is a coarse reading
//! of NVIDIA's description and buckets. The hints below are this project's wording.

use crate::model::Blame;
use std::sync::OnceLock;

const TSV: &str = include_str!("xid_catalog.tsv");

/// One catalog row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct XidEntry {
    pub xid: u32,
    pub short_name: String,
    pub description: String,
    pub typical_cause: String,
    pub recommended_action: String,
    pub source_url: String,
}

fn entries() -> &'static [XidEntry] {
    static E: OnceLock<Vec<XidEntry>> = OnceLock::new();
    E.get_or_init(|| {
        TSV.lines()
            .skip(1)
            .filter_map(|l| {
                let f: Vec<&str> = l.split('\t').collect();
                if f.len() < 6 {
                    return None;
                }
                Some(XidEntry {
                    xid: f[0].trim().parse().ok()?,
                    short_name: f[1].to_owned(),
                    description: f[2].to_owned(),
                    typical_cause: f[3].to_owned(),
                    recommended_action: f[4].to_owned(),
                    source_url: f[5].to_owned(),
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
pub fn needs_drain(xid: u32) -> bool {
    matches!(
        xid,
        48 | 62 | 63 | 64 | 74 | 79 | 92 | 94 | 95 | 109 | 119 | 120 | 140 | 143 | 154 | 158
    ) || lookup(xid).is_some_and(|e| {
        e.recommended_action.contains("RESET_GPU") || e.recommended_action.contains("RESTART_BM")
    })
}

/// What to do, for the person on call.
pub fn hint(xid: u32) -> String {
    let specific = match xid {
        79 => Some("The GPU fell off the bus: drain the node and have the GPU checked (reseat or replace); a reboot is needed to recover it."),
        48 => Some("An uncorrectable double-bit ECC error: drain the GPU, reset it so the page is retired or the row remapped, and replace it if it repeats."),
        63 => Some("A memory row was marked for remapping: reset the GPU when it is idle to apply it; no data was lost."),
        64 => Some("Memory row remapping/page retirement failed: drain the node and have the GPU replaced."),
        74 => Some("An NVLink error: drain the node and check NVLink error counters; reset the GPU, and have the link or board checked if it repeats."),
        94 => Some("A contained ECC error killed the affected application only: restart the job; the GPU stays usable."),
        95 => Some("An uncontained ECC error: drain the GPU and reset it before scheduling work again."),
        13 => Some("A graphics engine exception, usually the application's own fault (an out-of-bounds access in a kernel): check the job's log for a device-side assert or illegal address at the same time."),
        31 => Some("A GPU memory page fault, usually an illegal address in the application's kernel: check the job's log for an illegal memory access at the same time."),
        43 => Some("The GPU stopped the faulting application's work (it usually follows the job's own error): the GPU stays usable; look at the job's error."),
        45 => Some("The driver cleaned up a channel after an earlier error: look for the Xid it follows (its detail may say which) and act on that one."),
        119 | 120 => Some("The GPU's GSP firmware stopped responding: drain the GPU and reset it (or reboot the node); update the driver if it repeats."),
        92 => Some("A high single-bit ECC error rate: watch the GPU's ECC counters and plan a replacement if it continues."),
        _ => None,
    };
    if let Some(s) = specific {
        return s.to_owned();
    }
    let Some(e) = lookup(xid) else {
        return format!("Xid {xid} is not in NVIDIA's Xid catalog: collect an nvidia-bug-report and check the driver's release notes.");
    };
    let bucket = e
        .recommended_action
        .strip_prefix("Immediate: ")
        .and_then(|s| s.split([' ', ';']).next())
        .unwrap_or("");
    let action = match bucket {
        "RESTART_APP" => "restart the job; the GPU stays usable. Fix the application if it repeats.",
        "RESET_GPU" => "drain the GPU and reset it (nvidia-smi -r) or reboot the node before scheduling work again.",
        "RESTART_BM" => "drain the node and power-cycle it; have the GPU checked if it repeats.",
        "RESTART_VM" => "restart the VM.",
        "IGNORE" => "no immediate action; watch for repeats.",
        "CHECK_MECHANICALS" => "check the board's power connectors and seating.",
        "UPDATE_SWFW" => "update the driver and firmware.",
        "CHECK_UVM" => "check the job's unified-memory use.",
        "CONTACT_SUPPORT" => "collect an nvidia-bug-report and contact the hardware vendor.",
        b if b.starts_with("WORKFLOW") || b.starts_with("XID_") => "follow NVIDIA's documented workflow for this Xid (assertwatch explain-xid shows it).",
        _ => "see NVIDIA's Xid catalog for this code.",
    };
    format!("Xid {xid} ({}): {action}", e.description)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalog_covers_1_to_172() {
        assert_eq!(all().len(), 172);
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
    fn unknown_numbers_say_so() {
        assert!(hint(999).contains("not in NVIDIA's Xid catalog"));
    }
}
