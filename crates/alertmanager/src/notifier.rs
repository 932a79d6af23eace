//! The notifier: the set of active alerts, each receiver's queue of alerts still to deliver, and
//! the handle through which the daemon fires and resolves alerts.
//!
//! # Why a lock and not a command channel
//! The handle applies `fire`/`resolve` to the active set itself, under a mutex held only for a few
//! map operations (never across I/O or an `.await`). A bounded command channel to a state task
//! would have to drop commands when full, and then an *update* to a known key could be lost, which
//! the contract forbids; an unbounded one has no bound at all. With the lock the bound is exact
//! (`queue_capacity` active keys, checked at the moment of `fire`) and the caller still never
//! waits on the network. All I/O and timing belong to the receiver tasks (`receiver.rs`).
//!
//! # Per-receiver queues
//! Each receiver has a queue of keys that changed since it last delivered them. Keys coalesce:
//! ten updates to one alert while a receiver is down become one entry, read at send time, so a
//! queue never holds more than the active keys plus pending resolves (bounded at
//! `2 × queue_capacity`). A resolved alert is queued with its final `endsAt` so it still reaches
//! a receiver that is down when it is resolved.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::SystemTime;

use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;

use crate::alert::{later, Alert, WireAlert};
use crate::config::{AlertmanagerConfig, ConfigError};
use crate::limits::{sanitise, Refusal};
use crate::metrics::{DropReason, Metrics};
use crate::receiver::{Receiver, Schedule};
use crate::transport::{build_client, HttpTransport, Transport};

/// Most alerts in one `POST`; a larger set goes out as several batches.
pub(crate) const MAX_BATCH_ALERTS: usize = 500;

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
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            active: BTreeMap::new(),
            queues: receivers.iter().map(|_| BTreeMap::new()).collect(),
        }),
        wake: receivers.iter().map(|_| Notify::new()).collect(),
        shutdown: shutdown_tx,
        capacity: config.queue_capacity,
        max_annotation_bytes: config.max_annotation_bytes,
        resolve_after: config.resolve_after,
        metrics: metrics.clone(),
    });
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
        self.shared.shutdown.send_replace(true);
    }

    /// Number of alerts currently active.
    pub fn active_len(&self) -> usize {
        self.shared.lock().active.len()
    }
}

/// What a receiver still has to deliver for one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Pending {
    /// The current active alert for the key, read at send time.
    Active,
    /// The alert as resolved, `ends_at` set.
    Resolved(Alert),
}

/// One batch taken from a receiver's queue: the entries (to put back if delivery fails) and
/// their wire form.
pub(crate) struct Batch {
    pub entries: Vec<(String, Pending)>,
    pub alerts: Vec<WireAlert>,
}

pub(crate) struct Shared {
    state: Mutex<State>,
    /// One per receiver: "your queue has something new".
    pub(crate) wake: Vec<Notify>,
    shutdown: watch::Sender<bool>,
    capacity: usize,
    max_annotation_bytes: usize,
    resolve_after: std::time::Duration,
    pub(crate) metrics: Metrics,
}

// `BTreeMap`s, so batches come out in key order: deterministic bodies and tests.
struct State {
    active: BTreeMap<String, Alert>,
    /// Per receiver, keys still to deliver.
    queues: Vec<BTreeMap<String, Pending>>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere while holding the lock leaves maps that are still consistent (every
        // mutation is a single insert or remove), so carry on with them.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wake_all(&self) {
        for wake in &self.wake {
            wake.notify_one();
        }
    }

    pub(crate) fn fire(&self, key: String, alert: Alert) {
        let (alert, repairs) = match sanitise(alert, self.max_annotation_bytes) {
            Ok(ok) => ok,
            Err(Refusal::NoLabels) => {
                self.metrics.dropped(DropReason::InvalidAlert, 1);
                tracing::debug!(%key, "Alert dropped: no valid label left.");
                return;
            }
        };
        self.metrics
            .dropped(DropReason::InvalidLabelName, repairs.invalid_names);
        self.metrics.dropped(
            DropReason::InvalidGeneratorUrl,
            repairs.invalid_generator_url,
        );

        let mut state = self.lock();
        if !state.active.contains_key(&key) && state.active.len() >= self.capacity {
            drop(state);
            self.metrics.dropped(DropReason::QueueFull, 1);
            tracing::debug!(%key, capacity = self.capacity, "Alert dropped: active set is full.");
            return;
        }
        if state.active.get(&key) == Some(&alert) {
            return;
        }
        state.active.insert(key.clone(), alert);
        for queue in &mut state.queues {
            queue.insert(key.clone(), Pending::Active);
        }
        let active = state.active.len();
        drop(state);
        self.metrics.set_active(active);
        self.wake_all();
    }

