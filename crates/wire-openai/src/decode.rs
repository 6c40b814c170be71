//! The sans-IO chat-completions decoder: bytes in, semantic deltas and one assembled
//! [`CompletionFinal`] out.
//!
//! It knows the OpenAI chunk format but does no IO and knows nothing about HTTP: the
//! client (or a test, or a fuzzer) feeds it byte chunks of any size. It is the single
//! assembler of streamed tool calls (invariant DECODER_ASSEMBLES_TOOLCALLS): callers execute tools only
//! from [`CompletionFinal::tool_calls`], never from deltas. State belongs to one
//! decode session; make a new [`Decoder`] per model call.
//!
//! # Assembly rules
//!
//! Tool-call deltas are assembled by their `index` into calls returned in index
//! order, whatever order they arrived in. Real gateways bend the protocol; each rule
//! below has a fixture in `fixtures/openai/stream/`:
//!
//! - **id and name on the first delta only**: later deltas carry `index` and an
//!   argument fragment; they are appended to the call at that index.
//! - **arguments in the first delta** (Mistral): appended once, like any fragment.
//! - **several calls in one chunk, interleaved parallel calls**: each delta goes to
//!   the call of its own index.
//! - **missing `index`** (Gemini, Ollama): a delta without `index` continues the last
//!   opened call, unless it carries an id different from that call's id, or a name
//!   while that call already has one (and no equal id): then it opens a new call at
//!   the next free index. So whole calls sent without index are kept apart, and id-
//!   or name-less continuations stay with their call.
//! - **an index reused by a different call** (a new id, or a different name, at an
//!   index whose call already has one): opens a new call at the next free index
//!   instead of merging two calls.
//! - **no id** from the provider: one is minted, `call_<uuid v4 simple>`, once per
//!   call, and used in the deltas and the final alike (invariant TOOLCALLID_STABLE).
//! - **`"arguments": ""`** is no fragment; a call whose whole argument text is empty
//!   is reported as `{}` and [`ToolCallOutcome::Complete`].
//! - **cumulative argument resends** (hermes-agent): a fragment that starts with the
//!   whole text accumulated so far (non-empty) is treated as a resend of the full text
//!   and only its new tail is appended. This also absorbs a provider that repeats the
//!   complete arguments at the end of a call.
//! - **`finish_reason` on every chunk** never flushes anything; calls are only
//!   finalized at [`Decoder::finish`]. `length` is sticky once seen.
//! - **`finish_reason: "stop"` with tool calls** is reported as
//!   [`FinishReason::ToolCalls`]; the calls are kept.
//! - **`content: ""`** in tool deltas adds no text and emits no delta.
//! - **usage** is read from any chunk, with `choices: []` or not; the last one wins.
//! - **`{"error": ...}`** in the stream (or an `event: error`) fails the session with
//!   [`DecodeError::Provider`], carrying the provider's code and message.
//! - **a stream that ends without `[DONE]` and without `finish_reason`** fails with
//!   [`CompletionError::TruncatedStream`], whose `partial` holds everything assembled.
//! - **truncated arguments** (the turn was cut by `length` or the stream was cut):
//!   a call whose arguments stop in the middle of a JSON value is
//!   [`ToolCallOutcome::Truncated`], never a silent `{}`. Arguments that are not JSON
//!   for another reason are [`ToolCallOutcome::InvalidJson`].
//! - **tool calls whose `type` is not `function`** are ignored with a warning, as are
//!   the later deltas of their index.
//! - **choices other than choice 0** are ignored with a warning (this crate never
//!   asks for `n > 1`).
//! - the legacy **`function_call`** delta is treated as a tool call without index
//!   and id.
//! - a body that is **JSON or HTML instead of an event stream** is a protocol
//!   error, not an empty turn; the turn's text and arguments are bounded by
//!   [`DecoderOptions::max_turn_bytes`].
//!
//! # Speed
//!
//! Chunks are parsed by streaming serde visitors straight into the assembly: no
//! chunk struct is built, strings are borrowed or unescaped into reused buffers, and
//! with [`DeltaMode::AssembleOnly`] a turn allocates only its own text and argument
//! buffers. The envelope of a chunk (the members before `choices`, which repeat
//! byte for byte in every chunk of a stream) is parsed once and then skipped by a
//! byte comparison. `benches/decode.rs` compares this with a `serde_json::Value`
//! decoder and with eventsource-stream plus owned structs.
//!
//! # Deltas
//!
//! [`Decoder::feed`] appends [`CompletionDelta`]s to a caller-provided vector as
//! events complete: text, a call's start (once its name is known), argument
//! fragments, and usage (once, when `[DONE]` arrives: some providers repeat
//! cumulative usage, so emitting earlier could double count; it is always in the
//! final). [`DeltaMode`] turns off the per-fragment deltas (each is a heap
//! allocation) or all deltas, for callers that only want the final.

use std::fmt;

use ai_core::{
    AssembledToolCall, CompletionDelta, CompletionError, CompletionFinal, FinishReason,
    ToolCallOutcome, UsageFact,
};
use serde::de::IgnoredAny;
use serde_json::Value;

use crate::sse::{self, DEFAULT_MAX_EVENT_BYTES, RawSseEvent, SseError, SseFramer};
use serde_json::value::RawValue;

use crate::wire::{self, ChunkSink, FunctionDto, RawText, Str, ToolCallDto, UsageDto};

