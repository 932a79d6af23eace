//! NVIDIA driver lines in the kernel log: Xid events, bus loss, and GPU identity lines.
//!
//! Format as printed by the driver (NVIDIA "Xid Errors" guide, docs.nvidia.com/deploy/xid-errors):
//! `NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, <detail>`. Driver generations differ:
//! `pid='<unknown>'`, no `pid=`/`name=` at all, `Ch 0000003b` vs `channel 0x…`, PCI domains other
//! than 0000. The bus id is reported as written; one written without a domain (`b3:00.0`) gets the
//! default domain `0000` so it still names a PCI device.
//!
//! Also driver events about one GPU that carry no Xid number (see [`parse_gpu_event`]).

use crate::model::{Evidence, GpuDriverEventKind};
use regex::Regex;
use std::sync::OnceLock;

struct Patterns {
    xid: Regex,
    plugin_xid: Regex,
    pci: Regex,
    pid: Regex,
    name: Regex,
    gpu_at: Regex,
    mention: Regex,
    bus_id_on_line: Regex,
    nvrm_gpu_pci: Regex,
    nvrm_gpu_tag: Regex,
}

/// A PCI bus id with or without its domain: `0000:3b:00`, `0000:3b:00.0`, `3b:00.0`.
const BUS: &str = r"((?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)";

fn patterns() -> &'static Patterns {
    static P: OnceLock<Patterns> = OnceLock::new();
    P.get_or_init(|| Patterns {
        // The bus id in parentheses is missing from some drivers' lines (`NVRM: Xid 13, Graphics
        // Exception: …`, seen in https://github.com/pop-os/cosmic-comp/issues/2298); the Xid
        // still counts, without a PCI id. Text retyped or reflowed by hand loses the colon after
        // `NVRM` or gains a space before the one after the bus id (`NVRM Xid (PCI:…) : 32`).
        xid: Regex::new(
            r"NVRM:? ?Xid (?:\((?P<bus>[^)]{0,64})\) ?: ?)?(?P<n>\d{1,5})\b,?\s?(?P<rest>.*)",
        )
        .expect("static regex"),
        // NVIDIA's Kubernetes device plugin, which watches Xids through NVML and logs the ones it
        // marks a device unhealthy for: "XidCriticalError: Xid=%d on Device=%s, the device will
        // go unhealthy." (v0.6) and "…; marking device as unhealthy." (internal/rm/health.go).
        plugin_xid: Regex::new(r"XidCriticalError: Xid=(\d{1,5}) on Device=([^,;\s]{1,128})[,;]?\s?(.*)")
            .expect("static regex"),
        pci: Regex::new(BUS).expect("static regex"),
        pid: Regex::new(r"\bpid=(\d{1,10})\b").expect("static regex"),
        name: Regex::new(r"\bname=([^,\s]{1,128})").expect("static regex"),
        gpu_at: Regex::new(
            r"NVRM: GPU at PCI:([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?): (GPU-[0-9a-fA-F-]{8,64})",
        )
        .expect("static regex"),
        mention: Regex::new(&format!(r"NVRM: The NVIDIA GPU {BUS}")).expect("static regex"),
        // `GPU 0000:01:00.0`, and older drivers' `NVRM: GPU at 0000:01:00.0 has fallen off
        // the bus.` (https://github.com/Bumblebee-Project/Bumblebee/issues/554).
        bus_id_on_line: Regex::new(&format!(r"GPU (?:at )?(?:PCI:)?{BUS}")).expect("static regex"),
        // `NVRM: GPU 0000:0a:00.0: RmInitAdapter failed! …` (the device-print prefix of the driver).
        nvrm_gpu_pci: Regex::new(&format!(r"NVRM: GPU {BUS}[:\s/]")).expect("static regex"),
        // `NVRM: GPU0 _kgspRpcRecvPoll: …` (the driver's per-GPU print prefix, no bus id).
        nvrm_gpu_tag: Regex::new(r"NVRM: (GPU\d{1,3})\b").expect("static regex"),
    })
}

/// Parses an `NVRM: Xid (…): N, …` line (or `NVRM: Xid N, …` without the bus id).
pub fn parse_xid(line: &str) -> Option<Evidence> {
    let p = patterns();
    let Some(c) = p.xid.captures(line) else {
        let c = p.plugin_xid.captures(line)?;
        return Some(Evidence::Xid {
            xid: c[1].parse().ok()?,
            pci: None,
            pid: None,
            process: None,
            detail: format!("on {}: {}", &c[2], c[3].trim()),
        });
    };
    let xid: u32 = c.name("n")?.as_str().parse().ok()?;
    let pci = c
        .name("bus")
        .and_then(|b| p.pci.captures(b.as_str()))
        .map(|m| with_domain(&m[1]));
    let rest = c.name("rest").map_or("", |m| m.as_str());
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
        pci: with_domain(&c[1]),
    })
}

