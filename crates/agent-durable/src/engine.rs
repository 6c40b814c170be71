//! A durable engine that runs a server's runs on its own workers (Restate, see
//! [`crate::restate`]), behind the run owner: [`crate::Runs::submit`] stores
//! a run's turn first, then hands it to the [`Engine`], and submits it again
//! while the engine never acknowledged it ([`crate::Runs::resubmit`]). What
//! goes to the engine ([`RunInput`], [`Continuation`]) is sealed by the
//! engine's client; what comes back is written to the run store by the
//! engine's worker, through the same run owner.
//!
//! This module needs no engine SDK: a server that submits runs does not link
//! the worker's (the `worker` feature).

use agent_graph::journal::RunStart;
use futures::future::BoxFuture;

/// Why an engine did not take a submission.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The engine could not be reached: the run waits, stored, and is
    /// submitted again when the engine answers.
    #[error("the durable engine cannot be reached: {0}")]
    Unreachable(String),
    /// The engine answered with a refusal.
    #[error("the durable engine refused: {0}")]
    Refused(String),
}

/// A durable engine's ingress, as the run owner uses it. Submissions are
/// idempotent on the run id: a run submitted twice runs once.
pub trait Engine: Send + Sync {
    /// Submits a run; `Ok` once the engine has taken it.
    fn submit<'a>(&'a self, input: &'a RunInput) -> BoxFuture<'a, Result<(), EngineError>>;

    /// Hands the user's decisions to a paused run waiting on `awakeable`: the
    /// run goes on as `next`.
    fn resume<'a>(
        &'a self,
        awakeable: &'a str,
        next: &'a Continuation,
    ) -> BoxFuture<'a, Result<(), EngineError>>;

    /// Whether the engine answers now (a follower of one of its runs says
    /// so while it does not).
    fn reachable(&self) -> BoxFuture<'_, bool>;
}

/// The owner of the runs an engine runs, in the run store: the engine, not
/// a process, answers for them (they are never a process's orphans).
pub const ENGINE_OWNER: &str = "restate";

/// How long a sealed submission or continuation may wait before a worker
/// first takes it (the engine down, or busy): 10 minutes. A run that waits
/// longer is resubmitted by its server, sealed anew.
pub const SEAL_TTL_MS: i64 = 10 * 60 * 1000;

/// What resolves the awakeable a paused run waits on: the user's decisions,
/// bound to the run they continue and to each call they decide, and the
/// record of the run that continues it (a new run id, as the server writes
/// it).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct Continuation {
    /// The continuing run's id.
    pub run_id: String,
    /// The paused run it continues.
    pub paused_run_id: String,
    /// The calls it decides, as the server checked them.
    pub calls: Vec<BoundCall>,
    /// The decisions about the paused run's calls.
    pub decisions: Vec<agent_graph::run::Decision>,
    /// How many of its first messages the thread holds as stored.
    pub kept: Option<usize>,
    /// When it started (Unix milliseconds).
    pub started_ms: i64,
    /// After when no worker takes it (Unix milliseconds).
    pub expires_ms: i64,
    /// The id of the answer the continuing run streams (the message it
    /// continues).
    #[serde(default)]
    pub answer_id: Option<String>,
}

/// A call a [`Continuation`] decides: its id, tool and argument hash.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BoundCall {
    /// The call.
    pub tool_call_id: String,
    /// Its tool.
    pub tool_name: String,
    /// `sha256:<hex>` of its canonical arguments (empty for a client tool's
    /// output, which is matched by call id and tool).
    pub args_hash: String,
}

impl Continuation {
    /// A continuation, as run `run_id`, of the paused run `paused_run_id` with
    /// `decisions` about `calls`.
    pub fn new(
        run_id: impl Into<String>,
        paused_run_id: impl Into<String>,
        (calls, decisions): (Vec<BoundCall>, Vec<agent_graph::run::Decision>),
    ) -> Self {
        let now = agent_store::recorder::now_ms();
        Self {
            run_id: run_id.into(),
            paused_run_id: paused_run_id.into(),
            calls,
            decisions,
            kept: None,
            started_ms: now,
            expires_ms: now + SEAL_TTL_MS,
            answer_id: None,
        }
    }
}

