//! NVSwitch errors in the kernel log: the `SXid` line parser and the SXid catalog.
//!
//! The NVSwitch driver prints (`NVSWITCH_PRINT_SXID` in NVIDIA's open-gpu-kernel-modules,
//! `src/common/nvswitch/kernel/inc/common_nvswitch.h`):
//! `nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 22013, Non-fatal, Link 00 Minion Link DLREQ interrupt`
//! followed by `…: 22013, Severity 0 Engine instance 00 Sub-engine instance 00` and
//! `…: 22013, Data {0x…, …}` lines. The severity word is `Fatal`, `Non-fatal` or `Correctable`;
//! some errors have no `Link NN`.
//!
//! The catalog (`sxid_catalog.tsv`) holds every SXid number the driver defines (its mnemonic, from
//! `src/common/nvswitch/interface/ctrl_dev_nvswitch.h` at a pinned commit), and for the numbers
//! NVIDIA's Fabric Manager User Guide documents, the guide's name and class — non-fatal, fatal,
//! always fatal, other notable — with the action this project takes and the guide's section as
//! source. Numbers the guide does not list are decided by the line's own severity word.

use crate::model::{Evidence, SxidSeverity};
use regex::Regex;
use std::sync::OnceLock;

const TSV: &str = include_str!("sxid_catalog.tsv");

/// The class NVIDIA's Fabric Manager User Guide puts an SXid in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FmClass {
    /// "Non-Fatal NVSwitch SXid Errors".
    NonFatal,
    /// "Fatal NVSwitch SXid Errors": fatal to the partitions using the port.
    Fatal,
    /// "Always Fatal NVSwitch SXid Errors": fatal to the whole fabric.
    AlwaysFatal,
    /// "Other Notable NVSwitch SXid Errors".
    Notable,
    /// Defined by the driver, not listed in the guide.
    Unlisted,
}

impl FmClass {
    pub fn as_str(self) -> &'static str {
        match self {
            FmClass::NonFatal => "nonfatal",
            FmClass::Fatal => "fatal",
            FmClass::AlwaysFatal => "always_fatal",
            FmClass::Notable => "notable",
            FmClass::Unlisted => "unlisted",
        }
    }

    fn parse(s: &str) -> Option<FmClass> {
        [
            FmClass::NonFatal,
            FmClass::Fatal,
            FmClass::AlwaysFatal,
            FmClass::Notable,
            FmClass::Unlisted,
        ]
        .into_iter()
        .find(|c| c.as_str() == s)
    }
}

/// What to do about an SXid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum SxidAction {
    /// No immediate action (the switch corrected it, or it is informational); watch for repeats.
    Ignore,
    /// Check the system's cooling (thermal events).
    CheckCooling,
    /// Check the NVLink cabling/trays (broken or inconsistent connections).
    CheckMechanicals,
    /// Fatal to the partitions using the port: drain the node and reset the GPUs and NVSwitches
    /// (reboot on bare metal, restart the guest VM in shared-NVSwitch virtualisation).
    ResetFabric,
    /// Fatal to the whole fabric: drain the node and restart the host.
    Reboot,
    /// The guide does not say: the line's severity word decides.
    FromLine,
}

impl SxidAction {
    pub fn as_str(self) -> &'static str {
        match self {
            SxidAction::Ignore => "ignore",
            SxidAction::CheckCooling => "check_cooling",
            SxidAction::CheckMechanicals => "check_mechanicals",
            SxidAction::ResetFabric => "reset_fabric",
            SxidAction::Reboot => "reboot",
            SxidAction::FromLine => "from_line",
        }
    }

    fn parse(s: &str) -> Option<SxidAction> {
        [
            SxidAction::Ignore,
            SxidAction::CheckCooling,
            SxidAction::CheckMechanicals,
            SxidAction::ResetFabric,
            SxidAction::Reboot,
            SxidAction::FromLine,
        ]
        .into_iter()
        .find(|a| a.as_str() == s)
    }

    /// Does the node leave service until the action is done?
    pub fn takes_out_of_service(self) -> bool {
        matches!(self, SxidAction::ResetFabric | SxidAction::Reboot)
    }

    fn advice(self) -> &'static str {
        match self {
            SxidAction::Ignore => "no immediate action; watch for repeats.",
            SxidAction::CheckCooling => "check the system's cooling; no reset needed.",
            SxidAction::CheckMechanicals => "check the NVLink connections (cables, trays, seating) if it was not an uncoordinated shutdown.",
            SxidAction::ResetFabric => "NVLink traffic through the port stalls and CUDA jobs on the affected GPUs abort (often as Xid 45/74): drain the node and reset all GPUs and NVSwitches (reboot; in shared-NVSwitch virtualisation restart the guest VM).",
            SxidAction::Reboot => "fatal to the whole NVLink fabric: drain the node and restart the host (resets all GPUs and NVSwitches).",
            SxidAction::FromLine => "act on the line's severity: fatal means drain the node and reset the GPUs and NVSwitches; non-fatal means watch for repeats.",
        }
    }
}

