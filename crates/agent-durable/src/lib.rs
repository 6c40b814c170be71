//! Durable runs: where a run's steps are journaled, so a run outlives the process
//! that started it (see `agent_graph::journal` for the step seam itself: what a
//! step is, what is replayed, and the intent rule for calls that act).
//!
//! - [`store`]: the embedded journal, [`StoreJournal`]: each step a row of the
//!   run store (SQLite, or Postgres for many servers), read once when the run
//!   starts and written before the run goes on. `agent serve` uses it for every
//!   run it records, and goes on with a dead server's runs at startup.
//! - [`restate`]: the distributed engine: each run a Restate invocation of the
//!   [`restate::AgentRuns`] service, served by `agent worker`; each step a
//!   `ctx.run`, whose journal Restate keeps and replays in order
//!   ([`restate::RestateJournal`]). Restate retries an invocation whose worker
//!   died on another worker, and an idempotency key (the run id) makes a
//!   submission that is repeated return the first run's answer.
//!
//! agent-durable depends on ai-core, agent-graph and agent-store: not on
//! ai-tools, a wire crate, agent-server or bootstrap (the composition root hands
//! it a model, a runner and a graph).

pub mod lease;
pub mod restate;
pub mod seal;
pub mod store;

pub use store::{SavedStart, StoreJournal, journal_for, run_end};
