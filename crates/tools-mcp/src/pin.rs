//! Pinned tool definitions: the sha256 of everything in a tool's definition that
//! can change what the model reads or what policy decides (name, title,
//! description, input and output schema, annotations), recorded in a lock file. A
//! definition that no longer matches its pin is disabled until the user accepts
//! it. Only a server with no entry in the lock pins its tools at first sight
//! (trust on first use); once it has one, a tool it starts listing is withheld
//! like a changed one, in every later process too.

use std::collections::BTreeMap;

use ai_core::tool::canonical_json;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

/// The parts of a tool definition a pin covers.
#[derive(Debug, Clone, Copy)]
pub struct Definition<'a> {
    /// The tool's name on the server.
    pub name: &'a str,
    /// Its title (shown as its description when it has none).
    pub title: Option<&'a str>,
    /// Its description.
    pub description: &'a str,
    /// Its input schema.
    pub input_schema: &'a Value,
    /// Its output schema.
    pub output_schema: Option<&'a Value>,
    /// Its annotations (`readOnlyHint` can make it `read_only` when the server's
    /// annotations are trusted).
    pub annotations: Option<&'a Value>,
}

fn sha256_of(value: &Value) -> String {
    let digest = Sha256::digest(canonical_json(value).as_bytes());
    format!("sha256:{}", hex::encode(digest))
}

/// `sha256:<hex>` of the canonical JSON of a definition (key order and whitespace
/// do not matter). Title and annotations count only when present, so a tool
/// without them keeps the hash pins had before they counted.
pub fn definition_hash(definition: &Definition<'_>) -> String {
    let mut parts = Map::new();
    parts.insert("name".into(), json!(definition.name));
    parts.insert("description".into(), json!(definition.description));
    parts.insert("inputSchema".into(), definition.input_schema.clone());
    parts.insert(
        "outputSchema".into(),
        definition.output_schema.cloned().unwrap_or(Value::Null),
    );
    if let Some(title) = definition.title {
        parts.insert("title".into(), json!(title));
    }
    if let Some(annotations) = definition.annotations {
        parts.insert("annotations".into(), annotations.clone());
    }
    sha256_of(&Value::Object(parts))
}

/// The hash earlier versions pinned (name, description and schemas only): a pin
/// that matches it, and not [`definition_hash`], was accepted without the title
/// and annotations the tool now has.
pub fn legacy_definition_hash(definition: &Definition<'_>) -> String {
    sha256_of(&json!({
        "name": definition.name,
        "description": definition.description,
        "inputSchema": definition.input_schema,
        "outputSchema": definition.output_schema,
    }))
}

/// How a tool's current definition relates to its pin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum PinState {
    /// Matches the pinned hash.
    Pinned,
    /// Seen for the first time when a server with no entry in the lock started:
    /// pinned now (trust on first use), recorded in the lock file by the caller.
    FirstSight,
    /// Differs from the pinned hash: disabled until accepted.
    Changed,
    /// Listed at startup by a server that has pins, without one of its own (a tool
    /// the server started listing since it was pinned): disabled until accepted.
    Unpinned,
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
            Self::Unpinned => "unpinned",
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

    /// The state of a definition with `hash` seen when `server` started: pinned,
    /// changed, or without a pin (first sight only for a server with no entry).
    pub fn state_at_startup(&self, server: &str, tool: &str, hash: &str) -> PinState {
        match self.servers.get(server) {
            None => PinState::FirstSight,
            Some(tools) => match tools.get(tool) {
                None => PinState::Unpinned,
                Some(pinned) if pinned == hash => PinState::Pinned,
                Some(_) => PinState::Changed,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn definition<'a>(
        description: &'a str,
        schema: &'a Value,
        annotations: Option<&'a Value>,
    ) -> Definition<'a> {
        Definition {
            name: "t",
            title: None,
            description,
            input_schema: schema,
            output_schema: None,
            annotations,
        }
    }

    #[test]
    fn the_hash_ignores_key_order_and_sees_every_part() {
        let schema = json!({"type":"object","a":1,"b":2});
        let reordered = json!({"b":2,"type":"object","a":1});
        let a = definition_hash(&definition("d", &schema, None));
        assert_eq!(a, definition_hash(&definition("d", &reordered, None)));
        assert!(a.starts_with("sha256:") && a.len() == 7 + 64);
        assert_ne!(a, definition_hash(&definition("d2", &schema, None)));
        let renamed = Definition {
            name: "u",
            ..definition("d", &schema, None)
        };
        assert_ne!(a, definition_hash(&renamed));
        let out = json!({});
        let with_output = Definition {
            output_schema: Some(&out),
            ..definition("d", &schema, None)
        };
        assert_ne!(a, definition_hash(&with_output));
        let titled = Definition {
            title: Some("T"),
            ..definition("d", &schema, None)
        };
        assert_ne!(a, definition_hash(&titled));
    }

    /// A flipped `readOnlyHint` changes the hash (it did not before: annotations
    /// were outside the pin).
    #[test]
    fn annotations_are_part_of_the_pin() {
        let schema = json!({"type": "object"});
        let (ro, rw) = (
            json!({"readOnlyHint": true}),
            json!({"readOnlyHint": false}),
        );
        let read_only = definition_hash(&definition("d", &schema, Some(&ro)));
        let writes = definition_hash(&definition("d", &schema, Some(&rw)));
        assert_ne!(read_only, writes);
        // Without title and annotations the hash is the one earlier pins hold.
        let plain = definition("d", &schema, None);
        assert_eq!(definition_hash(&plain), legacy_definition_hash(&plain));
        let annotated = definition("d", &schema, Some(&ro));
        assert_ne!(
            definition_hash(&annotated),
            legacy_definition_hash(&annotated)
        );
    }

    #[test]
    fn states_at_startup() {
        let mut pins = Pins::default();
        pins.set("s", "t", "sha256:1");
        for (server, tool, hash, state) in [
            ("s", "t", "sha256:1", PinState::Pinned),
            ("s", "t", "sha256:2", PinState::Changed),
            // A server with pins gets no trust on first use for a tool it adds.
            ("s", "u", "sha256:2", PinState::Unpinned),
            ("other", "u", "sha256:2", PinState::FirstSight),
        ] {
            assert_eq!(
                pins.state_at_startup(server, tool, hash),
                state,
                "{server} {tool} {hash}"
            );
        }
        assert!(!PinState::Changed.enabled() && !PinState::New.enabled());
        assert!(!PinState::Unpinned.enabled());
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
