//! The Responses API stream, decoded byte by byte into [`CompletionDelta`]s and
//! one assembled [`CompletionFinal`] (sans-IO: feed it the body as it arrives).
//!
//! Events are told apart by their JSON `type`, never by the `event:` line
//! (LiteLLM sends only `data:` lines, and ends with `data: [DONE]`, which is
//! ignored):
//!
//! | event | what it does |
//! |---|---|
//! | `response.created`, `response.in_progress` | the model |
//! | `response.output_item.added` | opens item `output_index`: `message`, `function_call` (`call_id`, `name`; a [`CompletionDelta::ToolCallStart`]), `reasoning` (its `encrypted_content`, until `.done` says otherwise) |
//! | `response.output_text.delta` | answer text |
//! | `response.refusal.delta` | refusal text |
//! | `response.function_call_arguments.delta` | a call's argument text |
//! | `response.function_call_arguments.done` | the whole argument text (it wins over the deltas) |
//! | `response.reasoning_summary_part.added` | a new summary part (parts are joined by a blank line) |
//! | `response.reasoning_summary_text.delta`, `response.reasoning_text.delta` | reasoning text |
//! | `response.output_item.done` | the item as it ended: a call's arguments, a reasoning item's `encrypted_content` (which differs from the one in `.added`: this one is kept) |
//! | `response.completed` | usage; the output items fill what the events did not carry (LiteLLM sends `encrypted_content` only here) |
//! | `response.incomplete` | usage; `max_output_tokens` is a length stop, `content_filter` a filtered one |
//! | `response.failed`, `error` | a typed provider error |
//! | anything else | ignored (the API adds event types) |
//!
//! Deltas name their item by `output_index` and `item_id`: parallel calls
//! interleave (added 0, delta 0, added 1, delta 1, done 0, done 1), and each
//! delta goes to its own item. A completed response with function calls
//! finishes as tool calls (the API has no finish reason). A stream that ends
//! before `response.completed` or `response.incomplete` is a
//! [`CompletionError::TruncatedStream`] holding what was assembled.

use ai_core::completion::{
    AssembledToolCall, CompletionDelta, CompletionError, CompletionFinal, FinishReason,
};
use ai_core::event::UsageFact;
use ai_core::message::AssistantBlock;
use completion_http::{SimpleAssembler, SseDecoder, StreamError, TurnBuilder, settle_arguments};
use serde_json::Value;
use sse::RawSseEvent;

/// Why decoding stopped: the framing broke, an event is malformed, or the
/// provider reported an error in the stream (`error`, or `response.failed`; its
/// `code`: `server_error`, `rate_limit_exceeded`, ...).
pub type ResponsesDecodeError = StreamError;

/// One output item of the response.
#[derive(Debug)]
enum Item {
    Message {
        item_id: String,
        text: String,
        refusal: String,
    },
    Call {
        item_id: String,
        call_id: String,
        name: String,
        call: u32,
        arguments: String,
        done: bool,
    },
    Reasoning {
        item_id: String,
        summary: String,
        /// Summary parts opened so far.
        parts: u32,
        encrypted: Option<String>,
    },
}

/// How the response ended.
#[derive(Debug, Clone, PartialEq)]
enum End {
    Completed,
    Incomplete(String),
}

/// The Responses API stream's state machine: output items by position, usage,
/// how the response ended ([`ResponsesDecoder`] feeds it the stream's events).
#[derive(Default)]
pub struct ResponsesAssembler {
    model: String,
    /// The response's `id`, from the first event that names it.
    response_id: Option<String>,
    items: Vec<Option<Item>>,
    calls: u32,
    usage: Option<UsageFact>,
    end: Option<End>,
}

/// A streaming decoder of one Responses API response: feed it the body as it
/// arrives ([`SseDecoder::feed`]), then [`SseDecoder::finish_into`] gives the
/// turn, the feed's error, or [`CompletionError::TruncatedStream`] when the
/// response never ended. After an error the session is over: later feeds
/// return it again.
pub type ResponsesDecoder = SseDecoder<ResponsesAssembler>;

