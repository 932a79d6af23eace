//! End-to-end: the server on 127.0.0.1:0 with a tiny router, a reqwest (rustls) client, and
//! certificates made at test time with rcgen: a CA, a server certificate for 127.0.0.1 and
//! localhost, a client certificate from the CA, and one from another CA.

use assertwatch_web::{serve_with, ServeOptions, WebError};
use axum::routing::get;
use axum::Router;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, SerialNumber,
};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A certificate authority that signs server and client certificates.
struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Ca {
    fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().expect("CA key"))
            .expect("CA cert");
        Ca { issuer }
    }

    fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// (certificate PEM, key PEM, certificate DER).
    fn sign(&self, names: &[&str], cn: &str, serial: u64) -> (String, String, Vec<u8>) {
        let key = KeyPair::generate().expect("key");
        let mut params =
            CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .expect("params");
        params.distinguished_name.push(DnType::CommonName, cn);
        params.serial_number = Some(SerialNumber::from(serial));
        let cert = params.signed_by(&key, &self.issuer).expect("signed");
        (cert.pem(), key.serialize_pem(), cert.der().to_vec())
    }
}

/// Files for one test: server cert and key, the client CA, two client identities.
struct Pki {
    dir: tempfile::TempDir,
    ca: Ca,
    server_der: Vec<u8>,
}

impl Pki {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let ca = Ca::new("assertwatch test CA");
        let other = Ca::new("some other CA");
        let (cert, key, server_der) = ca.sign(&["127.0.0.1", "localhost"], "server one", 1);
        write(&dir.path().join("server.crt"), &cert);
        write(&dir.path().join("server.key"), &key);
        write(&dir.path().join("ca.crt"), &ca.pem());
        let (c, k, _) = ca.sign(&["prometheus"], "prometheus", 10);
        write(&dir.path().join("client.pem"), &format!("{c}{k}"));
        let (c, k, _) = other.sign(&["intruder"], "intruder", 11);
        write(&dir.path().join("other-client.pem"), &format!("{c}{k}"));
        Pki {
            dir,
            ca,
            server_der,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn read(&self, name: &str) -> Vec<u8> {
        std::fs::read(self.path(name)).expect("read test file")
    }

    /// Writes `web.yml` and returns its path.
    fn web_config(&self, text: &str) -> PathBuf {
        let p = self.path("web.yml");
        write(&p, text);
        p
    }
}

/// Writes through a temporary file and a rename, as a careful operator (or a Secret volume)
/// would, so the server never sees half a file.
/// The error and its causes, as the daemon prints them (`{:#}`).
fn chain(e: WebError) -> String {
    format!("{:#}", anyhow::Error::from(e))
}

fn write(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).expect("write");
    std::fs::rename(&tmp, path).expect("rename");
}

fn app() -> Router {
    Router::new()
        .route("/metrics", get(|| async { "assertwatch_up 1\n" }))
        .route("/api/v1/incidents", get(|| async { "[]" }))
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_millis(600)).await;
                "done"
            }),
        )
}

struct Server {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), WebError>>,
}

impl Server {
    async fn start(web_config: Option<PathBuf>) -> Server {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (tx, rx) = oneshot::channel::<()>();
        let opts = ServeOptions {
            reload_interval: Duration::from_millis(100),
            shutdown_grace: Duration::from_secs(5),
            ..ServeOptions::default()
        };
        let task = tokio::spawn(serve_with(
            listener,
            app(),
            web_config,
            async move {
                let _ = rx.await;
            },
            opts,
        ));
        Server {
            addr,
            stop: Some(tx),
            task,
        }
    }

    /// Starts with a config that must be refused; returns the error's text.
    async fn refused(web_config: PathBuf) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let run = serve_with(
            listener,
            app(),
            Some(web_config),
            std::future::pending(),
            ServeOptions::default(),
        );
        match tokio::time::timeout(Duration::from_secs(10), run).await {
            Ok(Err(e)) => chain(e),
            other => panic!("expected a refused config, got {other:?}"),
        }
    }

    fn url(&self, scheme: &str, path: &str) -> String {
        format!("{scheme}://127.0.0.1:{}{path}", self.addr.port())
    }

    async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        let r = tokio::time::timeout(Duration::from_secs(10), &mut self.task).await;
        assert!(
            matches!(r, Ok(Ok(Ok(())))),
            "server did not stop cleanly: {r:?}"
        );
    }
}

