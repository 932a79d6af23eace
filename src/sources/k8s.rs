//! Kubernetes pod attribution from log paths.
//!
//! The kubelet writes container logs to `/var/log/pods/<namespace>_<pod>_<uid>/<container>/<n>.log`
//! (kubelet `kuberuntime` `BuildContainerLogsDirectory`/`BuildPodLogsDirectory`). Namespaces and
//! pod names cannot contain `_`, so the directory name splits unambiguously.

use std::path::Path;

/// Namespace, pod and container of a pod log file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRef {
    pub namespace: String,
    pub pod: String,
    pub uid: String,
    pub container: String,
}

/// Parses a pod log path; `None` for any other path.
pub fn parse_pod_log_path(path: &Path) -> Option<PodRef> {
    let comps: Vec<&str> = path.iter().filter_map(|c| c.to_str()).collect();
    let i = comps.windows(2).position(|w| w[0] == "pods")?;
    let dir = comps.get(i + 1)?;
    let container = comps.get(i + 2)?;
    comps.get(i + 3)?;
    let mut parts = dir.splitn(3, '_');
    let namespace = parts.next()?.to_owned();
    let pod = parts.next()?.to_owned();
    let uid = parts.next()?.to_owned();
    if namespace.is_empty() || pod.is_empty() || uid.is_empty() {
        return None;
    }
    Some(PodRef {
        namespace,
        pod,
        uid,
        container: (*container).to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kubelet_layout() {
        let p = parse_pod_log_path(Path::new(
            "/var/log/pods/ml_train-7f9c_0f1e2d3c-aaaa-bbbb/trainer/0.log",
        ))
        .unwrap();
        assert_eq!(
            (p.namespace.as_str(), p.pod.as_str(), p.container.as_str()),
            ("ml", "train-7f9c", "trainer")
        );
        assert!(parse_pod_log_path(Path::new("/data/jobs/1/train.log")).is_none());
    }
}
