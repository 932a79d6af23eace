//! Reproduction: from an incident to a synchronous replay of the failing step, and back.
//!
//! The replay itself — manifest validation, the ladder of modes, process isolation, limits —
//! lives in the `assertwatch-repro` crate; this module adapts the daemon's configuration to it,
//! runs requests on their own task behind a small bounded queue (a full queue answers
//! `skipped`/`queue_full` at once), and hands results back to the incident task. Requests come from the replay sink
//! (`sinks::repro`).

use crate::config::ReproConfig as OurConfig;
use crate::model::{ReplayDone, ReproReport};
use assertwatch_repro::{Metrics, ReproConfig, ReproRequest, ReproRunner};
use std::path::Path;
use tokio::sync::mpsc;

/// Requests waiting for a replay slot; beyond this they are answered `skipped`/`queue_full`.
pub const QUEUE: usize = 16;

/// A replay to run for the incident stored under `incident_id`.
#[derive(Debug)]
pub struct Job {
    pub incident_id: i64,
    pub request: ReproRequest,
    /// The pod the incident was attributed to (from its record), for a replay as a pod.
    pub pod: Option<JobPod>,
}

/// The failing pod of a [`Job`], as its incident record names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobPod {
    pub namespace: String,
    pub pod: String,
    pub container: Option<String>,
}

/// The CUDA health probe before a GPU-mode replay: a replay on a broken GPU would blame the job.
/// The GPU is named as the replay will pin it (a UUID from the manifest, or an index); a UUID is
/// mapped to its NVML index through the latest GPU snapshot. Without a CUDA driver the probe
/// cannot run and the check passes (the `sync-gpu` attempt itself then reports no device).
/// Results feed `assertwatch_gpu_probe_*`.
fn gpu_check(
    probes: assertwatch_gpu::ProbeMetrics,
    gpus: GpuSnapshots,
) -> assertwatch_repro::GpuCheck {
    assertwatch_repro::GpuCheck(std::sync::Arc::new(move |gpu: &str| {
        let index = gpu.parse::<u32>().ok().or_else(|| {
            let snap = gpus.as_ref()?.borrow().clone();
            snap.gpus
                .iter()
                .find(|g| g.id.uuid == gpu)
                .map(|g| g.id.index)
        });
        let Some(index) = index else { return true };
        let t = std::time::Instant::now();
        match assertwatch_gpu::probe::probe(index, std::time::Duration::from_secs(60)) {
            Ok(r) => {
                probes.record(&r);
                if !r.ok {
                    tracing::warn!(gpu = index, error = ?r.error, "GPU failed its health probe; replaying on CPU only.");
                }
                r.ok
            }
            Err(assertwatch_gpu::ProbeError::NoDriver { .. }) => true,
            Err(e) => {
                probes.record_failure(index, t.elapsed());
                tracing::warn!(gpu = index, error = %e, "GPU health probe failed to run; replaying on CPU only.");
                false
            }
        }
    }))
}

/// The daemon's GPU snapshots, where a GPU layer runs (`None` for `replay` by hand).
pub type GpuSnapshots =
    Option<tokio::sync::watch::Receiver<std::sync::Arc<assertwatch_gpu::GpuSnapshot>>>;

/// Builds the runner from the daemon's configuration.
pub fn runner(
    cfg: &OurConfig,
    state_dir: &Path,
    metrics: Metrics,
    probes: assertwatch_gpu::ProbeMetrics,
    gpus: GpuSnapshots,
) -> ReproRunner {
    let mut rc = ReproConfig::new(state_dir.join("repro"));
    rc.enabled = cfg.enabled;
    rc.roots = cfg.roots.clone();
    rc.modes = cfg.modes.clone();
    rc.timeout = cfg.timeout;
    rc.max_per_hour = cfg.max_per_hour;
    rc.max_concurrent = cfg.max_concurrent as usize;
    rc.python = cfg.python.clone();
    rc.allow_root_jobs = cfg.allow_root_jobs;
    rc.gpu_check = Some(gpu_check(probes, gpus));
    ReproRunner::new(rc, metrics)
}

/// Runs replay jobs, at most `max_concurrent` at a time: later requests wait in the bounded
/// queue rather than being answered `busy`. The runner still enforces its per-GPU, per-job and
/// per-hour limits. With `kube` (`repro.kubernetes.enabled`), a job whose failing pod was
/// captured and whose namespace is allowed replays as a pod instead (see
/// [`crate::actions::kube_replay`]), under the same bound. Each result is sent back.
pub async fn run<A: assertwatch_kube::KubeApi>(
    runner: ReproRunner,
    max_concurrent: usize,
    mut jobs: mpsc::Receiver<Job>,
    done: mpsc::Sender<ReplayDone>,
    kube: Option<std::sync::Arc<crate::actions::kube_replay::KubeReplays<A>>>,
) {
    let slots = std::sync::Arc::new(tokio::sync::Semaphore::new(max_concurrent.max(1)));
    while let Some(job) = jobs.recv().await {
        let Ok(permit) = slots.clone().acquire_owned().await else {
            return;
        };
        let r = runner.clone();
        let done = done.clone();
        let kube = kube.clone();
        tokio::spawn(async move {
            let incident_id = job.incident_id;
            let report = match kube {
                Some(k) => k.replay(job, &r).await,
                None => ReproReport::from(&r.run_for(job.request).await),
            };
            drop(permit);
            tracing::info!(incident = incident_id, outcome = ?report.outcome, frame = ?report.python_frame, runtime = ?report.runtime, "Reproduction finished.");
            let done_msg = ReplayDone {
                incident_id,
                report,
            };
            if done.send(done_msg).await.is_err() {
                tracing::debug!(incident = incident_id, "Replay result dropped at shutdown.");
            }
        });
    }
}
