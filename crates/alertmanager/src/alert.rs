//! The alert value callers hand to the notifier, and its wire form for Alertmanager API v2.
//!
//! `POST /api/v2/alerts` takes a JSON array of `postableAlert` objects: `labels` (required),
//! `annotations`, `startsAt`, `endsAt` (both `date-time`, i.e. RFC 3339) and `generatorURL`
//! (`format: uri`). Sources: the OpenAPI spec in the Alertmanager repository,
//! `api/v2/openapi.yaml` (definitions `postableAlerts`, `postableAlert`, `alert`, `labelSet`),
//! and the Prometheus documentation page "Sending alerts"
//! (<https://prometheus.io/docs/alerting/latest/clients/>), which also says labels identify an
//! alert while annotations are replaced by the most recently received ones.
//!
//! [`Alert`] is the caller's value; [`WireAlert`] is what goes on the wire, with times already
//! rendered, so that the moment `endsAt` is computed is the moment the batch is built.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// One alert as the daemon wants Alertmanager to see it.
///
/// `labels` identify the alert in Alertmanager (deduplication and grouping), so they should be
/// stable for one incident; `annotations` carry the details and may change on every update.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alert {
    /// Identifying labels. Names must match `[a-zA-Z_][a-zA-Z0-9_]*`; values are cut to
    /// [`crate::MAX_LABEL_VALUE_BYTES`].
    pub labels: BTreeMap<String, String>,
    /// Free-form details (summary, description, runbook URL ...). Cut to the configured
    /// `max_annotation_bytes` each.
    pub annotations: BTreeMap<String, String>,
    /// When the condition began.
    pub starts_at: SystemTime,
    /// When the condition ended, if the caller already knows. `None` for an active alert: the
    /// notifier then sends `now + resolve_after` on every (re-)send.
    pub ends_at: Option<SystemTime>,
    /// Back-link to the thing that raised the alert (e.g. the incident page). Must be an absolute
    /// URL; anything else is left out of the alert and counted.
    pub generator_url: Option<String>,
}

impl Alert {
    /// An alert that started at `starts_at`, with no labels or annotations yet.
    pub fn new(starts_at: SystemTime) -> Self {
        Self {
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            starts_at,
            ends_at: None,
            generator_url: None,
        }
    }

    /// Adds (or replaces) a label.
    #[must_use]
    pub fn label(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.insert(name.into(), value.into());
        self
    }

    /// Adds (or replaces) an annotation.
    #[must_use]
    pub fn annotation(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.annotations.insert(name.into(), value.into());
        self
    }

    /// Sets the generator URL.
    #[must_use]
    pub fn generator_url(mut self, url: impl Into<String>) -> Self {
        self.generator_url = Some(url.into());
        self
    }

    /// The wire form, with `ends_at` as the `endsAt` to send.
    ///
    /// Alertmanager rejects an alert whose end lies before its start ("start time must be before
    /// end time"), so the end is never earlier than the start.
    pub(crate) fn to_wire(&self, ends_at: SystemTime) -> WireAlert {
        let ends_at = ends_at.max(self.starts_at);
        WireAlert {
            labels: self.labels.clone(),
            annotations: self.annotations.clone(),
            starts_at: rfc3339(self.starts_at),
            ends_at: rfc3339(ends_at),
            generator_url: self.generator_url.clone(),
        }
    }
}

/// One element of the `POST /api/v2/alerts` body (`postableAlert`).
///
/// A time that cannot be written as RFC 3339 (before year 0 or after 9999) is left out:
/// Alertmanager then uses the receive time for `startsAt` and its `resolve_timeout` for `endsAt`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WireAlert {
    /// Identifying labels.
    pub labels: BTreeMap<String, String>,
    /// Details.
    pub annotations: BTreeMap<String, String>,
    /// RFC 3339 start time.
    #[serde(rename = "startsAt", skip_serializing_if = "Option::is_none")]
    pub starts_at: Option<String>,
    /// RFC 3339 end time.
    #[serde(rename = "endsAt", skip_serializing_if = "Option::is_none")]
    pub ends_at: Option<String>,
    /// Back-link.
    #[serde(rename = "generatorURL", skip_serializing_if = "Option::is_none")]
    pub generator_url: Option<String>,
}

