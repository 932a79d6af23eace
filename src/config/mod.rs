//! Configuration: the only way in, for `run`, `check-config` and `scan --config`.
//!
//! Two stages, as in ripgrep's `LowArgs`/`HiArgs`: `raw.rs` holds the serde shapes (structure,
//! unknown keys), `validate.rs` turns them into the typed [`Config`] below and reports *every*
//! problem at once, each naming its field path and YAML line. YAML parsing stays behind
//! [`parse`], so the YAML crate can be swapped in one place.

pub mod kubernetes;
pub mod raw;
pub mod slurm;
pub mod validate;

use crate::detect::UserRule;
use crate::incidents::EngineConfig;
use crate::sources::decode::Format;
use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The shipped default configuration (fake GPUs, local state dir, example logs).
pub const DEFAULT_YAML: &str = include_str!("../../config/assertwatch.yaml");

// Defaults of the settings the daemon itself owns. Settings handed on to a crate take that
// crate's `DEFAULT_*` constants (`assertwatch_tail`, `assertwatch_alertmanager`,
// `assertwatch_repro`, `assertwatch_gpu::GpuConfig::default()`), so each default is written once.

/// Default of `listen`: loopback only, so nothing is exposed until asked for.
pub const DEFAULT_LISTEN: SocketAddr = SocketAddr::V4(std::net::SocketAddrV4::new(
    std::net::Ipv4Addr::LOCALHOST,
    9949,
));
/// Default of `state_dir`, relative to the configuration file.
pub const DEFAULT_STATE_DIR: &str = "./var/assertwatch";
/// Shortest accepted `gpu.poll_interval`: NVML queries cost a few milliseconds per GPU.
pub const MIN_GPU_POLL_INTERVAL: Duration = Duration::from_millis(100);
/// Default of `detection.min_loss_scale`.
pub const DEFAULT_MIN_LOSS_SCALE: f64 = 1.0;
/// Default of `detection.follow_lines`.
pub const DEFAULT_FOLLOW_LINES: u32 = 8;
/// Most `incidents.excerpt_lines` accepted.
pub const MAX_EXCERPT_LINES: usize = 1000;
/// Default of `incidents.max_age`: 30 days.
pub const DEFAULT_MAX_AGE: Duration = Duration::from_secs(30 * 86_400);
/// Default of `incidents.max_count`.
pub const DEFAULT_MAX_COUNT: u64 = 10_000;
/// Default of `incidents.max_store_bytes`: 256 MiB.
pub const DEFAULT_MAX_STORE_BYTES: u64 = 256 << 20;
/// Default of `incidents.max_per_minute`, per log source.
pub const DEFAULT_MAX_INCIDENTS_PER_MINUTE: u32 = 60;
/// Default of `incidents.correlation_window`.
pub const DEFAULT_CORRELATION_WINDOW: Duration = Duration::from_secs(120);
/// Default of `limits.max_series_per_family`.
pub const DEFAULT_MAX_SERIES_PER_FAMILY: usize = 500;
/// Default of `alertmanager.runbook_base_url`.
pub const DEFAULT_RUNBOOK_BASE_URL: &str =
    "https://github.com/assertwatch/assertwatch/blob/main/docs/runbooks.md";

/// One problem with the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigIssue {
    /// Field path, e.g. `logs[0].format`.
    pub path: String,
    /// 1-based line in the YAML text, where it could be located.
    pub line: Option<usize>,
    pub message: String,
}

impl fmt::Display for ConfigIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "{} (line {l}): {}", self.path, self.message),
            None => write!(f, "{}: {}", self.path, self.message),
        }
    }
}

/// Every problem found in one configuration text.
#[derive(Debug, Clone, thiserror::Error)]
#[error("invalid configuration{}: {}", source_name.as_deref().map(|s| format!(" in {s}")).unwrap_or_default(), issues.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct ConfigError {
    pub source_name: Option<String>,
    pub issues: Vec<ConfigIssue>,
}

#[derive(Debug, Clone)]
pub struct LogSource {
    pub name: String,
    pub paths: Vec<String>,
    pub exclude: Vec<String>,
    pub format: Format,
    /// Incidents per minute from this source before further ones are folded into a count.
    pub max_incidents_per_minute: Option<u32>,
}

