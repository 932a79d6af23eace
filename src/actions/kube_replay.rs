//! Replays as pods: choosing them, building the pod from the failing pod captured when the
//! incident opened, running it on the cluster and turning its end into the incident's report.
//!
//! A job replays as a pod when `repro.kubernetes` is on, its incident names a pod in an allowed
//! namespace, and that pod was captured. The flagged step's manifest is found as the local runner
//! finds it (the state roots, by log file and pid); the path the job saw is derived from the
//! failing container's `hostPath` mounts (the daemon and the job see the same node directory
//! under different paths), or taken as found. Debug state the daemon cannot see (on a
//! PersistentVolumeClaim) is found by the replay pod itself when the failing pod names the
//! recorder's root in its `assertwatch.io/debug-state` annotation (`run --find-under`); without
//! either, the local runner answers as before. The configured modes are tried in order; the
//! harness prints its result as the last line of the pod's log (`--print-result`).

use crate::actions::repro::{Job, JobPod};
use crate::config::kubernetes::ReproKubernetesConfig;
use crate::model::{
    AttemptReport, ExceptionReport, KernelAssertionReport, ReplayRuntime, ReproReport,
};
use assertwatch_kube::k8s_openapi::api::core::v1::Pod;
use assertwatch_kube::pods::{CachedPod, CapturedPods};
use assertwatch_kube::replay_pod::{namespace_listed, StepRef};
use assertwatch_kube::run::{run_replay_pod, PodRun, RunEnd, RunLimits};
use assertwatch_kube::KubeApi;
use assertwatch_repro::{Mode, Outcome, ReproConfig, ReproRunner};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Log lines read from a finished replay pod (the result is the last one).
const TAIL_LINES: i64 = 200;
/// Time past the pod's own deadline before the daemon gives up on it.
const OVERALL_MARGIN: Duration = Duration::from_secs(120);

/// What replays as pods need: the API, the captured pods, the section, and this node.
pub struct KubeReplays<A: KubeApi> {
    pub api: Arc<A>,
    pub captured: CapturedPods,
    pub cfg: ReproKubernetesConfig,
    pub node: String,
}

/// A job chosen to replay as a pod.
#[derive(Debug)]
pub struct Target {
    pub failing: Arc<CachedPod>,
    pub container: String,
}

impl<A: KubeApi> KubeReplays<A> {
    pub fn new(
        api: Arc<A>,
        captured: CapturedPods,
        cfg: ReproKubernetesConfig,
        node: String,
    ) -> Self {
        KubeReplays {
            api,
            captured,
            cfg,
            node,
        }
    }

    /// The captured pod and container for `job`, when it replays as a pod.
    pub fn select(&self, incident_id: i64, pod: Option<&JobPod>) -> Option<Target> {
        let pod = pod?;
        if !self.cfg.enabled || !namespace_listed(&self.cfg.namespaces, &pod.namespace) {
            return None;
        }
        let failing = self.captured.get(incident_id)?;
        if failing.info.namespace != pod.namespace || failing.info.name != pod.pod {
            return None;
        }
        let container = pod
            .container
            .clone()
            .filter(|c| !c.is_empty())
            .or_else(|| failing.info.containers.first().map(|c| c.name.clone()))?;
        Some(Target { failing, container })
    }

