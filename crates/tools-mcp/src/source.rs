//! Every configured MCP server of a process, started together, and the registered
//! tools they contribute.

use std::collections::BTreeMap;
use std::sync::Arc;

use ai_core::{ToolEffect, ToolId, ToolSpec, tool::RegisteredTool};
use serde::Serialize;
use serde_json::Value;

use crate::config::{McpConfigError, ServerConfig, ToolConfig};
use crate::connection::ServerHost;
use crate::ids::NameTable;
use crate::pin::{PinState, Pins};
use crate::schema::{Dialect, translate_schema};
use crate::server::{Server, ServerStatus, ToolState};
use crate::tool::McpTool;

/// Something the user should know about a server or one of its tools (shown by the
/// CLI; the same facts reach runs as `tool_withheld` events where they withhold a
/// tool).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct McpWarning {
    /// Server id.
    pub server: String,
    /// The tool's name on the server, when about one tool.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// What happened.
    pub message: String,
}

impl std::fmt::Display for McpWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.tool {
            Some(tool) => write!(
                f,
                "mcp server `{}`, tool `{tool}`: {}",
                self.server, self.message
            ),
            None => write!(f, "mcp server `{}`: {}", self.server, self.message),
        }
    }
}

/// One tool of a server, as `agent tools` and `agent mcp list` show it.
#[derive(Debug, Clone, Serialize)]
pub struct ToolReport {
    /// The tool's name on the server.
    pub name: String,
    /// Its id (absent when it is not registered: new, or kept out).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Its description, as the model would read it.
    pub description: String,
    /// Its effect (from config; annotations only when trusted).
    pub effect: ToolEffect,
    /// The server's annotations, shown as they came.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
    /// How the definition relates to its pin.
    pub pin: PinState,
    /// Whether the server still lists it.
    pub present: bool,
    /// Why it is not offered, when it is not (kept out, changed, new, removed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub withheld: Option<String>,
}

/// One server, as `agent mcp list` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct ServerReport {
    /// Server id.
    pub id: String,
    /// `stdio` or `http`.
    pub transport: &'static str,
    /// The command or URL.
    pub target: String,
    /// Connection state.
    pub status: String,
    /// Its tools.
    pub tools: Vec<ToolReport>,
}

struct Registered {
    id: ToolId,
    server: Arc<Server>,
    name: String,
}

/// The MCP servers of a process and their tools.
pub struct McpSources {
    servers: Vec<Arc<Server>>,
    tools: Vec<RegisteredTool>,
    registered: Vec<Registered>,
    kept_out: BTreeMap<(String, String), String>,
    warnings: Vec<McpWarning>,
}

impl std::fmt::Debug for McpSources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpSources")
            .field("servers", &self.servers)
            .field("tools", &self.tools.len())
            .finish_non_exhaustive()
    }
}

fn effect_of(config: &ServerConfig, tool: &ToolConfig, state: &ToolState) -> ToolEffect {
    if let Some(effect) = tool.effect {
        return effect;
    }
    let read_only = state
        .definition
        .annotations
        .as_ref()
        .and_then(|a| a.read_only_hint)
        == Some(true);
    if config.trust_annotations && read_only {
        ToolEffect::ReadOnly
    } else {
        ToolEffect::ExternalSideEffect
    }
}

fn validator(schema: &Value, dialect: Dialect) -> Result<jsonschema::Validator, String> {
    let draft = match dialect {
        Dialect::Draft7 => jsonschema::Draft::Draft7,
        Dialect::Draft2019_09 => jsonschema::Draft::Draft201909,
        Dialect::Draft2020_12 => jsonschema::Draft::Draft202012,
    };
    jsonschema::options()
        .with_draft(draft)
        .build(schema)
        .map_err(|e| format!("the schema does not compile: {e}"))
}

