//! Runs as Restate invocations: the [`AgentRuns`] service (`agent worker` serves
//! it), whose `run` handler runs one durable run with every step a `ctx.run`.
//!
//! How a step goes through Restate ([`RestateJournal`]): the run, in its own
//! task, asks for step N; the handler calls `ctx.run` named after it. When
//! Restate's journal already holds the entry (a retried invocation replaying),
//! `ctx.run` returns it without running its closure, and the run replays the
//! step. When it does not, the closure hands the run an open slot, waits for the
//! run to do the step and record it through the slot, and returns the step,
//! which Restate journals and acknowledges before `ctx.run` returns; only then
//! does the run go on. So a step is recorded before the next starts, and the
//! intent rule holds as with the embedded journal: an intent replayed from the
//! journal followed by a tool step that is not is a call that was under way when
//! the worker died (`outcome_unknown`, unless its tool is idempotent).
//!
//! Restate replays a journal in order, so the run opens its steps one at a time
//! ([`agent_graph::journal::StepJournal::one_step_at_a_time`]): read-only calls
//! of one turn run one after another.
//!
//! The run's events go to the run store, as `agent serve` writes them (its
//! event log is cleared and written anew by each attempt: the replayed steps'
//! events first); `agent serve` streams them to the client from there. The run
//! row is written by whoever submits the run, owned by [`RESTATE_OWNER`]:
//! Restate, not a process, answers for it.
//!
//! Anyone who reaches Restate's ingress or admin API, or the worker's
//! endpoint, could call the handler, replay an invocation or read its
//! journal; a run's start carries the user's conversation and approval
//! decisions. So:
//!
//! - the worker answers only requests Restate signed with its request
//!   identity key ([`serve`] with the server's public keys);
//! - every payload is sealed ([`crate::seal`]: encrypted and authenticated
//!   under a key the servers and workers hold in a private file): the run's
//!   input ([`RunInput`]), each journaled step, and the decisions that
//!   continue a paused run ([`Continuation`]), so the admin API shows
//!   ciphertext and a process without the key starts nothing;
//! - a sealed run is bound to its run id, account and an expiry: the handler
//!   runs it only when the run's row is Restate's in the store, only in the
//!   first invocation that presented it (redeemed once in the store,
//!   [`agent_store::Store::redeem`], before the expiry), and under its run id
//!   as idempotency key where Restate tells the handler the key; so a captured
//!   run resent under another key (another invocation), or after Restate
//!   forgot the first, runs nothing;
//! - a sealed continuation is bound to the paused run, to each call it decides
//!   (tool and argument hash) and to an expiry, and is redeemed once; one that
//!   does not hold is refused and the run goes on waiting (a new awakeable),
//!   so a captured or forged one neither runs a call nor ends the run.
//!
//! A run paused on approvals waits in its invocation on an awakeable (a durable
//! promise) whose id it writes to the store beside the paused run; the server
//! resolves it with the user's decisions ([`Continuation`], sealed too) when the
//! approval arrives, and the invocation goes on with the continuing run. While
//! it waits, Restate suspends the invocation after a minute without progress:
//! no worker holds it, so it can wait days, across worker restarts.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use agent_graph::Graph;
use agent_graph::journal::{
    JournalError, OpenStep, RunStart, Step, StepJournal, StepKind, StepSlot,
};
use agent_store::{NewRun, Pricing, RunRecording, Store};

use crate::seal::{DurableKey, Purpose, SealError, Sealed};
use ai_core::{CompletionPort, ToolRunner};
use futures::StreamExt;
use futures::future::BoxFuture;
use restate_sdk::prelude::*;
use tokio::sync::{mpsc, oneshot};

/// The owner of the runs Restate runs, in the run store.
pub const RESTATE_OWNER: &str = "restate";

/// The service's name at Restate's ingress (`POST /AgentRuns/run/send`).
pub const SERVICE: &str = "AgentRuns";

