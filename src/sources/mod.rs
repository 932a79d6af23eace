//! Sources: where lines come from and how they are decoded before detection.

pub mod decode;
pub mod k8s;
pub mod kmsg;
pub mod reader;
pub mod slurm;
pub mod stream;
