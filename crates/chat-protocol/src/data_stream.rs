//! A run's events as the data stream of AI SDK 4 (protocol `v1`, what its `useChat`
//! and assistant-ui's `DataStreamDecoder` read): one `CODE:JSON\n` line per part.
//!
//! Sans-IO, like [`crate::ui_stream`]: [`DataStreamEncoder`] is a thin serializer
//! over one [`PartMachine`] (see [`crate::parts`]), each [`UiChunk`] zero or
//! more lines (text and reasoning part boundaries, the message's start and
//! metadata have no line); the caller writes them out, with [`HEADERS`]. The
//! stream has no end marker: the `d:` line is the last.
//!
//! # The response
//!
//! Zero or more steps, `f:{messageId}` ... `e:{finishReason, usage?, isContinued}`,
//! then exactly one `d:{finishReason, usage?}`; nothing follows it. Steps begin and
//! end by the same rules as the UI message stream's (see [`crate::parts`]);
//! every step's `f:` carries the encoder's message id, so the client's message keeps
//! that id. Events of subagents (`parent_tool_call_id` set) produce nothing.
//!
//! | event | lines |
//! |---|---|
//! | `text_delta` | `0:"<text>"` |
//! | `reasoning_delta` | `g:"<text>"` |
//! | `tool_call_start` | `b:{toolCallId, toolName}`, `c:{toolCallId, argsTextDelta}`, `9:{toolCallId, toolName, args}` |
//! | `tool_call_result`, ok | `a:{toolCallId, result}` |
//! | `tool_call_result`, failed | `a:{toolCallId, result: "<code>: <message>", isError: true}` |
//! | `tool_approval_requested` | the call's `b:`/`c:`/`9:`, then `2:[{type: "tool-approval-request", approvalId, toolCallId}]` |
//! | `client_tool_call` | the call's `b:`/`c:`/`9:` with no result (the client runs it: AI SDK 4's `addToolResult`) |
//! | `usage_report` | nothing yet: the step's `e:` and the `d:` carry `usage {promptTokens, completionTokens}` |
//! | `error` | `3:"<message>"` |
//! | `done` | `e:` for the open step, then `d:` |
//!
//! Decisions, checked against `packages/ui-utils/src/data-stream-parts.ts` and
//! `process-chat-response.ts` of `vercel/ai` (branch `release-v4.3`) and against
//! `packages/assistant-stream/src/core/serialization/data-stream/DataStream.ts`
//! (with `chunk-types.ts` and `accumulators/assistant-message-accumulator.ts`) of
//! `assistant-ui/assistant-ui`:
//! - A call is announced as `b:`, one `c:` carrying its whole arguments as JSON
//!   text, then `9:` (the sequence AI SDK 4 sends with tool call streaming on).
//!   assistant-stream builds a call opened by `b:` from its `c:` text only and
//!   ignores the `args` of the `9:` that closes it, so `b:` then `9:` alone would
//!   show it `{}`. Arguments that are not a JSON object are sent as `{}` (AI SDK 4
//!   rejects a `9:` whose `args` is not an object).
//! - v1 has no codes for approvals, denials or failed calls:
//!   - an approval request is the call itself (`b:`/`c:`/`9:` with no result: AI SDK
//!     4's way of showing a call that waits for the user) plus a `2:` data part
//!     `[{"type": "tool-approval-request", "approvalId", "toolCallId"}]`, the UI
//!     stream's chunk; both decoders accept `2:` with an array silently (AI SDK 4
//!     appends it to `useChat`'s `data`, assistant-stream to the message's
//!     `metadata.unstable_data`);
//!   - a failed call, a refused call ([`ChunkEncoder::tool_error`]) and a
//!     denied one ([`ChunkEncoder::denied`], result [`DENIED_RESULT`]) are an
//!     `a:` whose `result` is the error text, with `isError: true`: assistant-stream
//!     reads `isError` into the result part, and AI SDK 4 validates only
//!     `toolCallId` and `result` and keeps the extra field on the invocation.
//! - `e:`'s `finishReason` is `tool-calls` for a step with tool activity, `error`
//!   for the last step of a failed run, else the response's; `d:`'s is the
//!   response's (mapped like the UI stream's `finish`). `isContinued` is always
//!   `false`. `usage` is left out when no usage was reported (it is optional in
//!   AI SDK 4, which then reports `NaN`s), rather than claiming zero tokens.
//! - A continuation's result for a known call is an `a:` without the call's
//!   `b:`/`9:` (as AI SDK 4's human-in-the-loop example sends it): AI SDK 4 merges
//!   the response into the last assistant message, which has the call.
//!   assistant-stream decodes every response as a new message and rejects (strict
//!   mode) or drops (lenient) a result whose call it has not seen in this response.

