//! A run's events as the AI SDK's UI message stream (protocol `v1`, the stream
//! `useChat` of AI SDK 5, 6 and 7 reads): one JSON chunk per server-sent event,
//! `data: <chunk>\n\n`, then `data: [DONE]\n\n`.
//!
//! Sans-IO: [`UiStreamEncoder`] is a thin serializer over one
//! [`PartMachine`], which decides the message's structure (its start and
//! finish, steps, open text and reasoning parts, which tool calls the client
//! knows; see [`crate::parts`]): each [`UiChunk`] becomes one JSON chunk
//! ([`chunk_json`]). The caller writes them out with [`UiStreamEncoder::sse`],
//! then [`DONE`], with [`HEADERS`]; [`crate::StreamEncoder::frames`] does it all, and
//! writes a delta that continues the open part straight into its frame.
//!
//! # The response
//!
//! Every response is `start` (with the `messageId` given to the encoder), zero or
//! more steps, then `message-metadata` (when the run reported usage) and exactly one
//! `finish`; nothing follows `finish`. Every `text-start`/`reasoning-start` is
//! matched by its `-end` before the step ends, and every step is `start-step` ...
//! `finish-step`; steps begin and end as [`crate::parts`] says. Events of
//! subagents (`parent_tool_call_id` set) are not part of the message and produce
//! nothing.
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

use std::io::Write as _;

use ai_core::AiEvent;
use bytes::Bytes;
use serde_json::{Value, json};

use crate::parts::{PartId, PartKind, PartMachine, UiChunk};
use crate::stream::{ChunkEncoder, ChunkFormat};

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

/// Encodes one response (one assistant message) as UI message stream chunks:
/// a [`ChunkEncoder`] writing the [`UiStreamFormat`].
pub type UiStreamEncoder = ChunkEncoder<UiStreamFormat>;

/// The UI message stream's form of the chunks: one JSON chunk each
/// ([`chunk_json`]), framed as a server-sent event
/// ([`UiStreamEncoder::sse`]). A continuation's known calls do not repeat
/// their input chunks, and their outcomes before the response's first step are
/// sent outside any step.
#[derive(Debug, Default)]
pub struct UiStreamFormat;

impl UiStreamEncoder {
    /// The server-sent event for `chunk`: `data: <compact JSON>\n\n`.
    pub fn sse(chunk: &Value) -> String {
        format!("data: {chunk}\n\n")
    }

    /// [`UiStreamFormat::direct_frame`] of this encoder's machine.
    #[cfg(test)]
    fn next_delta_frame(&self, event: &AiEvent) -> Option<Bytes> {
        UiStreamFormat::direct_frame(self.machine(), event)
    }
}

impl ChunkFormat for UiStreamFormat {
    type Piece = Value;

    const HEADERS: &'static [(&'static str, &'static str)] = HEADERS;

    /// An SSE comment.
    const HEARTBEAT: Option<&'static [u8]> = Some(b": keep-alive\n\n");

    const TERMINATOR: Option<&'static [u8]> = Some(DONE.as_bytes());

    fn continuing(machine: PartMachine, known: Vec<String>) -> PartMachine {
        machine
            .with_continued_calls(known.iter().cloned())
            .with_known_calls(known)
    }

    fn write(&self, chunk: &UiChunk<'_>, out: &mut Vec<Value>) {
        out.push(chunk_json(chunk));
    }

    fn frame(chunk: Value) -> Bytes {
        Bytes::from(UiStreamEncoder::sse(&chunk))
    }

    /// The frame of a text or reasoning delta that continues the open part of
    /// its kind in the open step (most of a response's frames;
    /// [`PartMachine::open_delta`]), written straight into its buffer: the
    /// bytes [`chunk_json`] and [`UiStreamEncoder::sse`] give (keys in
    /// serde_json's order), without a JSON value per delta. `None` for any other
    /// event: the general path.
    fn direct_frame(machine: &PartMachine, event: &AiEvent) -> Option<Bytes> {
        let (id, delta) = machine.open_delta(event)?;
        let mut frame = Vec::with_capacity(delta.len() + 64);
        frame.extend_from_slice(b"data: {\"delta\":");
        serde_json::to_writer(&mut frame, delta).ok()?;
        write!(frame, ",\"id\":\"{id}\",\"type\":\"").ok()?;
        frame.extend_from_slice(id.kind().name().as_bytes());
        frame.extend_from_slice(b"-delta\"}\n\n");
        Some(Bytes::from(frame))
    }
}

