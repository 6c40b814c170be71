//! The step seam of durable runs: a run's model calls and tool executions as
//! numbered steps, each recorded in a [`StepJournal`] before the next starts, so a
//! run whose process died resumes from its first unrecorded step.
//!
//! Start a durable run with [`crate::run::durable`] and a [`RunStart`] (a new
//! request, or a paused run with its decisions); start it again, after a crash,
//! with the same [`RunStart`] and the same journal: the steps recorded are
//! replayed from the journal (their events emitted again, no model call, no tool
//! call) and the run goes on from the first step that was not.
//!
//! The run asks the journal for each step in turn ([`StepJournal::step`]): a
//! recorded one comes back as [`StepSlot::Recorded`], a missing one as
//! [`StepSlot::Open`], through which the run records it once done. So a journal
//! can be a table it reads (the run store's) or an engine that replays its own
//! journal in order and knows what it holds only when asked (Restate's).
//!
//! What is exactly-once and what is not:
//!
//! - A recorded step's result is used as recorded, whatever happens later: a
//!   model turn is paid for once, a tool result read by the model is the one it
//!   read.
//! - A step's body is at-least-once: a process that dies during a model call
//!   makes that call again when the run resumes, and a `read_only` tool runs
//!   again.
//! - A `state_change` or `external_side_effect` call is at-most-once: before it
//!   runs, an [`StepBody::Intent`] is recorded. A resumed run finding an intent
//!   without a result does not run the call again: it ends `outcome_unknown`
//!   (the model is told the call may or may not have happened), unless the
//!   tool's spec says it is idempotent (`ToolSpec::idempotent`), in which case it
//!   runs again with the same idempotency key
//!   (`ToolCallContext::idempotency_key`, `RUN_ID:TOOL_CALL_ID`).
//!
//! Numbering: step 0 is the first thing a run does. The calls a continued run
//! settles first (approved calls) take the first numbers, in call order; then
//! each model turn takes one, and each of its executed calls one, in call order,
//! assigned before any of them runs (so calls run concurrently keep their
//! numbers). Calls deferred to an approval or to the client take none. A
//! subagent's call is one step of its parent (its own turns are not steps).
//!
//! A step keeps the events the run emitted for it (already redacted, deltas
//! merged), so a resumed run shows its whole history again: a consumer of a
//! resumed run's events (the server's event log, started over) sees every step
//! once, then the new ones.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use ai_core::AiEvent;
use ai_core::completion::CompletionFinal;
use ai_core::event::AiEventKind;
use ai_core::runner::{ToolExecResult, ToolExecution, ToolInvocationRecord};
use futures::future::BoxFuture;

use crate::run::{Decision, PausedRun, RunRequest};

/// What a durable run starts from: all it needs to start again after a crash
/// (serializable; store it beside the run).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "from", rename_all = "snake_case")]
#[non_exhaustive]
pub enum RunStart {
    /// A new run of a prepared request.
    New {
        /// The request.
        request: RunRequest,
    },
    /// A paused run continued with the user's decisions.
    Continue {
        /// The paused run.
        paused: PausedRun,
        /// The decisions.
        decisions: Vec<Decision>,
    },
}

impl RunStart {
    /// The run's id.
    pub fn run_id(&self) -> &str {
        match self {
            Self::New { request } => &request.context.run_id,
            Self::Continue { paused, .. } => &paused.request.context.run_id,
        }
    }
}

/// Which kind of record a [`Step`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StepKind {
    /// A model call's assembled turn.
    Model,
    /// A call that acts is about to run.
    Intent,
    /// A tool call's result.
    Tool,
}

impl StepKind {
    /// The stable snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Model => "model",
            Self::Intent => "intent",
            Self::Tool => "tool",
        }
    }
}

/// What a step recorded.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum StepBody {
    /// A model call: the assembled turn (text, reasoning, calls with their
    /// settled ids, usage, finish).
    Model {
        /// The turn.
        turn: CompletionFinal,
    },
    /// A `state_change` or `external_side_effect` call is about to run.
    Intent {
        /// The call.
        tool_call_id: String,
        /// Its tool.
        tool_name: String,
        /// The key an idempotent tool dedupes on.
        idempotency_key: String,
    },
    /// A tool call's result, as the model and the UI saw it.
    Tool {
        /// The UI result (redacted).
        result: ToolExecResult,
        /// The text of the model's tool message.
        model_content: String,
        /// Whether `model_content` was cut.
        truncated: bool,
        /// The audit record (redacted).
        record: ToolInvocationRecord,
    },
}

/// One recorded step of a run.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub struct Step {
    /// Its number in the run (see the module docs). An intent and its call's
    /// result share one.
    pub number: u32,
    /// What it recorded.
    pub body: StepBody,
    /// The events the run emitted for it, emitted again when it is replayed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<AiEvent>,
}

