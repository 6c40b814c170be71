//! What a tool call produced, for the caller and for audit.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::tool::ToolErrorCode;

/// The outcome of one call as seen by UI and telemetry (value already redacted).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolExecResult {
    /// Call id, stable from start to result.
    pub tool_call_id: String,
    /// Whether the call produced a value.
    pub ok: bool,
    /// Redacted value, when `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    /// Error code, when not `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<ToolErrorCode>,
    /// Safe message, when not `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub safe_message: Option<String>,
}

/// Audit record of one call through the runner. Holds only redacted data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolInvocationRecord {
    /// Call id.
    pub tool_call_id: String,
    /// Tool name as the model sent it.
    pub name: String,
    /// Redacted arguments (`{}` when they could not be parsed).
    pub args: Value,
    /// Redacted result, when the call succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// Error code, when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ToolErrorCode>,
    /// Unix time in milliseconds when the call entered the runner.
    pub started_at_ms: u64,
    /// Unix time in milliseconds when the call left the runner.
    pub ended_at_ms: u64,
    /// Byte length of the content sent to the model.
    pub model_content_bytes: usize,
    /// Whether the model-facing content was truncated.
    pub truncated: bool,
    /// Provider-native payload, for observability only; never influences execution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<Value>,
}
