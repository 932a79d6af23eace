//! GPU process → Kubernetes pod attribution.
//!
//! NVML reports pids only. The pod comes from two places on the node, with no API call:
//!
//! 1. `<proc_root>/<pid>/cgroup` holds the pod UID in the cgroup path. The kubelet writes it in
//!    two forms: the systemd driver's `kubepods-burstable-pod<uid>.slice` (dashes in the UID
//!    written as underscores) and the cgroupfs driver's `/kubepods/burstable/pod<uid>/<id>`.
//!    The container id follows as the last segment (`cri-containerd-<id>.scope`, `docker-<id>.scope`
//!    or a bare id).
//! 2. The kubelet's pod log directories name the pod:
//!    `/var/log/pods/<namespace>_<pod>_<uid>/<container>/<n>.log` (kubelet
//!    `pkg/kubelet/kuberuntime/helpers.go`, `BuildPodLogsDirectory` and
//!    `BuildContainerLogsDirectory`). When a pod has several containers, the legacy symlinks
//!    `/var/log/containers/<pod>_<namespace>_<container>-<container id>.log` tell which one holds
//!    the process (kubelet `pkg/kubelet/kuberuntime/legacy.go`, `legacyLogSymlink`).
//!
//! The pod log layout of point 2 is parsed here only, for the daemon as well: it names the pod of
//! a followed log file with [`parse_pod_log_path`].
//!
//! It is a separate file because it is the only GPU code that reads the host filesystem; tests
//! point it at a temporary tree.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::{GpuProcess, PodRef};

/// Most pods remembered; past it the map is rebuilt from the next scan.
const MAX_PODS: usize = 4096;
/// Most directory entries read in one scan of the pod log root.
const MAX_SCAN_ENTRIES: usize = 16384;
/// A pod UID not found in the log root triggers at most one rescan per this period.
const RESCAN_PERIOD: Duration = Duration::from_secs(10);
/// Bytes read from one `/proc/<pid>/cgroup`.
const MAX_CGROUP_BYTES: u64 = 64 * 1024;

/// Where a process runs, as read from its cgroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupPod {
    /// Pod UID with dashes, e.g. `0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b`.
    pub uid: String,
    /// Container runtime id, where the path carries one.
    pub container_id: Option<String>,
}

/// Finds the pod UID (and container id) in the text of a `/proc/<pid>/cgroup` file. `None` for a
/// process outside Kubernetes.
pub fn parse_cgroup(text: &str) -> Option<CgroupPod> {
    text.lines().find_map(|line| {
        // `hierarchy-id:controllers:path`; the path may itself contain ':' (never in kubepods).
        let path = line.splitn(3, ':').nth(2)?;
        if !path.contains("kubepods") {
            return None;
        }
        let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let (pos, uid) = segments
            .iter()
            .enumerate()
            .rev()
            .find_map(|(i, seg)| pod_uid_of(seg).map(|uid| (i, uid)))?;
        let container_id = segments.get(pos + 1).and_then(|s| container_id_of(s));
        Some(CgroupPod { uid, container_id })
    })
}

fn pod_uid_of(segment: &str) -> Option<String> {
    let seg = segment.strip_suffix(".slice").unwrap_or(segment);
    let raw = if let Some(rest) = seg.strip_prefix("pod") {
        rest
    } else {
        &seg[seg.rfind("-pod")? + 4..]
    };
    let uid = raw.replace('_', "-");
    is_uid(&uid).then_some(uid)
}

fn is_uid(s: &str) -> bool {
    s.len() == 36
        && s.char_indices().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => c == '-',
            _ => c.is_ascii_hexdigit(),
        })
}

fn container_id_of(segment: &str) -> Option<String> {
    let seg = segment.strip_suffix(".scope").unwrap_or(segment);
    let id = seg.rsplit('-').next().unwrap_or(seg);
    (id.len() >= 12 && id.chars().all(|c| c.is_ascii_hexdigit())).then(|| id.to_owned())
}

