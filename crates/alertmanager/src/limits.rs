//! Size and name bounds applied to every alert before it enters the active set.
//!
//! Alertmanager validates each posted alert: label *and annotation* names must be valid label
//! names, at least one label is required, and the end may not precede the start (`Alert.Validate`
//! in prometheus/common `model/alert.go` and in Alertmanager's `types/types.go`). Its
//! `postAlertsHandler` (`api/v2/api.go`) stores the valid alerts of a batch and answers
//! `400 Bad Request` for the rest, so an invalid alert would be refused on every re-send. Bad
//! input is therefore repaired or refused here, where it can be counted. Sizes are bounded so
//! that a huge log excerpt in an annotation cannot make the active set (or each request body)
//! grow without limit.
//!
//! The name rule is Prometheus's: `[a-zA-Z_][a-zA-Z0-9_]*` (Prometheus documentation, "Data
//! model", <https://prometheus.io/docs/concepts/data_model/>). Alertmanager drops labels whose
//! value is empty before validating (`removeEmptyLabels` in `api/v2/api.go`), so they are
//! dropped here as well, keeping what the daemon holds equal to what Alertmanager sees.

use crate::alert::Alert;

/// Longest label value kept, in bytes; longer values are cut with [`TRUNCATION_MARKER`].
pub const MAX_LABEL_VALUE_BYTES: usize = 256;

/// Default cap on one annotation value, in bytes.
pub const DEFAULT_MAX_ANNOTATION_BYTES: usize = 4096;

/// Appended to a value that was cut. It counts towards the cap.
pub const TRUNCATION_MARKER: &str = "...[truncated]";

/// What [`sanitise`] changed or refused, for counting.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Repairs {
    /// Label and annotation entries dropped for an invalid name.
    pub invalid_names: u64,
    /// 1 if the generator URL was dropped (not an absolute URL, or too long).
    pub invalid_generator_url: u64,
}

/// Why an alert was refused outright.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// No label with a valid name and a non-empty value is left; Alertmanager requires one.
    NoLabels,
}

/// Returns `true` if `name` matches `[a-zA-Z_][a-zA-Z0-9_]*`.
pub fn is_valid_label_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    match bytes.next() {
        Some(b) if b.is_ascii_alphabetic() || b == b'_' => {}
        _ => return false,
    }
    bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// Cuts `value` to at most `max` bytes at a UTF-8 character boundary, ending it with
/// [`TRUNCATION_MARKER`] when there is room for it. Returns whether it cut anything.
pub fn truncate_utf8(value: &mut String, max: usize) -> bool {
    if value.len() <= max {
        return false;
    }
    let (keep, marker) = if max >= TRUNCATION_MARKER.len() {
        (max - TRUNCATION_MARKER.len(), TRUNCATION_MARKER)
    } else {
        (max, "")
    };
    let mut cut = keep;
    while !value.is_char_boundary(cut) {
        cut -= 1;
    }
    value.truncate(cut);
    value.push_str(marker);
    true
}