impl Step {
    /// A step numbered `number` recording `body`, with the `events` emitted for it.
    pub fn new(number: u32, body: StepBody, events: Vec<AiEvent>) -> Self {
        Self {
            number,
            body,
            events,
        }
    }

    /// Which kind of record it is.
    pub fn kind(&self) -> StepKind {
        match self.body {
            StepBody::Model { .. } => StepKind::Model,
            StepBody::Intent { .. } => StepKind::Intent,
            StepBody::Tool { .. } => StepKind::Tool,
        }
    }
}

/// Why the journal could not be read or written: a durable run stops rather
/// than go on unrecorded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the step journal failed: {0}")]
pub struct JournalError(pub String);

/// A step as the journal hands it to the run: recorded before (the run replays
/// it), or open (the run does it and records it).
#[non_exhaustive]
pub enum StepSlot {
    /// Recorded by an earlier attempt of the run: replay it.
    Recorded(Box<Step>),
    /// Not recorded: do the step, then record it through the slot.
    Open(Box<dyn OpenStep>),
}

impl std::fmt::Debug for StepSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Recorded(step) => f.debug_tuple("Recorded").field(step).finish(),
            Self::Open(_) => f.write_str("Open"),
        }
    }
}

/// A step the run is doing; [`OpenStep::record`] returns once the step is
/// durable. Dropped without a record, the step stays unrecorded (the run was
/// cancelled).
pub trait OpenStep: Send {
    /// Records `step`.
    fn record(self: Box<Self>, step: Step) -> BoxFuture<'static, Result<(), JournalError>>;
}

/// Where a durable run's steps are recorded.
///
/// The run opens its steps in number order (for a call that acts: its intent,
/// then its result), and records an open step before it opens the next, except
/// that calls run concurrently (read-only turns) open theirs concurrently unless
/// [`StepJournal::one_step_at_a_time`] says not to. Recording a step whose
/// number and kind are recorded already keeps the first (a retried write must
/// not fail).
pub trait StepJournal: Send + Sync {
    /// The step `key` names: recorded, or open to be recorded.
    fn step<'a>(&'a self, key: StepKey<'a>) -> BoxFuture<'a, Result<StepSlot, JournalError>>;

    /// Whether steps must be opened strictly one after another (an engine that
    /// replays its journal in order). The run then runs even read-only calls
    /// one at a time. Default: no.
    fn one_step_at_a_time(&self) -> bool {
        false
    }
}

/// Which step a [`StepJournal`] is asked for: step `number`, of `kind`, of run
/// `run_id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepKey<'a> {
    /// The run.
    pub run_id: &'a str,
    /// The step's number within the run (model calls and tool batches count
    /// apart: see [`StepKind`]).
    pub number: u32,
    /// What the step is.
    pub kind: StepKind,
}

/// A journal in memory: for tests, benchmarks, and runs that only need replay
/// within one process.
#[derive(Debug, Default)]
pub struct MemoryJournal {
    runs: Arc<Mutex<HashMap<String, Vec<Step>>>>,
}

impl MemoryJournal {
    /// An empty journal.
    pub fn new() -> Self {
        Self::default()
    }

    /// The steps of `run_id` in the order they were recorded.
    pub fn recorded(&self, run_id: &str) -> Vec<Step> {
        self.runs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(run_id)
            .cloned()
            .unwrap_or_default()
    }

    /// Forgets the steps of `run_id` from `keep` on (to stage a crash after
    /// `keep` records in a test).
    pub fn truncate(&self, run_id: &str, keep: usize) {
        if let Some(steps) = self
            .runs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get_mut(run_id)
        {
            steps.truncate(keep);
        }
    }
}

/// An open step of a [`MemoryJournal`].
struct MemorySlot {
    runs: Arc<Mutex<HashMap<String, Vec<Step>>>>,
    run_id: String,
}

impl OpenStep for MemorySlot {
    fn record(self: Box<Self>, step: Step) -> BoxFuture<'static, Result<(), JournalError>> {
        let mut runs = self
            .runs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let steps = runs.entry(self.run_id.clone()).or_default();
        if !steps
            .iter()
            .any(|s| s.number == step.number && s.kind() == step.kind())
        {
            steps.push(step);
        }
        Box::pin(async { Ok(()) })
    }
}

