//! The RBAC of the Kubernetes features, rendered from both packagings: exactly the verbs the
//! documentation lists, in the scopes it lists, valid against the API schema.

#![allow(clippy::disallowed_methods)]

mod common;

use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn docs(text: &str) -> Vec<Value> {
    text.split("\n---")
        .filter_map(|d| serde_yaml::from_str::<Value>(d).ok())
        .filter(|v| v.is_object())
        .collect()
}

/// (apiGroup, resource, verb) of every rule of the ClusterRole named `name`.
fn rules(objects: &[Value], name: &str) -> BTreeSet<(String, String, String)> {
    let role = objects
        .iter()
        .find(|o| o["kind"] == "ClusterRole" && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no ClusterRole {name}"));
    let mut out = BTreeSet::new();
    for r in role["rules"].as_array().unwrap() {
        for g in r["apiGroups"].as_array().unwrap() {
            for res in r["resources"].as_array().unwrap() {
                for v in r["verbs"].as_array().unwrap() {
                    out.insert((
                        g.as_str().unwrap().to_owned(),
                        res.as_str().unwrap().to_owned(),
                        v.as_str().unwrap().to_owned(),
                    ));
                }
            }
        }
    }
    out
}

fn set(items: &[(&str, &str, &str)]) -> BTreeSet<(String, String, String)> {
    items
        .iter()
        .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
        .collect()
}

fn api_rules() -> BTreeSet<(String, String, String)> {
    set(&[
        ("events.k8s.io", "events", "create"),
        ("events.k8s.io", "events", "patch"),
        ("", "nodes", "get"),
        ("", "nodes/status", "patch"),
    ])
}

fn replay_rules() -> BTreeSet<(String, String, String)> {
    set(&[
        ("", "pods", "create"),
        ("", "pods", "delete"),
        ("", "pods/log", "get"),
    ])
}

fn validate(text: &str) {
    let Some(tool) = common::require_tool("kubernetes-validate") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("rbac.yaml");
    std::fs::write(&p, text).unwrap();
    let o = Command::new(tool)
        .args(["--strict", "--kubernetes-version", "1.32.0", "--no-warn"])
        .arg(&p)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn helm_rbac_follows_the_config() {
    let Some(helm) = common::require_tool("helm") else {
        return;
    };
    let chart = root().join("deploy/helm/assertwatch");
    let render = |sets: &[&str]| {
        let mut c = Command::new(&helm);
        c.args(["template", "aw"]).arg(&chart);
        for s in sets {
            c.args(["--set", s]);
        }
        let o = c.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    // Off by default: read-only pods, nothing else.
    let base = docs(&render(&[]));
    let roles: Vec<&Value> = base.iter().filter(|o| o["kind"] == "ClusterRole").collect();
    assert_eq!(roles.len(), 1);
    assert_eq!(
        rules(&base, "aw-assertwatch"),
        set(&[
            ("", "pods", "get"),
            ("", "pods", "list"),
            ("", "pods", "watch")
        ])
    );

    let text = render(&[
        "config.kubernetes.enabled=true",
        "config.repro.kubernetes.enabled=true",
        "config.repro.kubernetes.namespaces={ml-research,vision}",
    ]);
    validate(&text);
    let objs = docs(&text);
    assert_eq!(rules(&objs, "aw-assertwatch-kubernetes-api"), api_rules());
    assert_eq!(rules(&objs, "aw-assertwatch-replay"), replay_rules());
    let bindings: Vec<(String, String)> = objs
        .iter()
        .filter(|o| o["kind"] == "RoleBinding")
        .map(|o| {
            (
                o["metadata"]["namespace"].as_str().unwrap().to_owned(),
                o["roleRef"]["name"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        bindings,
        [
            ("ml-research".into(), "aw-assertwatch-replay".into()),
            ("vision".into(), "aw-assertwatch-replay".into())
        ]
    );
    // The replay role is never bound cluster-wide unless "*" says so.
    assert!(!objs
        .iter()
        .any(|o| o["kind"] == "ClusterRoleBinding"
            && o["roleRef"]["name"] == "aw-assertwatch-replay"));
    let star = docs(&render(&[
        "config.kubernetes.enabled=true",
        "config.repro.kubernetes.enabled=true",
        "config.repro.kubernetes.namespaces={*}",
    ]));
    assert!(star
        .iter()
        .any(|o| o["kind"] == "ClusterRoleBinding"
            && o["roleRef"]["name"] == "aw-assertwatch-replay"));
}

#[test]
fn kustomize_component_and_namespace_binding() {
    let Some(kubectl) = common::require_tool("kubectl") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let deploy = root().join("deploy/kubernetes");
    std::fs::write(
        dir.path().join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - {}\ncomponents:\n  - {}\n",
            relative(dir.path(), &deploy),
            relative(dir.path(), &deploy.join("components/kubernetes-api")),
        ),
    )
    .unwrap();
    let o = Command::new(&kubectl)
        .arg("kustomize")
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).unwrap();
    let objs = docs(&text);
    assert_eq!(rules(&objs, "assertwatch-kubernetes-api"), api_rules());
    assert_eq!(rules(&objs, "assertwatch-replay"), replay_rules());
    assert_eq!(
        rules(&objs, "assertwatch"),
        set(&[
            ("", "pods", "get"),
            ("", "pods", "list"),
            ("", "pods", "watch")
        ])
    );
    let o = Command::new(&kubectl)
        .arg("kustomize")
        .arg(deploy.join("replay-namespace"))
        .output()
        .unwrap();
    assert!(o.status.success());
    let rb = docs(&String::from_utf8(o.stdout).unwrap());
    assert_eq!(rb.len(), 1);
    assert_eq!(rb[0]["kind"], "RoleBinding");
    assert_eq!(rb[0]["roleRef"]["name"], "assertwatch-replay");
    assert_eq!(rb[0]["subjects"][0]["namespace"], "assertwatch");
}

/// kustomize wants paths relative to the kustomization.
fn relative(from: &Path, to: &Path) -> String {
    let ups = from.components().count().saturating_sub(1);
    format!(
        "{}{}",
        "../".repeat(ups),
        to.to_string_lossy().trim_start_matches('/')
    )
}
