//! The store's writer thread: every write and prune of the daemon goes through it.
//!
//! SQLite calls block, sometimes for seconds (a busy lock, a slow or full disk, an fsync). They
//! run here, on a thread of their own fed by a bounded queue, never on the async runtime's
//! workers: a stalled disk then holds back incident writes (and with them acknowledgements, which
//! is the point: nothing is acknowledged before it is stored) while `/metrics`, `/healthz` and the
//! API keep answering. When the queue is full, callers wait: backpressure, not loss.

use super::{Pruned, Store, StoreError};
use crate::model::IncidentRecord;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};

/// Requests waiting for the writer thread; beyond this, callers wait for room.
pub const DEFAULT_QUEUE: usize = 64;

/// Settings of the writer thread.
#[derive(Debug, Clone)]
pub struct WriterConfig {
    pub queue: usize,
}

impl Default for WriterConfig {
    fn default() -> Self {
        WriterConfig {
            queue: DEFAULT_QUEUE,
        }
    }
}

type Reply<T> = oneshot::Sender<Result<T, StoreError>>;

enum Request {
    Put {
        dedup_key: String,
        created_ms: i64,
        record: Box<IncidentRecord>,
        reply: Reply<(i64, i64)>,
    },
    Replace {
        id: i64,
        record: Box<IncidentRecord>,
        reply: Reply<bool>,
    },
    Get {
        id: i64,
        reply: Reply<Option<IncidentRecord>>,
    },
    Prune {
        now_ms: i64,
        max_age: Duration,
        max_count: u64,
        max_bytes: u64,
        reply: Reply<Pruned>,
    },
}

/// The async face of the writer thread. Cheap to clone; the thread ends when every clone is
/// dropped and the queue is drained.
#[derive(Clone)]
pub struct StoreWriter {
    tx: mpsc::Sender<Request>,
}

impl StoreWriter {
    /// Moves `store` onto a new thread named `store-writer`.
    ///
    /// # Errors
    /// When the thread cannot be created.
    pub fn spawn(
        store: Store,
        cfg: &WriterConfig,
    ) -> std::io::Result<(StoreWriter, std::thread::JoinHandle<()>)> {
        let (tx, mut rx) = mpsc::channel::<Request>(cfg.queue.max(1));
        let handle = std::thread::Builder::new()
            .name("store-writer".into())
            .spawn(move || {
                while let Some(req) = rx.blocking_recv() {
                    serve(&store, req);
                }
            })?;
        Ok((StoreWriter { tx }, handle))
    }

    async fn call<T>(&self, make: impl FnOnce(Reply<T>) -> Request) -> Result<T, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(make(reply))
            .await
            .map_err(|_| StoreError::WriterGone)?;
        answer.await.map_err(|_| StoreError::WriterGone)?
    }

    /// Inserts or updates the incident under `dedup_key`; returns its id and creation time (ms).
    pub async fn put(
        &self,
        dedup_key: &str,
        created_ms: i64,
        record: &IncidentRecord,
    ) -> Result<(i64, i64), StoreError> {
        let dedup_key = dedup_key.to_owned();
        let record = Box::new(record.clone());
        self.call(|reply| Request::Put {
            dedup_key,
            created_ms,
            record,
            reply,
        })
        .await
    }

    /// See [`Store::replace`].
    pub async fn replace(&self, id: i64, record: &IncidentRecord) -> Result<bool, StoreError> {
        let record = Box::new(record.clone());
        self.call(|reply| Request::Replace { id, record, reply })
            .await
    }

    /// One incident by id, read on the writer's connection (it sees its own latest writes).
    pub async fn get(&self, id: i64) -> Result<Option<IncidentRecord>, StoreError> {
        self.call(|reply| Request::Get { id, reply }).await
    }

    /// See [`Store::prune`].
    pub async fn prune(
        &self,
        now_ms: i64,
        max_age: Duration,
        max_count: u64,
        max_bytes: u64,
    ) -> Result<Pruned, StoreError> {
        self.call(|reply| Request::Prune {
            now_ms,
            max_age,
            max_count,
            max_bytes,
            reply,
        })
        .await
    }
}

fn serve(store: &Store, req: Request) {
    // A dropped reply means the caller gave up (shutdown); the write itself still happened.
    match req {
        Request::Put {
            dedup_key,
            created_ms,
            record,
            reply,
        } => {
            let _ = reply.send(store.put(&dedup_key, created_ms, &record));
        }
        Request::Replace { id, record, reply } => {
            let _ = reply.send(store.replace(id, &record));
        }
        Request::Get { id, reply } => {
            let _ = reply.send(store.get(id));
        }
        Request::Prune {
            now_ms,
            max_age,
            max_count,
            max_bytes,
            reply,
        } => {
            let _ = reply.send(store.prune(now_ms, max_age, max_count, max_bytes));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::incidents::store::test_record as record;

    #[tokio::test]
    async fn writes_through_the_thread_and_readers_see_them() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let (w, thread) = StoreWriter::spawn(store, &WriterConfig::default()).unwrap();
        let (id, _) = w.put("k", 1000, &record()).await.unwrap();
        assert!(w.get(id).await.unwrap().is_some());
        let reader = Store::open_read_only(dir.path()).unwrap();
        assert_eq!(reader.count().unwrap(), 1);
        drop(w);
        thread.join().unwrap();
    }

    #[tokio::test]
    async fn a_locked_database_blocks_the_writer_not_the_runtime_or_readers() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let (w, _thread) = StoreWriter::spawn(store, &WriterConfig::default()).unwrap();
        w.put("first", 1000, &record()).await.unwrap();
        // Another process holds the write lock: the writer waits (busy timeout), readers don't.
        let locker = rusqlite::Connection::open(dir.path().join("incidents.sqlite")).unwrap();
        locker.execute_batch("BEGIN IMMEDIATE").unwrap();
        let put = tokio::spawn({
            let w = w.clone();
            async move { w.put("second", 2000, &record()).await }
        });
        let t = tokio::time::Instant::now();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            !put.is_finished(),
            "the write should be waiting for the lock"
        );
        let reader = Store::open_read_only(dir.path()).unwrap();
        assert_eq!(reader.count().unwrap(), 1);
        assert!(t.elapsed() < Duration::from_secs(2));
        locker.execute_batch("COMMIT").unwrap();
        put.await.unwrap().unwrap();
        assert_eq!(reader.count().unwrap(), 2);
    }
}
