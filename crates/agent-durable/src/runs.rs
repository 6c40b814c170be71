//! [`Runs`]: the one owner of a recorded run. `agent serve`, `agent chat` and
//! `agent worker` (and library code) start runs through it; nothing else
//! writes a run's record.
//!
//! A run's life in the store:
//!
//! 1. [`Runs::start`] opens its turn before anything runs: the run `running`,
//!    owned by this process under its lease, and the messages the turn adds
//!    (the user's, with their ids) in the thread, which it claims (one running
//!    run per thread: a second send waits or is refused, and no turn is lost).
//! 2. Its steps are journaled (under the lease's fence) when the service
//!    journals, so a process started after this one died goes on with it.
//! 3. [`RecordedRun::next`] records each event as its caller takes it (never
//!    waiting on the store), and [`RecordedRun::finish`] records the end: the
//!    status, the usage, the thread's new messages (the first known by the
//!    answer's id). A run this process lost (its lease ran out, another took it
//!    over) stops, and its end is the new owner's to write.
//! 4. A Stop asked through the store ([`Runs::stop`], from any server) reaches
//!    the run in whichever process runs it: each process looks at its runs'
//!    stop flags every lease renewal.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use agent_graph::journal::RunStart;
use agent_graph::run::{EventStream, OutputFuture, RunDeps, RunError, RunHandle, RunOutput};
use agent_store::{NewRun, NewTurn, Pricing, RunRecording, Store, StoreError, Thread, TurnMessage};
use ai_core::AiEvent;
use ai_core::event::AiEventKind;
use futures::StreamExt;
use tokio_util::sync::CancellationToken;

use crate::lease::{Instance, RunLease};
use crate::store::{SavedStart, StoreJournal, run_end};

/// Why a run could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunsError {
    /// Another run of the thread is running (its id): the caller waits for it
    /// or tells its client the chat is busy.
    #[error("the chat is busy with run {0}")]
    Busy(String),
    /// A call the run would decide was decided before: nothing was written,
    /// and `run_id` is the run that carried that decision out (the caller
    /// follows it).
    #[error("call {call_id} was decided before, by run {run_id}")]
    DecidedBefore {
        /// The call.
        call_id: String,
        /// The run that carried out its decision.
        run_id: String,
    },
    /// The approval id of one of its decisions was used before: nothing was
    /// written (the caller makes that decision an invalid one and starts
    /// again).
    #[error("the approval of call {call_id} was used before")]
    Replayed {
        /// The call.
        call_id: String,
    },
    /// The thread changed since the turn was planned (a run that ended in
    /// between stored its answer): nothing was written (the caller plans
    /// again from the thread as it is).
    #[error("the chat's thread changed since the turn was planned")]
    Moved,
    /// The store refused.
    #[error("the run store failed: {0}")]
    Store(StoreError),
    /// The run could not be prepared (its graph's prompt or tools).
    #[error("the run could not be prepared: {0}")]
    Prepare(agent_graph::run::RunError),
}

impl RunsError {
    /// The error of a turn that did not open.
    fn from_opened(opened: agent_store::Opened) -> Option<Self> {
        match opened {
            agent_store::Opened::Open => None,
            agent_store::Opened::DecidedBefore { call_id, run_id } => {
                Some(Self::DecidedBefore { call_id, run_id })
            }
            agent_store::Opened::Replayed { call_id } => Some(Self::Replayed { call_id }),
            agent_store::Opened::Moved => Some(Self::Moved),
            other => Some(Self::Store(StoreError::Corrupt(format!(
                "the store answered a turn with {other:?}"
            )))),
        }
    }
}

impl From<StoreError> for RunsError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Busy(run) => Self::Busy(run),
            other => Self::Store(other),
        }
    }
}

