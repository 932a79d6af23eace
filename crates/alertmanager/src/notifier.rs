//! The notifier: starting the receiver tasks, and the handle through which the daemon fires and
//! resolves alerts.
//!
//! # Why a lock and not a command channel
//! The handle applies `fire`/`resolve` to the active set itself, under a mutex held only for a few
//! map operations (never across I/O or an `.await`). A bounded command channel to a state task
//! would have to drop commands when full, and then an *update* to a known key could be lost, which
//! the contract forbids; an unbounded one has no bound at all. With the lock the bound is exact
//! (`queue_capacity` active keys, checked at the moment of `fire`) and the caller still never
//! waits on the network. All I/O and timing belong to the receiver tasks (`receiver.rs`).
//!
//! The active set and the per-receiver queues themselves live in `queue.rs`.

use std::sync::Arc;
use std::time::SystemTime;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::alert::Alert;
use crate::config::{AlertmanagerConfig, ConfigError};
use crate::metrics::Metrics;
use crate::queue::Shared;
use crate::receiver::{Receiver, Schedule};
use crate::transport::{build_client, HttpTransport, Transport};

/// Starts the notifier.
#[derive(Debug)]
pub struct Notifier;

impl Notifier {
    /// Validates `config`, builds the HTTP client and spawns one task per Alertmanager URL on the
    /// current tokio runtime.
    ///
    /// Returns the handle for firing and resolving alerts, and a join handle that completes once
    /// [`NotifierHandle::shutdown`] has been called and every receiver has made its final flush
    /// (bounded by `shutdown_timeout`).
    ///
    /// # Errors
    /// A [`ConfigError`] naming the unusable field; [`ConfigError::NoRuntime`] outside a runtime.
    pub fn spawn(
        config: AlertmanagerConfig,
        metrics: Metrics,
    ) -> Result<(NotifierHandle, JoinHandle<()>), ConfigError> {
        tokio::runtime::Handle::try_current().map_err(|_| ConfigError::NoRuntime)?;
        let endpoints = config.validate()?;
        let client = build_client(&config)?;
        let receivers = endpoints
            .into_iter()
            .map(|e| {
                (
                    e.label,
                    HttpTransport::new(client.clone(), e.url, config.auth.clone()),
                )
            })
            .collect();
        Ok(start(&config, metrics, receivers))
    }
}

/// Spawns the receiver tasks over any transport (the scripted fake in tests).
pub(crate) fn start<T: Transport>(
    config: &AlertmanagerConfig,
    metrics: Metrics,
    receivers: Vec<(String, T)>,
) -> (NotifierHandle, JoinHandle<()>) {
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let shared = Arc::new(Shared::new(
        config,
        receivers.len(),
        shutdown_tx,
        metrics.clone(),
    ));
    let schedule = Schedule::from_config(config);
    let tasks: Vec<JoinHandle<()>> = receivers
        .into_iter()
        .enumerate()
        .map(|(index, (label, transport))| {
            metrics.init_receiver(&label);
            let receiver = Receiver {
                index,
                label,
                transport,
                shared: Arc::clone(&shared),
                schedule,
                shutdown: shutdown_rx.clone(),
            };
            tokio::spawn(receiver.run())
        })
        .collect();
    let join = tokio::spawn(async move {
        for task in tasks {
            if let Err(err) = task.await {
                tracing::error!(error = %err, "Alertmanager receiver task ended abnormally.");
            }
        }
    });
    (NotifierHandle { shared }, join)
}

/// Fires and resolves alerts. Cheap to clone; no method waits on the network.
#[derive(Clone)]
pub struct NotifierHandle {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for NotifierHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NotifierHandle")
            .field("receivers", &self.shared.wake.len())
            .finish()
    }
}

impl NotifierHandle {
    /// Inserts or updates the active alert for `key` (the caller's identity for the incident,
    /// never sent). A new or changed alert is pushed at once; an unchanged one waits for the next
    /// periodic re-send. A new key while `queue_capacity` alerts are active is dropped and
    /// counted (`reason="queue_full"`); updates to held keys always apply.
    ///
    /// Labels and annotations are bounded first: label values cut to
    /// [`MAX_LABEL_VALUE_BYTES`](crate::MAX_LABEL_VALUE_BYTES), annotations to
    /// `max_annotation_bytes`, entries with invalid names dropped and counted
    /// (`reason="invalid_label_name"`). An alert left without a usable label is dropped and
    /// counted (`reason="invalid_alert"`).
    pub fn fire(&self, key: String, alert: Alert) {
        self.shared.fire(key, alert);
    }

    /// Sends the alert for `key` once more with `endsAt` = now (Alertmanager then reports it
    /// resolved), and forgets it. Unknown keys are ignored.
    pub fn resolve(&self, key: &str) {
        self.shared.resolve(key, SystemTime::now());
    }

