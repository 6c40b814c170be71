//! The Messages API stream, decoded byte by byte into [`CompletionDelta`]s and
//! one assembled [`CompletionFinal`] (sans-IO: feed it the body as it arrives).
//!
//! Events are told apart by their JSON `type` (the `event:` line names the same,
//! and may be missing behind a gateway):
//!
//! | event | what it does |
//! |---|---|
//! | `message_start` | model and the prompt's usage (input, cache creation, cache read); a second one is ignored |
//! | `content_block_start` | opens block `index`: `text`, `thinking`, `redacted_thinking` (whole, with its `data`), `tool_use` (`id`, `name`; a [`CompletionDelta::ToolCallStart`]), `server_tool_use` and `*_tool_result` (tools the API runs itself: kept whole as [`AssistantBlock::Provider`]) |
//! | `content_block_delta` | `text_delta`, `thinking_delta`, `signature_delta` ([`CompletionDelta::ReasoningSignature`]), `input_json_delta` (its `partial_json`, often empty first; also a `server_tool_use`'s input), `citations_delta` (a citation of the text block, which is then kept whole with its citations) |
//! | `content_block_stop` | closes the block |
//! | `message_delta` | `stop_reason` and usage (cumulative: it replaces, never adds); `pause_turn` is [`FinishReason::Paused`] |
//! | `message_stop` | the turn is complete; later bytes are ignored |
//! | `ping` | nothing |
//! | `error` | a typed provider error (`overloaded_error`, `api_error`, ...), its message `message (type)` as an error body's; the usage read so far goes out first as a [`CompletionDelta::Usage`] |
//! | anything else | ignored (the API adds event types) |
//!
//! A stream that ends before `message_stop` is a [`CompletionError::TruncatedStream`]
//! holding what was assembled. The decoder alone assembles tool calls: a call
//! whose input never arrived has arguments `{}`.
//!
//! Gateway quirks handled: LiteLLM puts the first thinking text both in
//! `content_block_start` and in the first `thinking_delta` (it is taken once), and
//! turns redacted thinking into an empty text block (an empty text block adds
//! nothing).

use ai_core::completion::{
    AssembledToolCall, CompletionDelta, CompletionError, CompletionFinal, FinishReason,
};
use ai_core::event::UsageFact;
use ai_core::message::AssistantBlock;
use completion_http::{SimpleAssembler, SseDecoder, StreamError, TurnBuilder, settle_arguments};
use serde_json::Value;
use sse::RawSseEvent;

/// Why decoding stopped: the framing broke, an event is malformed, or the
/// provider reported an error in the stream (its `code` the error type:
/// `overloaded_error`, `api_error`, ...).
pub type AnthropicDecodeError = StreamError;

#[derive(Debug)]
enum Block {
    Text {
        text: String,
        /// The text's citations (`citations_delta`), in order.
        citations: Vec<Value>,
    },
    Thinking {
        text: String,
        signature: Option<String>,
        /// The text `content_block_start` carried, until the first delta shows
        /// whether it repeats it.
        echo: Option<String>,
    },
    Redacted(String),
    ToolUse {
        id: String,
        name: String,
        call: u32,
        input: String,
        closed: bool,
    },
    /// A block of a tool the API runs itself (`server_tool_use`, a
    /// `*_tool_result`), kept as it came; a `server_tool_use`'s input arrives
    /// in `input_json_delta`s.
    Server {
        block: Value,
        input: String,
    },
}

/// The name of this wire, on the blocks only it sends back.
pub(crate) const WIRE: &str = "anthropic";

/// The stop reasons of the Messages API that [`FinishReason`] says exactly (no
/// `raw_finish_reason` is kept for them).
const USUAL_STOP_REASONS: &[&str] = &[
    "end_turn",
    "stop_sequence",
    "tool_use",
    "max_tokens",
    "refusal",
];

/// The Messages API stream's state machine: blocks by index, usage, stop reason
/// ([`AnthropicDecoder`] feeds it the stream's events).
#[derive(Default)]
pub struct AnthropicAssembler {
    started: bool,
    stopped: bool,
    model: String,
    /// `message_start`'s message id.
    response_id: Option<String>,
    input_tokens: u64,
    output_tokens: u64,
    cache_creation: Option<u64>,
    cache_read: Option<u64>,
    /// `usage.cost` in US dollars, when a gateway adds it (LiteLLM's proxy
    /// with `include_cost_in_streaming_usage`), as millionths.
    cost_micros: Option<i64>,
    usage_seen: bool,
    stop_reason: Option<String>,
    blocks: Vec<Option<Block>>,
    calls: u32,
}

