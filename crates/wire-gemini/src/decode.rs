//! Gemini's stream (`alt=sse`), decoded byte by byte into [`CompletionDelta`]s
//! and one assembled [`CompletionFinal`] (sans-IO: feed it the body as it
//! arrives).
//!
//! Every `data:` is a whole `GenerateContentResponse`; the first candidate is
//! read (one is asked for):
//!
//! | field | what it does |
//! |---|---|
//! | `content.parts[].text` | answer text ([`CompletionDelta::Text`]); with `thought: true`, reasoning ([`CompletionDelta::Reasoning`]) |
//! | `content.parts[].functionCall` | a whole call (`name`, `args`, `id` when the model gives one, else one is minted from the response id): [`CompletionDelta::ToolCallStart`], then its arguments in one [`CompletionDelta::ToolCallArgs`] |
//! | `content.parts[].thoughtSignature` | kept exactly as received: on a call, in its `raw` (`{"google": {"thought_signature": ..}}`); on a text or thought part, as an [`AssistantBlock::WireFields`] after that part's block, so the encoder puts it back on the same part |
//! | `finishReason` | the turn is complete; normalised (below) |
//! | `usageMetadata` | usage, cumulative (each one replaces the last) |
//! | `promptFeedback.blockReason` | the prompt was blocked: the turn ends as `content_filter` |
//! | `modelVersion`, `responseId` | the usage's model; the minted call ids |
//! | `error` | a typed provider error, its code the error's `status` (`RESOURCE_EXHAUSTED`, `UNAVAILABLE`, ...); the usage seen before it is reported first |
//!
//! Finish reasons: `STOP` is `stop` (`tool_calls` when the turn made calls),
//! `MAX_TOKENS` `length`, `SAFETY`, `RECITATION`, `BLOCKLIST`,
//! `PROHIBITED_CONTENT`, `SPII` and the image ones `content_filter`; any other
//! (`MALFORMED_FUNCTION_CALL`, `OTHER`, ...) is [`FinishReason::Other`] with the
//! raw reason verbatim. Every reason but `STOP` and `MAX_TOKENS` is also kept
//! verbatim in [`CompletionFinal::raw_finish_reason`] (a blocked prompt: its
//! `blockReason`).
//!
//! The stream has no end marker: the body ends it. One that ends before a
//! finish reason is a [`CompletionError::TruncatedStream`] holding what was
//! assembled. `functionCall.partialArgs`/`willContinue` (streamed arguments) are
//! documented as Vertex AI only, not sent by the Gemini API: a call is read
//! for its whole `args`. Parts of other kinds (`inlineData`, `executableCode`,
//! ...) are ignored.

use std::borrow::Cow;

use ai_core::completion::{
    AssembledToolCall, CompletionDelta, CompletionError, CompletionFinal, FinishReason,
};
use ai_core::event::UsageFact;
use ai_core::message::AssistantBlock;
use completion_http::{Assembler, SseDecoder, StreamError, TurnBuilder, settle_arguments};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use sse::RawSseEvent;

use crate::WIRE;
use crate::encode::call_raw;

/// Why decoding stopped: the framing broke, a chunk is malformed, or the
/// provider reported an error in the stream (its `code` the error's `status`).
pub type GeminiDecodeError = StreamError;

/// A streaming decoder of one Gemini response: feed it the body as it arrives
/// ([`SseDecoder::feed`]); [`SseDecoder::finish`] gives the turn, the feed's
/// error, or [`CompletionError::TruncatedStream`] when no finish reason came.
pub type GeminiDecoder = SseDecoder<GeminiAssembler>;

/// A chunk: one `GenerateContentResponse`, text borrowed where it holds no
/// escapes.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Chunk<'a> {
    #[serde(default, borrow)]
    candidates: Vec<Candidate<'a>>,
    #[serde(default)]
    usage_metadata: Option<UsageMetadata>,
    #[serde(default, borrow)]
    model_version: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    response_id: Option<Cow<'a, str>>,
    #[serde(default)]
    prompt_feedback: Option<PromptFeedback>,
    #[serde(default)]
    error: Option<ErrorFields>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate<'a> {
    #[serde(default, borrow)]
    content: Option<Content<'a>>,
    #[serde(default, borrow)]
    finish_reason: Option<Cow<'a, str>>,
    #[serde(default)]
    index: Option<u64>,
}

#[derive(Deserialize)]
struct Content<'a> {
    #[serde(default, borrow)]
    parts: Vec<PartIn<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PartIn<'a> {
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default)]
    thought: bool,
    #[serde(default, borrow)]
    thought_signature: Option<Cow<'a, str>>,
    #[serde(default)]
    function_call: Option<FunctionCallIn>,
}

