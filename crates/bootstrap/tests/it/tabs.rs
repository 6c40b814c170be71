//! Several stock chat tabs on one conversation, against real `agent serve`
//! processes: `tests/js/tabs-driver.mjs` runs several `Chat`s of `ai` 7
//! (`AbstractChat` + `DefaultChatTransport`, what `useChat` runs) in one node
//! process, each a browser tab: a tab that opens an existing chat loads it the
//! way the page does (`GET /api/chats/{id}`, then `resume` reattaches to a
//! running answer with `GET /api/chat/{id}/stream`). No request is written
//! here: every body is the stock client's own. What is asserted is what
//! happened: files the commands wrote, the requests the model received, the
//! stored thread and runs.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use agent_store::RunStatus;
use agent_testing::server::{OpenAiServer, Recorded, Reply, data};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use crate::served::Served;
use crate::support::{Home, SHORT_LEASE, eventually};

const KEY: &str = "sk-e2e-tabs-0123456789";

// ------------------------------------------------------------------ servers

/// What a test here runs against: the model server, and a home whose
/// servers share its store.
struct World {
    model: OpenAiServer,
    home: Home,
}

impl World {
    /// A model playing `replies` and a fresh home; `config`, when given, is
    /// the workspace's `agent.toml`, trusted (it loosens the policy or adds
    /// client tools, which needs `agent trust`).
    async fn start(replies: impl IntoIterator<Item = Reply>, config: Option<&str>) -> Self {
        let model = OpenAiServer::start(replies).await.unwrap();
        let home = Home::new(KEY);
        if let Some(config) = config {
            home.trust_config(config).await;
        }
        Self { model, home }
    }

    /// Another `agent serve` on the home, against the model.
    async fn serve(&self) -> Served {
        let command = self
            .home
            .command(Some(&self.model.base_url()), &["serve", "--port", "0"]);
        Served::spawn(command).await
    }

    /// Kills `server` and starts another in its place, which becomes the
    /// default server of `tabs` (paused; they go on).
    async fn restart(&self, mut server: Served, tabs: &mut Tabs) -> Served {
        server.kill().await;
        let server = self.serve().await;
        tabs.go_on(json!({"default": entry(&server)})).await;
        server
    }

    /// The runs of chat `chat`, polled until `ready` holds for them (10 s at
    /// most; then as they are, for the caller's assertion to show).
    async fn runs_when(
        &self,
        chat: &str,
        ready: impl Fn(&Vec<agent_store::RunRecord>) -> bool,
    ) -> Vec<agent_store::RunRecord> {
        let store = self.home.store().await;
        let rows = store.account("local");
        eventually(|| async { rows.runs_of_thread(chat).await.unwrap() }, ready).await
    }

    /// Waits until chat `chat` has a paused run; asserts it has (`why` says
    /// why it should).
    async fn assert_paused(&self, chat: &str, why: &str) {
        let paused =
            |runs: &Vec<agent_store::RunRecord>| runs.iter().any(|r| r.status == RunStatus::Paused);
        let runs = self.runs_when(chat, paused).await;
        assert!(paused(&runs), "{why}: {:?}", summary(&runs));
    }
}

/// `server` as the driver's `servers` entry.
fn entry(server: &Served) -> Value {
    json!({"api": format!("{}/api/chat", server.base),
           "headers": {"authorization": format!("Bearer {}", server.token)}})
}

/// `GET /api/chats/{chat}` on `server`: the stored thread as UI messages
/// (`null` when there is none).
async fn stored_thread(server: &Served, chat: &str) -> Value {
    let response = server
        .get(&format!("/api/chats/{chat}"))
        .send()
        .await
        .unwrap();
    if response.status().as_u16() != 200 {
        return Value::Null;
    }
    response.json::<Value>().await.unwrap()["messages"].clone()
}

/// The stored thread of chat `chat` as `server` returns it, once it holds
/// `text` (or as it is after 10 s): its messages.
async fn stored_with(server: &Served, chat: &str, text: &str) -> Vec<Value> {
    let ready = |m: &Value| m.to_string().contains(text);
    messages(&eventually(|| stored_thread(server, chat), ready).await)
}

fn summary(runs: &[agent_store::RunRecord]) -> Vec<String> {
    runs.iter()
        .map(|r| format!("{} {:?} {:?}", r.run.id, r.status, r.error))
        .collect()
}

// ------------------------------------------------------------------ the driver

fn js_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/js");
    assert!(
        dir.join("node_modules").exists(),
        "the tabs tests need `npm ci --prefix tests/js` (run `cargo xtask test-env`)"
    );
    dir
}

const PAUSE: &str = "tabs-driver pause ";

/// A running `tabs-driver.mjs`: its pauses are read from stderr, answered on
/// stdin; its one JSON line is read when it ends.
struct Tabs {
    child: tokio::process::Child,
    stdin: Option<tokio::process::ChildStdin>,
    lines: mpsc::UnboundedReceiver<String>,
    /// What it printed on stderr besides pauses.
    log: Vec<String>,
}