/// A streaming decoder of one Messages API response: feed it the body as it
/// arrives ([`SseDecoder::feed`]), then [`SseDecoder::finish`] gives the turn, the
/// feed's error, or [`CompletionError::TruncatedStream`] when `message_stop` never
/// came. After an error the session is over: later feeds return it again.
pub type AnthropicDecoder = SseDecoder<AnthropicAssembler>;

impl SimpleAssembler for AnthropicAssembler {
    type Error = AnthropicDecodeError;

    fn on_event(
        &mut self,
        event: RawSseEvent<'_>,
        out: &mut Vec<CompletionDelta>,
    ) -> Result<(), AnthropicDecodeError> {
        self.event(&event, out)
    }

    /// Whether `message_stop` arrived.
    fn is_done(&self) -> bool {
        self.stopped
    }

    fn into_turn(self) -> CompletionFinal {
        let stopped = self.stopped;
        self.turn(stopped)
    }
}

/// The fields of an event the hot path reads, borrowed from the data where they
/// hold no escapes.
#[derive(serde::Deserialize)]
struct Head<'a> {
    #[serde(rename = "type", borrow)]
    kind: std::borrow::Cow<'a, str>,
    #[serde(default)]
    index: Option<u64>,
    #[serde(default, borrow)]
    delta: Option<DeltaFields<'a>>,
}

/// A `content_block_delta`'s `delta` (and, harmlessly, a `message_delta`'s).
#[derive(serde::Deserialize)]
struct DeltaFields<'a> {
    #[serde(rename = "type", default, borrow)]
    kind: Option<std::borrow::Cow<'a, str>>,
    /// The delta's one piece of text: `text` (`text_delta`), `thinking`,
    /// `signature` or `partial_json` (`input_json_delta`); a delta with two of
    /// them is malformed. One field, so that every delta's fields stay small
    /// to move.
    #[serde(
        default,
        borrow,
        alias = "thinking",
        alias = "signature",
        alias = "partial_json"
    )]
    text: Option<std::borrow::Cow<'a, str>>,
    /// A `citations_delta`'s citation, as its JSON (parsed only then: a
    /// `Value` here made every delta's fields larger to move).
    #[serde(default, borrow)]
    citation: Option<&'a serde_json::value::RawValue>,
}

fn field<'v>(value: &'v Value, key: &str) -> &'v Value {
    value.get(key).unwrap_or(&Value::Null)
}

fn text_of(value: &Value, key: &str) -> String {
    field(value, key).as_str().unwrap_or_default().to_owned()
}

fn count(value: &Value, key: &str) -> Option<u64> {
    field(value, key).as_u64()
}

impl AnthropicAssembler {
    fn event(
        &mut self,
        event: &RawSseEvent<'_>,
        out: &mut Vec<CompletionDelta>,
    ) -> Result<(), AnthropicDecodeError> {
        if self.stopped || event.data.is_empty() {
            return Ok(());
        }
        let malformed_data = |e: serde_json::Error| AnthropicDecodeError::Malformed {
            event: sse::utf8(event.event).into_owned(),
            message: e.to_string(),
        };
        // Deltas, nearly every event of a stream, are read into borrowed fields;
        // the few other events into a `Value`.
        let head: Head<'_> = serde_json::from_slice(event.data).map_err(malformed_data)?;
        if head.kind == "content_block_delta" {
            return self.block_delta(head, out).map_err(|message| {
                AnthropicDecodeError::Malformed {
                    event: "content_block_delta".into(),
                    message,
                }
            });
        }
        let value: Value = serde_json::from_slice(event.data).map_err(malformed_data)?;
        let kind = field(&value, "type").as_str().unwrap_or_default();
        let malformed = |message: String| AnthropicDecodeError::Malformed {
            event: kind.to_owned(),
            message,
        };
        match kind {
            "message_start" => self.message_start(&value),
            "content_block_start" => self.block_start(&value, out).map_err(malformed)?,
            "content_block_stop" => self.block_stop(&value),
            "message_delta" => self.message_delta(&value),
            "message_stop" => self.stopped = true,
            "error" => return Err(self.stream_error(&value, out)),
            "ping" => {}
            other => tracing::debug!(event = %other, "unknown Messages API event; ignored"),
        }
        Ok(())
    }