/// `chunk` as a UI message stream chunk: the JSON object of the AI SDK's
/// `uiMessageChunkSchema` (only its fields: a step's reason and usage are not
/// sent, and a warning is a transient `data-warning` part).
pub fn chunk_json(chunk: &UiChunk<'_>) -> Value {
    match chunk {
        UiChunk::Start { message_id } => json!({"type": "start", "messageId": message_id}),
        UiChunk::StartStep { .. } => json!({"type": "start-step"}),
        UiChunk::TextStart { id } | UiChunk::ReasoningStart { id } => {
            json!({"type": part_type(*id, "text-start", "reasoning-start"), "id": id.to_string()})
        }
        UiChunk::TextDelta { id, delta } | UiChunk::ReasoningDelta { id, delta } => {
            json!({"type": part_type(*id, "text-delta", "reasoning-delta"), "id": id.to_string(), "delta": delta})
        }
        UiChunk::TextEnd { id } | UiChunk::ReasoningEnd { id } => {
            json!({"type": part_type(*id, "text-end", "reasoning-end"), "id": id.to_string()})
        }
        UiChunk::ToolInputStart {
            tool_call_id,
            tool_name,
        } => json!({
            "type": "tool-input-start", "toolCallId": tool_call_id, "toolName": tool_name,
        }),
        UiChunk::ToolInputDelta {
            tool_call_id,
            input_text_delta,
        } => json!({
            "type": "tool-input-delta", "toolCallId": tool_call_id, "inputTextDelta": input_text_delta,
        }),
        UiChunk::ToolInputAvailable {
            tool_call_id,
            tool_name,
            input,
        } => json!({
            "type": "tool-input-available", "toolCallId": tool_call_id, "toolName": tool_name,
            "input": input,
        }),
        UiChunk::ToolApprovalRequest {
            approval_id,
            tool_call_id,
        } => json!({
            "type": "tool-approval-request", "approvalId": approval_id, "toolCallId": tool_call_id,
        }),
        UiChunk::ToolOutputAvailable {
            tool_call_id,
            output,
        } => json!({
            "type": "tool-output-available", "toolCallId": tool_call_id, "output": output,
        }),
        UiChunk::ToolOutputDenied { tool_call_id } => {
            json!({"type": "tool-output-denied", "toolCallId": tool_call_id})
        }
        UiChunk::ToolOutputError {
            tool_call_id,
            error_text,
        } => json!({
            "type": "tool-output-error", "toolCallId": tool_call_id, "errorText": error_text,
        }),
        UiChunk::Error { error_text } => json!({"type": "error", "errorText": error_text}),
        UiChunk::FinishStep { .. } => json!({"type": "finish-step"}),
        UiChunk::MessageMetadata { metadata } => {
            json!({"type": "message-metadata", "messageMetadata": metadata})
        }
        UiChunk::Finish { finish_reason, .. } => {
            json!({"type": "finish", "finishReason": finish_reason})
        }
        UiChunk::Warning { message } => json!({
            "type": "data-warning", "data": crate::stream::warning_data(message), "transient": true,
        }),
    }
}

/// The `type` of a text or reasoning part's chunk: `text` for a text part,
/// else `reasoning`.
fn part_type(id: PartId, text: &'static str, reasoning: &'static str) -> &'static str {
    match id.kind() {
        PartKind::Text => text,
        PartKind::Reasoning => reasoning,
    }
}

/// Applies UI message stream `chunks` to UI message `message`, as the AI SDK's
/// client builds its message from a response: parts by step, text and
/// reasoning by part id, tool parts by call id and state, metadata merged.
pub(crate) fn apply_chunks(message: &mut Value, chunks: &[Value]) {
    let mut open: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for chunk in chunks {
        apply_chunk(message, chunk, &mut open);
    }
}

