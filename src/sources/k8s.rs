//! Kubernetes pod attribution from log paths.
//!
//! The kubelet's pod log layout is parsed in one place, the GPU crate's process attribution,
//! which reads the same directories; this module names it for the sources.

pub use assertwatch_gpu::procs::{parse_pod_log_path, PodLogRef as PodRef};
