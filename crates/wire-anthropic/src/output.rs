//! Typed answers on the Messages API: a JSON-schema response format goes out as
//! `output_config.format` (Anthropic's structured outputs), its schema reduced to
//! what that grammar takes.
//!
//! - Every object gets `additionalProperties: false` (required there); an object
//!   open to other properties (a map) cannot be expressed, and neither can
//!   `oneOf`, `not`, conditionals, `patternProperties` or tuples: such a schema
//!   is not sent as a format (see [`OutputSchema`]).
//! - Validation keywords the grammar does not take (numeric bounds,
//!   `multipleOf`, string lengths, `maxItems`, `minItems` above 1, `uniqueItems`,
//!   property counts, a `format` outside its list) are removed and the removal
//!   logged at warn: the answer is still checked against the schema as written.

use ai_core::schema::strict::{
    Grammar, NotStrict, NotStrictReason, SHAPING_KEYWORDS, STRICT_FORMATS, VALIDATION_KEYWORDS,
    each_subschema, warn_dropped_once,
};
use serde_json::{Map, Value, json};

/// Validation keywords the grammar does not take beyond the common ones
/// (numeric bounds, `maxItems`): removed.
const DROPPED: &[&str] = &[
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "maxItems",
];

/// Deepest nesting followed.
const MAX_DEPTH: usize = 32;

/// What a JSON-schema response format becomes on this wire.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum OutputSchema {
    /// Sent as `output_config.format` with this (reduced) schema.
    Native(Value),
    /// Not expressible in the grammar: the model is asked for it in the system
    /// prompt instead (and the answer checked as always).
    Prompted(NotStrict),
}

/// `schema` as Anthropic's structured outputs take it, or why it cannot be.
pub fn output_schema(schema: &Value) -> OutputSchema {
    let mut out = schema.clone();
    let mut dropped = Vec::new();
    match reduce(&mut out, "#", 0, &mut dropped) {
        Ok(()) => {
            warn_dropped_once("Anthropic structured outputs", &dropped);
            OutputSchema::Native(out)
        }
        Err(why) => {
            tracing::warn!(%why, "answer schema asked for in the prompt: Anthropic's structured outputs cannot express it");
            OutputSchema::Prompted(why)
        }
    }
}

/// The `output_config` value for `schema`.
pub(crate) fn output_config(schema: Value) -> Value {
    json!({"format": {"type": "json_schema", "schema": schema}})
}

/// The system-prompt text that asks for an answer matching `schema`.
pub(crate) fn prompted(schema: &Value) -> String {
    format!(
        "Answer with only a JSON value, no prose and no code fence, that matches this JSON Schema:\n{schema}"
    )
}

/// Anthropic's structured outputs.
const GRAMMAR: Grammar = Grammar {
    max_depth: MAX_DEPTH,
    unsupported: &[SHAPING_KEYWORDS],
    dropped: &[VALIDATION_KEYWORDS, DROPPED],
    // OpenAI's strict formats and `uri`.
    formats: &[STRICT_FORMATS, &["uri"]],
};

fn reduce(
    node: &mut Value,
    path: &str,
    depth: usize,
    dropped: &mut Vec<String>,
) -> Result<(), NotStrict> {
    let map = GRAMMAR.node(node, path, depth, dropped)?;
    if map
        .get("minItems")
        .and_then(Value::as_u64)
        .is_some_and(|n| n > 1)
    {
        map.remove("minItems");
        dropped.push(format!("{path}/minItems"));
    }
    let keys = ["$defs", "definitions", "properties", "anyOf", "allOf"];
    each_subschema(map, path, &keys, |sub, at| {
        reduce(sub, &at, depth + 1, dropped)
    })?;
    close_object(map).map_err(|reason| NotStrict {
        path: path.to_owned(),
        reason,
    })
}

/// An object node with `properties` gets `additionalProperties: false` (what
/// the grammar requires; a typed answer's fields are all its properties); one
/// open to other properties (a map, or an object without `properties`) cannot
/// be expressed.
fn close_object(map: &mut Map<String, Value>) -> Result<(), NotStrictReason> {
    let is_object = match map.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(types)) => types.iter().any(|t| t == "object"),
        _ => map.contains_key("properties"),
    };
    if !is_object {
        return Ok(());
    }
    let declared = map.get("properties").is_some_and(Value::is_object);
    match map.get("additionalProperties") {
        Some(Value::Bool(false)) => Ok(()),
        None if declared => {
            map.insert("additionalProperties".into(), Value::Bool(false));
            Ok(())
        }
        _ => Err(NotStrictReason::OpenObject),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typed_answer_schema_is_closed_and_stripped_of_what_the_grammar_refuses() {
        let schema = json!({
            "type": "object",
            "properties": {
                "id": {"type": "integer", "format": "uint32", "minimum": 0},
                "when": {"type": "string", "format": "date-time"},
                "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "minItems": 2},
                "line": {"type": ["object", "null"], "properties": {"sku": {"type": "string"}}}
            },
            "required": ["id"]
        });
        let OutputSchema::Native(out) = output_schema(&schema) else {
            panic!("expressible");
        };
        assert_eq!(out["additionalProperties"], false);
        assert_eq!(out["properties"]["line"]["additionalProperties"], false);
        assert_eq!(out["properties"]["id"], json!({"type": "integer"}));
        assert_eq!(out["properties"]["when"]["format"], "date-time");
        assert_eq!(
            out["properties"]["tags"],
            json!({"type": "array", "items": {"type": "string"}})
        );
        // Optional properties stay optional: the grammar takes `required` as given.
        assert_eq!(out["required"], json!(["id"]));
    }

    #[test]
    fn maps_and_one_of_are_asked_for_in_the_prompt() {
        for open in [
            json!({"type": "object", "additionalProperties": {"type": "integer"}}),
            json!({"type": "object"}),
        ] {
            assert!(matches!(
                output_schema(&open),
                OutputSchema::Prompted(NotStrict {
                    reason: NotStrictReason::OpenObject,
                    ..
                })
            ));
        }
        let union = json!({"oneOf": [{"type": "string"}, {"type": "integer"}]});
        assert!(matches!(output_schema(&union), OutputSchema::Prompted(_)));
    }
}
