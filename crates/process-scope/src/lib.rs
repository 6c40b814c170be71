//! A child process and everything it starts, killed together.
//!
//! A [`Scope`] is one child (the leader of its own process group) and a [`Marker`]:
//! a variable, unique to the scope, put in the child's environment, which every
//! process it starts inherits unless it clears its environment. [`Scope::sweep`]
//! kills, with `SIGKILL`, until none is left:
//!
//! - the process group;
//! - every descendant of the leader (found through `/proc`), repeatedly (a process
//!   forking while being killed is caught in the next round);
//! - every process started since the leader whose environment carries the marker,
//!   and its descendants: this finds processes that left the group and the tree
//!   (`setsid -f`, a double fork, `nohup cmd &`);
//! - with [`Scope::claiming_orphans`], every child of this process started since
//!   the leader: when this process is a child subreaper, an escaped descendant
//!   that cleared its environment is re-parented here, and only this rule finds
//!   it. Only for callers that start no other children meanwhile.
//!
//! Processes are signalled through pidfds after re-checking their start time, so
//! a recycled pid is never hit; zombies re-parented to this process are reaped.
//! Without `/proc` (not Linux) only the process group is killed.
//!
//! A sweep needs this process alive. For when it is killed, a [`Lifeline`] starts
//! a child so that it gets `SIGKILL` when this process dies (util-linux's `setpriv
//! --pdeathsig`, from [`on_spawner_thread`], a thread as long-lived as the process).
//!
//! process-scope depends on no project crate and reads no configuration: the
//! shell adapter (ai-host) and the MCP stdio transport (tools-mcp) both use it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

mod lifeline;

pub use lifeline::{Lifeline, on_spawner_thread};

/// A variable that marks every process of one scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marker {
    name: &'static str,
    value: String,
}

impl Marker {
    /// A fresh marker under the variable `name`: its value is unique to this
    /// process and call.
    pub fn new(name: &'static str) -> Self {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        Self {
            name,
            value: format!("{}-{n}-{nanos:x}", std::process::id()),
        }
    }

    /// The variable's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The variable's value (put both in the child's environment).
    pub fn value(&self) -> &str {
        &self.value
    }

    /// `NAME=value` as it appears in `/proc/<pid>/environ`.
    fn entry(&self) -> Vec<u8> {
        format!("{}={}", self.name, self.value).into_bytes()
    }
}

/// One child and everything it started (see the crate docs).
#[derive(Debug, Clone)]
pub struct Scope {
    leader: Option<i32>,
    /// Start time of the leader, in clock ticks since boot: older processes are
    /// never the scope's.
    started: u64,
    marker: Vec<u8>,
    claim_orphans: bool,
}

impl Scope {
    /// The scope of the child `leader` (its pid; `None` when it already exited),
    /// started with `marker` in its environment and as the leader of its own
    /// process group.
    pub fn new(leader: Option<u32>, marker: &Marker) -> Self {
        let leader = leader.and_then(|id| i32::try_from(id).ok());
        Self {
            leader,
            started: leader.and_then(start_time).unwrap_or(0),
            marker: marker.entry(),
            claim_orphans: false,
        }
    }

    /// Also kills every child of this process that started since the leader (see
    /// the crate docs); `claim` says whether that is safe now.
    pub fn claiming_orphans(mut self, claim: bool) -> Self {
        self.claim_orphans = claim;
        self
    }

    /// Kills the leader's process group (cheap; no `/proc` walk).
    pub fn kill_group(&self) {
        if let Some(pgid) = self.leader.and_then(rustix::process::Pid::from_raw) {
            // ESRCH (no such group) just means everything already exited.
            let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
        }
    }