    /// Replays `job`: as pods when [`KubeReplays::select`] chooses it and its manifest is
    /// found, else with the local runner. The pods run under the runner's admission (per-job
    /// hourly limit, duplicate suppression, one replay per GPU) and are counted in its metrics;
    /// the modes are tried in the configured order (GPU modes only while the GPU is healthy)
    /// until one reproduces the failure, at most `max_attempts` pods.
    pub async fn replay(&self, job: Job, runner: &ReproRunner) -> ReproReport {
        let Some(target) = self.select(job.incident_id, job.pod.as_ref()) else {
            return ReproReport::from(&runner.run_for(job.request).await);
        };
        let rc = runner.config().clone();
        let req = job.request.clone();
        let found = tokio::task::spawn_blocking(move || {
            let key = assertwatch_repro::discover::IncidentKey {
                log_path: req.log_path.as_deref(),
                pid: req.pid,
                at: req.at,
            };
            assertwatch_repro::discover::find(&rc.roots, &key, &rc.manifest)
                .found
                .map(|f| {
                    let doc = &f.flagged.doc;
                    let job_key = format!("{}/{}", doc.job.name, doc.job.rank.unwrap_or(0));
                    let uuid = doc.cuda_device.as_ref().and_then(|d| d.uuid.clone());
                    (f.flagged.path, doc.step.global_step, job_key, uuid)
                })
        })
        .await
        .ok()
        .flatten();
        // The failing pod, read once, and what its replay pods run (paths as the job saw them).
        let failing = target.failing.pod().ok();
        let (planned, step, job_key, uuid) = match found {
            Some((seen, step, job_key, uuid)) => {
                let planned = failing.map(|f| {
                    let manifest = job_path(&f, &target.container, &seen);
                    (f, StepRef::Manifest(manifest))
                });
                (planned, Some(step), job_key, uuid)
            }
            None => {
                // Debug state the daemon cannot see (a PersistentVolumeClaim): the pod's
                // annotation names the recorder's root, and the harness finds the step there.
                let Some((f, dir)) = failing.and_then(|f| {
                    assertwatch_kube::replay_pod::annotated_debug_state(&f).map(|d| (f, d))
                }) else {
                    // The local runner reports its own `no_debug_state` (and counts it).
                    return ReproReport::from(&runner.run_for(job.request).await);
                };
                let key = format!(
                    "{}/{}",
                    target.failing.info.namespace, target.failing.info.name
                );
                let under = StepRef::Under {
                    dir,
                    rank: None,
                    before: Some(job.request.at),
                };
                (Some((f, under)), None, key, None)
            }
        };
        let modes = ladder_modes(runner.config(), job.request.gpu_unhealthy);
        let Some(&first) = modes.first() else {
            return kube_skipped("gpu_unhealthy");
        };
        let gpu = modes.iter().any(|m| m.is_gpu()).then(|| {
            job.request
                .gpu
                .clone()
                .or(uuid)
                .unwrap_or_else(|| "default".to_owned())
        });
        let _slot = match runner.admit_external(
            &job_key,
            step.unwrap_or(0),
            &job.request.category,
            first,
            gpu.as_deref(),
        ) {
            Ok(slot) => slot,
            Err(reason) => return kube_skipped(reason),
        };
        let mut reports = Vec::new();
        for mode in modes.into_iter().take(runner.config().max_attempts.max(1)) {
            let rep = match &planned {
                Some((failing, step_ref)) => {
                    self.replay_step(
                        job.incident_id,
                        failing,
                        &target.container,
                        step_ref,
                        step,
                        mode,
                    )
                    .await
                }
                None => kube_skipped("bad_input"),
            };
            if rep.outcome != Outcome::Skipped || !rep.attempts.is_empty() {
                let took = rep.duration_s.map(Duration::from_secs_f64);
                runner.count_external(mode, rep.outcome, took);
            } else {
                runner.count_external(mode, Outcome::Skipped, None);
            }
            let done = matches!(
                rep.outcome,
                Outcome::Reproduced | Outcome::ReproducedCpuOnly | Outcome::Timeout
            ) || rep.reason.as_deref() == Some("manifest_not_mounted");
            reports.push(rep);
            if done {
                break;
            }
        }
        fold_reports(reports)
    }

    /// Builds, runs and reports the replay pod of `target` for the manifest the daemon found at
    /// `seen` (step `step`). The tests' shorthand: the daemon reads the failing pod once per
    /// incident and calls [`KubeReplays::replay_step`] itself.
    #[cfg(test)]
    pub async fn replay_found(
        &self,
        incident_id: i64,
        target: &Target,
        seen: &Path,
        step: u64,
        mode: Mode,
    ) -> ReproReport {
        let failing = match target.failing.pod() {
            Ok(p) => p,
            Err(_) => return kube_skipped("bad_input"),
        };
        let manifest = StepRef::Manifest(job_path(&failing, &target.container, seen));
        self.replay_step(
            incident_id,
            &failing,
            &target.container,
            &manifest,
            Some(step),
            mode,
        )
        .await
    }

