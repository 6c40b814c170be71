//! `core__exec_shell` on real child processes: output, exit codes, caps, the
//! scrubbed environment, the denylist, and killing the whole process group on
//! timeout and cancellation.

use agent_testing::process::wait_gone;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ai_core::{
    CancellationToken,
    runner::ToolExecution,
    tool::{RegisteredTool, ToolErrorCode},
};
use ai_host::LocalShell;
use ai_tools::bind;
use ai_tools::builtin::ExecShell;
use ai_tools::capability::{Shell, ShellError, ShellRequest};
use serde_json::{Value, json};

use crate::support::{run, run_with};

/// How long a killed process may take to be gone.
const GONE: Duration = Duration::from_secs(5);

fn tool(dir: &Path, max_output_bytes: usize) -> RegisteredTool {
    let shell = LocalShell::with_env(
        dir,
        vec![
            ("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()),
            ("OPENAI_API_KEY".into(), "sk-must-not-leak".into()),
        ],
    );
    bind(
        ExecShell {
            default_timeout: Duration::from_secs(10),
            max_timeout: Duration::from_secs(10),
            max_output_bytes,
        },
        Arc::new(shell) as Arc<dyn Shell>,
    )
    .unwrap()
}

/// Asserts that the background child whose pid the command wrote to
/// `child.pid` in `dir` is gone (within [`GONE`]); `when` says since when.
async fn assert_child_gone(dir: &Path, when: &str) {
    let pid = read_pid(&dir.join("child.pid"));
    assert!(
        wait_gone(pid, GONE).await,
        "background child {pid} survived {when}"
    );
}

/// Runs `args` with `tool`, cancelling the call once the file `marker` exists.
async fn run_cancelled_at(tool: &RegisteredTool, args: &Value, marker: &Path) -> ToolExecution {
    let cancel = CancellationToken::new();
    let trigger = tokio::spawn({
        let (marker, cancel) = (marker.to_owned(), cancel.clone());
        async move {
            while !marker.exists() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            cancel.cancel();
        }
    });
    let (exec, _) = run_with(tool, args, &cancel).await;
    trigger.await.unwrap();
    exec
}

fn read_pid(path: &Path) -> u32 {
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && let Ok(pid) = text.trim().parse()
        {
            return pid;
        }
        assert!(Instant::now() < until, "no pid file");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[tokio::test]
async fn runs_in_the_workspace_and_returns_output_and_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("marker.txt"), "here").unwrap();
    let t = tool(dir.path(), 4096);
    let exec = run(
        &t,
        &json!({"command": "cat marker.txt; echo oops >&2; exit 3"}),
    )
    .await;
    assert!(exec.result.ok, "{:?}", exec.result);
    let out = exec.output.unwrap();
    assert_eq!(out["exit_code"], 3);
    assert_eq!(out["stdout"], "here");
    assert_eq!(out["stderr"], "oops\n");
    assert!(exec.model_content.contains("exit code: 3"));
    // stdout stays out of the redacted view.
    assert!(exec.result.value.unwrap().get("stdout").is_none());
}

#[tokio::test]
async fn the_environment_is_scrubbed() {
    let dir = tempfile::tempdir().unwrap();
    let t = tool(dir.path(), 4096);
    let exec = run(&t, &json!({"command": "env"})).await;
    let stdout = exec.output.unwrap()["stdout"].as_str().unwrap().to_owned();
    assert!(!stdout.contains("sk-must-not-leak"), "{stdout}");
    assert!(!stdout.contains("OPENAI_API_KEY"), "{stdout}");
    for line in stdout.lines() {
        let name = line.split('=').next().unwrap();
        assert!(
            [
                "PATH",
                "HOME",
                "LANG",
                "LC_ALL",
                "TERM",
                "TZ",
                "USER",
                "PWD",
                "SHLVL",
                "_",
                "AGENT_SHELL_CALL"
            ]
            .contains(&name),
            "unexpected variable {name}"
        );
    }
    // The real constructor inherits only allowlisted names from this process.
    let shell = LocalShell::with_env(dir.path(), std::env::vars().collect());
    let out = run_shell(&shell, "env", Duration::from_secs(5))
        .await
        .unwrap();
    assert!(!out.stdout.contains("CARGO_"), "{}", out.stdout);
}

