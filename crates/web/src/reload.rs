//! The active web config and its reload: the config file and every certificate, key and CA file
//! it names are stat'ed every few seconds; when one changed, all are read again and, if the whole
//! set is valid, replace the active one. A broken new set keeps the old one and is logged once.
//!
//! The toolkit re-reads the file on every request and every TLS handshake
//! (`GetConfigForClient` in `web/tls_config.go`); a periodic stat gives the same result without
//! file reads on the request path. Stamps follow symlinks, so the atomic `..data` symlink swap
//! of a Kubernetes Secret volume is seen as a change.

use crate::config::{load_web_config, WebConfig};
use crate::credentials::{CredentialCache, Users, BCRYPT_CONCURRENCY};
use crate::tls::build_server_config;
use crate::WebError;
use axum::http::{HeaderName, HeaderValue};
use rustls::ServerConfig;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::SystemTime;

/// One loaded, fully checked web config.
pub(crate) struct Active {
    pub config: WebConfig,
    pub tls: Option<Arc<ServerConfig>>,
    pub headers: Vec<(HeaderName, HeaderValue)>,
    pub users: Users,
}

impl Active {
    /// No web config: plain HTTP, no auth, no extra headers.
    pub(crate) fn plain() -> Self {
        Active {
            config: WebConfig::default(),
            tls: None,
            headers: Vec::new(),
            users: Users {
                hashes: Vec::new(),
                dummy_hash: String::new(),
            },
        }
    }

    fn from_config(config: WebConfig, origin: &Path) -> Result<Self, WebError> {
        let tls = match &config.tls {
            None => None,
            Some(t) => Some(build_server_config(t).map_err(|source| WebError::Tls {
                path: origin.to_path_buf(),
                source: Box::new(source),
            })?),
        };
        let mut headers = Vec::new();
        for (name, value) in &config.headers {
            // Both were checked when the config was validated; skip rather than panic.
            if let (Ok(n), Ok(v)) = (
                HeaderName::try_from(name.as_str()),
                HeaderValue::from_str(value),
            ) {
                headers.push((n, v));
            }
        }
        let users = if config.basic_auth_users.is_empty() {
            Active::plain().users
        } else {
            Users::new(&config.basic_auth_users)
        };
        Ok(Active {
            config,
            tls,
            headers,
            users,
        })
    }
}

/// What request handling and the accept loop read: the active config, the credential cache.
pub(crate) struct Shared {
    active: RwLock<Arc<Active>>,
    pub cache: CredentialCache,
    pub bcrypt_slots: tokio::sync::Semaphore,
}

impl Shared {
    pub(crate) fn new(active: Active) -> Self {
        Shared {
            active: RwLock::new(Arc::new(active)),
            cache: CredentialCache::new(),
            bcrypt_slots: tokio::sync::Semaphore::new(BCRYPT_CONCURRENCY),
        }
    }

    pub(crate) fn current(&self) -> Arc<Active> {
        self.active
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn replace(&self, a: Active) {
        *self.active.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(a);
    }
}

/// What a file looked like when last seen: enough to notice a rewrite or a replacement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
    #[cfg(unix)]
    ino: u64,
    #[cfg(unix)]
    dev: u64,
}

pub(crate) type Signature = Vec<(PathBuf, Option<Stamp>)>;

fn stamp(path: &Path) -> Option<Stamp> {
    let m = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    use std::os::unix::fs::MetadataExt;
    Some(Stamp {
        modified: m.modified().ok(),
        len: m.len(),
        #[cfg(unix)]
        ino: m.ino(),
        #[cfg(unix)]
        dev: m.dev(),
    })
}

fn signature(paths: &[PathBuf]) -> Signature {
    paths.iter().map(|p| (p.clone(), stamp(p))).collect()
}

/// The config file plus the files it names.
fn watched_files(path: &Path, config: Option<&WebConfig>) -> Vec<PathBuf> {
    let mut v = vec![path.to_path_buf()];
    if let Some(t) = config.and_then(|c| c.tls.as_ref()) {
        v.extend(t.files().into_iter().map(Path::to_path_buf));
    }
    v
}

/// Loads the config at `path` and everything it names. Returns the signature taken *before* the
/// files were read (a change during the read shows up at the next check) and the outcome.
/// `previous` is the file list to stamp if the config itself does not parse.
pub(crate) fn attempt(path: &Path, previous: &[PathBuf]) -> (Signature, Result<Active, WebError>) {
    // Stamp the config file before reading it.
    let config_stamp = stamp(path);
    match load_web_config(path) {
        Err(e) => {
            let mut files: Vec<PathBuf> = previous.to_vec();
            if files.is_empty() {
                files.push(path.to_path_buf());
            }
            let mut sig = signature(&files);
            if let Some(first) = sig.first_mut() {
                first.1 = config_stamp;
            }
            (sig, Err(WebError::Config(e)))
        }
        Ok(config) => {
            let files = watched_files(path, Some(&config));
            let mut sig = signature(&files);
            if let Some(first) = sig.first_mut() {
                first.1 = config_stamp;
            }
            (sig, Active::from_config(config, path))
        }
    }
}

/// Reloads the active config when its files change.
pub(crate) struct Reloader {
    path: PathBuf,
    shared: Arc<Shared>,
    seen: Mutex<Signature>,
}

impl Reloader {
    pub(crate) fn new(path: PathBuf, shared: Arc<Shared>, seen: Signature) -> Self {
        Reloader {
            path,
            shared,
            seen: Mutex::new(seen),
        }
    }

    /// Stats the watched files; reloads if any changed. Blocking (file IO, maybe one bcrypt).
    pub(crate) fn check(&self) {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        let files: Vec<PathBuf> = seen.iter().map(|(p, _)| p.clone()).collect();
        if signature(&files) == *seen {
            return;
        }
        let (sig, outcome) = attempt(&self.path, &files);
        *seen = sig;
        match outcome {
            Ok(active) => {
                tracing::info!(
                    path = %self.path.display(),
                    tls = active.tls.is_some(),
                    basic_auth_users = active.config.basic_auth_users.len(),
                    "Reloaded the web config."
                );
                self.shared.replace(active);
            }
            Err(e) => {
                tracing::error!(
                    path = %self.path.display(),
                    error = %crate::error_chain(&e),
                    "The changed web config is invalid; keeping the previous one."
                );
            }
        }
    }
}
