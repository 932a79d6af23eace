//! `assertwatch scan`: one-shot detection over files or stdin, no daemon and no state.
//!
//! It drives the daemon's own pieces — [`ChunkReader`], [`StreamScanner`], [`DetectorSet`],
//! [`Engine`] — with line numbers as the only clock, and prints one record per incident in the
//! order the incidents begin.

use crate::detect::DetectorSet;
use crate::incidents::{Engine, EngineConfig};
use crate::model::Incident;
use crate::sources::decode::Format;
use crate::sources::reader::ChunkReader;
use crate::sources::stream::{ScanStats, StreamScanner};
use anyhow::Context;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::path::Path;

/// How `scan` prints incidents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFormat {
    Text { color: bool },
    Jsonl,
}

/// What the caller told `scan` about its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamHint {
    Auto,
    TrainingLog,
    KernelLog,
}

pub struct ScanOptions {
    pub stream: StreamHint,
    pub output: OutputFormat,
    pub max_line_bytes: usize,
    pub engine: EngineConfig,
}

/// The JSONL record of one incident (DESIGN.md `scan` contract, plus `file` and detail fields).
#[derive(Serialize)]
struct Record<'a> {
    file: &'a str,
    #[serde(flatten)]
    incident: &'a Incident,
    threads: u64,
}

/// Totals of one scan run, for the summary line and the exit status.
#[derive(Debug, Default)]
pub struct ScanSummary {
    pub incidents: u64,
    pub stats: ScanStats,
    pub unreadable: u64,
}

/// Scans each input (`-` is stdin) and writes incidents to `out`.
pub fn run(
    inputs: &[String],
    det: &DetectorSet,
    opts: &ScanOptions,
    out: &mut dyn Write,
) -> anyhow::Result<ScanSummary> {
    let mut summary = ScanSummary::default();
    for (idx, name) in inputs.iter().enumerate() {
        let reader: Box<dyn Read> = if name == "-" {
            Box::new(io::stdin().lock())
        } else {
            match std::fs::File::open(Path::new(name)) {
                Ok(f) => Box::new(f),
                Err(e) => {
                    eprintln!("assertwatch: {name}: {e}");
                    summary.unreadable += 1;
                    continue;
                }
            }
        };
        let display = if name == "-" {
            "<stdin>"
        } else {
            name.as_str()
        };
        scan_one(reader, display, idx as u64, det, opts, out, &mut summary)
            .with_context(|| format!("scanning {display}"))?;
    }
    Ok(summary)
}

fn scan_one(
    reader: Box<dyn Read>,
    name: &str,
    stream: u64,
    det: &DetectorSet,
    opts: &ScanOptions,
    out: &mut dyn Write,
    summary: &mut ScanSummary,
) -> anyhow::Result<()> {
    // Every stream hint reads the same way: the format (plain, CRI, Docker JSON, kmsg records)
    // is recognised from the input, and all rules run on every stream.
    let format = Format::Auto;
    let mut rd = ChunkReader::new(reader, opts.max_line_bytes, 1 << 20, 0);
    let mut sc = StreamScanner::new(format, opts.max_line_bytes, 1);
    let mut engine = Engine::new(opts.engine.clone());
    let mut findings = Vec::new();
    // Closed incidents wait here until no open incident can begin before them.
    let mut pending: BTreeMap<(u64, u64), Incident> = BTreeMap::new();
    loop {
        let chunk = match rd.next_chunk() {
            Ok(Some(c)) => c,
            Ok(None) => break,
            Err(e) => return Err(e).context("reading input"),
        };
        sc.feed(&chunk, det, 0, &mut findings);
        for f in findings.drain(..) {
            engine.observe(stream, f);
        }
        emit(&mut engine, &mut pending, false, name, opts, out, summary)?;
    }
    sc.finish(det, 0, &mut findings);
    for f in findings.drain(..) {
        engine.observe(stream, f);
    }
    engine.flush_stream(stream);
    emit(&mut engine, &mut pending, true, name, opts, out, summary)?;
    let st = sc.stats();
    summary.stats.lines += st.lines;
    summary.stats.bytes += st.bytes;
    summary.stats.truncated_lines += st.truncated_lines;
    summary.stats.malformed_lines += st.malformed_lines;
    Ok(())
}

fn emit(
    engine: &mut Engine,
    pending: &mut BTreeMap<(u64, u64), Incident>,
    all: bool,
    name: &str,
    opts: &ScanOptions,
    out: &mut dyn Write,
    summary: &mut ScanSummary,
) -> io::Result<()> {
    for u in engine.drain() {
        if u.closed {
            pending.insert((u.incident.first_line, u.key), u.incident);
        }
    }
    let horizon = if all {
        u64::MAX
    } else {
        engine.min_open_first_line().unwrap_or(u64::MAX)
    };
    while let Some(entry) = pending.first_entry() {
        if entry.key().0 >= horizon {
            break;
        }
        let inc = entry.remove();
        summary.incidents += 1;
        write_incident(&inc, name, opts.output, out)?;
    }
    Ok(())
}

fn write_incident(
    inc: &Incident,
    file: &str,
    fmt: OutputFormat,
    out: &mut dyn Write,
) -> io::Result<()> {
    let threads = inc.assert_sites.iter().map(|s| s.threads).sum();
    match fmt {
        OutputFormat::Jsonl => {
            let rec = Record {
                file,
                incident: inc,
                threads,
            };
            serde_json::to_writer(&mut *out, &rec).map_err(io::Error::other)?;
            out.write_all(b"\n")
        }
        OutputFormat::Text { color } => {
            let (b, r, dim) = if color {
                ("\x1b[1;31m", "\x1b[0m", "\x1b[2m")
            } else {
                ("", "", "")
            };
            writeln!(
                out,
                "{b}{} / {}{r}  blame: {}  {dim}{file}:{}-{}{r}",
                inc.kind, inc.category, inc.blame, inc.first_line, inc.last_line
            )?;
            if let Some(m) = &inc.message {
                writeln!(out, "  message:    {m}")?;
            }
            if let Some(a) = &inc.assertion {
                let at = inc
                    .kernel_file
                    .as_deref()
                    .map(|k| format!(" at {k}"))
                    .unwrap_or_default();
                writeln!(out, "  assertion:  {a}{at} ({threads} thread lines)")?;
            }
            if let Some(x) = inc.xid {
                writeln!(out, "  xid:        {x}")?;
            }
            if let Some(x) = inc.sxid {
                writeln!(
                    out,
                    "  sxid:       {x}{}",
                    inc.link.map(|l| format!(" (link {l})")).unwrap_or_default()
                )?;
            }
            if let (Some(p), true) = (&inc.pci, inc.sxid.is_some()) {
                writeln!(out, "  nvswitch:   {p}")?;
            } else if let Some(p) = &inc.pci {
                writeln!(
                    out,
                    "  gpu:        {p}{}",
                    inc.gpu_uuid
                        .as_deref()
                        .map(|u| format!(" ({u})"))
                        .unwrap_or_default()
                )?;
            }
            if let Some(p) = inc.pid {
                writeln!(
                    out,
                    "  pid:        {p}{}",
                    inc.process_name
                        .as_deref()
                        .map(|n| format!(" ({n})"))
                        .unwrap_or_default()
                )?;
            }
            if let Some(f) = &inc.python_frame {
                writeln!(
                    out,
                    "  python:     {f}  {dim}(as reported; asynchronous errors may point later){r}"
                )?;
            }
            writeln!(out, "  hint:       {}", inc.hint)?;
            writeln!(out)
        }
    }
}