/// Applies the bounds to `alert`: drops entries with invalid names or (for labels) empty values,
/// cuts label values to [`MAX_LABEL_VALUE_BYTES`] and annotation values to
/// `max_annotation_bytes`, and drops a generator URL that is not an absolute URL or is longer
/// than `max_annotation_bytes`.
pub(crate) fn sanitise(
    mut alert: Alert,
    max_annotation_bytes: usize,
) -> Result<(Alert, Repairs), Refusal> {
    let mut repairs = Repairs::default();

    let invalid_labels = alert
        .labels
        .keys()
        .filter(|n| !is_valid_label_name(n))
        .count();
    let invalid_annotations = alert
        .annotations
        .keys()
        .filter(|n| !is_valid_label_name(n))
        .count();
    // Empty-valued labels go without being counted: Alertmanager ignores them, so nothing is lost.
    alert
        .labels
        .retain(|name, value| is_valid_label_name(name) && !value.is_empty());
    alert
        .annotations
        .retain(|name, _| is_valid_label_name(name));
    repairs.invalid_names = (invalid_labels + invalid_annotations) as u64;
    if alert.labels.is_empty() {
        return Err(Refusal::NoLabels);
    }

    for value in alert.labels.values_mut() {
        truncate_utf8(value, MAX_LABEL_VALUE_BYTES);
    }
    for value in alert.annotations.values_mut() {
        truncate_utf8(value, max_annotation_bytes);
    }

    // Alertmanager checks `generatorURL` against the `uri` format while binding the request,
    // before looking at single alerts, so a malformed one would fail the whole batch. Sending
    // the parsed, normalised form (spaces and the like percent-encoded) avoids that.
    if let Some(raw) = alert.generator_url.take() {
        match url::Url::parse(&raw) {
            Ok(parsed) if parsed.as_str().len() <= max_annotation_bytes => {
                alert.generator_url = Some(parsed.into());
            }
            _ => repairs.invalid_generator_url = 1,
        }
    }
    Ok((alert, repairs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    #[test]
    fn label_names_follow_the_prometheus_rule() {
        for ok in ["a", "_", "alertname", "gpu_0", "A_b9", "__reserved"] {
            assert!(is_valid_label_name(ok), "{ok}");
        }
        for bad in ["", "0abc", "a-b", "a.b", "ä", "a b", "gpu:0"] {
            assert!(!is_valid_label_name(bad), "{bad}");
        }
    }

    #[test]
    fn short_values_are_untouched() {
        let mut v = "x".repeat(10);
        assert!(!truncate_utf8(&mut v, 10));
        assert_eq!(v, "x".repeat(10));
    }

    #[test]
    fn long_values_are_cut_to_the_cap_with_the_marker() {
        let mut v = "x".repeat(300);
        assert!(truncate_utf8(&mut v, 256));
        assert_eq!(v.len(), 256);
        assert!(v.ends_with(TRUNCATION_MARKER));
    }

    #[test]
    fn cuts_fall_on_character_boundaries() {
        // "é" is two bytes and "€" three: every cut position lands inside some character.
        let original = "é€".repeat(100);
        for max in 0..60 {
            let mut v = original.clone();
            truncate_utf8(&mut v, max);
            assert!(v.len() <= max, "max {max}: {} bytes", v.len());
            let kept = v.trim_end_matches(TRUNCATION_MARKER);
            assert!(original.starts_with(kept), "max {max}");
        }
    }

    #[test]
    fn a_cap_smaller_than_the_marker_cuts_without_it() {
        let mut v = "abcdefghijklmnopqrstuvwxyz".to_string();
        truncate_utf8(&mut v, 5);
        assert_eq!(v, "abcde");
    }

    fn base() -> Alert {
        Alert::new(UNIX_EPOCH).label("alertname", "CudaDeviceAssert")
    }

    #[test]
    fn invalid_names_are_dropped_and_counted() {
        let alert = base()
            .label("bad-name", "x")
            .label("empty", "")
            .annotation("summary", "s")
            .annotation("9lives", "x");
        let (clean, repairs) = sanitise(alert, 4096).unwrap();
        assert_eq!(clean.labels.keys().collect::<Vec<_>>(), ["alertname"]);
        assert_eq!(clean.annotations.keys().collect::<Vec<_>>(), ["summary"]);
        assert_eq!(repairs.invalid_names, 2);
    }

    #[test]
    fn values_are_bounded() {
        let alert = base()
            .label("node", "n".repeat(1000))
            .annotation("excerpt", "é".repeat(5000));
        let (clean, _) = sanitise(alert, 100).unwrap();
        assert_eq!(clean.labels["node"].len(), MAX_LABEL_VALUE_BYTES);
        assert!(clean.annotations["excerpt"].len() <= 100);
        assert!(clean.annotations["excerpt"].ends_with(TRUNCATION_MARKER));
    }

    #[test]
    fn an_alert_without_usable_labels_is_refused() {
        let alert = Alert::new(UNIX_EPOCH)
            .label("bad-name", "x")
            .label("empty", "");
        assert_eq!(sanitise(alert, 4096), Err(Refusal::NoLabels));
    }

    #[test]
    fn relative_or_oversized_generator_urls_are_dropped() {
        let (clean, r) = sanitise(base().generator_url("/incidents/1"), 4096).unwrap();
        assert_eq!((clean.generator_url, r.invalid_generator_url), (None, 1));
        let long = format!("http://h/{}", "a".repeat(200));
        let (clean, r) = sanitise(base().generator_url(long), 100).unwrap();
        assert_eq!((clean.generator_url, r.invalid_generator_url), (None, 1));
        let (clean, r) = sanitise(base().generator_url("http://h:9949/i/1"), 4096).unwrap();
        assert_eq!(clean.generator_url.as_deref(), Some("http://h:9949/i/1"));
        assert_eq!(r.invalid_generator_url, 0);
        let (clean, _) = sanitise(base().generator_url("http://h/a b"), 4096).unwrap();
        assert_eq!(clean.generator_url.as_deref(), Some("http://h/a%20b"));
    }
}
