//! The node condition for GPU hardware faults, in the style of node-problem-detector.
//!
//! A hardware incident (an Xid whose catalog action is to reset the GPU, drain it or reboot the
//! node, and Xid 79, fallen off the bus) sets a condition (`GPUHardwareFault` by default) to
//! `True` on this node, reason `Xid<n>`, with the GPU and the incident in the message, and writes
//! an Event on the Node. Remediation that acts on conditions (NVSentinel, Cluster API machine
//! health checks, draining controllers) takes it from there; assertwatch does not cordon or
//! drain.
//!
//! The condition is cleared only when the GPU's health recovers, never on a timer: whoever
//! judges GPU health sends [`GpuRecovered`] through the [`RecoveryHandle`] this sink hands out;
//! when no faulted GPU is left the condition goes back to `False`. A patch that failed is
//! retried on the next tick.

use super::{IncidentEvent, IncidentSink};
use crate::detect::xid_catalog;
use crate::model::{IncidentRecord, Kind};
use assertwatch_kube::events::{self, Regarding};
use assertwatch_kube::k8s_openapi::chrono::{DateTime, Utc};
use assertwatch_kube::KubeApi;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// A GPU whose health recovered (by UUID or PCI bus id, whichever the health model knows).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuRecovered {
    pub uuid: Option<String>,
    pub pci_bus_id: Option<String>,
}

/// The hook through which GPU health recovery reaches the sink.
#[derive(Debug, Clone)]
pub struct RecoveryHandle(mpsc::Sender<GpuRecovered>);

impl RecoveryHandle {
    /// Reports a recovered GPU. Never waits; a full queue drops the report (the next one of the
    /// health model's periodic checks repeats it).
    pub fn recovered(&self, gpu: GpuRecovered) -> bool {
        self.0.try_send(gpu).is_ok()
    }
}

/// Whether an incident is a GPU hardware fault that sets the condition: an Xid whose decision
/// (the catalog, or the line for Xid 154 and NVLink5's 144–150) takes the GPU out of service.
pub fn is_hardware_fault(r: &IncidentRecord) -> bool {
    let line = r.incident.message.as_deref().unwrap_or("");
    r.incident.kind == Kind::Xid
        && r.incident
            .xid
            .is_some_and(|x| xid_catalog::decide(x, line).out_of_service)
}

/// Feeds the GPU health model's recoveries to the sink: every GPU that is healthy again after
/// it was not is reported through `handle` (and, once after start, every healthy GPU, so a
/// condition left set before a restart clears). Ends when `health`'s sender is gone.
pub fn follow_health(
    handle: RecoveryHandle,
    mut health: tokio::sync::watch::Receiver<crate::health::sink::HealthReport>,
) {
    use crate::health::HealthState;
    tokio::spawn(async move {
        let mut previous: BTreeMap<String, HealthState> = BTreeMap::new();
        let mut first = true;
        loop {
            let now = health.borrow_and_update().clone();
            for g in now.iter() {
                let was = previous.insert(g.pci_bus_id.clone(), g.state);
                let back = g.state == HealthState::Healthy
                    && (first || was.is_some_and(|w| w != HealthState::Healthy));
                if back {
                    handle.recovered(GpuRecovered {
                        uuid: g.uuid.clone(),
                        pci_bus_id: Some(g.pci_bus_id.clone()),
                    });
                }
            }
            first = false;
            if health.changed().await.is_err() {
                return;
            }
        }
    });
}

/// The faulted GPU's identity: UUID, else PCI bus id, else the NVML index.
fn gpu_key(r: &IncidentRecord) -> (Option<String>, Option<String>, String) {
    let uuid = r
        .gpu
        .as_ref()
        .and_then(|g| g.uuid.clone())
        .or_else(|| r.incident.gpu_uuid.clone());
    let pci = r
        .gpu
        .as_ref()
        .and_then(|g| g.pci_bus_id.clone())
        .or_else(|| r.incident.pci.clone());
    let label = uuid
        .clone()
        .or_else(|| pci.clone())
        .or_else(|| {
            r.gpu
                .as_ref()
                .and_then(|g| g.index)
                .map(|i| format!("GPU {i}"))
        })
        .unwrap_or_else(|| "an unidentified GPU".to_owned());
    (uuid, pci, label)
}

