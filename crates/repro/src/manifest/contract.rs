//! The shared manifest contract: `manifest-contract.json` compiled in, and a manifest checked
//! against it.
//!
//! The file lives in the Python package (`python/assertwatch_replay/manifest-contract.json`),
//! which ships it and loads it too, so the keys, types, limits, patterns and allowed values are
//! written once for both sides. Its grammar is in docs/manifest.md §7. What the file cannot say,
//! rules that relate fields to each other, is named there by `"rule"` and written here and in
//! the Python module; each side refuses a contract that names a rule it does not implement.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::LazyLock;
use std::time::SystemTime;

use regex::Regex;
use serde::de::{Deserializer, MapAccess, Visitor};
use serde::Deserialize;
use serde_json::{Number, Value};

use super::{echo, ManifestError};

/// The contract file, byte for byte as the Python package ships it.
pub const CONTRACT_JSON: &str =
    include_str!("../../../../python/assertwatch_replay/manifest-contract.json");

static CONTRACT: LazyLock<Contract> = LazyLock::new(|| {
    // The file is part of the build, not input; the unit test `the_contract_loads` fails on the
    // same error before any build could ship it.
    Contract::from_json(CONTRACT_JSON).unwrap_or_else(|e| panic!("manifest contract: {e}"))
});

/// The parsed contract (loaded on first use).
pub fn contract() -> &'static Contract {
    &CONTRACT
}

/// The contract file's content. Field meanings: docs/manifest.md §7.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Contract {
    pub contract: String,
    /// Version of the contract file itself (the manifest's own version is `schema`).
    pub version: u32,
    pub about: String,
    /// The only manifest schema accepted.
    pub schema: String,
    pub manifest_name: String,
    pub max_manifest_bytes: u64,
    /// Range of an `int` node that states no `min`/`max` (2^53 − 1: JSON parsers lose precision
    /// above it).
    pub int_range: (u64, u64),
    pub patterns: BTreeMap<String, String>,
    pub placeholders: Vec<String>,
    pub required_placeholders: Vec<String>,
    pub required_roles: Vec<String>,
    pub rules: Vec<Rule>,
    pub document: Node,
    #[serde(skip)]
    compiled: BTreeMap<String, Regex>,
}

/// What a JSON value must be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Object,
    List,
    Map,
    FreeObject,
    String,
    Int,
    Number,
    Bool,
}

/// A check written in code on both sides, named by the contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    CreatedAt,
    FileName,
    Files,
    ModelState,
    Argv,
}

/// One field of the manifest; which members apply depends on `kind`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Node {
    #[serde(rename = "type")]
    pub kind: Kind,
    #[serde(default)]
    pub required: bool,
    #[serde(default)]
    pub nullable: bool,
    pub rule: Option<Rule>,
    pub max_chars: Option<usize>,
    #[serde(default)]
    pub allow_empty: bool,
    pub pattern: Option<String>,
    pub one_of: Option<Vec<String>>,
    #[serde(default)]
    pub absolute_path: bool,
    pub min: Option<Number>,
    pub max: Option<Number>,
    pub items: Option<Box<Node>>,
    #[serde(default)]
    pub min_items: usize,
    pub max_items: Option<usize>,
    #[serde(default)]
    pub unique: bool,
    #[serde(default)]
    pub unique_keys: Vec<String>,
    /// Object keys in the file's order, which is the order of the checks.
    #[serde(default, deserialize_with = "ordered")]
    pub keys: Vec<(String, Node)>,
    pub max_entries: Option<usize>,
    #[serde(default)]
    pub allowed_keys: Vec<String>,
    pub values: Option<Box<Node>>,
    pub max_bytes: Option<usize>,
    pub max_depth: Option<usize>,
}

/// A JSON object read as a list of pairs, keeping the file's order.
fn ordered<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(String, Node)>, D::Error> {
    struct Pairs;
    impl<'de> Visitor<'de> for Pairs {
        type Value = Vec<(String, Node)>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an object of field nodes")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut out = Vec::new();
            while let Some(pair) = map.next_entry()? {
                out.push(pair);
            }
            Ok(out)
        }
    }
    d.deserialize_map(Pairs)
}

