//! MCP servers end to end: `agent chat` calling a tool of a real MCP server (the
//! Python test server of tools-mcp) for a loopback scripted model, `agent tools`,
//! `agent mcp list|pin`, and no server process left after exit or cancel.

use std::path::{Path, PathBuf};
use std::time::Duration;

use agent_testing::peers::Peer;
use agent_testing::process::{read_pid, wait_file, wait_gone};

use agent_testing::server::{OpenAiServer, Reply};
use serde_json::{Value, json};

use crate::support::{Home, json_lines, offered_tools, peers, signal, tool_message};

const KEY: &str = "sk-e2e-mcp";

pub(crate) use agent_testing::mcp_servers::python;

/// The MCP test server's script.
pub(crate) fn script() -> String {
    agent_testing::mcp_servers::script("testserver.py")
}

/// The table of stdio server `id`: the MCP test server run with `args` (after
/// its script), given a minute to start.
pub(crate) fn server_table(id: &str, args: &[&str]) -> String {
    let mut all = vec![script()];
    all.extend(args.iter().map(|a| (*a).to_owned()));
    format!(
        "[mcp.servers.{id}]\ncommand = {}\nargs = {}\nstartup_timeout_s = 60\n",
        json!(python().display().to_string()),
        json!(all),
    )
}

/// A home whose user config (trusted by being theirs) has one stdio server `t`
/// writing its pid and markers into a state folder of its own.
struct Setup {
    state: tempfile::TempDir,
    home: Home,
    /// The config's path.
    config: PathBuf,
    /// The config's path, as `--config` takes it.
    config_arg: String,
}

impl Setup {
    /// The server started with `extra_args`; `None` (the test is skipped)
    /// without the MCP servers' Python.
    fn new(extra_args: &[&str]) -> Option<Self> {
        Self::with(extra_args, "")
    }

    /// [`Setup::new`] with `server_keys` (TOML lines) added to the server's table.
    fn with(extra_args: &[&str], server_keys: &str) -> Option<Self> {
        if !peers(&[Peer::Python]) {
            return None;
        }
        let state = tempfile::tempdir().unwrap();
        let home = Home::new(KEY);
        let config = user_config(&home, state.path(), extra_args, server_keys);
        let config_arg = config.display().to_string();
        Some(Self {
            state,
            home,
            config,
            config_arg,
        })
    }

    /// Writes the config again, the server started with `extra_args` and
    /// `server_keys` in its table.
    fn reconfigure(&self, extra_args: &[&str], server_keys: &str) {
        user_config(&self.home, self.state.path(), extra_args, server_keys);
    }

    /// The state folder the server writes into.
    fn state(&self) -> &Path {
        self.state.path()
    }

    /// `agent --config <config> <args>`, with the model at `base_url` if any:
    /// exit code, stdout, stderr.
    async fn run(&self, base_url: Option<&str>, args: &[&str]) -> (i32, String, String) {
        let mut all = vec!["--config", &self.config_arg];
        all.extend(args);
        self.home.run(base_url, &all).await
    }

    /// `agent tools --json`, which succeeds: the tools it lists, and its stderr.
    async fn tools(&self) -> (Vec<Value>, String) {
        let (code, stdout, stderr) = self.run(None, &["tools", "--json"]).await;
        assert_eq!(code, 0, "{stderr}");
        (json_lines(&stdout), stderr)
    }
}

/// Writes the user's own config with one stdio server `t` started with
/// `extra_args`, writing its pid and markers into `state`, and `server_keys`
/// (TOML lines) in its table; returns the config path.
fn user_config(home: &Home, state: &Path, extra_args: &[&str], server_keys: &str) -> PathBuf {
    let state = state.display().to_string();
    let mut args = vec!["--state-dir", &state];
    args.extend(extra_args);
    home.write_user_config(&format!(
        "{}{server_keys}\n\
         [mcp.servers.t.tools.echo]\neffect = \"read_only\"\nshow_args = [\"text\"]\n\n\
         [policy]\nallow = [\"mcp__t__*\"]\n",
        server_table("t", &args),
    ))
}

/// The pid the stdio server wrote into `state`.
async fn server_pid(state: &Path) -> u32 {
    read_pid(&state.join("pid-stdio"), Duration::from_secs(60))
        .await
        .expect("the server wrote its pid")
}

/// Asserts the server `pid` ends within 5 s (it must not outlive the agent).
async fn assert_gone(pid: u32) {
    assert!(
        wait_gone(pid, Duration::from_secs(5)).await,
        "server {pid} outlived the agent"
    );
}

