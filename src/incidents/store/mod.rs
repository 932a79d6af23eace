//! The incident store: SQLite under the state dir (bundled, so nothing to install).
//!
//! Each incident has a dedup key derived from where its first evidence line sits in its source
//! (file fingerprint + byte offset, or boot id + kmsg sequence), so a restart that re-reads a log
//! updates the same row instead of creating a second incident. Retention prunes by age and count.
//! Calls here are blocking. The daemon writes only through [`StoreWriter`], a thread of its own
//! fed by a bounded queue, so a slow or full disk never holds an async worker; HTTP readers use
//! their own read-only connection ([`Store::open_read_only`]), which WAL mode lets read while the
//! writer writes.

mod writer;

pub use writer::{StoreWriter, WriterConfig};

use crate::model::IncidentRecord;
use rusqlite::{params, Connection, OptionalExtension};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("opening incident store {path}")]
    Open {
        path: PathBuf,
        #[source]
        source: rusqlite::Error,
    },
    #[error("incident store query failed")]
    Query(#[from] rusqlite::Error),
    #[error("incident record could not be encoded")]
    Encode(#[from] serde_json::Error),
    #[error("incident store lock poisoned")]
    Poisoned,
    /// The writer thread has stopped (shutdown, or it panicked).
    #[error("the incident store writer has stopped")]
    WriterGone,
}

/// Filters of `GET /api/v1/incidents`.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    pub since_ms: Option<i64>,
    pub kind: Option<String>,
    pub limit: usize,
}

