//! Actions: what the daemon does about an incident beyond reporting it.

pub mod repro;
