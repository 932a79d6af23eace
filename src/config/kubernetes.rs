//! The `kubernetes:` and `repro.kubernetes:` sections: shapes, defaults and checks.
//!
//! `kubernetes:` turns on the API client and what it feeds (Events on the failing pod, a node
//! condition for GPU hardware faults); `repro.kubernetes:` runs replays as pods in allow-listed
//! namespaces. Both are off by default.

use serde::Deserialize;
use std::path::PathBuf;
use std::time::Duration;

/// `kubernetes:` as written.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawKubernetes {
    pub enabled: Option<bool>,
    /// A kubeconfig for development; without it the in-cluster service account is used.
    pub kubeconfig: Option<String>,
    pub request_timeout: Option<String>,
    /// Attempts per API call after the first (409 conflicts, 5xx, timeouts).
    pub retries: Option<u32>,
    /// Emit `events.k8s.io/v1` Events on the failing pod.
    pub events: Option<bool>,
    /// Events per pod and hour; more are counted and not sent.
    pub events_per_pod_per_hour: Option<u32>,
    /// Set a node condition for GPU hardware faults.
    pub node_condition: Option<bool>,
    /// The condition's type (node-problem-detector style, CamelCase).
    pub node_condition_type: Option<String>,
}

/// `repro.kubernetes:` as written.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawReproKubernetes {
    pub enabled: Option<bool>,
    /// Namespaces whose pods get replays; `"*"`: all.
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// Namespaces whose replays keep host namespaces, privileged mode and added capabilities.
    #[serde(default)]
    pub carry_privileges_in: Vec<String>,
    pub memory_limit: Option<String>,
    /// The replay pod's `activeDeadlineSeconds`.
    pub deadline: Option<String>,
    /// Interpreter in the job's image.
    pub python: Option<String>,
    /// How long a replay pod may stay unscheduled (no free GPU) before it is deleted as skipped.
    pub schedule_timeout: Option<String>,
}

/// The validated `kubernetes:` section.
#[derive(Debug, Clone, PartialEq)]
pub struct KubernetesConfig {
    pub enabled: bool,
    pub kubeconfig: Option<PathBuf>,
    pub request_timeout: Duration,
    pub retries: u32,
    pub events: bool,
    pub events_per_pod_per_hour: u32,
    pub node_condition: bool,
    pub node_condition_type: String,
}

/// The validated `repro.kubernetes:` section.
#[derive(Debug, Clone, PartialEq)]
pub struct ReproKubernetesConfig {
    pub enabled: bool,
    pub namespaces: Vec<String>,
    pub carry_privileges_in: Vec<String>,
    pub memory_limit: String,
    pub deadline: Duration,
    pub python: String,
    pub schedule_timeout: Duration,
}

pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
pub const DEFAULT_RETRIES: u32 = 3;
pub const DEFAULT_EVENTS_PER_POD_PER_HOUR: u32 = 30;
pub const DEFAULT_NODE_CONDITION_TYPE: &str = "GPUHardwareFault";
pub const DEFAULT_SCHEDULE_TIMEOUT: Duration = Duration::from_secs(120);
/// The shortest replay deadline: the harness keeps a margin before it.
pub const MIN_DEADLINE: Duration = Duration::from_secs(120);

impl Default for KubernetesConfig {
    fn default() -> Self {
        KubernetesConfig {
            enabled: false,
            kubeconfig: None,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            retries: DEFAULT_RETRIES,
            events: true,
            events_per_pod_per_hour: DEFAULT_EVENTS_PER_POD_PER_HOUR,
            node_condition: true,
            node_condition_type: DEFAULT_NODE_CONDITION_TYPE.to_owned(),
        }
    }
}

impl Default for ReproKubernetesConfig {
    fn default() -> Self {
        ReproKubernetesConfig {
            enabled: false,
            namespaces: Vec::new(),
            carry_privileges_in: Vec::new(),
            memory_limit: assertwatch_kube::replay_pod::DEFAULT_MEMORY_LIMIT.to_owned(),
            deadline: assertwatch_kube::replay_pod::DEFAULT_DEADLINE,
            python: assertwatch_kube::replay_pod::DEFAULT_PYTHON.to_owned(),
            schedule_timeout: DEFAULT_SCHEDULE_TIMEOUT,
        }
    }
}