impl SimpleAssembler for ResponsesAssembler {
    type Error = ResponsesDecodeError;

    fn on_event(
        &mut self,
        event: RawSseEvent<'_>,
        out: &mut Vec<CompletionDelta>,
    ) -> Result<(), ResponsesDecodeError> {
        self.event(&event, out)
    }

    /// Whether the response ended (`response.completed` or `.incomplete`).
    fn is_done(&self) -> bool {
        self.end.is_some()
    }

    fn into_turn(self) -> CompletionFinal {
        self.turn()
    }
}

/// The fields of an event the hot path reads, borrowed from the data where
/// they hold no escapes.
#[derive(serde::Deserialize)]
struct Head<'a> {
    #[serde(rename = "type", borrow)]
    kind: std::borrow::Cow<'a, str>,
    #[serde(default)]
    output_index: Option<u64>,
    #[serde(default, borrow)]
    item_id: Option<std::borrow::Cow<'a, str>>,
    #[serde(default)]
    summary_index: Option<u64>,
    #[serde(default, borrow)]
    delta: Option<std::borrow::Cow<'a, str>>,
}

/// The delta events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DeltaKind {
    Text,
    Refusal,
    Arguments,
    Reasoning,
}

impl DeltaKind {
    fn of(kind: &str) -> Option<Self> {
        Some(match kind {
            "response.output_text.delta" => Self::Text,
            "response.refusal.delta" => Self::Refusal,
            "response.function_call_arguments.delta" => Self::Arguments,
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                Self::Reasoning
            }
            _ => return None,
        })
    }
}

fn field<'v>(value: &'v Value, key: &str) -> &'v Value {
    value.get(key).unwrap_or(&Value::Null)
}

fn text_of(value: &Value, key: &str) -> String {
    field(value, key).as_str().unwrap_or_default().to_owned()
}

/// The item index an event names.
fn output_index(value: &Value) -> Option<usize> {
    field(value, "output_index")
        .as_u64()
        .and_then(|i| usize::try_from(i).ok())
        .filter(|i| *i < 4096)
}

impl ResponsesAssembler {
    fn event(
        &mut self,
        event: &RawSseEvent<'_>,
        out: &mut Vec<CompletionDelta>,
    ) -> Result<(), ResponsesDecodeError> {
        let data = event.data;
        if self.end.is_some() || data.is_empty() || data == b"[DONE]" {
            return Ok(());
        }
        let malformed_data = |e: serde_json::Error| ResponsesDecodeError::Malformed {
            event: sse::utf8(event.event).into_owned(),
            message: e.to_string(),
        };
        // Deltas, nearly every event of a stream, are read into borrowed
        // fields; the few other events into a `Value`.
        // (An event whose fields have other shapes than a delta's takes the
        // `Value` path, which reports what is wrong with it.)
        if let Ok(head) = serde_json::from_slice::<Head<'_>>(data)
            && let Some(kind) = DeltaKind::of(&head.kind)
        {
            self.delta(kind, head, out);
            return Ok(());
        }
        let value: Value = serde_json::from_slice(data).map_err(malformed_data)?;
        let kind = field(&value, "type").as_str().unwrap_or_default();
        let malformed = |message: &str| ResponsesDecodeError::Malformed {
            event: kind.to_owned(),
            message: message.to_owned(),
        };
        match kind {
            "response.created" | "response.in_progress" => self.response(field(&value, "response")),
            "response.output_item.added" => {
                self.item_added(&value, out).map_err(|m| malformed(&m))?
            }
            "response.function_call_arguments.done" => self.arguments_done(&value, out),
            "response.reasoning_summary_part.added" => self.summary_part(&value, out),
            "response.output_item.done" => self.item_done(&value, out),
            "response.completed" => {
                self.response(field(&value, "response"));
                self.end = Some(End::Completed);
            }
            "response.incomplete" => {
                let response = field(&value, "response");
                self.response(response);
                let reason = text_of(field(response, "incomplete_details"), "reason");
                self.end = Some(End::Incomplete(reason));
            }
            "response.failed" => {
                let error = field(field(&value, "response"), "error");
                return Err(ResponsesDecodeError::Provider {
                    code: Some(text_of(error, "code"))
                        .filter(|c| !c.is_empty())
                        .unwrap_or_else(|| "failed".into()),
                    message: text_of(error, "message"),
                });
            }
            "error" => {
                // The error's fields are at the top level (OpenAI) or under
                // `error` (some gateways).
                let error = value
                    .get("error")
                    .filter(|e| e.is_object())
                    .unwrap_or(&value);
                return Err(ResponsesDecodeError::Provider {
                    code: Some(text_of(error, "code"))
                        .filter(|c| !c.is_empty())
                        .unwrap_or_else(|| "error".into()),
                    message: text_of(error, "message"),
                });
            }
            other => tracing::debug!(event = %other, "unknown Responses API event; ignored"),
        }
        Ok(())
    }