/// One catalog row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SxidEntry {
    pub sxid: u32,
    /// The driver's mnemonic (`HW_MINION_NONFATAL`), `-` where it has none.
    pub mnemonic: String,
    /// The Fabric Manager User Guide's name where it lists the number, else the mnemonic's.
    pub name: String,
    pub class: FmClass,
    pub action: SxidAction,
    /// Where the row comes from.
    pub source: String,
}

fn entries() -> &'static [SxidEntry] {
    static E: OnceLock<Vec<SxidEntry>> = OnceLock::new();
    E.get_or_init(|| {
        TSV.lines()
            .skip(1)
            .filter_map(|l| {
                let f: Vec<&str> = l.split('\t').collect();
                if f.len() < 7 {
                    return None;
                }
                Some(SxidEntry {
                    sxid: f[0].parse().ok()?,
                    mnemonic: f[1].to_owned(),
                    name: f[2].to_owned(),
                    class: FmClass::parse(f[3])?,
                    action: SxidAction::parse(f[4])?,
                    source: f[6].to_owned(),
                })
            })
            .collect()
    })
}

/// All catalog rows, by number.
pub fn all() -> &'static [SxidEntry] {
    entries()
}

/// The catalog row for `sxid`, if the driver defines it.
pub fn lookup(sxid: u32) -> Option<&'static SxidEntry> {
    entries().iter().find(|e| e.sxid == sxid)
}

/// The incident category: `sxid_<N>_<name>`, stable for a given number.
pub fn category(sxid: u32) -> String {
    match lookup(sxid) {
        Some(e) => format!("sxid_{sxid}_{}", slug(&e.name)),
        None => format!("sxid_{sxid}_unknown"),
    }
}

fn slug(s: &str) -> String {
    let words: Vec<String> = s
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .take(6)
        .map(str::to_ascii_lowercase)
        .collect();
    if words.is_empty() {
        "unknown".to_owned()
    } else {
        words.join("_")
    }
}

/// The decision for one SXid event: the catalog's action, or the line's severity where the
/// catalog leaves it to the line. A `Fatal` line is never treated as less than fatal.
pub fn decide(sxid: u32, severity: Option<SxidSeverity>) -> SxidAction {
    let from_catalog = lookup(sxid).map_or(SxidAction::FromLine, |e| e.action);
    let from_line = match severity {
        Some(SxidSeverity::Fatal) => SxidAction::ResetFabric,
        Some(SxidSeverity::NonFatal | SxidSeverity::Correctable) => SxidAction::Ignore,
        None => SxidAction::FromLine,
    };
    match (from_catalog, from_line) {
        (SxidAction::FromLine, l) => l,
        (c, SxidAction::ResetFabric) if !c.takes_out_of_service() => SxidAction::ResetFabric,
        (c, _) => c,
    }
}

/// Does this SXid take the node out of service (catalog alone; see [`decide`] for a line)?
pub fn needs_drain(sxid: u32) -> bool {
    lookup(sxid).is_some_and(|e| e.action.takes_out_of_service())
}

/// What to do, for the person on call.
pub fn hint(sxid: u32, severity: Option<SxidSeverity>) -> String {
    let action = decide(sxid, severity);
    match lookup(sxid) {
        Some(e) if e.class != FmClass::Unlisted => format!(
            "NVSwitch SXid {sxid} ({}; {} in NVIDIA's Fabric Manager guide): {}",
            e.name,
            match e.class {
                FmClass::NonFatal => "non-fatal",
                FmClass::Fatal => "fatal",
                FmClass::AlwaysFatal => "always fatal",
                _ => "notable",
            },
            action.advice()
        ),
        Some(e) => format!(
            "NVSwitch SXid {sxid} ({}, not in NVIDIA's Fabric Manager guide): {}",
            e.mnemonic,
            action.advice()
        ),
        None => format!(
            "NVSwitch SXid {sxid} is not defined by the driver this catalog was built from: {}",
            action.advice()
        ),
    }
}

