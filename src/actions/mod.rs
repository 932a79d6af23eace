//! Actions: what the daemon does about an incident beyond reporting it.

pub mod kube_replay;
pub mod repro;
