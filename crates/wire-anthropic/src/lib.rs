//! The Anthropic Messages API (`POST /v1/messages`) as a wire adapter: what a
//! [`ai_core::completion::CompletionRequest`] looks like on this wire, and how
//! its server-sent events stream becomes deltas and one assembled turn.
//!
//! - [`encode`]: the request body, sans-IO: system as a top-level field, tools with
//!   `input_schema`, tool results as `tool_result` blocks with `is_error`, thinking
//!   and redacted thinking sent back unchanged with their signatures, optional
//!   prompt caching marks, `max_tokens` always.
//! - [`decode`]: the stream's assembler, run by the shared decoder shell
//!   ([`AnthropicDecoder`]: framing, the first error kept):
//!   text, thinking with its signature, redacted thinking, tool calls assembled
//!   here and nowhere else, usage with cache tokens, typed stop reasons and
//!   in-stream errors, a truncated stream as a typed error.
//!
//! - [`client`]: [`AnthropicSpec`], what makes this wire for the shared
//!   `completion-http` client (`x-api-key`, `anthropic-version`, the API's error
//!   bodies; 529 retried like 503, timeouts, no redirects come with the
//!   transport), and [`AnthropicClient`], the [`ai_core::CompletionPort`] on it.
//!
//! wire-anthropic depends on ai-core, completion-http and sse only: not on another
//! wire crate, the loop, the tools or the composition root. It reads no
//! environment or config file: the composition root builds an [`AnthropicConfig`].

pub mod client;
pub mod decode;
pub mod encode;
pub mod output;

/// The seam this wire is written on (the shared client, its config, the stream
/// decoder), for code generic over wires.
pub use ::completion_http;
pub use client::{AnthropicClient, AnthropicConfig, AnthropicSpec};
pub use decode::{AnthropicAssembler, AnthropicDecodeError, AnthropicDecoder};
pub use encode::{AnthropicEncodeOptions, encode_request};

/// The API version this crate speaks (`anthropic-version` header).
pub const API_VERSION: &str = "2023-06-01";
