//! The LLM -> tool -> LLM loop: runs, graphs and run handles streaming typed events.
//!
//! agent-graph talks to a model only through `ai_core`'s completion port and runs tools
//! only through `ai_core::ToolRunner`. It depends on `ai-core` only: not on `ai-tools`,
//! any `wire-*` crate, `bootstrap` or an HTTP client, and it knows no wire format.
//!
//! The modules, by concept (the root re-exports the entry points):
//! - [`agent`]: [`Agent`], the front door: a model, tools, a policy, settings and
//!   limits, built once and run many times (`agent.run(prompt)` streams events,
//!   `agent.prompt(prompt)` returns the final text, `agent.chat(&mut conversation,
//!   text)` keeps a [`Conversation`], `agent.prompt_typed::<T>(prompt)` returns a
//!   `T` read from a strict JSON-schema answer).
//! - [`graph`]: [`Graph`], what a run starts from, and [`Graph::prepare`], the one
//!   place a graph becomes a run ([`graph::PreparedRun`]); graphs offered to another
//!   as subagent tools `graph__<name>` ([`graph::GraphRegistry::subagent_tools`]).
//! - [`run`](mod@run): [`run()`] starts a prepared request and returns a [`RunHandle`] (a
//!   stream of [`ai_core::AiEvent`]s and one [`run::OutputFuture`]); a run with
//!   deferred approvals pauses with a serializable [`run::PausedRun`], and
//!   [`run::resume`] continues it inside the loop with the user's
//!   [`run::Decision`]s.
//! - [`journal`]: the step seam of durable runs ([`run::durable`]): each model
//!   call and tool execution a numbered step recorded in a
//!   [`journal::StepJournal`] before the next starts; a run started again
//!   replays what was recorded and never runs a call that acts twice.
//! - [`prompt`]: prompts built from sections that contribute tools, and
//!   [`prompt::prompt_hash`].
//! - [`fanout`]: billing and history (lossless) and UI (lossy, bounded) consumers,
//!   each with its own queue.

pub mod agent;
pub mod fanout;
pub mod graph;
pub mod journal;
pub mod prompt;
pub mod run;

pub use agent::{Agent, Conversation};
pub use graph::Graph;
pub use run::{RunHandle, RunOutput, run};