/// How long a sealed submission or continuation may wait before a worker
/// first takes it (Restate down, or busy): 10 minutes. A run that waits
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
        }
    }

    /// Whether it may continue `paused` at `now_ms`: it names that run, is
    /// unexpired, and every decision is about a call it binds, which the run
    /// waits on with that tool and those arguments.
    fn check(&self, paused: &agent_graph::run::PausedRun, now_ms: i64) -> Result<(), String> {
        if self.paused_run_id != paused.request.context.run_id {
            return Err("the decisions are for another run".into());
        }
        if self.expires_ms < now_ms {
            return Err("the decisions expired".into());
        }
        for decision in &self.decisions {
            let id = decision.tool_call_id();
            let bound = self.calls.iter().find(|c| c.tool_call_id == id);
            let pending = paused.pending.iter().find(|p| p.tool_call_id == id);
            let client = paused.client_calls.iter().find(|c| c.tool_call_id == id);
            let holds = match (bound, pending, client) {
                (Some(b), Some(p), _) => b.tool_name == p.tool_name && b.args_hash == p.args_hash,
                (Some(b), None, Some(c)) => b.tool_name == c.tool_name,
                _ => false,
            };
            if !holds {
                return Err(format!(
                    "a decision is about call `{}`, which this run does not wait on as decided",
                    ai_core::text::log_field(id)
                ));
            }
        }
        Ok(())
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

/// The service: what a run needs (the composition root's model, runner and
/// graph) and where it is recorded.
pub struct AgentRuns {
    model: Arc<dyn CompletionPort>,
    runner: Arc<ToolRunner>,
    graph: Graph,
    store: Store,
    pricing: Option<Pricing>,
    key: Arc<DurableKey>,
}

impl AgentRuns {
    /// Runs of `graph` with `model` and `runner`, recorded in `store`; only
    /// submissions sealed with `key` run, and their steps are journaled sealed
    /// with it.
    pub fn new(
        model: Arc<dyn CompletionPort>,
        runner: Arc<ToolRunner>,
        graph: Graph,
        (store, key): (Store, DurableKey),
    ) -> Self {
        Self {
            model,
            runner,
            graph,
            store,
            pricing: None,
            key: Arc::new(key),
        }
    }

    /// Prices each model call with `pricing`.
    pub fn with_pricing(mut self, pricing: Pricing) -> Self {
        self.pricing = Some(pricing);
        self
    }
}

/// The handler, in a module of its own: the service macro also generates client
/// types whose methods it does not document.
#[allow(missing_docs)]
mod service {
    use super::*;

    // After a minute without progress Restate asks the invocation to suspend:
    // one waiting for an approval does, and holds no worker. A step under way
    // (a model call, a slow tool) cannot suspend and has 10 more minutes
    // before it is aborted and retried. A worker that died is retried soon
    // (every 5 s at most) on the address it was served at.
    #[restate_sdk::service(
        name = "AgentRuns",
        inactivity_timeout = "1m",
        abort_timeout = "10m",
        invocation_retry_policy(initial_interval = "200ms", factor = 2.0, max_interval = "5s")
    )]
    impl AgentRuns {
        /// Runs one durable run to its end: each model call and tool execution
        /// a `ctx.run`, its events written to the run store; a pause waits on
        /// an awakeable for the decisions, and the continuing run goes on in
        /// this invocation.
        #[handler]
        async fn run(
            &self,
            ctx: Context<'_>,
            sealed: Json<Sealed>,
        ) -> Result<Json<RunSummary>, HandlerError> {
            let mut input: RunInput = sealed
                .into_inner()
                .open(Purpose::Run, &self.key)
                .map_err(|e| refused(&e.to_string()))?;
            self.admit(&ctx, &input).await?;
            loop {
                let (summary, paused) = self.run_part(&ctx, &input).await?;
                let Some((paused, decided)) = paused else {
                    return Ok(Json(summary));
                };
                let next = self.decisions(&ctx, &input, &paused, decided).await?;
                input = input.continued(*paused, next);
            }
        }
    }
}

