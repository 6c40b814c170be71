//! A run's events as the AI SDK's UI message stream (protocol `v1`, the stream
//! `useChat` of AI SDK 5, 6 and 7 reads): one JSON chunk per server-sent event,
//! `data: <chunk>\n\n`, then `data: [DONE]\n\n`.
//!
//! Sans-IO: [`UiStreamEncoder`] turns each [`AiEvent`] into the chunks for it and
//! keeps the state the protocol needs (the message's start and finish, steps, open
//! text and reasoning parts, which tool calls the client knows); the caller writes
//! them out with [`UiStreamEncoder::sse`], then [`DONE`], with [`HEADERS`].
//!
//! # The response
//!
//! Every response is `start` (with the `messageId` given to the encoder), zero or
//! more steps, then `message-metadata` (when the run reported usage) and exactly one
//! `finish`; nothing follows `finish`. Every `text-start`/`reasoning-start` is
//! matched by its `-end` before the step ends, and every step is `start-step` ...
//! `finish-step`. Events of subagents (`parent_tool_call_id` set) are not part of
//! the message and produce nothing.
//!
//! # Steps
//!
//! A step is one model call and the execution of its tool calls. The events carry
//! no turn number, so boundaries follow from the order the loop emits in: a model
//! call streams its text and reasoning, then reports its usage, then its tools run
//! (sequentially or concurrently), and approval requests come after the turn's
//! executed calls. Hence a new step begins with
//! - a text or reasoning delta, or a `usage_report`, once the current step has
//!   seen a `usage_report` or a tool result (the model call of the step is over);
//! - any event that belongs in a step when none is open.
//!
//! Tool call starts and approval requests never begin a step of their own while
//! one is open: a turn's calls run after its usage report, and state-changing calls
//! of one turn alternate start/result. (A next turn that streams no text and
//! reports no usage is therefore merged into the step before it; with usage
//! reporting on, every turn is its own step.)
//!
//! # Chunks (field names as in the AI SDK's `uiMessageChunkSchema`)
//!
//! | event | chunks |
//! |---|---|
//! | `text_delta` | `text-start {id}` (when no text part is open), `text-delta {id, delta}` |
//! | `reasoning_delta` | `reasoning-start {id}`, `reasoning-delta {id, delta}` |
//! | `tool_input_delta` | `tool-input-start {toolCallId, toolName}` (first of the call), `tool-input-delta {toolCallId, inputTextDelta}` |
//! | `tool_call_start` | `tool-input-start {toolCallId, toolName}` (unless its input streamed), `tool-input-available {toolCallId, toolName, input}` |
//! | `tool_call_result`, ok | `tool-output-available {toolCallId, output}` |
//! | `tool_call_result`, failed | `tool-output-error {toolCallId, errorText: "<code>: <message>"}` |
//! | `tool_approval_requested` | the two input chunks, then `tool-approval-request {approvalId, toolCallId}` |
//! | `client_tool_call` | the two input chunks (the client runs the tool and answers with `addToolOutput`); the response ends `tool-calls` |
//! | `usage_report` | nothing yet: summed into `message-metadata` at the end |
//! | `error` | `error {errorText: message}` |
//! | `assistant_final` | nothing: its `finish_reason` becomes `finish`'s |
//! | `done` | closes the open part and step, `message-metadata`, `finish {finishReason}` |
//! | `tool_calls_not_executed`, `tool_withheld` | nothing (the client never saw those calls; the run's `error` follows) |
//!
//! A text or reasoning part is closed before anything else is emitted in its step
//! (tool chunks, a part of the other kind, `error`, `finish-step`). Part ids are
//! `text-<n>` and `reasoning-<n>`, numbered in order within the response.
//!
//! Decisions, checked against `packages/ai/src/ui-message-stream/ui-message-chunks.ts`
//! and `packages/ai/src/ui/process-ui-message-stream.ts` of `vercel/ai` (ai 7, and
//! the `release-v5.0` / `release-v6.0` branches):
//! - Only the fields of the schema are sent. ai 5 before 5.0.217, ai 6 before
//!   6.0.231 and ai 7 before 7.0.32 validate every chunk with a strict object
//!   schema (per their changelogs and `release-v*` branches), so an extra field
//!   (a `duration_ms`, `truncated`, a `messageId` on `start-step`) would fail the
//!   whole stream there. Timing and truncation are therefore not sent.
//! - `finish` carries `finishReason` (one of `stop`, `length`, `content-filter`,
//!   `tool-calls`, `error`, `other`: the values every version's enum accepts; ai 7
//!   dropped `unknown`). ai 6 accepts it from 6.0.0, ai 5 from 5.0.92; ai 5.0.0 to
//!   5.0.91 reject a `finish` that has it (as they reject the approval chunks, which
//!   only ai 6 introduced).
//! - Tool parts are static (no `dynamic` flag): the client shows them as
//!   `tool-<toolName>` parts, named by our namespaced tool ids (`core__read_file`).
//! - The outcome of a call of the continued message that comes before anything
//!   else (an approved call that ran, a denial) is sent outside any step, as the
//!   AI SDK's own server sends it: it belongs to the message's earlier step, and a
//!   `start-step` before it would add an empty step to the message.
//! - `tool-output-*` for a call the client already has (a continuation) finds the
//!   call anywhere in the message being continued, so no input chunks are repeated
//!   for known calls; a result for a call neither known nor started in this response
//!   gets its input chunks first (input `{}`), since the client rejects an output
//!   for a call it has never seen.
//! - The usage metadata names its fields like the AI SDK's `LanguageModelUsage`:
//!   `{usage: {inputTokens, outputTokens, totalTokens, inputTokenDetails?:
//!   {cacheReadTokens}, outputTokenDetails?: {reasoningTokens}}, model}`, summed
//!   over the response's model calls; `model` is the last call's.
//! - Our `finish_reason`s map to the AI SDK's: `stop`, `length` as is,
//!   `content_filter` and `refusal` to `content-filter` (as the AI SDK's Anthropic
//!   provider maps a refusal), a run that failed to `error`, one paused for
//!   approval to `tool-calls`, anything else (e.g. a response cut short) to `other`.

