//! Durable runs of a server with a store: every run it starts is a durable run
//! (`agent_graph::run::durable`) whose steps are journaled in the run store, and
//! a server starting after one on the same store died starts its runs again
//! ([`crate::ChatService::settle_orphans`]).
//!
//! - Before its first step, a run saves how it starts (`SavedStart`: the
//!   prepared request or the paused run with its decisions, and what its record
//!   needs) in `run_starts`; each step is a row of `run_steps`, written before
//!   the run goes on.
//! - Started again, the run keeps its id. Its event log is cleared and written
//!   anew: the recorded steps' events first (they are kept with each step), then
//!   the new ones, so a client following the chat sees one clean answer. Its
//!   model calls are made only for the steps not recorded; a call that acts and
//!   was under way ends `outcome_unknown` (or runs again with the same
//!   idempotency key when its tool is idempotent).
//! - With a durable engine (`agent_durable::Runs::with_engine`, `[durable]
//!   engine = "restate"`) runs are not run here: each is submitted to the engine, which runs it on a worker and writes
//!   its events to the store, and the client's stream follows the store.
//! - A run started again has no client: it runs to its end, and `GET
//!   /api/chat/{id}/stream` attaches to it as to any running answer.

pub use agent_durable::{SavedStart, journal_for};
