//! OpenAI chat-completions wire adapter: encoder, streaming decoder and HTTP client.
//!
//! This crate owns every OpenAI DTO (invariant WIRE_FORMATS_ARE_ADAPTERS). It maps `ai_core` semantic
//! types to the wire and the wire (including streams) back to semantic records, and
//! it is the single assembler of streamed tool calls (invariant DECODER_ASSEMBLES_TOOLCALLS). It depends
//! on `ai-core`, `completion-http` and `sse` only: not on `ai-tools`, `agent-graph` or
//! `bootstrap`, and it reads no environment or config file: the composition root
//! hands it a [`client::ClientConfig`].
//!
//! Entry points:
//! - [`encode::encode_request`]: a [`ai_core::completion::CompletionRequest`] to a JSON body
//!   (tools, tool choice, history with tool calls and tool results, optional strict
//!   schemas via [`encode::strict_schema`]).
//! - [`sse::SseFramer`]: byte-level server-sent-events framing (sans-IO), from the
//!   `sse` crate, which every wire crate shares.
//! - [`decode::Decoder`]: sans-IO stream decoder and tool-call assembler, fed byte
//!   chunks, producing [`ai_core::completion::CompletionDelta`]s (or, without
//!   allocating, borrowed [`decode::DeltaRef`]s handed to a [`decode::DeltaSink`])
//!   and one [`ai_core::completion::CompletionFinal`]; [`decode::decode_response`] for non-streaming
//!   bodies. The module docs list every gateway pathology it handles.
//! - [`client::OpenAiSpec`]: what makes this wire for the shared `completion-http`
//!   client, and [`client::OpenAiClient`], the [`ai_core::CompletionPort`] on it
//!   (timeouts, retries, cancellation, typed errors that never contain the API key).
//! - [`fuzzing::decode_arbitrary`]: the fuzz entry point (`fuzz/` holds the
//!   cargo-fuzz target that calls it).

pub mod client;
pub mod decode;
pub mod encode;
pub mod fuzzing;
/// Server-sent events framing, from the `sse` crate (kept here under its old path).
pub use ::sse;
mod wire;

/// The seam this wire is written on (the shared client, its config, the stream
/// decoder), for code generic over wires.
pub use ::completion_http;
pub use client::{
    ApiKey, Backoff, ClientConfig, OpenAiClient, OpenAiOptions, OpenAiSpec, Timeouts,
};
pub use decode::{
    DecodeError, Decoder, DecoderOptions, DeltaMode, DeltaRef, DeltaSink, OpenAiAssembler,
};
pub use encode::{EncodeOptions, StrictMode, encode_request};
