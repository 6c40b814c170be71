//! MCP servers for the CLI: the lock file beside the config, the connection broker
//! over `[connections]`, and starting the servers of `[mcp.servers]`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tools_mcp::{
    ConnectionBroker, ConnectionError, Credential, McpSources, Pins, Secret, ServerHost,
};

use crate::config::{AgentConfig, ConfigSource, ConnectionConfig, ConnectionType};
use crate::tools::LOCK_FILE;

/// Resolves `[connections.NAME]` from the environment when a server connects.
#[derive(Debug, Clone)]
pub struct EnvBroker {
    connections: BTreeMap<String, ConnectionConfig>,
}

impl EnvBroker {
    /// A broker over these connections.
    pub fn new(connections: BTreeMap<String, ConnectionConfig>) -> Self {
        Self { connections }
    }
}

impl ConnectionBroker for EnvBroker {
    fn resolve(&self, connection: &str) -> Result<Credential, ConnectionError> {
        let config = self
            .connections
            .get(connection)
            .ok_or_else(|| ConnectionError::Unknown(connection.to_owned()))?;
        let value = std::env::var(&config.env)
            .ok()
            .filter(|v| !v.is_empty())
            .ok_or_else(|| ConnectionError::Unavailable {
                connection: connection.to_owned(),
                message: format!("environment variable {} is not set", config.env),
            })?;
        match config.kind {
            ConnectionType::Bearer => Ok(Credential::Bearer(Secret::new(value))),
        }
    }
}

/// The lock file of `config`: `agent.lock` beside the config file (the current
/// directory's when there is none).
pub fn lock_path(config: &AgentConfig) -> PathBuf {
    match &config.source {
        ConfigSource::File(file) => file
            .parent()
            .map(|dir| dir.join(LOCK_FILE))
            .unwrap_or_else(|| PathBuf::from(LOCK_FILE)),
        ConfigSource::Defaults => PathBuf::from(LOCK_FILE),
    }
}

/// Reads the pins (no file: none pinned yet).
pub fn read_pins(path: &Path) -> Result<Pins, String> {
    match std::fs::read_to_string(path) {
        Ok(text) => Pins::parse(&text).map_err(|e| format!("{}: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Pins::default()),
        Err(e) => Err(format!("cannot read {}: {e}", path.display())),
    }
}

/// Writes the pins atomically (a temporary file renamed over the old one).
pub fn write_pins(path: &Path, pins: &Pins) -> Result<(), String> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    let dir = dir.unwrap_or(Path::new("."));
    let mut file = tempfile::NamedTempFile::new_in(dir)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    std::io::Write::write_all(&mut file, pins.render().as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    file.persist(path)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(())
}

/// The started servers of `config` (none configured: `None`). Startup warnings go
/// to stderr; definitions seen for the first time are pinned in the lock file.
pub async fn start(config: &AgentConfig) -> Result<Option<McpSources>, String> {
    if config.file.mcp.servers.is_empty() {
        return Ok(None);
    }
    let path = lock_path(config);
    let pins = read_pins(&path)?;
    let broker: Arc<dyn ConnectionBroker> =
        Arc::new(EnvBroker::new(config.file.connections.clone()));
    let host = ServerHost {
        broker: Some(broker),
        inherited_env: tools_mcp::inherited_env(std::env::vars_os()),
    };
    let sources = McpSources::start(&config.file.mcp.servers, &pins, host)
        .await
        .map_err(|e| e.to_string())?;
    for warning in sources.warnings() {
        eprintln!("agent: warning: {warning}");
    }
    if let Some(updated) = sources.updated_pins(&pins)
        && let Err(e) = write_pins(&path, &updated)
    {
        eprintln!("agent: warning: {e}");
    }
    Ok(Some(sources))
}