fn apply_chunk(
    message: &mut Value,
    chunk: &Value,
    open: &mut std::collections::HashMap<String, usize>,
) {
    let kind = chunk["type"].as_str().unwrap_or_default();
    if matches!(kind, "message-metadata" | "finish" | "start")
        && let Some(metadata) = chunk.get("messageMetadata").filter(|m| m.is_object())
    {
        merge_metadata(message, metadata);
    }
    let Some(parts) = message["parts"].as_array_mut() else {
        return;
    };
    let id = chunk["id"].as_str().unwrap_or_default().to_owned();
    let call = chunk["toolCallId"].as_str().unwrap_or_default();
    match kind {
        "start-step" => parts.push(json!({"type": "step-start"})),
        "text-start" | "reasoning-start" => {
            let part = if kind == "text-start" {
                "text"
            } else {
                "reasoning"
            };
            open.insert(id, parts.len());
            parts.push(json!({"type": part, "text": "", "state": "streaming"}));
        }
        "text-delta" | "reasoning-delta" => {
            if let Some(part) = open.get(&id).and_then(|&at| parts.get_mut(at)) {
                let text = format!(
                    "{}{}",
                    part["text"].as_str().unwrap_or_default(),
                    chunk["delta"].as_str().unwrap_or_default()
                );
                part["text"] = text.into();
            }
        }
        "text-end" | "reasoning-end" => {
            if let Some(part) = open.remove(&id).and_then(|at| parts.get_mut(at)) {
                part["state"] = "done".into();
            }
        }
        "tool-input-start" | "tool-input-available" => {
            let tool = chunk["toolName"].as_str().unwrap_or_default();
            let part = tool_part_of(parts, call, tool);
            part["state"] = if kind == "tool-input-start" {
                "input-streaming"
            } else {
                "input-available"
            }
            .into();
            if let Some(input) = chunk.get("input") {
                part["input"] = input.clone();
            }
        }
        "tool-approval-request" => {
            if let Some(part) = find_call(parts, call) {
                part["state"] = "approval-requested".into();
                part["approval"] = json!({"id": chunk["approvalId"]});
            }
        }
        "tool-output-available" | "tool-output-error" | "tool-output-denied" => {
            if let Some(part) = find_call(parts, call) {
                apply_output(part, kind, chunk);
            }
        }
        k if k.starts_with("data-") => parts.push(chunk.clone()),
        _ => {}
    }
}

/// Applies a `tool-output-*` chunk of type `kind` to the call's tool `part`.
fn apply_output(part: &mut Value, kind: &str, chunk: &Value) {
    match kind {
        "tool-output-available" => {
            part["state"] = "output-available".into();
            part["output"] = chunk["output"].clone();
        }
        "tool-output-error" => {
            part["state"] = "output-error".into();
            part["errorText"] = chunk["errorText"].clone();
        }
        _ => {
            part["state"] = "output-denied".into();
            let approval = part["approval"]["id"].clone();
            part["approval"] = json!({"id": approval, "approved": false});
        }
    }
}

fn merge_metadata(message: &mut Value, metadata: &Value) {
    let Some(update) = metadata.as_object() else {
        return;
    };
    if !message["metadata"].is_object() {
        message["metadata"] = json!({});
    }
    if let Some(current) = message["metadata"].as_object_mut() {
        for (key, value) in update {
            current.insert(key.clone(), value.clone());
        }
    }
}

/// The tool part of call `call`, added (as the AI SDK names it:
/// `tool-<name>`) when the message has none yet.
fn tool_part_of<'a>(parts: &'a mut Vec<Value>, call: &str, tool: &str) -> &'a mut Value {
    let at = parts
        .iter()
        .position(|p| p["toolCallId"] == call)
        .unwrap_or_else(|| {
            parts.push(json!({"type": format!("tool-{tool}"), "toolCallId": call, "input": null}));
            parts.len() - 1
        });
    &mut parts[at]
}

fn find_call<'a>(parts: &'a mut [Value], call: &str) -> Option<&'a mut Value> {
    parts.iter_mut().find(|p| p["toolCallId"] == call)
}

#[cfg(test)]
mod tests {
    use ai_core::event::AiEventKind;

    use super::*;
    use crate::StreamEncoder;
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
            let fast: Vec<Bytes> = direct.frames(event, APR);
            let slow: Vec<Bytes> = general
                .event(event, APR)
                .iter()
                .map(|chunk| Bytes::from(UiStreamEncoder::sse(chunk)))
                .collect();
            assert_eq!(fast, slow, "{event:?}");
        }
        assert_eq!(direct_frames, 4, "the deltas that continue an open part");
    }

    fn encode(encoder: &mut UiStreamEncoder, events: &[AiEvent]) -> Vec<Value> {
        events.iter().flat_map(|e| encoder.event(e, APR)).collect()
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
            .map(|e| e.nested("c1", Some("child".into())))
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
        let chunks = encode(&mut encoder, &[text("a"), error("boom"), done()]);
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
        // The model shown is the one that served the call.
        let with_details = ev(AiEventKind::UsageReport {
            model: "m2".into(),
            response_model: Some("m2-2026-11-01".into()),
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
                   "model": "m2-2026-11-01"})
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
