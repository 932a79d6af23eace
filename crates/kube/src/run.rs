//! Running one replay pod to its end: create, watch, read the log, delete.
//!
//! [`run_replay_pod`] creates the pod [`crate::replay_pod`] derived (adopting it when a pod of
//! that name already exists), follows it with a watch (re-reading it and watching again when the
//! server closes the watch or its resource version expired, 410 Gone), gives up on a pod that
//! stays unschedulable (no free GPU) past the schedule timeout, reads the last lines of its log,
//! and always deletes it. It never panics and never leaves the pod behind on an error it saw.

use crate::api::{ApiError, KubeApi};
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use std::time::Duration;

/// How long to wait for what.
#[derive(Debug, Clone, Copy)]
pub struct RunLimits {
    /// A pod unschedulable (no free GPU) this long is deleted as skipped.
    pub schedule_timeout: Duration,
    /// The whole run, pod start included (the pod's own deadline plus a margin).
    pub overall: Duration,
    /// Log lines read at the end.
    pub tail_lines: i64,
}

/// How the replay pod ended.
#[derive(Debug, Clone, PartialEq)]
pub enum RunEnd {
    /// The container ran and exited (`phase` Succeeded or Failed).
    Finished {
        succeeded: bool,
        exit_code: Option<i32>,
    },
    /// It never got a node's resources in time (the scheduler's message).
    Unschedulable(String),
    /// It did not end within [`RunLimits::overall`].
    TimedOut,
    /// It disappeared before it ended (deleted by someone else, or garbage-collected with the
    /// failing pod).
    Vanished,
    /// The API server could not be used for it.
    ApiFailed(ApiError),
}

impl RunEnd {
    /// The `skipped`/failure reason for the incident's outcome.
    pub fn reason(&self) -> String {
        match self {
            RunEnd::Finished {
                succeeded: true, ..
            } => "finished".into(),
            RunEnd::Finished { exit_code, .. } => {
                format!("exited {}", exit_code.map_or("?".into(), |c| c.to_string()))
            }
            RunEnd::Unschedulable(m) => format!("unschedulable: {m}"),
            RunEnd::TimedOut => "timed out".into(),
            RunEnd::Vanished => "replay pod deleted before it ended".into(),
            RunEnd::ApiFailed(e) => format!("Kubernetes API: {e}"),
        }
    }
}

/// What a run found.
#[derive(Debug, Clone, PartialEq)]
pub struct PodRun {
    pub end: RunEnd,
    /// The last log lines (when the container ran).
    pub log: Option<String>,
    /// The last log line that is a JSON object: the harness's result, where it prints one.
    pub result: Option<serde_json::Value>,
    /// Whether the pod was deleted (or was already gone).
    pub deleted: bool,
}

/// What the current pod state decides, if anything.
fn decide(
    pod: &Pod,
    unschedulable_since: &mut Option<tokio::time::Instant>,
    limits: &RunLimits,
) -> Option<RunEnd> {
    let status = pod.status.as_ref();
    match status.and_then(|s| s.phase.as_deref()) {
        Some("Succeeded") | Some("Failed") => {
            let succeeded = status.and_then(|s| s.phase.as_deref()) == Some("Succeeded");
            let exit_code = status
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|cs| cs.first())
                .and_then(|c| c.state.as_ref())
                .and_then(|st| st.terminated.as_ref())
                .map(|t| t.exit_code);
            return Some(RunEnd::Finished {
                succeeded,
                exit_code,
            });
        }
        _ => {}
    }
    let unschedulable = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "PodScheduled"))
        .filter(|c| c.status == "False" && c.reason.as_deref() == Some("Unschedulable"));
    match unschedulable {
        Some(c) => {
            let since = *unschedulable_since.get_or_insert_with(tokio::time::Instant::now);
            if since.elapsed() >= limits.schedule_timeout {
                return Some(RunEnd::Unschedulable(
                    c.message.clone().unwrap_or_else(|| "no node fits".into()),
                ));
            }
        }
        None => *unschedulable_since = None,
    }
    None
}

