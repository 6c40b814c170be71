//! MCP servers' tools (feature `mcp`): [`stdio`] starts one server in one
//! call; the rest of `tools-mcp` is re-exported for several servers, HTTP
//! servers and connections.
//!
//! A server's tools are untrusted: each is `external_side_effect` (it needs an
//! approval, or an explicit policy) unless configured otherwise, and its
//! definitions are pinned: a tool whose name, description or schemas changed
//! since it was first seen is withheld until accepted (by deleting its line
//! from the pins file, or with `agent mcp pin`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use tools_mcp::{
    McpConfigError, McpSources, McpWarning, Pins, PinsError, ServerConfig, ServerHost, ToolConfig,
    inherited_env,
};

/// The pins file [`Stdio`] keeps by default, in the current directory.
pub const DEFAULT_PINS_FILE: &str = "agent-mcp.lock";

/// Why a server could not be started.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// The server's settings are invalid (its id, a timeout, a tool's fields).
    #[error(transparent)]
    Config(#[from] McpConfigError),
    /// The pins file does not parse.
    #[error(transparent)]
    Pins(#[from] PinsError),
    /// The pins file could not be read or written.
    #[error("the MCP pins file {path}: {source}")]
    PinsFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// One MCP server on stdio, configured: see [`stdio`].
#[derive(Debug, Clone)]
pub struct Stdio {
    id: String,
    config: ServerConfig,
    pins: Option<PathBuf>,
}

/// A stdio MCP server: `command` with `args`, started by [`Stdio::start`].
///
/// The child inherits `PATH`, `HOME`, `LANG`, `LC_ALL`, `TMPDIR` and `USER`
/// from this process (nothing else: add variables with [`Stdio::env`]). Its
/// id, the middle of its tools' ids (`mcp__<id>__<tool>`), is the command's
/// file name (lower-cased, other characters as `-`, 16 at most) unless
/// [`Stdio::id`] names one. Definitions are pinned in [`DEFAULT_PINS_FILE`]
/// unless [`Stdio::pins_file`] names another or [`Stdio::without_pins`]
/// turns pinning off (which is logged at every start).
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let files = agent::mcp::stdio("mcp-server-filesystem", ["/srv/data"]).start().await?;
/// let tools = files.tools();   // hand them to `Agent::builder(..).tools(..)`
/// # drop(tools); Ok(()) }
/// ```
pub fn stdio<I, S>(command: impl Into<String>, args: I) -> Stdio
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    let command = command.into();
    let config = ServerConfig {
        command: Some(command.clone()),
        args: args.into_iter().map(Into::into).collect(),
        ..ServerConfig::default()
    };
    Stdio {
        id: id_of(&command),
        config,
        pins: Some(PathBuf::from(DEFAULT_PINS_FILE)),
    }
}

/// A server id from a command: its file name, lower-cased, characters other
/// than letters, digits and `-` as `-`, starting with a letter, 16 at most.
fn id_of(command: &str) -> String {
    let name = Path::new(command)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(command);
    let mut id: String = name
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_lowercase() || c.is_ascii_digit() {
                c
            } else {
                '-'
            }
        })
        .skip_while(|c| !c.is_ascii_lowercase())
        .take(tools_mcp::MAX_SERVER_ID_LEN)
        .collect();
    if id.is_empty() {
        id.push_str("mcp");
    }
    id
}

impl Stdio {
    /// Names the server `id` (1 to 16 of `[a-z0-9-]`, starting with a letter).
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        self
    }

    /// Sets variable `name` for the child.
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.config.env.insert(name.into(), value.into());
        self
    }

    /// Starts the child in `dir`.
    pub fn cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        self.config.cwd = Some(dir.into());
        self
    }

    /// Settings of the server's tool `name` (its effect, the fields events
    /// may show).
    pub fn tool(mut self, name: impl Into<String>, config: ToolConfig) -> Self {
        self.config.tools.insert(name.into(), config);
        self
    }

    /// Trusts the server's `readOnlyHint` annotations (off by default).
    pub fn trust_annotations(mut self) -> Self {
        self.config.trust_annotations = true;
        self
    }

    /// Keeps the pins in `path` instead of [`DEFAULT_PINS_FILE`].
    pub fn pins_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.pins = Some(path.into());
        self
    }

    /// Pins nothing: a server whose definitions change is believed (a warning
    /// says so at every start).
    pub fn without_pins(mut self) -> Self {
        self.pins = None;
        self
    }

    /// Starts the server and lists its tools. A server that does not start
    /// is an [`McpSources::warnings`] entry (logged), not an error: its tools
    /// are not offered.
    pub async fn start(self) -> Result<McpSources, McpError> {
        let pins = match &self.pins {
            Some(path) => read_pins(path)?,
            None => {
                tracing::warn!(
                    server = %self.id,
                    "MCP definitions are not pinned: a changed tool is offered without asking"
                );
                Pins::default()
            }
        };
        let host = ServerHost {
            broker: None,
            inherited_env: inherited_env(std::env::vars_os()),
        };
        let configs = BTreeMap::from([(self.id.clone(), self.config)]);
        let sources = McpSources::start(&configs, &pins, host).await?;
        for warning in sources.warnings() {
            tracing::warn!(server = %warning.server, tool = ?warning.tool, "{}", warning.message);
        }
        if let (Some(path), Some(updated)) = (&self.pins, sources.updated_pins(&pins)) {
            std::fs::write(path, updated.render()).map_err(|source| McpError::PinsFile {
                path: path.clone(),
                source,
            })?;
        }
        Ok(sources)
    }
}

/// The pins in `path`; none when it does not exist.
fn read_pins(path: &Path) -> Result<Pins, McpError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Pins::parse(&text)?),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(Pins::default()),
        Err(source) => Err(McpError::PinsFile {
            path: path.to_owned(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::id_of;

    #[test]
    fn ids_come_from_the_command_name() {
        assert_eq!(id_of("/usr/bin/python3"), "python3");
        assert_eq!(id_of("mcp_server.Files"), "mcp-server-files");
        assert_eq!(id_of("9x"), "x");
        assert_eq!(id_of("/"), "mcp");
        assert_eq!(id_of("a-very-long-server-command-name").len(), 16);
    }
}
