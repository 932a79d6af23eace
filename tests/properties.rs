//! Property tests of the untrusted-input path, run in-process through the library (the same
//! pieces `assertwatch scan` drives: `ChunkReader` → `StreamScanner` → `Engine`).
//!
//! 1. Wrapping: the same training-log lines as plain text, as Kubernetes CRI records (with `P`
//!    partial splits) and as Docker json-file records (with `log` values split without a trailing
//!    `\n`) give the same incidents; line numbers map to the first physical record of a line.
//! 2. Hostile bytes (NULs, invalid UTF-8, CR, long runs without a newline) never panic, every
//!    chunk respects the line bound, and the line count is exact.
//! 3. Read sizes: feeding the same bytes in reads of any size gives identical results.
//!
//! Failure blocks come from `../shared/corpus/training-log.jsonl` when it is present, plus a few
//! short synthetic ones written here. Case counts keep the whole file to a few seconds; raise
//! them with `PROPTEST_CASES`.

mod common;

use assertwatch::detect::DetectorSet;
use assertwatch::incidents::{Engine, EngineConfig};
use assertwatch::model::{Blame, Incident, Kind};
use assertwatch::sources::decode::Format;
use assertwatch::sources::reader::ChunkReader;
use assertwatch::sources::stream::StreamScanner;
use proptest::prelude::*;
use proptest::test_runner::Config as ProptestConfig;
use std::io::Read;
use std::sync::OnceLock;

// ---------------------------------------------------------------------------------------------
// The pipeline under test.

/// A reader that returns at most `step` bytes per call, so lines straddle reads.
struct Trickle<'a> {
    data: &'a [u8],
    step: usize,
}

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.step.min(buf.len()).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

/// How to feed the bytes.
#[derive(Debug, Clone, Copy)]
struct Feed {
    format: Format,
    max_line: usize,
    /// `ChunkReader`'s read size (it reads at least 4096 bytes at a time).
    read_size: usize,
    /// Bytes returned by each `read` of the underlying reader.
    step: usize,
}

#[derive(Debug, PartialEq)]
struct ScanResult {
    incidents: Vec<Incident>,
    lines: u64,
    truncated_lines: u64,
    malformed_lines: u64,
}

/// `PROPTEST_CASES` when set, else the default `n` chosen to keep this file fast.
fn cases(n: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(n)
}

fn detectors() -> &'static DetectorSet {
    static DET: OnceLock<DetectorSet> = OnceLock::new();
    DET.get_or_init(DetectorSet::builtin)
}

/// Lines in `input`: its newlines, plus an unterminated last line.
fn count_lines(input: &[u8]) -> u64 {
    let nl = input.iter().filter(|&&b| b == b'\n').count() as u64;
    nl + u64::from(input.last().is_some_and(|&b| b != b'\n'))
}

/// Runs the scan pipeline over `input` and checks the reader's chunk contract on the way.
fn scan(input: &[u8], feed: Feed) -> ScanResult {
    let det = detectors();
    let mut rd = ChunkReader::new(
        Trickle {
            data: input,
            step: feed.step,
        },
        feed.max_line,
        feed.read_size,
        0,
    );
    let max_line = feed.max_line.max(1);
    let read_size = feed.read_size.max(4096);
    let mut sc = StreamScanner::new(feed.format, feed.max_line, 1);
    let mut engine = Engine::new(EngineConfig::default());
    let mut findings = Vec::new();
    let mut incidents = Vec::new();
    let mut next = 0u64;
    while let Some(c) = rd.next_chunk().expect("reading a slice cannot fail") {
        let start = usize::try_from(c.offset).unwrap();
        assert!(c.offset >= next, "chunk at {} overlaps {next}", c.offset);
        assert_eq!(c.data, &input[start..start + c.data.len()], "chunk bytes");
        // Bounded look-ahead: after short reads the reader reads on while less than two reads'
        // worth is buffered (so that the input's unterminated last line joins the chunk before
        // it); otherwise a chunk is a carried partial line plus one read.
        assert!(
            c.data.len() <= (max_line + read_size).max(3 * read_size),
            "chunk of {}",
            c.data.len()
        );
        next = c.offset + c.data.len() as u64;
        if c.truncated {
            assert_eq!(
                c.data.len(),
                max_line,
                "a cut line is exactly max_line bytes"
            );
        } else if c.unterminated {
            // Complete lines, then the input's last line, without its newline.
            let last = c.data.rsplit(|b| *b == b'\n').next().unwrap_or_default();
            assert!(!last.is_empty() && last.len() <= max_line);
            assert_eq!(
                next,
                input.len() as u64,
                "only the input's end is unterminated"
            );
        } else {
            assert_eq!(
                c.data.last(),
                Some(&b'\n'),
                "a chunk ends on a line boundary"
            );
        }
        sc.feed(&c, det, 0, &mut findings);
        for f in findings.drain(..) {
            assert!(
                f.text.len() <= 3 * max_line,
                "finding of {} bytes",
                f.text.len()
            );
            engine.observe(0, f);
        }
        incidents.extend(engine.drain().into_iter().filter(|u| u.closed));
    }
    sc.finish(det, 0, &mut findings);
    for f in findings.drain(..) {
        engine.observe(0, f);
    }
    engine.flush_stream(0);
    incidents.extend(engine.drain().into_iter().filter(|u| u.closed));
    let stats = sc.stats();
    let lines = count_lines(input);
    assert_eq!(sc.line_count(), lines, "line count");
    for u in &incidents {
        let i = &u.incident;
        assert!(1 <= i.first_line && i.first_line <= i.last_line && i.last_line <= lines);
    }
    ScanResult {
        incidents: incidents.into_iter().map(|u| u.incident).collect(),
        lines: sc.line_count(),
        truncated_lines: stats.truncated_lines,
        malformed_lines: stats.malformed_lines,
    }
}

