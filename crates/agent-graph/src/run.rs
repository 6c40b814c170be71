//! One run of the loop: model turn, tool calls, model turn, ... until a final answer.

use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use ai_core::{
    AiEvent, AiEventKind, CancellationToken, CompletionDelta, CompletionError, CompletionFinal,
    CompletionItem, CompletionPort, CompletionRequest, FinishReason, Message, MessageToolCall,
    ModelSettings, RunContext, ToolCall, ToolCatalog, ToolChoice, ToolEffect, ToolExecution,
    ToolInvocationRecord, ToolRunner, UsageFact,
};
use futures::{FutureExt, Stream, StreamExt};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::DropGuard;
use tracing::Instrument;

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

/// What to run.
#[derive(Debug, Clone)]
pub struct RunRequest {
    /// Correlation ids; they appear on every event and span.
    pub context: RunContext,
    /// Model id.
    pub model: String,
    /// The conversation so far (system prompt, user message, ...).
    pub messages: Vec<Message>,
    /// Tool choice for every model turn.
    pub tool_choice: ToolChoice,
    /// Sampling and output settings of every model call.
    pub settings: ModelSettings,
    /// Limits.
    pub limits: RunLimits,
}

impl RunRequest {
    /// A request with default limits and `auto` tool choice.
    pub fn new(context: RunContext, model: impl Into<String>, messages: Vec<Message>) -> Self {
        Self {
            context,
            model: model.into(),
            messages,
            tool_choice: ToolChoice::Auto,
            settings: ModelSettings::default(),
            limits: RunLimits::default(),
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

/// A finished run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutput {
    /// The final answer (the refusal text when the model refused).
    pub content: String,
    /// Why the last model turn stopped. Anything but `Stop` (or `Unknown`, when the
    /// provider sent none) means the answer may be incomplete: see
    /// [`RunOutput::complete`].
    pub finish_reason: FinishReason,
    /// The refusal, when the model declined to answer.
    pub refusal: Option<String>,
    /// The whole conversation, including tool calls and results.
    pub messages: Vec<Message>,
    /// Usage of every model call, in order.
    pub usage: Vec<UsageFact>,
    /// The audit record of every tool call of the run, in execution order.
    pub records: Vec<ToolInvocationRecord>,
}

impl RunOutput {
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
pub enum RunError {
    /// The model call failed.
    #[error(transparent)]
    Model(#[from] CompletionError),
    /// The model kept calling tools for `limit` turns.
    #[error(
        "the run stopped after {limit} model turns without a final answer; raise limits.max_iterations if the task needs more turns"
    )]
    MaxIterations {
        /// The limit.
        limit: u32,
    },
    /// A usage limit was reached.
    #[error("the run reached its {what} limit of {limit}")]
    UsageLimit {
        /// `model_requests` or `total_tokens`.
        what: &'static str,
        /// The limit.
        limit: u64,
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
    /// The run failed in an unexpected way (a bug); the message is safe.
    #[error("internal error: {0}")]
    Internal(String),
}

impl RunError {
    /// Stable snake_case code (the `code` of the `error` event).
    pub fn code(&self) -> &'static str {
        match self {
            Self::Model(e) => e.code(),
            Self::MaxIterations { .. } => "max_iterations_exceeded",
            Self::UsageLimit { .. } => "usage_limit_exceeded",
            Self::Cancelled => "cancelled",
            Self::Incomplete { .. } => "incomplete_answer",
            Self::Internal(_) => "internal_error",
        }
    }
}

/// The events of one run, in order. Ends after the `done` event.
pub struct EventStream {
    rx: mpsc::UnboundedReceiver<AiEvent>,
}

impl Stream for EventStream {
    type Item = AiEvent;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<AiEvent>> {
        self.rx.poll_recv(cx)
    }
}

/// The final result of one run. Resolves exactly once, whether or not anyone reads
/// the events. Dropping it (or the [`RunHandle`] holding it) cancels the run.
pub struct RunOutcome {
    rx: oneshot::Receiver<Result<RunOutput, RunError>>,
    _cancel_on_drop: DropGuard,
}

impl Future for RunOutcome {
    type Output = Result<RunOutput, RunError>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.rx.poll_unpin(cx).map(|r| {
            r.unwrap_or_else(|_| Err(RunError::Internal("the run ended without a result".into())))
        })
    }
}

/// A started run: its events, its outcome and its cancel token.
pub struct RunHandle {
    /// Events of the run.
    pub events: EventStream,
    /// Final result.
    pub outcome: RunOutcome,
    cancel: CancellationToken,
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
    pub fn into_parts(self) -> (EventStream, RunOutcome) {
        (self.events, self.outcome)
    }
}

/// Emits events without ever waiting: a slow or absent consumer cannot stall a run.
struct Emitter {
    tx: mpsc::UnboundedSender<AiEvent>,
    ctx: RunContext,
}

impl Emitter {
    fn emit(&self, kind: AiEventKind) {
        let _ = self.tx.send(AiEvent::new(&self.ctx, kind));
    }
}

impl ai_core::EventSink for Emitter {
    fn emit(&self, event: AiEvent) {
        let _ = self.tx.send(event);
    }
}

/// Starts a run on the current tokio runtime.
pub fn run(request: RunRequest, deps: RunDeps) -> RunHandle {
    let (tx, rx) = mpsc::unbounded_channel();
    let (final_tx, final_rx) = oneshot::channel();
    let cancel = CancellationToken::new();
    let span = tracing::info_span!(
        "run",
        run_id = %request.context.run_id,
        trace_id = %request.context.trace_id,
        ingress_request_id = request.context.ingress_request_id.as_deref().unwrap_or(""),
    );
    let emitter = Emitter {
        tx,
        ctx: request.context.clone(),
    };
    let task_cancel = cancel.clone();
    tokio::spawn(
        async move {
            let body =
                AssertUnwindSafe(drive(request, &deps, &emitter, &task_cancel)).catch_unwind();
            let result = match body.await {
                Ok(result) => result,
                Err(_) => Err(RunError::Internal("the run panicked".into())),
            };
            match &result {
                Ok(output) => emitter.emit(AiEventKind::AssistantFinal {
                    content: output.content.clone(),
                    finish_reason: output.final_reason().to_owned(),
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
        events: EventStream { rx },
        outcome: RunOutcome {
            rx: final_rx,
            _cancel_on_drop: cancel.clone().drop_guard(),
        },
        cancel,
    }
}

async fn drive(
    request: RunRequest,
    deps: &RunDeps,
    emitter: &Emitter,
    cancel: &CancellationToken,
) -> Result<RunOutput, RunError> {
    let RunRequest {
        context,
        model,
        mut messages,
        tool_choice,
        settings,
        limits,
    } = request;
    let max_iterations = limits.max_iterations.max(1);
    let tools: Arc<[ai_core::ToolSpec]> = deps.catalog.specs().into();
    let mut usage = Vec::new();
    let mut records = Vec::new();
    let mut total_tokens: u64 = 0;

    for iteration in 0..max_iterations {
        if let Some(limit) = limits.max_model_requests
            && iteration >= limit
        {
            return Err(RunError::UsageLimit {
                what: "model_requests",
                limit: u64::from(limit),
            });
        }
        if let Some(limit) = limits.max_total_tokens
            && total_tokens >= limit
        {
            return Err(RunError::UsageLimit {
                what: "total_tokens",
                limit,
            });
        }
        let completion = CompletionRequest {
            model: model.clone(),
            messages: messages.clone(),
            tools: Arc::clone(&tools),
            tool_choice: tool_choice.clone(),
            context: context.clone(),
            settings: settings.clone(),
        };
        let turn = model_turn(deps, completion, emitter, cancel).await?;
        if let Some(fact) = &turn.usage {
            total_tokens = total_tokens.saturating_add(fact.total_tokens);
            emitter.emit(AiEventKind::from(fact.clone()));
            usage.push(fact.clone());
        }
        if turn.tool_calls.is_empty() {
            let content = match (&turn.refusal, turn.text.is_empty()) {
                (Some(refusal), true) => refusal.clone(),
                _ => turn.text.clone(),
            };
            messages.push(Message::assistant(content.clone()));
            return Ok(RunOutput {
                content,
                finish_reason: turn.finish_reason,
                refusal: turn.refusal,
                messages,
                usage,
                records,
            });
        }
        let executions = run_tools(
            deps,
            &context,
            &turn,
            emitter,
            cancel,
            limits.tool_concurrency,
        )
        .await;
        // History stays balanced: one assistant message with every call, then one
        // tool message per call, in call order, ids as the runner settled them.
        messages.push(Message::Assistant {
            content: (!turn.text.is_empty()).then(|| turn.text.clone()),
            reasoning: turn.reasoning.clone(),
            tool_calls: turn
                .tool_calls
                .iter()
                .zip(&executions)
                .map(|(call, exec)| MessageToolCall {
                    id: exec.result.tool_call_id.clone(),
                    name: call.name.clone(),
                    arguments: history_arguments(call),
                    raw: call.raw.clone(),
                })
                .collect(),
        });
        for exec in executions {
            messages.push(Message::tool(exec.result.tool_call_id, exec.model_content));
            records.push(exec.record);
        }
        if cancel.is_cancelled() {
            return Err(RunError::Cancelled);
        }
    }
    Err(RunError::MaxIterations {
        limit: max_iterations,
    })
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
    loop {
        let item = tokio::select! {
            biased;
            _ = cancel.cancelled() => return Err(RunError::Cancelled),
            item = stream.next() => item,
        };
        match item {
            Some(Ok(CompletionItem::Delta(CompletionDelta::Text(delta)))) => {
                emitter.emit(AiEventKind::TextDelta { delta });
            }
            Some(Ok(CompletionItem::Delta(CompletionDelta::Reasoning(delta)))) => {
                emitter.emit(AiEventKind::ReasoningDelta { delta });
            }
            Some(Ok(CompletionItem::Delta(_))) => {}
            Some(Ok(CompletionItem::Final(turn))) => return Ok(turn),
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

/// Runs a turn's calls through the runner. All read-only: concurrently (bounded),
/// results in call order. Otherwise one at a time, in call order.
async fn run_tools(
    deps: &RunDeps,
    context: &RunContext,
    turn: &CompletionFinal,
    emitter: &Emitter,
    cancel: &CancellationToken,
    concurrency: usize,
) -> Vec<ToolExecution> {
    let calls: Vec<ToolCall> = turn
        .tool_calls
        .iter()
        .map(|call| ToolCall {
            id: Some(call.id.clone()),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
            outcome: call.outcome,
            raw: call.raw.clone(),
        })
        .collect();
    let all_read_only = calls.iter().all(|call| {
        deps.catalog
            .get(&call.name)
            .is_none_or(|spec| spec.effect == ToolEffect::ReadOnly)
    });
    let exec = |call: ToolCall| {
        deps.runner
            .exec(context, &deps.catalog, call, cancel, emitter)
    };
    if all_read_only && calls.len() > 1 {
        futures::stream::iter(calls)
            .map(exec)
            .buffered(concurrency.max(1))
            .collect()
            .await
    } else {
        let mut out = Vec::with_capacity(calls.len());
        for call in calls {
            out.push(exec(call).await);
        }
        out
    }
}

/// The argument text recorded in history. Providers reject an assistant message whose
/// `arguments` is not JSON, so an invalid or truncated call is recorded as `{}`; the
/// model learns what went wrong from the call's `invalid_json` tool message.
fn history_arguments(call: &ai_core::AssembledToolCall) -> String {
    // An empty string is not JSON either, so it also becomes `{}`.
    let usable = call.outcome == ai_core::ToolCallOutcome::Complete
        && serde_json::from_str::<serde::de::IgnoredAny>(&call.arguments).is_ok();
    if usable {
        call.arguments.clone()
    } else {
        "{}".to_owned()
    }
}