use std::collections::HashSet;

use ai_core::{AiEvent, event::AiEventKind};
use axum::body::Bytes;

use crate::stream::{Activity, FailureView, Outcome, StepFlags, StreamEncoder, failure_view};
use serde_json::{Value, json};

/// The response headers of a UI message stream (as the AI SDK sends them).
pub const HEADERS: &[(&str, &str)] = &[
    ("content-type", "text/event-stream"),
    ("cache-control", "no-cache"),
    ("connection", "keep-alive"),
    ("x-vercel-ai-ui-message-stream", "v1"),
    ("x-accel-buffering", "no"),
];

/// The server-sent event that ends the stream, after the `finish` chunk.
pub const DONE: &str = "data: [DONE]\n\n";

/// Encodes one response (one assistant message) as UI message stream chunks.
///
/// Feed it the run's events in order with [`event`](Self::event); call
/// [`finish`](Self::finish) if the response ends before `done` (it emits what
/// `done` would; after either, the encoder emits nothing more).
#[derive(Debug)]
pub struct UiStreamEncoder {
    message_id: String,
    /// Calls whose input the client already has (this response or an earlier one).
    inputs_sent: HashSet<String>,
    /// Calls whose input is streaming (`tool-input-start` sent, not yet complete).
    inputs_streaming: HashSet<String>,
    /// The calls of the continued message: their outcomes belong to its earlier
    /// steps, so before this response's first step they are sent outside any
    /// step (as the AI SDK's own server does), not in a new, empty one.
    continued: HashSet<String>,
    started: bool,
    finished: bool,
    step: Option<StepFlags>,
    open: Option<OpenPart>,
    parts: u32,
    outcome: Outcome,
}

#[derive(Debug)]
enum OpenPart {
    Text(String),
    Reasoning(String),
}

impl UiStreamEncoder {
    /// An encoder for a new assistant message with id `message_id`.
    pub fn new(message_id: impl Into<String>) -> Self {
        Self::continuing(message_id, std::iter::empty())
    }

