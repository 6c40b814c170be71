//! JSON Schema walking shared by every crate that reads tool schemas: one resolver of
//! local `$ref`s, one walker over subschemas, and the P0 subset check (invariant
//! SCHEMA_SUBSET_P0).
//!
//! Specs sent to a model use JSON Schema draft-07 without combinators or
//! conditionals: `oneOf`, `anyOf`, `allOf`, `not`, `if`/`then`/`else`,
//! `patternProperties` and any `$ref` that is not local (`#...`) are rejected, each
//! with the JSON pointer of the offending keyword. The root must be an object schema.
//! A local `$ref` must resolve inside the schema. Remote references are never
//! resolved, by anything in this project.
//!
//! Values are checked ([`ValueSchema`], and the tool runner's argument and output
//! checks) by this crate's own validator rather than a general JSON Schema library,
//! whose regular-expression and date engines dominated the build of the quick
//! start. It applies draft-07 semantics plus the 2019-09/2020-12 spellings derived
//! schemas and MCP servers use, and enforces `type`, `enum`, `const`, `properties`,
//! `required`, `additionalProperties`, `patternProperties`, `propertyNames`,
//! `minProperties`, `maxProperties`, `dependencies`, `dependentRequired`,
//! `dependentSchemas`, `items` (schema or tuple), `additionalItems`, `prefixItems`,
//! `contains`, `minItems`, `maxItems`, `uniqueItems`, `minLength`, `maxLength`
//! (in Unicode scalar values), `pattern` (a regular expression without
//! look-around or backreferences), `minimum`, `maximum`, `exclusiveMinimum`,
//! `exclusiveMaximum` (numbers), `multipleOf`, `allOf`, `anyOf`, `oneOf`, `not`,
//! `if`/`then`/`else`, local `$ref` (recursion included) and boolean schemas.
//! `format` is an assertion on strings for `date-time`, `date`, `time`, `email`,
//! `hostname`, `ipv4`, `ipv6`, `uri`, `uri-reference`, `uuid` and `regex`; other
//! format names (schemars' `uint32`, `double`, ...) are annotations and check
//! nothing, like the other annotations and unknown keywords. A schema using an
//! assertion outside this list (`unevaluatedProperties`, `unevaluatedItems`,
//! `$dynamicRef`, `$recursiveRef`, `minContains`, `maxContains`) does not compile,
//! so no constraint is silently skipped.

pub mod strict;
mod validate;

pub(crate) use validate::Validator;

use serde_json::{Map, Value};

/// Keywords outside the P0 subset.
const FORBIDDEN: &[&str] = &[
    "oneOf",
    "anyOf",
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "patternProperties",
];

/// Keywords whose value is a map of name -> subschema.
const SCHEMA_MAPS: &[&str] = &[
    "properties",
    "definitions",
    "$defs",
    "dependencies",
    "patternProperties",
];

/// Keywords whose value is one subschema (`items` may also be an array of them).
const SCHEMA_VALUES: &[&str] = &[
    "items",
    "additionalItems",
    "additionalProperties",
    "contains",
    "propertyNames",
    "not",
    "if",
    "then",
    "else",
];

/// Keywords whose value is an array of subschemas.
const SCHEMA_ARRAYS: &[&str] = &["anyOf", "oneOf", "allOf", "prefixItems"];

/// One place where a schema breaks a rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{pointer}: {message}")]
pub struct SchemaViolation {
    /// JSON pointer to the offending keyword (e.g. `/properties/a/anyOf`).
    pub pointer: String,
    /// What is wrong.
    pub message: String,
}

fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

/// Resolves a local `$ref` (`#` or `#/json/pointer`) against the schema's root.
/// Anything else (a remote URL, a relative file, an anchor) resolves to `None`:
/// remote references are never fetched.
pub fn resolve_local_ref<'a>(root: &'a Value, reference: &str) -> Option<&'a Value> {
    match reference.strip_prefix('#') {
        Some("") => Some(root),
        Some(pointer) if pointer.starts_with('/') => root.pointer(pointer),
        _ => None,
    }
}

/// Calls `visit` with the JSON pointer and keywords of `schema` and of every
/// subschema under it, depth first, in document order. Boolean subschemas are
/// skipped; `$ref`s are reported where they stand, not followed.
pub fn visit_subschemas(schema: &Value, visit: &mut dyn FnMut(&str, &Map<String, Value>)) {
    if let Value::Object(map) = schema {
        walk(map, "", visit);
    }
}

fn walk(
    schema: &Map<String, Value>,
    pointer: &str,
    visit: &mut dyn FnMut(&str, &Map<String, Value>),
) {
    visit(pointer, schema);
    for (keyword, value) in schema {
        let keyword = keyword.as_str();
        match value {
            Value::Object(children) if SCHEMA_MAPS.contains(&keyword) => {
                for (name, child) in children {
                    if let Value::Object(child) = child {
                        walk(
                            child,
                            &format!("{pointer}/{keyword}/{}", escape(name)),
                            visit,
                        );
                    }
                }
            }
            Value::Object(child) if SCHEMA_VALUES.contains(&keyword) => {
                walk(child, &format!("{pointer}/{keyword}"), visit);
            }
            Value::Array(children) if keyword == "items" || SCHEMA_ARRAYS.contains(&keyword) => {
                for (i, child) in children.iter().enumerate() {
                    if let Value::Object(child) = child {
                        walk(child, &format!("{pointer}/{keyword}/{i}"), visit);
                    }
                }
            }
            _ => {}
        }
    }
}

