//! Kubernetes side of assertwatch: replay pods derived from the failing pod, and the API calls
//! behind Events and node conditions.
//!
//! The pure parts (what a replay pod looks like, what an Event says) need no cluster; the
//! [`api::KubeApi`] trait is the only way out to the API server, so sinks can be tested against a
//! mock service.

pub mod api;
pub mod events;
pub mod input;
pub mod pods;
pub mod replay_pod;
pub mod run;

pub use api::{ApiError, CallPolicy, KubeApi, KubeClient};
pub use input::{parse_pod, InputError};
// The client and API types, for callers and their tests.
pub use k8s_openapi;
pub use kube;
pub use replay_pod::{replay_pod, replay_pod_for, Refusal, ReplayPodOptions, StepRef};

/// The API level the `k8s-openapi` types are compiled for (its `v1_32` feature).
pub const API_LEVEL: &str = "v1.32";
