//! `LocalShell`: the real [`Shell`], `sh -c` in its own process group, and every
//! descendant killed when the call ends.
//!
//! The child runs with the workspace as working directory, stdin closed and an
//! environment scrubbed to [`ENV_ALLOWLIST`] (no API keys are inherited) plus one
//! marker variable, [`CALL_MARKER_VAR`], unique to the call. It leads a new process
//! group. When the call ends (the command exited, timed out, was cancelled, or the
//! call was dropped by the runner's own timeout), everything the command started is
//! killed with `SIGKILL`:
//!
//! - the process group;
//! - every descendant of the shell (found through `/proc`), repeatedly until none
//!   is left (a process forking while being killed is caught in the next round);
//! - every process started during the call whose environment carries the call's
//!   marker, and its descendants: this finds processes that left the group and the
//!   tree (`setsid -f`, a double fork, `nohup cmd &`), which inherit the marker.
//!
//! Processes are signalled through pidfds after re-checking their start time, so a
//! recycled pid is never hit. When this process is a child subreaper
//! ([`become_child_subreaper`](crate::become_child_subreaper)), escaped descendants
//! are re-parented to it rather than to init: they are reaped after the kill, and a
//! shell built with [`LocalShell::claiming_orphans`] also kills any child of this
//! process that started during the call (only when no other call is running), which
//! catches a descendant that cleared its environment before escaping. Without a
//! subreaper, such a descendant is not found (the weaker guarantee; see SECURITY.md).
//! Output reader tasks are aborted when the call ends. stdout and stderr keep their
//! last `max_output_bytes` bytes.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use ai_core::CancellationToken;
use ai_tools::capability::{Shell, ShellError, ShellOutcome, ShellRequest};
use futures::future::BoxFuture;
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
            claim_orphans: false,
        }
    }

    /// The same shell, also killing every child of this process that started during
    /// a call, when this process is a child subreaper and no other claiming call runs.
    /// Only for applications that start no child processes of their own while a
    /// command runs (the `agent` binary).
    pub fn claiming_orphans(mut self) -> Self {
        self.claim_orphans = true;
        self
    }
}

/// What identifies one call's processes.
#[derive(Debug, Clone)]
struct CallScope {
    leader: Option<i32>,
    /// Start time of the leader, in clock ticks since boot: older processes are
    /// never the call's.
    started: u64,
    /// `NAME=value` as it appears in `/proc/<pid>/environ`.
    marker: Vec<u8>,
    claim_orphans: bool,
}

/// Kills the call's processes when dropped (the runner dropped the call).
struct Cleanup {
    scope: Option<CallScope>,
    claiming: bool,
}

impl Cleanup {
    fn kill_group(&self) {
        if let Some(pgid) = self
            .scope
            .as_ref()
            .and_then(|s| s.leader)
            .and_then(rustix::process::Pid::from_raw)
        {
            // ESRCH (no such group) just means everything already exited.
            let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
        }
    }