impl ReproKubernetesConfig {
    /// The replay pod options this section stands for (node and incident are per replay).
    pub fn replay_options(&self) -> assertwatch_kube::ReplayPodOptions {
        assertwatch_kube::ReplayPodOptions {
            namespaces: self.namespaces.clone(),
            carry_privileges_in: self.carry_privileges_in.clone(),
            memory_limit: self.memory_limit.clone(),
            deadline: self.deadline,
            python: self.python.clone(),
            ..Default::default()
        }
    }
}

/// A problem found: field path under the section and message.
pub type Problem = (String, String);

fn duration(out: &mut Vec<Problem>, path: &str, v: &Option<String>, default: Duration) -> Duration {
    match v.as_deref().map(super::validate::parse_duration) {
        None => default,
        Some(Ok(d)) => d,
        Some(Err(m)) => {
            out.push((path.to_owned(), m));
            default
        }
    }
}

/// Checks `kubernetes:`; relative paths resolve against `base`.
pub fn validate_kubernetes(
    raw: Option<RawKubernetes>,
    base: &std::path::Path,
    out: &mut Vec<Problem>,
) -> KubernetesConfig {
    let Some(r) = raw else {
        return KubernetesConfig::default();
    };
    let d = KubernetesConfig::default();
    let request_timeout = duration(
        out,
        "kubernetes.request_timeout",
        &r.request_timeout,
        d.request_timeout,
    );
    if request_timeout.is_zero() {
        out.push((
            "kubernetes.request_timeout".into(),
            "must be more than 0".into(),
        ));
    }
    let node_condition_type = r
        .node_condition_type
        .unwrap_or_else(|| d.node_condition_type.clone());
    if !is_condition_type(&node_condition_type) {
        out.push((
            "kubernetes.node_condition_type".into(),
            format!("{node_condition_type:?} must be CamelCase letters and digits, like \"GPUHardwareFault\""),
        ));
    }
    KubernetesConfig {
        enabled: r.enabled.unwrap_or(false),
        kubeconfig: r.kubeconfig.as_deref().map(|p| base.join(p)),
        request_timeout,
        retries: r.retries.unwrap_or(d.retries).min(10),
        events: r.events.unwrap_or(d.events),
        events_per_pod_per_hour: r
            .events_per_pod_per_hour
            .unwrap_or(d.events_per_pod_per_hour),
        node_condition: r.node_condition.unwrap_or(d.node_condition),
        node_condition_type,
    }
}

/// Checks `repro.kubernetes:`. `client_enabled` is whether `kubernetes.enabled` is on.
pub fn validate_repro_kubernetes(
    raw: Option<RawReproKubernetes>,
    client_enabled: bool,
    out: &mut Vec<Problem>,
) -> ReproKubernetesConfig {
    let Some(r) = raw else {
        return ReproKubernetesConfig::default();
    };
    let d = ReproKubernetesConfig::default();
    let enabled = r.enabled.unwrap_or(false);
    for (key, list) in [
        ("namespaces", &r.namespaces),
        ("carry_privileges_in", &r.carry_privileges_in),
    ] {
        for (i, ns) in list.iter().enumerate() {
            if ns != "*" && !is_dns_label(ns) {
                out.push((
                    format!("repro.kubernetes.{key}[{i}]"),
                    format!("{ns:?} is not a namespace name (a DNS label) or \"*\""),
                ));
            }
        }
    }
    if enabled && r.namespaces.is_empty() {
        out.push((
            "repro.kubernetes.namespaces".into(),
            "list the namespaces whose pods get replays (or \"*\"); with none, no replay would run"
                .into(),
        ));
    }
    if enabled && !client_enabled {
        out.push((
            "repro.kubernetes.enabled".into(),
            "needs kubernetes.enabled: true (the API client)".into(),
        ));
    }
    let memory_limit = r.memory_limit.unwrap_or_else(|| d.memory_limit.clone());
    if !is_quantity(&memory_limit) {
        out.push((
            "repro.kubernetes.memory_limit".into(),
            format!("{memory_limit:?} is not a Kubernetes quantity; write it like \"32Gi\""),
        ));
    }
    let deadline = duration(out, "repro.kubernetes.deadline", &r.deadline, d.deadline);
    if deadline < MIN_DEADLINE {
        out.push((
            "repro.kubernetes.deadline".into(),
            format!(
                "must be at least {}",
                humantime::format_duration(MIN_DEADLINE)
            ),
        ));
    }
    let python = r.python.unwrap_or_else(|| d.python.clone());
    if python.trim().is_empty() {
        out.push((
            "repro.kubernetes.python".into(),
            "must name an interpreter".into(),
        ));
    }
    ReproKubernetesConfig {
        enabled,
        namespaces: r.namespaces,
        carry_privileges_in: r.carry_privileges_in,
        memory_limit,
        deadline,
        python,
        schedule_timeout: duration(
            out,
            "repro.kubernetes.schedule_timeout",
            &r.schedule_timeout,
            d.schedule_timeout,
        ),
    }
}