    /// An encoder for a continuation of the assistant message `message_id`, whose
    /// earlier parts the client already has, among them the tool calls
    /// `known_tool_call_ids`: their input chunks are not repeated (their outputs,
    /// approvals and denials may still arrive).
    ///
    /// `message_id` must be the id the client has for that message: `useChat`
    /// continues (replaces) its last message only when `start` names its id, and
    /// otherwise adds a second assistant message.
    pub fn continuing(
        message_id: impl Into<String>,
        known_tool_call_ids: impl IntoIterator<Item = String>,
    ) -> Self {
        let known: HashSet<String> = known_tool_call_ids.into_iter().collect();
        Self {
            message_id: message_id.into(),
            continued: known.clone(),
            inputs_sent: known,
            inputs_streaming: HashSet::new(),
            started: false,
            finished: false,
            step: None,
            open: None,
            parts: 0,
            outcome: Outcome::default(),
        }
    }

    /// The chunks for `event`, in order (none for a subagent's event or after the
    /// finish). `approval_id` names the approval of a `tool_approval_requested`
    /// from its call id, tool name and `args_hash`.
    pub fn event(
        &mut self,
        event: &AiEvent,
        approval_id: &dyn Fn(&str, &str, &str) -> String,
    ) -> Vec<Value> {
        if self.finished || !crate::stream::shown(event) {
            return Vec::new();
        }
        if matches!(event.kind, AiEventKind::Done) {
            return self.finish();
        }
        let mut out = Vec::new();
        self.start(&mut out);
        match &event.kind {
            AiEventKind::TextDelta { delta } if !delta.is_empty() => {
                self.step_for(Activity::Delta, &mut out);
                self.delta(PartKind::Text, delta, &mut out);
            }
            AiEventKind::ReasoningDelta { delta } if !delta.is_empty() => {
                self.step_for(Activity::Delta, &mut out);
                self.delta(PartKind::Reasoning, delta, &mut out);
            }
            AiEventKind::ToolInputDelta {
                tool_call_id,
                tool_name,
                delta,
            } if !delta.is_empty() && !self.inputs_sent.contains(tool_call_id) => {
                self.step_for(Activity::Delta, &mut out);
                self.close_part(&mut out);
                if self.inputs_streaming.insert(tool_call_id.clone()) {
                    out.push(json!({
                        "type": "tool-input-start",
                        "toolCallId": tool_call_id,
                        "toolName": tool_name,
                    }));
                }
                out.push(json!({
                    "type": "tool-input-delta",
                    "toolCallId": tool_call_id,
                    "inputTextDelta": delta,
                }));
            }
            AiEventKind::ToolCallStart { tool_call_id, .. }
                if self.step.is_none() && self.continued.contains(tool_call_id) => {}
            AiEventKind::ToolCallStart {
                tool_call_id,
                tool_name,
                args,
            } => {
                self.step_for(Activity::Call, &mut out);
                self.close_part(&mut out);
                self.input(tool_call_id, tool_name, args, &mut out);
            }
            AiEventKind::ToolCallResult {
                tool_call_id,
                tool_name,
                ok,
                result,
                error_code,
                message,
                ..
            } => {
                let outside = self.step.is_none() && self.continued.contains(tool_call_id);
                if !outside {
                    self.step_for(Activity::Result, &mut out);
                }
                self.close_part(&mut out);
                self.input(tool_call_id, tool_name, &json!({}), &mut out);
                out.push(if *ok {
                    json!({
                        "type": "tool-output-available",
                        "toolCallId": tool_call_id,
                        "output": result.clone().unwrap_or(Value::Null),
                    })
                } else {
                    match failure_view(*error_code, message.as_deref()) {
                        FailureView::Denied => {
                            json!({"type": "tool-output-denied", "toolCallId": tool_call_id})
                        }
                        FailureView::Error(text) => json!({
                            "type": "tool-output-error",
                            "toolCallId": tool_call_id,
                            "errorText": text,
                        }),
                    }
                });
                if !outside {
                    self.saw_result();
                }
            }
            AiEventKind::ToolApprovalRequested {
                tool_call_id,
                tool_name,
                args,
                args_hash,
            } => {
                self.step_for(Activity::Call, &mut out);
                self.close_part(&mut out);
                self.input(tool_call_id, tool_name, args, &mut out);
                out.push(json!({
                    "type": "tool-approval-request",
                    "approvalId": approval_id(tool_call_id, tool_name, args_hash),
                    "toolCallId": tool_call_id,
                }));
                self.outcome.paused = true;
            }
            AiEventKind::ClientToolCall {
                tool_call_id,
                tool_name,
                args,
            } => {
                self.step_for(Activity::Call, &mut out);
                self.close_part(&mut out);
                self.input(tool_call_id, tool_name, args, &mut out);
                self.outcome.paused = true;
            }
            AiEventKind::UsageReport { .. } => {
                self.step_for(Activity::Usage, &mut out);
                self.outcome.usage.add(&event.kind);
                if let Some(step) = &mut self.step {
                    step.saw_usage = true;
                }
            }
            AiEventKind::AssistantFinal { finish_reason, .. } => {
                self.outcome.final_reason = Some(finish_reason.clone());
            }
            AiEventKind::Error { message, .. } => {
                self.close_part(&mut out);
                out.push(json!({"type": "error", "errorText": message}));
                self.outcome.error = true;
            }
            _ => {}
        }
        out
    }

