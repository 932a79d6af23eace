//! Notifier configuration: where alerts go, how often they are re-sent, when they lapse, how
//! retries back off, credentials and TLS; plus its validation into per-receiver endpoints.
//!
//! This is the validated shape the daemon builds from its own YAML; the daemon owns parsing.
//! Every check names the field and the offending value in its [`ConfigError`].

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use url::Url;

use crate::limits::DEFAULT_MAX_ANNOTATION_BYTES;

/// Default for [`AlertmanagerConfig::timeout`].
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default for [`AlertmanagerConfig::resend_interval`]. The Prometheus "Sending alerts" page
/// asks clients to re-send active alerts "on the order of 30 seconds to 3 minutes".
pub const DEFAULT_RESEND_INTERVAL: Duration = Duration::from_secs(60);
/// Default for [`AlertmanagerConfig::resolve_after`].
pub const DEFAULT_RESOLVE_AFTER: Duration = Duration::from_secs(300);
/// Default for [`AlertmanagerConfig::queue_capacity`].
pub const DEFAULT_QUEUE_CAPACITY: usize = 1000;
/// Default for [`AlertmanagerConfig::initial_backoff`].
pub const DEFAULT_INITIAL_BACKOFF: Duration = Duration::from_millis(500);
/// Default for [`AlertmanagerConfig::max_backoff`].
pub const DEFAULT_MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Default for [`AlertmanagerConfig::shutdown_timeout`].
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(5);

/// Everything the notifier needs. Start from [`Default`] and set `urls`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertmanagerConfig {
    /// Alertmanager base URLs, e.g. `http://127.0.0.1:9093` (a path prefix such as
    /// `http://host/alertmanager` is kept). Several URLs are the members of an HA cluster: every
    /// one receives every alert, each on its own schedule, so a member that is down delays no
    /// other. An empty list disables pushing (alerts are still tracked).
    pub urls: Vec<String>,
    /// Limit for one HTTP request, connection included.
    pub timeout: Duration,
    /// How often every active alert is sent again. Alertmanager resolves an alert whose
    /// `endsAt` has passed, so re-sending is what keeps it firing.
    pub resend_interval: Duration,
    /// The `endsAt` given to an active alert is `now + resolve_after` at each send, so if this
    /// process dies its alerts resolve by themselves that long after the last send. Must be
    /// longer than `resend_interval` (else alerts flap between sends).
    pub resolve_after: Duration,
    /// Most alerts held active at once. When full, alerts under a new key are dropped and counted
    /// (`reason="queue_full"`); updates to keys already held always apply.
    pub queue_capacity: usize,
    /// First delay before retrying a failed push; doubles per consecutive failure.
    pub initial_backoff: Duration,
    /// Ceiling for the retry delay.
    pub max_backoff: Duration,
    /// Cap for each annotation value (and the generator URL), in bytes.
    pub max_annotation_bytes: usize,
    /// How long [`crate::NotifierHandle::shutdown`] lets the final flush run.
    pub shutdown_timeout: Duration,
    /// Credentials sent with every push.
    pub auth: Auth,
    /// TLS settings for `https` URLs; `None` uses the bundled web PKI roots.
    pub tls: Option<TlsConfig>,
}

impl Default for AlertmanagerConfig {
    fn default() -> Self {
        Self {
            urls: Vec::new(),
            timeout: DEFAULT_TIMEOUT,
            resend_interval: DEFAULT_RESEND_INTERVAL,
            resolve_after: DEFAULT_RESOLVE_AFTER,
            queue_capacity: DEFAULT_QUEUE_CAPACITY,
            initial_backoff: DEFAULT_INITIAL_BACKOFF,
            max_backoff: DEFAULT_MAX_BACKOFF,
            max_annotation_bytes: DEFAULT_MAX_ANNOTATION_BYTES,
            shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
            auth: Auth::None,
            tls: None,
        }
    }
}