    /// Builds, runs and reports the replay pod of `container` of `failing` for `step_ref`
    /// (paths as the job saw them); `step` is the recorded step when the daemon knows it, else
    /// the harness's result names it.
    pub async fn replay_step(
        &self,
        incident_id: i64,
        failing: &Pod,
        container: &str,
        step_ref: &StepRef,
        step: Option<u64>,
        mode: Mode,
    ) -> ReproReport {
        let mut opts = self.cfg.replay_options();
        opts.node = Some(self.node.clone()).filter(|n| !n.is_empty());
        opts.incident_id = Some(incident_id.to_string());
        let pod = match assertwatch_kube::replay_pod_for(failing, container, step_ref, mode, &opts)
        {
            Ok(p) => p,
            Err(refusal) => {
                tracing::info!(incident = incident_id, reason = %refusal, "No replay pod.");
                return kube_skipped(refusal.reason());
            }
        };
        let dropped = assertwatch_kube::replay_pod::dropped_privileges(&pod);
        if !dropped.is_empty() {
            tracing::info!(incident = incident_id, dropped = ?dropped, "Replay pod runs without some of the failing pod's privileges.");
        }
        let limits = RunLimits {
            schedule_timeout: self.cfg.schedule_timeout,
            overall: self.cfg.deadline + self.cfg.schedule_timeout + OVERALL_MARGIN,
            tail_lines: TAIL_LINES,
        };
        let t0 = Instant::now();
        let run = run_replay_pod(self.api.as_ref(), &pod, limits).await;
        if !run.deleted {
            tracing::warn!(incident = incident_id, pod = ?pod.metadata.name, "Replay pod could not be deleted.");
        }
        let mut rep = report(&run, mode, step_ref.path(), step, t0.elapsed());
        rep.dropped_privileges = dropped;
        rep
    }
}

/// The modes a pod replay tries, in the configured order; no GPU mode while the GPU is
/// unhealthy.
fn ladder_modes(rc: &ReproConfig, gpu_unhealthy: bool) -> Vec<Mode> {
    rc.modes
        .iter()
        .copied()
        .filter(|m| !(gpu_unhealthy && m.is_gpu()))
        .collect()
}

/// One report from the pods' reports: the first that reproduced on the GPU, else the first
/// that reproduced on the CPU, else the last; with every pod's attempt and privileges dropped.
fn fold_reports(reports: Vec<ReproReport>) -> ReproReport {
    let pick = reports
        .iter()
        .position(|r| r.outcome == Outcome::Reproduced)
        .or_else(|| {
            reports
                .iter()
                .position(|r| r.outcome == Outcome::ReproducedCpuOnly)
        })
        .unwrap_or(reports.len().saturating_sub(1));
    let attempts: Vec<AttemptReport> = reports.iter().flat_map(|r| r.attempts.clone()).collect();
    let total: f64 = reports.iter().filter_map(|r| r.duration_s).sum();
    let mut dropped: Vec<String> = reports
        .iter()
        .flat_map(|r| r.dropped_privileges.clone())
        .collect();
    dropped.sort();
    dropped.dedup();
    let Some(mut out) = reports.into_iter().nth(pick) else {
        return kube_skipped("no_mode");
    };
    out.attempts = attempts;
    out.duration_s = Some((total * 1000.0).round() / 1000.0);
    out.dropped_privileges = dropped;
    out
}

fn kube_skipped(reason: &str) -> ReproReport {
    ReproReport {
        runtime: ReplayRuntime::Kubernetes,
        ..ReproReport::skipped(reason)
    }
}

/// The path the job saw for a manifest the daemon found at `seen`: under a `hostPath` volume the
/// container mounted, the same file under that mount (the longest match wins); else `seen`
/// itself (the daemon mounts the directory where the job did).
pub fn job_path(pod: &Pod, container: &str, seen: &Path) -> PathBuf {
    let Some(spec) = pod.spec.as_ref() else {
        return seen.to_path_buf();
    };
    let volumes = spec.volumes.as_deref().unwrap_or_default();
    let mounts = spec
        .containers
        .iter()
        .find(|c| c.name == container)
        .and_then(|c| c.volume_mounts.as_deref())
        .unwrap_or_default();
    let mut best: Option<(usize, PathBuf)> = None;
    for m in mounts {
        let Some(hp) = volumes
            .iter()
            .find(|v| v.name == m.name)
            .and_then(|v| v.host_path.as_ref())
        else {
            continue;
        };
        let mut host = PathBuf::from(&hp.path);
        if let Some(sub) = m.sub_path.as_deref().filter(|s| !s.is_empty()) {
            host.push(sub);
        }
        if let Ok(rest) = seen.strip_prefix(&host) {
            let depth = host.components().count();
            if best.as_ref().is_none_or(|(d, _)| depth > *d) {
                best = Some((depth, Path::new(&m.mount_path).join(rest)));
            }
        }
    }
    best.map_or_else(|| seen.to_path_buf(), |(_, p)| p)
}

