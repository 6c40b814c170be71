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
//! - With a [`RunSubmitter`] (`[durable] engine = "restate"`) runs are not run
//!   here: each is submitted to the engine, which runs it on a worker and writes
//!   its events to the store, and the client's stream follows the store.
//! - A run started again has no client: it runs to its end, and `GET
//!   /api/chat/{id}/stream` attaches to it as to any running answer.

pub use agent_durable::{SavedStart, journal_for};

/// Where a server hands its runs when a durable engine runs them (see
/// `ChatService::with_submitter`): the composition root's client of the
/// engine's ingress. A submission is idempotent on the run id.
pub trait RunSubmitter: Send + Sync {
    /// Submits a run; `Ok` once the engine has taken it.
    fn submit<'a>(
        &'a self,
        input: &'a agent_durable::restate::RunInput,
    ) -> futures::future::BoxFuture<'a, Result<(), String>>;

    /// Hands the user's decisions to a paused run waiting on `awakeable`: the
    /// run goes on as `next`.
    fn resume<'a>(
        &'a self,
        awakeable: &'a str,
        next: &'a agent_durable::restate::Continuation,
    ) -> futures::future::BoxFuture<'a, Result<(), String>>;
}

/// Submits runs to a Restate server, sealed with the key the servers and
/// workers hold (`agent_durable::seal`).
pub struct RestateSubmitter {
    client: agent_durable::restate::RestateClient,
    key: agent_durable::seal::DurableKey,
}

impl RestateSubmitter {
    /// Submits through `client`, sealing with `key`.
    pub fn new(
        client: agent_durable::restate::RestateClient,
        key: agent_durable::seal::DurableKey,
    ) -> Self {
        Self { client, key }
    }
}

impl RunSubmitter for RestateSubmitter {
    fn submit<'a>(
        &'a self,
        input: &'a agent_durable::restate::RunInput,
    ) -> futures::future::BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            self.client
                .submit(input, &self.key)
                .await
                .map_err(|e| e.to_string())
        })
    }

    fn resume<'a>(
        &'a self,
        awakeable: &'a str,
        next: &'a agent_durable::restate::Continuation,
    ) -> futures::future::BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            self.client
                .resolve(awakeable, next, &self.key)
                .await
                .map_err(|e| e.to_string())
        })
    }
}
