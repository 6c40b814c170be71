//! One run of the loop: model turn, tool calls, model turn, ... until a final answer.

use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use ai_core::{
    AiEvent, CancellationToken, CompletionPort, Message, RunContext, ToolCatalog, ToolEffect,
    ToolRunner,
    approval::{ApprovalGrant, PriorDecision},
    completion::{
        CompletionDelta, CompletionError, CompletionFinal, CompletionItem, CompletionRequest,
        FinishReason, ModelSettings, ToolChoice,
    },
    event::{AiEventKind, EventSink, ToolCallRef, UsageFact},
    message::MessageToolCall,
    runner::{CallScope, ToolCall, ToolExecution, ToolInvocationRecord},
    text::log_field,
    tool::NestedPort,
    tool::canonical_json,
};
use futures::{FutureExt, Stream, StreamExt};
use serde_json::Value;
use tokio::sync::oneshot;
use tokio_util::sync::DropGuard;
use tracing::Instrument;

mod queue;

pub(crate) use queue::{Queue, Slot};

use crate::journal::{Capture, RunStart, StepBody, StepJournal, StepKind, StepSlot, Steps};
use crate::prompt::Params;

/// Limits of one run. Every limit is explicit and its error says which was hit.
///
/// Plain data: loadable from configuration (missing keys take the defaults).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct RunLimits {
    /// Model turns before the run gives up (default 20; at least 1).
    pub max_iterations: u32,
    /// Model requests allowed in the run, if limited.
    pub max_model_requests: Option<u32>,
    /// Total tokens (as reported by the provider) allowed in the run, if limited.
    pub max_total_tokens: Option<u64>,
    /// Read-only calls of one turn run at most this many at a time (default 8).
    pub tool_concurrency: usize,
}

impl Default for RunLimits {
    fn default() -> Self {
        Self {
            max_iterations: 20,
            max_model_requests: None,
            max_total_tokens: None,
            tool_concurrency: 8,
        }
    }
}

/// Which model turns a forced [`ToolChoice`] (`Required` or a named tool) applies to.
///
/// Forcing a call on every turn leaves the model no way to answer, so by default only
/// the first turn is forced and later turns use `auto`. `None` (no tool calls) and
/// `auto` apply to every turn either way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolChoiceScope {
    /// The first model turn only; later turns use `auto` (the default).
    #[default]
    FirstTurn,
    /// Every model turn: the model must call a tool every turn, so the run ends at a
    /// limit unless the model disregards the choice.
    EveryTurn,
}

impl ToolChoiceScope {
    /// The tool choice of the model turn numbered `iteration` (0 first).
    pub fn choice_for(self, choice: &ToolChoice, iteration: u32) -> ToolChoice {
        match (self, choice) {
            (Self::FirstTurn, ToolChoice::Required | ToolChoice::Tool(_)) if iteration > 0 => {
                ToolChoice::Auto
            }
            _ => choice.clone(),
        }
    }
}

/// What to run. Built by [`crate::Graph::prepare`] (the one place a run is made
/// from a graph); serializable, as part of a [`PausedRun`].
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunRequest {
    /// Correlation ids; they appear on every event and span.
    pub context: RunContext,
    /// Model id.
    pub model: String,
    /// The conversation so far (system prompt, user message, ...).
    pub messages: Vec<Message>,
    /// Tool choice of the model turns `tool_choice_scope` names (`auto` for the
    /// others when it forces a call).
    pub tool_choice: ToolChoice,
    /// Which turns a forced `tool_choice` applies to (default: the first only).
    pub tool_choice_scope: ToolChoiceScope,
    /// Sampling and output settings of every model call.
    pub settings: ModelSettings,
    /// Limits.
    pub limits: RunLimits,
    /// The graph being run, when there is one: given to every tool execution
    /// (`ToolCallContext::graph`).
    pub graph: Option<String>,
    /// The prompt hash of the run (`crate::prompt_hash`), when known: given to every
    /// tool execution (`ToolCallContext::prompt_hash`).
    pub prompt_hash: Option<String>,
    /// Deferred approvals: a call that policy puts behind an approval is not sent
    /// to the runner's approver; it is reported (`tool_approval_requested`) and the
    /// run pauses after the turn's other calls, its output holding a [`PausedRun`]
    /// (the assistant message with every call in the history, no tool message for
    /// the waiting ones). The caller gets the user's decision however it can (a web
    /// UI's next request) and continues the run with [`resume`]. Off by default:
    /// the runner's approver is asked and the run waits.
    #[serde(default)]
    pub defer_approvals: bool,
    /// The parameters the graph's prompt was rendered with, kept so that a paused
    /// run is resumed with the same tools.
    #[serde(default, skip_serializing_if = "Params::is_empty")]
    pub prompt_params: Params,
}

/// A call a run with deferred approvals did not execute (see
/// [`RunRequest::defer_approvals`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PendingApproval {
    /// The call id, as the runner settled it.
    pub tool_call_id: String,
    /// The tool id.
    pub tool_name: String,
    /// The validated arguments.
    pub args: Value,
    /// `sha256:<hex>` of the canonical arguments (`ai_core::tool::args_hash`).
    pub args_hash: String,
    /// The provider-native payload of the call, kept for its record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<Value>,
}

/// A call of a tool the client runs (`client__<name>`), handed to the client by a
/// run with deferred calls (see [`RunRequest::defer_approvals`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ClientCall {
    /// The call id, as the runner settled it.
    pub tool_call_id: String,
    /// The tool id.
    pub tool_name: String,
    /// The validated arguments.
    pub args: Value,
}

/// What the model reads for a client call that got no output.
pub const NO_CLIENT_OUTPUT: &str = "The client gave no output for this call.";

/// The version of [`PausedRun`]'s serialized form.
pub const PAUSED_RUN_VERSION: u32 = 1;

/// A run paused on approvals: all it needs to go on, in this process or another
/// (it is serializable, with a version). Continue it with [`resume`] (or
/// `Graph::resume`, `Agent::resume`) and the user's [`Decision`]s.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PausedRun {
    /// [`PAUSED_RUN_VERSION`] when it was written.
    pub version: u32,
    /// The run: its ids, model, settings, limits, graph and prompt hash, and in
    /// `messages` the history up to the pause (the assistant turn with every call,
    /// and the tool messages of the calls that ran).
    pub request: RunRequest,
    /// The calls waiting for a decision, in call order.
    pub pending: Vec<PendingApproval>,
    /// The calls of tools the client runs, waiting for its output, in call order
    /// ([`Decision::ClientOutput`] answers them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub client_calls: Vec<ClientCall>,
    /// Usage of every model call so far.
    pub usage: Vec<UsageFact>,
    /// The record of every tool call so far, in call order.
    pub records: Vec<ToolInvocationRecord>,
    /// Model turns taken so far (they count against `limits`).
    pub model_turns: u32,
}

/// The user's answer about one pending call of a [`PausedRun`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Decision {
    /// Run it, exactly as it was asked for.
    Approve {
        /// The call.
        tool_call_id: String,
    },
    /// Do not run it; the model is told the user said no (`approval_denied`).
    Deny {
        /// The call.
        tool_call_id: String,
        /// The user's reason, for the model.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// The approval sent for it does not hold (forged, expired, used before):
    /// nothing runs (`approval_invalid`).
    Invalid {
        /// The call.
        tool_call_id: String,
        /// Why, safe to show the user and the model.
        reason: String,
    },
    /// The output of a call the client ran ([`PausedRun::client_calls`]): the
    /// model reads it as the call's result (bounded like any result).
    ClientOutput {
        /// The call.
        tool_call_id: String,
        /// What the client's tool returned.
        output: Value,
    },
}

impl Decision {
    /// Approves the call `tool_call_id`.
    pub fn approve(tool_call_id: impl Into<String>) -> Self {
        Self::Approve {
            tool_call_id: tool_call_id.into(),
        }
    }

