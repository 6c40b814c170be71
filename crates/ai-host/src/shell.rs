//! `LocalShell`: the real [`Shell`], `sh -c` in its own process group.
//!
//! The child runs with the workspace as working directory, stdin closed and an
//! environment scrubbed to [`ENV_ALLOWLIST`] (no API keys are inherited). It leads a
//! new process group; on timeout, cancellation, drop of the call (the runner's own
//! timeout) and after the shell exits, the whole group is sent `SIGKILL`, so no
//! background child outlives the call. stdout and stderr keep their last
//! `max_output_bytes` bytes.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use ai_core::CancellationToken;
use ai_tools::capability::{Shell, ShellError, ShellOutcome, ShellRequest};
use futures::future::BoxFuture;
use tokio::io::{AsyncRead, AsyncReadExt};

/// Environment variables passed through to commands; everything else is dropped.
pub const ENV_ALLOWLIST: &[&str] = &["PATH", "HOME", "LANG", "LC_ALL", "TERM", "TZ", "USER"];

/// How long output may keep flowing after the shell itself exited.
const DRAIN_GRACE: Duration = Duration::from_millis(300);

/// Runs commands with `sh -c` inside a folder.
#[derive(Debug, Clone)]
pub struct LocalShell {
    cwd: PathBuf,
    env: Vec<(String, String)>,
}

impl LocalShell {
    /// A shell running in `cwd` with the allowlisted variables of this process.
    pub fn new(cwd: impl Into<PathBuf>) -> Self {
        let env = std::env::vars()
            .filter(|(k, _)| ENV_ALLOWLIST.contains(&k.as_str()))
            .collect();
        Self::with_env(cwd, env)
    }

    /// A shell running in `cwd` with exactly `env` (allowlisted names only).
    pub fn with_env(cwd: impl Into<PathBuf>, env: Vec<(String, String)>) -> Self {
        let env = env
            .into_iter()
            .filter(|(k, _)| ENV_ALLOWLIST.contains(&k.as_str()))
            .collect();
        Self {
            cwd: cwd.into(),
            env,
        }
    }
}

/// Kills the process group when dropped.
struct GroupKill(Option<rustix::process::Pid>);

impl GroupKill {
    fn kill(&self) {
        if let Some(pgid) = self.0 {
            // ESRCH (no such group) just means everything already exited.
            let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
        }
    }
}

impl Drop for GroupKill {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Reads a stream to its end, keeping the last `cap` bytes.
async fn read_tail(mut stream: impl AsyncRead + Unpin, cap: usize) -> (Vec<u8>, bool) {
    let mut kept = Vec::new();
    let mut cut = false;
    let mut chunk = vec![0_u8; 8192];
    loop {
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                kept.extend_from_slice(&chunk[..n]);
                if kept.len() > cap.saturating_mul(2).max(8192) {
                    let excess = kept.len() - cap;
                    kept.drain(..excess);
                    cut = true;
                }
            }
        }
    }
    if kept.len() > cap {
        let excess = kept.len() - cap;
        kept.drain(..excess);
        cut = true;
    }
    (kept, cut)
}

impl Shell for LocalShell {
    fn run(
        &self,
        request: ShellRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'_, Result<ShellOutcome, ShellError>> {
        Box::pin(async move {
            let mut command = tokio::process::Command::new("/bin/sh");
            command
                .arg("-c")
                .arg(&request.command)
                .current_dir(&self.cwd)
                .env_clear()
                .envs(self.env.iter().map(|(k, v)| (k, v)))
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .process_group(0)
                .kill_on_drop(true);
            let mut child = command
                .spawn()
                .map_err(|e| ShellError::Spawn(e.kind().to_string()))?;
            let group = GroupKill(
                child
                    .id()
                    .and_then(|id| i32::try_from(id).ok())
                    .and_then(rustix::process::Pid::from_raw),
            );
            let cap = request.max_output_bytes;
            let stdout = child.stdout.take();
            let stderr = child.stderr.take();
            let out = tokio::spawn(async move {
                match stdout {
                    Some(s) => read_tail(s, cap).await,
                    None => (Vec::new(), false),
                }
            });
            let err = tokio::spawn(async move {
                match stderr {
                    Some(s) => read_tail(s, cap).await,
                    None => (Vec::new(), false),
                }
            });
            let abort = |group: &GroupKill| {
                group.kill();
                out.abort();
                err.abort();
            };
            let status = tokio::select! {
                biased;
                _ = cancel.cancelled() => {
                    abort(&group);
                    tracing::info!("exec_shell: cancelled; process group killed");
                    return Err(ShellError::Cancelled);
                }
                _ = tokio::time::sleep(request.timeout) => {
                    abort(&group);
                    tracing::info!(timeout_ms = request.timeout.as_millis() as u64, "exec_shell: timed out; process group killed");
                    return Err(ShellError::Timeout(request.timeout));
                }
                status = child.wait() => status.map_err(|e| ShellError::Spawn(e.kind().to_string()))?,
            };
            // Let the output drain, then kill leftovers (background children holding
            // the pipes open) so the readers see end-of-file.
            let drained = tokio::time::timeout(DRAIN_GRACE, async {
                while !(out.is_finished() && err.is_finished()) {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            })
            .await;
            group.kill();
            if drained.is_err() {
                tracing::debug!("exec_shell: output still open after exit; group killed");
            }
            let collect = |handle: tokio::task::JoinHandle<(Vec<u8>, bool)>| async move {
                match tokio::time::timeout(Duration::from_secs(2), handle).await {
                    Ok(Ok((bytes, cut))) => (String::from_utf8_lossy(&bytes).into_owned(), cut),
                    _ => (String::new(), true),
                }
            };
            let (stdout, stdout_truncated) = collect(out).await;
            let (stderr, stderr_truncated) = collect(err).await;
            Ok(ShellOutcome {
                exit_code: status.code(),
                stdout,
                stderr,
                stdout_truncated,
                stderr_truncated,
            })
        })
    }
}