/// Which deltas the decoder emits. The final is assembled the same in every mode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum DeltaMode {
    /// Text, tool-call starts, every argument fragment, usage.
    #[default]
    All,
    /// Text, tool-call starts and usage; no per-fragment deltas (no allocation per
    /// argument fragment).
    SkipArgFragments,
    /// No deltas at all: only the final.
    AssembleOnly,
}

/// How ids are minted for calls the provider sent without one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum IdMinting {
    /// `call_<uuid v4 simple>`: unique, the production setting.
    #[default]
    Uuid,
    /// `call_minted_<n>` numbered per session: deterministic, for tests and fuzzing.
    Sequential,
}

/// Settings of one decode session.
#[derive(Debug, Clone)]
pub struct DecoderOptions {
    /// Which deltas to emit.
    pub deltas: DeltaMode,
    /// Model id reported in usage when the stream names none (normally the
    /// request's model).
    pub model: String,
    /// Upper bound of tool calls in one turn; more is a protocol error.
    pub max_tool_calls: usize,
    /// Upper bound of one SSE line or event's data, in bytes.
    pub max_event_bytes: usize,
    /// Upper bound of the assembled text plus all argument texts of the turn, in
    /// bytes; more is a protocol error (a guard against endless streams).
    pub max_turn_bytes: usize,
    /// How missing call ids are minted.
    pub id_minting: IdMinting,
}

impl Default for DecoderOptions {
    fn default() -> Self {
        Self {
            deltas: DeltaMode::All,
            model: String::new(),
            max_tool_calls: 1024,
            max_event_bytes: DEFAULT_MAX_EVENT_BYTES,
            max_turn_bytes: 64 * 1024 * 1024,
            id_minting: IdMinting::Uuid,
        }
    }
}

/// Why a decode session failed while being fed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The bytes violated the protocol (malformed SSE, malformed JSON, limits).
    #[error("protocol error: {message}")]
    Protocol {
        /// What was wrong (never echoes the payload).
        message: String,
    },
    /// The provider reported an error inside the stream.
    #[error("provider error: {message}")]
    Provider {
        /// The provider's error code or type, if it gave one.
        code: Option<String>,
        /// The provider's message.
        message: String,
    },
}

impl From<SseError> for DecodeError {
    fn from(error: SseError) -> Self {
        Self::Protocol {
            message: error.to_string(),
        }
    }
}

impl From<DecodeError> for CompletionError {
    fn from(error: DecodeError) -> Self {
        match error {
            DecodeError::Protocol { message } => Self::Protocol { message },
            DecodeError::Provider { code, message } => Self::Provider { code, message },
        }
    }
}

/// A sans-IO streaming decoder for one chat-completions turn.
///
/// ```
/// use wire_openai::decode::Decoder;
///
/// let stream = concat!(
///     "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,",
///     "\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"core__add\",",
///     "\"arguments\":\"\"}}]}}]}\n\n",
///     "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,",
///     "\"function\":{\"arguments\":\"{\\\"a\\\":1}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n",
///     "data: [DONE]\n\n",
/// );
/// let mut decoder = Decoder::new();
/// let mut deltas = Vec::new();
/// for chunk in stream.as_bytes().chunks(7) {
///     decoder.feed(chunk, &mut deltas).unwrap();
/// }
/// let turn = decoder.finish().unwrap();
/// assert_eq!(turn.tool_calls[0].name, "core__add");
/// assert_eq!(turn.tool_calls[0].arguments, r#"{"a":1}"#);
/// ```
pub struct Decoder {
    framer: SseFramer,
    assembly: Assembly,
    failed: Option<DecodeError>,
    /// The first non-whitespace byte fed, to tell a body that is no event stream.
    first_byte: Option<u8>,
}

impl fmt::Debug for Decoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Decoder")
            .field("events", &self.assembly.events)
            .field("tool_calls", &self.assembly.calls.len())
            .field("done", &self.assembly.done)
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

impl Default for Decoder {
    fn default() -> Self {
        Self::new()
    }
}

impl Decoder {
    /// A decoder with default options.
    pub fn new() -> Self {
        Self::with_options(DecoderOptions::default())
    }

    /// A decoder with the given options.
    pub fn with_options(options: DecoderOptions) -> Self {
        Self {
            framer: SseFramer::with_max_event_bytes(options.max_event_bytes),
            assembly: Assembly::new(options),
            failed: None,
            first_byte: None,
        }
    }

    /// Feeds a chunk of the response body, of any size and cut anywhere. Deltas of
    /// the events it completes are appended to `out` (the vector is not cleared, so
    /// a caller can reuse one buffer).
    ///
    /// After an error the session is over: later calls return the same error.
    pub fn feed(
        &mut self,
        chunk: &[u8],
        out: &mut Vec<CompletionDelta>,
    ) -> Result<(), DecodeError> {
        if let Some(error) = &self.failed {
            return Err(error.clone());
        }
        if self.first_byte.is_none() {
            self.first_byte = chunk.iter().copied().find(|b| !b.is_ascii_whitespace());
        }
        let Self {
            framer, assembly, ..
        } = self;
        let result = framer.feed_raw(chunk, |event| assembly.on_event(event, out));
        if let Err(error) = &result {
            self.failed = Some(error.clone());
        }
        result
    }