    /// Denies the call `tool_call_id`, with the user's reason if any.
    pub fn deny(tool_call_id: impl Into<String>, reason: Option<String>) -> Self {
        Self::Deny {
            tool_call_id: tool_call_id.into(),
            reason,
        }
    }

    /// Refuses the call `tool_call_id` because its approval does not hold.
    pub fn invalid(tool_call_id: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::Invalid {
            tool_call_id: tool_call_id.into(),
            reason: reason.into(),
        }
    }

    /// The call it is about.
    pub fn tool_call_id(&self) -> &str {
        match self {
            Self::Approve { tool_call_id }
            | Self::Deny { tool_call_id, .. }
            | Self::Invalid { tool_call_id, .. }
            | Self::ClientOutput { tool_call_id, .. } => tool_call_id,
        }
    }

    /// What the runner takes instead of asking its approver: an approval becomes a
    /// grant bound to this run, this call, its tool and its argument hash.
    fn prior(&self, run: &RunContext, pending: &PendingApproval) -> PriorDecision {
        match self {
            Self::Approve { tool_call_id } => PriorDecision::Approved {
                grant: ApprovalGrant {
                    run_id: run.run_id.clone(),
                    tool_call_id: tool_call_id.clone(),
                    tool_id: pending.tool_name.clone(),
                    args_hash: pending.args_hash.clone(),
                },
            },
            Self::Deny {
                tool_call_id,
                reason,
            } => PriorDecision::Denied {
                tool_call_id: tool_call_id.clone(),
                reason: reason.clone(),
            },
            Self::Invalid {
                tool_call_id,
                reason,
            } => PriorDecision::Invalid {
                tool_call_id: tool_call_id.clone(),
                reason: reason.clone(),
            },
            Self::ClientOutput { tool_call_id, .. } => PriorDecision::Invalid {
                tool_call_id: tool_call_id.clone(),
                reason: "an output is not a decision about an approval".into(),
            },
        }
    }
}

impl RunRequest {
    /// A request with default limits and `auto` tool choice. Runs are made by
    /// [`crate::Graph::prepare`]; this is for tests and tools that drive the loop
    /// with a hand-made conversation.
    pub fn new(context: RunContext, model: impl Into<String>, messages: Vec<Message>) -> Self {
        Self {
            context,
            model: model.into(),
            messages,
            tool_choice: ToolChoice::Auto,
            tool_choice_scope: ToolChoiceScope::FirstTurn,
            settings: ModelSettings::default(),
            limits: RunLimits::default(),
            graph: None,
            prompt_hash: None,
            defer_approvals: false,
            prompt_params: Params::new(),
        }
    }
}

/// What a run uses.
#[derive(Clone)]
pub struct RunDeps {
    /// The model.
    pub model: Arc<dyn CompletionPort>,
    /// The tool pipeline.
    pub runner: Arc<ToolRunner>,
    /// The tools offered to the model.
    pub catalog: Arc<ToolCatalog>,
}

/// A finished (or paused) run. Serializable.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunOutput {
    /// The final answer (the refusal text when the model refused).
    pub content: String,
    /// Why the last model turn stopped. Anything but `Stop` (or `Unknown`, when the
    /// provider sent none) means the answer may be incomplete: see
    /// [`RunOutput::complete`].
    pub finish_reason: FinishReason,
    /// The refusal, when the model declined to answer.
    pub refusal: Option<String>,
    /// The whole conversation the model saw and answered, including the system
    /// prompt, tool calls and results.
    pub messages: Vec<Message>,
    /// Where this turn starts in `messages`: the user's new message (the trailing
    /// user messages of the input) and everything the run added after it; for a
    /// resumed run, what it added since the pause. See [`RunOutput::new_messages`].
    #[serde(default)]
    pub new_from: usize,
    /// Usage of every model call, in order.
    pub usage: Vec<UsageFact>,
    /// The audit record of every tool call of the run, in call order.
    pub records: Vec<ToolInvocationRecord>,
    /// Set when the run paused on approvals (deferred approvals) instead of
    /// answering: continue it with [`resume`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<Box<PausedRun>>,
}

impl RunOutput {
    /// This turn's messages: the user's new message and what the run added (the
    /// assistant's calls, the tool results, the answer). Appending them to a
    /// history keeps it whole without copying the system prompt (see
    /// `agent_graph::Conversation`).
    pub fn new_messages(&self) -> &[Message] {
        self.messages.get(self.new_from..).unwrap_or_default()
    }

    /// The conversation without its leading system messages: what to pass back as
    /// the next run's history (the graph supplies its own system prompt).
    pub fn conversation(&self) -> &[Message] {
        let system = self
            .messages
            .iter()
            .take_while(|m| matches!(m, Message::System { .. }))
            .count();
        &self.messages[system..]
    }

    /// The calls waiting for an approval (empty unless the run paused).
    pub fn pending_approvals(&self) -> &[PendingApproval] {
        self.paused.as_ref().map_or(&[], |p| p.pending.as_slice())
    }

    /// The answer, or a typed error when the last turn did not end normally (cut by
    /// the token limit, filtered, or refused): for callers that need a complete
    /// answer.
    pub fn complete(&self) -> Result<&str, RunError> {
        match (&self.refusal, &self.finish_reason) {
            (Some(_), _) => Err(RunError::Incomplete {
                reason: "refusal".into(),
            }),
            (None, FinishReason::Stop | FinishReason::Unknown | FinishReason::ToolCalls) => {
                Ok(&self.content)
            }
            (None, other) => Err(RunError::Incomplete {
                reason: other.as_str().to_owned(),
            }),
        }
    }

    /// The `finish_reason` of the `assistant_final` event: `refusal` when the model
    /// refused, else the last turn's reason.
    pub fn final_reason(&self) -> &str {
        if self.refusal.is_some() {
            "refusal"
        } else {
            match &self.finish_reason {
                FinishReason::Unknown | FinishReason::ToolCalls => "stop",
                other => other.as_str(),
            }
        }
    }
}

/// Why a run failed. Each variant has a stable [`RunError::code`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The model call failed.
    #[error(transparent)]
    Model(#[from] CompletionError),
    /// The model kept calling tools for `limit` turns.
    #[error(
        "the run stopped after {limit} model turns without a final answer{}; raise limits.max_iterations if the task needs more turns",
        not_executed_note(not_executed)
    )]
    MaxIterations {
        /// The limit.
        limit: u32,
        /// Tool calls of the last turn, not executed because no model turn was left
        /// to see their results (also listed by the `tool_calls_not_executed` event).
        not_executed: Vec<ToolCallRef>,
    },
    /// A usage limit was reached.
    #[error(
        "the run reached its {what} limit of {limit}{}",
        not_executed_note(not_executed)
    )]
    UsageLimit {
        /// `model_requests` or `total_tokens`.
        what: &'static str,
        /// The limit.
        limit: u64,
        /// Tool calls of the last turn, not executed because the limit left no model
        /// turn to see their results (also listed by the `tool_calls_not_executed`
        /// event).
        not_executed: Vec<ToolCallRef>,
    },
    /// The run was cancelled.
    #[error("the run was cancelled")]
    Cancelled,
    /// The answer is not complete (returned by [`RunOutput::complete`] only).
    #[error("the answer is incomplete: the model stopped with `{reason}`")]
    Incomplete {
        /// `length`, `content_filter`, `refusal` or the provider's reason.
        reason: String,
    },
    /// A typed answer did not match its type, after every retry.
    #[error("the answer did not match the requested type after {attempts} attempts: {message}")]
    InvalidOutput {
        /// How many answers were asked for.
        attempts: u32,
        /// What was wrong with the last one (where, never the values).
        message: String,
    },
    /// A paused run could not be resumed (written by another version, or resumed
    /// with another graph); the message says why.
    #[error("the paused run cannot be resumed: {0}")]
    InvalidResume(String),
    /// A durable run's step journal could not be read or written: the run
    /// stops rather than go on with a step it cannot record.
    #[error(transparent)]
    Journal(#[from] crate::journal::JournalError),
    /// The run failed in an unexpected way (a bug); the message is safe.
    #[error("internal error: {0}")]
    Internal(String),
}