struct Fault {
    uuid: Option<String>,
    pci: Option<String>,
    xid: u32,
    incident: i64,
}

/// The condition sink.
pub struct NodeConditionSink<A: KubeApi> {
    api: Arc<A>,
    node: String,
    condition_type: String,
    faults: BTreeMap<String, Fault>,
    recovered: mpsc::Receiver<GpuRecovered>,
    /// When the condition last changed status (kept across patches while it stays True).
    since: Option<DateTime<Utc>>,
    /// The condition as last decided, not yet accepted by the API server.
    unsent: bool,
    /// Whether the condition was ever written `False` by this process (a recovery after a
    /// restart clears a condition set before it).
    cleared_once: bool,
    results: prometheus::IntCounterVec,
}

/// Counter of condition and node-event writes (`assertwatch_kube_node_condition_total{result}`:
/// set, cleared, event, failed), to be registered by the caller.
pub fn condition_counter() -> Result<prometheus::IntCounterVec, prometheus::Error> {
    prometheus::IntCounterVec::new(
        prometheus::Opts::new(
            "assertwatch_kube_node_condition_total",
            "Writes of the GPU node condition and node Events by result (set, cleared, event, failed).",
        ),
        &["result"],
    )
}

impl<A: KubeApi> NodeConditionSink<A> {
    pub fn new(
        api: Arc<A>,
        node: &str,
        condition_type: &str,
        results: prometheus::IntCounterVec,
    ) -> (Self, RecoveryHandle) {
        let (tx, rx) = mpsc::channel(64);
        (
            NodeConditionSink {
                api,
                node: node.to_owned(),
                condition_type: condition_type.to_owned(),
                faults: BTreeMap::new(),
                recovered: rx,
                since: None,
                unsent: false,
                cleared_once: false,
                results,
            },
            RecoveryHandle(tx),
        )
    }

    fn count(&self, result: &str) {
        self.results.with_label_values(&[result]).inc();
    }

    /// Writes the condition as the faults say now; remembers a failure for the next tick.
    async fn sync(&mut self) {
        let now = Utc::now();
        let faulted = !self.faults.is_empty();
        let since = *self.since.get_or_insert(now);
        let (reason, message) = if faulted {
            let latest = self
                .faults
                .values()
                .max_by_key(|f| f.incident)
                .map(|f| f.xid)
                .unwrap_or_default();
            let gpus: Vec<String> = self
                .faults
                .iter()
                .map(|(k, f)| format!("{k}: Xid {} (incident {})", f.xid, f.incident))
                .collect();
            (
                format!("Xid{latest}"),
                format!(
                    "GPU hardware fault reported by assertwatch on {}: {}",
                    self.node,
                    gpus.join(", ")
                ),
            )
        } else {
            (
                "GPUHealthy".to_owned(),
                "Every GPU that had a hardware fault reported healthy again".to_owned(),
            )
        };
        let mut cond = events::gpu_condition(&self.condition_type, faulted, &reason, &message, now);
        cond.last_transition_time =
            Some(assertwatch_kube::k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(since));
        match self.api.patch_node_condition(&self.node, &cond).await {
            Ok(()) => {
                self.unsent = false;
                if faulted {
                    self.count("set");
                } else {
                    self.cleared_once = true;
                    self.count("cleared");
                }
            }
            Err(e) => {
                self.unsent = true;
                self.count("failed");
                tracing::warn!(error = %e, node = %self.node, "Cannot write the GPU node condition; retrying on the next tick.");
            }
        }
    }

    async fn apply_recoveries(&mut self) {
        let mut changed = false;
        let mut any = false;
        while let Ok(g) = self.recovered.try_recv() {
            any = true;
            let before = self.faults.len();
            self.faults.retain(|_, f| {
                let same_uuid = g.uuid.is_some() && f.uuid == g.uuid;
                let same_pci = match (&g.pci_bus_id, &f.pci) {
                    (Some(a), Some(b)) => crate::detect::xid::same_bus(a, b),
                    _ => false,
                };
                !(same_uuid || same_pci)
            });
            changed |= self.faults.len() != before;
        }
        // After a restart the condition may still be True from before; the first recovery
        // report with nothing faulted clears it once.
        let restart_clear = any && self.faults.is_empty() && !self.cleared_once;
        if changed || restart_clear {
            if self.faults.is_empty() {
                self.since = Some(Utc::now());
            }
            self.sync().await;
        }
    }
}

