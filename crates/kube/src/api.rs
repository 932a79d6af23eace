//! The API calls assertwatch makes, behind one trait, with timeouts, retries and counting.
//!
//! [`KubeApi`] is all a sink needs from the API server; [`KubeClient`] implements it over a
//! `kube::Client` (in-cluster service account, or a kubeconfig in development). Every call is
//! bounded by a timeout and retried with backoff when retrying can help (timeouts, 409 conflicts
//! on patches, 429 and 5xx); a 403 is not retried (RBAC does not change within a call) and is
//! counted so a missing permission shows on the metrics page. Every outcome is counted in
//! `assertwatch_kube_requests_total{request, result}`.

use futures_util::stream::BoxStream;
use futures_util::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{Node, NodeCondition, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::api::{DeleteParams, LogParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::Api;
use std::future::Future;
use std::time::Duration;

/// Why an API call failed, in the classes that decide retrying and counting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    #[error("forbidden (check the RBAC rules in deploy/kubernetes): {0}")]
    Forbidden(String),
    #[error("conflict: {0}")]
    Conflict(String),
    #[error("not found: {0}")]
    NotFound(String),
    #[error("gone (resource version too old): {0}")]
    Gone(String),
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    #[error("API server answered {code}: {message}")]
    Status { code: u16, message: String },
    #[error("request failed: {0}")]
    Transport(String),
    #[error("cannot configure the client: {0}")]
    Config(String),
}

impl ApiError {
    /// The `result` label value.
    pub fn kind(&self) -> &'static str {
        match self {
            ApiError::Forbidden(_) => "forbidden",
            ApiError::Conflict(_) => "conflict",
            ApiError::NotFound(_) => "not_found",
            ApiError::Gone(_) => "gone",
            ApiError::Timeout(_) => "timeout",
            ApiError::Status { .. } => "error",
            ApiError::Transport(_) => "transport",
            ApiError::Config(_) => "config",
        }
    }

    /// Whether trying the same call again may succeed.
    pub fn retryable(&self) -> bool {
        match self {
            ApiError::Timeout(_) | ApiError::Transport(_) | ApiError::Conflict(_) => true,
            ApiError::Status { code, .. } => *code == 429 || *code >= 500,
            ApiError::Forbidden(_)
            | ApiError::NotFound(_)
            | ApiError::Gone(_)
            | ApiError::Config(_) => false,
        }
    }

    fn from_kube(e: kube::Error) -> Self {
        match e {
            kube::Error::Api(s) => match s.code {
                403 => ApiError::Forbidden(s.message),
                404 => ApiError::NotFound(s.message),
                409 => ApiError::Conflict(s.message),
                410 => ApiError::Gone(s.message),
                code => ApiError::Status {
                    code,
                    message: s.message,
                },
            },
            other => ApiError::Transport(other.to_string()),
        }
    }
}

