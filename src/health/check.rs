//! `assertwatch health`: the node's GPU health for Slurm's `HealthCheckProgram` and node health
//! check frameworks.
//!
//! Reads what the daemon last published (`state_dir/health.json`, rewritten on every change, so
//! it is the running daemon's state, and the last known one when the daemon is down): no HTTP,
//! no NVML, a few milliseconds. Exit 0 when every known GPU is healthy, 1 with a one-line reason
//! otherwise — naming the GPU and the Xid/SXid or event — and also 1 when the state cannot be
//! read (a health check must not pass on a broken file).

use super::sink::{load, LoadError, SavedHealth};
use super::{summary, GpuHealth, HealthState};
use serde::Serialize;
use std::path::Path;

/// The answer of one check.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    pub healthy: bool,
    /// One line: what is wrong, or what was checked.
    pub reason: String,
    pub gpus: Vec<GpuHealth>,
}

/// Checks the health saved under `state_dir`.
pub fn check(state_dir: &Path) -> Verdict {
    match load(state_dir) {
        Ok(SavedHealth::V1 { gpus, .. }) => match summary(&gpus) {
            Some(reason) => Verdict {
                healthy: false,
                reason,
                gpus,
            },
            None => Verdict {
                healthy: true,
                reason: format!("{} GPU(s) healthy", gpus.len()),
                gpus,
            },
        },
        Err(LoadError::Read { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            Verdict {
                healthy: true,
                reason: "no GPU health recorded yet (no event since the daemon first started)"
                    .into(),
                gpus: Vec::new(),
            }
        }
        Err(e) => Verdict {
            healthy: false,
            reason: format!(
                "cannot read the GPU health state: {:#}",
                anyhow::Error::from(e)
            ),
            gpus: Vec::new(),
        },
    }
}

/// Whether any GPU is in one of `states`.
pub fn any_in(gpus: &[GpuHealth], states: &[HealthState]) -> bool {
    gpus.iter().any(|g| states.contains(&g.state))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_state_is_healthy_and_corrupt_state_is_not() {
        let dir = tempfile::tempdir().unwrap();
        assert!(check(dir.path()).healthy);
        std::fs::write(dir.path().join(super::super::sink::FILE), b"{not json").unwrap();
        let v = check(dir.path());
        assert!(!v.healthy);
        assert!(
            v.reason.starts_with("cannot read the GPU health state"),
            "{}",
            v.reason
        );
    }

    #[test]
    fn an_unhealthy_gpu_fails_with_its_reason() {
        let dir = tempfile::tempdir().unwrap();
        let saved = SavedHealth::V1 {
            saved_ms: 1,
            gpus: vec![GpuHealth {
                pci_bus_id: "0000:b3:00".into(),
                index: Some(3),
                uuid: None,
                state: HealthState::Unhealthy,
                reason: Some("Xid 79".into()),
                since_ms: 1,
                incident: Some(4),
            }],
        };
        std::fs::write(
            dir.path().join(super::super::sink::FILE),
            serde_json::to_vec(&saved).unwrap(),
        )
        .unwrap();
        let v = check(dir.path());
        assert!(!v.healthy);
        assert_eq!(v.reason, "GPU 3 (0000:b3:00) unhealthy: Xid 79");
        assert!(any_in(&v.gpus, &[HealthState::Unhealthy]));
    }
}
