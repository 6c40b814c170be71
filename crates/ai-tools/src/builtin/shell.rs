//! `core__exec_shell`: run a shell command in the workspace.
//!
//! The command reaches a process only through [`Shell`]. Before that, a denylist of
//! destructive commands (`rm -rf /`, `sudo`, `mkfs`, `dd if=`, fork bombs,
//! `shutdown`, `reboot`, ...) is checked after normalizing case, quotes and
//! whitespace. The denylist is a speed bump against accidents, not a security
//! boundary: a shell can spell any command in endless ways. The boundary is policy
//! (this tool requires approval by default) and the operating system.

use std::sync::Arc;
use std::time::Duration;

use ai_core::{
    ToolEffect,
    tool::{ModelView, Redaction, ToolCallContext, ToolErrorCode, ToolFailure},
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::Namespace;
use crate::capability::{Shell, ShellError, ShellRequest};
use crate::contract::ToolContract;

/// Default command timeout (30 s). The runner's runtime budget must be larger, so
/// that the tool's own timeout (which kills the process group) fires first; when the
/// runner's fires instead, cancellation kills the group too.
pub const DEFAULT_SHELL_TIMEOUT: Duration = Duration::from_secs(30);
/// Default cap per output stream (the tail is kept).
pub const DEFAULT_SHELL_OUTPUT_BYTES: usize = 32 * 1024;

/// Patterns refused anywhere in the normalized command, at word boundaries.
const DENIED: &[&str] = &[
    "rm -rf /",
    "rm -fr /",
    "rm -r -f /",
    "rm -rf ~",
    "rm -fr ~",
    "rm -rf *",
    "rm --no-preserve-root",
    "sudo",
    "doas",
    "su -",
    "mkfs",
    "dd if=",
    "shutdown",
    "reboot",
    "poweroff",
    "halt",
    "init 0",
    "init 6",
    "systemctl poweroff",
    "systemctl reboot",
    "chmod -r 777 /",
    "chown -r",
    "> /dev/sd",
    "of=/dev/",
    "format c:",
];

/// Patterns refused in the command with all whitespace removed (fork bombs).
const DENIED_COMPACT: &[&str] = &[":(){:|:&", "forkbomb"];

/// Lowercases, drops quotes and backslashes, and collapses whitespace.
fn normalize(command: &str) -> String {
    let lowered: String = command
        .chars()
        .filter(|c| !matches!(c, '"' | '\'' | '\\' | '`'))
        .flat_map(char::to_lowercase)
        .collect();
    lowered.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '-' || c == '/' || c == '.'
}

fn contains_at_boundary(haystack: &str, pattern: &str) -> bool {
    haystack.match_indices(pattern).any(|(i, _)| {
        let first = pattern.chars().next().is_some_and(is_word);
        let last = pattern.chars().last().is_some_and(is_word);
        let before_ok = !first || !haystack[..i].chars().next_back().is_some_and(is_word);
        let after = &haystack[i + pattern.len()..];
        let after_ok = !last
            || !after
                .chars()
                .next()
                .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '-' || c == '/');
        before_ok && after_ok
    })
}

/// Whether the denylist refuses `command` (after normalization). A speed bump, not a
/// boundary.
pub fn is_denied(command: &str) -> bool {
    let normalized = normalize(command);
    let compact: String = normalized.chars().filter(|c| !c.is_whitespace()).collect();
    DENIED.iter().any(|p| contains_at_boundary(&normalized, p))
        || DENIED_COMPACT.iter().any(|p| compact.contains(p))
}

/// Arguments of `core__exec_shell`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecShellArgs {
    /// The command line, run by `sh -c` in the workspace folder.
    pub command: String,
    /// Timeout in seconds (default 30; capped by configuration).
    #[serde(default)]
    pub timeout_secs: Option<u64>,
}

/// Output of `core__exec_shell`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct ShellResult {
    /// Exit code; null when a signal ended the command.
    pub exit_code: Option<i32>,
    /// Captured stdout (the tail when truncated).
    pub stdout: String,
    /// Captured stderr (the tail when truncated).
    pub stderr: String,
    /// Whether stdout was cut.
    pub stdout_truncated: bool,
    /// Whether stderr was cut.
    pub stderr_truncated: bool,
}

/// Runs a shell command with the workspace as working directory.
#[derive(Debug, Clone, Copy)]
pub struct ExecShell {
    /// Timeout when the model gives none.
    pub default_timeout: Duration,
    /// Largest timeout the model may ask for; keep it below the runner's budget.
    pub max_timeout: Duration,
    /// Cap per output stream.
    pub max_output_bytes: usize,
}