/// The listed tool `id` of `listed`.
fn find(listed: &[Value], id: &str) -> Value {
    listed
        .iter()
        .find(|t| t["id"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("{id} not in {listed:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_calls_an_mcp_tool_and_no_server_outlives_the_run() {
    let Some(setup) = Setup::new(&[]) else {
        return;
    };
    let server = OpenAiServer::start([
        Reply::tool_calls(&[("call_m1", "mcp__t__echo", json!({"text": "from the model"}))]),
        Reply::text("The server echoed it."),
    ])
    .await
    .unwrap();
    let (code, stdout, stderr) = setup
        .run(
            Some(&server.base_url()),
            &["chat", "--json", "Echo something"],
        )
        .await;
    assert_eq!(code, 0, "stderr: {stderr}\nstdout: {stdout}");
    let events = json_lines(&stdout);
    let start = events
        .iter()
        .find(|e| e["type"] == "tool_call_start")
        .unwrap();
    assert_eq!(start["tool_name"], "mcp__t__echo");
    assert_eq!(
        start["args"],
        json!({"text": "from the model"}),
        "show_args lets `text` through"
    );
    let result = events
        .iter()
        .find(|e| e["type"] == "tool_call_result")
        .unwrap();
    assert_eq!(result["ok"], true, "{result}");
    // Output fields are not listed: the event carries no content.
    assert_eq!(result["result"], json!({}));
    let requests = server.requests();
    let offered = offered_tools(&requests[0]);
    let offers = |name: &str| offered.iter().any(|t| t == name);
    assert!(
        offers("mcp__t__echo") && offers("mcp__t__add"),
        "{offered:?}"
    );
    assert!(!offers("mcp__t__weird"), "kept out: untranslatable schema");
    assert!(
        stderr.contains("weird") && stderr.contains("/properties/shape/oneOf"),
        "{stderr}"
    );
    assert_eq!(tool_message(&requests[1])["content"], "from the model");
    // First sight pinned every definition beside the config.
    let lock = std::fs::read_to_string(setup.config.with_file_name("agent.lock")).unwrap();
    assert!(
        lock.contains("[servers.t]") && lock.contains("echo = \"sha256:"),
        "{lock}"
    );
    // The server ended with the command.
    assert_gone(server_pid(setup.state()).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_during_an_mcp_call_cancels_it_and_ends_the_server() {
    let Some(setup) = Setup::new(&[]) else {
        return;
    };
    let server = OpenAiServer::start([
        Reply::tool_calls(&[("call_s", "mcp__t__slow", json!({"seconds": 60}))]),
        Reply::text("unused"),
    ])
    .await
    .unwrap();
    let mut child = setup
        .home
        .command(
            Some(&server.base_url()),
            &[
                "--config",
                &setup.config_arg,
                "chat",
                "--approve",
                "--json",
                "Be slow",
            ],
        )
        .spawn()
        .unwrap();
    let Some(pid) = read_pid(&setup.state().join("pid-stdio"), Duration::from_secs(60)).await
    else {
        let _ = child.start_kill();
        let output = child.wait_with_output().await.unwrap();
        panic!(
            "the server never started; agent stderr: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    };
    // Wait until the agent has started the call (its `tool_call_start` event), then a
    // moment for the request to reach the server: Ctrl-C must land mid-call.
    let stdout = child.stdout.take().unwrap();
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stdout));
    let started = tokio::time::timeout(Duration::from_secs(30), async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains("\"tool_call_start\"") && line.contains("mcp__t__slow") {
                return true;
            }
        }
        false
    })
    .await;
    assert_eq!(started.ok(), Some(true), "the agent started the slow call");
    tokio::time::sleep(Duration::from_millis(500)).await;
    signal(&child, "INT");
    let output = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("the agent exits after ctrl-c")
        .unwrap();
    assert_eq!(output.code(), Some(1), "a cancelled run is a run error");
    assert!(
        wait_file(
            &setup.state().join("cancelled-slow"),
            Duration::from_secs(5)
        )
        .await
        .is_some(),
        "the server saw notifications/cancelled"
    );
    assert_gone(pid).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_list_tools_and_pin_show_and_accept_changed_definitions() {
    let Some(setup) = Setup::new(&[]) else {
        return;
    };
    let (code, stdout, stderr) = setup.run(None, &["mcp", "list", "--json"]).await;
    assert_eq!(code, 0, "{stderr}");
    let servers = json_lines(&stdout);
    assert_eq!(servers[0]["id"], "t");
    assert_eq!(servers[0]["transport"], "stdio");
    assert!(
        servers[0]["status"]
            .as_str()
            .unwrap()
            .starts_with("connected")
    );
    let tools = servers[0]["tools"].as_array().unwrap();
    let echo = tools.iter().find(|t| t["name"] == "echo").unwrap();
    assert_eq!(echo["pin"], "first_sight");
    assert_eq!(echo["effect"], "read_only");
    assert_eq!(echo["description"], "Echoes the text back.");

    // The server changes a definition: it is withheld until pinned.
    setup.reconfigure(&["--variant", "2"], "");
    let (listed, stderr) = setup.tools().await;
    let echo = find(&listed, "mcp__t__echo");
    assert_eq!(echo["pin"], "changed");
    assert_eq!(echo["decision"], "allow");
    assert!(
        echo["withheld"]
            .as_str()
            .unwrap()
            .contains("agent mcp pin t"),
        "{echo}"
    );
    assert_eq!(find(&listed, "mcp__t__add")["pin"], "pinned");
    assert!(stderr.contains("agent mcp pin t"), "{stderr}");

    let (code, stdout, stderr) = setup.run(None, &["mcp", "pin", "t"]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("pinned 16 tool definition(s) of `t`"),
        "{stdout}"
    );
    let echo = find(&setup.tools().await.0, "mcp__t__echo");
    assert_eq!(echo["pin"], "pinned");
    assert!(echo.get("withheld").is_none(), "{echo}");

    let (code, _, stderr) = setup.run(None, &["mcp", "pin", "nope"]).await;
    assert_eq!(code, 2);
    assert!(stderr.contains("`nope` is not configured"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_project_config_with_an_mcp_server_needs_trust() {
    let home = Home::new(KEY);
    home.write_config("[mcp.servers.t]\ncommand = \"/bin/true\"\n");
    let (code, _, stderr) = home.run(None, &["tools"]).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("mcp.servers.t"), "{stderr}");
    assert!(stderr.contains("agent trust"), "{stderr}");
}

/// A tool that a pinned server starts listing is withheld in every later process
/// until `agent mcp pin` (before, each new process pinned it on first sight,
/// wrote it to `agent.lock` and offered it to the model).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_a_pinned_server_starts_listing_is_withheld_in_every_later_process() {
    let Some(setup) = Setup::new(&[]) else {
        return;
    };
    let lock_path = setup.config.with_file_name("agent.lock");
    let (code, _, stderr) = setup.run(None, &["mcp", "list", "--json"]).await;
    assert_eq!(code, 0, "{stderr}");
    let pinned = std::fs::read_to_string(&lock_path).unwrap();
    assert!(pinned.contains("echo = \"sha256:"), "{pinned}");

    // The server now also lists `late`. Two later processes: neither pins it.
    setup.reconfigure(&["--extra-tool", "late"], "");
    for _ in 0..2 {
        let (listed, stderr) = setup.tools().await;
        let late = find(&listed, "mcp__t__late");
        assert_eq!(late["pin"], "unpinned", "{late}");
        assert!(
            late["withheld"]
                .as_str()
                .unwrap()
                .contains("agent mcp pin t"),
            "{late}"
        );
        assert!(
            stderr.contains("late") && stderr.contains("withheld"),
            "{stderr}"
        );
        assert_eq!(
            std::fs::read_to_string(&lock_path).unwrap(),
            pinned,
            "the lock is unchanged"
        );
    }
    // A run does not offer it, and says why.
    let model = OpenAiServer::start([Reply::text("Nothing to do.")])
        .await
        .unwrap();
    let (code, stdout, stderr) = setup
        .run(Some(&model.base_url()), &["chat", "--json", "Hi"])
        .await;
    assert_eq!(code, 0, "{stderr}");
    let offered = offered_tools(&model.requests()[0]);
    assert!(offered.iter().any(|t| t == "mcp__t__echo"), "{offered:?}");
    assert!(!offered.iter().any(|t| t == "mcp__t__late"), "{offered:?}");
    let withheld = json_lines(&stdout)
        .into_iter()
        .find(|e| e["type"] == "tool_withheld" && e["tool_name"] == "mcp__t__late");
    assert!(withheld.is_some(), "{stdout}");

    let (code, _, stderr) = setup.run(None, &["mcp", "pin", "t"]).await;
    assert_eq!(code, 0, "{stderr}");
    let late = find(&setup.tools().await.0, "mcp__t__late");
    assert_eq!(late["pin"], "pinned");
}

/// With `trust_annotations = true`, a server that flips `readOnlyHint` after its
/// tool was pinned does not turn it into an allowed `read_only` tool: the
/// annotations are part of the pin (before, the flip went through unseen).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_annotation_flip_after_pinning_is_withheld_until_pinned() {
    let trusting = "trust_annotations = true";
    let Some(setup) = Setup::with(&["--read-only-hint", "false"], trusting) else {
        return;
    };
    let add = find(&setup.tools().await.0, "mcp__t__add");
    assert_eq!(
        (add["pin"].as_str(), add["effect"].as_str()),
        (Some("first_sight"), Some("external_side_effect")),
        "{add}"
    );

    setup.reconfigure(&["--read-only-hint", "true"], trusting);
    let (listed, _) = setup.tools().await;
    let add = find(&listed, "mcp__t__add");
    assert_eq!(add["pin"], "changed", "{add}");
    assert!(add["withheld"].is_string(), "{add}");
    assert_eq!(find(&listed, "mcp__t__echo")["pin"], "pinned");
}

/// A process an MCP stdio server starts in a new session does not outlive the
/// agent (before, only the server's process group was ended).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_a_server_starts_outlives_the_agent() {
    let Some(setup) = Setup::new(&["--spawn-escapee"]) else {
        return;
    };
    let (code, _, stderr) = setup.run(None, &["mcp", "list"]).await;
    assert_eq!(code, 0, "{stderr}");
    let escapee = read_pid(&setup.state().join("pid-escapee"), Duration::from_secs(10))
        .await
        .expect("the server started its escapee");
    assert!(
        wait_gone(escapee, Duration::from_secs(10)).await,
        "the server's escaped child {escapee} outlived the agent"
    );
}
