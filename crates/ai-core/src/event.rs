//! Run events: the public, versioned contract consumed by CLIs, UIs and billing.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Id;
use crate::context::RunContext;
use crate::tool::ToolErrorCode;

/// Token usage of one model call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageFact {
    /// The model the call asked for: the configured name, as a run reports
    /// it. A completion port fills in the name the provider reported; the run,
    /// which knows what it asked for, moves that to
    /// [`response_model`](Self::response_model) ([`UsageFact::asked_for`]).
    pub model: String,
    /// The model the provider said served the call, when it differs from
    /// [`model`](Self::model) (a dated snapshot behind an alias, a gateway's
    /// deployment behind a route name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_model: Option<String>,
    /// Prompt (input) tokens.
    pub prompt_tokens: u64,
    /// Completion (output) tokens.
    pub completion_tokens: u64,
    /// Total tokens as reported (or the sum when the provider gave none).
    pub total_tokens: u64,
    /// Prompt tokens served from the provider's cache, when reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
    /// Completion tokens spent on reasoning, when reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
    /// Prompt tokens written to the provider's cache, when reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_creation_tokens: Option<u64>,
    /// What the call cost, as the provider or a gateway in front of it
    /// reported it (LiteLLM's `x-litellm-response-cost` header, `usage.cost`
    /// in a stream from OpenRouter or LiteLLM), in millionths of a US dollar,
    /// rounded; `None` when nothing was reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_micros: Option<i64>,
}

impl UsageFact {
    /// The usage of a call that reported its prompt and completion tokens
    /// only: the total is their sum, nothing else is known.
    pub fn tokens(model: impl Into<String>, prompt_tokens: u64, completion_tokens: u64) -> Self {
        Self {
            model: model.into(),
            prompt_tokens,
            completion_tokens,
            total_tokens: prompt_tokens + completion_tokens,
            ..Self::default()
        }
    }

    /// Names the call by the model it asked for (`requested`, the configured
    /// name): the name the provider reported moves to
    /// [`response_model`](Self::response_model) when it is another one.
    pub fn asked_for(&mut self, requested: &str) {
        if self.model == requested || requested.is_empty() {
            return;
        }
        let reported = std::mem::replace(&mut self.model, requested.to_owned());
        if !reported.is_empty() && self.response_model.is_none() {
            self.response_model = Some(reported);
        }
    }

    /// The name the provider reported for the call: its
    /// [`response_model`](Self::response_model), else [`model`](Self::model).
    pub fn served_by(&self) -> &str {
        self.response_model.as_deref().unwrap_or(&self.model)
    }

    /// A cost in US dollars as millionths, rounded: `None` for a value that is
    /// not a finite, non-negative number of a sane size (a provider's typo must
    /// not become a bill).
    pub fn micros_from_usd(usd: f64) -> Option<i64> {
        let micros = (usd * 1_000_000.0).round();
        (usd.is_finite() && (0.0..1e15).contains(&micros)).then_some(micros as i64)
    }
}

/// A tool call named by its id and tool, without arguments or result (e.g. a call
/// the loop did not execute).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCallRef {
    /// Call id (the model's, or one minted by the runner's rules when it gave none).
    pub tool_call_id: String,
    /// The namespaced tool id the model named (sanitized like `tool_call_start`'s).
    pub tool_name: String,
}

/// One event of a run. Serialized flat: `{"type": ..., "run_id": ..., fields...}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AiEvent {
    /// Id of the run the event belongs to.
    pub run_id: Id,
    /// Trace id of the run.
    pub trace_id: Id,
    /// Ingress request id, when the run has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ingress_request_id: Option<Id>,
    /// For an event of a subagent (a `graph__` tool call): the parent's tool call id
    /// that started it. Absent on the run's own events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_tool_call_id: Option<Id>,
    /// For an event of a subagent: the name of the child graph that produced it
    /// (e.g. on its `usage_report`s). Absent on the run's own events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph: Option<Id>,
    /// What happened.
    #[serde(flatten)]
    pub kind: AiEventKind,
}

