//! What `agent chat` and `agent serve` both bind before they run a graph: the
//! built-in tools, the started MCP servers' tools, the graph with its subagents'
//! `graph__` tools, the graph's policy and the model.

use std::sync::Arc;

use agent_graph::Graph;
use ai_core::{CompletionPort, ToolPolicy, tool::RegisteredTool};
use tools_mcp::McpSources;

use crate::config::AgentConfig;

/// The bound pieces of one command. Call [`Session::close`] when the command ends:
/// it ends every MCP server (sessions deleted, process groups terminated).
pub struct Session {
    /// Every tool: built-ins, MCP tools and the graph's subagents.
    pub tools: Vec<RegisteredTool>,
    /// The graph to run.
    pub graph: Graph,
    /// The graph's policy.
    pub policy: ToolPolicy,
    /// The model.
    pub model: Arc<dyn CompletionPort>,
    sources: Option<McpSources>,
}

impl Session {
    /// Binds everything for graph `graph` (with `client_tools`, the tools of
    /// `[client_tools]` too: only a web client can run them); the error is a
    /// message for the user (a usage or configuration error). MCP servers started
    /// before a later step failed are shut down again.
    pub async fn open(
        config: &AgentConfig,
        graph: &str,
        client_tools: bool,
    ) -> Result<Self, String> {
        let mut tools = crate::tools::bind(config).map_err(|e| e.to_string())?;
        if client_tools {
            tools.extend(crate::tools::client_tools(config)?);
        }
        let sources = crate::mcp::start(config).await?;
        tools.extend(sources.iter().flat_map(|s| s.tools()));
        match Self::assemble(config, &mut tools, graph) {
            Ok((graph, model)) => Ok(Self {
                policy: crate::graphs::policy_for(config, &graph),
                tools,
                graph,
                model,
                sources,
            }),
            Err(e) => {
                if let Some(sources) = sources {
                    sources.shutdown().await;
                }
                Err(e)
            }
        }
    }

    fn assemble(
        config: &AgentConfig,
        tools: &mut Vec<RegisteredTool>,
        graph: &str,
    ) -> Result<(Graph, Arc<dyn CompletionPort>), String> {
        let tool_ids: Vec<&str> = tools.iter().map(|t| t.spec.id.as_str()).collect();
        let registry = crate::graphs::registry(config, &tool_ids);
        let Some(graph) = registry.get(graph).cloned() else {
            let names: Vec<&str> = registry.list().map(|g| g.name.as_str()).collect();
            return Err(format!(
                "unknown graph `{graph}` (known: {})",
                names.join(", ")
            ));
        };
        // Its subagents, as `graph__<name>` tools run by the same runner and policy.
        tools.extend(
            registry
                .subagent_tools(&graph.name)
                .map_err(|e| e.to_string())?,
        );
        let model = crate::model::build(config).map_err(|e| e.to_string())?;
        Ok((graph, model))
    }

    /// The graphs of `config` besides the session's, for a server that offers
    /// every graph: their subagent tools join the session's tools (each once)
    /// and the policy allows them, as for the session's own graph.
    pub fn other_graphs(&mut self, config: &AgentConfig) -> Result<Vec<Graph>, String> {
        let tool_ids: Vec<String> = self.tools.iter().map(|t| t.spec.id.to_string()).collect();
        let ids: Vec<&str> = tool_ids.iter().map(String::as_str).collect();
        let registry = crate::graphs::registry(config, &ids);
        let mut others = Vec::new();
        for graph in registry.list().filter(|g| g.name != self.graph.name) {
            for tool in registry
                .subagent_tools(&graph.name)
                .map_err(|e| e.to_string())?
            {
                if !self.tools.iter().any(|t| t.spec.id == tool.spec.id) {
                    self.tools.push(tool);
                }
            }
            for name in &graph.subagents {
                self.policy.allow.insert(format!("graph__{name}").into());
            }
            others.push(graph.clone());
        }
        Ok(others)
    }

    /// Ends every MCP server of the session.
    pub async fn close(self) {
        if let Some(sources) = self.sources {
            sources.shutdown().await;
        }
    }
}
