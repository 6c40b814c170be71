//! Named graphs: what a run starts from (system prompt or prompt sections, tool
//! selection, tool choice, subagents, limits and model settings), and the one place
//! a graph becomes a run ([`Graph::prepare`], [`Graph::resume`]).

mod subagent;

use std::collections::BTreeMap;
use std::sync::Arc;

use ai_core::{
    CompletionPort, Message, RunContext, ToolCatalog, ToolEffect, ToolRunner,
    completion::{ModelSettings, ToolChoice},
    policy::CatalogError,
    tool::{ToolSource, ToolSpec},
};

pub use subagent::SubagentBudget;

use crate::prompt::{Params, Prompt, PromptError, prompt_hash};
use crate::run::{Decision, PausedRun, RunDeps, RunHandle, RunLimits, RunRequest, ToolChoiceScope};

/// Why a graph cannot be run, resumed or offered as a subagent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GraphError {
    /// The graph is not in the registry.
    #[error("no graph named `{0}`")]
    UnknownGraph(String),
    /// A graph's subagent allowlist names a graph that does not exist.
    #[error("graph `{parent}` lists subagent `{child}`, which is not a graph")]
    UnknownSubagent {
        /// The graph with the allowlist.
        parent: String,
        /// The missing name.
        child: String,
    },
    /// A subagent has subagents of its own: graphs nest one level deep.
    #[error(
        "graph `{child}` is a subagent of `{parent}` but has subagents of its own; subagents nest at most one level deep"
    )]
    DepthExceeded {
        /// The calling graph.
        parent: String,
        /// The subagent that lists subagents.
        child: String,
    },
    /// The graph's name is not usable as a tool id.
    #[error("graph name `{0}` cannot be a tool id (graph__<name>)")]
    InvalidName(String),
    /// A graph's prompt cannot be rendered.
    #[error(transparent)]
    Prompt(#[from] PromptError),
    /// The tools a run would offer do not form a catalog (a prompt section's tool
    /// collides or has an unusable schema).
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    /// A paused run of another graph was handed to this one.
    #[error("the paused run belongs to graph `{found}`, not `{expected}`")]
    WrongGraph {
        /// This graph.
        expected: String,
        /// The paused run's graph (`-` when it has none).
        found: String,
    },
}

/// Which catalog tools a graph offers.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolFilter {
    /// Every tool in the catalog.
    All,
    /// Only tools with these effects.
    Effects(Vec<ToolEffect>),
    /// Only these tool ids.
    Ids(Vec<String>),
    /// No tools.
    None,
}

/// A named graph: a system prompt (or prompt sections) and a tool selection over the
/// run's catalog, the graphs it may call as subagents, and, when it runs as a
/// subagent, its limits, model settings and per-call budget.
///
/// Build one with [`Graph::new`] and the `with_*` methods (new fields may be added).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Graph {
    /// Name (e.g. `chat`); a subagent is offered as the tool `graph__<name>`.
    pub name: String,
    /// One-line description for listings (and the subagent tool's description).
    pub description: String,
    /// System prompt placed before the user's message (used when `prompt` is unset).
    pub system_prompt: String,
    /// Which tools are offered. `graph__` tools are offered only when `subagents`
    /// names them, whatever the filter says.
    pub tools: ToolFilter,
    /// Prompt sections rendered into the system prompt (replacing `system_prompt`),
    /// whose enabled sections' tools are offered as well.
    pub prompt: Option<Prompt>,
    /// Graphs this graph may call as subagents (the allowlist).
    pub subagents: Vec<String>,
    /// Limits of a run of this graph (as a subagent, capped by `budget`).
    pub limits: RunLimits,
    /// Model settings of a run of this graph.
    pub settings: ModelSettings,
    /// Per-call budget when this graph runs as a subagent.
    pub budget: SubagentBudget,
    /// The effect declared by this graph's subagent tool (default `read_only`; its
    /// own tool calls are still authorized one by one by the runner's policy).
    pub effect: ToolEffect,
    /// Tool choice of the model turns `tool_choice_scope` names (default `auto`).
    pub tool_choice: ToolChoice,
    /// Which turns a forced `tool_choice` applies to (default: the first only).
    pub tool_choice_scope: ToolChoiceScope,
}

