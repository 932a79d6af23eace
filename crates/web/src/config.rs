//! The web config file: the Prometheus exporter-toolkit format (`--web.config.file` of
//! node_exporter), parsed strictly and validated into a [`WebConfig`].
//!
//! Format reference: <https://github.com/prometheus/exporter-toolkit/blob/master/docs/web-configuration.md>.
//! Semantics kept from the toolkit's `web/tls_config.go` and `web/handler.go`:
//! - relative `cert_file`/`key_file`/`client_ca_file` are taken relative to the config file's
//!   directory (`TLSConfig.SetDirectory`);
//! - `client_auth_type` defaults to `NoClientCert`; `RequireClientCert` is kept as an alias of
//!   `RequireAnyClientCert`; a client CA without a client auth policy is an error;
//! - `min_version` defaults to `TLS12`, `max_version` to `TLS13`;
//! - only five response headers may be set, two of them with fixed value sets
//!   (`extraHTTPHeaders`);
//! - every `basic_auth_users` value must be a bcrypt hash (`validateUsers`).
//!
//! One assertwatch extension: `auth_exempt_paths`.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Paths served without basic auth unless the file says otherwise: what a Prometheus scrape and
/// a kubelet probe need.
pub const DEFAULT_AUTH_EXEMPT_PATHS: [&str; 3] = ["/metrics", "/healthz", "/readyz"];

/// Why a web config file was refused. Each variant names the file and, where there is one, the
/// field (as a dotted path such as `tls_server_config.client_auth_type`).
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("web config {path}: cannot read it")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("web config {path}: {field}: {message}")]
    Invalid {
        path: PathBuf,
        field: String,
        message: String,
    },
}

impl ConfigError {
    fn invalid(path: &Path, field: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError::Invalid {
            path: path.to_path_buf(),
            field: field.into(),
            message: message.into(),
        }
    }

