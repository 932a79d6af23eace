//! The HTTP listener: `/metrics`, `/healthz`, `/readyz`, the incidents API and the page.
//!
//! Handlers only read: the metrics registry, the store (through a read-only connection of
//! their own, on blocking threads) and the readiness latches. Nothing here waits on NVML, on the
//! incident task or on the store's writer, so a scrape answers even while the disk stalls.

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

/// The page's GPU rows from the latest GPU snapshot.
pub fn gpu_rows(
    snapshot: tokio::sync::watch::Receiver<Arc<assertwatch_gpu::GpuSnapshot>>,
) -> Arc<dyn Fn() -> Vec<GpuRow> + Send + Sync> {
    Arc::new(move || {
        let s = snapshot.borrow().clone();
        s.gpus
            .iter()
            .map(|g| GpuRow {
                index: g.id.index,
                name: g.info.name.clone().unwrap_or_default(),
                uuid: g.id.uuid.clone(),
                status: if g.lost { "lost".into() } else { "ok".into() },
            })
            .collect()
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
        .route("/api/v1/incidents/{id}", get(one))
        .route("/", get(index))
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
            return bad_request(format!("kind: {k:?} is not one of device_assert, cuda_error, oom, nccl_error, numeric, xid"));
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
    Html(page::render(&s.node, &(s.gpu_summary)(), &recent)).into_response()
}
