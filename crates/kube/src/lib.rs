//! Kubernetes side of assertwatch: replay pods derived from the failing pod, and the API calls
//! behind Events and node conditions.
//!
//! The pure parts (what a replay pod looks like, what an Event says) need no cluster; the
//! [`api::KubeApi`] trait is the only way out to the API server, so sinks can be tested against a
//! mock service.

pub mod input;
pub mod replay_pod;

pub use input::{parse_pod, InputError};
pub use replay_pod::{replay_pod, Refusal, ReplayPodOptions};

/// The API level the `k8s-openapi` types are compiled for (its `v1_32` feature).
pub const API_LEVEL: &str = "v1.32";
