//! The harness every end-to-end test shares: a temporary home for one `agent` run
//! (workspace, `XDG_CONFIG_HOME`, `XDG_DATA_HOME`), running the real binary in it,
//! and reading its JSON-lines output.

use std::path::PathBuf;
use std::process::{Output, Stdio};
use std::time::Duration;

use agent_testing::server::{Recorded, data};
use serde_json::Value;

/// The model name passed with `--base-url`.
const MODEL: &str = "e2e-model";

/// A process's lease on its runs in tests that kill processes: two seconds,
/// so a run its killed owner left is taken over (or marked interrupted) two
/// seconds after the kill instead of ten (shorter leases lapse on a loaded
/// two-core machine, and the runs stop, as they must).
pub(crate) const SHORT_LEASE: &str = "[durable]\nlease_ms = 2000\n";

/// Whether this machine has every peer in `needed` (checked in order; the
/// first missing one skips the test, see [`agent_testing::peers::peer`]).
pub(crate) fn peers(needed: &[agent_testing::peers::Peer]) -> bool {
    needed
        .iter()
        .all(|peer| agent_testing::peers::peer(*peer).is_some())
}

/// A loopback port free just now.
pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Runs `command` to its end, within 60 s.
pub(crate) async fn finish(command: &mut tokio::process::Command) -> Output {
    tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .expect("the agent hung")
        .unwrap()
}

/// The stdout and stderr of `output`, once it is known to have exited 0.
pub(crate) fn succeeded(output: Output) -> (String, String) {
    let stdout = String::from_utf8(output.stdout).unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "stderr: {stderr}\nstdout: {stdout}"
    );
    (stdout, stderr)
}

/// Waits until the lease of a process killed just now has run out.
pub(crate) async fn lease_runs_out() {
    tokio::time::sleep(Duration::from_millis(2500)).await;
}

/// Sends `child` the signal `name`, as `kill` names it (`KILL`, `INT`, ...).
pub(crate) fn signal(child: &tokio::process::Child, name: &str) {
    let pid = child.id().unwrap().to_string();
    assert!(
        std::process::Command::new("kill")
            .args([&format!("-{name}"), &pid])
            .status()
            .unwrap()
            .success()
    );
}

/// Kills `child` with SIGKILL.
pub(crate) fn sigkill(child: &tokio::process::Child) {
    signal(child, "KILL");
}

/// The first line `child` writes on its (piped) stdout, within `within`;
/// `what` names the line in the failure.
pub(crate) async fn first_line(
    child: &mut tokio::process::Child,
    within: Duration,
    what: &str,
) -> String {
    use tokio::io::AsyncBufReadExt;
    let stdout = child.stdout.take().unwrap();
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    tokio::time::timeout(within, lines.next_line())
        .await
        .unwrap_or_else(|_| panic!("no {what} in time"))
        .unwrap()
        .unwrap_or_else(|| panic!("the process ended before it printed {what}"))
}

/// `curl` as uid 65534 (another local account) with `args`: the HTTP status
/// and the body.
pub(crate) async fn curl_as_nobody(args: &[&str]) -> (String, String) {
    let output = tokio::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .args(["curl", "-sS", "--max-time", "20", "-w", "\n%{http_code}"])
        .args(args)
        .output()
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let (body, status) = text.rsplit_once('\n').unwrap_or(("", &text));
    (status.to_owned(), body.to_owned())
}

/// `probe`'s value once `ready` holds for it, polling every 50 ms for at most
/// 10 s (then its last value, for the caller's assertion to show).
pub(crate) async fn eventually<T, F, Fut>(mut probe: F, ready: impl Fn(&T) -> bool) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let mut value = probe().await;
    for _ in 0..200 {
        if ready(&value) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        value = probe().await;
    }
    value
}

/// A temporary workspace with its own config and data folders, removed on drop, so
/// nothing touches the user's real folders.
pub(crate) struct Home {
    _dir: tempfile::TempDir,
    pub(crate) workspace: PathBuf,
    pub(crate) config_home: PathBuf,
    pub(crate) data_home: PathBuf,
    api_key: &'static str,
}

impl Home {
    /// A fresh home whose runs see `api_key` as `OPENAI_API_KEY`.
    pub(crate) fn new(api_key: &'static str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let workspace = base.join("ws");
        let config_home = base.join("config");
        let data_home = base.join("data");
        for d in [&workspace, &config_home, &data_home] {
            std::fs::create_dir_all(d).unwrap();
        }
        Self {
            _dir: dir,
            workspace,
            config_home,
            data_home,
            api_key,
        }
    }

    /// Writes `text` as the workspace's `agent.toml`.
    pub(crate) fn write_config(&self, text: &str) {
        std::fs::write(self.workspace.join("agent.toml"), text).unwrap();
    }

    /// Writes `text` as the user's own config (trusted by being theirs); its
    /// path.
    pub(crate) fn write_user_config(&self, text: &str) -> PathBuf {
        let dir = self.config_home.join("agent");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("agent.toml");
        std::fs::write(&path, text).unwrap();
        path
    }

