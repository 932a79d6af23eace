//! The GPU layer of assertwatch: it reads NVIDIA GPUs (or a scripted fake), publishes the latest
//! readings as a snapshot, forwards Xid events, renders the `assertwatch_gpu_*` metric families and
//! runs a small CUDA health probe.
//!
//! It is a separate crate so that everything touching the NVIDIA driver (NVML, the CUDA driver
//! API, both loaded at run time) sits behind one narrow API, builds on machines without a GPU and
//! can be tested with the fake alone. The pieces:
//!
//! - [`backend`]: the [`GpuBackend`] trait every driver implements, and [`GpuError`].
//! - [`nvml`]: [`NvmlBackend`], the real driver, over `nvml-wrapper`.
//! - [`fake`]: [`FakeBackend`], replaying a YAML script (tests and the demo config).
//! - [`monitor`]: the dedicated GPU thread ([`spawn`]) and [`poll_once`].
//! - [`collector`]: [`GpuCollector`], a `prometheus` collector over the latest snapshot.
//! - [`procs`]: GPU process → Kubernetes pod attribution.
//! - [`probe`]: the CUDA health probe ([`probe::probe`]).
//!
//! The contract that runs through all of it: a reading the driver could not supply is `None` and
//! produces no series. It is never replaced by `0`.

pub mod backend;
pub mod collector;
pub mod fake;
pub mod monitor;
pub mod nvml;
pub mod probe;
pub mod procs;
mod sample;

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

pub use backend::{GpuBackend, GpuError};
pub use collector::GpuCollector;
pub use fake::{FakeBackend, FakeClock, FakeScript, FakeScriptError};
pub use monitor::{poll_once, spawn, spawn_with_backend, GpuHandle, GpuStop};
pub use nvml::NvmlBackend;
pub use probe::{ProbeError, ProbeMetrics, ProbeReport};
pub use procs::PodResolver;
pub use sample::{GpuSample, NvlinkErrors, ThrottleReason};

/// Identity of one GPU, as the driver enumerates it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GpuId {
    /// NVML index (the order `nvidia-smi` prints).
    pub index: u32,
    /// `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, stable across reboots.
    pub uuid: String,
    /// PCI bus id as NVML writes it, e.g. `00000000:17:00.0`.
    pub pci_bus_id: String,
}

/// Static facts about one GPU, rendered as `assertwatch_gpu_info`. Each is absent when the driver
/// could not supply it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GpuInfo {
    /// Product name, e.g. `NVIDIA H100 80GB HBM3`.
    pub name: Option<String>,
    /// Kernel driver version, e.g. `550.54.15`.
    pub driver_version: Option<String>,
    /// VBIOS version.
    pub vbios_version: Option<String>,
    /// Highest CUDA version the driver supports, `major.minor`.
    pub cuda_driver_version: Option<String>,
}

/// Kubernetes identity of a process, where it could be found.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PodRef {
    /// Namespace of the pod.
    pub namespace: String,
    /// Pod name.
    pub pod: String,
    /// Container name; `None` when the pod has several containers and the one holding the
    /// process could not be told.
    pub container: Option<String>,
}

/// One process holding a compute context on a GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuProcess {
    /// Process id, as seen from the daemon's pid namespace (the host's on a DaemonSet with
    /// `hostPID: true`).
    pub pid: u32,
    /// Short process name, where known.
    pub name: Option<String>,
    /// GPU memory the process holds; absent when the driver does not report it.
    pub used_memory_bytes: Option<u64>,
    /// The pod the process runs in, where known.
    pub pod: Option<PodRef>,
}

/// Something that happened on a GPU, delivered as it happens (not at the next poll).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GpuEvent {
    /// The driver reported an Xid error.
    Xid {
        /// The GPU it happened on.
        gpu: GpuId,
        /// The Xid number (see NVIDIA's Xid catalog).
        xid: u32,
        /// The process the driver blamed, where it says (NVML events carry none; the kernel log
        /// line does).
        pid: Option<u32>,
        /// When the daemon received it.
        at: SystemTime,
    },
    /// The GPU stopped answering (NVML `GPU_IS_LOST`, e.g. fallen off the bus).
    Lost {
        /// The GPU that was lost.
        gpu: GpuId,
        /// When the daemon noticed.
        at: SystemTime,
    },
}

