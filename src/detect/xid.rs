//! NVIDIA driver lines in the kernel log: Xid events, bus loss, and GPU identity lines.
//!
//! Format as printed by the driver (NVIDIA "Xid Errors" guide, docs.nvidia.com/deploy/xid-errors):
//! `NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, <detail>`. Driver generations differ:
//! `pid='<unknown>'`, no `pid=`/`name=` at all, `Ch 0000003b` vs `channel 0x…`, PCI domains other
//! than 0000. The bus id is reported exactly as written.

use crate::model::Evidence;
use regex::Regex;
use std::sync::OnceLock;

struct Patterns {
    xid: Regex,
    pci: Regex,
    pid: Regex,
    name: Regex,
    gpu_at: Regex,
    mention: Regex,
    bus_id_on_line: Regex,
}

fn patterns() -> &'static Patterns {
    static P: OnceLock<Patterns> = OnceLock::new();
    P.get_or_init(|| Patterns {
        xid: Regex::new(r"NVRM: Xid \(([^)]{0,64})\): (\d{1,5})\b,?\s?(.*)").expect("static regex"),
        pci: Regex::new(r"([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)")
            .expect("static regex"),
        pid: Regex::new(r"\bpid=(\d{1,10})\b").expect("static regex"),
        name: Regex::new(r"\bname=([^,\s]{1,128})").expect("static regex"),
        gpu_at: Regex::new(
            r"NVRM: GPU at PCI:([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?): (GPU-[0-9a-fA-F-]{8,64})",
        )
        .expect("static regex"),
        mention: Regex::new(
            r"NVRM: The NVIDIA GPU ([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)",
        )
        .expect("static regex"),
        bus_id_on_line: Regex::new(
            r"GPU ([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)",
        )
        .expect("static regex"),
    })
}

/// Parses an `NVRM: Xid (…): N, …` line.
pub fn parse_xid(line: &str) -> Option<Evidence> {
    let p = patterns();
    let c = p.xid.captures(line)?;
    let xid: u32 = c.get(2)?.as_str().parse().ok()?;
    let pci = p.pci.captures(c.get(1)?.as_str()).map(|m| m[1].to_owned());
    let rest = c.get(3).map_or("", |m| m.as_str());
    let pid = p.pid.captures(rest).and_then(|m| m[1].parse().ok());
    let process = p
        .name
        .captures(rest)
        .map(|m| m[1].to_owned())
        .filter(|n| n != "<unknown>");
    Some(Evidence::Xid {
        xid,
        pci,
        pid,
        process,
        detail: rest.trim_end_matches('`').trim().to_owned(),
    })
}

/// `NVRM: GPU at PCI:…: GPU-<uuid>`.
pub fn parse_identity(line: &str) -> Option<Evidence> {
    let c = patterns().gpu_at.captures(line)?;
    Some(Evidence::GpuIdentity {
        pci: c[1].to_owned(),
        uuid: c[2].to_owned(),
    })
}

/// `NVRM: The NVIDIA GPU dddd:bb:dd.f` (first line of the multi-line bus-loss message).
pub fn parse_mention(line: &str) -> Option<Evidence> {
    let c = patterns().mention.captures(line)?;
    Some(Evidence::GpuMention {
        pci: c[1].to_owned(),
    })
}

/// A "fallen off the bus" line that carries no Xid number.
pub fn parse_fallen_off_bus(line: &str) -> Option<Evidence> {
    if !line.contains("fallen off the bus") || line.contains("NVRM: Xid") {
        return None;
    }
    let pci = patterns()
        .bus_id_on_line
        .captures(line)
        .map(|c| c[1].to_owned());
    Some(Evidence::FallenOffBus { pci })
}

/// The kernel log's form of a PCI bus id: `dddd:bb:dd`, lowercase, without the function.
/// Accepts NVML's `00000000:3B:00.0` as well as the driver's `0000:3b:00`.
pub fn normalize_bus(s: &str) -> String {
    let s = s.trim().to_ascii_lowercase();
    if !s.is_ascii() {
        // Not a bus id from the driver (those are hex); compare it as written.
        return s;
    }
    let s = match s.rsplit_once('.') {
        Some((head, f)) if f.len() == 1 => head.to_owned(),
        _ => s,
    };
    let mut parts: Vec<&str> = s.split(':').collect();
    if parts.len() == 3 && parts[0].len() > 4 {
        parts[0] = &parts[0][parts[0].len() - 4..];
    }
    parts.join(":")
}

/// Does bus id `a` name the same device as `b`? (`0000:01:00`, `0000:01:00.0` and NVML's
/// `00000000:01:00.0` do.)
pub fn same_bus(a: &str, b: &str) -> bool {
    normalize_bus(a) == normalize_bus(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xid_with_unknown_pid() {
        let e = parse_xid("[Fri Aug 30 11:43:09 2024] NVRM: Xid (PCI:0000:cb:00): 13, pid='<unknown>', name=<unknown>, Graphics Exception").unwrap();
        assert_eq!(
            e,
            Evidence::Xid {
                xid: 13,
                pci: Some("0000:cb:00".into()),
                pid: None,
                process: None,
                detail: "pid='<unknown>', name=<unknown>, Graphics Exception".into()
            }
        );
    }

    #[test]
    fn xid_with_pid_and_other_domain() {
        match parse_xid(
            "NVRM: Xid (PCI:0009:01:00): 43, pid=3188489, name=trigger_xid, channel 0x0b00000a",
        ) {
            Some(Evidence::Xid {
                xid,
                pci,
                pid,
                process,
                ..
            }) => {
                assert_eq!(xid, 43);
                assert_eq!(pci.as_deref(), Some("0009:01:00"));
                assert_eq!(pid, Some(3188489));
                assert_eq!(process.as_deref(), Some("trigger_xid"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn redacted_bus_id_is_none() {
        match parse_xid("NVRM: Xid (PCI:...): 79, GPU has fallen off the bus.") {
            Some(Evidence::Xid {
                xid: 79, pci: None, ..
            }) => {}
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bus_ids_compare_without_function() {
        assert!(same_bus("0000:01:00", "0000:01:00.0"));
        assert!(!same_bus("0000:01:00", "0000:02:00.0"));
        assert!(same_bus("00000000:3B:00.0", "0000:3b:00"));
        assert_eq!(normalize_bus("00000009:01:00.0"), "0009:01:00");
        // Found by fuzzing: a non-ASCII id (e.g. from a fake GPU script) must not panic.
        assert!(!same_bus("é000:01:00", "0000:01:00"));
    }
}