fn not_executed_note(calls: &[ToolCallRef]) -> String {
    match calls.len() {
        0 => String::new(),
        1 => " (the last turn's tool call was not executed)".to_owned(),
        n => format!(" (the last turn's {n} tool calls were not executed)"),
    }
}

impl RunError {
    /// The tool calls the run did not execute because it hit a limit first.
    pub fn not_executed(&self) -> &[ToolCallRef] {
        match self {
            Self::MaxIterations { not_executed, .. } | Self::UsageLimit { not_executed, .. } => {
                not_executed
            }
            _ => &[],
        }
    }

    /// Stable snake_case code (the `code` of the `error` event).
    pub fn code(&self) -> &'static str {
        match self {
            Self::Model(e) => e.code(),
            Self::MaxIterations { .. } => "max_iterations_exceeded",
            Self::UsageLimit { .. } => "usage_limit_exceeded",
            Self::Cancelled => "cancelled",
            Self::Incomplete { .. } => "incomplete_answer",
            Self::InvalidOutput { .. } => "invalid_output",
            Self::InvalidResume(_) => "invalid_resume",
            Self::Journal(_) => "journal_failed",
            Self::Internal(_) => "internal_error",
        }
    }
}

/// The events of one run, in order. Ends after the `done` event.
///
/// Dropping the stream cancels the run (the model call and running tools stop, and the
/// outcome resolves to [`RunError::Cancelled`]) unless the stream was detached
/// ([`EventStream::detach`], [`RunHandle::detach`]) or came from
/// [`RunHandle::into_parts`].
///
/// The run never waits for the stream: while the consumer is behind, consecutive
/// `text_delta`s (and `reasoning_delta`s) are merged into one queued event, so a
/// stalled consumer costs one growing text per gap, not one event per token; the
/// concatenated text is unchanged and no other event is dropped.
pub struct EventStream {
    queue: Arc<Queue>,
    cancel_on_drop: Option<DropGuard>,
}

impl std::fmt::Debug for EventStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventStream")
            .field("pending", &self.queue.len())
            .field("cancels_on_drop", &self.cancel_on_drop.is_some())
            .finish()
    }
}

impl EventStream {
    /// Dropping the returned stream no longer cancels the run.
    pub fn detach(mut self) -> Self {
        if let Some(guard) = self.cancel_on_drop.take() {
            guard.disarm();
        }
        self
    }

    /// Events waiting to be read (after merging): how far behind the consumer is,
    /// for metrics and tests.
    pub fn pending(&self) -> usize {
        self.queue.len()
    }

    /// Deltas merged into an already queued delta so far, because the consumer was
    /// behind.
    pub fn coalesced(&self) -> u64 {
        self.queue.coalesced()
    }
}

impl Stream for EventStream {
    type Item = AiEvent;
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<AiEvent>> {
        loop {
            return match self.queue.poll_pop(cx) {
                Poll::Ready(Some(Slot::Event(event))) => Poll::Ready(Some(event)),
                // A lossless queue drops nothing; nothing to report.
                Poll::Ready(Some(Slot::Gap(_))) => continue,
                Poll::Ready(None) => Poll::Ready(None),
                Poll::Pending => Poll::Pending,
            };
        }
    }
}

impl Drop for EventStream {
    fn drop(&mut self) {
        // Free what is queued and stop queueing; the guard (if armed) then cancels.
        self.queue.receiver_gone();
    }
}

/// The final result of one run. Resolves exactly once, whether or not anyone reads
/// the events.
///
/// Dropping it cancels the run only when it came from [`RunHandle::into_parts`];
/// otherwise the [`EventStream`] decides (see [`RunHandle`]).
pub struct OutputFuture {
    rx: oneshot::Receiver<Result<RunOutput, RunError>>,
    cancel_on_drop: Option<DropGuard>,
}

impl std::fmt::Debug for OutputFuture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputFuture")
            .field("cancels_on_drop", &self.cancel_on_drop.is_some())
            .finish_non_exhaustive()
    }
}

impl Future for OutputFuture {
    type Output = Result<RunOutput, RunError>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.rx.poll_unpin(cx).map(|r| {
            r.unwrap_or_else(|_| Err(RunError::Internal("the run ended without a result".into())))
        })
    }
}

/// A started run: a stream of its events, its outcome and its cancel token.
///
/// The handle is itself the event stream. Read the events, then the outcome:
///
/// ```
/// # use agent_graph::Agent;
/// # use agent_testing::{ScriptedModel, Turn};
/// use ai_core::event::AiEventKind;
/// use futures::StreamExt;
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let agent = Agent::builder(ScriptedModel::new([Turn::text("Hi!")])).build()?;
/// let mut run = agent.run("Hello");
/// while let Some(event) = run.next().await {
///     if let AiEventKind::TextDelta { delta } = &event.kind {
///         print!("{delta}");
///     }
/// }
/// let output = run.into_outcome().await?;
/// assert_eq!(output.content, "Hi!");
/// # Ok(())
/// # }
/// ```
///
/// Who may cancel the run by being dropped:
/// - the handle itself, and what [`RunHandle::into_events`] returns: dropping the
///   events cancels the run (a UI that goes away stops it).
/// - [`RunHandle::into_outcome`] (events not wanted) and the outcome half of
///   [`RunHandle::into_parts`]: the run goes on whatever happens to the events, and
///   dropping the outcome cancels it (a caller that only wants the result).
/// - after [`RunHandle::detach`]: nobody; the run ends on its own (answer, error or
///   limit) or by [`RunHandle::cancel`] / [`RunHandle::cancel_token`].
///
/// The events and the outcome are not fields: moving one out would drop the other
/// half and, with it, cancel the run.
///
/// ```compile_fail
/// # async fn f(agent: agent_graph::Agent) {
/// let outcome = agent.run("Hello").outcome; // use `into_outcome()`
/// # }
/// ```
pub struct RunHandle {
    events: EventStream,
    outcome: OutputFuture,
    cancel: CancellationToken,
}

impl Stream for RunHandle {
    type Item = AiEvent;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<AiEvent>> {
        Pin::new(&mut self.events).poll_next(cx)
    }
}

impl std::fmt::Debug for RunHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunHandle")
            .field("events", &self.events)
            .field("outcome", &self.outcome)
            .finish_non_exhaustive()
    }
}

impl RunHandle {
    /// Cancels the run: the in-flight model stream and tools stop, and the run ends
    /// with an `error` (cancelled) and `done`.
    pub fn cancel(&self) {
        self.cancel.cancel();
    }

    /// A token that cancels the run when fired.
    pub fn cancel_token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// Splits the handle; dropping the event stream does not stop the run, dropping
    /// the outcome does.
    pub fn into_parts(mut self) -> (EventStream, OutputFuture) {
        if let Some(guard) = self.events.cancel_on_drop.take() {
            self.outcome.cancel_on_drop = Some(guard);
        }
        (self.events, self.outcome)
    }

    /// The outcome alone: the events (read or not) are discarded and the run goes
    /// on to its end; dropping the returned future cancels it.
    pub fn into_outcome(self) -> OutputFuture {
        self.into_parts().1
    }

    /// The events alone, as the handle streams them: dropping them cancels the run;
    /// the outcome is discarded (the `assistant_final` or `error` event still says
    /// how the run ended).
    pub fn into_events(self) -> EventStream {
        self.events
    }

    /// Events waiting to be read (see [`EventStream::pending`]).
    pub fn pending(&self) -> usize {
        self.events.pending()
    }

