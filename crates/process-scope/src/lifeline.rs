//! Children that die with this process, even when it is killed with `SIGKILL`.
//!
//! A [`Scope`](crate::Scope) sweep runs only while this process lives: when it is
//! killed, nothing sweeps. A [`Lifeline`] closes that gap with the parent-death
//! signal (`PR_SET_PDEATHSIG`), set without `unsafe` code by util-linux's `setpriv
//! --pdeathsig KILL`, which sets it on itself and then execs the child's program
//! (the signal is kept across `exec` of any program that is not set-user-ID,
//! set-group-ID or file-capable). The chain a child is started through:
//!
//! ```text
//! setpriv --pdeathsig KILL -- /bin/sh -c '<guard>' <program> <this pid> <program> <args...>
//! ```
//!
//! The guard, `[ "$PPID" = "$1" ] || exit 125; shift; unset PWD; exec "$@"`, closes the race
//! `setpriv` leaves open: when this process died after the fork but before the
//! signal was set, no signal will ever come. The guard runs after it was set; it
//! reads its parent's pid (`$PPID` is `getppid()` at the shell's start): if that is
//! no longer this process, the parent died before the signal was armed and the
//! program is never started; if it still is, any later death sends the signal.
//! The program then replaces the guard (same pid, same process group, signal
//! kept), with the environment it was given: the guard unsets `PWD`, which a shell
//! sets and exports when it starts (a `PWD` given to the program is lost with it).
//!
//! The signal follows the *thread* that forked the child, not the process: a child
//! started from a thread that later exits (a blocking-pool thread after idling, a
//! worker replaced after `block_in_place`) would be killed then, with this process
//! alive. So children with a lifeline must be spawned by [`on_spawner_thread`]: a
//! thread that lives as long as the process.
//!
//! Only the child itself gets the signal (it is not inherited across `fork`): what
//! it started survives unless it ends with it, as a PID namespace's processes end
//! with the namespace's first process (`unshare --pid --fork --kill-child`).

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::mpsc::{self, Sender};
use std::sync::{Mutex, OnceLock};

/// The guard between `setpriv` and the program (see the module docs): `$1` is
/// the pid of the process that started it.
const GUARD: &str = r#"[ "$PPID" = "$1" ] || exit 125; shift; unset PWD; exec "$@""#;

/// Where util-linux's `setpriv` is looked for.
const SETPRIV: [&str; 2] = ["/usr/bin/setpriv", "/bin/setpriv"];

/// Starts children that get `SIGKILL` when this process dies (see the module
/// docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lifeline {
    setpriv: PathBuf,
}

impl Lifeline {
    /// This machine's lifeline, found and tried once per process; `None` (with a
    /// warning, once) when `setpriv --pdeathsig` does not work here (no util-linux
    /// `setpriv`, or one older than 2.33).
    pub fn get() -> Option<&'static Lifeline> {
        static FOUND: OnceLock<Option<Lifeline>> = OnceLock::new();
        FOUND
            .get_or_init(|| match Self::probe() {
                Ok(lifeline) => Some(lifeline),
                Err(reason) => {
                    tracing::warn!(
                        reason = %reason,
                        "child processes do not die with this process when it is killed"
                    );
                    None
                }
            })
            .as_ref()
    }

    /// Runs `/bin/sh -c 'exit 7'` through the chain: it must exit 7.
    fn probe() -> Result<Self, String> {
        let setpriv = SETPRIV
            .into_iter()
            .map(Path::new)
            .find(|path| path.exists())
            .ok_or("util-linux's `setpriv` is not installed")?;
        let lifeline = Self {
            setpriv: setpriv.to_path_buf(),
        };
        let argv = lifeline.argv("/bin/sh");
        let output = std::process::Command::new(&argv[0])
            .args(&argv[1..])
            .args(["-c", "exit 7"])
            .env_clear()
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .map_err(|e| format!("`setpriv` could not run: {e}"))?;
        if output.status.code() == Some(7) {
            return Ok(lifeline);
        }
        let stderr = String::from_utf8_lossy(&output.stderr);
        let first = stderr.lines().next().unwrap_or("no error output");
        Err(format!(
            "`setpriv --pdeathsig KILL` failed ({}): {}",
            output.status,
            first.chars().take(200).collect::<String>()
        ))
    }

    /// The program and arguments that start `program` with a lifeline: run
    /// `argv[0]` with `argv[1..]`, then `program`'s own arguments. Spawn it on
    /// [`on_spawner_thread`].
    pub fn argv(&self, program: impl AsRef<OsStr>) -> Vec<OsString> {
        let program = program.as_ref();
        vec![
            self.setpriv.clone().into_os_string(),
            "--pdeathsig".into(),
            "KILL".into(),
            "--".into(),
            "/bin/sh".into(),
            "-c".into(),
            GUARD.into(),
            // `$0`: the name the guard's own errors give ("<program>: exec: ...").
            program.to_owned(),
            std::process::id().to_string().into(),
            program.to_owned(),
        ]
    }
}

