//! `LocalShell`: the real [`Shell`], `sh -c` in its own process group, and every
//! descendant killed when the call ends.
//!
//! The child runs with the workspace as working directory, stdin closed and an
//! environment scrubbed to [`ENV_ALLOWLIST`] (no API keys are inherited) plus one
//! marker variable, [`CALL_MARKER_VAR`], unique to the call. It leads a new process
//! group. When the call ends (the command exited, timed out, was cancelled, or the
//! call was dropped by the runner's own timeout), everything the command started is
//! killed with `SIGKILL` by a [`process_scope::Scope`] sweep: the process group,
//! every descendant of the shell, and every process started during the call whose
//! environment carries the call's marker (this finds processes that left the
//! group and the tree: `setsid -f`, a double fork, `nohup cmd &`), and their
//! descendants.
//!
//! When this process is a child subreaper
//! ([`become_child_subreaper`](crate::become_child_subreaper)), escaped descendants
//! are re-parented to it rather than to init: they are reaped after the kill, and a
//! shell built with [`LocalShell::claiming_orphans`] also kills any child of this
//! process that started during the call (only when no other call is running), which
//! catches a descendant that cleared its environment before escaping. Without a
//! subreaper, such a descendant is not found (the weaker guarantee; see SECURITY.md).
//! Output reader tasks are aborted when the call ends. stdout and stderr keep their
//! last `max_output_bytes` bytes.
//!
//! The sweep needs this process alive. So that a command does not outlive it when it
//! is killed (`SIGKILL`, the OOM killer), each command is started with a
//! [`process_scope::Lifeline`] when this machine has util-linux's `setpriv`:
//!
//! ```text
//! setpriv --pdeathsig KILL -- sh -c <guard> ... unshare ... --kill-child -- /bin/sh -c <command>
//! ```
//!
//! from this process's spawner thread ([`process_scope::on_spawner_thread`], a
//! thread that lives as long as the process: the parent-death signal follows the
//! thread that forked). When this process dies, `unshare` gets `SIGKILL`; its
//! `--kill-child` kills the namespace's first process, the command's shell, and
//! the kernel then kills everything else in the namespace: nothing the command
//! started runs on. Without a [`PidNamespace`], only the command's shell is killed:
//! it runs no further step of the command, but what it started (its children, the
//! rest of its group, escapees) runs to its own end. Without `setpriv`, nothing is
//! killed when this process dies (a warning says so, once).

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use ai_core::CancellationToken;
use ai_tools::capability::{Shell, ShellError, ShellOutcome, ShellRequest};
use futures::future::BoxFuture;
use process_scope::{Lifeline, Marker, Scope};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::task::JoinHandle;

/// Environment variables passed through to commands; everything else is dropped.
pub const ENV_ALLOWLIST: &[&str] = &["PATH", "HOME", "LANG", "LC_ALL", "TERM", "TZ", "USER"];

/// The variable that marks every process of one call (its value is unique per call).
pub const CALL_MARKER_VAR: &str = "AGENT_SHELL_CALL";

/// How long output may keep flowing after the shell itself exited.
const DRAIN_GRACE: Duration = Duration::from_millis(300);

/// Calls of shells that claim orphans, running now.
static CLAIMING_CALLS: AtomicUsize = AtomicUsize::new(0);

/// Runs commands with `sh -c` inside a folder.
#[derive(Debug, Clone)]
pub struct LocalShell {
    cwd: PathBuf,
    env: Vec<(String, String)>,
    claim_orphans: bool,
    pid_namespace: Option<PidNamespace>,
    lifeline: Option<Lifeline>,
}

/// Each command in its own PID namespace, with its own `/proc`.
///
/// A command then sees only the processes it started: it cannot read the
/// environment of this process's ancestors (a wrapper script, `make` or an IDE
/// task that launched the agent with the API key in its environment), nor that of
/// any other process, and everything it starts ends with it (a PID namespace ends
/// when its first process does), also when this process is killed (`unshare`,
/// started with a [`Lifeline`], dies with it, and `--kill-child` ends the
/// namespace). Built on util-linux's `unshare` (`--pid --fork --kill-child --mount
/// --mount-proc` inside `--user --map-current-user`, which needs unprivileged user
/// namespaces; commands keep the user's uid and gid); [`PidNamespace::probe`] says
/// whether this machine allows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PidNamespace {
    /// `unshare` and its options, before `-- /bin/sh -c <command>`.
    launcher: Vec<String>,
}

