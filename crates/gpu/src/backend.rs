//! The [`GpuBackend`] trait that every GPU driver implements (NVML, the scripted fake), and the
//! [`GpuError`] they return.
//!
//! It is the one seam between the daemon and the driver: the GPU thread in `monitor.rs` only sees
//! this trait, so the same loop runs over real hardware and over the fake in tests.

use std::time::Duration;

use crate::{GpuEvent, GpuId, GpuInfo, GpuProcess, GpuSample};

/// Why a backend call failed.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    /// The driver cannot be used at all: the library is missing, the kernel module is not loaded,
    /// or the handle went stale (driver reload). The GPU thread publishes `nvml_up = 0` and opens
    /// the backend again with backoff.
    #[error("the GPU driver is not available: {reason}")]
    Unavailable {
        /// What the driver said, e.g. `libnvidia-ml.so: cannot open shared object file`.
        reason: String,
    },
    /// The GPU stopped answering (NVML `GPU_IS_LOST`); the others keep being read.
    #[error("GPU {gpu} is lost (it no longer answers the driver)")]
    Lost {
        /// The GPU's index.
        gpu: u32,
    },
    /// The driver does not support this call on this GPU.
    #[error("not supported by this GPU or driver")]
    NotSupported,
    /// Anything else, with the call and the driver's message.
    #[error("{0}")]
    Other(String),
}

/// What the daemon needs from a GPU driver.
///
/// Blocking by design: NVML calls are synchronous FFI that can stall for seconds when a device
/// falls off the bus, and `wait_event` blocks in the driver. Only the dedicated GPU thread calls
/// these, never the async runtime, so a stuck driver stalls GPU metrics and nothing else.
pub trait GpuBackend: Send + 'static {
    /// `nvml` or `fake`, for [`crate::GpuSnapshot::backend`].
    fn name(&self) -> &'static str;

    /// Every GPU, in index order.
    ///
    /// # Errors
    /// [`GpuError::Unavailable`] when the driver went away (the caller re-opens the backend).
    fn devices(&mut self) -> Result<Vec<GpuId>, GpuError>;

    /// Static facts; fields the driver cannot supply are `None`.
    ///
    /// # Errors
    /// [`GpuError::Lost`] when the GPU no longer answers.
    fn info(&mut self, gpu: &GpuId) -> Result<GpuInfo, GpuError>;

    /// Reads every field of [`GpuSample`]. A field the driver cannot supply is absent, not 0.
    ///
    /// # Errors
    /// [`GpuError::Lost`] when the GPU no longer answers; [`GpuError::Unavailable`] when the
    /// driver went away.
    fn sample(&mut self, gpu: &GpuId) -> Result<GpuSample, GpuError>;

    /// Waits up to `timeout` for the next device event (an Xid). `Ok(None)` means the timeout
    /// passed with no event.
    ///
    /// # Errors
    /// [`GpuError::Unavailable`] when the driver went away.
    fn wait_event(&mut self, timeout: Duration) -> Result<Option<GpuEvent>, GpuError>;

    /// Processes holding a compute context on the GPU, without pod attribution (the GPU thread
    /// adds it).
    ///
    /// # Errors
    /// [`GpuError::Lost`] when the GPU no longer answers.
    fn processes(&mut self, gpu: &GpuId) -> Result<Vec<GpuProcess>, GpuError>;
}
