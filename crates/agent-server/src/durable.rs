//! Durable runs of a server with a store: every run it starts is a durable run
//! (`agent_graph::run::durable`) whose steps are journaled in the run store, and
//! a server starting after one on the same store died starts its runs again
//! ([`crate::ChatService::resume_runs_of`]).
//!
//! - Before its first step, a run saves how it starts ([`SavedStart`]: the
//!   prepared request or the paused run with its decisions, and what its record
//!   needs) in `run_starts`; each step is a row of `run_steps`, written before
//!   the run goes on.
//! - Started again, the run keeps its id. Its event log is cleared and written
//!   anew: the recorded steps' events first (they are kept with each step), then
//!   the new ones, so a client following the chat sees one clean answer. Its
//!   model calls are made only for the steps not recorded; a call that acts and
//!   was under way ends `outcome_unknown` (or runs again with the same
//!   idempotency key when its tool is idempotent).
//! - A run started again has no client: it runs to its end, and `GET
//!   /api/chat/{id}/stream` attaches to it as to any running answer.

use std::sync::Arc;

use agent_graph::journal::{JournalError, RunStart, Step, StepJournal};
use agent_store::Store;
use agent_store::recorder::now_ms;
use futures::future::BoxFuture;

/// How a durable run of the server starts, as saved beside it.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct SavedStart {
    /// What the loop starts from.
    pub(crate) start: RunStart,
    /// How many of the run's first messages its thread held as stored (see
    /// `RunMeta::kept`).
    pub(crate) kept: Option<usize>,
    /// The graph, model and prompt hash of its record.
    pub(crate) graph: String,
    pub(crate) model: String,
    pub(crate) prompt_hash: Option<String>,
}

/// One account's step journal in the run store: each step a row of
/// `run_steps`, written (and awaited) before the run goes on.
pub struct StoreJournal {
    store: Store,
    account: String,
    /// Saved before the run's first step (`None` for a run started again: its
    /// start is saved already).
    start: Option<String>,
}

impl StoreJournal {
    /// The journal of `account`'s runs in `store`; `start` (the run's saved
    /// start, JSON) is saved when the run reads its steps, before its first step.
    pub fn new(store: Store, account: impl Into<String>, start: Option<String>) -> Self {
        Self {
            store,
            account: account.into(),
            start,
        }
    }
}

fn failed(error: impl std::fmt::Display) -> JournalError {
    JournalError(error.to_string())
}

impl StepJournal for StoreJournal {
    fn steps<'a>(&'a self, run_id: &'a str) -> BoxFuture<'a, Result<Vec<Step>, JournalError>> {
        Box::pin(async move {
            let rows = self.store.account(self.account.clone());
            if let Some(start) = &self.start {
                rows.save_start(run_id, start, now_ms())
                    .await
                    .map_err(failed)?;
            }
            let mut steps = Vec::new();
            for (number, kind, body) in rows.steps(run_id).await.map_err(failed)? {
                let step: Step = serde_json::from_str(&body).map_err(|e| {
                    failed(format!(
                        "step {number} ({kind}) of run {run_id} is unreadable: {e}"
                    ))
                })?;
                steps.push(step);
            }
            Ok(steps)
        })
    }

    fn record<'a>(
        &'a self,
        run_id: &'a str,
        step: &'a Step,
    ) -> BoxFuture<'a, Result<(), JournalError>> {
        Box::pin(async move {
            let body = serde_json::to_string(step).map_err(failed)?;
            self.store
                .account(self.account.clone())
                .record_step(run_id, (step.number, step.kind().as_str()), &body, now_ms())
                .await
                .map_err(failed)
        })
    }
}

/// The journal of a new durable run: its start saved before its first step.
pub(crate) fn journal_for(
    store: &Store,
    account: &str,
    saved: &SavedStart,
) -> Arc<dyn StepJournal> {
    let start = serde_json::to_string(saved)
        .map_err(|e| tracing::error!(error = %e, "a run's start is not serializable; it will not start again after a crash"))
        .ok();
    Arc::new(StoreJournal::new(store.clone(), account, start))
}
