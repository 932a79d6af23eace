//! `GET /`: a small server-rendered page for people — GPUs, recent incidents with their hint and
//! reproduction result, each linked to its detail page. No JavaScript; every value from a log is
//! HTML-escaped.

use crate::model::IncidentRecord;
use std::fmt::Write;

/// One GPU line on the page.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct GpuRow {
    /// NVML index; null for a GPU known only from the kernel log.
    pub index: Option<u32>,
    pub name: String,
    pub uuid: String,
    pub pci_bus_id: String,
    /// `ok` or `lost` as NVML reports it; `unknown` without NVML.
    pub status: String,
    /// `healthy`, `degraded` or `unhealthy` (see docs/gpu-health.md).
    pub health: crate::health::HealthState,
    pub health_reason: Option<String>,
    /// When the health last changed (RFC 3339), if it ever did.
    pub health_since: Option<String>,
    /// The incident behind the current health, if any.
    pub health_incident: Option<i64>,
}

pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '&' => o.push_str("&amp;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// The shared CSS of the HTML pages. Inline, because the pages' Content-Security-Policy allows
/// inline styles and nothing else.
const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em;max-width:80em}\
.h-unhealthy{color:#b00;font-weight:bold}.h-degraded{color:#a60}.h-healthy{color:#070}\
table{border-collapse:collapse;width:100%}\
td,th{border-bottom:1px solid #ddd;padding:.3em .5em;text-align:left;vertical-align:top}\
th{white-space:nowrap}\
.application{color:#9a5b00}.hardware{color:#b00020}.driver{color:#6a1b9a}code{font-size:90%}\
pre{background:#f6f6f6;padding:.6em;overflow-x:auto;white-space:pre-wrap;word-break:break-all}\
.failing{border-left:5px solid #b00020;background:#fff5f5;padding:.4em 1em;margin:1em 0}\
.failing .line{font-size:1.4em;margin:.3em 0}.async{color:#555}.muted{color:#777}";

/// Opens an HTML document: doctype, title (escaped here) and the shared style.
pub(super) fn head(h: &mut String, title: &str) {
    let _ = write!(
        h,
        "<!doctype html><html><head><meta charset=utf-8><title>{}</title><style>{STYLE}</style></head><body>",
        escape(title)
    );
}

pub fn render(node: &str, gpus: &[GpuRow], incidents: &[IncidentRecord]) -> String {
    let mut h = String::new();
    head(&mut h, &format!("assertwatch — {node}"));
    let _ = write!(
        h,
        "<h1>assertwatch on {n}</h1><p><a href=/metrics>metrics</a> · <a href=/api/v1/incidents>incidents API</a></p>",
        n = escape(node)
    );
    h.push_str("<h2>GPUs</h2>");
    if gpus.is_empty() {
        h.push_str("<p>No GPUs reported (NVML unavailable or backend none).</p>");
    } else {
        h.push_str("<table><tr><th>GPU</th><th>name</th><th>UUID</th><th>bus id</th><th>status</th><th>health</th></tr>");
        for g in gpus {
            let health = g.health.as_str();
            let why = match (&g.health_reason, &g.health_since) {
                (Some(r), Some(t)) => format!(": {} (since {})", escape(r), escape(t)),
                (Some(r), None) => format!(": {}", escape(r)),
                _ => String::new(),
            };
            let link = g
                .health_incident
                .map(|id| format!(" <a href=/incidents/{id}>incident {id}</a>"))
                .unwrap_or_default();
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td><code>{}</code></td><td><code>{}</code></td><td>{}</td><td class=h-{health}>{health}{why}{link}</td></tr>",
                g.index.map(|i| i.to_string()).unwrap_or_else(|| "—".into()),
                escape(&g.name),
                escape(&g.uuid),
                escape(&g.pci_bus_id),
                escape(&g.status)
            );
        }
        h.push_str("</table>");
    }
    h.push_str("<h2>Recent incidents</h2>");
    if incidents.is_empty() {
        h.push_str("<p>None yet.</p>");
    } else {
        h.push_str("<table><tr><th>time</th><th>what</th><th>where</th><th>blame</th><th>what to do</th><th>reproduction</th></tr>");
        for r in incidents {
            let i = &r.incident;
            let mut what = format!("<b>{}</b> / {}", i.kind, escape(&i.category));
            if let Some(m) = &i.message {
                let _ = write!(what, "<br><code>{}</code>", escape(m));
            }
            let mut place = String::new();
            if let (Some(ns), Some(pod)) = (&r.namespace, &r.pod) {
                let _ = write!(place, "{}/{}<br>", escape(ns), escape(pod));
            }
            if let Some(job) = r.slurm.describe() {
                let _ = write!(place, "Slurm {}<br>", escape(&job));
            }
            if let Some(k) = &i.kernel_file {
                let _ = write!(place, "kernel <code>{}</code><br>", escape(k));
            }
            if let Some(f) = &i.python_frame {
                let _ = write!(place, "python <code>{}</code><br>", escape(f));
            }
            if let Some(p) = &i.pci {
                let _ = write!(place, "GPU <code>{}</code>", escape(p));
            }
            let repro = r
                .repro
                .as_ref()
                .map(|v| escape(v.outcome.as_str()))
                .unwrap_or_else(|| "—".into());
            let _ = write!(
                h,
                "<tr><td><a href=\"/incidents/{id}\">{t}</a><br><a class=muted href=\"/api/v1/incidents/{id}\">JSON</a></td><td>{what}</td><td>{place}</td><td class={b}>{b}</td><td>{hint}</td><td>{repro}</td></tr>",
                id = r.id,
                t = escape(&r.time),
                b = i.blame,
                hint = escape(&i.hint)
            );
        }
        h.push_str("</table>");
    }
    h.push_str("</body></html>\n");
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_log_text() {
        assert_eq!(escape("<script>&'\""), "&lt;script&gt;&amp;&#39;&quot;");
    }
}
