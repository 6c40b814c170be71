//! Namespaced tool ids: `<namespace>__<name>`.
//!
//! Four kinds of namespace keep tools of different origins apart, so a policy
//! pattern such as `core__*` can only ever match built-in tools:
//!
//! | id | source |
//! |---|---|
//! | `core__<name>` | a built-in tool of this project |
//! | `mcp__<server>__<tool>` | a tool of a configured MCP server |
//! | `graph__<name>` | another graph offered as a tool (a subagent) |
//! | `<namespace>__<name>` (default `app__<name>`) | a tool defined by the application |
//!
//! Every id is reversible: [`ToolId::parse`] recovers the source, server and name.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Longest id a provider accepts as a function name (OpenAI's limit).
pub const MAX_TOOL_ID_LEN: usize = 64;

/// Longest application namespace.
pub const MAX_NAMESPACE_LEN: usize = 16;

/// The namespace of tools defined by the application when it names none.
pub const DEFAULT_APP_NAMESPACE: &str = "app";

/// Namespaces an application cannot use for its own tools.
pub const RESERVED_NAMESPACES: &[&str] = &["core", "mcp", "graph", "client"];

/// Where a tool comes from, as encoded in its id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ToolSource {
    /// A built-in tool (`core__<name>`).
    Core,
    /// A tool of an MCP server (`mcp__<server>__<tool>`).
    Mcp {
        /// The configured server name.
        server: String,
    },
    /// A graph offered as a tool (`graph__<name>`).
    Graph,
    /// A tool the client runs (`client__<name>`): a web page executes it and
    /// answers with its output; the server never does.
    Client,
    /// A tool defined by the application (`<namespace>__<name>`).
    App {
        /// The namespace (`app` unless the registration chose another).
        namespace: String,
    },
}

/// A validated, namespaced tool id.
///
/// The id is what the model sees as the function name, so it matches
/// `^[a-zA-Z0-9_-]{1,64}$` and is reversible into its source, server and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ToolId {
    full: String,
    source: ToolSource,
    /// Byte offset of the tool name inside `full`.
    name_start: usize,
}

/// Why a string is not a valid [`ToolId`]; each variant names the rule that failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolIdError {
    /// The id is empty.
    #[error("tool id is empty")]
    Empty,
    /// The id is longer than 64 bytes.
    #[error("tool id is {len} characters long; the limit is 64")]
    TooLong {
        /// Length of the rejected id.
        len: usize,
    },
    /// The id contains a character outside `[a-zA-Z0-9_-]`.
    #[error("tool id contains a character outside [a-zA-Z0-9_-] at byte {position}")]
    InvalidCharacter {
        /// Byte position of the first bad character.
        position: usize,
    },
    /// The id has no `__` after its namespace.
    #[error("tool id must have the form <namespace>__<name> (e.g. app__add)")]
    MissingNamespace,
    /// The namespace is not 1 to 16 lowercase ASCII letters, digits or `-`, starting
    /// with a letter.
    #[error(
        "tool namespace must be 1 to 16 lowercase ASCII letters, digits or `-`, starting with a letter"
    )]
    InvalidNamespace,
    /// An application tried to use `core`, `mcp`, `graph` or `client`.
    #[error("tool namespace `{0}` is reserved")]
    ReservedNamespace(String),
    /// An `mcp__` id lacks the `__` between server and tool.
    #[error("mcp tool id must have the form mcp__<server>__<tool>")]
    MissingServer,
    /// The server part is empty, contains `__`, or starts or ends with `_`.
    #[error("mcp server name must be non-empty, contain no `__` and not start or end with `_`")]
    InvalidServer,
    /// The tool name part is empty.
    #[error("tool name after the namespace is empty")]
    EmptyName,
    /// The tool name starts with `_`, which would make the id ambiguous.
    #[error("tool name must not start with `_`")]
    NameStartsWithUnderscore,
}

fn check_namespace(namespace: &str) -> Result<(), ToolIdError> {
    let valid = !namespace.is_empty()
        && namespace.len() <= MAX_NAMESPACE_LEN
        && namespace.as_bytes()[0].is_ascii_lowercase()
        && namespace
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if valid {
        Ok(())
    } else {
        Err(ToolIdError::InvalidNamespace)
    }
}