/// Follows the pod until [`decide`] says it ended, the limits pass, or the API fails.
async fn follow<A: KubeApi>(api: &A, ns: &str, name: &str, limits: &RunLimits) -> RunEnd {
    let start = tokio::time::Instant::now();
    let mut unschedulable_since = None;
    let mut failures = 0u32;
    loop {
        // (Re)read the pod: the starting point of each watch, and the recovery from a 410.
        let pod = match api.get_pod(ns, name).await {
            Ok(p) => p,
            Err(ApiError::NotFound(_)) => return RunEnd::Vanished,
            Err(e) => {
                failures += 1;
                if failures > 3 {
                    return RunEnd::ApiFailed(e);
                }
                tokio::time::sleep(Duration::from_millis(200 * u64::from(failures))).await;
                continue;
            }
        };
        if let Some(end) = decide(&pod, &mut unschedulable_since, limits) {
            return end;
        }
        let rv = pod.metadata.resource_version.clone().unwrap_or_default();
        let mut stream = match api.watch_pod(ns, name, &rv).await {
            Ok(s) => s,
            Err(e) => {
                failures += 1;
                if failures > 3 {
                    return RunEnd::ApiFailed(e);
                }
                continue;
            }
        };
        loop {
            let Some(left) = limits.overall.checked_sub(start.elapsed()) else {
                return RunEnd::TimedOut;
            };
            // Wake up for the schedule timeout even when nothing changes.
            let wait = match unschedulable_since {
                Some(since) => left.min(limits.schedule_timeout.saturating_sub(since.elapsed())),
                None => left,
            };
            match tokio::time::timeout(wait, stream.next()).await {
                Ok(Some(Ok(p))) => {
                    failures = 0;
                    if let Some(end) = decide(&p, &mut unschedulable_since, limits) {
                        return end;
                    }
                    if p.metadata.deletion_timestamp.is_some() {
                        return RunEnd::Vanished;
                    }
                }
                // 410 Gone, another error, or the server closed the watch: read and watch again.
                Ok(Some(Err(ApiError::Gone(_)))) | Ok(None) => break,
                Ok(Some(Err(e))) => {
                    failures += 1;
                    if failures > 3 {
                        return RunEnd::ApiFailed(e);
                    }
                    break;
                }
                Err(_) => {
                    if start.elapsed() >= limits.overall {
                        return RunEnd::TimedOut;
                    }
                    // The schedule timeout passed: decide on a fresh read.
                    break;
                }
            }
        }
    }
}

/// Runs `pod` (as built by [`crate::replay_pod`]) to its end and deletes it.
pub async fn run_replay_pod<A: KubeApi>(api: &A, pod: &Pod, limits: RunLimits) -> PodRun {
    let ns = pod.metadata.namespace.clone().unwrap_or_default();
    let name = pod.metadata.name.clone().unwrap_or_default();
    let container = pod
        .spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .map(|c| c.name.clone())
        .unwrap_or_default();
    let (end, created) = match api.create_pod(pod).await {
        // A pod of this name exists already: the same replay, started before; follow it.
        Ok(()) | Err(ApiError::Conflict(_)) => (follow(api, &ns, &name, &limits).await, true),
        Err(e) => (RunEnd::ApiFailed(e), false),
    };
    let log = match &end {
        RunEnd::Finished { .. } | RunEnd::TimedOut => api
            .pod_log(&ns, &name, &container, limits.tail_lines)
            .await
            .ok(),
        _ => None,
    };
    let result = log.as_deref().and_then(last_json_line);
    // Always deleted once created, whatever happened in between; 404 counts as deleted.
    let deleted = !created || api.delete_pod(&ns, &name).await.is_ok();
    PodRun {
        end,
        log,
        result,
        deleted,
    }
}