type Job = Box<dyn FnOnce() + Send>;

/// Runs `job` on this process's spawner thread, a thread that lives as long as
/// the process, so that a child `job` starts with a [`Lifeline`] is killed when
/// the process dies and only then (the parent-death signal follows the thread
/// that forked). Jobs run one at a time, in order: keep them short (a spawn). A
/// panicking job does not end the thread. When the thread cannot be started,
/// `job` runs on the calling thread (with a warning, once).
pub fn on_spawner_thread(job: impl FnOnce() + Send + 'static) {
    static SPAWNER: OnceLock<Option<Mutex<Sender<Job>>>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (sender, jobs) = mpsc::channel::<Job>();
        let started = std::thread::Builder::new()
            .name("process-spawner".to_owned())
            .spawn(move || {
                // The sender lives in a static: this loop ends with the process.
                for job in jobs {
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                }
            });
        match started {
            Ok(_) => Some(Mutex::new(sender)),
            Err(e) => {
                tracing::warn!(
                    error = %e,
                    "no spawner thread: children with a lifeline die with the thread that started them"
                );
                None
            }
        }
    });
    let job: Job = Box::new(job);
    let Some(spawner) = spawner else {
        return job();
    };
    let sent = spawner
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .send(job);
    if let Err(mpsc::SendError(job)) = sent {
        job();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The chain runs the program with its arguments, keeps its exit code, and
    /// starts nothing when its parent is not the process that started it.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_chain_runs_the_program_only_under_its_parent() {
        let Some(lifeline) = Lifeline::get() else {
            eprintln!("SKIPPED the_chain_runs_the_program_only_under_its_parent: no setpriv");
            return;
        };
        let argv = lifeline.argv("/bin/sh");
        let output = std::process::Command::new(&argv[0])
            .args(&argv[1..])
            .args(["-c", "echo \"$0 $1\"; exit 3", "-a", "b c"])
            .output()
            .unwrap_or_else(|e| panic!("spawn: {e}"));
        assert_eq!(output.status.code(), Some(3));
        assert_eq!(String::from_utf8_lossy(&output.stdout), "-a b c\n");

        // The environment reaches the program as it was given.
        let argv = lifeline.argv("/usr/bin/env");
        let output = std::process::Command::new(&argv[0])
            .args(&argv[1..])
            .env_clear()
            .env("ONLY", "this")
            .output()
            .unwrap_or_else(|e| panic!("spawn: {e}"));
        assert_eq!(String::from_utf8_lossy(&output.stdout), "ONLY=this\n");

        // Started by a shell in between (as after this process died and the child
        // was re-parented): the guard refuses.
        let mut args: Vec<OsString> = argv.clone();
        args.extend(["-c".into(), "echo ran".into()]);
        let output = std::process::Command::new("/bin/sh")
            .args(["-c", "\"$@\"; exit $?", "sh"])
            .args(&args)
            .output()
            .unwrap_or_else(|e| panic!("spawn: {e}"));
        assert_eq!(output.status.code(), Some(125));
        assert!(output.stdout.is_empty(), "{output:?}");
    }

    #[test]
    fn jobs_run_on_one_lasting_thread() {
        let (tx, rx) = mpsc::channel();
        for _ in 0..3 {
            let tx = tx.clone();
            on_spawner_thread(move || {
                let _ = tx.send(std::thread::current().id());
            });
        }
        on_spawner_thread(|| panic!("a panicking job"));
        let tx2 = tx.clone();
        on_spawner_thread(move || {
            let _ = tx2.send(std::thread::current().id());
        });
        let ids: Vec<_> = (0..4)
            .map(|_| {
                rx.recv_timeout(std::time::Duration::from_secs(5))
                    .unwrap_or_else(|e| panic!("{e}"))
            })
            .collect();
        assert!(ids.iter().all(|id| *id == ids[0]), "{ids:?}");
        assert_ne!(ids[0], std::thread::current().id());
    }
}
