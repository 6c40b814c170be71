//! An HTTP chat endpoint for web UIs: runs streamed in the AI SDK's protocols, with
//! a checked request contract and approvals bound by the server.
//!
//! - [`ChatService`] holds the model, the tools (one [`ai_core::ToolRunner`] whose
//!   approver is a grant ledger) and the policy; [`ChatService::router`] is an axum
//!   router with `POST /api/chat` (the UI message stream v1 that `useChat` of `ai`
//!   5, 6 and 7 reads; `?protocol=data` for the AI SDK 4 data stream v1) and
//!   `GET /api/tools`. [`serve`] runs it with graceful shutdown.
//! - The protocol itself is the sans-IO crate `chat_protocol`, re-exported here:
//!   [`ui_stream`] and [`data_stream`] are the encoders from
//!   [`ai_core::AiEvent`]s to each protocol (invariant STREAM_TO_UI_BY_PROTOCOL),
//!   thin serializers over one event-to-UI-part state machine, behind one
//!   [`StreamEncoder`] trait ([`stream`]); [`body_format`] rewrites the bodies of
//!   AI SDK 4's `useChat` and assistant-ui's `useDataStreamRuntime` into the one
//!   the contract checks; [`contract`] checks the request body and rebuilds the
//!   conversation: JSON values only, bounded ids, arguments and results, one
//!   result per call; a rejection is a 400 naming the field path and nothing
//!   reaches the model; [`transcript`] keeps what the model saw of the calls the
//!   server ran.
//! - [`approval`]: a call that policy puts behind an approval pauses the run; the
//!   client gets an HMAC-bound approval id, and the next request's decision is
//!   honoured only for exactly that call and those arguments, once, before it
//!   expires (invariant APPROVAL_BOUND_BY_SERVER). The server only issues and
//!   redeems ids: the loop itself resumes the run with the decisions
//!   (`agent_graph::run::resume`).
//! - A client that disconnects cancels its run (model stream and tools).
//! - [`resume`]: `GET /api/chat/{id}/stream` reattaches to a chat's running
//!   response (what was sent so far, then live), or answers `204`. A run
//!   outlives a client that goes away for [`Access::detach_grace`] (a reload
//!   reattaches), and `POST /api/chat/{id}/stop` cancels it (the page's Stop).
//! - [`chats`]: with a run store, every run recorded (thread, status, events,
//!   usage, messages) and `GET /api/chats`, `GET`/`PATCH` (rename)/`DELETE
//!   /api/chats/{id}`.
//! - Graphs: a service runs its default graph and those added with
//!   [`ChatService::with_graph`]; a request's `graph` picks one for a new chat
//!   (a chat keeps its graph), `GET /api/graphs` lists those the request's
//!   account may use ([`ChatService::with_account_graphs`] limits an account),
//!   and `GET /api/limits` says what a client may attach.
//! - [`durable`]: with a store, each run's model calls and tool calls are steps
//!   journaled in the store before the next (`agent_graph::journal`);
//!   [`ChatService::settle_orphans`] goes on with the runs of a server whose
//!   lease ran out (it died, or stalled), from their first unrecorded step.
//! - Your own router: [`ChatService::from_agent`] serves an `Agent` as it is
//!   configured; [`ChatService::router_with_auth`] puts an
//!   [`access::Authenticate`] hook (your sessions, your API keys) in place of
//!   the bearer tokens; [`ChatService::serve_chat`] answers a chat request on a
//!   route of your own, and [`run_response`] (or [`run_data_stream_response`])
//!   streams a bare run.
//! - [`page`]: the chat page (built from `web/`, embedded) served at `/`.
//! - [`access`]: `Host` and `Origin` must name the loopback address on loopback
//!   (DNS-rebinding protection), and every API request carries a bearer token
//!   (compared by SHA-256 in constant time), loopback included: the per-process
//!   [`ServerSecret`] of `agent serve`, or configured tokens. A body size and time
//!   limit, a cap on open streams overall and per account, and a write
//!   timeout.
//! - [`serve`]: the listener, with caps on open connections (overall and per
//!   client address) and a header-read timeout ([`ConnectionLimits`]).
//!
//! agent-server depends on ai-core, chat-protocol, agent-graph, agent-store and
//! agent-durable only: not on ai-tools, ai-host, a wire crate, tools-mcp or
//! bootstrap. The composition root (`agent serve`) hands
//! it a model and tools.

pub mod access;
pub mod approval;
mod chat;
pub mod chats;
pub mod durable;
mod graphs;
mod listener;
mod orphans;
mod own_route;
pub mod page;
mod plan;
mod relay;
pub mod resume;
mod server;
pub mod traffic;

pub use chat_protocol::{body_format, contract, data_stream, stream, transcript, ui_stream};

pub use access::{
    Access, DEFAULT_BODY_TIMEOUT, DEFAULT_CLIENT_STREAM_SHARE, DEFAULT_DETACH_GRACE,
    DEFAULT_HEARTBEAT, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_STREAMS, DEFAULT_WRITE_TIMEOUT,
    ServerSecret,
};
pub use chat_protocol::StreamEncoder;
pub use listener::{ConnectionLimits, FD_RESERVE, serve};
pub use own_route::{run_data_stream_response, run_response};
pub use server::{ChatService, ChatSetup};
