//! Schema derivation: schemars draft-07 output, normalized to the P0 subset.

use schemars::JsonSchema;
use schemars::generate::{Contract, SchemaSettings};
use serde_json::Value;

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

/// The derived schema in the form every crate reads: see
/// [`ai_core::schema::normalize_derived`].
fn normalize(schema: Value) -> Result<Value, SchemaError> {
    ai_core::schema::normalize_derived(schema).map_err(|v| SchemaError::Ref(join(&v)))
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
