//! The alert state shared by the notifier handle and the receiver tasks: the active set and each
//! receiver's queue of keys still to deliver.
//!
//! # Per-receiver queues
//! Each receiver has a queue of keys that changed since it last delivered them. Keys coalesce:
//! ten updates to one alert while a receiver is down become one entry, read at send time, so a
//! queue never holds more than the active keys plus pending resolves (bounded at
//! `2 × queue_capacity`). A resolved alert is queued with its final `endsAt` so it still reaches
//! a receiver that is down when it is resolved.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::SystemTime;

use tokio::sync::{watch, Notify};

use crate::alert::{later, Alert, WireAlert};
use crate::config::AlertmanagerConfig;
use crate::limits::{sanitise, Refusal};
use crate::metrics::{DropReason, Metrics};

/// Most alerts in one `POST`; a larger set goes out as several batches.
pub(crate) const MAX_BATCH_ALERTS: usize = 500;

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
    /// Empty state for `receivers` receivers; `shutdown` is what [`Shared::request_shutdown`]
    /// signals.
    pub(crate) fn new(
        config: &AlertmanagerConfig,
        receivers: usize,
        shutdown: watch::Sender<bool>,
        metrics: Metrics,
    ) -> Self {
        Shared {
            state: Mutex::new(State {
                active: BTreeMap::new(),
                queues: (0..receivers).map(|_| BTreeMap::new()).collect(),
            }),
            wake: (0..receivers).map(|_| Notify::new()).collect(),
            shutdown,
            capacity: config.queue_capacity,
            max_annotation_bytes: config.max_annotation_bytes,
            resolve_after: config.resolve_after,
            metrics,
        }
    }

    /// Tells every receiver to make its final flush and stop.
    pub(crate) fn request_shutdown(&self) {
        self.shutdown.send_replace(true);
    }

    /// Number of alerts currently active.
    pub(crate) fn active_len(&self) -> usize {
        self.lock().active.len()
    }

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

    use super::*;
    use crate::alert::rfc3339;

    fn names(alerts: &[WireAlert]) -> Vec<&str> {
        alerts
            .iter()
            .map(|a| a.labels["alertname"].as_str())
            .collect()
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
        let config = AlertmanagerConfig {
            queue_capacity: capacity,
            max_annotation_bytes: 4096,
            resolve_after: Duration::from_secs(300),
            ..AlertmanagerConfig::default()
        };
        Shared::new(
            &config,
            receivers,
            shutdown,
            Metrics::unregistered().unwrap(),
        )
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
}