/// The incident's report from how the replay pod ended. `manifest` is the step's manifest (or
/// the directory the harness searched) and `step` the step, when the daemon knows them; the
/// harness's result names both otherwise.
pub fn report(
    run: &PodRun,
    mode: Mode,
    manifest: &Path,
    step: Option<u64>,
    took: Duration,
) -> ReproReport {
    let mut rep = kube_skipped("");
    let step = step.or_else(|| {
        run.result
            .as_ref()
            .and_then(|v| v.pointer("/step/global_step"))
            .and_then(serde_json::Value::as_u64)
    });
    let manifest = run
        .result
        .as_ref()
        .and_then(|v| v.get("manifest"))
        .and_then(serde_json::Value::as_str)
        .filter(|m| m.starts_with('/'))
        .map_or_else(|| manifest.to_path_buf(), PathBuf::from);
    let (outcome, reason) = match &run.end {
        RunEnd::Finished { exit_code, .. } => match &run.result {
            Some(v) => {
                let a = assertwatch_repro::result::interpret(v, mode);
                rep.python_frame = a.python_frame.clone();
                rep.exception = a.exception.as_ref().map(|e| ExceptionReport {
                    kind: e.kind.clone(),
                    message: e.message.clone(),
                });
                rep.kernel_assertion = a.kernel_assertion.as_ref().map(|k| KernelAssertionReport {
                    location: k.location.clone(),
                    function: k.function.clone(),
                    assertion: k.assertion.clone(),
                    threads: k.threads,
                });
                match a.outcome {
                    Some(o) => (o, a.reason),
                    None => (Outcome::HarnessError, Some("result_invalid".to_owned())),
                }
            }
            None => {
                let exit = exit_code.map(assertwatch_repro::process::Exit::Code);
                let (o, r) = assertwatch_repro::result::from_exit(exit);
                (o, Some(r.to_owned()))
            }
        },
        RunEnd::TimedOut => (Outcome::Timeout, Some("deadline".to_owned())),
        other => (Outcome::Skipped, Some(other.reason())),
    };
    let ran = matches!(run.end, RunEnd::Finished { .. } | RunEnd::TimedOut);
    rep.outcome = outcome;
    rep.reason = reason.clone();
    rep.mode = Some(mode);
    rep.step = step.filter(|_| ran);
    let secs = (took.as_secs_f64() * 1000.0).round() / 1000.0;
    rep.duration_s = Some(secs);
    if ran {
        rep.attempts = vec![AttemptReport {
            mode,
            outcome,
            reason,
            step: step.unwrap_or(0),
            duration_s: secs,
            manifest,
            result_path: None,
        }];
    }
    rep
}

#[cfg(test)]
mod tests {
    use super::*;
    use assertwatch_kube::k8s_openapi::api::core::v1::Pod;
    use assertwatch_kube::pods::PodCache;
    use assertwatch_kube::ApiError;
    use futures_util::stream::BoxStream;
    use serde_json::json;
    use std::sync::Mutex;