#[tokio::test]
async fn output_is_capped_keeping_the_tail() {
    let dir = tempfile::tempdir().unwrap();
    let t = tool(dir.path(), 100);
    let exec = run(&t, &json!({"command": "seq 1 5000"})).await;
    let out = exec.output.unwrap();
    let stdout = out["stdout"].as_str().unwrap();
    assert!(stdout.len() <= 100);
    assert!(stdout.ends_with("4999\n5000\n"), "{stdout}");
    assert_eq!(out["stdout_truncated"], true);
    assert_eq!(out["stderr_truncated"], false);
}

#[tokio::test]
async fn the_denylist_refuses_before_running() {
    let dir = tempfile::tempdir().unwrap();
    let t = tool(dir.path(), 4096);
    for command in [
        "sudo touch pwned",
        "SUDO   touch pwned",
        "echo x; mkfs.ext4 /dev/null",
        ":(){ :|:& };:",
    ] {
        let exec = run(&t, &json!({"command": command})).await;
        assert_eq!(
            exec.result.error_code,
            Some(ToolErrorCode::PermissionDenied),
            "{command}"
        );
    }
    assert!(!dir.path().join("pwned").exists());
    let exec = run(&t, &json!({"command": "  "})).await;
    assert_eq!(exec.result.error_code, Some(ToolErrorCode::InvalidArgs));
}

#[tokio::test]
async fn a_timeout_kills_the_whole_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let t = tool(dir.path(), 4096);
    let started = Instant::now();
    let exec = run(
        &t,
        &json!({"command": "sleep 30 & echo $! > child.pid; wait", "timeout_secs": 1}),
    )
    .await;
    assert_eq!(
        exec.result.error_code,
        Some(ToolErrorCode::Timeout),
        "{:?}",
        exec.result
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_child_gone(dir.path(), "the timeout").await;
}

#[tokio::test]
async fn cancellation_kills_the_whole_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let t = tool(dir.path(), 4096);
    let args = json!({"command": "sleep 30 & echo $! > child.pid; wait"});
    let exec = run_cancelled_at(&t, &args, &dir.path().join("child.pid")).await;
    assert_eq!(
        exec.result.error_code,
        Some(ToolErrorCode::Cancelled),
        "{:?}",
        exec.result
    );
    assert_child_gone(dir.path(), "cancellation").await;
}

