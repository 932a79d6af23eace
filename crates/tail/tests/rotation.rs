//! Scenario tests: each rotation style, restarts and crashes, bounds, and hostile inputs, run
//! against a real tailer on a temp directory.

mod common;

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::time::Duration;

use assertwatch_tail::{ResetKind, TailEvent};
use common::{expect, numbered, Harness};

const T: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rename_rotation_reads_old_file_to_the_end() {
    let mut h = Harness::new(&["*.log"], &[]);
    h.append("app.log", &numbered("a", 0..5));
    h.start();
    h.until_lines(5).await;
    // The writer still holds the old file after the rename and writes a little more.
    let mut old = OpenOptions::new()
        .append(true)
        .open(h.path("app.log"))
        .unwrap();
    fs::rename(h.path("app.log"), h.path("app.log.1")).unwrap();
    old.write_all(numbered("a", 5..8).as_bytes()).unwrap();
    h.append("app.log", &numbered("b", 0..4));
    h.until_lines(12).await;
    h.until(T, |h| {
        h.events
            .iter()
            .any(|e| matches!(e, TailEvent::Closed { .. }))
    })
    .await;
    let a: Vec<String> = h
        .texts()
        .into_iter()
        .filter(|t| t.starts_with("a-"))
        .collect();
    let b: Vec<String> = h
        .texts()
        .into_iter()
        .filter(|t| t.starts_with("b-"))
        .collect();
    assert_eq!(a, expect("a", 0..8));
    assert_eq!(b, expect("b", 0..4));
    assert_eq!(h.got.len(), 12);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renamed_file_matching_the_glob_keeps_its_id() {
    let mut h = Harness::new(&["app.log*"], &[]);
    h.append("app.log", &numbered("a", 0..3));
    h.start();
    h.until_lines(3).await;
    fs::rename(h.path("app.log"), h.path("app.log.1")).unwrap();
    h.append("app.log.1", &numbered("a", 3..5));
    h.append("app.log", &numbered("b", 0..2));
    h.until_lines(7).await;
    let first = h.got[0].file;
    let a: Vec<_> = h.got.iter().filter(|g| g.text.starts_with("a-")).collect();
    assert_eq!(a.len(), 5);
    assert!(a.iter().all(|g| g.file == first));
    h.until(T, |h| {
        h.events.iter().any(|e| {
            matches!(e, TailEvent::Renamed { file, new_path }
                if *file == first && new_path.ends_with("app.log.1"))
        })
    })
    .await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copytruncate_resets_and_rereads_from_zero() {
    let mut h = Harness::new(&["*.log"], &[]);
    h.append("app.log", &numbered("old", 0..20));
    h.start();
    h.until_lines(20).await;
    fs::copy(h.path("app.log"), h.path("app.log.1")).unwrap();
    OpenOptions::new()
        .write(true)
        .open(h.path("app.log"))
        .unwrap()
        .set_len(0)
        .unwrap();
    h.append("app.log", &numbered("new", 0..3));
    h.until_lines(23).await;
    assert_eq!(h.count_resets(ResetKind::Truncated), 1);
    assert_eq!(h.texts()[20..], expect("new", 0..3)[..]);
    assert_eq!(h.got[20].offset, 0);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copytruncate_detected_by_head_when_regrown_past_offset() {
    let mut h = Harness::new(&["*.log"], &[]);
    h.append("app.log", "short-0\n");
    h.start();
    h.until_lines(1).await;
    // Truncate and write more than before in one go: size never drops below our offset, but the
    // head changed.
    fs::write(h.path("app.log"), numbered("longer", 0..4)).unwrap();
    h.until_lines(5).await;
    assert_eq!(h.count_resets(ResetKind::Truncated), 1);
    assert_eq!(h.texts()[1..], expect("longer", 0..4)[..]);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_and_recreate_is_a_new_file() {
    let mut h = Harness::new(&["*.log"], &[]);
    h.append("app.log", &numbered("a", 0..3));
    h.start();
    h.until_lines(3).await;
    fs::remove_file(h.path("app.log")).unwrap();
    h.append("app.log", &numbered("b", 0..3));
    h.until_lines(6).await;
    assert_ne!(h.got[0].file, h.got[3].file);
    assert_eq!(h.got[3].offset, 0);
    h.until(T, |h| {
        h.events
            .iter()
            .any(|e| matches!(e, TailEvent::Closed { file } if *file == h.got[0].file))
    })
    .await;
    assert_eq!(h.got.len(), 6);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_resumes_and_reads_what_was_appended_while_down() {
    let mut h = Harness::new(&["*.log"], &[]);
    h.append("app.log", &numbered("a", 0..5));
    h.start();
    h.until_lines(5).await;
    h.stop().await;
    h.append("app.log", &numbered("a", 5..9));
    h.start();
    h.until_lines(9).await;
    h.drain_for(Duration::from_millis(100)).await;
    assert_eq!(h.texts(), expect("a", 0..9));
    // The second Opened carries the acknowledged position and line count.
    let opened: Vec<(u64, u64)> = h
        .events
        .iter()
        .filter_map(|e| match e {
            TailEvent::Opened { offset, lines, .. } => Some((*offset, *lines)),
            _ => None,
        })
        .collect();
    assert_eq!(opened, vec![(0, 0), (20, 5)]);
    assert_eq!(h.got[0].file, h.got[8].file);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_rotated_while_down_is_found_by_fingerprint() {
    let mut h = Harness::new(&["app.log*"], &[]);
    h.append("app.log", &numbered("a", 0..5));
    h.start();
    h.until_lines(5).await;
    h.stop().await;
    h.append("app.log", &numbered("a", 5..7));
    fs::rename(h.path("app.log"), h.path("app.log.1")).unwrap();
    h.append("app.log", &numbered("b", 0..3));
    h.start();
    h.until_lines(10).await;
    h.drain_for(Duration::from_millis(100)).await;
    let mut t = h.texts();
    t.sort();
    let mut want = [expect("a", 0..7), expect("b", 0..3)].concat();
    want.sort();
    assert_eq!(t, want);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_rereads_unacknowledged_lines_and_skips_nothing() {
    let mut h = Harness::new(&["*.log"], &[]);
    h.append("app.log", &numbered("a", 0..4));
    h.start();
    h.until_lines(4).await;
    // Let a checkpoint with all four acknowledged be written.
    tokio::time::sleep(Duration::from_millis(100)).await;
    h.ack_enabled = false;
    h.append("app.log", &numbered("a", 4..8));
    h.until_lines(8).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    h.crash().await;
    h.ack_enabled = true;
    h.append("app.log", &numbered("a", 8..10));
    h.start();
    // 4..8 come again (never acknowledged), then the new ones.
    h.until_lines(14).await;
    h.drain_for(Duration::from_millis(100)).await;
    let t = h.texts();
    assert_eq!(t[..8], expect("a", 0..8)[..]);
    assert_eq!(t[8..], expect("a", 4..10)[..]);
    let reopened = h
        .events
        .iter()
        .filter_map(|e| match e {
            TailEvent::Opened { offset, lines, .. } => Some((*offset, *lines)),
            _ => None,
        })
        .last();
    assert_eq!(reopened, Some((16, 4)));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partial_line_is_held_until_completed() {
    let mut h = Harness::new(&["*.log"], &[]);
    h.append("app.log", "one\ntw");
    h.start();
    h.until_lines(1).await;
    h.drain_for(Duration::from_millis(80)).await;
    assert_eq!(h.texts(), vec!["one"]);
    h.append("app.log", "o\nthree\n");
    h.until_lines(3).await;
    assert_eq!(h.texts(), vec!["one", "two", "three"]);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_long_lines_keep_only_their_head() {
    let mut h = Harness::new(&["*.log"], &[]);
    h.cfg.max_line_bytes = 16;
    h.cfg.read_bytes_per_pass = 8;
    let long = "x".repeat(100);
    h.append("app.log", &format!("a\n{long}\nb\n"));
    // A long line written in pieces, still growing when first seen.
    h.append("app.log", &"y".repeat(40));
    h.start();
    h.until_lines(3).await;
    h.append("app.log", &format!("{}\nc\n", "y".repeat(40)));
    h.until_lines(5).await;
    let want = vec![
        "a".to_string(),
        "x".repeat(16),
        "b".into(),
        "y".repeat(16),
        "c".into(),
    ];
    assert_eq!(h.texts(), want);
    assert!(h.got[1].truncated && h.got[3].truncated);
    assert_eq!(
        h.stats().sources[0]
            .truncated_lines
            .load(std::sync::atomic::Ordering::Relaxed),
        2
    );
    // After a restart nothing comes again: the truncated line was acknowledged past its newline.
    h.stop().await;
    h.start();
    h.drain_for(Duration::from_millis(150)).await;
    assert_eq!(h.got.len(), 5);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_descriptors_stay_bounded_with_many_files() {
    let mut h = Harness::new(&["*.log"], &[]);
    h.cfg.max_open_files = 4;
    for i in 0..40 {
        h.append(&format!("f{i:02}.log"), &format!("f{i:02}-0\n"));
    }
    h.start();
    h.until_lines(40).await;
    let mut max_open = 0;
    for round in 1..4 {
        for i in 0..40 {
            h.append(&format!("f{i:02}.log"), &format!("f{i:02}-{round}\n"));
        }
        let want = 40 * (round + 1);
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while h.got.len() < want && tokio::time::Instant::now() < deadline {
            h.drain_for(Duration::from_millis(20)).await;
            max_open = max_open.max(
                h.stats()
                    .open_files
                    .load(std::sync::atomic::Ordering::Relaxed),
            );
        }
    }
    assert_eq!(h.got.len(), 160);
    assert!(max_open <= 4, "{max_open} descriptors open");
    for i in 0..40 {
        let p = format!("f{i:02}");
        let t: Vec<String> = h
            .texts()
            .into_iter()
            .filter(|t| t.starts_with(&p))
            .collect();
        assert_eq!(t, expect(&p, 0..4));
    }
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn directory_and_unreadable_matches_are_reported_not_fatal() {
    let mut h = Harness::new(&["*.log"], &[]);
    fs::create_dir(h.path("dir.log")).unwrap();
    h.append("locked.log", "secret\n");
    let mut perms = fs::metadata(h.path("locked.log")).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o000);
    fs::set_permissions(h.path("locked.log"), perms).unwrap();
    // Root reads anything; then the locked file is simply read.
    let enforced = fs::File::open(h.path("locked.log")).is_err();
    h.append("ok.log", "fine\n");
    h.start();
    h.until(T, |h| h.texts().contains(&"fine".to_string()))
        .await;
    h.drain_for(Duration::from_millis(150)).await;
    let errors: Vec<String> = h
        .events
        .iter()
        .filter_map(|e| match e {
            TailEvent::Error { path, .. } => Some(path.file_name()?.to_str()?.to_owned()),
            _ => None,
        })
        .collect();
    // Each bad path is reported once, not on every rescan.
    assert_eq!(errors.iter().filter(|p| *p == "dir.log").count(), 1);
    if enforced {
        assert_eq!(errors.iter().filter(|p| *p == "locked.log").count(), 1);
    }
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn checkpoint_write_failure_is_counted_and_retried() {
    let mut h = Harness::new(&["*.log"], &[]);
    let ck = h.cfg.checkpoint_path.clone();
    fs::create_dir_all(ck.parent().unwrap()).unwrap();
    // A directory where the tmp file goes makes every write fail, as a full disk would.
    let tmp = std::path::PathBuf::from(format!("{}.tmp", ck.display()));
    fs::create_dir(&tmp).unwrap();
    h.append("app.log", &numbered("a", 0..3));
    h.start();
    h.until_lines(3).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let errs = h
        .stats()
        .checkpoint_write_errors
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(errs > 0);
    fs::remove_dir(&tmp).unwrap();
    h.append("app.log", &numbered("a", 3..4));
    h.until_lines(4).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    h.stop().await;
    let text = fs::read_to_string(&ck).unwrap();
    assert!(text.contains(r#""offset":16"#), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_at_end_skips_existing_content_only_on_first_start() {
    let mut h = Harness::new(&["*.log"], &[]);
    h.cfg.start_at_end = true;
    h.append("app.log", &numbered("old", 0..3));
    h.start();
    h.drain_for(Duration::from_millis(100)).await;
    assert!(h.got.is_empty());
    h.append("app.log", &numbered("new", 0..2));
    h.append("late.log", &numbered("late", 0..2));
    h.until_lines(4).await;
    h.stop().await;
    // Files created while down are read from 0 even with start_at_end.
    h.append("down.log", &numbered("down", 0..2));
    h.start();
    h.until_lines(6).await;
    h.drain_for(Duration::from_millis(100)).await;
    let mut t = h.texts();
    t.sort();
    let mut want = [
        expect("down", 0..2),
        expect("late", 0..2),
        expect("new", 0..2),
    ]
    .concat();
    want.sort();
    assert_eq!(t, want);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reused_inode_with_other_content_is_a_new_file() {
    let mut h = Harness::new(&["*.log"], &[]);
    h.append("app.log", &numbered("a", 0..3));
    h.start();
    h.until_lines(3).await;
    h.stop().await;
    // Same inode, different head (as when the inode is handed to a new file): read from 0.
    fs::write(h.path("app.log"), numbered("z", 0..6)).unwrap();
    h.start();
    h.until_lines(9).await;
    assert_eq!(h.texts()[3..], expect("z", 0..6)[..]);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_content_is_delivered_bounded() {
    let mut h = Harness::new(&["*.bin"], &[]);
    h.cfg.max_line_bytes = 64;
    let mut data: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
    data.push(b'\n');
    fs::write(h.path("blob.bin"), &data).unwrap();
    h.start();
    h.until(T, |h| {
        !h.events
            .iter()
            .all(|e| !matches!(e, TailEvent::Data { .. }))
    })
    .await;
    h.drain_for(Duration::from_millis(100)).await;
    for e in &h.events {
        if let TailEvent::Data { data, .. } = e {
            assert!(data.len() <= 11_000);
        }
    }
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_right_after_a_reset_does_not_pair_old_offset_with_new_content() {
    let mut h = Harness::new(&["*.log"], &[]);
    h.cfg.checkpoint_interval = Duration::from_secs(3600);
    h.append("app.log", &numbered("old", 0..10));
    h.start();
    h.until_lines(10).await;
    OpenOptions::new()
        .write(true)
        .open(h.path("app.log"))
        .unwrap()
        .set_len(0)
        .unwrap();
    h.append("app.log", &numbered("new", 0..2));
    h.until_lines(12).await;
    // No periodic checkpoint ran; the one written at the reset must hold the new identity.
    h.crash().await;
    h.start();
    h.until_lines(14).await;
    h.drain_for(Duration::from_millis(100)).await;
    // The two new lines are re-read (never checkpointed as acknowledged) under the same id.
    assert_eq!(
        h.texts()[10..],
        [expect("new", 0..2), expect("new", 0..2)].concat()[..]
    );
    assert_eq!(h.got[12].file, h.got[0].file);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_right_after_discovery_keeps_the_file_id() {
    let mut h = Harness::new(&["*.log"], &[]);
    h.cfg.checkpoint_interval = Duration::from_secs(3600);
    h.start();
    h.append("app.log", &numbered("a", 0..3));
    h.until_lines(3).await;
    h.crash().await;
    h.start();
    h.until_lines(6).await;
    assert_eq!(h.got[0].file, h.got[3].file);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inotify_wakes_the_loop_long_before_the_rescan() {
    let mut h = Harness::new(&["*.log"], &[]);
    h.cfg.rescan_interval = Duration::from_secs(600);
    h.cfg.poll_interval = Duration::from_secs(600);
    h.start();
    // Let the first scan (of an empty directory) and the watch setup happen.
    h.drain_for(Duration::from_millis(100)).await;
    h.append("app.log", &numbered("a", 0..2));
    h.until(Duration::from_secs(5), |h| h.got.len() >= 2).await;
    h.append("app.log", &numbered("a", 2..4));
    h.until(Duration::from_secs(5), |h| h.got.len() >= 4).await;
    assert_eq!(h.texts(), expect("a", 0..4));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_files_under_a_small_descriptor_bound() {
    let mut h = Harness::new(&["*/*.log"], &[]);
    h.cfg.max_open_files = 8;
    for d in 0..20 {
        fs::create_dir(h.path(&format!("pod{d:02}"))).unwrap();
        for f in 0..50 {
            h.append(
                &format!("pod{d:02}/c{f:02}.log"),
                &format!("p{d:02}c{f:02}\n"),
            );
        }
    }
    h.start();
    let mut max_open = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while h.got.len() < 1000 && tokio::time::Instant::now() < deadline {
        h.drain_for(Duration::from_millis(20)).await;
        max_open = max_open.max(
            h.stats()
                .open_files
                .load(std::sync::atomic::Ordering::Relaxed),
        );
    }
    assert_eq!(h.got.len(), 1000);
    assert!(max_open <= 8, "{max_open} descriptors open");
    // A closed file renamed to a name the glob still matches is found again and read on.
    fs::rename(h.path("pod00/c00.log"), h.path("pod00/c00-rotated.log")).unwrap();
    h.append("pod00/c00-rotated.log", "p00c00-more\n");
    h.until_lines(1001).await;
    let mut t = h.texts();
    t.sort();
    t.dedup();
    assert_eq!(t.len(), 1001);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_with_a_half_written_line_delivers_it_once_completed() {
    let mut h = Harness::new(&["*.log"], &[]);
    h.append("app.log", "one\nhal");
    h.start();
    h.until_lines(1).await;
    h.drain_for(Duration::from_millis(60)).await;
    h.stop().await;
    h.append("app.log", "f\ntwo\n");
    h.start();
    h.until_lines(3).await;
    h.drain_for(Duration::from_millis(100)).await;
    assert_eq!(h.texts(), vec!["one", "half", "two"]);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_waits_for_the_consumer_and_ignores_stale_acks() {
    let mut h = Harness::new(&["*.log"], &[]);
    h.append("app.log", &numbered("old", 0..5));
    // The consumer holds back its acknowledgements (an incident is open in this file).
    h.ack_enabled = false;
    h.start();
    h.until_lines(5).await;
    let (file, old_end) = h
        .events
        .iter()
        .rev()
        .find_map(|e| match e {
            TailEvent::Data { file, end, .. } => Some((*file, *end)),
            _ => None,
        })
        .unwrap();
    OpenOptions::new()
        .write(true)
        .open(h.path("app.log"))
        .unwrap()
        .set_len(0)
        .unwrap();
    h.append("app.log", "new-0\n");
    h.drain_for(Duration::from_millis(200)).await;
    assert_eq!(h.got.len(), 5, "reset went ahead of the consumer");
    assert_eq!(h.count_resets(ResetKind::Truncated), 0);
    // The incident closes: everything is acknowledged, the reset follows.
    let acks = h.run.as_ref().unwrap().acks.clone();
    acks.ack(file, old_end, 5);
    h.ack_enabled = true;
    h.until_lines(6).await;
    assert_eq!(h.count_resets(ResetKind::Truncated), 1);
    // A late re-acknowledgement of the old content must not reach the checkpoint.
    acks.ack(file, old_end, 5);
    h.stop().await;
    h.start();
    h.until(T, |h| {
        h.events
            .iter()
            .filter(|e| matches!(e, TailEvent::Opened { .. }))
            .count()
            == 2
    })
    .await;
    let last_opened = h.events.iter().rev().find_map(|e| match e {
        TailEvent::Opened { offset, lines, .. } => Some((*offset, *lines)),
        _ => None,
    });
    assert_eq!(last_opened, Some((6, 1)));
    h.stop().await;
}