impl PidNamespace {
    /// Whether commands can get their own PID namespace here: runs a probe command
    /// that must see itself as process 1 through a fresh `/proc`. The error says
    /// why not (no `unshare`, namespaces not permitted, ...).
    pub fn probe() -> Result<Self, String> {
        let unshare = ["/usr/bin/unshare", "/bin/unshare"]
            .into_iter()
            .find(|path| std::path::Path::new(path).exists())
            .ok_or("util-linux's `unshare` is not installed")?;
        // A user namespace even for root: the agent drops CAP_SYS_ADMIN, without
        // which root may not create the other namespaces in its own.
        let launcher: Vec<String> = [
            unshare,
            "--user",
            "--map-current-user",
            "--pid",
            "--fork",
            "--kill-child",
            "--mount",
            "--mount-proc",
        ]
        .map(str::to_owned)
        .to_vec();
        let probe = r#"[ "$$" = 1 ] && read pid rest < /proc/self/stat && [ "$pid" = 1 ]"#;
        let output = std::process::Command::new(&launcher[0])
            .args(&launcher[1..])
            .args(["--", "/bin/sh", "-c", probe])
            .env_clear()
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("`unshare` could not run: {e}"))?;
        if output.status.success() {
            return Ok(Self { launcher });
        }
        let stderr = String::from_utf8_lossy(&output.stderr);
        let reason = stderr.lines().next().unwrap_or("the probe command failed");
        Err(format!(
            "a PID namespace with its own /proc is not permitted here ({})",
            ai_core::text::log_field(reason)
        ))
    }
}

impl LocalShell {
    /// A shell running in `cwd` with exactly `env` (allowlisted names only).
    pub fn with_env(cwd: impl Into<PathBuf>, env: Vec<(String, String)>) -> Self {
        let env = env
            .into_iter()
            .filter(|(k, _)| ENV_ALLOWLIST.contains(&k.as_str()))
            .collect();
        Self {
            cwd: cwd.into(),
            env,
            claim_orphans: false,
            pid_namespace: None,
            lifeline: Lifeline::get().cloned(),
        }
    }

    /// The same shell, running each command in its own PID namespace (see
    /// [`PidNamespace`]).
    pub fn in_pid_namespace(mut self, namespace: PidNamespace) -> Self {
        self.pid_namespace = Some(namespace);
        self
    }

    /// The same shell, also killing every child of this process that started during
    /// a call, when this process is a child subreaper and no other claiming call runs.
    /// Only for applications that start no child processes of their own while a
    /// command runs (the `agent` binary).
    pub fn claiming_orphans(mut self) -> Self {
        self.claim_orphans = true;
        self
    }

    /// The command up to `/bin/sh` (its `-c <command>` follows): with the lifeline
    /// when there is one, in the PID namespace when there is one.
    fn launcher(&self) -> tokio::process::Command {
        let mut argv: Vec<std::ffi::OsString> = match &self.pid_namespace {
            Some(namespace) => namespace.launcher.iter().map(Into::into).collect(),
            None => Vec::new(),
        };
        if !argv.is_empty() {
            argv.push("--".into());
        }
        argv.push("/bin/sh".into());
        if let Some(lifeline) = &self.lifeline {
            let mut chain = lifeline.argv(&argv[0]);
            chain.extend(argv.drain(1..));
            argv = chain;
        }
        let mut command = tokio::process::Command::new(&argv[0]);
        command.args(&argv[1..]);
        command
    }
}

/// Spawns `command` on the spawner thread ([`process_scope::on_spawner_thread`]),
/// so that its parent-death signal fires when this process dies and not when the
/// thread polling this call does. A child whose call was dropped meanwhile is
/// killed with its process group (`kill_on_drop` reaps it).
async fn spawn(
    mut command: tokio::process::Command,
    marker: Marker,
) -> std::io::Result<tokio::process::Child> {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return command.spawn();
    };
    let (sent, spawned) = tokio::sync::oneshot::channel();
    process_scope::on_spawner_thread(move || {
        // tokio's child handling registers with the runtime that waits on it.
        let _entered = runtime.enter();
        if let Err(Ok(orphan)) = sent.send(command.spawn()) {
            Scope::new(orphan.id(), &marker).kill_group();
        }
    });
    spawned
        .await
        .unwrap_or_else(|_| Err(std::io::Error::other("the spawner thread dropped a spawn")))
}

/// Kills the call's processes when dropped (the runner dropped the call).
struct Cleanup {
    scope: Option<Scope>,
    claiming: bool,
}