/// What a submitter sends for one run.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct RunInput {
    /// The account the run belongs to.
    pub account: String,
    /// The run's record: its id (the start's), thread, graph, model and prompt
    /// hash, as the submitter wrote its row.
    pub thread_id: Option<String>,
    /// The graph's name.
    pub graph: String,
    /// The model id.
    pub model: String,
    /// The prompt hash.
    pub prompt_hash: Option<String>,
    /// When the run started (Unix milliseconds).
    pub started_ms: i64,
    /// What the run starts from.
    pub start: RunStart,
    /// How many of the run's first messages its thread holds as stored.
    pub kept: Option<usize>,
    /// After when no worker takes it (Unix milliseconds): a captured
    /// submission cannot be presented later.
    pub expires_ms: i64,
    /// The id of the answer the run streams (its first message in the
    /// thread is known by it).
    #[serde(default)]
    pub answer_id: Option<String>,
}

impl RunInput {
    /// The input of a run of `account` starting from `start`, with its record's
    /// fields empty (set them with the struct's fields).
    pub fn new(account: impl Into<String>, start: RunStart) -> Self {
        let now = agent_store::recorder::now_ms();
        Self {
            account: account.into(),
            thread_id: None,
            graph: String::new(),
            model: String::new(),
            prompt_hash: None,
            started_ms: now,
            start,
            kept: None,
            expires_ms: now + SEAL_TTL_MS,
            answer_id: None,
        }
    }

    /// The input of the run that continues `paused` (a run of this input) with
    /// `next`'s decisions, under `next`'s run id.
    #[cfg_attr(not(feature = "worker"), allow(dead_code))]
    pub(crate) fn continued(
        &self,
        mut paused: agent_graph::run::PausedRun,
        next: Continuation,
    ) -> Self {
        paused.request.context.run_id = next.run_id.into();
        Self {
            start: RunStart::Continue {
                paused,
                decisions: next.decisions,
            },
            kept: next.kept,
            started_ms: next.started_ms,
            answer_id: next.answer_id,
            ..self.clone()
        }
    }
}

/// What a run invocation answers (the same answer to a repeated submission).
/// Restate keeps it where its admin API shows it: it holds no text of the
/// run (the answer and any error are in the run store).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct RunSummary {
    /// The run (the last one, for a run continued after a pause).
    pub run_id: String,
    /// `done`, `paused`, `failed` or `interrupted`.
    pub status: String,
}

/// How long a stored run may wait for the engine's acknowledgement before
/// it is submitted again.
const RESUBMIT_AFTER_MS: i64 = 5_000;

/// What [`crate::Runs::submit`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Submitted {
    /// The engine took the run.
    Taken,
    /// The engine could not be reached: the run is stored and is submitted
    /// again when it answers ([`crate::Runs::resubmit`]).
    Queued(EngineError),
}

impl crate::Runs {
    /// Hands run `start` of `spec` to the engine (see [`crate::Runs::with_engine`]):
    /// its turn stored first (the run owned by the engine, its start saved),
    /// then submitted under its run id as idempotency key, or, when it
    /// continues a run paused in the engine, its decisions handed to that
    /// run's invocation. An engine that cannot be reached leaves the run
    /// stored, unacknowledged ([`Submitted::Queued`]).
    pub async fn submit(
        &self,
        spec: &crate::RunSpec,
        start: RunStart,
    ) -> Result<Submitted, crate::RunsError> {
        let Some(engine) = self.engine() else {
            return Ok(Submitted::Queued(EngineError::Unreachable(
                "this process has no durable engine".into(),
            )));
        };
        let rows = self.store().account(spec.account.clone());
        // Decisions about a paused run that waits for them in its invocation
        // go to it; else the continuation is a run of its own.
        let waiting = match &start {
            RunStart::Continue { .. } => awakeable_of(&rows, spec).await,
            _ => None,
        };
        if let Err(error) = self.open_for_engine(spec, &start, ENGINE_OWNER).await {
            // The paused run keeps waiting for its decisions.
            if let Some((awakeable, paused_id)) = &waiting {
                let state = serde_json::json!({ "awakeable": awakeable });
                let now = agent_store::recorder::now_ms();
                if let Err(error) = rows.save_paused(paused_id, &state, now).await {
                    tracing::error!(%error, "a paused run's awakeable could not be put back");
                }
            }
            return Err(error);
        }
        let run_id = start.run_id().to_owned();
        let handed = match (&waiting, start) {
            (Some((awakeable, paused_id)), RunStart::Continue { paused, decisions }) => {
                let next = continuation(spec, (&run_id, paused_id), &paused, decisions);
                engine.resume(awakeable, &next).await
            }
            (_, start) => engine.submit(&run_input(spec, start)).await,
        };
        Ok(acknowledged(&rows, &run_id, handed).await?)
    }

