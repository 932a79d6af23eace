//! The replay pod's spec, derived purely from the failing pod: what runs, where, with what.
//!
//! [`replay_pod`] takes a Pod as the API server returned it and builds the Pod that replays one
//! recorded step in the job's own environment: same namespace and node, the failing container's
//! image pinned by digest, only the volumes that container mounted at the same paths, its env,
//! working directory and user, and the replay harness as the command. It never grants more than
//! the failing pod had: host namespaces, privileged mode and added capabilities are dropped unless
//! the namespace opted in, and the service-account token is never mounted. No I/O happens here;
//! the CLI (`assertwatch kube replay-pod`) and the daemon both call this one function.

use assertwatch_repro::Mode;
use k8s_openapi::api::core::v1::{
    Container, EnvVar, Pod, PodSecurityContext, PodSpec, ResourceRequirements, SecurityContext,
    Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Label every object assertwatch creates carries (Kubernetes recommended labels).
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// Value of [`LABEL_MANAGED_BY`].
pub const MANAGED_BY: &str = "assertwatch";
/// Label naming the incident a replay pod belongs to.
pub const LABEL_INCIDENT: &str = "assertwatch.io/incident";
/// Annotation listing the privileges the failing pod had and the replay pod does not
/// (comma-separated; absent when nothing was dropped).
pub const ANNOTATION_DROPPED: &str = "assertwatch.io/dropped-privileges";
/// Annotation naming the failing pod (`namespace/name`).
pub const ANNOTATION_REPLAY_OF: &str = "assertwatch.io/replay-of";
/// Annotation with the image exactly as the failing container's spec named it.
pub const ANNOTATION_ORIGINAL_IMAGE: &str = "assertwatch.io/original-image";
/// Annotation on a workload's pod that opts it out of replays (`"disabled"`).
pub const ANNOTATION_OPT_OUT: &str = "assertwatch.io/replay";
/// Annotation on a workload's pod naming the recorder's root directory as the job's container
/// sees it. The daemon needs it only when that directory is on a volume it cannot see (a
/// PersistentVolumeClaim): the replay pod mounts the volume and the harness finds the step.
pub const ANNOTATION_DEBUG_STATE: &str = "assertwatch.io/debug-state";
/// Where the replay pod's scratch volume (result and logs of the harness) is mounted.
pub const SCRATCH_MOUNT: &str = "/var/run/assertwatch-replay";
/// Name of the scratch volume.
pub const SCRATCH_VOLUME: &str = "assertwatch-replay-scratch";
/// Where a service-account token is mounted by convention; never carried.
const SA_TOKEN_MOUNT: &str = "/var/run/secrets/kubernetes.io/serviceaccount";
/// The device plugin's resource name for one NVIDIA GPU (NVIDIA k8s-device-plugin README).
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";

/// How the replay pod is sized and which namespaces may have one.
#[derive(Debug, Clone)]
pub struct ReplayPodOptions {
    /// Namespaces that get replays; `"*"` allows all. Empty: none.
    pub namespaces: Vec<String>,
    /// Namespaces whose replays keep the failing pod's host namespaces, privileged mode and
    /// added capabilities (`"*"`: all). Empty by default: those are dropped.
    pub carry_privileges_in: Vec<String>,
    /// Node to pin to; `None`: the failing pod's `spec.nodeName`.
    pub node: Option<String>,
    /// Memory limit (and request) of the replay container, a Kubernetes quantity.
    pub memory_limit: String,
    /// `activeDeadlineSeconds` of the replay pod: the hard end of everything, image start
    /// included. The harness gets this less [`ReplayPodOptions::harness_margin`].
    pub deadline: Duration,
    /// Time kept between the harness's own timeout and the pod's deadline, so the harness can
    /// report a timeout before the kubelet kills the pod.
    pub harness_margin: Duration,
    /// The interpreter in the job's image that runs the harness.
    pub python: String,
    /// The incident the replay belongs to (a label value; also names the pod).
    pub incident_id: Option<String>,
    /// Add an owner reference to the failing pod (when its uid is known), so the replay pod is
    /// garbage-collected with it.
    pub owner_reference: bool,
}

impl Default for ReplayPodOptions {
    fn default() -> Self {
        ReplayPodOptions {
            namespaces: Vec::new(),
            carry_privileges_in: Vec::new(),
            node: None,
            memory_limit: DEFAULT_MEMORY_LIMIT.to_owned(),
            deadline: DEFAULT_DEADLINE,
            harness_margin: DEFAULT_HARNESS_MARGIN,
            python: DEFAULT_PYTHON.to_owned(),
            incident_id: None,
            owner_reference: true,
        }
    }
}

/// Default memory limit of a replay container.
pub const DEFAULT_MEMORY_LIMIT: &str = "32Gi";
/// Default `activeDeadlineSeconds`.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(600);
/// Default margin between the harness timeout and the pod deadline.
pub const DEFAULT_HARNESS_MARGIN: Duration = Duration::from_secs(60);
/// Default interpreter.
pub const DEFAULT_PYTHON: &str = "python";

/// Why no replay pod is built. Every variant is the caller's input or configuration, never a
/// bug: the CLI exits 2 on each.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("container {container:?} is not in pod {pod} (its containers: {available})")]
    ContainerNotFound {
        pod: String,
        container: String,
        available: String,
    },
    #[error("manifest path {path} is under no volume mount of container {container:?} (mounts: {mounts}); the replay pod could not see it")]
    ManifestNotMounted {
        path: String,
        container: String,
        mounts: String,
    },
    #[error("namespace {namespace:?} is not on the replay allow-list")]
    NamespaceNotAllowed { namespace: String },
    #[error("pod {pod} is excluded from replays ({why})")]
    PodExcluded { pod: String, why: String },
    #[error("bad input: {0}")]
    BadInput(String),
}

