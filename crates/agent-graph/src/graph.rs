//! Named graphs: what a run starts from (system prompt and tool selection).

use std::collections::BTreeMap;

use ai_core::{Message, ToolCatalog, ToolEffect};

/// Which catalog tools a graph offers.
#[derive(Debug, Clone, PartialEq, Eq)]
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

/// A named graph: a system prompt and a tool selection over the run's catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Graph {
    /// Name (e.g. `chat`).
    pub name: String,
    /// One-line description for listings.
    pub description: String,
    /// System prompt placed before the user's message.
    pub system_prompt: String,
    /// Which tools are offered.
    pub tools: ToolFilter,
}

impl Graph {
    /// The `chat` graph: a helpful assistant offered every catalog tool.
    pub fn chat() -> Self {
        Self {
            name: "chat".into(),
            description: "Answer the user, calling the available tools when they help.".into(),
            system_prompt: "You are a helpful assistant. Use the available tools when they help answer the user; never invent tool results.".into(),
            tools: ToolFilter::All,
        }
    }

    /// Narrows `catalog` to this graph's selection.
    pub fn select_tools(&self, catalog: ToolCatalog) -> ToolCatalog {
        match &self.tools {
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
        }
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
#[derive(Debug, Clone, PartialEq, Eq)]
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