    /// `tool-output-denied` for the call `tool_call_id` (e.g. the user denied its
    /// approval before this continuation started), within a step (after `start`
    /// when nothing was sent yet). The call must be one the client has: a known
    /// call of a continuation, or one started in this response.
    pub fn denied(&mut self, tool_call_id: &str) -> Vec<Value> {
        self.server_result(json!({"type": "tool-output-denied", "toolCallId": tool_call_id}))
    }

    /// `tool-output-error` with `error_text` for the call `tool_call_id` (e.g. a
    /// call the server refuses before the run starts), within a step (after
    /// `start` when nothing was sent yet). The call must be one the client has, as
    /// for [`denied`](Self::denied).
    pub fn tool_error(&mut self, tool_call_id: &str, error_text: &str) -> Vec<Value> {
        self.server_result(json!({
            "type": "tool-output-error",
            "toolCallId": tool_call_id,
            "errorText": error_text,
        }))
    }

    /// What `done` emits, for a response that ends without it: closes the open
    /// part and step, then `message-metadata` (when usage was reported) and
    /// `finish`. Emits nothing when the response already finished.
    pub fn finish(&mut self) -> Vec<Value> {
        if self.finished {
            return Vec::new();
        }
        let mut out = Vec::new();
        self.start(&mut out);
        self.end_step(&mut out);
        if let Some(usage) = self.outcome.usage.metadata() {
            out.push(json!({"type": "message-metadata", "messageMetadata": usage}));
        }
        out.push(json!({"type": "finish", "finishReason": self.outcome.finish_reason()}));
        self.finished = true;
        out
    }

    /// The frame of a text or reasoning delta that continues the open part of
    /// its kind in the open step (most of a response's frames), written
    /// straight into its buffer: the bytes [`UiStreamEncoder::event`] and
    /// [`UiStreamEncoder::sse`] give (keys in serde_json's order), without a
    /// JSON value per delta. `None` for any other event: the general path.
    fn next_delta_frame(&mut self, event: &AiEvent) -> Option<Bytes> {
        let (kind, delta) = match &event.kind {
            AiEventKind::TextDelta { delta } => (PartKind::Text, delta),
            AiEventKind::ReasoningDelta { delta } => (PartKind::Reasoning, delta),
            _ => return None,
        };
        let id = match (&self.open, kind) {
            (Some(OpenPart::Text(id)), PartKind::Text)
            | (Some(OpenPart::Reasoning(id)), PartKind::Reasoning) => id,
            _ => return None,
        };
        if self.finished
            || delta.is_empty()
            || !self.started
            || !crate::stream::shown(event)
            || StepFlags::needs_new(self.step.as_ref(), Activity::Delta)
        {
            return None;
        }
        let mut frame = Vec::with_capacity(delta.len() + id.len() + 48);
        frame.extend_from_slice(b"data: {\"delta\":");
        serde_json::to_writer(&mut frame, delta).ok()?;
        frame.extend_from_slice(b",\"id\":");
        serde_json::to_writer(&mut frame, id).ok()?;
        frame.extend_from_slice(b",\"type\":\"");
        frame.extend_from_slice(kind.name().as_bytes());
        frame.extend_from_slice(b"-delta\"}\n\n");
        Some(Bytes::from(frame))
    }

