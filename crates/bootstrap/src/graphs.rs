//! The graphs of `[graphs]` as an `agent_graph::graph::GraphRegistry`, and their listing.
//!
//! Every graph's limits are `[limits]` with its own `[graphs.NAME.limits]` over
//! them, and its model settings are `[model]`'s. `tools` patterns are resolved
//! against the bound tools; the `graph__` tools of a graph's subagents are offered
//! by its `subagents` list, not by `tools`.

use agent_graph::{
    Graph,
    graph::{GraphRegistry, ToolFilter},
};
use ai_core::ToolPolicy;
use ai_core::policy::ToolPattern;

use crate::config::{AgentConfig, GraphConfig};

/// One graph as `agent graphs` lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct GraphListing {
    /// Name (`--graph NAME`, tool `graph__NAME`).
    pub name: String,
    /// One line.
    pub description: String,
    /// Tool ids or `prefix*` patterns as configured (`*`: every tool policy allows).
    pub tools: Vec<ToolPattern>,
    /// Graphs it may call as subagents.
    pub subagents: Vec<String>,
}

fn graph_from(name: &str, config: &GraphConfig, tool_ids: &[&str]) -> Graph {
    let system = config
        .system
        .clone()
        .unwrap_or_else(|| Graph::chat().system_prompt);
    let tools = match &config.tools {
        None => ToolFilter::All,
        Some(patterns) => ToolFilter::Ids(
            tool_ids
                .iter()
                .filter(|id| patterns.iter().any(|p| p.matches(id)))
                .map(|id| (*id).to_owned())
                .collect(),
        ),
    };
    Graph::new(name, config.description.clone(), system)
        .with_tools(tools)
        .with_subagents(config.subagents.iter().cloned())
        .with_budget(config.budget.clone())
}

/// The registry of `config`: the built-in `chat` graph and the file's graphs (a
/// `chat` entry replaces the built-in), with `tools` patterns resolved against
/// `tool_ids` (the bound tools).
pub fn registry(config: &AgentConfig, tool_ids: &[&str]) -> GraphRegistry {
    let mut registry = GraphRegistry::default();
    for (name, graph) in &config.file.graphs {
        registry.insert(graph_from(name, graph, tool_ids));
    }
    let settings = crate::model::model_settings(config);
    let names: Vec<String> = registry.list().map(|g| g.name.clone()).collect();
    for name in names {
        let Some(graph) = registry.get(&name) else {
            continue;
        };
        let limits = config
            .file
            .graphs
            .get(&name)
            .map(|g| g.limits.over(&config.file.limits))
            .unwrap_or_else(|| config.file.limits.clone());
        let graph = graph
            .clone()
            .with_limits(limits)
            .with_settings(settings.clone());
        registry.insert(graph);
    }
    registry
}

/// The runtime policy of a run of `graph`: `[policy]`, plus `graph__<name>` allowed
/// for each subagent the graph lists (a subagent tool is `read_only`, and each of
/// its own tool calls is still checked by this policy). `policy.deny` still wins:
/// `deny = ["graph__*"]` turns subagents off.
pub fn policy_for(config: &AgentConfig, graph: &Graph) -> ToolPolicy {
    let mut policy = config.file.policy.to_policy();
    for name in &graph.subagents {
        policy.allow.insert(format!("graph__{name}").into());
    }
    policy
}

/// Every graph of `config`, in name order.
pub fn listing(config: &AgentConfig) -> Vec<GraphListing> {
    let registry = registry(config, &[]);
    registry
        .list()
        .map(|graph| GraphListing {
            name: graph.name.clone(),
            description: graph.description.clone(),
            tools: config
                .file
                .graphs
                .get(&graph.name)
                .and_then(|g| g.tools.clone())
                .unwrap_or_else(|| vec!["*".into()]),
            subagents: graph.subagents.clone(),
        })
        .collect()
}