/// The parts of a kubelet pod log directory name, `<namespace>_<pod>_<uid>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodDirName<'a> {
    pub namespace: &'a str,
    pub pod: &'a str,
    pub uid: &'a str,
}

/// Splits a pod log directory name; `None` unless it is `<namespace>_<pod>_<uid>` with all three
/// parts non-empty. Namespaces and pod names are DNS labels and subdomains and never contain
/// `_`, so the split is unambiguous.
pub fn parse_pod_dir_name(name: &str) -> Option<PodDirName<'_>> {
    let mut parts = name.splitn(3, '_');
    let d = PodDirName {
        namespace: parts.next()?,
        pod: parts.next()?,
        uid: parts.next()?,
    };
    (!d.namespace.is_empty() && !d.pod.is_empty() && !d.uid.is_empty()).then_some(d)
}

/// Namespace, pod, UID and container of a pod log file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodLogRef {
    pub namespace: String,
    pub pod: String,
    pub uid: String,
    pub container: String,
}

/// Parses a pod log file path, `.../pods/<namespace>_<pod>_<uid>/<container>/<n>.log`; `None`
/// for any other path.
pub fn parse_pod_log_path(path: &Path) -> Option<PodLogRef> {
    let comps: Vec<&str> = path.iter().filter_map(|c| c.to_str()).collect();
    let i = comps.windows(2).position(|w| w[0] == "pods")?;
    let dir = parse_pod_dir_name(comps.get(i + 1)?)?;
    let container = comps.get(i + 2)?;
    comps.get(i + 3)?;
    Some(PodLogRef {
        namespace: dir.namespace.to_owned(),
        pod: dir.pod.to_owned(),
        uid: dir.uid.to_owned(),
        container: (*container).to_owned(),
    })
}

#[derive(Debug, Clone)]
struct PodDir {
    namespace: String,
    pod: String,
    containers: Vec<String>,
}

/// Maps pids to pods, remembering what it learnt from the pod log root (bounded).
#[derive(Debug)]
pub struct PodResolver {
    proc_root: PathBuf,
    pod_log_root: PathBuf,
    pods: HashMap<String, PodDir>,
    last_scan: Option<Instant>,
}

impl PodResolver {
    /// A resolver over `proc_root` (normally `/proc`) and `pod_log_root` (normally
    /// `/var/log/pods`).
    pub fn new(proc_root: PathBuf, pod_log_root: PathBuf) -> PodResolver {
        PodResolver {
            proc_root,
            pod_log_root,
            pods: HashMap::new(),
            last_scan: None,
        }
    }

    /// Fills `pod` for every process that has none and whose pod can be found. Failures (no such
    /// pid, unreadable files) leave the process unattributed; they are normal for short-lived
    /// processes and hosts without Kubernetes.
    pub fn attribute(&mut self, processes: &mut [GpuProcess]) {
        for p in processes.iter_mut().filter(|p| p.pod.is_none()) {
            p.pod = self.resolve(p.pid);
        }
    }

    /// The pod of `pid`, where it can be found.
    pub fn resolve(&mut self, pid: u32) -> Option<PodRef> {
        let cgroup_path = self.proc_root.join(pid.to_string()).join("cgroup");
        let text = read_bounded(&cgroup_path, MAX_CGROUP_BYTES)?;
        let found = parse_cgroup(&text)?;
        if !self.pods.contains_key(&found.uid) {
            let due = self.last_scan.is_none_or(|t| t.elapsed() >= RESCAN_PERIOD);
            if !due {
                return None;
            }
            self.scan();
        }
        let dir = self.pods.get(&found.uid)?;
        let container = match dir.containers.as_slice() {
            [only] => Some(only.clone()),
            _ => found
                .container_id
                .as_deref()
                .and_then(|id| self.container_from_symlinks(dir, id)),
        };
        Some(PodRef {
            namespace: dir.namespace.clone(),
            pod: dir.pod.clone(),
            container,
        })
    }

