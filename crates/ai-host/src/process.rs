//! Process-wide hardening for the application that hosts the tools.
//!
//! Call [`harden_process`] once, first thing in `main`, before any thread (the async
//! runtime's included) is started: capabilities are per thread, and threads inherit
//! the creator's. Each step is also offered on its own.
//!
//! - [`make_non_dumpable`]: `PR_SET_DUMPABLE 0`. `/proc/<pid>/environ`, `mem`, `maps`
//!   and friends become unreadable to other processes of the same user, and so to
//!   every command the shell tool runs: the API key in this process's environment is
//!   not "one `cat` away". (`/proc/<pid>/cmdline` stays world-readable: never put a
//!   secret in arguments.)
//! - [`drop_introspection_capabilities`]: removes `CAP_SYS_PTRACE`, `CAP_SYS_ADMIN`
//!   and `CAP_PERFMON` (each lets a process read a non-dumpable process's environment
//!   and memory) from this thread's effective, permitted and inheritable sets and
//!   (when allowed) from its bounding set, so that a process running as root, and the
//!   commands it starts, cannot bypass non-dumpability. A root process keeps every
//!   other capability (and root can still read physical memory or load a module):
//!   run the agent as an ordinary user.
//! - [`become_child_subreaper`]: `PR_SET_CHILD_SUBREAPER`. A command's descendants
//!   that leave its process group and lose their parent (`setsid -f`, double forks,
//!   `nohup ... &`) are re-parented to this process instead of to init, so they stay
//!   in this process's tree, where [`LocalShell`](crate::LocalShell) finds and kills
//!   them when the call ends. Without it the shell still finds them by a marker in
//!   their environment (see the shell module), but a descendant that clears its
//!   environment and escapes is then out of reach.

use std::io;

/// What [`harden_process`] achieved, step by step.
#[derive(Debug)]
pub struct Hardening {
    /// `PR_SET_DUMPABLE 0`.
    pub non_dumpable: io::Result<()>,
    /// `CAP_SYS_PTRACE`, `CAP_SYS_ADMIN` and `CAP_PERFMON` dropped (a no-op
    /// success when none was held).
    pub capabilities_dropped: io::Result<()>,
    /// `PR_SET_CHILD_SUBREAPER 1`.
    pub subreaper: io::Result<()>,
}

impl Hardening {
    /// Whether every step succeeded.
    pub fn complete(&self) -> bool {
        self.non_dumpable.is_ok() && self.capabilities_dropped.is_ok() && self.subreaper.is_ok()
    }
}

/// Makes this process non-dumpable (see the module docs).
pub fn make_non_dumpable() -> io::Result<()> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)?;
        Ok(())
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "non-dumpable processes need Linux",
        ))
    }
}

/// Whether this process is non-dumpable.
pub fn is_non_dumpable() -> bool {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        matches!(
            rustix::process::dumpable_behavior(),
            Ok(rustix::process::DumpableBehavior::NotDumpable)
        )
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        false
    }
}

/// Drops the capabilities that bypass non-dumpability (`CAP_SYS_PTRACE`, and
/// `CAP_SYS_ADMIN` and `CAP_PERFMON`, which also grant read access to another
/// process's `/proc/<pid>/environ` and `mem`) from the calling thread's effective,
/// permitted and inheritable sets and, when allowed, from its bounding set, so the
/// threads and processes it starts afterwards cannot regain them; see the module
/// docs. A no-op for a process that holds none of them (any ordinary user).
pub fn drop_introspection_capabilities() -> io::Result<()> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        use rustix::thread::CapabilitySet;
        let dropped = [
            CapabilitySet::SYS_PTRACE,
            CapabilitySet::SYS_ADMIN,
            CapabilitySet::PERFMON,
        ];
        // The bounding set first (it needs CAP_SETPCAP, still held). Without that
        // capability, a root child could regain these on exec: reported, after the
        // thread's own sets are dropped anyway.
        let mut bounding = Ok(());
        for cap in dropped {
            if rustix::thread::capability_is_in_bounding_set(cap).unwrap_or(false)
                && let Err(e) = rustix::thread::remove_capability_from_bounding_set(cap)
            {
                bounding = Err(e);
            }
        }
        let all = dropped
            .into_iter()
            .fold(CapabilitySet::empty(), |acc, cap| acc | cap);
        let mut sets = rustix::thread::capabilities(None)?;
        if (sets.effective | sets.permitted | sets.inheritable).intersects(all) {
            sets.effective.remove(all);
            sets.permitted.remove(all);
            sets.inheritable.remove(all);
            rustix::thread::set_capabilities(None, sets)?;
        }
        Ok(bounding?)
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        Ok(())
    }
}

/// Makes this process a child subreaper (see the module docs).
pub fn become_child_subreaper() -> io::Result<()> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        rustix::process::set_child_subreaper(Some(rustix::process::getpid()))?;
        Ok(())
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "child subreapers need Linux",
        ))
    }
}

/// Whether this process is a child subreaper.
pub fn is_child_subreaper() -> bool {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        matches!(rustix::process::child_subreaper(), Ok(Some(_)))
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        false
    }
}

/// Raises this process's soft limit on open files to its hard limit (a server
/// holding many connections needs more than the common default of 1,024); the new
/// soft limit. Not a hardening step: call it where many descriptors are needed.
pub fn raise_open_file_limit() -> io::Result<u64> {
    #[cfg(unix)]
    {
        use rustix::process::{Resource, getrlimit, setrlimit};
        let mut limit = getrlimit(Resource::Nofile);
        if limit.current != limit.maximum {
            limit.current = limit.maximum;
            setrlimit(Resource::Nofile, limit)?;
        }
        Ok(limit.current.unwrap_or(u64::MAX))
    }
    #[cfg(not(unix))]
    {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "open-file limits need Unix",
        ))
    }
}

/// Every hardening step, in order; call first thing in `main`, before any thread
/// starts. Failures are reported, not fatal: log them.
pub fn harden_process() -> Hardening {
    Hardening {
        non_dumpable: make_non_dumpable(),
        capabilities_dropped: drop_introspection_capabilities(),
        subreaper: become_child_subreaper(),
    }
}
