//! The `AgentRuns` service `agent worker` serves (see [`super`]): each run
//! an invocation recorded through the run owner ([`crate::Runs::go_on`]),
//! each step a `ctx.run`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use agent_graph::Graph;
use agent_graph::journal::{
    JournalError, OpenStep, Step, StepJournal, StepKey, StepKind, StepSlot,
};
use agent_graph::run::RunError;
use agent_store::NewRun;
use ai_core::{CompletionPort, ToolRunner};
use futures::future::BoxFuture;
use restate_sdk::prelude::*;
use tokio::sync::{mpsc, oneshot};

use crate::engine::{Continuation, ENGINE_OWNER, RunInput, RunSummary};
use crate::runs::{RunSpec, Runs};
use crate::seal::{DurableKey, Purpose, SealError, Sealed};

/// The service: what a run needs (the composition root's model, runner and
/// graph) and where it is recorded.
pub struct AgentRuns {
    model: Arc<dyn CompletionPort>,
    runner: Arc<ToolRunner>,
    graph: Graph,
    runs: Runs,
    key: Arc<DurableKey>,
}

impl AgentRuns {
    /// Runs of `graph` with `model` and `runner`, recorded by `runs` (the run
    /// owner on the store the servers share, with its pricing); only
    /// submissions sealed with `key` run, and their steps are journaled
    /// sealed with it.
    pub fn new(
        model: Arc<dyn CompletionPort>,
        runner: Arc<ToolRunner>,
        graph: Graph,
        (runs, key): (Runs, DurableKey),
    ) -> Self {
        Self {
            model,
            runner,
            graph,
            runs,
            key: Arc::new(key),
        }
    }

    fn store(&self) -> &agent_store::Store {
        self.runs.store()
    }
}

impl Continuation {
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
        let rows = self.store().account(input.account.clone());
        let row = rows
            .run(run_id)
            .await
            .map_err(|e| TerminalError::new(e.to_string()))?;
        if row.is_none_or(|r| r.run.owner != ENGINE_OWNER) {
            return Err(refused("the run store holds no such run for Restate"));
        }
        let tag = format!("run:{}:{run_id}", input.account);
        let holder = ctx.invocation_id();
        let store_failed = |e: agent_store::StoreError| TerminalError::new(e.to_string());
        match self.store().redeemed_by(&tag).await.map_err(store_failed)? {
            Some(first) if first == holder => return Ok(()),
            Some(_) => return Err(refused("this run was taken by another invocation")),
            None => {}
        }
        if input.expires_ms < agent_store::recorder::now_ms() {
            return Err(refused("the submission expired before a worker took it"));
        }
        let now = agent_store::recorder::now_ms();
        if !self
            .store()
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
                    match self.store().redeem(&tag, &next.run_id, now).await {
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
            self.store()
                .account(input.account.clone())
                .save_paused(paused_id, &waiting, now)
                .await?;
            decided = Box::pin(next);
        }
    }
}

impl AgentRuns {
    /// Runs one part of a run: to its end or its pause (its paused state, and
    /// the awakeable that brings the decisions, its id in the store before the
    /// pause is recorded, so the approval that follows finds it). A run whose
    /// invocation stopped under it (Restate went away mid-step) records no end:
    /// the handler fails, Restate retries the invocation, and the run goes on
    /// from its journal, its followers none the wiser.
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
        let rows = self.store().account(input.account.clone());
        // Each attempt writes the run's log anew: the replayed steps' events
        // first, then the new ones.
        rows.clear_events(&run_id).await?;
        let (opens, mut requests) = mpsc::channel(1);
        let journal = Arc::new(RestateJournal { opens });
        let handle = self
            .graph
            .durable(
                input.start.clone(),
                Arc::clone(&self.model),
                Arc::clone(&self.runner),
                journal,
            )
            .map_err(|e| TerminalError::new(e.to_string()))?;
        let spec = RunSpec::new(
            input.account.clone(),
            (
                input.graph.clone(),
                input.model.clone(),
                input.prompt_hash.clone(),
            ),
        );
        let spec = match &input.answer_id {
            Some(id) => spec.with_answer_id(id.clone()),
            None => spec,
        };
        let mut run = self
            .runs
            .go_on(spec, (handle, &record_of(input)), (None, input.kept));
        // The run's events and its steps in one future: when Restate drops
        // the invocation, both stop with it.
        let pump = async { while run.next().await.is_some() {} };
        let steps = async {
            // The run holds the journal's sender: the requests end with it.
            while let Some(open) = requests.recv().await {
                serve_step(ctx, open, &self.key).await;
            }
        };
        futures::join!(pump, steps);
        let mut ended = run.end().await;
        if let Err(RunError::Journal(error)) = &ended.outcome {
            let error = error.clone();
            tracing::warn!(run_id = %run_id, %error, "the invocation stopped during the run; Restate retries it");
            ended.abandon().await;
            // Not terminal: Restate retries the invocation.
            return Err(error.into());
        }
        let paused = ended.outcome.as_ref().is_ok_and(|o| o.paused.is_some());
        let decided = if paused {
            let (awakeable, decided) = ctx.awakeable::<Json<Sealed>>();
            let waiting = serde_json::json!({ "awakeable": awakeable });
            let now = agent_store::recorder::now_ms();
            rows.save_paused(&run_id, &waiting, now).await?;
            let decided: Decided<'ctx> = Box::pin(decided);
            Some(decided)
        } else {
            None
        };
        let status = ended.status().as_str().to_owned();
        ended.record().await;
        let paused = ended.outcome.as_mut().ok().and_then(|o| o.paused.take());
        let summary = RunSummary { run_id, status };
        Ok((summary, paused.zip(decided)))
    }
}

/// The record of the run `input` starts, as its submitter wrote it.
fn record_of(input: &RunInput) -> NewRun {
    NewRun {
        id: input.start.run_id().to_owned(),
        thread_id: input.thread_id.clone(),
        graph: input.graph.clone(),
        model: input.model.clone(),
        prompt_hash: input.prompt_hash.clone(),
        owner: ENGINE_OWNER.to_owned(),
        started_ms: input.started_ms,
    }
}

/// The decisions a paused run waits for (an awakeable's promise).
type Decided<'ctx> =
    std::pin::Pin<Box<dyn Future<Output = Result<Json<Sealed>, TerminalError>> + Send + 'ctx>>;

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
    /// The invocation is the run: the key's number and kind name the step.
    fn step<'a>(&'a self, key: StepKey<'a>) -> BoxFuture<'a, Result<StepSlot, JournalError>> {
        Box::pin(async move {
            let (reply, answer) = oneshot::channel();
            let stopped = || JournalError("the Restate invocation stopped".into());
            self.opens
                .send(Open {
                    number: key.number,
                    kind: key.kind,
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
