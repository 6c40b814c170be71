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
//! Anyone who reaches Restate's ingress or the worker's endpoint could call the
//! handler; a run's start carries the user's approval decisions. So a run is
//! submitted sealed ([`Sealed`]: its input's JSON and an HMAC-SHA256 of it
//! under a key the run store shares, [`SUBMISSION_KEY`]), and the handler runs
//! nothing whose seal does not hold: only a process that can read the store
//! (a server, a worker) can submit a run.
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
use ai_core::{CompletionPort, ToolRunner};
use futures::StreamExt;
use futures::future::BoxFuture;
use restate_sdk::prelude::*;
use tokio::sync::{mpsc, oneshot};

/// The owner of the runs Restate runs, in the run store.
pub const RESTATE_OWNER: &str = "restate";

/// The service's name at Restate's ingress (`POST /AgentRuns/run/send`).
pub const SERVICE: &str = "AgentRuns";

/// The name of the store's shared key (`agent_store::Store::server_key`) that
/// seals submissions.
pub const SUBMISSION_KEY: &str = "run-submissions";

/// A sealed payload: a submission's [`RunInput`] or an approval's
/// [`Continuation`], as JSON, with its seal (hex HMAC-SHA256 of those bytes
/// under the shared key). Checked before anything of it is used.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Sealed {
    /// The payload, as JSON text (the sealed bytes).
    pub body: String,
    /// Hex HMAC-SHA256 of `body`.
    pub seal: String,
}

impl Sealed {
    /// Seals `value` with `key`.
    pub fn seal<T: serde::Serialize>(value: &T, key: &[u8]) -> Result<Self, String> {
        use hmac::Mac;
        let body = serde_json::to_string(value).map_err(|e| e.to_string())?;
        let seal = hex::encode(mac(key, body.as_bytes())?.finalize().into_bytes());
        Ok(Self { body, seal })
    }

    /// The payload, when its seal holds under `key` (compared in constant time).
    pub fn open<T: serde::de::DeserializeOwned>(&self, key: &[u8]) -> Result<T, String> {
        use hmac::Mac;
        let seal = hex::decode(&self.seal).map_err(|_| "the seal is not hex".to_owned())?;
        mac(key, self.body.as_bytes())?
            .verify_slice(&seal)
            .map_err(|_| {
                "the seal does not hold: it was not sent by a server of this store".to_owned()
            })?;
        serde_json::from_str(&self.body).map_err(|e| format!("the payload is unreadable: {e}"))
    }
}

/// What resolves the awakeable a paused run waits on: the user's decisions and
/// the record of the run that continues it (a new run id, as the server
/// writes it).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct Continuation {
    /// The continuing run's id.
    pub run_id: String,
    /// The decisions about the paused run's calls.
    pub decisions: Vec<agent_graph::run::Decision>,
    /// How many of its first messages the thread holds as stored.
    pub kept: Option<usize>,
    /// When it started (Unix milliseconds).
    pub started_ms: i64,
}

impl Continuation {
    /// A continuation of run `run_id` with `decisions`.
    pub fn new(run_id: impl Into<String>, decisions: Vec<agent_graph::run::Decision>) -> Self {
        Self {
            run_id: run_id.into(),
            decisions,
            kept: None,
            started_ms: agent_store::recorder::now_ms(),
        }
    }
}

fn mac(key: &[u8], bytes: &[u8]) -> Result<hmac::Hmac<sha2::Sha256>, String> {
    use hmac::Mac;
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(key).map_err(|e| e.to_string())?;
    mac.update(bytes);
    Ok(mac)
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
}

impl RunInput {
    /// The input of a run of `account` starting from `start`, with its record's
    /// fields empty (set them with the struct's fields).
    pub fn new(account: impl Into<String>, start: RunStart) -> Self {
        Self {
            account: account.into(),
            thread_id: None,
            graph: String::new(),
            model: String::new(),
            prompt_hash: None,
            started_ms: agent_store::recorder::now_ms(),
            start,
            kept: None,
        }
    }
}

/// What a run invocation answers (the same answer to a repeated submission).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct RunSummary {
    /// The run.
    pub run_id: String,
    /// `done`, `paused`, `failed` or `interrupted`.
    pub status: String,
    /// The answer's text, when it answered.
    pub content: Option<String>,
    /// Why it failed, when it did.
    pub error: Option<String>,
}

/// The service: what a run needs (the composition root's model, runner and
/// graph) and where it is recorded.
pub struct AgentRuns {
    model: Arc<dyn CompletionPort>,
    runner: Arc<ToolRunner>,
    graph: Graph,
    store: Store,
    pricing: Option<Pricing>,
    key: Vec<u8>,
}