/// What a run's record says of it.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct RunSpec {
    /// The account it belongs to.
    pub account: String,
    /// The thread it continues, when it has one.
    pub thread: Option<ThreadTurn>,
    /// The graph's name.
    pub graph: String,
    /// The model id.
    pub model: String,
    /// The run's prompt hash, when it has one.
    pub prompt_hash: Option<String>,
    /// The id of the answer it streams (its first message in the thread is
    /// known by it).
    pub answer_id: Option<String>,
    /// The decisions about calls it carries out: recorded with its turn, once
    /// per call.
    pub decisions: Vec<agent_store::CallDecision>,
}

impl RunSpec {
    /// A run of `account` recorded with `graph`, `model` and `prompt_hash`.
    pub fn new(
        account: impl Into<String>,
        (graph, model, prompt_hash): (String, String, Option<String>),
    ) -> Self {
        Self {
            account: account.into(),
            thread: None,
            graph,
            model,
            prompt_hash,
            answer_id: None,
            decisions: Vec::new(),
        }
    }

    /// Carries out `decisions` (recorded with its turn).
    pub fn with_decisions(mut self, decisions: Vec<agent_store::CallDecision>) -> Self {
        self.decisions = decisions;
        self
    }

    /// Continues `thread`.
    pub fn with_thread(mut self, thread: ThreadTurn) -> Self {
        self.thread = Some(thread);
        self
    }

    /// Streams the answer known by `id`.
    pub fn with_answer_id(mut self, id: impl Into<String>) -> Self {
        self.answer_id = Some(id.into());
        self
    }
}

/// A turn of a thread: the thread, how many of its stored messages the run's
/// history continues as they are, and the messages the turn adds before the
/// run answers (the user's, with their ids).
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ThreadTurn {
    /// The thread's id.
    pub id: String,
    /// Its title, when it is new.
    pub title: String,
    /// How many of its stored messages the history keeps as they are.
    pub kept: usize,
    /// What the turn adds (the history's messages past `kept`).
    pub messages: Vec<TurnMessage>,
    /// How many messages the stored thread held when the turn was planned
    /// ([`agent_store::NewTurn::seen`]); `None`: no check.
    pub seen: Option<usize>,
}

impl ThreadTurn {
    /// A turn of thread `id` (titled `title` when new) that keeps its first
    /// `kept` stored messages and adds `messages`.
    pub fn new(
        id: impl Into<String>,
        title: impl Into<String>,
        kept: usize,
        messages: Vec<TurnMessage>,
    ) -> Self {
        Self {
            id: id.into(),
            title: title.into(),
            kept,
            messages,
            seen: None,
        }
    }

    /// The turn was planned on a stored thread of `seen` messages: it opens
    /// only while the thread still holds that many ([`RunsError::Moved`]
    /// otherwise).
    pub fn with_seen(mut self, seen: usize) -> Self {
        self.seen = Some(seen);
        self
    }
}

/// The id of the message that answers with run `run_id` when its client gave
/// none: the same in every process, so a client that follows the run through
/// another server, or reloads its thread, knows it by the same id.
pub fn answer_id(run_id: &str) -> String {
    format!("msg-{run_id}")
}

/// The id of the user's message that run `run_id` answers when its client gave
/// none (`agent chat`, a client that sends no message ids).
pub fn prompt_id(run_id: &str) -> String {
    format!("u-{run_id}")
}

/// The runs this process runs that a Stop may reach: (account, run id) to
/// their cancellation.
#[derive(Debug, Default)]
struct Stops {
    runs: Mutex<HashMap<(String, String), CancellationToken>>,
}

/// Takes a run out of [`Stops`] when it ends.
#[derive(Debug)]
struct Registered {
    stops: Weak<Stops>,
    key: (String, String),
}

impl Drop for Registered {
    fn drop(&mut self) {
        if let Some(stops) = self.stops.upgrade() {
            stops
                .runs
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&self.key);
        }
    }
}

