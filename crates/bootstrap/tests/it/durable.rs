//! Durable runs through the `agent` binary: `agent serve` killed with SIGKILL in
//! the middle of a run, started again on the same store, goes on with the run
//! from its first unrecorded step. The tools are a real MCP server's (the Python
//! test server of tools-mcp): `slow` (declared `read_only`) and `bump`, which
//! appends a line to a ledger file each time it acts (an
//! `external_side_effect`), then blocks: the ledger counts how often a call that
//! acts really ran.

use std::path::{Path, PathBuf};
use std::time::Duration;

use agent_testing::server::{OpenAiServer, Reply};
use serde_json::json;

use crate::mcp::server_table;
use crate::served::{Api, Served, chat_body, stream_text};
use crate::support::{Home, SHORT_LEASE, eventually, messages_of, sigkill};
use crate::threads::endless_words;

const KEY: &str = "sk-e2e-durable";

/// The user's config: the MCP server `fx` with its ledger, tools that run
/// without approval (a crash test, not an approval test), `bump` idempotent or
/// not. Returns its path.
fn config(home: &Home, ledger: &Path, idempotent: bool) -> PathBuf {
    let ledger = ledger.display().to_string();
    home.write_user_config(&format!(
        "{}\n\
         [mcp.servers.fx.tools.slow]\neffect = \"read_only\"\n\n\
         [mcp.servers.fx.tools.bump]\nidempotent = {idempotent}\n\n\
         [policy]\nallow = [\"mcp__fx__*\"]\nrequire_approval = []\n\n\
         [durable]\nlease_ms = 2000\n",
        server_table("fx", &["--ledger", &ledger]),
    ))
}

/// The MCP test server's ledger, in a folder of its own removed on drop: a
/// line each time `bump` acts (or sees a call it deduped).
pub(crate) struct Ledger {
    _dir: tempfile::TempDir,
    pub(crate) path: PathBuf,
}

impl Ledger {
    pub(crate) fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.txt");
        Self { _dir: dir, path }
    }

    /// The ledger's lines.
    pub(crate) fn lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.path)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

/// `agent serve` with `config` against the model at `url`.
pub(crate) async fn serve(home: &Home, url: &str, config: &Path) -> Served {
    let config = config.display().to_string();
    let command = home.command(Some(url), &["--config", &config, "serve", "--port", "0"]);
    Served::spawn(command).await
}

/// The id of chat `chat`'s latest run, once it is stored.
async fn run_of(store: &agent_store::Store, chat: &str) -> String {
    let rows = store.account("local");
    let run = eventually(
        || async { rows.latest_run(chat).await.unwrap() },
        Option::is_some,
    )
    .await;
    run.expect("the run is stored").run.id
}

/// Waits until run `run_id` has recorded step `step` of `kind`.
async fn recorded(store: &agent_store::Store, run_id: &str, step: u32, kind: &str) {
    let rows = store.account("local");
    let steps = eventually(
        || async { rows.steps(run_id).await.unwrap() },
        |steps: &Vec<(u32, String, String)>| steps.iter().any(|(n, k, _)| *n == step && k == kind),
    )
    .await;
    assert!(
        steps.iter().any(|(n, k, _)| *n == step && k == kind),
        "step {step} ({kind}) was not recorded: {steps:?}"
    );
}