    /// Whether the stream said it is over (`[DONE]` arrived); bytes fed later are
    /// ignored.
    pub fn is_done(&self) -> bool {
        self.assembly.done
    }

    /// Number of SSE events seen so far.
    pub fn events(&self) -> u64 {
        self.assembly.events
    }

    /// Ends the session and returns the assembled turn.
    ///
    /// Fails with the feed error if there was one, and with
    /// [`CompletionError::TruncatedStream`] (holding everything assembled) when the
    /// stream ended without `[DONE]` and without a `finish_reason`.
    pub fn finish(self) -> Result<CompletionFinal, CompletionError> {
        self.finish_into(&mut Vec::new())
    }

    /// Like [`Decoder::finish`], appending the deltas of an event left pending at
    /// the end of the stream (one without its final empty line) to `out`.
    pub fn finish_into(
        self,
        out: &mut Vec<CompletionDelta>,
    ) -> Result<CompletionFinal, CompletionError> {
        if let Some(error) = self.failed {
            return Err(error.into());
        }
        let Self {
            mut framer,
            mut assembly,
            first_byte,
            ..
        } = self;
        if !assembly.done && framer.has_pending() {
            // The tail may be a frame cut in half by a dropped connection: a malformed
            // tail is a truncation, not a protocol error. A provider error is kept.
            let result = framer.finish_raw(|event| assembly.on_event(event, out));
            match result {
                Ok(()) => {}
                Err(error @ DecodeError::Provider { .. }) => return Err(error.into()),
                Err(DecodeError::Protocol { message }) => {
                    tracing::debug!(%message, "ignoring an incomplete last stream event");
                }
            }
        }
        if assembly.events == 0 && matches!(first_byte, Some(b'{' | b'[' | b'<')) {
            return Err(CompletionError::Protocol {
                message: "the response body is JSON or HTML, not a server-sent event stream".into(),
            });
        }
        assembly.finalize()
    }
}

/// Decodes a whole (non-streaming) `chat.completion` JSON response into the same
/// final a stream would give.
pub fn decode_response(
    body: &[u8],
    options: DecoderOptions,
) -> Result<CompletionFinal, CompletionError> {
    decode_response_into(body, options, &mut Vec::new())
}

/// Like [`decode_response`], also appending the deltas the turn would have streamed
/// (one text delta, each call's start and arguments, usage) to `out`.
pub fn decode_response_into(
    body: &[u8],
    options: DecoderOptions,
    out: &mut Vec<CompletionDelta>,
) -> Result<CompletionFinal, CompletionError> {
    let mut assembly = Assembly::new(options);
    assembly.whole_response = true;
    assembly.on_data(body, out)?;
    assembly.done = true;
    assembly.emit_usage(out);
    assembly.finalize()
}

/// State of one tool call being assembled.
#[derive(Debug)]
struct CallSlot {
    /// Position in the turn (the wire index when it was free).
    position: u32,
    /// The wire index the call was opened with, if any.
    wire_index: Option<u32>,
    /// The provider's or the minted id.
    id: Option<String>,
    /// `id` was minted here (so it says nothing about which call a delta is for).
    id_minted: bool,
    name: String,
    arguments: String,
    /// A start delta was emitted.
    announced: bool,
    /// A cumulative resend was seen (logged once).
    cumulative: bool,
}

impl CallSlot {
    /// The id the provider gave, if any (not a minted one).
    fn provider_id(&self) -> Option<&str> {
        self.id.as_deref().filter(|_| !self.id_minted)
    }
}

/// The assembly state of one session.
struct Assembly {
    options: DecoderOptions,
    text: String,
    calls: Vec<CallSlot>,
    /// The call opened last (the target of delta without index).
    last_opened: Option<usize>,
    /// The call touched last (a fast path for the lookup by index).
    last_touched: Option<usize>,
    next_position: u32,
    /// Wire indices of ignored non-function tool calls.
    ignored_indices: Vec<u32>,
    finish_reason: Option<FinishReason>,
    length_seen: bool,
    usage: Option<UsageFact>,
    usage_emitted: bool,
    model: Option<String>,
    done: bool,
    events: u64,
    minted: u32,
    warned_choices: bool,
    /// Parsing a whole response: tool calls without index take their array position.
    whole_response: bool,
    /// Reused buffer for unescaping strings.
    scratch: String,
    /// The repeated leading members of this stream's chunks (see `on_data`).
    envelope: Vec<u8>,
    /// Reused buffer for a chunk without its envelope.
    json_scratch: String,
    /// Text and argument bytes assembled so far (bounded by `max_turn_bytes`).
    turn_bytes: usize,
}

impl Assembly {
    fn new(options: DecoderOptions) -> Self {
        Self {
            options,
            text: String::new(),
            calls: Vec::new(),
            last_opened: None,
            last_touched: None,
            next_position: 0,
            ignored_indices: Vec::new(),
            finish_reason: None,
            length_seen: false,
            usage: None,
            usage_emitted: false,
            model: None,
            done: false,
            events: 0,
            minted: 0,
            warned_choices: false,
            whole_response: false,
            scratch: String::new(),
            envelope: Vec::new(),
            json_scratch: String::new(),
            turn_bytes: 0,
        }
    }

