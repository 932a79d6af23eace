//! The Slurm node sink: drains this node in Slurm when a GPU's health says so, and (opt-in)
//! resumes it once every GPU has recovered — only if assertwatch drained it.
//!
//! Slurm is the engine here: the sink only runs `scontrol` (from an argv list, through the
//! project's one child-process module: no shell, an environment built from nothing, a timeout),
//! `scontrol update NodeName=<node> State=DRAIN Reason="assertwatch: <what> on <GPU> (incident
//! <id>)"`, the reason built from the health model's own words (never log text) and bounded. A
//! node that someone else drained is never resumed and its reason is never overwritten: before
//! each change the sink reads the node's state and reason (`scontrol show node -o`). Which drain
//! was ours survives restarts in `state_dir/slurm-drain.json`.

use crate::config::slurm::SlurmConfig;
use crate::health::sink::HealthReport;
use crate::health::GpuHealth;
use crate::metrics::Metrics;
use crate::sinks::{IncidentEvent, IncidentSink};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// Every reason this sink writes starts with this, so it can tell its drains from others'.
pub const REASON_PREFIX: &str = "assertwatch:";
/// Longest reason written (Slurm keeps it in memory and prints it in `sinfo -R`).
const MAX_REASON: usize = 200;
/// After a failed `scontrol`, the next try waits this long.
const RETRY_AFTER: Duration = Duration::from_secs(30);
/// Longest one `scontrol` may run.
const SCONTROL_TIMEOUT: Duration = Duration::from_secs(20);

/// What `scontrol show node -o` says about the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeState {
    /// `State=` as printed: `IDLE`, `IDLE+DRAIN`, `MIXED+DRAIN`, `DOWN+DRAIN`, …
    pub state: String,
    /// `Reason=` without the `[user@time]` suffix, if any.
    pub reason: Option<String>,
}

impl NodeState {
    /// Whether the node is drained or draining.
    pub fn drained(&self) -> bool {
        self.state.split('+').any(|s| s.starts_with("DRAIN"))
    }

    /// Whether the current drain reason is one this sink wrote.
    pub fn ours(&self) -> bool {
        self.reason
            .as_deref()
            .is_some_and(|r| r.starts_with(REASON_PREFIX))
    }
}

/// Parses one line of `scontrol show node -o <node>`.
pub fn parse_show_node(text: &str) -> Option<NodeState> {
    let line = text.lines().find(|l| l.contains("NodeName="))?;
    let state = line
        .split_whitespace()
        .find_map(|f| f.strip_prefix("State="))?
        .to_owned();
    // Reason is the last field and may hold spaces: `Reason=text [user@2026-12-02T10:00:00]`.
    let reason = line.find(" Reason=").map(|i| {
        let r = &line[i + " Reason=".len()..];
        let r = match r.rfind(" [") {
            Some(j) if r.ends_with(']') => &r[..j],
            _ => r,
        };
        r.trim().to_owned()
    });
    Some(NodeState {
        state,
        reason: reason.filter(|r| !r.is_empty() && r != "(null)"),
    })
}

/// `assertwatch: Xid 79 on GPU 0 (0000:b3:00) (incident 12)`: only the health model's words,
/// characters Slurm and shells print harmlessly, and at most [`MAX_REASON`] bytes.
pub fn drain_reason(g: &GpuHealth) -> String {
    let gpu = match g.index {
        Some(i) => format!("GPU {i} ({})", g.pci_bus_id),
        None => format!("GPU {}", g.pci_bus_id),
    };
    let what = g.reason.as_deref().unwrap_or(g.state.as_str());
    let incident = g
        .incident
        .map(|i| format!(" (incident {i})"))
        .unwrap_or_default();
    let raw = format!("{REASON_PREFIX} {what} on {gpu}{incident}");
    let mut clean: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || " _.:()/,-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    clean.truncate(MAX_REASON);
    clean
}

/// Runs `scontrol` with argv `args`; returns its stdout.
pub trait Scontrol: Send + Sync + 'static {
    fn run(&self, args: &[String]) -> Result<String, String>;
}

/// The real `scontrol`, through the project's child-process module.
pub struct ScontrolCli {
    pub program: PathBuf,
    /// Where its output is captured.
    pub work_dir: PathBuf,
}