/// Writes `t` as RFC 3339 in UTC at millisecond precision (trailing zeros of the fraction left
/// out), e.g. `2026-12-02T15:04:05.123Z`.
///
/// Returns `None` for a time outside what RFC 3339 can express; never panics.
pub(crate) fn rfc3339(t: SystemTime) -> Option<String> {
    let nanos: i128 = match t.duration_since(UNIX_EPOCH) {
        Ok(after) => i128::try_from(after.as_nanos()).ok()?,
        Err(before) => -i128::try_from(before.duration().as_nanos()).ok()?,
    };
    let millis_nanos = nanos - nanos.rem_euclid(1_000_000);
    let at = OffsetDateTime::from_unix_timestamp_nanos(millis_nanos).ok()?;
    at.format(&Rfc3339).ok()
}

/// `now + d`, saturating instead of overflowing for absurd durations.
pub(crate) fn later(now: SystemTime, d: Duration) -> SystemTime {
    now.checked_add(d).unwrap_or(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: u64, millis: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_millis(millis)
    }

    #[test]
    fn batch_serialises_as_postable_alerts() {
        let alert = Alert::new(at(1_764_688_245, 123))
            .label("alertname", "CudaDeviceAssert")
            .label("node", "gpu-07")
            .annotation("summary", "index out of bounds")
            .generator_url("http://gpu-07:9949/api/v1/incidents/42");
        let wire = vec![alert.to_wire(at(1_764_688_545, 123))];
        let json = serde_json::to_string(&wire).unwrap();
        let expected = concat!(
            r#"[{"labels":{"alertname":"CudaDeviceAssert","node":"gpu-07"},"#,
            r#""annotations":{"summary":"index out of bounds"},"#,
            r#""startsAt":"2025-12-02T15:10:45.123Z","#,
            r#""endsAt":"2025-12-02T15:15:45.123Z","#,
            r#""generatorURL":"http://gpu-07:9949/api/v1/incidents/42"}]"#
        );
        assert_eq!(json, expected);
    }

    #[test]
    fn optional_fields_are_left_out_and_annotations_stay() {
        let alert = Alert::new(at(0, 0)).label("alertname", "X");
        let json = serde_json::to_string(&alert.to_wire(at(60, 0))).unwrap();
        assert_eq!(
            json,
            r#"{"labels":{"alertname":"X"},"annotations":{},"startsAt":"1970-01-01T00:00:00Z","endsAt":"1970-01-01T00:01:00Z"}"#
        );
    }

    #[test]
    fn end_is_never_before_start() {
        let alert = Alert::new(at(100, 0)).label("alertname", "X");
        let wire = alert.to_wire(at(50, 0));
        assert_eq!(wire.ends_at, wire.starts_at);
    }

    #[test]
    fn times_are_truncated_to_milliseconds() {
        let t = UNIX_EPOCH + Duration::new(1, 999_999_999);
        assert_eq!(rfc3339(t).as_deref(), Some("1970-01-01T00:00:01.999Z"));
    }

    #[test]
    fn times_before_the_epoch_render() {
        let t = UNIX_EPOCH - Duration::from_millis(1500);
        assert_eq!(rfc3339(t).as_deref(), Some("1969-12-31T23:59:58.5Z"));
    }

    #[test]
    fn unrepresentable_times_are_left_out() {
        let far = UNIX_EPOCH + Duration::from_secs(400_000_000_000);
        assert_eq!(rfc3339(far), None);
        let alert = Alert::new(far).label("alertname", "X");
        let json = serde_json::to_string(&alert.to_wire(far)).unwrap();
        assert!(
            !json.contains("startsAt") && !json.contains("endsAt"),
            "{json}"
        );
    }
}