impl Graph {
    /// A graph with a system prompt, every catalog tool, no subagents and defaults.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        system_prompt: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            system_prompt: system_prompt.into(),
            tools: ToolFilter::All,
            prompt: None,
            subagents: Vec::new(),
            limits: RunLimits::default(),
            settings: ModelSettings::default(),
            budget: SubagentBudget::default(),
            effect: ToolEffect::ReadOnly,
            tool_choice: ToolChoice::Auto,
            tool_choice_scope: ToolChoiceScope::FirstTurn,
        }
    }

    /// Sets the tool selection.
    pub fn with_tools(mut self, tools: ToolFilter) -> Self {
        self.tools = tools;
        self
    }

    /// Sets the prompt sections.
    pub fn with_prompt(mut self, prompt: Prompt) -> Self {
        self.prompt = Some(prompt);
        self
    }

    /// Sets the subagent allowlist.
    pub fn with_subagents(mut self, names: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.subagents = names.into_iter().map(Into::into).collect();
        self
    }

    /// Sets the run limits.
    pub fn with_limits(mut self, limits: RunLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Sets the model settings.
    pub fn with_settings(mut self, settings: ModelSettings) -> Self {
        self.settings = settings;
        self
    }

    /// Sets the per-call subagent budget.
    pub fn with_budget(mut self, budget: SubagentBudget) -> Self {
        self.budget = budget;
        self
    }

    /// Sets the effect its subagent tool declares.
    pub fn with_effect(mut self, effect: ToolEffect) -> Self {
        self.effect = effect;
        self
    }

    /// Sets the tool choice and the turns it applies to.
    pub fn with_tool_choice(mut self, choice: ToolChoice, scope: ToolChoiceScope) -> Self {
        self.tool_choice = choice;
        self.tool_choice_scope = scope;
        self
    }
}

/// A run of a graph, ready to start: the request and the tools it offers.
#[derive(Debug, Clone)]
pub struct PreparedRun {
    /// What to run. Adjust it before starting (for example `defer_approvals`).
    pub request: RunRequest,
    /// The tools offered to the model.
    pub catalog: ToolCatalog,
}

impl PreparedRun {
    /// Starts the run with `model`, running tools through `runner` (the runner the
    /// run was prepared with).
    pub fn start(self, model: Arc<dyn CompletionPort>, runner: Arc<ToolRunner>) -> RunHandle {
        let deps = RunDeps {
            model,
            runner,
            catalog: Arc::new(self.catalog),
        };
        crate::run::run(self.request, deps)
    }

    /// What the loop needs for this run (to start it with [`crate::run()`], or to
    /// resume a pause of it with [`crate::run::resume`]).
    pub fn deps(&self, model: Arc<dyn CompletionPort>, runner: Arc<ToolRunner>) -> RunDeps {
        RunDeps {
            model,
            runner,
            catalog: Arc::new(self.catalog.clone()),
        }
    }
}

impl Graph {
    /// A run of this graph on `conversation` (the messages after the system prompt;
    /// leading system messages are dropped, since the graph supplies its own):
    /// the prompt rendered with `params` (sections, or the plain system prompt),
    /// the catalog narrowed to the graph's selection plus the enabled sections'
    /// tools that `runner` offers, and the graph's name, prompt hash, limits,
    /// settings and tool choice. The one place a graph becomes a run: the `Agent`,
    /// `agent chat`, `agent serve` and subagents all start here.
    pub fn prepare(
        &self,
        context: RunContext,
        runner: &ToolRunner,
        model_id: &str,
        conversation: Vec<Message>,
        params: &Params,
    ) -> Result<PreparedRun, GraphError> {
        let (catalog, system) = self.offer(runner, &context, params)?;
        let hash = prompt_hash(&system, catalog.specs(), model_id);
        let mut messages = Vec::with_capacity(conversation.len() + 1);
        if !system.is_empty() {
            messages.push(Message::system(system));
        }
        messages.extend(
            conversation
                .into_iter()
                .skip_while(|m| matches!(m, Message::System { .. })),
        );
        let mut request = RunRequest::new(context, model_id.to_owned(), messages);
        request.tool_choice = self.tool_choice.clone();
        request.tool_choice_scope = self.tool_choice_scope;
        request.settings = self.settings.clone();
        request.limits = self.limits.clone();
        request.graph = Some(self.name.clone());
        request.prompt_hash = Some(hash);
        request.prompt_params = params.clone();
        Ok(PreparedRun { request, catalog })
    }

