//! This node's pods, kept current by one watch: what an incident needs to name its pod, image
//! and workload without an API call per incident.
//!
//! [`PodCache`] holds each pod of the node (field selector `spec.nodeName=$NODE_NAME`) as the
//! API returned it, less `managedFields` and the last-applied annotation (the bulk of a pod
//! object, and of no use here), indexed by namespace/name, uid and container id. A deleted pod is
//! kept for [`PodCache::RETENTION`] (at most [`PodCache::MAX_DELETED`] of them): with a Job's
//! `restartPolicy: Never` or an operator's cleanup the failing pod is often gone seconds after
//! the failure, before the incident that needs its spec is complete.
//!
//! [`workload`] resolves a pod to its top controller from owner references and the labels the
//! controllers set, again without API calls.

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// A pod's top controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workload {
    pub kind: String,
    pub name: String,
}

/// What incidents take from a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodInfo {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub node: Option<String>,
    pub workload: Option<Workload>,
    pub containers: Vec<ContainerInfo>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerInfo {
    pub name: String,
    pub image: Option<String>,
    /// `sha256:…` from `status.containerStatuses[].imageID`.
    pub image_digest: Option<String>,
    /// The runtime's id without the `containerd://` scheme.
    pub container_id: Option<String>,
}

/// The cached pod: its summary, and the object (for the replay pod) kept as compact JSON,
/// parsed only when asked for: a typed `Pod` takes about seven times the memory (27 kB against
/// under 4 kB for a training pod), and the object is needed only when an incident replays.
#[derive(Debug)]
pub struct CachedPod {
    json: Box<[u8]>,
    pub info: PodInfo,
}

impl CachedPod {
    /// The pod as the API returned it, less `managedFields` and the last-applied annotation.
    pub fn pod(&self) -> Result<Pod, serde_json::Error> {
        serde_json::from_slice(&self.json)
    }

    /// Bytes the object takes.
    pub fn object_bytes(&self) -> usize {
        self.json.len()
    }
}

/// The top controller of `pod`, from its controller owner reference and the labels higher-level
/// controllers put on their pods (JobSet, LeaderWorkerSet, Kubeflow Trainer, Ray, Volcano).
pub fn workload(pod: &Pod) -> Option<Workload> {
    let labels = pod.metadata.labels.as_ref();
    let label = |k: &str| labels.and_then(|l| l.get(k)).cloned();
    let w = |kind: &str, name: String| {
        Some(Workload {
            kind: kind.to_owned(),
            name,
        })
    };
    // Controllers above a Job or StatefulSet, which the pod's owner reference does not show.
    if let Some(n) = label("trainer.kubeflow.org/trainjob-name") {
        return w("TrainJob", n);
    }
    if let Some(n) = label("jobset.sigs.k8s.io/jobset-name") {
        return w("JobSet", n);
    }
    if let Some(n) = label("leaderworkerset.sigs.k8s.io/name") {
        return w("LeaderWorkerSet", n);
    }
    let owner = pod
        .metadata
        .owner_references
        .as_ref()
        .and_then(|o| o.iter().find(|r| r.controller == Some(true)).or(o.first()));
    let Some(owner) = owner else {
        return workload_from_labels(&label);
    };
    match owner.kind.as_str() {
        // A Deployment's ReplicaSet is named `<deployment>-<pod-template-hash>`.
        "ReplicaSet" => match label("pod-template-hash") {
            Some(h) => match owner.name.strip_suffix(&format!("-{h}")) {
                Some(d) => w("Deployment", d.to_owned()),
                None => w("ReplicaSet", owner.name.clone()),
            },
            None => w("ReplicaSet", owner.name.clone()),
        },
        // Volcano's Job shares the kind name with batch/v1's; say which.
        "Job" if owner.api_version.starts_with("batch.volcano.sh/") => {
            w("VolcanoJob", owner.name.clone())
        }
        // A RayJob's cluster carries the job's name on its pods.
        "RayCluster" => match label("ray.io/originated-from-cr-name")
            .filter(|_| label("ray.io/originated-from-crd").as_deref() == Some("RayJob"))
        {
            Some(n) => w("RayJob", n),
            None => w("RayCluster", owner.name.clone()),
        },
        kind => w(kind, owner.name.clone()),
    }
}