#[tokio::test]
async fn background_children_do_not_outlive_a_finished_command() {
    let dir = tempfile::tempdir().unwrap();
    let shell = LocalShell::with_env(dir.path(), vec![("PATH".into(), "/usr/bin:/bin".into())]);
    let started = Instant::now();
    let command = "sleep 30 & echo $! > child.pid; echo done";
    let out = run_shell(&shell, command, Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(out.exit_code, Some(0));
    assert_eq!(out.stdout, "done\n");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_child_gone(dir.path(), "the command").await;
}

#[tokio::test]
async fn the_adapter_reports_timeouts_and_spawn_failures() {
    let dir = tempfile::tempdir().unwrap();
    let shell = LocalShell::with_env(dir.path(), vec![]);
    let spin = run_shell(&shell, "while :; do :; done", Duration::from_millis(200));
    let err = spin.await.unwrap_err();
    assert!(matches!(err, ShellError::Timeout(_)));
    let missing = LocalShell::with_env(dir.path().join("missing"), vec![]);
    let err = run_shell(&missing, "true", Duration::from_secs(1))
        .await
        .unwrap_err();
    assert!(matches!(err, ShellError::Spawn(_)));
}

/// Commands whose processes leave the shell's process group, its tree, or both; each
/// writes the pid of the process that must not survive.
const ESCAPES: &[(&str, &str)] = &[
    (
        "setsid.pid",
        "setsid -f sh -c 'echo $$ > setsid.pid; exec sleep 100' >/dev/null 2>&1",
    ),
    ("double.pid", "(sleep 100 & echo $! > double.pid) &"),
    (
        "nohup.pid",
        "nohup sleep 100 >/dev/null 2>&1 & echo $! > nohup.pid",
    ),
    (
        "setsid_double.pid",
        "setsid sh -c '(sleep 100 & echo $! > setsid_double.pid) &' >/dev/null 2>&1",
    ),
];

fn escape_script(tail: &str) -> String {
    let mut script: Vec<&str> = ESCAPES.iter().map(|(_, c)| *c).collect();
    // Wait until every pid file exists, so the escapes happened before the end.
    script.push(
        "for f in setsid.pid double.pid nohup.pid setsid_double.pid; do \
         while [ ! -s $f ]; do sleep 0.01; done; done",
    );
    script.push(tail);
    script.join("\n")
}

async fn assert_escapes_gone(dir: &Path, when: &str) {
    for (file, _) in ESCAPES {
        let pid = read_pid(&dir.join(file));
        assert!(
            wait_gone(pid, GONE).await,
            "{when}: {file} ({pid}) survived"
        );
    }
}

#[tokio::test]
async fn escaped_processes_are_killed_when_the_call_ends() {
    let dir = tempfile::tempdir().unwrap();
    let t = tool(dir.path(), 4096);
    let started = Instant::now();
    let exec = run(&t, &json!({"command": escape_script("echo done")})).await;
    assert!(exec.result.ok, "{:?}", exec.result);
    assert_eq!(exec.output.unwrap()["stdout"], "done\n");
    assert!(started.elapsed() < Duration::from_secs(8));
    assert_escapes_gone(dir.path(), "finished").await;
}

#[tokio::test]
async fn escaped_processes_are_killed_on_timeout_and_cancellation() {
    let dir = tempfile::tempdir().unwrap();
    let t = tool(dir.path(), 4096);
    let exec = run(
        &t,
        &json!({"command": escape_script("sleep 30"), "timeout_secs": 2}),
    )
    .await;
    assert_eq!(exec.result.error_code, Some(ToolErrorCode::Timeout));
    assert_escapes_gone(dir.path(), "timeout").await;

    let dir = tempfile::tempdir().unwrap();
    let t = tool(dir.path(), 4096);
    let args = json!({"command": escape_script("touch ready; sleep 30")});
    let exec = run_cancelled_at(&t, &args, &dir.path().join("ready")).await;
    assert_eq!(exec.result.error_code, Some(ToolErrorCode::Cancelled));
    assert_escapes_gone(dir.path(), "cancel").await;
}

#[tokio::test]
async fn an_escaped_process_holding_the_output_pipe_does_not_keep_the_call_alive() {
    let dir = tempfile::tempdir().unwrap();
    let shell = LocalShell::with_env(dir.path(), vec![("PATH".into(), "/usr/bin:/bin".into())]);
    let started = Instant::now();
    // The escaped process keeps stdout and stderr open: without the kill, the output
    // readers would wait for end-of-file for 100 s.
    let command = "setsid -f sh -c 'echo $$ > held.pid; exec sleep 100'; \
                   while [ ! -s held.pid ]; do sleep 0.01; done; echo out";
    let out = run_shell(&shell, command, Duration::from_secs(20))
        .await
        .unwrap();
    assert_eq!(out.stdout, "out\n");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let pid = read_pid(&dir.path().join("held.pid"));
    assert!(wait_gone(pid, GONE).await, "{pid} survived");
}

/// A shell whose commands run in their own PID namespace, or the reason this
/// machine does not allow one (the test is then skipped, saying so).
fn isolated_shell(dir: &Path) -> Result<LocalShell, String> {
    let namespace = ai_host::PidNamespace::probe()?;
    let path = ("PATH".to_owned(), "/usr/local/bin:/usr/bin:/bin".to_owned());
    Ok(LocalShell::with_env(dir, vec![path]).in_pid_namespace(namespace))
}

async fn run_shell(
    shell: &LocalShell,
    command: &str,
    timeout: Duration,
) -> Result<ai_tools::capability::ShellOutcome, ShellError> {
    shell
        .run(
            ShellRequest {
                command: command.into(),
                timeout,
                max_output_bytes: 64 * 1024,
            },
            CancellationToken::new(),
        )
        .await
}

/// In its own PID namespace a command is process 1 of a fresh `/proc`: neither
/// this test process nor any ancestor of the agent is visible, so no environment
/// but its own can be read. Exit codes and timeouts work as without it.
#[tokio::test]
async fn in_its_own_pid_namespace_a_command_sees_only_its_own_processes() {
    let dir = tempfile::tempdir().unwrap();
    let shell = match isolated_shell(dir.path()) {
        Ok(shell) => shell,
        Err(reason) => {
            eprintln!(
                "SKIPPED in_its_own_pid_namespace_a_command_sees_only_its_own_processes: {reason}"
            );
            return;
        }
    };
    let me = std::process::id();
    let parent = std::os::unix::process::parent_id();
    let command = format!(
        "echo pid=$$; echo visible=$(ls /proc | grep -c '^[0-9]'); \
         for p in {me} {parent}; do test -e /proc/$p/environ && echo sees-$p; done; \
         cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c ^CARGO= ; exit 3"
    );
    let outcome = run_shell(&shell, &command, Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(outcome.exit_code, Some(3), "{outcome:?}");
    let out = &outcome.stdout;
    assert!(out.contains("pid=1\n"), "{out}");
    assert!(!out.contains("sees-"), "{out}");
    let visible: usize = out
        .lines()
        .find_map(|l| l.strip_prefix("visible="))
        .and_then(|n| n.parse().ok())
        .unwrap_or(usize::MAX);
    assert!(visible <= 4, "{visible} processes visible: {out}");
    // cargo's variables are in this test's environment, never in the command's.
    assert!(out.ends_with("0\n"), "{out}");
    let err = run_shell(&shell, "sleep 30", Duration::from_millis(300))
        .await
        .unwrap_err();
    assert!(matches!(err, ShellError::Timeout(_)), "{err:?}");
}

/// Set in this test binary's environment when it runs as the helper of the
/// process-death tests: the folder its command runs in.
const HELPER_DIR: &str = "AI_HOST_TEST_PROCESS_DEATH_DIR";
/// Set (to anything) when the helper's shell uses a PID namespace.
const HELPER_NAMESPACE: &str = "AI_HOST_TEST_PROCESS_DEATH_NAMESPACE";
/// The helper's command: it says it runs, sleeps, then acts.
const SLEEP_THEN_ACT: &str = "echo $$ > shell.pid; touch ready; sleep 2; echo late > effect.txt";

/// Not a test of its own: the process the process-death tests start (this test
/// binary, run again with [`HELPER_DIR`] set) and kill with `SIGKILL` while its
/// `LocalShell` command sleeps. Without the variable it does nothing.
#[test]
fn process_death_helper() {
    let Some(dir) = std::env::var_os(HELPER_DIR) else {
        return;
    };
    let path = ("PATH".to_owned(), "/usr/local/bin:/usr/bin:/bin".to_owned());
    let mut shell = LocalShell::with_env(&dir, vec![path]);
    if std::env::var_os(HELPER_NAMESPACE).is_some() {
        shell = shell.in_pid_namespace(ai_host::PidNamespace::probe().unwrap());
    }
    // As in the agent: a multi-threaded runtime.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let outcome = runtime.block_on(run_shell(&shell, SLEEP_THEN_ACT, Duration::from_secs(30)));
    panic!("the helper was not killed while its command ran: {outcome:?}");
}

/// The pids (with their start times) of every descendant of `ancestor`, from `/proc`.
fn descendants(ancestor: u32) -> Vec<(u32, String)> {
    let stats: Vec<(u32, u32, String)> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let (head, rest) = stat.rsplit_once(')')?;
            let comm = head.split_once('(')?.1.to_owned();
            let ppid = rest.split_whitespace().nth(1)?.parse().ok()?;
            Some((pid, ppid, comm))
        })
        .collect();
    let mut found: Vec<(u32, String)> = Vec::new();
    let mut grew = true;
    while grew {
        grew = false;
        for (pid, ppid, comm) in &stats {
            let below = *ppid == ancestor || found.iter().any(|(p, _)| p == ppid);
            if below && !found.iter().any(|(p, _)| p == pid) {
                found.push((*pid, comm.clone()));
                grew = true;
            }
        }
    }
    found
}