    fn on_event(
        &mut self,
        event: RawSseEvent<'_>,
        out: &mut Vec<CompletionDelta>,
    ) -> Result<(), DecodeError> {
        self.events += 1;
        if self.done {
            tracing::trace!("ignoring an event after [DONE]");
            return Ok(());
        }
        if !event.is_message() {
            if event.event == b"error" {
                return Err(error_event(&sse::utf8(event.data)));
            }
            tracing::debug!(
                event = %sse::utf8(event.event),
                "ignoring a stream event of another type"
            );
            return Ok(());
        }
        let data = event.data.trim_ascii();
        if data.is_empty() {
            return Ok(());
        }
        if data == b"[DONE]" {
            self.done = true;
            self.emit_usage(out);
            return Ok(());
        }
        self.on_data(data, out)
    }

    fn on_data(&mut self, data: &[u8], out: &mut Vec<CompletionDelta>) -> Result<(), DecodeError> {
        // Envelope skipping: the members before `choices` (id, object, created,
        // model, fingerprint) repeat byte for byte in every chunk of a stream. When
        // this chunk starts with the envelope of an earlier, fully parsed chunk, only
        // the rest is checked as UTF-8 and parsed: identical bytes would parse to
        // identical values, and the envelope holds no member this decoder acts on
        // except `model`, which is taken from the first chunk anyway.
        let mut json = std::mem::take(&mut self.json_scratch);
        let envelope = self.envelope.len();
        let reused = envelope > 0 && data.starts_with(&self.envelope);
        let whole;
        let mut learnable = false;
        let (text, offset) = if reused {
            // The envelope ends with `,`, so the split is on a character boundary.
            json.clear();
            json.push('{');
            json.push_str(&sse::utf8(&data[envelope..]));
            (json.as_str(), envelope - 1)
        } else {
            whole = sse::utf8(data);
            learnable = matches!(whole, std::borrow::Cow::Borrowed(_)) && !self.whole_response;
            (&*whole, 0)
        };
        let mut sink = Sink {
            assembly: self,
            out,
            failure: None,
        };
        let parsed = wire::parse_chunk(text, &mut sink);
        let failure = sink.failure.take();
        parsed.map_err(|error| DecodeError::Protocol {
            message: format!(
                "malformed JSON in a response event ({} error at line {} column {})",
                category(&error),
                error.line(),
                if error.line() == 1 {
                    error.column() + offset
                } else {
                    error.column()
                }
            ),
        })?;
        // Learn the envelope from valid UTF-8 only, so raw and text bytes agree.
        if learnable {
            self.envelope.clear();
            if let Some(len) = wire::envelope_len(text) {
                self.envelope.extend_from_slice(&data[..len]);
            }
        }
        self.json_scratch = json;
        match failure {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    fn set_usage(&mut self, usage: &UsageDto) {
        let prompt_tokens = usage.prompt_tokens.unwrap_or(0);
        let completion_tokens = usage.completion_tokens.unwrap_or(0);
        self.usage = Some(UsageFact {
            model: String::new(),
            prompt_tokens,
            completion_tokens,
            total_tokens: usage
                .total_tokens
                .unwrap_or(prompt_tokens.saturating_add(completion_tokens)),
            ..UsageFact::default()
        });
    }

    fn set_finish_reason(&mut self, reason: &str) {
        let reason = finish_reason(reason);
        if reason == FinishReason::Length {
            self.length_seen = true;
        }
        self.finish_reason = Some(reason);
    }

    fn apply_content(
        &mut self,
        content: &serde_json::value::RawValue,
        out: &mut Vec<CompletionDelta>,
    ) -> Result<(), DecodeError> {
        let mut scratch = std::mem::take(&mut self.scratch);
        let start = self.text.len();
        match wire::raw_text(content, &mut scratch) {
            RawText::Null => {}
            RawText::Str(text) => self.text.push_str(text),
            RawText::Other(json) => {
                // Content parts: [{"type": "text", "text": "..."}, ...].
                if let Ok(Value::Array(parts)) = serde_json::from_str::<Value>(json) {
                    for part in parts {
                        if let Some(text) = part.get("text").and_then(Value::as_str) {
                            self.text.push_str(text);
                        }
                    }
                } else {
                    tracing::debug!("ignoring content that is neither text nor parts");
                }
            }
        }
        self.scratch = scratch;
        self.count_turn_bytes(self.text.len() - start)?;
        if self.text.len() > start && self.options.deltas != DeltaMode::AssembleOnly {
            out.push(CompletionDelta::Text(self.text[start..].to_owned()));
        }
        Ok(())
    }

    fn count_turn_bytes(&mut self, added: usize) -> Result<(), DecodeError> {
        self.turn_bytes = self.turn_bytes.saturating_add(added);
        if self.turn_bytes > self.options.max_turn_bytes {
            return Err(DecodeError::Protocol {
                message: format!(
                    "the turn grew beyond {} bytes of text and arguments",
                    self.options.max_turn_bytes
                ),
            });
        }
        Ok(())
    }

    fn apply_tool_call(
        &mut self,
        call: &ToolCallDto<'_>,
        fallback_index: Option<u32>,
        out: &mut Vec<CompletionDelta>,
    ) -> Result<(), DecodeError> {
        let index = call.index.or(fallback_index);
        if let Some(kind) = &call.kind
            && kind.as_str() != "function"
            && !kind.as_str().is_empty()
        {
            tracing::warn!(
                kind = kind.as_str(),
                "ignoring a tool call that is not a function"
            );
            if let Some(index) = index {
                self.ignored_indices.push(index);
            }
            return Ok(());
        }
        if let Some(index) = index
            && self.ignored_indices.contains(&index)
        {
            return Ok(());
        }
        let id = non_empty(call.id.as_ref());
        let function = call.function.as_ref();
        let name = non_empty(function.and_then(|f| f.name.as_ref()));
        let slot_index = self.locate(index, id, name)?;
        self.last_touched = Some(slot_index);

        let mut scratch = std::mem::take(&mut self.scratch);
        let mut minted = self.minted;
        let minting = self.options.id_minting;
        let deltas = self.options.deltas;
        let slot = &mut self.calls[slot_index];
        if let Some(id) = id {
            match &slot.id {
                None => slot.id = Some(id.to_owned()),
                Some(existing) if existing != id => {
                    tracing::debug!("keeping the first id of a tool call");
                }
                Some(_) => {}
            }
        }
        if let Some(name) = name
            && slot.name.is_empty()
        {
            slot.name = name.to_owned();
        }
        let before = slot.arguments.len();
        if let Some(arguments) = function.and_then(|f| f.arguments) {
            match wire::raw_text(arguments, &mut scratch) {
                RawText::Null => {}
                RawText::Str(fragment) => append_fragment(slot, fragment),
                // Some servers send the arguments as a JSON object, not a string.
                RawText::Other(json) => append_fragment(slot, json),
            }
        }
        self.scratch = scratch;
        let added = slot.arguments.len() - before;
        if !slot.announced && !slot.name.is_empty() {
            slot.announced = true;
            if slot.id.is_none() {
                slot.id = Some(mint_id(minting, &mut minted));
                slot.id_minted = true;
            }
            let id = slot.id.clone().unwrap_or_default();
            if deltas != DeltaMode::AssembleOnly {
                out.push(CompletionDelta::ToolCallStart {
                    index: slot.position,
                    id,
                    name: slot.name.clone(),
                });
                if deltas == DeltaMode::All && !slot.arguments.is_empty() {
                    out.push(CompletionDelta::ToolCallArgs {
                        index: slot.position,
                        fragment: slot.arguments.clone(),
                    });
                }
            }
        } else if slot.announced && slot.arguments.len() > before && deltas == DeltaMode::All {
            out.push(CompletionDelta::ToolCallArgs {
                index: slot.position,
                fragment: slot.arguments[before..].to_owned(),
            });
        }
        self.minted = minted;
        self.count_turn_bytes(added)
    }

    /// Finds the call a delta belongs to, or opens one (see the module docs).
    fn locate(
        &mut self,
        index: Option<u32>,
        id: Option<&str>,
        name: Option<&str>,
    ) -> Result<usize, DecodeError> {
        match index {
            Some(index) => {
                let found = match self.last_touched {
                    Some(last) if self.calls[last].wire_index == Some(index) => Some(last),
                    _ => self.calls.iter().rposition(|c| c.wire_index == Some(index)),
                };
                match found {
                    Some(slot) => {
                        let call = &self.calls[slot];
                        let known = call.provider_id();
                        let other_id = matches!((id, known), (Some(a), Some(b)) if a != b);
                        let other_name = matches!(name, Some(n) if !call.name.is_empty() && n != call.name)
                            && !matches!((id, known), (Some(a), Some(b)) if a == b);
                        if other_id || other_name {
                            tracing::debug!(
                                index,
                                "a new tool call reuses an index; opening a new call"
                            );
                            self.open(Some(index), None)
                        } else {
                            Ok(slot)
                        }
                    }
                    None => self.open(Some(index), Some(index)),
                }
            }
            None => {
                if let Some(last) = self.last_opened {
                    let call = &self.calls[last];
                    let new_call = match (id, call.provider_id()) {
                        (Some(a), Some(b)) => a != b,
                        _ => name.is_some() && !call.name.is_empty(),
                    };
                    if !new_call {
                        return Ok(last);
                    }
                }
                self.open(None, None)
            }
        }
    }

    fn open(
        &mut self,
        wire_index: Option<u32>,
        preferred: Option<u32>,
    ) -> Result<usize, DecodeError> {
        if self.calls.len() >= self.options.max_tool_calls {
            return Err(DecodeError::Protocol {
                message: format!(
                    "more than {} tool calls in one turn",
                    self.options.max_tool_calls
                ),
            });
        }
        let position = match preferred {
            Some(p) if !self.calls.iter().any(|c| c.position == p) => p,
            _ => self.next_position,
        };
        self.next_position = self.next_position.max(position.saturating_add(1));
        self.calls.push(CallSlot {
            position,
            wire_index,
            id: None,
            id_minted: false,
            name: String::new(),
            arguments: String::new(),
            announced: false,
            cumulative: false,
        });
        let slot = self.calls.len() - 1;
        self.last_opened = Some(slot);
        Ok(slot)
    }

    fn emit_usage(&mut self, out: &mut Vec<CompletionDelta>) {
        if self.usage_emitted || self.options.deltas == DeltaMode::AssembleOnly {
            return;
        }
        if let Some(usage) = self.usage_fact() {
            self.usage_emitted = true;
            out.push(CompletionDelta::Usage(usage));
        }
    }

    fn usage_fact(&self) -> Option<UsageFact> {
        let mut usage = self.usage.clone()?;
        usage.model = self
            .model
            .clone()
            .unwrap_or_else(|| self.options.model.clone());
        Some(usage)
    }

    fn finalize(mut self) -> Result<CompletionFinal, CompletionError> {
        let ended = self.done || self.finish_reason.is_some();
        let cut = self.length_seen || !ended;
        let mut minted = self.minted;
        let minting = self.options.id_minting;
        let mut calls: Vec<AssembledToolCall> = Vec::with_capacity(self.calls.len());
        for slot in std::mem::take(&mut self.calls) {
            if slot.id.is_none() && slot.name.is_empty() && slot.arguments.is_empty() {
                tracing::warn!(index = slot.position, "dropping an empty tool call delta");
                continue;
            }
            let (arguments, outcome) = classify(slot.arguments, cut);
            calls.push(AssembledToolCall {
                index: slot.position,
                id: slot.id.unwrap_or_else(|| mint_id(minting, &mut minted)),
                name: slot.name,
                arguments,
                outcome,
                raw: None,
            });
        }
        calls.sort_by_key(|call| call.index);
        let mut finish_reason = if self.length_seen {
            FinishReason::Length
        } else {
            self.finish_reason.take().unwrap_or(FinishReason::Unknown)
        };
        if finish_reason == FinishReason::Stop && !calls.is_empty() {
            tracing::debug!("finish_reason stop with tool calls; reporting tool_calls");
            finish_reason = FinishReason::ToolCalls;
        }
        let turn = CompletionFinal {
            text: std::mem::take(&mut self.text),
            tool_calls: calls,
            finish_reason,
            usage: self.usage_fact(),
            ..CompletionFinal::default()
        };
        if ended {
            Ok(turn)
        } else {
            tracing::warn!(
                tool_calls = turn.tool_calls.len(),
                "stream ended without [DONE] or finish_reason"
            );
            Err(CompletionError::TruncatedStream {
                partial: Box::new(turn),
            })
        }
    }
}

/// Feeds the pieces of one parsed chunk into the assembly. The first failure (a
/// provider error or a limit) is kept and reported after the chunk; pieces after it
/// are ignored.
struct Sink<'a> {
    assembly: &'a mut Assembly,
    out: &'a mut Vec<CompletionDelta>,
    failure: Option<DecodeError>,
}

impl ChunkSink for Sink<'_> {
    fn content(&mut self, raw: &RawValue) {
        if self.failure.is_none()
            && let Err(error) = self.assembly.apply_content(raw, self.out)
        {
            self.failure = Some(error);
        }
    }

