//! Gemini's own API (`POST /v1beta/models/{model}:streamGenerateContent?alt=sse`)
//! as a wire adapter, written on the `completion-http` seam: this crate is the
//! wire's encoder, its stream's assembler and its spec, and nothing else (the
//! client, its config, the transport and the server-sent events shell are the
//! seam's).
//!
//! - [`encode`]: the request body, sans-IO: `systemInstruction`, `contents` with
//!   `user`/`model` roles, function calls and responses, images as `inlineData`,
//!   thought signatures sent back on the part they came on, one
//!   `functionDeclarations` tool with schemas reduced to the API's subset
//!   ([`schema`]), `toolConfig` and `generationConfig` (thinking included).
//! - [`decode`]: the stream's assembler, run by the shared decoder shell
//!   ([`GeminiDecoder`]): text, thought summaries, whole function calls, thought
//!   signatures kept exactly as received, usage with thinking and cached tokens,
//!   finish reasons normalised (the raw one kept where the contract has no word
//!   for it), in-stream errors typed by their `status`.
//! - [`client`]: [`GeminiSpec`], what makes this wire for the shared client (the
//!   path that names the model, `x-goog-api-key`, the API's error bodies), and
//!   [`GeminiClient`], the [`ai_core::CompletionPort`] on it.
//!
//! wire-gemini depends on ai-core, completion-http and sse only: not on another
//! wire crate, the loop, the tools or the composition root. It reads no
//! environment or config file: the composition root builds a [`GeminiConfig`].

pub mod client;
pub mod decode;
pub mod encode;
pub mod schema;

/// The seam this wire is written on (the shared client, its config, the stream
/// decoder), for code generic over wires.
pub use ::completion_http;
pub use client::{GeminiCall, GeminiClient, GeminiConfig, GeminiSpec};
pub use decode::{GeminiAssembler, GeminiDecodeError, GeminiDecoder};
pub use encode::{GeminiEncodeError, GeminiOptions, Thinking, encode_request};

/// The wire's name: in logs, and on the [`ai_core::message::AssistantBlock::WireFields`]
/// it keeps.
pub const WIRE: &str = "gemini";