    /// The field the error is about (`None` when the file could not be read).
    pub fn field(&self) -> Option<&str> {
        match self {
            ConfigError::Read { .. } => None,
            ConfigError::Invalid { field, .. } => Some(field),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The file as written.
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    tls_server_config: Option<RawTls>,
    #[serde(default)]
    http_server_config: Option<RawHttp>,
    #[serde(default)]
    basic_auth_users: Option<BTreeMap<String, String>>,
    /// Part of the toolkit format that this implementation refuses with a clear message rather
    /// than silently ignoring.
    #[serde(default)]
    rate_limit: Option<serde_yaml::Value>,
    /// assertwatch extension.
    #[serde(default)]
    auth_exempt_paths: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTls {
    cert: Option<String>,
    key: Option<String>,
    client_ca: Option<String>,
    cert_file: Option<String>,
    key_file: Option<String>,
    client_auth_type: Option<ClientAuthType>,
    client_ca_file: Option<String>,
    min_version: Option<TlsVersion>,
    max_version: Option<TlsVersion>,
    prefer_server_cipher_suites: Option<bool>,
    // Toolkit fields that are refused (see `validate`).
    client_allowed_sans: Option<serde_yaml::Value>,
    cipher_suites: Option<Vec<String>>,
    curve_preferences: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHttp {
    http2: Option<bool>,
    headers: Option<BTreeMap<String, String>>,
}

/// `client_auth_type`: the names of Go's `crypto/tls.ClientAuthType`, as the toolkit takes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
pub enum ClientAuthType {
    /// No client certificate is requested.
    #[default]
    NoClientCert,
    /// A certificate is requested but not required, and not verified against a CA (the client
    /// still proves it holds the key). Insecure as an access control, as in the toolkit.
    RequestClientCert,
    /// A certificate is required but not verified against a CA.
    #[serde(alias = "RequireClientCert")]
    RequireAnyClientCert,
    /// A certificate is optional; one that is sent must chain to `client_ca_file`.
    VerifyClientCertIfGiven,
    /// A certificate is required and must chain to `client_ca_file` (mutual TLS).
    RequireAndVerifyClientCert,
}

impl ClientAuthType {
    fn verifies(self) -> bool {
        matches!(
            self,
            ClientAuthType::VerifyClientCertIfGiven | ClientAuthType::RequireAndVerifyClientCert
        )
    }
}

/// `min_version` / `max_version`, spelled as in the toolkit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
pub enum TlsVersion {
    TLS10,
    TLS11,
    TLS12,
    TLS13,
}

// ---------------------------------------------------------------------------------------------
// The validated config.
// ---------------------------------------------------------------------------------------------

/// Where PEM text comes from: a file (re-read on change) or inline in the config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PemSource {
    File(PathBuf),
    Inline(String),
}

impl PemSource {
    /// The file, for change detection; `None` for inline text.
    pub fn file(&self) -> Option<&Path> {
        match self {
            PemSource::File(p) => Some(p),
            PemSource::Inline(_) => None,
        }
    }
}

/// `tls_server_config`, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    pub cert: PemSource,
    pub key: PemSource,
    pub client_auth_type: ClientAuthType,
    pub client_ca: Option<PemSource>,
    /// Lowest version offered; `TLS10`/`TLS11` are raised to `TLS12` (rustls speaks 1.2 and 1.3).
    pub min_version: TlsVersion,
    pub max_version: TlsVersion,
    /// Server's cipher suite order wins (rustls `ignore_client_order`). Default true.
    pub prefer_server_cipher_suites: bool,
    /// TLS 1.2 cipher suites, IANA/Go names, in preference order; empty: rustls' defaults.
    /// TLS 1.3 suites are not configurable (as in Go).
    pub cipher_suites: Vec<String>,
    /// Key exchange groups, Go names, in preference order; empty: rustls' defaults.
    pub curve_preferences: Vec<String>,
}

/// TLS 1.2 suites of rustls' `ring` provider, by the names Go's `tls.CipherSuites()` uses.
pub const TLS12_CIPHER_SUITES: [&str; 6] = [
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
];

/// TLS 1.3 suite names Go lists; accepted and ignored, as Go does.
const TLS13_CIPHER_SUITES: [&str; 3] = [
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
];

/// `curve_preferences` names (the toolkit's `curves` map) that the `ring` provider has.
/// `CurveP521` is not among them.
pub const CURVES: [&str; 3] = ["X25519", "CurveP256", "CurveP384"];

impl TlsSettings {
    /// Every file this TLS setup reads, for change detection.
    pub fn files(&self) -> Vec<&Path> {
        let mut v = Vec::new();
        v.extend(self.cert.file());
        v.extend(self.key.file());
        if let Some(ca) = &self.client_ca {
            v.extend(ca.file());
        }
        v
    }
}

/// A validated web config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebConfig {
    /// `None`: plain HTTP.
    pub tls: Option<TlsSettings>,
    /// `http_server_config.http2`; accepted for compatibility, HTTP/1.1 is served either way.
    pub http2: bool,
    /// `http_server_config.headers`: set on every response, exempt paths included.
    pub headers: BTreeMap<String, String>,
    /// `basic_auth_users`: user → bcrypt hash. Empty: no basic auth.
    pub basic_auth_users: BTreeMap<String, String>,
    /// assertwatch extension: exact request paths served without basic auth.
    pub auth_exempt_paths: Vec<String>,
}

impl Default for WebConfig {
    fn default() -> Self {
        WebConfig {
            tls: None,
            http2: true,
            headers: BTreeMap::new(),
            basic_auth_users: BTreeMap::new(),
            auth_exempt_paths: DEFAULT_AUTH_EXEMPT_PATHS
                .iter()
                .map(|s| s.to_string())
                .collect(),
        }
    }
}

impl WebConfig {
    /// Whether requests to `path` need basic auth.
    pub fn requires_auth(&self, path: &str) -> bool {
        !self.basic_auth_users.is_empty() && !self.auth_exempt_paths.iter().any(|p| p == path)
    }
}

/// Reads and validates a web config file. Certificates are not read here (see
/// [`crate::validate_web_config_file`] for the full check).
pub fn load_web_config(path: &Path) -> Result<WebConfig, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let base = path.parent().unwrap_or_else(|| Path::new(""));
    parse_web_config(&text, path, base)
}

