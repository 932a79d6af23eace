//! Incidents: from findings to stored incidents, in stages that each own one thing.
//!
//! - [`streams`]: per-stream scanners, read positions and acknowledgements;
//! - [`engine`]: grouping evidence into failures — a plain struct with time passed in, so `scan`
//!   and the daemon drive the very same grouping;
//! - [`limits`]: the per-source flood bound;
//! - [`correlate`]: linking a job's failure with the Xid it caused;
//! - [`recorder`]: store writes, the retry queue and retention, over [`store`];
//! - [`task`]: the daemon's loop that sequences them and hands every stored change to the sinks.
//!
//! Nothing here knows a sink: consumers plug in behind `sinks::IncidentSink`.

pub mod correlate;
pub mod engine;
pub mod limits;
pub mod pods;
pub mod recorder;
pub mod store;
pub mod streams;
pub mod task;

pub use engine::{Engine, EngineConfig, Update};