    /// A response object: its model, usage and output (what the events did
    /// not carry).
    fn response(&mut self, response: &Value) {
        if let Some(model) = field(response, "model").as_str() {
            self.model = model.to_owned();
        }
        if self.response_id.is_none() {
            let id = field(response, "id").as_str().filter(|id| !id.is_empty());
            self.response_id = id.map(str::to_owned);
        }
        let usage = field(response, "usage");
        if usage.is_object() {
            let prompt = field(usage, "input_tokens").as_u64().unwrap_or(0);
            let completion = field(usage, "output_tokens").as_u64().unwrap_or(0);
            self.usage = Some(UsageFact {
                model: self.model.clone(),
                prompt_tokens: prompt,
                completion_tokens: completion,
                total_tokens: field(usage, "total_tokens")
                    .as_u64()
                    .unwrap_or(prompt + completion),
                cached_tokens: field(field(usage, "input_tokens_details"), "cached_tokens")
                    .as_u64(),
                reasoning_tokens: field(field(usage, "output_tokens_details"), "reasoning_tokens")
                    .as_u64(),
                cache_creation_tokens: None,
                cost_micros: field(usage, "cost")
                    .as_f64()
                    .and_then(UsageFact::micros_from_usd),
                ..UsageFact::default()
            });
        }
        if let Some(output) = field(response, "output").as_array() {
            for (index, item) in output.iter().enumerate() {
                self.fill_from(index, item);
            }
        }
    }

    /// What a response's output item adds to the item of the same position (or
    /// id): a reasoning item's encrypted content, a message's text, a call's
    /// arguments, when the events did not carry them.
    fn fill_from(&mut self, index: usize, item: &Value) {
        let id = text_of(item, "id");
        let at = self.position_of(&id).unwrap_or(index);
        match (self.items.get_mut(at), field(item, "type").as_str()) {
            (
                Some(Some(Item::Reasoning {
                    encrypted, summary, ..
                })),
                Some("reasoning"),
            ) => {
                if encrypted.is_none() {
                    *encrypted = Some(text_of(item, "encrypted_content")).filter(|e| !e.is_empty());
                }
                if summary.is_empty() {
                    *summary = summary_text(item);
                }
            }
            (Some(Some(Item::Message { text, .. })), Some("message")) if text.is_empty() => {
                *text = message_text(item);
            }
            (
                Some(Some(Item::Call {
                    arguments, done, ..
                })),
                Some("function_call"),
            ) => {
                if let Some(whole) = field(item, "arguments").as_str() {
                    *arguments = whole.to_owned();
                    *done = true;
                }
            }
            _ => {}
        }
    }

    /// The position of the item whose id is `id`.
    fn position_of(&self, id: &str) -> Option<usize> {
        if id.is_empty() {
            return None;
        }
        self.items.iter().position(|item| match item {
            Some(
                Item::Call { item_id, .. }
                | Item::Reasoning { item_id, .. }
                | Item::Message { item_id, .. },
            ) => item_id == id,
            None => false,
        })
    }