impl Refusal {
    /// Short stable reason for logs, metrics and the `skipped` outcome.
    pub fn reason(&self) -> &'static str {
        match self {
            Refusal::ContainerNotFound { .. } => "container_not_found",
            Refusal::ManifestNotMounted { .. } => "manifest_not_mounted",
            Refusal::NamespaceNotAllowed { .. } => "namespace_not_allowed",
            Refusal::PodExcluded { .. } => "pod_excluded",
            Refusal::BadInput(_) => "bad_input",
        }
    }
}

/// Which recorded step a replay pod runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepRef {
    /// The step's `manifest.json`, at the path the job saw it.
    Manifest(PathBuf),
    /// The recorder's root directory as the job saw it. The harness picks the newest complete
    /// entry the failing pod recorded (of `rank` when known) created no later than `before`
    /// (`run --find-under`), for debug state the daemon cannot see.
    Under {
        dir: PathBuf,
        rank: Option<u64>,
        before: Option<SystemTime>,
    },
}

impl StepRef {
    /// The path that must be under one of the container's volume mounts.
    pub fn path(&self) -> &Path {
        match self {
            StepRef::Manifest(p) => p,
            StepRef::Under { dir, .. } => dir,
        }
    }
}

/// The recorder root the pod's [`ANNOTATION_DEBUG_STATE`] names, when it is an absolute path.
pub fn annotated_debug_state(pod: &Pod) -> Option<PathBuf> {
    let v = pod
        .metadata
        .annotations
        .as_ref()?
        .get(ANNOTATION_DEBUG_STATE)?;
    let p = Path::new(v.trim());
    normalized_absolute(p)
}

/// Whether `namespace` matches a list where `"*"` matches all.
pub fn namespace_listed(list: &[String], namespace: &str) -> bool {
    list.iter().any(|n| n == "*" || n == namespace)
}

/// Builds the replay pod for `container` of `failing`, whose step manifest the job saw at
/// `manifest_path`.
pub fn replay_pod(
    failing: &Pod,
    container: &str,
    manifest_path: &Path,
    mode: Mode,
    opts: &ReplayPodOptions,
) -> Result<Pod, Refusal> {
    replay_pod_for(
        failing,
        container,
        &StepRef::Manifest(manifest_path.to_path_buf()),
        mode,
        opts,
    )
}