/// Checks that every `$ref` in `schema` is local and resolves inside it.
pub fn check_schema_refs(schema: &Value) -> Result<(), Vec<SchemaViolation>> {
    let mut violations = Vec::new();
    visit_subschemas(schema, &mut |pointer, map| {
        ref_violation(schema, pointer, map, &mut violations);
    });
    finish(violations)
}

fn ref_violation(
    root: &Value,
    pointer: &str,
    map: &Map<String, Value>,
    out: &mut Vec<SchemaViolation>,
) {
    let Some(reference) = map.get("$ref") else {
        return;
    };
    let message = match reference.as_str() {
        Some(r) if r.starts_with('#') => match resolve_local_ref(root, r) {
            Some(_) => return,
            None => format!("`$ref` `{r}` points at nothing inside the schema"),
        },
        _ => "only local `$ref` (starting with `#`) is supported; remote references are never resolved".into(),
    };
    out.push(SchemaViolation {
        pointer: format!("{pointer}/$ref"),
        message,
    });
}

fn finish(violations: Vec<SchemaViolation>) -> Result<(), Vec<SchemaViolation>> {
    if violations.is_empty() {
        Ok(())
    } else {
        Err(violations)
    }
}

/// Checks a tool input schema against the P0 subset; returns every violation.
pub fn check_schema_subset(schema: &Value) -> Result<(), Vec<SchemaViolation>> {
    let mut violations = Vec::new();
    match schema {
        Value::Object(map) => {
            if map.get("type") != Some(&Value::String("object".into())) {
                violations.push(SchemaViolation {
                    pointer: "/type".into(),
                    message: "the root of a tool input schema must have \"type\": \"object\""
                        .into(),
                });
            }
            visit_subschemas(schema, &mut |pointer, map| {
                for keyword in FORBIDDEN {
                    if map.contains_key(*keyword) {
                        violations.push(SchemaViolation {
                            pointer: format!("{pointer}/{keyword}"),
                            message: format!("`{keyword}` is outside the supported schema subset"),
                        });
                    }
                }
                ref_violation(schema, pointer, map, &mut violations);
            });
        }
        _ => violations.push(SchemaViolation {
            pointer: String::new(),
            message: "a tool input schema must be a JSON object".into(),
        }),
    }
    finish(violations)
}

/// A schema derived from a Rust type (by schemars, in the crates that derive
/// them) in the form this project sends and checks: `$schema` dropped,
/// `anyOf: [X, {"type": "null"}]` (how schemars spells `Option<T>` of a complex `T`)
/// folded into a nullable `X`, and every `$ref` local and resolving (with the one
/// resolver). Pure JSON: ai-core derives no schema itself.
pub fn normalize_derived(mut schema: Value) -> Result<Value, Vec<SchemaViolation>> {
    if let Value::Object(map) = &mut schema {
        map.remove("$schema");
    }
    fold_nullable(&mut schema);
    check_schema_refs(&schema)?;
    Ok(schema)
}

fn is_null_schema(value: &Value) -> bool {
    value
        .as_object()
        .is_some_and(|m| m.len() == 1 && m.get("type") == Some(&Value::String("null".into())))
}

fn add_null_type(map: &mut Map<String, Value>) -> bool {
    match map.get_mut("type") {
        Some(Value::String(t)) => {
            let t = std::mem::take(t);
            map.insert(
                "type".into(),
                Value::Array(vec![Value::String(t), "null".into()]),
            );
            true
        }
        Some(Value::Array(types)) => {
            if !types.iter().any(|t| t == "null") {
                types.push("null".into());
            }
            true
        }
        _ => false,
    }
}

fn fold_nullable(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for keyword in ["anyOf", "oneOf"] {
                let Some(Value::Array(branches)) = map.get(keyword) else {
                    continue;
                };
                if branches.len() != 2 {
                    continue;
                }
                let other = if is_null_schema(&branches[1]) {
                    branches[0].clone()
                } else if is_null_schema(&branches[0]) {
                    branches[1].clone()
                } else {
                    continue;
                };
                let Value::Object(mut other) = other else {
                    continue;
                };
                if other.contains_key("enum") {
                    if let Some(Value::Array(values)) = other.get_mut("enum")
                        && !values.contains(&Value::Null)
                    {
                        values.push(Value::Null);
                    }
                    add_null_type(&mut other);
                } else if !add_null_type(&mut other) {
                    continue;
                }
                map.remove(keyword);
                for (k, v) in other {
                    map.entry(k).or_insert(v);
                }
            }
            map.values_mut().for_each(fold_nullable);
        }
        Value::Array(items) => items.iter_mut().for_each(fold_nullable),
        _ => {}
    }
}