/// The last line of `log` that parses as a JSON object.
pub fn last_json_line(log: &str) -> Option<serde_json::Value> {
    log.lines()
        .rev()
        .map(str::trim)
        .filter(|l| l.starts_with('{'))
        .find_map(|l| {
            serde_json::from_str::<serde_json::Value>(l)
                .ok()
                .filter(|v| v.is_object())
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{requests_counter, CallPolicy, KubeClient};
    use http::{Request, Response};
    use kube::client::Body;
    use serde_json::{json, Value};
    use tower_test::mock;

    type Handle = mock::Handle<Request<Body>, Response<Body>>;
    const PODS: &str = "/api/v1/namespaces/ml/pods";
    const NAME: &str = "assertwatch-replay-7-sync-gpu";

    fn client() -> (KubeClient, Handle, prometheus::IntCounterVec) {
        let (svc, handle) = mock::pair::<Request<Body>, Response<Body>>();
        let n = requests_counter().unwrap();
        let c = KubeClient::new(
            kube::Client::new(svc, "default"),
            CallPolicy {
                timeout: Duration::from_secs(5),
                retries: 0,
                backoff: Duration::from_millis(1),
            },
            n.clone(),
        );
        (c, handle, n)
    }

    fn pod_json(rv: &str, phase: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": NAME, "namespace": "ml", "resourceVersion": rv},
               "spec": {"containers": [{"name": "trainer", "image": "i"}]},
               "status": {"phase": phase}})
    }

    fn replay() -> Pod {
        serde_json::from_value(pod_json("", "")).unwrap()
    }

    /// Takes the next request, checks method and path (and query parts), answers `code` with
    /// `body` bytes.
    async fn answer(
        h: &mut Handle,
        method: &str,
        path: &str,
        query: &[&str],
        code: u16,
        body: Vec<u8>,
    ) {
        let (req, send) = h.next_request().await.expect("a request");
        assert_eq!(req.method().as_str(), method, "{}", req.uri());
        assert_eq!(req.uri().path(), path);
        let q = req.uri().query().unwrap_or_default().to_owned();
        for part in query {
            assert!(q.contains(part), "{part} not in {q}");
        }
        send.send_response(
            Response::builder()
                .status(code)
                .body(Body::from(body))
                .unwrap(),
        );
    }

    fn js(v: Value) -> Vec<u8> {
        serde_json::to_vec(&v).unwrap()
    }

    fn watch_lines(events: &[Value]) -> Vec<u8> {
        let mut out = Vec::new();
        for e in events {
            out.extend(serde_json::to_vec(e).unwrap());
            out.push(b'\n');
        }
        out
    }

    fn limits() -> RunLimits {
        RunLimits {
            schedule_timeout: Duration::from_secs(60),
            overall: Duration::from_secs(30),
            tail_lines: 200,
        }
    }

    #[tokio::test]
    async fn create_watch_through_a_410_read_the_log_and_delete() {
        let (c, mut h, n) = client();
        let server = tokio::spawn(async move {
            answer(&mut h, "POST", PODS, &[], 201, js(pod_json("1", "Pending"))).await;
            answer(
                &mut h,
                "GET",
                &format!("{PODS}/{NAME}"),
                &[],
                200,
                js(pod_json("1", "Pending")),
            )
            .await;
            // The first watch sees the pod start, then its resource version expires.
            answer(&mut h, "GET", PODS, &["watch=true", "fieldSelector=metadata.name%3D", "resourceVersion=1"], 200,
                watch_lines(&[
                    json!({"type": "MODIFIED", "object": pod_json("2", "Running")}),
                    json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "metadata": {},
                        "status": "Failure", "message": "too old resource version", "reason": "Expired", "code": 410}}),
                ])).await;
            answer(
                &mut h,
                "GET",
                &format!("{PODS}/{NAME}"),
                &[],
                200,
                js(pod_json("5", "Running")),
            )
            .await;
            answer(
                &mut h,
                "GET",
                PODS,
                &["watch=true", "resourceVersion=5"],
                200,
                watch_lines(&[json!({"type": "MODIFIED", "object": pod_json("6", "Succeeded")})]),
            )
            .await;
            answer(&mut h, "GET", &format!("{PODS}/{NAME}/log"), &["container=trainer", "tailLines=200"], 200,
                b"reproduced at model.py:57 (3.2 s) -> /var/run/assertwatch-replay/result.json\n{\"outcome\": \"reproduced\", \"python_frame\": \"model.py:57\"}\n".to_vec()).await;
            answer(
                &mut h,
                "DELETE",
                &format!("{PODS}/{NAME}"),
                &[],
                200,
                js(pod_json("7", "Succeeded")),
            )
            .await;
        });
        let run = run_replay_pod(&c, &replay(), limits()).await;
        server.await.unwrap();
        assert_eq!(
            run.end,
            RunEnd::Finished {
                succeeded: true,
                exit_code: None
            }
        );
        assert_eq!(run.result.unwrap()["python_frame"], "model.py:57");
        assert!(run.deleted);
        assert_eq!(n.with_label_values(&["watch_pod", "ok"]).get(), 2);
    }

    #[tokio::test]
    async fn an_unschedulable_pod_is_skipped_and_deleted() {
        let (c, mut h, _) = client();
        let mut pending = pod_json("3", "Pending");
        pending["status"]["conditions"] = json!([{"type": "PodScheduled", "status": "False",
            "reason": "Unschedulable", "message": "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."}]);
        let server = tokio::spawn(async move {
            // 409: a pod of that name exists (the same replay, started before): adopted.
            answer(
                &mut h,
                "POST",
                PODS,
                &[],
                409,
                js(json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure", "message": "exists", "reason": "AlreadyExists", "code": 409})),
            )
            .await;
            answer(
                &mut h,
                "GET",
                &format!("{PODS}/{NAME}"),
                &[],
                200,
                js(pending),
            )
            .await;
            answer(&mut h, "DELETE", &format!("{PODS}/{NAME}"), &[], 404, js(json!({"kind": "Status", "apiVersion": "v1",
                "metadata": {}, "status": "Failure", "message": "gone", "reason": "NotFound", "code": 404}))).await;
        });
        let l = RunLimits {
            schedule_timeout: Duration::ZERO,
            ..limits()
        };
        let run = run_replay_pod(&c, &replay(), l).await;
        server.await.unwrap();
        assert!(
            matches!(&run.end, RunEnd::Unschedulable(m) if m.contains("Insufficient nvidia.com/gpu")),
            "{:?}",
            run.end
        );
        assert!(run.end.reason().starts_with("unschedulable"));
        assert!(run.deleted, "a 404 on delete means it is gone");
        assert_eq!(run.log, None);
    }

    #[tokio::test]
    async fn forbidden_create_ends_without_a_pod() {
        let (c, mut h, n) = client();
        let server = tokio::spawn(async move {
            answer(&mut h, "POST", PODS, &[], 403, js(json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                "status": "Failure", "message": "pods is forbidden", "reason": "Forbidden", "code": 403}))).await;
        });
        let run = run_replay_pod(&c, &replay(), limits()).await;
        server.await.unwrap();
        assert!(matches!(run.end, RunEnd::ApiFailed(ApiError::Forbidden(_))));
        assert_eq!(n.with_label_values(&["create_pod", "forbidden"]).get(), 1);
    }

    #[test]
    fn result_is_the_last_json_object_line() {
        assert_eq!(
            last_json_line("a\n{\"x\":1}\n{bad\nb\n"),
            Some(json!({"x": 1}))
        );
        assert_eq!(last_json_line("no json"), None);
    }
}