/// Builds the replay pod for `container` of `failing` that replays `step`.
pub fn replay_pod_for(
    failing: &Pod,
    container: &str,
    step: &StepRef,
    mode: Mode,
    opts: &ReplayPodOptions,
) -> Result<Pod, Refusal> {
    let manifest_path = step.path();
    let meta = &failing.metadata;
    let name = meta
        .name
        .as_deref()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| Refusal::BadInput("the pod has no metadata.name".into()))?;
    let namespace = meta
        .namespace
        .as_deref()
        .filter(|n| !n.is_empty())
        .ok_or_else(|| Refusal::BadInput(format!("pod {name} has no metadata.namespace")))?;
    let pod_ref = format!("{namespace}/{name}");
    if !namespace_listed(&opts.namespaces, namespace) {
        return Err(Refusal::NamespaceNotAllowed {
            namespace: namespace.to_owned(),
        });
    }
    if meta
        .labels
        .as_ref()
        .and_then(|l| l.get(LABEL_MANAGED_BY))
        .is_some_and(|v| v == MANAGED_BY)
    {
        return Err(Refusal::PodExcluded {
            pod: pod_ref,
            why: "it is a replay pod itself".into(),
        });
    }
    if meta
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_OPT_OUT))
        .is_some_and(|v| v == "disabled")
    {
        return Err(Refusal::PodExcluded {
            pod: pod_ref,
            why: format!("annotation {ANNOTATION_OPT_OUT}: disabled"),
        });
    }
    let spec = failing
        .spec
        .as_ref()
        .ok_or_else(|| Refusal::BadInput(format!("pod {pod_ref} has no spec")))?;
    let c = spec
        .containers
        .iter()
        .find(|c| c.name == container)
        .ok_or_else(|| Refusal::ContainerNotFound {
            pod: pod_ref.clone(),
            container: container.to_owned(),
            available: spec
                .containers
                .iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        })?;
    let image = c
        .image
        .as_deref()
        .filter(|i| !i.trim().is_empty())
        .ok_or_else(|| Refusal::BadInput(format!("container {container:?} has no image")))?;
    let node = opts
        .node
        .as_deref()
        .or(spec.node_name.as_deref())
        .filter(|n| !n.is_empty())
        .ok_or_else(|| {
            Refusal::BadInput(format!(
                "pod {pod_ref} has no spec.nodeName (not scheduled yet?) and no node was given"
            ))
        })?;
    let manifest = normalized_absolute(manifest_path).ok_or_else(|| {
        Refusal::BadInput(format!(
            "manifest path {} must be absolute, without `..`",
            manifest_path.display()
        ))
    })?;
    let manifest_str = manifest.to_str().ok_or_else(|| {
        Refusal::BadInput(format!(
            "manifest path {} is not UTF-8",
            manifest_path.display()
        ))
    })?;
    if opts.deadline <= opts.harness_margin || opts.deadline.as_secs() == 0 {
        return Err(Refusal::BadInput(format!(
            "the deadline ({}s) must be longer than the harness margin ({}s)",
            opts.deadline.as_secs(),
            opts.harness_margin.as_secs()
        )));
    }
    if let Some(id) = &opts.incident_id {
        if !is_label_value(id) {
            return Err(Refusal::BadInput(format!(
                "incident id {id:?} is not a valid label value"
            )));
        }
    }

    // Volumes: exactly those the container mounts, less service-account tokens.
    let token_volumes: BTreeSet<&str> = spec
        .volumes
        .iter()
        .flatten()
        .filter(|v| is_service_account_token(v))
        .map(|v| v.name.as_str())
        .collect();
    let mounts: Vec<VolumeMount> = c
        .volume_mounts
        .iter()
        .flatten()
        .filter(|m| !token_volumes.contains(m.name.as_str()) && m.mount_path != SA_TOKEN_MOUNT)
        .cloned()
        .collect();
    if !mounts
        .iter()
        .any(|m| manifest.starts_with(Path::new(&m.mount_path)))
    {
        return Err(Refusal::ManifestNotMounted {
            path: manifest_str.to_owned(),
            container: container.to_owned(),
            mounts: if mounts.is_empty() {
                "none".to_owned()
            } else {
                mounts
                    .iter()
                    .map(|m| m.mount_path.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            },
        });
    }
    if mounts.iter().any(|m| {
        Path::new(&m.mount_path).starts_with(SCRATCH_MOUNT)
            || Path::new(SCRATCH_MOUNT).starts_with(&m.mount_path) && m.mount_path != "/"
    }) {
        return Err(Refusal::BadInput(format!(
            "container {container:?} already mounts something at or around {SCRATCH_MOUNT}"
        )));
    }
    let mounted: BTreeSet<&str> = mounts.iter().map(|m| m.name.as_str()).collect();
    let mut volumes: Vec<Volume> = spec
        .volumes
        .iter()
        .flatten()
        .filter(|v| mounted.contains(v.name.as_str()))
        .cloned()
        .collect();
    if let Some(missing) = mounted
        .iter()
        .find(|n| !volumes.iter().any(|v| v.name == **n))
    {
        return Err(Refusal::BadInput(format!(
            "container {container:?} mounts volume {missing:?}, which the pod does not define"
        )));
    }
    if volumes.iter().any(|v| v.name == SCRATCH_VOLUME) {
        return Err(Refusal::BadInput(format!(
            "the pod already has a volume named {SCRATCH_VOLUME}"
        )));
    }
    // Scratch space for the harness's result and logs: the job's own volumes may be read-only,
    // and so may the image's root filesystem. An emptyDir grants nothing.
    volumes.push(Volume {
        name: SCRATCH_VOLUME.to_owned(),
        empty_dir: Some(k8s_openapi::api::core::v1::EmptyDirVolumeSource {
            size_limit: Some(Quantity("1Gi".to_owned())),
            ..Default::default()
        }),
        ..Default::default()
    });
    let mut mounts = mounts;
    mounts.push(VolumeMount {
        name: SCRATCH_VOLUME.to_owned(),
        mount_path: SCRATCH_MOUNT.to_owned(),
        ..Default::default()
    });

    let carry = namespace_listed(&opts.carry_privileges_in, namespace);
    let mut dropped: Vec<String> = Vec::new();
    let mut note = |what: String| {
        if !dropped.contains(&what) {
            dropped.push(what);
        }
    };
    let mut keep_flag = |on: Option<bool>, what: &str| -> Option<bool> {
        match on {
            Some(true) if carry => Some(true),
            Some(true) => {
                note(what.to_owned());
                None
            }
            _ => None,
        }
    };
    let host_network = keep_flag(spec.host_network, "hostNetwork");
    let host_pid = keep_flag(spec.host_pid, "hostPID");
    let host_ipc = keep_flag(spec.host_ipc, "hostIPC");
    let share_pns = keep_flag(spec.share_process_namespace, "shareProcessNamespace");
    let security_context = c
        .security_context
        .as_ref()
        .map(|sc| container_security(sc, carry, &mut note));
    if c.ports
        .iter()
        .flatten()
        .any(|p| p.host_port.is_some_and(|h| h != 0))
    {
        // Ports are never carried: the harness serves nothing. A host port was a privilege.
        note("hostPort".to_owned());
    }

    let command = harness_argv(opts, step, manifest_str, name, mode);
    let mut env: Vec<EnvVar> = c
        .env
        .iter()
        .flatten()
        .filter(|e| !MODE_OWNED_ENV.contains(&e.name.as_str()))
        .cloned()
        .collect();
    env.extend(mode_env(mode).into_iter().map(|(k, v)| EnvVar {
        name: k.to_owned(),
        value: Some(v.to_owned()),
        value_from: None,
    }));

    let mut limits = BTreeMap::new();
    limits.insert(
        "memory".to_owned(),
        Quantity(opts.memory_limit.trim().to_owned()),
    );
    if mode.is_gpu() {
        limits.insert(GPU_RESOURCE.to_owned(), Quantity("1".to_owned()));
    }
    let mut requests = BTreeMap::new();
    requests.insert(
        "memory".to_owned(),
        Quantity(opts.memory_limit.trim().to_owned()),
    );

    let (pinned, _) = pin_image(image, failing, container);
    let replay_container = Container {
        name: c.name.clone(),
        image: Some(pinned),
        image_pull_policy: Some("IfNotPresent".to_owned()),
        command: Some(command),
        args: None,
        env: (!env.is_empty()).then_some(env),
        env_from: c.env_from.clone(),
        working_dir: c.working_dir.clone(),
        volume_mounts: Some(mounts),
        resources: Some(ResourceRequirements {
            limits: Some(limits),
            requests: Some(requests),
            ..Default::default()
        }),
        security_context,
        termination_message_policy: Some("FallbackToLogsOnError".to_owned()),
        ..Default::default()
    };

    let mut labels = BTreeMap::new();
    labels.insert(LABEL_MANAGED_BY.to_owned(), MANAGED_BY.to_owned());
    labels.insert(
        "app.kubernetes.io/component".to_owned(),
        "replay".to_owned(),
    );
    if let Some(id) = &opts.incident_id {
        labels.insert(LABEL_INCIDENT.to_owned(), id.clone());
    }
    let mut annotations = BTreeMap::new();
    annotations.insert(ANNOTATION_REPLAY_OF.to_owned(), pod_ref.clone());
    annotations.insert(ANNOTATION_ORIGINAL_IMAGE.to_owned(), image.to_owned());
    annotations.insert("assertwatch.io/mode".to_owned(), mode.as_str().to_owned());
    annotations.insert(
        match step {
            StepRef::Manifest(_) => "assertwatch.io/manifest",
            StepRef::Under { .. } => ANNOTATION_DEBUG_STATE,
        }
        .to_owned(),
        manifest_str.to_owned(),
    );
    if !dropped.is_empty() {
        annotations.insert(ANNOTATION_DROPPED.to_owned(), dropped.join(","));
    }
    let owner = match (&meta.uid, opts.owner_reference) {
        (Some(uid), true) if !uid.is_empty() => Some(vec![OwnerReference {
            api_version: "v1".to_owned(),
            kind: "Pod".to_owned(),
            name: name.to_owned(),
            uid: uid.clone(),
            controller: Some(false),
            // Blocking the owner's deletion would need update rights on its finalizers.
            block_owner_deletion: Some(false),
        }]),
        _ => None,
    };
    // A fixed name (not generateName): a retried create meets 409 instead of starting a second
    // replay, and the printed pod can be given to `kubectl apply` as it is.
    let pod_name = replay_pod_name(opts.incident_id.as_deref().unwrap_or(name), mode);

    Ok(Pod {
        metadata: ObjectMeta {
            name: Some(pod_name),
            namespace: Some(namespace.to_owned()),
            labels: Some(labels),
            annotations: Some(annotations),
            owner_references: owner,
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: Some(node.to_owned()),
            restart_policy: Some("Never".to_owned()),
            automount_service_account_token: Some(false),
            active_deadline_seconds: Some(opts.deadline.as_secs().try_into().unwrap_or(i64::MAX)),
            containers: vec![replay_container],
            volumes: Some(volumes),
            security_context: spec.security_context.as_ref().map(pod_security),
            host_network,
            host_pid,
            host_ipc,
            share_process_namespace: share_pns,
            // What pulling the image and running it on this node needs, and grants nothing.
            image_pull_secrets: spec.image_pull_secrets.clone(),
            service_account_name: spec.service_account_name.clone(),
            runtime_class_name: spec.runtime_class_name.clone(),
            tolerations: spec.tolerations.clone(),
            host_users: spec.host_users,
            ..Default::default()
        }),
        status: None,
    })
}