    /// Kills everything of the call, off the async threads, and waits for it.
    async fn finish(mut self) {
        self.kill_group();
        if let Some(scope) = self.scope.take() {
            let _ = tokio::task::spawn_blocking(move || sweep(&scope)).await;
        }
        self.release();
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
        self.kill_group();
        if let Some(scope) = self.scope.take() {
            // No runtime to await here: sweep on a short-lived thread.
            let _ = std::thread::Builder::new()
                .name("agent-shell-sweep".to_owned())
                .spawn(move || sweep(&scope));
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

fn marker_value() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{}-{n}-{nanos:x}", std::process::id())
}

impl Shell for LocalShell {
    fn run(
        &self,
        request: ShellRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'_, Result<ShellOutcome, ShellError>> {
        Box::pin(async move {
            let marker = marker_value();
            let mut command = tokio::process::Command::new("/bin/sh");
            command
                .arg("-c")
                .arg(&request.command)
                .current_dir(&self.cwd)
                .env_clear()
                .envs(self.env.iter().map(|(k, v)| (k, v)))
                .env(CALL_MARKER_VAR, &marker)
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
            let mut child = command
                .spawn()
                .map_err(|e| ShellError::Spawn(e.kind().to_string()))?;
            let leader = child.id().and_then(|id| i32::try_from(id).ok());
            cleanup.scope = Some(CallScope {
                leader,
                started: leader.and_then(start_time).unwrap_or(0),
                marker: format!("{CALL_MARKER_VAR}={marker}").into_bytes(),
                claim_orphans: claiming,
            });
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

/// One line of `/proc/<pid>/stat`, the fields the sweep needs.
#[derive(Debug, Clone, Copy)]
struct ProcStat {
    pid: i32,
    ppid: i32,
    pgid: i32,
    zombie: bool,
    start: u64,
}

fn read_stat(pid: i32) -> Option<ProcStat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid pgrp ...`: comm may hold spaces and parentheses.
    let rest = text.get(text.rfind(')')? + 1..)?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // fields[0] is the state (field 3); starttime is field 22.
    Some(ProcStat {
        pid,
        zombie: fields.first().is_some_and(|s| *s == "Z" || *s == "X"),
        ppid: fields.get(1)?.parse().ok()?,
        pgid: fields.get(2)?.parse().ok()?,
        start: fields.get(19)?.parse().ok()?,
    })
}

fn start_time(pid: i32) -> Option<u64> {
    read_stat(pid).map(|s| s.start)
}

fn all_processes() -> Vec<ProcStat> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(read_stat)
        .collect()
}

fn carries_marker(pid: i32, marker: &[u8]) -> bool {
    let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
        return false;
    };
    environ.split(|&b| b == 0).any(|var| var == marker)
}

/// Sends `SIGKILL` to `pid` if it is still the process that started at `start`.
fn kill_exact(pid: i32, start: u64) {
    let Some(target) = rustix::process::Pid::from_raw(pid) else {
        return;
    };
    #[cfg(target_os = "linux")]
    if let Ok(fd) = rustix::process::pidfd_open(target, rustix::process::PidfdFlags::empty()) {
        if start_time(pid) == Some(start) {
            let _ = rustix::process::pidfd_send_signal(&fd, rustix::process::Signal::KILL);
        }
        return;
    }
    if start_time(pid) == Some(start) {
        let _ = rustix::process::kill_process(target, rustix::process::Signal::KILL);
    }
}

/// Rounds of find-and-kill before giving up on a process that keeps forking.
const SWEEP_ROUNDS: usize = 50;

/// Kills every process of the call (see the module docs) and reaps those that were
/// re-parented to this process.
fn sweep(scope: &CallScope) {
    let me = i32::try_from(std::process::id()).unwrap_or(0);
    let claim = scope.claim_orphans
        && CLAIMING_CALLS.load(Ordering::SeqCst) <= 1
        && crate::process::is_child_subreaper();
    let mut killed: Vec<(i32, u64)> = Vec::new();
    for round in 0..SWEEP_ROUNDS {
        let procs = all_processes();
        let mut mine: Vec<i32> = Vec::new();
        for p in &procs {
            if p.pid == me {
                continue;
            }
            let in_group = scope.leader == Some(p.pgid);
            let is_leader = scope.leader == Some(p.pid);
            let recent = p.start >= scope.started;
            let orphan = claim && recent && p.ppid == me;
            if in_group
                || is_leader
                || orphan
                || (recent && !p.zombie && carries_marker(p.pid, &scope.marker))
            {
                mine.push(p.pid);
            }
        }
        // Descendants of everything found (and of the leader), transitively.
        let mut grew = true;
        while grew {
            grew = false;
            for p in &procs {
                if p.pid != me
                    && !mine.contains(&p.pid)
                    && (mine.contains(&p.ppid) || scope.leader == Some(p.ppid))
                {
                    mine.push(p.pid);
                    grew = true;
                }
            }
        }
        let mut live = 0;
        for p in procs.iter().filter(|p| mine.contains(&p.pid)) {
            if p.zombie {
                // Reap what was re-parented to us (never the leader: tokio waits on it).
                if p.ppid == me && scope.leader != Some(p.pid) {
                    reap(p.pid);
                }
                continue;
            }
            live += 1;
            kill_exact(p.pid, p.start);
            if !killed.contains(&(p.pid, p.start)) {
                killed.push((p.pid, p.start));
            }
        }
        if live == 0 {
            if round > 0 {
                tracing::debug!(
                    processes = killed.len(),
                    "exec_shell: killed the command's remaining processes"
                );
            }
            return;
        }
        std::thread::sleep(Duration::from_millis(if round < 5 { 2 } else { 20 }));
    }
    tracing::warn!("exec_shell: processes of a finished command kept appearing; gave up");
}

fn reap(pid: i32) {
    if let Some(pid) = rustix::process::Pid::from_raw(pid) {
        let _ = rustix::process::waitid(
            rustix::process::WaitId::Pid(pid),
            rustix::process::WaitIdOptions::EXITED | rustix::process::WaitIdOptions::NOHANG,
        );
    }
}
