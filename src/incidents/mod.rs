//! Incidents: grouping evidence into failures (the engine) and, in the daemon, keeping them.
//!
//! The engine is a plain struct without tasks or I/O so that `scan` and the daemon drive the
//! very same grouping: `scan` with line numbers alone, the daemon with line numbers and a clock.

pub mod engine;
pub mod pipeline;
pub mod store;

pub use engine::{Engine, EngineConfig, Update};