fn refused(error: &str) -> TerminalError {
    tracing::warn!(%error, "a sealed payload was refused");
    TerminalError::new(error)
}

impl AgentRuns {
    /// Whether this invocation may run `input`: under its run id as
    /// idempotency key, for a run the store holds as Restate's, unexpired when
    /// first presented, and presented first by this invocation (redeemed once;
    /// a retry of this invocation passes again).
    async fn admit(&self, ctx: &Context<'_>, input: &RunInput) -> Result<(), TerminalError> {
        let run_id = input.start.run_id();
        // Where Restate says which idempotency key the invocation came under
        // (its service protocol v7, or the ingress header passed on), it must
        // be the run's id. Either way the redemption below binds the run to
        // the first invocation that presented it: a copy sent under another
        // key is another invocation, and is refused there.
        let header = ctx.headers().get("idempotency-key").map(String::as_str);
        if ctx
            .idempotency_key()
            .or(header)
            .is_some_and(|key| key != run_id)
        {
            return Err(refused(
                "a run is taken only under its own id as the idempotency key",
            ));
        }
        let rows = self.store.account(input.account.clone());
        let row = rows
            .run(run_id)
            .await
            .map_err(|e| TerminalError::new(e.to_string()))?;
        if row.is_none_or(|r| r.run.owner != RESTATE_OWNER) {
            return Err(refused("the run store holds no such run for Restate"));
        }
        let tag = format!("run:{}:{run_id}", input.account);
        let holder = ctx.invocation_id();
        let store_failed = |e: agent_store::StoreError| TerminalError::new(e.to_string());
        match self.store.redeemed_by(&tag).await.map_err(store_failed)? {
            Some(first) if first == holder => return Ok(()),
            Some(_) => return Err(refused("this run was taken by another invocation")),
            None => {}
        }
        if input.expires_ms < agent_store::recorder::now_ms() {
            return Err(refused("the submission expired before a worker took it"));
        }
        let now = agent_store::recorder::now_ms();
        if !self
            .store
            .redeem(&tag, holder, now)
            .await
            .map_err(store_failed)?
        {
            return Err(refused("this run was taken by another invocation"));
        }
        Ok(())
    }

    /// The decisions that continue `paused`: the first sealed continuation
    /// that holds for it (see [`Continuation::check`]), redeemed once. One that
    /// does not hold is refused and the run waits on a new awakeable, whose id
    /// replaces the old one in the store.
    async fn decisions<'ctx>(
        &self,
        ctx: &Context<'ctx>,
        input: &RunInput,
        paused: &agent_graph::run::PausedRun,
        mut decided: Decided<'ctx>,
    ) -> Result<Continuation, HandlerError> {
        let paused_id = &paused.request.context.run_id;
        loop {
            let sealed = decided.await?.into_inner();
            let now = agent_store::recorder::now_ms();
            let checked = sealed
                .open::<Continuation>(Purpose::Continuation, &self.key)
                .map_err(|e: SealError| e.to_string())
                .and_then(|next| next.check(paused, now).map(|()| next));
            let error = match checked {
                Ok(next) => {
                    let tag = format!("continuation:{}:{paused_id}", input.account);
                    match self.store.redeem(&tag, &next.run_id, now).await {
                        Ok(true) => return Ok(next),
                        Ok(false) => "these decisions were used before".to_owned(),
                        Err(e) => return Err(TerminalError::new(e.to_string()).into()),
                    }
                }
                Err(error) => error,
            };
            tracing::warn!(run_id = %paused_id, %error, "decisions for a paused run were refused; it goes on waiting");
            let (awakeable, next) = ctx.awakeable::<Json<Sealed>>();
            let waiting = serde_json::json!({ "awakeable": awakeable });
            self.store
                .account(input.account.clone())
                .save_paused(paused_id, &waiting, now)
                .await?;
            decided = Box::pin(next);
        }
    }
}

