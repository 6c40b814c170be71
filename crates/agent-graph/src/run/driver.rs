//! The loop: from a [`Start`], model turn, tool calls, model turn, ... until an
//! answer, a pause on deferred calls, a limit or an error. [`drive`] runs it; a
//! [`Driver`] carries what a run grows from turn to turn (history, usage,
//! records, step numbers), one method per step of a turn.

use std::sync::Arc;

use ai_core::{
    CancellationToken, Message, ToolSpec,
    completion::{CompletionFinal, CompletionRequest, FinishReason},
    event::{AiEventKind, ToolCallRef, UsageFact},
    message::AssistantBlock,
    runner::{CallScope, ToolInvocationRecord},
    tool::NestedPort,
};

use super::emitter::Emitter;
use super::launch::Start;
use super::model::turn_step;
use super::settle::settle_pending;
use super::tools::{as_tool_call, tool_turn};
use super::{
    ClientCall, Decision, PAUSED_RUN_VERSION, PausedRun, PendingApproval, RunDeps, RunError,
    RunLimits, RunOutput, RunRequest,
};
use crate::journal::Steps;

/// How many times in a row a turn the provider paused ([`FinishReason::Paused`])
/// is sent back to go on; a turn still paused after that is the answer, its
/// finish reason `paused`.
pub(super) const MAX_PAUSED_CONTINUATIONS: u32 = 4;

/// The loop. `depth` is 0 for a top-level run and 1 for a subagent.
///
/// `start` comes boxed and the [`Driver`] lives in a box of its own: the run's
/// task then holds two pointers while it streams, not the start's and the
/// driver's fields once per await point that sees them.
pub(super) async fn drive(
    start: Box<Start>,
    deps: &RunDeps,
    emitter: &Emitter,
    cancel: &CancellationToken,
    depth: u32,
) -> Result<RunOutput, RunError> {
    let (mut driver, resume, model_turns) = Driver::open(start, (deps, emitter, cancel), depth)?;
    if let Some(resume) = resume {
        driver.settle(resume).await?;
    }
    driver.turns(model_turns).await
}

/// For a resumed run: the calls it paused on and the decisions about them.
type Resume = (Vec<PendingApproval>, Vec<ClientCall>, Vec<Decision>);

/// A run under way: what the loop carries from one turn to the next.
struct Driver<'a> {
    deps: &'a RunDeps,
    emitter: &'a Emitter,
    cancel: &'a CancellationToken,
    /// What every tool call of the run is given (graph, prompt hash, nested
    /// events, the port a subagent runs on).
    scope: CallScope,
    /// The journal, and the number of the next step.
    counter: StepCounter,
    /// The request; its `messages` are the history so far.
    request: RunRequest,
    /// Where this part of the run's messages starts (see [`RunOutput::new_from`]).
    new_from: usize,
    /// Usage of every model call so far.
    usage: Vec<UsageFact>,
    /// The record of every tool call so far.
    records: Vec<ToolInvocationRecord>,
    /// Total tokens the model calls reported so far.
    total_tokens: u64,
}