    /// The server-sent event for `chunk`: `data: <compact JSON>\n\n`.
    pub fn sse(chunk: &Value) -> String {
        format!("data: {chunk}\n\n")
    }

    fn server_result(&mut self, chunk: Value) -> Vec<Value> {
        if self.finished {
            return Vec::new();
        }
        let mut out = Vec::new();
        self.start(&mut out);
        let outside = self.step.is_none()
            && chunk["toolCallId"]
                .as_str()
                .is_some_and(|id| self.continued.contains(id));
        if !outside {
            self.step_for(Activity::Result, &mut out);
        }
        self.close_part(&mut out);
        out.push(chunk);
        if !outside {
            self.saw_result();
        }
        out
    }

    fn start(&mut self, out: &mut Vec<Value>) {
        if !self.started {
            self.started = true;
            out.push(json!({"type": "start", "messageId": self.message_id}));
        }
    }

    fn step_for(&mut self, activity: Activity, out: &mut Vec<Value>) {
        if StepFlags::needs_new(self.step.as_ref(), activity) {
            self.end_step(out);
            out.push(json!({"type": "start-step"}));
            self.step = Some(StepFlags::default());
        }
    }

    fn end_step(&mut self, out: &mut Vec<Value>) {
        self.close_part(out);
        if self.step.take().is_some() {
            out.push(json!({"type": "finish-step"}));
        }
    }

    fn saw_result(&mut self) {
        if let Some(step) = &mut self.step {
            step.saw_result = true;
        }
    }

    fn delta(&mut self, kind: PartKind, delta: &str, out: &mut Vec<Value>) {
        let id = match (&self.open, kind) {
            (Some(OpenPart::Text(id)), PartKind::Text)
            | (Some(OpenPart::Reasoning(id)), PartKind::Reasoning) => id.clone(),
            _ => {
                self.close_part(out);
                self.parts += 1;
                let id = format!("{}-{}", kind.name(), self.parts);
                out.push(json!({"type": format!("{}-start", kind.name()), "id": id}));
                self.open = Some(match kind {
                    PartKind::Text => OpenPart::Text(id.clone()),
                    PartKind::Reasoning => OpenPart::Reasoning(id.clone()),
                });
                id
            }
        };
        out.push(json!({"type": format!("{}-delta", kind.name()), "id": id, "delta": delta}));
    }

    fn close_part(&mut self, out: &mut Vec<Value>) {
        match self.open.take() {
            Some(OpenPart::Text(id)) => out.push(json!({"type": "text-end", "id": id})),
            Some(OpenPart::Reasoning(id)) => {
                out.push(json!({"type": "reasoning-end", "id": id}));
            }
            None => {}
        }
    }

    /// The input chunks of a call, unless the client already has them.
    fn input(&mut self, tool_call_id: &str, tool_name: &str, args: &Value, out: &mut Vec<Value>) {
        if !self.inputs_sent.insert(tool_call_id.to_owned()) {
            return;
        }
        if !self.inputs_streaming.remove(tool_call_id) {
            out.push(json!({
                "type": "tool-input-start",
                "toolCallId": tool_call_id,
                "toolName": tool_name,
            }));
        }
        out.push(json!({
            "type": "tool-input-available",
            "toolCallId": tool_call_id,
            "toolName": tool_name,
            "input": args,
        }));
    }
}

#[derive(Debug, Clone, Copy)]
enum PartKind {
    Text,
    Reasoning,
}

impl PartKind {
    fn name(self) -> &'static str {
        match self {
            Self::Text => "text",
            Self::Reasoning => "reasoning",
        }
    }
}