impl RunInput {
    /// The input of the run that continues `paused` (a run of this input) with
    /// `next`'s decisions, under `next`'s run id.
    fn continued(&self, mut paused: agent_graph::run::PausedRun, next: Continuation) -> Self {
        paused.request.context.run_id = next.run_id;
        Self {
            start: RunStart::Continue {
                paused,
                decisions: next.decisions,
            },
            kept: next.kept,
            started_ms: next.started_ms,
            ..self.clone()
        }
    }
}

impl AgentRuns {
    /// Runs one part of a run: to its end or its pause (its paused state, and
    /// the awakeable that brings the decisions, its id in the store before the
    /// pause is recorded, so the approval that follows finds it).
    async fn run_part<'ctx>(
        &self,
        ctx: &Context<'ctx>,
        input: &RunInput,
    ) -> Result<
        (
            RunSummary,
            Option<(Box<agent_graph::run::PausedRun>, Decided<'ctx>)>,
        ),
        HandlerError,
    > {
        let run_id = input.start.run_id().to_owned();
        let rows = self.store.account(input.account.clone());
        // Each attempt writes the run's log anew: the replayed steps' events
        // first, then the new ones.
        rows.clear_events(&run_id).await?;
        let (opens, mut requests) = mpsc::channel(1);
        let journal = Arc::new(RestateJournal { opens });
        let key = Arc::clone(&self.key);
        let handle = self
            .graph
            .durable(
                input.start.clone(),
                Arc::clone(&self.model),
                Arc::clone(&self.runner),
                journal,
            )
            .map_err(|e| TerminalError::new(e.to_string()))?;
        let record = NewRun {
            id: run_id.clone(),
            thread_id: input.thread_id.clone(),
            graph: input.graph.clone(),
            model: input.model.clone(),
            prompt_hash: input.prompt_hash.clone(),
            owner: RESTATE_OWNER.to_owned(),
            started_ms: input.started_ms,
        };
        let recording = RunRecording::resumed(
            self.store.clone(),
            input.account.clone(),
            &record,
            self.pricing.clone(),
        );
        let (events, outcome) = handle.into_parts();
        let recorder = tokio::spawn(record_events(events, recording));
        // The run holds the journal's sender: the requests end with the run.
        while let Some(open) = requests.recv().await {
            serve_step(ctx, open, &key).await;
        }
        let mut outcome = outcome.await;
        let recording = recorder
            .await
            .map_err(|e| TerminalError::new(format!("the run's recorder failed: {e}")))?;
        let paused = match outcome.as_mut().ok().and_then(|o| o.paused.take()) {
            Some(paused) => {
                let (awakeable, decided) = ctx.awakeable::<Json<Sealed>>();
                let waiting = serde_json::json!({ "awakeable": awakeable });
                let now = agent_store::recorder::now_ms();
                rows.save_paused(&run_id, &waiting, now).await?;
                let decided: Decided<'ctx> = Box::pin(decided);
                Some((paused, decided))
            }
            None => None,
        };
        let mut end = crate::store::run_end(&outcome, input.kept.unwrap_or(0));
        if paused.is_some() {
            // Its paused state was taken above.
            end.status = agent_store::RunStatus::Paused;
        }
        let status = end.status.as_str().to_owned();
        for failure in recording.finish(end).await {
            tracing::error!(run_id = %run_id, failure = %failure, "the run store did not take the whole run");
        }
        let summary = RunSummary { run_id, status };
        Ok((summary, paused))
    }
}

/// The decisions a paused run waits for (an awakeable's promise).
type Decided<'ctx> =
    std::pin::Pin<Box<dyn Future<Output = Result<Json<Sealed>, TerminalError>> + Send + 'ctx>>;

