//! The run's spans, in the OpenTelemetry GenAI semantic conventions' names
//! (project-prefixed `agent.*` names where the convention has none), with plain
//! `tracing`: an exporter (agent-telemetry) turns them into OpenTelemetry spans,
//! and without one they are the log's spans.
//!
//! - the run: `invoke_agent {graph}` (`otel.name`; the tracing span is `run`,
//!   or `subagent_run` for a subagent, which runs inside its calling tool's
//!   `tool_call` span and so is its child), linked to the caller's trace through
//!   [`ai_core::trace::link_run_span`];
//! - each model call: `chat {model}` (the tracing span `model_call`) with the
//!   request and response models, finish reason and token counts;
//! - each tool call: `execute_tool {tool}`, made by the runner (ai-core).
//!
//! Content (the prompt's and model's text) is recorded only when content capture
//! is on ([`ai_core::trace::capture_content`]), and then without tool arguments
//! or results: those reach spans only as the runner's redacted views.

use ai_core::{
    Message, RunContext,
    completion::{CompletionFinal, CompletionRequest},
    text::{bound_text, log_field},
    trace::capture_content,
};
use serde_json::{Value, json};
use tracing::field::Empty;

/// At most this many bytes of a prompt's or answer's text go into a span field.
const MAX_CONTENT_BYTES: usize = 16 * 1024;

/// The span of a run of `graph` (a subagent's when `nested`), linked to the
/// caller's trace the context names.
pub(super) fn run_span(context: &RunContext, graph: Option<&str>, nested: bool) -> tracing::Span {
    let agent = log_field(graph.unwrap_or("agent"));
    // Ids the run does not have are left out (`None` records nothing), not
    // recorded as empty text.
    let ingress = context.ingress_request_id.as_deref().map(log_field);
    let conversation = context.conversation_id.as_deref().map(log_field);
    let span = if nested {
        tracing::info_span!(
            "subagent_run",
            run_id = %log_field(&context.run_id),
            otel.name = %format_args!("invoke_agent {agent}"),
            otel.status_code = Empty,
            gen_ai.operation.name = "invoke_agent",
            gen_ai.agent.name = %agent,
            error.type = Empty,
        )
    } else {
        tracing::info_span!(
            "run",
            run_id = %log_field(&context.run_id),
            trace_id = %log_field(&context.trace_id),
            ingress_request_id = ingress.as_deref(),
            otel.name = %format_args!("invoke_agent {agent}"),
            otel.status_code = Empty,
            gen_ai.operation.name = "invoke_agent",
            gen_ai.agent.name = %agent,
            gen_ai.conversation.id = conversation.as_deref(),
            agent.run.id = %log_field(&context.run_id),
            error.type = Empty,
        )
    };

    if !nested {
        ai_core::trace::link_run_span(&span, context);
    }
    span
}

/// Records a run's failure on its span.
pub(super) fn record_run_error(span: &tracing::Span, code: &str) {
    span.record("otel.status_code", "ERROR");
    span.record("error.type", code);
}

/// The span of one model call to `provider` (the port's
/// [`ai_core::CompletionPort::provider_name`], left out when it has none).
pub(super) fn model_span(request: &CompletionRequest, provider: Option<&str>) -> tracing::Span {
    let model = log_field(&request.model);
    let span = tracing::info_span!(
        "model_call",
        otel.name = %format_args!("chat {model}"),
        otel.kind = "client",
        otel.status_code = Empty,
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = provider,
        gen_ai.request.model = %model,
        gen_ai.response.model = Empty,
        gen_ai.response.id = Empty,
        gen_ai.response.finish_reasons = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.usage.cache_read.input_tokens = Empty,
        gen_ai.usage.cache_creation.input_tokens = Empty,
        agent.usage.reasoning_tokens = Empty,
        gen_ai.request.temperature = Empty,
        gen_ai.request.max_tokens = Empty,
        gen_ai.input.messages = Empty,
        gen_ai.output.messages = Empty,
        error.type = Empty,
    );
    if let Some(temperature) = request.settings.temperature {
        span.record("gen_ai.request.temperature", f64::from(temperature));
    }
    if let Some(max_tokens) = request.settings.max_tokens {
        span.record("gen_ai.request.max_tokens", u64::from(max_tokens));
    }
    if capture_content() {
        let input = Value::Array(request.messages.iter().map(message_view).collect());
        span.record("gen_ai.input.messages", bounded(&input).as_str());
    }
    span
}

/// Records what a model call gave back on its span.
pub(super) fn record_turn(span: &tracing::Span, turn: &CompletionFinal) {
    span.record(
        "gen_ai.response.finish_reasons",
        turn.finish_reason.as_str(),
    );
    if let Some(id) = &turn.response_id {
        span.record("gen_ai.response.id", log_field(id).as_str());
    }
    if let Some(usage) = &turn.usage {
        span.record(
            "gen_ai.response.model",
            log_field(usage.served_by()).as_str(),
        );
        span.record("gen_ai.usage.input_tokens", usage.prompt_tokens);
        span.record("gen_ai.usage.output_tokens", usage.completion_tokens);
        if let Some(cached) = usage.cached_tokens {
            span.record("gen_ai.usage.cache_read.input_tokens", cached);
        }
        if let Some(created) = usage.cache_creation_tokens {
            span.record("gen_ai.usage.cache_creation.input_tokens", created);
        }
        if let Some(reasoning) = usage.reasoning_tokens {
            span.record("agent.usage.reasoning_tokens", reasoning);
        }
    }
    if capture_content() {
        let output = json!([{
            "role": "assistant",
            "parts": [{"type": "text", "content": turn.text}],
            "finish_reason": turn.finish_reason.as_str(),
        }]);
        span.record("gen_ai.output.messages", bounded(&output).as_str());
    }
}

/// Marks the end of a model call's span: it was entered only to start the
/// call, and an exporter takes a span's end from its last exit.
pub(super) fn end_model_span(span: &tracing::Span) {
    span.in_scope(|| {});
}

/// Records a failed model call on its span.
pub(super) fn record_model_error(span: &tracing::Span, code: &str) {
    span.record("otel.status_code", "ERROR");
    span.record("error.type", code);
}

/// A message as content: its text only. A tool call shows its id and name, a
/// tool result its call id: their arguments and results are not the redacted
/// views, so they are left out.
fn message_view(message: &Message) -> Value {
    match message {
        Message::System { content, .. } => text_message("system", content),
        Message::User { content, .. } => text_message("user", content),
        Message::Assistant {
            content,
            tool_calls,
            ..
        } => {
            let mut parts: Vec<Value> = content
                .iter()
                .map(|text| json!({"type": "text", "content": text}))
                .collect();
            parts.extend(
                tool_calls
                    .iter()
                    .map(|call| json!({"type": "tool_call", "id": call.id, "name": call.name})),
            );
            json!({"role": "assistant", "parts": parts})
        }
        Message::Tool { tool_call_id, .. } => json!({
            "role": "tool",
            "parts": [{"type": "tool_call_response", "id": tool_call_id}],
        }),
        _ => json!({"role": "unknown", "parts": []}),
    }
}

fn text_message(role: &str, text: &str) -> Value {
    json!({"role": role, "parts": [{"type": "text", "content": text}]})
}

/// A JSON value as a bounded span field.
fn bounded(value: &Value) -> String {
    bound_text(&value.to_string(), MAX_CONTENT_BYTES).text
}