impl McpSources {
    /// Validates every server's config (an error names the key), then starts them
    /// all at once. A server that does not start is reported in
    /// [`McpSources::warnings`] and contributes no tools; it is retried on use only
    /// through tools it already contributed, so restart the process to pick it up.
    pub async fn start(
        configs: &BTreeMap<String, ServerConfig>,
        pins: &Pins,
        host: ServerHost,
    ) -> Result<Self, McpConfigError> {
        let mut servers = Vec::new();
        for (id, config) in configs {
            let transport = config.transport(id)?;
            servers.push(Server::new(
                id.clone(),
                config.clone(),
                transport,
                host.clone(),
                pins.servers.get(id).cloned(),
            ));
        }
        let started = futures::future::join_all(servers.iter().map(|s| s.start())).await;
        let mut sources = Self {
            servers: Vec::new(),
            tools: Vec::new(),
            registered: Vec::new(),
            kept_out: BTreeMap::new(),
            warnings: Vec::new(),
        };
        for (server, outcome) in servers.into_iter().zip(started) {
            match outcome {
                Ok(()) => sources.register(&server),
                Err(error) => sources.warnings.push(McpWarning {
                    server: server.id().to_owned(),
                    tool: None,
                    message: format!("not started, its tools are not offered: {error}"),
                }),
            }
            sources.servers.push(server);
        }
        Ok(sources)
    }

    fn warn(&mut self, server: &str, tool: Option<&str>, message: String) {
        self.warnings.push(McpWarning {
            server: server.to_owned(),
            tool: tool.map(str::to_owned),
            message,
        });
    }

    fn register(&mut self, server: &Arc<Server>) {
        let id = server.id().to_owned();
        let tools = server.tools();
        let config = server.config().clone();
        for name in config.tools.keys() {
            if !tools.contains_key(name) {
                self.warn(
                    &id,
                    Some(name),
                    "configured, but the server does not list it".into(),
                );
            }
        }
        let (_table, ids) = match NameTable::build(&id, tools.keys().map(String::as_str)) {
            Ok(built) => built,
            Err(collision) => {
                self.warn(&id, None, format!("its tools are not offered: {collision}"));
                return;
            }
        };
        let call_timeout = config
            .call_timeout(&id)
            .unwrap_or(crate::config::DEFAULT_CALL_TIMEOUT);
        for (tool_id, name) in ids {
            let Some(state) = tools.get(&name) else {
                continue;
            };
            match self.build_tool(server, &config, &tool_id, &name, state, call_timeout) {
                Ok(tool) => {
                    if let Some(reason) = state.unavailable(&id) {
                        self.warn(&id, Some(&name), format!("withheld: {reason}"));
                    }
                    self.tools.push(tool);
                    self.registered.push(Registered {
                        id: tool_id,
                        server: Arc::clone(server),
                        name,
                    });
                }
                Err(reason) => {
                    self.warn(
                        &id,
                        Some(&name),
                        format!("kept out of the catalog: {reason}"),
                    );
                    self.kept_out.insert((id.clone(), name), reason);
                }
            }
        }
    }

    fn build_tool(
        &self,
        server: &Arc<Server>,
        config: &ServerConfig,
        id: &ToolId,
        name: &str,
        state: &ToolState,
        call_timeout: std::time::Duration,
    ) -> Result<RegisteredTool, String> {
        let tool_config = config.tools.get(name).cloned().unwrap_or_default();
        let input = Value::Object((*state.definition.input_schema).clone());
        let translated = translate_schema(&input).map_err(|e| format!("input schema {e}"))?;
        let input_validator = validator(&input, translated.dialect)?;
        let (output_schema, output_validator) = match &state.definition.output_schema {
            Some(schema) => {
                let original = Value::Object((**schema).clone());
                let out = translate_schema(&original).map_err(|e| format!("output schema {e}"))?;
                let v = validator(&original, out.dialect)?;
                (Some(out.schema), Some(Arc::new(v)))
            }
            None => (None, None),
        };
        let redaction = tool_config
            .redaction(server.id(), name)
            .map_err(|e| e.to_string())?;
        let description = state
            .definition
            .description
            .as_deref()
            .or(state.definition.title.as_deref())
            .unwrap_or_default();
        let mut spec = ToolSpec::new(
            id.clone(),
            description,
            translated.schema,
            effect_of(config, &tool_config, state),
        )
        .with_redaction(redaction)
        .with_idempotent(tool_config.idempotent)
        .with_origin(format!("mcp server {}", server.id()));
        if let Some(schema) = output_schema {
            spec = spec.with_output_schema(schema);
        }
        Ok(RegisteredTool {
            spec,
            executor: Arc::new(McpTool {
                server: Arc::clone(server),
                name: name.to_owned(),
                hash: state.hash.clone(),
                input: Arc::new(input_validator),
                output: output_validator,
                call_timeout,
            }),
        })
    }

