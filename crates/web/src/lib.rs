//! HTTP security for assertwatch, the Prometheus exporter-toolkit way.
//!
//! One web config file in the toolkit's format (`--web.config.file`,
//! <https://github.com/prometheus/exporter-toolkit/blob/master/docs/web-configuration.md>):
//! TLS and client certificates (`tls_server_config`), response headers (`http_server_config`),
//! basic auth (`basic_auth_users`), plus one assertwatch extension, `auth_exempt_paths`, so that
//! a scraper without credentials can read `/metrics` while the API needs them.
//!
//! [`serve`] runs an axum router on a listener with all of that, re-reading the config file and
//! the certificate files when they change.

#![forbid(unsafe_code)]

mod auth;
mod config;
mod credentials;
mod reload;
mod tls;

pub use auth::{WebLayer, WebService, REALM};
pub use config::{
    load_web_config, parse_web_config, ClientAuthType, ConfigError, PemSource, TlsSettings,
    TlsVersion, WebConfig, DEFAULT_AUTH_EXEMPT_PATHS,
};
pub use tls::TlsError;

use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::{GracefulShutdown, Watcher};
use reload::{attempt, Active, Reloader, Shared};
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tower_layer::Layer as _;

/// Why serving could not start.
#[derive(Debug, thiserror::Error)]
pub enum WebError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("web config {path}")]
    Tls {
        path: PathBuf,
        /// Boxed: rustls's errors are large, and this one is rare.
        #[source]
        source: Box<TlsError>,
    },
    #[error("HTTP listener")]
    Listener(#[source] std::io::Error),
}

/// `error` and its causes, outermost first, joined by `": "` (what `anyhow` prints for `{:#}`),
/// for log lines: each error's own text names only its own context.
pub(crate) fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

/// Tuning for [`serve_with`]; [`serve`] uses the defaults.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// How often the web config and the files it names are stat'ed for changes.
    pub reload_interval: Duration,
    /// After shutdown is signalled, how long in-flight requests may take before their
    /// connections are closed.
    pub shutdown_grace: Duration,
    /// Longest a TLS handshake may take.
    pub handshake_timeout: Duration,
    /// Longest a client may take to send request headers.
    pub header_read_timeout: Duration,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            reload_interval: Duration::from_secs(3),
            shutdown_grace: Duration::from_secs(10),
            handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(30),
        }
    }
}

/// Reads a web config file and everything it names (certificates, key, client CA), as the
/// server would at start. For `check-config`-style validation.
pub fn validate_web_config_file(path: &Path) -> Result<WebConfig, WebError> {
    let (_, outcome) = attempt(path, &[]);
    outcome.map(|a| a.config)
}

/// Serves `app` on `listener` until `shutdown` completes.
///
/// - No `web_config`, or one without `tls_server_config`: plain HTTP.
/// - `tls_server_config`: TLS (rustls) on every path, client certificates per
///   `client_auth_type`.
/// - `basic_auth_users`: basic auth on every path except `auth_exempt_paths`.
///
/// The config file and the files it names are re-read when they change; an invalid new set
/// keeps the old one and logs why. An invalid file at start is an error.
///
/// On shutdown: stop accepting, let in-flight requests finish (at most
/// [`ServeOptions::shutdown_grace`]), then close what is left.
///
/// ```no_run
/// # async fn run() -> Result<(), assertwatch_web::WebError> {
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:9949").await.map_err(assertwatch_web::WebError::Listener)?;
/// let app = axum::Router::new().route("/metrics", axum::routing::get(|| async { "up 1\n" }));
/// let web_config = Some(std::path::PathBuf::from("/etc/assertwatch/web.yml"));
/// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
/// # drop(stop);
/// assertwatch_web::serve(listener, app, web_config, async move {
///     let _ = stopped.await;
/// })
/// .await
/// # }
/// ```
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    web_config: Option<PathBuf>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), WebError> {
    serve_with(listener, app, web_config, shutdown, ServeOptions::default()).await
}

