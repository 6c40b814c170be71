//! Binds the built-in tools to real adapters for the CLI.

use std::time::Duration;

use ai_core::RegisteredTool;

use crate::config::AgentConfig;
use ai_host::{BindError, BuiltinConfig, bind_builtin_tools};

/// The adapter configuration for `config`.
///
/// The shell's own timeout stays one second under the runner's runtime budget (and
/// at most 30 s), so the tool reports its own timeout with the output it captured.
pub fn builtin_config(config: &AgentConfig) -> BuiltinConfig {
    let root = config.workspace_root.clone();
    let memory_db = config
        .file
        .workspace
        .memory_db
        .clone()
        .map(|p| if p.is_absolute() { p } else { root.join(p) })
        .unwrap_or_else(|| root.join(".agent").join("memory.db"));
    let mut builtin = BuiltinConfig::new(root, memory_db);
    builtin.web_allowlist = config.file.workspace.web_allow.clone();
    let budget = config.file.policy.budgets.max_runtime();
    builtin.shell_timeout = budget
        .saturating_sub(Duration::from_secs(1))
        .clamp(Duration::from_secs(1), Duration::from_secs(30));
    builtin
}

/// Every built-in tool bound to its real capabilities.
pub fn bind(config: &AgentConfig) -> Result<Vec<RegisteredTool>, BindError> {
    bind_builtin_tools(&builtin_config(config))
}