impl Stops {
    fn register(self: &Arc<Self>, key: (String, String), cancel: CancellationToken) -> Registered {
        self.runs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key.clone(), cancel);
        Registered {
            stops: Arc::downgrade(self),
            key,
        }
    }

    fn keys(&self) -> Vec<(String, String)> {
        self.runs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .keys()
            .cloned()
            .collect()
    }

    fn cancel(&self, key: &(String, String)) {
        if let Some(token) = self
            .runs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)
        {
            token.cancel();
        }
    }
}

/// The one owner of recorded runs in a process (see the module docs). Cheap to
/// clone.
#[derive(Clone)]
pub struct Runs {
    instance: Arc<Instance>,
    pricing: Option<Pricing>,
    journal: bool,
    stops: Arc<Stops>,
    engine: Option<Arc<dyn crate::engine::Engine>>,
}

impl std::fmt::Debug for Runs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runs")
            .field("instance", &self.instance.id())
            .field("journal", &self.journal)
            .field("engine", &self.engine.is_some())
            .finish_non_exhaustive()
    }
}

impl Runs {
    /// The runs of this process (`instance`: its lease in the store), journaled.
    /// Looks for Stops asked of its runs every lease renewal while it lives.
    pub fn new(instance: Arc<Instance>) -> Self {
        let stops = Arc::new(Stops::default());
        tokio::spawn(watch_stops(
            instance.store().clone(),
            Arc::downgrade(&stops),
            instance.timing().renew_every,
        ));
        Self {
            instance,
            pricing: None,
            journal: true,
            stops,
            engine: None,
        }
    }

    /// Hands runs to `engine` ([`Runs::submit`]) instead of running them in
    /// this process.
    pub fn with_engine(mut self, engine: Arc<dyn crate::engine::Engine>) -> Self {
        self.engine = Some(engine);
        self
    }

    /// The durable engine runs are handed to, when there is one.
    pub fn engine(&self) -> Option<&Arc<dyn crate::engine::Engine>> {
        self.engine.as_ref()
    }

    /// Prices each model call with `pricing`.
    pub fn with_pricing(mut self, pricing: Pricing) -> Self {
        self.pricing = Some(pricing);
        self
    }

    /// Whether runs journal their steps (default: yes); without a journal a run
    /// cannot go on after its process died.
    pub fn with_journal(mut self, journal: bool) -> Self {
        self.journal = journal;
        self
    }

    /// The store.
    pub fn store(&self) -> &Store {
        self.instance.store()
    }

    /// This process as an owner of runs.
    pub fn instance(&self) -> &Arc<Instance> {
        &self.instance
    }

    /// Starts `start` with `deps` as `spec` says: its turn opened in the store
    /// first (see the module docs), its steps journaled under this process's
    /// lease when the service journals.
    pub async fn start(
        &self,
        spec: RunSpec,
        start: RunStart,
        deps: RunDeps,
    ) -> Result<RecordedRun, RunsError> {
        let lease = self.instance.new_run();
        let run_id = start.run_id().to_owned();
        let now = agent_store::recorder::now_ms();
        let new = self.new_run(&spec, &run_id, lease.epoch.id(), now);
        let kept = kept_of(&spec);
        // A journaled run's start is saved with its turn, in one transaction.
        let (start, text) = if self.journal {
            let saved = saved_start(&spec, start, kept);
            let text = serde_json::to_string(&saved).ok();
            (saved.start, text)
        } else {
            (start, None)
        };
        self.open_turn(&spec, &new, (now, text.as_deref())).await?;
        let handle = if self.journal {
            let journal = StoreJournal::new(self.store().clone(), spec.account.clone(), None)
                .with_nothing_recorded()
                .with_lease(lease.clone());
            agent_graph::run::durable(start, deps, Arc::new(journal))
        } else {
            agent_graph::run::start(start, deps)
        };
        let recording = RunRecording::resumed(
            self.store().clone(),
            spec.account.clone(),
            &new,
            self.pricing.clone(),
        )
        .with_fence(lease.fence());
        Ok(self.recorded(spec, handle, recording, (Some(lease), kept)))
    }

