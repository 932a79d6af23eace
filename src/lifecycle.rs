//! Process lifecycle: readiness latches, and systemd's notify protocol.
//!
//! Readiness follows linkerd's latch idea: each component that must be up before `/readyz`
//! answers 200 holds a [`Latch`] and drops it once started; the process is ready when no latch is
//! left. No shared flag, no lock.

use std::sync::{Arc, Weak};

/// Held by a component until it has started.
#[derive(Debug, Clone)]
pub struct Latch(#[allow(dead_code)] Arc<()>);

/// Answers "have all latches been released?".
#[derive(Debug, Clone)]
pub struct Readiness(Weak<()>);

impl Readiness {
    pub fn new() -> (Readiness, Latch) {
        let a = Arc::new(());
        (Readiness(Arc::downgrade(&a)), Latch(a))
    }

    pub fn is_ready(&self) -> bool {
        self.0.upgrade().is_none()
    }
}

/// Sends a state line to systemd's notify socket (`READY=1`, `WATCHDOG=1`, `STOPPING=1`,
/// `RELOADING=1`). Does nothing outside systemd. Protocol: sd_notify(3) — one datagram to the
/// AF_UNIX socket named by `$NOTIFY_SOCKET`; a leading `@` names an abstract socket.
pub fn sd_notify(state: &str) {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let Ok(sock) = std::os::unix::net::UnixDatagram::unbound() else {
        return;
    };
    let bytes = path.as_encoded_bytes();
    let res = if let Some(name) = bytes.strip_prefix(b"@") {
        use std::os::linux::net::SocketAddrExt;
        std::os::unix::net::SocketAddr::from_abstract_name(name)
            .and_then(|a| sock.send_to_addr(state.as_bytes(), &a))
    } else {
        sock.send_to(state.as_bytes(), std::path::Path::new(&path))
    };
    if let Err(e) = res {
        tracing::debug!(error = %e, "Could not notify systemd.");
    }
}

/// The watchdog interval systemd asked for (`$WATCHDOG_USEC`), if any.
pub fn watchdog_interval() -> Option<std::time::Duration> {
    let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.parse().ok()?;
    (usec > 0).then(|| std::time::Duration::from_micros(usec))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_when_latches_dropped() {
        let (r, l) = Readiness::new();
        let l2 = l.clone();
        assert!(!r.is_ready());
        drop(l);
        assert!(!r.is_ready());
        drop(l2);
        assert!(r.is_ready());
    }
}