/// The whole answer of chat `chat` as a client that reattaches reads it: it
/// attaches again, as the page does on reload, while a stream ends saying the
/// answer moved (its dead server's lease was still running when it attached,
/// and the run went on here once it ran out).
async fn reattached(api: &Api, chat: &str) -> String {
    let mut last = String::new();
    for _ in 0..60 {
        let response = api
            .get(&format!("/api/chat/{chat}/stream"))
            .send()
            .await
            .unwrap();
        if response.status().as_u16() == 204 {
            tokio::time::sleep(Duration::from_millis(250)).await;
            continue;
        }
        assert_eq!(
            response.status().as_u16(),
            200,
            "a running answer to attach to"
        );
        let text = tokio::time::timeout(Duration::from_secs(60), response.text())
            .await
            .expect("the resumed run ends")
            .unwrap();
        // The page reloads on "Reload to follow it": so does this client.
        if !text.contains("Reload to follow it") {
            return text;
        }
        last = text;
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    panic!("chat {chat} never had an answer to attach to: {last}");
}

/// The `tool` messages of model request `index`.
pub(crate) fn tool_results(server: &OpenAiServer, index: usize) -> Vec<String> {
    let requests = server.requests();
    let tools = messages_of(&requests[index]).filter(|m| m["role"] == "tool");
    tools.map(|m| m["content"].to_string()).collect()
}

/// Killed during a slow `read_only` call, then during a model call: each time
/// the next server goes on with the run. The model is called once per model
/// step (no recorded step is asked again), the call that acts ran exactly once,
/// and a client that reattaches reads the whole answer once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_survives_two_kills_and_calls_the_model_and_its_tools_once() {
    let Some(_) = agent_testing::peers::peer(agent_testing::peers::Peer::Python) else {
        return;
    };
    let ledger = Ledger::new();
    let server = OpenAiServer::start([
        Reply::tool_calls(&[("call_b", "mcp__fx__bump", json!({}))]),
        Reply::tool_calls(&[("call_s", "mcp__fx__slow", json!({"seconds": 4}))]),
        endless_words(20),
        Reply::text("All done.").delayed(Duration::from_secs(3)),
    ])
    .await
    .unwrap();
    let url = server.base_url();
    let home = Home::new(KEY);
    let config = config(&home, &ledger.path, false);
    let store = home.store().await;

    let mut first = serve(&home, &url, &config).await;
    let _stream = first
        .streaming(&chat_body("chat-d", "Bump, then wait."), 1)
        .await;
    let run_id = run_of(&store, "chat-d").await;
    // The slow call is under way: its model turn is recorded, its result not.
    recorded(&store, &run_id, 2, "model").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    first.kill().await;
    assert_eq!(server.requests().len(), 2);

    let mut second = serve(&home, &url, &config).await;
    // The slow call runs again (read-only); then the third model call streams.
    recorded(&store, &run_id, 3, "tool").await;
    eventually(|| async { server.requests().len() }, |n| *n == 3).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    second.kill().await;

    let third = serve(&home, &url, &config).await;
    let answer = reattached(&third, "chat-d").await;
    assert_eq!(stream_text(&answer), "All done.", "{answer}");
    // Every step once: one start and one output per call, the final text once.
    assert_eq!(
        answer.matches(r#""type":"tool-input-available""#).count(),
        2,
        "{answer}"
    );
    assert_eq!(
        answer.matches(r#""type":"tool-output-available""#).count(),
        2,
        "{answer}"
    );
    assert!(
        !answer.contains("w0 "),
        "the killed model call's text is gone: {answer}"
    );

    // One request per model step: the two recorded turns were not asked again.
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    assert_eq!(
        requests[3].body["messages"], requests[2].body["messages"],
        "the last call was the unrecorded one, asked again as it was"
    );
    // The call that acts ran exactly once, in the first process.
    let lines = ledger.lines();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].starts_with("acted "), "{lines:?}");
    assert!(
        lines[0].ends_with(":call_b"),
        "the key names the run and the call: {lines:?}"
    );
    // The run ended `done`, its thread holds the answer, its log is contiguous.
    let rows = store.account("local");
    let run = eventually(
        || async { rows.run(&run_id).await.unwrap().unwrap() },
        |run| run.status == agent_store::RunStatus::Done,
    )
    .await;
    assert_eq!(run.status, agent_store::RunStatus::Done, "{run:?}");
    let messages = rows.messages("chat-d").await.unwrap();
    assert_eq!(
        messages.len(),
        6,
        "user, two calls with results, answer: {messages:?}"
    );
    let seqs: Vec<u64> = rows
        .events(&run_id, None)
        .await
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>());
}

/// Killed while a call that acts blocks, after it acted: the next server does
/// not run it again. Its result is `outcome_unknown`, which the model's next
/// turn reads; the ledger says it acted once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_cut_by_a_kill_after_it_acted_is_outcome_unknown_and_not_run_again() {
    let Some(_) = agent_testing::peers::peer(agent_testing::peers::Peer::Python) else {
        return;
    };
    let (answer, lines, server) = killed_during_bump(false).await;
    assert_eq!(lines.len(), 1, "the call ran once: {lines:?}");
    assert!(lines[0].starts_with("acted "), "{lines:?}");
    let results = tool_results(&server, 1);
    assert_eq!(results.len(), 1);
    assert!(results[0].contains("outcome_unknown"), "{results:?}");
    assert_eq!(stream_text(&answer), "I will check first.", "{answer}");
    assert!(
        answer.contains(r#""errorText":"outcome_unknown"#),
        "{answer}"
    );
}

