//! What a tool is, in semantic (not wire) terms.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::tool::Redaction;
use crate::tool::ToolId;

// tidy: exhaustive: the three effects of the design (read_only, state_change, external_side_effect); policy matches on all of them.
/// What running a tool may do to the world; policy decides per effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolEffect {
    /// Reads state only; safe to repeat and to run concurrently.
    ReadOnly,
    /// Changes local state (files, memory).
    StateChange,
    /// Acts outside the process's own state (network, shell).
    ExternalSideEffect,
}

impl ToolEffect {
    /// The stable snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ReadOnly => "read_only",
            Self::StateChange => "state_change",
            Self::ExternalSideEffect => "external_side_effect",
        }
    }
}

/// A tool's semantic description: everything the catalog, the runner and the wire
/// encoders need, and nothing wire-shaped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Namespaced id; also the function name the model sees.
    pub id: ToolId,
    /// Text the model reads to decide when to call the tool.
    pub description: String,
    /// JSON Schema (draft-07) of the arguments object.
    pub input_schema: Value,
    /// JSON Schema (draft-07) of the output value, when declared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// What running the tool may do.
    pub effect: ToolEffect,
    /// Which argument and output fields may reach UI, events and logs. `None` is a
    /// tool without redaction config: its calls end in `redaction_missing`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redaction: Option<Redaction>,
    /// Stable hash of the canonical input and output schemas (see [`schema_hash`]).
    pub schema_hash: String,
    /// Where the spec came from (for diagnostics such as collision errors), e.g.
    /// `built-in` or `mcp server github`.
    #[serde(default)]
    pub origin: String,
    /// The tool is safe to run again with the same idempotency key
    /// ([`crate::tool::ToolCallContext::idempotency_key`]): a second call with a key
    /// it has seen does not act twice. A durable run that stopped between such a
    /// call's start and its recorded result runs it again with the same key
    /// instead of reporting `outcome_unknown`. Meaningless for `read_only` tools
    /// (they always run again).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub idempotent: bool,
}

impl ToolSpec {
    /// Builds a spec and computes its `schema_hash`.
    pub fn new(
        id: ToolId,
        description: impl Into<String>,
        input_schema: Value,
        effect: ToolEffect,
    ) -> Self {
        let schema_hash = schema_hash(&input_schema, None);
        Self {
            id,
            description: description.into(),
            input_schema,
            output_schema: None,
            effect,
            redaction: None,
            schema_hash,
            origin: String::from("unspecified"),
            idempotent: false,
        }
    }

    /// Sets the output schema (and refreshes the hash).
    pub fn with_output_schema(mut self, schema: Value) -> Self {
        self.schema_hash = schema_hash(&self.input_schema, Some(&schema));
        self.output_schema = Some(schema);
        self
    }

    /// Sets the redaction allowlists.
    pub fn with_redaction(mut self, redaction: Redaction) -> Self {
        self.redaction = Some(redaction);
        self
    }

    /// Declares the tool idempotent under its idempotency key (see
    /// [`ToolSpec::idempotent`]).
    pub fn with_idempotent(mut self, idempotent: bool) -> Self {
        self.idempotent = idempotent;
        self
    }

    /// Sets the origin shown in diagnostics.
    pub fn with_origin(mut self, origin: impl Into<String>) -> Self {
        self.origin = origin.into();
        self
    }
}

/// Serializes a value as canonical JSON: object keys sorted, no whitespace.
pub fn canonical_json(value: &Value) -> String {
    fn write(value: &Value, out: &mut String) {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                out.push('{');
                for (i, key) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String(key.clone()).to_string());
                    out.push(':');
                    write(&map[key], out);
                }
                out.push('}');
            }
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(item, out);
                }
                out.push(']');
            }
            scalar => out.push_str(&scalar.to_string()),
        }
    }
    let mut out = String::new();
    write(value, &mut out);
    out
}

/// `sha256:<hex>` of the canonical input schema, followed by the canonical output
/// schema when one is declared. Independent of key order and whitespace.
pub fn schema_hash(input_schema: &Value, output_schema: Option<&Value>) -> String {
    let mut hasher = Sha256::new();
    hasher.update(canonical_json(input_schema).as_bytes());
    if let Some(output) = output_schema {
        hasher.update(b"\n");
        hasher.update(canonical_json(output).as_bytes());
    }
    sha256_hex(&hasher.finalize())
}

/// `sha256:<hex>` of the canonical JSON of a call's arguments: what an approval is
/// bound to ([`crate::approval::ApprovalRequest::args_hash`]).
pub fn args_hash(args: &Value) -> String {
    sha256_hex(&Sha256::digest(canonical_json(args).as_bytes()))
}

pub(crate) fn sha256_hex(digest: &[u8]) -> String {
    format!("sha256:{}", hex::encode(digest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_json_sorts_keys_recursively() {
        let a = json!({"b": 1, "a": {"d": [1, {"z": 0, "y": "é\""}], "c": null}});
        assert_eq!(
            canonical_json(&a),
            r#"{"a":{"c":null,"d":[1,{"y":"é\"","z":0}]},"b":1}"#
        );
    }

    #[test]
    fn schema_hash_ignores_key_order_but_not_content() {
        let a = json!({"type": "object", "properties": {"x": {"type": "string"}}});
        let b = json!({"properties": {"x": {"type": "string"}}, "type": "object"});
        let c = json!({"type": "object", "properties": {"x": {"type": "integer"}}});
        assert_eq!(schema_hash(&a, None), schema_hash(&b, None));
        assert_ne!(schema_hash(&a, None), schema_hash(&c, None));
        assert_ne!(schema_hash(&a, None), schema_hash(&a, Some(&c)));
        assert!(schema_hash(&a, None).starts_with("sha256:"));
        assert_eq!(schema_hash(&a, None).len(), 7 + 64);
    }
}
