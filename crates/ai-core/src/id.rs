//! Namespaced tool ids: `core__<name>` and `mcp__<server>__<tool>`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Longest id a provider accepts as a function name (OpenAI's limit).
pub const MAX_TOOL_ID_LEN: usize = 64;

/// Where a tool comes from, as encoded in its id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ToolSource {
    /// A built-in tool (`core__<name>`).
    Core,
    /// A tool of an MCP server (`mcp__<server>__<tool>`).
    Mcp {
        /// The configured server name.
        server: String,
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
    /// The id does not start with `core__` or `mcp__`.
    #[error("tool id must start with `core__` or `mcp__`")]
    UnknownNamespace,
    /// An `mcp__` id lacks the `__` between server and tool.
    #[error("mcp tool id must have the form mcp__<server>__<tool>")]
    MissingServer,
    /// The server part is empty or contains `__`.
    #[error("mcp server name must be non-empty and contain no `__`")]
    InvalidServer,
    /// The tool name part is empty.
    #[error("tool name after the namespace is empty")]
    EmptyName,
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
        if let Some(name) = id.strip_prefix("core__") {
            if name.is_empty() {
                return Err(ToolIdError::EmptyName);
            }
            return Ok(Self {
                full: id.to_owned(),
                source: ToolSource::Core,
                name_start: "core__".len(),
            });
        }
        if let Some(rest) = id.strip_prefix("mcp__") {
            let Some(split) = rest.find("__") else {
                return Err(ToolIdError::MissingServer);
            };
            let server = &rest[..split];
            let name = &rest[split + 2..];
            if server.is_empty() {
                return Err(ToolIdError::InvalidServer);
            }
            if name.is_empty() {
                return Err(ToolIdError::EmptyName);
            }
            return Ok(Self {
                full: id.to_owned(),
                source: ToolSource::Mcp {
                    server: server.to_owned(),
                },
                name_start: "mcp__".len() + split + 2,
            });
        }
        Err(ToolIdError::UnknownNamespace)
    }

    /// Builds the id of a built-in tool from its bare name.
    pub fn core(name: &str) -> Result<Self, ToolIdError> {
        Self::parse(&format!("core__{name}"))
    }

    /// Builds the id of an MCP tool from its server and tool names.
    pub fn mcp(server: &str, tool: &str) -> Result<Self, ToolIdError> {
        if server.is_empty() || server.contains("__") {
            return Err(ToolIdError::InvalidServer);
        }
        Self::parse(&format!("mcp__{server}__{tool}"))
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
            ToolSource::Core => None,
            ToolSource::Mcp { server } => Some(server),
        }
    }

    /// The bare tool name after the namespace.
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
    fn parses_and_reverses_core_and_mcp_ids() {
        let id = ToolId::parse("core__read_file").unwrap();
        assert_eq!(id.source(), &ToolSource::Core);
        assert_eq!(id.name(), "read_file");
        assert_eq!(id.server(), None);

        let id = ToolId::parse("mcp__git-hub__create_issue").unwrap();
        assert_eq!(id.server(), Some("git-hub"));
        assert_eq!(id.name(), "create_issue");
        assert_eq!(ToolId::mcp("git-hub", "create_issue").unwrap(), id);
        // A tool name may itself contain `__`; the server ends at the first one.
        assert_eq!(ToolId::parse("mcp__s__a__b").unwrap().name(), "a__b");
    }

    #[test]
    fn each_rule_has_its_own_error() {
        let cases: &[(&str, ToolIdError)] = &[
            ("", ToolIdError::Empty),
            ("core__a.b", ToolIdError::InvalidCharacter { position: 7 }),
            ("core__é", ToolIdError::InvalidCharacter { position: 6 }),
            (&"core__".repeat(11), ToolIdError::TooLong { len: 66 }),
            ("read_file", ToolIdError::UnknownNamespace),
            ("core__", ToolIdError::EmptyName),
            ("mcp__server", ToolIdError::MissingServer),
            ("mcp____tool", ToolIdError::InvalidServer),
            ("mcp__server__", ToolIdError::EmptyName),
        ];
        for (input, expected) in cases {
            assert_eq!(&ToolId::parse(input).unwrap_err(), expected, "{input:?}");
        }
        assert_eq!(
            ToolId::mcp("a__b", "t").unwrap_err(),
            ToolIdError::InvalidServer
        );
    }

    #[test]
    fn serde_round_trip_validates() {
        let id: ToolId = serde_json::from_str("\"core__x\"").unwrap();
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"core__x\"");
        assert!(serde_json::from_str::<ToolId>("\"x\"").is_err());
    }
}