use std::collections::HashMap;

use bytes::Bytes;
use serde_json::{Map, Value, json};

use crate::parts::{PartMachine, TokenCounts, UiChunk};
use crate::stream::{ChunkEncoder, ChunkFormat};

/// The response headers of a data stream.
pub const HEADERS: &[(&str, &str)] = &[
    ("content-type", "text/plain; charset=utf-8"),
    ("x-vercel-ai-data-stream", "v1"),
    ("cache-control", "no-cache"),
    ("x-accel-buffering", "no"),
];

/// The `result` of a denied call's `a:` line.
pub const DENIED_RESULT: &str = "tool call denied";

/// Encodes one response (one assistant message) as data stream lines (each
/// ending in `\n`): a [`ChunkEncoder`] writing the [`DataStreamFormat`].
pub type DataStreamEncoder = ChunkEncoder<DataStreamFormat>;

/// The data stream's form of the chunks: lines (see the module docs). A
/// continuation's known calls are not announced again, and tool input is not
/// streamed (v1 has no chunk for it).
#[derive(Debug, Default)]
pub struct DataStreamFormat {
    /// Calls of the continued message to announce again before their results
    /// (for clients that read every response as a new message): id to tool and
    /// input.
    announce: HashMap<String, (String, Value)>,
}

impl DataStreamEncoder {
    /// An encoder for a continuation read as a new message (assistant-stream's
    /// decoder, assistant-ui): the continued message's `calls` (id, tool, input)
    /// are announced again (`b:`/`c:`/`9:`) before their first result in this
    /// response, since such a client rejects a result for a call it has not seen
    /// in the response. AI SDK 4 merges a response into its last message and
    /// would show such calls twice: use [`continuing`](Self::continuing) for it.
    pub fn announcing(
        message_id: impl Into<String>,
        calls: impl IntoIterator<Item = (String, String, Value)>,
    ) -> Self {
        let announce = calls
            .into_iter()
            .map(|(id, tool, input)| (id, (tool, input)))
            .collect();
        Self::new(message_id).with_format(DataStreamFormat { announce })
    }
}

impl ChunkFormat for DataStreamFormat {
    type Piece = String;

    const HEADERS: &'static [(&'static str, &'static str)] = HEADERS;

    /// A data stream has no comments.
    const HEARTBEAT: Option<&'static [u8]> = None;

    /// The `d:` line is the last: no end marker.
    const TERMINATOR: Option<&'static [u8]> = None;

    fn continuing(machine: PartMachine, known: Vec<String>) -> PartMachine {
        machine
            .without_tool_input_streaming()
            .with_known_calls(known)
    }

    fn write(&self, chunk: &UiChunk<'_>, out: &mut Vec<String>) {
        write_lines(chunk, &self.announce, out);
    }

    fn frame(line: String) -> Bytes {
        Bytes::from(line)
    }
}

/// The lines of `chunk` (none for what the data stream has no line for: the
/// message's start and metadata, text and reasoning part boundaries, streamed
/// tool input). `announce` holds the continued calls announced again.
fn write_lines(
    chunk: &UiChunk<'_>,
    announce: &HashMap<String, (String, Value)>,
    out: &mut Vec<String>,
) {
    match chunk {
        UiChunk::StartStep { message_id } => out.push(line('f', &json!({"messageId": message_id}))),
        UiChunk::TextDelta { delta, .. } => out.push(line('0', &json!(delta))),
        UiChunk::ReasoningDelta { delta, .. } => out.push(line('g', &json!(delta))),
        UiChunk::ToolInputAvailable {
            tool_call_id,
            tool_name,
            input,
        } => call_lines(tool_call_id, tool_name, input, announce, out),
        UiChunk::ToolApprovalRequest {
            approval_id,
            tool_call_id,
        } => {
            let request = json!([{
                "type": "tool-approval-request",
                "approvalId": approval_id,
                "toolCallId": tool_call_id,
            }]);
            out.push(line('2', &request));
        }
        UiChunk::ToolOutputAvailable {
            tool_call_id,
            output,
        } => out.push(line(
            'a',
            &json!({"toolCallId": tool_call_id, "result": output}),
        )),
        UiChunk::ToolOutputDenied { tool_call_id } => {
            out.push(line('a', &error_result(tool_call_id, DENIED_RESULT)));
        }
        UiChunk::ToolOutputError {
            tool_call_id,
            error_text,
        } => out.push(line('a', &error_result(tool_call_id, error_text))),
        UiChunk::Error { error_text } => out.push(line('3', &json!(error_text))),
        UiChunk::FinishStep {
            finish_reason,
            usage,
        } => {
            let mut value = json!({"finishReason": finish_reason, "isContinued": false});
            if let Some(usage) = usage {
                value["usage"] = usage_json(*usage);
            }
            out.push(line('e', &value));
        }
        UiChunk::Finish {
            finish_reason,
            usage,
        } => {
            let mut value = json!({"finishReason": finish_reason});
            if let Some(usage) = usage {
                value["usage"] = usage_json(*usage);
            }
            out.push(line('d', &value));
        }
        UiChunk::Warning { message } => {
            let data = Value::Array(vec![crate::stream::warning_data(message)]);
            out.push(format!("2:{data}\n"));
        }
        _ => {}
    }
}