impl Default for ExecShell {
    fn default() -> Self {
        Self {
            default_timeout: DEFAULT_SHELL_TIMEOUT,
            max_timeout: DEFAULT_SHELL_TIMEOUT,
            max_output_bytes: DEFAULT_SHELL_OUTPUT_BYTES,
        }
    }
}

impl ToolContract for ExecShell {
    type Args = ExecShellArgs;
    type Output = ShellResult;
    type Capabilities = Arc<dyn Shell>;

    fn namespace(&self) -> Namespace {
        Namespace::core()
    }

    fn name(&self) -> &str {
        "exec_shell"
    }

    fn description(&self) -> &str {
        "Run a shell command (sh -c) in the workspace folder with a timeout. Returns the exit code and the tails of stdout and stderr."
    }

    fn effect(&self) -> ToolEffect {
        ToolEffect::ExternalSideEffect
    }

    fn redaction(&self) -> Redaction {
        Redaction::new(
            ["command", "timeout_secs"],
            ["exit_code", "stdout_truncated", "stderr_truncated"],
        )
        .unwrap_or_default()
    }

    async fn execute(
        &self,
        shell: &Arc<dyn Shell>,
        cx: &ToolCallContext,
        args: ExecShellArgs,
    ) -> Result<ShellResult, ToolFailure> {
        if args.command.trim().is_empty() {
            return Err(ToolFailure::new(
                ToolErrorCode::InvalidArgs,
                "the command is empty",
            ));
        }
        if args.command.contains('\0') {
            return Err(ToolFailure::new(
                ToolErrorCode::InvalidArgs,
                "the command contains a NUL byte",
            ));
        }
        if is_denied(&args.command) {
            tracing::warn!("exec_shell refused a command on the denylist");
            return Err(ToolFailure::new(
                ToolErrorCode::PermissionDenied,
                "the command matches the denylist of destructive commands and was not run",
            ));
        }
        let timeout = args
            .timeout_secs
            .map_or(self.default_timeout, Duration::from_secs)
            .min(self.max_timeout)
            .max(Duration::from_millis(1));
        let request = ShellRequest {
            command: args.command,
            timeout,
            max_output_bytes: self.max_output_bytes,
        };
        let outcome = shell.run(request, cx.cancel.clone()).await.map_err(|e| {
            let code = match e {
                ShellError::Timeout(_) => ToolErrorCode::Timeout,
                ShellError::Cancelled => ToolErrorCode::Cancelled,
                ShellError::Spawn(_) => ToolErrorCode::ExecutionFailed,
            };
            ToolFailure::new(code, e.to_string())
        })?;
        Ok(ShellResult {
            exit_code: outcome.exit_code,
            stdout: outcome.stdout,
            stderr: outcome.stderr,
            stdout_truncated: outcome.stdout_truncated,
            stderr_truncated: outcome.stderr_truncated,
        })
    }

    fn model_view(&self, output: &ShellResult) -> ModelView {
        let code = output
            .exit_code
            .map_or_else(|| "killed by a signal".to_owned(), |c| c.to_string());
        let mut text = format!("exit code: {code}\n");
        for (name, body, cut) in [
            ("stdout", &output.stdout, output.stdout_truncated),
            ("stderr", &output.stderr, output.stderr_truncated),
        ] {
            if body.is_empty() {
                continue;
            }
            let note = if cut { " (truncated, tail kept)" } else { "" };
            text.push_str(&format!("--- {name}{note} ---\n{body}"));
            if !body.ends_with('\n') {
                text.push('\n');
            }
        }
        ModelView::Text(text)
    }
}

#[cfg(test)]
mod tests {
    use super::is_denied;

    #[test]
    fn denylist_catches_normalized_spellings() {
        for cmd in [
            "rm -rf /",
            "RM  -RF   /",
            "rm -rf /*",
            "echo hi; sudo ls",
            "SUDO apt install x",
            "s\"u\"do ls",
            "mkfs.ext4 /dev/sda1",
            "dd if=/dev/zero of=x",
            ":(){ :|:& };:",
            ": ( ) { : | : & } ; :",
            "shutdown -h now",
            "reboot",
            "echo x && Reboot",
            "rm -rf ~",
        ] {
            assert!(is_denied(cmd), "{cmd}");
        }
        for cmd in [
            "ls -la",
            "rm -rf /tmp/build-dir",
            "rm -rf ./target",
            "echo pseudo",
            "cargo build --release",
            "grep halting README",
            "echo hello > out.txt",
        ] {
            assert!(!is_denied(cmd), "{cmd}");
        }
    }
}
