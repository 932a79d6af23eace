//! Serde shapes of the YAML configuration. Only structure and defaults live here; meaning is
//! checked in `validate.rs`. Every struct rejects unknown keys.

use serde::Deserialize;

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawConfig {
    pub listen: Option<String>,
    pub state_dir: Option<String>,
    /// Name of this node in incidents and alerts (default: `$NODE_NAME`, then the hostname).
    pub node_name: Option<String>,
    #[serde(default)]
    pub logs: Vec<RawLogSource>,
    pub kernel_log: Option<RawKernelLog>,
    pub gpu: Option<RawGpu>,
    pub repro: Option<RawRepro>,
    pub alertmanager: Option<RawAlertmanager>,
    #[serde(default)]
    pub rules: Vec<RawRule>,
    pub detection: Option<RawDetection>,
    pub incidents: Option<RawIncidents>,
    pub tailing: Option<RawTailing>,
    pub http: Option<RawHttp>,
    pub limits: Option<RawLimits>,
    /// Drop to this user (`name` or `uid:gid`) once the kernel log and the listener are open.
    pub run_as: Option<String>,
    pub slurm: Option<super::slurm::RawSlurm>,
    /// The Kubernetes API client and what it feeds (see `kubernetes.rs`).
    pub kubernetes: Option<super::kubernetes::RawKubernetes>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHttp {
    /// Serve the incidents API and page on a non-loopback address without basic auth.
    pub expose_api: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLimits {
    /// Series per metric family whose label values come from log text (Xid numbers, bus ids).
    pub max_series_per_family: Option<usize>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawLogSource {
    pub name: Option<String>,
    #[serde(default)]
    pub paths: Vec<String>,
    #[serde(default)]
    pub exclude: Vec<String>,
    pub format: Option<String>,
    /// Overrides `incidents.max_per_minute` for this source.
    pub max_incidents_per_minute: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawKernelLog {
    pub path: Option<String>,
    /// `/dev/kmsg` only: on first start, also read records up to this far back (e.g. `10m`).
    pub lookback: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawGpu {
    pub backend: Option<String>,
    pub fake_file: Option<String>,
    pub poll_interval: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRepro {
    pub enabled: Option<bool>,
    #[serde(default)]
    pub roots: Vec<String>,
    #[serde(default)]
    pub modes: Vec<String>,
    pub timeout: Option<String>,
    pub max_per_hour: Option<u32>,
    pub max_concurrent: Option<u32>,
    pub python: Option<String>,
    /// Replay jobs whose debug state is owned by root (uid 0). Off by default: a replay then
    /// runs as root. Only for single-user machines and tests.
    pub allow_root_jobs: Option<bool>,
    /// Replays as pods in the job's own environment (see `kubernetes.rs`).
    pub kubernetes: Option<super::kubernetes::RawReproKubernetes>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAlertmanager {
    pub url: Option<String>,
    #[serde(default)]
    pub urls: Vec<String>,
    pub resend_interval: Option<String>,
    pub resolve_after: Option<String>,
    pub timeout: Option<String>,
    pub queue_capacity: Option<usize>,
    pub runbook_base_url: Option<String>,
    /// Basic auth user; the password is read from `password_file` (never written in config).
    pub username: Option<String>,
    pub password_file: Option<String>,
    /// Bearer token read from this file.
    pub bearer_token_file: Option<String>,
    pub tls_ca_file: Option<String>,
    pub tls_cert_file: Option<String>,
    pub tls_key_file: Option<String>,
    pub tls_insecure_skip_verify: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawRule {
    pub name: Option<String>,
    pub pattern: Option<String>,
    #[serde(default)]
    pub contains: Vec<String>,
    pub kind: Option<String>,
    pub category: Option<String>,
    pub blame: Option<String>,
    pub hint: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawDetection {
    pub max_line_bytes: Option<serde_yaml::Value>,
    pub min_loss_scale: Option<f64>,
    pub follow_lines: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawIncidents {
    pub gap_lines: Option<u64>,
    pub quiet_period: Option<String>,
    pub xid_window: Option<String>,
    pub correlation_window: Option<String>,
    pub excerpt_lines: Option<usize>,
    pub max_age: Option<String>,
    pub max_count: Option<u64>,
    /// Bound on the store's live data; the oldest incidents go first.
    pub max_store_bytes: Option<serde_yaml::Value>,
    /// At most this many incidents per source and minute; more are folded into a suppression count.
    pub max_per_minute: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTailing {
    pub rescan_interval: Option<String>,
    pub max_open_files: Option<usize>,
    pub checkpoint_interval: Option<String>,
    pub read_bytes_per_pass: Option<serde_yaml::Value>,
    /// `beginning` (default) or `end`: where to start in a file seen for the first time.
    pub start_at: Option<String>,
    /// How often idle files are checked for growth when no inotify event arrives.
    pub poll_interval: Option<String>,
}
