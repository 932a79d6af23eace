//! A consumer for tests: runs a real `Tailer` against a temp directory, processes its events the
//! way the daemon will (count lines, acknowledge in event order), and can stop, crash and restart
//! it while keeping the checkpoint file.

#![allow(dead_code)]

use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use assertwatch_tail::{
    AckHandle, FileId, ResetKind, TailConfig, TailError, TailEvent, TailSource, Tailer,
};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// One delivered line as the consumer saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Got {
    pub file: FileId,
    pub offset: u64,
    pub text: String,
    pub truncated: bool,
}

pub struct Running {
    pub rx: mpsc::Receiver<TailEvent>,
    pub acks: AckHandle,
    pub shutdown: CancellationToken,
    pub task: JoinHandle<Result<(), TailError>>,
    pub stats: std::sync::Arc<assertwatch_tail::TailStats>,
}

pub struct Harness {
    pub dir: tempfile::TempDir,
    pub cfg: TailConfig,
    pub run: Option<Running>,
    /// Every line processed, in order.
    pub got: Vec<Got>,
    /// Every event processed, in order.
    pub events: Vec<TailEvent>,
    /// Line count per file, as the daemon keeps it.
    pub lines: HashMap<FileId, u64>,
    /// Stop acknowledging (to simulate a consumer that lags before a crash).
    pub ack_enabled: bool,
    /// After a crash: how a consumer that knows which content each path holds rolls back. On
    /// `Opened`, lines of the lineage found at that path (by file name) at or past the announced
    /// offset are forgotten, because they will be delivered again.
    pub rollback: Option<Rollback>,
}

pub struct Rollback {
    pub lineage_at: HashMap<String, u64>,
    pub lineage_of: fn(&str) -> Option<u64>,
}

/// Fast settings for tests.
pub fn fast_config(dir: &Path, include: Vec<String>, exclude: Vec<String>) -> TailConfig {
    let mut cfg = TailConfig::new(
        vec![TailSource {
            name: "test".into(),
            include,
            exclude,
        }],
        dir.join("state/checkpoints.json"),
    );
    cfg.rescan_interval = Duration::from_millis(20);
    cfg.poll_interval = Duration::from_millis(10);
    cfg.checkpoint_interval = Duration::from_millis(20);
    cfg.rotate_wait = Duration::from_millis(50);
    cfg
}

