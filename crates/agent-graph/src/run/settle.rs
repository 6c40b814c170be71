//! A resumed run's first step: the calls its pause waits on, settled with the
//! user's [`Decision`]s (approved ones run, denied and refused ones become tool
//! messages, client calls get the client's output) before its next model turn.

use ai_core::{
    CancellationToken, Message, RunContext,
    approval::ApprovalDecision,
    runner::{CallScope, ToolCall, ToolInvocationRecord},
    text::log_field,
    tool::canonical_json,
};

use super::driver::StepCounter;
use super::emitter::Emitter;
use super::tools::{exec_step, tool_message};
use super::{ClientCall, Decision, NO_CLIENT_OUTPUT, PendingApproval, RunDeps, RunError};

/// Runs the calls a paused run waits on (see [`resume`](super::resume())) and puts the turn's tool
/// messages and records in call order, as if it had never paused.
pub(super) async fn settle_pending(
    deps: &RunDeps,
    (context, scope, counter): (&RunContext, &CallScope, &mut StepCounter),
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
            let decision = decisions
                .iter()
                .find(|d| d.tool_call_id() == call.tool_call_id)
                .map_or_else(
                    || ApprovalDecision::invalid("no decision was given for this call"),
                    |d| d.prior(context, call),
                );
            (call.tool_call_id.clone(), decision)
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
        let journal = (counter.steps.as_ref(), number);
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