impl StreamEncoder for UiStreamEncoder {
    fn headers(&self) -> &'static [(&'static str, &'static str)] {
        HEADERS
    }

    fn frames(
        &mut self,
        event: &AiEvent,
        approval_id: &dyn Fn(&str, &str, &str) -> String,
    ) -> Vec<Bytes> {
        if let Some(frame) = self.next_delta_frame(event) {
            return vec![frame];
        }
        self.event(event, approval_id)
            .iter()
            .map(|chunk| Bytes::from(Self::sse(chunk)))
            .collect()
    }

    fn end(&mut self) -> Vec<Bytes> {
        let mut frames: Vec<Bytes> = self
            .finish()
            .iter()
            .map(|chunk| Bytes::from(Self::sse(chunk)))
            .collect();
        frames.push(Bytes::from_static(DONE.as_bytes()));
        frames
    }

    fn heartbeat(&self) -> Option<Bytes> {
        Some(Bytes::from_static(b": keep-alive\n\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_events::*;

    /// The delta frames written straight into their buffer are byte for byte
    /// the general path's, escapes, quotes and non-ASCII text included.
    #[test]
    fn direct_delta_frames_are_the_general_paths_bytes() {
        let events = [
            reasoning("think \"hard\""),
            reasoning(" more\n"),
            text("Hello"),
            text(", \u{1F600} \"quoted\" \\ back\tslash </script>"),
            text("\u{0}\u{7f}\u{2028}"),
            call("c1"),
            result("c1"),
            usage_of(3),
            text("after the step"),
            text(" and more"),
            done(),
        ];
        let mut direct = UiStreamEncoder::new(String::from("m1"));
        let mut general = UiStreamEncoder::new(String::from("m1"));
        let mut direct_frames = 0;
        for event in &events {
            direct_frames += usize::from(direct.next_delta_frame(event).is_some());
            let fast: Vec<Bytes> = direct.frames(event, &apr);
            let slow: Vec<Bytes> = general
                .event(event, &apr)
                .iter()
                .map(|chunk| Bytes::from(UiStreamEncoder::sse(chunk)))
                .collect();
            assert_eq!(fast, slow, "{event:?}");
        }
        assert_eq!(direct_frames, 4, "the deltas that continue an open part");
    }

    fn encode(encoder: &mut UiStreamEncoder, events: &[AiEvent]) -> Vec<Value> {
        events.iter().flat_map(|e| encoder.event(e, &apr)).collect()
    }

    fn types(chunks: &[Value]) -> Vec<&str> {
        chunks.iter().map(|c| c["type"].as_str().unwrap()).collect()
    }

    /// The protocol's structural rules, for one whole response.
    fn check(chunks: &[Value]) {
        let types = types(chunks);
        assert_eq!(types.first(), Some(&"start"), "{types:?}");
        assert_eq!(types.last(), Some(&"finish"), "{types:?}");
        assert_eq!(types.iter().filter(|t| **t == "start").count(), 1);
        assert_eq!(types.iter().filter(|t| **t == "finish").count(), 1);
        let mut open: Option<String> = None;
        let mut in_step = false;
        let mut steps_seen = 0;
        for chunk in chunks {
            let kind = chunk["type"].as_str().unwrap();
            let id = chunk["id"].as_str().map(str::to_owned);
            match kind {
                "text-start" | "reasoning-start" => {
                    assert!(in_step && open.is_none(), "{types:?}");
                    open = id;
                }
                "text-delta" | "reasoning-delta" => assert_eq!(open, id, "{types:?}"),
                "text-end" | "reasoning-end" => assert_eq!(open.take(), id, "{types:?}"),
                "start-step" => {
                    assert!(!in_step && open.is_none(), "{types:?}");
                    in_step = true;
                    steps_seen += 1;
                }
                "finish-step" => {
                    assert!(in_step && open.is_none(), "{types:?}");
                    in_step = false;
                }
                "tool-input-start" | "tool-input-available" | "tool-approval-request" => {
                    assert!(in_step && open.is_none(), "{types:?}");
                }
                // An outcome may come before the first step: that of a call of
                // the continued message (it belongs to an earlier step).
                "tool-output-available" | "tool-output-error" | "tool-output-denied" => {
                    assert!(open.is_none(), "{types:?}");
                    assert!(in_step || steps_seen == 0, "{types:?}");
                }
                "finish" | "message-metadata" => assert!(!in_step && open.is_none()),
                _ => {}
            }
        }
    }

    #[test]
    fn one_start_and_one_finish_and_nothing_after_it() {
        let mut encoder = UiStreamEncoder::new("m1");
        let mut chunks = encode(&mut encoder, &[text("a"), usage_of(1), done()]);
        check(&chunks);
        // A second done, later events, finish(), denials: nothing.
        chunks.extend(encode(&mut encoder, &[done(), text("late"), call("c9")]));
        chunks.extend(encoder.finish());
        chunks.extend(encoder.denied("c9"));
        chunks.extend(encoder.tool_error("c9", "x"));
        check(&chunks);
        assert_eq!(
            types(&chunks),
            [
                "start",
                "start-step",
                "text-start",
                "text-delta",
                "text-end",
                "finish-step",
                "message-metadata",
                "finish"
            ]
        );
        assert_eq!(chunks[0]["messageId"], "m1");
        assert_eq!(chunks[7]["finishReason"], "other");
    }

    #[test]
    fn finish_without_done_closes_everything_once() {
        let mut encoder = UiStreamEncoder::new("m1");
        let mut chunks = encode(&mut encoder, &[reasoning("r"), text("a")]);
        chunks.extend(encoder.finish());
        chunks.extend(encoder.finish());
        check(&chunks);
        assert_eq!(
            types(&chunks),
            [
                "start",
                "start-step",
                "reasoning-start",
                "reasoning-delta",
                "reasoning-end",
                "text-start",
                "text-delta",
                "text-end",
                "finish-step",
                "finish"
            ]
        );
        // An encoder that saw nothing still sends one start and one finish.
        let chunks = UiStreamEncoder::new("m2").finish();
        check(&chunks);
        assert_eq!(types(&chunks), ["start", "finish"]);
    }

    #[test]
    fn nested_events_are_skipped() {
        let mut encoder = UiStreamEncoder::new("m1");
        let nested: Vec<AiEvent> = [text("sub"), call("s1"), result("s1"), usage_of(1), done()]
            .into_iter()
            .map(|e| e.nested("c1", Some("child")))
            .collect();
        assert!(encode(&mut encoder, &nested).is_empty());
        let mut chunks = encode(&mut encoder, &[call("c1")]);
        chunks.extend(encode(&mut encoder, &nested));
        chunks.extend(encode(&mut encoder, &[result("c1"), done()]));
        check(&chunks);
        assert_eq!(
            types(&chunks),
            [
                "start",
                "start-step",
                "tool-input-start",
                "tool-input-available",
                "tool-output-available",
                "finish-step",
                "finish"
            ]
        );
        // The nested done did not finish the response, nor did its usage count.
        assert!(chunks.iter().all(|c| c["type"] != "message-metadata"));
    }

    #[test]
    fn steps_follow_usage_and_results() {
        // Turn 1: text, usage, two calls run one after the other; turn 2: a call
        // only (usage first); turn 3: text.
        let mut encoder = UiStreamEncoder::new("m1");
        let chunks = encode(
            &mut encoder,
            &[
                text("a"),
                usage_of(1),
                call("c1"),
                result("c1"),
                call("c2"),
                result("c2"),
                usage_of(1),
                call("c3"),
                result("c3"),
                text("b"),
                usage_of(1),
                done(),
            ],
        );
        check(&chunks);
        let steps = types(&chunks)
            .iter()
            .filter(|t| **t == "start-step")
            .count();
        assert_eq!(steps, 3);
        let t = types(&chunks);
        let first_end = t.iter().position(|t| *t == "finish-step").unwrap();
        // Both calls of turn 1 are in step 1.
        let c2 = chunks
            .iter()
            .position(|c| c["toolCallId"] == "c2" && c["type"] == "tool-output-available")
            .unwrap();
        assert!(c2 < first_end);
    }

    #[test]
    fn a_continuation_does_not_repeat_known_inputs() {
        let mut encoder = UiStreamEncoder::continuing("m1", ["c1".to_owned()]);
        let mut chunks = encoder.denied("c0");
        chunks.extend(encode(
            &mut encoder,
            &[
                call("c1"),
                result("c1"),
                call("c2"),
                result("c2"),
                text("ok"),
                done(),
            ],
        ));
        check(&chunks);
        let inputs: Vec<&Value> = chunks
            .iter()
            .filter(|c| c["type"] == "tool-input-start")
            .map(|c| &c["toolCallId"])
            .collect();
        assert_eq!(inputs, [&json!("c2")]);
        assert_eq!(
            types(&chunks)[..3],
            ["start", "start-step", "tool-output-denied"]
        );
    }

    #[test]
    fn a_continued_call_s_outcome_opens_no_empty_step() {
        // The approved call of the continued message ran first: its output
        // belongs to the message's earlier step, as the AI SDK's server sends it.
        let mut encoder = UiStreamEncoder::continuing("m1", ["c1".to_owned()]);
        let chunks = encode(
            &mut encoder,
            &[call("c1"), result("c1"), text("ok"), done()],
        );
        check(&chunks);
        assert_eq!(
            types(&chunks)[..4],
            ["start", "tool-output-available", "start-step", "text-start"]
        );
        let steps = types(&chunks)
            .iter()
            .filter(|t| **t == "start-step")
            .count();
        assert_eq!(steps, 1);
    }

    #[test]
    fn a_result_without_a_start_gets_its_input_first() {
        let mut encoder = UiStreamEncoder::new("m1");
        let chunks = encode(&mut encoder, &[result("c1"), done()]);
        check(&chunks);
        assert_eq!(chunks[2]["type"], "tool-input-start");
        assert_eq!(chunks[3]["input"], json!({}));
        assert_eq!(chunks[4]["type"], "tool-output-available");
    }

    #[test]
    fn an_error_closes_the_open_part_first() {
        let mut encoder = UiStreamEncoder::new("m1");
        let error = ev(AiEventKind::Error {
            code: "provider_error".into(),
            message: "boom".into(),
        });
        let chunks = encode(&mut encoder, &[text("a"), error, done()]);
        check(&chunks);
        let t = types(&chunks);
        assert_eq!(t[4..], ["text-end", "error", "finish-step", "finish"]);
        assert_eq!(chunks[5]["errorText"], "boom");
        assert_eq!(chunks[7]["finishReason"], "error");
    }

    #[test]
    fn finish_reasons_map_to_the_ai_sdk_values() {
        for (ours, theirs) in [
            ("stop", "stop"),
            ("length", "length"),
            ("content_filter", "content-filter"),
            ("refusal", "content-filter"),
            ("something_new", "other"),
        ] {
            let mut encoder = UiStreamEncoder::new("m1");
            let final_ = ev(AiEventKind::AssistantFinal {
                content: String::new(),
                finish_reason: ours.into(),
                prompt_hash: None,
            });
            let chunks = encode(&mut encoder, &[final_, done()]);
            assert_eq!(chunks.last().unwrap()["finishReason"], theirs);
        }
        let mut encoder = UiStreamEncoder::new("m1");
        let request = ev(AiEventKind::ToolApprovalRequested {
            tool_call_id: "c1".into(),
            tool_name: "core__rm".into(),
            args: json!({}),
            args_hash: "sha256:0".into(),
        });
        let chunks = encode(&mut encoder, &[request, done()]);
        check(&chunks);
        assert_eq!(chunks.last().unwrap()["finishReason"], "tool-calls");
        assert_eq!(chunks[4]["approvalId"], "apr-c1");
    }

    #[test]
    fn usage_is_summed_into_the_metadata() {
        let mut encoder = UiStreamEncoder::new("m1");
        let with_details = ev(AiEventKind::UsageReport {
            model: "m2".into(),
            prompt_tokens: 10,
            completion_tokens: 20,
            total_tokens: 30,
            cached_tokens: Some(4),
            reasoning_tokens: None,
            cache_creation_tokens: None,
            cost_micros: None,
            prompt_hash: None,
        });
        let chunks = encode(&mut encoder, &[usage_of(1), with_details, done()]);
        check(&chunks);
        let meta = chunks
            .iter()
            .find(|c| c["type"] == "message-metadata")
            .unwrap();
        assert_eq!(
            meta["messageMetadata"],
            json!({"usage": {"inputTokens": 11, "outputTokens": 22, "totalTokens": 33,
                             "inputTokenDetails": {"cacheReadTokens": 4}},
                   "model": "m2"})
        );
    }

    #[test]
    fn sse_frames_compact_json() {
        let chunk = json!({"type": "text-delta", "id": "text-1", "delta": "a\nb"});
        let event = UiStreamEncoder::sse(&chunk);
        let body = event
            .strip_prefix("data: ")
            .and_then(|e| e.strip_suffix("\n\n"))
            .unwrap();
        assert!(!body.contains(['\n', ' ']), "{event:?}");
        assert_eq!(serde_json::from_str::<Value>(body).unwrap(), chunk);
    }
}
