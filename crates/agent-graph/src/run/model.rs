//! A model turn: streamed from the completion port (text and reasoning deltas,
//! and the argument text of calls that may show it, as events), its calls taken
//! only from the assembled final, and in a durable run replayed or recorded as
//! one step.

use ai_core::{
    CancellationToken,
    completion::{
        CompletionDelta, CompletionError, CompletionFinal, CompletionItem, CompletionRequest,
    },
    event::{AiEventKind, UsageFact},
};
use futures::StreamExt;

use super::driver::StepCounter;
use super::emitter::Emitter;
use super::spans;
use super::tools::as_tool_call;
use super::{RunDeps, RunError};
use crate::journal::{StepBody, StepKind, StepSlot};

/// The `usage_report` of one model call of a run with `prompt_hash`.
fn usage_event(fact: UsageFact, prompt_hash: Option<&str>) -> AiEventKind {
    AiEventKind::UsageReport {
        model: fact.model,
        response_model: fact.response_model,
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

/// Streams one model turn: text deltas go out as events; tool calls are taken only
/// from the assembled final. A call that fails leaves in `usage` what the
/// stream reported of its usage (a usage delta, or a cut stream's partial
/// turn), so it is billed too.
///
/// The call starts inside `span` (the model call's: the port reads it, as an
/// outgoing request's trace parent), but the stream is not polled inside it:
/// entering and leaving an exported span on every delta is what the export
/// would cost (see [`spans::end_model_span`]).
pub(super) async fn model_turn(
    deps: &RunDeps,
    (request, span): (Box<CompletionRequest>, &tracing::Span),
    emitter: &Emitter,
    cancel: &CancellationToken,
    usage: &mut Option<UsageFact>,
) -> Result<CompletionFinal, RunError> {
    let mut stream = span.in_scope(|| deps.model.complete(*request, cancel.child_token()));
    let mut arguments = ArgumentStreams::default();
    // One waiter for the whole turn, polled only when the token wakes the
    // turn (not on every delta).
    let mut cancelled = ai_core::cancel::Cancelled::new(cancel.clone());
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
            Some(Ok(CompletionItem::Delta(CompletionDelta::Usage(fact)))) => *usage = Some(fact),
            Some(Ok(CompletionItem::Delta(_))) => {}
            Some(Ok(CompletionItem::Final(turn))) => {
                arguments.flush(emitter);
                return Ok(turn);
            }
            // An item kind this loop does not know yet carries nothing it needs.
            Some(Ok(_)) => {}
            Some(Err(CompletionError::Cancelled)) => return Err(RunError::Cancelled),
            Some(Err(error)) => {
                if let CompletionError::TruncatedStream { partial } = &error
                    && partial.usage.is_some()
                {
                    usage.clone_from(&partial.usage);
                }
                return Err(RunError::Model(error));
            }
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

/// One model turn; in a durable run, step `number`: replayed when recorded, else
/// streamed and recorded (its calls' ids settled first, so a replay names the
/// same calls).
pub(super) async fn turn_step(
    deps: &RunDeps,
    completion: Box<CompletionRequest>,
    (counter, number): (&StepCounter, u32),
    emitter: &Emitter,
    cancel: &CancellationToken,
    prompt_hash: Option<&str>,
) -> Result<CompletionFinal, RunError> {
    let slot = match &counter.steps {
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
    let span = spans::model_span(&completion, deps.model.provider_name());
    let asked = completion.model.clone();
    let mut failed_usage = None;
    // Matched as it comes: the turn is kept once in this future's state, not
    // also as the call's result.
    let mut turn = match model_turn(
        deps,
        (completion, &span),
        emitter,
        cancel,
        &mut failed_usage,
    )
    .await
    {
        Ok(turn) => {
            spans::end_model_span(&span);
            turn
        }
        Err(error) => {
            spans::end_model_span(&span);
            spans::record_model_error(&span, error.code());
            // The failed call's usage is reported before the run's error.
            if let Some(mut fact) = failed_usage {
                fact.asked_for(&asked);
                emitter.emit(usage_event(fact, prompt_hash));
            }
            return Err(error);
        }
    };
    if let Some(fact) = &mut turn.usage {
        fact.asked_for(&asked);
    }
    spans::record_turn(&span, &turn);
    for call in &mut turn.tool_calls {
        call.id = deps.runner.call_ref(&as_tool_call(call)).tool_call_id;
    }
    if let Some(fact) = &turn.usage {
        emitter.emit(usage_event(fact.clone(), prompt_hash));
    }
    if let Some((steps, slot)) = slot {
        let body = StepBody::Model { turn: turn.clone() };
        // Boxed: a journal's write is held only while it is written, not in
        // the state of every streaming turn.
        Box::pin(steps.record(slot, number, body, None)).await?;
    }
    Ok(turn)
}