/// The workload of a pod without owner references (an orphaned pod, or one whose owners were
/// stripped), from the labels its controller put on it.
fn workload_from_labels(label: &dyn Fn(&str) -> Option<String>) -> Option<Workload> {
    let w = |kind: &str, name: String| {
        Some(Workload {
            kind: kind.to_owned(),
            name,
        })
    };
    // Kubeflow Training Operator v1: `training.kubeflow.org/job-name` with the controller's
    // name in `training.kubeflow.org/operator-name` (`pytorchjob-controller`, …).
    if let Some(n) = label("training.kubeflow.org/job-name") {
        let kind = match label("training.kubeflow.org/operator-name").as_deref() {
            Some("pytorchjob-controller") => "PyTorchJob",
            Some("mpijob-controller") => "MPIJob",
            Some("tfjob-controller") => "TFJob",
            Some("xgboostjob-controller") => "XGBoostJob",
            Some("paddlejob-controller") => "PaddleJob",
            Some("jaxjob-controller") => "JAXJob",
            _ => "KubeflowJob",
        };
        return w(kind, n);
    }
    if let Some(n) = label("volcano.sh/job-name") {
        return w("VolcanoJob", n);
    }
    if let Some(n) = label("ray.io/cluster") {
        return w("RayCluster", n);
    }
    if let Some(n) = label("batch.kubernetes.io/job-name").or_else(|| label("job-name")) {
        return w("Job", n);
    }
    None
}