impl StepJournal for MemoryJournal {
    fn step<'a>(&'a self, key: StepKey<'a>) -> BoxFuture<'a, Result<StepSlot, JournalError>> {
        let recorded = self
            .runs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(key.run_id)
            .and_then(|steps| {
                steps
                    .iter()
                    .find(|s| s.number == key.number && s.kind() == key.kind)
                    .cloned()
            });
        let slot = match recorded {
            Some(step) => StepSlot::Recorded(Box::new(step)),
            None => StepSlot::Open(Box::new(MemorySlot {
                runs: Arc::clone(&self.runs),
                run_id: key.run_id.to_owned(),
            })),
        };
        Box::pin(async move { Ok(slot) })
    }
}

/// A run's journal as the loop uses it: where its steps are, and the events
/// emitted since the last step.
pub(crate) struct Steps {
    journal: Arc<dyn StepJournal>,
    run_id: String,
    capture: Arc<Capture>,
}

impl Steps {
    pub(crate) fn new(journal: Arc<dyn StepJournal>, run_id: &str, capture: Arc<Capture>) -> Self {
        Self {
            journal,
            run_id: run_id.to_owned(),
            capture,
        }
    }

    /// Step `number` of `kind`.
    pub(crate) async fn open(&self, number: u32, kind: StepKind) -> Result<StepSlot, JournalError> {
        let key = StepKey {
            run_id: &self.run_id,
            number,
            kind,
        };
        self.journal.step(key).await
    }

    /// Drops the events captured so far (they belong to no step).
    pub(crate) fn forget_captured(&self) {
        drop(self.capture.take(None));
    }

    /// Whether calls run one at a time (see [`StepJournal::one_step_at_a_time`]).
    pub(crate) fn one_step_at_a_time(&self) -> bool {
        self.journal.one_step_at_a_time()
    }

    /// Records an open step with the events captured for it (`call`: a tool
    /// call's events only; `None`: every event captured so far).
    pub(crate) async fn record(
        &self,
        slot: Box<dyn OpenStep>,
        number: u32,
        body: StepBody,
        call: Option<&str>,
    ) -> Result<(), JournalError> {
        let events = match body {
            StepBody::Intent { .. } => Vec::new(),
            _ => self.capture.take(call),
        };
        slot.record(Step::new(number, body, events)).await
    }
}

impl StepBody {
    /// The tool step of an execution.
    pub(crate) fn tool(exec: &ToolExecution) -> Self {
        Self::Tool {
            result: exec.result.clone(),
            model_content: exec.model_content.clone(),
            truncated: exec.truncated,
            record: exec.record.clone(),
        }
    }
}

/// The execution a tool step recorded (its full output is not kept: the
/// in-process caller of a replayed call gets `None`).
pub(crate) fn replayed_execution(step: &Step) -> Option<ToolExecution> {
    match &step.body {
        StepBody::Tool {
            result,
            model_content,
            truncated,
            record,
        } => Some(ToolExecution {
            result: result.clone(),
            model_content: model_content.clone(),
            truncated: *truncated,
            output: None,
            record: record.clone(),
        }),
        _ => None,
    }
}

/// The events a durable run emitted since its last recorded step, every
/// delta that continues the one before merged into it ([`AiEvent::absorb`]).
#[derive(Debug, Default)]
pub(crate) struct Capture(Mutex<Vec<AiEvent>>);

impl Capture {
    pub(crate) fn push(&self, event: &AiEvent) {
        let mut events = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        ai_core::event::merge_into(&mut events, event);
    }

    /// Takes the events of call `call` (its own and its subagent's), or all.
    fn take(&self, call: Option<&str>) -> Vec<AiEvent> {
        let mut events = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(call) = call else {
            return std::mem::take(&mut *events);
        };
        let (mine, rest): (Vec<AiEvent>, Vec<AiEvent>) = std::mem::take(&mut *events)
            .into_iter()
            .partition(|event| of_call(event, call));
        *events = rest;
        mine
    }
}

/// Whether `event` belongs to call `call`.
fn of_call(event: &AiEvent, call: &str) -> bool {
    if event.parent_tool_call_id.as_deref() == Some(call) {
        return true;
    }
    match &event.kind {
        AiEventKind::ToolCallStart { tool_call_id, .. }
        | AiEventKind::ToolInputDelta { tool_call_id, .. }
        | AiEventKind::ToolCallResult { tool_call_id, .. }
        | AiEventKind::ToolApprovalRequested { tool_call_id, .. } => tool_call_id == call,
        AiEventKind::TextDelta { .. }
        | AiEventKind::ReasoningDelta { .. }
        | AiEventKind::UsageReport { .. }
        | AiEventKind::ToolCallsNotExecuted { .. }
        | AiEventKind::AssistantFinal { .. }
        | AiEventKind::ClientToolCall { .. }
        | AiEventKind::ToolWithheld { .. }
        | AiEventKind::Error { .. }
        | AiEventKind::Done => false,
        #[cfg(not(agent_workspace))]
        _ => false,
    }
}