    /// Kills every process of the scope and waits until none is left (blocking:
    /// call it off async threads). Returns how many processes it killed.
    pub fn sweep(&self) -> usize {
        self.kill_group();
        sweep(self)
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

/// The pids of the scope among `procs`: the group, the leader, marked or claimed
/// processes, and their descendants, transitively.
fn members(scope: &Scope, procs: &[ProcStat], me: i32) -> Vec<i32> {
    let mut mine: Vec<i32> = Vec::new();
    for p in procs {
        if p.pid == me {
            continue;
        }
        let in_group = scope.leader == Some(p.pgid);
        let is_leader = scope.leader == Some(p.pid);
        let recent = p.start >= scope.started;
        let orphan = scope.claim_orphans && recent && p.ppid == me;
        if in_group
            || is_leader
            || orphan
            || (recent && !p.zombie && carries_marker(p.pid, &scope.marker))
        {
            mine.push(p.pid);
        }
    }
    let mut grew = true;
    while grew {
        grew = false;
        for p in procs {
            if p.pid != me
                && !mine.contains(&p.pid)
                && (mine.contains(&p.ppid) || scope.leader == Some(p.ppid))
            {
                mine.push(p.pid);
                grew = true;
            }
        }
    }
    mine
}

fn sweep(scope: &Scope) -> usize {
    let me = i32::try_from(std::process::id()).unwrap_or(0);
    let mut killed: Vec<(i32, u64)> = Vec::new();
    for round in 0..SWEEP_ROUNDS {
        let procs = all_processes();
        let mine = members(scope, &procs, me);
        let mut live = 0;
        for p in procs.iter().filter(|p| mine.contains(&p.pid)) {
            if p.zombie {
                // Reap what was re-parented to us (never the leader: its owner
                // waits on it).
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
                    "killed the remaining processes of a scope"
                );
            }
            return killed.len();
        }
        std::thread::sleep(Duration::from_millis(if round < 5 { 2 } else { 20 }));
    }
    tracing::warn!("processes of a scope kept appearing; gave up");
    killed.len()
}

fn reap(pid: i32) {
    if let Some(pid) = rustix::process::Pid::from_raw(pid) {
        let _ = rustix::process::waitid(
            rustix::process::WaitId::Pid(pid),
            rustix::process::WaitIdOptions::EXITED | rustix::process::WaitIdOptions::NOHANG,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_are_unique_and_render_as_environ_entries() {
        let (a, b) = (Marker::new("X_SCOPE"), Marker::new("X_SCOPE"));
        assert_ne!(a.value(), b.value());
        assert_eq!(a.entry(), format!("X_SCOPE={}", a.value()).into_bytes());
    }

    /// A child that escapes into a new session (`setsid`) keeps the marker and is
    /// killed by the sweep; the leader's group goes too.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_sweep_kills_an_escaped_descendant() {
        use std::os::unix::process::CommandExt;
        let marker = Marker::new("PROCESS_SCOPE_TEST");
        let dir = std::env::temp_dir().join(format!("process-scope-{}", marker.value()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("temp dir: {e}"));
        let pidfile = dir.join("escapee");
        let script = format!(
            "setsid sh -c 'echo $$ > {0}.tmp; mv {0}.tmp {0}; exec sleep 600' & sleep 600",
            pidfile.display()
        );
        let mut child = std::process::Command::new("/bin/sh")
            .args(["-c", &script])
            .env(marker.name(), marker.value())
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn: {e}"));
        let escapee: i32 = (0..500)
            .find_map(|_| {
                std::thread::sleep(Duration::from_millis(10));
                std::fs::read_to_string(&pidfile).ok()?.trim().parse().ok()
            })
            .unwrap_or_else(|| panic!("the escapee never wrote its pid"));
        let scope = Scope::new(Some(child.id()), &marker);
        assert!(
            scope.sweep() >= 1,
            "the escapee, at least (the group died first)"
        );
        let _ = child.wait();
        let gone = (0..200).any(|_| {
            std::thread::sleep(Duration::from_millis(10));
            read_stat(escapee).is_none_or(|s| s.zombie)
        });
        assert!(gone, "the escapee {escapee} survived the sweep");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
