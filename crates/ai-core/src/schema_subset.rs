//! The P0 schema subset (invariant SCHEMA_SUBSET_P0).
//!
//! Specs sent to a model use JSON Schema draft-07 without combinators or
//! conditionals: `oneOf`, `anyOf`, `allOf`, `not`, `if`/`then`/`else`,
//! `patternProperties` and any `$ref` that is not local (`#...`) are rejected, each
//! with the JSON pointer of the offending keyword. The root must be an object schema.

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

/// One place where a schema leaves the P0 subset.
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
            walk(map, "", &mut violations);
        }
        _ => violations.push(SchemaViolation {
            pointer: String::new(),
            message: "a tool input schema must be a JSON object".into(),
        }),
    }
    if violations.is_empty() {
        Ok(())
    } else {
        Err(violations)
    }
}

fn walk(schema: &Map<String, Value>, pointer: &str, out: &mut Vec<SchemaViolation>) {
    for keyword in FORBIDDEN {
        if schema.contains_key(*keyword) {
            out.push(SchemaViolation {
                pointer: format!("{pointer}/{keyword}"),
                message: format!("`{keyword}` is outside the supported schema subset"),
            });
        }
    }
    if let Some(reference) = schema.get("$ref") {
        let local = reference.as_str().is_some_and(|r| r.starts_with('#'));
        if !local {
            out.push(SchemaViolation {
                pointer: format!("{pointer}/$ref"),
                message: "only local `$ref` (starting with `#`) is supported; remote references are never resolved".into(),
            });
        }
    }
    // Keywords whose value is a map of name -> schema.
    for keyword in ["properties", "definitions", "$defs", "dependencies"] {
        if let Some(Value::Object(children)) = schema.get(keyword) {
            for (name, child) in children {
                if let Value::Object(child) = child {
                    walk(child, &format!("{pointer}/{keyword}/{}", escape(name)), out);
                }
            }
        }
    }
    // Keywords whose value is a schema.
    for keyword in [
        "items",
        "additionalItems",
        "additionalProperties",
        "contains",
        "propertyNames",
    ] {
        match schema.get(keyword) {
            Some(Value::Object(child)) => walk(child, &format!("{pointer}/{keyword}"), out),
            Some(Value::Array(children)) if keyword == "items" => {
                for (i, child) in children.iter().enumerate() {
                    if let Value::Object(child) = child {
                        walk(child, &format!("{pointer}/items/{i}"), out);
                    }
                }
            }
            _ => {}
        }
    }
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
                "/properties/a~1b/items/$ref".to_string(),
                "/definitions/D/additionalProperties/allOf".to_string()
            ]
        );
        assert_eq!(
            pointers(json!({"type": "string"})),
            vec!["/type".to_string()]
        );
        assert_eq!(pointers(json!(true)), vec![String::new()]);
    }
}