#[derive(Debug, Clone)]
pub struct KernelLogConfig {
    pub path: PathBuf,
    pub lookback: Option<Duration>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuBackendKind {
    Nvml,
    Fake,
    None,
}

#[derive(Debug, Clone)]
pub struct GpuConfig {
    pub backend: GpuBackendKind,
    pub fake_file: PathBuf,
    pub poll_interval: Duration,
}

#[derive(Debug, Clone)]
pub struct ReproConfig {
    pub enabled: bool,
    pub roots: Vec<String>,
    /// Replay modes in the order they are tried.
    pub modes: Vec<assertwatch_repro::Mode>,
    pub timeout: Duration,
    pub max_per_hour: u32,
    pub max_concurrent: u32,
    /// Interpreter that replaces `{python}` in a manifest's argv; `None`: the job's own.
    pub python: Option<PathBuf>,
    pub allow_root_jobs: bool,
    /// `repro.kubernetes`: replays as pods.
    pub kubernetes: kubernetes::ReproKubernetesConfig,
}

#[derive(Debug, Clone)]
pub struct AlertmanagerConfig {
    pub urls: Vec<String>,
    pub resend_interval: Duration,
    pub resolve_after: Duration,
    pub timeout: Duration,
    pub queue_capacity: usize,
    pub runbook_base_url: String,
    pub auth: AlertAuth,
    pub tls_ca_file: Option<PathBuf>,
    pub tls_cert_file: Option<PathBuf>,
    pub tls_key_file: Option<PathBuf>,
    pub tls_insecure_skip_verify: bool,
}

/// How the daemon authenticates to Alertmanager; secrets are read from files at start.
#[derive(Clone, PartialEq, Eq)]
pub enum AlertAuth {
    None,
    Basic { username: String, password: String },
    Bearer { token: String },
}

impl std::fmt::Debug for AlertAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AlertAuth::None => f.write_str("None"),
            AlertAuth::Basic { username, .. } => write!(f, "Basic({username}, <hidden>)"),
            AlertAuth::Bearer { .. } => f.write_str("Bearer(<hidden>)"),
        }
    }
}

#[derive(Debug, Clone)]
pub struct TailingConfig {
    pub rescan_interval: Duration,
    pub max_open_files: usize,
    pub checkpoint_interval: Duration,
    pub read_bytes_per_pass: usize,
    pub start_at_end: bool,
    pub poll_interval: Duration,
}

#[derive(Debug, Clone)]
pub struct RetentionConfig {
    pub max_age: Duration,
    pub max_count: u64,
    pub max_store_bytes: u64,
    pub max_per_minute: u32,
    pub correlation_window: Duration,
}

/// The validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    pub state_dir: PathBuf,
    pub node_name: String,
    pub logs: Vec<LogSource>,
    pub kernel_log: Option<KernelLogConfig>,
    pub gpu: GpuConfig,
    pub repro: ReproConfig,
    pub alertmanager: Option<AlertmanagerConfig>,
    pub rules: Vec<UserRule>,
    pub max_line_bytes: usize,
    pub min_loss_scale: f64,
    pub follow_lines: u32,
    pub engine: EngineConfig,
    pub retention: RetentionConfig,
    pub tailing: TailingConfig,
    pub expose_api: bool,
    pub max_series_per_family: usize,
    pub run_as: Option<RunAs>,
    /// The `slurm:` section (attribution patterns always apply; node state only when enabled).
    pub slurm: slurm::SlurmConfig,
    /// `kubernetes`: the API client, Events and the node condition.
    pub kubernetes: kubernetes::KubernetesConfig,
}

/// The identity the daemon drops to (`run_as`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunAs {
    pub uid: u32,
    pub gid: u32,
    pub name: String,
}

/// Parses and validates a configuration text. `source_name` names it in messages; relative
/// paths in it are resolved against `base_dir`.
pub fn parse(
    text: &str,
    source_name: Option<&str>,
    base_dir: &Path,
) -> Result<Config, ConfigError> {
    let err = |issues| ConfigError {
        source_name: source_name.map(str::to_owned),
        issues,
    };
    let de = serde_yaml::Deserializer::from_str(text);
    let raw: raw::RawConfig = match serde_path_to_error::deserialize(de) {
        Ok(r) => r,
        Err(e) => {
            let path = e.path().to_string();
            let inner = e.into_inner();
            let line = inner.location().map(|l| l.line());
            let mut message = inner.to_string();
            // serde_yaml appends " at line L column C"; the line is reported separately.
            if let Some(i) = message.find(" at line ") {
                message.truncate(i);
            }
            let path = if path == "." || path.is_empty() {
                "(top level)".to_owned()
            } else {
                path
            };
            return Err(err(vec![ConfigIssue {
                path,
                line,
                message,
            }]));
        }
    };
    validate::validate(raw, text, base_dir).map_err(err)
}

/// Reads and validates a configuration file.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
        source_name: Some(name.clone()),
        issues: vec![ConfigIssue {
            path: "(file)".into(),
            line: None,
            message: format!("cannot read: {e}"),
        }],
    })?;
    let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
    parse(&text, Some(&name), &base)
}

/// The embedded default configuration, with paths relative to the current directory.
pub fn default_config() -> Result<Config, ConfigError> {
    parse(DEFAULT_YAML, Some("(embedded default)"), Path::new("."))
}

impl Config {
    pub fn detect_options(&self) -> crate::detect::DetectOptions {
        crate::detect::DetectOptions {
            min_loss_scale: self.min_loss_scale,
            follow_lines: self.follow_lines,
        }
    }
}