/// [`serve`] with explicit [`ServeOptions`].
pub async fn serve_with(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    web_config: Option<PathBuf>,
    shutdown: impl Future<Output = ()> + Send + 'static,
    opts: ServeOptions,
) -> Result<(), WebError> {
    let address = listener.local_addr().map_err(WebError::Listener)?;
    let (shared, reloader) = match web_config {
        None => (Arc::new(Shared::new(Active::plain())), None),
        Some(path) => {
            let p = path.clone();
            let (sig, outcome) = tokio::task::spawn_blocking(move || attempt(&p, &[]))
                .await
                .map_err(|e| WebError::Listener(std::io::Error::other(e)))?;
            let shared = Arc::new(Shared::new(outcome?));
            let reloader = Arc::new(Reloader::new(path, shared.clone(), sig));
            (shared, Some(reloader))
        }
    };
    {
        let a = shared.current();
        tracing::info!(
            %address,
            tls = a.tls.is_some(),
            basic_auth_users = a.config.basic_auth_users.len(),
            "Serving HTTP."
        );
    }

    let reload_task = reloader.map(|r| {
        let every = opts.reload_interval.max(Duration::from_millis(100));
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let r = r.clone();
                if tokio::task::spawn_blocking(move || r.check())
                    .await
                    .is_err()
                {
                    tracing::error!("The web config reload check panicked; reloading stops.");
                    return;
                }
            }
        })
    });

    let service = WebLayer {
        shared: shared.clone(),
    }
    .layer(app);
    let graceful = GracefulShutdown::new();
    let mut conns = tokio::task::JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        // Reap finished connection tasks so the set stays small.
        while conns.try_join_next().is_some() {}
        let (stream, peer) = tokio::select! {
            biased;
            () = &mut shutdown => break,
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    // Per-connection errors (reset before accept) are normal; others (out of
                    // file descriptors) get a short pause instead of a busy loop.
                    tracing::warn!(error = %e, "Accepting a connection failed.");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let active = shared.current();
        let svc = service.clone();
        let watcher = graceful.watcher();
        let opts = opts.clone();
        conns.spawn(async move {
            let _ = stream.set_nodelay(true);
            match active.tls.clone() {
                None => serve_connection(TokioIo::new(stream), svc, peer, watcher, &opts).await,
                Some(cfg) => {
                    let acceptor = tokio_rustls::TlsAcceptor::from(cfg);
                    match tokio::time::timeout(opts.handshake_timeout, acceptor.accept(stream))
                        .await
                    {
                        Ok(Ok(tls)) => {
                            serve_connection(TokioIo::new(tls), svc, peer, watcher, &opts).await
                        }
                        Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed."),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out."),
                    }
                }
            }
        });
    }

    drop(listener);
    if let Some(t) = reload_task {
        t.abort();
    }
    if tokio::time::timeout(opts.shutdown_grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            grace = ?opts.shutdown_grace,
            "HTTP connections still open after the shutdown grace period; closing them."
        );
    }
    conns.abort_all();
    while conns.join_next().await.is_some() {}
    Ok(())
}

type App = WebService<axum::Router>;

async fn serve_connection<I>(
    io: TokioIo<I>,
    svc: App,
    peer: SocketAddr,
    watcher: Watcher,
    opts: &ServeOptions,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let hyper_svc = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
        // Handlers may read the peer address with axum's `ConnectInfo` extractor.
        req.extensions_mut()
            .insert(axum::extract::ConnectInfo(peer));
        let mut svc = svc.clone();
        tower_service::Service::call(&mut svc, req)
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(opts.header_read_timeout);
    let conn = builder.serve_connection(io, hyper_svc);
    if let Err(e) = watcher.watch(conn).await {
        tracing::debug!(%peer, error = %e, "HTTP connection ended with an error.");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io_error() -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::NotFound, "no such thing here")
    }

    #[test]
    fn each_cause_is_printed_once_under_alternate_format() {
        let err = WebError::Tls {
            path: PathBuf::from("web.yml"),
            source: Box::new(TlsError::Read {
                field: "cert_file",
                path: PathBuf::from("missing.crt"),
                source: io_error(),
            }),
        };
        let text = format!("{:#}", anyhow::Error::from(err));
        assert_eq!(
            text,
            "web config web.yml: tls_server_config.cert_file: cannot read missing.crt: \
             no such thing here"
        );
        assert_eq!(text.matches("no such thing here").count(), 1, "{text}");
        assert_eq!(text.matches("missing.crt").count(), 1, "{text}");
    }

    #[test]
    fn unreadable_config_names_the_os_error_once() {
        let err = validate_web_config_file(Path::new("/nonexistent/web.yml"))
            .err()
            .map(|e| format!("{:#}", anyhow::Error::from(e)))
            .unwrap_or_default();
        let os = io_error_text("/nonexistent/web.yml");
        assert_eq!(err.matches(os.as_str()).count(), 1, "{err}");
        assert_eq!(err.matches("/nonexistent/web.yml").count(), 1, "{err}");
    }

    #[test]
    fn listener_error_chain_matches_the_log_helper() {
        let err = WebError::Listener(io_error());
        assert_eq!(error_chain(&err), "HTTP listener: no such thing here");
        assert_eq!(
            error_chain(&err),
            format!("{:#}", anyhow::Error::from(WebError::Listener(io_error())))
        );
    }

    fn io_error_text(path: &str) -> String {
        std::fs::read(path)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    }
}
