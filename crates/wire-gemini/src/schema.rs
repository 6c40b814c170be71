//! A tool's JSON Schema reduced to what Gemini's `parameters` accept: the
//! OpenAPI 3.0 subset of its `Schema` object.
//!
//! - Local `$ref`s are resolved in place (ai-core's resolver; remote references
//!   are never followed), up to [`MAX_DEPTH`] levels, so a recursive schema ends
//!   in a plain `{type: object}`; `$defs` and `definitions` are dropped after.
//! - `type: [T, "null"]` becomes `type: T` with `nullable: true`; `const: v`
//!   becomes `enum: [v]`.
//! - Kept: `type`, `format`, `title`, `description`, `nullable`, `enum`,
//!   `properties`, `required`, `items`, `minItems`, `maxItems`, `minimum`,
//!   `maximum`, `minLength`, `maxLength`, `pattern`, `minProperties`,
//!   `maxProperties`, `anyOf`, `propertyOrdering`. Everything else
//!   (`additionalProperties`, `$schema`, `default`, `examples`, ...) is dropped:
//!   older models refuse the request over a keyword they do not know, and none
//!   of them changes which arguments are valid enough to be worth that. The tool
//!   runner still validates the arguments against the schema as written.
//! - `required` keeps only names that are properties, as the API checks.
//! - `format` stays only where Gemini knows it (`enum` and `date-time` on
//!   strings, `int32` and `int64` on integers, `float` and `double` on numbers):
//!   the API refuses a request with another (`uri`, `email`, `uint32`).

use serde_json::{Map, Value, json};

/// How deep `$ref`s are followed before a subschema is cut to `{type: object}`.
pub const MAX_DEPTH: usize = 16;

/// Keywords a subschema keeps as they are.
const KEPT: &[&str] = &[
    "format",
    "title",
    "description",
    "nullable",
    "enum",
    "minItems",
    "maxItems",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "pattern",
    "minProperties",
    "maxProperties",
    "propertyOrdering",
];

/// `schema` as Gemini's `parameters` accept it.
pub fn reduce(schema: &Value) -> Value {
    reduce_at(schema, schema, 0)
}

fn reduce_at(root: &Value, schema: &Value, depth: usize) -> Value {
    let Value::Object(map) = schema else {
        // `true` or a non-schema: anything goes.
        return json!({});
    };
    if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
        return match ai_core::schema::resolve_local_ref(root, reference) {
            Some(target) if depth < MAX_DEPTH => reduce_at(root, target, depth + 1),
            _ => json!({"type": "object"}),
        };
    }
    let mut out = Map::new();
    type_of(map, &mut out);
    for key in KEPT {
        if let Some(value) = map.get(*key) {
            out.entry(*key).or_insert_with(|| value.clone());
        }
    }
    if let Some(value) = map.get("const") {
        out.insert("enum".into(), json!([value]));
    }
    keep_known_format(&mut out);
    if let Some(Value::Object(properties)) = map.get("properties") {
        let reduced: Map<String, Value> = properties
            .iter()
            .map(|(name, sub)| (name.clone(), reduce_at(root, sub, depth + 1)))
            .collect();
        if let Some(Value::Array(required)) = map.get("required") {
            let kept: Vec<Value> = required
                .iter()
                .filter(|name| name.as_str().is_some_and(|n| reduced.contains_key(n)))
                .cloned()
                .collect();
            if !kept.is_empty() {
                out.insert("required".into(), Value::Array(kept));
            }
        }
        out.insert("properties".into(), Value::Object(reduced));
    }
    if let Some(items) = map.get("items") {
        out.insert("items".into(), reduce_at(root, items, depth + 1));
    }
    if let Some(Value::Array(options)) = map.get("anyOf") {
        let reduced = options
            .iter()
            .map(|sub| reduce_at(root, sub, depth + 1))
            .collect();
        out.insert("anyOf".into(), Value::Array(reduced));
    }
    Value::Object(out)
}

/// The `format`s Gemini's `Schema` knows, by type; it refuses a request with
/// another (`uri`, `email`, schemars' `uint32`).
const FORMATS: &[(&str, &[&str])] = &[
    ("string", &["enum", "date-time"]),
    ("integer", &["int32", "int64"]),
    ("number", &["float", "double"]),
];

/// Drops a `format` Gemini does not know for the node's type.
fn keep_known_format(out: &mut Map<String, Value>) {
    let Some(format) = out.get("format").and_then(Value::as_str) else {
        out.remove("format");
        return;
    };
    let kind = out.get("type").and_then(Value::as_str).unwrap_or_default();
    let known = FORMATS
        .iter()
        .any(|(t, formats)| *t == kind && formats.contains(&format));
    if !known {
        out.remove("format");
    }
}

/// `type`, with a `null` member of a type list read as `nullable`.
fn type_of(map: &Map<String, Value>, out: &mut Map<String, Value>) {
    match map.get("type") {
        Some(Value::String(kind)) => {
            out.insert("type".into(), json!(kind));
        }
        Some(Value::Array(kinds)) => {
            let mut named = kinds
                .iter()
                .filter_map(Value::as_str)
                .filter(|k| *k != "null");
            if let Some(kind) = named.next() {
                out.insert("type".into(), json!(kind));
            }
            if kinds.iter().any(|k| k == "null") {
                out.insert("nullable".into(), json!(true));
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_formats_gemini_knows_for_a_type_stay() {
        for (node, kept) in [
            (json!({"type": "string", "format": "date-time"}), true),
            (json!({"type": "string", "format": "uri"}), false),
            (json!({"type": "string", "format": "email"}), false),
            (json!({"type": "integer", "format": "int64"}), true),
            (json!({"type": "integer", "format": "uint32"}), false),
            (json!({"type": "number", "format": "double"}), true),
            (json!({"type": "number", "format": "int32"}), false),
        ] {
            assert_eq!(reduce(&node).get("format").is_some(), kept, "{node}");
        }
    }

    #[test]
    fn refs_are_resolved_and_unknown_keywords_dropped() {
        let schema = json!({
            "$schema": "https://json-schema.org/draft-07/schema",
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "path": {"type": ["string", "null"], "default": "a"},
                "node": {"$ref": "#/$defs/node"},
                "mode": {"const": "fast"}
            },
            "required": ["path", "gone"],
            "$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}}
        });
        let reduced = reduce(&schema);
        assert_eq!(reduced["required"], json!(["path"]));
        assert_eq!(
            reduced["properties"]["path"],
            json!({"type": "string", "nullable": true})
        );
        assert_eq!(reduced["properties"]["mode"], json!({"enum": ["fast"]}));
        assert!(reduced.get("additionalProperties").is_none());
        assert!(reduced.get("$defs").is_none());
        // The recursion ends.
        let mut node = &reduced["properties"]["node"];
        let mut levels = 0;
        while let Some(next) = node.pointer("/properties/next") {
            node = next;
            levels += 1;
        }
        assert!(levels <= MAX_DEPTH, "{levels}");
    }
}
