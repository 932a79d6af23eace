//! The incident as it leaves the engine: identity, place, GPU and replay result, typed.
//!
//! `IncidentRecord` is what the store keeps, the API serves and every sink receives. Each field
//! that used to be loose JSON has its own type here, so the store, the sinks and the page agree on
//! one shape and the compiler checks it.

use super::Incident;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Where an incident's first line came from. Serialised as the API's `source` object:
/// `{path, offset}`, `{kind: "kmsg", seq}` or `{kind: "nvml"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum IncidentSource {
    /// A tailed file, at the byte offset of the incident's first line.
    File { path: String, offset: u64 },
    /// The kernel log: the record sequence (`/dev/kmsg`) or byte offset (a file).
    Kernel { kind: KernelSourceKind, seq: u64 },
    /// An NVML event with no kernel-log line.
    Nvml { kind: NvmlSourceKind },
}

/// The `kind: "kmsg"` tag of [`IncidentSource::Kernel`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KernelSourceKind {
    Kmsg,
}

/// The `kind: "nvml"` tag of [`IncidentSource::Nvml`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NvmlSourceKind {
    Nvml,
}

impl IncidentSource {
    pub fn file(path: impl Into<String>, offset: u64) -> Self {
        IncidentSource::File {
            path: path.into(),
            offset,
        }
    }

    pub fn kmsg(seq: u64) -> Self {
        IncidentSource::Kernel {
            kind: KernelSourceKind::Kmsg,
            seq,
        }
    }

    pub fn nvml() -> Self {
        IncidentSource::Nvml {
            kind: NvmlSourceKind::Nvml,
        }
    }

    /// The log file, for incidents read from one.
    pub fn path(&self) -> Option<&str> {
        match self {
            IncidentSource::File { path, .. } => Some(path),
            _ => None,
        }
    }
}

/// The GPU an incident concerns, where known.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GpuRef {
    pub index: Option<u32>,
    pub uuid: Option<String>,
    pub pci_bus_id: Option<String>,
}

/// An incident as the store keeps it and the API serves it: the `scan` fields plus identity and
/// context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IncidentRecord {
    pub id: i64,
    /// When the incident was first recorded (RFC 3339, UTC).
    pub time: String,
    pub node: String,
    pub source: IncidentSource,
    /// The configured log source name (`logs[].name`), `kernel` or `nvml`.
    pub source_name: String,
    pub namespace: Option<String>,
    pub pod: Option<String>,
    pub container: Option<String>,
    pub gpu: Option<GpuRef>,
    pub related: Vec<i64>,
    /// The training job, as one key across nodes and sources: `slurm:<job id>`,
    /// `k8s:<namespace>/<pod set>` or `dir:<log directory>`; see `incidents::correlate`.
    #[serde(default)]
    pub training_job: Option<String>,
    /// The root-cause incident this one follows from (an NCCL timeout on another rank after a
    /// device-side assert of the same job); such incidents are not alerted on their own.
    #[serde(default)]
    pub caused_by: Option<i64>,
    pub repro: Option<ReproReport>,
    /// The incident is still collecting lines.
    pub open: bool,
    /// The Slurm job the incident hit, where one is known.
    #[serde(flatten, default)]
    pub slurm: SlurmRef,
    /// The pod's identity, image and workload, from this node's pod cache (Kubernetes).
    #[serde(flatten, default)]
    pub kube: KubeRef,
    #[serde(flatten)]
    pub incident: Incident,
}

/// A Slurm job, step, array task and user (fields null where unknown).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlurmRef {
    #[serde(default)]
    pub slurm_job_id: Option<String>,
    #[serde(default)]
    pub slurm_step: Option<String>,
    #[serde(default)]
    pub slurm_array_job_id: Option<String>,
    #[serde(default)]
    pub slurm_array_task: Option<String>,
    #[serde(default)]
    pub slurm_user: Option<String>,
}

impl SlurmRef {
    pub fn is_known(&self) -> bool {
        self.slurm_job_id.is_some()
    }

