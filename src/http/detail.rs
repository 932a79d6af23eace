//! `GET /incidents/{id}`: one incident as an HTML page — the failing line, what to do, the replay,
//! the assert sites, the excerpt and the related incidents. No JavaScript; every value that came
//! from a log, a path or a replay is HTML-escaped.

use super::page::{escape, head};
use crate::model::{Blame, IncidentRecord, IncidentSource, Kind, ReproReport};
use assertwatch_repro::Outcome;
use std::fmt::Write;

/// A related incident as the page lists it: its id, and what it is when the store still has it.
#[derive(Debug, Clone)]
pub struct Related {
    pub id: i64,
    /// `(time, kind, category)`, or `None` when the related incident was pruned.
    pub summary: Option<(String, Kind, String)>,
}

impl Related {
    pub fn of(id: i64, rec: Option<&IncidentRecord>) -> Related {
        Related {
            id,
            summary: rec.map(|r| (r.time.clone(), r.incident.kind, r.incident.category.clone())),
        }
    }
}

/// The detail page of `rec`, with `related` describing `rec.related` (in that order).
pub fn render(rec: &IncidentRecord, related: &[Related]) -> String {
    let i = &rec.incident;
    let mut h = String::new();
    head(&mut h, &format!("incident {} — {}", rec.id, i.kind));
    let _ = write!(
        h,
        "<p><a href=\"/\">← all incidents</a> · <a href=\"/api/v1/incidents/{id}\">raw JSON</a></p>\
<h1>Incident {id}: {kind} / {cat}</h1>\
<p>{time} on <code>{node}</code> · blame <b class={blame}>{blame}</b>{open}</p>",
        id = rec.id,
        kind = i.kind,
        cat = escape(&i.category),
        time = escape(&rec.time),
        node = escape(&rec.node),
        blame = i.blame,
        open = if rec.open {
            " · <b>still collecting lines</b>"
        } else {
            ""
        },
    );
    if let Some(m) = &i.message {
        let _ = write!(h, "<pre class=message>{}</pre>", escape(m));
    }
    failing_line(&mut h, rec);
    what_to_do(&mut h, rec);
    facts(&mut h, rec);
    assert_sites(&mut h, rec);
    replay(&mut h, rec.repro.as_ref());
    excerpt(&mut h, rec);
    related_list(&mut h, related);
    h.push_str("</body></html>\n");
    h
}

/// A small HTML page for an error status (bad id, unknown incident, store failure).
pub fn error_page(title: &str, message: &str) -> String {
    let mut h = String::new();
    head(&mut h, title);
    let _ = writeln!(
        h,
        "<h1>{}</h1><p>{}</p><p><a href=\"/\">← all incidents</a></p></body></html>",
        escape(title),
        escape(message)
    );
    h
}

/// CUDA reports a kernel's failure at a later API call unless launches are synchronous
/// (`CUDA_LAUNCH_BLOCKING=1`, <https://docs.nvidia.com/cuda/cuda-c-programming-guide/#concurrent-execution-between-host-and-device>),
/// so the traceback of these kinds points where the error surfaced, not where it happened.
fn reported_asynchronously(kind: Kind) -> bool {
    matches!(kind, Kind::DeviceAssert | Kind::CudaError)
}