impl<'a> Driver<'a> {
    /// The driver of `start` (announcing what its source withholds, for a
    /// top-level run), what it resumes from, and the model turns it took; or
    /// the error it cannot start with.
    fn open(
        start: Box<Start>,
        ctx: (&'a RunDeps, &'a Emitter, &'a CancellationToken),
        depth: u32,
    ) -> Result<(Box<Self>, Option<Resume>, u32), RunError> {
        let Start {
            request,
            new_from,
            usage,
            records,
            model_turns,
            resume,
            refused,
            journal,
        } = *start;
        if let Some(error) = refused {
            return Err(error);
        }
        let steps =
            journal.map(|(journal, capture)| Steps::new(journal, &request.context.run_id, capture));
        let driver = Box::new(Self::new(
            request,
            (new_from, usage, records),
            ctx,
            steps,
            depth,
        ));
        if depth == 0 {
            driver.announce_withheld();
        }
        // What the run says before its first step is said again each time it
        // starts: it is no step's.
        if let Some(steps) = &driver.counter.steps {
            steps.forget_captured();
        }
        Ok((driver, resume, model_turns))
    }

    fn new(
        request: RunRequest,
        (new_from, usage, records): (usize, Vec<UsageFact>, Vec<ToolInvocationRecord>),
        (deps, emitter, cancel): (&'a RunDeps, &'a Emitter, &'a CancellationToken),
        steps: Option<Steps>,
        depth: u32,
    ) -> Self {
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
            decisions: Default::default(),
            outcome_unknown: Vec::new(),
        };
        Self {
            deps,
            emitter,
            cancel,
            scope,
            counter: StepCounter { steps, next: 0 },
            total_tokens: usage.iter().map(|u| u.total_tokens).sum(),
            request,
            new_from,
            usage,
            records,
        }
    }

    /// Tools policy allows but their source withholds right now (e.g. an MCP tool
    /// whose definition changed since it was pinned): said once, up front.
    fn announce_withheld(&self) {
        for (id, reason) in self.deps.runner.withheld(&self.request.context) {
            self.emitter.emit(AiEventKind::ToolWithheld {
                tool_name: id.as_str().to_owned(),
                reason,
            });
        }
    }

    /// A resumed run's first step: the calls it paused on, settled with the
    /// decisions.
    async fn settle(&mut self, resume: Resume) -> Result<(), RunError> {
        let history = (&mut self.request.messages, &mut self.records);
        let call = (&self.request.context, &self.scope, &mut self.counter);
        // Boxed: a resumed run's first step, not part of the run's own state
        // while it streams (see `tool_calls`).
        Box::pin(settle_pending(
            self.deps,
            call,
            resume,
            self.emitter,
            self.cancel,
            history,
        ))
        .await?;
        if self.cancel.is_cancelled() {
            return Err(RunError::Cancelled);
        }
        Ok(())
    }

    /// Model turns from `first` (the turns a resumed run took count) until the
    /// run answers, pauses or stops.
    async fn turns(mut self: Box<Self>, first: u32) -> Result<RunOutput, RunError> {
        let limits = self.request.limits.clone();
        let max_iterations = limits.max_iterations.max(1);
        let tools: Arc<[ToolSpec]> = self.deps.catalog.specs().into();
        // The text of the paused turns sent back to go on, and how many.
        let (mut paused_text, mut continued) = (String::new(), 0);
        for iteration in first..max_iterations {
            // Within the loop the iteration limit is never the one reached.
            if let Some(blocked) =
                turn_blocked(iteration, self.total_tokens, &limits, max_iterations)
            {
                return Err(blocked.into_error(Vec::new()));
            }
            let turn = self.model_turn(iteration, &tools).await?;
            if turn.finish_reason == FinishReason::Paused
                && turn.tool_calls.is_empty()
                && continued < MAX_PAUSED_CONTINUATIONS
                && iteration + 1 < max_iterations
            {
                continued += 1;
                paused_text.push_str(&turn.text);
                self.request.messages.push(turn_message(turn));
                continue;
            }
            if turn.tool_calls.is_empty() {
                return Ok(self.answer(turn, paused_text));
            }
            // No tool runs whose result no model would see: when no further turn
            // is allowed, the calls are reported, not executed.
            if let Some(blocked) =
                turn_blocked(iteration + 1, self.total_tokens, &limits, max_iterations)
            {
                return Err(self.not_executed(&turn, blocked));
            }
            let (waiting, client_calls) = self.tool_calls(&turn, &limits).await?;
            if !waiting.is_empty() || !client_calls.is_empty() {
                return Ok(self.pause(turn, (waiting, client_calls), iteration + 1));
            }
        }
        // Unreachable in practice: the last allowed turn either answers or is
        // blocked above.
        Err(RunError::MaxIterations {
            limit: max_iterations,
            not_executed: Vec::new(),
        })
    }

    /// Model turn `iteration` (a step of its own), its usage counted.
    async fn model_turn(
        &mut self,
        iteration: u32,
        tools: &Arc<[ToolSpec]>,
    ) -> Result<CompletionFinal, RunError> {
        let request = &self.request;
        // Boxed: the turn's futures hold a pointer while the call streams.
        let completion = Box::new(CompletionRequest {
            model: request.model.clone(),
            messages: request.messages.clone(),
            tools: Arc::clone(tools),
            tool_choice: request
                .tool_choice_scope
                .choice_for(&request.tool_choice, iteration),
            context: self.request.context.clone(),
            settings: request.settings.clone(),
        });
        let number = self.counter.take(1);
        let turn = turn_step(
            self.deps,
            completion,
            (&self.counter, number),
            self.emitter,
            self.cancel,
            request.prompt_hash.as_deref(),
        )
        .await?;
        if let Some(fact) = &turn.usage {
            self.total_tokens = self.total_tokens.saturating_add(fact.total_tokens);
            self.usage.push(fact.clone());
        }
        Ok(turn)
    }

    /// The run's answer: a turn without tool calls, after the text of the
    /// paused turns it went on from (`before`). A turn with blocks the
    /// provider wants back (its own tools' calls and results, cited text)
    /// keeps them in the history.
    fn answer(mut self, turn: CompletionFinal, before: String) -> RunOutput {
        let content = match (&turn.refusal, turn.text.is_empty()) {
            (Some(refusal), true) => refusal.clone(),
            _ => turn.text.clone(),
        };
        let keeps_blocks = turn
            .blocks
            .iter()
            .any(|block| matches!(block, AssistantBlock::Provider { .. }));
        let message = if keeps_blocks {
            turn_message(turn.clone())
        } else {
            Message::assistant(content.clone())
        };
        self.request.messages.push(message);
        let content = before + &content;
        RunOutput {
            content,
            finish_reason: turn.finish_reason,
            refusal: turn.refusal,
            messages: self.request.messages,
            new_from: self.new_from,
            usage: self.usage,
            records: self.records,
            paused: None,
        }
    }

    /// The error of a run whose last turn's calls no model turn would see, after
    /// the event that lists them.
    fn not_executed(&self, turn: &CompletionFinal, blocked: Blocked) -> RunError {
        let not_executed: Vec<ToolCallRef> = turn
            .tool_calls
            .iter()
            .map(|call| self.deps.runner.call_ref(&as_tool_call(call)))
            .collect();
        let error = blocked.into_error(not_executed.clone());
        self.emitter.emit(AiEventKind::ToolCallsNotExecuted {
            code: error.code().to_owned(),
            calls: not_executed,
        });
        error
    }

    /// Runs the turn's calls (see [`tool_turn`]); the calls deferred.
    async fn tool_calls(
        &mut self,
        turn: &CompletionFinal,
        limits: &RunLimits,
    ) -> Result<(Vec<PendingApproval>, Vec<ClientCall>), RunError> {
        // Boxed: the calls' futures are held only while they run, not by
        // every run while it streams (a run's task is as large as the largest
        // state it can be in; this one is several KiB).
        let deferred = Box::pin(tool_turn(
            self.deps,
            (&self.request.context, &self.scope, &mut self.counter),
            turn,
            (self.request.defer_approvals, limits.tool_concurrency),
            self.emitter,
            self.cancel,
            (&mut self.request.messages, &mut self.records),
        ))
        .await;
        // Cancelled, the run says so whatever the calls did.
        if self.cancel.is_cancelled() {
            return Err(RunError::Cancelled);
        }
        deferred
    }

    /// The run paused on deferred calls (`model_turns` taken): each announced,
    /// and the output holding the [`PausedRun`].
    fn pause(
        self,
        turn: CompletionFinal,
        (waiting, client_calls): (Vec<PendingApproval>, Vec<ClientCall>),
        model_turns: u32,
    ) -> RunOutput {
        tracing::info!(
            agent.pending_approvals = waiting.len(),
            agent.client_calls = client_calls.len(),
            "run paused"
        );
        for pending in &waiting {
            tracing::info!(
                gen_ai.tool.call.id = %ai_core::text::log_field(&pending.tool_call_id),
                gen_ai.tool.name = %ai_core::text::log_field(&pending.tool_name),
                "approval requested"
            );
            self.emitter.emit(AiEventKind::ToolApprovalRequested {
                tool_call_id: pending.tool_call_id.clone(),
                tool_name: pending.tool_name.clone(),
                args: pending.args.clone(),
                args_hash: pending.args_hash.clone(),
            });
        }
        for call in &client_calls {
            self.emitter.emit(AiEventKind::ClientToolCall {
                tool_call_id: call.tool_call_id.clone(),
                tool_name: call.tool_name.clone(),
                args: call.args.clone(),
            });
        }
        let paused = PausedRun {
            version: PAUSED_RUN_VERSION,
            request: self.request.clone(),
            pending: waiting,
            client_calls,
            usage: self.usage.clone(),
            records: self.records.clone(),
            model_turns,
        };
        RunOutput {
            content: turn.text,
            finish_reason: turn.finish_reason,
            refusal: None,
            messages: self.request.messages,
            new_from: self.new_from,
            usage: self.usage,
            records: self.records,
            paused: Some(Box::new(paused)),
        }
    }
}

/// A turn without tool calls as the assistant message that sends it back, its
/// blocks in the order the model produced them.
fn turn_message(turn: CompletionFinal) -> Message {
    Message::Assistant {
        content: Some(turn.text).filter(|text| !text.is_empty()),
        reasoning: turn.reasoning,
        tool_calls: Vec::new(),
        blocks: turn.blocks,
    }
}

/// A durable run's journal and the number of its next step (for any run: a run
/// without a journal counts too, and records nothing).
pub(super) struct StepCounter {
    pub(super) steps: Option<Steps>,
    next: u32,
}

impl StepCounter {
    /// The first of `n` numbers.
    pub(super) fn take(&mut self, n: u32) -> u32 {
        let first = self.next;
        self.next = self.next.saturating_add(n);
        first
    }
}

/// Which limit forbids a model turn.
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

/// Which limit forbids the model turn numbered `next` (0 first), if any, with
/// `total_tokens` reported so far.
fn turn_blocked(
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