fn scan_default(input: &[u8], format: Format) -> ScanResult {
    scan(
        input,
        Feed {
            format,
            max_line: 1 << 20,
            read_size: 1 << 20,
            step: usize::MAX,
        },
    )
}

// ---------------------------------------------------------------------------------------------
// Input material.

/// Failure blocks: corpus training-log samples when present, and short synthetic ones.
fn blocks() -> &'static [Vec<String>] {
    static BLOCKS: OnceLock<Vec<Vec<String>>> = OnceLock::new();
    BLOCKS.get_or_init(|| {
        let mut out: Vec<Vec<String>> = SYNTHETIC
            .iter()
            .map(|b| b.lines().map(str::to_owned).collect())
            .collect();
        if let Some(dir) = common::corpus_dir() {
            let text = std::fs::read_to_string(dir.join("training-log.jsonl")).unwrap();
            for l in text.lines().filter(|l| !l.trim().is_empty()) {
                let s: serde_json::Value = serde_json::from_str(l).unwrap();
                let t = s["text"].as_str().unwrap();
                out.push(t.split('\n').map(str::to_owned).collect());
            }
        } else {
            assert!(
                !common::in_ci(),
                "the corpus (../shared/corpus) is required under CI"
            );
            eprintln!("corpus not found: synthetic blocks only");
        }
        out
    })
}