/// Writes a run's events to its recording until they end.
async fn record_events(
    mut events: agent_graph::run::EventStream,
    mut recording: RunRecording,
) -> RunRecording {
    while let Some(event) = events.next().await {
        if let Err(error) = recording.record(&event) {
            tracing::error!(%error, "the run store is behind; events are not recorded");
        }
    }
    recording
}

/// The run asking for one step.
struct Open {
    number: u32,
    kind: StepKind,
    reply: oneshot::Sender<Result<StepSlot, JournalError>>,
}

/// Answers one step request with a `ctx.run` (see the module docs), its
/// record sealed with `key`.
async fn serve_step(ctx: &Context<'_>, open: Open, key: &Arc<DurableKey>) {
    let Open {
        number,
        kind,
        reply,
    } = open;
    let reply = Arc::new(Mutex::new(Some(reply)));
    let ran = Arc::new(AtomicBool::new(false));
    let (ack, acked) = oneshot::channel();
    let closure = {
        let (reply, ran, key) = (Arc::clone(&reply), Arc::clone(&ran), Arc::clone(key));
        move || async move {
            ran.store(true, Ordering::SeqCst);
            let (record, recorded) = oneshot::channel();
            if let Some(reply) = take(&reply) {
                let slot = RestateSlot { record, acked };
                let _ = reply.send(Ok(StepSlot::Open(Box::new(slot))));
            }
            match recorded.await {
                Ok(step) => Sealed::seal(&step, Purpose::Step, &key)
                    .map(Json)
                    .map_err(|e| TerminalError::new(e.to_string()).into()),
                Err(_) => Err(TerminalError::new(format!(
                    "step {number} ({}) ended unrecorded: the run stopped during it",
                    kind.as_str()
                ))
                .into()),
            }
        }
    };
    let result: Result<Json<Sealed>, TerminalError> = ctx
        .run(closure)
        .name(format!("step {number} {}", kind.as_str()))
        .await;
    let ran = ran.load(Ordering::SeqCst);
    match (result, ran) {
        (Ok(_), true) => {
            let _ = ack.send(Ok(()));
        }
        (Err(error), true) => {
            let _ = ack.send(Err(JournalError(error.message().to_owned())));
        }
        (Ok(Json(sealed)), false) => {
            if let Some(reply) = take(&reply) {
                let opened = sealed
                    .open::<Step>(Purpose::Step, key)
                    .map(|step| StepSlot::Recorded(Box::new(step)))
                    .map_err(|e| JournalError(format!("step {number} in Restate's journal: {e}")));
                let _ = reply.send(opened);
            }
        }
        (Err(error), false) => {
            if let Some(reply) = take(&reply) {
                let message = format!(
                    "step {number} failed in an earlier attempt: {}",
                    error.message()
                );
                let _ = reply.send(Err(JournalError(message)));
            }
        }
    }
}

fn take<T>(slot: &Mutex<Option<T>>) -> Option<T> {
    slot.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take()
}

/// A run's journal in a Restate invocation: step requests go to the handler,
/// which answers each with a `ctx.run`.
pub struct RestateJournal {
    opens: mpsc::Sender<Open>,
}

impl std::fmt::Debug for RestateJournal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RestateJournal")
    }
}

impl StepJournal for RestateJournal {
    fn step<'a>(
        &'a self,
        _run_id: &'a str,
        number: u32,
        kind: StepKind,
    ) -> BoxFuture<'a, Result<StepSlot, JournalError>> {
        Box::pin(async move {
            let (reply, answer) = oneshot::channel();
            let stopped = || JournalError("the Restate invocation stopped".into());
            self.opens
                .send(Open {
                    number,
                    kind,
                    reply,
                })
                .await
                .map_err(|_| stopped())?;
            answer.await.map_err(|_| stopped())?
        })
    }

    fn one_step_at_a_time(&self) -> bool {
        true
    }
}

/// An open step of a Restate invocation: recording it completes its `ctx.run`.
struct RestateSlot {
    record: oneshot::Sender<Step>,
    acked: oneshot::Receiver<Result<(), JournalError>>,
}