fn failing_line(h: &mut String, rec: &IncidentRecord) {
    let i = &rec.incident;
    let replayed = rec.repro.as_ref().and_then(|r| r.python_frame.as_deref());
    let reported_label = if reported_asynchronously(i.kind) {
        "reported (asynchronous)"
    } else {
        "reported"
    };
    match (replayed, rec.repro.as_ref()) {
        (Some(frame), Some(r)) => {
            let _ = write!(
                h,
                "<section class=failing id=failing-line><h2>Failing line</h2>\
<p class=line><code>{}</code></p><p>found by the replay{}: outcome <b>{}</b>",
                escape(frame),
                r.mode
                    .map(|m| format!(" ({})", escape(m.as_str())))
                    .unwrap_or_default(),
                escape(r.outcome.as_str()),
            );
            if let Some(e) = &r.exception {
                let _ = write!(
                    h,
                    ", raising <code>{}: {}</code>",
                    escape(&e.kind),
                    escape(&e.message)
                );
            }
            h.push_str("</p>");
            if let Some(f) = &i.python_frame {
                let _ = write!(
                    h,
                    "<p class=async>{reported_label}: <code>{}</code> — where the log's traceback \
pointed{}</p>",
                    escape(f),
                    if reported_asynchronously(i.kind) {
                        "; the error surfaced there, after the kernel had already failed"
                    } else {
                        ""
                    }
                );
            }
            h.push_str("</section>");
        }
        _ => {
            if let Some(f) = &i.python_frame {
                let _ = write!(
                    h,
                    "<section class=failing id=failing-line><h2>Failing line</h2>\
<p class=line><code>{}</code></p><p class=async>{reported_label}: from the log's traceback",
                    escape(f)
                );
                if reported_asynchronously(i.kind) {
                    h.push_str(
                        ". CUDA reports kernel errors at a later call, so the line that failed may \
be earlier; a replay in <code>sync-gpu</code> mode locates it.",
                    );
                }
                h.push_str("</p></section>");
            }
        }
    }
}

fn what_to_do(h: &mut String, rec: &IncidentRecord) {
    let i = &rec.incident;
    let _ = write!(h, "<h2>What to do</h2><p>{}</p>", escape(&i.hint));
    if i.blame == Blame::Hardware {
        h.push_str(
            "<p>The evidence points at the GPU or the node, not the program: check the GPU's \
Xid and ECC history before rerunning the job here.</p>",
        );
    }
    let Some(r) = &rec.repro else {
        return;
    };
    let at = r
        .python_frame
        .as_deref()
        .map(|f| format!(" at <code>{}</code>", escape(f)))
        .unwrap_or_default();
    let reason = r
        .reason
        .as_deref()
        .map(|x| format!(" (<code>{}</code>)", escape(x)))
        .unwrap_or_default();
    let advice = match r.outcome {
        Outcome::Reproduced => {
            format!("The replay failed the same way{at}: fix the program there, then rerun.")
        }
        Outcome::ReproducedCpuOnly => format!(
            "The replay failed on the CPU{at}, where errors are raised where they happen: the \
cause is in the program or its data, not the GPU."
        ),
        Outcome::NotReproduced => "The replay did not fail: the failure may be nondeterministic, \
depend on data the replay did not have, or come from the hardware."
            .to_owned(),
        Outcome::NoDebugState => "No debug state was recorded for this job, so nothing could be \
replayed: enable the job-side recorder to get the failing line next time."
            .to_owned(),
        Outcome::HarnessError => {
            format!("The replay harness failed before answering{reason}: see its attempts below.")
        }
        Outcome::Timeout => {
            format!("The replay ran out of time{reason}: see its attempts below.")
        }
        Outcome::Skipped => format!("The replay was skipped{reason}."),
    };
    let _ = write!(h, "<p>{advice}</p>");
}

/// One `<tr>` of a two-column fact table; `value` is already HTML.
fn row(h: &mut String, name: &str, value: &str) {
    let _ = write!(h, "<tr><th>{name}</th><td>{value}</td></tr>");
}

fn code(s: &str) -> String {
    format!("<code>{}</code>", escape(s))
}

fn coords(v: &[u32; 3]) -> String {
    format!("[{},{},{}]", v[0], v[1], v[2])
}