/// The privileges `replay_pod` recorded as dropped on a replay pod it built.
pub fn dropped_privileges(replay: &Pod) -> Vec<String> {
    replay
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_DROPPED))
        .map(|s| s.split(',').map(str::to_owned).collect())
        .unwrap_or_default()
}

/// Name of the replay pod of incident (or, without one, failing pod) `id` in `mode`. A DNS-1123
/// label (at most 63 characters).
pub fn replay_pod_name(id: &str, mode: Mode) -> String {
    let mut s: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    let suffix = format!("-{}", mode.as_str());
    let prefix = "assertwatch-replay-";
    s.truncate(63 - prefix.len() - suffix.len());
    let s = s.trim_matches('-');
    format!("{prefix}{s}{suffix}")
}

/// The harness's command line as the job's image runs it (the recorder's default argv in the
/// Python package, with the scratch volume for the result and output directory).
fn harness_argv(
    opts: &ReplayPodOptions,
    step: &StepRef,
    path: &str,
    pod: &str,
    mode: Mode,
) -> Vec<String> {
    let timeout = opts.deadline.saturating_sub(opts.harness_margin);
    let mut argv: Vec<String> = vec![
        opts.python.clone(),
        "-m".into(),
        "assertwatch_replay".into(),
        "run".into(),
    ];
    match step {
        StepRef::Manifest(_) => argv.extend(["--manifest".into(), path.to_owned()]),
        StepRef::Under { rank, before, .. } => {
            // The failing pod's name: the manifest's `job.kubernetes.pod`, or its hostname.
            argv.extend([
                "--find-under".into(),
                path.to_owned(),
                "--pod".into(),
                pod.to_owned(),
            ]);
            if let Some(r) = rank {
                argv.extend(["--rank".into(), r.to_string()]);
            }
            if let Some(t) = before {
                argv.extend(["--before".into(), rfc3339_micros(*t)]);
            }
        }
    }
    argv.extend([
        "--mode".into(),
        mode.as_str().to_owned(),
        "--result".into(),
        format!("{SCRATCH_MOUNT}/result.json"),
        "--out-dir".into(),
        format!("{SCRATCH_MOUNT}/out"),
        "--timeout".into(),
        format!("{}", timeout.as_secs()),
        // The result as the log's last line: the daemon reads it with `pods/log`.
        "--print-result".into(),
    ]);
    argv
}