    fn tool_call(&mut self, call: &ToolCallDto<'_>, position: usize) {
        if self.failure.is_some() {
            return;
        }
        let fallback = if self.assembly.whole_response {
            u32::try_from(position).ok()
        } else {
            None
        };
        if let Err(error) = self.assembly.apply_tool_call(call, fallback, self.out) {
            self.failure = Some(error);
        }
    }

    fn function_call(&mut self, function: &FunctionDto<'_>) {
        if self.failure.is_some() {
            return;
        }
        let call = ToolCallDto {
            index: None,
            id: None,
            kind: None,
            function: Some(FunctionDto {
                name: function.name.clone(),
                arguments: function.arguments,
            }),
        };
        if let Err(error) = self.assembly.apply_tool_call(&call, None, self.out) {
            self.failure = Some(error);
        }
    }

    fn finish_reason(&mut self, reason: &str) {
        if self.failure.is_none() {
            self.assembly.set_finish_reason(reason);
        }
    }

    fn usage(&mut self, usage: &UsageDto) {
        self.assembly.set_usage(usage);
    }

    fn model(&mut self, model: &str) {
        if self.assembly.model.is_none() {
            self.assembly.model = Some(model.to_owned());
        }
    }

    fn error(&mut self, raw: &RawValue) {
        if self.failure.is_none() {
            self.failure = Some(provider_error_from_json(raw.get()));
        }
    }

