//! Model-based test of the tailer, after Vector's `file_watcher/tests`: proptest generates a
//! sequence of file-system actions (write a line, write half a line and finish it later, rotate by
//! rename, copytruncate, delete and recreate, restart the tailer, pause), the test applies each one
//! to a real directory followed by a real `Tailer`, and an in-memory model records which lines
//! each file lineage holds. At the end every complete line must have been delivered exactly once,
//! in order within its lineage, across all the restarts.
//!
//! `Crash` aborts the tailer without its final checkpoint, as `kill -9` would. Lines after the
//! last checkpointed acknowledgement then come again; the test's consumer rolls back to the
//! position announced in `Opened` (it knows which lineage each path holds), and the exactly-once
//! check applies to what it keeps. That checks the crash guarantee: each file resumes exactly at
//! an acknowledged position of its current content, nothing skipped.
//!
//! A lineage is one stretch of content: a file from its creation (or from a truncation) to its
//! next truncation or deletion. Every line carries its lineage number, so the consumer's view can
//! be grouped without trusting the tailer's ids.
//!
//! Copytruncate and delete lose unread lines by nature (the content is gone), so the test waits
//! for the tailer to catch up before those two, as a log rotator's users must accept. Rename
//! rotation and restarts need no such help: the rotated names still match the glob, and the
//! checkpoint file carries positions over.

mod common;

use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::time::Duration;

use assertwatch_tail::TailEvent;
use common::{Harness, Rollback};
use proptest::prelude::*;

const NAMES: [&str; 2] = ["a", "b"];

#[derive(Debug, Clone)]
enum Action {
    WriteLine {
        file: usize,
        len: usize,
    },
    WritePartial {
        file: usize,
        len: usize,
        pause_ms: u64,
    },
    RotateRename {
        file: usize,
    },
    CopyTruncate {
        file: usize,
    },
    DeleteRecreate {
        file: usize,
    },
    Restart,
    Crash,
    Pause {
        ms: u64,
    },
}

fn action() -> impl Strategy<Value = Action> {
    let file = 0..NAMES.len();
    prop_oneof![
        6 => (file.clone(), 0usize..40).prop_map(|(file, len)| Action::WriteLine { file, len }),
        2 => (file.clone(), 2usize..40, 0u64..30)
            .prop_map(|(file, len, pause_ms)| Action::WritePartial { file, len, pause_ms }),
        1 => file.clone().prop_map(|file| Action::RotateRename { file }),
        1 => file.clone().prop_map(|file| Action::CopyTruncate { file }),
        1 => file.prop_map(|file| Action::DeleteRecreate { file }),
        1 => Just(Action::Restart),
        1 => Just(Action::Crash),
        1 => (0u64..40).prop_map(|ms| Action::Pause { ms }),
    ]
}

#[derive(Default)]
struct Model {
    next_lineage: u64,
    /// Current lineage per logical name.
    current: HashMap<usize, u64>,
    /// Lineage held by each file name that exists.
    at_path: HashMap<String, u64>,
    /// Lines written, per lineage.
    written: HashMap<u64, Vec<String>>,
    rotations: u64,
}

impl Model {
    fn lineage(&mut self, file: usize) -> u64 {
        let l = match self.current.get(&file) {
            Some(l) => *l,
            None => self.new_lineage(file),
        };
        self.at_path.insert(format!("{}.log", NAMES[file]), l);
        l
    }

    fn new_lineage(&mut self, file: usize) -> u64 {
        self.next_lineage += 1;
        self.current.insert(file, self.next_lineage);
        self.next_lineage
    }

    fn next_line(&mut self, file: usize, len: usize) -> String {
        let l = self.lineage(file);
        let lines = self.written.entry(l).or_default();
        let text = format!("L{l}-{}-{}", lines.len(), "x".repeat(len));
        lines.push(text.clone());
        text
    }

    fn total(&self) -> usize {
        self.written.values().map(Vec::len).sum()
    }
}

fn lineage_of(text: &str) -> Option<u64> {
    text.strip_prefix('L')?.split('-').next()?.parse().ok()
}

fn path(h: &Harness, file: usize) -> std::path::PathBuf {
    h.path(&format!("{}.log", NAMES[file]))
}

fn append(h: &Harness, file: usize, bytes: &[u8]) {
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path(h, file))
        .unwrap();
    f.write_all(bytes).unwrap();
}

