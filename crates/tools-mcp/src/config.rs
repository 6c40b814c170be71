//! What a configured MCP server is: its transport, timeouts and per-tool settings,
//! validated before anything is started.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use ai_core::{
    ToolEffect,
    tool::{FieldPath, Redaction},
};
use serde::Deserialize;

/// Startup timeout when the config names none.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(10);
/// Per-call timeout when the config names none (the policy's runtime budget caps it).
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest server id: ids stay short enough to leave room for tool names in the
/// 64-character tool id.
pub const MAX_SERVER_ID_LEN: usize = 16;

/// Environment variables a stdio server inherits from the agent (when set); every
/// other variable it sees comes from its `env` map.
pub const INHERITED_ENV: &[&str] = &["PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER"];

/// The [`INHERITED_ENV`] variables among `vars` (the caller's environment, which
/// the caller reads: tools-mcp reads none), for [`crate::McpSources::start`].
pub fn inherited_env(
    vars: impl IntoIterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
) -> Vec<(String, std::ffi::OsString)> {
    vars.into_iter()
        .filter_map(|(name, value)| {
            let name = name.into_string().ok()?;
            INHERITED_ENV
                .contains(&name.as_str())
                .then_some((name, value))
        })
        .collect()
}

/// One `[mcp.servers.NAME]` table.
#[derive(Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// Program to start (stdio transport). Exactly one of `command` and `url`.
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Variables set for the program (on top of [`INHERITED_ENV`]).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Working directory of the program (default: the agent's).
    pub cwd: Option<PathBuf>,
    /// Streamable HTTP endpoint (HTTP transport).
    pub url: Option<String>,
    /// Static headers sent with every HTTP request (no credentials: use
    /// `connection`).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// The connection whose credential is sent (resolved at connect time by a
    /// [`crate::ConnectionBroker`]); HTTP only.
    pub connection: Option<String>,
    /// Seconds to wait for the handshake and the first tool list.
    pub startup_timeout_s: Option<u64>,
    /// Seconds one `tools/call` may take.
    pub call_timeout_s: Option<u64>,
    /// Whether the server's annotations (`readOnlyHint`) may lower a tool's effect
    /// below the default `external_side_effect`. Off by default: annotations are
    /// hints from a party we do not trust.
    #[serde(default)]
    pub trust_annotations: bool,
    /// Per-tool settings, by the tool's name on the server.
    #[serde(default)]
    pub tools: BTreeMap<String, ToolConfig>,
}

impl std::fmt::Debug for ServerConfig {
    // Values of `env` and `headers` are left out: they are the user's, and may be
    // sensitive even though credentials belong in connections.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConfig")
            .field("command", &self.command)
            .field("args", &self.args.len())
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("cwd", &self.cwd)
            .field("url", &self.url)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("connection", &self.connection)
            .field("startup_timeout_s", &self.startup_timeout_s)
            .field("call_timeout_s", &self.call_timeout_s)
            .field("trust_annotations", &self.trust_annotations)
            .field("tools", &self.tools)
            .finish()
    }
}

/// One `[mcp.servers.NAME.tools.TOOL]` table.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolConfig {
    /// The tool's effect (default `external_side_effect`).
    pub effect: Option<ToolEffect>,
    /// Argument fields that may appear in events and logs (default none).
    #[serde(default)]
    pub show_args: Vec<String>,
    /// Output fields that may appear in events and logs (default none).
    #[serde(default)]
    pub show_output: Vec<String>,
    /// The tool dedupes on the idempotency key the agent sends with every call
    /// (`_meta["agent/idempotency-key"]`, `RUN_ID:TOOL_CALL_ID`): a durable run
    /// that stopped during a call runs it again with the same key instead of
    /// reporting `outcome_unknown`. Only say so when the server really does.
    #[serde(default)]
    pub idempotent: bool,
}

/// How a server is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Transport {
    /// A child process speaking JSON-RPC on stdin/stdout.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Working directory.
        cwd: Option<PathBuf>,
    },
    /// Streamable HTTP.
    Http {
        /// The endpoint.
        url: String,
    },
}

impl Transport {
    /// `stdio` or `http`.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Stdio { .. } => "stdio",
            Self::Http { .. } => "http",
        }
    }
}