#[derive(Deserialize)]
struct FunctionCallIn {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    args: Option<Value>,
    #[serde(default)]
    id: Option<String>,
}

#[derive(Deserialize, Debug, Clone, Copy, Default)]
#[serde(rename_all = "camelCase")]
struct UsageMetadata {
    #[serde(default)]
    prompt_token_count: u64,
    #[serde(default)]
    candidates_token_count: u64,
    #[serde(default)]
    thoughts_token_count: Option<u64>,
    #[serde(default)]
    cached_content_token_count: Option<u64>,
    #[serde(default)]
    tool_use_prompt_token_count: u64,
    #[serde(default)]
    total_token_count: Option<u64>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromptFeedback {
    #[serde(default)]
    block_reason: Option<String>,
}

/// `{"error": {"code", "message", "status"}}`.
#[derive(Deserialize, Default)]
struct ErrorFields {
    #[serde(default)]
    code: Option<Value>,
    #[serde(default)]
    message: String,
    #[serde(default)]
    status: Option<String>,
}

impl ErrorFields {
    /// The error's code: its `status`, else its numeric `code`.
    fn code(&self) -> String {
        match (&self.status, &self.code) {
            (Some(status), _) if !status.is_empty() => status.clone(),
            (_, Some(Value::Number(code))) => code.to_string(),
            (_, Some(Value::String(code))) => code.clone(),
            _ => String::new(),
        }
    }
}

/// One part of the turn as assembled.
#[derive(Debug)]
enum Part {
    /// Text or a thought, with the fields Gemini put on it (its signature).
    Text {
        text: String,
        thought: bool,
        fields: Option<Map<String, Value>>,
    },
    /// The call at this index of `calls`.
    Call(usize),
}

#[derive(Debug)]
struct Call {
    id: String,
    name: String,
    arguments: String,
    raw: Option<Value>,
}

/// Gemini's stream state machine: parts in order, calls, usage, finish reason
/// ([`GeminiDecoder`] feeds it the stream's events). Its options are the
/// requested model, the usage's model when the stream names none.
#[derive(Debug, Default)]
pub struct GeminiAssembler {
    model: String,
    response_id: Option<String>,
    parts: Vec<Part>,
    calls: Vec<Call>,
    finish: Option<String>,
    blocked: Option<String>,
    usage: Option<UsageMetadata>,
}

impl Assembler for GeminiAssembler {
    type Options = String;
    type Error = GeminiDecodeError;
    type Sink<'s> = Vec<CompletionDelta>;

    const TELLS_NON_STREAM_BODIES: bool = true;

    fn start(model: String) -> Self {
        Self {
            model,
            ..Self::default()
        }
    }

    fn on_event(
        &mut self,
        event: RawSseEvent<'_>,
        out: &mut Vec<CompletionDelta>,
    ) -> Result<(), GeminiDecodeError> {
        if event.data.is_empty() || event.data == b"[DONE]" {
            return Ok(());
        }
        let chunk: Chunk<'_> =
            serde_json::from_slice(event.data).map_err(|e| GeminiDecodeError::Malformed {
                event: "GenerateContentResponse".into(),
                message: e.to_string(),
            })?;
        self.take(chunk, out)
    }

    /// Never: the body's end ends the stream (there is no end marker).
    fn is_done(&self) -> bool {
        false
    }

    fn into_final(
        self,
        _out: &mut Vec<CompletionDelta>,
    ) -> Result<CompletionFinal, CompletionError> {
        if self.finish.is_none() && self.blocked.is_none() {
            return Err(CompletionError::TruncatedStream {
                partial: Box::new(self.turn(false)),
            });
        }
        Ok(self.turn(true))
    }