impl Tabs {
    /// Starts the driver on `script` against `server` (its default server).
    fn start(home: &Home, server: &Served, script: &Value, timeout_ms: u64) -> Self {
        let file = home.config_home.join(format!(
            "tabs-{}.json",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        std::fs::write(&file, script.to_string()).unwrap();
        let mut child = tokio::process::Command::new("node")
            .arg(js_dir().join("tabs-driver.mjs"))
            .args(["--api", &format!("{}/api/chat", server.base)])
            .arg("--header")
            .arg(format!("authorization: Bearer {}", server.token))
            .arg("--script")
            .arg(&file)
            .args(["--timeout-ms", &timeout_ms.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("node runs");
        let stderr = child.stderr.take().unwrap();
        let (tx, lines) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut reader = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self {
            stdin: child.stdin.take(),
            child,
            lines,
            log: Vec::new(),
        }
    }

    /// Waits for pause `name` (60 s at most); what the tabs held then.
    async fn pause(&mut self, name: &str) -> Value {
        loop {
            let line = tokio::time::timeout(Duration::from_secs(60), self.lines.recv())
                .await
                .unwrap_or_else(|_| panic!("no pause {name} within 60 s; stderr: {:?}", self.log));
            let Some(line) = line else {
                let mut out = String::new();
                if let Some(mut stdout) = self.child.stdout.take() {
                    let _ = stdout.read_to_string(&mut out).await;
                }
                panic!(
                    "the driver ended before pause {name}: {out}\nstderr: {:?}",
                    self.log
                );
            };
            match line.strip_prefix(PAUSE) {
                Some(state) => {
                    let state: Value = serde_json::from_str(state).unwrap();
                    assert_eq!(state["name"], name, "{state}");
                    return state;
                }
                None => self.log.push(line),
            }
        }
    }

    /// Lets the driver go on after a pause, with `servers` replaced (`{}`:
    /// none).
    async fn go_on(&mut self, servers: Value) {
        let stdin = self.stdin.as_mut().unwrap();
        let line = format!("{}\n", json!({ "servers": servers }));
        stdin.write_all(line.as_bytes()).await.unwrap();
        stdin.flush().await.unwrap();
    }

    /// The driver's JSON line once it ended; asserts it ran every step.
    async fn finish(mut self) -> Value {
        drop(self.stdin.take());
        let output = tokio::time::timeout(Duration::from_secs(300), self.child.wait_with_output())
            .await
            .expect("the driver ends")
            .unwrap();
        while let Ok(line) = self.lines.try_recv() {
            self.log.push(line);
        }
        let stdout = String::from_utf8_lossy(&output.stdout);
        let result: Value = serde_json::from_str(stdout.trim())
            .unwrap_or_else(|e| panic!("no JSON line ({e}): {stdout}\nstderr: {:?}", self.log));
        assert_eq!(
            result["ok"], true,
            "the driver failed: {}\nsteps: {}\nstderr: {:?}",
            result["error"], result["steps"], self.log
        );
        result
    }
}

/// Runs `script` to its end (no pauses).
async fn drive(home: &Home, server: &Served, script: &Value, timeout_ms: u64) -> Value {
    Tabs::start(home, server, script, timeout_ms).finish().await
}

// ------------------------------------------------------------------ reading

/// Tab `id` of a driver's result.
fn tab<'a>(result: &'a Value, id: &str) -> &'a Value {
    let tab = &result["tabs"][id];
    assert!(tab.is_object(), "no tab {id} in {result}");
    tab
}

fn messages(value: &Value) -> Vec<Value> {
    value.as_array().cloned().unwrap_or_default()
}

/// The text parts of a UI message, joined.
fn text(message: &Value) -> String {
    message["parts"]
        .as_array()
        .map(|parts| {
            parts
                .iter()
                .filter(|p| p["type"] == "text")
                .filter_map(|p| p["text"].as_str())
                .collect()
        })
        .unwrap_or_default()
}

/// `role: text [tool parts]` per message: what a failure message shows.
fn outline(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .map(|m| {
            let tools: Vec<String> = m["parts"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|p| p["toolCallId"].is_string())
                .map(|p| format!("{}:{}", p["toolCallId"].as_str().unwrap(), p["state"]))
                .collect();
            format!(
                "{} {} {:?} {tools:?}",
                m["role"].as_str().unwrap_or("?"),
                m["id"].as_str().unwrap_or("?"),
                clipped(&text(m))
            )
        })
        .collect()
}

/// `text`, its middle left out when it is long.
fn clipped(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= 60 {
        return text.to_owned();
    }
    let head: String = chars[..30].iter().collect();
    let tail: String = chars[chars.len() - 20..].iter().collect();
    format!("{head}…{tail} ({} chars)", chars.len())
}

/// Chunk types with repeats counted: `text-delta×40`.
fn chunk_runs(chunks: &Value) -> String {
    let mut runs: Vec<(String, usize)> = Vec::new();
    for chunk in chunks.as_array().into_iter().flatten() {
        let kind = chunk.as_str().unwrap_or("?").to_owned();
        match runs.last_mut() {
            Some((last, n)) if *last == kind => *n += 1,
            _ => runs.push((kind, 1)),
        }
    }
    runs.iter()
        .map(|(kind, n)| {
            if *n == 1 {
                kind.clone()
            } else {
                format!("{kind}×{n}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The tool parts of call `call` in `messages`.
fn tool_parts<'a>(messages: &'a [Value], call: &str) -> Vec<&'a Value> {
    messages
        .iter()
        .flat_map(|m| m["parts"].as_array().into_iter().flatten())
        .filter(|p| p["toolCallId"] == call)
        .collect()
}

/// Each request a tab made: `METHOD status [chunks]`.
fn requests(tab: &Value) -> Vec<String> {
    tab["requests"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            format!(
                "{} {} {} at {}..{} ms {} {}",
                r["method"].as_str().unwrap_or("?"),
                r["url"].as_str().unwrap_or("?"),
                r["status"],
                r["sentAtMs"],
                r["answeredAtMs"],
                chunk_runs(&r["chunks"]),
                if r["errorBody"].is_null() {
                    String::new()
                } else {
                    r["errorBody"].to_string()
                }
            )
        })
        .collect()
}

/// The text of the last user message of a model request (a string or parts).
fn last_user_text(request: &Recorded) -> String {
    let messages = request.body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let Some(user) = messages.iter().rev().find(|m| m["role"] == "user") else {
        return String::new();
    };
    match &user["content"] {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
        _ => String::new(),
    }
}

/// The last message of a model request.
fn last_message(request: &Recorded) -> Value {
    request.body["messages"]
        .as_array()
        .and_then(|m| m.last().cloned())
        .unwrap_or(Value::Null)
}

/// The `tool` messages of a model request: (call id, content).
fn tool_results(request: &Recorded) -> Vec<(String, String)> {
    request.body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap_or_default().to_owned(),
                m["content"].to_string(),
            )
        })
        .collect()
}

/// A streamed turn calling `name` with arguments given as raw text, exactly
/// as written (whitespace kept), in one fragment.
fn raw_tool_call(id: &str, name: &str, arguments: &str) -> Reply {
    let chunk = |delta: Value, finish: Value| {
        data(
            &json!({"id": "chatcmpl-r", "object": "chat.completion.chunk", "model": "test-model",
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
            .to_string(),
        )
    };
    Reply::sse([
        chunk(
            json!({"role": "assistant", "content": null, "tool_calls": [{"index": 0, "id": id,
                   "type": "function", "function": {"name": name, "arguments": ""}}]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": arguments}}]}),
            Value::Null,
        ),
        chunk(json!({}), json!("tool_calls")),
        data(
            &json!({"id": "chatcmpl-u", "object": "chat.completion.chunk", "model": "test-model",
                    "choices": [], "usage": {"prompt_tokens": 30, "completion_tokens": 10, "total_tokens": 40}})
            .to_string(),
        ),
        "data: [DONE]\n\n".to_owned(),
    ])
}

// ------------------------------------------------------------------ 1

/// The model of the approval races: for "Count run N." it calls the shell
/// with `echo N >> count.txt` (call id `call_N`); after the call's result it
/// answers "Ran call_N.".
fn counting_model(replies: usize) -> Vec<Reply> {
    (0..replies)
        .map(|_| {
            Reply::from_request(|request| {
                let last = last_message(request);
                if last["role"] == "tool" {
                    let call = last["tool_call_id"].as_str().unwrap_or("?");
                    return Reply::text(&format!("Ran {call}."));
                }
                let said = last_user_text(request);
                let n = said
                    .trim_start_matches("Count run ")
                    .trim_end_matches('.')
                    .to_owned();
                Reply::tool_calls(&[(
                    &format!("call_{n}"),
                    "core__exec_shell",
                    json!({"command": format!("echo {n} >> count.txt")}),
                )])
            })
        })
        .collect()
}

/// The numbers in `count.txt`, one per executed command, sorted.
fn counted(home: &Home) -> Vec<u32> {
    let mut lines: Vec<u32> = std::fs::read_to_string(home.workspace.join("count.txt"))
        .unwrap_or_default()
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    lines.sort_unstable();
    lines
}

/// Checks one approval race of chat `chat` (call `call`, answered "Ran
/// call."): both tabs end ready with the call's output and the answer once,
/// and the stored thread repeats nothing. Problems are pushed on `failures`.
fn check_race(
    failures: &mut Vec<String>,
    result: &Value,
    (first, second): (&str, &str),
    call: &str,
    stored: &[Value],
) {
    let answer = format!("Ran {call}.");
    for id in [first, second] {
        let tab = tab(result, id);
        let shown = messages(&tab["messages"]);
        let parts = tool_parts(&shown, call);
        let texts: String = shown.iter().map(text).collect();
        if tab["status"] != "ready"
            || !tab["error"].is_null()
            || parts.len() != 1
            || parts[0]["state"] != "output-available"
            || texts.matches(&answer).count() != 1
        {
            failures.push(format!(
                "tab {id} ({}): status {} error {}; messages {:?}; requests {:?}",
                tab["chatId"],
                tab["status"],
                tab["error"],
                outline(&shown),
                requests(tab)
            ));
        }
    }
    let mut ids: Vec<&str> = stored.iter().filter_map(|m| m["id"].as_str()).collect();
    ids.sort_unstable();
    let unique = ids.windows(2).all(|w| w[0] != w[1]);
    let texts: String = stored.iter().map(text).collect();
    if !unique
        || ids.len() != stored.len()
        || tool_parts(stored, call).len() != 1
        || texts.matches(&answer).count() != 1
        || stored.iter().filter(|m| m["role"] == "user").count() != 1
    {
        failures.push(format!("stored thread of {call}: {:?}", outline(stored)));
    }
}

/// Two tabs answer the same approval at the same moment, 50 times: tab 1
/// got the approval request from its live stream, tab 2 opened the chat (its
/// approval id issued by `GET /api/chats/{id}`), both approve in the same
/// event-loop turn and both send the continuation the stock client sends on
/// its own. Each command ran once (one line per approval in the file the
/// command appends to), the model was asked to go on after each call once
/// and never read two results for one call, both tabs show the output and
/// the answer once, and no stored thread repeats a message. Then the same
/// across a SIGKILL and a restart between the request and the approvals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_tabs_answering_one_approval_run_the_command_once() {
    let Some(_) = agent_testing::peers::peer(agent_testing::peers::Peer::Node) else {
        return;
    };
    const RACES: usize = 50;
    let world = World::start(counting_model(2 * RACES + 2), None).await;
    let (model, home) = (&world.model, &world.home);
    home.write_config(SHORT_LEASE);
    let server = world.serve().await;
    let started = Instant::now();

    let mut steps = Vec::new();
    for k in 0..RACES {
        let chat = format!("race-{k}");
        let (a, b) = (format!("a{k}"), format!("b{k}"));
        steps.push(
            json!({"tab": a, "chatId": chat, "do": "send", "text": format!("Count run {k}.")}),
        );
        steps.push(
            json!({"tab": b, "chatId": chat, "do": "load", "untilToolState": "approval-requested"}),
        );
        steps.push(json!({"parallel": [
            {"tab": a, "do": "approve", "approved": true},
            {"tab": b, "do": "approve", "approved": true}
        ]}));
    }
    let script = json!({"sendAutomaticallyWhen": "approvals", "steps": steps});
    let result = drive(home, &server, &script, 150_000).await;
    eprintln!("{RACES} approval races took {:?}", started.elapsed());

    // The races were real: both continuations left within a few ms.
    let apart: Vec<u64> = (0..RACES)
        .map(|k| {
            let sent = |id: &str| {
                tab(&result, id)["requests"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .rfind(|r| r["method"] == "POST")
                    .and_then(|r| r["sentAtMs"].as_u64())
                    .unwrap()
            };
            sent(&format!("a{k}")).abs_diff(sent(&format!("b{k}")))
        })
        .collect();
    eprintln!("the two continuations of each race left {apart:?} ms apart");
    assert!(apart.iter().all(|ms| *ms < 200), "{apart:?}");
    let mut failures = Vec::new();
    for k in 0..RACES {
        let chat = format!("race-{k}");
        let stored = stored_with(&server, &chat, &format!("Ran call_{k}.")).await;
        check_race(
            &mut failures,
            &result,
            (&format!("a{k}"), &format!("b{k}")),
            &format!("call_{k}"),
            &stored,
        );
    }
    let ran = counted(home);
    assert_eq!(
        ran,
        (0..RACES as u32).collect::<Vec<_>>(),
        "one line per approval, no command twice; other failures: {failures:#?}"
    );
    assert_model_read_each_result_once(model, RACES);
    assert!(
        failures.is_empty(),
        "{} problems: {failures:#?}",
        failures.len()
    );

    // Across a restart: the approval request came from the killed server,
    // both tabs approve on the new one.
    let restart = RACES;
    let chat = "race-restart";
    let script = json!({"sendAutomaticallyWhen": "approvals", "steps": [
        {"tab": "a", "chatId": chat, "do": "send", "text": format!("Count run {restart}.")},
        {"do": "pause", "name": "asked"},
        {"tab": "b", "chatId": chat, "do": "load", "untilToolState": "approval-requested"},
        {"parallel": [
            {"tab": "a", "do": "approve", "approved": true},
            {"tab": "b", "do": "approve", "approved": true}
        ]}
    ]});
    let mut tabs = Tabs::start(home, &server, &script, 60_000);
    let asked = tabs.pause("asked").await;
    assert!(
        asked["tabs"]["a"]
            .to_string()
            .contains("approval-requested"),
        "{asked}"
    );
    // The paused run is in the store; then the server dies.
    world.assert_paused(chat, "the approval waits").await;
    let server = world.restart(server, &mut tabs).await;
    let result = tabs.finish().await;
    let stored = stored_with(&server, chat, &format!("Ran call_{restart}.")).await;
    let mut failures = Vec::new();
    check_race(
        &mut failures,
        &result,
        ("a", "b"),
        &format!("call_{restart}"),
        &stored,
    );
    assert_eq!(
        counted(home),
        (0..=restart as u32).collect::<Vec<_>>(),
        "the command approved across the restart ran once; {failures:#?}"
    );
    assert_model_read_each_result_once(model, RACES + 1);
    assert!(failures.is_empty(), "{failures:#?}");
}

/// The model never read two results for one call, and was asked to go on
/// after each call `call_0` .. `call_{calls-1}` exactly once.
fn assert_model_read_each_result_once(model: &OpenAiServer, calls: usize) {
    let requests = model.requests();
    for (i, request) in requests.iter().enumerate() {
        let mut ids: Vec<String> = tool_results(request)
            .into_iter()
            .map(|(id, _)| id)
            .collect();
        ids.sort_unstable();
        assert!(
            ids.windows(2).all(|w| w[0] != w[1]),
            "model request {i} carries two results for one call: {ids:?}"
        );
    }
    for k in 0..calls {
        let call = format!("call_{k}");
        let after: Vec<usize> = requests
            .iter()
            .enumerate()
            .filter(|(_, r)| {
                let last = last_message(r);
                last["role"] == "tool" && last["tool_call_id"] == call.as_str()
            })
            .map(|(i, _)| i)
            .collect();
        assert_eq!(
            after.len(),
            1,
            "model requests going on after {call}: {after:?} (of {})",
            requests.len()
        );
    }
}

// ------------------------------------------------------------------ 2

/// A client tool's call waits for the page across a SIGKILL of its server:
/// the model called `client__ask` with arguments whose raw text has
/// whitespace (`{"question": "ok?"}`), the page shows the call, the server
/// is killed and restarted, and the tab answers with `addToolOutput` (its
/// stock automatic send). The new server matches the output to the stored
/// call (call id and canonical JSON arguments): no 400, no warning, the run
/// goes on, the model reads the output, and the next message works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_tool_waiting_across_a_restart_is_answered_with_whitespace_in_its_arguments() {
    let Some(_) = agent_testing::peers::peer(agent_testing::peers::Peer::Node) else {
        return;
    };
    let config = format!(
        "[client_tools.ask]\ndescription = \"Asks the user a question.\"\neffect = \"read_only\"\n\
         parameters = {{ type = \"object\", properties = {{ question = {{ type = \"string\" }} }}, required = [\"question\"] }}\n\n\
         [policy]\nallow = [\"core__*\", \"client__*\"]\n\n{SHORT_LEASE}"
    );
    let replies = [
        raw_tool_call("call_ask", "client__ask", r#"{"question": "ok?"}"#),
        Reply::text("Thanks for the answer."),
        Reply::text("Later answer."),
    ];
    let world = World::start(replies, Some(&config)).await;
    let server = world.serve().await;
    let chat = "client-tool";
    let script = json!({"chatId": chat, "sendAutomaticallyWhen": "toolCalls", "steps": [
        {"tab": 1, "do": "send", "text": "Ask me something."},
        {"do": "pause", "name": "asked"},
        {"tab": 1, "do": "toolOutput", "tool": "client__ask", "output": {"answer": "yes"}},
        {"tab": 1, "do": "send", "text": "And later?"}
    ]});
    let mut tabs = Tabs::start(&world.home, &server, &script, 60_000);
    let asked = tabs.pause("asked").await;
    let shown = messages(&asked["tabs"]["1"]["messages"]);
    let parts = tool_parts(&shown, "call_ask");
    assert_eq!(parts.len(), 1, "{:?}", outline(&shown));
    assert_eq!(parts[0]["state"], "input-available", "{asked}");
    assert_eq!(parts[0]["input"], json!({"question": "ok?"}), "{asked}");
    world
        .assert_paused(chat, "the run waits for the page")
        .await;
    let server = world.restart(server, &mut tabs).await;
    let result = tabs.finish().await;

    let tab = tab(&result, "1");
    let statuses: Vec<&Value> = tab["requests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| &r["status"])
        .collect();
    assert!(
        statuses.iter().all(|s| **s == 200),
        "every request answered 200: {:?}",
        requests(tab)
    );
    let warnings: Vec<&Value> = tab["requests"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["warnings"].as_array().into_iter().flatten())
        .collect();
    assert!(warnings.is_empty(), "{warnings:?}; {:?}", requests(tab));
    assert_eq!(
        tab["status"],
        "ready",
        "{}: {:?}",
        tab["error"],
        requests(tab)
    );
    // The model read the page's output, then the next message with it.
    let sent = world.model.requests();
    assert_eq!(sent.len(), 3, "{:?}", requests(tab));
    let results = tool_results(&sent[1]);
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0].0, "call_ask");
    assert!(results[0].1.contains("yes"), "{results:?}");
    // The call as the model made it, its raw arguments text kept (the
    // output was matched to it by canonical JSON, not by that text).
    let call = sent[1].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|m| m["tool_calls"].as_array()?.first().cloned())
        .unwrap();
    assert_eq!(call["id"], "call_ask", "{call}");
    assert_eq!(
        call["function"]["arguments"], r#"{"question": "ok?"}"#,
        "{call}"
    );
    assert_eq!(last_user_text(&sent[2]), "And later?");
    assert_eq!(
        tool_results(&sent[2]),
        results,
        "the output stays in the thread"
    );
    // The tab and the stored thread show the whole conversation.
    let shown = messages(&tab["messages"]);
    let texts: Vec<String> = shown.iter().map(text).collect();
    assert_eq!(
        texts,
        [
            "Ask me something.",
            "Thanks for the answer.",
            "And later?",
            "Later answer."
        ],
        "{:?}",
        outline(&shown)
    );
    let stored = stored_with(&server, chat, "Later answer.").await;
    assert_eq!(
        stored.iter().map(text).collect::<Vec<_>>(),
        texts,
        "{:?}",
        outline(&stored)
    );
    let parts = tool_parts(&stored, "call_ask");
    assert_eq!(parts.len(), 1, "{:?}", outline(&stored));
    assert_eq!(parts[0]["state"], "output-available", "{:?}", parts[0]);
}

// ------------------------------------------------------------------ 3

/// The slow answer's words: 140 of them, streamed 50 ms apart (about 7 s).
fn slow_words() -> String {
    (0..140)
        .map(|i| format!("w{i} "))
        .collect::<String>()
        .trim_end()
        .to_owned()
}

/// In the middle of a slow answer, a second tab opens the chat and a first
/// tab reloads (its fetch aborted, the page loaded again with `resume`):
/// `GET /api/chats/{id}` answers at once and already holds the question (with
/// the id its client gave it) and the answer in flight (with the id the live
/// stream uses); the tabs that reattach show the question and the answer so
/// far, then the whole answer once, under the same ids; the model was asked
/// once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_and_a_second_tab_mid_answer_show_the_question() {
    let Some(_) = agent_testing::peers::peer(agent_testing::peers::Peer::Node) else {
        return;
    };
    let answer = slow_words();
    let world = World::start(
        [Reply::text(&answer).paced(Duration::from_millis(50))],
        None,
    )
    .await;
    let server = world.serve().await;
    let chat = "slow";
    let script = json!({"chatId": chat, "steps": [
        {"tab": 1, "do": "send", "text": "Tell me slowly.", "wait": false},
        {"tab": 1, "do": "wait", "untilText": "w5 "},
        {"tab": 1, "do": "snapshot"},
        {"tab": 2, "do": "load", "resume": true, "wait": false},
        {"tab": 2, "do": "wait", "untilChunk": "text-delta"},
        {"tab": 2, "do": "snapshot"},
        {"tab": 1, "do": "load", "resume": true, "wait": false},
        {"tab": 1, "do": "wait", "untilChunk": "text-delta"},
        {"tab": 1, "do": "snapshot"},
        {"tab": 1, "do": "wait"},
        {"tab": 2, "do": "wait"}
    ]});
    let result = drive(&world.home, &server, &script, 60_000).await;
    let steps = result["steps"].as_array().unwrap();
    let live = messages(&steps[2]["messages"]);
    assert_eq!(live.len(), 2, "{:?}", outline(&live));
    let (question_id, answer_id) = (&live[0]["id"], &live[1]["id"]);
    // Every deviation is collected, so one run shows them all.
    let mut failures: Vec<String> = Vec::new();
    let mut check = |ok: bool, what: String| {
        if !ok {
            failures.push(what);
        }
    };

    // What GET /api/chats/{id} held mid-answer, and how long it took.
    for (step, who) in [(3, "the second tab"), (6, "the reloaded tab")] {
        let record = &steps[step];
        let loaded = messages(&record["loaded"]);
        let tab = tab(&result, record["tab"].as_str().unwrap());
        let get = tab["requests"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| {
                r["method"] == "GET"
                    && r["url"].as_str().unwrap().ends_with("/api/chats/slow")
                    && r["sentAtMs"].as_u64() >= record["startedAtMs"].as_u64()
            })
            .unwrap();
        let took = get["answeredAtMs"].as_u64().unwrap() - get["sentAtMs"].as_u64().unwrap();
        check(
            took < 2000,
            format!("{who}: GET /api/chats/{chat} mid-answer took {took} ms"),
        );
        check(
            record["loadStatus"] == 200
                && loaded.len() == 2
                && loaded[0]["role"] == "user"
                && text(&loaded[0]) == "Tell me slowly."
                && &loaded[0]["id"] == question_id,
            format!(
                "{who}: GET /api/chats/{chat} mid-answer holds the question under the client's id {question_id}: {:?}",
                outline(&loaded)
            ),
        );
        let in_flight = loaded.get(1).map(text).unwrap_or_default();
        check(
            loaded.get(1).is_some_and(|m| &m["id"] == answer_id)
                && answer.starts_with(&in_flight)
                && in_flight != answer,
            format!(
                "{who}: GET /api/chats/{chat} mid-answer holds the answer in flight under the live id {answer_id}: {:?}",
                outline(&loaded)
            ),
        );
        check(
            record["reconnectStatus"] == 200,
            format!(
                "{who}: GET /api/chat/{chat}/stream answered {} (200: the running answer)",
                record["reconnectStatus"]
            ),
        );
    }
    // The second tab and the reloaded one mid-answer: question, answer so far.
    for (step, who) in [(5, "the second tab"), (8, "the reloaded tab")] {
        let shown = messages(&steps[step]["messages"]);
        let so_far = shown.get(1).map(text).unwrap_or_default();
        check(
            shown.len() == 2
                && text(&shown[0]) == "Tell me slowly."
                && &shown[0]["id"] == question_id
                && &shown[1]["id"] == answer_id
                && !so_far.is_empty()
                && answer.starts_with(&so_far)
                && so_far != answer,
            format!(
                "{who} mid-answer shows the question and the answer so far: {:?}",
                outline(&shown)
            ),
        );
    }
    // Then the whole answer, once, in both.
    for id in ["1", "2"] {
        let tab = tab(&result, id);
        let shown = messages(&tab["messages"]);
        check(
            tab["status"] == "ready"
                && shown.iter().map(text).collect::<Vec<_>>()
                    == ["Tell me slowly.", answer.as_str()]
                && shown.first().is_some_and(|m| &m["id"] == question_id)
                && shown.get(1).is_some_and(|m| &m["id"] == answer_id),
            format!(
                "tab {id} ends {} with the question and the whole answer once: {:?}",
                tab["status"],
                outline(&shown)
            ),
        );
    }
    let stored = stored_with(&server, chat, "w139").await;
    check(
        stored.iter().map(text).collect::<Vec<_>>() == ["Tell me slowly.", answer.as_str()],
        format!("the stored thread: {:?}", outline(&stored)),
    );
    check(
        world.model.requests().len() == 1,
        format!(
            "model requests: {} (one answer)",
            world.model.requests().len()
        ),
    );
    assert!(
        failures.is_empty(),
        "{failures:#?}\ntab 1: {:#?}\ntab 2: {:#?}",
        requests(tab(&result, "1")),
        requests(tab(&result, "2"))
    );
}

// ------------------------------------------------------------------ 4

/// The ids (the user's messages keep their client ids, answers are
/// `msg-<run id>`) and each answer's `metadata` (model, usage) a live tab
/// shows are those `GET /api/chats/{id}` returns once the runs ended: for a
/// plain answer and for a tool call continued by an approval.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_ids_and_metadata_are_the_same_live_and_after_reload() {
    let Some(_) = agent_testing::peers::peer(agent_testing::peers::Peer::Node) else {
        return;
    };
    let say_hi = json!({"command": "echo hi >> said.txt"});
    let replies = [
        Reply::text("Hello there."),
        Reply::tool_calls(&[("call_say", "core__exec_shell", say_hi)]),
        Reply::text("Said hi."),
    ];
    let world = World::start(replies, None).await;
    let home = &world.home;
    let server = world.serve().await;
    let chat = "ids";
    let script = json!({"chatId": chat, "sendAutomaticallyWhen": "approvals", "steps": [
        {"tab": 1, "do": "send", "text": "Hi."},
        {"tab": 1, "do": "send", "text": "Say hi to a file."},
        {"tab": 1, "do": "approve", "approved": true},
        {"do": "pause", "name": "answered"},
        {"tab": 2, "do": "load"}
    ]});
    let mut tabs = Tabs::start(home, &server, &script, 60_000);
    tabs.pause("answered").await;
    // Three runs: the answer, the call (paused for the approval) and its
    // continuation; none running, the last one done.
    let settled = |runs: &Vec<agent_store::RunRecord>| {
        runs.len() == 3
            && runs.iter().all(|r| r.status != RunStatus::Running)
            && runs.iter().filter(|r| r.status == RunStatus::Done).count() == 2
    };
    let runs = world.runs_when(chat, settled).await;
    assert!(settled(&runs), "{:?}", summary(&runs));
    tabs.go_on(json!({})).await;
    let result = tabs.finish().await;
    assert_eq!(
        std::fs::read_to_string(home.workspace.join("said.txt")).unwrap_or_default(),
        "hi\n"
    );
    let live = messages(&tab(&result, "1")["messages"]);
    let loaded = messages(&result["steps"][4]["loaded"]);
    let view = |messages: &[Value]| -> Vec<Value> {
        messages
            .iter()
            .map(|m| json!({"id": m["id"], "role": m["role"], "metadata": m["metadata"], "text": text(m)}))
            .collect()
    };
    assert_eq!(
        view(&live),
        view(&loaded),
        "live {:#?}\nafter reload {:#?}",
        live,
        loaded
    );
    // Each answer has its metadata (model and usage), and the ids are as
    // promised: the client's for the user's messages, `msg-<run id>` for the
    // answers.
    let user_ids: Vec<&Value> = tab(&result, "1")["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["method"] == "POST")
        .filter_map(|r| r["body"]["messages"].as_array()?.last())
        .filter(|m| m["role"] == "user")
        .map(|m| &m["id"])
        .collect();
    let run_ids: Vec<String> = runs.iter().map(|r| format!("msg-{}", r.run.id)).collect();
    for message in &live {
        match message["role"].as_str() {
            Some("user") => assert!(user_ids.contains(&&message["id"]), "{message} {user_ids:?}"),
            Some("assistant") => {
                let id = message["id"].as_str().unwrap();
                assert!(run_ids.iter().any(|r| r == id), "{id} in {run_ids:?}");
                assert!(message["metadata"]["model"].is_string(), "{message}");
                assert!(message["metadata"]["usage"].is_object(), "{message}");
            }
            _ => panic!("{message}"),
        }
    }
    assert_eq!(live.len(), 4, "{:?}", outline(&live));
    let parts = tool_parts(&loaded, "call_say");
    assert_eq!(parts.len(), 1, "{:?}", outline(&loaded));
    assert_eq!(parts[0]["state"], "output-available");
}

// ------------------------------------------------------------------ 5

/// Two tabs of one chat send different messages at the same moment, while
/// the chat is idle: both turns are in the stored thread, each question
/// followed by its answer, the later turn's model request carrying the
/// earlier turn; or one send got `409 chat_busy` after waiting for the other
/// run as long as the server waits (30 s), and the store has the other turn
/// whole. Checked on the store (`GET /api/chats/{id}` and its runs) and on
/// what the model read, not only on the tabs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_tabs_sending_at_once_lose_no_turn() {
    let Some(_) = agent_testing::peers::peer(agent_testing::peers::Peer::Node) else {
        return;
    };
    let replies: Vec<Reply> = (0..3)
        .map(|_| {
            Reply::from_request(|request| {
                Reply::text(&format!("Answer to {}", last_user_text(request)))
                    .paced(Duration::from_millis(100))
            })
        })
        .collect();
    let world = World::start(replies, None).await;
    let server = world.serve().await;
    let chat = "both";
    let script = json!({"chatId": chat, "steps": [
        {"tab": 1, "do": "send", "text": "Start."},
        {"tab": 2, "do": "load"},
        {"parallel": [
            {"tab": 1, "do": "send", "text": "From tab one."},
            {"tab": 2, "do": "send", "text": "From tab two."}
        ]},
        {"do": "pause", "name": "sent"},
        {"tab": 3, "do": "load"}
    ]});
    let mut tabs = Tabs::start(&world.home, &server, &script, 90_000);
    tabs.pause("sent").await;
    let runs = world
        .runs_when(chat, |runs| {
            runs.iter().all(|r| r.status != RunStatus::Running)
        })
        .await;
    tabs.go_on(json!({})).await;
    let result = tabs.finish().await;

    // Which sends were taken: their POST answered 200.
    let mut taken = Vec::new();
    let mut refused = Vec::new();
    for (id, said) in [("1", "From tab one."), ("2", "From tab two.")] {
        let tab = tab(&result, id);
        let post = tab["requests"]
            .as_array()
            .unwrap()
            .iter()
            .rfind(|r| r["method"] == "POST")
            .unwrap();
        match post["status"].as_u64() {
            Some(200) => taken.push(said),
            Some(409) => {
                let waited =
                    post["answeredAtMs"].as_u64().unwrap() - post["sentAtMs"].as_u64().unwrap();
                refused.push((said, waited, post["errorBody"].clone()));
            }
            _ => panic!("tab {id}: {:?}", requests(tab)),
        }
    }
    let stored = messages(&stored_thread(&server, chat).await);
    let loaded = messages(&result["steps"][4]["loaded"]);
    let context = format!(
        "taken {taken:?}, refused {refused:?}\nstored {:?}\nruns {:?}\ntab 1 {:?}\ntab 2 {:?}",
        outline(&stored),
        summary(&runs),
        requests(tab(&result, "1")),
        requests(tab(&result, "2"))
    );
    for (_, _, body) in &refused {
        assert_eq!(body["error"], "chat_busy", "{context}");
    }
    assert_eq!(taken.len() + refused.len(), 2, "{context}");
    // The store: the first turn, then each taken turn whole, in some order.
    let texts: Vec<String> = stored.iter().map(text).collect();
    assert_eq!(texts.len(), 2 + 2 * taken.len(), "{context}");
    assert_eq!(texts[..2], ["Start.", "Answer to Start."], "{context}");
    for pair in texts[2..].chunks(2) {
        assert!(taken.contains(&pair[0].as_str()), "{context}");
        assert_eq!(pair[1], format!("Answer to {}", pair[0]), "{context}");
    }
    assert_eq!(
        loaded.iter().map(text).collect::<Vec<_>>(),
        texts,
        "a tab opened afterwards shows the stored thread: {context}"
    );
    // The model read each taken turn after the ones before it.
    let sent = world.model.requests();
    assert_eq!(sent.len(), 1 + taken.len(), "{context}");
    if taken.len() == 2 {
        let last = sent[2].body["messages"].to_string();
        assert!(
            last.contains("From tab one.") && last.contains("From tab two."),
            "the later turn's request carries the earlier turn: {last}"
        );
    }
    // Ordered, not refused: the second send waits for the first run (which
    // takes about a second); a 409 is for a run still going after 30 s.
    for (_, waited, _) in &refused {
        assert!(
            *waited >= 29_000,
            "a 409 only after waiting for the other run (the server waits up to 30 s; \
             the other run took about a second), but it came after {waited} ms: {context}"
        );
    }
}

// ------------------------------------------------------------------ 6

/// The processes whose command line contains `marker`.
fn processes_with(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let line = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if line.contains(marker) {
            found.push(format!("{}: {line}", entry.file_name().to_string_lossy()));
        }
    }
    found
}

