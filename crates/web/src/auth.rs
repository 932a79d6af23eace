//! Basic auth and the configured response headers, as a tower layer around the application.
//!
//! Follows the exporter toolkit's `web/handler.go`: users map to bcrypt hashes; an unknown user
//! is checked against a dummy hash so that timing does not tell which users exist; successful
//! checks are cached under a key built from the user, the stored hash and the password, so a
//! changed hash (a reloaded file) misses the cache. Here the key is a salted SHA-256 of those
//! three, never the password itself, and only successes are cached, for a short time, in a
//! bounded map.

use crate::credentials::Users;
use crate::reload::Shared;
use axum::http::{header, HeaderValue, Request, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use subtle::ConstantTimeEq;

/// The realm sent with 401 answers.
pub const REALM: &str = "assertwatch";

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