/// A "fallen off the bus" line that carries no Xid number. The driver prints it with its `NVRM:`
/// tag (`NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.`, the multi-line block's `NVRM: fallen
/// off the bus and is not responding to commands.`); without the tag a bus id must say which GPU,
/// so a sentence that names the message ("the infamous "GPU has fallen off the bus"") is no event.
pub fn parse_fallen_off_bus(line: &str) -> Option<Evidence> {
    if !line.contains("fallen off the bus") || line.contains("NVRM: Xid") {
        return None;
    }
    let pci = patterns()
        .bus_id_on_line
        .captures(line)
        .map(|c| with_domain(&c[1]));
    if pci.is_none() && !line.contains("NVRM") {
        return None;
    }
    Some(Evidence::FallenOffBus { pci })
}

/// Which driver event a line without an Xid reports, by the driver's own wording.
///
/// - `RmInitAdapter failed! (0x24:0x72:1568)`, `rm_init_adapter failed, device minor number 5`
///   and `RmInitAdapter: Cannot initialize GSP firmware RM`
///   (printed by `RmInitAdapter` in `src/nvidia/arch/nvalloc/unix/src/osinit.c` and by
///   `kernel-open/nvidia/nv.c` of NVIDIA's open-gpu-kernel-modules; seen in
///   https://github.com/NVIDIA/gpu-operator/issues/1146);
/// - `_kgspRpcRecvPoll: GSP RM heartbeat timed out`, `LibOS heartbeat timed out`,
///   `_kgspIsHeartbeatTimedOut: Heartbeat timed out` (`kernel_gsp.c`; seen in
///   https://github.com/ublue-os/bazzite/issues/4449) and `rpcRecvPoll timedout for fn N`
///   (`src/nvidia/src/kernel/vgpu/rpc.c`);
/// - `Timedout while checking to see if training complete!` and `Failed to execute Pre Link
///   Training ALI steps!` (`kernel_nvlinkstate.c`, `kernel_nvlinkcorelibtrain.c`,
///   `kernel_nvlink.c`).
fn gpu_event_kind(line: &str) -> Option<GpuDriverEventKind> {
    // `RmInitAdapter: Cannot initialize GSP firmware RM`, `RmInitAdapter: osInitNvMapping
    // failed, bailing out of RmInitAdapter`: the function telling why it gives up.
    if line.contains("RmInitAdapter failed")
        || (line.contains("rm_init_adapter") && line.contains("failed"))
        || (line.contains("RmInitAdapter: ") && driver_failure(line))
    {
        return Some(GpuDriverEventKind::InitFailed);
    }
    if line.contains("heartbeat timed out") || line.contains("Heartbeat timed out") {
        return Some(GpuDriverEventKind::GspHeartbeatTimeout);
    }
    if line.contains("rpcRecvPoll timedout") {
        return Some(GpuDriverEventKind::GspRpcTimeout);
    }
    if line.contains("training complete!") || line.contains("Pre Link Training ALI steps") {
        return Some(GpuDriverEventKind::NvlinkTrainingFailed);
    }
    None
}

/// A driver event about one GPU that comes without an Xid: a failed initialisation, a GSP
/// firmware timeout, an NVLink training failure. Only `NVRM:` lines count.
pub fn parse_gpu_event(line: &str) -> Option<Evidence> {
    if !line.contains("NVRM") || line.contains("NVRM: Xid") {
        return None;
    }
    let event = gpu_event_kind(line)?;
    let p = patterns();
    let pci = p.nvrm_gpu_pci.captures(line).map(|c| with_domain(&c[1]));
    let gpu_tag = if pci.is_none() {
        p.nvrm_gpu_tag.captures(line).map(|c| c[1].to_owned())
    } else {
        None
    };
    Some(Evidence::GpuDriverEvent {
        event,
        pci,
        gpu_tag,
    })
}