    /// The item an event names: by `output_index`, else by `item_id`.
    fn item_at(&mut self, value: &Value) -> Option<&mut Item> {
        let at =
            output_index(value).or_else(|| self.position_of(field(value, "item_id").as_str()?))?;
        self.items.get_mut(at)?.as_mut()
    }

    fn item_added(&mut self, value: &Value, out: &mut Vec<CompletionDelta>) -> Result<(), String> {
        let index = output_index(value).ok_or("no valid output_index")?;
        let item = field(value, "item");
        let opened = match field(item, "type").as_str() {
            Some("message") => Item::Message {
                item_id: text_of(item, "id"),
                text: message_text(item),
                refusal: String::new(),
            },
            Some("function_call") => {
                let call_id = text_of(item, "call_id");
                let name = text_of(item, "name");
                if call_id.is_empty() || name.is_empty() {
                    return Err("a function_call item needs a call_id and a name".into());
                }
                let call = self.calls;
                self.calls += 1;
                out.push(CompletionDelta::ToolCallStart {
                    index: call,
                    id: call_id.clone(),
                    name: name.clone(),
                });
                let arguments = text_of(item, "arguments");
                if !arguments.is_empty() {
                    out.push(CompletionDelta::ToolCallArgs {
                        index: call,
                        fragment: arguments.clone(),
                    });
                }
                Item::Call {
                    item_id: text_of(item, "id"),
                    call_id,
                    name,
                    call,
                    arguments,
                    done: false,
                }
            }
            Some("reasoning") => Item::Reasoning {
                item_id: text_of(item, "id"),
                summary: String::new(),
                parts: 0,
                encrypted: Some(text_of(item, "encrypted_content")).filter(|e| !e.is_empty()),
            },
            other => {
                tracing::debug!(item = ?other, "unknown output item type; ignored");
                return Ok(());
            }
        };
        if self.items.len() <= index {
            self.items.resize_with(index + 1, || None);
        }
        self.items[index] = Some(opened);
        Ok(())
    }

    /// The message item a text delta is for: by its `item_id`, else by its
    /// `output_index` when a message is there, else a message opened here
    /// (LiteLLM sends a message's deltas with no `output_item.added`, under
    /// the index of the reasoning item before it).
    fn message_for(&mut self, item_id: &str, index: Option<usize>) -> Option<&mut Item> {
        let at = self.position_of(item_id).or_else(|| {
            index.filter(|i| matches!(self.items.get(*i), Some(Some(Item::Message { .. }))))
        });
        let at = match at {
            Some(at) => at,
            None => {
                self.items.push(Some(Item::Message {
                    item_id: item_id.to_owned(),
                    text: String::new(),
                    refusal: String::new(),
                }));
                self.items.len() - 1
            }
        };
        self.items.get_mut(at)?.as_mut()
    }

    /// The item a delta names: by `output_index`, else by `item_id`.
    fn item_of(&mut self, item_id: &str, index: Option<usize>) -> Option<&mut Item> {
        let at = index.or_else(|| self.position_of(item_id))?;
        self.items.get_mut(at)?.as_mut()
    }