fn facts(h: &mut String, rec: &IncidentRecord) {
    let i = &rec.incident;
    h.push_str("<h2>Details</h2><table>");
    let source = match &rec.source {
        IncidentSource::File { path, offset } => {
            format!("{} at byte {offset}", code(path))
        }
        IncidentSource::Kernel { seq, .. } => format!("kernel log, record {seq}"),
        IncidentSource::Nvml { .. } => "NVML event".to_owned(),
    };
    row(
        h,
        "source",
        &format!(
            "{} ({source}), lines {}–{}, {} evidence line(s)",
            escape(&rec.source_name),
            i.first_line,
            i.last_line,
            i.evidence_lines
        ),
    );
    if let (Some(ns), Some(pod)) = (&rec.namespace, &rec.pod) {
        let mut v = format!("{}/{}", escape(ns), escape(pod));
        if let Some(c) = &rec.container {
            let _ = write!(v, " container {}", escape(c));
        }
        row(h, "pod", &v);
    }
    if let Some(job) = rec.slurm.describe() {
        row(h, "Slurm", &escape(&job));
    }
    if let Some(a) = &i.assertion {
        row(h, "assertion", &code(a));
    }
    if let Some(k) = &i.kernel_file {
        row(h, "kernel file", &code(k));
    }
    if let Some(n) = i.sxid {
        let link = i.link.map(|l| format!(", link {l}")).unwrap_or_default();
        row(h, "NVSwitch", &format!("SXid {n}{link}"));
    }
    if let (Some(b), Some(t)) = (&i.block, &i.thread) {
        row(
            h,
            "first thread",
            &format!("block {} thread {}", coords(b), coords(t)),
        );
    }
    if let Some(x) = i.xid {
        row(h, "Xid", &x.to_string());
    }
    let mut gpu = Vec::new();
    if let Some(g) = &rec.gpu {
        if let Some(n) = g.index {
            gpu.push(format!("GPU {n}"));
        }
        if let Some(u) = &g.uuid {
            gpu.push(code(u));
        }
        if let Some(p) = &g.pci_bus_id {
            gpu.push(code(p));
        }
    } else {
        if let Some(p) = &i.pci {
            gpu.push(code(p));
        }
        if let Some(u) = &i.gpu_uuid {
            gpu.push(code(u));
        }
    }
    if !gpu.is_empty() {
        row(h, "GPU", &gpu.join(" "));
    }
    if let Some(pid) = i.pid {
        let name = i
            .process_name
            .as_deref()
            .map(|n| format!(" {}", code(n)))
            .unwrap_or_default();
        row(h, "process", &format!("{pid}{name}"));
    }
    h.push_str("</table>");
}

fn assert_sites(h: &mut String, rec: &IncidentRecord) {
    let sites = &rec.incident.assert_sites;
    if sites.is_empty() {
        return;
    }
    h.push_str(
        "<h2>Assert sites</h2><table><tr><th>kernel file</th><th>assertion</th><th>threads</th>\
<th>first block</th><th>first thread</th></tr>",
    );
    for s in sites {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            s.kernel_file.as_deref().map(code).unwrap_or_default(),
            code(&s.assertion),
            s.threads,
            s.first_block.as_ref().map(coords).unwrap_or_default(),
            s.first_thread.as_ref().map(coords).unwrap_or_default(),
        );
    }
    h.push_str("</table>");
}