/// Parses web config text. `origin` names the text in errors; relative file names are joined to
/// `base_dir`.
pub fn parse_web_config(
    text: &str,
    origin: &Path,
    base_dir: &Path,
) -> Result<WebConfig, ConfigError> {
    // An empty file (or one holding only comments) is a valid, empty config, as in the toolkit.
    let raw: RawConfig = if text.trim().is_empty() || is_only_comments(text) {
        RawConfig::default()
    } else {
        let de = serde_yaml::Deserializer::from_str(text);
        serde_path_to_error::deserialize(de).map_err(|e| {
            let field = e.path().to_string();
            // serde_yaml may already start its message with the path; say it once.
            let inner = e.inner().to_string();
            let message = inner
                .strip_prefix(&format!("{field}: "))
                .map(str::to_string)
                .unwrap_or(inner);
            let field = if field == "." {
                "(top level)".to_string()
            } else {
                field
            };
            ConfigError::invalid(origin, field, message)
        })?
    };
    validate(raw, origin, base_dir)
}

fn is_only_comments(text: &str) -> bool {
    text.lines().all(|l| {
        let l = l.trim();
        l.is_empty() || l.starts_with('#') || l == "---"
    })
}

/// Allowed response headers and, where the toolkit fixes them, their values
/// (`extraHTTPHeaders` in the toolkit's `web/handler.go`).
const ALLOWED_HEADERS: [(&str, &[&str]); 5] = [
    ("Strict-Transport-Security", &[]),
    ("X-Content-Type-Options", &["nosniff"]),
    ("X-Frame-Options", &["deny", "sameorigin"]),
    ("X-XSS-Protection", &[]),
    ("Content-Security-Policy", &[]),
];

fn validate(raw: RawConfig, origin: &Path, base: &Path) -> Result<WebConfig, ConfigError> {
    let bad = |field: &str, msg: String| ConfigError::invalid(origin, field, msg);
    let mut cfg = WebConfig::default();

    if raw.rate_limit.is_some() {
        return Err(bad(
            "rate_limit",
            "is part of the exporter-toolkit format but not supported by assertwatch; remove it"
                .into(),
        ));
    }

    if let Some(t) = raw.tls_server_config {
        cfg.tls = validate_tls(t, origin, base)?;
    }

    if let Some(h) = raw.http_server_config {
        cfg.http2 = h.http2.unwrap_or(true);
        for (name, value) in h.headers.unwrap_or_default() {
            let field = format!("http_server_config.headers.{name}");
            let Some((_, allowed)) = ALLOWED_HEADERS.iter().find(|(n, _)| *n == name) else {
                let names: Vec<&str> = ALLOWED_HEADERS.iter().map(|(n, _)| *n).collect();
                return Err(bad(
                    &field,
                    format!(
                        "header {name:?} can not be configured; allowed: {}",
                        names.join(", ")
                    ),
                ));
            };
            if !allowed.is_empty() && !allowed.contains(&value.as_str()) {
                return Err(bad(&field, format!("{value:?} is not one of {allowed:?}")));
            }
            if axum::http::HeaderValue::from_str(&value).is_err() {
                return Err(bad(
                    &field,
                    format!("{value:?} is not a valid header value"),
                ));
            }
            // Blank values mean "unset" in the toolkit.
            if !value.is_empty() {
                cfg.headers.insert(name, value);
            }
        }
    }

    for (user, hash) in raw.basic_auth_users.unwrap_or_default() {
        let field = format!("basic_auth_users.{user}");
        if user.contains(':') {
            return Err(bad(
                &field,
                "a user name cannot contain ':' (basic auth splits on it)".into(),
            ));
        }
        match hash.parse::<bcrypt::HashParts>() {
            Ok(parts) if (4..=31).contains(&parts.get_cost()) => {}
            Ok(parts) => return Err(bad(&field, format!("bcrypt cost {} is outside 4..=31", parts.get_cost()))),
            Err(e) => {
                return Err(bad(
                    &field,
                    format!("is not a bcrypt hash ({e}); create one with `htpasswd -nBC 10 \"\" | tr -d ':\\n'`"),
                ))
            }
        }
        cfg.basic_auth_users.insert(user, hash);
    }

    if let Some(paths) = raw.auth_exempt_paths {
        for (i, p) in paths.iter().enumerate() {
            if !p.starts_with('/') {
                return Err(bad(
                    &format!("auth_exempt_paths[{i}]"),
                    format!("{p:?} must start with '/'"),
                ));
            }
        }
        cfg.auth_exempt_paths = paths;
    }
    Ok(cfg)
}

