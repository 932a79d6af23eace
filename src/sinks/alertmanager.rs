//! Incidents as Alertmanager alerts: names, bounded labels, and annotations for people.
//!
//! Labels come from closed sets or configuration (kind, category, blame, severity, node, GPU,
//! namespace, pod), so Alertmanager groups and routes on them; the incident's text goes into
//! annotations only. Alerts with the same labels are one alert in Alertmanager, so the key of an
//! alert here is its label set; the annotations show the latest incident. The push itself (queue,
//! re-send, resolve, retries, HA fan-out) lives in the `assertwatch-alertmanager` crate.

use crate::config::{AlertAuth, AlertmanagerConfig};
use crate::detect::{sxid as sxidcat, xid_catalog};
use crate::model::{Blame, Incident, IncidentRecord, Kind};
use crate::sinks::{IncidentEvent, IncidentSink};
use assertwatch_alertmanager::{Alert, Auth, NotifierHandle, TlsConfig};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::time::Instant;

/// The Alertmanager sink: fires an alert for every stored incident change and resolves each
/// alert `hold` after its last incident activity. The push itself (queue, re-sends, retries, HA
/// fan-out) is the notifier's, on its own task.
pub struct AlertSink {
    handle: NotifierHandle,
    runbook_base: String,
    api_base: String,
    hold: Duration,
    deadlines: HashMap<String, Instant>,
}

impl AlertSink {
    /// `api_base` is this daemon's URL, for the links in the alert.
    pub fn new(
        handle: NotifierHandle,
        runbook_base: String,
        api_base: String,
        hold: Duration,
    ) -> Self {
        AlertSink {
            handle,
            runbook_base,
            api_base,
            hold,
            deadlines: HashMap::new(),
        }
    }
}

impl IncidentSink for AlertSink {
    fn name(&self) -> &'static str {
        "alertmanager"
    }

    async fn handle(&mut self, event: Arc<IncidentEvent>) {
        // A follow-on failure (another rank's NCCL timeout after this job's assert) is part of
        // its root cause's alert, not an alert of its own.
        if event.record.caused_by.is_some() {
            return;
        }
        let (key, alert) = alert_for(&event.record, &self.runbook_base, &self.api_base);
        self.deadlines
            .insert(key.clone(), Instant::now() + self.hold);
        self.handle.fire(key, alert);
    }

    fn tick_every(&self) -> Option<Duration> {
        Some(Duration::from_millis(250))
    }

    async fn tick(&mut self) {
        let now = Instant::now();
        let handle = &self.handle;
        self.deadlines.retain(|key, due| {
            if *due <= now {
                handle.resolve(key);
                false
            } else {
                true
            }
        });
    }
}

/// The alert name for an incident (one per kind; Xids split by blame).
pub fn alert_name(kind: Kind, blame: Blame, xid: Option<u32>) -> &'static str {
    name_for(kind, blame, xid.is_some_and(xid_catalog::needs_drain))
}

/// The text after `…): N, ` of an Xid/SXid incident's headline.
fn line_detail(i: &Incident) -> &str {
    i.message
        .as_deref()
        .and_then(|m| m.split_once("): "))
        .and_then(|(_, r)| r.split_once(", "))
        .map_or("", |(_, d)| d)
}

/// Does the incident take its GPU (or, for an SXid, the node's fabric) out of service, as its own
/// line decides (Xid 144–150 and 154 depend on the line)?
fn takes_out_of_service(i: &Incident) -> bool {
    match (i.kind, i.xid, i.sxid) {
        (Kind::Xid, Some(x), _) => xid_catalog::decide(x, line_detail(i)).out_of_service,
        (Kind::Sxid, _, Some(n)) => {
            let sev = i.message.as_deref().and_then(sxidcat::severity_of);
            sxidcat::decide(n, sev).takes_out_of_service()
        }
        _ => false,
    }
}

fn name_for(kind: Kind, blame: Blame, drain: bool) -> &'static str {
    match kind {
        Kind::DeviceAssert => "CudaDeviceSideAssert",
        Kind::CudaError => "CudaError",
        Kind::Oom => "CudaOutOfMemory",
        Kind::NcclError => "NcclError",
        Kind::Numeric => "TrainingNumericError",
        Kind::Xid => match blame {
            Blame::Hardware => "GpuXidHardware",
            Blame::Driver => "GpuXidDriver",
            Blame::Application => "GpuXidApplication",
            Blame::Unknown if drain => "GpuXidHardware",
            Blame::Unknown => "GpuXidApplication",
        },
        Kind::Sxid => "NvSwitchSxid",
    }
}

