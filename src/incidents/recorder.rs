//! The recorder: writes incidents to the store, keeps failed writes for retry, prunes.
//!
//! Each incident has one row, found by a dedup key fixed when it first opened. Writes go through
//! the store's writer thread. A write that fails (a full disk, a locked database) is kept in a
//! bounded retry queue and tried again before every later write and on every tick; while any is
//! pending the recorder reports itself unhealthy, and the stream table stops acknowledging, so
//! nothing the store has not taken is ever checkpointed as done. Every failure is counted in
//! `assertwatch_store_errors_total{op}`; nothing is dropped silently.

use crate::incidents::store::{now_ms, rfc3339_ms, StoreError, StoreWriter};
use crate::metrics::Metrics;
use crate::model::{IncidentRecord, ReproReport};
use crate::sinks::Change;
use std::collections::{HashMap, VecDeque};
use std::time::Duration;
use tokio::time::Instant;

/// Incident writes kept for retry while the store fails; beyond this the oldest is dropped and
/// counted (`assertwatch_store_errors_total{op="dropped"}`).
pub const MAX_RETRY: usize = 10_000;

/// How often retention runs.
const PRUNE_EVERY: Duration = Duration::from_secs(60);

/// Replay results remembered per incident id, so later updates of an open incident keep theirs.
const MAX_REPLAYS: usize = 1024;

/// Store retention (`incidents.*` in the configuration).
#[derive(Debug, Clone)]
pub struct Retention {
    pub max_age: Duration,
    pub max_count: u64,
    pub max_store_bytes: u64,
}

/// A write that reached the store: the record with its id and time set.
#[derive(Debug, Clone)]
pub struct Written {
    pub key: u64,
    pub change: Change,
    pub record: IncidentRecord,
}

struct Pending {
    key: u64,
    dedup: String,
    change: Change,
    record: IncidentRecord,
}

/// See the module docs.
pub struct Recorder {
    writer: StoreWriter,
    metrics: Metrics,
    retention: Retention,
    retry: VecDeque<Pending>,
    /// Failed writes since the store last took one.
    failures: u64,
    /// Set when the store takes writes again after failing; read once by the caller.
    recovered: bool,
    /// Engine key → (row id, or -1 while unknown; dedup key) of open incidents.
    ids: HashMap<u64, (i64, String)>,
    replays: HashMap<i64, ReproReport>,
    last_prune: Instant,
}

impl Recorder {
    pub fn new(writer: StoreWriter, metrics: Metrics, retention: Retention) -> Self {
        Recorder {
            writer,
            metrics,
            retention,
            retry: VecDeque::new(),
            failures: 0,
            recovered: false,
            ids: HashMap::new(),
            replays: HashMap::new(),
            last_prune: Instant::now(),
        }
    }

    /// Whether the store takes writes (nothing waits for retry).
    pub fn healthy(&self) -> bool {
        self.failures == 0 && self.retry.is_empty()
    }

    /// True once after the store took writes again following failures.
    pub fn take_recovered(&mut self) -> bool {
        std::mem::take(&mut self.recovered)
    }

    /// The dedup key of the open incident `key`, if it was written (or tried) before.
    pub fn dedup_of(&self, key: u64) -> Option<&str> {
        self.ids.get(&key).map(|(_, d)| d.as_str())
    }

    /// The row id of the open incident `key`, if known.
    pub fn id_of(&self, key: u64) -> Option<i64> {
        self.ids.get(&key).map(|(id, _)| *id).filter(|id| *id >= 0)
    }

    /// The replay result attached to incident `id`, if one is remembered.
    pub fn replay_of(&self, id: i64) -> Option<&ReproReport> {
        self.replays.get(&id)
    }

    /// Remembers a replay result for later updates of the same incident.
    pub fn remember_replay(&mut self, id: i64, report: ReproReport) {
        if self.replays.len() >= MAX_REPLAYS {
            self.replays.clear();
        }
        self.replays.insert(id, report);
    }

    fn note_written(&mut self, key: u64, id: i64, dedup: String, closed: bool) {
        if closed {
            self.ids.remove(&key);
        } else {
            self.ids.insert(key, (id, dedup));
        }
    }