    fn other_choice(&mut self) {
        if !self.assembly.warned_choices {
            self.assembly.warned_choices = true;
            tracing::warn!("ignoring choices other than choice 0");
        }
    }
}

/// Appends a fragment, detecting cumulative resends.
fn append_fragment(slot: &mut CallSlot, fragment: &str) {
    if fragment.is_empty() {
        return;
    }
    let accumulated = slot.arguments.as_bytes();
    if !accumulated.is_empty()
        && fragment.len() >= accumulated.len()
        && fragment.as_bytes().starts_with(accumulated)
    {
        if !slot.cumulative {
            slot.cumulative = true;
            tracing::debug!(
                index = slot.position,
                "tool call arguments are resent cumulatively"
            );
        }
        // `fragment` starts with the whole (valid UTF-8) accumulated text, so the
        // split falls on a character boundary.
        if let Some(tail) = fragment.get(accumulated.len()..) {
            slot.arguments.push_str(tail);
        }
        return;
    }
    slot.arguments.push_str(fragment);
}

/// Decides a call's outcome; an empty argument text becomes `{}`.
fn classify(arguments: String, cut: bool) -> (String, ToolCallOutcome) {
    if arguments.trim_ascii().is_empty() {
        return (String::from("{}"), ToolCallOutcome::Complete);
    }
    let outcome = match serde_json::from_str::<IgnoredAny>(&arguments) {
        Ok(_) => ToolCallOutcome::Complete,
        Err(error) if cut && error.is_eof() => ToolCallOutcome::Truncated,
        Err(_) => ToolCallOutcome::InvalidJson,
    };
    (arguments, outcome)
}