async fn catch_up(h: &mut Harness, m: &Model) {
    let want = m.total();
    h.until(Duration::from_secs(10), |h| h.got.len() >= want)
        .await;
}

async fn run_case(actions: Vec<Action>) {
    let mut h = Harness::new(&["*.log*"], &["*.copy"]);
    let mut m = Model::default();
    h.start();
    for a in actions {
        match a {
            Action::WriteLine { file, len } => {
                let line = m.next_line(file, len);
                append(&h, file, format!("{line}\n").as_bytes());
            }
            Action::WritePartial {
                file,
                len,
                pause_ms,
            } => {
                let line = m.next_line(file, len);
                let (first, rest) = line.split_at(line.len() / 2);
                append(&h, file, first.as_bytes());
                h.drain_for(Duration::from_millis(pause_ms)).await;
                append(&h, file, format!("{rest}\n").as_bytes());
            }
            Action::RotateRename { file } => {
                if path(&h, file).exists() {
                    m.rotations += 1;
                    let to_name = format!("{}.log.{}", NAMES[file], m.rotations);
                    fs::rename(path(&h, file), h.path(&to_name)).unwrap();
                    if let Some(l) = m.at_path.remove(&format!("{}.log", NAMES[file])) {
                        m.at_path.insert(to_name, l);
                    }
                    m.new_lineage(file);
                }
            }
            Action::CopyTruncate { file } => {
                if path(&h, file).exists() {
                    catch_up(&mut h, &m).await;
                    let copy = h.path(&format!("{}.copy", NAMES[file]));
                    fs::copy(path(&h, file), copy).unwrap();
                    OpenOptions::new()
                        .write(true)
                        .open(path(&h, file))
                        .unwrap()
                        .set_len(0)
                        .unwrap();
                    m.new_lineage(file);
                    m.lineage(file);
                }
            }
            Action::DeleteRecreate { file } => {
                if path(&h, file).exists() {
                    catch_up(&mut h, &m).await;
                    fs::remove_file(path(&h, file)).unwrap();
                    fs::write(path(&h, file), b"").unwrap();
                    m.new_lineage(file);
                    m.lineage(file);
                }
            }
            Action::Restart => {
                h.stop().await;
                h.start();
            }
            Action::Crash => {
                h.crash().await;
                let files: Vec<String> = fs::read_dir(h.path(""))
                    .unwrap()
                    .filter_map(|e| e.ok()?.file_name().into_string().ok())
                    .filter(|n| n.contains(".log"))
                    .collect();
                h.rollback = Some(Rollback {
                    lineage_at: m.at_path.clone(),
                    lineage_of,
                });
                let mark = h.events.len();
                h.start();
                h.until(Duration::from_secs(10), |h| {
                    h.events[mark..]
                        .iter()
                        .filter(|e| matches!(e, TailEvent::Opened { .. }))
                        .count()
                        >= files.len()
                })
                .await;
                h.rollback = None;
            }
            Action::Pause { ms } => h.drain_for(Duration::from_millis(ms)).await,
        }
        h.drain_for(Duration::from_millis(2)).await;
    }
    catch_up(&mut h, &m).await;
    // Anything extra (a duplicate) would arrive now.
    h.drain_for(Duration::from_millis(60)).await;
    h.stop().await;

    let mut delivered: HashMap<u64, Vec<String>> = HashMap::new();
    for g in &h.got {
        assert!(!g.truncated);
        let lineage = lineage_of(&g.text).unwrap_or_else(|| panic!("foreign line {:?}", g.text));
        delivered.entry(lineage).or_default().push(g.text.clone());
    }
    for (l, lines) in &m.written {
        assert_eq!(
            delivered.get(l).map(Vec::as_slice).unwrap_or(&[]),
            lines.as_slice(),
            "lineage {l}"
        );
    }
    assert_eq!(h.got.len(), m.total(), "a line was delivered twice");
}

proptest! {
    // 32 cases by default (a few seconds); PROPTEST_CASES=N runs more.
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(32),
        max_shrink_iters: 64,
        ..ProptestConfig::default()
    })]

    #[test]
    fn every_line_exactly_once(actions in proptest::collection::vec(action(), 1..24)) {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(run_case(actions));
    }
}