/// The summary of `pod`.
pub fn info(pod: &Pod) -> PodInfo {
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref());
    let containers = pod
        .spec
        .as_ref()
        .map(|s| {
            s.containers
                .iter()
                .map(|c| {
                    let st = statuses.and_then(|cs| cs.iter().find(|s| s.name == c.name));
                    ContainerInfo {
                        name: c.name.clone(),
                        image: c.image.clone(),
                        image_digest: st
                            .and_then(|s| s.image_id.rsplit_once('@'))
                            .map(|(_, d)| d.to_owned())
                            .filter(|d| d.starts_with("sha256:")),
                        container_id: st
                            .and_then(|s| s.container_id.as_deref())
                            .map(|id| id.split_once("://").map_or(id, |(_, i)| i).to_owned()),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    PodInfo {
        namespace: pod.metadata.namespace.clone().unwrap_or_default(),
        name: pod.metadata.name.clone().unwrap_or_default(),
        uid: pod.metadata.uid.clone().unwrap_or_default(),
        node: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
        workload: workload(pod),
        containers,
    }
}

/// `pod` without what the cache does not need.
fn slim(mut pod: Pod) -> Pod {
    pod.metadata.managed_fields = None;
    if let Some(a) = pod.metadata.annotations.as_mut() {
        a.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
    pod
}

#[derive(Default)]
struct Index {
    live: HashMap<(String, String), Arc<CachedPod>>,
    by_uid: HashMap<String, (String, String)>,
    by_container: HashMap<String, (String, String)>,
    deleted: VecDeque<(tokio::time::Instant, Arc<CachedPod>)>,
    /// Pods of a relist in progress (`Init` … `InitDone`), already in their compact form.
    relist: Option<Vec<CachedPod>>,
}

/// This node's pods. Cheap to clone; readers never wait on the API.
#[derive(Clone, Default)]
pub struct PodCache {
    inner: Arc<RwLock<Index>>,
}

impl PodCache {
    /// How long a deleted pod stays findable.
    pub const RETENTION: Duration = Duration::from_secs(600);
    /// At most this many deleted pods are kept.
    pub const MAX_DELETED: usize = 256;

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Index> {
        self.inner.write().unwrap_or_else(|e| e.into_inner())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Index> {
        self.inner.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds or replaces a pod.
    pub fn apply(&self, pod: Pod) {
        let mut ix = self.write();
        insert(&mut ix, pod);
    }

    /// Removes a pod, keeping it findable for [`PodCache::RETENTION`].
    pub fn delete(&self, pod: &Pod) {
        let mut ix = self.write();
        let key = (
            pod.metadata.namespace.clone().unwrap_or_default(),
            pod.metadata.name.clone().unwrap_or_default(),
        );
        remove(&mut ix, &key);
    }

    /// Applies one watcher event.
    pub fn handle(&self, ev: watcher::Event<Pod>) {
        let mut ix = self.write();
        match ev {
            watcher::Event::Apply(p) => insert(&mut ix, p),
            watcher::Event::Delete(p) => {
                let key = (
                    p.metadata.namespace.clone().unwrap_or_default(),
                    p.metadata.name.clone().unwrap_or_default(),
                );
                remove(&mut ix, &key);
            }
            watcher::Event::Init => ix.relist = Some(Vec::new()),
            watcher::Event::InitApply(p) => match ix.relist.as_mut() {
                Some(buf) => buf.push(cached(p)),
                None => insert(&mut ix, p),
            },
            watcher::Event::InitDone => {
                let fresh = ix.relist.take().unwrap_or_default();
                let keep: std::collections::HashSet<(String, String)> = fresh
                    .iter()
                    .map(|p| (p.info.namespace.clone(), p.info.name.clone()))
                    .collect();
                // Pods gone while the watch was down go to the deleted list like any other.
                let gone: Vec<(String, String)> = ix
                    .live
                    .keys()
                    .filter(|k| !keep.contains(*k))
                    .cloned()
                    .collect();
                for k in gone {
                    remove(&mut ix, &k);
                }
                for p in fresh {
                    insert_cached(&mut ix, p);
                }
            }
        }
    }

    /// A pod by namespace and name, live or recently deleted.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<CachedPod>> {
        let key = (namespace.to_owned(), name.to_owned());
        self.find(Some(&key), |p| {
            p.info.namespace == namespace && p.info.name == name
        })
    }

    /// A pod by uid (as in `/var/log/pods/<ns>_<name>_<uid>/`), live or recently deleted.
    pub fn by_uid(&self, uid: &str) -> Option<Arc<CachedPod>> {
        let ix = self.read();
        let key = ix.by_uid.get(uid).cloned();
        drop(ix);
        self.find(key.as_ref(), |p| p.info.uid == uid)
    }

    /// A pod by one of its containers' runtime id (as in a GPU process's cgroup).
    pub fn by_container_id(&self, id: &str) -> Option<Arc<CachedPod>> {
        let ix = self.read();
        let key = ix.by_container.get(id).cloned();
        drop(ix);
        self.find(key.as_ref(), |p| {
            p.info
                .containers
                .iter()
                .any(|c| c.container_id.as_deref() == Some(id))
        })
    }

    /// The live pod under `key`, else the newest recently deleted pod that `matches`.
    fn find(
        &self,
        key: Option<&(String, String)>,
        matches: impl Fn(&CachedPod) -> bool,
    ) -> Option<Arc<CachedPod>> {
        let ix = self.read();
        key.and_then(|k| ix.live.get(k)).cloned().or_else(|| {
            ix.deleted
                .iter()
                .rev()
                .find(|(_, p)| matches(p))
                .map(|(_, p)| p.clone())
        })
    }

    /// Live pods.
    pub fn len(&self) -> usize {
        self.read().live.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Watches the pods of `node` until the stream ends (never, in practice; the watcher
    /// re-lists and re-watches by itself after errors, with backoff).
    pub async fn run(self, client: kube::Client, node: &str) {
        use kube::runtime::WatchStreamExt;
        let api: kube::Api<Pod> = kube::Api::all(client);
        let cfg = watcher::Config::default().fields(&format!("spec.nodeName={node}"));
        let mut stream = watcher(api, cfg).default_backoff().boxed();
        while let Some(ev) = stream.next().await {
            match ev {
                Ok(ev) => self.handle(ev),
                Err(e) => tracing::warn!(error = %e, "Watching this node's pods failed; retrying."),
            }
        }
    }
}

/// Failing pods captured when their incidents opened, by incident id, for the replay: the pod
/// may be gone (and out of the cache's deleted list) by the time the replay runs. Bounded:
/// the oldest capture goes first past [`CapturedPods::MAX`]. Cheap to clone.
#[derive(Clone, Default)]
pub struct CapturedPods {
    inner: Arc<std::sync::Mutex<Captures>>,
}

/// Captured pods by incident id, and the ids oldest first.
type Captures = (HashMap<i64, Arc<CachedPod>>, VecDeque<i64>);

impl CapturedPods {
    /// Captures kept (a training pod is a few kB in its compact form).
    pub const MAX: usize = 256;

    fn lock(&self) -> std::sync::MutexGuard<'_, Captures> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps `pod` for incident `id` (the first capture of an incident stays).
    pub fn insert(&self, id: i64, pod: Arc<CachedPod>) {
        let mut g = self.lock();
        let (map, order) = &mut *g;
        if map.contains_key(&id) {
            return;
        }
        map.insert(id, pod);
        order.push_back(id);
        while order.len() > Self::MAX {
            if let Some(old) = order.pop_front() {
                map.remove(&old);
            }
        }
    }

    /// The pod captured for incident `id`.
    pub fn get(&self, id: i64) -> Option<Arc<CachedPod>> {
        self.lock().0.get(&id).cloned()
    }

    pub fn len(&self) -> usize {
        self.lock().0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// `pod` in its cached form.
fn cached(pod: Pod) -> CachedPod {
    let pod = slim(pod);
    let info = info(&pod);
    // Serializing a Pod value that came from JSON cannot fail; an empty object would only make
    // `CachedPod::pod` report an error later.
    let json = serde_json::to_vec(&pod)
        .unwrap_or_default()
        .into_boxed_slice();
    CachedPod { json, info }
}

fn insert(ix: &mut Index, pod: Pod) {
    insert_cached(ix, cached(pod));
}

fn insert_cached(ix: &mut Index, entry: CachedPod) {
    let key = (entry.info.namespace.clone(), entry.info.name.clone());
    if let Some(old) = ix.live.get(&key) {
        for c in &old.info.containers {
            if let Some(id) = &c.container_id {
                ix.by_container.remove(id);
            }
        }
        ix.by_uid.remove(&old.info.uid);
    }
    ix.by_uid.insert(entry.info.uid.clone(), key.clone());
    for c in &entry.info.containers {
        if let Some(id) = &c.container_id {
            ix.by_container.insert(id.clone(), key.clone());
        }
    }
    ix.live.insert(key, Arc::new(entry));
}

fn remove(ix: &mut Index, key: &(String, String)) {
    let Some(old) = ix.live.remove(key) else {
        return;
    };
    ix.by_uid.remove(&old.info.uid);
    for c in &old.info.containers {
        if let Some(id) = &c.container_id {
            ix.by_container.remove(id);
        }
    }
    let now = tokio::time::Instant::now();
    ix.deleted.push_back((now, old));
    while ix.deleted.len() > PodCache::MAX_DELETED
        || ix
            .deleted
            .front()
            .is_some_and(|(t, _)| now.duration_since(*t) > PodCache::RETENTION)
    {
        ix.deleted.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(
        ns: &str,
        name: &str,
        uid: &str,
        labels: serde_json::Value,
        owner: serde_json::Value,
    ) -> Pod {
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "uid": uid, "labels": labels,
                "ownerReferences": owner,
                "managedFields": [{"manager": "kubelet", "operation": "Update"}]},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "img:1"}]},
            "status": {"containerStatuses": [{"name": "c", "image": "img:1", "ready": true, "restartCount": 0,
                "imageID": format!("docker.io/img@sha256:{}", "b".repeat(64)),
                "containerID": format!("containerd://{uid}-cid")}]}
        }))
        .unwrap()
    }

    fn owner(api: &str, kind: &str, name: &str) -> serde_json::Value {
        json!([{"apiVersion": api, "kind": kind, "name": name, "uid": "o", "controller": true}])
    }

    #[test]
    fn workloads_of_the_common_controllers() {
        let cases = [
            (
                json!({}),
                owner("kubeflow.org/v1", "PyTorchJob", "llama"),
                ("PyTorchJob", "llama"),
            ),
            (
                json!({"jobset.sigs.k8s.io/jobset-name": "pre"}),
                owner("batch/v1", "Job", "pre-w-0"),
                ("JobSet", "pre"),
            ),
            (json!({}), owner("batch/v1", "Job", "bert"), ("Job", "bert")),
            (
                json!({}),
                owner("batch.volcano.sh/v1alpha1", "Job", "vj"),
                ("VolcanoJob", "vj"),
            ),
            (
                json!({"pod-template-hash": "5d8f7c"}),
                owner("apps/v1", "ReplicaSet", "web-5d8f7c"),
                ("Deployment", "web"),
            ),
            (
                json!({"leaderworkerset.sigs.k8s.io/name": "lws"}),
                owner("apps/v1", "StatefulSet", "lws-0"),
                ("LeaderWorkerSet", "lws"),
            ),
            (
                json!({}),
                owner("ray.io/v1", "RayCluster", "rc"),
                ("RayCluster", "rc"),
            ),
            (
                json!({}),
                owner("kubeflow.org/v2beta1", "MPIJob", "mpi"),
                ("MPIJob", "mpi"),
            ),
        ];
        for (labels, own, (kind, name)) in cases {
            let w = workload(&pod("ns", "p", "u", labels, own)).unwrap();
            assert_eq!((w.kind.as_str(), w.name.as_str()), (kind, name));
        }
        assert_eq!(workload(&pod("ns", "p", "u", json!({}), json!(null))), None);
        // Without owner references, the controllers' labels.
        let by_labels = [
            (
                json!({"training.kubeflow.org/job-name": "llama",
                       "training.kubeflow.org/operator-name": "pytorchjob-controller"}),
                ("PyTorchJob", "llama"),
            ),
            (json!({"volcano.sh/job-name": "vj"}), ("VolcanoJob", "vj")),
            (json!({"ray.io/cluster": "rc"}), ("RayCluster", "rc")),
            (
                json!({"batch.kubernetes.io/job-name": "bert"}),
                ("Job", "bert"),
            ),
        ];
        for (labels, (kind, name)) in by_labels {
            let w = workload(&pod("ns", "p", "u", labels, json!(null))).unwrap();
            assert_eq!((w.kind.as_str(), w.name.as_str()), (kind, name));
        }
    }

    #[test]
    fn index_by_name_uid_and_container_and_keep_the_deleted() {
        let c = PodCache::default();
        let p = pod("ml", "w-0", "u1", json!({}), owner("batch/v1", "Job", "j"));
        c.apply(p.clone());
        let got = c.get("ml", "w-0").unwrap();
        assert!(got.pod().unwrap().metadata.managed_fields.is_none());
        assert_eq!(
            got.info.containers[0]
                .image_digest
                .as_deref()
                .map(|d| d.len()),
            Some(71)
        );
        assert_eq!(c.by_uid("u1").unwrap().info.name, "w-0");
        assert_eq!(c.by_container_id("u1-cid").unwrap().info.name, "w-0");
        c.delete(&p);
        assert_eq!(c.len(), 0);
        // Still findable after deletion.
        assert_eq!(c.get("ml", "w-0").unwrap().info.uid, "u1");
        assert!(c.by_container_id("u1-cid").is_some());
        // Bounded.
        for i in 0..(PodCache::MAX_DELETED + 10) {
            let q = pod(
                "ml",
                &format!("q{i}"),
                &format!("uq{i}"),
                json!({}),
                json!(null),
            );
            c.apply(q.clone());
            c.delete(&q);
        }
        assert!(c.get("ml", "w-0").is_none());
        assert_eq!(c.read().deleted.len(), PodCache::MAX_DELETED);
    }

    fn fixture(name: &str) -> Pod {
        let path = format!(
            "{}/../../tests/fixtures/kube/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        crate::parse_pod(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn workloads_of_the_fixture_pods() {
        let cases = [
            ("pytorchjob-worker.yaml", ("PyTorchJob", "llama-ft")),
            // Owned by a Job that a JobSet owns: the JobSet, from its label.
            ("jobset-pod.yaml", ("JobSet", "pretrain")),
            ("job-pod.yaml", ("Job", "finetune-bert")),
        ];
        for (file, (kind, name)) in cases {
            let p = fixture(file);
            let w = workload(&p).unwrap();
            assert_eq!((w.kind.as_str(), w.name.as_str()), (kind, name), "{file}");
            // The same without owner references: the labels alone say as much where they can.
            let mut orphan = p.clone();
            orphan.metadata.owner_references = None;
            if file != "job-pod.yaml" {
                assert_eq!(workload(&orphan).unwrap().name, name, "{file}");
            }
        }
        let i = info(&fixture("pytorchjob-worker.yaml"));
        assert!(!i.uid.is_empty() && i.node.is_some());
        assert!(i.containers.iter().any(|c| c
            .image_digest
            .as_deref()
            .is_some_and(|d| d.starts_with("sha256:"))));
    }

    #[test]
    fn captures_are_bounded_and_keep_the_first() {
        let cache = PodCache::default();
        cache.apply(pod("ml", "a", "ua", json!({}), json!(null)));
        cache.apply(pod("ml", "b", "ub", json!({}), json!(null)));
        let cap = CapturedPods::default();
        cap.insert(1, cache.get("ml", "a").unwrap());
        cap.insert(1, cache.get("ml", "b").unwrap());
        assert_eq!(cap.get(1).unwrap().info.name, "a");
        for id in 2..(CapturedPods::MAX as i64 + 5) {
            cap.insert(id, cache.get("ml", "b").unwrap());
        }
        assert_eq!(cap.len(), CapturedPods::MAX);
        assert!(cap.get(1).is_none());
    }

    #[test]
    fn a_relist_replaces_the_set() {
        let c = PodCache::default();
        c.apply(pod("a", "old", "u0", json!({}), json!(null)));
        c.handle(watcher::Event::Init);
        c.handle(watcher::Event::InitApply(pod(
            "a",
            "new",
            "u1",
            json!({}),
            json!(null),
        )));
        // Until InitDone the old view stays.
        assert!(c.get("a", "old").is_some() && c.len() == 1);
        c.handle(watcher::Event::InitDone);
        assert_eq!(c.len(), 1);
        assert!(c.get("a", "new").is_some());
        // The one gone during the outage is kept as deleted.
        assert!(c.get("a", "old").is_some());
        assert!(c.by_uid("u0").is_some());
    }
}

#[cfg(test)]
mod watch_tests {
    use super::*;
    use http::{Request, Response};
    use kube::client::Body;
    use serde_json::json;
    use tower_test::mock;

    fn pod_json(name: &str, rv: &str) -> serde_json::Value {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": "ml", "uid": format!("uid-{name}"), "resourceVersion": rv},
               "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]}})
    }

    #[tokio::test]
    async fn lists_then_watches_this_nodes_pods_only() {
        let (svc, mut h) = mock::pair::<Request<Body>, Response<Body>>();
        let client = kube::Client::new(svc, "default");
        let cache = PodCache::default();
        let task = tokio::spawn(cache.clone().run(client, "n1"));

        let (req, send) = h.next_request().await.unwrap();
        assert_eq!(req.method(), "GET");
        assert_eq!(req.uri().path(), "/api/v1/pods");
        let q = req.uri().query().unwrap_or_default().to_owned();
        assert!(q.contains("fieldSelector=spec.nodeName%3Dn1"), "{q}");
        assert!(!q.contains("watch=true"), "{q}");
        let list = json!({"apiVersion": "v1", "kind": "PodList", "metadata": {"resourceVersion": "10"},
                          "items": [pod_json("a", "9"), pod_json("b", "9")]});
        send.send_response(
            Response::builder()
                .status(200)
                .body(Body::from(serde_json::to_vec(&list).unwrap()))
                .unwrap(),
        );

        let (req, send) = h.next_request().await.unwrap();
        let q = req.uri().query().unwrap_or_default().to_owned();
        assert_eq!(req.uri().path(), "/api/v1/pods");
        assert!(
            q.contains("watch=true") && q.contains("resourceVersion=10"),
            "{q}"
        );
        assert!(q.contains("fieldSelector=spec.nodeName%3Dn1"), "{q}");
        let mut body = Vec::new();
        for ev in [
            json!({"type": "ADDED", "object": pod_json("c", "11")}),
            json!({"type": "DELETED", "object": pod_json("a", "12")}),
        ] {
            body.extend(serde_json::to_vec(&ev).unwrap());
            body.push(b'\n');
        }
        send.send_response(
            Response::builder()
                .status(200)
                .body(Body::from(body))
                .unwrap(),
        );
        // The watch ended; the watcher watches again from the last version: hold that one.
        let (req, _held) = h.next_request().await.unwrap();
        assert!(req
            .uri()
            .query()
            .unwrap_or_default()
            .contains("resourceVersion=12"));
        assert_eq!(cache.len(), 2);
        assert!(cache.get("ml", "b").is_some() && cache.get("ml", "c").is_some());
        // Deleted, still findable for incidents that complete late.
        assert_eq!(cache.by_uid("uid-a").unwrap().info.name, "a");
        task.abort();
    }
}