fn mint_id(minting: IdMinting, counter: &mut u32) -> String {
    let n = *counter;
    *counter = counter.saturating_add(1);
    match minting {
        IdMinting::Uuid => format!("call_{}", uuid::Uuid::new_v4().simple()),
        IdMinting::Sequential => format!("call_minted_{n}"),
    }
}

fn non_empty<'s>(value: Option<&'s Str<'_>>) -> Option<&'s str> {
    value.map(Str::as_str).filter(|s| !s.is_empty())
}

fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "stop" => FinishReason::Stop,
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        "length" => FinishReason::Length,
        "content_filter" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_owned()),
    }
}

fn category(error: &serde_json::Error) -> &'static str {
    match error.classify() {
        serde_json::error::Category::Io => "io",
        serde_json::error::Category::Syntax => "syntax",
        serde_json::error::Category::Data => "data",
        serde_json::error::Category::Eof => "unexpected end",
    }
}

/// Longest provider message kept in an error.
const MAX_PROVIDER_MESSAGE: usize = 2000;

/// The error of an `event: error` frame: JSON (`{"error": ...}` or an error object)
/// or plain text.
fn error_event(data: &str) -> DecodeError {
    match serde_json::from_str::<Value>(data) {
        Ok(Value::Object(mut map)) => match map.remove("error") {
            Some(inner) => provider_error(inner),
            None => provider_error(Value::Object(map)),
        },
        Ok(other) => provider_error(other),
        Err(_) => DecodeError::Provider {
            code: None,
            message: bounded(data.trim()),
        },
    }
}

/// The error of an in-band `{"error": ...}` frame or body, from its raw JSON.
pub(crate) fn provider_error_from_json(raw: &str) -> DecodeError {
    provider_error(serde_json::from_str::<Value>(raw).unwrap_or(Value::Null))
}

/// Reads OpenAI's error object (`message`, `code`, `type`), or a bare string.
pub(crate) fn provider_error(error: Value) -> DecodeError {
    let (code, message) = match &error {
        Value::String(message) => (None, Some(message.clone())),
        Value::Object(map) => {
            let message = map.get("message").and_then(|m| match m {
                Value::String(s) => Some(s.clone()),
                Value::Null => None,
                other => Some(other.to_string()),
            });
            let code = [map.get("code"), map.get("type")]
                .into_iter()
                .flatten()
                .find_map(|c| match c {
                    Value::String(s) if !s.is_empty() => Some(s.clone()),
                    Value::Number(n) => Some(n.to_string()),
                    _ => None,
                });
            (code, message)
        }
        _ => (None, None),
    };
    DecodeError::Provider {
        code,
        message: bounded(
            message
                .as_deref()
                .filter(|m| !m.trim().is_empty())
                .unwrap_or("the provider reported an error without a message"),
        ),
    }
}