pub struct Store {
    conn: Mutex<Connection>,
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS incidents (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    dedup_key TEXT NOT NULL UNIQUE,
    created_ms INTEGER NOT NULL,
    kind TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS incidents_created ON incidents(created_ms);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', '1');
";

impl Store {
    /// Opens (creating if needed) `state_dir/incidents.sqlite`.
    pub fn open(state_dir: &Path) -> Result<Store, StoreError> {
        let path = state_dir.join("incidents.sqlite");
        let conn = Connection::open(&path).map_err(|source| StoreError::Open {
            path: path.clone(),
            source,
        })?;
        conn.busy_timeout(Duration::from_secs(5))
            .map_err(|source| StoreError::Open {
                path: path.clone(),
                source,
            })?;
        // WAL keeps readers (the API) off the writer's back; NORMAL sync is durable across
        // process crashes, which is what kill -9 tests.
        conn.execute_batch("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;")
            .map_err(|source| StoreError::Open {
                path: path.clone(),
                source,
            })?;
        conn.execute_batch(SCHEMA)
            .map_err(|source| StoreError::Open { path, source })?;
        Ok(Store {
            conn: Mutex::new(conn),
        })
    }

    /// Opens `state_dir/incidents.sqlite` read-only, for the HTTP handlers: its own connection,
    /// so readers never wait for the writer's lock, and WAL mode lets them read while it writes.
    /// The writer must have created the database first.
    pub fn open_read_only(state_dir: &Path) -> Result<Store, StoreError> {
        use rusqlite::OpenFlags;
        let path = state_dir.join("incidents.sqlite");
        let conn = Connection::open_with_flags(
            &path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|source| StoreError::Open {
            path: path.clone(),
            source,
        })?;
        conn.busy_timeout(Duration::from_millis(500))
            .map_err(|source| StoreError::Open { path, source })?;
        Ok(Store {
            conn: Mutex::new(conn),
        })
    }

    /// An in-memory store (tests).
    pub fn in_memory() -> Result<Store, StoreError> {
        let conn = Connection::open_in_memory()?;
        conn.execute_batch(SCHEMA)?;
        Ok(Store {
            conn: Mutex::new(conn),
        })
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Connection>, StoreError> {
        self.conn.lock().map_err(|_| StoreError::Poisoned)
    }

    /// Inserts or updates the incident with `dedup_key`; returns its id and creation time (ms).
    pub fn put(
        &self,
        dedup_key: &str,
        created_ms: i64,
        rec: &IncidentRecord,
    ) -> Result<(i64, i64), StoreError> {
        let body = serde_json::to_string(rec)?;
        let conn = self.lock()?;
        // An explicit transaction, so that a failing commit (SQLITE_FULL on a full disk) is
        // reported. With `INSERT … RETURNING` read through `query_row`, the commit happens when
        // the statement is reset and its error is lost: the write silently rolls back.
        let tx = conn.unchecked_transaction()?;
        tx.execute(
            "INSERT INTO incidents(dedup_key, created_ms, kind, body) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT(dedup_key) DO UPDATE SET body = excluded.body, kind = excluded.kind",
            params![dedup_key, created_ms, rec.incident.kind.as_str(), body],
        )?;
        let row = tx.query_row(
            "SELECT id, created_ms FROM incidents WHERE dedup_key = ?1",
            params![dedup_key],
            |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)),
        )?;
        tx.commit()?;
        Ok(row)
    }

    /// Replaces the body of the incident `id` (a replay result or a correlation link added to a
    /// stored incident). Returns whether the row still exists.
    pub fn replace(&self, id: i64, rec: &IncidentRecord) -> Result<bool, StoreError> {
        let body = serde_json::to_string(rec)?;
        let conn = self.lock()?;
        let tx = conn.unchecked_transaction()?;
        let n = tx.execute(
            "UPDATE incidents SET body = ?2, kind = ?3 WHERE id = ?1",
            params![id, body, rec.incident.kind.as_str()],
        )?;
        tx.commit()?;
        Ok(n > 0)
    }

    /// Newest first, without excerpts.
    pub fn list(&self, f: &ListFilter) -> Result<Vec<IncidentRecord>, StoreError> {
        let conn = self.lock()?;
        let mut st = conn.prepare(
            "SELECT id, created_ms, body FROM incidents
             WHERE created_ms >= ?1 AND (?2 IS NULL OR kind = ?2)
             ORDER BY created_ms DESC, id DESC LIMIT ?3",
        )?;
        let limit = i64::try_from(f.limit).unwrap_or(i64::MAX);
        let rows = st.query_map(
            params![f.since_ms.unwrap_or(i64::MIN), f.kind, limit],
            |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, String>(2)?,
                ))
            },
        )?;
        let mut out = Vec::new();
        for row in rows {
            let (id, created, body) = row?;
            if let Ok(mut rec) = decode(id, created, &body) {
                rec.incident.excerpt.clear();
                out.push(rec);
            }
        }
        Ok(out)
    }

    pub fn get(&self, id: i64) -> Result<Option<IncidentRecord>, StoreError> {
        let conn = self.lock()?;
        let row = conn
            .query_row(
                "SELECT id, created_ms, body FROM incidents WHERE id = ?1",
                params![id],
                |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, i64>(1)?,
                        r.get::<_, String>(2)?,
                    ))
                },
            )
            .optional()?;
        Ok(match row {
            Some((id, created, body)) => decode(id, created, &body).ok(),
            None => None,
        })
    }

    pub fn count(&self) -> Result<u64, StoreError> {
        let conn = self.lock()?;
        Ok(conn.query_row("SELECT COUNT(*) FROM incidents", [], |r| r.get::<_, i64>(0))? as u64)
    }

    /// Deletes incidents older than `max_age`, beyond the newest `max_count`, and then the oldest
    /// until the live data is under `max_bytes`. SQLite reuses freed pages, so the file stops
    /// growing at about `max_bytes` (it is not shrunk). Returns the rows deleted per reason.
    pub fn prune(
        &self,
        now_ms: i64,
        max_age: Duration,
        max_count: u64,
        max_bytes: u64,
    ) -> Result<Pruned, StoreError> {
        let conn = self.lock()?;
        let cutoff = now_ms - i64::try_from(max_age.as_millis()).unwrap_or(i64::MAX);
        let age = conn.execute(
            "DELETE FROM incidents WHERE created_ms < ?1",
            params![cutoff],
        )?;
        let count = conn.execute(
            "DELETE FROM incidents WHERE id NOT IN (SELECT id FROM incidents ORDER BY created_ms DESC, id DESC LIMIT ?1)",
            params![i64::try_from(max_count).unwrap_or(i64::MAX)],
        )?;
        let mut size = 0;
        for _ in 0..32 {
            let used: i64 = conn.query_row(
                "SELECT (SELECT page_count FROM pragma_page_count()) - (SELECT freelist_count FROM pragma_freelist_count())",
                [],
                |r| r.get(0),
            )?;
            let page: i64 =
                conn.query_row("SELECT page_size FROM pragma_page_size()", [], |r| r.get(0))?;
            if u64::try_from(used.saturating_mul(page)).unwrap_or(0) <= max_bytes {
                break;
            }
            let rows: i64 = conn.query_row("SELECT COUNT(*) FROM incidents", [], |r| r.get(0))?;
            if rows == 0 {
                break;
            }
            size += conn.execute(
                "DELETE FROM incidents WHERE id IN (SELECT id FROM incidents ORDER BY created_ms ASC, id ASC LIMIT ?1)",
                params![(rows / 10).max(1)],
            )?;
        }
        Ok(Pruned { age, count, size })
    }
}

/// Rows deleted by one `prune`, per reason.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Pruned {
    pub age: usize,
    pub count: usize,
    pub size: usize,
}

fn decode(id: i64, created_ms: i64, body: &str) -> Result<IncidentRecord, serde_json::Error> {
    let mut rec: IncidentRecord = serde_json::from_str(body)?;
    rec.id = id;
    rec.time = rfc3339_ms(created_ms);
    Ok(rec)
}

