//! The LLM -> tool -> LLM loop: runs, graphs and run handles streaming typed events.
//!
//! agent-graph talks to a model only through `ai_core`'s completion port and runs tools
//! only through `ai_core::ToolRunner`. It must not depend on `ai-tools`, any `wire-*`
//! crate, `bootstrap` or an HTTP client, and it knows no wire format.
//!
//! - [`run`] starts a run and returns a [`RunHandle`]: a stream of [`ai_core::AiEvent`]s
//!   and one final [`RunOutcome`].
//! - [`Fanout`] gives billing, history and UI consumers their own bounded queues.
//! - [`GraphRegistry`] holds named graphs (`chat`: a system prompt and a tool selection).
//! - [`testing`] has models for tests without HTTP: [`testing::ScriptedModel`] and
//!   [`testing::TestModel`].

mod fanout;
mod graph;
mod run;
pub mod testing;

pub use fanout::{Fanout, Subscriber, SubscriberItem};
pub use graph::{Graph, GraphRegistry, ToolFilter};
pub use run::{
    EventStream, RunDeps, RunError, RunHandle, RunLimits, RunOutcome, RunOutput, RunRequest, run,
};