fn severity(i: &Incident) -> &'static str {
    match (i.kind, i.blame) {
        (Kind::Xid, Blame::Hardware | Blame::Driver) => "critical",
        (Kind::CudaError, Blame::Hardware) => "critical",
        // Fatal SXids stall NVLink traffic (reset the fabric); non-fatal ones are for watching.
        (Kind::Sxid, _) if takes_out_of_service(i) => "critical",
        _ => "warning",
    }
}

/// Builds the alert for `rec`; returns (key, alert). `api_base` is this daemon's URL.
pub fn alert_for(rec: &IncidentRecord, runbook_base: &str, api_base: &str) -> (String, Alert) {
    let i = &rec.incident;
    let name = name_for(i.kind, i.blame, takes_out_of_service(i));
    let gpu = rec
        .gpu
        .as_ref()
        .and_then(|g| {
            g.index
                .map(|x| x.to_string())
                .or_else(|| g.pci_bus_id.clone())
        })
        .unwrap_or_default();
    let started = UNIX_EPOCH
        + Duration::from_millis(
            time::OffsetDateTime::parse(&rec.time, &time::format_description::well_known::Rfc3339)
                .map(|t| (t.unix_timestamp_nanos() / 1_000_000).max(0) as u64)
                .unwrap_or(0),
        );
    let started = if started == UNIX_EPOCH {
        SystemTime::now()
    } else {
        started
    };
    let mut a = Alert::new(started)
        .label("alertname", name)
        .label("node", &rec.node)
        .label("kind", i.kind.as_str())
        .label("category", &i.category)
        .label("blame", i.blame.as_str())
        .label("severity", severity(i));
    if !gpu.is_empty() {
        a = a.label("gpu", gpu.clone());
    }
    if let Some(ns) = &rec.namespace {
        a = a.label("namespace", ns);
    }
    if let Some(pod) = &rec.pod {
        a = a.label("pod", pod);
    }
    // The pod's top controller (`PyTorchJob/llama`), from the pod cache: routes to the team.
    if let Some(w) = rec.kube.workload() {
        a = a.label("workload", w);
    }
    // One key per training job across nodes: the Alertmanager inhibition rule in
    // deploy/alertmanager silences a job's cascade alerts from other nodes while its root cause
    // fires.
    // Only keys that name one job cluster-wide: a log directory (`dir:`) can repeat on every
    // node for unrelated jobs.
    let job_label = rec
        .training_job
        .as_deref()
        .filter(|j| j.starts_with("slurm:") || j.starts_with("k8s:"));
    if let Some(job) = job_label {
        a = a.label("training_job", job);
    }
    // The job and its owner route an alert to the person whose job it hit.
    if let Some(job) = &rec.slurm.slurm_job_id {
        a = a.label("slurm_job_id", job);
    }
    if let Some(user) = &rec.slurm.slurm_user {
        a = a.label("slurm_user", user);
    }
    if let Some(job) = rec.slurm.describe() {
        a = a.annotation("slurm", job);
    }
    let place = match (&rec.namespace, &rec.pod) {
        (Some(ns), Some(pod)) => format!("{ns}/{pod}"),
        _ => format!("{} on {}", rec.source_name, rec.node),
    };
    let summary = match (i.kind, i.xid) {
        (Kind::Xid, Some(x)) => format!(
            "Xid {x} ({}) on GPU {} of {}",
            i.category,
            i.pci.as_deref().unwrap_or("?"),
            rec.node
        ),
        (Kind::Sxid, _) => format!(
            "SXid {} ({}) on NVSwitch {}{} of {}",
            i.sxid.map_or_else(|| "?".to_owned(), |n| n.to_string()),
            i.category,
            i.pci.as_deref().unwrap_or("?"),
            i.link.map(|l| format!(" link {l}")).unwrap_or_default(),
            rec.node
        ),
        _ => format!("{} in {place}: {}", name, i.category),
    };
    a = a
        .annotation("summary", summary)
        .annotation("hint", &i.hint)
        .annotation(
            "runbook_url",
            format!("{runbook_base}#{}", name.to_ascii_lowercase()),
        )
        .annotation(
            "incident_url",
            format!("{api_base}/api/v1/incidents/{}", rec.id),
        );
    if let Some(m) = &i.message {
        a = a.annotation("description", m);
    }
    if let Some(f) = &i.python_frame {
        a = a.annotation("failing_line", f);
    }
    if let Some(x) = &i.assertion {
        let at = i
            .kernel_file
            .as_deref()
            .map(|k| format!(" at {k}"))
            .unwrap_or_default();
        a = a.annotation("assertion", format!("{x}{at}"));
    }
    if let Some(r) = &rec.repro {
        let line = r
            .python_frame
            .as_deref()
            .map(|f| format!(" at {f}"))
            .unwrap_or_default();
        a = a.annotation("repro", format!("{}{line}", r.outcome.as_str()));
    }
    a = a.generator_url(format!("{api_base}/api/v1/incidents/{}", rec.id));
    let key = format!(
        "{name}|{}|{}|{}|{gpu}|{}|{}|{}|{}|{}",
        i.kind.as_str(),
        i.category,
        i.blame.as_str(),
        rec.namespace.as_deref().unwrap_or(""),
        rec.pod.as_deref().unwrap_or(""),
        rec.slurm.slurm_job_id.as_deref().unwrap_or(""),
        rec.slurm.slurm_user.as_deref().unwrap_or(""),
        job_label.unwrap_or("")
    );
    (key, a)
}