    /// Detaches the run from its handle: dropping the events, the outcome or the
    /// handle no longer cancels it. It still stops on [`RunHandle::cancel`].
    pub fn detach(mut self) -> Self {
        for guard in [
            self.events.cancel_on_drop.take(),
            self.outcome.cancel_on_drop.take(),
        ]
        .into_iter()
        .flatten()
        {
            guard.disarm();
        }
        self
    }
}

/// Emits events without ever waiting: a slow or absent consumer cannot stall a run.
/// A top-level run's emitter owns the queue and dropping it ends the event stream; a
/// subagent's emitter forwards into its parent's queue, tagging every event.
pub(crate) struct Emitter {
    target: Target,
    ctx: RunContext,
    /// Set for a subagent: the parent's call id and the child graph.
    nested: Option<(String, Option<String>)>,
    /// A durable run's events since its last recorded step.
    capture: Option<Arc<Capture>>,
}

enum Target {
    Queue(Arc<Queue>),
    Sink(Arc<dyn EventSink>),
}

/// Pushes into a run's queue (the sink of nested events; events are tagged by the
/// call that emits them), and into a durable run's capture.
struct QueueSink(Arc<Queue>, Option<Arc<Capture>>);

impl EventSink for QueueSink {
    fn emit(&self, event: AiEvent) {
        if let Some(capture) = &self.1 {
            capture.push(&event);
        }
        self.0.push(event);
    }
}

impl Emitter {
    fn emit(&self, kind: AiEventKind) {
        self.push(AiEvent::new(&self.ctx, kind));
    }

    fn push(&self, event: AiEvent) {
        let event = match &self.nested {
            Some((parent, graph)) => event.nested(parent, graph.as_deref()),
            None => event,
        };
        if let Some(capture) = &self.capture {
            capture.push(&event);
        }
        match &self.target {
            Target::Queue(queue) => {
                queue.push(event);
            }
            Target::Sink(sink) => sink.emit(event),
        }
    }

    /// Emits a replayed step's events again (not captured: they are recorded).
    fn replay(&self, events: &[AiEvent]) {
        for event in events {
            match &self.target {
                Target::Queue(queue) => {
                    queue.push(event.clone());
                }
                Target::Sink(sink) => sink.emit(event.clone()),
            }
        }
    }

    /// Where tools of this run emit nested events.
    fn nested_sink(&self) -> Arc<dyn EventSink> {
        match &self.target {
            Target::Queue(queue) => Arc::new(QueueSink(Arc::clone(queue), self.capture.clone())),
            Target::Sink(sink) => Arc::clone(sink),
        }
    }
}

impl ai_core::event::EventSink for Emitter {
    fn emit(&self, event: AiEvent) {
        self.push(event);
    }
}

impl Drop for Emitter {
    fn drop(&mut self) {
        if let Target::Queue(queue) = &self.target {
            queue.close();
        }
    }
}

/// Where a run starts: a request, what earlier parts of the run already did (for
/// a resumed run), and the decisions about the calls it paused on.
pub(crate) struct Start {
    request: RunRequest,
    /// Where this part of the run's messages starts (see [`RunOutput::new_from`]).
    new_from: usize,
    usage: Vec<UsageFact>,
    records: Vec<ToolInvocationRecord>,
    model_turns: u32,
    resume: Option<(Vec<PendingApproval>, Vec<ClientCall>, Vec<Decision>)>,
    /// Set when the run cannot start: it ends with this error at once.
    refused: Option<RunError>,
    /// A durable run's journal, and the capture of its events.
    journal: Option<(Arc<dyn StepJournal>, Arc<Capture>)>,
}

impl Start {
    fn new(request: RunRequest) -> Self {
        let trailing_user = request
            .messages
            .iter()
            .rev()
            .take_while(|m| matches!(m, Message::User { .. }))
            .count();
        Self {
            new_from: request.messages.len() - trailing_user,
            request,
            usage: Vec::new(),
            records: Vec::new(),
            model_turns: 0,
            resume: None,
            refused: None,
            journal: None,
        }
    }

    fn resumed(paused: PausedRun, decisions: Vec<Decision>) -> Self {
        let refused = (paused.version != PAUSED_RUN_VERSION).then(|| {
            RunError::InvalidResume(format!(
                "it was written in version {} of the format; this build reads version {PAUSED_RUN_VERSION}",
                paused.version
            ))
        });
        Self {
            new_from: paused.request.messages.len(),
            request: paused.request,
            usage: paused.usage,
            records: paused.records,
            model_turns: paused.model_turns,
            resume: Some((paused.pending, paused.client_calls, decisions)),
            refused,
            journal: None,
        }
    }
}

/// Runs a subagent's loop inside a tool call of its parent: the same loop, with its
/// events forwarded to `sink` tagged with `parent_tool_call_id` and `graph`, and no
/// `assistant_final`, `error` or `done` of its own (the caller turns the outcome into
/// the tool result). Runs on the caller's task: dropping the future stops it.
pub(crate) async fn run_nested(
    request: RunRequest,
    deps: &RunDeps,
    sink: Arc<dyn EventSink>,
    parent_tool_call_id: &str,
    cancel: &CancellationToken,
) -> Result<RunOutput, RunError> {
    let emitter = Emitter {
        target: Target::Sink(sink),
        ctx: request.context.clone(),
        nested: Some((parent_tool_call_id.to_owned(), request.graph.clone())),
        capture: None,
    };
    drive(Start::new(request), deps, &emitter, cancel, 1).await
}

/// Starts a run on the current tokio runtime.
pub fn run(request: RunRequest, deps: RunDeps) -> RunHandle {
    spawn(Start::new(request), deps)
}

/// A run that ends at once with `error` (its events: `error`, `done`), for a
/// caller that must hand back a handle but could not prepare the run.
pub(crate) fn fail(context: RunContext, error: RunError) -> RunHandle {
    let queue = Arc::new(Queue::lossless());
    let emitter = Emitter {
        target: Target::Queue(Arc::clone(&queue)),
        ctx: context,
        nested: None,
        capture: None,
    };
    emitter.emit(AiEventKind::Error {
        code: error.code().to_owned(),
        message: error.to_string(),
    });
    emitter.emit(AiEventKind::Done);
    drop(emitter);
    let (final_tx, final_rx) = oneshot::channel();
    let _ = final_tx.send(Err(error));
    RunHandle {
        events: EventStream {
            queue,
            cancel_on_drop: None,
        },
        outcome: OutputFuture {
            rx: final_rx,
            cancel_on_drop: None,
        },
        cancel: CancellationToken::new(),
    }
}

/// Resumes a paused run with the user's decisions, on the current tokio runtime.
///
/// Inside the run, before its next model turn, every pending call goes through
/// `ToolRunner::exec` in call order: an approved one runs under a grant bound to
/// this run, this call, its tool and its argument hash (the runner still checks
/// policy, arguments and everything else); a denied one ends `approval_denied`
/// and an invalid one `approval_invalid`, without running. A pending call without
/// a decision counts as invalid; a decision about no pending call is ignored. Their
/// events are the run's own, their records join the run's records in call order,
/// and the model then reads their results. `deps` must offer the tools the run
/// was prepared with (`Graph::resume` makes sure of it).
pub fn resume(paused: PausedRun, decisions: Vec<Decision>, deps: RunDeps) -> RunHandle {
    spawn(Start::resumed(paused, decisions), deps)
}

/// Starts (or starts again, after a crash) a durable run on the current tokio
/// runtime: each model call and tool execution is a step recorded in `journal`
/// before the next starts, and the steps `journal` already holds for the run
/// are replayed, not repeated (see [`crate::journal`]). Give it the same
/// [`RunStart`] every time; the run keeps its id.
pub fn durable(start: RunStart, deps: RunDeps, journal: Arc<dyn StepJournal>) -> RunHandle {
    let mut start = Start::from(start);
    start.journal = Some((journal, Arc::new(Capture::default())));
    spawn(start, deps)
}