    fn json_body_error(body: &[u8]) -> CompletionError {
        match parse_error_body(body) {
            Some((code, message)) => CompletionError::Provider {
                code: Some(code),
                message,
            },
            None => CompletionError::Protocol {
                message: "the response body is JSON, not a server-sent event stream".into(),
            },
        }
    }
}

impl GeminiAssembler {
    /// Takes one chunk.
    fn take(
        &mut self,
        chunk: Chunk<'_>,
        out: &mut Vec<CompletionDelta>,
    ) -> Result<(), GeminiDecodeError> {
        if let Some(usage) = chunk.usage_metadata {
            self.usage = Some(usage);
        }
        if let Some(error) = chunk.error {
            // A failed call is billed for what it used: the usage goes first.
            if let Some(usage) = self.usage_fact() {
                out.push(CompletionDelta::Usage(usage));
            }
            return Err(GeminiDecodeError::Provider {
                code: error.code(),
                message: error.message,
            });
        }
        if let Some(version) = chunk.model_version.filter(|v| !v.is_empty())
            && self.model != *version
        {
            self.model = version.into_owned();
        }
        if self.response_id.is_none() {
            self.response_id = chunk.response_id.map(Cow::into_owned);
        }
        if let Some(reason) = chunk.prompt_feedback.and_then(|f| f.block_reason) {
            self.blocked = Some(reason);
        }
        let candidate = chunk
            .candidates
            .into_iter()
            .find(|c| c.index.unwrap_or(0) == 0);
        if let Some(candidate) = candidate {
            for part in candidate.content.into_iter().flat_map(|c| c.parts) {
                self.part(part, out);
            }
            if let Some(reason) = candidate.finish_reason {
                self.finish = Some(reason.into_owned());
            }
        }
        Ok(())
    }

    fn part(&mut self, part: PartIn<'_>, out: &mut Vec<CompletionDelta>) {
        let signature = part.thought_signature.map(Cow::into_owned);
        if let Some(call) = part.function_call {
            self.call(call, signature, out);
            return;
        }
        let Some(text) = part.text else {
            tracing::debug!("a part that is neither text nor a function call; ignored");
            return;
        };
        if !text.is_empty() {
            let delta = text.to_string();
            out.push(if part.thought {
                CompletionDelta::Reasoning(delta)
            } else {
                CompletionDelta::Text(delta)
            });
        }
        // Pieces of one part run on until a signature closes it.
        match self.parts.last_mut() {
            Some(Part::Text {
                text: last,
                thought,
                fields: None,
            }) if *thought == part.thought => ai_core::text::append(last, &text),
            _ => self.parts.push(Part::Text {
                text: text.into_owned(),
                thought: part.thought,
                fields: None,
            }),
        }
        if let (Some(signature), Some(Part::Text { fields, .. })) =
            (signature, self.parts.last_mut())
        {
            let mut map = Map::new();
            map.insert("thoughtSignature".into(), Value::String(signature));
            *fields = Some(map);
        }
    }

    fn call(
        &mut self,
        call: FunctionCallIn,
        signature: Option<String>,
        out: &mut Vec<CompletionDelta>,
    ) {
        let index = self.calls.len();
        let provider_id = call.id.filter(|id| !id.is_empty());
        let id = provider_id
            .clone()
            .unwrap_or_else(|| match &self.response_id {
                Some(response) => format!("call_{response}_{index}"),
                None => format!("call_{index}"),
            });
        let name = call.name.unwrap_or_default();
        let arguments = match call.args {
            Some(Value::Null) | None => "{}".to_owned(),
            Some(args) => args.to_string(),
        };
        let wire_index = u32::try_from(index).unwrap_or(u32::MAX);
        out.push(CompletionDelta::ToolCallStart {
            index: wire_index,
            id: id.clone(),
            name: name.clone(),
        });
        out.push(CompletionDelta::ToolCallArgs {
            index: wire_index,
            fragment: arguments.clone(),
        });
        self.calls.push(Call {
            raw: call_raw(signature.as_deref(), provider_id.as_deref()),
            id,
            name,
            arguments,
        });
        self.parts.push(Part::Call(index));
    }

    fn usage_fact(&self) -> Option<UsageFact> {
        let usage = self.usage?;
        let prompt = usage.prompt_token_count + usage.tool_use_prompt_token_count;
        let completion = usage.candidates_token_count + usage.thoughts_token_count.unwrap_or(0);
        Some(UsageFact {
            model: self.model.clone(),
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: usage.total_token_count.unwrap_or(prompt + completion),
            cached_tokens: usage.cached_content_token_count,
            reasoning_tokens: usage.thoughts_token_count,
            ..UsageFact::default()
        })
    }

    fn finish_reason(&self) -> FinishReason {
        if self.blocked.is_some() && self.finish.is_none() {
            return FinishReason::ContentFilter;
        }
        match self.finish.as_deref() {
            Some("STOP") if !self.calls.is_empty() => FinishReason::ToolCalls,
            Some("STOP") => FinishReason::Stop,
            Some("MAX_TOKENS") => FinishReason::Length,
            Some(
                "SAFETY"
                | "RECITATION"
                | "BLOCKLIST"
                | "PROHIBITED_CONTENT"
                | "SPII"
                | "IMAGE_SAFETY"
                | "IMAGE_PROHIBITED_CONTENT"
                | "IMAGE_RECITATION",
            ) => FinishReason::ContentFilter,
            Some(other) => FinishReason::Other(other.to_owned()),
            None => FinishReason::Unknown,
        }
    }