    /// A delta event, read from borrowed fields.
    fn delta(&mut self, kind: DeltaKind, head: Head<'_>, out: &mut Vec<CompletionDelta>) {
        let piece = head
            .delta
            .map(std::borrow::Cow::into_owned)
            .unwrap_or_default();
        if piece.is_empty() {
            return;
        }
        let index = head
            .output_index
            .and_then(|i| usize::try_from(i).ok())
            .filter(|i| *i < 4096);
        let item_id = head.item_id.as_deref().unwrap_or_default();
        match kind {
            DeltaKind::Text | DeltaKind::Refusal => match self.message_for(item_id, index) {
                Some(Item::Message { text, refusal, .. }) => {
                    if kind == DeltaKind::Refusal {
                        refusal.push_str(&piece);
                        out.push(CompletionDelta::Refusal(piece));
                    } else {
                        ai_core::text::append(text, &piece);
                        out.push(CompletionDelta::Text(piece));
                    }
                }
                _ => tracing::debug!("a text delta for no message item; ignored"),
            },
            DeltaKind::Arguments => {
                if let Some(Item::Call {
                    call,
                    arguments,
                    done: false,
                    ..
                }) = self.item_of(item_id, index)
                {
                    arguments.push_str(&piece);
                    out.push(CompletionDelta::ToolCallArgs {
                        index: *call,
                        fragment: piece,
                    });
                }
            }
            DeltaKind::Reasoning => {
                if let Some(Item::Reasoning { summary, parts, .. }) = self.item_of(item_id, index) {
                    // LiteLLM sends no `summary_part.added`: a new
                    // `summary_index` starts a part all the same.
                    let part = head.summary_index.unwrap_or(0);
                    if u64::from(*parts) <= part {
                        if !summary.is_empty() {
                            summary.push_str("\n\n");
                            out.push(CompletionDelta::Reasoning("\n\n".into()));
                        }
                        *parts = u32::try_from(part + 1).unwrap_or(u32::MAX);
                    }
                    summary.push_str(&piece);
                    out.push(CompletionDelta::Reasoning(piece));
                }
            }
        }
    }

    /// The whole argument text: what the deltas missed goes out as one more
    /// delta; when it contradicts them, it replaces them.
    fn arguments_done(&mut self, value: &Value, out: &mut Vec<CompletionDelta>) {
        let Some(whole) = field(value, "arguments").as_str() else {
            return;
        };
        if let Some(Item::Call {
            call,
            arguments,
            done,
            ..
        }) = self.item_at(value)
        {
            if let Some(rest) = whole.strip_prefix(arguments.as_str())
                && !rest.is_empty()
            {
                out.push(CompletionDelta::ToolCallArgs {
                    index: *call,
                    fragment: rest.to_owned(),
                });
            }
            *arguments = whole.to_owned();
            *done = true;
        }
    }

    fn summary_part(&mut self, value: &Value, out: &mut Vec<CompletionDelta>) {
        if let Some(Item::Reasoning { summary, parts, .. }) = self.item_at(value) {
            *parts += 1;
            if !summary.is_empty() {
                summary.push_str("\n\n");
                out.push(CompletionDelta::Reasoning("\n\n".into()));
            }
        }
    }

    fn item_done(&mut self, value: &Value, out: &mut Vec<CompletionDelta>) {
        let item = field(value, "item");
        let index = output_index(value);
        match (
            index.and_then(|i| self.items.get_mut(i)?.as_mut()),
            field(item, "type").as_str(),
        ) {
            (
                Some(Item::Reasoning {
                    encrypted, summary, ..
                }),
                Some("reasoning"),
            ) => {
                // `.done`'s encrypted content is the one to send back.
                if let Some(done) =
                    Some(text_of(item, "encrypted_content")).filter(|e| !e.is_empty())
                {
                    *encrypted = Some(done);
                }
                if summary.is_empty() {
                    *summary = summary_text(item);
                }
            }
            (Some(Item::Call { .. }), Some("function_call")) => {
                let done = serde_json::json!({
                    "output_index": index,
                    "arguments": field(item, "arguments"),
                });
                self.arguments_done(&done, out);
            }
            (Some(Item::Message { text, .. }), Some("message")) if text.is_empty() => {
                *text = message_text(item);
                if !text.is_empty() {
                    out.push(CompletionDelta::Text(text.clone()));
                }
            }
            _ => {}
        }
    }