impl Contract {
    /// Parses a contract and checks that it is complete: every pattern compiles, every node has
    /// what its kind needs, and the rules named are exactly the ones this module implements.
    pub fn from_json(text: &str) -> Result<Contract, String> {
        let mut c: Contract = serde_json::from_str(text).map_err(|e| e.to_string())?;
        for (name, p) in &c.patterns {
            let re = Regex::new(&format!("^(?:{p})$")).map_err(|e| format!("{name}: {e}"))?;
            c.compiled.insert(name.clone(), re);
        }
        let implemented = [
            Rule::CreatedAt,
            Rule::FileName,
            Rule::Files,
            Rule::ModelState,
            Rule::Argv,
        ];
        if c.rules.len() != implemented.len() || !implemented.iter().all(|r| c.rules.contains(r)) {
            return Err(format!("rules {:?}, implemented {implemented:?}", c.rules));
        }
        c.well_formed(&c.document, "(document)")?;
        if c.document.kind != Kind::Object {
            return Err("the document must be an object node".into());
        }
        Ok(c)
    }

    fn well_formed(&self, n: &Node, at: &str) -> Result<(), String> {
        let missing = match n.kind {
            Kind::List => n.items.is_none(),
            Kind::Map => n.values.is_none() || n.max_entries.is_none(),
            Kind::FreeObject => n.max_bytes.is_none() || n.max_depth.is_none(),
            _ => false,
        };
        if missing {
            return Err(format!("{at}: incomplete {:?} node", n.kind));
        }
        if let Some(p) = n
            .pattern
            .as_ref()
            .filter(|p| !self.compiled.contains_key(*p))
        {
            return Err(format!("{at}: unknown pattern {p}"));
        }
        if let Some(r) = n.rule.filter(|r| !self.rules.contains(r)) {
            return Err(format!("{at}: rule {r:?} is not listed"));
        }
        let children = n.keys.iter().map(|(k, c)| (k.as_str(), c));
        let more = [("[]", &n.items), ("{}", &n.values)];
        let more = more
            .into_iter()
            .filter_map(|(k, c)| c.as_deref().map(|c| (k, c)));
        children
            .chain(more)
            .try_for_each(|(k, c)| self.well_formed(c, &format!("{at}.{k}")))
    }

    /// The node at a path of object keys (`"[]"` steps into list items).
    pub fn node(&self, path: &[&str]) -> Option<&Node> {
        path.iter().try_fold(&self.document, |n, k| match *k {
            "[]" => n.items.as_deref(),
            k => n.keys.iter().find(|(name, _)| name == k).map(|(_, c)| c),
        })
    }

    /// Replay modes in the contract's spelling (`replay.modes` items).
    pub fn modes(&self) -> &[String] {
        self.node(&["replay", "modes", "[]"])
            .and_then(|n| n.one_of.as_deref())
            .unwrap_or(&[])
    }

    /// Whether `s` matches the whole of the named pattern (an unknown name matches nothing).
    pub fn matches(&self, pattern: &str, s: &str) -> bool {
        self.compiled.get(pattern).is_some_and(|re| re.is_match(s))
    }
}

/// `created_at` as a point in time: the contract's pattern (UTC with a literal `Z`, seconds up
/// to 59, 0–9 fraction digits), then a real calendar date from year 1 on, read with the `time`
/// crate's RFC 3339 parser.
pub fn parse_created_at(s: &str) -> Option<SystemTime> {
    use time::format_description::well_known::Rfc3339;
    if !contract().matches("created_at", s) {
        return None;
    }
    let t = time::OffsetDateTime::parse(s, &Rfc3339).ok()?;
    (t.year() >= 1).then(|| SystemTime::from(t))
}

// ------------------------------------------------------------------------------ the walk

pub(super) struct Check<'a> {
    pub path: &'a Path,
    pub c: &'static Contract,
}