    /// Resumes a paused run of this graph with the user's decisions (see
    /// [`crate::run::resume`]), offering the tools it was prepared with.
    pub fn resume(
        &self,
        paused: PausedRun,
        decisions: Vec<Decision>,
        model: Arc<dyn CompletionPort>,
        runner: Arc<ToolRunner>,
    ) -> Result<RunHandle, GraphError> {
        if paused.request.graph.as_deref() != Some(self.name.as_str()) {
            return Err(GraphError::WrongGraph {
                expected: self.name.clone(),
                found: paused.request.graph.clone().unwrap_or_else(|| "-".into()),
            });
        }
        let request = &paused.request;
        let (catalog, _) = self.offer(&runner, &request.context, &request.prompt_params)?;
        let deps = RunDeps {
            model,
            runner,
            catalog: Arc::new(catalog),
        };
        Ok(crate::run::resume(paused, decisions, deps))
    }

    /// Starts (or starts again after a crash) a durable run of this graph (see
    /// [`crate::run::durable`]), offering the tools it was prepared with.
    pub fn durable(
        &self,
        start: crate::journal::RunStart,
        model: Arc<dyn CompletionPort>,
        runner: Arc<ToolRunner>,
        journal: Arc<dyn crate::journal::StepJournal>,
    ) -> Result<RunHandle, GraphError> {
        let request = match &start {
            crate::journal::RunStart::New { request } => request,
            crate::journal::RunStart::Continue { paused, .. } => &paused.request,
        };
        if request.graph.as_deref() != Some(self.name.as_str()) {
            return Err(GraphError::WrongGraph {
                expected: self.name.clone(),
                found: request.graph.clone().unwrap_or_else(|| "-".into()),
            });
        }
        let (catalog, _) = self.offer(&runner, &request.context, &request.prompt_params)?;
        let deps = RunDeps {
            model,
            runner,
            catalog: Arc::new(catalog),
        };
        Ok(crate::run::durable(start, deps, journal))
    }

    /// The catalog a run offers and its system text (see [`Graph::prepare`]).
    fn offer(
        &self,
        runner: &ToolRunner,
        context: &RunContext,
        params: &Params,
    ) -> Result<(ToolCatalog, String), GraphError> {
        let offered = runner.catalog(context);
        let Some(prompt) = &self.prompt else {
            return Ok((self.select_tools(offered), self.system_prompt.clone()));
        };
        let catalog = self.select_tools(offered.clone());
        let rendered = prompt.render(params)?;
        // The enabled sections' tools that the runner offers, as overridden.
        let mut specs: Vec<ToolSpec> = catalog.specs().to_vec();
        for spec in rendered.specs() {
            if offered.contains(spec.id.as_str()) && *spec.id.source() != ToolSource::Graph {
                specs.retain(|s| s.id != spec.id);
                specs.push(spec);
            }
        }
        let catalog = ToolCatalog::build(specs, runner.policy(), context)?;
        Ok((catalog, rendered.text))
    }
}

impl Graph {
    /// The name of the built-in graph, [`Graph::chat`].
    pub const CHAT: &'static str = "chat";

    /// The `chat` graph: a helpful assistant offered every catalog tool.
    pub fn chat() -> Self {
        Self::new(
            Self::CHAT,
            "Answer the user, calling the available tools when they help.",
            "You are a helpful assistant. Use the available tools when they help answer the user; never invent tool results.",
        )
    }

    /// Narrows `catalog` to this graph's selection: the filter over the non-graph
    /// tools, plus the `graph__` tools of its subagent allowlist.
    pub fn select_tools(&self, catalog: ToolCatalog) -> ToolCatalog {
        catalog.select(|spec| {
            let id = &spec.id;
            if *id.source() == ToolSource::Graph {
                return self.subagents.iter().any(|s| s == id.name());
            }
            match &self.tools {
                ToolFilter::All => true,
                ToolFilter::None => false,
                ToolFilter::Ids(ids) => ids.iter().any(|i| i == id.as_str()),
                ToolFilter::Effects(effects) => effects.contains(&spec.effect),
            }
        })
    }
}

/// Named graphs, listable in name order.
#[derive(Debug, Clone)]
pub struct GraphRegistry {
    graphs: BTreeMap<String, Graph>,
}

impl Default for GraphRegistry {
    /// A registry holding the built-in `chat` graph.
    fn default() -> Self {
        let mut registry = Self {
            graphs: BTreeMap::new(),
        };
        registry.insert(Graph::chat());
        registry
    }
}

impl GraphRegistry {
    /// Adds or replaces a graph.
    pub fn insert(&mut self, graph: Graph) {
        self.graphs.insert(graph.name.clone(), graph);
    }

    /// The graph with this name.
    pub fn get(&self, name: &str) -> Option<&Graph> {
        self.graphs.get(name)
    }

    /// Every graph, in name order.
    pub fn list(&self) -> impl Iterator<Item = &Graph> {
        self.graphs.values()
    }
}
