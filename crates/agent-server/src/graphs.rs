//! The graphs a chat service runs: its default graph, more by name (what a
//! client picks for a new chat with the body's `graph`), and which accounts may
//! use which. `GET /api/graphs` lists the ones the request's account may use.
//!
//! A chat keeps the graph it started with: a request that names another graph
//! for a stored thread is refused (`409 graph_mismatch`), and one that names
//! none runs the thread's.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use agent_graph::Graph;
use axum::http::StatusCode;
use axum::response::Response;

use crate::server::refuse;

/// The graphs of a service (see the module doc).
#[derive(Debug, Clone)]
pub(crate) struct ServedGraphs {
    default: Arc<Graph>,
    by_name: BTreeMap<String, Arc<Graph>>,
    /// Accounts limited to some graphs, by name; an account not listed may use
    /// every graph.
    allowed: HashMap<String, BTreeSet<String>>,
}

/// Why a request's graph is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum GraphRefusal {
    /// No graph of this server has that name.
    #[error("this server has no graph `{0}` (GET /api/graphs lists them)")]
    Unknown(String),
    /// The account may not use it.
    #[error("this account may not use graph `{0}`")]
    Forbidden(String),
    /// The chat runs another graph.
    #[error("this chat runs graph `{thread}`; start a new chat for `{requested}`")]
    Mismatch {
        /// The chat's graph.
        thread: String,
        /// The graph the request named.
        requested: String,
    },
}

impl GraphRefusal {
    /// The JSON refusal.
    pub(crate) fn response(&self) -> Response {
        let (status, code) = match self {
            Self::Unknown(_) => (StatusCode::BAD_REQUEST, "unknown_graph"),
            Self::Forbidden(_) => (StatusCode::FORBIDDEN, "graph_forbidden"),
            Self::Mismatch { .. } => (StatusCode::CONFLICT, "graph_mismatch"),
        };
        refuse(status, code, &self.to_string())
    }
}

impl ServedGraphs {
    /// Serves `default` only.
    pub(crate) fn new(default: Graph) -> Self {
        let default = Arc::new(default);
        Self {
            by_name: BTreeMap::from([(default.name.clone(), Arc::clone(&default))]),
            default,
            allowed: HashMap::new(),
        }
    }

    /// Also serves `graph` (replacing one of the same name, the default's
    /// included).
    pub(crate) fn insert(&mut self, graph: Graph) {
        let graph = Arc::new(graph);
        if graph.name == self.default.name {
            self.default = Arc::clone(&graph);
        }
        self.by_name.insert(graph.name.clone(), graph);
    }

    /// Limits `account` to the graphs named in `names`.
    pub(crate) fn limit(&mut self, account: String, names: impl IntoIterator<Item = String>) {
        self.allowed.insert(account, names.into_iter().collect());
    }

    /// The default graph.
    pub(crate) fn default_graph(&self) -> &Arc<Graph> {
        &self.default
    }

    /// The graph named `name`, whoever may use it.
    pub(crate) fn get(&self, name: &str) -> Option<&Arc<Graph>> {
        self.by_name.get(name)
    }

    fn may_use(&self, account: &str, name: &str) -> bool {
        self.allowed
            .get(account)
            .is_none_or(|names| names.contains(name))
    }

    /// The graphs `account` may use, in name order.
    pub(crate) fn usable(&self, account: &str) -> impl Iterator<Item = &Arc<Graph>> {
        self.by_name
            .values()
            .filter(move |g| self.may_use(account, &g.name))
    }

    /// The graph a new chat of `account` runs when its request names none:
    /// the default, or the first the account may use.
    pub(crate) fn default_for(&self, account: &str) -> Option<&Arc<Graph>> {
        if self.may_use(account, &self.default.name) {
            return Some(&self.default);
        }
        self.usable(account).next()
    }

    /// The graph a request of `account` runs: the one it names (`requested`),
    /// else the chat's (`thread`, when stored), else the account's default.
    pub(crate) fn resolve(
        &self,
        account: &str,
        requested: Option<&str>,
        thread: Option<&str>,
    ) -> Result<Arc<Graph>, GraphRefusal> {
        if let (Some(requested), Some(thread)) = (requested, thread)
            && requested != thread
        {
            return Err(GraphRefusal::Mismatch {
                thread: thread.to_owned(),
                requested: requested.to_owned(),
            });
        }
        let name = match requested.or(thread) {
            Some(name) => name,
            None => {
                return self
                    .default_for(account)
                    .cloned()
                    .ok_or_else(|| GraphRefusal::Forbidden(self.default.name.clone()));
            }
        };
        let graph = self
            .get(name)
            .ok_or_else(|| GraphRefusal::Unknown(name.to_owned()))?;
        if !self.may_use(account, name) {
            return Err(GraphRefusal::Forbidden(name.to_owned()));
        }
        Ok(Arc::clone(graph))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served() -> ServedGraphs {
        let mut graphs = ServedGraphs::new(Graph::chat());
        graphs.insert(Graph::new("researcher", "Finds things.", "Research."));
        graphs.limit("guest".into(), ["researcher".to_owned()]);
        graphs
    }

    #[test]
    fn a_request_runs_the_graph_it_names_the_threads_or_the_default() {
        let graphs = served();
        let name = |r: Result<Arc<Graph>, GraphRefusal>| r.map(|g| g.name.clone());
        assert_eq!(name(graphs.resolve("local", None, None)), Ok("chat".into()));
        assert_eq!(
            name(graphs.resolve("local", Some("researcher"), None)),
            Ok("researcher".into())
        );
        assert_eq!(
            name(graphs.resolve("local", None, Some("researcher"))),
            Ok("researcher".into())
        );
        assert_eq!(
            name(graphs.resolve("guest", None, None)),
            Ok("researcher".into())
        );
    }

    #[test]
    fn unknown_forbidden_and_switched_graphs_are_refused() {
        let graphs = served();
        let refusal = |r: Result<Arc<Graph>, GraphRefusal>| r.err();
        assert_eq!(
            refusal(graphs.resolve("local", Some("nope"), None)),
            Some(GraphRefusal::Unknown("nope".into()))
        );
        assert_eq!(
            refusal(graphs.resolve("guest", Some("chat"), None)),
            Some(GraphRefusal::Forbidden("chat".into()))
        );
        assert_eq!(
            refusal(graphs.resolve("local", Some("chat"), Some("researcher"))),
            Some(GraphRefusal::Mismatch {
                thread: "researcher".into(),
                requested: "chat".into()
            })
        );
        let names: Vec<_> = graphs.usable("guest").map(|g| g.name.clone()).collect();
        assert_eq!(names, ["researcher"]);
    }
}