impl<A: KubeApi> IncidentSink for NodeConditionSink<A> {
    fn name(&self) -> &'static str {
        "node_condition"
    }

    fn tick_every(&self) -> Option<Duration> {
        Some(Duration::from_secs(5))
    }

    async fn tick(&mut self) {
        self.apply_recoveries().await;
        if self.unsent {
            self.sync().await;
        }
    }

    async fn handle(&mut self, event: Arc<IncidentEvent>) {
        let r = &event.record;
        if !event.is_new() || !is_hardware_fault(r) {
            return;
        }
        let Some(xid) = r.incident.xid else {
            return;
        };
        let (uuid, pci, label) = gpu_key(r);
        let was_faulted = !self.faults.is_empty();
        self.faults.insert(
            label.clone(),
            Fault {
                uuid,
                pci,
                xid,
                incident: r.id,
            },
        );
        if !was_faulted {
            self.since = Some(Utc::now());
        }
        self.sync().await;
        let note = format!(
            "Xid {xid} on {label}: {} (assertwatch incident {})",
            xid_catalog::hint(xid),
            r.id
        );
        let ev = events::warning(
            &Regarding::Node {
                name: self.node.clone(),
            },
            &format!("Xid{xid}"),
            "Detected",
            &note,
            &format!("assertwatch-{}", self.node),
            Utc::now(),
        );
        match self.api.create_event(&ev).await {
            Ok(()) => self.count("event"),
            Err(e) => {
                self.count("failed");
                tracing::warn!(error = %e, "Cannot write the node Event.");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::GpuRef;
    use crate::sinks::Change;
    use assertwatch_kube::kube::client::Body;
    use assertwatch_kube::{CallPolicy, KubeClient};
    use http::{Request, Response};
    use serde_json::{json, Value};
    use tower_test::mock;

    type Handle = mock::Handle<Request<Body>, Response<Body>>;
    const STATUS: &str = "/api/v1/nodes/gpu-node-1/status";
    const NODE_EVENTS: &str = "/apis/events.k8s.io/v1/namespaces/default/events";

    fn sink() -> (
        NodeConditionSink<KubeClient>,
        RecoveryHandle,
        Handle,
        prometheus::IntCounterVec,
    ) {
        let (svc, handle) = mock::pair::<Request<Body>, Response<Body>>();
        let api = KubeClient::new(
            assertwatch_kube::kube::Client::new(svc, "default"),
            CallPolicy {
                timeout: Duration::from_secs(5),
                retries: 0,
                backoff: Duration::from_millis(1),
            },
            assertwatch_kube::api::requests_counter().unwrap(),
        );
        let results = condition_counter().unwrap();
        let (s, h) = NodeConditionSink::new(
            Arc::new(api),
            "gpu-node-1",
            "GPUHardwareFault",
            results.clone(),
        );
        (s, h, handle, results)
    }

    fn xid(id: i64, xid: u32, uuid: &str) -> Arc<IncidentEvent> {
        let mut r = crate::incidents::store::test_record();
        r.id = id;
        r.incident.kind = Kind::Xid;
        r.incident.xid = Some(xid);
        r.gpu = Some(GpuRef {
            index: Some(3),
            uuid: Some(uuid.into()),
            pci_bus_id: Some("00000000:3B:00.0".into()),
        });
        Arc::new(IncidentEvent {
            change: Change::Opened,
            record: r,
            gpu: None,
        })
    }

    async fn answer(h: &mut Handle, method: &str, path: &str, code: u16) -> Value {
        let (req, send) = h.next_request().await.expect("a request");
        assert_eq!(req.method().as_str(), method);
        assert_eq!(req.uri().path(), path);
        let body: Value =
            serde_json::from_slice(&req.into_body().collect_bytes().await.unwrap()).unwrap();
        let reply = if code < 300 {
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-node-1"}})
        } else {
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": "m", "code": code})
        };
        let reply = if path.contains("/events") && code < 300 {
            body.clone()
        } else {
            reply
        };
        send.send_response(
            Response::builder()
                .status(code)
                .body(Body::from(serde_json::to_vec(&reply).unwrap()))
                .unwrap(),
        );
        body
    }

    #[tokio::test]
    async fn fell_off_the_bus_sets_the_condition_and_only_recovery_clears_it() {
        let (mut s, recovery, mut h, results) = sink();
        let server = tokio::spawn(async move {
            let set = answer(&mut h, "PATCH", STATUS, 200).await;
            let event = answer(&mut h, "POST", NODE_EVENTS, 201).await;
            let cleared = answer(&mut h, "PATCH", STATUS, 200).await;
            (set, event, cleared)
        });
        // Xid 13 is the application's fault: no condition.
        s.handle(xid(1, 13, "GPU-aaa")).await;
        s.handle(xid(2, 79, "GPU-aaa")).await;
        // Ticks without a recovery change nothing, however many.
        for _ in 0..3 {
            s.tick().await;
        }
        // Another GPU recovering does not clear this one.
        assert!(recovery.recovered(GpuRecovered {
            uuid: Some("GPU-bbb".into()),
            pci_bus_id: None
        }));
        s.tick().await;
        assert!(recovery.recovered(GpuRecovered {
            uuid: None,
            pci_bus_id: Some("00000000:3B:00.0".into())
        }));
        s.tick().await;
        let (set, event, cleared) = server.await.unwrap();
        let c = &set["status"]["conditions"][0];
        assert_eq!(c["type"], "GPUHardwareFault");
        assert_eq!(c["status"], "True");
        assert_eq!(c["reason"], "Xid79");
        let msg = c["message"].as_str().unwrap();
        assert!(
            msg.contains("GPU-aaa") && msg.contains("incident 2"),
            "{msg}"
        );
        assert_eq!(event["regarding"]["kind"], "Node");
        assert_eq!(event["reason"], "Xid79");
        assert!(event["note"].as_str().unwrap().contains("fell off the bus"));
        let c = &cleared["status"]["conditions"][0];
        assert_eq!(c["status"], "False");
        assert_eq!(c["reason"], "GPUHealthy");
        assert_eq!(results.with_label_values(&["set"]).get(), 1);
        assert_eq!(results.with_label_values(&["cleared"]).get(), 1);
    }

    #[tokio::test]
    async fn a_failed_patch_is_retried_on_the_next_tick() {
        let (mut s, _recovery, mut h, results) = sink();
        let server = tokio::spawn(async move {
            answer(&mut h, "PATCH", STATUS, 403).await;
            answer(&mut h, "POST", NODE_EVENTS, 201).await;
            answer(&mut h, "PATCH", STATUS, 200).await
        });
        s.handle(xid(5, 48, "GPU-ccc")).await;
        s.tick().await;
        let retried = server.await.unwrap();
        assert_eq!(retried["status"]["conditions"][0]["reason"], "Xid48");
        assert_eq!(results.with_label_values(&["failed"]).get(), 1);
        assert_eq!(results.with_label_values(&["set"]).get(), 1);
    }

    #[test]
    fn hardware_faults_follow_the_catalog() {
        let r = |x| xid(0, x, "u").record.clone();
        assert!(is_hardware_fault(&r(79)));
        assert!(is_hardware_fault(&r(48)));
        assert!(!is_hardware_fault(&r(13)));
        assert!(!is_hardware_fault(&r(31)));
    }

    #[tokio::test]
    async fn health_recoveries_reach_the_sink() {
        use crate::health::{GpuHealth, HealthState};
        let gpu = |state| GpuHealth {
            pci_bus_id: "0000:b3:00".into(),
            index: Some(0),
            uuid: Some("GPU-1".into()),
            state,
            reason: None,
            since_ms: 1,
            incident: None,
        };
        let (tx, mut rx) = mpsc::channel(8);
        let (htx, hrx) = tokio::sync::watch::channel(Arc::new(vec![gpu(HealthState::Unhealthy)]));
        follow_health(RecoveryHandle(tx), hrx);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(rx.try_recv().is_err(), "an unhealthy GPU is no recovery");
        htx.send_replace(Arc::new(vec![gpu(HealthState::Healthy)]));
        let got = tokio::time::timeout(Duration::from_secs(2), rx.recv())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(got.pci_bus_id.as_deref(), Some("0000:b3:00"));
        assert_eq!(got.uuid.as_deref(), Some("GPU-1"));
    }
}
