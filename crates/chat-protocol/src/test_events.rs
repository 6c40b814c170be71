//! Events for the encoders' unit tests.

use ai_core::{
    AiEvent, RunContext,
    event::{AiEventKind, UsageFact},
};
use serde_json::json;

pub(crate) fn ev(kind: AiEventKind) -> AiEvent {
    AiEvent::new(&RunContext::new("run-1", "trace-1"), kind)
}

pub(crate) fn text(delta: &str) -> AiEvent {
    ev(AiEventKind::TextDelta {
        delta: delta.into(),
    })
}

pub(crate) fn reasoning(delta: &str) -> AiEvent {
    ev(AiEventKind::ReasoningDelta {
        delta: delta.into(),
    })
}

pub(crate) fn call(id: &str) -> AiEvent {
    ev(AiEventKind::ToolCallStart {
        tool_call_id: id.into(),
        tool_name: "core__echo".into(),
        args: json!({"text": id}),
    })
}

pub(crate) fn result(id: &str) -> AiEvent {
    ev(AiEventKind::ToolCallResult {
        tool_call_id: id.into(),
        tool_name: "core__echo".into(),
        ok: true,
        result: Some(json!(id)),
        error_code: None,
        message: None,
        duration_ms: 1,
        truncated: false,
    })
}

/// A usage report of `prompt` prompt tokens and 2 completion tokens.
pub(crate) fn usage_of(prompt: u64) -> AiEvent {
    ev(UsageFact::tokens("m", prompt, 2).into())
}

/// Two steps, each with its own usage: text and the call `c1` with its result
/// (5 prompt tokens), then text (7).
pub(crate) fn two_steps_with_usage() -> [AiEvent; 6] {
    [
        text("a"),
        usage_of(5),
        call("c1"),
        result("c1"),
        text("b"),
        usage_of(7),
    ]
}

/// The run's error, `provider_error` with `message`.
pub(crate) fn error(message: &str) -> AiEvent {
    ev(AiEventKind::Error {
        code: "provider_error".into(),
        message: message.into(),
    })
}

pub(crate) fn done() -> AiEvent {
    ev(AiEventKind::Done)
}

fn sign(binding: &ai_core::approval::ApprovalBinding) -> String {
    format!("apr-{}", binding.tool_call_id)
}

/// The approval ids the tests use: `apr-<call id>`.
pub(crate) const APR: crate::stream::ApprovalIssuer<'static> = crate::stream::ApprovalIssuer {
    scope: "chat",
    sign: &sign,
};