    /// An `error` event as the call's error: the usage read so far goes out
    /// first (a failed call is billed too), and the message says the error's
    /// type as an error body's does (`Overloaded (overloaded_error)`).
    fn stream_error(&self, value: &Value, out: &mut Vec<CompletionDelta>) -> AnthropicDecodeError {
        if let Some(usage) = self.usage_fact() {
            out.push(CompletionDelta::Usage(usage));
        }
        let error = field(value, "error");
        let code = text_of(error, "type");
        let message = text_of(error, "message");
        let message = match (code.is_empty(), message.is_empty()) {
            (false, false) => format!("{message} ({code})"),
            (false, true) => code.clone(),
            _ => message,
        };
        AnthropicDecodeError::Provider { code, message }
    }

    /// The usage read so far, when the stream carried any.
    fn usage_fact(&self) -> Option<UsageFact> {
        self.usage_seen.then(|| {
            let prompt =
                self.input_tokens + self.cache_creation.unwrap_or(0) + self.cache_read.unwrap_or(0);
            UsageFact {
                model: self.model.clone(),
                prompt_tokens: prompt,
                completion_tokens: self.output_tokens,
                total_tokens: prompt + self.output_tokens,
                cached_tokens: self.cache_read,
                reasoning_tokens: None,
                cache_creation_tokens: self.cache_creation,
                cost_micros: self.cost_micros,
                ..UsageFact::default()
            }
        })
    }

    fn message_start(&mut self, value: &Value) {
        if self.started {
            tracing::debug!("a second message_start; ignored");
            return;
        }
        self.started = true;
        let message = field(value, "message");
        self.model = text_of(message, "model");
        self.response_id = Some(text_of(message, "id")).filter(|id| !id.is_empty());
        self.usage(field(message, "usage"));
    }

    fn usage(&mut self, usage: &Value) {
        if !usage.is_object() {
            return;
        }
        self.usage_seen = true;
        if let Some(n) = count(usage, "input_tokens") {
            self.input_tokens = n;
        }
        if let Some(n) = count(usage, "output_tokens") {
            self.output_tokens = n;
        }
        if let Some(n) = count(usage, "cache_creation_input_tokens") {
            self.cache_creation = Some(n);
        }
        if let Some(n) = count(usage, "cache_read_input_tokens") {
            self.cache_read = Some(n);
        }
        if let Some(cost) = field(usage, "cost").as_f64() {
            self.cost_micros = UsageFact::micros_from_usd(cost);
        }
    }

    fn index(value: &Value) -> Result<usize, String> {
        field(value, "index")
            .as_u64()
            .and_then(|i| usize::try_from(i).ok())
            .filter(|i| *i < 4096)
            .ok_or_else(|| "no valid block index".to_owned())
    }

    fn block_start(&mut self, value: &Value, out: &mut Vec<CompletionDelta>) -> Result<(), String> {
        let index = Self::index(value)?;
        let block = field(value, "content_block");
        let opened = match field(block, "type").as_str() {
            Some("text") => {
                let text = text_of(block, "text");
                if !text.is_empty() {
                    out.push(CompletionDelta::Text(text.clone()));
                }
                let citations = field(block, "citations").as_array().cloned();
                Block::Text {
                    text,
                    citations: citations.unwrap_or_default(),
                }
            }
            Some("thinking") => {
                let text = text_of(block, "thinking");
                if !text.is_empty() {
                    out.push(CompletionDelta::Reasoning(text.clone()));
                }
                let signature = Some(text_of(block, "signature")).filter(|s| !s.is_empty());
                Block::Thinking {
                    echo: Some(text.clone()).filter(|t| !t.is_empty()),
                    text,
                    signature,
                }
            }
            Some("redacted_thinking") => Block::Redacted(text_of(block, "data")),
            Some("tool_use") => {
                let id = text_of(block, "id");
                let name = text_of(block, "name");
                if id.is_empty() || name.is_empty() {
                    return Err("a tool_use block needs an id and a name".into());
                }
                let call = self.calls;
                self.calls += 1;
                out.push(CompletionDelta::ToolCallStart {
                    index: call,
                    id: id.clone(),
                    name: name.clone(),
                });
                // A non-empty `input` here (some gateways send it whole) is the input.
                let input = match field(block, "input") {
                    Value::Object(map) if !map.is_empty() => Value::Object(map.clone()).to_string(),
                    _ => String::new(),
                };
                if !input.is_empty() {
                    out.push(CompletionDelta::ToolCallArgs {
                        index: call,
                        fragment: input.clone(),
                    });
                }
                Block::ToolUse {
                    id,
                    name,
                    call,
                    input,
                    closed: false,
                }
            }
            Some(kind) if kind == "server_tool_use" || kind.ends_with("_tool_result") => {
                Block::Server {
                    block: block.clone(),
                    input: String::new(),
                }
            }
            other => {
                tracing::debug!(block = ?other, "unknown content block type; ignored");
                return Ok(());
            }
        };
        if self.blocks.len() <= index {
            self.blocks.resize_with(index + 1, || None);
        }
        self.blocks[index] = Some(opened);
        Ok(())
    }