    fn scan(&mut self) {
        self.last_scan = Some(Instant::now());
        let Ok(entries) = fs::read_dir(&self.pod_log_root) else {
            return;
        };
        let mut pods = HashMap::new();
        for entry in entries.take(MAX_SCAN_ENTRIES).flatten() {
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let Some(PodDirName {
                namespace,
                pod,
                uid,
            }) = parse_pod_dir_name(name)
            else {
                continue;
            };
            if !is_uid(uid) || pods.len() >= MAX_PODS {
                continue;
            }
            let mut containers: Vec<String> = fs::read_dir(entry.path())
                .map(|it| {
                    it.take(256)
                        .flatten()
                        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                        .filter_map(|e| e.file_name().to_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            containers.sort();
            pods.insert(
                uid.to_owned(),
                PodDir {
                    namespace: namespace.to_owned(),
                    pod: pod.to_owned(),
                    containers,
                },
            );
        }
        self.pods = pods;
    }

    fn container_from_symlinks(&self, dir: &PodDir, container_id: &str) -> Option<String> {
        let root = self.pod_log_root.parent()?.join("containers");
        let prefix = format!("{}_{}_", dir.pod, dir.namespace);
        let suffix = format!("-{container_id}.log");
        fs::read_dir(root)
            .ok()?
            .take(MAX_SCAN_ENTRIES)
            .flatten()
            .find_map(|e| {
                let name = e.file_name().to_str()?.to_owned();
                let container = name.strip_prefix(&prefix)?.strip_suffix(&suffix)?;
                dir.containers
                    .iter()
                    .any(|c| c == container)
                    .then(|| container.to_owned())
            })
    }
}

/// Reads at most `limit` bytes of a small text file; `None` on any error.
fn read_bounded(path: &Path, limit: u64) -> Option<String> {
    use std::io::Read;
    let mut text = String::new();
    fs::File::open(path)
        .ok()?
        .take(limit)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

/// The process's short name from `<proc_root>/<pid>/comm`, where readable.
pub fn comm(proc_root: &Path, pid: u32) -> Option<String> {
    let text = read_bounded(&proc_root.join(pid.to_string()).join("comm"), 256)?;
    let name = text.trim_end();
    (!name.is_empty()).then(|| name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const UID: &str = "0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b";
    const CID: &str = "3e0b1c6d2f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9b0c";

    proptest::proptest! {
        #[test]
        fn parse_cgroup_never_panics(text in "(\\PC|[:/_.-]|kubepods|pod){0,200}") {
            let _ = parse_cgroup(&text);
        }

        #[test]
        fn any_uid_in_either_form_is_found(uid in "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}") {
            let v2 = format!("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice/x.scope", uid.replace('-', "_"));
            let v1 = format!("3:pids:/kubepods/burstable/pod{uid}/0123456789abcdef");
            proptest::prop_assert_eq!(parse_cgroup(&v2).map(|p| p.uid), Some(uid.clone()));
            proptest::prop_assert_eq!(parse_cgroup(&v1).map(|p| p.uid), Some(uid));
        }
    }

    #[test]
    fn parses_kubelet_log_layout() {
        let p = parse_pod_log_path(Path::new(
            "/var/log/pods/ml_train-7f9c_0f1e2d3c-aaaa-bbbb/trainer/0.log",
        ))
        .unwrap();
        assert_eq!(
            (p.namespace.as_str(), p.pod.as_str(), p.container.as_str()),
            ("ml", "train-7f9c", "trainer")
        );
        assert_eq!(p.uid, "0f1e2d3c-aaaa-bbbb");
        assert!(parse_pod_log_path(Path::new("/data/jobs/1/train.log")).is_none());
        assert!(parse_pod_log_path(Path::new("/var/log/pods/ml_train/trainer/0.log")).is_none());
        assert!(parse_pod_log_path(Path::new("/var/log/pods/ml__uid/trainer/0.log")).is_none());
    }

    #[test]
    fn pod_dir_name_keeps_underscores_in_the_uid_part() {
        assert_eq!(
            parse_pod_dir_name("kube-system_etcd-0_abc_def"),
            Some(PodDirName {
                namespace: "kube-system",
                pod: "etcd-0",
                uid: "abc_def"
            })
        );
        assert_eq!(parse_pod_dir_name("_pod_uid"), None);
    }

    #[test]
    fn systemd_cgroup_v2_path_with_underscores() {
        let text = format!(
            "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice/cri-containerd-{CID}.scope\n",
            UID.replace('-', "_")
        );
        let got = parse_cgroup(&text).unwrap();
        assert_eq!(got.uid, UID);
        assert_eq!(got.container_id.as_deref(), Some(CID));
    }

    #[test]
    fn cgroupfs_v1_path() {
        let text = format!(
            "12:memory:/kubepods/burstable/pod{UID}/{CID}\n11:cpu,cpuacct:/kubepods/burstable/pod{UID}/{CID}\n"
        );
        let got = parse_cgroup(&text).unwrap();
        assert_eq!(got.uid, UID);
        assert_eq!(got.container_id.as_deref(), Some(CID));
    }

    #[test]
    fn guaranteed_qos_and_non_kubernetes_paths() {
        let text = format!(
            "0::/kubepods.slice/kubepods-pod{}.slice\n",
            UID.replace('-', "_")
        );
        assert_eq!(parse_cgroup(&text).unwrap().uid, UID);
        assert_eq!(
            parse_cgroup("0::/user.slice/user-1000.slice/session-3.scope\n"),
            None
        );
        assert_eq!(parse_cgroup("0::/kubepods.slice/podnotauid.slice\n"), None);
        assert_eq!(parse_cgroup("garbage"), None);
    }

    fn tree(containers: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let proc_pid = dir.path().join("proc/4242");
        fs::create_dir_all(&proc_pid).unwrap();
        fs::write(
            proc_pid.join("cgroup"),
            format!("0::/kubepods/besteffort/pod{UID}/{CID}\n"),
        )
        .unwrap();
        fs::write(proc_pid.join("comm"), "python\n").unwrap();
        for c in containers {
            fs::create_dir_all(dir.path().join(format!("log/pods/ml_trainer-0_{UID}/{c}")))
                .unwrap();
        }
        fs::create_dir_all(dir.path().join("log/pods/other_x_not-a-uid")).unwrap();
        dir
    }

    fn resolver(dir: &tempfile::TempDir) -> PodResolver {
        PodResolver::new(dir.path().join("proc"), dir.path().join("log/pods"))
    }

    #[test]
    fn single_container_pod_is_attributed() {
        let dir = tree(&["trainer"]);
        let mut r = resolver(&dir);
        let mut procs = vec![GpuProcess {
            pid: 4242,
            name: None,
            used_memory_bytes: Some(1),
            pod: None,
        }];
        r.attribute(&mut procs);
        assert_eq!(
            procs[0].pod,
            Some(PodRef {
                namespace: "ml".into(),
                pod: "trainer-0".into(),
                container: Some("trainer".into()),
            })
        );
        assert_eq!(
            comm(&dir.path().join("proc"), 4242).as_deref(),
            Some("python")
        );
    }

    #[test]
    fn multi_container_pod_uses_the_container_symlink() {
        let dir = tree(&["sidecar", "trainer"]);
        let mut r = resolver(&dir);
        assert_eq!(r.resolve(4242).unwrap().container, None);

        let links = dir.path().join("log/containers");
        fs::create_dir_all(&links).unwrap();
        fs::write(links.join(format!("trainer-0_ml_trainer-{CID}.log")), "").unwrap();
        assert_eq!(
            r.resolve(4242).unwrap().container.as_deref(),
            Some("trainer")
        );
    }

    #[test]
    fn missing_pid_or_pod_dir_gives_none() {
        let dir = tree(&[]);
        let mut r = resolver(&dir);
        assert_eq!(r.resolve(1), None);
        fs::remove_dir_all(dir.path().join("log/pods")).unwrap();
        let mut r = resolver(&dir);
        assert_eq!(r.resolve(4242), None);
    }
}
