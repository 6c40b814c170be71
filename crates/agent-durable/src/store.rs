//! The embedded journal: a durable run's steps in the run store.

use std::collections::HashMap;

use std::sync::Arc;

use agent_graph::journal::{
    JournalError, OpenStep, RunStart, Step, StepJournal, StepKey, StepKind, StepSlot,
};
use agent_graph::run::{RunError, RunOutput};
use agent_store::recorder::now_ms;
use agent_store::{RunEnd, RunStatus, Store};
use futures::future::BoxFuture;

/// One account's step journal in the run store: each step a row of
/// `run_steps`, written (and awaited) before the run goes on. The run's steps
/// are read once, when it opens its first.
///
/// With a lease ([`StoreJournal::with_lease`]) a step is recorded only while
/// this process holds the run: under its owner and generation in the store
/// (checked in the transaction that records it) and by its own clock before
/// and after the write, so a process that lost the run (another took it over,
/// or it stalled past its lease) records nothing more and runs no call that
/// acts.
pub struct StoreJournal {
    store: Store,
    account: String,
    /// Saved before the run's first step (`None` for a run started again: its
    /// start is saved already).
    start: Option<String>,
    recorded: tokio::sync::OnceCell<HashMap<(u32, StepKind), Step>>,
    lease: Option<crate::lease::RunLease>,
    /// Resolves once the run's row is written (the steps are fenced by it).
    row_written: Option<agent_store::StartWritten>,
}

impl StoreJournal {
    /// The journal of `account`'s runs in `store`; `start` (the run's saved
    /// start, JSON) is saved when the run opens its first step. One journal
    /// serves one run.
    pub fn new(store: Store, account: impl Into<String>, start: Option<String>) -> Self {
        Self {
            store,
            account: account.into(),
            start,
            recorded: tokio::sync::OnceCell::new(),
            lease: None,
            row_written: None,
        }
    }

    /// Reads and records no step before `written` resolves: the run's row,
    /// written in the background, is what its steps are fenced by.
    pub fn after(mut self, written: agent_store::StartWritten) -> Self {
        self.row_written = Some(written);
        self
    }

    /// The run is new: its row was written by this process just now, so no
    /// step of it is in the store, and none is read.
    pub fn with_nothing_recorded(mut self) -> Self {
        self.recorded = tokio::sync::OnceCell::new_with(Some(HashMap::new()));
        self
    }

    /// Records steps only while `lease` holds the run (see the type's docs).
    pub fn with_lease(mut self, lease: crate::lease::RunLease) -> Self {
        self.lease = Some(lease);
        self
    }

    /// What the store holds of `run_id` (and its start saved, the first time).
    async fn load(&self, run_id: &str) -> Result<HashMap<(u32, StepKind), Step>, JournalError> {
        if let Some(written) = &self.row_written {
            written.clone().await;
        }
        let rows = self.store.account(self.account.clone());
        if let Some(start) = &self.start {
            rows.save_start(run_id, start, now_ms())
                .await
                .map_err(failed)?;
        }
        let mut steps = HashMap::new();
        for (number, kind, body) in rows.steps(run_id).await.map_err(failed)? {
            let step: Step = serde_json::from_str(&body).map_err(|e| {
                failed(format!(
                    "step {number} ({kind}) of run {run_id} is unreadable: {e}"
                ))
            })?;
            steps.insert((step.number, step.kind()), step);
        }
        Ok(steps)
    }
}

fn failed(error: impl std::fmt::Display) -> JournalError {
    JournalError(error.to_string())
}

/// An open step of a [`StoreJournal`].
struct StoreSlot {
    store: Store,
    account: String,
    run_id: String,
    lease: Option<crate::lease::RunLease>,
}

/// The run is no longer this process's to record.
fn lease_lost() -> JournalError {
    JournalError(
        "this process no longer holds the run (its lease ran out or another process took it over); it stops here".into(),
    )
}