impl OpenStep for RestateSlot {
    fn record(self: Box<Self>, step: Step) -> BoxFuture<'static, Result<(), JournalError>> {
        let Self { record, acked } = *self;
        Box::pin(async move {
            let stopped = || JournalError("the Restate invocation stopped".into());
            record.send(step).map_err(|_| stopped())?;
            acked.await.map_err(|_| stopped())?
        })
    }
}

/// Serves [`AgentRuns`] on `listener` until `stop` resolves (`agent worker`),
/// answering only requests signed by a Restate server holding one of
/// `identity_keys` (its request identity's public keys, `publickeyv1_...`).
/// With no key every request is answered: the caller says why that is
/// acceptable (tests).
pub async fn serve(
    runs: AgentRuns,
    listener: tokio::net::TcpListener,
    identity_keys: &[String],
    stop: impl Future,
) -> Result<(), String> {
    let mut builder = Endpoint::builder().bind(runs);
    for key in identity_keys {
        builder = builder
            .identity_key(key)
            .map_err(|e| format!("the Restate identity key {key:?} is not one: {e}"))?;
    }
    HttpServer::new(builder.build())
        .serve_with_cancel(listener, stop)
        .await;
    Ok(())
}

/// A request identity key pair for a Restate server: it signs every request
/// it sends a worker with the private key, and `agent worker` answers only
/// requests signed with a key whose public half it is given.
#[derive(Clone)]
pub struct IdentityKeyPair {
    /// The private key as PEM (PKCS#8), for the server's
    /// `request-identity-private-key-pem-file` (keep it private).
    pub private_pem: String,
    /// The public key as the SDK takes it (`publickeyv1_` and base58).
    pub public_key: String,
}

impl std::fmt::Debug for IdentityKeyPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdentityKeyPair")
            .field("public_key", &self.public_key)
            .finish_non_exhaustive()
    }
}

impl IdentityKeyPair {
    /// A fresh Ed25519 key pair.
    pub fn generate() -> Result<Self, String> {
        use base64::Engine;
        use ring::rand::SecureRandom;
        use ring::signature::KeyPair;
        let mut seed = [0u8; 32];
        ring::rand::SystemRandom::new()
            .fill(&mut seed)
            .map_err(|_| "no randomness".to_owned())?;
        let pair = ring::signature::Ed25519KeyPair::from_seed_unchecked(&seed)
            .map_err(|e| format!("not an Ed25519 seed: {e}"))?;
        // PKCS#8 v1 of an Ed25519 private key: this fixed header, then the seed.
        let mut der = hex::decode("302e020100300506032b657004220420").unwrap_or_default();
        der.extend_from_slice(&seed);
        let body = base64::engine::general_purpose::STANDARD.encode(&der);
        Ok(Self {
            private_pem: format!(
                "-----BEGIN PRIVATE KEY-----\n{body}\n-----END PRIVATE KEY-----\n"
            ),
            public_key: format!(
                "publickeyv1_{}",
                bs58::encode(pair.public_key().as_ref()).into_string()
            ),
        })
    }
}

/// `value` sealed for `purpose`, or the refusal to send it to `url`.
fn sealed<T: serde::Serialize>(
    url: &str,
    value: &T,
    purpose: Purpose,
    key: &DurableKey,
) -> Result<Sealed, RestateError> {
    Sealed::seal(value, purpose, key).map_err(|e| RestateError::Refused {
        url: url.to_owned(),
        status: 0,
        body: e.to_string(),
    })
}

/// Why Restate's ingress or admin API refused a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RestateError {
    /// The server could not be reached.
    #[error("Restate at {url} cannot be reached: {message}")]
    Unreachable {
        /// The endpoint (without credentials).
        url: String,
        /// What failed.
        message: String,
    },
    /// It answered with an error status.
    #[error("Restate answered {status} to {url}: {body}")]
    Refused {
        /// The endpoint.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The start of its answer.
        body: String,
    },
}