    /// Writes `text` as the workspace's `agent.toml` and trusts it (a config
    /// that redirects requests or loosens the policy needs `agent trust`).
    pub(crate) async fn trust_config(&self, text: &str) {
        self.write_config(text);
        let (code, _, stderr) = self.run(None, &["trust"]).await;
        assert_eq!(code, 0, "agent trust: {stderr}");
    }

    /// The run store of this home's runs (the default SQLite file).
    pub(crate) async fn store(&self) -> agent_store::Store {
        agent_store::Store::open_sqlite(&self.data_home.join("agent/store.db"))
            .await
            .unwrap()
    }

    /// `agent [--base-url <base_url> --model e2e-model] <args>` in the workspace, with
    /// a clean environment, no stdin and piped output; killed when dropped.
    pub(crate) fn command(&self, base_url: Option<&str>, args: &[&str]) -> tokio::process::Command {
        self.command_via(&[], base_url, args)
    }

    /// [`Home::command`] started through `wrapper` (a program and its
    /// arguments, the agent's path and arguments after them), such as
    /// `unshare --pid --fork`.
    pub(crate) fn command_via(
        &self,
        wrapper: &[&str],
        base_url: Option<&str>,
        args: &[&str],
    ) -> tokio::process::Command {
        let agent = env!("CARGO_BIN_EXE_agent");
        let mut command = match wrapper.split_first() {
            Some((program, rest)) => {
                let mut command = tokio::process::Command::new(program);
                command.args(rest).arg(agent);
                command
            }
            None => tokio::process::Command::new(agent),
        };
        command.current_dir(&self.workspace);
        if let Some(base_url) = base_url {
            command.args(["--base-url", base_url, "--model", MODEL]);
        }
        command
            .args(args)
            .env_remove("OPENAI_BASE_URL")
            .env_remove("ANTHROPIC_BASE_URL")
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("AGENT_MODEL")
            .env_remove("RUST_LOG")
            .env("OPENAI_API_KEY", self.api_key)
            .env("XDG_CONFIG_HOME", &self.config_home)
            .env("XDG_DATA_HOME", &self.data_home)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        command
    }

    /// Runs [`Home::command`] to its end (within 60 s): exit code, stdout, stderr.
    pub(crate) async fn run(&self, base_url: Option<&str>, args: &[&str]) -> (i32, String, String) {
        let output = finish(&mut self.command(base_url, args)).await;
        (
            output.status.code().unwrap_or(-1),
            String::from_utf8(output.stdout).expect("stdout is UTF-8"),
            String::from_utf8(output.stderr).expect("stderr is UTF-8"),
        )
    }
}

/// The end of the streamed OpenAI turn `id`: its `finish_reason`, its usage
/// (`prompt` and `completion` tokens), then `[DONE]`.
pub(crate) fn turn_end(
    id: &str,
    finish_reason: &str,
    (prompt, completion): (u32, u32),
) -> [String; 3] {
    let total = prompt + completion;
    [
        data(&format!(
            r#"{{"id":"{id}","object":"chat.completion.chunk","choices":[{{"index":0,"delta":{{}},"finish_reason":"{finish_reason}"}}]}}"#
        )),
        data(&format!(
            r#"{{"id":"{id}","object":"chat.completion.chunk","choices":[],"usage":{{"prompt_tokens":{prompt},"completion_tokens":{completion},"total_tokens":{total}}}}}"#
        )),
        "data: [DONE]\n\n".into(),
    ]
}

/// Each line of `stdout` as one JSON value.
pub(crate) fn json_lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|line| serde_json::from_str(line).expect("each line is one JSON object"))
        .collect()
}

/// The first `tool_call_result` event in `stdout`.
pub(crate) fn result_event(stdout: &str) -> Value {
    json_lines(stdout)
        .into_iter()
        .find(|e| e["type"] == "tool_call_result")
        .unwrap_or_else(|| panic!("no tool_call_result in {stdout}"))
}

/// The messages the model was sent in `request`.
pub(crate) fn messages_of(request: &Recorded) -> impl Iterator<Item = &Value> {
    request.body["messages"].as_array().unwrap().iter()
}

/// The first message of `role` the model was sent in `request`.
pub(crate) fn first_message(request: &Recorded, role: &str) -> Value {
    let mut messages = messages_of(request);
    let found = messages.find(|m| m["role"] == role);
    found
        .unwrap_or_else(|| panic!("no {role} message in {}", request.body))
        .clone()
}

/// The names of the tools the model was offered in `request`, in order.
pub(crate) fn offered_tools(request: &Recorded) -> Vec<String> {
    let tools = request.body["tools"].as_array().unwrap();
    tools
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
        .collect()
}

/// The first `tool` message the model was sent in `request`.
pub(crate) fn tool_message(request: &Recorded) -> Value {
    first_message(request, "tool")
}

/// The text of the first `tool` message the model was sent in `request`
/// (empty when there is none, or it is not text).
pub(crate) fn tool_text(request: &Recorded) -> String {
    let tool = messages_of(request).find(|m| m["role"] == "tool");
    let text = tool.and_then(|m| m["content"].as_str());
    text.unwrap_or_default().to_owned()
}