    /// The reason as the API gave it, unless it is one of the usual two
    /// (`STOP`, `MAX_TOKENS`); a blocked prompt's `blockReason`.
    fn raw_finish_reason(&self) -> Option<String> {
        match &self.finish {
            Some(reason) if matches!(reason.as_str(), "STOP" | "MAX_TOKENS") => None,
            Some(reason) => Some(reason.clone()),
            None => self.blocked.clone(),
        }
    }

    /// The assembled turn; `complete` when a finish reason arrived.
    fn turn(self, complete: bool) -> CompletionFinal {
        let finish_reason = self.finish_reason();
        let raw_finish_reason = self.raw_finish_reason();
        let usage = self.usage_fact();
        let mut calls: Vec<Option<Call>> = self.calls.into_iter().map(Some).collect();
        let mut turn = TurnBuilder::new();
        for part in self.parts {
            match part {
                Part::Text {
                    text: piece,
                    thought,
                    fields,
                } => {
                    if piece.is_empty() && fields.is_none() {
                        continue;
                    }
                    if thought {
                        turn.reasoning(piece, None, None);
                    } else {
                        turn.text(piece);
                    }
                    if let Some(fields) = fields {
                        turn.block(AssistantBlock::WireFields {
                            wire: WIRE.into(),
                            fields: Value::Object(fields),
                        });
                    }
                }
                Part::Call(index) => {
                    let Some(call) = calls.get_mut(index).and_then(Option::take) else {
                        continue;
                    };
                    let (arguments, outcome) = settle_arguments(call.arguments, false);
                    turn.tool_call(AssembledToolCall {
                        index: u32::try_from(turn.tool_calls().len()).unwrap_or(u32::MAX),
                        id: call.id,
                        name: call.name,
                        arguments,
                        outcome,
                        raw: call.raw,
                    });
                }
            }
        }
        if !complete {
            tracing::debug!("gemini stream ended before a finish reason");
        }
        CompletionFinal {
            response_id: self.response_id,
            ..turn.finish(finish_reason, raw_finish_reason, usage)
        }
    }
}

/// Decodes a whole streamed body at once (tests, fixtures); `model` is the
/// requested model.
pub fn decode_stream(
    body: &[u8],
    model: &str,
) -> Result<(Vec<CompletionDelta>, CompletionFinal), CompletionError> {
    GeminiDecoder::with_options(model.to_owned()).decode_whole(body)
}

/// Decodes a whole (non-streamed) `generateContent` response into the turn it
/// holds, appending the deltas a stream of it would have produced to `out`. A
/// JSON array of responses (`streamGenerateContent` without `alt=sse`) is read
/// as the stream it is; an `{error}` body is a typed provider error.
pub fn decode_response(
    body: &[u8],
    model: &str,
    out: &mut Vec<CompletionDelta>,
) -> Result<CompletionFinal, CompletionError> {
    let protocol = |e: serde_json::Error| CompletionError::Protocol {
        message: format!("the response is not a GenerateContentResponse: {e}"),
    };
    let trimmed = body.trim_ascii_start();
    let chunks: Vec<Chunk<'_>> = if trimmed.starts_with(b"[") {
        serde_json::from_slice(trimmed).map_err(protocol)?
    } else {
        vec![serde_json::from_slice(trimmed).map_err(protocol)?]
    };
    let mut assembler = GeminiAssembler::start(model.to_owned());
    for chunk in chunks {
        assembler.take(chunk, out).map_err(CompletionError::from)?;
    }
    assembler.into_final(out)
}

/// The `{"error": {"code", "message", "status"}}` body of a failed request (or
/// a one-element array of it, as the streaming endpoint answers without
/// `alt=sse`): its status (else its code) and message.
pub fn parse_error_body(body: &[u8]) -> Option<(String, String)> {
    let value: Value = serde_json::from_slice(body).ok()?;
    let value = match value {
        Value::Array(mut items) if !items.is_empty() => items.swap_remove(0),
        other => other,
    };
    let error: ErrorFields = serde_json::from_value(value.get("error")?.clone()).ok()?;
    Some((error.code(), error.message))
}

/// The fields Gemini put on a part, for a test or a hand-built turn:
/// `{"thoughtSignature": signature}`.
pub fn signature_fields(signature: &str) -> Value {
    json!({ "thoughtSignature": signature })
}