fn join(field: &str, key: &str) -> String {
    if field.is_empty() {
        echo(key)
    } else {
        format!("{field}.{}", echo(key))
    }
}

impl Check<'_> {
    pub fn bad(&self, field: &str, detail: impl Into<String>) -> ManifestError {
        ManifestError::BadField {
            path: self.path.to_path_buf(),
            field: if field.is_empty() {
                "(top level)".into()
            } else {
                field.to_owned()
            },
            detail: detail.into(),
        }
    }

    /// Checks `v` against `n` and then the node's rule, if any.
    pub fn walk(
        &self,
        n: &Node,
        v: &Value,
        field: &str,
        root: &Value,
    ) -> Result<(), ManifestError> {
        if v.is_null() && n.nullable {
            return Ok(());
        }
        let or_null = if n.nullable { " or null" } else { "" };
        match (n.kind, v) {
            (Kind::String, Value::String(s)) => self.string(n, s, field)?,
            (Kind::Int, Value::Number(x)) if x.is_u64() || x.is_i64() => {
                let (lo, hi) = self.c.int_range;
                let lo = n.min.as_ref().and_then(Number::as_u64).unwrap_or(lo);
                let hi = n.max.as_ref().and_then(Number::as_u64).unwrap_or(hi);
                if !x.as_u64().is_some_and(|x| (lo..=hi).contains(&x)) {
                    return Err(self.bad(field, format!("must be between {lo} and {hi}")));
                }
            }
            (Kind::Number, Value::Number(x)) => {
                let lo = n.min.as_ref().and_then(Number::as_f64).unwrap_or(0.0);
                let hi = n.max.as_ref().and_then(Number::as_f64).unwrap_or(f64::MAX);
                if !x
                    .as_f64()
                    .is_some_and(|x| x.is_finite() && (lo..=hi).contains(&x))
                {
                    let msg = format!("must be a finite number between {lo} and {hi}");
                    return Err(self.bad(field, msg));
                }
            }
            (Kind::Bool, Value::Bool(_)) => {}
            (Kind::Object, Value::Object(m)) => {
                for key in m.keys() {
                    if !n.keys.iter().any(|(k, _)| k == key) {
                        return Err(ManifestError::UnknownKey {
                            path: self.path.to_path_buf(),
                            field: join(field, key),
                        });
                    }
                }
                for (key, child) in &n.keys {
                    if child.required && !m.contains_key(key) {
                        return Err(self.bad(&join(field, key), "missing"));
                    }
                }
                for (key, child) in &n.keys {
                    if let Some(x) = m.get(key) {
                        self.walk(child, x, &join(field, key), root)?;
                    }
                }
            }
            (Kind::List, Value::Array(list)) => self.list(n, list, field, root)?,
            (Kind::List, Value::String(_)) if n.rule == Some(Rule::Argv) => {
                return Err(ManifestError::ShellString {
                    path: self.path.to_path_buf(),
                })
            }
            (Kind::Map, Value::Object(m)) => {
                let max = n.max_entries.unwrap_or(0);
                if m.len() > max {
                    return Err(self.bad(field, format!("more than {max} entries")));
                }
                for (key, x) in m {
                    if !n.allowed_keys.contains(key) {
                        return Err(ManifestError::EnvNotAllowed {
                            path: self.path.to_path_buf(),
                            var: echo(key),
                        });
                    }
                    if let Some(values) = &n.values {
                        self.walk(values, x, &join(field, key), root)?;
                    }
                }
            }
            (Kind::FreeObject, Value::Object(_)) => self.free_object(n, v, field)?,
            (kind, _) => {
                let what = match kind {
                    Kind::Object | Kind::FreeObject => "an object",
                    Kind::Map => "an object of strings",
                    Kind::List => "a list",
                    Kind::String => "a string",
                    Kind::Int => "an integer",
                    Kind::Number => "a number",
                    Kind::Bool => "true or false",
                };
                return Err(self.bad(field, format!("must be {what}{or_null}")));
            }
        }
        match n.rule {
            Some(rule) => self.rule(rule, v, field, root),
            None => Ok(()),
        }
    }

    /// Non-empty unless `allow_empty`, at most `max_chars` characters, no NUL, then the pattern,
    /// the allowed values and the absolute-path rule.
    fn string(&self, n: &Node, s: &str, field: &str) -> Result<(), ManifestError> {
        if s.is_empty() && !n.allow_empty {
            return Err(self.bad(field, "must not be empty"));
        }
        if let Some(max) = n.max_chars.filter(|&m| s.chars().count() > m) {
            return Err(self.bad(field, format!("longer than {max} characters")));
        }
        if s.contains('\0') {
            return Err(self.bad(field, "contains a NUL character"));
        }
        if let Some(p) = &n.pattern {
            if !s.is_empty() && !self.c.matches(p, s) {
                let shown = self.c.patterns.get(p).map_or("", String::as_str);
                return Err(self.bad(field, format!("must match {shown}")));
            }
        }
        if let Some(allowed) = n.one_of.as_ref().filter(|a| !a.iter().any(|x| x == s)) {
            return Err(self.bad(field, format!("must be one of {}", allowed.join(", "))));
        }
        if n.absolute_path && !s.starts_with('/') {
            return Err(self.bad(field, "must be an absolute path"));
        }
        Ok(())
    }

    fn list(
        &self,
        n: &Node,
        list: &[Value],
        field: &str,
        root: &Value,
    ) -> Result<(), ManifestError> {
        let (lo, hi) = (n.min_items, n.max_items.unwrap_or(usize::MAX));
        if list.len() < lo || list.len() > hi {
            let msg = match n.max_items {
                Some(hi) => format!("must hold {lo} to {hi} entries"),
                None => format!("must hold at least {lo} entries"),
            };
            return Err(self.bad(field, msg));
        }
        if let Some(items) = &n.items {
            for (i, x) in list.iter().enumerate() {
                self.walk(items, x, &format!("{field}[{i}]"), root)?;
            }
        }
        if n.unique && (1..list.len()).any(|i| list[..i].contains(&list[i])) {
            return Err(self.bad(field, "has duplicates"));
        }
        for key in &n.unique_keys {
            for i in 1..list.len() {
                if list[..i].iter().any(|e| e.get(key) == list[i].get(key)) {
                    return Err(
                        self.bad(&format!("{field}[{i}].{key}"), format!("duplicate {key}"))
                    );
                }
            }
        }
        Ok(())
    }

    /// At most `max_bytes` serialised as compact UTF-8 JSON (what Python's
    /// `json.dumps(..., ensure_ascii=False, separators=(",", ":"))` gives) and `max_depth` levels.
    fn free_object(&self, n: &Node, v: &Value, field: &str) -> Result<(), ManifestError> {
        let (max_bytes, max_depth) = (n.max_bytes.unwrap_or(0), n.max_depth.unwrap_or(0));
        let size = serde_json::to_vec(v).map_or(usize::MAX, |b| b.len());
        if size > max_bytes {
            let msg = format!("{size} bytes when serialised; the limit is {max_bytes}");
            return Err(self.bad(field, msg));
        }
        if json_depth(v, 0) > max_depth {
            return Err(self.bad(field, format!("nested deeper than {max_depth} levels")));
        }
        Ok(())
    }

    fn rule(&self, rule: Rule, v: &Value, field: &str, root: &Value) -> Result<(), ManifestError> {
        let s = v.as_str().unwrap_or_default();
        match rule {
            Rule::CreatedAt if parse_created_at(s).is_none() => Err(self.bad(
                field,
                "must be RFC 3339 UTC with a literal Z, e.g. 2026-03-01T12:00:00.123Z",
            )),
            Rule::FileName => self.file_name(s, field),
            Rule::Files => {
                let list = v.as_array().map_or(&[][..], Vec::as_slice);
                let has = |r: &str| list.iter().any(|e| e["role"] == r);
                match self.c.required_roles.iter().find(|r| !has(r)) {
                    Some(r) => Err(self.bad(field, format!("no entry with role {r:?}"))),
                    None => Ok(()),
                }
            }
            Rule::ModelState => self.model_state(v, field, root),
            Rule::Argv => self.argv(v, field),
            Rule::CreatedAt => Ok(()),
        }
    }

    /// A plain name in the manifest's own directory; anything that could leave it is a path
    /// escape (its own reason code), anything else off the pattern a bad field.
    fn file_name(&self, s: &str, field: &str) -> Result<(), ManifestError> {
        if s.contains('/') || s == ".." || s == "." {
            return Err(ManifestError::PathEscape {
                path: self.path.to_path_buf(),
                field: field.to_owned(),
                detail: format!(
                    "{:?} leaves the manifest's directory: a plain file name is required",
                    echo(s)
                ),
            });
        }
        if !self.c.matches("file_name", s) || s == self.c.manifest_name {
            return Err(self.bad(field, "must be a plain file name in the manifest's directory (letters, digits, '.', '_', '-'; not starting with '.' or '-')"));
        }
        Ok(())
    }

    fn model_state(&self, ms: &Value, field: &str, root: &Value) -> Result<(), ManifestError> {
        let kind = ms["kind"].as_str().unwrap_or_default();
        let files = root["files"].as_array().map_or(&[][..], Vec::as_slice);
        let has_model = files.iter().any(|f| f["role"] == "model");
        let no_ref = ms["ref"].as_str().is_none_or(str::is_empty);
        let problem = if kind == "full" && !has_model {
            Some(("kind", "is \"full\" but no file has role \"model\""))
        } else if kind != "full" && has_model {
            Some(("kind", "must be \"full\" when a file has role \"model\""))
        } else if kind == "checkpoint_ref" && no_ref {
            Some(("ref", "required when kind is \"checkpoint_ref\""))
        } else if kind != "full" && ms["exact"] == true {
            Some(("exact", "can only be true when kind is \"full\""))
        } else {
            None
        };
        match problem {
            Some((key, detail)) => Err(self.bad(&join(field, key), detail)),
            None => Ok(()),
        }
    }

    /// docs/manifest.md §4: braces only as a whole-element placeholder, `argv[0]` the
    /// interpreter placeholder or an absolute path, the required placeholders present.
    fn argv(&self, v: &Value, field: &str) -> Result<(), ManifestError> {
        let argv: Vec<&str> = v
            .as_array()
            .map_or(Vec::new(), |a| a.iter().filter_map(Value::as_str).collect());
        let placeholders = &self.c.placeholders;
        for (i, arg) in argv.iter().enumerate() {
            if (arg.contains('{') || arg.contains('}')) && !placeholders.iter().any(|p| p == arg) {
                return Err(ManifestError::BadPlaceholder {
                    path: self.path.to_path_buf(),
                    field: format!("{field}[{i}]"),
                    element: format!("{:?}", echo(arg)),
                });
            }
        }
        if argv
            .first()
            .is_some_and(|a| *a != "{python}" && !a.starts_with('/'))
        {
            return Err(self.bad(
                &format!("{field}[0]"),
                "must be \"{python}\" or an absolute path",
            ));
        }
        match self
            .c
            .required_placeholders
            .iter()
            .find(|p| !argv.contains(&p.as_str()))
        {
            Some(p) => Err(self.bad(field, format!("must contain the placeholder {p}"))),
            None => Ok(()),
        }
    }
}

