//! The front door: an [`Agent`] owns a model, tools, a policy, settings and
//! limits, and starts runs of the loop with one call: a prompt, a turn of a
//! [`Conversation`], or a typed answer ([`Typed`]).

mod conversation;
mod typed;

use std::sync::Arc;

use ai_core::{
    CompletionPort, Message, RunContext, ToolCatalog, ToolEffect, ToolId, ToolPolicy, ToolRunner,
    ToolSpec,
    approval::{Approver, GrantLedger},
    completion::{ModelSettings, ToolChoice},
    policy::{CatalogError, PolicyDecision},
    tool::RegisteredTool,
};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;

pub use conversation::Conversation;
pub use typed::{DEFAULT_OUTPUT_RETRIES, Typed};

use crate::graph::Graph;
use crate::prompt::Params;
use crate::run::{
    Decision, PausedRun, RunError, RunHandle, RunLimits, RunOutput, ToolChoiceScope, fail,
};
use typed::{AnswerSchema, retry_prompt};

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
    output_retries: u32,
    stop_grace: Option<std::time::Duration>,
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
    ///
    /// Events and records show a call's arguments and result as `{}` until the tool
    /// lists the fields that may be shown (`tool_fn(..)?.show_args(["order_id"])?`,
    /// `.show_output(["status"])?`): values that may hold personal data or secrets
    /// stay out of logs and UIs by default. The model always gets the full result.
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

    /// Sampling and output settings of every run (temperature, token limit, seed,
    /// reasoning effort, response format, provider extras); [`Agent::with_settings`]
    /// changes them for some runs.
    pub fn settings(mut self, settings: ModelSettings) -> Self {
        self.graph.settings = settings;
        self
    }

    /// A token budget for the model's thinking (Anthropic's extended thinking,
    /// Gemini's `thinkingBudget`; the OpenAI wires take
    /// `ModelSettings::reasoning_effort` instead): the same as setting
    /// `ModelSettings::thinking_budget`.
    pub fn thinking_budget(mut self, tokens: u32) -> Self {
        self.graph.settings.thinking_budget = Some(tokens);
        self
    }

    /// Marks the stable prefix of every request (system prompt, tools, the
    /// conversation so far) for the provider's prompt cache where the provider
    /// wants marks (Anthropic); OpenAI and Gemini cache on their own. The same
    /// as setting `ModelSettings::prompt_cache`.
    pub fn prompt_caching(mut self, on: bool) -> Self {
        self.graph.settings.prompt_cache = on;
        self
    }

    /// How long a running tool may take to finish once its run is cancelled,
    /// before it is dropped (the policy's `stop_grace_ms`, default 500 ms; a
    /// subagent gets twice that). Set on whichever policy the agent runs with.
    pub fn stop_grace(mut self, grace: std::time::Duration) -> Self {
        self.stop_grace = Some(grace);
        self
    }

    /// How many times a typed call ([`Agent::prompt_typed`]) asks again, telling
    /// the model what was wrong, when an answer does not match the type (default
    /// [`DEFAULT_OUTPUT_RETRIES`]).
    pub fn output_retries(mut self, retries: u32) -> Self {
        self.output_retries = retries;
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
        let mut policy = self.policy.unwrap_or_else(|| {
            ToolPolicy::allowing(self.tools.iter().map(|t| t.spec.id.as_str().to_owned()))
        });
        if let Some(grace) = self.stop_grace {
            policy.budgets.stop_grace_ms = u64::try_from(grace.as_millis()).unwrap_or(u64::MAX);
        }
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
                output_retries: self.output_retries,
            }),
        })
    }
}