/// A namespace name: a DNS-1123 label (RFC 1123, as Kubernetes validates namespaces).
fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// A decimal or binary-suffixed quantity as `kubectl` writes memory (`512Mi`, `32Gi`, `1e9`).
fn is_quantity(s: &str) -> bool {
    let s = s.trim();
    let num_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, suffix) = s.split_at(num_end);
    !num.is_empty()
        && num.parse::<f64>().is_ok_and(|v| v > 0.0)
        && ([
            "", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "k", "M", "G", "T", "P", "E",
        ]
        .contains(&suffix)
            || suffix
                .strip_prefix(['e', 'E'])
                .is_some_and(|e| !e.is_empty() && e.bytes().all(|b| b.is_ascii_digit())))
}

fn is_condition_type(s: &str) -> bool {
    s.len() <= 316
        && s.chars().next().is_some_and(|c| c.is_ascii_uppercase())
        && s.bytes().all(|b| b.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_and_names() {
        for q in ["32Gi", "512Mi", "1e9", "1.5G", "4096"] {
            assert!(is_quantity(q), "{q}");
        }
        for q in ["", "Gi", "32 GB", "-1Gi", "0"] {
            assert!(!is_quantity(q), "{q}");
        }
        assert!(is_dns_label("ml-team"));
        assert!(!is_dns_label("ML"));
        assert!(is_condition_type("GPUHardwareFault"));
        assert!(!is_condition_type("gpu-fault"));
    }

    fn issues(yaml: &str) -> Vec<String> {
        match crate::config::parse(yaml, None, std::path::Path::new("/etc/aw")) {
            Ok(_) => Vec::new(),
            Err(e) => e.issues.iter().map(|i| i.to_string()).collect(),
        }
    }

    #[test]
    fn off_by_default_and_typed_when_on() {
        let c = crate::config::parse("{}", None, std::path::Path::new("")).unwrap();
        assert_eq!(c.kubernetes, KubernetesConfig::default());
        assert!(!c.kubernetes.enabled);
        assert_eq!(c.repro.kubernetes, ReproKubernetesConfig::default());
        let c = crate::config::parse(
            "kubernetes:\n  enabled: true\n  kubeconfig: kc\n  events_per_pod_per_hour: 5\n\
             repro:\n  kubernetes:\n    enabled: true\n    namespaces: [ml, \"*\"]\n    \
             memory_limit: 8Gi\n    deadline: 15m\n",
            None,
            std::path::Path::new("/etc/aw"),
        )
        .unwrap();
        assert!(c.kubernetes.enabled);
        assert_eq!(c.kubernetes.kubeconfig, Some(PathBuf::from("/etc/aw/kc")));
        assert_eq!(c.kubernetes.events_per_pod_per_hour, 5);
        let r = &c.repro.kubernetes;
        assert!(r.enabled);
        assert_eq!(r.memory_limit, "8Gi");
        assert_eq!(r.deadline, Duration::from_secs(900));
        let o = r.replay_options();
        assert_eq!(o.namespaces, vec!["ml", "*"]);
    }

    #[test]
    fn every_problem_is_named() {
        let i = issues(
            "kubernetes:\n  node_condition_type: bad-type\n  request_timeout: soon\n\
             repro:\n  kubernetes:\n    enabled: true\n    carry_privileges_in: [Bad_NS]\n    \
             memory_limit: lots\n    deadline: 30s\n",
        );
        let joined = i.join("\n");
        for needle in [
            "kubernetes.node_condition_type",
            "kubernetes.request_timeout",
            "repro.kubernetes.namespaces",
            "repro.kubernetes.enabled",
            "repro.kubernetes.carry_privileges_in[0]",
            "repro.kubernetes.memory_limit",
            "repro.kubernetes.deadline",
        ] {
            assert!(joined.contains(needle), "{needle} missing in:\n{joined}");
        }
        assert!(!issues("kubernetes:\n  unknown_key: 1\n").is_empty());
    }
}