/// The severity word on an SXid line's text, if any.
pub fn severity_of(text: &str) -> Option<SxidSeverity> {
    let rest = text.split_once("SXid (").map_or(text, |(_, r)| r);
    let after = rest.split_once("): ").map_or(rest, |(_, r)| r);
    let after = after.split_once(", ").map_or("", |(_, r)| r).trim_start();
    if after.starts_with("Fatal") {
        Some(SxidSeverity::Fatal)
    } else if after.starts_with("Non-fatal") || after.starts_with("Nonfatal") {
        Some(SxidSeverity::NonFatal)
    } else if after.starts_with("Correctable") {
        Some(SxidSeverity::Correctable)
    } else {
        None
    }
}

/// Parses the Fabric Manager's own report of an NVSwitch error in its log
/// (`/var/log/fabricmanager.log`): `[Jul 09 2024 18:14:07] [ERROR] [tid 12727] detected NVSwitch
/// non-fatal error 12028 on fid 0 on NVSwitch pci bus id 00000000:86:00.0 physical id 3 port 61`.
/// The number is the SXid the switch driver logs for the same event; the port is the switch's
/// link. (Format as NVIDIA's Fabric Manager prints it; peers such as gpud match the same text.)
fn parse_fabric_manager(line: &str) -> Option<Evidence> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(
            r"detected NVSwitch (non-fatal|fatal) error (\d{1,6})(?: on fid \d{1,4})?(?: on NVSwitch pci bus id ((?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?))?(?: physical id \d{1,4})?(?: port (\d{1,3}))?",
        )
        .expect("static regex")
    });
    let c = re.captures(line)?;
    let severity = if &c[1] == "fatal" {
        SxidSeverity::Fatal
    } else {
        SxidSeverity::NonFatal
    };
    Some(Evidence::Sxid {
        sxid: c[2].parse().ok()?,
        pci: c.get(3).map(|m| super::xid::with_domain(m.as_str())),
        switch: None,
        link: c.get(4).and_then(|m| m.as_str().parse().ok()),
        severity: Some(severity),
        detail: line[c.get(0)?.start()..].trim().to_owned(),
    })
}

