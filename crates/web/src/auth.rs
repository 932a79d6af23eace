//! Basic auth and the configured response headers, as a tower layer around the application.
//!
//! Follows the exporter toolkit's `web/handler.go`: users map to bcrypt hashes; an unknown user
//! is checked against a dummy hash so that timing does not tell which users exist; successful
//! checks are cached under a key built from the user, the stored hash and the password, so a
//! changed hash (a reloaded file) misses the cache. Here the key is a salted SHA-256 of those
//! three, never the password itself, and only successes are cached, for a short time, in a
//! bounded map.

use crate::reload::Shared;
use axum::http::{header, HeaderValue, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use subtle::ConstantTimeEq;

/// How long a successful check is remembered.
const CACHE_TTL: Duration = Duration::from_secs(60);
/// At most this many remembered checks; beyond it, expired ones are dropped, then all.
const CACHE_CAP: usize = 1024;
/// bcrypt runs at most this many at once (CPU bound, ~70 ms each at cost 10). The toolkit
/// serialises them with one mutex; two keeps one slow client from stalling the others.
pub(crate) const BCRYPT_CONCURRENCY: usize = 2;

/// The realm sent with 401 answers.
pub const REALM: &str = "assertwatch";

/// Remembered successful (user, hash, password) checks, by salted digest.
pub(crate) struct CredentialCache {
    salt: Option<[u8; 32]>,
    entries: Mutex<HashMap<[u8; 32], Instant>>,
}

impl CredentialCache {
    pub(crate) fn new() -> Self {
        use ring::rand::SecureRandom;
        let mut salt = [0u8; 32];
        // Without randomness there is no salt, and then no cache: every check runs bcrypt.
        let salt = ring::rand::SystemRandom::new()
            .fill(&mut salt)
            .ok()
            .map(|()| salt);
        CredentialCache {
            salt,
            entries: Mutex::new(HashMap::new()),
        }
    }

    fn key(&self, user: &[u8], hash: &str, password: &[u8]) -> Option<[u8; 32]> {
        let salt = self.salt?;
        let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
        ctx.update(&salt);
        for part in [user, hash.as_bytes(), password] {
            // Length prefixes keep ("ab","c") and ("a","bc") apart.
            ctx.update(&(part.len() as u64).to_be_bytes());
            ctx.update(part);
        }
        let mut out = [0u8; 32];
        out.copy_from_slice(ctx.finish().as_ref());
        Some(out)
    }

    fn hit(&self, key: &[u8; 32]) -> bool {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.get(key).is_some_and(|t| t.elapsed() < CACHE_TTL)
    }

    fn remember(&self, key: [u8; 32]) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= CACHE_CAP {
            entries.retain(|_, t| t.elapsed() < CACHE_TTL);
            if entries.len() >= CACHE_CAP {
                entries.clear();
            }
        }
        entries.insert(key, Instant::now());
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.lock().map(|e| e.len()).unwrap_or(0)
    }
}

/// Splits an `Authorization: Basic` value into user and password bytes.
fn parse_basic(value: &HeaderValue) -> Option<(Vec<u8>, Vec<u8>)> {
    let v = value.to_str().ok()?.trim();
    let (scheme, rest) = v.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(rest.trim())
        .ok()?;
    let colon = decoded.iter().position(|&b| b == b':')?;
    Some((decoded[..colon].to_vec(), decoded[colon + 1..].to_vec()))
}

/// Whether the request's credentials match a configured user.
pub(crate) async fn authorize(
    shared: &Shared,
    users: &Users,
    authorization: Option<&HeaderValue>,
) -> bool {
    let Some((user, password)) = authorization.and_then(parse_basic) else {
        return false;
    };
    // Compare against every user in constant time per comparison, so the position of a match
    // (or its absence) does not show in timing.
    let mut found: Option<&str> = None;
    for (name, hash) in &users.hashes {
        if bool::from(name.as_bytes().ct_eq(&user)) {
            found = Some(hash);
        }
    }
    let (hash, known) = match found {
        Some(h) => (h.to_string(), true),
        None => (users.dummy_hash.clone(), false),
    };
    let key = shared.cache.key(&user, &hash, &password);
    if known && key.as_ref().is_some_and(|k| shared.cache.hit(k)) {
        return true;
    }
    let Ok(_permit) = shared.bcrypt_slots.acquire().await else {
        return false;
    };
    // bcrypt::verify compares the digests in constant time (subtle::ConstantTimeEq).
    let ok = tokio::task::spawn_blocking(move || bcrypt::verify(&password, &hash).unwrap_or(false))
        .await
        .unwrap_or(false);
    if ok && known {
        if let Some(k) = key {
            shared.cache.remember(k);
        }
    }
    ok && known
}