#[derive(Clone)]
struct Inner {
    model: Arc<dyn CompletionPort>,
    model_name: String,
    graph: Graph,
    runner: Arc<ToolRunner>,
    defer_approvals: bool,
    output_retries: u32,
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
            output_retries: DEFAULT_OUTPUT_RETRIES,
            stop_grace: None,
        }
    }

    /// The model this agent calls.
    pub fn model(&self) -> &Arc<dyn CompletionPort> {
        &self.inner.model
    }

    /// The model id sent with each request.
    pub fn model_name(&self) -> &str {
        &self.inner.model_name
    }

    /// The graph each run follows: the system prompt, the tool selection, the
    /// limits and the settings.
    pub fn graph(&self) -> &Graph {
        &self.inner.graph
    }

    /// The tool pipeline (tools, policy, approver) every call goes through.
    pub fn runner(&self) -> &Arc<ToolRunner> {
        &self.inner.runner
    }

    /// The settings every run of this agent sends.
    pub fn settings(&self) -> &ModelSettings {
        &self.inner.graph.settings
    }

    /// This agent with other settings, for some runs: the same model, tools,
    /// policy and approver (shared, not rebuilt).
    ///
    /// ```
    /// # use agent_graph::Agent;
    /// # use agent_testing::{ScriptedModel, Turn};
    /// use ai_core::completion::ModelSettings;
    /// # let agent = Agent::builder(ScriptedModel::new([Turn::text("ok")])).build().unwrap();
    /// let exact = agent.with_settings(ModelSettings {
    ///     temperature: Some(0.0),
    ///     ..agent.settings().clone()
    /// });
    /// # drop(exact);
    /// ```
    pub fn with_settings(&self, settings: ModelSettings) -> Agent {
        let mut inner = (*self.inner).clone();
        inner.graph.settings = settings;
        Agent {
            inner: Arc::new(inner),
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
        match self.prepare(context.clone(), conversation) {
            Ok(prepared) => prepared.start(Arc::clone(&inner.model), Arc::clone(&inner.runner)),
            Err(error) => fail(context, error),
        }
    }

    /// A run of this agent on `conversation`, prepared and not started, as
    /// [`Agent::run_with`] would start it: for a run owner that records the run
    /// before it starts it (agent-durable's `Runs::run_agent`).
    pub fn prepare(
        &self,
        context: RunContext,
        conversation: Vec<Message>,
    ) -> Result<crate::graph::PreparedRun, RunError> {
        let inner = &self.inner;
        let mut prepared = inner
            .graph
            .prepare(
                context,
                &inner.runner,
                &inner.model_name,
                conversation,
                &Params::new(),
            )
            .map_err(|error| RunError::Internal(error.to_string()))?;
        prepared.request.defer_approvals = inner.defer_approvals;
        Ok(prepared)
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
        self.prompt_output(prompt)
            .await
            .map(|output| output.content)
    }

    /// Runs the loop on `prompt` to its end and returns the whole output: the
    /// answer, the messages, usage, the tool records (events discarded).
    pub async fn prompt_output(&self, prompt: impl Into<String>) -> Result<RunOutput, RunError> {
        self.run(prompt).into_outcome().await
    }

    /// Runs one turn of `conversation`: `text` as the user's next message, after
    /// the history and this agent's system prompt. Streams like [`Agent::run`];
    /// add the turn to the conversation with [`Conversation::record`] when it ends.
    pub fn run_turn(&self, conversation: &Conversation, text: impl Into<String>) -> RunHandle {
        self.run_with(RunContext::generate(), conversation.with_user(text.into()))
    }

    /// Runs one turn of `conversation` to its end and records it there (the user's
    /// message, the tool calls and results, the answer). On an error the
    /// conversation is left as it was.
    pub async fn chat(
        &self,
        conversation: &mut Conversation,
        text: impl Into<String>,
    ) -> Result<RunOutput, RunError> {
        let output = self.run_turn(conversation, text).into_outcome().await?;
        conversation.record(&output);
        Ok(output)
    }

    /// Asks for an answer of type `T`: `T`'s JSON schema is sent as a strict
    /// response format, the answer is checked against it and read as `T`. An answer
    /// that does not match is sent back with what is wrong, up to
    /// [`AgentBuilder::output_retries`] times, before
    /// [`RunError::InvalidOutput`].
    ///
    /// ```
    /// # use agent_graph::Agent;
    /// # use agent_testing::{ScriptedModel, Turn};
    /// #[derive(serde::Deserialize, schemars::JsonSchema)]
    /// struct City { name: String, population: u64 }
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let model = ScriptedModel::new([Turn::text(r#"{"name":"Oslo","population":709000}"#)]);
    /// # let agent = Agent::builder(model).build()?;
    /// let city: City = agent.prompt_typed("The capital of Norway?").await?;
    /// assert_eq!(city.name, "Oslo");
    /// # Ok(())
    /// # }
    /// ```
    ///
    #[doc = include_str!("../../docs/typed-answers.md")]
    pub async fn prompt_typed<T>(&self, prompt: impl Into<String>) -> Result<T, RunError>
    where
        T: JsonSchema + DeserializeOwned,
    {
        let conversation = vec![Message::user(prompt.into())];
        Ok(self
            .run_typed::<T>(RunContext::generate(), conversation)
            .await?
            .value)
    }

    /// [`Agent::prompt_typed`] on a conversation under the caller's ids, returning
    /// the runs too. A retry is a new run of the same trace (run id `<id>.<n>`)
    /// whose history holds the rejected answer and what was wrong with it.
    pub async fn run_typed<T>(
        &self,
        context: RunContext,
        conversation: Vec<Message>,
    ) -> Result<Typed<T>, RunError>
    where
        T: JsonSchema + DeserializeOwned,
    {
        let answer = AnswerSchema::of::<T>()?;
        let agent = self.with_settings(ModelSettings {
            response_format: Some(answer.format()),
            ..self.settings().clone()
        });
        let attempts = self.inner.output_retries.saturating_add(1);
        let mut history = conversation;
        let mut rejected = Vec::new();
        let mut problem = String::new();
        for attempt in 0..attempts {
            let mut run = context.clone();
            if attempt > 0 {
                run.run_id = format!("{}.{attempt}", context.run_id).into();
            }
            let output = agent.run_with(run, history).into_outcome().await?;
            if output.paused.is_some() {
                return Err(RunError::Incomplete {
                    reason: "paused on approvals before answering".into(),
                });
            }
            output.complete()?;
            match answer.read::<T>(&output.content) {
                Ok(value) => {
                    return Ok(Typed {
                        value,
                        output,
                        rejected,
                    });
                }
                Err(why) => {
                    history = output.conversation().to_vec();
                    history.push(Message::user(retry_prompt(&why)));
                    problem = why;
                    rejected.push(output);
                }
            }
        }
        Err(RunError::InvalidOutput {
            attempts,
            message: problem,
        })
    }
}