    /// `job 42` / `job 40_7` (array task), `step 0`, `user alice`: for people (unescaped).
    pub fn describe(&self) -> Option<String> {
        let job = self.slurm_job_id.as_deref()?;
        let mut s = match (&self.slurm_array_job_id, &self.slurm_array_task) {
            (Some(a), Some(t)) => format!("job {a}_{t}"),
            _ => format!("job {job}"),
        };
        if let Some(st) = &self.slurm_step {
            s.push_str(&format!(", step {st}"));
        }
        if let Some(u) = &self.slurm_user {
            s.push_str(&format!(", user {u}"));
        }
        Some(s)
    }
}

/// What the pod cache says about an incident's pod (fields null where unknown or without the
/// `kubernetes:` section). `pod_node` is the pod's `spec.nodeName`; the record's own `node` is
/// the node that saw the incident.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubeRef {
    #[serde(default)]
    pub pod_uid: Option<String>,
    #[serde(default)]
    pub pod_node: Option<String>,
    /// The container's image as the pod spec names it.
    #[serde(default)]
    pub image: Option<String>,
    /// `sha256:…` from `status.containerStatuses[].imageID`.
    #[serde(default)]
    pub image_digest: Option<String>,
    /// The pod's top controller (`Job`, `JobSet`, `PyTorchJob`, `RayCluster`, …).
    #[serde(default)]
    pub workload_kind: Option<String>,
    #[serde(default)]
    pub workload_name: Option<String>,
}

impl KubeRef {
    /// `kind/name` of the workload, where known.
    pub fn workload(&self) -> Option<String> {
        Some(format!(
            "{}/{}",
            self.workload_kind.as_deref()?,
            self.workload_name.as_deref()?
        ))
    }
}

/// Where a replay ran: the daemon's own runner, or a pod built from the failing pod.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplayRuntime {
    #[default]
    Local,
    Kubernetes,
}

/// A replay's answer as attached to an incident (`repro` in the API), in the outcome classes of
/// the reproduction contract. Fields the runner did not reach are null.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReproReport {
    pub outcome: assertwatch_repro::Outcome,
    pub reason: Option<String>,
    /// The mode of the decisive attempt.
    #[serde(default)]
    pub mode: Option<assertwatch_repro::Mode>,
    #[serde(default)]
    pub attempts: Vec<AttemptReport>,
    /// `file:line` of the failing user frame: the real one, found synchronously.
    #[serde(default)]
    pub python_frame: Option<String>,
    #[serde(default)]
    pub exception: Option<ExceptionReport>,
    #[serde(default)]
    pub kernel_assertion: Option<KernelAssertionReport>,
    /// `step.global_step` of the decisive attempt.
    #[serde(default)]
    pub step: Option<u64>,
    #[serde(default)]
    pub duration_s: Option<f64>,
    #[serde(default)]
    pub result_path: Option<PathBuf>,
    /// Where the replay ran (`local` for reports stored before this field existed).
    #[serde(default)]
    pub runtime: ReplayRuntime,
    /// Privileges of the failing pod that its replay pod ran without (`hostNetwork`,
    /// `privileged`, added capabilities…; see `docs/deploy-kubernetes.md`). Empty for local
    /// replays.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped_privileges: Vec<String>,
}

/// A finished replay on its way back to the incident it was run for.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayDone {
    pub incident_id: i64,
    pub report: ReproReport,
}

/// One attempt of the replay ladder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptReport {
    pub mode: assertwatch_repro::Mode,
    pub outcome: assertwatch_repro::Outcome,
    pub reason: Option<String>,
    pub step: u64,
    pub duration_s: f64,
    pub manifest: PathBuf,
    pub result_path: Option<PathBuf>,
}

/// The exception the replay raised.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExceptionReport {
    #[serde(rename = "type")]
    pub kind: String,
    pub message: String,
}

/// The first device assertion the replay captured.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelAssertionReport {
    pub location: String,
    pub function: Option<String>,
    pub assertion: Option<String>,
    pub threads: Option<u64>,
}

/// Milliseconds rounded the way the API has always shown durations.
fn secs(d: std::time::Duration) -> f64 {
    (d.as_secs_f64() * 1000.0).round() / 1000.0
}