/// A client that trusts only the test CA, opens a fresh connection per request and, with
/// `identity`, presents that client certificate.
fn client(pki: Option<&Pki>, identity: Option<&str>) -> reqwest::Client {
    let mut b = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .tls_info(true)
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(5));
    if let Some(pki) = pki {
        b = b.add_root_certificate(
            reqwest::Certificate::from_pem(&pki.read("ca.crt")).expect("CA pem"),
        );
        if let Some(name) = identity {
            b = b.identity(reqwest::Identity::from_pem(&pki.read(name)).expect("identity pem"));
        }
    }
    b.build().expect("client")
}

fn peer_cert(resp: &reqwest::Response) -> Option<Vec<u8>> {
    resp.extensions()
        .get::<reqwest::tls::TlsInfo>()
        .and_then(|i| i.peer_certificate())
        .map(<[u8]>::to_vec)
}

fn hash(password: &str) -> String {
    bcrypt::hash(password, 4).expect("bcrypt")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_without_web_config() {
    let s = Server::start(None).await;
    let r = client(None, None)
        .get(s.url("http", "/api/v1/incidents"))
        .send()
        .await
        .expect("request");
    assert_eq!(r.status(), 200);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_accepts_the_ca_client_and_refuses_others() {
    let pki = Pki::new();
    let cfg = pki.web_config(
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n",
    );
    let s = Server::start(Some(cfg)).await;

    let good = client(Some(&pki), Some("client.pem"));
    for path in ["/metrics", "/api/v1/incidents"] {
        let r = good
            .get(s.url("https", path))
            .send()
            .await
            .expect("mTLS request");
        assert_eq!(r.status(), 200, "{path}");
        assert_eq!(peer_cert(&r).as_deref(), Some(pki.server_der.as_slice()));
    }

    let none = client(Some(&pki), None)
        .get(s.url("https", "/metrics"))
        .send()
        .await;
    assert!(none.is_err(), "no client certificate must fail: {none:?}");

    let wrong = client(Some(&pki), Some("other-client.pem"))
        .get(s.url("https", "/metrics"))
        .send()
        .await;
    assert!(
        wrong.is_err(),
        "a certificate from another CA must fail: {wrong:?}"
    );

    let plain = client(None, None)
        .get(s.url("http", "/metrics"))
        .send()
        .await;
    assert!(
        plain.map(|r| r.status() != 200).unwrap_or(true),
        "plain HTTP must not be served on a TLS listener"
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_if_given_lets_certless_clients_in_but_not_wrong_ones() {
    let pki = Pki::new();
    let cfg = pki.web_config(
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: ca.crt\n",
    );
    let s = Server::start(Some(cfg)).await;
    let r = client(Some(&pki), None)
        .get(s.url("https", "/metrics"))
        .send()
        .await
        .expect("no cert is fine");
    assert_eq!(r.status(), 200);
    let r = client(Some(&pki), Some("client.pem"))
        .get(s.url("https", "/metrics"))
        .send()
        .await
        .expect("good cert");
    assert_eq!(r.status(), 200);
    let wrong = client(Some(&pki), Some("other-client.pem"))
        .get(s.url("https", "/metrics"))
        .send()
        .await;
    assert!(wrong.is_err(), "{wrong:?}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn basic_auth_protects_the_api_and_leaves_metrics_open() {
    let pki = Pki::new();
    let cfg = pki.web_config(&format!(
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n\
         http_server_config:\n  headers:\n    X-Frame-Options: deny\n    X-Content-Type-Options: nosniff\n\
         basic_auth_users:\n  alice: '{}'\n",
        hash("wonderland")
    ));
    let s = Server::start(Some(cfg)).await;
    let c = client(Some(&pki), None);
    let api = s.url("https", "/api/v1/incidents");

    let r = c
        .get(&api)
        .basic_auth("alice", Some("wonderland"))
        .send()
        .await
        .expect("request");
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.headers().get("x-frame-options").map(|v| v.as_bytes()),
        Some(&b"deny"[..])
    );
    // Cached the second time; still right.
    let r = c
        .get(&api)
        .basic_auth("alice", Some("wonderland"))
        .send()
        .await
        .expect("request");
    assert_eq!(r.status(), 200);

    for (user, pass) in [
        ("alice", Some("rabbit")),
        ("bob", Some("wonderland")),
        ("alice", None),
    ] {
        let r = c
            .get(&api)
            .basic_auth(user, pass)
            .send()
            .await
            .expect("request");
        assert_eq!(r.status(), 401, "{user} {pass:?}");
        assert_eq!(
            r.headers()
                .get("www-authenticate")
                .and_then(|v| v.to_str().ok()),
            Some("Basic realm=\"assertwatch\"")
        );
    }
    let r = c.get(&api).send().await.expect("request");
    assert_eq!(r.status(), 401);
    let r = c.get(s.url("https", "/")).send().await.expect("request");
    assert_eq!(
        r.status(),
        401,
        "paths outside the exempt list need auth, unknown ones too"
    );

    let r = c
        .get(s.url("https", "/metrics"))
        .send()
        .await
        .expect("request");
    assert_eq!(r.status(), 200, "/metrics is exempt by default");
    assert_eq!(
        r.headers()
            .get("x-content-type-options")
            .map(|v| v.as_bytes()),
        Some(&b"nosniff"[..])
    );
    assert_eq!(r.text().await.expect("body"), "assertwatch_up 1\n");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_reload_without_restart() {
    let pki = Pki::new();
    let cfg =
        pki.web_config("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n");
    let s = Server::start(Some(cfg)).await;
    let c = client(Some(&pki), None);
    let url = s.url("https", "/metrics");
    let r = c.get(&url).send().await.expect("request");
    assert_eq!(peer_cert(&r).as_deref(), Some(pki.server_der.as_slice()));

    // A broken certificate file keeps the old certificate in service.
    write(
        &pki.path("server.crt"),
        "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n",
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    let r = c
        .get(&url)
        .send()
        .await
        .expect("still served with the old certificate");
    assert_eq!(peer_cert(&r).as_deref(), Some(pki.server_der.as_slice()));

    // A new certificate and key (new serial and CN) are picked up by new connections.
    let (cert, key, new_der) = pki.ca.sign(&["127.0.0.1", "localhost"], "server two", 2);
    write(&pki.path("server.key"), &key);
    write(&pki.path("server.crt"), &cert);
    let mut seen = None;
    for _ in 0..100 {
        let r = c.get(&url).send().await.expect("request during reload");
        seen = peer_cert(&r);
        if seen.as_deref() == Some(new_der.as_slice()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        seen.as_deref(),
        Some(new_der.as_slice()),
        "the new certificate was not served"
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn web_config_reload_changes_users_and_keeps_the_old_one_when_broken() {
    let pki = Pki::new();
    let alice = format!("basic_auth_users:\n  alice: '{}'\n", hash("a"));
    let cfg = pki.web_config(&alice);
    let s = Server::start(Some(cfg)).await;
    let c = client(None, None);
    let api = s.url("http", "/api/v1/incidents");
    let status = |user: &'static str, pass: &'static str| {
        let req = c.get(&api).basic_auth(user, Some(pass));
        async move { req.send().await.expect("request").status().as_u16() }
    };
    assert_eq!(status("alice", "a").await, 200);
    assert_eq!(status("bob", "b").await, 401);

    // Bob added, alice removed.
    pki.web_config(&format!("basic_auth_users:\n  bob: '{}'\n", hash("b")));
    let mut ok = false;
    for _ in 0..100 {
        if status("bob", "b").await == 200 {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(ok, "the added user was not picked up");
    assert_eq!(
        status("alice", "a").await,
        401,
        "a removed user must not pass, cache or not"
    );

    // An invalid file keeps bob.
    pki.web_config("basic_auth_users:\n  bob: not-a-hash\n");
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(status("bob", "b").await, 200);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_web_config_is_refused_naming_the_field() {
    let pki = Pki::new();
    let cfg = pki.web_config(
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_auth_type: Sometimes\n",
    );
    let err = Server::refused(cfg).await;
    assert!(err.contains("tls_server_config.client_auth_type"), "{err}");
    assert!(err.contains("web.yml"), "{err}");

    let cfg =
        pki.web_config("tls_server_config:\n  cert_file: missing.crt\n  key_file: server.key\n");
    let err = Server::refused(cfg).await;
    assert!(
        err.contains("tls_server_config.cert_file") && err.contains("missing.crt"),
        "{err}"
    );

    let cfg = pki.web_config("tls_server_config:\n  cert_file: server.crt\n  key_file: ca.crt\n");
    let err = Server::refused(cfg).await;
    assert!(err.contains("tls_server_config.key"), "{err}");

    let err = assertwatch_web::validate_web_config_file(&pki.path("nope.yml"))
        .err()
        .map(chain)
        .unwrap_or_default();
    assert!(err.contains("nope.yml"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_lets_in_flight_requests_finish() {
    let s = Server::start(None).await;
    let c = client(None, None);
    let req = tokio::spawn(c.get(s.url("http", "/slow")).send());
    tokio::time::sleep(Duration::from_millis(200)).await;
    s.stop().await;
    let r = req
        .await
        .expect("join")
        .expect("the in-flight request completes");
    assert_eq!(r.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn require_any_client_cert_wants_a_certificate_but_no_particular_ca() {
    let pki = Pki::new();
    let cfg = pki.web_config(
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_auth_type: RequireAnyClientCert\n",
    );
    let s = Server::start(Some(cfg)).await;
    let url = s.url("https", "/metrics");
    let r = client(Some(&pki), Some("other-client.pem"))
        .get(&url)
        .send()
        .await
        .expect("any cert");
    assert_eq!(r.status(), 200);
    let none = client(Some(&pki), None).get(&url).send().await;
    assert!(none.is_err(), "a certificate is required: {none:?}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn min_version_tls13_refuses_a_tls12_client() {
    let pki = Pki::new();
    let cfg = pki.web_config("tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  min_version: TLS13\n");
    let s = Server::start(Some(cfg)).await;
    let url = s.url("https", "/metrics");
    let r = client(Some(&pki), None)
        .get(&url)
        .send()
        .await
        .expect("TLS 1.3 client");
    assert_eq!(r.status(), 200);
    let old = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(&pki.read("ca.crt")).expect("CA pem"))
        .max_tls_version(reqwest::tls::Version::TLS_1_2)
        .timeout(Duration::from_secs(5))
        .build()
        .expect("client");
    let r = old.get(&url).send().await;
    assert!(r.is_err(), "a TLS 1.2 client must be refused: {r:?}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cipher_suites_narrow_tls12_only() {
    let pki = Pki::new();
    // The test certificate has an ECDSA key: with only RSA suites allowed for TLS 1.2, a TLS 1.2
    // handshake has nothing to agree on, while TLS 1.3 (not configurable, as in Go) still works.
    let cfg = pki.web_config(
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]\n  curve_preferences: [CurveP256, X25519]\n",
    );
    let s = Server::start(Some(cfg)).await;
    let url = s.url("https", "/metrics");
    let r = client(Some(&pki), None)
        .get(&url)
        .send()
        .await
        .expect("TLS 1.3 client");
    assert_eq!(r.status(), 200);
    let tls12 = reqwest::Client::builder()
        .use_rustls_tls()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(&pki.read("ca.crt")).expect("CA pem"))
        .max_tls_version(reqwest::tls::Version::TLS_1_2)
        .timeout(Duration::from_secs(5))
        .build()
        .expect("client");
    let r = tls12.get(&url).send().await;
    assert!(
        r.is_err(),
        "no allowed TLS 1.2 suite fits an ECDSA key: {r:?}"
    );
    s.stop().await;

    // Control: with an ECDSA suite allowed, the same TLS 1.2 client gets through.
    let cfg = pki.web_config(
        "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  cipher_suites: [TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256]\n",
    );
    let s = Server::start(Some(cfg)).await;
    let r = tls12
        .get(s.url("https", "/metrics"))
        .send()
        .await
        .expect("TLS 1.2 with an ECDSA suite");
    assert_eq!(r.status(), 200);
    s.stop().await;
}
