//! The HTTP listener: `/metrics`, `/healthz`, `/readyz`, the incidents API and the pages.
//!
//! Handlers only read: the metrics registry, the store (through a read-only connection of
//! their own, on blocking threads) and the readiness latches. Nothing here waits on NVML, on the
//! incident task or on the store's writer, so a scrape answers even while the disk stalls.

mod detail;
mod page;

use crate::incidents::store::{ListFilter, Store};
use crate::lifecycle::Readiness;
use crate::metrics::Metrics;
use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use std::sync::Arc;

/// The GPU rows of the page and `/api/v1/gpus`: every GPU NVML reports, with its health, then
/// the GPUs known only from kernel-log lines (no NVML), keyed by bus id.
pub fn gpu_rows(
    snapshot: tokio::sync::watch::Receiver<Arc<assertwatch_gpu::GpuSnapshot>>,
    health: tokio::sync::watch::Receiver<crate::health::sink::HealthReport>,
) -> Arc<dyn Fn() -> Vec<GpuRow> + Send + Sync> {
    use crate::detect::xid::normalize_bus;
    Arc::new(move || {
        let s = snapshot.borrow().clone();
        let h = health.borrow().clone();
        let since = |ms: i64| (ms > 0).then(|| crate::incidents::store::rfc3339_ms(ms));
        let mut rows: Vec<GpuRow> = s
            .gpus
            .iter()
            .map(|g| {
                let key = normalize_bus(&g.id.pci_bus_id);
                let gh = h.iter().find(|x| x.pci_bus_id == key);
                GpuRow {
                    index: Some(g.id.index),
                    name: g.info.name.clone().unwrap_or_default(),
                    uuid: g.id.uuid.clone(),
                    pci_bus_id: g.id.pci_bus_id.clone(),
                    status: if g.lost { "lost".into() } else { "ok".into() },
                    health: gh.map_or(crate::health::HealthState::Healthy, |x| x.state),
                    health_reason: gh.and_then(|x| x.reason.clone()),
                    health_since: gh.and_then(|x| since(x.since_ms)),
                    health_incident: gh.and_then(|x| x.incident),
                }
            })
            .collect();
        for x in h.iter() {
            if s.gpus
                .iter()
                .any(|g| normalize_bus(&g.id.pci_bus_id) == x.pci_bus_id)
            {
                continue;
            }
            rows.push(GpuRow {
                index: x.index,
                name: String::new(),
                uuid: x.uuid.clone().unwrap_or_default(),
                pci_bus_id: x.pci_bus_id.clone(),
                status: "unknown".into(),
                health: x.state,
                health_reason: x.reason.clone(),
                health_since: since(x.since_ms),
                health_incident: x.incident,
            });
        }
        rows
    })
}

/// Whether the incidents API and page may be served: always on a loopback address; elsewhere
/// only behind basic auth or when `http.expose_api` says so (excerpts can hold user data).
pub fn api_allowed(listen: std::net::SocketAddr, authenticated: bool, expose_api: bool) -> bool {
    listen.ip().is_loopback() || authenticated || expose_api
}

/// What handlers can read.
#[derive(Clone)]
pub struct HttpState {
    pub metrics: Metrics,
    /// A read-only connection of its own: readers never wait for the writer thread.
    pub store: Arc<Store>,
    pub readiness: Readiness,
    pub node: String,
    /// GPU rows for the page, from the latest snapshot.
    pub gpu_summary: Arc<dyn Fn() -> Vec<page::GpuRow> + Send + Sync>,
    /// Serve the incidents API and the page. False on a non-loopback address without basic
    /// auth unless `http.expose_api` is set: incident excerpts can contain user data.
    pub api_open: bool,
}

const API_CLOSED: &str = "The incidents API and page are not served on a non-loopback address without authentication: add basic_auth_users to the web config (--web.config.file), or set http.expose_api: true.";

fn closed() -> Response {
    (
        StatusCode::FORBIDDEN,
        Json(serde_json::json!({ "error": API_CLOSED })),
    )
        .into_response()
}

pub use page::GpuRow;

pub fn router(state: HttpState) -> Router {
    Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/api/v1/incidents", get(list))
        .route("/api/v1/gpus", get(gpus))
        .route("/api/v1/incidents/{id}", get(one))
        .route("/", get(index))
        .route("/incidents/{id}", get(incident_page))
        .with_state(state)
}