fn check_name(name: &str) -> Result<(), ToolIdError> {
    if name.is_empty() {
        Err(ToolIdError::EmptyName)
    } else if name.starts_with('_') {
        Err(ToolIdError::NameStartsWithUnderscore)
    } else {
        Ok(())
    }
}

impl ToolId {
    /// Parses and validates an id.
    pub fn parse(id: &str) -> Result<Self, ToolIdError> {
        if id.is_empty() {
            return Err(ToolIdError::Empty);
        }
        if let Some(position) = id
            .bytes()
            .position(|b| !(b.is_ascii_alphanumeric() || b == b'_' || b == b'-'))
        {
            return Err(ToolIdError::InvalidCharacter { position });
        }
        if id.len() > MAX_TOOL_ID_LEN {
            return Err(ToolIdError::TooLong { len: id.len() });
        }
        let Some(split) = id.find("__") else {
            return Err(ToolIdError::MissingNamespace);
        };
        let namespace = &id[..split];
        let rest = &id[split + 2..];
        let (source, name_start) = match namespace {
            "core" => (ToolSource::Core, split + 2),
            "graph" => (ToolSource::Graph, split + 2),
            "client" => (ToolSource::Client, split + 2),
            "mcp" => {
                let Some(server_end) = rest.find("__") else {
                    return Err(ToolIdError::MissingServer);
                };
                let server = &rest[..server_end];
                if server.is_empty() || server.starts_with('_') || server.ends_with('_') {
                    return Err(ToolIdError::InvalidServer);
                }
                (
                    ToolSource::Mcp {
                        server: server.to_owned(),
                    },
                    split + 2 + server_end + 2,
                )
            }
            other => {
                check_namespace(other)?;
                (
                    ToolSource::App {
                        namespace: other.to_owned(),
                    },
                    split + 2,
                )
            }
        };
        check_name(&id[name_start..])?;
        Ok(Self {
            full: id.to_owned(),
            source,
            name_start,
        })
    }

    /// Builds the id of a built-in tool from its bare name.
    pub fn core(name: &str) -> Result<Self, ToolIdError> {
        Self::parse(&format!("core__{name}"))
    }

    /// Builds the id of an MCP tool from its server and tool names.
    pub fn mcp(server: &str, tool: &str) -> Result<Self, ToolIdError> {
        if server.is_empty()
            || server.contains("__")
            || server.starts_with('_')
            || server.ends_with('_')
        {
            return Err(ToolIdError::InvalidServer);
        }
        Self::parse(&format!("mcp__{server}__{tool}"))
    }

    /// Builds the id of a graph offered as a tool.
    pub fn graph(name: &str) -> Result<Self, ToolIdError> {
        Self::parse(&format!("graph__{name}"))
    }

    /// Builds the id of a tool the client runs.
    pub fn client(name: &str) -> Result<Self, ToolIdError> {
        Self::parse(&format!("client__{name}"))
    }

    /// Builds the id of an application tool in `namespace` (see
    /// [`DEFAULT_APP_NAMESPACE`]); the reserved namespaces are refused.
    pub fn app(namespace: &str, name: &str) -> Result<Self, ToolIdError> {
        if RESERVED_NAMESPACES.contains(&namespace) {
            return Err(ToolIdError::ReservedNamespace(namespace.to_owned()));
        }
        check_namespace(namespace)?;
        Self::parse(&format!("{namespace}__{name}"))
    }

    /// The full id, as sent to the model.
    pub fn as_str(&self) -> &str {
        &self.full
    }

    /// The source namespace of the tool.
    pub fn source(&self) -> &ToolSource {
        &self.source
    }

    /// The server name for MCP tools.
    pub fn server(&self) -> Option<&str> {
        match &self.source {
            ToolSource::Mcp { server } => Some(server),
            _ => None,
        }
    }

    /// The namespace: `core`, `mcp`, `graph` or the application's.
    pub fn namespace(&self) -> &str {
        match &self.source {
            ToolSource::Core => "core",
            ToolSource::Mcp { .. } => "mcp",
            ToolSource::Graph => "graph",
            ToolSource::Client => "client",
            ToolSource::App { namespace } => namespace,
        }
    }

    /// The bare tool name after the namespace (and server).
    pub fn name(&self) -> &str {
        &self.full[self.name_start..]
    }
}

