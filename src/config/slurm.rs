//! The `slurm:` section: attribution of incidents to Slurm jobs and the node's state in Slurm.
//!
//! Off by default. `enabled` turns on draining (and optionally resuming) this node when a GPU's
//! health falls into one of `drain_on`. Attribution (job id, step, array task and user on
//! incidents) always runs where Slurm leaves its traces (a process's cgroup or environment, the
//! job's output file name); `log_patterns` adds output-name patterns besides Slurm's defaults.

use crate::health::HealthState;
use serde::Deserialize;
use std::path::PathBuf;

/// Slurm's default output file names (`sbatch --output` unset): `slurm-%j.out` and, for array
/// jobs, `slurm-%A_%a.out` (sbatch(1), "filename pattern").
pub const DEFAULT_LOG_PATTERNS: [&str; 2] = ["slurm-%A_%a.out", "slurm-%j.out"];

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RawSlurm {
    pub enabled: Option<bool>,
    pub drain_on: Option<Vec<String>>,
    pub resume: Option<bool>,
    pub node_name: Option<String>,
    pub scontrol: Option<String>,
    pub log_patterns: Option<Vec<String>>,
}

/// The validated `slurm:` section.
#[derive(Debug, Clone, PartialEq)]
pub struct SlurmConfig {
    pub enabled: bool,
    /// GPU health states that drain the node.
    pub drain_on: Vec<HealthState>,
    /// Resume the node once every GPU is healthy again, if assertwatch drained it.
    pub resume: bool,
    /// This node's name in Slurm.
    pub node_name: String,
    /// `scontrol`: an absolute path, or a name looked up on `PATH` when the daemon starts it.
    pub scontrol: PathBuf,
    /// Output file name patterns (`%j` job id, `%A` array master job id, `%a` array task id,
    /// `%u` user, `%x` job name, `%N` node, `%s` step; `%%` a literal `%`).
    pub log_patterns: Vec<String>,
}

impl Default for SlurmConfig {
    fn default() -> Self {
        SlurmConfig {
            enabled: false,
            drain_on: vec![HealthState::Unhealthy],
            resume: false,
            node_name: short_hostname(),
            scontrol: PathBuf::from("scontrol"),
            log_patterns: DEFAULT_LOG_PATTERNS
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
        }
    }
}

/// The host name up to its first dot (Slurm's `NodeName` is usually the short name).
pub fn short_hostname() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .map(|h| h.split('.').next().unwrap_or_default().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// Validates the section; each problem is reported with its field path.
pub fn validate(raw: Option<RawSlurm>, issue: &mut dyn FnMut(String, String)) -> SlurmConfig {
    let mut c = SlurmConfig::default();
    let Some(r) = raw else { return c };
    c.enabled = r.enabled.unwrap_or(false);
    c.resume = r.resume.unwrap_or(false);
    if let Some(states) = r.drain_on {
        c.drain_on.clear();
        for (i, s) in states.iter().enumerate() {
            match HealthState::parse(s) {
                Some(HealthState::Healthy) => issue(
                    format!("slurm.drain_on[{i}]"),
                    "draining on `healthy` would drain every node; use degraded or unhealthy"
                        .into(),
                ),
                Some(h) => c.drain_on.push(h),
                None => issue(
                    format!("slurm.drain_on[{i}]"),
                    format!("{s:?} is not a health state; use degraded or unhealthy"),
                ),
            }
        }
        if c.drain_on.is_empty() && c.enabled {
            issue(
                "slurm.drain_on".into(),
                "name at least one health state".into(),
            );
        }
    }
    if let Some(n) = r.node_name {
        let ok = !n.is_empty()
            && n.len() <= 128
            && n.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
        if ok {
            c.node_name = n;
        } else {
            issue(
                "slurm.node_name".into(),
                format!("{n:?} is not a Slurm node name (letters, digits, - _ .)"),
            );
        }
    }
    if let Some(s) = r.scontrol {
        if s.is_empty() {
            issue(
                "slurm.scontrol".into(),
                "give a path or a program name".into(),
            );
        } else {
            c.scontrol = PathBuf::from(s);
        }
    }
    if let Some(p) = r.log_patterns {
        for (i, pat) in p.iter().enumerate() {
            if let Err(m) = crate::sources::slurm::OutputPattern::compile(pat) {
                issue(format!("slurm.log_patterns[{i}]"), m);
            }
        }
        c.log_patterns = p;
        c.log_patterns
            .extend(DEFAULT_LOG_PATTERNS.iter().map(|s| (*s).to_owned()));
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(yaml: &str) -> (SlurmConfig, Vec<(String, String)>) {
        let raw: RawSlurm = serde_yaml::from_str(yaml).unwrap();
        let mut issues = Vec::new();
        let c = validate(Some(raw), &mut |p, m| issues.push((p, m)));
        (c, issues)
    }

    #[test]
    fn defaults_are_off_and_drain_on_unhealthy() {
        let c = validate(None, &mut |_, _| panic!("no issue expected"));
        assert!(!c.enabled && !c.resume);
        assert_eq!(c.drain_on, vec![HealthState::Unhealthy]);
        assert_eq!(c.scontrol, PathBuf::from("scontrol"));
        assert!(!c.node_name.contains('.'));
    }

    #[test]
    fn bad_values_name_their_field() {
        let (_, issues) = check("enabled: true\ndrain_on: [broken, healthy]\nnode_name: \"a b\"\nlog_patterns: [\"job-%q.log\"]\n");
        let paths: Vec<&str> = issues.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(
            paths,
            vec![
                "slurm.drain_on[0]",
                "slurm.drain_on[1]",
                "slurm.drain_on",
                "slurm.node_name",
                "slurm.log_patterns[0]"
            ]
        );
    }

    #[test]
    fn custom_patterns_come_first_then_the_defaults() {
        let (c, issues) =
            check("log_patterns: [\"train-%j.log\"]\ndrain_on: [degraded, unhealthy]\n");
        assert!(issues.is_empty(), "{issues:?}");
        assert_eq!(c.log_patterns[0], "train-%j.log");
        assert_eq!(c.log_patterns.len(), 3);
        assert_eq!(
            c.drain_on,
            vec![HealthState::Degraded, HealthState::Unhealthy]
        );
    }
}
