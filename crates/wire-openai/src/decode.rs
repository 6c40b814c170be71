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
//! - **a name split over deltas** (`"get_"`, then `"weather"` at the same index):
//!   while a call has no argument text yet and its start was not announced, a name
//!   fragment at its index continues the name. A fragment that equals the name so
//!   far is a resend (some servers repeat the full name on every delta) and one that
//!   starts with it is a cumulative resend: the name becomes that fragment, never a
//!   doubled name. A call's start delta is therefore emitted only once its name is
//!   settled: when its first argument text arrives, when a delta for another call or
//!   text arrives, at `[DONE]` or at the end of the stream.
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
//!   `prompt_tokens_details.cached_tokens` (or DeepSeek's `prompt_cache_hit_tokens`)
//!   and `completion_tokens_details.reasoning_tokens` are reported when present, also
//!   inside Groq's `x_groq.usage`.
//! - **the usage model** is the first non-empty `model` of the stream (Azure's first
//!   chunk, with the prompt filter results, has `"model": ""`), else
//!   [`DecoderOptions::model`].
//! - **reasoning** in `delta.reasoning_content` (DeepSeek, vLLM before 0.10, SGLang,
//!   llama.cpp) or `delta.reasoning` (OpenRouter, Ollama, Groq, newer vLLM), and in
//!   `message.*` of a whole response, becomes [`CompletionDelta::Reasoning`] and
//!   [`CompletionFinal::reasoning`], never answer text. A delta carrying both fields
//!   (vLLM during its rename sends the same text in each) counts the first one with
//!   text only. A turn without reasoning text has `reasoning: None`.
//! - **refusals** (`delta.refusal`, `message.refusal`, `refusal` content parts)
//!   become [`CompletionDelta::Refusal`] and [`CompletionFinal::refusal`].
//! - **provider extras on a call** (`extra_content`, e.g. Gemini's
//!   `{"google": {"thought_signature": "..."}}`) are kept whole in
//!   [`AssembledToolCall::raw`] for the encoder to send back. Over several deltas of
//!   one call the objects are merged by top-level key, the last non-null value of a
//!   key winning; a value that is not an object replaces what was kept.
//! - **`{"error": ...}`** in the stream (or an `event: error`, or Gemini's array form
//!   `[{"error": ...}]`) fails the session with [`DecodeError::Provider`], carrying
//!   the provider's code and message. So does OpenRouter's `finish_reason: "error"`
//!   (its `error` object, when present, gives code and message). Provider messages
//!   are cut to 1 KiB (UTF-8 safe) and anything that looks like a credential (bearer
//!   tokens, `sk-...`-style keys, `key=` parameters) is replaced by `[redacted]`.
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
//!   error, not an empty turn, unless it is a JSON error body (`{"error": ...}`, an
//!   error object, or the array form): then it is that [`DecodeError::Provider`]
//!   (servers that send their error with `text/event-stream` or without a content
//!   type). The turn's text, reasoning and arguments are bounded by
//!   [`DecoderOptions::max_turn_bytes`].
//!
//! # Speed
//!
//! Chunks are parsed by streaming serde visitors straight into the assembly: no
//! chunk struct is built, strings are borrowed or unescaped into reused buffers, and
//! a turn allocates only its own text and argument buffers, in every [`DeltaMode`]
//! when deltas are taken borrowed ([`Decoder::feed_with`]).
//!
//! Most of a chunk repeats byte for byte from chunk to chunk: the envelope (`id`,
//! `object`, `created`, `model`, fingerprint), `"choices":[{"index":0,"delta":` and,
//! after the delta, `"logprobs":null,"finish_reason":null}],"usage":null}`. The
//! decoder learns these bytes from a chunk it parsed whole; a later chunk that
//! starts with the same head, and whose tail is the same bytes or is checked to
//! act on nothing (a changing `obfuscation` padding, say), has only its delta
//! parsed. Identical bytes would parse to identical values, none of which acts, so
//! the pieces, their order, the final and even the errors (a malformed chunk is
//! parsed again whole for its message) are those of a whole parse; the fuzz entry
//! checks this against a decoder that parses every chunk whole. A chunk that only
//! starts with the learned envelope is parsed without it. `benches/decode.rs`
//! compares this with serde_json's own floor (every payload parsed into
//! `IgnoredAny`), a `serde_json::Value` decoder and eventsource-stream plus owned
//! structs.
//!
//! # Deltas
//!
//! Deltas are emitted as events complete: text, reasoning, refusal, a call's start
//! (once its name is settled), argument fragments, and usage (once, when `[DONE]`
//! arrives: some providers repeat cumulative usage, so emitting earlier could double
//! count; it is always in the final). [`DeltaMode`] turns off the per-fragment deltas
//! or all deltas, for callers that only want the final.
//!
//! They are handed out two ways, the same deltas in the same order:
//! - borrowed: [`Decoder::feed_with`] gives each one to a [`DeltaSink`] (a closure
//!   will do) as a [`DeltaRef`] pointing into the decoder's own buffers (the turn's
//!   text and argument texts, which it keeps for the final anyway). Nothing is
//!   copied or allocated per delta: for callers that show text as it arrives or
//!   forward it, and keep nothing;
//! - owned: [`Decoder::feed`] appends [`CompletionDelta`]s to a caller's vector, one
//!   allocation per delta, for callers that keep them (the completion port, whose
//!   consumer holds each delta past the call).

use std::borrow::Cow;

use ai_core::{
    completion::{
        AssembledToolCall, CompletionDelta, CompletionError, CompletionFinal, FinishReason,
        ToolCallOutcome,
    },
    event::UsageFact,
};
use serde::de::IgnoredAny;
use serde_json::Value;

use crate::sse::{self, DEFAULT_MAX_EVENT_BYTES, RawSseEvent, SseError};
use completion_http::{Assembler, FromDeltas, SseDecoder};
use serde_json::value::RawValue;

use crate::wire::{self, ChunkSink, FunctionDto, RawText, Str, ToolCallDto, UsageDto};

/// Which deltas the decoder emits. The final is assembled the same in every mode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum DeltaMode {
    /// Text, tool-call starts, every argument fragment, usage.
    #[default]
    All,
    /// Text, tool-call starts and usage; no per-fragment deltas (with owned
    /// deltas, no allocation per argument fragment).
    SkipArgFragments,
    /// No deltas at all: only the final.
    AssembleOnly,
}

/// How ids are minted for calls the provider sent without one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
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
    /// Model id reported in usage when the stream names none, or only empty ones
    /// (normally the request's model).
    pub model: String,
    /// Upper bound of tool calls in one turn; more is a protocol error.
    pub max_tool_calls: usize,
    /// Upper bound of one SSE line or event's data, in bytes.
    pub max_event_bytes: usize,
    /// Upper bound of the assembled text, reasoning, refusal, argument texts, tool
    /// names, ids and provider extras of the turn, in bytes; more is a protocol error
    /// (a guard against endless streams).
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