/// Two `agent serve` processes on one store (the SQLite file). A run
/// streaming an endless answer on server A is stopped by a tab of server B
/// (the page's Stop: the client's `stop()`, then `POST /api/chat/{id}/stop`
/// to B): the run ends `interrupted` within a few lease renewals, A stops
/// calling the model, and the tab on A is left ready. Then on A a shell
/// command runs as a tool and its tab's stock `stop()` aborts the fetch
/// only: the command goes on through the detach grace (a reload could
/// reattach) and is stopped after it: its process is gone, it never wrote
/// its last line, and the run is not running.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_from_a_second_server_stops_the_run() {
    let Some(_) = agent_testing::peers::peer(agent_testing::peers::Peer::Node) else {
        return;
    };
    const GRACE_MS: u64 = 3000;
    const MARKER: &str = "sleep 41.25";
    let slow = format!("echo started >> slow.txt; {MARKER}; echo finished >> slow.txt");
    let replies = [
        crate::threads::endless_words(20),
        Reply::tool_calls(&[("call_slow", "core__exec_shell", json!({"command": slow}))]),
        Reply::text("Not reached."),
    ];
    let config = format!(
        "{SHORT_LEASE}\n[server]\ndetach_grace_ms = {GRACE_MS}\n\n[policy]\nrequire_approval = []\n"
    );
    let world = World::start(replies, Some(&config)).await;
    let (model, home) = (&world.model, &world.home);
    let a = world.serve().await;
    let b = world.serve().await;
    let script = json!({"servers": {"b": entry(&b)}, "steps": [
        {"tab": 1, "chatId": "endless", "do": "send", "text": "Talk forever.", "wait": false},
        {"tab": 1, "do": "wait", "untilText": "w10 "},
        {"tab": 2, "chatId": "endless", "server": "b", "do": "stop", "stopRun": true},
        {"do": "pause", "name": "stopped"},
        {"tab": 1, "do": "wait"},
        {"tab": 3, "chatId": "slow", "do": "send", "text": "Run the slow command.", "wait": false},
        {"tab": 3, "do": "wait", "untilChunk": "tool-input-available"},
        {"do": "pause", "name": "running"},
        {"tab": 3, "do": "stop"},
        {"do": "pause", "name": "aborted"},
        {"tab": 3, "do": "wait"}
    ]});
    let mut tabs = Tabs::start(home, &a, &script, 60_000);

    // Stop through B.
    let stopped = tabs.pause("stopped").await;
    let asked = Instant::now();
    assert!(
        stopped["tabs"]["1"].to_string().contains("w10 "),
        "tab 1 on A was streaming: {stopped}"
    );
    let runs = world
        .runs_when("endless", |runs| {
            !runs.is_empty() && runs.iter().all(|r| r.status != RunStatus::Running)
        })
        .await;
    let took = asked.elapsed();
    eprintln!("the run on A ended {took:?} after B took the Stop");
    assert_eq!(runs.len(), 1, "{:?}", summary(&runs));
    assert_eq!(
        runs[0].status,
        RunStatus::Interrupted,
        "{:?}; the tabs then: {stopped}",
        summary(&runs)
    );
    assert!(
        took < Duration::from_secs(5),
        "within a few lease renewals (every 400 ms): {took:?}"
    );
    tokio::time::timeout(Duration::from_secs(10), model.wait_abandoned(1))
        .await
        .expect("server A stopped reading the model's endless answer");
    tabs.go_on(json!({})).await;

    // The stock stop(): the fetch aborted, the run detached for the grace.
    tabs.pause("running").await;
    let started = eventually(
        || async { std::fs::read_to_string(home.workspace.join("slow.txt")).unwrap_or_default() },
        |text: &String| text.contains("started"),
    )
    .await;
    assert_eq!(started, "started\n");
    assert!(!processes_with(MARKER).is_empty(), "the command runs");
    tabs.go_on(json!({})).await;
    tabs.pause("aborted").await;
    let aborted = Instant::now();
    assert!(
        !processes_with(MARKER).is_empty(),
        "the command goes on through the detach grace"
    );
    let left = eventually(
        || async { processes_with(MARKER) },
        |left: &Vec<String>| left.is_empty() || aborted.elapsed() > Duration::from_secs(9),
    )
    .await;
    let gone_after = aborted.elapsed();
    eprintln!(
        "the command was stopped {gone_after:?} after the client's stop() (grace {GRACE_MS} ms)"
    );
    let left = if left.is_empty() {
        left
    } else {
        // `eventually` gives up after 10 s; a little longer for a loaded machine.
        eventually(|| async { processes_with(MARKER) }, Vec::is_empty).await
    };
    assert!(
        left.is_empty(),
        "the command is stopped after the grace ({GRACE_MS} ms): still running {:?} after the client's stop: {left:?}",
        aborted.elapsed()
    );
    assert!(
        gone_after >= Duration::from_millis(GRACE_MS - 500),
        "stopped only after the grace: gone {gone_after:?} after the client's stop"
    );
    tabs.go_on(json!({})).await;
    let result = tabs.finish().await;
    assert_eq!(
        result["steps"][2]["stopStatus"], 202,
        "B took the Stop of A's run: {}",
        result["steps"][2]
    );
    let runs = world
        .runs_when("slow", |runs| {
            !runs.is_empty() && runs.iter().all(|r| r.status != RunStatus::Running)
        })
        .await;
    assert!(
        runs.iter().all(|r| r.status != RunStatus::Running),
        "{:?}",
        summary(&runs)
    );
    assert_eq!(
        std::fs::read_to_string(home.workspace.join("slow.txt")).unwrap_or_default(),
        "started\n",
        "the command never finished"
    );
    for id in ["1", "3"] {
        let tab = tab(&result, id);
        assert_ne!(tab["status"], "streaming", "tab {id}: {:?}", requests(tab));
        assert_ne!(tab["status"], "submitted", "tab {id}: {:?}", requests(tab));
    }
    assert_eq!(
        model.requests().len(),
        2,
        "the model is not asked to go on after a stopped call"
    );
}
