//! Named graphs: what a run starts from (system prompt or prompt sections, tool
//! selection, subagents, limits and model settings).

use std::collections::BTreeMap;

use ai_core::{Message, ToolCatalog, ToolEffect, completion::ModelSettings, tool::ToolSource};

use crate::prompt::Prompt;
use crate::run::RunLimits;
use crate::subagent::SubagentBudget;

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
        let all = catalog.clone();
        let subagents = catalog.clone().select(|id| {
            *id.source() == ToolSource::Graph && self.subagents.iter().any(|s| s == id.name())
        });
        let catalog = catalog.select(|id| *id.source() != ToolSource::Graph);
        let selected = match &self.tools {
            ToolFilter::All => catalog,
            ToolFilter::None => ToolCatalog::empty(),
            ToolFilter::Ids(ids) => catalog.select(|id| ids.iter().any(|i| i == id.as_str())),
            ToolFilter::Effects(effects) => {
                let keep: Vec<String> = catalog
                    .specs()
                    .iter()
                    .filter(|s| effects.contains(&s.effect))
                    .map(|s| s.id.as_str().to_owned())
                    .collect();
                catalog.select(|id| keep.iter().any(|k| k == id.as_str()))
            }
        };
        if subagents.is_empty() {
            return selected;
        }
        let keep: Vec<String> = selected
            .specs()
            .iter()
            .chain(subagents.specs())
            .map(|s| s.id.as_str().to_owned())
            .collect();
        all.select(|id| keep.iter().any(|k| k == id.as_str()))
    }

    /// The opening messages of a run for `user_prompt`.
    pub fn messages(&self, user_prompt: &str) -> Vec<Message> {
        vec![
            Message::system(self.system_prompt.clone()),
            Message::user(user_prompt),
        ]
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