/// Formats milliseconds since the Unix epoch as RFC 3339 UTC.
pub fn rfc3339_ms(ms: i64) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// A plain stored-incident value for tests across the crate.
#[cfg(test)]
pub(crate) fn test_record() -> IncidentRecord {
    use crate::model::{Blame, Incident, IncidentSource, Kind};
    IncidentRecord {
        id: 0,
        time: String::new(),
        node: "n".into(),
        source: IncidentSource::file("/x.log", 5),
        source_name: "jobs".into(),
        namespace: None,
        pod: None,
        container: None,
        gpu: None,
        related: vec![],
        training_job: None,
        caused_by: None,
        repro: None,
        open: false,
        slurm: Default::default(),
        kube: Default::default(),
        incident: Incident {
            kind: Kind::Oom,
            category: "unknown".into(),
            xid: None,
            sxid: None,
            link: None,
            pci: None,
            pid: None,
            assertion: None,
            kernel_file: None,
            python_frame: None,
            message: None,
            first_line: 1,
            last_line: 2,
            blame: Blame::Unknown,
            hint: "h".into(),
            process_name: None,
            gpu_uuid: None,
            block: None,
            thread: None,
            evidence_lines: 1,
            assert_sites: vec![],
            first_offset: Some(5),
            excerpt: vec!["line".into()],
            excerpt_truncated: false,
            first_at_ms: 0,
            anchor: None,
            root_cause: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Kind;

    fn rec(kind: Kind) -> IncidentRecord {
        let mut r = test_record();
        r.incident.kind = kind;
        r.incident.excerpt = vec!["line".into()];
        r
    }

    #[test]
    fn replace_rewrites_one_row_by_id() {
        let s = Store::in_memory().unwrap();
        let (id, _) = s.put("a", 1000, &rec(Kind::Oom)).unwrap();
        let mut r = rec(Kind::Oom);
        r.related = vec![9];
        assert!(s.replace(id, &r).unwrap());
        assert_eq!(s.get(id).unwrap().unwrap().related, vec![9]);
        assert!(!s.replace(id + 100, &r).unwrap());
        assert_eq!(s.count().unwrap(), 1);
    }

    #[test]
    fn same_key_updates_in_place() {
        let s = Store::in_memory().unwrap();
        let (a, _) = s.put("f:1:5", 1000, &rec(Kind::Oom)).unwrap();
        let (b, t) = s.put("f:1:5", 2000, &rec(Kind::Oom)).unwrap();
        assert_eq!((a, t), (b, 1000));
        assert_eq!(s.count().unwrap(), 1);
        let got = s.get(a).unwrap().unwrap();
        assert_eq!(got.incident.excerpt, vec!["line".to_owned()]);
        assert!(got.time.starts_with("1970-01-01T00:00:01"));
    }

    #[test]
    fn list_filters_and_orders_newest_first() {
        let s = Store::in_memory().unwrap();
        s.put("a", 1000, &rec(Kind::Oom)).unwrap();
        s.put("b", 2000, &rec(Kind::Xid)).unwrap();
        s.put("c", 3000, &rec(Kind::Oom)).unwrap();
        let all = s
            .list(&ListFilter {
                limit: 10,
                ..Default::default()
            })
            .unwrap();
        assert_eq!(all.len(), 3);
        assert!(all[0].time > all[2].time);
        assert!(all[0].incident.excerpt.is_empty());
        let oom = s
            .list(&ListFilter {
                limit: 10,
                kind: Some("oom".into()),
                since_ms: Some(1500),
            })
            .unwrap();
        assert_eq!(oom.len(), 1);
    }

    #[test]
    fn prune_by_count_and_age() {
        let s = Store::in_memory().unwrap();
        for i in 0..10 {
            s.put(&format!("k{i}"), 1000 * i, &rec(Kind::Oom)).unwrap();
        }
        let p = s
            .prune(10_000, Duration::from_secs(5), 3, u64::MAX)
            .unwrap();
        assert_eq!(s.count().unwrap(), 3);
        assert_eq!((p.age, p.count), (5, 2));
    }

    #[test]
    fn prune_by_size_keeps_the_newest() {
        let s = Store::in_memory().unwrap();
        let mut r = rec(Kind::Oom);
        r.incident.excerpt = vec!["x".repeat(4000); 10];
        for i in 0..200 {
            s.put(&format!("k{i}"), 1000 + i, &r).unwrap();
        }
        let p = s
            .prune(10_000, Duration::from_secs(3600), 100_000, 1 << 20)
            .unwrap();
        assert!(p.size > 0);
        let left = s.count().unwrap();
        assert!(left < 200 && left > 0, "{left}");
        let newest = s
            .list(&ListFilter {
                limit: 1,
                ..Default::default()
            })
            .unwrap();
        assert!(newest[0].time.ends_with("01.199Z"), "{}", newest[0].time);
    }
}
