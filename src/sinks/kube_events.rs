//! Kubernetes Events on the failing pod: what happened, where, and what the replay found.
//!
//! Each complete incident attributed to a pod becomes an `events.k8s.io/v1` Warning `regarding`
//! that pod, read by a person in `kubectl describe pod`: the kind as the reason
//! (`DeviceSideAssert`, `CUDAError`, `NCCLError`, `GPUXid`, …), and a note with the family, the
//! kernel file, the Python frame and the hint. A replay result follows as a second Event naming
//! the failing line it found. The same failure again on the same pod within an hour updates the
//! first Event's series instead of adding one. At most `per_pod_per_hour` API writes per pod;
//! the rest are counted (`assertwatch_kube_events_total{result="rate_limited"}`).

use super::{Change, IncidentEvent, IncidentSink};
use crate::model::{IncidentRecord, Kind};
use assertwatch_kube::events::{self, Regarding};
use assertwatch_kube::k8s_openapi::chrono::{DateTime, Utc};
use assertwatch_kube::{ApiError, KubeApi};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

/// How long an Event is extended by its series rather than followed by a new one (the API
/// server's default event TTL is one hour).
const SERIES_WINDOW: Duration = Duration::from_secs(3600);
/// Bound on the pods, series and incidents remembered (oldest forgotten first).
const MAX_TRACKED: usize = 4096;

/// The Event reason for an incident kind.
pub fn reason(kind: Kind) -> &'static str {
    match kind {
        Kind::DeviceAssert => "DeviceSideAssert",
        Kind::CudaError => "CUDAError",
        Kind::Oom => "CUDAOutOfMemory",
        Kind::NcclError => "NCCLError",
        Kind::Numeric => "NonFiniteValues",
        Kind::Xid => "GPUXid",
        Kind::Sxid => "NVSwitchSXid",
    }
}

/// The note a person reads under the pod's events.
pub fn detection_note(r: &IncidentRecord) -> String {
    let i = &r.incident;
    let mut parts = vec![format!("{} ({})", i.kind.as_str(), i.category)];
    if let Some(x) = i.xid {
        parts.push(format!("Xid {x}"));
    }
    if let Some(a) = &i.assertion {
        parts.push(format!("assertion `{a}`"));
    } else if let Some(m) = &i.message {
        parts.push(m.clone());
    }
    if let Some(k) = &i.kernel_file {
        parts.push(format!("kernel file {k}"));
    }
    if let Some(f) = &i.python_frame {
        parts.push(format!("Python frame {f}"));
    }
    parts.push(format!("hint: {}", i.hint));
    parts.push(format!("assertwatch incident {} on {}", r.id, r.node));
    parts.join("; ")
}

/// The second Event's reason and note, from the replay's answer.
pub fn replay_reason_and_note(r: &IncidentRecord) -> Option<(&'static str, String)> {
    let rep = r.repro.as_ref()?;
    use assertwatch_repro::Outcome as O;
    let reason = match rep.outcome {
        O::Reproduced | O::ReproducedCpuOnly => "ReplayReproduced",
        O::NotReproduced => "ReplayNotReproduced",
        _ => "ReplayIncomplete",
    };
    let mut parts = vec![format!(
        "replay {}{}",
        rep.outcome.as_str(),
        rep.mode.map(|m| format!(" ({m})")).unwrap_or_default()
    )];
    if let Some(f) = &rep.python_frame {
        parts.push(format!("failing line {f}"));
    }
    if let Some(e) = &rep.exception {
        parts.push(format!("{}: {}", e.kind, e.message));
    }
    if let Some(k) = &rep.kernel_assertion {
        parts.push(format!("kernel assertion at {}", k.location));
    }
    if let Some(s) = rep.step {
        parts.push(format!("step {s}"));
    }
    if let Some(why) = &rep.reason {
        parts.push(format!("reason: {why}"));
    }
    parts.push(format!("assertwatch incident {}", r.id));
    Some((reason, parts.join("; ")))
}

