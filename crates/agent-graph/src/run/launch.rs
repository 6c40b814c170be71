//! How a run is started: the entry points ([`run()`], [`resume`], [`durable`],
//! [`start`]; a subagent's [`run_nested`]) turn what they are given into a
//! [`Start`] and drive it ([`super::driver`]): a top-level run on a task of its
//! own, with one event queue and one outcome; a subagent on its caller's task,
//! its events into its parent's.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use ai_core::{
    CancellationToken, Message, RunContext,
    event::{AiEventKind, EventSink, UsageFact},
    runner::ToolInvocationRecord,
};
use futures::FutureExt;
use tokio::sync::oneshot;
use tracing::Instrument;

use super::driver::drive;
use super::emitter::{Emitter, Target};
use super::spans;
use super::{
    ClientCall, Decision, EventStream, OutputFuture, PAUSED_RUN_VERSION, PausedRun,
    PendingApproval, Queue, RunDeps, RunError, RunHandle, RunOutput, RunRequest,
};
use crate::journal::{Capture, RunStart, StepJournal};

/// Where a run starts: a request, what earlier parts of the run already did (for
/// a resumed run), and the decisions about the calls it paused on.
pub(super) struct Start {
    /// The request; for a resumed run, with the history up to the pause.
    pub(super) request: RunRequest,
    /// Where this part of the run's messages starts (see [`RunOutput::new_from`]).
    pub(super) new_from: usize,
    /// Usage of the model calls so far.
    pub(super) usage: Vec<UsageFact>,
    /// Records of the tool calls so far.
    pub(super) records: Vec<ToolInvocationRecord>,
    /// Model turns taken so far.
    pub(super) model_turns: u32,
    /// For a resumed run: the calls it paused on and the decisions about them.
    pub(super) resume: Option<(Vec<PendingApproval>, Vec<ClientCall>, Vec<Decision>)>,
    /// Set when the run cannot start: it ends with this error at once.
    pub(super) refused: Option<RunError>,
    /// A durable run's journal, and the capture of its events.
    pub(super) journal: Option<(Arc<dyn StepJournal>, Arc<Capture>)>,
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
        nested: Some((
            parent_tool_call_id.into(),
            request.graph.as_deref().map(Into::into),
        )),
        capture: None,
    };
    let span = spans::run_span(&request.context, request.graph.as_deref(), true);
    let result = drive(Box::new(Start::new(request)), deps, &emitter, cancel, 1)
        .instrument(span.clone())
        .await;
    if let Err(error) = &result {
        spans::record_run_error(&span, error.code());
    }
    result
}

/// Starts a run on the current tokio runtime.
pub fn run(request: RunRequest, deps: RunDeps) -> RunHandle {
    spawn(Start::new(request), deps)
}

/// A run that ends at once with `error` (its events: `error`, `done`), for a
/// caller that must hand back a handle but could not prepare the run.
pub(crate) fn fail(context: RunContext, error: RunError) -> RunHandle {
    let run_id = context.run_id.clone();
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
        run_id,
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
    let run_id = context.run_id.clone();
    let span = spans::run_span(context, start.request.graph.as_deref(), false);
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
    // Boxed: the task's state holds a pointer to it, not its fields.
    let start = Box::new(start);
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
                    spans::record_run_error(&tracing::Span::current(), error.code());
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
        run_id,
    }
}