/// The users of one loaded config, with the dummy hash for unknown names.
#[derive(Debug, Clone)]
pub(crate) struct Users {
    pub hashes: Vec<(String, String)>,
    pub dummy_hash: String,
}

impl Users {
    /// Builds the dummy hash at the highest cost in use so that unknown users cost as much as
    /// known ones. Blocking (one bcrypt hash).
    pub(crate) fn new(users: &std::collections::BTreeMap<String, String>) -> Self {
        let cost = users
            .values()
            .filter_map(|h| h.parse::<bcrypt::HashParts>().ok())
            .map(|p| p.get_cost())
            .max()
            .unwrap_or(bcrypt::DEFAULT_COST);
        let mut secret = [0u8; 16];
        {
            use ring::rand::SecureRandom;
            let _ = ring::rand::SystemRandom::new().fill(&mut secret);
        }
        // If hashing fails the dummy stays unparsable and verify() answers false: still a 401.
        let dummy_hash = bcrypt::hash(secret, cost).unwrap_or_default();
        Users {
            hashes: users.iter().map(|(u, h)| (u.clone(), h.clone())).collect(),
            dummy_hash,
        }
    }
}

fn unauthorized() -> Response {
    let mut r = (StatusCode::UNAUTHORIZED, "Unauthorized\n").into_response();
    if let Ok(v) = HeaderValue::from_str(&format!("Basic realm=\"{REALM}\"")) {
        r.headers_mut().insert(header::WWW_AUTHENTICATE, v);
    }
    r
}

/// Tower layer: basic auth for non-exempt paths and the configured response headers, both read
/// from the current (reloadable) web config on every request.
#[derive(Clone)]
pub struct WebLayer {
    pub(crate) shared: Arc<Shared>,
}

impl<S> tower_layer::Layer<S> for WebLayer {
    type Service = WebService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        WebService {
            inner,
            shared: self.shared.clone(),
        }
    }
}

/// The service [`WebLayer`] wraps around the application.
#[derive(Clone)]
pub struct WebService<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S, B> tower_service::Service<Request<B>> for WebService<S>
where
    S: tower_service::Service<Request<B>, Response = Response, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Readiness of the inner service is awaited in `call`, on the clone that serves.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let shared = self.shared.clone();
        Box::pin(async move {
            let active = shared.current();
            let allowed = !active.config.requires_auth(req.uri().path())
                || authorize(
                    &shared,
                    &active.users,
                    req.headers().get(header::AUTHORIZATION),
                )
                .await;
            let mut resp = if allowed {
                std::future::poll_fn(|cx| inner.poll_ready(cx)).await?;
                inner.call(req).await?
            } else {
                unauthorized()
            };
            for (name, value) in &active.headers {
                resp.headers_mut().insert(name.clone(), value.clone());
            }
            Ok(resp)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(user: &str, pass: &str) -> HeaderValue {
        let v = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
        HeaderValue::from_str(&format!("Basic {v}")).expect("header value")
    }

    #[test]
    fn parses_basic_header() {
        assert_eq!(
            parse_basic(&basic("al", "p:w")),
            Some((b"al".to_vec(), b"p:w".to_vec()))
        );
        assert_eq!(
            parse_basic(&HeaderValue::from_static("bAsIc YTpi")),
            Some((b"a".to_vec(), b"b".to_vec()))
        );
        assert_eq!(parse_basic(&HeaderValue::from_static("Bearer abc")), None);
        assert_eq!(parse_basic(&HeaderValue::from_static("Basic !!!")), None);
        // No colon after decoding.
        assert_eq!(parse_basic(&HeaderValue::from_static("Basic YWJj")), None);
    }

    #[test]
    fn cache_keys_differ_per_part_and_are_bounded() {
        let c = CredentialCache::new();
        let a = c.key(b"ab", "h", b"c");
        let b = c.key(b"a", "h", b"bc");
        assert!(a.is_some());
        assert_ne!(a, b);
        for i in 0..(CACHE_CAP + 10) {
            if let Some(k) = c.key(b"u", "h", i.to_string().as_bytes()) {
                c.remember(k);
            }
        }
        assert!(c.len() <= CACHE_CAP);
    }

    #[tokio::test]
    async fn right_wrong_and_unknown_users() {
        let mut m = std::collections::BTreeMap::new();
        m.insert("alice".to_string(), bcrypt::hash("pw", 4).expect("hash"));
        let users = Users::new(&m);
        let shared = Shared::new(crate::reload::Active::plain());
        assert!(authorize(&shared, &users, Some(&basic("alice", "pw"))).await);
        // Second time from the cache.
        assert!(authorize(&shared, &users, Some(&basic("alice", "pw"))).await);
        assert!(!authorize(&shared, &users, Some(&basic("alice", "nope"))).await);
        assert!(!authorize(&shared, &users, Some(&basic("bob", "pw"))).await);
        assert!(!authorize(&shared, &users, None).await);
    }
}