/// The same with `bump` declared idempotent: it runs again with the same
/// idempotency key, and the server, which dedupes on it, acts once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idempotent_call_cut_by_a_kill_runs_again_with_its_key_and_acts_once() {
    let Some(_) = agent_testing::peers::peer(agent_testing::peers::Peer::Python) else {
        return;
    };
    let (answer, lines, server) = killed_during_bump(true).await;
    assert_eq!(lines.len(), 2, "the tool saw the call twice: {lines:?}");
    let keys: Vec<&str> = lines.iter().map(|l| l.split_once(' ').unwrap().1).collect();
    assert_eq!(keys[0], keys[1], "with the same key: {lines:?}");
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("acted ")).count(),
        1,
        "and acted once: {lines:?}"
    );
    let results = tool_results(&server, 1);
    assert!(results[0].contains("seen; acted 1 time"), "{results:?}");
    assert_eq!(stream_text(&answer), "I will check first.", "{answer}");
}

/// Starts a chat whose call of `bump` acts and blocks, kills the server once
/// the ledger shows it acted, starts another: the resumed answer, the ledger
/// and the model server.
async fn killed_during_bump(idempotent: bool) -> (String, Vec<String>, OpenAiServer) {
    let ledger = Ledger::new();
    let server = OpenAiServer::start([
        Reply::tool_calls(&[(
            "call_b",
            "mcp__fx__bump",
            json!({"block_s": 120, "dedupe": true}),
        )]),
        // Slow enough that the client reattaches while the run goes on on
        // the next server (it takes the run over when the killed one's lease
        // runs out).
        Reply::text("I will check first.").delayed(Duration::from_secs(3)),
    ])
    .await
    .unwrap();
    let url = server.base_url();
    let home = Home::new(KEY);
    let config = config(&home, &ledger.path, idempotent);
    let mut first = serve(&home, &url, &config).await;
    let _stream = first.streaming(&chat_body("chat-b", "Bump it."), 1).await;
    eventually(|| async { ledger.lines() }, |lines| !lines.is_empty()).await;
    first.kill().await;
    let second = serve(&home, &url, &config).await;
    let answer = reattached(&second, "chat-b").await;
    assert_eq!(
        server.requests().len(),
        2,
        "the recorded turn was not asked again"
    );
    (answer, ledger.lines(), server)
}

/// `agent chat` killed during its second model call, after a command ran:
/// `agent runs resume` goes on with the run from its journal. The command ran
/// once, the model was asked once more (only the unrecorded step), and the
/// resumed run shows the whole run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_chat_goes_on_with_runs_resume() {
    let command = json!({"command": "echo ran >> count.txt"});
    let server = OpenAiServer::start([
        Reply::tool_calls(&[("call_sh", "core__exec_shell", command)]),
        endless_words(20),
        Reply::text("Done."),
    ])
    .await
    .unwrap();
    let home = Home::new(KEY);
    home.write_config(SHORT_LEASE);
    let url = server.base_url();
    let mut chat = home
        .command(Some(&url), &["chat", "--json", "--approve", "Count a run."])
        .spawn()
        .unwrap();
    eventually(|| async { server.requests().len() }, |n| *n == 2).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    sigkill(&chat);
    chat.wait().await.unwrap();
    crate::support::lease_runs_out().await;
    let (_, listed, _) = home.run(None, &["runs", "list", "--json"]).await;
    let runs = crate::support::json_lines(&listed);
    assert_eq!(runs[0]["status"], "interrupted", "{listed}");
    let run_id = runs[0]["run_id"].as_str().unwrap().to_owned();

    let (code, out, stderr) = home
        .run(
            Some(&url),
            &["runs", "resume", &run_id, "--json", "--approve"],
        )
        .await;
    assert_eq!(code, 0, "{stderr}");
    let events = crate::support::json_lines(&out);
    let last = events
        .iter()
        .rev()
        .find(|e| e["type"] == "assistant_final")
        .unwrap();
    assert_eq!(last["content"], "Done.", "{out}");
    let results = events
        .iter()
        .filter(|e| e["type"] == "tool_call_result")
        .count();
    assert_eq!(results, 1, "the recorded call is shown once: {out}");
    assert!(
        !out.contains("w0 "),
        "the cut model call is not shown: {out}"
    );
    assert_eq!(server.requests().len(), 3, "one request per model step");
    let count = std::fs::read_to_string(home.workspace.join("count.txt")).unwrap();
    assert_eq!(count.lines().count(), 1, "the command ran once");
    // A run that went on is not resumed twice.
    let (code, _, stderr) = home.run(Some(&url), &["runs", "resume", &run_id]).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("only an interrupted run goes on"),
        "{stderr}"
    );
}