    fn finish_reason(&self, has_calls: bool) -> FinishReason {
        match &self.end {
            Some(End::Incomplete(reason)) => match reason.as_str() {
                // xAI names its limits as its own API does.
                "max_output_tokens" | "REASON_MAX_LEN" | "REASON_MAX_CONTEXT" => {
                    FinishReason::Length
                }
                "content_filter" => FinishReason::ContentFilter,
                other => FinishReason::Other(other.to_owned()),
            },
            Some(End::Completed) if has_calls => FinishReason::ToolCalls,
            Some(End::Completed) => FinishReason::Stop,
            None => FinishReason::Unknown,
        }
    }

    /// The reason an incomplete response gave, when [`FinishReason`] does not
    /// say it exactly (the API's own `max_output_tokens` and `content_filter`
    /// it does).
    fn raw_finish_reason(&self) -> Option<String> {
        match &self.end {
            Some(End::Incomplete(reason))
                if !matches!(reason.as_str(), "max_output_tokens" | "content_filter") =>
            {
                Some(reason.clone()).filter(|r| !r.is_empty())
            }
            _ => None,
        }
    }

    /// The assembled turn.
    fn turn(self) -> CompletionFinal {
        let has_calls = self
            .items
            .iter()
            .any(|item| matches!(item, Some(Item::Call { .. })));
        let finish_reason = self.finish_reason(has_calls);
        let raw_finish_reason = self.raw_finish_reason();
        let cut = self.end != Some(End::Completed);
        let usage = self.usage;
        let mut turn = TurnBuilder::new();
        for item in self.items.into_iter().flatten() {
            match item {
                Item::Message {
                    text: piece,
                    refusal: refused,
                    ..
                } => {
                    if !piece.is_empty() {
                        turn.text(piece);
                    }
                    if !refused.is_empty() {
                        turn.refusal(&refused);
                    }
                }
                Item::Reasoning {
                    item_id,
                    summary,
                    encrypted,
                    ..
                } => {
                    let item_id = Some(item_id).filter(|id| !id.is_empty());
                    if summary.is_empty() {
                        turn.block(AssistantBlock::Reasoning {
                            text: summary,
                            signature: encrypted,
                            item_id,
                        });
                    } else {
                        turn.reasoning(summary, encrypted, item_id);
                    }
                }
                Item::Call {
                    call_id,
                    name,
                    call,
                    arguments,
                    done,
                    ..
                } => {
                    let (arguments, outcome) = settle_arguments(arguments, !done && cut);
                    turn.tool_call(AssembledToolCall {
                        index: call,
                        id: call_id,
                        name,
                        arguments,
                        outcome,
                        raw: None,
                    });
                }
            }
        }
        let mut turn = turn.finish(finish_reason, raw_finish_reason, usage);
        turn.tool_calls.sort_by_key(|call| call.index);
        turn.response_id = self.response_id;
        turn
    }
}

/// The text of a message item's `output_text` parts.
fn message_text(item: &Value) -> String {
    field(item, "content")
        .as_array()
        .map(|parts| {
            parts
                .iter()
                .filter(|p| field(p, "type").as_str() == Some("output_text"))
                .filter_map(|p| field(p, "text").as_str())
                .collect()
        })
        .unwrap_or_default()
}

/// The text of a reasoning item's summary parts, joined by a blank line; else
/// of its `reasoning_text` content parts (the reasoning itself, which some
/// providers, DeepSeek among them, give instead of a summary).
fn summary_text(item: &Value) -> String {
    let joined = |key: &str, kind: Option<&str>| {
        field(item, key)
            .as_array()
            .map(|parts| {
                parts
                    .iter()
                    .filter(|p| kind.is_none_or(|k| field(p, "type").as_str() == Some(k)))
                    .filter_map(|p| field(p, "text").as_str())
                    .collect::<Vec<_>>()
                    .join("\n\n")
            })
            .unwrap_or_default()
    };
    let summary = joined("summary", None);
    if summary.is_empty() {
        joined("content", Some("reasoning_text"))
    } else {
        summary
    }
}

/// Decodes a whole streamed body at once (tests, fixtures).
pub fn decode_stream(
    body: &[u8],
) -> Result<(Vec<CompletionDelta>, CompletionFinal), CompletionError> {
    ResponsesDecoder::new().decode_whole(body)
}

