//! assertwatch: a per-node daemon that explains CUDA device-side asserts and NVIDIA Xid errors.
//!
//! # Data flow
//!
//! ```text
//!  sources                 detect                incidents              sinks / actions
//!  training logs ──┐                          ┌─ Engine: grouping,   ┌─ /metrics
//!  kernel log ─────┼─▶ DetectorSet: literal ──┤  correlation         ├─ store (SQLite)
//!  (NVML events) ──┘   gate + family regexes  └─ store + fan-out ───┼─ HTTP API and page
//!                                                                    └─ (Alertmanager, replay)
//! ```
//!
//! - [`sources`]: reading bytes (bounded chunks), decoding formats, numbering lines.
//! - [`detect`]: the rule table, parsers of assert/Xid/traceback lines, the Xid catalog.
//! - [`incidents`]: the grouping engine (a plain struct, shared by `scan` and the daemon).
//! - [`scan`]: the one-shot command; [`app`]: the daemon.

pub mod actions;
pub mod app;
pub mod cli;
pub mod config;
pub mod detect;
pub mod fsutil;
pub mod http;
pub mod incidents;
pub mod lifecycle;
pub mod metrics;
pub mod model;
pub mod privilege;
pub mod scan;
pub mod sinks;
pub mod sources;