/// One delta of a turn as the decoder hands it to a [`DeltaSink`]: the same pieces
/// as [`CompletionDelta`], borrowing from the decoder (valid until the sink
/// returns). [`DeltaRef::into_owned`] makes the [`CompletionDelta`] of it, for a
/// consumer that keeps it.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum DeltaRef<'a> {
    /// Assistant text.
    Text(&'a str),
    /// A piece of the model's reasoning (never part of the answer text).
    Reasoning(&'a str),
    /// A piece of a refusal.
    Refusal(&'a str),
    /// A tool call opened, once its name is settled (the id minted when the
    /// provider gave none).
    ToolCallStart {
        /// Position of the call in the turn.
        index: u32,
        /// Call id.
        id: &'a str,
        /// Function name.
        name: &'a str,
    },
    /// A fragment of a call's argument text ([`DeltaMode::All`] only).
    ToolCallArgs {
        /// Position of the call in the turn.
        index: u32,
        /// The fragment.
        fragment: &'a str,
    },
    /// Token usage of the call (once, when `[DONE]` arrives or a whole response
    /// is read).
    Usage(&'a UsageFact),
}

impl DeltaRef<'_> {
    /// The owned [`CompletionDelta`] of this delta (allocates its strings).
    pub fn into_owned(self) -> CompletionDelta {
        match self {
            Self::Text(text) => CompletionDelta::Text(text.to_owned()),
            Self::Reasoning(text) => CompletionDelta::Reasoning(text.to_owned()),
            Self::Refusal(text) => CompletionDelta::Refusal(text.to_owned()),
            Self::ToolCallStart { index, id, name } => CompletionDelta::ToolCallStart {
                index,
                id: id.to_owned(),
                name: name.to_owned(),
            },
            Self::ToolCallArgs { index, fragment } => CompletionDelta::ToolCallArgs {
                index,
                fragment: fragment.to_owned(),
            },
            Self::Usage(usage) => CompletionDelta::Usage(usage.clone()),
        }
    }
}

/// Receives the deltas of a decode session as events complete
/// ([`Decoder::feed_with`], [`Decoder::finish_with`]).
///
/// Implemented by closures taking a [`DeltaRef`], and by `Vec<CompletionDelta>`,
/// which keeps an owned copy of each delta (what [`Decoder::feed`] does).
pub trait DeltaSink {
    /// Takes one delta; what it borrows is valid only during the call.
    fn delta(&mut self, delta: DeltaRef<'_>);
}

impl DeltaSink for Vec<CompletionDelta> {
    fn delta(&mut self, delta: DeltaRef<'_>) {
        self.push(delta.into_owned());
    }
}

impl<'s> FromDeltas for dyn DeltaSink + 's {
    fn from_deltas(out: &mut Vec<CompletionDelta>) -> &mut Self {
        out
    }
}

impl<F: FnMut(DeltaRef<'_>)> DeltaSink for F {
    fn delta(&mut self, delta: DeltaRef<'_>) {
        self(delta);
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
///
/// The shared shell ([`SseDecoder`]) frames the stream and keeps the first error;
/// [`OpenAiAssembler`] assembles. Deltas come out owned ([`SseDecoder::feed`],
/// one allocation per delta, for callers that keep them) or borrowed
/// ([`SseDecoder::feed_with`] and [`SseDecoder::finish_with`] hand each one to a
/// [`DeltaSink`] as a [`DeltaRef`] pointing into the decoder's own buffers:
/// nothing is copied or allocated per delta); the deltas, their order and the
/// final are the same either way:
///
/// ```
/// use wire_openai::decode::{Decoder, DeltaRef};
///
/// let mut decoder = Decoder::new();
/// let mut shown = String::new();
/// let mut show = |delta: DeltaRef<'_>| {
///     if let DeltaRef::Text(text) = delta {
///         shown.push_str(text);
///     }
/// };
/// decoder
///     .feed_with(b"data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\n", &mut show)
///     .unwrap();
/// decoder
///     .feed_with(b"data: {\"choices\":[{\"delta\":{\"content\":\"lo\"},\"finish_reason\":\"stop\"}]}\n\n", &mut show)
///     .unwrap();
/// let turn = decoder.finish_with(&mut show).unwrap();
/// assert_eq!((shown.as_str(), turn.text.as_str()), ("Hello", "Hello"));
/// ```
///
/// [`SseDecoder::finish`] fails with the feed error if there was one, and with
/// [`CompletionError::TruncatedStream`] (holding everything assembled) when the
/// stream ended without `[DONE]` and without a `finish_reason`. A body that is
/// JSON (an error) or HTML instead of an event stream is told apart (see the
/// module docs).
pub type Decoder = SseDecoder<OpenAiAssembler>;

/// A decoder that parses every chunk whole, skipping neither envelopes nor the
/// bytes around deltas: the reference the fuzz entry compares the decoder with.
pub(crate) fn parsing_whole_chunks(options: DecoderOptions) -> Decoder {
    let mut assembler = OpenAiAssembler::new(options);
    assembler.shortcuts = false;
    Decoder::from_assembler(assembler)
}

impl Assembler for OpenAiAssembler {
    type Options = DecoderOptions;
    type Error = DecodeError;
    type Sink<'s> = dyn DeltaSink + 's;

    const TELLS_NON_STREAM_BODIES: bool = true;

    fn start(options: DecoderOptions) -> Self {
        Self::new(options)
    }

    fn max_event_bytes(&self) -> usize {
        self.options.max_event_bytes
    }

    fn on_event(
        &mut self,
        event: RawSseEvent<'_>,
        out: &mut (dyn DeltaSink + '_),
    ) -> Result<(), DecodeError> {
        self.event(event, out)
    }

    /// Whether `[DONE]` arrived.
    fn is_done(&self) -> bool {
        self.done
    }

    fn into_final(
        mut self,
        out: &mut (dyn DeltaSink + '_),
    ) -> Result<CompletionFinal, CompletionError> {
        self.announce_pending(None, out);
        self.finalize()
    }

    /// The tail may be a frame cut in half by a dropped connection: a malformed
    /// tail is a truncation, not a protocol error. A provider error is kept.
    fn cut_tail_is_truncation(error: &DecodeError) -> bool {
        matches!(error, DecodeError::Protocol { .. })
    }

    /// A JSON error body (`{"error": ...}`, an error object, or the array form)
    /// is that provider error; other JSON is a protocol error.
    fn json_body_error(body: &[u8]) -> CompletionError {
        match json_error(body) {
            Some((code, message)) => provider_error_parts(code, message).into(),
            None => CompletionError::Protocol {
                message: "the response body is JSON, not a server-sent event stream".into(),
            },
        }
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
    let mut assembly = OpenAiAssembler::new(options);
    assembly.whole_response = true;
    assembly.on_data(body.trim_ascii(), out)?;
    assembly.done = true;
    assembly.announce_pending(None, out);
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
    /// The provider's `extra_content` of the call, merged over its deltas.
    raw: Option<Value>,
}

impl CallSlot {
    /// The id the provider gave, if any (not a minted one).
    fn provider_id(&self) -> Option<&str> {
        self.id.as_deref().filter(|_| !self.id_minted)
    }

    /// Whether a name fragment may still extend the name: no argument text yet and
    /// no start delta emitted.
    fn name_open(&self) -> bool {
        !self.announced && self.arguments.is_empty()
    }
}

/// How many chunks of a session may be scanned to learn where their delta sits.
const LEARNING_BUDGET: u8 = 16;

/// The chat-completions stream's state machine: the turn's text, reasoning and
/// refusal, its tool calls by index, usage and finish reason ([`Decoder`] feeds it
/// the stream's events; [`decode_response`] a whole response).
pub struct OpenAiAssembler {
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
    /// The provider's finish reason when [`FinishReason`] does not say it
    /// exactly ([`CompletionFinal::raw_finish_reason`]).
    raw_finish_reason: Option<String>,
    length_seen: bool,
    /// Reasoning text of the turn (no allocation while there is none).
    reasoning: String,
    /// Some of the reasoning came as typed `thinking` content parts (Mistral):
    /// it is streamed and recorded but never sent back, since Mistral refuses
    /// `reasoning_content` on a request's assistant message (HTTP 422,
    /// `extra_forbidden`).
    reasoning_in_parts: bool,
    /// Refusal text of the turn.
    refusal: String,
    /// A call has a name but its start delta is not emitted yet (at most one: the
    /// call touched last).
    pending_start: bool,
    usage: Option<UsageFact>,
    usage_emitted: bool,
    model: Option<String>,
    /// The first non-empty `id` of the stream (a chunk parsed whole carries it;
    /// the chunks that repeat its envelope or head, the same one).
    response_id: Option<String>,
    done: bool,
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
    /// The bytes of this stream's chunks before the delta (see `on_data`); empty
    /// until learned.
    head: Vec<u8>,
    /// The bytes after the delta in the chunk `head` was learned from.
    tail: Vec<u8>,
    /// How many more chunks may be scanned to learn `head` and `tail`.
    learning_budget: u8,
    /// Chunks whose delta was parsed alone.
    deltas_alone: u64,
    /// Envelope and delta skipping are on (off only for the reference decode the
    /// fuzz entry compares with).
    shortcuts: bool,
    /// Text and argument bytes assembled so far (bounded by `max_turn_bytes`).
    turn_bytes: usize,
}

impl OpenAiAssembler {
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
            raw_finish_reason: None,
            length_seen: false,
            reasoning: String::new(),
            reasoning_in_parts: false,
            refusal: String::new(),
            pending_start: false,
            usage: None,
            usage_emitted: false,
            model: None,
            response_id: None,
            done: false,
            minted: 0,
            warned_choices: false,
            whole_response: false,
            scratch: String::new(),
            envelope: Vec::new(),
            json_scratch: String::new(),
            head: Vec::new(),
            tail: Vec::new(),
            learning_budget: LEARNING_BUDGET,
            deltas_alone: 0,
            shortcuts: true,
            turn_bytes: 0,
        }
    }

    fn event(
        &mut self,
        event: RawSseEvent<'_>,
        out: &mut dyn DeltaSink,
    ) -> Result<(), DecodeError> {
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
            self.announce_pending(None, out);
            self.emit_usage(out);
            return Ok(());
        }
        self.on_data(data, out)
    }

    fn on_data(&mut self, data: &[u8], out: &mut dyn DeltaSink) -> Result<(), DecodeError> {
        if let Some(delta) = self.delta_alone(data) {
            self.deltas_alone += 1;
            return self.on_delta(delta, data, out);
        }
        // Envelope skipping: the members before `choices` (id, object, created,
        // model, fingerprint) repeat byte for byte in every chunk of a stream. When
        // this chunk starts with the envelope of an earlier, fully parsed chunk, only
        // the rest is checked as UTF-8 and parsed: identical bytes would parse to
        // identical values, and the envelope holds no member this decoder acts on
        // except `model`, which is taken from the first chunk anyway.
        let mut json = std::mem::take(&mut self.json_scratch);
        let envelope = self.envelope.len();
        let reused = self.shortcuts && envelope > 0 && data.starts_with(&self.envelope);
        let whole;
        let mut learnable = false;
        let valid_utf8;
        let text = if reused {
            // The envelope ends with `,`, so the split is on a character boundary.
            json.clear();
            json.push('{');
            let rest = sse::utf8(&data[envelope..]);
            valid_utf8 = matches!(rest, Cow::Borrowed(_));
            json.push_str(&rest);
            json.as_str()
        } else {
            whole = sse::utf8(data);
            valid_utf8 = matches!(whole, Cow::Borrowed(_));
            learnable = valid_utf8 && self.shortcuts && !self.whole_response;
            &*whole
        };
        let mut sink = Sink {
            assembly: self,
            out,
            failure: None,
        };
        let parsed = wire::parse_chunk(text, &mut sink);
        let failure = sink.failure.take();
        if parsed.is_err()
            && data.first() == Some(&b'[')
            && let Some((code, message)) = json_error(data)
        {
            // Gemini sends errors as an array, `[{"error": {...}}]` (no chunk is an
            // array, so this is looked for only when a frame fails to parse).
            self.json_scratch = json;
            return Err(provider_error_parts(code, message));
        }
        if let Err(error) = parsed {
            self.json_scratch = json;
            return Err(if reused {
                malformed_chunk(data)
            } else {
                malformed(&error)
            });
        }
        // Learn the envelope from valid UTF-8 only, so raw and text bytes agree.
        if learnable {
            self.envelope.clear();
            if let Some(len) = wire::envelope_len(text) {
                self.envelope.extend_from_slice(&data[..len]);
            }
        }
        if valid_utf8 && self.shortcuts && !self.whole_response && self.learning_budget > 0 {
            self.learn_delta_span(data);
        }
        self.json_scratch = json;
        match failure {
            Some(error) => {
                // A failed call is billed too: the usage its error chunk
                // carried goes out before the error.
                self.emit_usage(out);
                Err(error)
            }
            None => Ok(()),
        }
    }

    /// Learns where deltas sit in this stream's chunks from `data`, a chunk that
    /// was parsed whole without error (see [`wire::delta_span`]). A bounded number of
    /// times per session, so a stream whose chunks never have that shape pays for
    /// the scan only a few times.
    fn learn_delta_span(&mut self, data: &[u8]) {
        self.learning_budget -= 1;
        if let Some(span) = wire::delta_span(data) {
            self.head.clear();
            self.head.extend_from_slice(&data[..span.head]);
            self.tail.clear();
            self.tail.extend_from_slice(&data[span.tail..]);
        }
    }

    /// The delta of a chunk that starts with the learned head, when the chunk is
    /// that head, one delta value and a tail that acts on nothing: the learned tail
    /// byte for byte, or one checked member by member (a tail that changes from
    /// chunk to chunk, like OpenAI's `obfuscation` padding). `None` sends the chunk
    /// to the whole parse.
    fn delta_alone<'d>(&self, data: &'d [u8]) -> Option<&'d str> {
        let head = self.head.len();
        if head == 0 || !self.shortcuts || !data.starts_with(&self.head) {
            return None;
        }
        let tail = self.tail.len();
        if tail > 0 && data.len() >= head + tail && data.ends_with(&self.tail) {
            wire::delta_of(&data[head..data.len() - tail])
        } else {
            let end = wire::inert_tail_start(data, head, self.model.is_some())?;
            std::str::from_utf8(&data[head..end]).ok()
        }
    }

    /// Applies a chunk's delta parsed alone ([`OpenAiAssembler::delta_alone`]): the same
    /// pieces in the same order as the whole parse would feed, and on malformed
    /// JSON the same error.
    fn on_delta(
        &mut self,
        delta: &str,
        data: &[u8],
        out: &mut dyn DeltaSink,
    ) -> Result<(), DecodeError> {
        let mut sink = Sink {
            assembly: self,
            out,
            failure: None,
        };
        let parsed = wire::parse_delta(delta, &mut sink);
        let failure = sink.failure.take();
        if parsed.is_err() {
            return Err(malformed_chunk(data));
        }
        match failure {
            Some(error) => Err(error),
            None => Ok(()),
        }
    }

    fn set_usage(&mut self, usage: &UsageDto) {
        let prompt_tokens = usage.prompt_tokens.unwrap_or(0);
        let completion_tokens = usage.completion_tokens.unwrap_or(0);
        self.usage = Some(UsageFact {
            cache_creation_tokens: None,
            cost_micros: usage
                .cost
                .as_ref()
                .and_then(serde_json::Value::as_f64)
                .and_then(UsageFact::micros_from_usd),
            model: String::new(),
            prompt_tokens,
            completion_tokens,
            total_tokens: usage
                .total_tokens
                .unwrap_or(prompt_tokens.saturating_add(completion_tokens)),
            cached_tokens: usage.cached_tokens(),
            reasoning_tokens: usage.reasoning_tokens(),
            response_model: None,
        });
    }

    fn set_finish_reason(&mut self, raw: &str) {
        let reason = finish_reason(raw);
        self.raw_finish_reason = (!USUAL_FINISH_REASONS.contains(&raw)).then(|| raw.to_owned());
        if reason == FinishReason::Length {
            self.length_seen = true;
        }
        self.finish_reason = Some(reason);
    }

    fn apply_content(
        &mut self,
        content: &serde_json::value::RawValue,
        out: &mut dyn DeltaSink,
    ) -> Result<(), DecodeError> {
        let mut scratch = std::mem::take(&mut self.scratch);
        let start = self.text.len();
        let refusal_start = self.refusal.len();
        let reasoning_start = self.reasoning.len();
        match wire::raw_text(content, &mut scratch) {
            RawText::Null => {}
            RawText::Str(text) => ai_core::text::append(&mut self.text, text),
            RawText::Other(json) => {
                // Content parts: [{"type": "text", "text": "..."},
                // {"type": "refusal", "refusal": "..."}, {"type": "thinking",
                // "thinking": [{"type": "text", "text": "..."}]} (Mistral's
                // reasoning models), ...].
                if let Ok(Value::Array(parts)) = serde_json::from_str::<Value>(json) {
                    for part in parts {
                        if part.get("type").and_then(Value::as_str) == Some("thinking") {
                            self.reasoning_in_parts = true;
                            thinking_text(&part, &mut self.reasoning);
                        } else if let Some(text) = part.get("text").and_then(Value::as_str) {
                            ai_core::text::append(&mut self.text, text);
                        } else if let Some(text) = part.get("refusal").and_then(Value::as_str) {
                            self.refusal.push_str(text);
                        }
                    }
                } else {
                    tracing::debug!("ignoring content that is neither text nor parts");
                }
            }
        }
        self.scratch = scratch;
        self.text_added(TextField::Reasoning, reasoning_start, out)?;
        self.text_added(TextField::Refusal, refusal_start, out)?;
        self.text_added(TextField::Text, start, out)
    }

    /// Appends a reasoning or refusal string (raw JSON) to the turn.
    fn apply_text(
        &mut self,
        field: TextField,
        raw: &serde_json::value::RawValue,
        out: &mut dyn DeltaSink,
    ) -> Result<(), DecodeError> {
        let mut scratch = std::mem::take(&mut self.scratch);
        let target = match field {
            TextField::Text => &mut self.text,
            TextField::Reasoning => &mut self.reasoning,
            TextField::Refusal => &mut self.refusal,
        };
        let start = target.len();
        match wire::raw_text(raw, &mut scratch) {
            RawText::Null => {}
            RawText::Str(text) => ai_core::text::append(target, text),
            RawText::Other(_) => tracing::debug!(?field, "ignoring a value that is not text"),
        }
        self.scratch = scratch;
        self.text_added(field, start, out)
    }

    /// Bounds and emits what was appended to `field` since `start`. A pending call
    /// start is emitted first: the provider moved on from that call's name.
    fn text_added(
        &mut self,
        field: TextField,
        start: usize,
        out: &mut dyn DeltaSink,
    ) -> Result<(), DecodeError> {
        let text = match field {
            TextField::Text => &self.text,
            TextField::Reasoning => &self.reasoning,
            TextField::Refusal => &self.refusal,
        };
        let added = text.len() - start;
        if added == 0 {
            return Ok(());
        }
        self.count_turn_bytes(added)?;
        if self.pending_start {
            self.announce_pending(None, out);
        }
        if self.options.deltas != DeltaMode::AssembleOnly {
            // The new text is handed out from the turn's own buffer: no copy.
            out.delta(match field {
                TextField::Text => DeltaRef::Text(&self.text[start..]),
                TextField::Reasoning => DeltaRef::Reasoning(&self.reasoning[start..]),
                TextField::Refusal => DeltaRef::Refusal(&self.refusal[start..]),
            });
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
        out: &mut dyn DeltaSink,
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
        if self.pending_start {
            // The provider moved on to another call: that call's name is settled.
            self.announce_pending(Some(slot_index), out);
        }

        let mut scratch = std::mem::take(&mut self.scratch);
        let deltas = self.options.deltas;
        let slot = &mut self.calls[slot_index];
        // Names, ids and provider extras count towards the turn's byte budget like
        // text and arguments: a provider cannot grow a turn without bound through them.
        let mut meta_added = 0;
        if let Some(id) = id {
            match &slot.id {
                None => {
                    meta_added += id.len();
                    slot.id = Some(id.to_owned());
                }
                Some(existing) if existing != id => {
                    tracing::debug!("keeping the first id of a tool call");
                }
                Some(_) => {}
            }
        }
        let mut name_added = 0;
        if let Some(name) = name {
            let name_before = slot.name.len();
            extend_name(slot, name);
            name_added = slot.name.len().saturating_sub(name_before);
        }
        if let Some(extra) = call.extra_content {
            // The rare path: measured by its JSON size.
            meta_added += serde_json::to_string(&extra).map_or(0, |text| text.len());
            merge_extra(&mut slot.raw, extra);
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
        // `pending_start` is false here: any pending start was emitted above.
        if slot.announced {
            if added > 0 && deltas == DeltaMode::All {
                out.delta(DeltaRef::ToolCallArgs {
                    index: slot.position,
                    fragment: &slot.arguments[before..],
                });
            }
        } else if !slot.name.is_empty() {
            if slot.arguments.is_empty() {
                // The name may go on in the next delta.
                self.pending_start = true;
            } else {
                self.announce(slot_index, out);
            }
        }
        self.count_turn_bytes(added.saturating_add(name_added).saturating_add(meta_added))
    }

    /// Emits the start delta of a call (and its argument text so far), minting its
    /// id if the provider gave none. The same in every [`DeltaMode`] but for the
    /// deltas, so minted ids do not depend on the mode.
    fn announce(&mut self, slot_index: usize, out: &mut dyn DeltaSink) {
        let minting = self.options.id_minting;
        let deltas = self.options.deltas;
        let Some(slot) = self.calls.get_mut(slot_index) else {
            return;
        };
        if slot.announced {
            return;
        }
        slot.announced = true;
        if slot.id.is_none() {
            slot.id = Some(mint_id(minting, &mut self.minted));
            slot.id_minted = true;
        }
        if deltas == DeltaMode::AssembleOnly {
            return;
        }
        out.delta(DeltaRef::ToolCallStart {
            index: slot.position,
            id: slot.id.as_deref().unwrap_or_default(),
            name: &slot.name,
        });
        if deltas == DeltaMode::All && !slot.arguments.is_empty() {
            out.delta(DeltaRef::ToolCallArgs {
                index: slot.position,
                fragment: &slot.arguments,
            });
        }
    }

    /// Emits the start of every named call not yet started, except `except`.
    fn announce_pending(&mut self, except: Option<usize>, out: &mut dyn DeltaSink) {
        if !self.pending_start {
            return;
        }
        self.pending_start = false;
        for slot_index in 0..self.calls.len() {
            if Some(slot_index) == except {
                continue;
            }
            if !self.calls[slot_index].announced && !self.calls[slot_index].name.is_empty() {
                self.announce(slot_index, out);
            }
        }
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
                        // A different name is another call only once this call's name
                        // is settled; before, it is the next piece of the name.
                        let other_name = matches!(name, Some(n) if !call.name.is_empty() && n != call.name && !call.name_open())
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
            raw: None,
        });
        let slot = self.calls.len() - 1;
        self.last_opened = Some(slot);
        Ok(slot)
    }

    fn emit_usage(&mut self, out: &mut dyn DeltaSink) {
        if self.usage_emitted || self.options.deltas == DeltaMode::AssembleOnly {
            return;
        }
        if let Some(usage) = self.usage_fact() {
            self.usage_emitted = true;
            out.delta(DeltaRef::Usage(&usage));
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
                raw: slot.raw,
            });
        }
        calls.sort_by_key(|call| call.index);
        if matches!(&self.finish_reason, Some(FinishReason::Other(reason)) if reason == "error") {
            // OpenRouter ends a failed generation with `finish_reason: "error"`; its
            // `error` object, when present, failed the session earlier.
            return Err(provider_error_parts(
                None,
                Some("the provider ended the turn with finish_reason \"error\"".into()),
            )
            .into());
        }
        let mut finish_reason = if self.length_seen {
            FinishReason::Length
        } else {
            self.finish_reason.take().unwrap_or(FinishReason::Unknown)
        };
        if finish_reason == FinishReason::Stop && !calls.is_empty() {
            tracing::debug!("finish_reason stop with tool calls; reporting tool_calls");
            finish_reason = FinishReason::ToolCalls;
        }
        // Reasoning from thinking parts is not the turn's to send back.
        let reasoning = non_empty_text(std::mem::take(&mut self.reasoning))
            .filter(|_| !std::mem::take(&mut self.reasoning_in_parts));
        let turn = CompletionFinal {
            blocks: Vec::new(),
            text: std::mem::take(&mut self.text),
            tool_calls: calls,
            finish_reason,
            raw_finish_reason: self.raw_finish_reason.take(),
            response_id: self.response_id.take(),
            usage: self.usage_fact(),
            reasoning,
            refusal: non_empty_text(std::mem::take(&mut self.refusal)),
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
    assembly: &'a mut OpenAiAssembler,
    out: &'a mut dyn DeltaSink,
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

    fn reasoning(&mut self, raw: &RawValue) {
        if self.failure.is_none()
            && let Err(error) = self
                .assembly
                .apply_text(TextField::Reasoning, raw, self.out)
        {
            self.failure = Some(error);
        }
    }

    fn refusal(&mut self, raw: &RawValue) {
        if self.failure.is_none()
            && let Err(error) = self.assembly.apply_text(TextField::Refusal, raw, self.out)
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
            extra_content: None,
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
        // The first non-empty model wins: Azure's first chunk has `"model": ""`.
        if self.assembly.model.is_none() && !model.is_empty() {
            self.assembly.model = Some(model.to_owned());
        }
    }

    fn id(&mut self, id: &str) {
        // The first non-empty id wins, as the model does.
        if self.assembly.response_id.is_none() && !id.is_empty() {
            self.assembly.response_id = Some(id.to_owned());
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

/// Which text of the turn a string goes to.
#[derive(Debug, Clone, Copy)]
enum TextField {
    Text,
    Reasoning,
    Refusal,
}

/// Adds a name (fragment) to a call: see "a name split over deltas" in the module
/// docs.
fn extend_name(slot: &mut CallSlot, name: &str) {
    if slot.name.is_empty() {
        slot.name.push_str(name);
    } else if slot.name == name {
        // A resend of the whole name.
    } else if !slot.name_open() {
        tracing::debug!(
            index = slot.position,
            "keeping the first name of a tool call"
        );
    } else if name.starts_with(slot.name.as_str()) {
        // A cumulative resend: the name so far and more.
        slot.name.clear();
        slot.name.push_str(name);
    } else {
        slot.name.push_str(name);
    }
}

/// Merges a call's `extra_content` into what was kept: objects by top-level key,
/// the last non-null value of a key winning; any other non-null value replaces it.
fn merge_extra(kept: &mut Option<Value>, extra: &RawValue) {
    let Ok(value) = serde_json::from_str::<Value>(extra.get()) else {
        return;
    };
    match (kept, value) {
        (_, Value::Null) => {}
        (Some(Value::Object(kept)), Value::Object(new)) => {
            for (key, value) in new {
                if !value.is_null() {
                    kept.insert(key, value);
                }
            }
        }
        (kept, Value::Object(mut new)) => {
            new.retain(|_, value| !value.is_null());
            if !new.is_empty() {
                *kept = Some(Value::Object(new));
            }
        }
        (kept, other) => *kept = Some(other),
    }
}

fn non_empty_text(text: String) -> Option<String> {
    (!text.is_empty()).then_some(text)
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

/// Appends the text of a `thinking` content part to `reasoning`: its
/// `thinking` is a string, or a list of parts whose `text` is read.
fn thinking_text(part: &Value, reasoning: &mut String) {
    match part.get("thinking") {
        Some(Value::String(text)) => reasoning.push_str(text),
        Some(Value::Array(pieces)) => {
            for piece in pieces {
                if let Some(text) = piece.get("text").and_then(Value::as_str) {
                    reasoning.push_str(text);
                }
            }
        }
        _ => {}
    }
}

fn non_empty<'s>(value: Option<&'s Str<'_>>) -> Option<&'s str> {
    value.map(Str::as_str).filter(|s| !s.is_empty())
}

/// The finish reasons of chat completions that [`FinishReason`] says exactly.
const USUAL_FINISH_REASONS: &[&str] = &[
    "stop",
    "tool_calls",
    "function_call",
    "length",
    "content_filter",
];

/// A finish reason in the contract's words. xAI names its reasons as its own
/// API does (`REASON_MAX_LEN` for the token limit, `REASON_STOP`, ...).
fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "stop" | "REASON_STOP" => FinishReason::Stop,
        "tool_calls" | "function_call" | "REASON_TOOL_CALLS" => FinishReason::ToolCalls,
        "length" | "REASON_MAX_LEN" | "REASON_MAX_CONTEXT" => FinishReason::Length,
        "content_filter" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_owned()),
    }
}

/// The protocol error of a chunk that is not valid JSON, from its whole parse's
/// error.
fn malformed(error: &serde_json::Error) -> DecodeError {
    DecodeError::Protocol {
        message: format!(
            "malformed JSON in a response event ({} error at line {} column {})",
            category(error),
            error.line(),
            error.column()
        ),
    }
}

/// The protocol error of a chunk that failed to parse without its envelope or
/// around its delta: the chunk is parsed again whole, acting on nothing, so the
/// error says what and where a whole parse would (rare: only malformed chunks).
fn malformed_chunk(data: &[u8]) -> DecodeError {
    match wire::parse_chunk(&sse::utf8(data), &mut wire::Inert) {
        Err(error) => malformed(&error),
        Ok(()) => DecodeError::Protocol {
            message: "malformed JSON in a response event".into(),
        },
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

/// Longest provider message kept in an error, in bytes.
const MAX_PROVIDER_MESSAGE: usize = 1024;

/// Longest provider error code kept, in bytes.
const MAX_PROVIDER_CODE: usize = 64;

/// Longest error body (or JSON body sent in place of a stream) that is read.
const MAX_ERROR_BODY: usize = 256 * 1024;

/// Longest plain-text error body taken as a message (longer ones are pages).
const MAX_PLAIN_ERROR_BODY: usize = 300;

/// The message of an error that came without one.
const NO_MESSAGE: &str = "the provider reported an error without a message";

/// A provider error's code and message, as found.
type ErrorParts = (Option<String>, Option<String>);

/// The provider's error code and message in an HTTP error body, bounded (1 KiB
/// message, UTF-8 safe) and with anything that looks like a credential replaced by
/// `[redacted]`.
///
/// Reads OpenAI's `{"error": {"message", "code", "type"}}`, `{"error": "text"}`, a
/// bare error object (vLLM's `{"object": "error", "message", "code"}`), FastAPI's
/// `{"detail": ...}`, Gemini's array form `[{"error": {"code", "message",
/// "status"}}]`, and a short plain-text body. `None` for an empty body, an HTML page,
/// or JSON that holds no error: use the HTTP status's reason then.
///
/// ```
/// let body = br#"[{"error": {"code": 400, "message": "Invalid JSON payload", "status": "INVALID_ARGUMENT"}}]"#;
/// assert_eq!(
///     wire_openai::decode::parse_error_body(body),
///     Some((Some("400".to_owned()), "Invalid JSON payload".to_owned()))
/// );
/// ```
pub fn parse_error_body(body: &[u8]) -> Option<(Option<String>, String)> {
    let body = body
        .strip_prefix(b"\xEF\xBB\xBF")
        .unwrap_or(body)
        .trim_ascii();
    if let Some((code, message)) = json_error(body) {
        return Some(clean_parts(code, message));
    }
    if matches!(body.first(), Some(b'{' | b'[')) {
        return None;
    }
    let text = std::str::from_utf8(body).ok()?;
    (!text.is_empty() && text.len() <= MAX_PLAIN_ERROR_BODY && !text.contains('<'))
        .then(|| (None, clean(text, MAX_PROVIDER_MESSAGE)))
}

/// The error a JSON body (or frame) holds, if it parses and holds one.
fn json_error(body: &[u8]) -> Option<ErrorParts> {
    let body = body.get(..MAX_ERROR_BODY).unwrap_or(body);
    let value = serde_json::from_slice::<Value>(body).ok()?;
    error_parts(&value)
}

/// Code and message of an error value: `{"error": ...}` (the member holds the
/// error), an array holding one (Gemini), an error object (`message` or `detail`,
/// `code`, `type` or `status`), or a bare string. `None` when the value has nothing
/// of an error.
fn error_parts(value: &Value) -> Option<ErrorParts> {
    match value {
        Value::String(message) => Some((None, Some(message.clone()))),
        Value::Array(items) => items.iter().find_map(error_parts),
        Value::Object(map) => {
            if let Some(inner) = map.get("error").filter(|e| !e.is_null()) {
                return Some(error_parts(inner).unwrap_or((None, None)));
            }
            let message = ["message", "detail"]
                .into_iter()
                .filter_map(|key| map.get(key))
                .find_map(|m| match m {
                    Value::String(s) => Some(s.clone()),
                    Value::Null => None,
                    other => Some(other.to_string()),
                });
            let code = ["code", "type", "status"]
                .into_iter()
                .filter_map(|key| map.get(key))
                .find_map(|c| match c {
                    Value::String(s) if !s.trim().is_empty() => Some(s.clone()),
                    Value::Number(n) => Some(n.to_string()),
                    _ => None,
                });
            (message.is_some() || code.is_some()).then_some((code, message))
        }
        _ => None,
    }
}

/// The error of an `event: error` frame: JSON (`{"error": ...}`, an error object, an
/// array holding one) or plain text.
fn error_event(data: &str) -> DecodeError {
    match serde_json::from_str::<Value>(data) {
        Ok(value) => provider_error(value),
        Err(_) => provider_error_parts(None, Some(data.to_owned())),
    }
}

/// The error of an in-band `{"error": ...}` frame or body, from its raw JSON.
pub(crate) fn provider_error_from_json(raw: &str) -> DecodeError {
    provider_error(serde_json::from_str::<Value>(raw).unwrap_or(Value::Null))
}

/// Reads an error value (see [`error_parts`]) into a provider error.
pub(crate) fn provider_error(error: Value) -> DecodeError {
    let (code, message) = error_parts(&error).unwrap_or((None, None));
    provider_error_parts(code, message)
}

/// A provider error from what was found: bounded and scrubbed.
fn provider_error_parts(code: Option<String>, message: Option<String>) -> DecodeError {
    let (code, message) = clean_parts(code, message);
    DecodeError::Provider { code, message }
}

fn clean_parts(code: Option<String>, message: Option<String>) -> (Option<String>, String) {
    let code = code
        .map(|c| clean(&c, MAX_PROVIDER_CODE))
        .filter(|c| !c.is_empty());
    let message = message
        .as_deref()
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .unwrap_or(NO_MESSAGE);
    (code, clean(message, MAX_PROVIDER_MESSAGE))
}

/// A provider's text made safe to show: credentials scrubbed, then cut to `max`.
fn clean(text: &str, max: usize) -> String {
    // Scrubbing first, so a cut never leaves half a key behind; on a bounded input.
    let text = text.trim();
    let head = cut(text, MAX_ERROR_BODY);
    bounded(&scrub_secrets(head), max)
}

/// The longest prefix of `text` of at most `max` bytes ending on a char boundary.
fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Cuts a message to `max` bytes on a char boundary, marking the cut with `…`.
pub(crate) fn bounded(message: &str, max: usize) -> String {
    if message.len() <= max {
        return message.to_owned();
    }
    format!("{}…", cut(message, max))
}

/// Prefixes of API keys and the least number of key characters after them.
const KEY_PREFIXES: &[(&str, usize)] = &[
    ("sk-", 12),
    ("sk_", 12),
    ("gsk_", 12),
    ("xai-", 12),
    ("hf_", 12),
    ("AIza", 30),
];

/// Parameter names whose value is a credential (`name=value`, case-insensitive).
const SECRET_PARAMS: &[&str] = &[
    "api_key",
    "api-key",
    "apikey",
    "key",
    "access_token",
    "token",
];

/// Replaces what looks like a credential by `[redacted]`: the token after
/// `Bearer`, keys with a well-known prefix (`sk-`, `sk_`, `gsk_`, `xai-`, `hf_`,
/// `AIza`) and the values of `api_key=`, `key=`, `token=` and similar parameters.
pub(crate) fn scrub_secrets(text: &str) -> Cow<'_, str> {
    let bytes = text.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        let at_word_start = i == 0 || !is_key_char(bytes[i - 1]);
        if at_word_start
            && bytes[i].is_ascii_alphabetic()
            && let Some((start, end)) = secret_at(bytes, i)
        {
            // `start` and `end` sit next to ASCII bytes: char boundaries.
            let out = out.get_or_insert_with(|| String::with_capacity(text.len()));
            out.push_str(&text[copied..start]);
            out.push_str("[redacted]");
            copied = end;
            i = end;
            continue;
        }
        i += 1;
    }
    match out {
        None => Cow::Borrowed(text),
        Some(mut out) => {
            out.push_str(&text[copied..]);
            Cow::Owned(out)
        }
    }
}

fn is_key_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'*')
}

/// The secret starting at (or right after a marker at) `i`, as a byte range.
fn secret_at(bytes: &[u8], i: usize) -> Option<(usize, usize)> {
    let rest = &bytes[i..];
    let starts_with_ci = |word: &str| {
        rest.len() >= word.len() && rest[..word.len()].eq_ignore_ascii_case(word.as_bytes())
    };
    if starts_with_ci("bearer") {
        let mut start = i + "bearer".len();
        let spaces = bytes[start..]
            .iter()
            .take_while(|b| matches!(b, b' ' | b'\t'))
            .count();
        if spaces > 0 {
            start += spaces;
            let len = bytes[start..]
                .iter()
                .take_while(|b| {
                    !b.is_ascii_whitespace() && !matches!(b, b'"' | b'\'' | b',' | b';')
                })
                .count();
            if len > 0 {
                return Some((start, start + len));
            }
        }
    }
    for (prefix, least) in KEY_PREFIXES {
        if rest.starts_with(prefix.as_bytes()) {
            let len = rest[prefix.len()..]
                .iter()
                .take_while(|&&b| is_key_char(b))
                .count();
            if len >= *least {
                return Some((i, i + prefix.len() + len));
            }
        }
    }
    for name in SECRET_PARAMS {
        if starts_with_ci(name) && rest.get(name.len()) == Some(&b'=') {
            let start = i + name.len() + 1;
            let len = bytes[start..]
                .iter()
                .take_while(|b| {
                    !b.is_ascii_whitespace() && !matches!(b, b'&' | b'"' | b'\'' | b',' | b';')
                })
                .count();
            if len > 0 {
                return Some((start, start + len));
            }
        }
    }
    None
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
        assert!(
            bounded(&long, MAX_PROVIDER_MESSAGE).len() <= MAX_PROVIDER_MESSAGE + '…'.len_utf8()
        );
        // Gemini's array form, in an `event: error` frame and as a bare frame.
        let gemini = r#"[{"error":{"code":429,"message":"Resource exhausted","status":"RESOURCE_EXHAUSTED"}}]"#;
        assert_eq!(
            error_event(gemini),
            DecodeError::Provider {
                code: Some("429".into()),
                message: "Resource exhausted".into()
            }
        );
        assert_eq!(
            provider_error_from_json(r#"{"status":"UNAVAILABLE"}"#),
            DecodeError::Provider {
                code: Some("UNAVAILABLE".into()),
                message: NO_MESSAGE.into()
            }
        );
    }

    #[test]
    fn provider_messages_are_bounded_to_1_kib_and_scrubbed() {
        let long = format!("{} tail", "é".repeat(2000));
        let DecodeError::Provider { message, .. } =
            provider_error_from_json(&serde_json::json!({ "message": long }).to_string())
        else {
            panic!()
        };
        assert!(message.len() <= 1024 + '…'.len_utf8(), "{}", message.len());
        assert!(message.ends_with('…') && message.starts_with('é'));
        let raw = r#"{"message":"upstream said: Authorization: Bearer abc.def-123 was rejected; key sk-proj-AbCdEfGhIjKlMnOp1234 and https://x.test/v1?key=AIzaSyA-1234567890abcdefghijklmnopqrstu&alt=sse, gsk_0123456789abcdefghij","code":"sk-live-0123456789abcdef"}"#;
        let DecodeError::Provider { code, message } = provider_error_from_json(raw) else {
            panic!()
        };
        assert_eq!(
            message,
            "upstream said: Authorization: Bearer [redacted] was rejected; key [redacted] and https://x.test/v1?key=[redacted]&alt=sse, [redacted]"
        );
        assert_eq!(code.as_deref(), Some("[redacted]"));
        // Ordinary words are left alone.
        for text in [
            "use sk-learn",
            "monkey=banana",
            "max_tokens=5",
            "task-1 failed",
        ] {
            assert_eq!(scrub_secrets(text), text);
        }
        // A long secret at the cut is scrubbed before the cut, never half kept.
        let at_cut = format!("{} Bearer {}", "a".repeat(1000), "t".repeat(100));
        let DecodeError::Provider { message, .. } =
            provider_error_from_json(&serde_json::json!({ "message": at_cut }).to_string())
        else {
            panic!()
        };
        assert!(!message.contains("tttt"), "{message}");
    }

    #[test]
    fn error_bodies_of_every_shape() {
        type Expected = Option<(Option<&'static str>, &'static str)>;
        let cases: [(&[u8], Expected); 10] = [
            (
                br#"{"error":{"message":"Rate limit","type":"requests","code":"rate_limit_exceeded"}}"#,
                Some((Some("rate_limit_exceeded"), "Rate limit")),
            ),
            (br#"{"error":"bad"}"#, Some((None, "bad"))),
            (
                br#"[{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT"}}]"#,
                Some((Some("400"), "API key not valid. Please pass a valid API key.")),
            ),
            (
                br#"{"object":"error","message":"max_tokens is too large","type":"BadRequestError","param":null,"code":400}"#,
                Some((Some("400"), "max_tokens is too large")),
            ),
            (br#"{"detail":"Not Found"}"#, Some((None, "Not Found"))),
            (
                b"\xEF\xBB\xBF {\"error\":{\"code\":502,\"message\":\"Provider returned error\"}}\n",
                Some((Some("502"), "Provider returned error")),
            ),
            (b"upstream timeout", Some((None, "upstream timeout"))),
            (b"<html>502</html>", None),
            (br#"{"id":"x","choices":[]}"#, None),
            (b"", None),
        ];
        for (body, expected) in cases {
            let expected = expected.map(|(c, m)| (c.map(str::to_owned), m.to_owned()));
            assert_eq!(
                parse_error_body(body),
                expected,
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn a_json_error_body_instead_of_a_stream_is_that_provider_error() {
        for body in [
            "{\"error\": {\"message\": \"not sse\", \"code\": \"bad\"}}",
            "\n  [{\"error\": {\"code\": \"bad\", \"message\": \"not sse\"}}]",
            "{\n  \"error\": {\n    \"message\": \"not sse\",\n    \"code\": \"bad\"\n  }\n}\n",
        ] {
            let (deltas, result) = decode(body);
            assert!(deltas.is_empty());
            assert_eq!(
                result,
                Err(CompletionError::Provider {
                    code: Some("bad".into()),
                    message: "not sse".into()
                }),
                "{body}"
            );
            // Cut anywhere, the same.
            for cut in 1..body.len() {
                let mut decoder = Decoder::new();
                decoder
                    .feed(&body.as_bytes()[..cut], &mut Vec::new())
                    .unwrap();
                decoder
                    .feed(&body.as_bytes()[cut..], &mut Vec::new())
                    .unwrap();
                assert_eq!(decoder.finish(), result, "{body} cut at {cut}");
            }
        }
    }

    #[test]
    fn a_body_that_is_no_event_stream_is_a_protocol_error() {
        let (_, result) = decode("{\"id\": \"x\", \"choices\": []}");
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
    fn tool_names_ids_and_extras_count_towards_the_turn_budget() {
        let over = |event: String| {
            let mut decoder = Decoder::with_options(DecoderOptions {
                max_turn_bytes: 64,
                ..DecoderOptions::default()
            });
            let mut out = Vec::new();
            (0..4).any(|_| decoder.feed(event.as_bytes(), &mut out).is_err())
        };
        let call = |id: &str, name: &str, extra: &str| {
            format!(
                "data: {{\"choices\":[{{\"delta\":{{\"tool_calls\":[{{\"index\":0,\"id\":\"{id}\",\
                 \"function\":{{\"name\":\"{name}\"}}{extra}}}]}}}}]}}\n\n"
            )
        };
        // A huge name is bounded (a name resent whole does not grow the turn).
        assert!(over(call("c1", &"n".repeat(80), "")));
        assert!(!over(call("c1", &"n".repeat(20), "")));
        // One huge id is bounded.
        assert!(over(call(&"i".repeat(80), "get", "")));
        // Provider extras repeated on every delta are bounded.
        let extra = format!(
            ",\"extra_content\":{{\"google\":{{\"thought_signature\":\"{}\"}}}}",
            "s".repeat(30)
        );
        assert!(over(call("c1", "get", &extra)));
        // A small call stays within budget.
        assert!(!over(call("c1", "get", "")));
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
        assert_eq!(turn.response_id.as_deref(), Some("x"), "the first id wins");
    }

    #[test]
    fn the_response_id_is_the_first_non_empty_one() {
        // Azure's first chunk (its prompt filter results) has an empty id; the
        // chunks after it repeat one envelope, whose id the turn keeps.
        let filter = r#"{"id":"","model":"","choices":[],"prompt_filter_results":[]}"#;
        let delta = |text: &str| {
            format!(
                r#"{{"id":"chatcmpl-9","model":"gpt-4o","choices":[{{"index":0,"delta":{{"content":"{text}"}},"finish_reason":null}}]}}"#
            )
        };
        let stop = r#"{"id":"chatcmpl-9","model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#;
        let stream = format!(
            "data: {filter}\n\ndata: {}\n\ndata: {}\n\ndata: {}\n\ndata: {stop}\n\ndata: [DONE]\n\n",
            delta("a"),
            delta("b"),
            delta("c")
        );
        let ((_, result), alone) = run(Decoder::new(), stream.as_bytes());
        let turn = result.unwrap();
        assert_eq!(turn.text, "abc");
        assert_eq!(turn.response_id.as_deref(), Some("chatcmpl-9"));
        assert!(alone > 0, "the later chunks took the short path");
    }

    type Decoded = (
        Vec<CompletionDelta>,
        Result<CompletionFinal, CompletionError>,
    );

    /// Decodes `stream` with `decoder`, whole; also returns how many chunks had
    /// their delta parsed alone.
    fn run(mut decoder: Decoder, stream: &[u8]) -> (Decoded, u64) {
        let mut out = Vec::new();
        if let Err(error) = decoder.feed(stream, &mut out) {
            let alone = decoder.assembler().deltas_alone;
            return ((out, Err(error.into())), alone);
        }
        let alone = decoder.assembler().deltas_alone;
        let result = decoder.finish_into(&mut out);
        ((out, result), alone)
    }

    /// The decoding of `stream` and how many deltas were parsed alone, after
    /// checking it is the decoding of a decoder that parses every chunk whole.
    fn same_as_whole_chunks(stream: &[u8]) -> (Decoded, u64) {
        let options = || DecoderOptions {
            id_minting: IdMinting::Sequential,
            ..DecoderOptions::default()
        };
        let (decoded, alone) = run(Decoder::with_options(options()), stream);
        let (reference, none) = run(parsing_whole_chunks(options()), stream);
        assert_eq!(none, 0);
        assert_eq!(decoded, reference, "{}", String::from_utf8_lossy(stream));
        (decoded, alone)
    }

    const HEAD: &str = r#"{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":"#;
    const TAIL: &str = r#","logprobs":null,"finish_reason":null}],"usage":null}"#;

    fn chunk(delta: &str, tail: &str) -> String {
        format!("data: {HEAD}{delta}{tail}\n\n")
    }

    #[test]
    fn deltas_are_parsed_alone_between_a_head_and_a_tail_that_do_nothing() {
        // The same tail, a tail that changes (OpenAI's obfuscation padding), and a
        // choice that starts with other members (LiteLLM's order).
        let mut stream = chunk(r#"{"role":"assistant","content":""}"#, TAIL);
        stream.push_str(&chunk(r#"{"content":"a"}"#, TAIL));
        stream.push_str(&chunk(
            r#"{"content":"b\n\u00e9"}"#,
            r#","logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"x1"}"#,
        ));
        stream.push_str(&chunk(
            r#"{"content":"c"}"#,
            r#" , "logprobs" : {"content":[{"token":"c"}]} , "finish_reason" : null } ] , "obfuscation" : "y22" }"#,
        ));
        stream.push_str(&chunk(
            r#"{"content":"d"}"#,
            r#","logprobs":null,"finish_reason":"stop"}],"usage":null}"#,
        ));
        stream.push_str("data: [DONE]\n\n");
        let ((deltas, result), alone) = same_as_whole_chunks(stream.as_bytes());
        assert_eq!(alone, 3);
        assert_eq!(result.unwrap().text, "ab\néc".to_owned() + "d");
        assert_eq!(deltas.len(), 4);

        let litellm = concat!(
            "data: {\"id\":\"l\",\"model\":\"m\",\"choices\":[{\"finish_reason\":null,\"index\":0,\"delta\":{\"content\":\"a\"},\"logprobs\":null}]}\n\n",
            "data: {\"id\":\"l\",\"model\":\"m\",\"choices\":[{\"finish_reason\":null,\"index\":0,\"delta\":{\"content\":\"b\"},\"logprobs\":null}]}\n\n",
            "data: {\"id\":\"l\",\"model\":\"m\",\"choices\":[{\"finish_reason\":\"stop\",\"index\":0,\"delta\":{},\"logprobs\":null}]}\n\n",
        );
        let ((_, result), alone) = same_as_whole_chunks(litellm.as_bytes());
        assert_eq!(alone, 1);
        assert_eq!(result.unwrap().text, "ab");

        // The envelope after `choices` (llama.cpp), `model` in it: the usage model
        // stays the first non-empty one, also when a later tail names another.
        let tail = |model: &str| {
            format!(
                r#"}}],"created":1,"id":"x","model":"{model}","object":"chat.completion.chunk"}}"#
            )
        };
        let chunk = |content: &str, model: &str| {
            format!(
                "data: {{\"choices\":[{{\"finish_reason\":null,\"index\":0,\"delta\":{{\"content\":\"{content}\"}}{}\n\n",
                tail(model)
            )
        };
        for first_model in ["", "gemma"] {
            let stream = [
                chunk("a", first_model),
                chunk("b", first_model),
                chunk("c", "other"),
                chunk("d", "gemma"),
                "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}\n\n".into(),
                "data: [DONE]\n\n".into(),
            ]
            .concat();
            let ((_, result), alone) = same_as_whole_chunks(stream.as_bytes());
            let turn = result.unwrap();
            assert_eq!(turn.text, "abcd");
            let expected = if first_model.is_empty() {
                "other"
            } else {
                "gemma"
            };
            assert_eq!(turn.usage.unwrap().model, expected);
            assert_eq!(alone, if first_model.is_empty() { 2 } else { 3 });
        }
    }

    #[test]
    fn chunks_after_a_learned_head_decode_as_whole_chunks() {
        let deep = |depth: usize| {
            format!(
                "{{\"content\":\"x\",\"deep\":{}{}}}",
                "[".repeat(depth),
                "]".repeat(depth)
            )
        };
        let tails: Vec<String> = vec![
            TAIL.into(),
            r#","logprobs":null,"finish_reason":"stop"}],"usage":null}"#.into(),
            r#","finish_reason":null}],"usage":{"prompt_tokens":1,"completion_tokens":2}}"#.into(),
            r#","finish_reason":null}],"error":{"message":"boom","code":"e"}}"#.into(),
            r#","finish_reason":null},{"index":1,"delta":{"content":"other"}}],"usage":null}"#
                .into(),
            r#","index":1}],"usage":null}"#.into(),
            r#","delta":{"content":"again"}}],"usage":null}"#.into(),
            r#","message":{"content":"m"}}]}"#.into(),
            r#"}],"model":"other"}"#.into(),
            r#"}],"model":"m"}"#.into(),
            r#"}],"model":"\ud800"}"#.into(),
            r#"}],"model":"\u006d"}"#.into(),
            r#"}],"model":7}"#.into(),
            r#"}],"x_groq":{"usage":{"prompt_tokens":5}}}"#.into(),
            r#"}],"choices":null}"#.into(),
            r#"}],"choices":[{"index":0,"delta":{"content":"twice"}}]}"#.into(),
            r#","fin\u0069sh_reason":"stop"}]}"#.into(),
            r#"}],"obfuscation":"a\u00"}"#.into(),
            "}],\"obfuscation\":\"a\u{1}b\"}".into(),
            "}],\"obf\u{1}\":1}".into(),
            r#"}],"usage":nul}"#.into(),
            r#"}],"usage":nullx}"#.into(),
            r#"}],"n":01}"#.into(),
            r#"}],"n":tru}"#.into(),
            r#"}],"n":[1,]}"#.into(),
            r#"}]}}"#.into(),
            r#"}]"#.into(),
            r#"}],}"#.into(),
            r#"}] "x"}"#.into(),
            r#"}],"n":1} trailing"#.into(),
            format!(r#"}}],"n":{}}}"#, deep(70)),
            format!(r#"}}],"n":{}}}"#, deep(126)),
        ];
        let deltas: Vec<String> = vec![
            r#"{"content":"a"}"#.into(),
            r#"{"content":"a"},"finish_reason":"stop""#.into(),
            r#"{"content":"a"},"index":1"#.into(),
            r#"{"content":"a"} "#.into(),
            r#"{"content":"a" "b"}"#.into(),
            r#"{"content":"a""#.into(),
            r#"{"content":"a"}}"#.into(),
            r#"{"tool_calls":[{"index":0,"id":"c","function":{"name":"f","arguments":"{\"a\":"}}]}"#.into(),
            r#"{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}],"content":"#.into(),
            "null".into(),
            "nul".into(),
            r#""text""#.into(),
            "[1]".into(),
            "7".into(),
            deep(60),
            deep(70),
            deep(124),
            deep(126),
        ];
        let first = chunk(r#"{"role":"assistant","content":""}"#, TAIL);
        let mut alone_total = 0;
        for delta in &deltas {
            for tail in &tails {
                let stream = format!("{first}{}data: [DONE]\n\n", chunk(delta, tail));
                alone_total += same_as_whole_chunks(stream.as_bytes()).1;
                // The same chunk as the last one, without `[DONE]` nor its empty line.
                let stream = format!("{first}{}", chunk(delta, tail).trim_end());
                alone_total += same_as_whole_chunks(stream.as_bytes()).1;
            }
        }
        assert!(alone_total >= 10, "{alone_total}");
        // Bytes that are not UTF-8, in the delta and in the tail.
        for (delta, tail) in [
            (&b"{\"content\":\"\xff\"}"[..], TAIL.as_bytes()),
            (b"{\"content\":\"a\"}", b"}],\"obfuscation\":\"\xc3\"}"),
            (b"{\"content\":\"a\"}", b"}],\"\xc3\":1}"),
        ] {
            let mut stream = first.clone().into_bytes();
            stream.extend_from_slice(b"data: ");
            stream.extend_from_slice(HEAD.as_bytes());
            stream.extend_from_slice(delta);
            stream.extend_from_slice(tail);
            stream.extend_from_slice(b"\n\ndata: [DONE]\n\n");
            let ((_, result), _) = same_as_whole_chunks(&stream);
            assert!(result.is_ok(), "{result:?}");
        }
        // A head that differs (another id), a chunk over several lines.
        let other = chunk(r#"{"content":"a"}"#, TAIL).replace("\"c1\"", "\"c2\"");
        let lines = format!("data: {HEAD}\ndata: {{\"content\":\"a\"}}\ndata: {TAIL}\n\n");
        for second in [other, lines] {
            let stream = format!("{first}{second}data: [DONE]\n\n");
            assert_eq!(same_as_whole_chunks(stream.as_bytes()).1, 0);
        }
    }

    fn call_stream(deltas: &[&str]) -> String {
        let mut stream = String::new();
        for delta in deltas {
            stream.push_str(&format!(
                "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"tool_calls\":[{delta}]}}}}]}}\n\n"
            ));
        }
        stream.push_str("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n");
        stream
    }

    #[test]
    fn a_name_split_over_deltas_is_one_call() {
        let split = [
            r#"{"index":0,"id":"c1","function":{"name":"get_"}}"#,
            r#"{"index":0,"function":{"name":"weather"}}"#,
            r#"{"index":0,"function":{"arguments":"{}"}}"#,
        ];
        // The full name resent on later deltas, and a name growing cumulatively.
        let resent = [
            r#"{"index":0,"id":"c1","function":{"name":"get_weather"}}"#,
            r#"{"index":0,"function":{"name":"get_weather"}}"#,
            r#"{"index":0,"id":"c1","function":{"name":"get_weather","arguments":"{}"}}"#,
        ];
        let growing = [
            r#"{"index":0,"id":"c1","function":{"name":"get_"}}"#,
            r#"{"index":0,"function":{"name":"get_weather"}}"#,
            r#"{"index":0,"function":{"name":"get_weather","arguments":"{}"}}"#,
        ];
        for deltas in [&split, &resent, &growing] {
            let (out, result) = decode(&call_stream(deltas));
            let turn = result.unwrap();
            assert_eq!(turn.tool_calls.len(), 1, "{deltas:?}");
            assert_eq!(turn.tool_calls[0].name, "get_weather", "{deltas:?}");
            assert_eq!(turn.tool_calls[0].id, "c1");
            assert_eq!(
                out[0],
                CompletionDelta::ToolCallStart {
                    index: 0,
                    id: "c1".into(),
                    name: "get_weather".into()
                },
                "{deltas:?}"
            );
        }
        // Once arguments started, a different name at the index is another call.
        let (_, result) = decode(&call_stream(&[
            r#"{"index":0,"function":{"name":"a","arguments":"{}"}}"#,
            r#"{"index":0,"function":{"name":"b","arguments":"{}"}}"#,
        ]));
        let names: Vec<String> = result
            .unwrap()
            .tool_calls
            .into_iter()
            .map(|c| c.name)
            .collect();
        assert_eq!(names, ["a", "b"]);
    }

    #[test]
    fn usage_model_is_the_first_non_empty_model() {
        let (_, result) = decode(concat!(
            "data: {\"id\":\"\",\"model\":\"\",\"choices\":[]}\n\n",
            "data: {\"id\":\"a\",\"model\":\"gpt-4o\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\n",
            "data: {\"id\":\"a\",\"model\":\"other\",\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}\n\n",
            "data: [DONE]\n\n",
        ));
        assert_eq!(result.unwrap().usage.unwrap().model, "gpt-4o");
        let (_, result) = decode(concat!(
            "data: {\"model\":\"\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}\n\n",
            "data: [DONE]\n\n",
        ));
        assert_eq!(result.unwrap().usage.unwrap().model, "req-model");
    }

    #[test]
    fn reasoning_is_kept_apart_and_none_without_text() {
        let (out, result) = decode(concat!(
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"\",\"reasoning\":null,\"content\":\"\"}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\"},\"finish_reason\":\"stop\"}]}\n\n",
        ));
        let turn = result.unwrap();
        assert_eq!((turn.text.as_str(), turn.reasoning), ("hi", None));
        assert_eq!(out, [CompletionDelta::Text("hi".into())]);
        let (out, result) = decode(concat!(
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning\":\"a\\nb\",\"reasoning_content\":\"a\\nb\"}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning\":\"c\",\"content\":\"x\"},\"finish_reason\":\"stop\"}]}\n\n",
        ));
        let turn = result.unwrap();
        assert_eq!(turn.reasoning.as_deref(), Some("a\nbc"));
        assert_eq!(turn.text, "x");
        assert_eq!(
            out,
            [
                CompletionDelta::Reasoning("a\nb".into()),
                CompletionDelta::Reasoning("c".into()),
                CompletionDelta::Text("x".into()),
            ]
        );
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
