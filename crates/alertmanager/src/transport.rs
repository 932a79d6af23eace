//! Delivery of one batch to one Alertmanager: the HTTP client (auth, TLS, timeout) and the
//! classification of failures into "retry later" and "retrying cannot help".
//!
//! The receiver loop talks to a [`Transport`] rather than to `reqwest` directly so that its
//! retry and re-send schedule can be tested under a paused tokio clock with a scripted fake;
//! a real socket and a paused clock do not mix (the clock jumps while the socket waits).

use std::future::Future;
use std::path::Path;

use reqwest::{Client, StatusCode};
use url::Url;

use crate::alert::WireAlert;
use crate::config::{AlertmanagerConfig, Auth, ConfigError};

/// Most bytes of an error response kept for the log line.
const MAX_ERROR_BODY_BYTES: usize = 512;

/// Why one push failed.
#[derive(Debug, thiserror::Error)]
pub enum PushError {
    /// No HTTP answer: connection refused, timeout, TLS failure ...
    #[error("POST {url} failed")]
    Request {
        /// The endpoint.
        url: String,
        /// What the HTTP library said.
        #[source]
        source: reqwest::Error,
    },
    /// The receiver answered with a non-success status.
    #[error("POST {url} answered {status}: {body}")]
    Status {
        /// The endpoint.
        url: String,
        /// The HTTP status code.
        status: u16,
        /// The start of the response body.
        body: String,
    },
}

impl PushError {
    /// Whether trying again later can succeed. Alertmanager answers `400` when an alert in the
    /// batch fails validation, after accepting the valid ones (`postAlertsHandler` in its
    /// `api/v2/api.go`), so a 4xx other than 408 (timeout) and 429 (rate limit) is final.
    pub fn is_retryable(&self) -> bool {
        match self {
            PushError::Request { .. } => true,
            PushError::Status { status, .. } => {
                *status == 408 || *status == 429 || !(400..500).contains(status)
            }
        }
    }
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

/// Sends one batch to one receiver.
pub(crate) trait Transport: Send + Sync + 'static {
    fn post(&self, alerts: Vec<WireAlert>) -> impl Future<Output = Result<(), PushError>> + Send;
}

/// [`Transport`] over HTTP(S) with `reqwest`.
pub(crate) struct HttpTransport {
    client: Client,
    url: Url,
    /// `url` without user name and password, for errors and logs.
    shown: String,
    auth: Auth,
}

impl HttpTransport {
    pub(crate) fn new(client: Client, url: Url, auth: Auth) -> Self {
        let mut shown = url.clone();
        // Both setters only fail for URLs that cannot have credentials, which then have none.
        let _ = shown.set_username("");
        let _ = shown.set_password(None);
        Self {
            client,
            url,
            shown: shown.to_string(),
            auth,
        }
    }
}

impl Transport for HttpTransport {
    async fn post(&self, alerts: Vec<WireAlert>) -> Result<(), PushError> {
        let mut request = self.client.post(self.url.clone()).json(&alerts);
        request = match &self.auth {
            Auth::None => request,
            Auth::Basic { username, password } => request.basic_auth(username, Some(password)),
            Auth::Bearer { token } => request.bearer_auth(token),
        };
        let url = &self.shown;
        // `without_url`: the error would otherwise repeat the URL, credentials included.
        let mut response = request.send().await.map_err(|source| PushError::Request {
            url: url.clone(),
            source: source.without_url(),
        })?;
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        Err(PushError::Status {
            url: url.clone(),
            status: status.as_u16(),
            body: bounded_body(&mut response, status).await,
        })
    }
}

/// Reads at most [`MAX_ERROR_BODY_BYTES`] of an error response, lossily as UTF-8.
async fn bounded_body(response: &mut reqwest::Response, status: StatusCode) -> String {
    let mut bytes = Vec::new();
    while bytes.len() < MAX_ERROR_BODY_BYTES {
        match response.chunk().await {
            Ok(Some(chunk)) => bytes.extend_from_slice(&chunk),
            Ok(None) | Err(_) => break,
        }
    }
    bytes.truncate(MAX_ERROR_BODY_BYTES);
    let text = String::from_utf8_lossy(&bytes).trim().to_string();
    if text.is_empty() {
        status.canonical_reason().unwrap_or("").to_string()
    } else {
        text
    }
}

/// Builds the shared HTTP client: timeout, TLS roots, client certificate.
pub(crate) fn build_client(config: &AlertmanagerConfig) -> Result<Client, ConfigError> {
    let mut builder = Client::builder()
        .timeout(config.timeout)
        .connect_timeout(config.timeout)
        .user_agent(concat!(
            "assertwatch-alertmanager/",
            env!("CARGO_PKG_VERSION")
        ));
    if let Some(tls) = &config.tls {
        if let Some(path) = &tls.ca_file {
            let pem = read("ca_file", path)?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|source| {
                ConfigError::BadTlsFile {
                    field: "ca_file",
                    path: path.clone(),
                    source,
                }
            })?;
            for cert in certs {
                builder = builder.add_root_certificate(cert);
            }
        }
        if let (Some(cert_path), Some(key_path)) = (&tls.cert_file, &tls.key_file) {
            // rustls wants certificate chain and key in one PEM buffer.
            let mut pem = read("cert_file", cert_path)?;
            pem.push(b'\n');
            pem.extend(read("key_file", key_path)?);
            let identity =
                reqwest::Identity::from_pem(&pem).map_err(|source| ConfigError::BadTlsFile {
                    field: "cert_file",
                    path: cert_path.clone(),
                    source,
                })?;
            builder = builder.identity(identity);
        }
        builder = builder.danger_accept_invalid_certs(tls.insecure_skip_verify);
    }
    builder
        .build()
        .map_err(|source| ConfigError::Client { source })
}