    /// Asks every receiver to deliver what it still has queued, once, within `shutdown_timeout`,
    /// and then stop. Active alerts are *not* resolved: they lapse `resolve_after` after their
    /// last send, which is what should happen when the daemon goes away. Await the join handle
    /// from [`Notifier::spawn`] to know when the flush is over.
    pub fn shutdown(&self) {
        self.shared.request_shutdown();
    }

    /// Number of alerts currently active.
    pub fn active_len(&self) -> usize {
        self.shared.active_len()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::time::{sleep, Instant};

    use super::*;
    use crate::alert::WireAlert;
    use crate::metrics::DropReason;
    use crate::queue::MAX_BATCH_ALERTS;
    use crate::transport::fake::{FakeTransport, Outcome};

    fn config() -> AlertmanagerConfig {
        AlertmanagerConfig {
            resend_interval: Duration::from_secs(60),
            resolve_after: Duration::from_secs(300),
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(4),
            shutdown_timeout: Duration::from_secs(2),
            queue_capacity: 3,
            ..AlertmanagerConfig::default()
        }
    }

    fn alert(name: &str) -> Alert {
        Alert::new(SystemTime::now())
            .label("alertname", name)
            .annotation("summary", name)
    }

    fn names(alerts: &[WireAlert]) -> Vec<&str> {
        alerts
            .iter()
            .map(|a| a.labels["alertname"].as_str())
            .collect()
    }

    /// Lets the receiver tasks run; under the paused clock this costs no real time.
    async fn settle() {
        sleep(Duration::from_millis(1)).await;
    }

    fn one(transport: &FakeTransport) -> Vec<(String, FakeTransport)> {
        vec![("r0".to_string(), transport.clone())]
    }

    #[tokio::test(start_paused = true)]
    async fn new_alerts_are_pushed_at_once_and_unchanged_ones_are_not() {
        let fake = FakeTransport::accepting();
        let metrics = Metrics::unregistered().unwrap();
        let (handle, _task) = start(&config(), metrics.clone(), one(&fake));
        let a = alert("A");
        handle.fire("a".into(), a.clone());
        settle().await;
        assert_eq!(fake.calls().len(), 1);
        assert_eq!(names(&fake.calls()[0].alerts), ["A"]);
        handle.fire("a".into(), a.clone());
        settle().await;
        assert_eq!(
            fake.calls().len(),
            1,
            "an unchanged alert waits for the re-send"
        );
        handle.fire("a".into(), a.annotation("summary", "changed"));
        settle().await;
        assert_eq!(fake.calls().len(), 2);
        assert_eq!(fake.calls()[1].alerts[0].annotations["summary"], "changed");
        assert_eq!(metrics.sent_count("r0"), 2);
        assert_eq!(metrics.active_count(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn active_alerts_are_resent_every_interval_with_a_fresh_end() {
        let fake = FakeTransport::accepting();
        let (handle, _task) = start(&config(), Metrics::unregistered().unwrap(), one(&fake));
        let t0 = Instant::now();
        handle.fire("a".into(), alert("A"));
        settle().await;
        sleep(Duration::from_secs(125)).await;
        let calls = fake.calls();
        let offsets: Vec<u64> = calls.iter().map(|c| (c.at - t0).as_secs()).collect();
        assert_eq!(offsets, [0, 60, 120]);
        assert!(calls.iter().all(|c| names(&c.alerts) == ["A"]));
        assert!(calls.iter().all(|c| c.alerts[0].ends_at.is_some()));
    }

    #[tokio::test(start_paused = true)]
    async fn a_resolved_alert_is_sent_once_and_forgotten() {
        let fake = FakeTransport::accepting();
        let metrics = Metrics::unregistered().unwrap();
        let (handle, _task) = start(&config(), metrics.clone(), one(&fake));
        handle.fire("a".into(), alert("A"));
        settle().await;
        handle.resolve("a");
        handle.resolve("unknown");
        settle().await;
        assert_eq!(fake.calls().len(), 2);
        assert_eq!(metrics.active_count(), 0);
        sleep(Duration::from_secs(200)).await;
        assert_eq!(fake.calls().len(), 2, "a resolved alert is not re-sent");
    }

    #[tokio::test(start_paused = true)]
    async fn failed_pushes_back_off_exponentially_up_to_the_cap() {
        let fake = FakeTransport::new(&[Outcome::Fail(503); 6], Outcome::Accept);
        let metrics = Metrics::unregistered().unwrap();
        let (handle, _task) = start(&config(), metrics.clone(), one(&fake));
        let t0 = Instant::now();
        handle.fire("a".into(), alert("A"));
        sleep(Duration::from_secs(30)).await;
        let offsets: Vec<u128> = fake
            .calls()
            .iter()
            .map(|c| (c.at - t0).as_millis())
            .collect();
        // Delays 0.5, 1, 2, 4 (cap), 4, 4 s between attempts.
        assert_eq!(offsets, [0, 500, 1500, 3500, 7500, 11500, 15500]);
        assert_eq!(metrics.failed_count("r0"), 6);
        assert_eq!(metrics.sent_count("r0"), 1);
        assert_eq!(names(&fake.calls()[6].alerts), ["A"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_receiver_that_is_down_loses_nothing() {
        let fake = FakeTransport::new(&[Outcome::Fail(503); 3], Outcome::Accept);
        let (handle, _task) = start(&config(), Metrics::unregistered().unwrap(), one(&fake));
        handle.fire("a".into(), alert("A"));
        settle().await;
        handle.fire("b".into(), alert("B"));
        handle.resolve("a");
        handle.fire("c".into(), alert("C"));
        sleep(Duration::from_secs(10)).await;
        let calls = fake.calls();
        let delivered = &calls[3].alerts;
        assert_eq!(names(delivered), ["A", "B", "C"]);
        let a = &delivered[0];
        assert!(a.ends_at <= delivered[1].ends_at, "A is sent as resolved");
        assert_eq!(calls.len(), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn one_receiver_down_does_not_delay_the_other() {
        let down = FakeTransport::new(&[], Outcome::Hang);
        let up = FakeTransport::accepting();
        let receivers = vec![
            ("down".to_string(), down.clone()),
            ("up".to_string(), up.clone()),
        ];
        let metrics = Metrics::unregistered().unwrap();
        let (handle, _task) = start(&config(), metrics.clone(), receivers);
        let t0 = Instant::now();
        handle.fire("a".into(), alert("A"));
        sleep(Duration::from_secs(61)).await;
        let offsets: Vec<u64> = up.calls().iter().map(|c| (c.at - t0).as_secs()).collect();
        assert_eq!(offsets, [0, 60]);
        assert_eq!(down.calls().len(), 1);
        assert_eq!(metrics.sent_count("up"), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_flushes_pending_resolves() {
        let fake = FakeTransport::accepting();
        let (handle, task) = start(&config(), Metrics::unregistered().unwrap(), one(&fake));
        handle.fire("a".into(), alert("A"));
        settle().await;
        handle.resolve("a");
        handle.shutdown();
        task.await.unwrap();
        let calls = fake.calls();
        assert_eq!(calls.len(), 2);
        assert_eq!(names(&calls[1].alerts), ["A"]);
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_is_bounded_by_its_deadline() {
        let fake = FakeTransport::new(&[], Outcome::Hang);
        let (handle, task) = start(&config(), Metrics::unregistered().unwrap(), one(&fake));
        handle.fire("a".into(), alert("A"));
        settle().await;
        let t0 = Instant::now();
        handle.shutdown();
        task.await.unwrap();
        // The hung push is abandoned; the final flush tries once more and gives up at 2 s.
        assert_eq!((Instant::now() - t0).as_secs(), 2);
        assert_eq!(fake.calls().len(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn refused_batches_are_not_retried() {
        let fake = FakeTransport::new(&[Outcome::Fail(400)], Outcome::Accept);
        let metrics = Metrics::unregistered().unwrap();
        let (handle, _task) = start(&config(), metrics.clone(), one(&fake));
        handle.fire("a".into(), alert("A"));
        sleep(Duration::from_secs(10)).await;
        assert_eq!(fake.calls().len(), 1);
        assert_eq!(metrics.dropped_count(DropReason::Rejected), 1);
        sleep(Duration::from_secs(60)).await;
        assert_eq!(
            fake.calls().len(),
            2,
            "still active, so the re-send carries it again"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn large_sets_go_out_in_bounded_batches() {
        let fake = FakeTransport::accepting();
        let config = AlertmanagerConfig {
            queue_capacity: 1200,
            ..config()
        };
        let (handle, _task) = start(&config, Metrics::unregistered().unwrap(), one(&fake));
        for i in 0..1200 {
            handle.fire(format!("k{i:04}"), alert("A").label("i", i.to_string()));
        }
        settle().await;
        let sizes: Vec<usize> = fake.calls().iter().map(|c| c.alerts.len()).collect();
        assert_eq!(sizes.iter().sum::<usize>(), 1200);
        assert!(sizes.iter().all(|s| *s <= MAX_BATCH_ALERTS), "{sizes:?}");
    }

    #[tokio::test]
    async fn spawn_validates_the_config() {
        let bad = AlertmanagerConfig {
            urls: vec!["nope".into()],
            ..config()
        };
        let err = Notifier::spawn(bad, Metrics::unregistered().unwrap()).unwrap_err();
        assert!(matches!(err, ConfigError::InvalidUrl { .. }), "{err}");
    }

    #[test]
    fn spawn_outside_a_runtime_is_an_error() {
        let err = Notifier::spawn(config(), Metrics::unregistered().unwrap()).unwrap_err();
        assert!(matches!(err, ConfigError::NoRuntime), "{err}");
    }
}
