//! Allowlist redaction of argument and output values.
//!
//! A [`FieldPath`] is a dot-separated list of object keys (`entries.name`); `$` is
//! the whole value. Arrays are transparent: a path applies to every element, so
//! `entries.name` keeps `name` in each object of the `entries` array. Everything not
//! reached by an allowlisted path is removed.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

/// A validated allowlist path.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FieldPath(String);

/// Why a redaction path is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RedactionError {
    /// The path is empty or has an empty segment.
    #[error("redaction path {0:?} is empty or has an empty segment")]
    EmptySegment(String),
}

impl FieldPath {
    /// The path that keeps the whole value.
    pub const ROOT: &'static str = "$";

    /// Parses a path.
    pub fn parse(path: &str) -> Result<Self, RedactionError> {
        if path == Self::ROOT {
            return Ok(Self(path.to_owned()));
        }
        if path.is_empty() || path.split('.').any(str::is_empty) {
            return Err(RedactionError::EmptySegment(path.to_owned()));
        }
        Ok(Self(path.to_owned()))
    }

    /// The path text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    fn segments(&self) -> impl Iterator<Item = &str> {
        let root = self.0 == Self::ROOT;
        self.0.split('.').filter(move |_| !root)
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for FieldPath {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for FieldPath {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        Self::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// A tool's redaction config: which argument and output fields may reach UI, events
/// and logs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Redaction {
    /// Argument fields shown in `tool_call_start` events.
    #[serde(default)]
    pub args: Vec<FieldPath>,
    /// Output fields shown in `tool_call_result` events.
    #[serde(default)]
    pub output: Vec<FieldPath>,
}

impl Redaction {
    /// Shows every argument and output field in events, logs and UIs: for
    /// development only. A production tool lists the fields it may show
    /// ([`Redaction::new`]); everything else is removed, so a tool without a list
    /// shows `{}`.
    pub fn dev_only_show_everything() -> Self {
        let root = FieldPath(FieldPath::ROOT.to_owned());
        Self {
            args: vec![root.clone()],
            output: vec![root],
        }
    }

    /// Builds a config from path strings.
    pub fn new<A, O>(args: A, output: O) -> Result<Self, RedactionError>
    where
        A: IntoIterator,
        A::Item: AsRef<str>,
        O: IntoIterator,
        O::Item: AsRef<str>,
    {
        Ok(Self {
            args: args
                .into_iter()
                .map(|p| FieldPath::parse(p.as_ref()))
                .collect::<Result<_, _>>()?,
            output: output
                .into_iter()
                .map(|p| FieldPath::parse(p.as_ref()))
                .collect::<Result<_, _>>()?,
        })
    }
}

/// A compiled allowlist: a trie of path segments.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Allowlist {
    keep_all: bool,
    children: BTreeMap<String, Allowlist>,
}

impl Allowlist {
    pub(crate) fn compile(paths: &[FieldPath]) -> Self {
        let mut root = Self::default();
        for path in paths {
            let mut node = &mut root;
            for segment in path.segments() {
                node = node.children.entry(segment.to_owned()).or_default();
            }
            node.keep_all = true;
        }
        root
    }

    /// Whether the view is the whole value (the root is allowlisted).
    pub(crate) fn keeps_everything(&self) -> bool {
        self.keep_all
    }

    /// The redacted view of `value`: an object keeps only allowlisted keys; a scalar
    /// that is not allowlisted becomes `null`.
    pub(crate) fn apply(&self, value: &Value) -> Value {
        self.apply_inner(value).unwrap_or(match value {
            Value::Object(_) => Value::Object(Map::new()),
            Value::Array(_) => Value::Array(Vec::new()),
            _ => Value::Null,
        })
    }

    fn apply_inner(&self, value: &Value) -> Option<Value> {
        if self.keep_all {
            return Some(value.clone());
        }
        match value {
            Value::Object(map) => {
                let mut out = Map::new();
                for (key, child) in &self.children {
                    if let Some(kept) = map.get(key).and_then(|v| child.apply_inner(v)) {
                        out.insert(key.clone(), kept);
                    }
                }
                Some(Value::Object(out))
            }
            Value::Array(items) => Some(Value::Array(
                items
                    .iter()
                    .filter_map(|item| self.apply_inner(item))
                    .collect(),
            )),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn allow(paths: &[&str]) -> Allowlist {
        let paths: Vec<FieldPath> = paths.iter().map(|p| FieldPath::parse(p).unwrap()).collect();
        Allowlist::compile(&paths)
    }

    #[test]
    fn keeps_nested_and_per_element_fields_only() {
        let value = json!({
            "path": "/secret/a.txt",
            "entries": [
                {"name": "a", "size": 1, "owner": {"id": 7, "token": "x"}},
                {"name": "b", "size": 2},
                "loose-string"
            ],
            "meta": {"count": 2, "cursor": "abc"}
        });
        let redacted = allow(&["entries.name", "entries.owner.id", "meta.count"]).apply(&value);
        assert_eq!(
            redacted,
            json!({
                "entries": [{"name": "a", "owner": {"id": 7}}, {"name": "b"}],
                "meta": {"count": 2}
            })
        );
    }

    #[test]
    fn root_path_keeps_everything_and_empty_list_keeps_nothing() {
        let value = json!({"a": [1, 2], "b": "x"});
        assert_eq!(allow(&["$"]).apply(&value), value);
        assert_eq!(allow(&[]).apply(&value), json!({}));
        assert_eq!(allow(&[]).apply(&json!("secret")), Value::Null);
        assert_eq!(
            allow(&["a"]).apply(&json!([{"a": 1, "b": 2}])),
            json!([{"a": 1}])
        );
    }

    #[test]
    fn rejects_empty_segments() {
        assert!(FieldPath::parse("").is_err());
        assert!(FieldPath::parse("a..b").is_err());
        assert!(FieldPath::parse(".a").is_err());
        assert!(Redaction::new(["a"], ["b.c"]).is_ok());
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            "[a-z]{0,6}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                prop::collection::btree_map("[a-d]", inner, 0..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// Key path (array indices skipped) of every non-null scalar in `value`.
    fn scalar_paths(value: &Value, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        match value {
            Value::Object(map) => {
                for (k, v) in map {
                    prefix.push(k.clone());
                    scalar_paths(v, prefix, out);
                    prefix.pop();
                }
            }
            Value::Array(items) => items.iter().for_each(|v| scalar_paths(v, prefix, out)),
            Value::Null => {}
            _ => out.push(prefix.clone()),
        }
    }

    proptest! {
        #[test]
        fn never_lets_a_non_allowlisted_field_through(
            value in arb_json(),
            paths in prop::collection::vec("[a-d](\\.[a-d]){0,2}", 0..4),
        ) {
            let parsed: Vec<FieldPath> =
                paths.iter().map(|p| FieldPath::parse(p).unwrap()).collect();
            let redacted = Allowlist::compile(&parsed).apply(&value);
            let mut found = Vec::new();
            scalar_paths(&redacted, &mut Vec::new(), &mut found);
            for path in found {
                // Each surviving scalar lies at or below a fully allowlisted path.
                let ok = parsed.iter().any(|allowed| {
                    let segs: Vec<&str> = allowed.segments().collect();
                    segs.len() <= path.len()
                        && segs.iter().zip(&path).all(|(a, b)| *a == b.as_str())
                });
                prop_assert!(ok, "{path:?} leaked through {paths:?}");
            }
        }
    }
}