    fn block_delta(
        &mut self,
        head: Head<'_>,
        out: &mut Vec<CompletionDelta>,
    ) -> Result<(), String> {
        let index = head
            .index
            .and_then(|i| usize::try_from(i).ok())
            .filter(|i| *i < 4096)
            .ok_or_else(|| "no valid block index".to_owned())?;
        let delta = head.delta.ok_or("no delta")?;
        let Some(Some(block)) = self.blocks.get_mut(index) else {
            // A block of a type this decoder does not know (the API adds them).
            tracing::debug!(index, "a delta for a block that was not opened; ignored");
            return Ok(());
        };
        // A piece with escapes was already unescaped into its own `String`: it is
        // moved, not copied.
        let piece_of = |piece: Option<std::borrow::Cow<'_, str>>| {
            piece.map(std::borrow::Cow::into_owned).unwrap_or_default()
        };
        match (delta.kind.as_deref(), block) {
            (Some("text_delta"), Block::Text { text, .. }) => {
                let piece = piece_of(delta.text);
                if !piece.is_empty() {
                    ai_core::text::append(text, &piece);
                    out.push(CompletionDelta::Text(piece));
                }
            }
            (Some("thinking_delta"), Block::Thinking { text, echo, .. }) => {
                let mut piece = piece_of(delta.text);
                if let Some(start) = echo.take()
                    && let Some(rest) = piece.strip_prefix(start.as_str())
                {
                    piece = rest.to_owned();
                }
                if !piece.is_empty() {
                    ai_core::text::append(text, &piece);
                    out.push(CompletionDelta::Reasoning(piece));
                }
            }
            (Some("signature_delta"), Block::Thinking { signature, .. }) => {
                let piece = piece_of(delta.text);
                signature.get_or_insert_with(String::new).push_str(&piece);
                out.push(CompletionDelta::ReasoningSignature(piece));
            }
            (Some("input_json_delta"), Block::ToolUse { call, input, .. }) => {
                let piece = piece_of(delta.text);
                if !piece.is_empty() {
                    input.push_str(&piece);
                    out.push(CompletionDelta::ToolCallArgs {
                        index: *call,
                        fragment: piece,
                    });
                }
            }
            (Some("input_json_delta"), Block::Server { input, .. }) => {
                input.push_str(&piece_of(delta.text));
            }
            (Some("citations_delta"), Block::Text { citations, .. }) => {
                if let Some(citation) = delta.citation {
                    let citation = serde_json::from_str(citation.get())
                        .map_err(|e| format!("a citation that is not JSON: {e}"))?;
                    citations.push(citation);
                }
            }
            (kind, _) => {
                tracing::debug!(delta = ?kind, index, "a delta that does not fit its block; ignored");
            }
        }
        Ok(())
    }

    fn block_stop(&mut self, value: &Value) {
        if let Ok(index) = Self::index(value)
            && let Some(Some(Block::ToolUse { closed, .. })) = self.blocks.get_mut(index)
        {
            *closed = true;
        }
    }

    fn message_delta(&mut self, value: &Value) {
        if let Some(reason) = field(field(value, "delta"), "stop_reason").as_str() {
            self.stop_reason = Some(reason.to_owned());
        }
        self.usage(field(value, "usage"));
    }

    fn finish_reason(&self) -> FinishReason {
        match self.stop_reason.as_deref() {
            Some("end_turn" | "stop_sequence") => FinishReason::Stop,
            Some("tool_use") => FinishReason::ToolCalls,
            Some("max_tokens" | "model_context_window_exceeded") => FinishReason::Length,
            Some("refusal") => FinishReason::ContentFilter,
            Some("pause_turn") => FinishReason::Paused,
            Some(other) => FinishReason::Other(other.to_owned()),
            None => FinishReason::Unknown,
        }
    }

    /// The stop reason as the API gave it, when [`FinishReason`] does not say
    /// it exactly.
    fn raw_finish_reason(&self) -> Option<String> {
        self.stop_reason
            .clone()
            .filter(|reason| !USUAL_STOP_REASONS.contains(&reason.as_str()))
    }

    /// The assembled turn; `complete` when `message_stop` arrived (a call still
    /// open in a stream that was cut short is truncated, not invalid).
    fn turn(self, complete: bool) -> CompletionFinal {
        let finish_reason = self.finish_reason();
        let raw_finish_reason = self.raw_finish_reason();
        let usage = self.usage_fact();
        let response_id = self.response_id;
        let mut turn = TurnBuilder::new();
        for block in self.blocks.into_iter().flatten() {
            match block {
                Block::Text {
                    text: piece,
                    citations,
                } => {
                    if !citations.is_empty() || !piece.is_empty() {
                        turn.text_block(text_block(piece, citations));
                    }
                }
                Block::Server { block, input } => turn.block(server_block(block, &input)),
                Block::Thinking {
                    text: thought,
                    signature,
                    ..
                } => turn.reasoning(thought, signature, None),
                Block::Redacted(data) => turn.block(AssistantBlock::RedactedReasoning { data }),
                Block::ToolUse {
                    id,
                    name,
                    call,
                    input,
                    closed,
                } => {
                    let cut = finish_reason == FinishReason::Length || !complete;
                    let (arguments, outcome) = settle_arguments(input, !closed && cut);
                    turn.tool_call(AssembledToolCall {
                        index: call,
                        id,
                        name,
                        arguments,
                        outcome,
                        raw: None,
                    });
                }
            }
        }
        CompletionFinal {
            response_id,
            ..turn.finish(finish_reason, raw_finish_reason, usage)
        }
    }
}