impl AgentRuns {
    /// Runs of `graph` with `model` and `runner`, recorded in `store`; only
    /// submissions sealed with `key` run.
    pub fn new(
        model: Arc<dyn CompletionPort>,
        runner: Arc<ToolRunner>,
        graph: Graph,
        (store, key): (Store, Vec<u8>),
    ) -> Self {
        Self {
            model,
            runner,
            graph,
            store,
            pricing: None,
            key,
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
            let mut input: RunInput = sealed.into_inner().open(&self.key).map_err(refused)?;
            loop {
                let (summary, paused) = self.run_part(&ctx, &input).await?;
                let Some((paused, decided)) = paused else {
                    return Ok(Json(summary));
                };
                let next: Continuation = decided
                    .await?
                    .into_inner()
                    .open(&self.key)
                    .map_err(refused)?;
                input = input.continued(*paused, next);
            }
        }
    }
}

fn refused(error: String) -> TerminalError {
    tracing::warn!(%error, "a sealed payload was refused");
    TerminalError::new(error)
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
            heartbeat: false,
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
            serve_step(ctx, open).await;
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
        let summary = RunSummary {
            run_id,
            status,
            content: outcome.as_ref().ok().map(|o| o.content.clone()),
            error: outcome.as_ref().err().map(ToString::to_string),
        };
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

/// Answers one step request with a `ctx.run` (see the module docs).
async fn serve_step(ctx: &Context<'_>, open: Open) {
    let Open {
        number,
        kind,
        reply,
    } = open;
    let reply = Arc::new(Mutex::new(Some(reply)));
    let ran = Arc::new(AtomicBool::new(false));
    let (ack, acked) = oneshot::channel();
    let closure = {
        let (reply, ran) = (Arc::clone(&reply), Arc::clone(&ran));
        move || async move {
            ran.store(true, Ordering::SeqCst);
            let (record, recorded) = oneshot::channel();
            if let Some(reply) = take(&reply) {
                let slot = RestateSlot { record, acked };
                let _ = reply.send(Ok(StepSlot::Open(Box::new(slot))));
            }
            match recorded.await {
                Ok(step) => Ok(Json(step)),
                Err(_) => Err(TerminalError::new(format!(
                    "step {number} ({}) ended unrecorded: the run stopped during it",
                    kind.as_str()
                ))
                .into()),
            }
        }
    };
    let result: Result<Json<Step>, TerminalError> = ctx
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
        (Ok(Json(step)), false) => {
            if let Some(reply) = take(&reply) {
                let _ = reply.send(Ok(StepSlot::Recorded(Box::new(step))));
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

/// Serves [`AgentRuns`] on `listener` until `stop` resolves (`agent worker`).
pub async fn serve(runs: AgentRuns, listener: tokio::net::TcpListener, stop: impl Future) {
    let endpoint = Endpoint::builder().bind(runs).build();
    HttpServer::new(endpoint)
        .serve_with_cancel(listener, stop)
        .await;
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
    pub async fn submit(&self, input: &RunInput, key: &[u8]) -> Result<(), RestateError> {
        let url = format!("{}/{SERVICE}/run/send", self.ingress);
        let sealed = self.sealed(&url, input, key)?;
        self.post(&url, Some(input.start.run_id()), &sealed)
            .await
            .map(drop)
    }

    /// Runs a run sealed with `key` and waits for its summary, with its id as
    /// the idempotency key: a run submitted before answers with its first
    /// summary.
    pub async fn call(&self, input: &RunInput, key: &[u8]) -> Result<RunSummary, RestateError> {
        let url = format!("{}/{SERVICE}/run", self.ingress);
        let sealed = self.sealed(&url, input, key)?;
        let body = self.post(&url, Some(input.start.run_id()), &sealed).await?;
        serde_json::from_str(&body).map_err(|e| RestateError::Refused {
            url,
            status: 200,
            body: format!("not a run summary: {e}"),
        })
    }

    fn sealed<T: serde::Serialize>(
        &self,
        url: &str,
        value: &T,
        key: &[u8],
    ) -> Result<Sealed, RestateError> {
        Sealed::seal(value, key).map_err(|message| RestateError::Refused {
            url: url.to_owned(),
            status: 0,
            body: message,
        })
    }

    /// Resolves the awakeable a paused run waits on with `next`, sealed with
    /// `key`: the run goes on with the user's decisions.
    pub async fn resolve(
        &self,
        awakeable: &str,
        next: &Continuation,
        key: &[u8],
    ) -> Result<(), RestateError> {
        let url = format!("{}/restate/awakeables/{awakeable}/resolve", self.ingress);
        let sealed = self.sealed(&url, next, key)?;
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