impl Cleanup {
    /// Kills everything of the call, off the async threads, and waits for it.
    async fn finish(mut self) {
        if let Some(scope) = self.scope.take() {
            let scope = scope.claiming_orphans(self.may_claim());
            let _ = tokio::task::spawn_blocking(move || scope.sweep()).await;
        }
        self.release();
    }

    /// Whether orphans may be claimed now: only by a claiming shell, when no other
    /// claiming call runs, in a child subreaper.
    fn may_claim(&self) -> bool {
        self.claiming
            && CLAIMING_CALLS.load(Ordering::SeqCst) <= 1
            && crate::process::is_child_subreaper()
    }

    fn release(&mut self) {
        if self.claiming {
            self.claiming = false;
            CLAIMING_CALLS.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if let Some(scope) = self.scope.take() {
            let scope = scope.claiming_orphans(self.may_claim());
            scope.kill_group();
            // No runtime to await here: sweep on a short-lived thread.
            let _ = std::thread::Builder::new()
                .name("agent-shell-sweep".to_owned())
                .spawn(move || scope.sweep());
        }
        self.release();
    }
}

/// One output reader: the kept tail and whether it was cut.
type Reader = JoinHandle<(Vec<u8>, bool)>;

/// Aborts output readers when the call ends, however it ends.
struct Readers([Option<Reader>; 2]);

impl Drop for Readers {
    fn drop(&mut self) {
        for handle in self.0.iter().flatten() {
            handle.abort();
        }
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
            let marker = Marker::new(CALL_MARKER_VAR);
            let mut command = self.launcher();
            command
                .arg("-c")
                .arg(&request.command)
                .current_dir(&self.cwd)
                .env_clear()
                .envs(self.env.iter().map(|(k, v)| (k, v)))
                .env(marker.name(), marker.value())
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .process_group(0)
                .kill_on_drop(true);
            let claiming = self.claim_orphans;
            if claiming {
                CLAIMING_CALLS.fetch_add(1, Ordering::SeqCst);
            }
            let mut cleanup = Cleanup {
                scope: None,
                claiming,
            };
            let mut child = spawn(command, marker.clone())
                .await
                .map_err(|e| ShellError::Spawn(e.kind().to_string()))?;
            cleanup.scope = Some(Scope::new(child.id(), &marker));
            let cap = request.max_output_bytes;
            let stdout = child.stdout.take();
            let stderr = child.stderr.take();
            let mut readers = Readers([
                Some(tokio::spawn(async move {
                    match stdout {
                        Some(s) => read_tail(s, cap).await,
                        None => (Vec::new(), false),
                    }
                })),
                Some(tokio::spawn(async move {
                    match stderr {
                        Some(s) => read_tail(s, cap).await,
                        None => (Vec::new(), false),
                    }
                })),
            ]);
            let status = tokio::select! {
                biased;
                _ = cancel.cancelled() => {
                    drop(readers);
                    cleanup.finish().await;
                    tracing::info!("exec_shell: cancelled; the command's processes were killed");
                    return Err(ShellError::Cancelled);
                }
                _ = tokio::time::sleep(request.timeout) => {
                    drop(readers);
                    cleanup.finish().await;
                    tracing::info!(timeout_ms = request.timeout.as_millis() as u64, "exec_shell: timed out; the command's processes were killed");
                    return Err(ShellError::Timeout(request.timeout));
                }
                status = child.wait() => status.map_err(|e| ShellError::Spawn(e.kind().to_string()))?,
            };
            // Let the output drain, then kill leftovers (background children holding
            // the pipes open) so the readers see end-of-file.
            let drained = tokio::time::timeout(DRAIN_GRACE, async {
                while !readers.0.iter().flatten().all(JoinHandle::is_finished) {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            })
            .await;
            cleanup.finish().await;
            if drained.is_err() {
                tracing::debug!("exec_shell: output still open after exit; leftovers killed");
            }
            let mut collect = |i: usize| {
                let handle = readers.0[i].take();
                async move {
                    let Some(handle) = handle else {
                        return (String::new(), true);
                    };
                    match tokio::time::timeout(Duration::from_secs(2), handle).await {
                        Ok(Ok((bytes, cut))) => (String::from_utf8_lossy(&bytes).into_owned(), cut),
                        _ => (String::new(), true),
                    }
                }
            };
            let (stdout, stdout_truncated) = collect(0).await;
            let (stderr, stderr_truncated) = collect(1).await;
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