/// HTTP authentication for the push requests.
#[derive(Clone, PartialEq, Eq, Default)]
pub enum Auth {
    /// No `Authorization` header.
    #[default]
    None,
    /// `Authorization: Basic ...`.
    Basic {
        /// User name.
        username: String,
        /// Password.
        password: String,
    },
    /// `Authorization: Bearer ...`.
    Bearer {
        /// The token.
        token: String,
    },
}

// Secrets stay out of logs and panics: Debug names the scheme only.
impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Auth::None => f.write_str("None"),
            Auth::Basic { username, .. } => f
                .debug_struct("Basic")
                .field("username", username)
                .field("password", &"<redacted>")
                .finish(),
            Auth::Bearer { .. } => f
                .debug_struct("Bearer")
                .field("token", &"<redacted>")
                .finish(),
        }
    }
}

/// TLS settings for `https` Alertmanager URLs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TlsConfig {
    /// PEM file with the CA certificate(s) to trust in addition to the bundled roots.
    pub ca_file: Option<PathBuf>,
    /// PEM client certificate (with `key_file`) for mutual TLS.
    pub cert_file: Option<PathBuf>,
    /// PEM private key for `cert_file`.
    pub key_file: Option<PathBuf>,
    /// Accept any server certificate. For testing only: it removes the protection TLS gives.
    pub insecure_skip_verify: bool,
}

/// A configuration value the notifier cannot run with. Each variant names the field and value.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A URL that does not parse.
    #[error("alertmanager url {url:?} is not a valid URL")]
    InvalidUrl {
        /// The URL as configured.
        url: String,
        /// Why it does not parse.
        #[source]
        source: url::ParseError,
    },
    /// A URL that is not `http` or `https`, or has no host.
    #[error("alertmanager url {url:?} must be an http:// or https:// URL with a host")]
    UnsupportedUrl {
        /// The URL as configured.
        url: String,
    },
    /// A duration that must be positive is zero.
    #[error("alertmanager {field} must be greater than zero")]
    ZeroDuration {
        /// The field name.
        field: &'static str,
    },
    /// `resolve_after` does not exceed `resend_interval`.
    #[error(
        "alertmanager resolve_after ({resolve_after:?}) must be longer than resend_interval \
         ({resend_interval:?}), or alerts resolve between two sends"
    )]
    ResolveBeforeResend {
        /// The configured `resolve_after`.
        resolve_after: Duration,
        /// The configured `resend_interval`.
        resend_interval: Duration,
    },
    /// `queue_capacity` or `max_annotation_bytes` is zero.
    #[error("alertmanager {field} must be greater than zero")]
    ZeroSize {
        /// The field name.
        field: &'static str,
    },
    /// `max_backoff` below `initial_backoff`.
    #[error(
        "alertmanager max_backoff ({max_backoff:?}) must not be below initial_backoff \
         ({initial_backoff:?})"
    )]
    BackoffOrder {
        /// The configured `initial_backoff`.
        initial_backoff: Duration,
        /// The configured `max_backoff`.
        max_backoff: Duration,
    },
    /// Only one of `cert_file` and `key_file` is set.
    #[error("alertmanager tls cert_file and key_file must be set together")]
    HalfKeyPair,
    /// A TLS file cannot be read.
    #[error("cannot read alertmanager tls {field} {path:?}")]
    ReadTlsFile {
        /// The field name.
        field: &'static str,
        /// The path as configured.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A TLS file does not hold usable PEM material.
    #[error("alertmanager tls {field} {path:?} holds no usable PEM material")]
    BadTlsFile {
        /// The field name.
        field: &'static str,
        /// The path as configured.
        path: PathBuf,
        /// What the TLS library said.
        #[source]
        source: reqwest::Error,
    },
    /// The HTTP client could not be built from these settings.
    #[error("cannot build the alertmanager HTTP client")]
    Client {
        /// What the HTTP library said.
        #[source]
        source: reqwest::Error,
    },
    /// [`crate::Notifier::spawn`] was called outside a tokio runtime.
    #[error("the alertmanager notifier must be spawned from inside a tokio runtime")]
    NoRuntime,
}

