//! The seam every wire is written on: a wire crate supplies what differs between
//! providers, and this crate owns the rest, so every wire behaves the same.
//!
//! - [`WireClient`]: the [`ai_core::CompletionPort`] of every wire, configured by a
//!   [`WireConfig`] (the endpoint settings all wires share, and the wire's own
//!   options) and by the wire's [`WireSpec`]: the endpoint path, the auth header
//!   and fixed headers, how an error body reads, the encoder and the
//!   [`Assembler`] of its stream.
//! - [`SseDecoder`]: the decoder of a streamed response, generic over the wire's
//!   [`Assembler`] (which only takes events and gives the assembled turn; most
//!   wires write a [`SimpleAssembler`]): the server-sent events framing (the `sse`
//!   framer, bytes cut anywhere), the event count, the first error kept and
//!   repeated, the end of the stream. [`StreamError`] is what an assembler of
//!   JSON-typed events fails with; [`settle_arguments`] how a tool call's
//!   arguments end.
//! - [`HttpTransport`]: the HTTP half of every call; [`HttpTransport::complete`]
//!   turns an encoded request into a [`ai_core::completion::CompletionStream`]
//!   through a [`Wire`] and its [`StreamDecoder`].
//! - [`TurnBuilder`]: the assembled turn an assembler builds at the end of a
//!   stream, part by part.
//! - Request pieces the JSON wires write alike: [`encode_body`] (the frame of
//!   an encoder: checks, extra keys), [`system_prompt`],
//!   [`user_parts`], [`RoleTurns`], [`object_arguments`], [`add_extra_body`], and
//!   [`WireEncodeError`] for an encoder with no rules of its own.
//! - [`StrictTools`]: the arguments of tools sent with a strict schema, given back
//!   without the `null`s strict mode added.
//!
//! The transport's rules:
//!
//! - Timeouts ([`Timeouts`]): `connect` (TCP/TLS, per attempt), `first_byte` (from
//!   sending until the response headers arrive; for non-streaming calls that
//!   includes the whole generation), `between_chunks` (the idle limit of a body, see
//!   below) and `total`, a deadline for the whole call: it starts when the stream is
//!   first polled (the request is sent) and covers every attempt, every wait between
//!   retries and the whole body, streamed or not. Its expiry is
//!   [`CompletionError::Timeout`](ai_core::completion::CompletionError::Timeout) with
//!   `TimeoutPhase::Total`; a retry that could not start before it is not attempted
//!   (the last error is returned instead).
//! - Idle limit of a stream: `between_chunks` counts from the response head or from
//!   the last server-sent *event* the decoder completed; bytes that complete no
//!   event (SSE comments such as `: ping` keepalives) do not reset it. So a server
//!   that only sends keepalives times out after `between_chunks`, and one that keeps
//!   sending data is bounded by `total`. For a non-streaming body any chunk resets it.
//! - Retries, before the first byte of a successful response only: on 408, 409,
//!   429, 5xx (Anthropic's 529 "overloaded" included), connection errors and connect
//!   timeouts, up to `max_retries` times, with exponential backoff and jitter, or
//!   the server's `Retry-After` (seconds or an HTTP date) / `retry-after-ms` when
//!   given. Not retried: a `Retry-After` longer than [`Backoff::max_retry_after`]
//!   (the error is returned), a 429 whose body the wire calls permanent
//!   ([`ErrorBody::permanent`], OpenAI's `insufficient_quota`: waiting does not
//!   refill a quota), TLS errors (a bad certificate or a non-TLS server does not
//!   heal), a first-byte timeout (the server may still be generating). Nothing is
//!   retried once a response body has started.
//! - Redirects are never followed: any 3xx answer is an HTTP error naming only the
//!   target's origin. So keys and extra headers never leave the configured origin,
//!   and a request body is never replayed somewhere else.
//! - Secrets: header values marked secret are sensitive in reqwest, never logged,
//!   and any occurrence of a secret in a provider's message is replaced by
//!   `[redacted]`.
//! - Cancellation: dropping the stream aborts the request and closes the
//!   connection; firing the cancellation token ends the stream with
//!   `CompletionError::Cancelled`.
//! - A connection cut in the middle of a stream ends it as the decoder's `finish`
//!   says (a truncated stream, with everything assembled so far).
//! - A server that answers a streaming request with a plain JSON body is decoded as
//!   a non-streaming response.
//!
//! completion-http knows no wire format: no provider's paths, headers or JSON
//! shapes live here. It depends on ai-core, client-tls and sse only: not on a wire
//! crate, the loop, the tools or the composition root. It reads no environment or
//! config file.

mod call;
mod config;
mod encode;
mod stream;
mod transport;
mod turn;
mod wire;

pub use call::{StreamDecoder, TraceHeaders, Wire};
pub use config::{
    ApiKey, Backoff, ErrorBody, Timeouts, TransportConfig, WireConfig, redact_userinfo,
};
pub use encode::{
    HistoryEncoder, RoleTurns, Unsupported, WireEncodeError, add_extra_body, encode_body,
    encode_history, object_arguments, system_prompt, user_parts,
};
pub use stream::{
    Assembler, FromDeltas, SimpleAssembler, SseDecoder, StreamError, settle_arguments,
};
pub use transport::HttpTransport;
pub use turn::TurnBuilder;
pub use wire::{StrictTools, WireClient, WireSpec};