/// Starts a run from a [`RunStart`] without a journal: [`run()`] or [`resume`].
pub fn start(start: RunStart, deps: RunDeps) -> RunHandle {
    spawn(Start::from(start), deps)
}

impl From<RunStart> for Start {
    fn from(start: RunStart) -> Self {
        match start {
            RunStart::New { request } => Start::new(request),
            RunStart::Continue { paused, decisions } => Start::resumed(paused, decisions),
        }
    }
}

fn spawn(start: Start, deps: RunDeps) -> RunHandle {
    let queue = Arc::new(Queue::lossless());
    let (final_tx, final_rx) = oneshot::channel();
    let cancel = CancellationToken::new();
    let context = &start.request.context;
    let span = tracing::info_span!(
        "run",
        run_id = %log_field(&context.run_id),
        trace_id = %log_field(&context.trace_id),
        ingress_request_id = %log_field(context.ingress_request_id.as_deref().unwrap_or("")),
    );
    let capture = start
        .journal
        .as_ref()
        .map(|(_, capture)| Arc::clone(capture));
    let emitter = Emitter {
        target: Target::Queue(Arc::clone(&queue)),
        ctx: context.clone(),
        nested: None,
        capture,
    };
    let task_cancel = cancel.clone();
    let prompt_hash = start.request.prompt_hash.clone();
    tokio::spawn(
        async move {
            let body =
                AssertUnwindSafe(drive(start, &deps, &emitter, &task_cancel, 0)).catch_unwind();
            let result = match body.await {
                Ok(result) => result,
                Err(_) => Err(RunError::Internal("the run panicked".into())),
            };
            match &result {
                // A paused run has no answer yet.
                Ok(output) if output.paused.is_some() => {}
                Ok(output) => emitter.emit(AiEventKind::AssistantFinal {
                    content: output.content.clone(),
                    finish_reason: output.final_reason().to_owned(),
                    prompt_hash,
                }),
                Err(error) => {
                    tracing::info!(code = error.code(), "run failed");
                    emitter.emit(AiEventKind::Error {
                        code: error.code().to_owned(),
                        message: error.to_string(),
                    });
                }
            }
            emitter.emit(AiEventKind::Done);
            let _ = final_tx.send(result);
        }
        .instrument(span),
    );
    RunHandle {
        events: EventStream {
            queue,
            cancel_on_drop: Some(cancel.clone().drop_guard()),
        },
        outcome: OutputFuture {
            rx: final_rx,
            cancel_on_drop: None,
        },
        cancel,
    }
}