impl AiEvent {
    /// An event of `kind` correlated with `ctx`.
    pub fn new(ctx: &RunContext, kind: AiEventKind) -> Self {
        Self {
            run_id: ctx.run_id.clone(),
            trace_id: ctx.trace_id.clone(),
            ingress_request_id: ctx.ingress_request_id.clone(),
            parent_tool_call_id: None,
            graph: None,
            kind,
        }
    }

    /// Tags the event as produced by the subagent `graph` started by the parent's
    /// call `parent_tool_call_id` (tags already set are kept). A subagent's
    /// emitter passes its `Id`s, so tagging an event is a count, not a copy.
    pub fn nested(mut self, parent_tool_call_id: impl Into<Id>, graph: Option<Id>) -> Self {
        if self.parent_tool_call_id.is_none() {
            self.parent_tool_call_id = Some(parent_tool_call_id.into());
        }
        if self.graph.is_none() {
            self.graph = graph;
        }
        self
    }

    /// Appends `next` to `self` when `next` continues it, and says whether it did.
    ///
    /// The one rule by which consecutive deltas merge (a run's event queue, a
    /// durable run's captured steps, the run store's recorder): `next` continues
    /// `self` when both are `text_delta`s, or both `reasoning_delta`s, with the
    /// same source, that is the same `run_id`, `trace_id`, `ingress_request_id`,
    /// `parent_tool_call_id` and `graph` (a run's own text and its subagent's
    /// never merge, nor two subagents'). `self`'s delta then ends with `next`'s,
    /// so the concatenated text is unchanged. Anything else never merges: text
    /// after reasoning or reasoning after text, `tool_input_delta` (each carries
    /// its call), and every other event. On `false`, `self` is unchanged.
    ///
    /// Only the "whether and how"; when to merge (past a queue's slack, within a
    /// recorder's window) is the caller's policy.
    ///
    /// ```
    /// use ai_core::{AiEvent, RunContext, event::AiEventKind};
    ///
    /// let ctx = RunContext::new("r1", "t1");
    /// let text = |delta: &str| AiEvent::new(&ctx, AiEventKind::TextDelta { delta: delta.into() });
    /// let mut last = text("Hel");
    /// assert!(last.absorb(&text("lo")));
    /// assert_eq!(last.kind, AiEventKind::TextDelta { delta: "Hello".into() });
    /// let reasoning = AiEvent::new(&ctx, AiEventKind::ReasoningDelta { delta: "hm".into() });
    /// assert!(!last.absorb(&reasoning));
    /// ```
    pub fn absorb(&mut self, next: &AiEvent) -> bool {
        // Destructured, so that a field added to events has to be placed here.
        let AiEvent {
            run_id,
            trace_id,
            ingress_request_id,
            parent_tool_call_id,
            graph,
            kind: _,
        } = next;
        let same_source = self.run_id == *run_id
            && self.trace_id == *trace_id
            && self.ingress_request_id == *ingress_request_id
            && self.parent_tool_call_id == *parent_tool_call_id
            && self.graph == *graph;
        if !same_source {
            return false;
        }
        match (&mut self.kind, &next.kind) {
            (AiEventKind::TextDelta { delta }, AiEventKind::TextDelta { delta: more })
            | (
                AiEventKind::ReasoningDelta { delta },
                AiEventKind::ReasoningDelta { delta: more },
            ) => {
                crate::text::append(delta, more);
                true
            }
            _ => false,
        }
    }
}

/// Appends `event` to `events`, merged into the last one when it continues it
/// ([`AiEvent::absorb`]); cloned only when it is not. Returns whether it was
/// merged.
///
/// The list grows from one slot, doubling (not from four, as a `Vec` does at its
/// first push): a streaming run's lists of merged events (a journal step's, a
/// recorder's window) hold one or two 280-byte events at a time, and every open
/// stream holds them.
///
/// ```
/// use ai_core::{AiEvent, RunContext, event::{AiEventKind, merge_into}};
///
/// let ctx = RunContext::new("r1", "t1");
/// let text = |delta: &str| AiEvent::new(&ctx, AiEventKind::TextDelta { delta: delta.into() });
/// let mut events = Vec::new();
/// assert!(!merge_into(&mut events, &text("Hel")));
/// assert!(merge_into(&mut events, &text("lo")));
/// assert_eq!(events, [text("Hello")]);
/// assert_eq!(events.capacity(), 1);
/// ```
pub fn merge_into(events: &mut Vec<AiEvent>, event: &AiEvent) -> bool {
    if let Some(last) = events.last_mut()
        && last.absorb(event)
    {
        return true;
    }
    if events.len() == events.capacity() {
        let more = events.len().max(1);
        events.reserve_exact(more);
    }
    events.push(event.clone());
    false
}