/// Decodes a whole (non-streamed) response, `{object: "response", output: [...],
/// status, usage}`, into the turn it holds, appending the deltas a stream of it
/// would have produced to `out`. A failed response (or an `{error}` body) is a
/// typed provider error.
pub fn decode_response(
    body: &[u8],
    out: &mut Vec<CompletionDelta>,
) -> Result<CompletionFinal, CompletionError> {
    let protocol = |message: String| CompletionError::Protocol { message };
    let response: Value = serde_json::from_slice(body)
        .map_err(|e| protocol(format!("the response is not JSON: {e}")))?;
    let error = field(&response, "error");
    if error.is_object() {
        return Err(CompletionError::Provider {
            code: Some(text_of(error, "code")).filter(|c| !c.is_empty()),
            message: text_of(error, "message"),
        });
    }
    let output = field(&response, "output")
        .as_array()
        .ok_or_else(|| protocol("the response has no output list".into()))?;
    let mut assembly = ResponsesAssembler::default();
    for (index, item) in output.iter().enumerate() {
        let event = serde_json::json!({"output_index": index, "item": item});
        assembly.item_added(&event, out).map_err(protocol)?;
        assembly.item_done(&event, out);
    }
    assembly.response(&response);
    assembly.end = Some(match field(&response, "status").as_str() {
        Some("incomplete") => {
            End::Incomplete(text_of(field(&response, "incomplete_details"), "reason"))
        }
        _ => End::Completed,
    });
    Ok(assembly.turn())
}

/// The `{error: {message, code|type}}` body of a failed request: its code and
/// message.
pub fn parse_error_body(body: &[u8]) -> Option<(String, String)> {
    let value: Value = serde_json::from_slice(body).ok()?;
    let error = value.get("error")?;
    let code = Some(text_of(error, "code"))
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| text_of(error, "type"));
    Some((code, text_of(error, "message")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_whole_response_decodes_like_its_stream() {
        let body = serde_json::json!({
            "id": "resp_1", "object": "response", "status": "completed", "model": "gpt-x",
            "output": [
                {"id": "rs_1", "type": "reasoning", "encrypted_content": "enc==",
                 "summary": [{"type": "summary_text", "text": "Look first."}]},
                {"id": "fc_1", "type": "function_call", "call_id": "call_1",
                 "name": "core__list_dir", "arguments": "{\"path\":\".\"}"}
            ],
            "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15,
                      "output_tokens_details": {"reasoning_tokens": 3}}
        });
        let mut deltas = Vec::new();
        let turn = decode_response(body.to_string().as_bytes(), &mut deltas).unwrap();
        assert_eq!(turn.finish_reason, FinishReason::ToolCalls);
        assert_eq!(turn.tool_calls[0].arguments, "{\"path\":\".\"}");
        assert_eq!(
            turn.tool_calls[0].outcome,
            ai_core::completion::ToolCallOutcome::Complete
        );
        assert_eq!(
            turn.blocks[0],
            AssistantBlock::Reasoning {
                text: "Look first.".into(),
                signature: Some("enc==".into()),
                item_id: Some("rs_1".into()),
            }
        );
        assert_eq!(turn.usage.unwrap().reasoning_tokens, Some(3));
        assert!(
            deltas
                .iter()
                .any(|d| matches!(d, CompletionDelta::ToolCallStart { id, .. } if id == "call_1"))
        );
    }

    #[test]
    fn a_failed_body_is_a_provider_error() {
        let body = br#"{"error": {"message": "bad", "code": "invalid_request_error"}}"#;
        match decode_response(body, &mut Vec::new()) {
            Err(CompletionError::Provider { code, message }) => {
                assert_eq!(code.as_deref(), Some("invalid_request_error"));
                assert_eq!(message, "bad");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            parse_error_body(body),
            Some(("invalid_request_error".into(), "bad".into()))
        );
    }
}