/// `t` as RFC 3339 UTC with microseconds, the form the harness's `--before` reads.
fn rfc3339_micros(t: SystemTime) -> String {
    k8s_openapi::chrono::DateTime::<k8s_openapi::chrono::Utc>::from(t)
        .to_rfc3339_opts(k8s_openapi::chrono::SecondsFormat::Micros, true)
}

/// Variables the replay sets per mode (the same as the local runner's), and those it removes
/// from the job's env because they described the job's GPU allocation, not the replay's.
const MODE_OWNED_ENV: &[&str] = &[
    "CUDA_VISIBLE_DEVICES",
    "NVIDIA_VISIBLE_DEVICES",
    "CUDA_LAUNCH_BLOCKING",
    "PYTORCH_USE_CUDA_DSA",
    "TORCH_USE_CUDA_DSA",
    "TORCH_COMPILE_DISABLE",
    "PYTHONUNBUFFERED",
    "PYTHONFAULTHANDLER",
];

fn mode_env(mode: Mode) -> Vec<(&'static str, &'static str)> {
    let mut env = vec![("PYTHONUNBUFFERED", "1"), ("PYTHONFAULTHANDLER", "1")];
    match mode {
        // Read once at CUDA initialisation, so they must be set before the process starts.
        Mode::SyncGpu => env.extend([
            ("CUDA_LAUNCH_BLOCKING", "1"),
            ("PYTORCH_USE_CUDA_DSA", "1"),
            ("TORCH_USE_CUDA_DSA", "1"),
            ("TORCH_COMPILE_DISABLE", "1"),
        ]),
        // An empty CUDA_VISIBLE_DEVICES hides every GPU (CUDA environment variables doc); the
        // NVIDIA container runtime exposes none with `void`.
        Mode::Cpu => env.extend([
            ("CUDA_VISIBLE_DEVICES", ""),
            ("NVIDIA_VISIBLE_DEVICES", "void"),
            ("TORCH_COMPILE_DISABLE", "1"),
        ]),
        // The harness sets the sanitizer's own variables.
        Mode::Sanitizer => {}
    }
    env
}