/// Parses an `nvidia-nvswitchN: SXid (PCI:…): NNNNN, …` line, or the Fabric Manager's
/// `detected NVSwitch … error NNNNN …` line for the same event.
pub fn parse(line: &str) -> Option<Evidence> {
    if !line.contains("SXid (") {
        return parse_fabric_manager(line);
    }
    static RE: OnceLock<(Regex, Regex, Regex)> = OnceLock::new();
    let (re, pci_re, link_re) = RE.get_or_init(|| {
        (
            Regex::new(
                r"(?:nvidia-nvswitch(\d{1,4}):\s*)?SXid \(([^)]{0,64})\):\s*(\d{1,6}),\s*(.*)",
            )
            .expect("static regex"),
            Regex::new(r"((?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)")
                .expect("static regex"),
            Regex::new(r"\bLink\s+(\d{1,3})\b").expect("static regex"),
        )
    });
    let c = re.captures(line)?;
    let sxid: u32 = c.get(3)?.as_str().parse().ok()?;
    let switch = c.get(1).and_then(|m| m.as_str().parse().ok());
    let pci = pci_re
        .captures(c.get(2)?.as_str())
        .map(|m| super::xid::with_domain(&m[1]));
    let detail = c.get(4).map_or("", |m| m.as_str()).trim().to_owned();
    let severity = if detail.starts_with("Fatal") {
        Some(SxidSeverity::Fatal)
    } else if detail.starts_with("Non-fatal") || detail.starts_with("Nonfatal") {
        Some(SxidSeverity::NonFatal)
    } else if detail.starts_with("Correctable") {
        Some(SxidSeverity::Correctable)
    } else {
        None
    };
    // "Link NN" only on the headline (the "Severity … Engine instance" line has no link).
    let link = if severity.is_some() {
        link_re.captures(&detail).and_then(|m| m[1].parse().ok())
    } else {
        None
    };
    Some(Evidence::Sxid {
        sxid,
        pci,
        switch,
        link,
        severity,
        detail,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sx(
        line: &str,
    ) -> (
        u32,
        Option<String>,
        Option<u32>,
        Option<u32>,
        Option<SxidSeverity>,
    ) {
        match parse(line) {
            Some(Evidence::Sxid {
                sxid,
                pci,
                switch,
                link,
                severity,
                ..
            }) => (sxid, pci, switch, link, severity),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn non_fatal_minion_line_and_its_follow_ons() {
        // https://github.com/NVIDIA/nvtrust/issues/124
        let (n, pci, sw, link, sev) = sx("[   25.948274] nvidia-nvswitch1: SXid (PCI:0000:02:00.0): 22013, Non-fatal, Link 00 Minion Link DLREQ interrupt");
        assert_eq!(n, 22013);
        assert_eq!(pci.as_deref(), Some("0000:02:00.0"));
        assert_eq!(sw, Some(1));
        assert_eq!(link, Some(0));
        assert_eq!(sev, Some(SxidSeverity::NonFatal));
        let (n, _, _, link, sev) = sx("[   25.950244] nvidia-nvswitch1: SXid (PCI:0000:02:00.0): 22013, Severity 0 Engine instance 00 Sub-engine instance 00");
        assert_eq!((n, link, sev), (22013, None, None));
        let (n, _, _, _, sev) = sx("[   25.952303] nvidia-nvswitch1: SXid (PCI:0000:02:00.0): 22013, Data {0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x80005302, 0x00000000, 0x00000000, 0x00000000, 0x00000000}");
        assert_eq!((n, sev), (22013, None));
    }

    #[test]
    fn data_line_from_dmesg_human_format() {
        // https://github.com/leptonai/gpud/pull/338
        let (n, pci, sw, _, _) = sx("kern  :err   : 2025-01-25T10:34:54,859532+00:00 nvidia-nvswitch1: SXid (PCI:0000:84:00.0): 12028, Data {0x000001c0, 0x00bd5c8a, 0x00000500, 0x00000064, 0x00000000, 0x40008000, 0x5a001100, 0x00000000, 0x00000000}");
        assert_eq!(n, 12028);
        assert_eq!(pci.as_deref(), Some("0000:84:00.0"));
        assert_eq!(sw, Some(1));
    }

    #[test]
    fn fatal_line_format_of_the_driver() {
        // Format of NVSWITCH_REPORT_FATAL (open-gpu-kernel-modules, intr_nvswitch.h:
        // "Fatal, Link %02d %s%s").
        let (n, _, _, link, sev) =
            sx("nvidia-nvswitch3: SXid (PCI:0000:c4:00.0): 12020, Fatal, Link 31 egress sequence ID error");
        assert_eq!((n, link, sev), (12020, Some(31), Some(SxidSeverity::Fatal)));
        assert_eq!(decide(12020, sev), SxidAction::Reboot);
    }

    #[test]
    fn catalog_classes_come_from_the_fabric_manager_guide() {
        assert_eq!(lookup(11012).unwrap().class, FmClass::NonFatal);
        assert_eq!(
            decide(11012, Some(SxidSeverity::NonFatal)),
            SxidAction::Ignore
        );
        assert_eq!(lookup(12001).unwrap().class, FmClass::Fatal);
        assert!(needs_drain(12001));
        assert_eq!(lookup(22003).unwrap().class, FmClass::AlwaysFatal);
        assert_eq!(decide(22003, None), SxidAction::Reboot);
        assert_eq!(decide(10004, None), SxidAction::CheckCooling);
        assert!(!needs_drain(22013));
        // Not in the guide: the line decides.
        assert_eq!(lookup(25010).unwrap().class, FmClass::Unlisted);
        assert_eq!(
            decide(25010, Some(SxidSeverity::Fatal)),
            SxidAction::ResetFabric
        );
        assert_eq!(
            decide(25010, Some(SxidSeverity::NonFatal)),
            SxidAction::Ignore
        );
        // A line that says Fatal is never taken for less.
        assert_eq!(
            decide(22013, Some(SxidSeverity::Fatal)),
            SxidAction::ResetFabric
        );
        for e in all() {
            assert!(e.source.starts_with("https://"), "{}", e.sxid);
        }
    }

    #[test]
    fn categories_are_stable_slugs() {
        assert_eq!(category(22013), "sxid_22013_minion_link_dlreq_interrupt");
        assert_eq!(category(25010), "sxid_25010_nvlipt_lnk_ali_training_fail");
        assert_eq!(category(99999), "sxid_99999_unknown");
    }

    #[test]
    fn severity_word_is_read_from_a_message() {
        assert_eq!(
            severity_of("nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12020, Fatal, Link 01 x"),
            Some(SxidSeverity::Fatal)
        );
        assert_eq!(
            severity_of("nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12020, Data {0x1}"),
            None
        );
    }

    #[test]
    fn other_nvswitch_lines_are_not_sxids() {
        // https://github.com/leptonai/gpud (pkg/kmsg/testdata/kmsg.1.log)
        assert_eq!(
            parse("6,3967,206764314,-;nvidia-nvswitch2: open (major=510)"),
            None
        );
        assert_eq!(parse("nvidia-nvswitch1: using MSI"), None);
    }
}