fn validate_tls(t: RawTls, origin: &Path, base: &Path) -> Result<Option<TlsSettings>, ConfigError> {
    let bad = |field: &str, msg: &str| {
        ConfigError::invalid(origin, format!("tls_server_config.{field}"), msg)
    };
    if t.client_allowed_sans.is_some() {
        return Err(bad(
            "client_allowed_sans",
            "is part of the exporter-toolkit format but not supported by assertwatch; \
             use a client CA that issues only to allowed clients",
        ));
    }
    let mut cipher_suites = Vec::new();
    for (i, name) in t.cipher_suites.unwrap_or_default().into_iter().enumerate() {
        if TLS13_CIPHER_SUITES.contains(&name.as_str()) {
            // Go ignores cipher_suites for TLS 1.3, and so does the toolkit: accept, skip.
            continue;
        }
        if !TLS12_CIPHER_SUITES.contains(&name.as_str()) {
            return Err(bad(
                &format!("cipher_suites[{i}]"),
                &format!(
                    "{name:?} is not a TLS 1.2 cipher suite rustls offers; use one of {}",
                    TLS12_CIPHER_SUITES.join(", ")
                ),
            ));
        }
        cipher_suites.push(name);
    }
    let mut curve_preferences = Vec::new();
    for (i, name) in t
        .curve_preferences
        .unwrap_or_default()
        .into_iter()
        .enumerate()
    {
        if !CURVES.contains(&name.as_str()) {
            return Err(bad(
                &format!("curve_preferences[{i}]"),
                &format!(
                    "{name:?} is not supported; use one of {}",
                    CURVES.join(", ")
                ),
            ));
        }
        curve_preferences.push(name);
    }
    // The toolkit's `TLSConfig.IsEnabled`: any TLS field set means TLS is wanted.
    let enabled = t.cert.is_some()
        || t.key.is_some()
        || t.client_ca.is_some()
        || t.cert_file.is_some()
        || t.key_file.is_some()
        || t.client_ca_file.is_some()
        || t.client_auth_type.is_some();
    if !enabled {
        return Ok(None);
    }
    let source =
        |inline: Option<String>, file: Option<String>, iname: &str, fname: &str, required: bool| {
            match (inline, file) {
                (Some(_), Some(_)) => Err(bad(
                    fname,
                    &format!("set either {iname} or {fname}, not both"),
                )),
                (Some(text), None) => Ok(Some(PemSource::Inline(text))),
                (None, Some(f)) if f.is_empty() => Err(bad(fname, "is empty")),
                (None, Some(f)) => Ok(Some(PemSource::File(join_dir(base, &f)))),
                (None, None) if required => Err(bad(
                    fname,
                    &format!("missing: TLS needs one of {iname} or {fname}"),
                )),
                (None, None) => Ok(None),
            }
        };
    let cert = source(t.cert, t.cert_file, "cert", "cert_file", true)?;
    let key = source(t.key, t.key_file, "key", "key_file", true)?;
    let client_ca = source(
        t.client_ca,
        t.client_ca_file,
        "client_ca",
        "client_ca_file",
        false,
    )?;
    let (Some(cert), Some(key)) = (cert, key) else {
        return Err(bad("cert_file", "missing"));
    };
    let client_auth_type = t.client_auth_type.unwrap_or_default();
    if client_ca.is_some() && client_auth_type == ClientAuthType::NoClientCert {
        return Err(bad(
            "client_auth_type",
            "client CAs have been configured without a client auth policy; set client_auth_type (RequireAndVerifyClientCert for mutual TLS)",
        ));
    }
    if client_auth_type.verifies() && client_ca.is_none() {
        return Err(bad(
            "client_ca_file",
            "missing: a client auth type that verifies certificates needs client_ca_file",
        ));
    }
    let min_version = t.min_version.unwrap_or(TlsVersion::TLS12);
    let max_version = t.max_version.unwrap_or(TlsVersion::TLS13);
    if max_version < TlsVersion::TLS12 {
        return Err(bad(
            "max_version",
            "TLS10 and TLS11 are not supported (rustls speaks TLS12 and TLS13)",
        ));
    }
    if min_version > max_version {
        return Err(bad("min_version", "is above max_version"));
    }
    Ok(Some(TlsSettings {
        cert,
        key,
        client_auth_type,
        client_ca,
        min_version: min_version.max(TlsVersion::TLS12),
        max_version,
        prefer_server_cipher_suites: t.prefer_server_cipher_suites.unwrap_or(true),
        cipher_suites,
        curve_preferences,
    }))
}