async fn metrics(State(s): State<HttpState>) -> Response {
    let body = s.metrics.render();
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    )
        .into_response()
}

/// `GET /api/v1/gpus`: every GPU with its NVML status and health. GPU identities and health
/// carry no user data, so this is served wherever `/metrics` is.
async fn gpus(State(s): State<HttpState>) -> Response {
    Json((s.gpu_summary)()).into_response()
}

async fn readyz(State(s): State<HttpState>) -> Response {
    if s.readiness.is_ready() {
        (StatusCode::OK, "ready\n").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "starting\n").into_response()
    }
}

#[derive(Debug, Deserialize)]
pub struct ListQuery {
    since: Option<String>,
    kind: Option<String>,
    limit: Option<usize>,
}

fn bad_request(msg: String) -> Response {
    (
        StatusCode::BAD_REQUEST,
        Json(serde_json::json!({ "error": msg })),
    )
        .into_response()
}

async fn list(State(s): State<HttpState>, Query(q): Query<ListQuery>) -> Response {
    if !s.api_open {
        return closed();
    }
    let since_ms = match q.since.as_deref() {
        None => None,
        Some(t) => {
            match time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339) {
                Ok(dt) => Some(i64::try_from(dt.unix_timestamp_nanos() / 1_000_000).unwrap_or(0)),
                Err(_) => {
                    return bad_request(format!(
                        "since: {t:?} is not an RFC 3339 time like 2026-12-02T15:00:00Z"
                    ))
                }
            }
        }
    };
    if let Some(k) = &q.kind {
        if crate::model::Kind::parse(k).is_none() {
            return bad_request(format!("kind: {k:?} is not one of device_assert, cuda_error, oom, nccl_error, numeric, xid, sxid"));
        }
    }
    let filter = ListFilter {
        since_ms,
        kind: q.kind,
        limit: q.limit.unwrap_or(100).min(1000),
    };
    let store = s.store.clone();
    match tokio::task::spawn_blocking(move || store.list(&filter)).await {
        Ok(Ok(v)) => Json(v).into_response(),
        Ok(Err(e)) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{e:#}")).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

async fn one(State(s): State<HttpState>, Path(id): Path<String>) -> Response {
    if !s.api_open {
        return closed();
    }
    let Ok(id) = id.parse::<i64>() else {
        return bad_request(format!("{id:?} is not an incident id"));
    };
    let store = s.store.clone();
    match tokio::task::spawn_blocking(move || store.get(id)).await {
        Ok(Ok(Some(r))) => Json(r).into_response(),
        Ok(Ok(None)) => (
            StatusCode::NOT_FOUND,
            Json(serde_json::json!({ "error": "no such incident" })),
        )
            .into_response(),
        Ok(Err(e)) => (StatusCode::INTERNAL_SERVER_ERROR, format!("{e:#}")).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

async fn index(State(s): State<HttpState>) -> Response {
    if !s.api_open {
        return closed();
    }
    let store = s.store.clone();
    let recent = tokio::task::spawn_blocking(move || {
        store.list(&ListFilter {
            limit: 50,
            ..Default::default()
        })
    })
    .await
    .ok()
    .and_then(Result::ok)
    .unwrap_or_default();
    html(
        StatusCode::OK,
        page::render(&s.node, &(s.gpu_summary)(), &recent),
    )
}

/// The pages run no scripts and load nothing: only their inline style is allowed, so text that
/// slipped through escaping still could not run (<https://www.w3.org/TR/CSP3/#directive-default-src>).
const PAGE_CSP: &str = "default-src 'none'; style-src 'unsafe-inline'";

/// Related incidents the detail page looks up and lists, at most.
const MAX_RELATED: usize = 50;

fn html(status: StatusCode, body: String) -> Response {
    (
        status,
        [(header::CONTENT_SECURITY_POLICY, PAGE_CSP)],
        Html(body),
    )
        .into_response()
}

async fn incident_page(State(s): State<HttpState>, Path(id): Path<String>) -> Response {
    if !s.api_open {
        return closed();
    }
    let Ok(id) = id.parse::<i64>() else {
        return html(
            StatusCode::BAD_REQUEST,
            detail::error_page("Bad request", &format!("{id:?} is not an incident id")),
        );
    };
    let store = s.store.clone();
    let found = tokio::task::spawn_blocking(move || {
        let Some(rec) = store.get(id)? else {
            return Ok(None);
        };
        let related: Vec<detail::Related> = rec
            .related
            .iter()
            .take(MAX_RELATED)
            .map(|&r| detail::Related::of(r, store.get(r).ok().flatten().as_ref()))
            .collect();
        Ok::<_, crate::incidents::store::StoreError>(Some((rec, related)))
    })
    .await;
    match found {
        Ok(Ok(Some((rec, related)))) => html(StatusCode::OK, detail::render(&rec, &related)),
        Ok(Ok(None)) => html(
            StatusCode::NOT_FOUND,
            detail::error_page("Not found", &format!("There is no incident {id}.")),
        ),
        Ok(Err(e)) => html(
            StatusCode::INTERNAL_SERVER_ERROR,
            detail::error_page("Store error", &format!("{e:#}")),
        ),
        Err(e) => html(
            StatusCode::INTERNAL_SERVER_ERROR,
            detail::error_page("Internal error", &e.to_string()),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::incidents::store::test_record;

    fn state(api_open: bool) -> (HttpState, i64) {
        let store = Store::in_memory().unwrap();
        let mut rec = test_record();
        rec.incident.python_frame = Some("/job/train.py:12".into());
        let (id, _) = store.put("k", 1, &rec).unwrap();
        rec.related = vec![id];
        let (id2, _) = store.put("k2", 2, &rec).unwrap();
        let st = HttpState {
            metrics: Metrics::new(),
            store: Arc::new(store),
            readiness: Readiness::new().0,
            node: "n".into(),
            gpu_summary: Arc::new(Vec::new),
            api_open,
        };
        (st, id2)
    }

    async fn body(r: Response) -> String {
        let b = axum::body::to_bytes(r.into_body(), 1 << 20).await.unwrap();
        String::from_utf8(b.to_vec()).unwrap()
    }

    fn csp(r: &Response) -> Option<&str> {
        r.headers()
            .get(header::CONTENT_SECURITY_POLICY)
            .and_then(|v| v.to_str().ok())
    }

    #[tokio::test]
    async fn detail_page_renders_with_a_script_free_policy() {
        let (st, id) = state(true);
        let r = incident_page(State(st), Path(id.to_string())).await;
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(csp(&r), Some(PAGE_CSP));
        let b = body(r).await;
        assert!(b.contains("<code>/job/train.py:12</code>"), "{b}");
        assert!(
            b.contains(&format!("<a href=\"/incidents/{}\">", id - 1)),
            "{b}"
        );
    }

    #[tokio::test]
    async fn unknown_and_malformed_ids_are_404_and_400_pages() {
        let (st, _) = state(true);
        let r = incident_page(State(st.clone()), Path("9999".into())).await;
        assert_eq!(r.status(), StatusCode::NOT_FOUND);
        assert_eq!(csp(&r), Some(PAGE_CSP));
        assert!(body(r).await.contains("no incident 9999"));
        let r = incident_page(State(st), Path("<b>x".into())).await;
        assert_eq!(r.status(), StatusCode::BAD_REQUEST);
        let b = body(r).await;
        assert!(b.contains("&lt;b&gt;x") && !b.contains("<b>x"), "{b}");
    }

    #[tokio::test]
    async fn a_closed_api_closes_the_detail_page() {
        let (st, id) = state(false);
        let r = incident_page(State(st), Path(id.to_string())).await;
        assert_eq!(r.status(), StatusCode::FORBIDDEN);
    }

    #[tokio::test]
    async fn the_index_links_rows_to_detail_pages_and_json() {
        let (st, id) = state(true);
        let r = index(State(st)).await;
        assert_eq!(csp(&r), Some(PAGE_CSP));
        let b = body(r).await;
        assert!(b.contains(&format!("<a href=\"/incidents/{id}\">")), "{b}");
        assert!(
            b.contains(&format!("href=\"/api/v1/incidents/{id}\">JSON</a>")),
            "{b}"
        );
    }
}
