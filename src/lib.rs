//! assertwatch: a per-node daemon that explains CUDA device-side asserts and NVIDIA Xid errors.
//!
//! # Data flow
//!
//! ```text
//!  sources              detect               incidents (one task)              sinks (own tasks)
//!  training logs ─┐                       ┌─ streams → engine → limits ─┐   ┌─ metrics
//!  kernel log ────┼─▶ DetectorSet: literal│                             │   ├─ Alertmanager
//!  NVML events ───┘   gate + family rules └─ recorder (store thread) ───┴──▶├─ replay requester ─▶ actions::repro
//!                                                                            └─ GPU probe            │
//!                                             replay results ◀───────────────────────────────────────┘
//!  HTTP (/metrics, API, page) reads the registry and the store through its own read-only connection.
//! ```
//!
//! - [`sources`]: reading bytes (bounded chunks), decoding formats, numbering lines.
//! - [`detect`]: the rule table, parsers of assert/Xid/traceback lines, the Xid catalog.
//! - [`incidents`]: the stages from findings to stored incidents; the engine is shared by `scan`.
//! - [`sinks`]: every consumer of incidents, behind [`sinks::IncidentSink`].
//! - [`actions`]: the replay runner. [`model`]: values that cross these boundaries.
//! - [`scan`]: the one-shot command; [`app`]: the daemon's assembly; [`cli`]: the edge.

#![forbid(unsafe_code)]

pub mod actions;
pub mod app;
pub mod cli;
pub mod config;
pub mod detect;
pub mod fsutil;
pub mod health;
pub mod http;
pub mod incidents;
pub mod lifecycle;
pub mod logging;
pub mod metrics;
pub mod model;
pub mod privilege;
pub mod scan;
pub mod sinks;
pub mod sources;
