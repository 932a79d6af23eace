//! Reading a Pod as the API server (or `kubectl get pod -o json|yaml`) returns it.

use k8s_openapi::api::core::v1::Pod;

/// Why a document is not one Pod.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    #[error("not a Pod: kind is {0:?} (pass one Pod, e.g. `kubectl get pod NAME -o yaml`)")]
    WrongKind(String),
    #[error("not a Pod in JSON or YAML: {0}")]
    Syntax(String),
}

/// Parses one Pod from JSON or YAML text.
pub fn parse_pod(text: &str) -> Result<Pod, InputError> {
    // Read loosely first so a List or another kind gets a message naming it.
    let value: serde_json::Value = if text.trim_start().starts_with('{') {
        serde_json::from_str(text).map_err(|e| InputError::Syntax(e.to_string()))?
    } else {
        serde_yaml::from_str(text).map_err(|e| InputError::Syntax(e.to_string()))?
    };
    match value.get("kind").and_then(|k| k.as_str()) {
        Some("Pod") | None => {}
        Some(other) => return Err(InputError::WrongKind(other.to_owned())),
    }
    serde_json::from_value(value).map_err(|e| InputError::Syntax(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_yaml_and_wrong_kinds() {
        let y = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  namespace: b\nspec:\n  containers:\n  - name: c\n    image: i\n";
        let p = parse_pod(y).unwrap();
        assert_eq!(p.metadata.name.as_deref(), Some("a"));
        let j = serde_json::to_string(&p).unwrap();
        assert_eq!(
            parse_pod(&j).unwrap().metadata.namespace.as_deref(),
            Some("b")
        );
        assert!(matches!(
            parse_pod("apiVersion: v1\nkind: List\nitems: []\n"),
            Err(InputError::WrongKind(k)) if k == "List"
        ));
        assert!(matches!(parse_pod("{"), Err(InputError::Syntax(_))));
        assert!(matches!(
            parse_pod("- a\n- b\n"),
            Err(InputError::Syntax(_))
        ));
    }
}