/// A configuration mistake, named by its key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum McpConfigError {
    /// The server id is not a valid namespace part.
    #[error(
        "mcp server id `{0}` must be 1 to 16 lowercase ASCII letters, digits or `-`, starting with a letter"
    )]
    InvalidServerId(String),
    /// Neither or both of `command` and `url`.
    #[error("mcp.servers.{0}: set exactly one of `command` (stdio) and `url` (HTTP)")]
    Transport(String),
    /// A key that only one transport understands.
    #[error("mcp.servers.{server}: `{key}` applies only to {transport} servers")]
    WrongTransport {
        /// Server id.
        server: String,
        /// The key.
        key: &'static str,
        /// The transport it belongs to.
        transport: &'static str,
    },
    /// The url is not http(s).
    #[error("mcp.servers.{server}.url: {message}")]
    Url {
        /// Server id.
        server: String,
        /// What is wrong.
        message: String,
    },
    /// A header that is not valid HTTP, or that carries credentials.
    #[error("mcp.servers.{server}.headers.{name}: {message}")]
    Header {
        /// Server id.
        server: String,
        /// Header name.
        name: String,
        /// What is wrong.
        message: String,
    },
    /// A timeout of zero or over an hour.
    #[error("mcp.servers.{server}.{key}: must be 1 to 3600 seconds")]
    Timeout {
        /// Server id.
        server: String,
        /// The key.
        key: &'static str,
    },
    /// A field path in `show_args`/`show_output` that does not parse.
    #[error("mcp.servers.{server}.tools.{tool}: {message}")]
    Field {
        /// Server id.
        server: String,
        /// Tool name.
        tool: String,
        /// What is wrong.
        message: String,
    },
}

/// Checks a server id: 1 to 16 of `[a-z0-9-]`, starting with a letter, so that
/// `mcp__<server>__<tool>` splits back into its parts unambiguously.
pub fn validate_server_id(id: &str) -> Result<(), McpConfigError> {
    let valid = !id.is_empty()
        && id.len() <= MAX_SERVER_ID_LEN
        && id.as_bytes()[0].is_ascii_lowercase()
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if valid {
        Ok(())
    } else {
        Err(McpConfigError::InvalidServerId(id.to_owned()))
    }
}

fn timeout(
    server: &str,
    key: &'static str,
    value: Option<u64>,
    default: Duration,
) -> Result<Duration, McpConfigError> {
    match value {
        None => Ok(default),
        Some(s) if (1..=3600).contains(&s) => Ok(Duration::from_secs(s)),
        Some(_) => Err(McpConfigError::Timeout {
            server: server.to_owned(),
            key,
        }),
    }
}

impl ServerConfig {
    /// Validates the table of server `id` and says how it is reached.
    pub fn transport(&self, id: &str) -> Result<Transport, McpConfigError> {
        validate_server_id(id)?;
        self.startup_timeout(id)?;
        self.call_timeout(id)?;
        for (tool, config) in &self.tools {
            config.redaction(id, tool)?;
        }
        match (&self.command, &self.url) {
            (Some(command), None) => {
                for (key, set) in [
                    ("headers", !self.headers.is_empty()),
                    ("connection", self.connection.is_some()),
                ] {
                    if set {
                        return Err(McpConfigError::WrongTransport {
                            server: id.to_owned(),
                            key,
                            transport: "HTTP",
                        });
                    }
                }
                Ok(Transport::Stdio {
                    command: command.clone(),
                    args: self.args.clone(),
                    cwd: self.cwd.clone(),
                })
            }
            (None, Some(url)) => {
                for (key, set) in [
                    ("args", !self.args.is_empty()),
                    ("env", !self.env.is_empty()),
                    ("cwd", self.cwd.is_some()),
                ] {
                    if set {
                        return Err(McpConfigError::WrongTransport {
                            server: id.to_owned(),
                            key,
                            transport: "stdio",
                        });
                    }
                }
                let parsed = reqwest::Url::parse(url).map_err(|e| McpConfigError::Url {
                    server: id.to_owned(),
                    message: e.to_string(),
                })?;
                if !matches!(parsed.scheme(), "http" | "https") {
                    return Err(McpConfigError::Url {
                        server: id.to_owned(),
                        message: "must be an http or https URL".into(),
                    });
                }
                if !parsed.username().is_empty() || parsed.password().is_some() {
                    return Err(McpConfigError::Url {
                        server: id.to_owned(),
                        message: "must not carry credentials (name a `connection`)".into(),
                    });
                }
                for (name, value) in &self.headers {
                    self.check_header(id, name, value)?;
                }
                Ok(Transport::Http { url: url.clone() })
            }
            _ => Err(McpConfigError::Transport(id.to_owned())),
        }
    }

