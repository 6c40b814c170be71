//! Running shell commands: the `Shell` capability.
//!
//! The trait knows no process API; the real adapter in `bootstrap` spawns `sh -c` in
//! its own process group with a scrubbed environment.

use std::time::Duration;

use ai_core::CancellationToken;
use futures::future::BoxFuture;

/// One command to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellRequest {
    /// The command line, run by `sh -c` with the workspace as working directory.
    pub command: String,
    /// After this long, the whole process group is killed.
    pub timeout: Duration,
    /// Most bytes kept from each of stdout and stderr (the tail is kept).
    pub max_output_bytes: usize,
}

/// What a finished command produced.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ShellOutcome {
    /// Exit code; `None` when a signal ended the process.
    pub exit_code: Option<i32>,
    /// Captured stdout (lossy UTF-8, tail kept).
    pub stdout: String,
    /// Captured stderr (lossy UTF-8, tail kept).
    pub stderr: String,
    /// Whether stdout was cut.
    pub stdout_truncated: bool,
    /// Whether stderr was cut.
    pub stderr_truncated: bool,
}

/// Why a command produced no outcome.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ShellError {
    /// The command outlived its timeout; its process group was killed.
    #[error("the command ran longer than {0:?} and was killed")]
    Timeout(Duration),
    /// The call was cancelled; the process group was killed.
    #[error("the command was cancelled and killed")]
    Cancelled,
    /// The shell could not be started.
    #[error("the command could not be started: {0}")]
    Spawn(String),
}

/// Runs commands. Object-safe.
pub trait Shell: Send + Sync {
    /// Runs one command; when `cancel` fires, the process group is killed.
    fn run(
        &self,
        request: ShellRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'_, Result<ShellOutcome, ShellError>>;
}