fn regarding(r: &IncidentRecord) -> Option<Regarding> {
    Some(Regarding::Pod {
        namespace: r.namespace.clone().filter(|s| !s.is_empty())?,
        name: r.pod.clone().filter(|s| !s.is_empty())?,
        // From the pod cache, where it runs: the Event then names this pod, not a namesake.
        uid: r.kube.pod_uid.clone(),
        container: r.container.clone(),
    })
}

struct Series {
    namespace: String,
    name: String,
    count: u32,
    first: tokio::time::Instant,
}

/// The Events sink. Generic over the API so tests can drive it against a mock server.
pub struct KubeEventsSink<A: KubeApi> {
    api: Arc<A>,
    reporting_instance: String,
    per_pod_per_hour: u32,
    /// Per pod: start of the current hour window and writes in it.
    windows: HashMap<(String, String), (tokio::time::Instant, u32)>,
    series: HashMap<String, Series>,
    series_order: VecDeque<String>,
    /// Incidents whose detection Event is out (one per incident).
    announced: HashSet<i64>,
    announced_order: VecDeque<i64>,
    results: prometheus::IntCounterVec,
}

impl<A: KubeApi> KubeEventsSink<A> {
    /// `results` counts outcomes by `result` (see [`events_counter`]).
    pub fn new(
        api: Arc<A>,
        node: &str,
        per_pod_per_hour: u32,
        results: prometheus::IntCounterVec,
    ) -> Self {
        KubeEventsSink {
            api,
            reporting_instance: format!("assertwatch-{node}"),
            per_pod_per_hour,
            windows: HashMap::new(),
            series: HashMap::new(),
            series_order: VecDeque::new(),
            announced: HashSet::new(),
            announced_order: VecDeque::new(),
            results,
        }
    }

    fn count(&self, result: &str) {
        self.results.with_label_values(&[result]).inc();
    }

    /// Takes one write from the pod's hourly budget; false when it is spent.
    fn admit(&mut self, ns: &str, pod: &str) -> bool {
        let now = tokio::time::Instant::now();
        if self.windows.len() >= MAX_TRACKED {
            self.windows
                .retain(|_, (start, _)| now.duration_since(*start) < SERIES_WINDOW);
        }
        let w = self
            .windows
            .entry((ns.to_owned(), pod.to_owned()))
            .or_insert((now, 0));
        if now.duration_since(w.0) >= SERIES_WINDOW {
            *w = (now, 0);
        }
        if w.1 >= self.per_pod_per_hour {
            return false;
        }
        w.1 += 1;
        true
    }

    async fn emit(
        &mut self,
        target: Regarding,
        reason: &str,
        action: &str,
        note: String,
        key: String,
    ) {
        let (ns, pod) = match &target {
            Regarding::Pod {
                namespace, name, ..
            } => (namespace.clone(), name.clone()),
            Regarding::Node { name } => (events::NODE_EVENT_NAMESPACE.to_owned(), name.clone()),
        };
        if !self.admit(&ns, &pod) {
            self.count("rate_limited");
            return;
        }
        let now_wall: DateTime<Utc> = Utc::now();
        let now = tokio::time::Instant::now();
        if let Some(s) = self
            .series
            .get_mut(&key)
            .filter(|s| now.duration_since(s.first) < SERIES_WINDOW)
        {
            s.count += 1;
            let series = events::series(s.count, now_wall);
            let (namespace, name) = (s.namespace.clone(), s.name.clone());
            match self
                .api
                .patch_event_series(&namespace, &name, &series)
                .await
            {
                Ok(()) => {
                    self.count("series");
                    return;
                }
                // Expired or deleted: start a new Event below.
                Err(ApiError::NotFound(_)) => {}
                Err(e) => {
                    self.failed(&e);
                    return;
                }
            }
        }
        let ev = events::warning(
            &target,
            reason,
            action,
            &note,
            &self.reporting_instance,
            now_wall,
        );
        let name = ev.metadata.name.clone().unwrap_or_default();
        match self.api.create_event(&ev).await {
            Ok(()) => {
                self.count("created");
                if self.series.len() >= MAX_TRACKED {
                    if let Some(old) = self.series_order.pop_front() {
                        self.series.remove(&old);
                    }
                }
                if self
                    .series
                    .insert(
                        key.clone(),
                        Series {
                            namespace: ns,
                            name,
                            count: 1,
                            first: now,
                        },
                    )
                    .is_none()
                {
                    self.series_order.push_back(key);
                }
            }
            Err(e) => self.failed(&e),
        }
    }

