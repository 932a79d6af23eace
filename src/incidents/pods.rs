//! Pod attribution from this node's pod cache: the pod's identity, image and workload on an
//! incident, and the failing pod captured for its replay.
//!
//! Everything here reads the cache the pod watch keeps current; no incident makes an API call.

use crate::model::KubeRef;
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