/// A text block of the turn: plain, or, with citations, kept whole as the
/// API's own block (its text still the turn's text).
fn text_block(text: String, citations: Vec<Value>) -> AssistantBlock {
    if citations.is_empty() {
        return AssistantBlock::Text { text };
    }
    AssistantBlock::Provider {
        wire: WIRE.into(),
        block: serde_json::json!({"type": "text", "text": text, "citations": citations}),
        text: Some(text),
    }
}

/// A block of a tool the API ran, as it came; the input streamed in pieces
/// replaces the start's `{}`.
fn server_block(mut block: Value, input: &str) -> AssistantBlock {
    if let Ok(whole) = serde_json::from_str::<Value>(input)
        && let Some(fields) = block.as_object_mut()
    {
        fields.insert("input".into(), whole);
    }
    AssistantBlock::Provider {
        wire: WIRE.into(),
        block,
        text: None,
    }
}

/// Decodes a whole streamed body at once (tests, fixtures).
pub fn decode_stream(
    body: &[u8],
) -> Result<(Vec<CompletionDelta>, CompletionFinal), CompletionError> {
    let mut decoder = AnthropicDecoder::new();
    let mut deltas = Vec::new();
    decoder.feed(body, &mut deltas)?;
    let turn = decoder.finish()?;
    Ok((deltas, turn))
}

/// Decodes a whole (non-streamed) Messages API response, `{type: "message",
/// content: [...], stop_reason, usage}`, into the turn it holds, appending the deltas
/// a stream of it would have produced to `out`. An `{type: "error"}` body is a typed
/// provider error.
pub fn decode_message(
    body: &[u8],
    out: &mut Vec<CompletionDelta>,
) -> Result<CompletionFinal, CompletionError> {
    let protocol = |message: String| CompletionError::Protocol { message };
    let message: Value = serde_json::from_slice(body)
        .map_err(|e| protocol(format!("the response is not JSON: {e}")))?;
    if field(&message, "type").as_str() == Some("error") {
        let error = field(&message, "error");
        return Err(CompletionError::Provider {
            code: Some(text_of(error, "type")),
            message: text_of(error, "message"),
        });
    }
    let content = field(&message, "content")
        .as_array()
        .ok_or_else(|| protocol("the response has no content list".into()))?;
    let mut assembly = AnthropicAssembler::default();
    assembly.message_start(&serde_json::json!({ "message": &message }));
    for (index, block) in content.iter().enumerate() {
        let start = serde_json::json!({ "index": index, "content_block": block });
        assembly.block_start(&start, out).map_err(protocol)?;
        assembly.block_stop(&start);
    }
    assembly.message_delta(&serde_json::json!({
        "delta": { "stop_reason": field(&message, "stop_reason") },
        "usage": field(&message, "usage"),
    }));
    assembly.stopped = true;
    Ok(assembly.turn(true))
}

/// The `{type: "error", error: {type, message}}` body of a failed request: its
/// error type and message.
pub fn parse_error_body(body: &[u8]) -> Option<(String, String)> {
    let value: Value = serde_json::from_slice(body).ok()?;
    let error = value.get("error")?;
    Some((text_of(error, "type"), text_of(error, "message")))
}