impl OpenStep for StoreSlot {
    fn record(self: Box<Self>, step: Step) -> BoxFuture<'static, Result<(), JournalError>> {
        Box::pin(async move {
            let holds = |lease: &Option<crate::lease::RunLease>| {
                lease.as_ref().is_none_or(|l| l.epoch.holds())
            };
            if !holds(&self.lease) {
                return Err(lease_lost());
            }
            let body = serde_json::to_string(&step).map_err(failed)?;
            let fence = self.lease.as_ref().map(crate::lease::RunLease::fence);
            let recorded = self
                .store
                .account(self.account)
                .record_step(
                    &self.run_id,
                    (step.number, step.kind().as_str()),
                    &body,
                    (now_ms(), fence.as_ref()),
                )
                .await;
            match recorded {
                Err(agent_store::StoreError::Fenced(_)) => return Err(lease_lost()),
                Err(error) => return Err(failed(error)),
                Ok(()) => {}
            }
            // A pause between the write and this check (the process stopped,
            // then resumed past its lease) stops the run before the call acts.
            if !holds(&self.lease) {
                return Err(lease_lost());
            }
            Ok(())
        })
    }
}

impl StepJournal for StoreJournal {
    fn step<'a>(&'a self, key: StepKey<'a>) -> BoxFuture<'a, Result<StepSlot, JournalError>> {
        Box::pin(async move {
            let recorded = self
                .recorded
                .get_or_try_init(|| self.load(key.run_id))
                .await?;
            Ok(match recorded.get(&(key.number, key.kind)) {
                Some(step) => StepSlot::Recorded(Box::new(step.clone())),
                None => StepSlot::Open(Box::new(StoreSlot {
                    store: self.store.clone(),
                    account: self.account.clone(),
                    run_id: key.run_id.to_owned(),
                    lease: self.lease.clone(),
                })),
            })
        })
    }
}

/// How a run's outcome is recorded: paused or done with its conversation (of
/// which the thread already holds the first `kept` messages), interrupted when
/// it was cancelled, failed otherwise.
pub fn run_end(outcome: &Result<RunOutput, RunError>, kept: usize) -> RunEnd<'_> {
    let kept = u64::try_from(kept).unwrap_or(u64::MAX);
    match outcome {
        Ok(output) => RunEnd {
            status: if output.paused.is_some() {
                RunStatus::Paused
            } else {
                RunStatus::Done
            },
            error: None,
            conversation: output.conversation(),
            kept,
            answer_id: None,
        },
        Err(error) => RunEnd {
            status: match error {
                RunError::Cancelled => RunStatus::Interrupted,
                _ => RunStatus::Failed,
            },
            error: Some(error.to_string()),
            conversation: &[],
            kept,
            answer_id: None,
        },
    }
}

/// How a durable run starts, as saved beside it (`run_starts`): what the loop
/// starts from, and what its record needs when it starts again.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct SavedStart {
    /// What the loop starts from.
    pub start: RunStart,
    /// How many of the run's first messages its thread held as stored (the
    /// history it continued; see `agent_store::RunEnd::kept`).
    pub kept: Option<usize>,
    /// The graph of its record.
    pub graph: String,
    /// The model of its record.
    pub model: String,
    /// The prompt hash of its record.
    pub prompt_hash: Option<String>,
    /// The id of the answer it streams (its first message in the thread is
    /// known by it), whichever process goes on with it.
    #[serde(default)]
    pub answer_id: Option<String>,
}

impl SavedStart {
    /// The saved start of a run starting from `start`, whose thread held `kept`
    /// of its messages, recorded with `graph`, `model` and `prompt_hash`.
    pub fn new(
        start: RunStart,
        kept: Option<usize>,
        (graph, model, prompt_hash): (String, String, Option<String>),
    ) -> Self {
        Self {
            start,
            kept,
            graph,
            model,
            prompt_hash,
            answer_id: None,
        }
    }

    /// Streams the answer known by `id`.
    pub fn with_answer_id(mut self, id: Option<String>) -> Self {
        self.answer_id = id;
        self
    }
}

/// The journal of a new durable run of `account`, held under `lease`: its
/// start saved before its first step, and nothing recorded before
/// `row_written` (when the run's row is written in the background).
pub fn journal_for(
    store: &Store,
    account: &str,
    saved: &SavedStart,
    (lease, row_written): (crate::lease::RunLease, Option<agent_store::StartWritten>),
) -> Arc<dyn StepJournal> {
    let start = serde_json::to_string(saved)
        .map_err(|e| tracing::error!(error = %e, "a run's start is not serializable; it will not start again after a crash"))
        .ok();
    let journal = StoreJournal::new(store.clone(), account, start).with_lease(lease);
    Arc::new(match row_written {
        Some(written) => journal.after(written),
        None => journal,
    })
}
