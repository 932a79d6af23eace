//! TLS settings against an HTTPS stand-in for Alertmanager on 127.0.0.1. The stand-in uses a
//! throwaway CA made by the test: `ca_file` must make its certificate trusted, the bundled roots
//! alone must not, `insecure_skip_verify` must accept anything, and `cert_file`/`key_file` must
//! satisfy a server that demands a client certificate.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use assertwatch_alertmanager::{Alert, AlertmanagerConfig, Metrics, Notifier, TlsConfig};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use tokio::time::sleep;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::rustls::server::WebPkiClientVerifier;
use tokio_rustls::rustls::{crypto, RootCertStore, ServerConfig};
use tokio_rustls::TlsAcceptor;

mod common;
use common::Recorder;

/// A CA, a server certificate for 127.0.0.1 and a client certificate, all as PEM files.
struct Pki {
    dir: tempfile::TempDir,
    ca_der: CertificateDer<'static>,
    server_der: CertificateDer<'static>,
    server_key: Vec<u8>,
}

impl Pki {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
        let server_key = KeyPair::generate().unwrap();
        let server = CertificateParams::new(vec!["127.0.0.1".to_string()])
            .unwrap()
            .signed_by(&server_key, &ca)
            .unwrap();
        let client_key = KeyPair::generate().unwrap();
        let client = CertificateParams::new(vec!["assertwatch-test-client".to_string()])
            .unwrap()
            .signed_by(&client_key, &ca)
            .unwrap();
        std::fs::write(dir.path().join("ca.pem"), ca.pem()).unwrap();
        std::fs::write(dir.path().join("client.pem"), client.pem()).unwrap();
        std::fs::write(dir.path().join("client.key"), client_key.serialize_pem()).unwrap();
        Self {
            ca_der: ca.der().clone(),
            server_der: server.der().clone(),
            server_key: server_key.serialize_der(),
            dir,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A TLS acceptor for the stand-in; with `require_client_cert`, only clients holding a
    /// certificate from the test CA get through.
    fn acceptor(&self, require_client_cert: bool) -> TlsAcceptor {
        let provider = Arc::new(crypto::ring::default_provider());
        let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .unwrap();
        let builder = if require_client_cert {
            let mut roots = RootCertStore::empty();
            roots.add(self.ca_der.clone()).unwrap();
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .unwrap();
            builder.with_client_cert_verifier(verifier)
        } else {
            builder.with_no_client_auth()
        };
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.server_key.clone()));
        let config = builder
            .with_single_cert(vec![self.server_der.clone()], key)
            .unwrap();
        TlsAcceptor::from(Arc::new(config))
    }
}

fn config(url: String, tls: TlsConfig) -> AlertmanagerConfig {
    AlertmanagerConfig {
        urls: vec![url],
        timeout: Duration::from_secs(2),
        initial_backoff: Duration::from_millis(100),
        max_backoff: Duration::from_millis(200),
        shutdown_timeout: Duration::from_secs(1),
        tls: Some(tls),
        ..AlertmanagerConfig::default()
    }
}

fn alert() -> Alert {
    Alert::new(SystemTime::now()).label("alertname", "AssertwatchTls")
}

/// Fires one alert at `addr` with `tls` and returns the stand-in's request count and the
/// notifier's failed-push count after the delivery (or its retries) had time to happen.
async fn push(stand_in: &Recorder, addr: std::net::SocketAddr, tls: TlsConfig) -> (usize, u64) {
    let metrics = Metrics::unregistered().unwrap();
    let (notifier, task) =
        Notifier::spawn(config(format!("https://{addr}"), tls), metrics.clone()).unwrap();
    notifier.fire("tls".into(), alert());
    let deadline = tokio::time::Instant::now() + common::WAIT;
    while stand_in.requests().is_empty()
        && metrics.failed_count(&addr.to_string()) < 2
        && tokio::time::Instant::now() < deadline
    {
        sleep(Duration::from_millis(50)).await;
    }
    notifier.shutdown();
    tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
    (
        stand_in.requests().len(),
        metrics.failed_count(&addr.to_string()),
    )
}

fn file(path: &Path) -> Option<PathBuf> {
    Some(path.to_path_buf())
}

#[tokio::test]
async fn the_configured_ca_is_trusted() {
    let pki = Pki::new();
    let stand_in = Recorder::default();
    let addr = stand_in.start_tls(pki.acceptor(false)).await;
    let tls = TlsConfig {
        ca_file: file(&pki.path("ca.pem")),
        ..TlsConfig::default()
    };
    let (requests, _) = push(&stand_in, addr, tls).await;
    assert!(requests >= 1);
    assert_eq!(stand_in.requests()[0].path, "/api/v2/alerts");
}

#[tokio::test]
async fn an_unknown_ca_is_refused() {
    let pki = Pki::new();
    let stand_in = Recorder::default();
    let addr = stand_in.start_tls(pki.acceptor(false)).await;
    let (requests, failed) = push(&stand_in, addr, TlsConfig::default()).await;
    assert_eq!(requests, 0);
    assert!(failed >= 2, "the push must fail and be retried");
    assert!(stand_in.handshake_failures() >= 1);
}

#[tokio::test]
async fn insecure_skip_verify_accepts_any_certificate() {
    let pki = Pki::new();
    let stand_in = Recorder::default();
    let addr = stand_in.start_tls(pki.acceptor(false)).await;
    let tls = TlsConfig {
        insecure_skip_verify: true,
        ..TlsConfig::default()
    };
    let (requests, _) = push(&stand_in, addr, tls).await;
    assert!(requests >= 1);
}

#[tokio::test]
async fn a_client_certificate_satisfies_mutual_tls() {
    let pki = Pki::new();
    let stand_in = Recorder::default();
    let addr = stand_in.start_tls(pki.acceptor(true)).await;
    let tls = TlsConfig {
        ca_file: file(&pki.path("ca.pem")),
        cert_file: file(&pki.path("client.pem")),
        key_file: file(&pki.path("client.key")),
        insecure_skip_verify: false,
    };
    let (requests, _) = push(&stand_in, addr, tls).await;
    assert!(requests >= 1);
}

#[tokio::test]
async fn mutual_tls_without_a_client_certificate_fails() {
    let pki = Pki::new();
    let stand_in = Recorder::default();
    let addr = stand_in.start_tls(pki.acceptor(true)).await;
    let tls = TlsConfig {
        ca_file: file(&pki.path("ca.pem")),
        ..TlsConfig::default()
    };
    let (requests, failed) = push(&stand_in, addr, tls).await;
    assert_eq!(requests, 0);
    assert!(failed >= 2);
}