/// What the sinks ask of the API server.
pub trait KubeApi: Send + Sync + 'static {
    /// `POST /apis/events.k8s.io/v1/namespaces/{ns}/events`. An event that already exists (a
    /// retried create whose first try arrived) is success.
    fn create_event(&self, event: &Event) -> impl Future<Output = Result<(), ApiError>> + Send;

    /// `PATCH …/events/{name}` (merge patch): the event happened again; `series` is the count
    /// so far and the time of the latest.
    fn patch_event_series(
        &self,
        namespace: &str,
        name: &str,
        series: &k8s_openapi::api::events::v1::EventSeries,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;

    /// `PATCH /api/v1/nodes/{node}/status` (strategic merge: conditions merge by `type`, so
    /// other conditions are untouched).
    fn patch_node_condition(
        &self,
        node: &str,
        condition: &NodeCondition,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;

    /// `POST /api/v1/namespaces/{ns}/pods`. A 409 (the pod exists: a retried or repeated
    /// replay) is returned as [`ApiError::Conflict`] for the caller to adopt the pod.
    fn create_pod(&self, pod: &Pod) -> impl Future<Output = Result<(), ApiError>> + Send;

    /// `GET /api/v1/namespaces/{ns}/pods/{name}`.
    fn get_pod(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<Pod, ApiError>> + Send;

    /// A watch of one pod from `resource_version`: each change as it happens. A watch the
    /// server closed ends the stream; an expired resource version yields [`ApiError::Gone`].
    fn watch_pod(
        &self,
        namespace: &str,
        name: &str,
        resource_version: &str,
    ) -> impl Future<Output = Result<BoxStream<'static, Result<Pod, ApiError>>, ApiError>> + Send;

    /// The last `tail_lines` lines of `container`'s log.
    fn pod_log(
        &self,
        namespace: &str,
        name: &str,
        container: &str,
        tail_lines: i64,
    ) -> impl Future<Output = Result<String, ApiError>> + Send;

    /// `DELETE …/pods/{name}`; a pod already gone is success.
    fn delete_pod(
        &self,
        namespace: &str,
        name: &str,
    ) -> impl Future<Output = Result<(), ApiError>> + Send;
}

/// Counter of API calls by request and result (`assertwatch_kube_requests_total`), to be
/// registered by the caller.
pub fn requests_counter() -> Result<prometheus::IntCounterVec, prometheus::Error> {
    prometheus::IntCounterVec::new(
        prometheus::Opts::new(
            "assertwatch_kube_requests_total",
            "Kubernetes API calls by request and result (ok, forbidden, conflict, timeout, ...); every try is counted.",
        ),
        &["request", "result"],
    )
}

/// Timeouts and retries of [`KubeClient`].
#[derive(Debug, Clone, Copy)]
pub struct CallPolicy {
    pub timeout: Duration,
    /// Tries after the first.
    pub retries: u32,
    /// First backoff; doubles per try, at most 5 s.
    pub backoff: Duration,
}

impl Default for CallPolicy {
    fn default() -> Self {
        CallPolicy {
            timeout: Duration::from_secs(10),
            retries: 3,
            backoff: Duration::from_millis(200),
        }
    }
}

/// [`KubeApi`] over a `kube::Client`.
#[derive(Clone)]
pub struct KubeClient {
    client: kube::Client,
    policy: CallPolicy,
    requests: prometheus::IntCounterVec,
}

impl KubeClient {
    pub fn new(
        client: kube::Client,
        policy: CallPolicy,
        requests: prometheus::IntCounterVec,
    ) -> Self {
        KubeClient {
            client,
            policy,
            requests,
        }
    }

    /// The underlying client (for the pod cache's watch, which has its own retries).
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// A client from the in-cluster service account, or from `kubeconfig` when given.
    pub async fn connect(
        kubeconfig: Option<&std::path::Path>,
        policy: CallPolicy,
        requests: prometheus::IntCounterVec,
    ) -> Result<Self, ApiError> {
        let config = match kubeconfig {
            Some(path) => {
                let kc = kube::config::Kubeconfig::read_from(path)
                    .map_err(|e| ApiError::Config(format!("{}: {e}", path.display())))?;
                kube::Config::from_custom_kubeconfig(kc, &Default::default())
                    .await
                    .map_err(|e| ApiError::Config(e.to_string()))?
            }
            None => kube::Config::incluster().map_err(|e| ApiError::Config(e.to_string()))?,
        };
        let client = kube::Client::try_from(config).map_err(|e| ApiError::Config(e.to_string()))?;
        Ok(KubeClient::new(client, policy, requests))
    }

    /// Runs `call` under the policy: each try bounded by the timeout, counted, and retried
    /// while the error is retryable and tries remain.
    /// A 409 is retried only when `conflict_retryable` (a patch that raced; a create that met
    /// its own earlier try is done).
    async fn call<T, F, Fut>(
        &self,
        request: &'static str,
        conflict_retryable: bool,
        mut call: F,
    ) -> Result<T, ApiError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, kube::Error>>,
    {
        let mut backoff = self.policy.backoff;
        let mut tries_left = self.policy.retries;
        loop {
            let r = match tokio::time::timeout(self.policy.timeout, call()).await {
                Ok(Ok(v)) => Ok(v),
                Ok(Err(e)) => Err(ApiError::from_kube(e)),
                Err(_) => Err(ApiError::Timeout(self.policy.timeout)),
            };
            let result = match &r {
                Ok(_) => "ok",
                Err(e) => e.kind(),
            };
            self.requests.with_label_values(&[request, result]).inc();
            match r {
                Err(e)
                    if e.retryable()
                        && tries_left > 0
                        && (conflict_retryable || !matches!(e, ApiError::Conflict(_))) =>
                {
                    tries_left -= 1;
                    tracing::debug!(request, error = %e, "Kubernetes API call failed; retrying.");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                }
                other => return other,
            }
        }
    }
}

impl KubeApi for KubeClient {
    async fn create_event(&self, event: &Event) -> Result<(), ApiError> {
        let ns = event.metadata.namespace.clone().unwrap_or_default();
        let api: Api<Event> = Api::namespaced(self.client.clone(), &ns);
        let pp = PostParams::default();
        match self
            .call("create_event", false, || api.create(&pp, event))
            .await
        {
            Ok(_) | Err(ApiError::Conflict(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }

    async fn patch_event_series(
        &self,
        namespace: &str,
        name: &str,
        series: &k8s_openapi::api::events::v1::EventSeries,
    ) -> Result<(), ApiError> {
        let api: Api<Event> = Api::namespaced(self.client.clone(), namespace);
        let patch = Patch::Merge(serde_json::json!({ "series": series }));
        let pp = PatchParams::default();
        self.call("patch_event", true, || api.patch(name, &pp, &patch))
            .await
            .map(|_| ())
    }

    async fn patch_node_condition(
        &self,
        node: &str,
        condition: &NodeCondition,
    ) -> Result<(), ApiError> {
        let api: Api<Node> = Api::all(self.client.clone());
        let patch =
            Patch::Strategic(serde_json::json!({ "status": { "conditions": [condition] } }));
        let pp = PatchParams::default();
        self.call("patch_node_status", true, || {
            api.patch_status(node, &pp, &patch)
        })
        .await
        .map(|_| ())
    }

    async fn create_pod(&self, pod: &Pod) -> Result<(), ApiError> {
        let ns = pod.metadata.namespace.clone().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(self.client.clone(), &ns);
        let pp = PostParams::default();
        self.call("create_pod", false, || api.create(&pp, pod))
            .await
            .map(|_| ())
    }

    async fn get_pod(&self, namespace: &str, name: &str) -> Result<Pod, ApiError> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        self.call("get_pod", false, || api.get(name)).await
    }

    async fn watch_pod(
        &self,
        namespace: &str,
        name: &str,
        resource_version: &str,
    ) -> Result<BoxStream<'static, Result<Pod, ApiError>>, ApiError> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let wp = WatchParams::default()
            .fields(&format!("metadata.name={name}"))
            .timeout(290);
        let stream = self
            .call("watch_pod", false, || api.watch(&wp, resource_version))
            .await?;
        Ok(stream
            .map_err(ApiError::from_kube)
            .try_filter_map(|ev| async move {
                match ev {
                    WatchEvent::Added(p) | WatchEvent::Modified(p) | WatchEvent::Deleted(p) => {
                        Ok(Some(p))
                    }
                    WatchEvent::Bookmark(_) => Ok(None),
                    WatchEvent::Error(e) => Err(ApiError::from_kube(kube::Error::Api(e))),
                }
            })
            .boxed())
    }

    async fn pod_log(
        &self,
        namespace: &str,
        name: &str,
        container: &str,
        tail_lines: i64,
    ) -> Result<String, ApiError> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let lp = LogParams {
            container: Some(container.to_owned()),
            tail_lines: Some(tail_lines),
            ..Default::default()
        };
        self.call("pod_log", false, || api.logs(name, &lp)).await
    }

    async fn delete_pod(&self, namespace: &str, name: &str) -> Result<(), ApiError> {
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let dp = DeleteParams::background();
        match self
            .call("delete_pod", false, || api.delete(name, &dp))
            .await
        {
            Ok(_) | Err(ApiError::NotFound(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events;
    use http::{Request, Response};
    use k8s_openapi::chrono::{DateTime, Utc};
    use kube::client::Body;
    use serde_json::{json, Value};
    use tower_test::mock;

    type Handle = mock::Handle<Request<Body>, Response<Body>>;

    fn client(policy: CallPolicy) -> (KubeClient, Handle, prometheus::IntCounterVec) {
        let (svc, handle) = mock::pair::<Request<Body>, Response<Body>>();
        let counter = requests_counter().unwrap();
        let c = KubeClient::new(kube::Client::new(svc, "default"), policy, counter.clone());
        (c, handle, counter)
    }

    fn fast() -> CallPolicy {
        CallPolicy {
            timeout: Duration::from_millis(200),
            retries: 2,
            backoff: Duration::from_millis(1),
        }
    }

    /// Takes the next request, checks method, path and content type, returns its JSON body and
    /// answers `code` with `reply`.
    async fn serve(
        h: &mut Handle,
        method: &str,
        path: &str,
        content_type: &str,
        code: u16,
        reply: Value,
    ) -> Value {
        let (req, send) = h.next_request().await.expect("a request");
        assert_eq!(req.method().as_str(), method);
        assert_eq!(req.uri().path(), path);
        assert_eq!(
            req.headers()
                .get(http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok()),
            Some(content_type)
        );
        let body = req.into_body().collect_bytes().await.unwrap();
        let body: Value = serde_json::from_slice(&body).unwrap();
        send.send_response(
            Response::builder()
                .status(code)
                .body(Body::from(serde_json::to_vec(&reply).unwrap()))
                .unwrap(),
        );
        body
    }

    fn status(code: u16, reason: &str) -> Value {
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "message": format!("{reason} for the test"), "reason": reason, "code": code})
    }

    fn at() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-12-01T10:00:00Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    fn event() -> Event {
        events::warning(
            &events::Regarding::Pod {
                namespace: "ml".into(),
                name: "w-0".into(),
                uid: None,
                container: None,
            },
            "DeviceSideAssert",
            "Detected",
            "note",
            "assertwatch-n1",
            at(),
        )
    }

    const EVENTS: &str = "/apis/events.k8s.io/v1/namespaces/ml/events";

    #[tokio::test]
    async fn create_event_posts_the_event_and_a_conflict_means_it_exists() {
        let (c, mut h, n) = client(fast());
        let ev = event();
        let call = tokio::spawn({
            let c = c.clone();
            let ev = ev.clone();
            async move { c.create_event(&ev).await }
        });
        let body = serve(
            &mut h,
            "POST",
            EVENTS,
            "application/json",
            201,
            serde_json::to_value(&ev).unwrap(),
        )
        .await;
        assert_eq!(body, serde_json::to_value(&ev).unwrap());
        assert_eq!(call.await.unwrap(), Ok(()));
        // A retried create whose first try arrived: 409 AlreadyExists is success, not retried.
        let call = tokio::spawn(async move { c.create_event(&ev).await });
        serve(
            &mut h,
            "POST",
            EVENTS,
            "application/json",
            409,
            status(409, "AlreadyExists"),
        )
        .await;
        assert_eq!(call.await.unwrap(), Ok(()));
        assert_eq!(n.with_label_values(&["create_event", "ok"]).get(), 1);
        assert_eq!(n.with_label_values(&["create_event", "conflict"]).get(), 1);
    }

    #[tokio::test]
    async fn forbidden_is_counted_and_not_retried() {
        let (c, mut h, n) = client(fast());
        let call = tokio::spawn(async move { c.create_event(&event()).await });
        serve(
            &mut h,
            "POST",
            EVENTS,
            "application/json",
            403,
            status(403, "Forbidden"),
        )
        .await;
        let r = call.await.unwrap();
        assert!(matches!(r, Err(ApiError::Forbidden(_))), "{r:?}");
        assert_eq!(n.with_label_values(&["create_event", "forbidden"]).get(), 1);
        // No second try arrives (the client is gone or silent).
        let next = tokio::time::timeout(Duration::from_millis(50), h.next_request()).await;
        assert!(!matches!(next, Ok(Some(_))));
    }

    #[tokio::test]
    async fn server_errors_are_retried_until_one_succeeds() {
        let (c, mut h, n) = client(fast());
        let call = tokio::spawn(async move { c.create_event(&event()).await });
        serve(
            &mut h,
            "POST",
            EVENTS,
            "application/json",
            500,
            status(500, "InternalError"),
        )
        .await;
        serve(
            &mut h,
            "POST",
            EVENTS,
            "application/json",
            429,
            status(429, "TooManyRequests"),
        )
        .await;
        serve(
            &mut h,
            "POST",
            EVENTS,
            "application/json",
            201,
            serde_json::to_value(event()).unwrap(),
        )
        .await;
        assert_eq!(call.await.unwrap(), Ok(()));
        assert_eq!(n.with_label_values(&["create_event", "error"]).get(), 2);
        assert_eq!(n.with_label_values(&["create_event", "ok"]).get(), 1);
    }

    #[tokio::test]
    async fn a_silent_server_times_out_every_try_and_gives_up() {
        let (c, mut h, n) = client(fast());
        let call = tokio::spawn(async move { c.create_event(&event()).await });
        let mut held = Vec::new();
        for _ in 0..3 {
            // Take the request and never answer it.
            held.push(h.next_request().await.expect("a try"));
        }
        assert_eq!(
            call.await.unwrap(),
            Err(ApiError::Timeout(Duration::from_millis(200)))
        );
        assert_eq!(n.with_label_values(&["create_event", "timeout"]).get(), 3);
    }

    #[tokio::test]
    async fn node_condition_is_a_strategic_merge_patch_of_node_status() {
        let (c, mut h, n) = client(fast());
        let cond = events::gpu_condition(
            "GPUHardwareFault",
            true,
            "Xid79",
            "GPU 3 fell off the bus",
            at(),
        );
        let call = tokio::spawn({
            let cond = cond.clone();
            async move { c.patch_node_condition("gpu-node-1", &cond).await }
        });
        let node = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-node-1"}});
        // A conflict on a patch is retried.
        serve(
            &mut h,
            "PATCH",
            "/api/v1/nodes/gpu-node-1/status",
            "application/strategic-merge-patch+json",
            409,
            status(409, "Conflict"),
        )
        .await;
        let body = serve(
            &mut h,
            "PATCH",
            "/api/v1/nodes/gpu-node-1/status",
            "application/strategic-merge-patch+json",
            200,
            node,
        )
        .await;
        assert_eq!(
            body,
            json!({"status": {"conditions": [{
                "type": "GPUHardwareFault", "status": "True", "reason": "Xid79",
                "message": "GPU 3 fell off the bus",
                "lastHeartbeatTime": "2026-12-01T10:00:00Z",
                "lastTransitionTime": "2026-12-01T10:00:00Z"
            }]}})
        );
        assert_eq!(call.await.unwrap(), Ok(()));
        assert_eq!(
            n.with_label_values(&["patch_node_status", "conflict"])
                .get(),
            1
        );
        assert_eq!(n.with_label_values(&["patch_node_status", "ok"]).get(), 1);
    }

    #[tokio::test]
    async fn event_series_is_a_merge_patch() {
        let (c, mut h, _) = client(fast());
        let s = events::series(3, at());
        let call = tokio::spawn(async move { c.patch_event_series("ml", "w-0.abc", &s).await });
        let body = serve(
            &mut h,
            "PATCH",
            "/apis/events.k8s.io/v1/namespaces/ml/events/w-0.abc",
            "application/merge-patch+json",
            200,
            serde_json::to_value(event()).unwrap(),
        )
        .await;
        assert_eq!(
            body,
            json!({"series": {"count": 3, "lastObservedTime": "2026-12-01T10:00:00.000000Z"}})
        );
        assert_eq!(call.await.unwrap(), Ok(()));
    }
}
