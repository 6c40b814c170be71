//! The OpenAI Responses API (`POST /v1/responses`) as a wire adapter: how its
//! server-sent events stream becomes deltas and one assembled turn.
//!
//! - [`decode`]: the stream's assembler, run by the shared decoder shell
//!   ([`ResponsesDecoder`]: framing, the first error kept), keyed on each event's JSON `type` (the `event:` lines may be missing): text,
//!   refusals, reasoning summaries with the reasoning item's encrypted content
//!   (the one `response.output_item.done` carries, else the one in
//!   `response.completed`'s output), function calls assembled here and nowhere
//!   else (parallel calls interleave: keyed on `output_index` and `item_id`),
//!   usage with cached and reasoning tokens, `response.incomplete`,
//!   `response.failed` and `error` as typed outcomes.
//!
//! - [`encode`]: the request body, sans-IO: `instructions`, `input` items
//!   (reasoning items replayed before the calls they preceded, `function_call`,
//!   `function_call_output`), function tools, `store: false` with the encrypted
//!   reasoning included, `reasoning.effort`, `max_output_tokens`, `text.format`.
//!
//! - [`client`]: [`ResponsesSpec`], what makes this wire for the shared
//!   `completion-http` client (`Authorization: Bearer`, the API's error bodies,
//!   the strict tools' arguments relaxed; timeouts, retries and no redirects come
//!   with the transport), and [`ResponsesClient`], the [`ai_core::CompletionPort`]
//!   on it.
//!
//! wire-responses depends on ai-core, completion-http and sse only: not on
//! another wire crate, the loop, the tools or the composition root. It reads no
//! environment or config file: the composition root builds a
//! [`ResponsesConfig`].

pub mod client;
pub mod decode;
pub mod encode;

/// The seam this wire is written on (the shared client, its config, the stream
/// decoder), for code generic over wires.
pub use ::completion_http;
pub use client::{ResponsesClient, ResponsesConfig, ResponsesSpec};
pub use decode::{ResponsesAssembler, ResponsesDecodeError, ResponsesDecoder, decode_stream};
pub use encode::{ResponsesEncodeError, ResponsesEncodeOptions, encode_request};
