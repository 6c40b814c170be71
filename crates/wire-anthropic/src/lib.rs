//! The Anthropic Messages API (`POST /v1/messages`) as a wire adapter: what a
//! [`ai_core::completion::CompletionRequest`] looks like on this wire, and how
//! its server-sent events stream becomes deltas and one assembled turn.
//!
//! - [`encode`]: the request body, sans-IO: system as a top-level field, tools with
//!   `input_schema`, tool results as `tool_result` blocks with `is_error`, thinking
//!   and redacted thinking sent back unchanged with their signatures, optional
//!   prompt caching marks, `max_tokens` always.
//! - [`decode`]: the byte-level streaming decoder (on the shared `sse` framer):
//!   text, thinking with its signature, redacted thinking, tool calls assembled
//!   here and nowhere else, usage with cache tokens, typed stop reasons and
//!   in-stream errors, a truncated stream as a typed error.
//!
//! The HTTP client (headers `x-api-key` and `anthropic-version`, retries) and the
//! provider switch of the command line are not part of this crate yet.
//!
//! wire-anthropic depends on ai-core and sse only: not on another wire crate, the
//! loop, the tools or the composition root.

pub mod decode;
pub mod encode;

pub use decode::{AnthropicDecodeError, AnthropicDecoder};
pub use encode::{AnthropicEncodeOptions, encode_request};

/// The API version this crate speaks (`anthropic-version` header).
pub const API_VERSION: &str = "2023-06-01";