    /// Records run `start` of `spec` for a durable engine that runs it
    /// (`owner`: the engine's name): its turn opened as [`Runs::start`]'s, and
    /// its start saved, so the run can be submitted again when the engine
    /// never acknowledged it. The engine's worker records the rest
    /// ([`Runs::go_on`]).
    pub(crate) async fn open_for_engine(
        &self,
        spec: &RunSpec,
        start: &RunStart,
        owner: &str,
    ) -> Result<(), RunsError> {
        let now = agent_store::recorder::now_ms();
        let new = self.new_run(spec, start.run_id(), owner, now);
        let saved = saved_start(spec, start.clone(), kept_of(spec));
        let text = serde_json::to_string(&saved).ok();
        self.open_turn(spec, &new, (now, text.as_deref())).await
    }

    /// Goes on with `handle`, a run of `spec` whose record is stored already (a
    /// run taken over from a process that died, or an engine's run whose row
    /// its submitter wrote), held under `lease` (none for an engine's run):
    /// its event log is written anew (the caller cleared it), and its end
    /// written as [`Runs::start`]'s.
    pub fn go_on(
        &self,
        spec: RunSpec,
        (handle, record): (RunHandle, &NewRun),
        (lease, kept): (Option<RunLease>, Option<usize>),
    ) -> RecordedRun {
        let mut recording = RunRecording::resumed(
            self.store().clone(),
            spec.account.clone(),
            record,
            self.pricing.clone(),
        );
        if let Some(lease) = &lease {
            recording = recording.with_fence(lease.fence());
        }
        self.recorded(spec, handle, recording, (lease, kept))
    }

    /// Asks the running run of `account`'s thread `thread_id` to stop, in
    /// whichever process runs it; `false` when none runs.
    pub async fn stop(&self, account: &str, thread_id: &str) -> Result<bool, StoreError> {
        let rows = self.store().account(account.to_owned());
        let Some(run) = rows.running_run(thread_id).await? else {
            return Ok(false);
        };
        let asked = rows.request_stop(&run.run.id).await?;
        self.stops.cancel(&(account.to_owned(), run.run.id));
        Ok(asked)
    }

    /// The row of run `run_id` of `spec`, owned by `owner` (a lease's epoch, or
    /// a durable engine's name), started at `started_ms`.
    fn new_run(&self, spec: &RunSpec, run_id: &str, owner: &str, started_ms: i64) -> NewRun {
        NewRun {
            id: run_id.to_owned(),
            thread_id: spec.thread.as_ref().map(|t| t.id.clone()),
            graph: spec.graph.clone(),
            model: spec.model.clone(),
            prompt_hash: spec.prompt_hash.clone(),
            owner: owner.to_owned(),
            started_ms,
        }
    }

    /// Opens `spec`'s turn with run `new` at `now` (a run with no thread: the
    /// run alone), its `start` saved with it; a turn the store refuses is an
    /// error.
    async fn open_turn(
        &self,
        spec: &RunSpec,
        new: &NewRun,
        (now, start): (i64, Option<&str>),
    ) -> Result<(), RunsError> {
        let rows = self.store().account(spec.account.clone());
        let Some(turn) = &spec.thread else {
            rows.start_run(new).await?;
            if let Some(start) = start {
                rows.save_start(&new.id, start, now).await?;
            }
            return Ok(());
        };
        let opened = self.turn(spec, turn, new, (now, start));
        match RunsError::from_opened(rows.open_turn(&opened, now).await?) {
            Some(refused) => Err(refused),
            None => Ok(()),
        }
    }