/// The container's security context less what adds privilege (unless carried). Everything that
/// restricts (runAsNonRoot, dropped capabilities, seccomp, read-only root, no escalation) stays,
/// so the replay passes the same Pod Security admission the job passed.
fn container_security(
    sc: &SecurityContext,
    carry: bool,
    note: &mut impl FnMut(String),
) -> SecurityContext {
    let mut out = sc.clone();
    if out.privileged == Some(true) && !carry {
        note("privileged".to_owned());
        out.privileged = None;
    }
    if let Some(caps) = out.capabilities.as_mut() {
        if let Some(add) = caps.add.as_ref().filter(|a| !a.is_empty()) {
            if !carry {
                for a in add {
                    note(format!("capability {a}"));
                }
                caps.add = None;
            }
        }
    }
    if out.proc_mount.as_deref() == Some("Unmasked") && !carry {
        note("procMount Unmasked".to_owned());
        out.proc_mount = None;
    }
    out
}

/// The pod's security context as it was: users, groups, fsGroup (so the job's files on its
/// volumes read as they did), seccomp and sysctls. Nothing in it widens the job's rights.
fn pod_security(sc: &PodSecurityContext) -> PodSecurityContext {
    sc.clone()
}

/// Whether a volume carries a service-account token (a projected `serviceAccountToken` source,
/// as in the `kube-api-access-*` volume the API server adds, or a legacy token secret).
fn is_service_account_token(v: &Volume) -> bool {
    v.projected.as_ref().is_some_and(|p| {
        p.sources
            .iter()
            .flatten()
            .any(|s| s.service_account_token.is_some())
    }) || v
        .secret
        .as_ref()
        .and_then(|s| s.secret_name.as_deref())
        .is_some_and(|n| n.contains("-token-"))
        && v.name.contains("token")
}

/// Replaces the tag of `image` with the digest the kubelet reported for `container`
/// (`status.containerStatuses[].imageID`, e.g. `repo@sha256:…`), so the replay runs the exact
/// bytes the job ran even if the tag moved. Returns the image and whether it was pinned.
pub fn pin_image(image: &str, pod: &Pod, container: &str) -> (String, bool) {
    let digest = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().find(|s| s.name == container))
        .map(|s| s.image_id.as_str())
        .and_then(|id| id.rsplit_once('@').map(|(_, d)| d))
        .filter(|d| is_digest(d));
    match digest {
        Some(d) => (format!("{}@{d}", image_repository(image)), true),
        None => (image.to_owned(), false),
    }
}

/// `image` without its tag and digest (a colon after the last `/` starts the tag; one before
/// it is a registry port).
fn image_repository(image: &str) -> &str {
    let no_digest = image.split_once('@').map_or(image, |(r, _)| r);
    let last_slash = no_digest.rfind('/').map_or(0, |i| i + 1);
    match no_digest[last_slash..].rfind(':') {
        Some(i) => &no_digest[..last_slash + i],
        None => no_digest,
    }
}

