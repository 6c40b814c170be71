//! Process checks for tests that start processes (shell commands, MCP servers) and
//! must show that none outlives its owner.

use std::path::Path;
use std::time::{Duration, Instant};

/// Whether process `pid` exists and has not exited. A zombie (exited, waiting to be
/// reaped) counts as gone. Linux only (reads `/proc`).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command name, which ends with the last `)`.
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Waits up to `limit` for `pid` to be gone; whether it is.
pub async fn wait_gone(pid: u32, limit: Duration) -> bool {
    let until = Instant::now() + limit;
    loop {
        if !alive(pid) {
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits up to `limit` for a file to exist; its content.
pub async fn wait_file(path: &Path, limit: Duration) -> Option<String> {
    let until = Instant::now() + limit;
    loop {
        if let Ok(text) = std::fs::read_to_string(path) {
            return Some(text);
        }
        if Instant::now() >= until {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits up to `limit` for a file holding a pid (as a process writes it); the pid.
pub async fn read_pid(path: &Path, limit: Duration) -> Option<u32> {
    wait_file(path, limit).await?.trim().parse().ok()
}

/// Opens `path` for appending, creating it: the log file a test server writes.
#[cfg(any(feature = "postgres", feature = "restate"))]
pub(crate) fn log_file(path: &Path) -> Result<std::fs::File, String> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))
}

/// Runs the example program `binary` offline: without the environment that
/// would point it at a real provider (`OPENAI_BASE_URL`, `OPENAI_API_KEY`,
/// `ANTHROPIC_API_KEY`, `GEMINI_API_KEY`, `AGENT_MODEL`), so it plays against
/// its loopback server. `Err` with its exit status and output when it does not
/// exit 0 (or cannot start).
pub fn run_offline(binary: &Path) -> Result<(), String> {
    let output = std::process::Command::new(binary)
        .env_remove("OPENAI_BASE_URL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("GEMINI_API_KEY")
        .env_remove("AGENT_MODEL")
        .output()
        .map_err(|e| format!("{}: cannot run: {e}", binary.display()))?;
    if output.status.success() {
        return Ok(());
    }
    Err(format!(
        "{}: {}\n--- stdout\n{}\n--- stderr\n{}",
        binary.display(),
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    ))
}