    fn turn(
        &self,
        spec: &RunSpec,
        turn: &ThreadTurn,
        run: &NewRun,
        (now, start): (i64, Option<&str>),
    ) -> NewTurn {
        NewTurn {
            thread: Thread {
                id: turn.id.clone(),
                title: turn.title.clone(),
                graph: spec.graph.clone(),
                created_ms: now,
                updated_ms: now,
            },
            kept: u64::try_from(turn.kept).unwrap_or(u64::MAX),
            seen: turn
                .seen
                .map(|seen| u64::try_from(seen).unwrap_or(u64::MAX)),
            messages: turn.messages.clone(),
            run: run.clone(),
            decisions: spec.decisions.clone(),
            start: start.map(str::to_owned),
        }
    }

    fn recorded(
        &self,
        spec: RunSpec,
        handle: RunHandle,
        recording: RunRecording,
        (lease, kept): (Option<RunLease>, Option<usize>),
    ) -> RecordedRun {
        let cancel = handle.cancel_token();
        let run_id = recording.run_id().to_owned();
        let registered = self
            .stops
            .register((spec.account.clone(), run_id.clone()), cancel.clone());
        let lost = Arc::new(AtomicBool::new(false));
        let watch = lease.as_ref().map(|lease| {
            let (token, cancel, lost) = (
                lease.epoch.lost().clone(),
                cancel.clone(),
                Arc::clone(&lost),
            );
            tokio::spawn(async move {
                token.cancelled().await;
                tracing::warn!("this process lost its lease on a run; the run stops here");
                lost.store(true, Ordering::SeqCst);
                cancel.cancel();
            })
        });
        let (events, outcome) = handle.into_parts();
        RecordedRun {
            run_id,
            events,
            outcome,
            cancel,
            recording,
            kept,
            answer_id: spec.answer_id,
            lost,
            watch,
            closing: Vec::new(),
            _registered: registered,
        }
    }
}

/// The number of its thread's messages before a run of `spec` adds its own
/// (`None`: a run with no thread).
fn kept_of(spec: &RunSpec) -> Option<usize> {
    spec.thread
        .as_ref()
        .map(|turn| turn.kept + turn.messages.len())
}

/// The saved start of run `start` of `spec`, whose thread held `kept` of its
/// messages.
fn saved_start(spec: &RunSpec, start: RunStart, kept: Option<usize>) -> SavedStart {
    SavedStart::new(
        start,
        kept,
        (
            spec.graph.clone(),
            spec.model.clone(),
            spec.prompt_hash.clone(),
        ),
    )
    .with_answer_id(spec.answer_id.clone())
}

/// Cancels the runs a Stop was asked of, every `every`, while the service
/// lives.
async fn watch_stops(store: Store, stops: Weak<Stops>, every: std::time::Duration) {
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(stops) = stops.upgrade() else {
            return;
        };
        let keys = stops.keys();
        if keys.is_empty() {
            continue;
        }
        match store.stops_requested(&keys).await {
            Ok(stopped) => {
                for key in &stopped {
                    tracing::info!(run_id = %key.1, "a Stop asked through the store reaches the run");
                    stops.cancel(key);
                }
            }
            Err(error) => {
                tracing::warn!(%error, "could not look for Stops asked of this process's runs")
            }
        }
    }
}

/// A run being recorded (see the module docs): take its events with
/// [`RecordedRun::next`] to their end, then [`RecordedRun::finish`].
pub struct RecordedRun {
    run_id: String,
    events: EventStream,
    outcome: OutputFuture,
    cancel: CancellationToken,
    recording: RunRecording,
    /// How many of the conversation's first messages the thread holds as
    /// stored (`None`: the run has no thread, or its messages are not written).
    kept: Option<usize>,
    answer_id: Option<String>,
    /// Set when this process lost its lease on the run.
    lost: Arc<AtomicBool>,
    watch: Option<tokio::task::JoinHandle<()>>,
    /// The run's closing events (`error`, `done`), recorded with its end: a
    /// run that is abandoned (lost, or its engine's invocation stopped and is
    /// retried) leaves none in the log for a follower to end on.
    closing: Vec<AiEvent>,
    _registered: Registered,
}