/// Runs the calls a paused run waits on (see [`resume`]) and puts the turn's tool
/// messages and records in call order, as if it had never paused.
async fn settle_pending(
    deps: &RunDeps,
    (context, scope, counter): (&RunContext, &CallScope, &mut StepCounter<'_>),
    (pending, client_calls, decisions): (Vec<PendingApproval>, Vec<ClientCall>, Vec<Decision>),
    emitter: &Emitter,
    cancel: &CancellationToken,
    (messages, records): (&mut Vec<Message>, &mut Vec<ToolInvocationRecord>),
) -> Result<(), RunError> {
    for call in &client_calls {
        let output = decisions.iter().find_map(|d| match d {
            Decision::ClientOutput {
                tool_call_id,
                output,
            } if *tool_call_id == call.tool_call_id => Some(output),
            _ => None,
        });
        let content = output.map_or_else(
            || NO_CLIENT_OUTPUT.to_owned(),
            |output| {
                let limit = deps.runner.policy().budgets.max_result_bytes;
                ai_core::text::bound_text(&canonical_json(output), limit).text
            },
        );
        messages.push(Message::tool(call.tool_call_id.clone(), content));
    }
    for decision in &decisions {
        let known = pending
            .iter()
            .any(|p| p.tool_call_id == decision.tool_call_id())
            || client_calls
                .iter()
                .any(|c| c.tool_call_id == decision.tool_call_id());
        if !known {
            tracing::warn!(tool_call_id = %log_field(decision.tool_call_id()), "a decision about no pending call; ignored");
        }
    }
    let mut scope = scope.clone();
    scope.decisions = pending
        .iter()
        .map(|call| {
            decisions
                .iter()
                .find(|d| d.tool_call_id() == call.tool_call_id)
                .map_or_else(
                    || PriorDecision::Invalid {
                        tool_call_id: call.tool_call_id.clone(),
                        reason: "no decision was given for this call".into(),
                    },
                    |d| d.prior(context, call),
                )
        })
        .collect();
    for call in pending {
        let call = ToolCall {
            id: Some(call.tool_call_id),
            name: call.tool_name,
            arguments: canonical_json(&call.args),
            outcome: ai_core::completion::ToolCallOutcome::Complete,
            raw: call.raw,
        };
        let number = counter.take(1);
        let journal = (counter.steps, number);
        let exec = exec_step(deps, (context, &scope), call, journal, emitter, cancel).await?;
        messages.push(tool_message(&exec));
        records.push(exec.record);
    }
    in_call_order(messages, records);
    Ok(())
}

/// Orders the tool messages after the last assistant turn, and the records of its
/// calls, by the turn's call order.
fn in_call_order(messages: &mut [Message], records: &mut Vec<ToolInvocationRecord>) {
    let Some(turn) = messages.iter().rposition(
        |m| matches!(m, Message::Assistant { tool_calls, .. } if !tool_calls.is_empty()),
    ) else {
        return;
    };
    let order: Vec<String> = match &messages[turn] {
        Message::Assistant { tool_calls, .. } => tool_calls.iter().map(|c| c.id.clone()).collect(),
        _ => return,
    };
    let position = |id: &str| order.iter().position(|o| o == id).unwrap_or(usize::MAX);
    messages[turn + 1..].sort_by_key(|m| match m {
        Message::Tool { tool_call_id, .. } => position(tool_call_id),
        _ => usize::MAX,
    });
    let (mut turn_records, earlier): (Vec<_>, Vec<_>) = std::mem::take(records)
        .into_iter()
        .partition(|r| order.contains(&r.tool_call_id));
    turn_records.sort_by_key(|r| position(&r.tool_call_id));
    *records = earlier;
    records.extend(turn_records);
}

/// The loop. `depth` is 0 for a top-level run and 1 for a subagent.
async fn drive(
    start: Start,
    deps: &RunDeps,
    emitter: &Emitter,
    cancel: &CancellationToken,
    depth: u32,
) -> Result<RunOutput, RunError> {
    let Start {
        mut request,
        new_from,
        mut usage,
        mut records,
        model_turns,
        resume,
        refused,
        journal,
    } = start;
    if let Some(error) = refused {
        return Err(error);
    }
    let steps =
        journal.map(|(journal, capture)| Steps::new(journal, &request.context.run_id, capture));
    let mut counter = StepCounter {
        steps: steps.as_ref(),
        next: 0,
    };
    let hash = request.prompt_hash.clone();
    let scope = CallScope {
        graph: request.graph.clone(),
        prompt_hash: request.prompt_hash.clone(),
        events: Some(emitter.nested_sink()),
        nested: Some(NestedPort {
            model: Arc::clone(&deps.model),
            runner: Arc::clone(&deps.runner),
            model_id: request.model.clone(),
            depth,
        }),
        decisions: Vec::new(),
        outcome_unknown: Vec::new(),
    };
    let context = request.context.clone();
    if depth == 0 {
        // Tools policy allows but their source withholds right now (e.g. an MCP tool
        // whose definition changed since it was pinned): said once, up front.
        for (id, reason) in deps.runner.withheld(&context) {
            emitter.emit(AiEventKind::ToolWithheld {
                tool_name: id.as_str().to_owned(),
                reason,
            });
        }
    }
    // What the run says before its first step is said again each time it
    // starts: it is no step's.
    if let Some(steps) = &steps {
        steps.forget_captured();
    }
    if let Some(resume) = resume {
        let history = (&mut request.messages, &mut records);
        let call = (&context, &scope, &mut counter);
        settle_pending(deps, call, resume, emitter, cancel, history).await?;
        if cancel.is_cancelled() {
            return Err(RunError::Cancelled);
        }
    }
    let limits = request.limits.clone();
    let max_iterations = limits.max_iterations.max(1);
    let tools: Arc<[ai_core::ToolSpec]> = deps.catalog.specs().into();
    let mut total_tokens: u64 = usage.iter().map(|u| u.total_tokens).sum();

    for iteration in model_turns..max_iterations {
        if let Some(limit) = limits.max_model_requests
            && iteration >= limit
        {
            return Err(RunError::UsageLimit {
                what: "model_requests",
                limit: u64::from(limit),
                not_executed: Vec::new(),
            });
        }
        if let Some(limit) = limits.max_total_tokens
            && total_tokens >= limit
        {
            return Err(RunError::UsageLimit {
                what: "total_tokens",
                limit,
                not_executed: Vec::new(),
            });
        }
        let completion = CompletionRequest {
            model: request.model.clone(),
            messages: request.messages.clone(),
            tools: Arc::clone(&tools),
            tool_choice: request
                .tool_choice_scope
                .choice_for(&request.tool_choice, iteration),
            context: context.clone(),
            settings: request.settings.clone(),
        };
        let number = counter.take(1);
        let turn = turn_step(
            deps,
            completion,
            (&counter, number),
            emitter,
            cancel,
            hash.as_deref(),
        )
        .await?;
        if let Some(fact) = &turn.usage {
            total_tokens = total_tokens.saturating_add(fact.total_tokens);
            usage.push(fact.clone());
        }
        if turn.tool_calls.is_empty() {
            let content = match (&turn.refusal, turn.text.is_empty()) {
                (Some(refusal), true) => refusal.clone(),
                _ => turn.text.clone(),
            };
            request.messages.push(Message::assistant(content.clone()));
            return Ok(RunOutput {
                content,
                finish_reason: turn.finish_reason,
                refusal: turn.refusal,
                messages: request.messages,
                new_from,
                usage,
                records,
                paused: None,
            });
        }
        // No tool runs whose result no model would see: when no further turn is
        // allowed, the calls are reported, not executed.
        if let Some(blocked) =
            next_turn_blocked(iteration + 1, total_tokens, &limits, max_iterations)
        {
            let not_executed: Vec<ToolCallRef> = turn
                .tool_calls
                .iter()
                .map(|call| deps.runner.call_ref(&as_tool_call(call)))
                .collect();
            let error = blocked.into_error(not_executed.clone());
            emitter.emit(AiEventKind::ToolCallsNotExecuted {
                code: error.code().to_owned(),
                calls: not_executed,
            });
            return Err(error);
        }
        let waiting = tool_turn(
            deps,
            (&context, &scope, &mut counter),
            &turn,
            (request.defer_approvals, limits.tool_concurrency),
            emitter,
            cancel,
            (&mut request.messages, &mut records),
        )
        .await;
        if cancel.is_cancelled() {
            return Err(RunError::Cancelled);
        }
        let (waiting, client_calls) = waiting?;
        if !waiting.is_empty() || !client_calls.is_empty() {
            for pending in &waiting {
                emitter.emit(AiEventKind::ToolApprovalRequested {
                    tool_call_id: pending.tool_call_id.clone(),
                    tool_name: pending.tool_name.clone(),
                    args: pending.args.clone(),
                    args_hash: pending.args_hash.clone(),
                });
            }
            for call in &client_calls {
                emitter.emit(AiEventKind::ClientToolCall {
                    tool_call_id: call.tool_call_id.clone(),
                    tool_name: call.tool_name.clone(),
                    args: call.args.clone(),
                });
            }
            let paused = PausedRun {
                version: PAUSED_RUN_VERSION,
                request: request.clone(),
                pending: waiting,
                client_calls,
                usage: usage.clone(),
                records: records.clone(),
                model_turns: iteration + 1,
            };
            return Ok(RunOutput {
                content: turn.text.clone(),
                finish_reason: turn.finish_reason,
                refusal: None,
                messages: request.messages,
                new_from,
                usage,
                records,
                paused: Some(Box::new(paused)),
            });
        }
    }
    // Unreachable in practice: the last allowed turn either answers or is blocked
    // above.
    Err(RunError::MaxIterations {
        limit: max_iterations,
        not_executed: Vec::new(),
    })
}

/// Runs one turn's tool calls (all but those deferred: for an approval, or to the
/// client) and appends the assistant message with every call and one tool message
/// per executed call, in call order, ids as the runner settled them. Returns the
/// deferred calls (a deferred call gets its tool message when the run resumes).
async fn tool_turn(
    deps: &RunDeps,
    (context, scope, counter): (&RunContext, &CallScope, &mut StepCounter<'_>),
    turn: &CompletionFinal,
    (defer_approvals, concurrency): (bool, usize),
    emitter: &Emitter,
    cancel: &CancellationToken,
    (messages, records): (&mut Vec<Message>, &mut Vec<ToolInvocationRecord>),
) -> Result<(Vec<PendingApproval>, Vec<ClientCall>), RunError> {
    let pending: Vec<Option<Deferred>> = turn
        .tool_calls
        .iter()
        .map(|call| {
            defer_approvals
                .then(|| deferred(deps, context, call))
                .flatten()
        })
        .collect();
    let to_run: Vec<ToolCall> = turn
        .tool_calls
        .iter()
        .zip(&pending)
        .filter(|(_, p)| p.is_none())
        .map(|(call, _)| as_tool_call(call))
        .collect();
    let first = counter.take(u32::try_from(to_run.len()).unwrap_or(u32::MAX));
    let journal = (counter.steps, first);
    let mut executions = run_tools(
        deps,
        (context, scope, journal),
        to_run,
        emitter,
        cancel,
        concurrency,
    )
    .await?
    .into_iter();
    let mut calls = Vec::with_capacity(turn.tool_calls.len());
    let mut tool_messages = Vec::new();
    let mut waiting = Vec::new();
    let mut client_calls = Vec::new();
    for (call, pending) in turn.tool_calls.iter().zip(pending) {
        let id = match pending {
            Some(Deferred::Approval(pending)) => {
                let id = pending.tool_call_id.clone();
                waiting.push(pending);
                id
            }
            Some(Deferred::Client(call)) => {
                let id = call.tool_call_id.clone();
                client_calls.push(call);
                id
            }
            None => match executions.next() {
                Some(exec) => {
                    let id = exec.result.tool_call_id.clone();
                    tool_messages.push(tool_message(&exec));
                    records.push(exec.record);
                    id
                }
                None => deps.runner.call_ref(&as_tool_call(call)).tool_call_id,
            },
        };
        calls.push(MessageToolCall {
            id,
            name: call.name.clone(),
            arguments: history_arguments(call),
            raw: call.raw.clone(),
        });
    }
    let blocks = settled_blocks(&turn.blocks, &calls);
    messages.push(Message::Assistant {
        blocks,
        content: (!turn.text.is_empty()).then(|| turn.text.clone()),
        reasoning: turn.reasoning.clone(),
        tool_calls: calls,
    });
    messages.extend(tool_messages);
    Ok((waiting, client_calls))
}

/// The tool message of an execution: its model-facing result, flagged as an
/// error when the call failed.
fn tool_message(exec: &ai_core::runner::ToolExecution) -> Message {
    let id = exec.result.tool_call_id.clone();
    if exec.result.ok {
        Message::tool(id, exec.model_content.clone())
    } else {
        Message::tool_error(id, exec.model_content.clone())
    }
}

/// The turn's blocks with each call's id as the runner settled it (the k-th
/// call block is the k-th call).
fn settled_blocks(
    blocks: &[ai_core::message::AssistantBlock],
    calls: &[MessageToolCall],
) -> Vec<ai_core::message::AssistantBlock> {
    let mut ids = calls.iter().map(|c| c.id.clone());
    blocks
        .iter()
        .map(|block| match block {
            ai_core::message::AssistantBlock::ToolCall { id } => {
                ai_core::message::AssistantBlock::ToolCall {
                    id: ids.next().unwrap_or_else(|| id.clone()),
                }
            }
            other => other.clone(),
        })
        .collect()
}

/// The `usage_report` of one model call of a run with `prompt_hash`.
fn usage_event(fact: UsageFact, prompt_hash: Option<&str>) -> AiEventKind {
    AiEventKind::UsageReport {
        model: fact.model,
        prompt_tokens: fact.prompt_tokens,
        completion_tokens: fact.completion_tokens,
        total_tokens: fact.total_tokens,
        cached_tokens: fact.cached_tokens,
        reasoning_tokens: fact.reasoning_tokens,
        cache_creation_tokens: fact.cache_creation_tokens,
        cost_micros: fact.cost_micros,
        prompt_hash: prompt_hash.map(str::to_owned),
    }
}

/// Which limit forbids the model turn numbered `next` (0 first), if any.
enum Blocked {
    Iterations(u32),
    ModelRequests(u32),
    TotalTokens(u64),
}

impl Blocked {
    fn into_error(self, not_executed: Vec<ToolCallRef>) -> RunError {
        match self {
            Self::Iterations(limit) => RunError::MaxIterations {
                limit,
                not_executed,
            },
            Self::ModelRequests(limit) => RunError::UsageLimit {
                what: "model_requests",
                limit: u64::from(limit),
                not_executed,
            },
            Self::TotalTokens(limit) => RunError::UsageLimit {
                what: "total_tokens",
                limit,
                not_executed,
            },
        }
    }
}

fn next_turn_blocked(
    next: u32,
    total_tokens: u64,
    limits: &RunLimits,
    max_iterations: u32,
) -> Option<Blocked> {
    if next >= max_iterations {
        return Some(Blocked::Iterations(max_iterations));
    }
    if let Some(limit) = limits.max_model_requests
        && next >= limit
    {
        return Some(Blocked::ModelRequests(limit));
    }
    if let Some(limit) = limits.max_total_tokens
        && total_tokens >= limit
    {
        return Some(Blocked::TotalTokens(limit));
    }
    None
}

/// The runner's view of an assembled call.
fn as_tool_call(call: &ai_core::completion::AssembledToolCall) -> ToolCall {
    ToolCall {
        id: Some(call.id.clone()),
        name: call.name.clone(),
        arguments: call.arguments.clone(),
        outcome: call.outcome,
        raw: call.raw.clone(),
    }
}

/// Streams one model turn: text deltas go out as events; tool calls are taken only
/// from the assembled final.
async fn model_turn(
    deps: &RunDeps,
    request: CompletionRequest,
    emitter: &Emitter,
    cancel: &CancellationToken,
) -> Result<CompletionFinal, RunError> {
    let mut stream = deps.model.complete(request, cancel.child_token());
    let mut arguments = ArgumentStreams::default();
    // One waiter for the whole turn, not one registered and dropped per delta.
    let cancelled = cancel.cancelled();
    tokio::pin!(cancelled);
    loop {
        let item = tokio::select! {
            biased;
            () = &mut cancelled => return Err(RunError::Cancelled),
            item = stream.next() => item,
        };
        match item {
            Some(Ok(CompletionItem::Delta(CompletionDelta::Text(delta)))) => {
                arguments.flush(emitter);
                emitter.emit(AiEventKind::TextDelta { delta });
            }
            Some(Ok(CompletionItem::Delta(CompletionDelta::Reasoning(delta)))) => {
                arguments.flush(emitter);
                emitter.emit(AiEventKind::ReasoningDelta { delta });
            }
            Some(Ok(CompletionItem::Delta(CompletionDelta::ToolCallStart { index, id, name }))) => {
                arguments.flush(emitter);
                let shown =
                    deps.runner.streams_arguments(&name, &id) && deps.catalog.get(&name).is_some();
                arguments.open(index, id, name, shown);
            }
            Some(Ok(CompletionItem::Delta(CompletionDelta::ToolCallArgs { index, fragment }))) => {
                arguments.push(index, &fragment, emitter);
            }
            Some(Ok(CompletionItem::Delta(_))) => {}
            Some(Ok(CompletionItem::Final(turn))) => {
                arguments.flush(emitter);
                return Ok(turn);
            }
            // An item kind this loop does not know yet carries nothing it needs.
            Some(Ok(_)) => {}
            Some(Err(CompletionError::Cancelled)) => return Err(RunError::Cancelled),
            Some(Err(error)) => return Err(RunError::Model(error)),
            None => {
                return Err(RunError::Model(CompletionError::Protocol {
                    message: "the model stream ended without a final turn".into(),
                }));
            }
        }
    }
}

/// How much of a streaming call's argument text is gathered before it is passed
/// on (the first fragment goes at once, so a UI shows the call at once).
const ARGUMENT_DELTA_BYTES: usize = 256;

/// The argument text of a model turn's calls, passed on as `tool_input_delta`
/// events for the calls that may show it, in pieces of about
/// [`ARGUMENT_DELTA_BYTES`]: providers stream arguments a few characters at a
/// time, and a UI needs a fraction of that. By size, not time, so the events of
/// a given stream are always the same.
#[derive(Default)]
struct ArgumentStreams {
    /// By the call's index in the turn: id, tool name, the text not yet passed
    /// on, whether anything was. Only calls that may show their arguments.
    calls: std::collections::HashMap<u32, (String, String, String, bool)>,
}

impl ArgumentStreams {
    fn open(&mut self, index: u32, id: String, name: String, shown: bool) {
        if shown {
            self.calls.insert(index, (id, name, String::new(), false));
        } else {
            self.calls.remove(&index);
        }
    }

    fn push(&mut self, index: u32, fragment: &str, emitter: &Emitter) {
        let Some((id, name, pending, started)) = self.calls.get_mut(&index) else {
            return;
        };
        pending.push_str(fragment);
        let due = !*started || pending.len() >= ARGUMENT_DELTA_BYTES;
        if due && !pending.is_empty() {
            *started = true;
            emitter.emit(AiEventKind::ToolInputDelta {
                tool_call_id: id.clone(),
                tool_name: name.clone(),
                delta: std::mem::take(pending),
            });
        }
    }

    /// Passes on what is pending of every call (before anything else is emitted).
    fn flush(&mut self, emitter: &Emitter) {
        if self.calls.is_empty() {
            return;
        }
        let mut indices: Vec<u32> = self.calls.keys().copied().collect();
        indices.sort_unstable();
        for index in indices {
            if let Some((id, name, pending, started)) = self.calls.get_mut(&index)
                && !pending.is_empty()
            {
                *started = true;
                emitter.emit(AiEventKind::ToolInputDelta {
                    tool_call_id: id.clone(),
                    tool_name: name.clone(),
                    delta: std::mem::take(pending),
                });
            }
        }
    }
}

/// Runs a turn's calls through the runner. All read-only: concurrently (bounded),
/// results in call order. Otherwise one at a time, in call order.
async fn run_tools(
    deps: &RunDeps,
    (context, scope, (steps, first)): (&RunContext, &CallScope, (Option<&Steps>, u32)),
    calls: Vec<ToolCall>,
    emitter: &Emitter,
    cancel: &CancellationToken,
    concurrency: usize,
) -> Result<Vec<ToolExecution>, RunError> {
    let all_read_only = calls.iter().all(|call| {
        deps.catalog
            .get(&call.name)
            .is_none_or(|spec| spec.effect == ToolEffect::ReadOnly)
    });
    let count = calls.len();
    let numbered = calls.into_iter().zip(first..);
    let exec = |(call, number): (ToolCall, u32)| {
        exec_step(
            deps,
            (context, scope),
            call,
            (steps, number),
            emitter,
            cancel,
        )
    };
    let one_at_a_time = steps.is_some_and(Steps::one_step_at_a_time);
    if all_read_only && count > 1 && !one_at_a_time {
        futures::stream::iter(numbered)
            .map(exec)
            .buffered(concurrency.max(1))
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect()
    } else {
        let mut out = Vec::with_capacity(count);
        for call in numbered {
            out.push(exec(call).await?);
        }
        Ok(out)
    }
}

/// Runs one call through the runner; in a durable run, as step `number`: a
/// recorded result is replayed, a call that acts records its intent first (and
/// one whose intent was recorded without a result ends `outcome_unknown`
/// unless its tool is idempotent), and the result is recorded before the run
/// goes on.
async fn exec_step(
    deps: &RunDeps,
    (context, scope): (&RunContext, &CallScope),
    call: ToolCall,
    (steps, number): (Option<&Steps>, u32),
    emitter: &Emitter,
    cancel: &CancellationToken,
) -> Result<ToolExecution, RunError> {
    let Some(steps) = steps else {
        return Ok(deps
            .runner
            .exec_scoped(context, &deps.catalog, call, cancel, emitter, scope)
            .await);
    };
    let id = deps.runner.call_ref(&call).tool_call_id;
    let acts = deps
        .catalog
        .get(&call.name)
        .filter(|spec| spec.effect != ToolEffect::ReadOnly);
    // A call that acts: its intent first. Found recorded, the call was started
    // by an earlier attempt of the run.
    let mut started_before = false;
    if let Some(spec) = acts {
        match steps.open(number, StepKind::Intent).await? {
            StepSlot::Recorded(_) => started_before = true,
            StepSlot::Open(slot) => {
                let intent = StepBody::Intent {
                    idempotency_key: format!("{}:{id}", context.run_id),
                    tool_call_id: id.clone(),
                    tool_name: spec.id.as_str().to_owned(),
                };
                steps.record(slot, number, intent, None).await?;
            }
        }
    }
    let slot = match steps.open(number, StepKind::Tool).await? {
        StepSlot::Recorded(step) => {
            if let Some(exec) = crate::journal::replayed_execution(&step) {
                emitter.replay(&step.events);
                return Ok(exec);
            }
            return Err(RunError::Journal(crate::journal::JournalError(format!(
                "step {number} of the journal is not a tool result"
            ))));
        }
        StepSlot::Open(slot) => slot,
    };
    let mut scope = std::borrow::Cow::Borrowed(scope);
    if started_before && acts.is_some_and(|spec| !spec.idempotent) {
        tracing::warn!(tool_call_id = %log_field(&id), "a call that acts was under way when the run stopped: its outcome is unknown");
        scope.to_mut().outcome_unknown.push(id.clone());
    }
    let exec = deps
        .runner
        .exec_scoped(context, &deps.catalog, call, cancel, emitter, &scope)
        .await;
    // A call cut short by the run's cancellation is not its result.
    if cancel.is_cancelled() {
        return Ok(exec);
    }
    steps
        .record(slot, number, StepBody::tool(&exec), Some(&id))
        .await?;
    Ok(exec)
}

/// A durable run's journal and the number of its next step (for any run: a run
/// without a journal counts too, and records nothing).
struct StepCounter<'a> {
    steps: Option<&'a Steps>,
    next: u32,
}

impl StepCounter<'_> {
    /// The first of `n` numbers.
    fn take(&mut self, n: u32) -> u32 {
        let first = self.next;
        self.next = self.next.saturating_add(n);
        first
    }
}