/// The event payloads. Field names are a public contract: new variants and fields
/// may be added, existing ones are never renamed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[cfg_attr(not(agent_workspace), non_exhaustive)]
pub enum AiEventKind {
    /// A piece of streamed assistant text.
    TextDelta {
        /// The text.
        delta: String,
    },
    /// A piece of the model's reasoning (never part of `assistant_final.content`).
    ReasoningDelta {
        /// The text.
        delta: String,
    },
    /// A tool call is about to run.
    ToolCallStart {
        /// Call id (stable from start to result).
        tool_call_id: String,
        /// The namespaced tool id the model named.
        tool_name: String,
        /// Redacted view of the arguments (for a tool that does not exist: the
        /// model's arguments when they are a JSON object, since no redaction
        /// applies and nothing runs).
        args: Value,
    },
    /// A fragment of a tool call's argument text, as the model streams it, before
    /// the call is complete: for UIs that show a long call as it is written.
    /// Emitted only for tools whose arguments are shown unredacted (a tool with
    /// an argument redaction streams nothing: the fragments would show what the
    /// redaction hides).
    ToolInputDelta {
        /// The call id (the one `tool_call_start` will carry).
        tool_call_id: String,
        /// The namespaced tool id the model named.
        tool_name: String,
        /// The fragment of argument text.
        delta: String,
    },
    /// A tool call finished.
    ToolCallResult {
        /// Call id.
        tool_call_id: String,
        /// The namespaced tool id the model named.
        tool_name: String,
        /// Whether the call produced a value.
        ok: bool,
        /// Redacted result, when `ok`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<Value>,
        /// Error code, when not `ok`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error_code: Option<ToolErrorCode>,
        /// Safe message, when not `ok`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
        /// Wall time of the whole pipeline for this call.
        duration_ms: u64,
        /// Whether the model-facing result was truncated to its budget.
        truncated: bool,
    },
    /// Token usage of one model call.
    UsageReport {
        /// The model the call asked for (the configured name).
        model: String,
        /// The model the provider said served the call, when it differs from
        /// `model` (see [`UsageFact::response_model`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        response_model: Option<String>,
        /// Prompt tokens.
        prompt_tokens: u64,
        /// Completion tokens.
        completion_tokens: u64,
        /// Total tokens.
        total_tokens: u64,
        /// Prompt tokens served from the provider's cache, when reported.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cached_tokens: Option<u64>,
        /// Completion tokens spent on reasoning, when reported.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reasoning_tokens: Option<u64>,
        /// Prompt tokens written to the provider's cache, when reported.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cache_creation_tokens: Option<u64>,
        /// The call's cost as the provider or a gateway reported it, in
        /// millionths of a US dollar (see [`UsageFact::cost_micros`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost_micros: Option<i64>,
        /// The prompt hash of the run that made the call (system prompt, offered
        /// tools' schemas, model id), when the run has one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prompt_hash: Option<String>,
    },
    /// Tool calls of the last model turn that were not executed because no further
    /// model turn is allowed (a run limit was reached): no model would ever see their
    /// results. They get no `tool_call_start`/`tool_call_result`; this event, emitted
    /// once just before the run's `error`, lists them in call order.
    ToolCallsNotExecuted {
        /// The code of the run error that follows (`max_iterations_exceeded`,
        /// `usage_limit_exceeded`).
        code: String,
        /// The calls, in call order.
        calls: Vec<ToolCallRef>,
    },
    /// The final assistant answer (exactly once, on success only).
    AssistantFinal {
        /// Answer text.
        content: String,
        /// Why the last model turn stopped: `stop` for a complete answer; `length`,
        /// `content_filter` or `refusal` for an answer that is not complete.
        #[serde(default = "stop")]
        finish_reason: String,
        /// The prompt hash of the run (system prompt, offered tools' schemas, model
        /// id), when the run has one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        prompt_hash: Option<String>,
    },
    /// A call that needs an approval the run does not wait for (a run with deferred
    /// approvals): it is not executed, and the run pauses after the turn's other
    /// calls, without an `assistant_final`. The caller asks the user and starts a
    /// continuation that carries the decision. `args` are the call's full
    /// arguments, exactly what would run: the approver must see them (a UI that may
    /// not see a field cannot approve a call with it).
    ToolApprovalRequested {
        /// Call id.
        tool_call_id: String,
        /// The namespaced tool id.
        tool_name: String,
        /// The arguments, as validated JSON.
        args: Value,
        /// `sha256:<hex>` of the canonical arguments (see `ai_core::args_hash`).
        args_hash: String,
    },
    /// A call of a tool the client runs (`client__<name>`), in a run with
    /// deferred calls: not executed here; the run pauses after the turn's other
    /// calls, and the client's output, sent with the next request, continues it.
    ClientToolCall {
        /// Call id.
        tool_call_id: String,
        /// The namespaced tool id.
        tool_name: String,
        /// The arguments, as validated JSON (the client needs them whole).
        args: Value,
    },
    /// A tool that policy allows is left out of this run's catalog, for the reason
    /// its source gives (e.g. an MCP tool whose definition changed since it was
    /// pinned). Emitted when a run starts, once per withheld tool, sorted by id.
    ToolWithheld {
        /// The tool id.
        tool_name: String,
        /// Why it is withheld, and what the user can do about it.
        reason: String,
    },
    /// The run failed.
    Error {
        /// Stable error code.
        code: String,
        /// Safe message.
        message: String,
    },
    /// The run ended (exactly once, on every exit path).
    Done,
}