    pub(crate) fn resolve(&self, key: &str, now: SystemTime) {
        let mut state = self.lock();
        let Some(mut alert) = state.active.remove(key) else {
            return;
        };
        alert.ends_at = Some(now.max(alert.starts_at));
        let limit = self.capacity.saturating_mul(2);
        let mut backlog_drops = 0;
        for queue in &mut state.queues {
            // The key's own entry (queued when it fired) does not count: it is replaced.
            let others = queue.len() - usize::from(queue.contains_key(key));
            if others >= limit {
                queue.remove(key);
                backlog_drops += 1;
            } else {
                queue.insert(key.to_string(), Pending::Resolved(alert.clone()));
            }
        }
        let active = state.active.len();
        drop(state);
        self.metrics.set_active(active);
        self.metrics
            .dropped(DropReason::ReceiverBacklog, backlog_drops);
        self.wake_all();
    }

    /// Queues every active alert for receiver `index` (the periodic re-send), after forgetting
    /// alerts whose caller-given `ends_at` has passed: they were sent with that end and have
    /// resolved in Alertmanager already.
    pub(crate) fn queue_all_active(&self, index: usize, now: SystemTime) {
        let mut state = self.lock();
        let before = state.active.len();
        state
            .active
            .retain(|_, alert| alert.ends_at.is_none_or(|end| end > now));
        let expired = before != state.active.len();
        let State { active, queues } = &mut *state;
        if let Some(queue) = queues.get_mut(index) {
            for key in active.keys() {
                queue.entry(key.clone()).or_insert(Pending::Active);
            }
        }
        let active = state.active.len();
        drop(state);
        if expired {
            self.metrics.set_active(active);
        }
    }

    /// Takes up to [`MAX_BATCH_ALERTS`] entries from receiver `index`'s queue and renders them,
    /// computing each active alert's `endsAt` from `now`.
    pub(crate) fn take_batch(&self, index: usize, now: SystemTime) -> Batch {
        let mut state = self.lock();
        let State { active, queues } = &mut *state;
        let mut batch = Batch {
            entries: Vec::new(),
            alerts: Vec::new(),
        };
        let Some(queue) = queues.get_mut(index) else {
            return batch;
        };
        while batch.alerts.len() < MAX_BATCH_ALERTS {
            let Some((key, pending)) = queue.pop_first() else {
                break;
            };
            let wire = match &pending {
                Pending::Active => match active.get(&key) {
                    Some(alert) => {
                        alert.to_wire(alert.ends_at.unwrap_or(later(now, self.resolve_after)))
                    }
                    // Forgotten since it was queued (expired); nothing to send.
                    None => continue,
                },
                Pending::Resolved(alert) => alert.to_wire(alert.ends_at.unwrap_or(now)),
            };
            batch.alerts.push(wire);
            batch.entries.push((key, pending));
        }
        batch
    }

    /// Puts a batch that could not be delivered back into receiver `index`'s queue. An entry
    /// queued for the same key meanwhile is newer and wins.
    pub(crate) fn put_back(&self, index: usize, entries: Vec<(String, Pending)>) {
        let mut state = self.lock();
        if let Some(queue) = state.queues.get_mut(index) {
            for (key, pending) in entries {
                queue.entry(key).or_insert(pending);
            }
        }
    }