/// One model turn; in a durable run, step `number`: replayed when recorded, else
/// streamed and recorded (its calls' ids settled first, so a replay names the
/// same calls).
async fn turn_step(
    deps: &RunDeps,
    completion: CompletionRequest,
    (counter, number): (&StepCounter<'_>, u32),
    emitter: &Emitter,
    cancel: &CancellationToken,
    prompt_hash: Option<&str>,
) -> Result<CompletionFinal, RunError> {
    let slot = match counter.steps {
        Some(steps) => match steps.open(number, StepKind::Model).await? {
            StepSlot::Recorded(step) => {
                let step = *step;
                let StepBody::Model { turn } = step.body else {
                    return Err(RunError::Journal(crate::journal::JournalError(format!(
                        "step {number} of the journal is not a model turn"
                    ))));
                };
                emitter.replay(&step.events);
                return Ok(turn);
            }
            StepSlot::Open(slot) => Some((steps, slot)),
        },
        None => None,
    };
    let mut turn = model_turn(deps, completion, emitter, cancel).await?;
    for call in &mut turn.tool_calls {
        call.id = deps.runner.call_ref(&as_tool_call(call)).tool_call_id;
    }
    if let Some(fact) = &turn.usage {
        emitter.emit(usage_event(fact.clone(), prompt_hash));
    }
    if let Some((steps, slot)) = slot {
        let body = StepBody::Model { turn: turn.clone() };
        steps.record(slot, number, body, None).await?;
    }
    Ok(turn)
}

/// The pending approval of `call` when it is deferred: a complete call of an
/// offered tool that policy puts behind an approval, with arguments that pass the
/// tool's schema. Anything else goes to the runner (which refuses it with a typed
/// result), so no one is asked to approve a call that could not run.
/// A call a run with deferred calls does not execute now.
enum Deferred {
    /// It waits for the user's decision.
    Approval(PendingApproval),
    /// The client runs it.
    Client(ClientCall),
}

fn deferred(
    deps: &RunDeps,
    context: &RunContext,
    call: &ai_core::completion::AssembledToolCall,
) -> Option<Deferred> {
    let spec = deps.catalog.get(&call.name)?;
    if call.outcome != ai_core::completion::ToolCallOutcome::Complete {
        return None;
    }
    let decision = deps.runner.policy().decide(context, &spec.id, spec.effect);
    let client = *spec.id.source() == ai_core::tool::ToolSource::Client;
    if !client && decision != ai_core::policy::PolicyDecision::RequireApproval {
        return None;
    }
    // Invalid arguments (or a tool policy denies) run through the runner, which
    // reports them to the model as for any call.
    let args: Value = serde_json::from_str(&call.arguments).ok()?;
    deps.runner.check_arguments(&call.name, &args).ok()?;
    if client {
        if decision == ai_core::policy::PolicyDecision::Deny {
            return None;
        }
        return Some(Deferred::Client(ClientCall {
            tool_call_id: deps.runner.call_ref(&as_tool_call(call)).tool_call_id,
            tool_name: spec.id.as_str().to_owned(),
            args,
        }));
    }
    Some(Deferred::Approval(PendingApproval {
        tool_call_id: deps.runner.call_ref(&as_tool_call(call)).tool_call_id,
        tool_name: spec.id.as_str().to_owned(),
        args_hash: ai_core::tool::args_hash(&args),
        args,
        raw: call.raw.clone(),
    }))
}

/// The argument text recorded in history. Providers reject an assistant message whose
/// `arguments` is not JSON, so an invalid or truncated call is recorded as `{}`; the
/// model learns what went wrong from the call's `invalid_json` tool message.
fn history_arguments(call: &ai_core::completion::AssembledToolCall) -> String {
    // An empty string is not JSON either, so it also becomes `{}`.
    let usable = call.outcome == ai_core::completion::ToolCallOutcome::Complete
        && serde_json::from_str::<serde::de::IgnoredAny>(&call.arguments).is_ok();
    if usable {
        call.arguments.clone()
    } else {
        "{}".to_owned()
    }
}
