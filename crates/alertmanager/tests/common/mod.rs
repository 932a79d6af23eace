//! Test support shared by the integration tests: a recording HTTP(S) server that stands in for
//! an Alertmanager webhook receiver or for Alertmanager itself.
//!
//! Each test crate uses only part of it.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::time::{sleep, Instant};
use tokio_rustls::TlsAcceptor;

/// Longest wait for any one expected delivery.
pub const WAIT: Duration = Duration::from_secs(15);

#[derive(Debug, Clone)]
pub struct Request {
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

#[derive(Clone, Default)]
pub struct Recorder {
    requests: Arc<Mutex<Vec<Request>>>,
    handshake_failures: Arc<Mutex<usize>>,
}

impl Recorder {
    /// Starts serving on 127.0.0.1 and returns the address.
    pub async fn start(&self) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::clone(&self.requests);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let requests = Arc::clone(&requests);
                tokio::spawn(async move {
                    if let Some(request) = serve_one(stream).await {
                        requests.lock().unwrap().push(request);
                    }
                });
            }
        });
        addr
    }

    /// Like [`Recorder::start`], but speaking TLS through `acceptor`. Failed handshakes are
    /// counted in [`Recorder::handshake_failures`].
    pub async fn start_tls(&self, acceptor: TlsAcceptor) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::clone(&self.requests);
        let failures = Arc::clone(&self.handshake_failures);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (requests, failures) = (Arc::clone(&requests), Arc::clone(&failures));
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(stream).await else {
                        *failures.lock().unwrap() += 1;
                        return;
                    };
                    if let Some(request) = serve_one(tls).await {
                        requests.lock().unwrap().push(request);
                    }
                });
            }
        });
        addr
    }

    /// TLS handshakes that failed so far.
    pub fn handshake_failures(&self) -> usize {
        *self.handshake_failures.lock().unwrap()
    }

    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }

    /// Waits (bounded by [`WAIT`]) until some request satisfies `pred`.
    pub async fn wait_for(&self, what: &str, pred: impl Fn(&Request) -> bool) -> Request {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(found) = self.requests().into_iter().find(|r| pred(r)) {
                return found;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; got {:#?}",
                self.requests().iter().map(|r| r.json()).collect::<Vec<_>>()
            );
            sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Reads one HTTP/1.1 request (bounded sizes), answers `200 OK` and closes.
async fn serve_one<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S) -> Option<Request> {
    const MAX_HEAD: usize = 64 * 1024;
    const MAX_BODY: usize = 4 * 1024 * 1024;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos + 4;
        }
        if buf.len() > MAX_HEAD {
            return None;
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let path = lines.next()?.split(' ').nth(1)?.to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .collect();
    let length = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse::<usize>().ok())
        .unwrap_or(0)
        .min(MAX_BODY);
    let mut body = buf[head_end..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    body.truncate(length);
    let _ = stream
        .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        .await;
    let _ = stream.shutdown().await;
    Some(Request {
        path,
        headers,
        body,
    })
}