    fn failed(&self, e: &ApiError) {
        self.count("failed");
        tracing::warn!(error = %e, "Cannot write a Kubernetes Event.");
    }

    fn first_announcement(&mut self, id: i64) -> bool {
        if !self.announced.insert(id) {
            return false;
        }
        self.announced_order.push_back(id);
        if self.announced_order.len() > MAX_TRACKED {
            if let Some(old) = self.announced_order.pop_front() {
                self.announced.remove(&old);
            }
        }
        true
    }
}

/// Counter of the Events sink's outcomes (`assertwatch_kube_events_total{result}`: created,
/// series, rate_limited, failed), to be registered by the caller.
pub fn events_counter() -> Result<prometheus::IntCounterVec, prometheus::Error> {
    prometheus::IntCounterVec::new(
        prometheus::Opts::new(
            "assertwatch_kube_events_total",
            "Kubernetes Events about incidents by result (created, series, rate_limited, failed).",
        ),
        &["result"],
    )
}

impl<A: KubeApi> IncidentSink for KubeEventsSink<A> {
    fn name(&self) -> &'static str {
        "kube_events"
    }

    async fn handle(&mut self, event: Arc<IncidentEvent>) {
        let r = &event.record;
        let Some(target) = regarding(r) else {
            return;
        };
        match event.change {
            // One Event per incident, once it is complete (its frames and hint are final).
            Change::Closed | Change::Opened if !r.open => {
                if !self.first_announcement(r.id) {
                    return;
                }
                let reason = reason(r.incident.kind);
                let i = &r.incident;
                let key = format!(
                    "{target:?}|{reason}|{}|{:?}|{:?}|{:?}",
                    i.category, i.xid, i.kernel_file, i.python_frame
                );
                self.emit(target, reason, "Detected", detection_note(r), key)
                    .await;
            }
            Change::Replayed => {
                if let Some((reason, note)) = replay_reason_and_note(r) {
                    let key = format!("{target:?}|{reason}|{}", r.id);
                    self.emit(target, reason, "Replayed", note, key).await;
                }
            }
            _ => {}
        }
    }
}

/// Connects to the API server when `kubernetes.enabled` (the service account, or the
/// configured kubeconfig) and registers `assertwatch_kube_requests_total`. `None` when off.
pub async fn connect(
    cfg: &crate::config::Config,
    registry: &prometheus::Registry,
) -> anyhow::Result<Option<Arc<assertwatch_kube::KubeClient>>> {
    use anyhow::Context;
    let k = &cfg.kubernetes;
    if !k.enabled {
        return Ok(None);
    }
    let requests = assertwatch_kube::api::requests_counter()?;
    registry.register(Box::new(requests.clone()))?;
    let api = assertwatch_kube::KubeClient::connect(
        k.kubeconfig.as_deref(),
        assertwatch_kube::CallPolicy {
            timeout: k.request_timeout,
            retries: k.retries,
            ..Default::default()
        },
        requests,
    )
    .await
    .context("connecting to the Kubernetes API (kubernetes.enabled)")?;
    Ok(Some(Arc::new(api)))
}

