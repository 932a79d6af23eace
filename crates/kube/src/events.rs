//! What assertwatch tells the cluster, as API objects: Events about pods and nodes, and the GPU
//! node condition. Pure builders; sending is [`crate::api::KubeApi`]'s.

use k8s_openapi::api::core::v1::{NodeCondition, ObjectReference};
use k8s_openapi::api::events::v1::{Event, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use k8s_openapi::chrono::{DateTime, Utc};

/// `reportingController` of every Event assertwatch emits.
pub const REPORTING_CONTROLLER: &str = "assertwatch.io/assertwatch";
/// The API server rejects a longer `note` (events.k8s.io/v1 validation: 1 kB).
pub const MAX_NOTE_BYTES: usize = 1024;
/// Namespace of Events about cluster-scoped objects (nodes), as the kubelet and
/// node-problem-detector write them.
pub const NODE_EVENT_NAMESPACE: &str = "default";

/// The object an Event is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Regarding {
    Pod {
        namespace: String,
        name: String,
        uid: Option<String>,
        /// `fieldPath` like `spec.containers{trainer}`, as the kubelet names a container.
        container: Option<String>,
    },
    Node {
        name: String,
    },
}

impl Regarding {
    fn reference(&self) -> ObjectReference {
        match self {
            Regarding::Pod {
                namespace,
                name,
                uid,
                container,
            } => ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Pod".into()),
                namespace: Some(namespace.clone()),
                name: Some(name.clone()),
                uid: uid.clone(),
                field_path: container
                    .as_ref()
                    .map(|c| format!("spec.containers{{{c}}}")),
                ..Default::default()
            },
            Regarding::Node { name } => ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Node".into()),
                name: Some(name.clone()),
                // The kubelet refers to its node by name as uid too.
                uid: Some(name.clone()),
                ..Default::default()
            },
        }
    }

    /// Namespace the Event is created in.
    pub fn event_namespace(&self) -> &str {
        match self {
            Regarding::Pod { namespace, .. } => namespace,
            Regarding::Node { .. } => NODE_EVENT_NAMESPACE,
        }
    }

    fn name(&self) -> &str {
        match self {
            Regarding::Pod { name, .. } | Regarding::Node { name } => name,
        }
    }
}

/// A Warning Event about `regarding`. The name follows the kubelet's `<object>.<hex time>`.
pub fn warning(
    regarding: &Regarding,
    reason: &str,
    action: &str,
    note: &str,
    reporting_instance: &str,
    now: DateTime<Utc>,
) -> Event {
    let nanos = now.timestamp_nanos_opt().unwrap_or_default();
    let mut base: String = regarding.name().to_owned();
    base.truncate(200);
    Event {
        metadata: ObjectMeta {
            name: Some(format!("{base}.{nanos:x}")),
            namespace: Some(regarding.event_namespace().to_owned()),
            ..Default::default()
        },
        event_time: Some(MicroTime(now)),
        type_: Some("Warning".into()),
        reason: Some(truncate(reason, 128)),
        action: Some(truncate(action, 128)),
        note: Some(truncate(note, MAX_NOTE_BYTES)),
        regarding: Some(regarding.reference()),
        reporting_controller: Some(REPORTING_CONTROLLER.into()),
        reporting_instance: Some(truncate(reporting_instance, 128)),
        ..Default::default()
    }
}

/// The series of an Event seen `count` times, the last at `last`.
pub fn series(count: u32, last: DateTime<Utc>) -> EventSeries {
    EventSeries {
        count: i32::try_from(count).unwrap_or(i32::MAX),
        last_observed_time: MicroTime(last),
    }
}

/// The GPU node condition: `True` with the fault, or `False` once the GPUs recovered.
pub fn gpu_condition(
    type_: &str,
    faulted: bool,
    reason: &str,
    message: &str,
    now: DateTime<Utc>,
) -> NodeCondition {
    NodeCondition {
        type_: type_.to_owned(),
        status: if faulted { "True" } else { "False" }.to_owned(),
        reason: Some(reason.to_owned()),
        message: Some(truncate(message, 1024)),
        last_heartbeat_time: Some(Time(now)),
        last_transition_time: Some(Time(now)),
    }
}

/// `s` cut to at most `max` bytes on a character boundary, with `…` when cut.
pub fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2026-12-01T10:00:00.123456Z")
            .unwrap()
            .with_timezone(&Utc)
    }

    #[test]
    fn pod_warning_has_every_required_field() {
        let r = Regarding::Pod {
            namespace: "ml".into(),
            name: "w-0".into(),
            uid: Some("u".into()),
            container: Some("trainer".into()),
        };
        let e = warning(
            &r,
            "DeviceSideAssert",
            "Detected",
            &"x".repeat(2000),
            "aw-node1",
            at(),
        );
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(v["apiVersion"], "events.k8s.io/v1");
        assert_eq!(v["kind"], "Event");
        assert_eq!(v["metadata"]["namespace"], "ml");
        assert!(v["metadata"]["name"].as_str().unwrap().starts_with("w-0."));
        assert_eq!(v["eventTime"], "2026-12-01T10:00:00.123456Z");
        assert_eq!(v["type"], "Warning");
        assert_eq!(v["regarding"]["fieldPath"], "spec.containers{trainer}");
        assert_eq!(v["reportingController"], REPORTING_CONTROLLER);
        assert!(v["note"].as_str().unwrap().len() <= MAX_NOTE_BYTES);
        let n = warning(
            &Regarding::Node { name: "n1".into() },
            "Xid79",
            "Detected",
            "m",
            "aw",
            at(),
        );
        assert_eq!(n.metadata.namespace.as_deref(), Some("default"));
        assert_eq!(n.regarding.unwrap().kind.as_deref(), Some("Node"));
    }

    #[test]
    fn truncation_keeps_utf8() {
        let s = "é".repeat(600);
        let t = truncate(&s, 1024);
        assert!(t.len() <= 1024 && t.ends_with('…'));
        assert_eq!(truncate("short", 10), "short");
    }
}