const SYNTHETIC: &[&str] = &[
    "/build/aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [3,0,0], thread: [7,0,0] Assertion `-sizes[i] <= index && index < sizes[i] && \"index out of bounds\"` failed.
/build/aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [3,0,0], thread: [8,0,0] Assertion `-sizes[i] <= index && index < sizes[i] && \"index out of bounds\"` failed.
Traceback (most recent call last):
  File \"/srv/job/train.py\", line 88, in <module>
    loss = run_step(model, batch)
  File \"/srv/job/train.py\", line 41, in run_step
    logits = model(batch[\"x\"])
RuntimeError: CUDA error: device-side assert triggered
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1.
Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
    "/build/aten/src/ATen/native/cuda/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], thread: [12,0,0] Assertion `t >= 0 && t < n_classes` failed.
Traceback (most recent call last):
  File \"/srv/job/fit.py\", line 12, in <module>
    loss.backward()
RuntimeError: CUDA error: device-side assert triggered",
    "Traceback (most recent call last):
  File \"/srv/job/train.py\", line 120, in <module>
    out = model(x)
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB of which 1.02 GiB is free.",
    "RuntimeError: CUDA error: an illegal memory access was encountered
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
    "[rank3]:[E1202 10:00:01.123456 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=77, OpType=ALLREDUCE, NumelIn=1024, NumelOut=1024, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.",
];

/// Ordinary training-log lines, with characters that need escaping in JSON.
const ORDINARY: &[&str] = &[
    "Epoch 3:  45%|#####     | 450/1000 [01:23<01:42,  5.36it/s, loss=0.4211]",
    "step 412 loss 1.2345 lr 3.0e-04 grad_norm 0.512 tokens/s 123456",
    "[rank0]: saving checkpoint to \"/ckpt/step_400\" ... done",
    "\tvalidation: acc=0.913 → best so far ✓",
    "data loader: C:\\datasets\\shard-0001.tar opened",
    "",
    "cuda available: True, device count: 8, using device cuda:3",
    "  warmup 10/100, lr=1e-05; note: \"quoted\" text",
];

#[derive(Debug, Clone)]
enum Segment {
    Block(usize),
    Ordinary(Vec<usize>),
}

/// A training log: failure blocks separated by runs of ordinary lines that are either short
/// (the blocks may group) or longer than the engine's 40-line gap (they never do), never near it.
fn log_lines() -> impl Strategy<Value = Vec<String>> {
    let n = blocks().len();
    let ordinary = prop_oneof![
        proptest::collection::vec(0..ORDINARY.len(), 0..4),
        proptest::collection::vec(0..ORDINARY.len(), 60..70),
    ];
    let segment = prop_oneof![
        (0..n).prop_map(Segment::Block),
        ordinary.prop_map(Segment::Ordinary),
    ];
    (
        proptest::collection::vec(0..ORDINARY.len(), 1..3),
        proptest::collection::vec(segment, 1..6),
    )
        .prop_map(|(head, segs)| {
            // Start with an ordinary line, as a job log does (it also fixes `auto` on plain).
            let mut out: Vec<String> = head.iter().map(|&i| ORDINARY[i].to_owned()).collect();
            for s in segs {
                match s {
                    Segment::Block(i) => out.extend(blocks()[i].iter().cloned()),
                    Segment::Ordinary(v) => out.extend(v.iter().map(|&i| ORDINARY[i].to_owned())),
                }
            }
            out
        })
}

// ---------------------------------------------------------------------------------------------
// Wrapping.

#[derive(Debug, Clone, Copy)]
enum Wrap {
    Cri,
    Docker,
}

const TS: &str = "2024-05-01T12:00:00.123456789Z";

/// Splits `line` into `parts` non-empty pieces at character boundaries chosen by `cuts`.
fn split_line(line: &str, cuts: &[usize]) -> Vec<String> {
    let bounds: Vec<usize> = (1..line.len())
        .filter(|&i| line.is_char_boundary(i))
        .collect();
    if bounds.is_empty() || cuts.is_empty() {
        return vec![line.to_owned()];
    }
    let mut at: Vec<usize> = cuts.iter().map(|c| bounds[c % bounds.len()]).collect();
    at.sort_unstable();
    at.dedup();
    let mut out = Vec::new();
    let mut prev = 0;
    for a in at {
        out.push(line[prev..a].to_owned());
        prev = a;
    }
    out.push(line[prev..].to_owned());
    out
}

/// Wraps `lines`; `splits` maps a line index to the cut points of that line. Returns the bytes
/// and, per logical line, the physical line (1-based) its first record is on.
fn wrap(lines: &[String], how: Wrap, splits: &[(usize, Vec<usize>)]) -> (Vec<u8>, Vec<u64>) {
    let mut out = Vec::new();
    let mut first = Vec::with_capacity(lines.len());
    let mut physical = 0u64;
    for (i, line) in lines.iter().enumerate() {
        let parts = match splits.iter().find(|(j, _)| *j == i) {
            Some((_, cuts)) => split_line(line, cuts),
            None => vec![line.clone()],
        };
        first.push(physical + 1);
        let last = parts.len() - 1;
        for (k, p) in parts.iter().enumerate() {
            physical += 1;
            match how {
                Wrap::Cri => {
                    let tag = if k == last { 'F' } else { 'P' };
                    out.extend(format!("{TS} stderr {tag} {p}\n").as_bytes());
                }
                Wrap::Docker => {
                    let log = if k == last {
                        format!("{p}\n")
                    } else {
                        p.clone()
                    };
                    let rec = serde_json::json!({"log": log, "stream": "stderr", "time": TS});
                    out.extend(serde_json::to_vec(&rec).unwrap());
                    out.push(b'\n');
                }
            }
        }
    }
    (out, first)
}

/// The fields a wrapped log must reproduce, with line numbers mapped through `map`.
#[derive(Debug, PartialEq)]
#[allow(dead_code)] // read through Debug in failure messages
struct Classified {
    kind: Kind,
    category: String,
    blame: Blame,
    assertion: Option<String>,
    kernel_file: Option<String>,
    python_frame: Option<String>,
    message: Option<String>,
    lines: Option<(u64, u64)>,
}

fn classify(incs: &[Incident], map: Option<&[u64]>) -> Vec<Classified> {
    incs.iter()
        .map(|i| Classified {
            kind: i.kind,
            category: i.category.clone(),
            blame: i.blame,
            assertion: i.assertion.clone(),
            kernel_file: i.kernel_file.clone(),
            python_frame: i.python_frame.clone(),
            message: i.message.clone(),
            lines: map.map(|m| {
                let at = |n: u64| m[usize::try_from(n - 1).unwrap()];
                (at(i.first_line), at(i.last_line))
            }),
        })
        .collect()
}

fn plain_bytes(lines: &[String]) -> Vec<u8> {
    let mut out = Vec::new();
    for l in lines {
        out.extend(l.as_bytes());
        out.push(b'\n');
    }
    out
}

/// Up to two lines to split, each at up to two points: at most four extra physical records.
fn split_plan() -> impl Strategy<Value = Vec<(usize, Vec<usize>)>> {
    proptest::collection::vec(
        (
            any::<usize>(),
            proptest::collection::vec(any::<usize>(), 1..3),
        ),
        0..3,
    )
}

fn check_wrapping(lines: &[String], how: Wrap, plan: &[(usize, Vec<usize>)]) {
    let plain = scan_default(&plain_bytes(lines), Format::Auto);
    let identity: Vec<u64> = (1..=lines.len() as u64).collect();
    let want_full = classify(&plain.incidents, Some(&identity));

    // Unsplit: same incidents, same line numbers.
    let (bytes, _) = wrap(lines, how, &[]);
    let got = scan_default(&bytes, Format::Auto);
    assert_eq!(
        classify(&got.incidents, Some(&identity)),
        want_full,
        "{how:?} unsplit"
    );
    assert_eq!(got.malformed_lines, 0);

    // Split records: same classification, line numbers at each line's first record.
    let plan: Vec<(usize, Vec<usize>)> = plan
        .iter()
        .map(|(i, c)| (i % lines.len(), c.clone()))
        .collect();
    let (bytes, first) = wrap(lines, how, &plan);
    // The engine's windows count logical lines, so split records group exactly like plain text.
    let got = scan_default(&bytes, Format::Auto);
    assert_eq!(
        classify(&got.incidents, None),
        classify(&plain.incidents, None),
        "{how:?} split {plan:?}"
    );
    // The wrapped line numbers are the plain ones mapped to each line's first record.
    let want_mapped = classify(&plain.incidents, Some(&first));
    let got_lines: Vec<Option<(u64, u64)>> = got
        .incidents
        .iter()
        .map(|i| Some((i.first_line, i.last_line)))
        .collect();
    let want_lines: Vec<Option<(u64, u64)>> = want_mapped.iter().map(|c| c.lines).collect();
    assert_eq!(
        got_lines, want_lines,
        "{how:?} split {plan:?}: line numbers"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(96), ..ProptestConfig::default() })]

    #[test]
    fn cri_wrapping_keeps_incidents(lines in log_lines(), plan in split_plan()) {
        check_wrapping(&lines, Wrap::Cri, &plan);
    }

    #[test]
    fn docker_wrapping_keeps_incidents(lines in log_lines(), plan in split_plan()) {
        check_wrapping(&lines, Wrap::Docker, &plan);
    }
}

