//! Pinned tool definitions: the sha256 of each tool's name, description, input and
//! output schema, recorded at first sight in a lock file. A definition that no
//! longer matches its pin is disabled until the user accepts it.

use std::collections::BTreeMap;

use ai_core::canonical_json;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// `sha256:<hex>` of the canonical JSON of a tool's name, description, input schema
/// and output schema (key order and whitespace do not matter).
pub fn definition_hash(
    name: &str,
    description: &str,
    input_schema: &Value,
    output_schema: Option<&Value>,
) -> String {
    let canonical = canonical_json(&json!({
        "name": name,
        "description": description,
        "inputSchema": input_schema,
        "outputSchema": output_schema,
    }));
    let digest = Sha256::digest(canonical.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// How a tool's current definition relates to its pin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PinState {
    /// Matches the pinned hash.
    Pinned,
    /// Seen for the first time when the source started: pinned now (trust on first
    /// use), recorded in the lock file by the caller.
    FirstSight,
    /// Differs from the pinned hash: disabled until accepted.
    Changed,
    /// Appeared while running (after `tools/list_changed`): never enabled by
    /// appearing; accepted like a changed definition.
    New,
}

impl PinState {
    /// Whether a tool in this state may be offered.
    pub fn enabled(self) -> bool {
        matches!(self, Self::Pinned | Self::FirstSight)
    }

    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pinned => "pinned",
            Self::FirstSight => "first_sight",
            Self::Changed => "changed",
            Self::New => "new",
        }
    }
}

/// The lock file's content: server id -> tool name -> definition hash.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pins {
    /// Pinned hashes by server and tool name.
    #[serde(default)]
    pub servers: BTreeMap<String, BTreeMap<String, String>>,
}

/// A lock file that does not parse.
#[derive(Debug, thiserror::Error)]
#[error("the MCP lock file does not parse: {0}")]
pub struct PinsError(String);

/// Header written at the top of the lock file.
const HEADER: &str = "# MCP tool definitions accepted by the user: server -> tool -> sha256 of its\n\
# name, description and schemas. Written by the agent; `agent mcp pin SERVER`\n\
# accepts a server's current definitions. A tool whose definition no longer\n\
# matches is disabled until it is accepted.\n";

impl Pins {
    /// Parses a lock file.
    pub fn parse(text: &str) -> Result<Self, PinsError> {
        toml::from_str(text).map_err(|e| PinsError(e.to_string()))
    }

    /// Renders the lock file (stable order).
    pub fn render(&self) -> String {
        let body = toml::to_string(self).unwrap_or_default();
        format!("{HEADER}\n{body}")
    }

    /// The pinned hash of one tool.
    pub fn get(&self, server: &str, tool: &str) -> Option<&str> {
        self.servers.get(server)?.get(tool).map(String::as_str)
    }

    /// Pins one tool.
    pub fn set(&mut self, server: &str, tool: &str, hash: &str) {
        self.servers
            .entry(server.to_owned())
            .or_default()
            .insert(tool.to_owned(), hash.to_owned());
    }

    /// Replaces every pin of `server` with `tools` (name -> hash).
    pub fn replace_server(&mut self, server: &str, tools: BTreeMap<String, String>) {
        self.servers.insert(server.to_owned(), tools);
    }

    /// The state of a definition with `hash` seen at startup.
    pub fn state_at_startup(&self, server: &str, tool: &str, hash: &str) -> PinState {
        match self.get(server, tool) {
            None => PinState::FirstSight,
            Some(pinned) if pinned == hash => PinState::Pinned,
            Some(_) => PinState::Changed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_ignores_key_order_and_sees_every_part() {
        let a = definition_hash("t", "d", &json!({"type":"object","a":1,"b":2}), None);
        let b = definition_hash("t", "d", &json!({"b":2,"type":"object","a":1}), None);
        assert_eq!(a, b);
        assert!(a.starts_with("sha256:") && a.len() == 7 + 64);
        assert_ne!(
            a,
            definition_hash("t", "d2", &json!({"type":"object","a":1,"b":2}), None)
        );
        assert_ne!(
            a,
            definition_hash("u", "d", &json!({"type":"object","a":1,"b":2}), None)
        );
        assert_ne!(
            a,
            definition_hash(
                "t",
                "d",
                &json!({"type":"object","a":1,"b":2}),
                Some(&json!({}))
            )
        );
    }

    #[test]
    fn states_at_startup() {
        let mut pins = Pins::default();
        pins.set("s", "t", "sha256:1");
        assert_eq!(
            pins.state_at_startup("s", "t", "sha256:1"),
            PinState::Pinned
        );
        assert_eq!(
            pins.state_at_startup("s", "t", "sha256:2"),
            PinState::Changed
        );
        assert_eq!(
            pins.state_at_startup("s", "u", "sha256:2"),
            PinState::FirstSight
        );
        assert!(!PinState::Changed.enabled() && !PinState::New.enabled());
    }

    #[test]
    fn the_lock_file_round_trips_with_odd_tool_names() {
        let mut pins = Pins::default();
        pins.set("notes", "notes.search/v2", "sha256:ab");
        pins.set("notes", "echo", "sha256:cd");
        let text = pins.render();
        assert!(text.starts_with("# MCP tool definitions"));
        assert_eq!(Pins::parse(&text).unwrap(), pins);
        assert!(Pins::parse("servers = 3").is_err());
        assert!(Pins::parse("[other]\n").is_err());
    }
}