    fn note_failure(&mut self, e: &StoreError) {
        self.failures += 1;
        self.metrics.store_errors.with_label_values(&["put"]).inc();
        if self.failures == 1 || self.failures % 100 == 0 {
            tracing::error!(error = %format!("{e:#}"), failures = self.failures, "Cannot write an incident to the store; positions are not acknowledged until it works again.");
        }
    }

    async fn put(&self, dedup: &str, rec: &IncidentRecord) -> Result<IncidentRecord, StoreError> {
        let (id, created) = self.writer.put(dedup, now_ms(), rec).await?;
        let mut shown = rec.clone();
        shown.id = id;
        shown.time = rfc3339_ms(created);
        Ok(shown)
    }

    /// Writes one incident change under `dedup` (after whatever waits for retry). Returns every
    /// write that reached the store, oldest first; the change itself is queued for retry when
    /// the store refuses it.
    pub async fn record(
        &mut self,
        key: u64,
        dedup: String,
        change: Change,
        record: IncidentRecord,
    ) -> Vec<Written> {
        let mut out = self.retry_pending().await;
        if !self.retry.is_empty() {
            self.queue(Pending {
                key,
                dedup,
                change,
                record,
            });
            return out;
        }
        let closed = !record.open;
        match self.put(&dedup, &record).await {
            Ok(shown) => {
                self.failures = 0;
                self.note_written(key, shown.id, dedup, closed);
                out.push(Written {
                    key,
                    change,
                    record: shown,
                });
            }
            Err(e) => {
                self.note_failure(&e);
                self.queue(Pending {
                    key,
                    dedup,
                    change,
                    record,
                });
            }
        }
        out
    }

    fn queue(&mut self, p: Pending) {
        if p.record.open {
            self.ids.insert(p.key, (-1, p.dedup.clone()));
        } else {
            self.ids.remove(&p.key);
        }
        // A newer version of the same incident replaces the pending one; a pending first
        // version stays "opened" so that its sinks still see it as new.
        let mut change = p.change;
        if let Some(pos) = self.retry.iter().position(|q| q.dedup == p.dedup) {
            if let Some(old) = self.retry.remove(pos) {
                if old.change == Change::Opened {
                    change = Change::Opened;
                }
            }
        }
        if self.retry.len() >= MAX_RETRY {
            self.retry.pop_front();
            self.metrics
                .store_errors
                .with_label_values(&["dropped"])
                .inc();
        }
        self.retry.push_back(Pending { change, ..p });
    }

    /// Retries pending writes in order, stopping at the first failure.
    pub async fn retry_pending(&mut self) -> Vec<Written> {
        let mut out = Vec::new();
        while let Some(p) = self.retry.front() {
            match self.put(&p.dedup, &p.record).await {
                Ok(shown) => {
                    if let Some(p) = self.retry.pop_front() {
                        let closed = !p.record.open;
                        self.note_written(p.key, shown.id, p.dedup, closed);
                        out.push(Written {
                            key: p.key,
                            change: p.change,
                            record: shown,
                        });
                    }
                }
                Err(e) => {
                    self.note_failure(&e);
                    return out;
                }
            }
        }
        if self.failures > 0 {
            tracing::info!(
                failures = self.failures,
                "The incident store accepts writes again; retried writes are in."
            );
            self.failures = 0;
            self.recovered = true;
        }
        out
    }

    /// Replaces a stored incident by id (replay results, correlation links). A failure is
    /// counted and logged; the next update of an open incident carries the change again.
    pub async fn replace(&mut self, record: &IncidentRecord) -> bool {
        match self.writer.replace(record.id, record).await {
            Ok(found) => found,
            Err(e) => {
                self.metrics.store_errors.with_label_values(&["put"]).inc();
                tracing::warn!(incident = record.id, error = %format!("{e:#}"), "Could not update a stored incident.");
                false
            }
        }
    }

    /// Reads a stored incident (through the writer, so it sees the latest writes).
    pub async fn get(&mut self, id: i64) -> Option<IncidentRecord> {
        match self.writer.get(id).await {
            Ok(r) => r,
            Err(e) => {
                self.metrics.store_errors.with_label_values(&["get"]).inc();
                tracing::warn!(incident = id, error = %format!("{e:#}"), "Could not read a stored incident.");
                None
            }
        }
    }