fn join_dir(base: &Path, file: &str) -> PathBuf {
    let p = Path::new(file);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash() -> String {
        // Cost 4: the lowest bcrypt allows, fast enough for unit tests.
        bcrypt::hash("secret", 4).expect("bcrypt hashes")
    }

    fn parse(text: &str) -> Result<WebConfig, ConfigError> {
        parse_web_config(text, Path::new("web.yml"), Path::new("/etc/aw"))
    }

    fn field_of(text: &str) -> String {
        match parse(text) {
            Err(e) => e.field().unwrap_or("").to_string(),
            Ok(c) => panic!("expected an error, got {c:?}"),
        }
    }

    #[test]
    fn empty_file_is_plain_http_without_auth() {
        for text in ["", "# nothing\n", "---\n"] {
            let c = parse(text).expect("empty config parses");
            assert_eq!(c, WebConfig::default());
            assert!(!c.requires_auth("/api/v1/incidents"));
        }
    }

    #[test]
    fn full_toolkit_file_parses() {
        let text = format!(
            "tls_server_config:\n  cert_file: server.crt\n  key_file: /abs/server.key\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n  min_version: TLS13\n\
             http_server_config:\n  http2: false\n  headers:\n    X-Frame-Options: deny\n    Content-Security-Policy: \"default-src 'self'\"\n\
             basic_auth_users:\n  alice: '{}'\n",
            hash()
        );
        let c = parse(&text).expect("parses");
        let t = c.tls.as_ref().expect("tls");
        assert_eq!(t.cert, PemSource::File(PathBuf::from("/etc/aw/server.crt")));
        assert_eq!(t.key, PemSource::File(PathBuf::from("/abs/server.key")));
        assert_eq!(
            t.client_ca,
            Some(PemSource::File(PathBuf::from("/etc/aw/ca.crt")))
        );
        assert_eq!(
            t.client_auth_type,
            ClientAuthType::RequireAndVerifyClientCert
        );
        assert_eq!(
            (t.min_version, t.max_version),
            (TlsVersion::TLS13, TlsVersion::TLS13)
        );
        assert!(!c.http2);
        assert_eq!(
            c.headers.get("X-Frame-Options").map(String::as_str),
            Some("deny")
        );
        assert!(c.requires_auth("/api/v1/incidents"));
        assert!(c.requires_auth("/"));
        assert!(!c.requires_auth("/metrics"));
        assert!(!c.requires_auth("/healthz"));
    }

    #[test]
    fn inline_pem_and_legacy_alias() {
        let c = parse("tls_server_config:\n  cert: \"-----BEGIN CERTIFICATE-----\"\n  key: k\n  client_auth_type: RequireClientCert\n")
            .expect("parses");
        let t = c.tls.expect("tls");
        assert!(matches!(t.cert, PemSource::Inline(_)));
        assert_eq!(t.client_auth_type, ClientAuthType::RequireAnyClientCert);
    }

    #[test]
    fn exempt_paths_can_be_replaced() {
        let text = format!(
            "basic_auth_users:\n  a: '{}'\nauth_exempt_paths: [/healthz]\n",
            hash()
        );
        let c = parse(&text).expect("parses");
        assert!(c.requires_auth("/metrics"));
        assert!(!c.requires_auth("/healthz"));
        assert_eq!(
            field_of("auth_exempt_paths: [metrics]\n"),
            "auth_exempt_paths[0]"
        );
    }

    #[test]
    fn errors_name_the_field() {
        assert_eq!(field_of("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: Sometimes\n"), "tls_server_config.client_auth_type");
        assert_eq!(
            field_of("tls_server_config:\n  cert_fle: a\n"),
            "tls_server_config.cert_fle"
        );
        assert_eq!(
            field_of("tls_server_config:\n  cert_file: a\n"),
            "tls_server_config.key_file"
        );
        assert_eq!(
            field_of("tls_server_config:\n  key_file: a\n"),
            "tls_server_config.cert_file"
        );
        assert_eq!(
            field_of("tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS14\n"),
            "tls_server_config.min_version"
        );
        assert_eq!(
            field_of("tls_server_config:\n  cert_file: a\n  key_file: b\n  max_version: TLS11\n"),
            "tls_server_config.max_version"
        );
        assert_eq!(
            field_of("tls_server_config:\n  cert_file: a\n  key_file: b\n  min_version: TLS13\n  max_version: TLS12\n"),
            "tls_server_config.min_version"
        );
        assert_eq!(
            field_of("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_ca_file: c\n"),
            "tls_server_config.client_auth_type"
        );
        assert_eq!(
            field_of("tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: RequireAndVerifyClientCert\n"),
            "tls_server_config.client_ca_file"
        );
        assert_eq!(
            field_of("tls_server_config:\n  cert_file: a\n  cert: b\n  key_file: c\n"),
            "tls_server_config.cert_file"
        );
        assert_eq!(
            field_of("tls_server_config:\n  cert_file: a\n  key_file: b\n  cipher_suites: [x]\n"),
            "tls_server_config.cipher_suites[0]"
        );
        assert_eq!(
            field_of("tls_server_config:\n  cert_file: a\n  key_file: b\n  curve_preferences: [X25519, CurveP521]\n"),
            "tls_server_config.curve_preferences[1]"
        );
        assert_eq!(
            field_of(
                "tls_server_config:\n  cert_file: a\n  key_file: b\n  client_allowed_sans: [x]\n"
            ),
            "tls_server_config.client_allowed_sans"
        );
        assert_eq!(
            field_of("basic_auth_users:\n  alice: plaintext\n"),
            "basic_auth_users.alice"
        );
        assert_eq!(
            field_of("http_server_config:\n  headers:\n    X-Powered-By: me\n"),
            "http_server_config.headers.X-Powered-By"
        );
        assert_eq!(
            field_of("http_server_config:\n  headers:\n    X-Frame-Options: allow\n"),
            "http_server_config.headers.X-Frame-Options"
        );
        assert_eq!(field_of("rate_limit:\n  burst: 1\n"), "rate_limit");
        assert_eq!(field_of("listen: 1\n"), "listen");
        assert_eq!(field_of("- 1\n"), "(top level)");
    }

    #[test]
    fn error_message_names_file_field_and_line() {
        let e = parse(
            "tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: Sometimes\n",
        )
        .err()
        .map(|e| e.to_string());
        let msg = e.unwrap_or_default();
        assert!(msg.contains("web.yml"), "{msg}");
        assert!(msg.contains("tls_server_config.client_auth_type"), "{msg}");
        assert!(msg.contains("line 4"), "{msg}");
        assert_eq!(msg.matches("client_auth_type").count(), 1, "{msg}");
    }

    #[test]
    fn cipher_suites_and_curves_keep_their_order() {
        let c = parse(
            "tls_server_config:\n  cert_file: a\n  key_file: b\n  cipher_suites: [TLS_AES_128_GCM_SHA256, TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256]\n  curve_preferences: [CurveP384, X25519]\n",
        )
        .expect("parses");
        let t = c.tls.expect("tls");
        assert_eq!(
            t.cipher_suites,
            [
                "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
                "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"
            ]
        );
        assert_eq!(t.curve_preferences, ["CurveP384", "X25519"]);
    }

    #[test]
    fn blank_header_values_are_unset() {
        let c = parse("http_server_config:\n  headers:\n    Strict-Transport-Security: ''\n")
            .expect("parses");
        assert!(c.headers.is_empty());
    }
}
