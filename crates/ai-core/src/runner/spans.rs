//! What a tool call's span records, in the OpenTelemetry GenAI convention's names
//! (`gen_ai.tool.*`, `error.type`) and the project's (`agent.tool.*`) where the
//! convention has none. The span is the current one: each function is called
//! inside the call's `tool_call` span.
//!
//! Arguments and results appear only as the redacted views the call's events
//! carry, and only when content capture is on ([`crate::trace::capture_content`]);
//! a call of an unknown tool records no arguments (no allowlist applies to them).

use serde_json::Value;

use super::{Entry, Failure, ToolExecResult};
use crate::context::RunContext;
use crate::policy::ToolPolicy;
use crate::text::bound_text;
use crate::tool::ToolSource;
use crate::trace::capture_content;

/// The convention's tool type of a source: `extension` for an MCP server's tool,
/// `agent` for a graph, `function` for the rest.
fn tool_type(source: &ToolSource) -> &'static str {
    match source {
        ToolSource::Mcp { .. } => "extension",
        ToolSource::Graph => "agent",
        _ => "function",
    }
}

/// Records the tool's type, effect, the policy's decision and (with content
/// capture on) the redacted view of the arguments.
pub(super) fn record_start(
    run: &RunContext,
    entry: Option<&Entry>,
    policy: &ToolPolicy,
    args_view: &Value,
) {
    let Some(entry) = entry else {
        return;
    };
    let span = tracing::Span::current();
    let spec = &entry.spec;
    span.record("gen_ai.tool.type", tool_type(spec.id.source()));
    span.record("agent.tool.effect", spec.effect.as_str());
    span.record(
        "agent.tool.policy_decision",
        policy.decide(run, &spec.id, spec.effect).as_str(),
    );
    if capture_content() {
        span.record("gen_ai.tool.call.arguments", json_field(args_view).as_str());
    }
}

/// Records the call's outcome, its error code and (with content capture on) the
/// redacted view of its result.
pub(super) fn record_result(result: &ToolExecResult) {
    let span = tracing::Span::current();
    if result.ok {
        span.record("agent.tool.outcome", "ok");
    } else {
        span.record("agent.tool.outcome", "error");
        span.record("otel.status_code", "ERROR");
    }
    if let Some(code) = result.error_code {
        span.record("agent.tool.error_code", code.as_str());
        span.record("error.type", code.as_str());
    }
    if capture_content()
        && let Some(value) = &result.value
    {
        span.record("gen_ai.tool.call.result", json_field(value).as_str());
    }
}

/// An event on the call's span: how its approval was settled.
pub(super) fn approval_settled(approval: &Result<(), Failure>) {
    match approval {
        Ok(()) => tracing::info!(agent.approval.outcome = "approved", "approval decided"),
        Err(failure) => tracing::info!(
            agent.approval.outcome = "refused",
            agent.tool.error_code = failure.code.as_str(),
            "approval decided"
        ),
    }
}

/// At most this many bytes of a value's JSON go into a span field.
pub(super) const MAX_SPAN_CONTENT_BYTES: usize = 8 * 1024;

/// A JSON value as a bounded span field.
fn json_field(value: &Value) -> String {
    bound_text(&value.to_string(), MAX_SPAN_CONTENT_BYTES).text
}