    fn check_header(&self, id: &str, name: &str, value: &str) -> Result<(), McpConfigError> {
        let error = |message: &str| McpConfigError::Header {
            server: id.to_owned(),
            name: name.to_owned(),
            message: message.to_owned(),
        };
        let parsed = reqwest::header::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| error("not a valid header name"))?;
        reqwest::header::HeaderValue::from_str(value)
            .map_err(|_| error("not a valid header value"))?;
        if matches!(
            parsed.as_str(),
            "authorization" | "proxy-authorization" | "cookie"
        ) {
            return Err(error(
                "credentials do not belong in the config: name a `connection` instead",
            ));
        }
        if matches!(
            parsed.as_str(),
            "mcp-session-id" | "mcp-protocol-version" | "content-type" | "accept" | "host"
        ) {
            return Err(error("set by the transport itself"));
        }
        Ok(())
    }

    /// The startup timeout.
    pub fn startup_timeout(&self, id: &str) -> Result<Duration, McpConfigError> {
        timeout(
            id,
            "startup_timeout_s",
            self.startup_timeout_s,
            DEFAULT_STARTUP_TIMEOUT,
        )
    }

    /// The per-call timeout.
    pub fn call_timeout(&self, id: &str) -> Result<Duration, McpConfigError> {
        timeout(
            id,
            "call_timeout_s",
            self.call_timeout_s,
            DEFAULT_CALL_TIMEOUT,
        )
    }
}

impl ToolConfig {
    /// The redaction allowlists of the tool (empty lists: metadata only).
    pub fn redaction(&self, server: &str, tool: &str) -> Result<Redaction, McpConfigError> {
        let parse = |fields: &[String]| -> Result<Vec<FieldPath>, McpConfigError> {
            fields
                .iter()
                .map(|f| {
                    FieldPath::parse(f).map_err(|e| McpConfigError::Field {
                        server: server.to_owned(),
                        tool: tool.to_owned(),
                        message: format!("`{f}`: {e}"),
                    })
                })
                .collect()
        };
        Ok(Redaction {
            args: parse(&self.show_args)?,
            output: parse(&self.show_output)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stdio() -> ServerConfig {
        ServerConfig {
            command: Some("server".into()),
            ..Default::default()
        }
    }

    #[test]
    fn server_ids_keep_tool_ids_reversible() {
        for good in ["a", "notes", "gh-2", "abcdefghijklmnop"] {
            assert_eq!(validate_server_id(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            "Notes",
            "2gh",
            "a_b",
            "a__b",
            "-a",
            "abcdefghijklmnopq",
            "a.b",
        ] {
            assert!(validate_server_id(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn exactly_one_transport() {
        assert!(matches!(
            stdio().transport("s"),
            Ok(Transport::Stdio { .. })
        ));
        let both = ServerConfig {
            url: Some("http://127.0.0.1:1/mcp".into()),
            ..stdio()
        };
        assert_eq!(
            both.transport("s"),
            Err(McpConfigError::Transport("s".into()))
        );
        assert_eq!(
            ServerConfig::default().transport("s"),
            Err(McpConfigError::Transport("s".into()))
        );
    }

    #[test]
    fn keys_of_the_other_transport_are_refused() {
        let config = ServerConfig {
            connection: Some("gh".into()),
            ..stdio()
        };
        assert!(matches!(
            config.transport("s"),
            Err(McpConfigError::WrongTransport {
                key: "connection",
                ..
            })
        ));
        let config = ServerConfig {
            url: Some("http://127.0.0.1:1/mcp".into()),
            env: BTreeMap::from([("A".into(), "b".into())]),
            ..Default::default()
        };
        assert!(matches!(
            config.transport("s"),
            Err(McpConfigError::WrongTransport { key: "env", .. })
        ));
    }

    #[test]
    fn credentials_never_sit_in_urls_or_static_headers() {
        let config = ServerConfig {
            url: Some("http://user:pw@127.0.0.1:1/mcp".into()),
            ..Default::default()
        };
        assert!(matches!(
            config.transport("s"),
            Err(McpConfigError::Url { .. })
        ));
        let config = ServerConfig {
            url: Some("http://127.0.0.1:1/mcp".into()),
            headers: BTreeMap::from([("Authorization".into(), "Bearer x".into())]),
            ..Default::default()
        };
        let error = config.transport("s").unwrap_err().to_string();
        assert!(error.contains("connection"), "{error}");
        let config = ServerConfig {
            url: Some("ftp://127.0.0.1/mcp".into()),
            ..Default::default()
        };
        assert!(config.transport("s").is_err());
    }

    #[test]
    fn timeouts_are_bounded() {
        let config = ServerConfig {
            call_timeout_s: Some(0),
            ..stdio()
        };
        assert!(matches!(
            config.transport("s"),
            Err(McpConfigError::Timeout {
                key: "call_timeout_s",
                ..
            })
        ));
        assert_eq!(stdio().call_timeout("s"), Ok(DEFAULT_CALL_TIMEOUT));
    }

    #[test]
    fn debug_shows_no_env_or_header_values() {
        let config = ServerConfig {
            env: BTreeMap::from([("TOKEN".into(), "hunter2".into())]),
            ..stdio()
        };
        let shown = format!("{config:?}");
        assert!(
            shown.contains("TOKEN") && !shown.contains("hunter2"),
            "{shown}"
        );
    }
}
