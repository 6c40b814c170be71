//! What a finished (or paused) run returns: [`RunOutput`].

use ai_core::{Message, completion::FinishReason, event::UsageFact, runner::ToolInvocationRecord};

use super::{PausedRun, PendingApproval, RunError};

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
    /// answering: continue it with [`resume`](super::resume()).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<Box<PausedRun>>,
}

impl RunOutput {
    /// The usage of every model call of the run summed: tokens of each kind
    /// (a kind counted only when some call reported it), and the cost when
    /// every call reported one. Its `model` is the last call's.
    pub fn total_usage(&self) -> UsageFact {
        let mut total = UsageFact::default();
        let mut cost = Some(0i64);
        for fact in &self.usage {
            total.model.clone_from(&fact.model);
            total.prompt_tokens += fact.prompt_tokens;
            total.completion_tokens += fact.completion_tokens;
            total.total_tokens += fact.total_tokens;
            let sum = |a: Option<u64>, b: Option<u64>| match (a, b) {
                (None, None) => None,
                (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
            };
            total.cached_tokens = sum(total.cached_tokens, fact.cached_tokens);
            total.reasoning_tokens = sum(total.reasoning_tokens, fact.reasoning_tokens);
            total.cache_creation_tokens =
                sum(total.cache_creation_tokens, fact.cache_creation_tokens);
            cost = cost.zip(fact.cost_micros).map(|(a, b)| a.saturating_add(b));
        }
        total.cost_micros = cost.filter(|_| !self.usage.is_empty());
        total
    }

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