/// A client of a Restate server: its ingress (where runs are submitted) and its
/// admin API (where a worker registers).
#[derive(Debug, Clone)]
pub struct RestateClient {
    http: reqwest::Client,
    ingress: String,
    admin: String,
}

impl RestateClient {
    /// A client of the server whose ingress and admin API are at these URLs
    /// (`http://127.0.0.1:8080`, `http://127.0.0.1:9070` by default).
    pub fn new(ingress: &str, admin: &str) -> Result<Self, RestateError> {
        let unreachable = |message: String| RestateError::Unreachable {
            url: ingress.to_owned(),
            message,
        };
        let tls = client_tls::client_config().map_err(|e| unreachable(e.to_string()))?;
        let http = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .connect_timeout(std::time::Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| unreachable(e.to_string()))?;
        Ok(Self {
            http,
            ingress: ingress.trim_end_matches('/').to_owned(),
            admin: admin.trim_end_matches('/').to_owned(),
        })
    }

    /// Submits a run sealed with `key` without waiting for it, with its id as
    /// the idempotency key: the same run submitted again is not run again.
    pub async fn submit(&self, input: &RunInput, key: &DurableKey) -> Result<(), RestateError> {
        let url = format!("{}/{SERVICE}/run/send", self.ingress);
        let sealed = sealed(&url, input, Purpose::Run, key)?;
        self.post(&url, Some(input.start.run_id()), &sealed)
            .await
            .map(drop)
    }

    /// Runs a run sealed with `key` and waits for its summary, with its id as
    /// the idempotency key: a run submitted before answers with its first
    /// summary.
    pub async fn call(
        &self,
        input: &RunInput,
        key: &DurableKey,
    ) -> Result<RunSummary, RestateError> {
        let url = format!("{}/{SERVICE}/run", self.ingress);
        let sealed = sealed(&url, input, Purpose::Run, key)?;
        let body = self.post(&url, Some(input.start.run_id()), &sealed).await?;
        serde_json::from_str(&body).map_err(|e| RestateError::Refused {
            url,
            status: 200,
            body: format!("not a run summary: {e}"),
        })
    }

    /// Resolves the awakeable a paused run waits on with `next`, sealed with
    /// `key`: the run goes on with the user's decisions.
    pub async fn resolve(
        &self,
        awakeable: &str,
        next: &Continuation,
        key: &DurableKey,
    ) -> Result<(), RestateError> {
        let url = format!("{}/restate/awakeables/{awakeable}/resolve", self.ingress);
        let sealed = sealed(&url, next, Purpose::Continuation, key)?;
        self.post(&url, None, &sealed).await.map(drop)
    }

    /// Registers the worker at `uri` (its services and handlers) with the admin
    /// API, replacing an earlier registration of the same address.
    pub async fn register(&self, uri: &str) -> Result<(), RestateError> {
        let url = format!("{}/deployments", self.admin);
        let body = serde_json::json!({"uri": uri, "force": true});
        self.post(&url, None, &body).await.map(drop)
    }

    async fn post(
        &self,
        url: &str,
        idempotency_key: Option<&str>,
        body: &impl serde::Serialize,
    ) -> Result<String, RestateError> {
        let mut request = self.http.post(url).json(body);
        if let Some(key) = idempotency_key {
            request = request.header("idempotency-key", key);
        }
        let unreachable = |e: reqwest::Error| RestateError::Unreachable {
            url: url.to_owned(),
            message: e.without_url().to_string(),
        };
        let response = request.send().await.map_err(unreachable)?;
        let status = response.status();
        let text = response.text().await.map_err(unreachable)?;
        if !status.is_success() {
            return Err(RestateError::Refused {
                url: url.to_owned(),
                status: status.as_u16(),
                body: text.chars().take(300).collect(),
            });
        }
        Ok(text)
    }
}