    /// Submits again the runs stored for the engine that it never
    /// acknowledged (it was down, or the process died between storing a run
    /// and submitting it), each under its run id as idempotency key (a run
    /// the engine did take is not run twice); returns how many it took now.
    pub async fn resubmit(&self) -> Result<usize, agent_store::StoreError> {
        let Some(engine) = self.engine() else {
            return Ok(0);
        };
        let before = agent_store::recorder::now_ms() - RESUBMIT_AFTER_MS;
        let mut taken = 0;
        for (account, run_id) in self.store().unsubmitted_runs(ENGINE_OWNER, before).await? {
            let rows = self.store().account(account.clone());
            let (Some(run), Some(text)) = (rows.run(&run_id).await?, rows.start_of(&run_id).await?)
            else {
                continue;
            };
            let Ok(saved) = serde_json::from_str::<crate::SavedStart>(&text) else {
                continue;
            };
            let spec = crate::RunSpec::new(account, (saved.graph, saved.model, saved.prompt_hash));
            let mut input = run_input(&spec, saved.start);
            input.thread_id = run.run.thread_id;
            input.kept = saved.kept;
            input.answer_id = saved.answer_id;
            let handed = engine.submit(&input).await;
            if acknowledged(&rows, &run_id, handed).await? == Submitted::Taken {
                tracing::info!(run_id = %run_id, "a run the engine never acknowledged was submitted again");
                taken += 1;
            }
        }
        Ok(taken)
    }
}

/// Records the engine's acknowledgement of run `run_id`, when it gave one.
async fn acknowledged(
    rows: &agent_store::AccountStore<'_>,
    run_id: &str,
    handed: Result<(), EngineError>,
) -> Result<Submitted, agent_store::StoreError> {
    match handed {
        Ok(()) => {
            rows.set_submitted(run_id, agent_store::recorder::now_ms())
                .await?;
            Ok(Submitted::Taken)
        }
        Err(error) => {
            tracing::warn!(%error, run_id = %run_id, "the durable engine did not take the run; it is submitted again when the engine answers");
            Ok(Submitted::Queued(error))
        }
    }
}

/// The engine's input for run `start` of `spec`.
fn run_input(spec: &crate::RunSpec, start: RunStart) -> RunInput {
    let mut input = RunInput::new(spec.account.clone(), start);
    input.thread_id = spec.thread.as_ref().map(|t| t.id.clone());
    input.graph.clone_from(&spec.graph);
    input.model.clone_from(&spec.model);
    input.prompt_hash.clone_from(&spec.prompt_hash);
    input.kept = spec.thread.as_ref().map(|t| t.kept + t.messages.len());
    input.answer_id.clone_from(&spec.answer_id);
    input
}

/// The continuation, as run `run_id`, of the paused run `paused_id` with
/// `decisions` about its calls.
fn continuation(
    spec: &crate::RunSpec,
    (run_id, paused_id): (&str, &str),
    paused: &agent_graph::run::PausedRun,
    decisions: Vec<agent_graph::run::Decision>,
) -> Continuation {
    let bound = paused
        .pending
        .iter()
        .map(|p| BoundCall {
            tool_call_id: p.tool_call_id.clone(),
            tool_name: p.tool_name.clone(),
            args_hash: p.args_hash.clone(),
        })
        .collect();
    let mut next = Continuation::new(run_id, paused_id, (bound, decisions));
    next.kept = spec.thread.as_ref().map(|t| t.kept + t.messages.len());
    next.answer_id.clone_from(&spec.answer_id);
    next
}

/// The awakeable the thread's latest run waits on, when it is paused in the
/// engine's invocation, and that run's id; taken (the decisions go to it
/// once).
async fn awakeable_of(
    rows: &agent_store::AccountStore<'_>,
    spec: &crate::RunSpec,
) -> Option<(String, String)> {
    let thread = spec.thread.as_ref()?;
    let latest = rows.latest_run(&thread.id).await.ok()??;
    if latest.status != agent_store::RunStatus::Paused {
        return None;
    }
    let state = rows.take_paused(&latest.run.id).await.ok()??;
    state["awakeable"]
        .as_str()
        .map(|a| (a.to_owned(), latest.run.id.clone()))
}