/// Runs the helper (in a PID namespace or not), waits until its command sleeps,
/// kills the helper with `SIGKILL`: the helper's descendants just before the
/// kill, and the folder the command runs in.
async fn kill_the_helper_while_its_command_sleeps(
    namespace: bool,
) -> (Vec<(u32, String)>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let mut helper = tokio::process::Command::new(std::env::current_exe().unwrap());
    helper
        .args([
            "--exact",
            "shell::process_death_helper",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(HELPER_DIR, dir.path())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .kill_on_drop(true);
    if namespace {
        helper.env(HELPER_NAMESPACE, "1");
    }
    let mut helper = helper.spawn().unwrap();
    let helper_pid = helper.id().unwrap();
    let until = Instant::now() + Duration::from_secs(20);
    let before = loop {
        let found = descendants(helper_pid);
        if dir.path().join("ready").exists() && found.iter().any(|(_, comm)| comm == "sleep") {
            break found;
        }
        assert!(Instant::now() < until, "the command never slept: {found:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    helper.start_kill().unwrap();
    helper.wait().await.unwrap();
    (before, dir)
}

/// The helper's command runs in a PID namespace, its launcher tied to the
/// helper: a `SIGKILL` of the helper ends every process of the command (the
/// launcher, the shell, its `sleep`) within a second, and the command's next
/// step never runs. (Without the lifeline the namespace outlived the helper, and
/// the command appended its line two seconds later.)
#[tokio::test]
async fn a_command_in_a_pid_namespace_dies_with_the_process_that_started_it() {
    let name = "a_command_in_a_pid_namespace_dies_with_the_process_that_started_it";
    if process_scope::Lifeline::get().is_none() {
        eprintln!("SKIPPED {name}: no `setpriv --pdeathsig` here");
        return;
    }
    if let Err(reason) = ai_host::PidNamespace::probe() {
        eprintln!("SKIPPED {name}: {reason}");
        return;
    }
    let (before, dir) = kill_the_helper_while_its_command_sleeps(true).await;
    for (pid, comm) in &before {
        assert!(
            wait_gone(*pid, Duration::from_secs(1)).await,
            "{comm} ({pid}) outlived the process that started it by a second: {before:?}"
        );
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        !dir.path().join("effect.txt").exists(),
        "the command acted after the process that started it was killed"
    );
}

/// Without a PID namespace the command's shell (the process group's leader) dies
/// with the helper, so it runs no further step; what it started (here `sleep`)
/// runs to its own end (see SECURITY.md).
#[tokio::test]
async fn without_a_pid_namespace_the_commands_shell_dies_with_the_process_that_started_it() {
    if process_scope::Lifeline::get().is_none() {
        eprintln!(
            "SKIPPED without_a_pid_namespace_the_commands_shell_dies_with_the_process_that_started_it: \
             no `setpriv --pdeathsig` here"
        );
        return;
    }
    let (before, dir) = kill_the_helper_while_its_command_sleeps(false).await;
    let shell = read_pid(&dir.path().join("shell.pid"));
    assert!(before.iter().any(|(pid, _)| *pid == shell), "{before:?}");
    assert!(
        wait_gone(shell, Duration::from_secs(1)).await,
        "the command's shell {shell} outlived the process that started it by a second"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        !dir.path().join("effect.txt").exists(),
        "the command acted after the process that started it was killed"
    );
}

/// The parent-death signal follows the thread that forked, so commands are
/// started from a thread that lives as long as the process: a call first polled
/// on a thread that then exits (as a worker replaced after `block_in_place`, or
/// an idle blocking thread) still runs its command to its end.
#[test]
fn a_command_started_while_polled_by_a_thread_that_exits_runs_to_its_end() {
    if process_scope::Lifeline::get().is_none() {
        eprintln!(
            "SKIPPED a_command_started_while_polled_by_a_thread_that_exits_runs_to_its_end: \
             no `setpriv --pdeathsig` here"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let shell = LocalShell::with_env(dir.path(), vec![("PATH".into(), "/usr/bin:/bin".into())]);
    let mut call: futures::future::BoxFuture<'static, _> = Box::pin(async move {
        run_shell(
            &shell,
            "touch started; sleep 1; echo ran to its end",
            Duration::from_secs(20),
        )
        .await
    });
    let handle = runtime.handle().clone();
    let started = dir.path().join("started");
    let call = std::thread::spawn(move || {
        let _entered = handle.enter();
        let waker = futures::task::noop_waker();
        let first = call
            .as_mut()
            .poll(&mut std::task::Context::from_waker(&waker));
        assert!(first.is_pending());
        // The thread ends once the command runs (its parent-death signal set).
        let until = Instant::now() + Duration::from_secs(10);
        while !started.exists() {
            assert!(Instant::now() < until, "the command never started");
            std::thread::sleep(Duration::from_millis(10));
        }
        call
    })
    .join()
    .unwrap();
    let outcome = runtime.block_on(call).unwrap();
    assert_eq!(outcome.exit_code, Some(0), "{outcome:?}");
    assert_eq!(outcome.stdout, "ran to its end\n");
}
