//! Pod attribution from this node's pod cache: the pod's identity, image and workload on an
//! incident, and the failing pod captured for its replay.
//!
//! Everything here reads the cache the pod watch keeps current; no incident makes an API call.

use crate::model::KubeRef;
use crate::sources::k8s::PodRef;
use assertwatch_gpu::GpuSnapshot;
use assertwatch_kube::pods::{CachedPod, CapturedPods, PodCache};
use std::sync::Arc;

/// What the incident task holds when the `kubernetes:` section is on.
#[derive(Clone, Default)]
pub struct PodAttribution {
    pub cache: PodCache,
    /// Failing pods by incident id, for replays as pods.
    pub captured: CapturedPods,
}

impl PodAttribution {
    /// The cached pod: by uid where the log path gave one (a pod recreated under the same name
    /// is another pod), else by namespace and name.
    pub fn lookup(&self, namespace: &str, pod: &str, uid: Option<&str>) -> Option<Arc<CachedPod>> {
        uid.filter(|u| !u.is_empty())
            .and_then(|u| self.cache.by_uid(u))
            .or_else(|| self.cache.get(namespace, pod))
    }
}

/// The pod cache's fields for an incident's pod (none without a cache or a pod), and the cached
/// pod itself (to capture when the incident opens).
pub fn attribute(
    attr: Option<&PodAttribution>,
    pod: Option<&PodRef>,
) -> (KubeRef, Option<Arc<CachedPod>>) {
    let (Some(attr), Some(p)) = (attr, pod) else {
        return (KubeRef::default(), None);
    };
    match attr.lookup(&p.namespace, &p.pod, Some(p.uid.as_str())) {
        Some(c) => {
            let container = Some(p.container.as_str()).filter(|c| !c.is_empty());
            (kube_ref(&c, container), Some(c))
        }
        None => (KubeRef::default(), None),
    }
}

/// The pod of an incident without a pod log path: that of the GPU process with the incident's
/// pid (an Xid names the host pid), from a GPU snapshot. The container is empty where the GPU
/// layer could not tell it.
pub fn gpu_process_pod(snap: &GpuSnapshot, pid: Option<u32>) -> Option<PodRef> {
    let pid = pid?;
    let p = snap
        .gpus
        .iter()
        .flat_map(|g| g.processes.iter())
        .find(|p| p.pid == pid)?
        .pod
        .clone()?;
    Some(PodRef {
        namespace: p.namespace,
        pod: p.pod,
        uid: String::new(),
        container: p.container.unwrap_or_default(),
    })
}

