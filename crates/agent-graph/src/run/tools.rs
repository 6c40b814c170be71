//! A model turn's tool calls: which are deferred (to an approval, or to the
//! client), the rest run through `ToolRunner::exec` (read-only turns
//! concurrently), each in a durable run one step (intent first for a call that
//! acts), and the turn's assistant and tool messages appended in call order.

use ai_core::{
    CancellationToken, Message, RunContext, ToolEffect,
    completion::{AssembledToolCall, CompletionFinal, ToolCallOutcome},
    message::{AssistantBlock, MessageToolCall},
    policy::PolicyDecision,
    runner::{CallScope, ToolCall, ToolExecution, ToolInvocationRecord},
    text::log_field,
    tool::ToolSource,
};
use futures::StreamExt;
use serde_json::Value;

use super::driver::StepCounter;
use super::emitter::Emitter;
use super::{ClientCall, PendingApproval, RunDeps, RunError};
use crate::journal::{JournalError, StepBody, StepKind, StepSlot, Steps, replayed_execution};

/// Runs one turn's tool calls (all but those deferred: for an approval, or to the
/// client) and appends the assistant message with every call and one tool message
/// per executed call, in call order, ids as the runner settled them. Returns the
/// deferred calls (a deferred call gets its tool message when the run resumes).
pub(super) async fn tool_turn(
    deps: &RunDeps,
    (context, scope, counter): (&RunContext, &CallScope, &mut StepCounter),
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
    let journal = (counter.steps.as_ref(), first);
    let executions = run_tools(
        deps,
        (context, scope, journal),
        to_run,
        emitter,
        cancel,
        concurrency,
    )
    .await?;
    Ok(append_turn(
        deps,
        turn,
        (pending, executions),
        (messages, records),
    ))
}

/// Appends the assistant message of `turn` with every call and the tool
/// message of each executed call (`executions`, in call order, for the calls
/// `pending` does not defer), ids as the runner settled them, and the records;
/// returns the deferred calls.
fn append_turn(
    deps: &RunDeps,
    turn: &CompletionFinal,
    (pending, executions): (Vec<Option<Deferred>>, Vec<ToolExecution>),
    (messages, records): (&mut Vec<Message>, &mut Vec<ToolInvocationRecord>),
) -> (Vec<PendingApproval>, Vec<ClientCall>) {
    let mut executions = executions.into_iter();
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
    (waiting, client_calls)
}

/// The tool message of an execution: its model-facing result, flagged as an
/// error when the call failed.
pub(super) fn tool_message(exec: &ToolExecution) -> Message {
    let id = exec.result.tool_call_id.clone();
    if exec.result.ok {
        Message::tool(id, exec.model_content.clone())
    } else {
        Message::tool_error(id, exec.model_content.clone())
    }
}

/// The turn's blocks with each call's id as the runner settled it (the k-th
/// call block is the k-th call).
fn settled_blocks(blocks: &[AssistantBlock], calls: &[MessageToolCall]) -> Vec<AssistantBlock> {
    let mut ids = calls.iter().map(|c| c.id.clone());
    blocks
        .iter()
        .map(|block| match block {
            AssistantBlock::ToolCall { id } => AssistantBlock::ToolCall {
                id: ids.next().unwrap_or_else(|| id.clone()),
            },
            other => other.clone(),
        })
        .collect()
}

/// The runner's view of an assembled call.
pub(super) fn as_tool_call(call: &AssembledToolCall) -> ToolCall {
    ToolCall {
        id: Some(call.id.clone()),
        name: call.name.clone(),
        arguments: call.arguments.clone(),
        outcome: call.outcome,
        raw: call.raw.clone(),
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
pub(super) async fn exec_step(
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
            .exec(context, &deps.catalog, call, cancel, emitter, scope)
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
            if let Some(exec) = replayed_execution(&step) {
                emitter.replay(&step.events);
                return Ok(exec);
            }
            return Err(RunError::Journal(JournalError(format!(
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
        .exec(context, &deps.catalog, call, cancel, emitter, &scope)
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

/// A call a run with deferred calls does not execute now.
enum Deferred {
    /// It waits for the user's decision.
    Approval(PendingApproval),
    /// The client runs it.
    Client(ClientCall),
}

/// How `call` is deferred, if it is: a complete call of an offered tool that
/// policy puts behind an approval (or a client tool policy does not deny), with
/// arguments that pass the tool's schema. Anything else goes to the runner
/// (which refuses it with a typed result), so no one is asked to approve a call
/// that could not run.
fn deferred(deps: &RunDeps, context: &RunContext, call: &AssembledToolCall) -> Option<Deferred> {
    let spec = deps.catalog.get(&call.name)?;
    if call.outcome != ToolCallOutcome::Complete {
        return None;
    }
    let decision = deps.runner.policy().decide(context, &spec.id, spec.effect);
    let client = *spec.id.source() == ToolSource::Client;
    if !client && decision != PolicyDecision::RequireApproval {
        return None;
    }
    // Invalid arguments (or a tool policy denies) run through the runner, which
    // reports them to the model as for any call.
    let args: Value = serde_json::from_str(&call.arguments).ok()?;
    deps.runner.check_arguments(&call.name, &args).ok()?;
    if client {
        if decision == PolicyDecision::Deny {
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
fn history_arguments(call: &AssembledToolCall) -> String {
    // An empty string is not JSON either, so it also becomes `{}`.
    let usable = call.outcome == ToolCallOutcome::Complete
        && serde_json::from_str::<serde::de::IgnoredAny>(&call.arguments).is_ok();
    if usable {
        call.arguments.clone()
    } else {
        "{}".to_owned()
    }
}
