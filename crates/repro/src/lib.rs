//! The daemon side of assertwatch's reproduction runner.
//!
//! When an incident says a job died of a device-side assert, the daemon looks for the debug state
//! the job recorded before each step (`docs/manifest.md`), validates it as untrusted input, and
//! replays the flagged step through the Python harness (`python -m assertwatch_replay run`) in a
//! sandboxed child: synchronous GPU launches first, then the CPU, then the step before. The
//! answer (`reproduced` with the exact `file:line`, `reproduced_cpu_only`, `not_reproduced`, …)
//! goes back into the incident. See `docs/repro-runner.md`.
//!
//! Modules: [`manifest`] (parsing and validation), [`discover`] (which ring entry belongs to an
//! incident), [`process`] (the only place that spawns children), [`result`] (reading what an
//! attempt produced), [`runner`] (limits, the ladder of attempts, outcomes), [`metrics`].

pub mod discover;
pub mod manifest;
pub mod metrics;
pub mod process;
pub mod result;
pub mod runner;

pub use metrics::Metrics;
pub use result::{ExceptionInfo, KernelAssertion};
pub use runner::{
    Attempt, ExternalSlot, GpuCheck, Mode, Outcome, ReproConfig, ReproRequest, ReproResult,
    ReproRunner,
};