impl From<UsageFact> for AiEventKind {
    fn from(usage: UsageFact) -> Self {
        Self::UsageReport {
            model: usage.model,
            response_model: usage.response_model,
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
            total_tokens: usage.total_tokens,
            cached_tokens: usage.cached_tokens,
            reasoning_tokens: usage.reasoning_tokens,
            cache_creation_tokens: usage.cache_creation_tokens,
            cost_micros: usage.cost_micros,
            prompt_hash: None,
        }
    }
}

fn stop() -> String {
    "stop".to_owned()
}

/// Where events go. Implementations must not block: emitting is synchronous and is
/// called from the hot path of a run.
pub trait EventSink: Send + Sync {
    /// Delivers one event.
    fn emit(&self, event: AiEvent);
}

impl<F> EventSink for F
where
    F: Fn(AiEvent) + Send + Sync,
{
    fn emit(&self, event: AiEvent) {
        self(event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_serialize_flat_with_type_tag() {
        let ctx = RunContext::new("r1", "t1");
        let event = AiEvent::new(
            &ctx,
            AiEventKind::ToolCallResult {
                tool_call_id: "c1".into(),
                tool_name: "core__x".into(),
                ok: false,
                result: None,
                error_code: Some(ToolErrorCode::Timeout),
                message: Some("took too long".into()),
                duration_ms: 5,
                truncated: false,
            },
        );
        let value = serde_json::to_value(&event).unwrap();
        assert_eq!(
            value,
            json!({"type": "tool_call_result", "run_id": "r1", "trace_id": "t1",
                   "tool_call_id": "c1", "tool_name": "core__x", "ok": false,
                   "error_code": "timeout", "message": "took too long",
                   "duration_ms": 5, "truncated": false})
        );
        let back: AiEvent = serde_json::from_value(value).unwrap();
        assert_eq!(back, event);
        let done = serde_json::to_value(AiEvent::new(&ctx, AiEventKind::Done)).unwrap();
        assert_eq!(
            done,
            json!({"type": "done", "run_id": "r1", "trace_id": "t1"})
        );
    }

    fn text(delta: &str) -> AiEvent {
        AiEvent::new(
            &RunContext::new("r1", "t1"),
            AiEventKind::TextDelta {
                delta: delta.into(),
            },
        )
    }

    fn reasoning(delta: &str) -> AiEvent {
        AiEvent::new(
            &RunContext::new("r1", "t1"),
            AiEventKind::ReasoningDelta {
                delta: delta.into(),
            },
        )
    }

    fn delta(event: &AiEvent) -> &str {
        match &event.kind {
            AiEventKind::TextDelta { delta } | AiEventKind::ReasoningDelta { delta } => delta,
            other => panic!("not a delta: {other:?}"),
        }
    }

    #[test]
    fn absorb_appends_a_delta_of_the_same_kind_and_source() {
        let mut last = text("Hel");
        assert!(last.absorb(&text("lo")));
        assert!(last.absorb(&text("")));
        assert!(last.absorb(&text(", world")));
        assert_eq!(last, text("Hello, world"));

        let mut last = reasoning("think");
        assert!(last.absorb(&reasoning("ing")));
        assert_eq!(last, reasoning("thinking"));

        // A subagent's deltas merge with the same subagent's.
        let mut last = text("a").nested("call_1", Some("researcher".into()));
        assert!(last.absorb(&text("b").nested("call_1", Some("researcher".into()))));
        assert_eq!(last, text("ab").nested("call_1", Some("researcher".into())));
    }

    #[test]
    fn absorb_never_merges_another_kind() {
        let mut last = text("a");
        assert!(!last.absorb(&reasoning("r")), "reasoning after text");
        let mut last = reasoning("r");
        assert!(!last.absorb(&text("a")), "text after reasoning");
        assert_eq!(last, reasoning("r"));

        let ctx = RunContext::new("r1", "t1");
        let input = |delta: &str| {
            AiEvent::new(
                &ctx,
                AiEventKind::ToolInputDelta {
                    tool_call_id: "c1".into(),
                    tool_name: "core__x".into(),
                    delta: delta.into(),
                },
            )
        };
        let mut last = input("{\"a\"");
        assert!(!last.absorb(&input(":1}")), "tool input deltas");
        assert!(!last.absorb(&text("a")));
        let others = [
            AiEventKind::ToolCallStart {
                tool_call_id: "c1".into(),
                tool_name: "core__x".into(),
                args: json!({}),
            },
            AiEventKind::ToolCallResult {
                tool_call_id: "c1".into(),
                tool_name: "core__x".into(),
                ok: true,
                result: Some(json!({})),
                error_code: None,
                message: None,
                duration_ms: 1,
                truncated: false,
            },
            AiEventKind::AssistantFinal {
                content: "a".into(),
                finish_reason: "stop".into(),
                prompt_hash: None,
            },
            AiEventKind::Error {
                code: "x".into(),
                message: "y".into(),
            },
            AiEventKind::Done,
        ];
        for kind in others {
            let mut other = AiEvent::new(&ctx, kind);
            let before = other.clone();
            assert!(!other.absorb(&text("a")), "{before:?} took a delta");
            assert_eq!(other, before);
            let mut last = text("a");
            assert!(!last.absorb(&before), "a delta took {before:?}");
            assert_eq!(last, text("a"));
        }
    }

    #[test]
    fn absorb_never_merges_another_source() {
        let other_run = AiEvent::new(
            &RunContext::new("r2", "t1"),
            AiEventKind::TextDelta { delta: "b".into() },
        );
        let other_trace = AiEvent::new(
            &RunContext::new("r1", "t2"),
            AiEventKind::TextDelta { delta: "b".into() },
        );
        let mut ingress = RunContext::new("r1", "t1");
        ingress.ingress_request_id = Some("req".into());
        let other_ingress = AiEvent::new(&ingress, AiEventKind::TextDelta { delta: "b".into() });
        let subagent = text("b").nested("call_1", Some("researcher".into()));
        let other_call = text("b").nested("call_2", Some("researcher".into()));
        let other_graph = text("b").nested("call_1", Some("writer".into()));
        let untagged_graph = text("b").nested("call_1", None);
        for next in [
            &other_run,
            &other_trace,
            &other_ingress,
            &subagent,
            &other_call,
            &other_graph,
            &untagged_graph,
        ] {
            let mut last = text("a");
            assert!(!last.absorb(next), "the run's own text took {next:?}");
            assert_eq!(delta(&last), "a");
        }
        let mut last = text("a").nested("call_1", Some("researcher".into()));
        for next in [&text("b"), &other_call, &other_graph, &untagged_graph] {
            assert!(!last.absorb(next), "a subagent's text took {next:?}");
        }
        assert_eq!(delta(&last), "a");
    }
}