/// Everything known about one GPU at one poll.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuState {
    /// Identity.
    pub id: GpuId,
    /// Static facts.
    pub info: GpuInfo,
    /// Readings; all absent when the GPU is lost.
    pub sample: GpuSample,
    /// Compute processes, with pod attribution where found.
    pub processes: Vec<GpuProcess>,
    /// The driver reports the GPU as lost.
    pub lost: bool,
}

/// The result of one poll of every GPU, published to the metrics collector.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuSnapshot {
    /// The backend answered (`assertwatch_nvml_up`). Always true for the fake once its script
    /// loaded, false for `Backend::None`.
    pub nvml_up: bool,
    /// `nvml`, `fake` or `none`.
    pub backend: &'static str,
    /// One entry per enumerated GPU, in index order.
    pub gpus: Vec<GpuState>,
    /// Wall-clock time at the start of the poll.
    pub taken_at: SystemTime,
    /// How long the poll took (every driver read for every GPU).
    pub collect_duration: Duration,
}

impl GpuSnapshot {
    /// The snapshot published before the first poll and whenever the backend is down.
    pub fn down(backend: &'static str) -> GpuSnapshot {
        GpuSnapshot {
            nvml_up: false,
            backend,
            gpus: Vec::new(),
            taken_at: SystemTime::now(),
            collect_duration: Duration::ZERO,
        }
    }
}

/// Which driver the GPU thread opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backend {
    /// NVIDIA's NVML, loaded at run time.
    #[default]
    Nvml,
    /// A scripted fake (`GpuConfig::fake_file`).
    Fake,
    /// No GPU work at all: `assertwatch_nvml_up 0`, no thread.
    None,
}

impl Backend {
    /// The name used in config and in [`GpuSnapshot::backend`].
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Nvml => "nvml",
            Backend::Fake => "fake",
            Backend::None => "none",
        }
    }
}

impl std::str::FromStr for Backend {
    type Err = String;

    /// Parses `nvml`, `fake` or `none`; the error says what is accepted.
    fn from_str(s: &str) -> Result<Backend, String> {
        match s {
            "nvml" => Ok(Backend::Nvml),
            "fake" => Ok(Backend::Fake),
            "none" => Ok(Backend::None),
            other => Err(format!(
                "{other:?} is not a GPU backend; use one of nvml, fake, none"
            )),
        }
    }
}

/// Settings for the GPU thread. The daemon validates its config file and builds this; there is no
/// serde here on purpose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuConfig {
    /// Which driver to open.
    pub backend: Backend,
    /// The fake's script, read when `backend` is `Fake`.
    pub fake_file: PathBuf,
    /// Time between two full polls. Events are delivered as they come, not at polls.
    pub poll_interval: Duration,
    /// Where `/proc` is (tests point it at a temporary tree).
    pub proc_root: PathBuf,
    /// Where the kubelet writes pod logs, used to map pod UIDs to names.
    pub pod_log_root: PathBuf,
}

impl GpuConfig {
    /// Defaults for `backend`: 10 s polls, `/proc`, `/var/log/pods`, `config/fake-gpus.yaml`.
    pub fn new(backend: Backend) -> GpuConfig {
        GpuConfig {
            backend,
            fake_file: PathBuf::from("config/fake-gpus.yaml"),
            poll_interval: Duration::from_secs(10),
            proc_root: PathBuf::from("/proc"),
            pod_log_root: PathBuf::from("/var/log/pods"),
        }
    }
}

impl Default for GpuConfig {
    fn default() -> GpuConfig {
        GpuConfig::new(Backend::Nvml)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_names_round_trip() {
        for b in [Backend::Nvml, Backend::Fake, Backend::None] {
            assert_eq!(b.as_str().parse::<Backend>(), Ok(b));
        }
        let err = "cuda".parse::<Backend>().unwrap_err();
        assert!(
            err.contains("\"cuda\"") && err.contains("nvml, fake, none"),
            "{err}"
        );
    }
}