fn replay(h: &mut String, repro: Option<&ReproReport>) {
    h.push_str("<h2>Replay</h2>");
    let Some(r) = repro else {
        h.push_str(
            "<p class=muted>No replay result: replay is off, or it has not answered for this \
incident yet.</p>",
        );
        return;
    };
    h.push_str("<table>");
    row(
        h,
        "outcome",
        &format!("<b>{}</b>", escape(r.outcome.as_str())),
    );
    if let Some(x) = &r.reason {
        row(h, "reason", &code(x));
    }
    if let Some(m) = r.mode {
        row(h, "mode", &escape(m.as_str()));
    }
    if let Some(f) = &r.python_frame {
        row(h, "failing line", &code(f));
    }
    if let Some(e) = &r.exception {
        row(
            h,
            "exception",
            &format!("<code>{}: {}</code>", escape(&e.kind), escape(&e.message)),
        );
    }
    if let Some(k) = &r.kernel_assertion {
        let mut v = code(&k.location);
        if let Some(f) = &k.function {
            let _ = write!(v, " in {}", code(f));
        }
        if let Some(a) = &k.assertion {
            let _ = write!(v, ": {}", code(a));
        }
        if let Some(t) = k.threads {
            let _ = write!(v, " ({t} thread(s))");
        }
        row(h, "kernel assertion", &v);
    }
    if let Some(s) = r.step {
        row(h, "step", &s.to_string());
    }
    if let Some(d) = r.duration_s {
        row(h, "duration", &format!("{d:.3} s"));
    }
    if let Some(p) = &r.result_path {
        row(h, "result", &code(&p.display().to_string()));
    }
    h.push_str("</table>");
    if r.attempts.is_empty() {
        return;
    }
    h.push_str(
        "<h3>Attempts</h3><table><tr><th>mode</th><th>outcome</th><th>reason</th><th>step</th>\
<th>duration</th><th>manifest</th></tr>",
    );
    for a in &r.attempts {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.3} s</td><td>{}</td></tr>",
            escape(a.mode.as_str()),
            escape(a.outcome.as_str()),
            a.reason.as_deref().map(code).unwrap_or_default(),
            a.step,
            a.duration_s,
            code(&a.manifest.display().to_string()),
        );
    }
    h.push_str("</table>");
}

fn excerpt(h: &mut String, rec: &IncidentRecord) {
    let i = &rec.incident;
    if i.excerpt.is_empty() {
        return;
    }
    h.push_str("<h2>Excerpt</h2><pre class=excerpt>");
    for line in &i.excerpt {
        h.push_str(&escape(line));
        h.push('\n');
    }
    h.push_str("</pre>");
    if i.excerpt_truncated {
        h.push_str("<p class=muted>The excerpt is cut to its configured bound.</p>");
    }
}