    /// Number of entries waiting for receiver `index`.
    #[cfg(test)]
    pub(crate) fn queued(&self, index: usize) -> usize {
        self.lock().queues.get(index).map_or(0, BTreeMap::len)
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use tokio::time::{sleep, Instant};

    use super::*;
    use crate::alert::rfc3339;
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

    #[test]
    fn resolving_ends_the_alert_now() {
        let shared = test_shared(1, 10);
        let start = UNIX_EPOCH + Duration::from_secs(1000);
        let now = UNIX_EPOCH + Duration::from_secs(2000);
        shared.fire("a".into(), Alert::new(start).label("alertname", "A"));
        let active = shared.take_batch(0, now);
        assert_eq!(
            active.alerts[0].ends_at,
            rfc3339(now + Duration::from_secs(300))
        );
        shared.resolve("a", now);
        let resolved = shared.take_batch(0, now + Duration::from_secs(5));
        assert_eq!(resolved.alerts[0].starts_at, rfc3339(start));
        assert_eq!(resolved.alerts[0].ends_at, rfc3339(now));
        assert_eq!(shared.queued(0), 0);
    }

    #[test]
    fn a_caller_given_end_is_sent_and_then_forgotten() {
        let shared = test_shared(1, 10);
        let start = UNIX_EPOCH + Duration::from_secs(1000);
        let end = UNIX_EPOCH + Duration::from_secs(1500);
        let mut a = Alert::new(start).label("alertname", "A");
        a.ends_at = Some(end);
        shared.fire("a".into(), a);
        let batch = shared.take_batch(0, start);
        assert_eq!(batch.alerts[0].ends_at, rfc3339(end));
        shared.queue_all_active(0, end + Duration::from_secs(1));
        assert_eq!(shared.queued(0), 0);
        assert_eq!(shared.metrics.active_count(), 0);
    }

    fn test_shared(receivers: usize, capacity: usize) -> Shared {
        let (shutdown, _) = watch::channel(false);
        Shared {
            state: Mutex::new(State {
                active: BTreeMap::new(),
                queues: (0..receivers).map(|_| BTreeMap::new()).collect(),
            }),
            wake: (0..receivers).map(|_| Notify::new()).collect(),
            shutdown,
            capacity,
            max_annotation_bytes: 4096,
            resolve_after: Duration::from_secs(300),
            metrics: Metrics::unregistered().unwrap(),
        }
    }

    #[test]
    fn the_active_set_is_bounded_but_updates_always_apply() {
        let shared = test_shared(1, 3);
        for key in ["a", "b", "c", "d"] {
            shared.fire(key.into(), Alert::new(UNIX_EPOCH).label("alertname", key));
        }
        let m = &shared.metrics;
        assert_eq!(m.dropped_count(DropReason::QueueFull), 1);
        assert_eq!(m.active_count(), 3);
        shared.fire("a".into(), Alert::new(UNIX_EPOCH).label("alertname", "a2"));
        assert_eq!(
            m.dropped_count(DropReason::QueueFull),
            1,
            "update to a held key applies"
        );
        let batch = shared.take_batch(0, UNIX_EPOCH);
        assert_eq!(names(&batch.alerts), ["a2", "b", "c"]);
        shared.resolve("b", UNIX_EPOCH);
        shared.fire("d".into(), Alert::new(UNIX_EPOCH).label("alertname", "d"));
        assert_eq!(
            m.dropped_count(DropReason::QueueFull),
            1,
            "room again after a resolve"
        );
        assert_eq!(m.active_count(), 3);
    }

    #[test]
    fn a_receiver_backlog_of_resolves_is_bounded() {
        let shared = test_shared(1, 2);
        for round in 0..3 {
            for key in ["a", "b"] {
                let key = format!("{key}{round}");
                shared.fire(key.clone(), Alert::new(UNIX_EPOCH).label("alertname", "x"));
                shared.resolve(&key, UNIX_EPOCH);
            }
        }
        assert_eq!(shared.queued(0), 4);
        assert_eq!(shared.metrics.dropped_count(DropReason::ReceiverBacklog), 2);
    }

    #[test]
    fn invalid_input_is_counted() {
        let shared = test_shared(1, 3);
        shared.fire("a".into(), Alert::new(UNIX_EPOCH).label("not-valid", "x"));
        let good = Alert::new(UNIX_EPOCH)
            .label("alertname", "A")
            .label("bad.name", "x")
            .generator_url("relative/path");
        shared.fire("b".into(), good);
        let m = &shared.metrics;
        assert_eq!(m.dropped_count(DropReason::InvalidAlert), 1);
        assert_eq!(m.dropped_count(DropReason::InvalidLabelName), 1);
        assert_eq!(m.dropped_count(DropReason::InvalidGeneratorUrl), 1);
        assert_eq!(m.active_count(), 1);
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
