//! The AI SDK chat protocol, sans-IO: what a chat endpoint for web UIs reads
//! and writes, with no endpoint in it.
//!
//! - Requests: [`contract`] checks a chat request body and rebuilds the
//!   conversation ([`contract::parse`] into a [`ChatRequest`]: JSON values only,
//!   bounded ids, arguments, results and files, one result per call; a rejection
//!   names the field path); [`body_format`] rewrites the bodies of AI SDK 4's
//!   `useChat` and assistant-ui's `useDataStreamRuntime` into the UI-message body
//!   the contract checks; [`transcript`] remembers what the model saw of the calls
//!   the server ran; [`thread`] continues a stored thread with a request.
//! - Responses: [`parts`] is the one state machine from a run's
//!   [`ai_core::AiEvent`]s to the parts of an assistant message ([`PartMachine`]
//!   yielding [`UiChunk`]s: message start and finish, steps, text and reasoning
//!   parts, tool inputs, outputs, approvals and denials, usage).
//!   [`ui_stream`] (the UI message stream v1 of `useChat` in AI SDK 5 to 7) and
//!   [`data_stream`] (AI SDK 4's data stream v1) are thin serializers of those
//!   chunks behind one [`StreamEncoder`] trait ([`stream`]), which is what a
//!   server drives.
//! - Stored chats: [`ui_messages`] shows a stored thread as UI messages, tool
//!   calls as the event log's redacted views.
//!
//! chat-protocol depends on ai-core only; it does not depend on axum, tokio,
//! agent-store or agent-durable. It does no IO: bytes in, values and frames out.
//! The server (agent-server) reads bodies, writes frames and keeps the store.

pub mod body_format;
pub mod contract;
pub mod data_stream;
pub mod parts;
pub mod stream;
#[cfg(test)]
mod test_events;
pub mod thread;
pub mod transcript;
pub mod ui_messages;
pub mod ui_stream;

pub use contract::{ChatRequest, RequestError};
pub use parts::{PartMachine, UiChunk};
pub use stream::StreamEncoder;