    /// The tools to register with the runner (policy still decides which are
    /// offered; tools whose definition changed are registered but withheld).
    pub fn tools(&self) -> Vec<RegisteredTool> {
        self.tools.clone()
    }

    /// What went wrong at startup.
    pub fn warnings(&self) -> &[McpWarning] {
        &self.warnings
    }

    /// The lock file content after startup: `pins` plus every definition seen for
    /// the first time. `None` when nothing new was seen.
    pub fn updated_pins(&self, pins: &Pins) -> Option<Pins> {
        let mut updated = pins.clone();
        for server in &self.servers {
            for (name, state) in server.tools() {
                if state.pin == PinState::FirstSight {
                    updated.set(server.id(), &name, &state.hash);
                }
            }
        }
        (updated != *pins).then_some(updated)
    }

    /// The pins that accept `server`'s current definitions (`agent mcp pin`):
    /// every tool it lists now, nothing it no longer lists. `None` for an unknown
    /// server or one that did not start.
    pub fn accept(&self, server: &str, pins: &Pins) -> Option<Pins> {
        let server = self.servers.iter().find(|s| s.id() == server)?;
        if !matches!(server.status(), ServerStatus::Connected { .. }) {
            return None;
        }
        let current = server
            .tools()
            .into_iter()
            .filter(|(_, state)| state.present)
            .map(|(name, state)| (name, state.hash))
            .collect();
        let mut updated = pins.clone();
        updated.replace_server(server.id(), current);
        Some(updated)
    }

    /// Every server with its tools.
    pub fn report(&self) -> Vec<ServerReport> {
        self.servers
            .iter()
            .map(|server| {
                let id = server.id();
                let config = server.config();
                let tools = server
                    .tools()
                    .into_iter()
                    .map(|(name, state)| {
                        let registered = self
                            .registered
                            .iter()
                            .find(|r| r.server.id() == id && r.name == name);
                        let kept_out = self.kept_out.get(&(id.to_owned(), name.clone()));
                        let withheld = match kept_out {
                            Some(reason) => Some(format!("kept out: {reason}")),
                            None if registered.is_none() => state
                                .unavailable(id)
                                .or_else(|| Some("not registered (appeared while running)".into())),
                            None => state.unavailable(id),
                        };
                        let tool_config = config.tools.get(&name).cloned().unwrap_or_default();
                        ToolReport {
                            id: registered.map(|r| r.id.as_str().to_owned()),
                            description: state
                                .definition
                                .description
                                .as_deref()
                                .unwrap_or_default()
                                .to_owned(),
                            effect: effect_of(config, &tool_config, &state),
                            annotations: state
                                .definition
                                .annotations
                                .as_ref()
                                .and_then(|a| serde_json::to_value(a).ok()),
                            pin: state.pin,
                            present: state.present,
                            withheld,
                            name,
                        }
                    })
                    .collect();
                ServerReport {
                    id: id.to_owned(),
                    transport: server.transport().kind(),
                    target: match server.transport() {
                        crate::Transport::Stdio { command, .. } => command.clone(),
                        crate::Transport::Http { url } => url.clone(),
                    },
                    status: server.status().to_string(),
                    tools,
                }
            })
            .collect()
    }

    /// The pid of a running stdio server (for diagnostics and tests).
    pub async fn pid(&self, server: &str) -> Option<u32> {
        let server = self.servers.iter().find(|s| s.id() == server)?;
        server.pid().await
    }

    /// Closes every server: HTTP sessions are deleted, stdio servers' process
    /// groups end. Call before the process exits; dropping without it still kills
    /// stdio servers, but without the graceful steps.
    pub async fn shutdown(&self) {
        futures::future::join_all(self.servers.iter().map(|s| s.shutdown())).await;
    }
}