/// The lines announcing a call: `b:`, `c:` with its whole arguments as JSON
/// text, `9:`. A continued call announced again with no arguments of its own
/// takes its tool and input from `announce`; arguments that are not an object
/// are sent as `{}`.
fn call_lines(
    tool_call_id: &str,
    tool_name: &str,
    args: &Value,
    announce: &HashMap<String, (String, Value)>,
    out: &mut Vec<String>,
) {
    let (tool_name, args) = match announce.get(tool_call_id) {
        Some((tool, input)) if args.as_object().is_none_or(Map::is_empty) => (tool.as_str(), input),
        _ => (tool_name, args),
    };
    let args = if args.is_object() {
        args.clone()
    } else {
        json!({})
    };
    out.push(line(
        'b',
        &json!({"toolCallId": tool_call_id, "toolName": tool_name}),
    ));
    out.push(line(
        'c',
        &json!({"toolCallId": tool_call_id, "argsTextDelta": args.to_string()}),
    ));
    out.push(line(
        '9',
        &json!({"toolCallId": tool_call_id, "toolName": tool_name, "args": args}),
    ));
}

/// One line: `CODE:JSON\n`.
fn line(code: char, value: &Value) -> String {
    format!("{code}:{value}\n")
}

fn error_result(tool_call_id: &str, error_text: &str) -> Value {
    json!({"toolCallId": tool_call_id, "result": error_text, "isError": true})
}