/// Does a driver line say that a step failed: a verb or noun of failure after the `NVRM` tag
/// ("failed to copy vbios to system memory", "Cannot initialize GSP firmware RM", "Assertion
/// failed: Call timed out [NV_ERR_TIMEOUT]", "unexpected WPR2 already up, cannot proceed",
/// "Chipset not recognized", "GPU does not have the necessary power cables connected")? The
/// driver's banners and notices ("loading NVIDIA UNIX Open Kernel Module", "GPS ACPI DSM called
/// before …", "Using pre-baked vBIOS!") say none of these.
pub fn driver_failure(line: &str) -> bool {
    static R: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    let Some(at) = line.find("NVRM") else {
        return false;
    };
    super::prose::cached(
        &R,
        r"(?i)\b(?:fail(?:s|ed|ure)?|cannot|can't|unable|error|timed ?out|timeout|not (?:supported|recognized|have)|unexpected|invalid|missing|no firmware)\b",
    )
    .is_match(&line[at..])
}

/// Gives a bus id written without its PCI domain (`b3:00.0`) the default domain `0000`; any
/// other spelling is returned as written.
pub fn with_domain(bus: &str) -> String {
    if bus.matches(':').count() == 1 {
        format!("0000:{bus}")
    } else {
        bus.to_owned()
    }
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
    if parts.len() == 2 {
        // `b3:00` without a domain: the default domain.
        parts.insert(0, "0000");
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
    fn device_plugin_xid_lines() {
        // https://github.com/NVIDIA/k8s-device-plugin (v0.6 and internal/rm/health.go wordings).
        for line in [
            "2020/08/10 19:09:42 XidCriticalError: Xid=69 on Device=GPU-7540a9b3-eeb9-1214-1526-f93c9ea826a8, the device will go unhealthy.",
            "I0110 10:00:00.000000 1 health.go:150] XidCriticalError: Xid=69 on Device=GPU-7540a9b3-eeb9-1214-1526-f93c9ea826a8; marking device as unhealthy.",
        ] {
            match parse_xid(line) {
                Some(Evidence::Xid { xid, pci, detail, .. }) => {
                    assert_eq!(xid, 69);
                    assert_eq!(pci, None);
                    assert!(detail.starts_with("on GPU-7540a9b3"), "{detail}");
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn xid_without_bus_id() {
        // https://github.com/pop-os/cosmic-comp/issues/2298
        let e = parse_xid(
            "NVRM: Xid 13, pid=3057, name=cosmic-comp, Graphics Exception: channel 0x00000003",
        )
        .unwrap();
        assert_eq!(
            e,
            Evidence::Xid {
                xid: 13,
                pci: None,
                pid: Some(3057),
                process: Some("cosmic-comp".into()),
                detail: "pid=3057, name=cosmic-comp, Graphics Exception: channel 0x00000003".into()
            }
        );
        assert!(matches!(
            parse_xid("NVRM: Xid 13, Graphics Exception: MISSING_MACRO_DATA"),
            Some(Evidence::Xid {
                xid: 13,
                pci: None,
                ..
            })
        ));
        // Words after the prefix are not an Xid number.
        assert_eq!(parse_xid("NVRM: Xid errors are listed in the guide"), None);
    }

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

    #[test]
    fn every_bus_spelling_names_the_same_gpu() {
        for a in [
            "0000:b3:00",
            "0000:b3:00.0",
            "b3:00.0",
            "B3:00",
            "00000000:B3:00.0",
        ] {
            for b in ["0000:b3:00", "0000:b3:00.0", "b3:00.0"] {
                assert!(same_bus(a, b), "{a} vs {b}");
            }
        }
        assert!(!same_bus("b3:00.0", "0000:b4:00"));
        assert!(!same_bus("b3:00.0", "0001:b3:00"));
    }

    #[test]
    fn bus_ids_without_a_domain_still_yield_a_pci_id() {
        assert_eq!(
            parse_fallen_off_bus("NVRM: GPU b3:00.0: GPU has fallen off the bus."),
            Some(Evidence::FallenOffBus {
                pci: Some("0000:b3:00.0".into())
            })
        );
        assert_eq!(
            parse_mention("NVRM: The NVIDIA GPU b3:00.0"),
            Some(Evidence::GpuMention {
                pci: "0000:b3:00.0".into()
            })
        );
        match parse_xid("NVRM: Xid (PCI:b3:00): 79, GPU has fallen off the bus.") {
            Some(Evidence::Xid { pci, .. }) => assert_eq!(pci.as_deref(), Some("0000:b3:00")),
            other => panic!("{other:?}"),
        }
        // As written where the domain is there.
        match parse_xid("NVRM: Xid (PCI:0000:b3:00): 79, GPU has fallen off the bus.") {
            Some(Evidence::Xid { pci, .. }) => assert_eq!(pci.as_deref(), Some("0000:b3:00")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bus_loss_named_in_a_sentence_is_no_event() {
        for line in [
            "You're getting a XID 79, fallen off the bus. Most common reasons are overheating.",
            "Does dmesg contain the infamous message \"GPU has fallen off the bus\"",
        ] {
            assert_eq!(parse_fallen_off_bus(line), None, "{line}");
        }
        // The multi-line block's last line carries the tag but no bus id.
        assert_eq!(
            parse_fallen_off_bus("NVRM: fallen off the bus and is not responding to commands."),
            Some(Evidence::FallenOffBus { pci: None })
        );
    }

    #[test]
    fn older_bus_loss_wording_names_its_gpu() {
        assert_eq!(
            parse_fallen_off_bus(
                "[   49.261458] NVRM: GPU at 0000:01:00.0 has fallen off the bus."
            ),
            Some(Evidence::FallenOffBus {
                pci: Some("0000:01:00.0".into())
            })
        );
    }

    #[test]
    fn init_failure_names_its_gpu() {
        // https://github.com/NVIDIA/gpu-operator/issues/1146
        assert_eq!(
            parse_gpu_event("Dec  2 11:38:46 worker4 kernel: [  218.250408] NVRM: GPU 0000:0a:00.0: RmInitAdapter failed! (0x24:0x72:1568)"),
            Some(Evidence::GpuDriverEvent {
                event: GpuDriverEventKind::InitFailed,
                pci: Some("0000:0a:00.0".into()),
                gpu_tag: None
            })
        );
        assert!(matches!(
            parse_gpu_event(
                "NVRM: GPU 0000:0a:00.0: rm_init_adapter failed, device minor number 5"
            ),
            Some(Evidence::GpuDriverEvent {
                event: GpuDriverEventKind::InitFailed,
                ..
            })
        ));
    }

    #[test]
    fn gsp_timeouts_without_an_xid() {
        // https://github.com/ublue-os/bazzite/issues/4449
        assert_eq!(
            parse_gpu_event(
                "Mar 21 21:42:01 kernel: NVRM: GPU0 _kgspRpcRecvPoll: GSP RM heartbeat timed out"
            ),
            Some(Evidence::GpuDriverEvent {
                event: GpuDriverEventKind::GspHeartbeatTimeout,
                pci: None,
                gpu_tag: Some("GPU0".into())
            })
        );
        assert!(matches!(
            parse_gpu_event("Mar 21 21:42:01 kernel: NVRM: GPU0 _kgspIsHeartbeatTimedOut: Heartbeat timed out, currentTimeMs 322227881 heartbeat 0 heartbeatWithOffsetMs 318098841 diff 4129040 timeout 5200"),
            Some(Evidence::GpuDriverEvent {
                event: GpuDriverEventKind::GspHeartbeatTimeout,
                ..
            })
        ));
        // The driver's wording (src/nvidia/src/kernel/vgpu/rpc.c).
        assert!(parse_gpu_event(
            "NVRM: GPU2 _issueRpcAndWait: rpcRecvPoll timedout for fn 76 sequence 12!"
        )
        .is_some());
        // An Xid 119 line stays an Xid.
        assert_eq!(parse_gpu_event("NVRM: Xid (PCI:0000:61:00): 119, pid=1, name=x, Timeout waiting for RPC from GSP! heartbeat timed out"), None);
    }

    #[test]
    fn nvlink_training_failure() {
        // The driver's wording (src/nvidia/src/kernel/gpu/nvlink/kernel_nvlinkstate.c).
        assert!(matches!(
            parse_gpu_event("NVRM: GPU1 knvlinkCheckTrainingIsComplete_IMPL: Timedout while checking to see if training complete!"),
            Some(Evidence::GpuDriverEvent {
                event: GpuDriverEventKind::NvlinkTrainingFailed,
                ..
            })
        ));
    }

    #[test]
    fn corpus_negatives_stay_quiet() {
        // https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1230 (labelled not an event).
        for l in [
            "[   84.300488] NVRM: GPU6 _kgspLogRpcTimeout: ********************************* GSP Timeout **********************************",
            "Jul 09 10:42:47 pool0-0082 kernel: NVRM: knvlinkDiscoverPostRxDetLinks_GH100: Getting peer0's postRxDetLinkMask failed!",
            "NVRM: GPU6 kgmmuCheckMemSubsysError_IMPL: Memory Subsystem Error detected. kbusSendSysmembarSingle failed.",
        ] {
            assert_eq!(parse_gpu_event(l), None, "{l}");
        }
    }
}