fn is_digest(d: &str) -> bool {
    d.strip_prefix("sha256:")
        .is_some_and(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// `p` when absolute, with `.` removed and no `..`.
fn normalized_absolute(p: &Path) -> Option<PathBuf> {
    if !p.is_absolute() {
        return None;
    }
    let mut out = PathBuf::from("/");
    for c in p.components() {
        match c {
            Component::RootDir | Component::CurDir => {}
            Component::Normal(s) => out.push(s),
            Component::ParentDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// A Kubernetes label value: at most 63 characters, alphanumerics with `-_.` inside.
pub fn is_label_value(v: &str) -> bool {
    v.len() <= 63
        && (v.is_empty()
            || (v
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
                && v.as_bytes()[0].is_ascii_alphanumeric()
                && v.as_bytes()[v.len() - 1].is_ascii_alphanumeric()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: serde_json::Value) -> Pod {
        serde_json::from_value(v).unwrap()
    }

    fn base() -> serde_json::Value {
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "train-0", "namespace": "ml", "uid": "1111-2222"},
            "spec": {
                "nodeName": "gpu-node-7",
                "hostNetwork": true,
                "containers": [{
                    "name": "trainer", "image": "registry.local:5000/team/train:v3",
                    "env": [{"name": "CUDA_VISIBLE_DEVICES", "value": "0,1"}, {"name": "A", "value": "b"}],
                    "securityContext": {"runAsUser": 1000, "privileged": true,
                        "capabilities": {"add": ["IPC_LOCK"], "drop": ["NET_RAW"]}},
                    "volumeMounts": [
                        {"name": "data", "mountPath": "/data"},
                        {"name": "kube-api-access-x", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}
                    ]
                }, {"name": "sidecar", "image": "envoy"}],
                "volumes": [
                    {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                    {"name": "unused", "emptyDir": {}},
                    {"name": "kube-api-access-x", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}
                ]
            },
            "status": {"containerStatuses": [{"name": "trainer", "image": "x", "imageID":
                format!("registry.local:5000/team/train@sha256:{}", "a".repeat(64)),
                "ready": false, "restartCount": 0}]}
        })
    }

    fn opts() -> ReplayPodOptions {
        ReplayPodOptions {
            namespaces: vec!["*".into()],
            ..Default::default()
        }
    }

    #[test]
    fn pins_digest_keeps_registry_port() {
        let p = replay_pod(
            &pod(base()),
            "trainer",
            Path::new("/data/s/manifest.json"),
            Mode::SyncGpu,
            &opts(),
        )
        .unwrap();
        let c = &p.spec.as_ref().unwrap().containers[0];
        assert_eq!(
            c.image.as_deref().unwrap(),
            format!("registry.local:5000/team/train@sha256:{}", "a".repeat(64))
        );
        assert_eq!(image_repository("a/b:1@sha256:x"), "a/b");
        assert_eq!(image_repository("host:5000/b"), "host:5000/b");
    }

    #[test]
    fn debug_state_directory_lets_the_harness_find_the_step() {
        let mut v = base();
        v["metadata"]["annotations"] = json!({ANNOTATION_DEBUG_STATE: "/data/./debug/"});
        let failing = pod(v);
        let dir = annotated_debug_state(&failing).unwrap();
        assert_eq!(dir, Path::new("/data/debug"));
        let at = SystemTime::UNIX_EPOCH + Duration::from_micros(1_796_275_257_123_456);
        let step = StepRef::Under {
            dir,
            rank: Some(3),
            before: Some(at),
        };
        let p = replay_pod_for(&failing, "trainer", &step, Mode::Cpu, &opts()).unwrap();
        let argv = p.spec.as_ref().unwrap().containers[0]
            .command
            .clone()
            .unwrap();
        let tail: Vec<&str> = argv[4..12].iter().map(String::as_str).collect();
        assert_eq!(
            tail,
            [
                "--find-under",
                "/data/debug",
                "--pod",
                "train-0",
                "--rank",
                "3",
                "--before",
                "2026-12-03T05:20:57.123456Z"
            ]
        );
        assert!(!argv.iter().any(|a| a == "--manifest"));
        let ann = p.metadata.annotations.unwrap();
        assert_eq!(ann[ANNOTATION_DEBUG_STATE], "/data/debug");
        // Outside every mount: refused like a manifest would be.
        let outside = StepRef::Under {
            dir: "/scratch/debug".into(),
            rank: None,
            before: None,
        };
        let err = replay_pod_for(&failing, "trainer", &outside, Mode::Cpu, &opts()).unwrap_err();
        assert_eq!(err.reason(), "manifest_not_mounted");
        // Relative or `..` paths in the annotation are ignored.
        for bad in ["debug", "/data/../etc", ""] {
            let mut v = base();
            v["metadata"]["annotations"] = json!({ANNOTATION_DEBUG_STATE: bad});
            assert_eq!(annotated_debug_state(&pod(v)), None, "{bad}");
        }
    }

    #[test]
    fn drops_privileges_and_token_and_unmounted_volumes() {
        let p = replay_pod(
            &pod(base()),
            "trainer",
            Path::new("/data/s/manifest.json"),
            Mode::Cpu,
            &opts(),
        )
        .unwrap();
        assert_eq!(
            dropped_privileges(&p),
            vec!["hostNetwork", "privileged", "capability IPC_LOCK"]
        );
        let spec = p.spec.unwrap();
        assert_eq!(spec.host_network, None);
        let vols: Vec<_> = spec
            .volumes
            .unwrap()
            .iter()
            .map(|v| v.name.clone())
            .collect();
        assert_eq!(vols, vec!["data", SCRATCH_VOLUME]);
        let c = &spec.containers[0];
        let sc = c.security_context.as_ref().unwrap();
        assert_eq!(sc.run_as_user, Some(1000));
        assert_eq!(sc.privileged, None);
        assert_eq!(
            sc.capabilities.as_ref().unwrap().drop,
            Some(vec!["NET_RAW".into()])
        );
        assert!(!c
            .resources
            .as_ref()
            .unwrap()
            .limits
            .as_ref()
            .unwrap()
            .contains_key(GPU_RESOURCE));
        let env = c.env.as_ref().unwrap();
        assert!(env
            .iter()
            .any(|e| e.name == "CUDA_VISIBLE_DEVICES" && e.value.as_deref() == Some("")));
        assert_eq!(
            env.iter()
                .filter(|e| e.name == "CUDA_VISIBLE_DEVICES")
                .count(),
            1
        );
    }

    #[test]
    fn carries_privileges_when_the_namespace_opted_in() {
        let o = ReplayPodOptions {
            carry_privileges_in: vec!["ml".into()],
            ..opts()
        };
        let p = replay_pod(
            &pod(base()),
            "trainer",
            Path::new("/data/m.json"),
            Mode::SyncGpu,
            &o,
        )
        .unwrap();
        assert!(dropped_privileges(&p).is_empty());
        assert_eq!(p.spec.unwrap().host_network, Some(true));
    }

    #[test]
    fn refusals() {
        let p = pod(base());
        let r = |c: &str, m: &str, o: &ReplayPodOptions| {
            replay_pod(&p, c, Path::new(m), Mode::Cpu, o).unwrap_err()
        };
        assert_eq!(
            r("nope", "/data/m", &opts()).reason(),
            "container_not_found"
        );
        assert_eq!(
            r("trainer", "/etc/m", &opts()).reason(),
            "manifest_not_mounted"
        );
        // The token mount does not count as a place for the manifest.
        assert_eq!(
            r(
                "trainer",
                "/var/run/secrets/kubernetes.io/serviceaccount/m",
                &opts()
            )
            .reason(),
            "manifest_not_mounted"
        );
        assert_eq!(
            r("trainer", "/data/../etc/m", &opts()).reason(),
            "bad_input"
        );
        assert_eq!(r("trainer", "data/m", &opts()).reason(), "bad_input");
        let none = ReplayPodOptions::default();
        assert_eq!(
            r("trainer", "/data/m", &none).reason(),
            "namespace_not_allowed"
        );
        let bad_id = ReplayPodOptions {
            incident_id: Some("not a label".into()),
            ..opts()
        };
        assert_eq!(r("trainer", "/data/m", &bad_id).reason(), "bad_input");
        let mut v = base();
        v["metadata"]["annotations"] = json!({ANNOTATION_OPT_OUT: "disabled"});
        assert_eq!(
            replay_pod(&pod(v), "trainer", Path::new("/data/m"), Mode::Cpu, &opts())
                .unwrap_err()
                .reason(),
            "pod_excluded"
        );
        let mut v = base();
        v["spec"]["nodeName"] = serde_json::Value::Null;
        assert_eq!(
            replay_pod(&pod(v), "trainer", Path::new("/data/m"), Mode::Cpu, &opts())
                .unwrap_err()
                .reason(),
            "bad_input"
        );
    }

    #[test]
    fn names_are_dns_labels() {
        let n = replay_pod_name(&"Inc_42.".repeat(20), Mode::SyncGpu);
        assert!(n.len() <= 63, "{n}");
        assert!(n.ends_with("-sync-gpu"));
        assert!(n
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'));
        assert!(is_label_value("abc-1.2_x"));
        assert!(!is_label_value("-a"));
    }
}
