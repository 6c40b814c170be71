//! Typed answers: a JSON schema derived from a Rust type, asked for as a strict
//! response format, the answer checked against it, and asked for again with the
//! mismatch when it does not match.
//!
//! Providers take an object at the root of a response schema only, so a type
//! whose schema is anything else (a list, a number, a string enum, a tagged
//! union) is asked for wrapped, as `{"value": <the type>}`, and unwrapped when
//! read.

use ai_core::completion::ResponseFormat;
use ai_core::schema::strict::relax_strict_value;
use ai_core::schema::{ValueSchema, normalize_derived};
use schemars::JsonSchema;
use schemars::generate::{Contract, SchemaSettings};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::run::{RunError, RunOutput};

/// How many times an agent asks again, by default, when an answer does not match
/// the requested type (see `AgentBuilder::output_retries`).
pub const DEFAULT_OUTPUT_RETRIES: u32 = 1;

/// A typed answer and the runs that produced it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Typed<T> {
    /// The answer, read as `T`.
    pub value: T,
    /// The run whose answer matched.
    pub output: RunOutput,
    /// Earlier runs whose answers did not match, oldest first (their usage counts
    /// too).
    pub rejected: Vec<RunOutput>,
}

/// The property a non-object answer is wrapped in.
const WRAPPED: &str = "value";

/// The schema an answer must match, compiled once per typed call.
pub(crate) struct AnswerSchema {
    name: String,
    /// What is asked for: the type's schema, or it wrapped in an object.
    schema: Value,
    /// The type's own schema, as derived.
    own: Value,
    /// The type's own schema, compiled.
    check: ValueSchema,
    /// Whether the type's schema is wrapped (`{"value": ...}`).
    wrapped: bool,
}

impl AnswerSchema {
    /// The schema of `T` as deserialized: draft-07, subschemas inlined, `Option`s
    /// folded into nullable types (the same derivation as tool arguments).
    pub(crate) fn of<T: JsonSchema>() -> Result<Self, RunError> {
        let mut settings = SchemaSettings::draft07();
        settings.inline_subschemas = true;
        settings.contract = Contract::Deserialize;
        let derived = settings.into_generator().into_root_schema_for::<T>();
        let unusable = |message: String| {
            RunError::Internal(format!("the answer type has no usable schema: {message}"))
        };
        let schema = normalize_derived(derived.to_value()).map_err(|violations| {
            unusable(
                violations
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; "),
            )
        })?;
        let check = ValueSchema::compile(&schema).map_err(|v| unusable(v.to_string()))?;
        let wrapped = !is_object_schema(&schema);
        let asked = if wrapped {
            wrap(schema.clone())
        } else {
            schema.clone()
        };
        Ok(Self {
            name: format_name(&T::schema_name()),
            schema: asked,
            own: schema,
            check,
            wrapped,
        })
    }

    /// The response format that asks for it, strict.
    pub(crate) fn format(&self) -> ResponseFormat {
        ResponseFormat::JsonSchema {
            name: self.name.clone(),
            schema: self.schema.clone(),
            strict: true,
        }
    }

    /// Reads an answer: JSON (inside a Markdown code fence too, as some models
    /// send it), matching the schema, as `T`. The error says what is wrong without
    /// repeating the answer.
    pub(crate) fn read<T: DeserializeOwned>(&self, text: &str) -> Result<T, String> {
        let json = unfence(text);
        let mut value: Value =
            serde_json::from_str(json).map_err(|e| format!("the answer is not JSON ({e})"))?;
        if self.wrapped {
            value = unwrap(value);
        }
        // A provider's strict mode made optional properties required and
        // nullable: their `null`s go, as the type was written.
        relax_strict_value(&mut value, &self.own);
        self.check.check(&value)?;
        serde_json::from_value(value)
            .map_err(|e| format!("the answer does not fit the requested type ({e})"))
    }
}

/// Whether `schema` describes an object at its root (and nothing else): what
/// providers accept as a response schema as it is.
fn is_object_schema(schema: &Value) -> bool {
    let Some(map) = schema.as_object() else {
        return false;
    };
    let alternatives = ["anyOf", "oneOf", "allOf", "enum", "const"];
    map.get("type") == Some(&Value::String("object".into()))
        && !alternatives.iter().any(|k| map.contains_key(*k))
}

/// `schema` as the one required property of an object; its `$defs`, if any,
/// stay at the root, where its local references point.
fn wrap(mut schema: Value) -> Value {
    let defs = schema.as_object_mut().and_then(|m| {
        ["$defs", "definitions"]
            .into_iter()
            .find_map(|k| m.remove(k).map(|d| (k, d)))
    });
    let mut wrapper = serde_json::json!({
        "type": "object",
        "properties": {WRAPPED: schema},
        "required": [WRAPPED],
        "additionalProperties": false,
    });
    if let (Some((key, defs)), Some(map)) = (defs, wrapper.as_object_mut()) {
        map.insert(key.to_owned(), defs);
    }
    wrapper
}