impl std::fmt::Debug for RecordedRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordedRun")
            .field("run_id", &self.run_id)
            .finish_non_exhaustive()
    }
}

impl RecordedRun {
    /// The run's id.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Cancels the run (its calls see it; it ends `interrupted`).
    pub fn cancel_token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// When its record's start is written (at once: it is written before the
    /// run starts).
    pub fn started(&self) -> agent_store::StartWritten {
        self.recording.started()
    }

    /// The next event, recorded (queued for the store, never waiting on it);
    /// `None` once the run's events end. A store too far behind stops the run
    /// rather than lose its record.
    pub async fn next(&mut self) -> Option<AiEvent> {
        let event = self.events.next().await?;
        if matches!(event.kind, AiEventKind::Error { .. } | AiEventKind::Done) {
            self.closing.push(event.clone());
            return Some(event);
        }
        if let Err(error) = self.recording.record(&event) {
            tracing::error!(run_id = %self.run_id, %error, "the run cannot be recorded; cancelling it");
            self.cancel.cancel();
        }
        Some(event)
    }

    /// Whether this process lost its lease on the run (its end is the new
    /// owner's).
    pub fn lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    /// Waits for the run's outcome and records its end (see
    /// [`RecordedRun::end`] to answer its client before the record is
    /// written).
    pub async fn finish(self) -> Result<RunOutput, RunError> {
        let mut ended = self.end().await;
        ended.record().await;
        ended.outcome
    }

    /// Waits for the run's outcome; its end is recorded by [`Ended::record`]
    /// (a caller answers its client first: a slow store delays the record,
    /// never the chat).
    pub async fn end(self) -> Ended {
        let Self {
            run_id,
            events,
            outcome,
            recording,
            kept,
            answer_id,
            lost,
            watch,
            closing,
            ..
        } = self;
        drop(events);
        let outcome = outcome.await;
        if let Some(watch) = watch {
            watch.abort();
        }
        Ended {
            outcome,
            run_id,
            recording: Some(recording),
            kept,
            answer_id,
            lost: lost.load(Ordering::SeqCst),
            closing,
        }
    }
}

/// A recorded run that ended (see [`RecordedRun::end`]).
#[derive(Debug)]
pub struct Ended {
    /// How the run ended.
    pub outcome: Result<RunOutput, RunError>,
    run_id: String,
    recording: Option<RunRecording>,
    kept: Option<usize>,
    answer_id: Option<String>,
    lost: bool,
    closing: Vec<AiEvent>,
}

impl Ended {
    /// The status its record ends with.
    pub fn status(&self) -> agent_store::RunStatus {
        run_end(&self.outcome, 0).status
    }

    /// Stops recording the run without an end (its events so far are
    /// written, its closing ones are not): the process that goes on with it
    /// (a new lease holder, the engine's retry) writes the end.
    pub async fn abandon(mut self) {
        if let Some(recording) = self.recording.take() {
            recording.abandon().await;
        }
    }

    /// Records the end: status, usage, the thread's new messages (the first
    /// known by the answer's id) when the run has a thread; a run this process
    /// lost is abandoned instead (the process that took it over writes its
    /// end). Store failures go to the log: the run itself already happened.
    pub async fn record(&mut self) {
        let Some(mut recording) = self.recording.take() else {
            return;
        };
        if self.lost {
            recording.abandon().await;
            return;
        }
        for event in &self.closing {
            if let Err(error) = recording.record(event) {
                tracing::error!(run_id = %self.run_id, %error, "the run's closing events are not recorded");
            }
        }
        let mut end = run_end(&self.outcome, self.kept.unwrap_or(0));
        end.answer_id.clone_from(&self.answer_id);
        if self.kept.is_none() {
            end.conversation = &[];
        }
        for failure in recording.finish(end).await {
            tracing::error!(run_id = %self.run_id, failure = %failure, "the run store did not take the whole run");
        }
    }
}
