//! Semantic tool types, the one tool runner pipeline, deny-by-default policy, the
//! catalog, run events and the completion port.
//!
//! ai-core does no IO and knows no wire format: it reads no files, environment or
//! network, starts no process, and has no OpenAI/Anthropic DTO and no schema
//! generator (schemas arrive as JSON values in [`ToolSpec`]). It depends on no other
//! project crate. Everything above it (tool contracts, wire adapters, the loop and the
//! composition root) speaks to the outside world through the types defined here.
//!
//! The modules, by concept (the root re-exports the entry points each names):
//! - [`tool`]: what a tool is ([`ToolSpec`], [`ToolId`], [`ToolEffect`],
//!   `Redaction`) and how it runs (`ToolExecutor`, `ToolOutput`, `ToolFailure`).
//! - [`policy`]: which tools a run may see and call ([`ToolPolicy`], [`ToolCatalog`],
//!   `ToolPattern`).
//! - [`runner`]: [`ToolRunner`], the only way a tool is executed (validate,
//!   authorize, execute, bound, redact, record).
//! - [`approval`]: approvals bound to one call and its exact arguments.
//! - [`cancel`]: [`cancel::Cancelled`], a cancellation waiter cheap to poll on
//!   every wake of a busy task.
//! - [`completion`]: [`CompletionPort`], how the loop calls a model, implemented by
//!   wire crates.
//! - [`event`]: [`AiEvent`], the public event contract of a run.
//! - [`id`]: [`Id`], a run's correlation ids, shared by its context and its
//!   events.
//! - [`message`]: [`Message`], the conversation, independent of any wire format.
//! - [`schema`]: JSON Schema walking and the P0 subset check.
//! - [`text`]: bounding, log-safe and display-safe text.
//! - [`trace`]: W3C trace context ([`trace::TraceParent`]) and the seam an
//!   exporter links run spans through.

pub mod approval;
pub mod cancel;
pub mod completion;
mod context;
pub mod event;
pub mod id;
pub mod message;
pub mod policy;
pub mod runner;
pub mod schema;
pub mod text;
pub mod tool;
pub mod trace;

pub use completion::CompletionPort;
pub use context::RunContext;
pub use event::AiEvent;
pub use id::Id;
pub use message::Message;
pub use policy::{ToolCatalog, ToolPolicy};
pub use runner::ToolRunner;
pub use tool::{ToolEffect, ToolId, ToolSpec};

/// Re-exported so executors and callers share one cancellation type.
pub use tokio_util::sync::CancellationToken;