/// The answer inside its wrapper; an answer the model gave unwrapped (the bare
/// value) is taken as it is.
fn unwrap(value: Value) -> Value {
    match value {
        Value::Object(mut map) if map.len() == 1 && map.contains_key(WRAPPED) => {
            map.remove(WRAPPED).unwrap_or(Value::Null)
        }
        other => other,
    }
}

/// What the model is told when its answer did not match.
pub(crate) fn retry_prompt(problem: &str) -> String {
    format!(
        "Your answer does not match the required JSON schema: {problem}. \
         Answer again with only a JSON value that matches the schema."
    )
}

/// A response-format name from a schema name: `[A-Za-z0-9_-]`, at most 64
/// characters, `answer` when nothing is left.
fn format_name(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if cleaned.trim_matches('_').is_empty() {
        "answer".to_owned()
    } else {
        cleaned
    }
}

/// The text inside a Markdown code fence (```json ... ```), or the text itself.
fn unfence(text: &str) -> &str {
    let trimmed = text.trim();
    let Some(rest) = trimmed.strip_prefix("```") else {
        return trimmed;
    };
    let Some(body) = rest.strip_suffix("```") else {
        return trimmed;
    };
    // Drop the info string (`json`) on the opening line.
    match body.split_once('\n') {
        Some((_info, inner)) => inner.trim(),
        None => body.trim(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, serde::Deserialize, JsonSchema)]
    struct Order {
        id: u32,
        note: Option<String>,
    }

    #[test]
    fn answers_are_read_checked_and_refused_with_a_reason() {
        let schema = AnswerSchema::of::<Order>().unwrap();
        assert_eq!(
            schema.read::<Order>("```json\n{\"id\": 7}\n```"),
            Ok(Order { id: 7, note: None })
        );
        assert_eq!(
            schema.read::<Order>("{\"id\": 7, \"note\": null}"),
            Ok(Order { id: 7, note: None })
        );
        let missing = schema.read::<Order>("{\"note\": \"x\"}").unwrap_err();
        assert!(missing.contains("missing required property"), "{missing}");
        let wrong = schema.read::<Order>("{\"id\": \"seven\"}").unwrap_err();
        assert!(wrong.contains("/id: wrong type"), "{wrong}");
        assert!(!wrong.contains("seven"), "{wrong}");
        let prose = schema.read::<Order>("Sure! Order 7.").unwrap_err();
        assert!(prose.starts_with("the answer is not JSON"), "{prose}");
    }

    #[test]
    fn a_non_object_type_is_asked_for_wrapped_and_read_unwrapped() {
        #[derive(Debug, PartialEq, serde::Deserialize, JsonSchema)]
        #[serde(rename_all = "snake_case")]
        enum Mood {
            Calm,
            Busy,
        }
        let list = AnswerSchema::of::<Vec<Order>>().unwrap();
        let ResponseFormat::JsonSchema { schema, .. } = list.format() else {
            panic!("a JSON schema format");
        };
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["required"], serde_json::json!(["value"]));
        assert_eq!(schema["properties"]["value"]["type"], "array");
        let read: Vec<Order> = list
            .read(r#"{"value": [{"id": 1, "note": null}]}"#)
            .unwrap();
        assert_eq!(read, vec![Order { id: 1, note: None }]);
        // The bare value, as a model may still answer, is read too.
        let bare: Vec<Order> = list.read(r#"[{"id": 2}]"#).unwrap();
        assert_eq!(bare, vec![Order { id: 2, note: None }]);
        let mood = AnswerSchema::of::<Mood>().unwrap();
        assert_eq!(mood.read::<Mood>(r#"{"value": "busy"}"#), Ok(Mood::Busy));
        let wrong = mood.read::<Mood>(r#"{"value": "angry"}"#).unwrap_err();
        assert!(
            wrong.contains("enum") || wrong.contains("one of"),
            "{wrong}"
        );
        let number = AnswerSchema::of::<u32>().unwrap();
        assert_eq!(number.read::<u32>(r#"{"value": 7}"#), Ok(7));
        // An object type is asked for as it is.
        let order = AnswerSchema::of::<Order>().unwrap();
        let ResponseFormat::JsonSchema { schema, .. } = order.format() else {
            panic!("a JSON schema format");
        };
        assert!(schema["properties"].get("id").is_some(), "{schema}");
    }

    #[test]
    fn format_names_are_what_providers_accept() {
        assert_eq!(format_name("Order"), "Order");
        assert_eq!(format_name("Vec<Order>"), "Vec_Order_");
        assert_eq!(format_name("<>"), "answer");
        assert_eq!(format_name(&"x".repeat(80)).len(), 64);
    }
}