fn read(field: &'static str, path: &Path) -> Result<Vec<u8>, ConfigError> {
    std::fs::read(path).map_err(|source| ConfigError::ReadTlsFile {
        field,
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TlsConfig;

    fn status(status: u16) -> PushError {
        PushError::Status {
            url: "u".into(),
            status,
            body: String::new(),
        }
    }

    #[test]
    fn only_transient_statuses_are_retried() {
        for s in [408, 429, 500, 502, 503] {
            assert!(status(s).is_retryable(), "{s}");
        }
        for s in [400, 401, 403, 404, 413, 422] {
            assert!(!status(s).is_retryable(), "{s}");
        }
    }

    #[tokio::test]
    async fn credentials_in_the_url_stay_out_of_errors() {
        // A port that was free a moment ago: the connection is refused on 127.0.0.1.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = Url::parse(&format!(
            "http://user:s3cret@127.0.0.1:{port}/api/v2/alerts"
        ))
        .unwrap();
        let client = build_client(&AlertmanagerConfig::default()).unwrap();
        let err = HttpTransport::new(client, url, Auth::None)
            .post(Vec::new())
            .await
            .unwrap_err();
        assert!(err.is_retryable());
        let chain = error_chain(&err);
        assert!(
            chain.contains(&format!("http://127.0.0.1:{port}/api/v2/alerts")),
            "{chain}"
        );
        assert!(!chain.contains("s3cret"), "{chain}");
    }

    #[test]
    fn missing_tls_files_are_named() {
        let config = AlertmanagerConfig {
            tls: Some(TlsConfig {
                ca_file: Some("/nonexistent/ca.pem".into()),
                ..TlsConfig::default()
            }),
            ..AlertmanagerConfig::default()
        };
        let err = build_client(&config).unwrap_err();
        assert_eq!(
            err.to_string(),
            "cannot read alertmanager tls ca_file \"/nonexistent/ca.pem\""
        );
    }

    #[test]
    fn garbage_pem_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let cert = dir.path().join("c.pem");
        let key = dir.path().join("k.pem");
        std::fs::write(&cert, "not pem").unwrap();
        std::fs::write(&key, "not pem").unwrap();
        let config = AlertmanagerConfig {
            tls: Some(TlsConfig {
                cert_file: Some(cert),
                key_file: Some(key),
                ..TlsConfig::default()
            }),
            ..AlertmanagerConfig::default()
        };
        assert!(matches!(
            build_client(&config),
            Err(ConfigError::BadTlsFile { .. })
        ));
    }
}

/// A scripted [`Transport`] for tests: records each call with the (paused) tokio time and
/// answers from a script, then with a default outcome.
#[cfg(test)]
pub(crate) mod fake {
    use std::collections::VecDeque;
    use std::sync::{Arc, Mutex};

    use tokio::time::Instant;

    use super::{PushError, Transport};
    use crate::alert::WireAlert;

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(crate) enum Outcome {
        Accept,
        Fail(u16),
        Hang,
    }

    #[derive(Debug, Clone)]
    pub(crate) struct Call {
        pub at: Instant,
        pub alerts: Vec<WireAlert>,
    }

    #[derive(Debug)]
    struct Script {
        next: VecDeque<Outcome>,
        otherwise: Outcome,
        calls: Vec<Call>,
    }

    #[derive(Debug, Clone)]
    pub(crate) struct FakeTransport(Arc<Mutex<Script>>);

    impl FakeTransport {
        pub(crate) fn new(next: &[Outcome], otherwise: Outcome) -> Self {
            Self(Arc::new(Mutex::new(Script {
                next: next.iter().copied().collect(),
                otherwise,
                calls: Vec::new(),
            })))
        }

        pub(crate) fn accepting() -> Self {
            Self::new(&[], Outcome::Accept)
        }

        pub(crate) fn calls(&self) -> Vec<Call> {
            self.0.lock().unwrap().calls.clone()
        }
    }

    impl Transport for FakeTransport {
        async fn post(&self, alerts: Vec<WireAlert>) -> Result<(), PushError> {
            let outcome = {
                let mut script = self.0.lock().unwrap();
                script.calls.push(Call {
                    at: Instant::now(),
                    alerts,
                });
                let otherwise = script.otherwise;
                script.next.pop_front().unwrap_or(otherwise)
            };
            match outcome {
                Outcome::Accept => Ok(()),
                Outcome::Fail(status) => Err(PushError::Status {
                    url: "fake".into(),
                    status,
                    body: String::new(),
                }),
                Outcome::Hang => std::future::pending().await,
            }
        }
    }
}