/// Cuts a provider message to [`MAX_PROVIDER_MESSAGE`] bytes on a char boundary.
pub(crate) fn bounded(message: &str) -> String {
    if message.len() <= MAX_PROVIDER_MESSAGE {
        return message.to_owned();
    }
    let mut end = MAX_PROVIDER_MESSAGE;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &message[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(
        stream: &str,
    ) -> (
        Vec<CompletionDelta>,
        Result<CompletionFinal, CompletionError>,
    ) {
        let mut decoder = Decoder::with_options(DecoderOptions {
            id_minting: IdMinting::Sequential,
            model: "req-model".into(),
            ..DecoderOptions::default()
        });
        let mut out = Vec::new();
        let fed = decoder.feed(stream.as_bytes(), &mut out);
        match fed {
            Ok(()) => {
                let result = decoder.finish_into(&mut out);
                (out, result)
            }
            Err(error) => (out, Err(error.into())),
        }
    }

    #[test]
    fn classify_outcomes() {
        assert_eq!(
            classify(String::new(), false),
            ("{}".into(), ToolCallOutcome::Complete)
        );
        assert_eq!(classify(" ".into(), true).1, ToolCallOutcome::Complete);
        assert_eq!(
            classify(r#"{"a":1}"#.into(), true).1,
            ToolCallOutcome::Complete
        );
        assert_eq!(
            classify(r#"{"a":"#.into(), true).1,
            ToolCallOutcome::Truncated
        );
        assert_eq!(
            classify(r#"{"a":"#.into(), false).1,
            ToolCallOutcome::InvalidJson
        );
        assert_eq!(
            classify(r#"{"a":1}}"#.into(), true).1,
            ToolCallOutcome::InvalidJson
        );
        assert_eq!(
            classify(r#"{a:1}"#.into(), true).1,
            ToolCallOutcome::InvalidJson
        );
    }

    #[test]
    fn missing_ids_are_minted_once_and_stay_stable() {
        let (deltas, result) = decode(concat!(
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\"\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\":1}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\n",
        ));
        let turn = result.unwrap();
        assert_eq!(turn.tool_calls[0].id, "call_minted_0");
        assert_eq!(turn.tool_calls[0].arguments, r#"{"a":1}"#);
        assert_eq!(
            deltas[0],
            CompletionDelta::ToolCallStart {
                index: 0,
                id: "call_minted_0".into(),
                name: "f".into()
            }
        );
        let uuid_id = mint_id(IdMinting::Uuid, &mut 0);
        assert!(
            uuid_id.starts_with("call_") && uuid_id.len() == 5 + 32,
            "{uuid_id}"
        );
    }

    #[test]
    fn usage_model_falls_back_to_the_request_model() {
        let (deltas, result) = decode(concat!(
            "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\n",
            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4}}\n\n",
            "data: [DONE]\n\n",
        ));
        let usage = result.unwrap().usage.unwrap();
        assert_eq!((usage.model.as_str(), usage.total_tokens), ("req-model", 7));
        assert_eq!(deltas.last(), Some(&CompletionDelta::Usage(usage)));
    }

    #[test]
    fn errors_after_failure_repeat_and_never_echo_payloads() {
        let mut decoder = Decoder::new();
        let err = decoder.feed(
            b"data: {\"choices\": [{\"index\": \"secret-ish\"}]}\n\n",
            &mut Vec::new(),
        );
        let err = err.unwrap_err();
        assert!(!err.to_string().contains("secret-ish"), "{err}");
        assert_eq!(decoder.feed(b"data: [DONE]\n\n", &mut Vec::new()), Err(err));
    }

    #[test]
    fn provider_error_shapes() {
        assert_eq!(
            provider_error_from_json(r#"{"message":"m","type":"t","code":429}"#),
            DecodeError::Provider {
                code: Some("429".into()),
                message: "m".into()
            }
        );
        assert_eq!(
            provider_error_from_json(r#""plain""#),
            DecodeError::Provider {
                code: None,
                message: "plain".into()
            }
        );
        assert!(
            matches!(error_event("not json"), DecodeError::Provider { message, .. } if message == "not json")
        );
        let long = "é".repeat(5000);
        assert!(bounded(&long).len() <= MAX_PROVIDER_MESSAGE + '…'.len_utf8());
    }

    #[test]
    fn a_body_that_is_no_event_stream_is_a_protocol_error() {
        let (_, result) = decode("{\"error\": {\"message\": \"not sse\"}}");
        assert!(
            matches!(result, Err(CompletionError::Protocol { .. })),
            "{result:?}"
        );
        let (_, result) = decode("<html>bad gateway</html>");
        assert!(
            matches!(result, Err(CompletionError::Protocol { .. })),
            "{result:?}"
        );
        // Only keepalives, then the connection dropped: a truncated stream.
        let (_, result) = decode(": keepalive\n\n");
        assert!(
            matches!(result, Err(CompletionError::TruncatedStream { .. })),
            "{result:?}"
        );
        let (_, result) = decode("");
        assert!(
            matches!(result, Err(CompletionError::TruncatedStream { .. })),
            "{result:?}"
        );
    }

    #[test]
    fn the_turn_size_is_bounded() {
        let mut decoder = Decoder::with_options(DecoderOptions {
            max_turn_bytes: 10,
            ..DecoderOptions::default()
        });
        let event = "data: {\"choices\":[{\"delta\":{\"content\":\"123456\"}}]}\n\n";
        decoder.feed(event.as_bytes(), &mut Vec::new()).unwrap();
        assert!(matches!(
            decoder.feed(event.as_bytes(), &mut Vec::new()),
            Err(DecodeError::Protocol { .. })
        ));
    }

    #[test]
    fn envelope_skipping_keeps_error_positions_and_model() {
        let head = r#"{"id":"x","model":"m1","choices":[{"delta":{"content":"a"}}]}"#;
        let bad = r#"{"id":"x","model":"m1","choices":[{"delta":{"content":"b"}}]]}"#;
        let (_, result) = decode(&format!("data: {head}\n\ndata: {bad}\n\n"));
        let Err(CompletionError::Protocol { message }) = result else {
            panic!("{result:?}")
        };
        let (_, alone) = decode(&format!("data: {bad}\n\n"));
        let Err(CompletionError::Protocol { message: alone }) = alone else {
            panic!()
        };
        assert_eq!(message, alone);
        // A later chunk with another envelope is parsed whole; the first model wins.
        let other = r#"{"id":"y","model":"m2","choices":[{"delta":{"content":"c"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1}}"#;
        let (_, result) = decode(&format!(
            "data: {head}\n\ndata: {head}\n\ndata: {other}\n\ndata: [DONE]\n\n"
        ));
        let turn = result.unwrap();
        assert_eq!(turn.text, "aac");
        assert_eq!(turn.usage.unwrap().model, "m1");
    }

    #[test]
    fn too_many_calls_is_a_protocol_error() {
        let mut decoder = Decoder::with_options(DecoderOptions {
            max_tool_calls: 2,
            ..DecoderOptions::default()
        });
        let mut stream = String::new();
        for i in 0..3 {
            stream.push_str(&format!(
                "data: {{\"choices\":[{{\"delta\":{{\"tool_calls\":[{{\"index\":{i},\"id\":\"c{i}\",\"function\":{{\"name\":\"f\"}}}}]}}}}]}}\n\n"
            ));
        }
        assert!(matches!(
            decoder.feed(stream.as_bytes(), &mut Vec::new()),
            Err(DecodeError::Protocol { .. })
        ));
    }
}