impl ReproReport {
    /// A replay that did not run, with the reason (`queue_full`, …).
    pub fn skipped(reason: &str) -> Self {
        ReproReport {
            outcome: assertwatch_repro::Outcome::Skipped,
            reason: Some(reason.to_owned()),
            mode: None,
            attempts: Vec::new(),
            python_frame: None,
            exception: None,
            kernel_assertion: None,
            step: None,
            duration_s: None,
            result_path: None,
            runtime: ReplayRuntime::Local,
            dropped_privileges: Vec::new(),
        }
    }
}

impl From<&assertwatch_repro::ReproResult> for ReproReport {
    fn from(r: &assertwatch_repro::ReproResult) -> Self {
        ReproReport {
            outcome: r.outcome,
            reason: r.reason.clone(),
            mode: r.mode,
            attempts: r
                .attempts
                .iter()
                .map(|a| AttemptReport {
                    mode: a.mode,
                    outcome: a.outcome,
                    reason: a.reason.clone(),
                    step: a.step,
                    duration_s: secs(a.duration),
                    manifest: a.manifest.clone(),
                    result_path: a.result_path.clone(),
                })
                .collect(),
            python_frame: r.python_frame.clone(),
            exception: r.exception.as_ref().map(|e| ExceptionReport {
                kind: e.kind.clone(),
                message: e.message.clone(),
            }),
            kernel_assertion: r.kernel_assertion.as_ref().map(|k| KernelAssertionReport {
                location: k.location.clone(),
                function: k.function.clone(),
                assertion: k.assertion.clone(),
                threads: k.threads,
            }),
            step: r.step,
            duration_s: Some(secs(r.duration)),
            result_path: r.result_path.clone(),
            runtime: ReplayRuntime::Local,
            dropped_privileges: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_serialises_as_the_api_always_did() {
        let f = serde_json::to_value(IncidentSource::file("/x.log", 5)).unwrap();
        assert_eq!(f, serde_json::json!({"path": "/x.log", "offset": 5}));
        let k = serde_json::to_value(IncidentSource::kmsg(7)).unwrap();
        assert_eq!(k, serde_json::json!({"kind": "kmsg", "seq": 7}));
        let n = serde_json::to_value(IncidentSource::nvml()).unwrap();
        assert_eq!(n, serde_json::json!({"kind": "nvml"}));
        for v in [f, k, n] {
            let back: IncidentSource = serde_json::from_value(v.clone()).unwrap();
            assert_eq!(serde_json::to_value(back).unwrap(), v);
        }
    }

    #[test]
    fn kube_fields_flatten_and_default() {
        let mut r = crate::incidents::store::test_record();
        r.kube = KubeRef {
            pod_uid: Some("u1".into()),
            pod_node: Some("n1".into()),
            image: Some("img:1".into()),
            image_digest: Some("sha256:ab".into()),
            workload_kind: Some("JobSet".into()),
            workload_name: Some("pre".into()),
        };
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["pod_uid"], "u1");
        assert_eq!(v["workload_kind"], "JobSet");
        assert_eq!(v["image_digest"], "sha256:ab");
        let back: IncidentRecord = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(back.kube, r.kube);
        // Records stored before these fields existed read back without them.
        let mut old = v;
        for k in [
            "pod_uid",
            "pod_node",
            "image",
            "image_digest",
            "workload_kind",
            "workload_name",
        ] {
            old.as_object_mut().unwrap().remove(k);
        }
        let back: IncidentRecord = serde_json::from_value(old).unwrap();
        assert_eq!(back.kube, KubeRef::default());
    }

    #[test]
    fn runtime_defaults_to_local() {
        let r: ReproReport =
            serde_json::from_value(serde_json::json!({"outcome": "skipped", "reason": "x"}))
                .unwrap();
        assert_eq!(r.runtime, ReplayRuntime::Local);
        let mut k = ReproReport::skipped("x");
        k.runtime = ReplayRuntime::Kubernetes;
        assert_eq!(serde_json::to_value(&k).unwrap()["runtime"], "kubernetes");
    }

    #[test]
    fn skipped_report_round_trips_from_its_short_form() {
        let short = serde_json::json!({"outcome": "skipped", "reason": "queue_full"});
        let r: ReproReport = serde_json::from_value(short).unwrap();
        assert_eq!(r, ReproReport::skipped("queue_full"));
    }
}