impl Scontrol for ScontrolCli {
    fn run(&self, args: &[String]) -> Result<String, String> {
        use assertwatch_repro::process::{run, ChildSpec, Exit, ResourceLimits};
        std::fs::create_dir_all(&self.work_dir).map_err(|e| e.to_string())?;
        let mut argv = vec![self.program.to_string_lossy().into_owned()];
        argv.extend(args.iter().cloned());
        // Only what scontrol needs: where to find programs and the cluster's configuration.
        let env = ["PATH", "SLURM_CONF", "LANG"]
            .iter()
            .filter_map(|k| std::env::var(k).ok().map(|v| ((*k).to_owned(), v)))
            .collect();
        let spec = ChildSpec {
            argv,
            env,
            cwd: self.work_dir.clone(),
            identity: None,
            limits: ResourceLimits::default(),
            memory_scope: None,
            stdout_path: self.work_dir.join("scontrol.out"),
            stderr_path: self.work_dir.join("scontrol.err"),
            output_cap: 64 << 10,
            timeout: SCONTROL_TIMEOUT,
            grace: Duration::from_secs(2),
        };
        let report = run(&spec).map_err(|e| format!("{:#}", anyhow::Error::from(e)))?;
        let out = std::fs::read_to_string(&spec.stdout_path).unwrap_or_default();
        match report.exit {
            Some(Exit::Code(0)) => Ok(out),
            other => {
                let err = std::fs::read_to_string(&spec.stderr_path).unwrap_or_default();
                Err(format!(
                    "scontrol {} ended with {other:?}{}: {}",
                    args.first().map(String::as_str).unwrap_or(""),
                    if report.timed_out { " (timed out)" } else { "" },
                    err.trim()
                ))
            }
        }
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct SavedDrain {
    /// The reason of the drain this sink made, if the node is drained by us.
    drained: Option<String>,
}

pub struct SlurmNodeSink {
    cfg: SlurmConfig,
    health: watch::Receiver<HealthReport>,
    scontrol: Arc<dyn Scontrol>,
    metrics: Metrics,
    state_file: PathBuf,
    /// The reason of our drain while the node is drained by us.
    drained: Option<String>,
    /// No `scontrol` before this (after a failure).
    quiet_until: Option<Instant>,
    /// Logged once per foreign drain, not every tick.
    told_foreign: bool,
}

impl SlurmNodeSink {
    pub fn new(
        cfg: SlurmConfig,
        health: watch::Receiver<HealthReport>,
        scontrol: Arc<dyn Scontrol>,
        metrics: Metrics,
        state_dir: &Path,
    ) -> Self {
        let state_file = state_dir.join("slurm-drain.json");
        let drained = std::fs::read(&state_file)
            .ok()
            .and_then(|b| serde_json::from_slice::<SavedDrain>(&b).ok())
            .and_then(|s| s.drained);
        SlurmNodeSink {
            cfg,
            health,
            scontrol,
            metrics,
            state_file,
            drained,
            quiet_until: None,
            told_foreign: false,
        }
    }

    async fn scontrol(&mut self, verb: &'static str, args: Vec<String>) -> Option<String> {
        let s = self.scontrol.clone();
        let res = tokio::task::spawn_blocking(move || s.run(&args))
            .await
            .unwrap_or_else(|e| Err(e.to_string()));
        let result = if res.is_ok() { "success" } else { "failure" };
        self.metrics
            .slurm_commands
            .with_label_values(&[verb, result])
            .inc();
        match res {
            Ok(out) => Some(out),
            Err(e) => {
                tracing::warn!(node = %self.cfg.node_name, command = verb, error = %e, "scontrol failed; retrying later.");
                self.quiet_until = Some(Instant::now() + RETRY_AFTER);
                None
            }
        }
    }

    async fn node(&mut self) -> Option<NodeState> {
        let args = vec![
            "show".into(),
            "node".into(),
            "-o".into(),
            self.cfg.node_name.clone(),
        ];
        let out = self.scontrol("show", args).await?;
        let st = parse_show_node(&out);
        if st.is_none() {
            tracing::warn!(node = %self.cfg.node_name, "scontrol show node printed no node state.");
        }
        st
    }

    async fn save(&self) {
        let saved = SavedDrain {
            drained: self.drained.clone(),
        };
        let path = self.state_file.clone();
        let _ = tokio::task::spawn_blocking(move || {
            let bytes = serde_json::to_vec(&saved).map_err(std::io::Error::other)?;
            crate::fsutil::atomic_write(&path, &bytes)
        })
        .await;
    }

    /// Compares the GPUs' health with the node's state in Slurm and acts.
    pub async fn reconcile(&mut self) {
        if self.quiet_until.is_some_and(|t| Instant::now() < t) {
            return;
        }
        let gpus = self.health.borrow().clone();
        let worst = gpus
            .iter()
            .filter(|g| self.cfg.drain_on.contains(&g.state))
            .max_by_key(|g| g.state)
            .cloned();
        match (worst, self.drained.is_some()) {
            (Some(g), false) => self.drain(&g).await,
            (None, true) => self.maybe_resume().await,
            _ => {}
        }
    }

    async fn drain(&mut self, g: &GpuHealth) {
        let Some(node) = self.node().await else {
            return;
        };
        if node.drained() && !node.ours() {
            if !self.told_foreign {
                tracing::info!(node = %self.cfg.node_name, reason = ?node.reason, "The node is already drained by someone else; leaving it and its reason alone.");
                self.told_foreign = true;
            }
            return;
        }
        self.told_foreign = false;
        let reason = drain_reason(g);
        let args = vec![
            "update".into(),
            format!("NodeName={}", self.cfg.node_name),
            "State=DRAIN".into(),
            format!("Reason={reason}"),
        ];
        if self.scontrol("drain", args).await.is_some() {
            tracing::warn!(node = %self.cfg.node_name, %reason, "Drained the node in Slurm.");
            self.drained = Some(reason);
            self.save().await;
        }
    }

    async fn maybe_resume(&mut self) {
        if !self.cfg.resume {
            return;
        }
        let Some(node) = self.node().await else {
            return;
        };
        if !node.drained() || !node.ours() {
            // Resumed, or re-drained by someone else since: that drain is not ours to end.
            tracing::info!(node = %self.cfg.node_name, state = %node.state, reason = ?node.reason, "The node is no longer drained by assertwatch; not resuming it.");
            self.drained = None;
            self.save().await;
            return;
        }
        let args = vec![
            "update".into(),
            format!("NodeName={}", self.cfg.node_name),
            "State=RESUME".into(),
        ];
        if self.scontrol("resume", args).await.is_some() {
            tracing::info!(node = %self.cfg.node_name, "Every GPU recovered; resumed the node in Slurm.");
            self.drained = None;
            self.save().await;
        }
    }
}

impl IncidentSink for SlurmNodeSink {
    fn name(&self) -> &'static str {
        "slurm"
    }

    /// Incidents reach Slurm through the health model; the tick reads it.
    async fn handle(&mut self, _event: Arc<IncidentEvent>) {}

    fn tick_every(&self) -> Option<Duration> {
        Some(Duration::from_secs(1))
    }

    async fn tick(&mut self) {
        self.reconcile().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::health::HealthState;
    use std::sync::Mutex;

    /// A scripted scontrol: `show` prints the node state it holds; `update` changes it.
    struct Fake {
        node: Mutex<NodeState>,
        calls: Mutex<Vec<Vec<String>>>,
        fail: bool,
    }

    impl Scontrol for Fake {
        fn run(&self, args: &[String]) -> Result<String, String> {
            self.calls.lock().unwrap().push(args.to_vec());
            if self.fail {
                return Err("slurmctld unreachable".into());
            }
            let mut n = self.node.lock().unwrap();
            if args[0] == "show" {
                let r = n
                    .reason
                    .as_deref()
                    .map(|r| format!(" Reason={r} [root@2026-12-02T10:00:00]"))
                    .unwrap_or_default();
                return Ok(format!(
                    "NodeName=n1 Arch=x86_64 State={} Partitions=debug{r}\n",
                    n.state
                ));
            }
            match args[2].as_str() {
                "State=DRAIN" => {
                    n.state = "IDLE+DRAIN".into();
                    n.reason = Some(args[3].trim_start_matches("Reason=").to_owned());
                }
                "State=RESUME" => {
                    n.state = "IDLE".into();
                    n.reason = None;
                }
                other => panic!("unexpected {other}"),
            }
            Ok(String::new())
        }
    }

    fn gpu(state: HealthState) -> GpuHealth {
        GpuHealth {
            pci_bus_id: "0000:b3:00".into(),
            index: Some(0),
            uuid: None,
            state,
            reason: Some("Xid 79".into()),
            since_ms: 1,
            incident: Some(12),
        }
    }

    fn sink(
        node: NodeState,
        resume: bool,
        fail: bool,
    ) -> (
        SlurmNodeSink,
        Arc<Fake>,
        watch::Sender<HealthReport>,
        tempfile::TempDir,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let fake = Arc::new(Fake {
            node: Mutex::new(node),
            calls: Mutex::new(Vec::new()),
            fail,
        });
        let (tx, rx) = watch::channel(Arc::new(vec![gpu(HealthState::Healthy)]));
        let cfg = SlurmConfig {
            enabled: true,
            resume,
            node_name: "n1".into(),
            ..Default::default()
        };
        let s = SlurmNodeSink::new(cfg, rx, fake.clone(), Metrics::new(), dir.path());
        (s, fake, tx, dir)
    }

    fn idle() -> NodeState {
        NodeState {
            state: "IDLE".into(),
            reason: None,
        }
    }

    #[test]
    fn parses_show_node_lines() {
        let n = parse_show_node("NodeName=gpu1 Arch=x86_64 CoresPerSocket=1 State=IDLE+DRAIN ThreadsPerCore=1 Reason=assertwatch: Xid 79 on GPU 0 (0000:b3:00) (incident 3) [root@2026-12-02T23:00:00]\n").unwrap();
        assert!(n.drained() && n.ours());
        assert_eq!(
            n.reason.as_deref(),
            Some("assertwatch: Xid 79 on GPU 0 (0000:b3:00) (incident 3)")
        );
        let n = parse_show_node("NodeName=gpu1 State=MIXED Reason=(null)\n").unwrap();
        assert!(!n.drained() && n.reason.is_none());
        assert!(parse_show_node("garbage").is_none());
    }

    #[test]
    fn reasons_are_bounded_and_plain() {
        let mut g = gpu(HealthState::Unhealthy);
        assert_eq!(
            drain_reason(&g),
            "assertwatch: Xid 79 on GPU 0 (0000:b3:00) (incident 12)"
        );
        g.reason = Some(format!("x\"; rm -rf / `id` $(id) {}", "y".repeat(500)));
        let r = drain_reason(&g);
        assert!(r.len() <= MAX_REASON);
        assert!(!r.contains('"') && !r.contains('`') && !r.contains('$') && !r.contains(';'));
    }

    #[tokio::test]
    async fn drains_on_unhealthy_and_resumes_only_its_own_drain() {
        let (mut s, fake, tx, _dir) = sink(idle(), true, false);
        s.reconcile().await;
        assert!(
            fake.calls.lock().unwrap().is_empty(),
            "healthy: nothing to do"
        );
        tx.send_replace(Arc::new(vec![gpu(HealthState::Unhealthy)]));
        s.reconcile().await;
        assert_eq!(fake.node.lock().unwrap().state, "IDLE+DRAIN");
        let calls = fake.calls.lock().unwrap().clone();
        assert_eq!(calls[1][0..3], ["update", "NodeName=n1", "State=DRAIN"]);
        // Drained once, not again on every tick.
        s.reconcile().await;
        assert_eq!(fake.calls.lock().unwrap().len(), 2);
        tx.send_replace(Arc::new(vec![gpu(HealthState::Healthy)]));
        s.reconcile().await;
        assert_eq!(fake.node.lock().unwrap().state, "IDLE");
    }

    #[tokio::test]
    async fn a_node_drained_by_someone_else_is_left_alone() {
        let by_hand = NodeState {
            state: "IDLE+DRAIN".into(),
            reason: Some("maintenance by hand".into()),
        };
        let (mut s, fake, tx, _dir) = sink(by_hand.clone(), true, false);
        tx.send_replace(Arc::new(vec![gpu(HealthState::Unhealthy)]));
        s.reconcile().await;
        tx.send_replace(Arc::new(vec![gpu(HealthState::Healthy)]));
        s.reconcile().await;
        assert_eq!(*fake.node.lock().unwrap(), by_hand);
        assert!(fake.calls.lock().unwrap().iter().all(|c| c[0] == "show"));
    }

    #[tokio::test]
    async fn without_resume_the_drain_stays_and_failures_back_off() {
        let (mut s, fake, tx, dir) = sink(idle(), false, false);
        tx.send_replace(Arc::new(vec![gpu(HealthState::Unhealthy)]));
        s.reconcile().await;
        tx.send_replace(Arc::new(vec![gpu(HealthState::Healthy)]));
        s.reconcile().await;
        assert_eq!(fake.node.lock().unwrap().state, "IDLE+DRAIN");
        // The drain is remembered across a restart.
        let saved = std::fs::read_to_string(dir.path().join("slurm-drain.json")).unwrap();
        assert!(saved.contains("assertwatch: Xid 79"), "{saved}");

        let (mut f, failing, tx, _d) = sink(idle(), true, true);
        tx.send_replace(Arc::new(vec![gpu(HealthState::Unhealthy)]));
        f.reconcile().await;
        f.reconcile().await;
        assert_eq!(failing.calls.lock().unwrap().len(), 1, "second try waits");
        assert_eq!(
            f.metrics
                .slurm_commands
                .with_label_values(&["show", "failure"])
                .get(),
            1
        );
    }
}