    /// Applies retention when it is due (every minute).
    pub async fn prune_if_due(&mut self, now: Instant) {
        if now.duration_since(self.last_prune) < PRUNE_EVERY {
            return;
        }
        self.last_prune = now;
        let r = &self.retention;
        match self
            .writer
            .prune(now_ms(), r.max_age, r.max_count, r.max_store_bytes)
            .await
        {
            Ok(p) => {
                for (reason, n) in [("age", p.age), ("count", p.count), ("size", p.size)] {
                    if n > 0 {
                        self.metrics
                            .store_pruned
                            .with_label_values(&[reason])
                            .inc_by(n as u64);
                    }
                }
            }
            Err(e) => {
                self.metrics
                    .store_errors
                    .with_label_values(&["prune"])
                    .inc();
                tracing::warn!(error = %format!("{e:#}"), "Pruning the incident store failed.");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::incidents::store::{test_record, Store, WriterConfig};

    fn recorder(dir: &std::path::Path) -> (Recorder, Metrics) {
        let (w, _t) =
            StoreWriter::spawn(Store::open(dir).unwrap(), &WriterConfig::default()).unwrap();
        let m = Metrics::new();
        let r = Recorder::new(
            w,
            m.clone(),
            Retention {
                max_age: Duration::from_secs(3600),
                max_count: 100,
                max_store_bytes: 1 << 30,
            },
        );
        (r, m)
    }

    fn open_record() -> IncidentRecord {
        let mut r = test_record();
        r.open = true;
        r
    }

    #[tokio::test]
    async fn writes_return_ids_and_updates_hit_the_same_row() {
        let dir = tempfile::tempdir().unwrap();
        let (mut r, _) = recorder(dir.path());
        let w = r
            .record(1, "f:1:0".into(), Change::Opened, open_record())
            .await;
        assert_eq!(w.len(), 1);
        let id = w[0].record.id;
        assert!(id > 0 && !w[0].record.time.is_empty());
        assert_eq!(r.id_of(1), Some(id));
        let mut closed = open_record();
        closed.open = false;
        let w = r.record(1, "f:1:0".into(), Change::Closed, closed).await;
        assert_eq!(w[0].record.id, id);
        assert_eq!(r.id_of(1), None);
        assert!(r.healthy());
    }

    #[tokio::test]
    async fn a_refusing_store_queues_counts_and_replays_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let (mut r, m) = recorder(dir.path());
        r.record(1, "a".into(), Change::Opened, open_record()).await;
        // Make every write fail: a trigger that aborts inserts and updates.
        let admin = rusqlite::Connection::open(dir.path().join("incidents.sqlite")).unwrap();
        admin
            .execute_batch(
                "CREATE TRIGGER no_ins BEFORE INSERT ON incidents BEGIN SELECT RAISE(ABORT, 'disk full'); END;
                 CREATE TRIGGER no_upd BEFORE UPDATE ON incidents BEGIN SELECT RAISE(ABORT, 'disk full'); END;",
            )
            .unwrap();
        assert!(r
            .record(2, "b".into(), Change::Opened, open_record())
            .await
            .is_empty());
        assert!(r
            .record(2, "b".into(), Change::Updated, open_record())
            .await
            .is_empty());
        assert!(r
            .record(3, "c".into(), Change::Opened, open_record())
            .await
            .is_empty());
        assert!(!r.healthy());
        assert!(m.store_errors.with_label_values(&["put"]).get() >= 3);
        admin
            .execute_batch("DROP TRIGGER no_ins; DROP TRIGGER no_upd;")
            .unwrap();
        let w = r.retry_pending().await;
        // The two versions of "b" were merged into one pending write that stays "opened".
        let got: Vec<(u64, Change)> = w.iter().map(|w| (w.key, w.change)).collect();
        assert_eq!(got, vec![(2, Change::Opened), (3, Change::Opened)]);
        assert!(r.healthy());
        assert!(r.take_recovered());
        assert!(!r.take_recovered());
        assert!(r.id_of(2).is_some());
    }
}