/// Adds the Kubernetes sinks the configuration enables (`kubernetes.enabled` with `events`
/// and/or `node_condition`) over `api` (from [`connect`]) and registers their metrics. Returns
/// the hook through which GPU health recovery clears the node condition, when that sink runs.
pub fn add_kube_sinks(
    sinks: &mut super::Sinks,
    cfg: &crate::config::Config,
    registry: &prometheus::Registry,
    api: Option<Arc<assertwatch_kube::KubeClient>>,
) -> anyhow::Result<Option<super::node_condition::RecoveryHandle>> {
    let k = &cfg.kubernetes;
    let Some(api) = api else {
        return Ok(None);
    };
    if !k.enabled || !(k.events || k.node_condition) {
        return Ok(None);
    }
    if k.events {
        let results = events_counter()?;
        registry.register(Box::new(results.clone()))?;
        sinks.add(
            KubeEventsSink::new(
                api.clone(),
                &cfg.node_name,
                k.events_per_pod_per_hour,
                results,
            ),
            super::DEFAULT_QUEUE,
        );
    }
    if k.node_condition {
        let results = super::node_condition::condition_counter()?;
        registry.register(Box::new(results.clone()))?;
        let (sink, recovery) = super::node_condition::NodeConditionSink::new(
            api,
            &cfg.node_name,
            &k.node_condition_type,
            results,
        );
        sinks.add(sink, super::DEFAULT_QUEUE);
        return Ok(Some(recovery));
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Kind, ReproReport};
    use assertwatch_kube::kube::client::Body;
    use assertwatch_kube::{CallPolicy, KubeClient};
    use http::{Request, Response};
    use serde_json::{json, Value};
    use tower_test::mock;

    type Handle = mock::Handle<Request<Body>, Response<Body>>;

    fn sink(
        per_hour: u32,
    ) -> (
        KubeEventsSink<KubeClient>,
        Handle,
        prometheus::IntCounterVec,
        prometheus::IntCounterVec,
    ) {
        let (svc, handle) = mock::pair::<Request<Body>, Response<Body>>();
        let requests = assertwatch_kube::api::requests_counter().unwrap();
        let policy = CallPolicy {
            timeout: Duration::from_secs(5),
            retries: 2,
            backoff: Duration::from_millis(1),
        };
        let api = KubeClient::new(
            assertwatch_kube::kube::Client::new(svc, "default"),
            policy,
            requests.clone(),
        );
        let results = events_counter().unwrap();
        (
            KubeEventsSink::new(Arc::new(api), "gpu-node-1", per_hour, results.clone()),
            handle,
            results,
            requests,
        )
    }

    fn record(id: i64) -> IncidentRecord {
        let mut r = crate::incidents::store::test_record();
        r.id = id;
        r.node = "gpu-node-1".into();
        r.namespace = Some("ml".into());
        r.pod = Some("train-0".into());
        r.container = Some("trainer".into());
        r.incident.kind = Kind::DeviceAssert;
        r.incident.category = "index_out_of_bounds".into();
        r.incident.assertion = Some("idx < size".into());
        r.incident.kernel_file = Some("IndexKernel.cu".into());
        r.incident.python_frame = Some("model.py:42".into());
        r.incident.hint = "An index is out of range.".into();
        r
    }

    fn ev(change: Change, r: IncidentRecord) -> Arc<IncidentEvent> {
        Arc::new(IncidentEvent {
            change,
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
            body.clone()
        } else {
            json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": "m", "code": code})
        };
        send.send_response(
            Response::builder()
                .status(code)
                .body(Body::from(serde_json::to_vec(&reply).unwrap()))
                .unwrap(),
        );
        body
    }

    const EVENTS: &str = "/apis/events.k8s.io/v1/namespaces/ml/events";

    #[tokio::test]
    async fn detection_then_replay_then_a_repeat_as_series() {
        let (mut s, mut h, results, _) = sink(30);
        let server = tokio::spawn(async move {
            let first = answer(&mut h, "POST", EVENTS, 201).await;
            let replay = answer(&mut h, "POST", EVENTS, 201).await;
            let name = first["metadata"]["name"].as_str().unwrap().to_owned();
            let series = answer(&mut h, "PATCH", &format!("{EVENTS}/{name}"), 200).await;
            (first, replay, series)
        });
        // Open (still collecting) emits nothing; the close does.
        let mut open = record(7);
        open.open = true;
        s.handle(ev(Change::Opened, open)).await;
        s.handle(ev(Change::Closed, record(7))).await;
        // Closed again (a re-publish) does not repeat it.
        s.handle(ev(Change::Closed, record(7))).await;
        let mut replayed = record(7);
        // From JSON as the API shows it, so fields added to the report later need no edit here.
        let report: ReproReport = serde_json::from_value(json!({
            "outcome": "reproduced", "reason": null, "mode": "sync-gpu",
            "python_frame": "model.py:57 in forward", "step": 812
        }))
        .unwrap();
        replayed.repro = Some(report);
        s.handle(ev(Change::Replayed, replayed)).await;
        // The same failure on the same pod again: a new incident id, same place.
        s.handle(ev(Change::Closed, record(8))).await;
        let (first, replay, series) = server.await.unwrap();
        assert_eq!(first["type"], "Warning");
        assert_eq!(first["reason"], "DeviceSideAssert");
        assert_eq!(first["action"], "Detected");
        assert_eq!(first["regarding"]["kind"], "Pod");
        assert_eq!(first["regarding"]["name"], "train-0");
        assert_eq!(first["regarding"]["fieldPath"], "spec.containers{trainer}");
        assert_eq!(first["reportingInstance"], "assertwatch-gpu-node-1");
        let note = first["note"].as_str().unwrap();
        for part in [
            "index_out_of_bounds",
            "IndexKernel.cu",
            "model.py:42",
            "An index is out of range.",
            "incident 7",
        ] {
            assert!(note.contains(part), "{part} not in {note}");
        }
        assert_eq!(replay["reason"], "ReplayReproduced");
        let rnote = replay["note"].as_str().unwrap();
        assert!(
            rnote.contains("failing line model.py:57 in forward"),
            "{rnote}"
        );
        assert!(
            rnote.contains("sync-gpu") && rnote.contains("step 812"),
            "{rnote}"
        );
        assert_eq!(series["series"]["count"], 2);
        assert_eq!(results.with_label_values(&["created"]).get(), 2);
        assert_eq!(results.with_label_values(&["series"]).get(), 1);
    }

    #[tokio::test]
    async fn per_pod_rate_limit_is_counted() {
        let (mut s, mut h, results, _) = sink(2);
        let server = tokio::spawn(async move {
            answer(&mut h, "POST", EVENTS, 201).await;
            answer(&mut h, "POST", EVENTS, 201).await;
            // Nothing more arrives.
            let next = tokio::time::timeout(Duration::from_millis(100), h.next_request()).await;
            assert!(!matches!(next, Ok(Some(_))));
        });
        for id in 0..5 {
            let mut r = record(id);
            r.incident.python_frame = Some(format!("model.py:{id}"));
            s.handle(ev(Change::Closed, r)).await;
        }
        server.await.unwrap();
        assert_eq!(results.with_label_values(&["created"]).get(), 2);
        assert_eq!(results.with_label_values(&["rate_limited"]).get(), 3);
    }

    #[tokio::test]
    async fn forbidden_and_expired_series_and_pods_unknown() {
        let (mut s, mut h, results, requests) = sink(30);
        let server = tokio::spawn(async move {
            // 403: counted, not retried.
            answer(&mut h, "POST", EVENTS, 403).await;
            // Next incident: created; its repeat finds the Event expired (404) and creates anew.
            let first = answer(&mut h, "POST", EVENTS, 201).await;
            let name = first["metadata"]["name"].as_str().unwrap().to_owned();
            answer(&mut h, "PATCH", &format!("{EVENTS}/{name}"), 404).await;
            answer(&mut h, "POST", EVENTS, 201).await;
        });
        let mut a = record(1);
        a.incident.python_frame = Some("a.py:1".into());
        s.handle(ev(Change::Closed, a)).await;
        s.handle(ev(Change::Closed, record(2))).await;
        s.handle(ev(Change::Closed, record(3))).await;
        // No pod: nothing to say it about.
        let mut nopod = record(4);
        nopod.pod = None;
        s.handle(ev(Change::Closed, nopod)).await;
        server.await.unwrap();
        assert_eq!(results.with_label_values(&["failed"]).get(), 1);
        assert_eq!(results.with_label_values(&["created"]).get(), 2);
        assert_eq!(
            requests
                .with_label_values(&["create_event", "forbidden"])
                .get(),
            1
        );
        assert_eq!(
            requests
                .with_label_values(&["patch_event", "not_found"])
                .get(),
            1
        );
    }

    #[test]
    fn reasons_per_kind() {
        assert_eq!(reason(Kind::Xid), "GPUXid");
        assert_eq!(reason(Kind::NcclError), "NCCLError");
        assert_eq!(reason(Kind::CudaError), "CUDAError");
    }
}
