//! What a run is asked to do: [`RunRequest`] (built by [`crate::Graph::prepare`]),
//! its [`RunLimits`] and [`ToolChoiceScope`], and [`RunDeps`], what it runs with.

use std::sync::Arc;

use ai_core::{
    CompletionPort, Message, RunContext, ToolCatalog, ToolRunner,
    completion::{ModelSettings, ToolChoice},
};

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
/// from a graph); serializable, as part of a [`PausedRun`](super::PausedRun).
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
    /// run pauses after the turn's other calls, its output holding a
    /// [`PausedRun`](super::PausedRun)
    /// (the assistant message with every call in the history, no tool message for
    /// the waiting ones). The caller gets the user's decision however it can (a web
    /// UI's next request) and continues the run with [`resume`](super::resume()). Off by default:
    /// the runner's approver is asked and the run waits.
    #[serde(default)]
    pub defer_approvals: bool,
    /// The parameters the graph's prompt was rendered with, kept so that a paused
    /// run is resumed with the same tools.
    #[serde(default, skip_serializing_if = "Params::is_empty")]
    pub prompt_params: Params,
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
