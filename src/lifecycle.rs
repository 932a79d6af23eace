//! Process lifecycle: readiness latches, signals and reload, systemd's notify protocol.
//!
//! Readiness follows linkerd's latch idea: each component that must be up before `/readyz`
//! answers 200 holds a [`Latch`] and drops it once started; the process is ready when no latch is
//! left. No shared flag, no lock. [`wait_for_exit`] turns SIGTERM/SIGINT into a stop and SIGHUP
//! (or a changed configuration file that validates) into a reload, which re-executes the binary
//! in place ([`reexec`]).

use crate::config;
use crate::metrics::Metrics;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

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

/// Tells systemd `READY=1` once every latch is released, then pings its watchdog (when one is
/// configured) at half its interval, but only while `heartbeat` moves: a wedged incident task
/// stops the pings and systemd restarts the service.
pub fn spawn_watchdog(readiness: Readiness, heartbeat: Arc<AtomicU64>, stop: CancellationToken) {
    tokio::spawn(async move {
        while !readiness.is_ready() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        sd_notify("READY=1");
        let Some(every) = watchdog_interval() else {
            return;
        };
        let mut last = u64::MAX;
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = tokio::time::sleep(every / 2) => {}
            }
            let now = heartbeat.load(Ordering::Relaxed);
            if now != last {
                sd_notify("WATCHDOG=1");
                last = now;
            }
        }
    });
}

/// Why the daemon's main loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// SIGTERM, SIGINT, or the caller's stop token.
    Stopped,
    /// A valid new configuration: drain, then [`reexec`].
    Reload,
}

/// The configuration file's modification time, read off the async workers.
async fn mtime(path: &Path) -> Option<std::time::SystemTime> {
    tokio::fs::metadata(path)
        .await
        .and_then(|m| m.modified())
        .ok()
}

/// Waits for a stop (SIGTERM, SIGINT, `stop`) or a valid reload (SIGHUP, or a change of the
/// configuration file). A new file that does not validate is logged and counted and the running
/// configuration stays.
pub async fn wait_for_exit(
    path: Option<&Path>,
    metrics: &Metrics,
    stop: &CancellationToken,
) -> Exit {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).ok();
    let mut int = signal(SignalKind::interrupt()).ok();
    let mut hup = signal(SignalKind::hangup()).ok();
    let mut last_mtime = match path {
        Some(p) => mtime(p).await,
        None => None,
    };
    let mut poll = tokio::time::interval(Duration::from_secs(2));
    async fn next(s: &mut Option<tokio::signal::unix::Signal>) {
        match s.as_mut() {
            Some(s) => {
                s.recv().await;
            }
            None => std::future::pending().await,
        }
    }
    loop {
        let mut want_reload = false;
        tokio::select! {
            _ = stop.cancelled() => return Exit::Stopped,
            _ = next(&mut term) => return Exit::Stopped,
            _ = next(&mut int) => return Exit::Stopped,
            _ = next(&mut hup) => want_reload = true,
            _ = poll.tick() => {
                if let Some(p) = path {
                    let m = mtime(p).await;
                    if m.is_some() && m != last_mtime {
                        last_mtime = m;
                        want_reload = true;
                    }
                }
            }
        }
        if !want_reload {
            continue;
        }
        let Some(p) = path else {
            tracing::info!("Reload requested, but the daemon runs on the embedded default configuration; nothing to reload.");
            continue;
        };
        let owned = p.to_path_buf();
        let checked = tokio::task::spawn_blocking(move || config::load(&owned)).await;
        match checked {
            Ok(Ok(_)) => {
                metrics.config_reloads.with_label_values(&["success"]).inc();
                tracing::info!(config = %p.display(), "Configuration changed and is valid; reloading.");
                return Exit::Reload;
            }
            Ok(Err(e)) => {
                metrics.config_reloads.with_label_values(&["failure"]).inc();
                metrics.config_reload_ok.set(0);
                tracing::error!(config = %p.display(), error = %e, "The new configuration is invalid; keeping the running one.");
            }
            Err(e) => {
                metrics.config_reloads.with_label_values(&["failure"]).inc();
                tracing::error!(error = %e, "Could not check the new configuration.");
            }
        }
    }
}

/// Replaces this process image with the same binary and arguments (reload): same pid, so
/// systemd and the kubelet see one continuous service.
pub fn reexec() -> ExitCode {
    use std::os::unix::process::CommandExt;
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let Some((first, rest)) = args.split_first() else {
        eprintln!("assertwatch: reload failed: no argv[0]");
        return ExitCode::from(1);
    };
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from(first));
    // The only process spawn outside the repro runner: exec of our own binary, argv unchanged.
    #[allow(clippy::disallowed_methods)]
    let err = std::process::Command::new(exe).args(rest).exec();
    eprintln!("assertwatch: reload failed, cannot re-execute: {err}");
    ExitCode::from(1)
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

    #[tokio::test]
    async fn the_stop_token_ends_the_wait() {
        let stop = CancellationToken::new();
        stop.cancel();
        let m = Metrics::new();
        assert_eq!(wait_for_exit(None, &m, &stop).await, Exit::Stopped);
    }

    #[tokio::test]
    async fn an_invalid_new_config_is_counted_and_kept_out() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("c.yaml");
        std::fs::write(&p, "listen: \"127.0.0.1:0\"\n").unwrap();
        let m = Metrics::new();
        let stop = CancellationToken::new();
        let waiter = {
            let (p, m, stop) = (p.clone(), m.clone(), stop.clone());
            tokio::spawn(async move { wait_for_exit(Some(&p), &m, &stop).await })
        };
        tokio::time::sleep(Duration::from_millis(200)).await;
        // A different size and mtime: the poll sees a change.
        std::fs::write(&p, "no_such_key: 1\n").unwrap();
        let f = std::fs::File::options().write(true).open(&p).unwrap();
        f.set_modified(std::time::SystemTime::now() + Duration::from_secs(5))
            .unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(6);
        while m.config_reloads.with_label_values(&["failure"]).get() == 0 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the change was not noticed"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(m.config_reload_ok.get(), 0);
        stop.cancel();
        assert_eq!(waiter.await.unwrap(), Exit::Stopped);
    }
}
