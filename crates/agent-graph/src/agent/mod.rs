//! The front door: an [`Agent`] owns a model, tools, a policy and limits, and starts
//! runs of the loop with one call.

use std::sync::Arc;

use ai_core::{
    CompletionPort, Message, RunContext, ToolCatalog, ToolEffect, ToolId, ToolPolicy, ToolRunner,
    ToolSpec,
    approval::{Approver, GrantLedger},
    completion::ToolChoice,
    policy::{CatalogError, PolicyDecision},
    tool::RegisteredTool,
};

use crate::graph::Graph;
use crate::prompt::Params;
use crate::run::{Decision, PausedRun, RunError, RunHandle, RunLimits, ToolChoiceScope, fail};

/// Model id sent when the builder was given none. Servers that host one model
/// (llama.cpp, a single-model vLLM) accept any id; hosted APIs need
/// [`AgentBuilder::model_name`].
pub const DEFAULT_MODEL_NAME: &str = "default";

/// Why an [`Agent`] could not be built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// Two tools share an id, or a tool's schema is unusable.
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// A tool needs approval under the default policy, and the agent has no approver.
    #[error(
        "tool `{tool}` has effect {} and needs approval, but the agent has no approver: \
         add `.approver(..)`, or `.policy(..)` with an explicit decision for it",
        effect.as_str()
    )]
    NeedsApprover {
        /// The tool.
        tool: ToolId,
        /// Its effect.
        effect: ToolEffect,
    },
}

/// Configures an [`Agent`]; see [`Agent::builder`].
pub struct AgentBuilder {
    model: Arc<dyn CompletionPort>,
    model_name: String,
    graph: Graph,
    tools: Vec<RegisteredTool>,
    policy: Option<ToolPolicy>,
    approver: Option<Arc<dyn Approver>>,
    defer_approvals: bool,
}

impl std::fmt::Debug for AgentBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentBuilder")
            .field("model_name", &self.model_name)
            .field("tools", &self.tools)
            .field("policy", &self.policy)
            .field("approver", &self.approver.is_some())
            .field("defer_approvals", &self.defer_approvals)
            .finish_non_exhaustive()
    }
}

/// The name of an agent's graph (events and tool contexts carry it).
pub const AGENT_GRAPH: &str = "agent";

impl AgentBuilder {
    /// The model id sent with every request (default [`DEFAULT_MODEL_NAME`]).
    pub fn model_name(mut self, name: impl Into<String>) -> Self {
        self.model_name = name.into();
        self
    }

    /// The system prompt placed before every conversation.
    pub fn system(mut self, prompt: impl Into<String>) -> Self {
        self.graph.system_prompt = prompt.into();
        self
    }

    /// Adds a tool: a closure tool (`ai_tools::tool_fn`), a bound contract
    /// (`ai_tools::bind`), or any [`RegisteredTool`].
    pub fn tool(mut self, tool: impl Into<RegisteredTool>) -> Self {
        self.tools.push(tool.into());
        self
    }

    /// Adds several tools (e.g. `ai_host::bind_builtin_tools`' result).
    pub fn tools(mut self, tools: impl IntoIterator<Item = RegisteredTool>) -> Self {
        self.tools.extend(tools);
        self
    }

    /// Replaces the default policy.
    ///
    /// Without this, the policy allows exactly the tools handed to the builder:
    /// `read_only` tools run, tools with any other effect need approval (and then an
    /// approver, or deferred approvals, is required). With an explicit policy, tools
    /// it marks as needing approval are not offered to the model unless the agent
    /// has an approver or defers approvals.
    pub fn policy(mut self, policy: ToolPolicy) -> Self {
        self.policy = Some(policy);
        self
    }

    /// Asks `approver` about every call that policy marks as needing approval.
    pub fn approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.approver = Some(approver);
        self
    }

    /// Pauses a run on calls that need an approval instead of asking an approver:
    /// the run's output then holds a [`PausedRun`] (serializable), which
    /// [`Agent::resume`] continues with the user's decisions, in this process or
    /// another.
    pub fn defer_approvals(mut self) -> Self {
        self.defer_approvals = true;
        self
    }

    /// Limits of every run (turns, model requests, tokens, tool concurrency).
    pub fn limits(mut self, limits: RunLimits) -> Self {
        self.graph.limits = limits;
        self
    }

    /// Tool choice of every run (default `auto`). A forced choice (`Required` or a
    /// named tool) applies to the first model turn only unless
    /// [`AgentBuilder::tool_choice_scope`] says otherwise, so the model can answer
    /// after the forced call.
    pub fn tool_choice(mut self, choice: ToolChoice) -> Self {
        self.graph.tool_choice = choice;
        self
    }

    /// Which model turns a forced tool choice applies to (default
    /// [`ToolChoiceScope::FirstTurn`]).
    pub fn tool_choice_scope(mut self, scope: ToolChoiceScope) -> Self {
        self.graph.tool_choice_scope = scope;
        self
    }

    /// Checks the tools and the policy and builds the agent.
    pub fn build(self) -> Result<Agent, AgentError> {
        let explicit = self.policy.is_some();
        let policy = self.policy.unwrap_or_else(|| {
            ToolPolicy::allowing(self.tools.iter().map(|t| t.spec.id.as_str().to_owned()))
        });
        if !explicit && self.approver.is_none() && !self.defer_approvals {
            let ctx = RunContext::new("build", "build");
            if let Some(spec) = self.tools.iter().map(|t| &t.spec).find(|spec| {
                policy.decide(&ctx, &spec.id, spec.effect) == PolicyDecision::RequireApproval
            }) {
                return Err(AgentError::NeedsApprover {
                    tool: spec.id.clone(),
                    effect: spec.effect,
                });
            }
        }
        // Deferred approvals are given as decisions when the run resumes; until
        // then every call is denied, and the loop never asks (it pauses first).
        let approver = match (self.approver, self.defer_approvals) {
            (Some(approver), _) => Some(approver),
            (None, true) => Some(Arc::new(GrantLedger::new()) as Arc<dyn Approver>),
            (None, false) => None,
        };
        let mut runner = ToolRunner::new(self.tools, policy)?;
        if let Some(approver) = approver {
            runner = runner.with_approver(approver);
        }
        Ok(Agent {
            inner: Arc::new(Inner {
                model: self.model,
                model_name: self.model_name,
                graph: self.graph,
                runner: Arc::new(runner),
                defer_approvals: self.defer_approvals,
            }),
        })
    }
}