    fn fixture(name: &str) -> Pod {
        let text = std::fs::read_to_string(format!(
            "{}/tests/fixtures/kube/{name}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        assertwatch_kube::parse_pod(&text).unwrap()
    }

    /// A scripted API: every call recorded; the pod ends with `phase` and logs `log`.
    struct Mock {
        calls: Mutex<Vec<String>>,
        created: Mutex<Option<Pod>>,
        phase: &'static str,
        log: String,
        unschedulable: bool,
    }

    impl Mock {
        fn new(phase: &'static str, log: &str) -> Self {
            Mock {
                calls: Mutex::new(Vec::new()),
                created: Mutex::new(None),
                phase,
                log: log.to_owned(),
                unschedulable: false,
            }
        }
        fn calls(&self) -> Vec<String> {
            self.calls.lock().unwrap().clone()
        }
        fn note(&self, s: String) {
            self.calls.lock().unwrap().push(s);
        }
    }

    impl KubeApi for Mock {
        async fn create_event(
            &self,
            _: &assertwatch_kube::k8s_openapi::api::events::v1::Event,
        ) -> Result<(), ApiError> {
            Ok(())
        }
        async fn patch_event_series(
            &self,
            _: &str,
            _: &str,
            _: &assertwatch_kube::k8s_openapi::api::events::v1::EventSeries,
        ) -> Result<(), ApiError> {
            Ok(())
        }
        async fn patch_node_condition(
            &self,
            _: &str,
            _: &assertwatch_kube::k8s_openapi::api::core::v1::NodeCondition,
        ) -> Result<(), ApiError> {
            Ok(())
        }
        async fn create_pod(&self, pod: &Pod) -> Result<(), ApiError> {
            self.note(format!(
                "create {}/{}",
                pod.metadata.namespace.clone().unwrap_or_default(),
                pod.metadata.name.clone().unwrap_or_default()
            ));
            *self.created.lock().unwrap() = Some(pod.clone());
            Ok(())
        }
        async fn get_pod(&self, ns: &str, name: &str) -> Result<Pod, ApiError> {
            self.note(format!("get {ns}/{name}"));
            let mut p = self.created.lock().unwrap().clone().unwrap();
            let status = if self.unschedulable {
                json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
                    "reason": "Unschedulable", "message": "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."}]})
            } else {
                json!({"phase": self.phase, "containerStatuses": [{"name": "x", "image": "i", "imageID": "",
                    "ready": false, "restartCount": 0, "state": {"terminated": {"exitCode": 0}}}]})
            };
            p.status = Some(serde_json::from_value(status).unwrap());
            Ok(p)
        }
        async fn watch_pod(
            &self,
            _: &str,
            _: &str,
            _: &str,
        ) -> Result<BoxStream<'static, Result<Pod, ApiError>>, ApiError> {
            self.note("watch".into());
            Ok(Box::pin(futures_util::stream::empty()))
        }
        async fn pod_log(&self, ns: &str, name: &str, c: &str, _: i64) -> Result<String, ApiError> {
            self.note(format!("log {ns}/{name} {c}"));
            Ok(self.log.clone())
        }
        async fn delete_pod(&self, ns: &str, name: &str) -> Result<(), ApiError> {
            self.note(format!("delete {ns}/{name}"));
            Ok(())
        }
    }

    fn replays(mock: Mock, namespaces: &[&str]) -> (KubeReplays<Mock>, PodCache) {
        let cache = PodCache::default();
        let cfg = ReproKubernetesConfig {
            enabled: true,
            namespaces: namespaces.iter().map(|s| s.to_string()).collect(),
            schedule_timeout: Duration::ZERO,
            ..Default::default()
        };
        (
            KubeReplays::new(
                Arc::new(mock),
                CapturedPods::default(),
                cfg,
                "gpu-a100-node-17".into(),
            ),
            cache,
        )
    }

    fn job_pod(ns: &str, pod: &str, c: &str) -> JobPod {
        JobPod {
            namespace: ns.into(),
            pod: pod.into(),
            container: Some(c.into()),
        }
    }

    fn worker() -> (Pod, String, String, String) {
        let p = fixture("pytorchjob-worker.yaml");
        let ns = p.metadata.namespace.clone().unwrap();
        let name = p.metadata.name.clone().unwrap();
        let c = p.spec.as_ref().unwrap().containers[0].name.clone();
        (p, ns, name, c)
    }

    #[test]
    fn selection_needs_the_switch_an_allowed_namespace_and_a_capture() {
        let (p, ns, name, c) = worker();
        let (k, cache) = replays(Mock::new("Succeeded", ""), &[ns.as_str()]);
        cache.apply(p);
        let jp = job_pod(&ns, &name, &c);
        // Not captured yet.
        assert!(k.select(7, Some(&jp)).is_none());
        k.captured.insert(7, cache.get(&ns, &name).unwrap());
        let t = k.select(7, Some(&jp)).unwrap();
        assert_eq!(t.container, c);
        // No pod on the incident, another pod, a namespace off the list, the switch off.
        assert!(k.select(7, None).is_none());
        assert!(k.select(7, Some(&job_pod(&ns, "other", &c))).is_none());
        let (k2, _) = replays(Mock::new("Succeeded", ""), &["elsewhere"]);
        k2.captured.insert(7, cache.get(&ns, &name).unwrap());
        assert!(k2.select(7, Some(&jp)).is_none());
        let (mut k3, _) = replays(Mock::new("Succeeded", ""), &["*"]);
        k3.captured.insert(7, cache.get(&ns, &name).unwrap());
        assert!(k3.select(7, Some(&jp)).is_some());
        k3.cfg.enabled = false;
        assert!(k3.select(7, Some(&jp)).is_none());
    }

    #[test]
    fn host_paths_map_to_the_jobs_mount() {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ml"},
            "spec": {"containers": [{"name": "c", "volumeMounts": [
                {"name": "dbg", "mountPath": "/debug"},
                {"name": "deep", "mountPath": "/deep", "subPath": "ml/job"},
                {"name": "pvc", "mountPath": "/ckpt"}]}],
             "volumes": [{"name": "dbg", "hostPath": {"path": "/var/lib/assertwatch-debug"}},
                         {"name": "deep", "hostPath": {"path": "/var/lib/assertwatch-debug"}},
                         {"name": "pvc", "persistentVolumeClaim": {"claimName": "x"}}]}
        }))
        .unwrap();
        assert_eq!(
            job_path(
                &pod,
                "c",
                Path::new("/var/lib/assertwatch-debug/ml/a/rank-0/m.json")
            ),
            PathBuf::from("/debug/ml/a/rank-0/m.json")
        );
        // The longer host prefix (the subPath mount) wins.
        assert_eq!(
            job_path(
                &pod,
                "c",
                Path::new("/var/lib/assertwatch-debug/ml/job/rank-0/m.json")
            ),
            PathBuf::from("/deep/rank-0/m.json")
        );
        // Elsewhere: as found.
        assert_eq!(
            job_path(&pod, "c", Path::new("/ckpt/x/m.json")),
            PathBuf::from("/ckpt/x/m.json")
        );
    }

    #[tokio::test]
    async fn a_captured_pod_replays_as_a_pod_and_reports_the_line() {
        let (p, ns, name, c) = worker();
        let manifest = p.spec.as_ref().unwrap().containers[0]
            .volume_mounts
            .as_ref()
            .unwrap()
            .iter()
            .find(|m| m.mount_path != "/dev/shm" && !m.mount_path.starts_with("/var/run/secrets"))
            .map(|m| PathBuf::from(&m.mount_path).join("assertwatch/step-000812/manifest.json"))
            .unwrap();
        let log = "replaying step 812\n{\"schema\": \"assertwatch.replay-result/v1\", \"outcome\": \"reproduced\", \
                   \"failing_frame\": {\"file\": \"model.py\", \"line\": 57}, \
                   \"exception\": {\"type\": \"RuntimeError\", \"message\": \"CUDA error: device-side assert triggered\"}}\n";
        let (k, cache) = replays(Mock::new("Succeeded", log), &[ns.as_str()]);
        cache.apply(p);
        k.captured.insert(7, cache.get(&ns, &name).unwrap());
        let t = k.select(7, Some(&job_pod(&ns, &name, &c))).unwrap();
        let rep = k.replay_found(7, &t, &manifest, 812, Mode::SyncGpu).await;
        assert_eq!(rep.runtime, ReplayRuntime::Kubernetes);
        assert_eq!(rep.outcome, Outcome::Reproduced, "{rep:?}");
        assert_eq!(rep.python_frame.as_deref(), Some("model.py:57"));
        assert_eq!(rep.exception.as_ref().unwrap().kind, "RuntimeError");
        assert_eq!(rep.step, Some(812));
        assert_eq!(rep.attempts[0].manifest, manifest);
        let calls = k.api.calls();
        let pod_name = assertwatch_kube::replay_pod::replay_pod_name("7", Mode::SyncGpu);
        assert_eq!(calls.first().unwrap(), &format!("create {ns}/{pod_name}"));
        assert!(calls
            .iter()
            .any(|s| s.starts_with(&format!("log {ns}/{pod_name}"))));
        assert_eq!(calls.last().unwrap(), &format!("delete {ns}/{pod_name}"));
        // The pod ran on this node, with the harness printing its result.
        let created = k.api.created.lock().unwrap().clone().unwrap();
        let spec = created.spec.unwrap();
        assert_eq!(spec.node_name.as_deref(), Some("gpu-a100-node-17"));
        let cmd = spec.containers[0].command.clone().unwrap_or_default();
        let args = spec.containers[0].args.clone().unwrap_or_default();
        assert!(
            cmd.iter().chain(args.iter()).any(|a| a == "--print-result"),
            "{cmd:?} {args:?}"
        );
    }

    #[tokio::test]
    async fn unschedulable_is_skipped_with_the_reason_and_a_refusal_is_skipped() {
        let (p, ns, name, c) = worker();
        let mut mock = Mock::new("Pending", "");
        mock.unschedulable = true;
        let (k, cache) = replays(mock, &[ns.as_str()]);
        cache.apply(p);
        k.captured.insert(7, cache.get(&ns, &name).unwrap());
        let t = k.select(7, Some(&job_pod(&ns, &name, &c))).unwrap();
        let mounted = k
            .captured
            .get(7)
            .unwrap()
            .pod()
            .unwrap()
            .spec
            .unwrap()
            .containers[0]
            .volume_mounts
            .clone()
            .unwrap()[0]
            .mount_path
            .clone();
        let rep = k
            .replay_found(7, &t, &Path::new(&mounted).join("m.json"), 1, Mode::SyncGpu)
            .await;
        assert_eq!(rep.outcome, Outcome::Skipped);
        assert!(
            rep.reason
                .as_deref()
                .unwrap()
                .contains("Insufficient nvidia.com/gpu"),
            "{rep:?}"
        );
        assert_eq!(rep.runtime, ReplayRuntime::Kubernetes);
        assert!(k.api.calls().last().unwrap().starts_with("delete "));
        // A manifest outside every mount: refused before any API call.
        let (k, cache) = replays(Mock::new("Succeeded", ""), &[ns.as_str()]);
        cache.apply(fixture("pytorchjob-worker.yaml"));
        k.captured.insert(8, cache.get(&ns, &name).unwrap());
        let t = k.select(8, Some(&job_pod(&ns, &name, &c))).unwrap();
        let rep = k
            .replay_found(8, &t, Path::new("/nowhere/m.json"), 1, Mode::Cpu)
            .await;
        assert_eq!(rep.reason.as_deref(), Some("manifest_not_mounted"));
        assert!(k.api.calls().is_empty());
    }

    fn cpu_runner(dir: &Path) -> ReproRunner {
        let mut rc = ReproConfig::new(dir.join("state"));
        rc.enabled = true;
        rc.roots = vec![dir.join("roots").display().to_string()];
        rc.modes = vec![Mode::Cpu];
        let reg = prometheus::Registry::new();
        ReproRunner::new(rc, assertwatch_repro::metrics::Metrics::new(&reg).unwrap())
    }

    fn job(pod: JobPod) -> Job {
        let mut request = assertwatch_repro::ReproRequest::new(
            "9",
            std::time::UNIX_EPOCH + Duration::from_secs(1_796_275_257),
        );
        request.log_path = Some(PathBuf::from("/var/log/pods/x/0.log"));
        request.category = "index_out_of_bounds".into();
        Job {
            incident_id: 9,
            request,
            pod: Some(pod),
        }
    }

    #[tokio::test]
    async fn debug_state_the_daemon_cannot_see_is_found_by_the_pod() {
        let dir = tempfile::tempdir().unwrap();
        let runner = cpu_runner(dir.path());
        let (mut p, ns, name, c) = worker();
        p.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(
                assertwatch_kube::replay_pod::ANNOTATION_DEBUG_STATE.into(),
                "/checkpoints/debug".into(),
            );
        let log = "{\"schema\": \"assertwatch.replay-result/v1\", \"outcome\": \"reproduced_cpu_only\", \
                   \"manifest\": \"/checkpoints/debug/ft/rank-00003/ring/step-000000000041/manifest.json\", \
                   \"step\": {\"epoch\": 0, \"global_step\": 41, \"batch_index\": 41}, \
                   \"failing_frame\": {\"file\": \"model.py\", \"line\": 57}, \
                   \"exception\": {\"type\": \"IndexError\", \"message\": \"Target 5 is out of bounds.\"}}\n";
        let (k, cache) = replays(Mock::new("Succeeded", log), &[ns.as_str()]);
        cache.apply(p);
        k.captured.insert(9, cache.get(&ns, &name).unwrap());
        let rep = k.replay(job(job_pod(&ns, &name, &c)), &runner).await;
        assert_eq!(rep.runtime, ReplayRuntime::Kubernetes);
        assert_eq!(rep.outcome, Outcome::ReproducedCpuOnly, "{rep:?}");
        assert_eq!(rep.step, Some(41));
        assert_eq!(rep.python_frame.as_deref(), Some("model.py:57"));
        assert_eq!(
            rep.attempts[0].manifest,
            Path::new("/checkpoints/debug/ft/rank-00003/ring/step-000000000041/manifest.json")
        );
        let created = k.api.created.lock().unwrap().clone().unwrap();
        let cmd = created.spec.unwrap().containers[0].command.clone().unwrap();
        let at = |flag: &str| {
            cmd.iter()
                .position(|a| a == flag)
                .map(|i| cmd[i + 1].as_str())
        };
        assert_eq!(at("--find-under"), Some("/checkpoints/debug"));
        assert_eq!(at("--pod"), Some(name.as_str()));
        assert_eq!(at("--before"), Some("2026-12-03T05:20:57.000000Z"));
        assert_eq!(at("--manifest"), None);
        assert!(k.api.calls().last().unwrap().starts_with("delete "));

        // Without the annotation and with nothing the daemon sees: the local runner's answer,
        // and no API call.
        let (p, ..) = worker();
        let (k, cache) = replays(Mock::new("Succeeded", log), &[ns.as_str()]);
        cache.apply(p);
        k.captured.insert(9, cache.get(&ns, &name).unwrap());
        let rep = k.replay(job(job_pod(&ns, &name, &c)), &runner).await;
        assert_eq!(rep.outcome, Outcome::NoDebugState, "{rep:?}");
        assert_eq!(rep.runtime, ReplayRuntime::Local);
        assert!(k.api.calls().is_empty());
    }

    #[test]
    fn ladder_modes_follow_the_config_and_the_gpus_health() {
        let mut rc = ReproConfig::new("/tmp/x");
        rc.modes = vec![Mode::SyncGpu, Mode::Cpu];
        assert_eq!(ladder_modes(&rc, false), vec![Mode::SyncGpu, Mode::Cpu]);
        assert_eq!(ladder_modes(&rc, true), vec![Mode::Cpu]);
        rc.modes = vec![Mode::SyncGpu];
        assert!(ladder_modes(&rc, true).is_empty());
    }

    #[test]
    fn fold_keeps_the_gpu_hit_and_every_attempt() {
        let att = |mode, outcome| AttemptReport {
            mode,
            outcome,
            reason: None,
            step: 3,
            duration_s: 1.0,
            manifest: PathBuf::from("/m.json"),
            result_path: None,
        };
        let mut gpu = kube_skipped("");
        gpu.outcome = Outcome::NotReproduced;
        gpu.attempts = vec![att(Mode::SyncGpu, Outcome::NotReproduced)];
        gpu.duration_s = Some(2.0);
        gpu.dropped_privileges = vec!["hostNetwork".into()];
        let mut cpu = kube_skipped("");
        cpu.outcome = Outcome::ReproducedCpuOnly;
        cpu.python_frame = Some("model.py:57".into());
        cpu.attempts = vec![att(Mode::Cpu, Outcome::ReproducedCpuOnly)];
        cpu.duration_s = Some(1.5);
        cpu.dropped_privileges = vec!["hostNetwork".into()];
        let f = fold_reports(vec![gpu, cpu]);
        assert_eq!(f.outcome, Outcome::ReproducedCpuOnly);
        assert_eq!(f.python_frame.as_deref(), Some("model.py:57"));
        assert_eq!(f.attempts.len(), 2);
        assert_eq!(f.duration_s, Some(3.5));
        assert_eq!(f.dropped_privileges, vec!["hostNetwork".to_owned()]);
    }

    #[test]
    fn run_ends_map_to_outcomes() {
        let run = |end| PodRun {
            end,
            log: None,
            result: None,
            deleted: true,
        };
        let m = Path::new("/m.json");
        let r = report(
            &run(RunEnd::TimedOut),
            Mode::Cpu,
            m,
            Some(3),
            Duration::from_secs(1),
        );
        assert_eq!((r.outcome, r.step), (Outcome::Timeout, Some(3)));
        let r = report(
            &run(RunEnd::Finished {
                succeeded: false,
                exit_code: Some(2),
            }),
            Mode::Cpu,
            m,
            Some(3),
            Duration::ZERO,
        );
        assert_eq!(
            (r.outcome, r.reason.as_deref()),
            (Outcome::HarnessError, Some("manifest_rejected"))
        );
        let r = report(
            &run(RunEnd::ApiFailed(ApiError::Forbidden("no".into()))),
            Mode::Cpu,
            m,
            Some(3),
            Duration::ZERO,
        );
        assert_eq!(r.outcome, Outcome::Skipped);
        assert!(r.attempts.is_empty() && r.step.is_none());
    }
}