/// One validated Alertmanager: the push endpoint and its bounded metric label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Endpoint {
    /// `<base>/api/v2/alerts`.
    pub url: Url,
    /// `host:port`, or `host:port/<index>` when two URLs share a host and port.
    pub label: String,
}

impl AlertmanagerConfig {
    /// Checks every field and returns the push endpoints, one per URL, in order.
    ///
    /// # Errors
    /// The first field found unusable, named in the [`ConfigError`].
    pub(crate) fn validate(&self) -> Result<Vec<Endpoint>, ConfigError> {
        for (field, value) in [
            ("timeout", self.timeout),
            ("resend_interval", self.resend_interval),
            ("resolve_after", self.resolve_after),
            ("initial_backoff", self.initial_backoff),
            ("max_backoff", self.max_backoff),
            ("shutdown_timeout", self.shutdown_timeout),
        ] {
            if value.is_zero() {
                return Err(ConfigError::ZeroDuration { field });
            }
        }
        if self.resolve_after <= self.resend_interval {
            return Err(ConfigError::ResolveBeforeResend {
                resolve_after: self.resolve_after,
                resend_interval: self.resend_interval,
            });
        }
        if self.max_backoff < self.initial_backoff {
            return Err(ConfigError::BackoffOrder {
                initial_backoff: self.initial_backoff,
                max_backoff: self.max_backoff,
            });
        }
        if self.queue_capacity == 0 {
            return Err(ConfigError::ZeroSize {
                field: "queue_capacity",
            });
        }
        if self.max_annotation_bytes == 0 {
            return Err(ConfigError::ZeroSize {
                field: "max_annotation_bytes",
            });
        }
        if let Some(tls) = &self.tls {
            if tls.cert_file.is_some() != tls.key_file.is_some() {
                return Err(ConfigError::HalfKeyPair);
            }
        }
        let endpoints = self
            .urls
            .iter()
            .map(|u| endpoint(u))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(disambiguate(endpoints))
    }
}

/// Parses one base URL and derives its push endpoint and `host:port` label.
fn endpoint(raw: &str) -> Result<Endpoint, ConfigError> {
    let mut base = Url::parse(raw.trim()).map_err(|source| ConfigError::InvalidUrl {
        url: raw.to_string(),
        source,
    })?;
    let host = match (base.scheme(), base.host_str()) {
        ("http" | "https", Some(host)) if !host.is_empty() => host.to_string(),
        _ => {
            return Err(ConfigError::UnsupportedUrl {
                url: raw.to_string(),
            })
        }
    };
    let port = base.port_or_known_default().unwrap_or(0);
    // `join` replaces the last path segment unless the path ends in '/', so add one: a base of
    // `http://h/prefix` must post to `http://h/prefix/api/v2/alerts`.
    if !base.path().ends_with('/') {
        let path = format!("{}/", base.path());
        base.set_path(&path);
    }
    base.set_query(None);
    base.set_fragment(None);
    let url = base
        .join("api/v2/alerts")
        .map_err(|source| ConfigError::InvalidUrl {
            url: raw.to_string(),
            source,
        })?;
    // `host_str` keeps the brackets of an IPv6 literal, so this reads `[::1]:9093` as usual.
    let label = format!("{host}:{port}");
    Ok(Endpoint { url, label })
}