struct Inner {
    model: Arc<dyn CompletionPort>,
    model_name: String,
    graph: Graph,
    runner: Arc<ToolRunner>,
    defer_approvals: bool,
}

/// A model with tools, a policy and limits: the short way to run the loop.
///
/// Cheap to clone (one `Arc`) and safe to run concurrently: every run gets its own
/// [`RunContext`], event stream and outcome. Every tool call still goes through the
/// one `ToolRunner` pipeline; only tools handed to the builder exist, and the model
/// sees only those policy allows.
///
/// ```
/// use agent_graph::Agent;
/// use agent_testing::{ScriptedModel, Turn};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let model = ScriptedModel::new([Turn::text("Hello!")]);
/// let agent = Agent::builder(model).system("Be brief.").build()?;
/// assert_eq!(agent.prompt("Hi").await?, "Hello!");
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Agent {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("model_name", &self.inner.model_name)
            .field("runner", &self.inner.runner)
            .finish_non_exhaustive()
    }
}

impl Agent {
    /// Starts configuring an agent around `model` (any [`CompletionPort`]: the
    /// OpenAI-compatible client of `wire-openai`, a test model, or an
    /// `Arc<dyn CompletionPort>`).
    pub fn builder(model: impl CompletionPort + 'static) -> AgentBuilder {
        AgentBuilder {
            model: Arc::new(model),
            model_name: DEFAULT_MODEL_NAME.to_owned(),
            graph: Graph::new(AGENT_GRAPH, "An agent built with Agent::builder.", ""),
            tools: Vec::new(),
            policy: None,
            approver: None,
            defer_approvals: false,
        }
    }

    /// The tools the model is offered in a run with `ctx`: allowed by policy, and
    /// not waiting for an approval that nobody could give (the runner's catalog).
    pub fn catalog(&self, ctx: &RunContext) -> ToolCatalog {
        self.inner.runner.catalog(ctx)
    }

    /// Every tool handed to the builder, offered or not, sorted by id.
    pub fn tools(&self) -> Vec<&ToolSpec> {
        self.inner.runner.specs()
    }

    /// Runs the loop on `prompt` with fresh correlation ids.
    ///
    /// The returned handle streams events and resolves the outcome; dropping its
    /// events cancels the run (see [`RunHandle`] for `into_parts` and `detach`).
    pub fn run(&self, prompt: impl Into<String>) -> RunHandle {
        self.run_with(RunContext::generate(), vec![Message::user(prompt.into())])
    }

    /// Runs the loop on a conversation under the caller's correlation ids. The
    /// agent's system prompt is put in front; system messages at the start of
    /// `conversation` are dropped, so a previous run's `messages` can be passed
    /// back as they are.
    pub fn run_with(&self, context: RunContext, conversation: Vec<Message>) -> RunHandle {
        let inner = &self.inner;
        let prepared = inner.graph.prepare(
            context.clone(),
            &inner.runner,
            &inner.model_name,
            conversation,
            &Params::new(),
        );
        match prepared {
            Ok(mut prepared) => {
                prepared.request.defer_approvals = inner.defer_approvals;
                prepared.start(Arc::clone(&inner.model), Arc::clone(&inner.runner))
            }
            Err(error) => fail(context, RunError::Internal(error.to_string())),
        }
    }

    /// Continues a run that paused on approvals (an agent built with
    /// [`AgentBuilder::defer_approvals`]), with the user's decisions: approved
    /// calls run inside the run, on its event stream and in its records. The paused
    /// run may come from another process (it is serializable); this agent must offer
    /// the same tools.
    pub fn resume(&self, paused: PausedRun, decisions: Vec<Decision>) -> RunHandle {
        let inner = &self.inner;
        let context = paused.request.context.clone();
        let resumed = inner.graph.resume(
            paused,
            decisions,
            Arc::clone(&inner.model),
            Arc::clone(&inner.runner),
        );
        resumed.unwrap_or_else(|error| fail(context, RunError::InvalidResume(error.to_string())))
    }

    /// Runs the loop on `prompt` and returns the final answer.
    pub async fn prompt(&self, prompt: impl Into<String>) -> Result<String, RunError> {
        let (_, outcome) = self.run(prompt).into_parts();
        outcome.await.map(|output| output.content)
    }
}