fn usage_json(usage: TokenCounts) -> Value {
    json!({"promptTokens": usage.prompt_tokens, "completionTokens": usage.completion_tokens})
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;
    use crate::test_events::*;
    use ai_core::AiEvent;
    use ai_core::event::AiEventKind;

    fn encode(encoder: &mut DataStreamEncoder, events: &[AiEvent]) -> Vec<String> {
        events.iter().flat_map(|e| encoder.event(e, APR)).collect()
    }

    fn parse(line: &str) -> (&str, Value) {
        let body = line.strip_suffix('\n').unwrap();
        assert!(!body.contains('\n'));
        let (code, json) = body.split_once(':').unwrap();
        (code, serde_json::from_str(json).unwrap())
    }

    fn codes(lines: &[String]) -> String {
        lines
            .iter()
            .map(|l| parse(l).0)
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The structural rules, for one whole response: steps balanced, exactly one
    /// `d:` and it is last, results after their calls (or for known calls).
    fn check(lines: &[String], known: &[&str]) {
        let mut in_step = false;
        let mut calls: HashSet<String> = known.iter().map(|k| (*k).to_owned()).collect();
        for (i, l) in lines.iter().enumerate() {
            let (code, value) = parse(l);
            match code {
                "f" => {
                    assert!(!in_step, "{}", codes(lines));
                    in_step = true;
                }
                "e" => {
                    assert!(in_step, "{}", codes(lines));
                    in_step = false;
                }
                "0" | "g" | "b" | "c" | "9" | "a" | "2" => assert!(in_step, "{}", codes(lines)),
                "d" => assert_eq!(i, lines.len() - 1, "{}", codes(lines)),
                _ => {}
            }
            if code == "9" {
                calls.insert(value["toolCallId"].as_str().unwrap().to_owned());
            }
            if code == "a" {
                assert!(calls.contains(value["toolCallId"].as_str().unwrap()));
            }
        }
        assert_eq!(lines.iter().filter(|l| l.starts_with("d:")).count(), 1);
    }

    #[test]
    fn one_finish_and_nothing_after_it() {
        let mut encoder = DataStreamEncoder::new("m1");
        let mut lines = encode(&mut encoder, &[text("a"), usage_of(5), done()]);
        lines.extend(encode(&mut encoder, &[done(), text("late")]));
        lines.extend(encoder.finish());
        lines.extend(encoder.denied("c1"));
        lines.extend(encoder.tool_error("c1", "x"));
        check(&lines, &[]);
        let usage = json!({"promptTokens": 5, "completionTokens": 2});
        let parsed: Vec<(&str, Value)> = lines.iter().map(|l| parse(l)).collect();
        assert_eq!(
            parsed,
            [
                ("f", json!({"messageId": "m1"})),
                ("0", json!("a")),
                (
                    "e",
                    json!({"finishReason": "other", "isContinued": false, "usage": usage})
                ),
                ("d", json!({"finishReason": "other", "usage": usage})),
            ]
        );
    }

    #[test]
    fn finish_without_done_closes_the_step_once() {
        let mut encoder = DataStreamEncoder::new("m1");
        let mut lines = encode(&mut encoder, &[call("c1")]);
        lines.extend(encoder.finish());
        lines.extend(encoder.finish());
        check(&lines, &[]);
        assert_eq!(codes(&lines), "f b c 9 e d");
        assert_eq!(parse(&lines[4]).1["finishReason"], "tool-calls");
        assert_eq!(parse(&lines[5]).1, json!({"finishReason": "other"}));
        let lines = DataStreamEncoder::new("m2").finish();
        assert_eq!(codes(&lines), "d");
    }

    #[test]
    fn nested_events_are_skipped() {
        let mut encoder = DataStreamEncoder::new("m1");
        let nested: Vec<AiEvent> = [text("sub"), call("s1"), result("s1"), usage_of(9), done()]
            .into_iter()
            .map(|e| e.nested("c1", None))
            .collect();
        assert!(encode(&mut encoder, &nested).is_empty());
        let mut lines = encode(&mut encoder, &[call("c1")]);
        lines.extend(encode(&mut encoder, &nested));
        lines.extend(encode(&mut encoder, &[result("c1"), done()]));
        check(&lines, &[]);
        assert_eq!(codes(&lines), "f b c 9 a e d");
    }

    #[test]
    fn steps_carry_their_own_usage() {
        let mut encoder = DataStreamEncoder::new("m1");
        let mut lines = encode(&mut encoder, &two_steps_with_usage());
        lines.extend(encode(&mut encoder, &[done()]));
        check(&lines, &[]);
        assert_eq!(codes(&lines), "f 0 b c 9 a e f 0 e d");
        let usage = |i: usize| parse(&lines[i]).1["usage"]["promptTokens"].clone();
        assert_eq!(
            (usage(6), usage(9), usage(10)),
            (json!(5), json!(7), json!(12))
        );
    }

    #[test]
    fn a_continuation_does_not_announce_known_calls() {
        let mut encoder = DataStreamEncoder::continuing("m1", ["c1".to_owned()]);
        let mut lines = encoder.tool_error("c0", "refused");
        lines.extend(encode(
            &mut encoder,
            &[call("c1"), result("c1"), text("ok"), done()],
        ));
        check(&lines, &["c0", "c1"]);
        assert_eq!(codes(&lines), "f a a e f 0 e d");
        assert_eq!(
            parse(&lines[1]).1,
            json!({"toolCallId": "c0", "result": "refused", "isError": true})
        );
    }

    #[test]
    fn non_object_args_are_sent_as_an_empty_object() {
        let mut encoder = DataStreamEncoder::new("m1");
        let odd = ev(AiEventKind::ToolCallStart {
            tool_call_id: "c1".into(),
            tool_name: "core__x".into(),
            args: json!("not an object"),
        });
        let lines = encode(&mut encoder, &[odd]);
        assert_eq!(parse(&lines[2]).1["argsTextDelta"], "{}");
        assert_eq!(parse(&lines[3]).1["args"], json!({}));
    }

    #[test]
    fn an_error_ends_the_last_step_as_error() {
        let mut encoder = DataStreamEncoder::new("m1");
        let lines = encode(&mut encoder, &[text("a"), error("boom"), done()]);
        check(&lines, &[]);
        assert_eq!(codes(&lines), "f 0 3 e d");
        assert_eq!(parse(&lines[2]).1, json!("boom"));
        assert_eq!(parse(&lines[3]).1["finishReason"], "error");
        assert_eq!(parse(&lines[4]).1["finishReason"], "error");
    }
}