/// A compiled schema for checking values, such as a model's structured answer.
pub struct ValueSchema {
    validator: Validator,
}

impl std::fmt::Debug for ValueSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ValueSchema").finish_non_exhaustive()
    }
}

impl ValueSchema {
    /// Compiles `schema` (draft-07, local references only; see the module docs for
    /// the keywords enforced). The error names the offending keyword's JSON pointer.
    pub fn compile(schema: &Value) -> Result<Self, SchemaViolation> {
        compile(schema).map(|validator| Self { validator })
    }

    /// Checks `value`; the error lists where it differs (path and keyword), never
    /// the values themselves.
    pub fn check(&self, value: &Value) -> Result<(), String> {
        match describe_mismatch(&self.validator, value) {
            Some(message) => Err(message),
            None => Ok(()),
        }
    }
}

/// Compiles a validator that resolves nothing outside the schema.
pub(crate) fn compile(schema: &Value) -> Result<Validator, SchemaViolation> {
    validate::compile(schema)
}

/// Describes how `value` fails `validator` by path and keyword, never by value: at
/// most eight places, then how many more.
pub(crate) fn describe_mismatch(validator: &Validator, value: &Value) -> Option<String> {
    const MAX_LISTED: usize = 8;
    let mismatches = validator.mismatches(value);
    if mismatches.is_empty() {
        return None;
    }
    let mut parts: Vec<String> = mismatches
        .iter()
        .take(MAX_LISTED)
        .map(|m| {
            let path = if m.path.is_empty() { "/" } else { &m.path };
            format!("{path}: {}", m.detail)
        })
        .collect();
    if mismatches.len() > parts.len() {
        parts.push(format!("and {} more", mismatches.len() - parts.len()));
    }
    Some(parts.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pointers(schema: Value) -> Vec<String> {
        match check_schema_subset(&schema) {
            Ok(()) => Vec::new(),
            Err(v) => v.into_iter().map(|v| v.pointer).collect(),
        }
    }

    #[test]
    fn accepts_plain_object_schemas_with_local_refs() {
        let schema = json!({
            "type": "object",
            "properties": {
                "anyOf": {"type": "string"},
                "inner": {"$ref": "#/definitions/Inner"},
                "list": {"type": "array", "items": {"type": "integer"}}
            },
            "required": ["anyOf"],
            "definitions": {"Inner": {"type": "object", "properties": {"x": {"enum": ["a", "b"]}}}}
        });
        assert_eq!(pointers(schema), Vec::<String>::new());
    }

    #[test]
    fn rejects_each_forbidden_keyword_with_its_path() {
        for keyword in FORBIDDEN {
            let schema = json!({
                "type": "object",
                "properties": {"a": {"type": "object", "properties": {"b": {*keyword: []}}}}
            });
            assert_eq!(
                pointers(schema),
                vec![format!("/properties/a/properties/b/{keyword}")],
                "{keyword}"
            );
        }
    }

    #[test]
    fn rejects_remote_refs_and_non_object_roots() {
        let schema = json!({
            "type": "object",
            "properties": {"a/b": {"type": "array", "items": {"$ref": "https://evil.example/s.json"}}},
            "definitions": {"D": {"additionalProperties": {"allOf": []}}}
        });
        assert_eq!(
            pointers(schema),
            vec![
                "/definitions/D/additionalProperties/allOf".to_string(),
                "/properties/a~1b/items/$ref".to_string()
            ]
        );
        assert_eq!(
            pointers(json!({"type": "string"})),
            vec!["/type".to_string()]
        );
        assert_eq!(pointers(json!(true)), vec![String::new()]);
    }

    #[test]
    fn dangling_local_refs_are_violations() {
        let schema = json!({
            "type": "object",
            "properties": {"a": {"$ref": "#/definitions/Missing"}, "b": {"$ref": "#"}}
        });
        assert_eq!(
            pointers(schema.clone()),
            vec!["/properties/a/$ref".to_string()]
        );
        let refs = check_schema_refs(&schema).unwrap_err();
        assert_eq!(refs.len(), 1);
        assert!(refs[0].message.contains("points at nothing"), "{}", refs[0]);
    }

    #[test]
    fn the_walker_reaches_refs_under_combinators_and_resolves_only_local_refs() {
        let schema = json!({
            "oneOf": [{"$ref": "#/$defs/A"}, {"type": "null"}],
            "$defs": {"A": {"type": "object", "prefixItems": [{"$ref": "#/$defs/Nope"}]}}
        });
        let violations = check_schema_refs(&schema).unwrap_err();
        assert_eq!(violations[0].pointer, "/$defs/A/prefixItems/0/$ref");
        assert_eq!(violations.len(), 1);
        assert!(resolve_local_ref(&schema, "#/$defs/A").is_some());
        assert_eq!(resolve_local_ref(&schema, "#"), Some(&schema));
        assert!(resolve_local_ref(&schema, "https://example.com/s.json#/$defs/A").is_none());
        assert!(resolve_local_ref(&schema, "#anchor").is_none());
    }
}