/// Every block on its own, wrapped both ways, unsplit and with `split` applied; returns the
/// blocks whose incidents differ from the plain text's, with the difference.
fn wrap_every_block(split: impl Fn(&[String]) -> Vec<(usize, Vec<usize>)>) -> Vec<String> {
    let mut failures = Vec::new();
    for (n, block) in blocks().iter().enumerate() {
        let mut lines = vec![ORDINARY[0].to_owned()];
        lines.extend(block.iter().cloned());
        let plain = scan_default(&plain_bytes(&lines), Format::Auto);
        assert!(
            !plain.incidents.is_empty() || n >= SYNTHETIC.len(),
            "synthetic block {n} finds nothing"
        );
        let identity: Vec<u64> = (1..=lines.len() as u64).collect();
        let plan = split(&lines);
        for how in [Wrap::Cri, Wrap::Docker] {
            let (bytes, _) = wrap(&lines, how, &[]);
            let got = scan_default(&bytes, Format::Auto);
            let (got, want) = (
                classify(&got.incidents, Some(&identity)),
                classify(&plain.incidents, Some(&identity)),
            );
            if got != want {
                failures.push(format!(
                    "block {n} {how:?} unsplit:\n got {got:?}\nwant {want:?}"
                ));
            }
            let (bytes, first) = wrap(&lines, how, &plan);
            let got = scan_default(&bytes, Format::Auto);
            let mut got_c = classify(&got.incidents, None);
            for (c, i) in got_c.iter_mut().zip(&got.incidents) {
                c.lines = Some((i.first_line, i.last_line));
            }
            let want_c = classify(&plain.incidents, Some(&first));
            if got_c != want_c {
                failures.push(format!(
                    "block {n} {how:?} split:\n got {got_c:?}\nwant {want_c:?}"
                ));
            }
        }
    }
    failures
}