impl Harness {
    /// A harness over `<tmp>/logs` with `include` patterns relative to it.
    pub fn new(include: &[&str], exclude: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("logs")).unwrap();
        let logs = dir.path().join("logs");
        let cfg = fast_config(
            dir.path(),
            include
                .iter()
                .map(|p| format!("{}/{p}", logs.display()))
                .collect(),
            exclude.iter().map(|s| s.to_string()).collect(),
        );
        Self {
            dir,
            cfg,
            run: None,
            got: Vec::new(),
            events: Vec::new(),
            lines: HashMap::new(),
            ack_enabled: true,
            rollback: None,
        }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join("logs").join(name)
    }

    pub fn append(&self, name: &str, text: &str) {
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.path(name))
            .unwrap();
        f.write_all(text.as_bytes()).unwrap();
    }

    pub fn start(&mut self) {
        assert!(self.run.is_none());
        let tailer = Tailer::new(self.cfg.clone()).unwrap();
        let acks = tailer.ack_handle();
        let stats = tailer.stats();
        let (tx, rx) = mpsc::channel(8);
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(tailer.run(tx, acks.clone(), shutdown.clone()));
        self.run = Some(Running {
            rx,
            acks,
            shutdown,
            task,
            stats,
        });
    }

    /// Graceful stop: the final checkpoint holds everything acknowledged.
    pub async fn stop(&mut self) {
        if let Some(r) = self.run.take() {
            r.shutdown.cancel();
            r.task.await.unwrap().unwrap();
        }
    }

    /// kill -9: no final checkpoint, unprocessed events are lost.
    pub async fn crash(&mut self) {
        if let Some(r) = self.run.take() {
            r.task.abort();
            let _ = r.task.await;
        }
    }

    pub fn stats(&self) -> &assertwatch_tail::TailStats {
        &self.run.as_ref().unwrap().stats
    }

    fn process(&mut self, ev: TailEvent) {
        let acks = self.run.as_ref().map(|r| r.acks.clone());
        match &ev {
            TailEvent::Opened {
                file,
                lines,
                path,
                offset,
                ..
            } => {
                self.lines.insert(*file, *lines);
                if let Some(rb) = &self.rollback {
                    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
                    if let Some(l) = rb.lineage_at.get(name) {
                        let of = rb.lineage_of;
                        self.got
                            .retain(|g| !(of(&g.text) == Some(*l) && g.offset >= *offset));
                    }
                }
            }
            TailEvent::Data {
                file,
                offset,
                end,
                data,
                truncated_head,
                ..
            } => {
                let n = self.lines.entry(*file).or_default();
                if *truncated_head {
                    assert!(!data.contains(&b'\n'));
                    self.got.push(Got {
                        file: *file,
                        offset: *offset,
                        text: String::from_utf8_lossy(data).into_owned(),
                        truncated: true,
                    });
                    *n += 1;
                } else {
                    assert_eq!(data.last(), Some(&b'\n'), "chunk ends inside a line");
                    assert_eq!(*end, offset + data.len() as u64);
                    let mut at = *offset;
                    for line in data.split_inclusive(|b| *b == b'\n') {
                        self.got.push(Got {
                            file: *file,
                            offset: at,
                            text: String::from_utf8_lossy(&line[..line.len() - 1]).into_owned(),
                            truncated: false,
                        });
                        at += line.len() as u64;
                        *n += 1;
                    }
                }
                let n = *n;
                if self.ack_enabled {
                    if let Some(a) = acks {
                        a.ack(*file, *end, n);
                    }
                }
            }
            TailEvent::Reset { file, .. } => {
                self.lines.insert(*file, 0);
            }
            TailEvent::Closed { file } => {
                self.lines.remove(file);
            }
            TailEvent::Renamed { .. } | TailEvent::Error { .. } => {}
        }
        self.events.push(ev);
    }

    /// Processes events until `done` holds, failing after `timeout`.
    pub async fn until(&mut self, timeout: Duration, mut done: impl FnMut(&Harness) -> bool) {
        let deadline = tokio::time::Instant::now() + timeout;
        while !done(self) {
            let r = self.run.as_mut().expect("tailer not running");
            match tokio::time::timeout_at(deadline, r.rx.recv()).await {
                Ok(Some(ev)) => self.process(ev),
                Ok(None) => panic!("tailer stopped"),
                Err(_) => panic!(
                    "timed out; got {:?}\nevents {:?}",
                    self.texts(),
                    self.events
                ),
            }
        }
    }

    /// Processes whatever arrives within `d`.
    pub async fn drain_for(&mut self, d: Duration) {
        let deadline = tokio::time::Instant::now() + d;
        loop {
            let r = self.run.as_mut().expect("tailer not running");
            match tokio::time::timeout_at(deadline, r.rx.recv()).await {
                Ok(Some(ev)) => self.process(ev),
                Ok(None) | Err(_) => return,
            }
        }
    }

    pub async fn until_lines(&mut self, n: usize) {
        self.until(Duration::from_secs(10), |h| h.got.len() >= n)
            .await;
    }

    pub fn texts(&self) -> Vec<String> {
        self.got.iter().map(|g| g.text.clone()).collect()
    }

    pub fn count_resets(&self, kind: ResetKind) -> usize {
        self.events
            .iter()
            .filter(|e| matches!(e, TailEvent::Reset { kind: k, .. } if *k == kind))
            .count()
    }
}

pub fn numbered(prefix: &str, range: std::ops::Range<usize>) -> String {
    range.map(|i| format!("{prefix}-{i}\n")).collect()
}

pub fn expect(prefix: &str, range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("{prefix}-{i}")).collect()
}