fn related_list(h: &mut String, related: &[Related]) {
    if related.is_empty() {
        return;
    }
    h.push_str("<h2>Related incidents</h2><ul>");
    for r in related {
        let _ = write!(h, "<li><a href=\"/incidents/{id}\">#{id}</a>", id = r.id);
        match &r.summary {
            Some((time, kind, category)) => {
                let _ = write!(h, " {kind} / {} at {}", escape(category), escape(time));
            }
            None => h.push_str(" <span class=muted>(no longer stored)</span>"),
        }
        h.push_str("</li>");
    }
    h.push_str("</ul>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::incidents::store::test_record;
    use crate::model::{AssertSite, AttemptReport, ExceptionReport, KernelAssertionReport};
    use assertwatch_repro::Mode;

    const XSS: &str = "<script>alert(1)</script>";

    fn device_assert() -> IncidentRecord {
        let mut r = test_record();
        r.id = 7;
        r.incident.kind = Kind::DeviceAssert;
        r.incident.blame = Blame::Application;
        r.incident.python_frame = Some("/job/train.py:88".into());
        r.incident.kernel_file = Some(format!("{XSS}IndexKernel.cu"));
        r.incident.message = Some(format!("RuntimeError: {XSS}"));
        r.incident.excerpt = vec![format!("log {XSS} line"), "plain".into()];
        r.incident.assert_sites = vec![AssertSite {
            kernel_file: Some(format!("{XSS}.cu")),
            assertion: "idx < n".into(),
            threads: 2,
            first_block: Some([1, 0, 0]),
            first_thread: Some([0, 0, 0]),
        }];
        r
    }

    fn replayed() -> ReproReport {
        let mut r = ReproReport::skipped("x");
        r.outcome = Outcome::Reproduced;
        r.reason = None;
        r.mode = Some(Mode::SyncGpu);
        r.python_frame = Some("/job/model.py:41".into());
        r.exception = Some(ExceptionReport {
            kind: "RuntimeError".into(),
            message: format!("bad {XSS}"),
        });
        r.kernel_assertion = Some(KernelAssertionReport {
            location: "IndexKernel.cu:92".into(),
            function: Some(XSS.into()),
            assertion: None,
            threads: Some(4),
        });
        r.attempts = vec![AttemptReport {
            mode: Mode::SyncGpu,
            outcome: Outcome::Reproduced,
            reason: Some(XSS.into()),
            step: 3,
            duration_s: 1.5,
            manifest: "/state/m.json".into(),
            result_path: None,
        }];
        r
    }

    #[test]
    fn log_text_never_becomes_markup() {
        let mut rec = device_assert();
        rec.repro = Some(replayed());
        rec.node = XSS.into();
        rec.incident.category = XSS.into();
        rec.incident.hint = XSS.into();
        let html = render(&rec, &[]);
        assert!(!html.contains("<script"), "{html}");
        assert!(
            html.contains("&lt;/script&gt;IndexKernel.cu</code>"),
            "kernel file"
        );
        assert!(
            html.contains("RuntimeError: &lt;script&gt;alert(1)&lt;/script&gt;"),
            "message"
        );
        assert!(
            html.contains("log &lt;script&gt;alert(1)&lt;/script&gt; line\n"),
            "excerpt"
        );
    }

    #[test]
    fn the_reported_frame_is_the_failing_line_without_a_replay() {
        let html = render(&device_assert(), &[]);
        let section = &html[html.find("id=failing-line").unwrap()..];
        assert!(section.contains("<p class=line><code>/job/train.py:88</code>"));
        assert!(section.contains("reported (asynchronous)"));
        assert!(html.contains("No replay result"));
    }

    #[test]
    fn the_replayed_frame_comes_first_and_the_reported_one_is_contrasted() {
        let mut rec = device_assert();
        rec.repro = Some(replayed());
        let html = render(&rec, &[]);
        let section = &html[html.find("id=failing-line").unwrap()..];
        let section = &section[..section.find("</section>").unwrap()];
        let replayed_at = section.find("/job/model.py:41").unwrap();
        let reported_at = section.find("reported (asynchronous)").unwrap();
        assert!(replayed_at < reported_at, "{section}");
        assert!(section.contains("outcome <b>reproduced</b>"));
        assert!(section.contains("(sync-gpu)"));
        assert!(section.contains("RuntimeError: bad &lt;script&gt;"));
        assert!(section.contains("/job/train.py:88"));
        assert!(html.contains("The replay failed the same way at <code>/job/model.py:41</code>"));
        assert!(html.contains("<h3>Attempts</h3>"));
        assert!(html.contains("in <code>&lt;script&gt;"), "kernel assertion");
    }

    #[test]
    fn frames_of_synchronous_kinds_are_not_called_asynchronous() {
        let mut rec = device_assert();
        rec.incident.kind = Kind::Oom;
        let html = render(&rec, &[]);
        assert!(html.contains("reported: from the log"));
        assert!(!html.contains("asynchronous"));
    }

    #[test]
    fn related_incidents_link_to_their_pages() {
        let mut other = test_record();
        other.id = 3;
        other.time = "2026-12-02T10:00:00Z".into();
        other.incident.category = XSS.into();
        let html = render(
            &device_assert(),
            &[Related::of(3, Some(&other)), Related::of(9, None)],
        );
        assert!(html.contains("<a href=\"/incidents/3\">#3</a> oom / &lt;script&gt;"));
        assert!(html.contains("<a href=\"/incidents/9\">#9</a> <span class=muted>(no longer"));
        assert!(html.contains("<a href=\"/api/v1/incidents/7\">raw JSON</a>"));
    }

    #[test]
    fn assert_sites_are_listed_escaped() {
        let html = render(&device_assert(), &[]);
        assert!(html.contains("<h2>Assert sites</h2>"));
        assert!(html.contains("<code>&lt;script&gt;alert(1)&lt;/script&gt;.cu</code>"));
        assert!(html.contains("<td>[1,0,0]</td>"));
    }

    #[test]
    fn error_pages_escape_their_message() {
        let html = error_page("Bad request", &format!("{XSS:?} is not an incident id"));
        assert!(!html.contains("<script"));
        assert!(html.contains("<h1>Bad request</h1>"));
    }
}