/// Containers count one level each, scalars none (the Python side's `_json_depth`).
fn json_depth(v: &Value, depth: usize) -> usize {
    let inner = match v {
        Value::Object(m) => m.values().map(|x| json_depth(x, depth + 1)).max(),
        Value::Array(a) => a.iter().map(|x| json_depth(x, depth + 1)).max(),
        _ => return depth,
    };
    inner.unwrap_or(0).max(depth + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_contract_loads() {
        let c = Contract::from_json(CONTRACT_JSON).unwrap();
        assert_eq!(c.contract, "assertwatch.manifest-contract");
        assert_eq!(c.version, 1);
        assert_eq!(c.schema, "assertwatch.debug-state/v1");
        assert_eq!(c.manifest_name, super::super::MANIFEST_NAME);
        assert_eq!(c.modes(), ["sync-gpu", "cpu", "sanitizer"]);
        assert_eq!(contract().version, c.version);
    }

    #[test]
    fn an_incomplete_contract_is_refused() {
        let mut v: Value = serde_json::from_str(CONTRACT_JSON).unwrap();
        v["rules"] = serde_json::json!(["files"]);
        assert!(Contract::from_json(&v.to_string()).is_err());
        let mut v: Value = serde_json::from_str(CONTRACT_JSON).unwrap();
        v["document"]["keys"]["job"]["keys"]["name"]["pattern"] = "nope".into();
        assert!(Contract::from_json(&v.to_string()).is_err());
        let mut v: Value = serde_json::from_str(CONTRACT_JSON).unwrap();
        v["document"]["keys"]["pid"]["maximum"] = 3.into();
        assert!(Contract::from_json(&v.to_string()).is_err());
    }

    #[test]
    fn object_keys_keep_the_file_order() {
        let keys: Vec<&str> = contract()
            .document
            .keys
            .iter()
            .map(|(k, _)| k.as_str())
            .collect();
        assert_eq!(&keys[..3], ["schema", "job", "step"]);
    }

    #[test]
    fn patterns_match_whole_strings_in_ascii() {
        let c = contract();
        assert!(c.matches("job_name", "train-42"));
        assert!(!c.matches("job_name", "train-42\n"));
        assert!(!c.matches("job_name", "x/train-42"));
        assert!(c.matches("entrypoint", "examples.tiny_train:replay_step"));
        assert!(!c.matches("entrypoint", "a:b:c"));
        assert!(!c.matches("entrypoint", "a.:b"));
        assert!(!c.matches("entrypoint", "1a:b"));
        assert!(!c.matches("created_at", "٢٠٢٦-03-01T12:00:00Z"));
    }

    #[test]
    fn created_at_accepts_the_contract_forms() {
        use std::time::{Duration, UNIX_EPOCH};
        assert!(parse_created_at("2026-03-01T12:00:00Z").is_some());
        assert!(parse_created_at("2026-03-01T12:00:00.123456789Z").is_some());
        assert!(parse_created_at("2024-02-29T00:00:00Z").is_some());
        assert!(parse_created_at("0001-01-01T00:00:00Z").is_some());
        for bad in [
            "2026-02-29T00:00:00Z",
            "2026-03-01T12:00:00+00:00",
            "2026-03-01t12:00:00z",
            "2026-03-01T24:00:00Z",
            "2026-03-01T23:59:60Z",
            "2026-03-01T12:00:61Z",
            "2026-03-01T12:00:00.Z",
            "2026-03-01T12:00:00.1234567890Z",
            "0000-01-01T00:00:00Z",
            "2026-03-01T12:00:00Z\n",
        ] {
            assert!(parse_created_at(bad).is_none(), "{bad}");
        }
        let t = parse_created_at("1970-01-02T00:00:01.5Z").unwrap();
        assert_eq!(t, UNIX_EPOCH + Duration::from_millis(86_401_500));
        let t = parse_created_at("1969-12-31T23:59:59Z").unwrap();
        assert_eq!(t, UNIX_EPOCH - Duration::from_secs(1));
    }

    #[test]
    fn extra_is_measured_compact_and_by_depth() {
        let v: Value = serde_json::from_str(r#"{"a": 1, "b": [1, 2, {"c": null}]}"#).unwrap();
        // json.dumps(v, separators=(",", ":")) gives {"a":1,"b":[1,2,{"c":null}]}: 28 bytes.
        assert_eq!(serde_json::to_vec(&v).unwrap().len(), 28);
        assert_eq!(json_depth(&v, 0), 3);
    }
}
