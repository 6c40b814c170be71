//! Schema derivation: schemars draft-07 output, normalized to the P0 subset.

use schemars::JsonSchema;
use schemars::generate::{Contract, SchemaSettings};
use serde_json::{Map, Value};

/// Why a derived schema cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaError {
    /// A `$ref` is not local or points at nothing inside the schema.
    #[error("schema has an unusable $ref: {0}")]
    Ref(String),
    /// The schema is outside the P0 subset after normalization.
    #[error("schema is outside the supported subset: {0}")]
    Subset(String),
}

fn join(violations: &[ai_core::schema::SchemaViolation]) -> String {
    violations
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

fn settings(contract: Contract) -> SchemaSettings {
    let mut settings = SchemaSettings::draft07();
    settings.inline_subschemas = true;
    settings.contract = contract;
    settings
}

/// The normalized draft-07 schema of an argument type (as deserialized), checked
/// against the P0 subset.
pub fn args_schema<T: JsonSchema>() -> Result<Value, SchemaError> {
    let schema = settings(Contract::Deserialize)
        .into_generator()
        .into_root_schema_for::<T>();
    let schema = normalize(schema.to_value())?;
    ai_core::schema::check_schema_subset(&schema).map_err(|v| SchemaError::Subset(join(&v)))?;
    Ok(schema)
}

/// The normalized draft-07 schema of an output type (as serialized). Output schemas
/// are never shown to a model, so they are not held to the P0 subset.
pub fn output_schema<T: JsonSchema>() -> Result<Value, SchemaError> {
    let schema = settings(Contract::Serialize)
        .into_generator()
        .into_root_schema_for::<T>();
    normalize(schema.to_value())
}

/// Drops `$schema`, folds `anyOf: [X, {"type": "null"}]` (how schemars spells
/// `Option<T>` of a complex `T`) into a nullable `X`, and checks that every `$ref` is
/// local and resolves (with ai-core's one resolver).
fn normalize(mut schema: Value) -> Result<Value, SchemaError> {
    if let Value::Object(map) = &mut schema {
        map.remove("$schema");
    }
    fold_nullable(&mut schema);
    ai_core::schema::check_schema_refs(&schema).map_err(|v| SchemaError::Ref(join(&v)))?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use schemars::JsonSchema;
    use serde::Deserialize;
    use serde_json::json;

    #[allow(dead_code)]
    #[derive(Deserialize, JsonSchema)]
    struct Inner {
        /// A name.
        name: String,
        tags: Vec<String>,
    }

    #[allow(dead_code)]
    #[derive(Deserialize, JsonSchema)]
    #[serde(rename_all = "snake_case")]
    enum Mode {
        Fast,
        Careful,
    }

    #[allow(dead_code)]
    #[derive(Deserialize, JsonSchema)]
    struct Args {
        inner: Inner,
        maybe: Option<Inner>,
        mode: Option<Mode>,
        count: Option<u32>,
    }

    #[allow(dead_code)]
    #[derive(Deserialize, JsonSchema)]
    enum WithData {
        A { x: u8 },
        B(String),
    }

    #[allow(dead_code)]
    #[derive(Deserialize, JsonSchema)]
    struct Bad {
        choice: WithData,
    }

    #[allow(dead_code)]
    #[derive(Deserialize, JsonSchema)]
    struct Tree {
        children: Vec<Tree>,
    }

    #[test]
    fn nested_options_fold_into_nullable_types_inside_the_subset() {
        let schema = args_schema::<Args>().unwrap();
        assert_eq!(schema["type"], json!("object"));
        assert!(schema.get("$schema").is_none());
        assert_eq!(
            schema["properties"]["maybe"]["type"],
            json!(["object", "null"])
        );
        assert_eq!(
            schema["properties"]["maybe"]["required"],
            json!(["name", "tags"])
        );
        assert_eq!(
            schema["properties"]["inner"]["properties"]["name"]["description"],
            json!("A name.")
        );
        let mode = &schema["properties"]["mode"];
        assert!(
            mode["enum"].as_array().unwrap().contains(&Value::Null),
            "{mode}"
        );
        assert_eq!(schema["required"], json!(["inner"]));
    }

    #[test]
    fn data_carrying_enums_are_rejected_with_a_path() {
        let err = args_schema::<Bad>().unwrap_err();
        assert!(
            err.to_string().contains("/properties/choice/oneOf"),
            "{err}"
        );
    }

    #[test]
    fn recursive_types_keep_local_resolvable_refs() {
        let schema = args_schema::<Tree>().unwrap();
        let text = schema.to_string();
        assert!(text.contains("\"$ref\":\"#"), "{text}");
    }
}