/// Container runtimes split only long lines (containerd and dockerd at 16 KiB): every block with
/// its longest line split in three gives the plain text's incidents.
#[test]
fn every_block_survives_wrapping() {
    let failures = wrap_every_block(|lines| {
        let longest = (0..lines.len())
            .max_by_key(|&i| lines[i].len())
            .unwrap_or(0);
        let len = lines[longest].len();
        vec![(longest, vec![len / 3, 2 * len / 3])]
    });
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Every line of every block split in two: the engine's windows (`traceback_attach_lines`,
/// `gap_lines`) count logical lines, so a traceback whose headline is 5 lines after its last frame
/// keeps its `python_frame` however the records in between are split. (Found by this test when
/// the windows counted physical records.)
#[test]
fn every_block_survives_every_line_split() {
    let failures = wrap_every_block(|lines| {
        (0..lines.len())
            .map(|i| (i, vec![lines[i].len() / 2]))
            .collect()
    });
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------
// Hostile bytes.

/// Pieces of hostile input: raw bytes, NUL runs, invalid UTF-8, CR, long newline-free runs,
/// and prefixes of every wrapped format so the decoders get half-valid records.
fn hostile() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..64),
        (1usize..64).prop_map(|n| vec![0u8; n]),
        Just(b"\xff\xfe\xc3\x28\xe2\x82\n".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b"\r".to_vec()),
        (1usize..6000, any::<u8>()).prop_map(|(n, b)| vec![if b == b'\n' { b'x' } else { b }; n]),
        Just(format!("{TS} stderr P ").into_bytes()),
        Just(format!("{TS} stdout F ").into_bytes()),
        Just(b"{\"log\":\"RuntimeError: CUDA error: \\u0000".to_vec()),
        Just(b"{\"log\":\"x\",\"stream\":\"stderr\"}\n".to_vec()),
        Just(b"6,3964,206764307,-;NVRM: Xid (PCI:0000:3b:00): 79, \\xff\\x0\n".to_vec()),
        Just(b" SUBSYSTEM=pci\n".to_vec()),
        (0..SYNTHETIC.len()).prop_map(|i| SYNTHETIC[i].as_bytes().to_vec()),
    ];
    proptest::collection::vec(piece, 0..24).prop_map(|v| v.concat())
}

fn any_format() -> impl Strategy<Value = Format> {
    prop_oneof![
        Just(Format::Auto),
        Just(Format::Plain),
        Just(Format::Cri),
        Just(Format::DockerJson),
        Just(Format::Kmsg),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(256), ..ProptestConfig::default() })]

    #[test]
    fn hostile_bytes_never_panic_and_stay_bounded(
        input in hostile(),
        format in any_format(),
        max_line in 1usize..600,
        step in 1usize..5000,
    ) {
        scan(&input, Feed { format, max_line, read_size: 4096, step });
    }
}

// ---------------------------------------------------------------------------------------------
// Read sizes.

/// A log with corpus blocks, ordinary lines and hostile pieces mixed.
fn mixed() -> impl Strategy<Value = Vec<u8>> {
    (log_lines(), hostile(), any::<bool>()).prop_map(|(lines, junk, junk_first)| {
        let text = plain_bytes(&lines);
        if junk_first {
            [junk, text].concat()
        } else {
            [text, junk].concat()
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(128), ..ProptestConfig::default() })]

    #[test]
    fn any_read_size_gives_the_same_result(
        input in mixed(),
        format in any_format(),
        max_line in prop_oneof![Just(1usize << 20), 1usize..400],
        small in 1usize..200,
        medium in 200usize..9000,
    ) {
        let whole = scan(&input, Feed {
            format, max_line, read_size: 1 << 20, step: usize::MAX,
        });
        for (read_size, step) in [(4096, small), (4096, medium), (65536, medium)] {
            let got = scan(&input, Feed { format, max_line, read_size, step });
            prop_assert_eq!(&got, &whole, "read_size {} step {}", read_size, step);
        }
    }
}