impl fmt::Display for ToolId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.full)
    }
}

impl FromStr for ToolId {
    type Err = ToolIdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl Serialize for ToolId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.full)
    }
}

impl<'de> Deserialize<'de> for ToolId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        Self::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_reverses_every_namespace() {
        let id = ToolId::parse("core__read_file").unwrap();
        assert_eq!(id.source(), &ToolSource::Core);
        assert_eq!(id.name(), "read_file");
        assert_eq!(id.server(), None);
        assert_eq!(id.namespace(), "core");

        let id = ToolId::parse("mcp__git-hub__create_issue").unwrap();
        assert_eq!(id.server(), Some("git-hub"));
        assert_eq!(id.name(), "create_issue");
        assert_eq!(ToolId::mcp("git-hub", "create_issue").unwrap(), id);
        // A tool name may itself contain `__`; the server ends at the first one.
        assert_eq!(ToolId::parse("mcp__s__a__b").unwrap().name(), "a__b");

        let id = ToolId::parse("graph__researcher").unwrap();
        assert_eq!(id.source(), &ToolSource::Graph);
        assert_eq!(ToolId::graph("researcher").unwrap(), id);

        let id = ToolId::parse("app__add").unwrap();
        assert_eq!(
            id.source(),
            &ToolSource::App {
                namespace: "app".into()
            }
        );
        assert_eq!(ToolId::app(DEFAULT_APP_NAMESPACE, "add").unwrap(), id);
        let id = ToolId::app("billing-v2", "refund").unwrap();
        assert_eq!(id.as_str(), "billing-v2__refund");
        assert_eq!(id.namespace(), "billing-v2");
        assert_eq!(ToolId::parse(id.as_str()).unwrap(), id);
    }

    #[test]
    fn each_rule_has_its_own_error() {
        let cases: &[(&str, ToolIdError)] = &[
            ("", ToolIdError::Empty),
            ("core__a.b", ToolIdError::InvalidCharacter { position: 7 }),
            (
                "core__\u{e9}",
                ToolIdError::InvalidCharacter { position: 6 },
            ),
            (&"core__".repeat(11), ToolIdError::TooLong { len: 66 }),
            ("read_file", ToolIdError::MissingNamespace),
            ("Core__x", ToolIdError::InvalidNamespace),
            ("9app__x", ToolIdError::InvalidNamespace),
            ("my_app__x", ToolIdError::InvalidNamespace),
            ("__x", ToolIdError::InvalidNamespace),
            ("core__", ToolIdError::EmptyName),
            ("core___x", ToolIdError::NameStartsWithUnderscore),
            ("app___x", ToolIdError::NameStartsWithUnderscore),
            ("mcp__server", ToolIdError::MissingServer),
            ("mcp____tool", ToolIdError::InvalidServer),
            ("mcp__a___tool", ToolIdError::NameStartsWithUnderscore),
            ("mcp___a__tool", ToolIdError::InvalidServer),
            ("mcp__server__", ToolIdError::EmptyName),
            ("mcp__server___x", ToolIdError::NameStartsWithUnderscore),
        ];
        for (input, expected) in cases {
            assert_eq!(&ToolId::parse(input).unwrap_err(), expected, "{input:?}");
        }
        assert_eq!(
            ToolId::mcp("a__b", "t").unwrap_err(),
            ToolIdError::InvalidServer
        );
        assert_eq!(
            ToolId::mcp("a_", "t").unwrap_err(),
            ToolIdError::InvalidServer
        );
        for reserved in RESERVED_NAMESPACES {
            assert_eq!(
                ToolId::app(reserved, "x").unwrap_err(),
                ToolIdError::ReservedNamespace((*reserved).to_owned())
            );
        }
    }

    #[test]
    fn a_server_pattern_never_matches_another_server() {
        // `mcp__a__*` must not match a tool of server `a_`: such servers are refused.
        assert!(ToolId::parse("mcp__a___b").is_err());
        let id = ToolId::parse("mcp__a__b").unwrap();
        assert_eq!(id.server(), Some("a"));
    }

    #[test]
    fn serde_round_trip_validates() {
        let id: ToolId = serde_json::from_str("\"core__x\"").unwrap();
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"core__x\"");
        assert!(serde_json::from_str::<ToolId>("\"x\"").is_err());
    }
}