/// The push client's configuration from ours.
pub fn client_config(c: &AlertmanagerConfig) -> assertwatch_alertmanager::AlertmanagerConfig {
    let mut out = assertwatch_alertmanager::AlertmanagerConfig {
        urls: c.urls.clone(),
        timeout: c.timeout,
        resend_interval: c.resend_interval,
        resolve_after: c.resolve_after,
        queue_capacity: c.queue_capacity,
        ..Default::default()
    };
    out.auth = match &c.auth {
        AlertAuth::None => Auth::None,
        AlertAuth::Basic { username, password } => Auth::Basic {
            username: username.clone(),
            password: password.clone(),
        },
        AlertAuth::Bearer { token } => Auth::Bearer {
            token: token.clone(),
        },
    };
    if c.tls_ca_file.is_some() || c.tls_cert_file.is_some() || c.tls_insecure_skip_verify {
        out.tls = Some(TlsConfig {
            ca_file: c.tls_ca_file.clone(),
            cert_file: c.tls_cert_file.clone(),
            key_file: c.tls_key_file.clone(),
            insecure_skip_verify: c.tls_insecure_skip_verify,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_kind_and_blame() {
        assert_eq!(
            alert_name(Kind::DeviceAssert, Blame::Application, None),
            "CudaDeviceSideAssert"
        );
        assert_eq!(
            alert_name(Kind::Xid, Blame::Hardware, Some(79)),
            "GpuXidHardware"
        );
        assert_eq!(
            alert_name(Kind::Xid, Blame::Application, Some(13)),
            "GpuXidApplication"
        );
        assert_eq!(
            alert_name(Kind::Xid, Blame::Unknown, Some(95)),
            "GpuXidHardware"
        );
        assert_eq!(
            alert_name(Kind::Sxid, Blame::Hardware, None),
            "NvSwitchSxid"
        );
    }

    #[test]
    fn pod_alerts_carry_namespace_pod_and_workload() {
        let mut r = crate::incidents::store::test_record();
        r.namespace = Some("ml".into());
        r.pod = Some("llama-worker-3".into());
        let (_, a) = alert_for(&r, "http://rb", "http://api");
        assert_eq!(a.labels.get("namespace").map(String::as_str), Some("ml"));
        assert!(!a.labels.contains_key("workload"));
        r.kube.workload_kind = Some("PyTorchJob".into());
        r.kube.workload_name = Some("llama".into());
        r.training_job = Some("k8s:ml/PyTorchJob/llama".into());
        let (_, a) = alert_for(&r, "http://rb", "http://api");
        assert_eq!(
            a.labels.get("workload").map(String::as_str),
            Some("PyTorchJob/llama")
        );
        assert_eq!(
            a.labels.get("pod").map(String::as_str),
            Some("llama-worker-3")
        );
        assert_eq!(
            a.labels.get("training_job").map(String::as_str),
            Some("k8s:ml/PyTorchJob/llama")
        );
    }

    #[test]
    fn sxid_and_xid_154_follow_their_lines() {
        let mut i = crate::incidents::store::test_record().incident;
        i.kind = Kind::Sxid;
        i.sxid = Some(12020);
        i.blame = Blame::Hardware;
        i.message = Some(
            "nvidia-nvswitch3: SXid (PCI:0000:c4:00.0): 12020, Fatal, Link 31 egress sequence ID error"
                .into(),
        );
        assert_eq!(severity(&i), "critical");
        i.sxid = Some(22013);
        i.message = Some(
            "nvidia-nvswitch1: SXid (PCI:0000:02:00.0): 22013, Non-fatal, Link 00 Minion Link DLREQ interrupt"
                .into(),
        );
        assert_eq!(severity(&i), "warning");
        let mut x = crate::incidents::store::test_record().incident;
        x.kind = Kind::Xid;
        x.xid = Some(154);
        x.blame = Blame::Unknown;
        x.message = Some("NVRM: Xid (PCI:0000:97:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)".into());
        assert!(takes_out_of_service(&x));
        assert_eq!(
            name_for(x.kind, x.blame, takes_out_of_service(&x)),
            "GpuXidHardware"
        );
        x.message = Some("NVRM: Xid (PCI:0000:97:00): 154, GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)".into());
        assert!(!takes_out_of_service(&x));
    }
}