/// Keeps labels unique when two URLs share `host:port` (different path prefixes).
fn disambiguate(mut endpoints: Vec<Endpoint>) -> Vec<Endpoint> {
    let labels: Vec<String> = endpoints.iter().map(|e| e.label.clone()).collect();
    for (i, e) in endpoints.iter_mut().enumerate() {
        if labels.iter().filter(|l| **l == labels[i]).count() > 1 {
            e.label = format!("{}/{i}", labels[i]);
        }
    }
    endpoints
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_urls(urls: &[&str]) -> AlertmanagerConfig {
        AlertmanagerConfig {
            urls: urls.iter().map(|u| u.to_string()).collect(),
            ..AlertmanagerConfig::default()
        }
    }

    #[test]
    fn defaults_match_the_documented_values() {
        let c = AlertmanagerConfig::default();
        assert_eq!(c.resend_interval, Duration::from_secs(60));
        assert_eq!(c.resolve_after, Duration::from_secs(300));
        assert_eq!(c.queue_capacity, 1000);
        assert_eq!(c.max_annotation_bytes, 4096);
        assert!(c.validate().unwrap().is_empty());
    }

    #[test]
    fn endpoints_append_the_v2_path_and_keep_prefixes() {
        let eps = with_urls(&[
            "http://127.0.0.1:9093",
            "https://am.example/alertmanager",
            "http://[::1]:9093/",
        ])
        .validate()
        .unwrap();
        assert_eq!(eps[0].url.as_str(), "http://127.0.0.1:9093/api/v2/alerts");
        assert_eq!(eps[0].label, "127.0.0.1:9093");
        assert_eq!(
            eps[1].url.as_str(),
            "https://am.example/alertmanager/api/v2/alerts"
        );
        assert_eq!(eps[1].label, "am.example:443");
        assert_eq!(eps[2].url.as_str(), "http://[::1]:9093/api/v2/alerts");
        assert_eq!(eps[2].label, "[::1]:9093");
    }

    #[test]
    fn shared_host_ports_get_an_index() {
        let eps = with_urls(&["http://h:1/a", "http://h:1/b", "http://h:2"])
            .validate()
            .unwrap();
        let labels: Vec<_> = eps.iter().map(|e| e.label.as_str()).collect();
        assert_eq!(labels, ["h:1/0", "h:1/1", "h:2"]);
    }

    #[test]
    fn bad_urls_are_named() {
        let err = with_urls(&["not a url"]).validate().unwrap_err();
        assert!(err.to_string().contains("\"not a url\""), "{err}");
        let err = with_urls(&["ftp://h/"]).validate().unwrap_err();
        assert!(matches!(err, ConfigError::UnsupportedUrl { .. }), "{err}");
    }

    #[test]
    fn inconsistent_timings_are_refused() {
        let c = AlertmanagerConfig {
            resolve_after: Duration::from_secs(30),
            ..AlertmanagerConfig::default()
        };
        assert!(matches!(
            c.validate(),
            Err(ConfigError::ResolveBeforeResend { .. })
        ));
        let c = AlertmanagerConfig {
            timeout: Duration::ZERO,
            ..AlertmanagerConfig::default()
        };
        let err = c.validate().unwrap_err();
        assert_eq!(
            err.to_string(),
            "alertmanager timeout must be greater than zero"
        );
        let c = AlertmanagerConfig {
            max_backoff: Duration::from_millis(1),
            ..AlertmanagerConfig::default()
        };
        assert!(matches!(
            c.validate(),
            Err(ConfigError::BackoffOrder { .. })
        ));
        let c = AlertmanagerConfig {
            queue_capacity: 0,
            ..AlertmanagerConfig::default()
        };
        assert!(matches!(
            c.validate(),
            Err(ConfigError::ZeroSize {
                field: "queue_capacity"
            })
        ));
    }

    #[test]
    fn half_a_key_pair_is_refused() {
        let c = AlertmanagerConfig {
            tls: Some(TlsConfig {
                cert_file: Some("c.pem".into()),
                ..TlsConfig::default()
            }),
            ..AlertmanagerConfig::default()
        };
        assert!(matches!(c.validate(), Err(ConfigError::HalfKeyPair)));
    }

    #[test]
    fn secrets_stay_out_of_debug_output() {
        let auth = Auth::Basic {
            username: "u".into(),
            password: "hunter2".into(),
        };
        assert!(!format!("{auth:?}").contains("hunter2"));
        let auth = Auth::Bearer {
            token: "tok3n".into(),
        };
        assert!(!format!("{auth:?}").contains("tok3n"));
    }
}
