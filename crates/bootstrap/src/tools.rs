//! Binds the built-in tools to real adapters for the CLI.

use std::path::{Path, PathBuf};
use std::time::Duration;

use ai_core::tool::RegisteredTool;

use crate::config::{AgentConfig, ConfigSource, WebSearchConfig};
use crate::trust::UserDirs;
use ai_host::{BindError, BuiltinConfig, SearchKey, WebSearchSettings, bind_builtin_tools};

/// The agent's state folder inside a workspace.
pub const STATE_DIR: &str = ".agent";
/// The config file looked for in the current directory.
pub const CONFIG_FILE: &str = "agent.toml";
/// The lock file beside a config file.
pub const LOCK_FILE: &str = "agent.lock";

/// The adapter configuration for `config`, with the user's folders from the
/// environment.
pub fn builtin_config(config: &AgentConfig) -> BuiltinConfig {
    let cwd = std::env::current_dir().unwrap_or_else(|_| config.workspace_root.clone());
    builtin_config_in(config, &UserDirs::from_env(), &cwd)
}

/// The adapter configuration for `config`, `dirs` and the current directory `cwd`.
///
/// Memory defaults to `<data home>/agent/<sha256 of the canonical workspace>/memory.db`
/// (outside the workspace; `<workspace>/.agent/memory.db` when no data home is
/// known); `workspace.memory_db` overrides it. The file tools may not write the
/// active config file, `agent.toml` and `agent.lock` in the current directory and the
/// workspace, the lock beside the config, the workspace's `.agent` folder, the user's
/// agent config folder (the trust store) and data folder, or the memory database.
///
/// The shell's own timeout stays one second under the runner's runtime budget (and
/// at most 30 s), so the tool reports its own timeout with the output it captured.
pub fn builtin_config_in(config: &AgentConfig, dirs: &UserDirs, cwd: &Path) -> BuiltinConfig {
    let root = config.workspace_root.clone();
    let memory_db = config
        .file
        .workspace
        .memory_db
        .clone()
        .map(|p| if p.is_absolute() { p } else { root.join(p) })
        .or_else(|| dirs.memory_db(&root))
        .unwrap_or_else(|| root.join(STATE_DIR).join("memory.db"));
    let mut builtin = BuiltinConfig::new(root.clone(), memory_db.clone());
    builtin.protected = protected_paths(config, dirs, cwd, &memory_db);
    builtin.shell_claims_orphans = true;
    builtin.shell_env = std::env::vars()
        .filter(|(name, _)| ai_host::ENV_ALLOWLIST.contains(&name.as_str()))
        .collect();
    builtin.web_allowlist = config.file.workspace.web_allow.clone();
    builtin.web_search = config
        .file
        .tools
        .web_search
        .as_ref()
        .map(web_search_settings);
    let budget = config.file.policy.budgets.max_runtime();
    builtin.shell_timeout = budget
        .saturating_sub(Duration::from_secs(1))
        .clamp(Duration::from_secs(1), Duration::from_secs(30));
    builtin
}

/// The adapter settings of `[tools.web_search]`, with the key read from the
/// variable the table names (or the provider's default variable).
pub fn web_search_settings(search: &WebSearchConfig) -> WebSearchSettings {
    let key = search.key_env().map(|env| {
        let value = std::env::var(env).ok();
        SearchKey::from_env(env, value)
    });
    let mut settings = WebSearchSettings::new(search.provider, search.url.clone(), key);
    settings.allowlist = search.allow_private.clone();
    settings.max_results = search.max_results;
    settings.timeout = Duration::from_millis(search.timeout_ms);
    settings
}

/// Everything the file tools must not write (see [`builtin_config_in`]).
pub fn protected_paths(
    config: &AgentConfig,
    dirs: &UserDirs,
    cwd: &Path,
    memory_db: &Path,
) -> Vec<PathBuf> {
    let mut paths = Vec::new();
    if let ConfigSource::File(file) = &config.source {
        let file = if file.is_absolute() {
            file.clone()
        } else {
            cwd.join(file)
        };
        if let Some(dir) = file.parent() {
            paths.push(dir.join(LOCK_FILE));
        }
        paths.push(file);
    }
    for dir in [cwd, config.workspace_root.as_path()] {
        paths.push(dir.join(CONFIG_FILE));
        paths.push(dir.join(LOCK_FILE));
    }
    paths.push(config.workspace_root.join(STATE_DIR));
    paths.extend(dirs.agent_config_dir());
    paths.extend(dirs.agent_data_dir());
    paths.push(memory_db.to_owned());
    for suffix in ["-wal", "-shm", "-journal"] {
        let mut name = memory_db.as_os_str().to_owned();
        name.push(suffix);
        paths.push(PathBuf::from(name));
    }
    paths.sort();
    paths.dedup();
    paths
}

/// Every built-in tool bound to its real capabilities (`core__web_search` only
/// with `[tools.web_search]`). Shell commands get their own PID namespace when
/// `workspace.shell_process_isolation` asks for it and the machine allows it; when
/// it does not, a warning says what that exposes. A search key variable that is
/// not set is warned about (each search then fails saying so).
pub fn bind(config: &AgentConfig) -> Result<Vec<RegisteredTool>, BindError> {
    let mut builtin = builtin_config(config);
    if let Some(key) = builtin.web_search.as_ref().and_then(|s| s.key.as_ref())
        && !key.is_set()
    {
        eprintln!(
            "agent: warning: core__web_search has no API key: the environment variable {} \
             (tools.web_search.api_key_env) is not set, so every search will fail until it is",
            key.env()
        );
    }
    if config.file.workspace.shell_process_isolation {
        match ai_host::PidNamespace::probe() {
            Ok(namespace) => builtin.shell_pid_namespace = Some(namespace),
            Err(reason) => eprintln!(
                "agent: warning: shell commands run without their own PID namespace ({reason}): \
                 an approved command can read the environment of your other processes, such as \
                 a wrapper script or IDE task that holds the API key. `[workspace] \
                 shell_process_isolation = false` accepts this and silences the warning; see \
                 SECURITY.md"
            ),
        }
    }
    bind_builtin_tools(&builtin)
}

/// The tools of `[client_tools]`, as `client__<name>` tools the web client runs.
pub fn client_tools(config: &AgentConfig) -> Result<Vec<RegisteredTool>, String> {
    config
        .file
        .client_tools
        .iter()
        .map(|(name, tool)| {
            let id = ai_core::ToolId::client(name)
                .map_err(|e| format!("client_tools.{name}: {e}"))?;
            if tool.parameters.get("type").and_then(|t| t.as_str()) != Some("object") {
                return Err(format!(
                    "client_tools.{name}.parameters must be a JSON Schema of an object (\"type\": \"object\")"
                ));
            }
            let schema = ai_core::schema::ValueSchema::compile(&tool.parameters)
                .map(|_| ())
                .map_err(|e| format!("client_tools.{name}.parameters: {e}"));
            schema?;
            let spec = ai_core::ToolSpec::new(
                id,
                tool.description.clone(),
                tool.parameters.clone(),
                tool.effect,
            );
            Ok(RegisteredTool::client(spec))
        })
        .collect()
}
