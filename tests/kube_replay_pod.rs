//! `assertwatch kube replay-pod` on realistic pods of several controllers: what the replay pod
//! carries and drops, its refusals (exit 2), and every output checked by `kubernetes-validate
//! --strict` against the API level the types are compiled for.

#![allow(clippy::disallowed_methods)]

mod common;

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/kube")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn replay_pod(args: &[&str]) -> Out {
    let mut all = vec!["kube", "replay-pod"];
    all.extend_from_slice(args);
    let o = common::run(&all, None);
    Out {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// Runs `kubernetes-validate --strict` on the pod text; skips (outside CI) when it is missing.
fn validate(text: &str, ext: &str) {
    let Some(tool) = common::require_tool("kubernetes-validate") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let path: PathBuf = dir.path().join(format!("replay.{ext}"));
    std::fs::write(&path, text).unwrap();
    let o = Command::new(tool)
        .args(["--strict", "--kubernetes-version", "1.32.0"])
        .arg(&path)
        .output()
        .expect("run kubernetes-validate");
    assert!(
        o.status.success(),
        "kubernetes-validate rejected the replay pod:\n{}{}\n---\n{text}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Derives, validates and returns the replay pod as JSON.
fn derive(file: &str, container: &str, manifest: &str, mode: &str, extra: &[&str]) -> Value {
    let f = fixture(file);
    let mut args = vec![
        "--pod",
        &f,
        "--container",
        container,
        "--manifest-path",
        manifest,
        "--mode",
        mode,
    ];
    args.extend_from_slice(extra);
    let yaml = replay_pod(&args);
    assert_eq!(yaml.code, 0, "stderr: {}", yaml.stderr);
    validate(&yaml.stdout, "yaml");
    args.extend_from_slice(&["--format", "json"]);
    let json = replay_pod(&args);
    assert_eq!(json.code, 0, "stderr: {}", json.stderr);
    validate(&json.stdout, "json");
    let from_yaml: Value = serde_yaml::from_str(&yaml.stdout).unwrap();
    let from_json: Value = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(from_yaml, from_json, "both formats say the same");
    from_json
}

fn volumes(p: &Value) -> Vec<String> {
    p["spec"]["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap().to_owned())
        .collect()
}

fn mounts(p: &Value) -> Vec<(String, String)> {
    p["spec"]["containers"][0]["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["name"].as_str().unwrap().to_owned(),
                m["mountPath"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn env(p: &Value, name: &str) -> Option<Value> {
    p["spec"]["containers"][0]["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == name)
        .cloned()
}

#[test]
fn pytorchjob_worker_with_pvc_configmap_shm_and_token() {
    let manifest = "/checkpoints/assertwatch/llama-ft/rank-00003/step-000812/manifest.json";
    let p = derive(
        "pytorchjob-worker.yaml",
        "pytorch",
        manifest,
        "sync-gpu",
        &["--incident", "inc-20261130-0042", "--timeout", "15m"],
    );
    assert_eq!(p["apiVersion"], "v1");
    assert_eq!(p["kind"], "Pod");
    let m = &p["metadata"];
    assert_eq!(m["namespace"], "ml-research");
    assert_eq!(m["name"], "assertwatch-replay-inc-20261130-0042-sync-gpu");
    assert_eq!(m["labels"]["app.kubernetes.io/managed-by"], "assertwatch");
    assert_eq!(m["labels"]["assertwatch.io/incident"], "inc-20261130-0042");
    assert_eq!(m["ownerReferences"][0]["kind"], "Pod");
    assert_eq!(m["ownerReferences"][0]["name"], "llama-ft-worker-3");
    assert_eq!(
        m["ownerReferences"][0]["uid"],
        "6f1c2a9e-3b7d-4c1e-9a55-0e2f8f3b7c11"
    );
    assert_eq!(
        m["annotations"]["assertwatch.io/replay-of"],
        "ml-research/llama-ft-worker-3"
    );
    assert!(m["annotations"]
        .get("assertwatch.io/dropped-privileges")
        .is_none());

    let s = &p["spec"];
    assert_eq!(s["nodeName"], "gpu-a100-node-17");
    assert_eq!(s["restartPolicy"], "Never");
    assert_eq!(s["automountServiceAccountToken"], false);
    assert_eq!(s["activeDeadlineSeconds"], 900);
    assert_eq!(s["securityContext"]["fsGroup"], 2000);
    assert_eq!(s["imagePullSecrets"][0]["name"], "nvcr-pull");
    assert!(s.get("priorityClassName").is_none());
    assert_eq!(s["containers"].as_array().unwrap().len(), 1);

    // Only the volumes the container mounted, less the projected token, plus scratch.
    assert_eq!(
        volumes(&p),
        [
            "checkpoints",
            "train-config",
            "dshm",
            "assertwatch-replay-scratch"
        ]
    );
    assert_eq!(
        s["volumes"][0]["persistentVolumeClaim"]["claimName"],
        "llama-ft-checkpoints"
    );
    assert_eq!(s["volumes"][2]["emptyDir"]["medium"], "Memory");
    assert_eq!(
        mounts(&p),
        [
            ("checkpoints".into(), "/checkpoints".into()),
            ("train-config".into(), "/etc/train".into()),
            ("dshm".into(), "/dev/shm".into()),
            (
                "assertwatch-replay-scratch".into(),
                "/var/run/assertwatch-replay".into()
            ),
        ]
    );

    let c = &s["containers"][0];
    assert_eq!(c["name"], "pytorch");
    assert_eq!(
        c["image"],
        "nvcr.io/nvidia/pytorch@sha256:8a3c5f6d0e1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5"
    );
    assert_eq!(
        m["annotations"]["assertwatch.io/original-image"],
        "nvcr.io/nvidia/pytorch:24.05-py3"
    );
    assert_eq!(c["workingDir"], "/workspace/llama-ft");
    assert_eq!(c["securityContext"]["runAsUser"], 1000);
    assert_eq!(c["securityContext"]["runAsGroup"], 1000);
    assert_eq!(c["envFrom"][0]["configMapRef"]["name"], "llama-ft-env");
    assert!(c.get("args").is_none());
    assert!(c.get("ports").is_none());
    let argv: Vec<&str> = c["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(
        argv,
        [
            "python",
            "-m",
            "assertwatch_replay",
            "run",
            "--manifest",
            manifest,
            "--mode",
            "sync-gpu",
            "--result",
            "/var/run/assertwatch-replay/result.json",
            "--out-dir",
            "/var/run/assertwatch-replay/out",
            "--timeout",
            "840",
            "--print-result",
        ]
    );
    assert_eq!(c["resources"]["limits"]["nvidia.com/gpu"], "1");
    assert_eq!(c["resources"]["limits"]["memory"], "32Gi");
    assert!(c["resources"]["limits"].get("cpu").is_none());
    assert_eq!(env(&p, "RANK").unwrap()["value"], "3");
    assert_eq!(
        env(&p, "POD_NAME").unwrap()["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.name"
    );
    assert_eq!(env(&p, "CUDA_LAUNCH_BLOCKING").unwrap()["value"], "1");
    // The job's own value is replaced, not duplicated.
    assert_eq!(env(&p, "PYTHONUNBUFFERED").unwrap()["value"], "1");
}

#[test]
fn jobset_pod_keeps_hostpath_and_runtime_class_and_drops_the_jobs_gpu_pinning() {
    let p = derive(
        "jobset-pod.yaml",
        "trainer",
        "/mnt/scratch/aw/pretrain/rank-00002/step-000100/manifest.json",
        "sanitizer",
        &["--node", "h100-node-042"],
    );
    assert_eq!(p["metadata"]["namespace"], "foundation");
    // Without an incident id the name comes from the failing pod.
    assert_eq!(
        p["metadata"]["name"],
        "assertwatch-replay-pretrain-workers-0-2-x7k2p-sanitizer"
    );
    let s = &p["spec"];
    assert_eq!(s["runtimeClassName"], "nvidia");
    assert_eq!(s["serviceAccountName"], "pretrain-sa");
    assert!(s.get("hostname").is_none() && s.get("subdomain").is_none());
    assert_eq!(
        volumes(&p),
        ["scratch", "datasets", "assertwatch-replay-scratch"]
    );
    // A hostPath the job had is carried exactly as it was.
    assert_eq!(s["volumes"][0]["hostPath"]["path"], "/mnt/nvme0/scratch");
    assert_eq!(s["volumes"][0]["hostPath"]["type"], "DirectoryOrCreate");
    assert_eq!(
        s["containers"][0]["resources"]["limits"]["nvidia.com/gpu"],
        "1"
    );
    assert_eq!(
        s["containers"][0]["image"],
        "us-docker.pkg.dev/acme/train/pretrain@sha256:1111111111111111111111111111111111111111111111111111111111111111"
    );
    assert!(env(&p, "CUDA_VISIBLE_DEVICES").is_none());
    assert!(env(&p, "JOB_COMPLETION_INDEX").is_some());
}

#[test]
fn plain_job_pod_under_restricted_pod_security_stays_restricted() {
    let p = derive(
        "job-pod.yaml",
        "main",
        "/shared/runs/assertwatch/step-000007/manifest.json",
        "cpu",
        &[],
    );
    let s = &p["spec"];
    assert_eq!(s["securityContext"]["runAsNonRoot"], true);
    assert_eq!(
        s["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    let c = &s["containers"][0];
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(c["securityContext"]["capabilities"]["drop"][0], "ALL");
    // Already pinned by digest: unchanged.
    assert_eq!(
        c["image"],
        "ghcr.io/acme/nlp/finetune@sha256:2222222222222222222222222222222222222222222222222222222222222222"
    );
    // CPU mode: no GPU, and CUDA sees none.
    assert!(c["resources"]["limits"].get("nvidia.com/gpu").is_none());
    assert_eq!(env(&p, "CUDA_VISIBLE_DEVICES").unwrap()["value"], "");
    let shared = c["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "shared")
        .unwrap();
    assert_eq!(shared["subPath"], "finetune-bert");
    assert_eq!(
        s["volumes"][1]["nfs"]["server"],
        "nfs.storage.svc.cluster.local"
    );
}

#[test]
fn init_containers_and_sidecars_are_not_carried() {
    let p = derive(
        "init-sidecars.yaml",
        "train",
        "/var/lib/assertwatch-debug/vision/rank-00000/step-000050/manifest.json",
        "sync-gpu",
        &[],
    );
    let s = &p["spec"];
    assert!(s.get("initContainers").is_none());
    assert_eq!(s["containers"].as_array().unwrap().len(), 1);
    assert_eq!(s["containers"][0]["name"], "train");
    // The sidecars' config volumes are not carried; the shared ones the trainer mounts are.
    assert_eq!(volumes(&p), ["data", "debug", "assertwatch-replay-scratch"]);
    assert_eq!(
        s["containers"][0]["image"],
        "registry.acme.internal:5000/vision/train@sha256:5555555555555555555555555555555555555555555555555555555555555555"
    );
    // The manifest may sit on any volume the trainer mounts, an emptyDir shared with an init
    // container included.
    let p = derive("init-sidecars.yaml", "train", "/data/m.json", "cpu", &[]);
    assert_eq!(
        p["metadata"]["ownerReferences"][0]["uid"],
        "77778888-9999-4aaa-8bbb-ccccddddeeee"
    );
}

#[test]
fn host_network_privileged_pod_replays_without_its_privileges_and_says_so() {
    let f = fixture("hostnetwork.json");
    let args = [
        "--pod",
        &f,
        "--container",
        "worker",
        "--manifest-path",
        "/results/aw/step-000003/manifest.json",
        "--mode",
        "sync-gpu",
    ];
    let o = replay_pod(&args);
    assert_eq!(o.code, 0, "{}", o.stderr);
    validate(&o.stdout, "yaml");
    for what in [
        "hostNetwork",
        "hostIPC",
        "privileged",
        "capability IPC_LOCK",
        "capability SYS_RESOURCE",
        "hostPort",
    ] {
        assert!(o.stderr.contains(what), "{what} not reported: {}", o.stderr);
    }
    let p: Value = serde_yaml::from_str(&o.stdout).unwrap();
    let s = &p["spec"];
    assert!(s.get("hostNetwork").is_none());
    assert!(s.get("hostIPC").is_none());
    assert!(s.get("dnsPolicy").is_none());
    let c = &s["containers"][0];
    assert!(c.get("ports").is_none());
    assert!(c["securityContext"].get("privileged").is_none());
    assert!(c["securityContext"]["capabilities"].get("add").is_none());
    // The RDMA device and its hostPath are what the container mounted: carried as they were;
    // the RDMA resource is not (a single-rank replay does not need it).
    assert_eq!(
        volumes(&p),
        ["results", "dev-infiniband", "assertwatch-replay-scratch"]
    );
    assert!(c["resources"]["limits"]
        .get("rdma/hca_shared_devices_a")
        .is_none());
    // The image ID is a local image id, not a repository digest: the tag stays.
    assert_eq!(c["image"], "nvcr.io/nvidia/pytorch:24.05-py3");
    let dropped = p["metadata"]["annotations"]["assertwatch.io/dropped-privileges"]
        .as_str()
        .unwrap();
    assert_eq!(
        dropped,
        "hostNetwork,hostIPC,privileged,capability IPC_LOCK,capability SYS_RESOURCE,hostPort"
    );
}

#[test]
fn a_namespace_that_opted_in_keeps_its_privileges() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.yaml");
    std::fs::write(
        &cfg,
        "kubernetes:\n  enabled: true\nrepro:\n  kubernetes:\n    enabled: true\n    namespaces: [hpc]\n    carry_privileges_in: [hpc]\n    memory_limit: 64Gi\n",
    )
    .unwrap();
    let p = derive(
        "hostnetwork.json",
        "worker",
        "/results/m.json",
        "sync-gpu",
        &["--config", cfg.to_str().unwrap()],
    );
    assert_eq!(p["spec"]["hostNetwork"], true);
    assert_eq!(
        p["spec"]["containers"][0]["securityContext"]["privileged"],
        true
    );
    assert_eq!(
        p["spec"]["containers"][0]["resources"]["limits"]["memory"],
        "64Gi"
    );
    // Ports are never carried (the harness serves nothing), so the host port is still listed.
    assert_eq!(
        p["metadata"]["annotations"]["assertwatch.io/dropped-privileges"],
        "hostPort"
    );
}

#[test]
fn refusals_exit_2_and_name_the_reason() {
    let pt = fixture("pytorchjob-worker.yaml");
    let base = |container: &str, manifest: &str| {
        vec![
            "--pod".to_owned(),
            pt.clone(),
            "--container".to_owned(),
            container.to_owned(),
            "--manifest-path".to_owned(),
            manifest.to_owned(),
            "--mode".to_owned(),
            "cpu".to_owned(),
        ]
    };
    let check = |args: Vec<String>, reason: &str| {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = replay_pod(&a);
        assert_eq!(
            o.code, 2,
            "{reason}: stdout {} stderr {}",
            o.stdout, o.stderr
        );
        assert!(o.stdout.is_empty(), "nothing printed on a refusal");
        assert!(o.stderr.contains(reason), "{reason} not in: {}", o.stderr);
    };
    // Not under any mount of that container (the job wrote it somewhere the replay cannot see).
    check(
        base("pytorch", "/tmp/aw/manifest.json"),
        "manifest_not_mounted",
    );
    // The token's mount is never a place to read a manifest from.
    check(
        base(
            "pytorch",
            "/var/run/secrets/kubernetes.io/serviceaccount/manifest.json",
        ),
        "manifest_not_mounted",
    );
    check(
        base("tensorflow", "/checkpoints/m.json"),
        "container_not_found",
    );
    check(base("pytorch", "checkpoints/m.json"), "bad_input");
    check(base("pytorch", "/checkpoints/../etc/m.json"), "bad_input");
    let mut short = base("pytorch", "/checkpoints/m.json");
    short.extend(["--timeout".to_owned(), "30s".to_owned()]);
    check(short, "bad_input");

    // The configuration's allow-list excludes the namespace.
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.yaml");
    std::fs::write(
        &cfg,
        "kubernetes:\n  enabled: true\nrepro:\n  kubernetes:\n    enabled: true\n    namespaces: [other]\n",
    )
    .unwrap();
    let mut args = base("pytorch", "/checkpoints/m.json");
    args.extend(["--config".to_owned(), cfg.to_string_lossy().into_owned()]);
    check(args, "namespace_not_allowed");

    // Bad input files.
    let bad = dir.path().join("list.yaml");
    std::fs::write(&bad, "apiVersion: v1\nkind: List\nitems: []\n").unwrap();
    let mut args = base("pytorch", "/checkpoints/m.json");
    args[1] = bad.to_string_lossy().into_owned();
    check(args, "bad_input");
    let mut args = base("pytorch", "/checkpoints/m.json");
    args[1] = dir
        .path()
        .join("missing.yaml")
        .to_string_lossy()
        .into_owned();
    check(args, "cannot read");
}

#[test]
fn reads_the_pod_from_stdin() {
    let text = std::fs::read(fixture("job-pod.yaml")).unwrap();
    let o = common::run(
        &[
            "kube",
            "replay-pod",
            "--pod",
            "-",
            "--container",
            "main",
            "--manifest-path",
            "/work/m.json",
            "--mode",
            "cpu",
            "--format",
            "json",
        ],
        Some(&text),
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let p: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(p["metadata"]["namespace"], "team-nlp");
}

#[test]
fn debug_state_on_a_pvc_the_daemon_cannot_see_is_searched_by_the_harness() {
    let f = fixture("pytorchjob-worker.yaml");
    let base = [
        "--pod",
        f.as_str(),
        "--container",
        "pytorch",
        "--mode",
        "cpu",
    ];
    let mut args = base.to_vec();
    args.extend_from_slice(&["--debug-state", "/checkpoints/assertwatch", "--rank", "3"]);
    let o = replay_pod(&args);
    assert_eq!(o.code, 0, "stderr: {}", o.stderr);
    validate(&o.stdout, "yaml");
    let p: Value = serde_yaml::from_str(&o.stdout).unwrap();
    let cmd: Vec<&str> = p["spec"]["containers"][0]["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let at = |flag: &str| cmd.iter().position(|a| *a == flag).map(|i| cmd[i + 1]);
    assert_eq!(at("--find-under"), Some("/checkpoints/assertwatch"));
    assert_eq!(at("--pod"), Some("llama-ft-worker-3"));
    assert_eq!(at("--rank"), Some("3"));
    assert_eq!(at("--manifest"), None);
    assert_eq!(
        p["metadata"]["annotations"]["assertwatch.io/debug-state"],
        "/checkpoints/assertwatch"
    );
    // The PVC that holds it is mounted where the job had it.
    assert!(mounts(&p).contains(&("checkpoints".to_owned(), "/checkpoints".to_owned())));

    // Neither option and no annotation on the pod: refused, naming what is missing.
    let o = replay_pod(&base);
    assert_eq!(o.code, 2, "stdout: {}", o.stdout);
    assert!(
        o.stderr.contains("assertwatch.io/debug-state"),
        "{}",
        o.stderr
    );
    // A directory under no mount of the container: refused like a manifest would be.
    let mut args = base.to_vec();
    args.extend_from_slice(&["--debug-state", "/scratch/debug"]);
    let o = replay_pod(&args);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("manifest_not_mounted"), "{}", o.stderr);
    // --rank belongs to a directory search, not to a manifest.
    let mut args = base.to_vec();
    args.extend_from_slice(&["--manifest-path", "/checkpoints/m.json", "--rank", "1"]);
    assert_eq!(replay_pod(&args).code, 2);
}