/// The record fields `pod` gives, for `container` (its image and digest) where named; with no
/// container named, a pod with a single container gives that one's.
pub fn kube_ref(pod: &CachedPod, container: Option<&str>) -> KubeRef {
    let info = &pod.info;
    let c = match container {
        Some(name) => info.containers.iter().find(|c| c.name == name),
        None if info.containers.len() == 1 => info.containers.first(),
        None => None,
    };
    KubeRef {
        pod_uid: Some(info.uid.clone()).filter(|u| !u.is_empty()),
        pod_node: info.node.clone(),
        image: c.and_then(|c| c.image.clone()),
        image_digest: c.and_then(|c| c.image_digest.clone()),
        workload_kind: info.workload.as_ref().map(|w| w.kind.clone()),
        workload_name: info.workload.as_ref().map(|w| w.name.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> assertwatch_kube::k8s_openapi::api::core::v1::Pod {
        let text = std::fs::read_to_string(format!(
            "{}/tests/fixtures/kube/{name}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        assertwatch_kube::parse_pod(&text).unwrap()
    }

    #[test]
    fn a_pytorchjob_worker_gives_uid_node_image_digest_and_workload() {
        let a = PodAttribution::default();
        let p = fixture("pytorchjob-worker.yaml");
        let (ns, name, uid) = (
            p.metadata.namespace.clone().unwrap(),
            p.metadata.name.clone().unwrap(),
            p.metadata.uid.clone().unwrap(),
        );
        let container = p.spec.as_ref().unwrap().containers[0].name.clone();
        a.cache.apply(p);
        // By uid, by name, and not for an unknown pod.
        let hit = a.lookup(&ns, &name, Some(&uid)).unwrap();
        assert!(a.lookup(&ns, &name, Some("other-uid")).is_some());
        assert!(a.lookup(&ns, "nope", None).is_none());
        let k = kube_ref(&hit, Some(&container));
        assert_eq!(k.pod_uid.as_deref(), Some(uid.as_str()));
        assert_eq!(k.pod_node.as_deref(), Some("gpu-a100-node-17"));
        assert!(k
            .image
            .as_deref()
            .unwrap()
            .starts_with("nvcr.io/nvidia/pytorch"));
        assert!(k
            .image_digest
            .as_deref()
            .unwrap()
            .starts_with("sha256:8a3c5f6d"));
        assert_eq!(k.workload().as_deref(), Some("PyTorchJob/llama-ft"));
        // An unknown container: the pod's fields, no image.
        let k = kube_ref(&hit, Some("nope"));
        assert_eq!(
            (k.image, k.workload_kind.as_deref()),
            (None, Some("PyTorchJob"))
        );
    }

    #[test]
    fn attribution_by_log_path_or_gpu_process() {
        let a = PodAttribution::default();
        let p = fixture("pytorchjob-worker.yaml");
        let (ns, name, uid) = (
            p.metadata.namespace.clone().unwrap(),
            p.metadata.name.clone().unwrap(),
            p.metadata.uid.clone().unwrap(),
        );
        let container = p.spec.as_ref().unwrap().containers[0].name.clone();
        a.cache.apply(p);
        let from_log = PodRef {
            namespace: ns.clone(),
            pod: name.clone(),
            uid: uid.clone(),
            container: container.clone(),
        };
        let (k, cached) = attribute(Some(&a), Some(&from_log));
        assert_eq!(k.workload_kind.as_deref(), Some("PyTorchJob"));
        assert!(k.image.is_some());
        assert_eq!(cached.unwrap().info.uid, uid);
        // No cache (kubernetes off), no pod, or a pod the cache does not know: nothing.
        assert_eq!(attribute(None, Some(&from_log)).0, KubeRef::default());
        assert!(attribute(Some(&a), None).1.is_none());
        let stranger = PodRef {
            pod: "stranger".into(),
            uid: String::new(),
            ..from_log.clone()
        };
        assert!(attribute(Some(&a), Some(&stranger)).1.is_none());

        // An Xid naming pid 4242: the pod NVML's process list attributes it to.
        let mut snap = GpuSnapshot::down("fake");
        snap.gpus = vec![assertwatch_gpu::GpuState {
            id: assertwatch_gpu::GpuId {
                index: 0,
                uuid: "GPU-0".into(),
                pci_bus_id: "00000000:17:00.0".into(),
            },
            info: Default::default(),
            sample: Default::default(),
            processes: vec![assertwatch_gpu::GpuProcess {
                pid: 4242,
                name: None,
                used_memory_bytes: None,
                pod: Some(assertwatch_gpu::PodRef {
                    namespace: ns.clone(),
                    pod: name.clone(),
                    container: None,
                }),
            }],
            lost: false,
        }];
        assert!(gpu_process_pod(&snap, Some(1)).is_none());
        assert!(gpu_process_pod(&snap, None).is_none());
        let via_gpu = gpu_process_pod(&snap, Some(4242)).unwrap();
        assert_eq!(
            (via_gpu.pod.as_str(), via_gpu.container.as_str()),
            (name.as_str(), "")
        );
        let (k, _) = attribute(Some(&a), Some(&via_gpu));
        assert_eq!(k.pod_uid.as_deref(), Some(uid.as_str()));
        // The same workload either way.
        assert_eq!(k.workload_name.as_deref(), Some("llama-ft"));
    }

    #[test]
    fn a_jobset_pod_names_the_jobset() {
        let a = PodAttribution::default();
        let p = fixture("jobset-pod.yaml");
        let (ns, name) = (
            p.metadata.namespace.clone().unwrap(),
            p.metadata.name.clone().unwrap(),
        );
        a.cache.apply(p);
        let k = kube_ref(&a.lookup(&ns, &name, None).unwrap(), None);
        assert_eq!(k.workload().as_deref(), Some("JobSet/pretrain"));
    }
}
