//! A real tracing backend: Arize Phoenix (`phoenix serve`, pinned in
//! `tests/phoenix/requirements.txt`, installed by `cargo xtask test-env`) on
//! loopback, offline, in a temporary working directory. The two-turn tool run,
//! through `agent chat` (`TRACEPARENT`) and then through `agent serve` (a
//! `traceparent` header), is exported to its OTLP/HTTP endpoint; Phoenix's REST
//! API then shows each as one trace, the caller's, with the model and tool spans
//! under the run's, their token counts those of the run's usage events, and no
//! trace of the secret argument. A screenshot of the trace in Phoenix's UI is taken
//! with the Chromium the browser tests use.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

use agent_testing::server::{OpenAiServer, Reply};

use super::{
    PARENT_ID, SECRET_ARG, SECRET_KEY, TRACE_ID, answer_turn, run_events, serve_exporting,
    tool_call_turn, traced_tool_run, usage_of,
};
use crate::served::{body_text, chat_body, http, stream_text};
use crate::support::{Home, free_port};

/// How long Phoenix may take to answer after it starts (a cold start imports a
/// lot of Python and migrates its database).
const READY_WITHIN: Duration = Duration::from_secs(180);

/// The project Phoenix files spans under when their resource names none.
const PROJECT: &str = "default";

/// The `phoenix` command: `$AGENT_TEST_PHOENIX`, else the workspace's
/// `target/phoenix-venv` (made by `cargo xtask test-env`).
fn phoenix_command() -> PathBuf {
    if let Some(path) = std::env::var_os("AGENT_TEST_PHOENIX") {
        return PathBuf::from(path);
    }
    let venv = repo().join("target/phoenix-venv/bin/phoenix");
    assert!(
        venv.exists(),
        "the tracing-backend test needs Arize Phoenix: run `cargo xtask test-env` \
         (or `cargo xtask test`), or set AGENT_TEST_PHOENIX to a `phoenix` command"
    );
    venv
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A running `phoenix serve`, killed when dropped.
struct Phoenix {
    child: tokio::process::Child,
    base: String,
    log: PathBuf,
}

impl Phoenix {
    /// Starts Phoenix with its data in `dir` and waits until it answers.
    async fn start(dir: &Path) -> Self {
        let port = free_port();
        let log = dir.join("phoenix.log");
        let output = std::fs::File::create(&log).unwrap();
        let child = tokio::process::Command::new(phoenix_command())
            .arg("serve")
            .current_dir(dir)
            .env("PHOENIX_WORKING_DIR", dir)
            .env("PHOENIX_HOST", "127.0.0.1")
            .env("PHOENIX_PORT", port.to_string())
            .env("PHOENIX_GRPC_PORT", free_port().to_string())
            .env("PHOENIX_TELEMETRY_ENABLED", "false")
            .env("DO_NOT_TRACK", "1")
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .stdin(Stdio::null())
            .stdout(output.try_clone().unwrap())
            .stderr(output)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut phoenix = Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
            log,
        };
        phoenix.wait_ready().await;
        phoenix
    }

    /// Polls `/healthz` every 250 ms until it answers 200.
    async fn wait_ready(&mut self) {
        let client = http();
        let deadline = tokio::time::Instant::now() + READY_WITHIN;
        while tokio::time::Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("phoenix exited ({status}): {}", self.log_text());
            }
            let health = client.get(format!("{}/healthz", self.base)).send().await;
            if health.is_ok_and(|r| r.status().is_success()) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        panic!("phoenix did not answer in time: {}", self.log_text());
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The body of `GET {base}{path}`, as text.
    async fn get(&self, path: &str) -> String {
        let response = http()
            .get(format!("{}{path}", self.base))
            .send()
            .await
            .unwrap();
        assert!(response.status().is_success(), "GET {path}: {response:?}");
        response.text().await.unwrap()
    }

    /// The spans of trace `trace_id`, as Phoenix's REST API lists them.
    async fn spans(&self, trace_id: &str) -> Vec<Value> {
        let path = format!("/v1/projects/{PROJECT}/spans?limit=1000&trace_id={trace_id}");
        let body: Value = serde_json::from_str(&self.get(&path).await).unwrap();
        body["data"].as_array().cloned().unwrap_or_default()
    }

    /// The spans of trace `trace_id` once there are `count` of them (polled
    /// every 250 ms for at most 60 s: Phoenix inserts what it receives in
    /// batches, and `agent serve` exports on a schedule).
    async fn spans_once(&self, trace_id: &str, count: usize) -> Vec<Value> {
        let mut spans = Vec::new();
        for _ in 0..240 {
            spans = self.spans(trace_id).await;
            if spans.len() >= count {
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        spans
    }
}

/// Attribute `key` (a dotted path) of a span Phoenix lists: flat or nested.
fn attribute<'a>(span: &'a Value, key: &str) -> Option<&'a Value> {
    let attributes = &span["attributes"];
    if let Some(value) = attributes.get(key) {
        return Some(value);
    }
    key.split('.')
        .try_fold(attributes, |value, part| value.get(part))
}

fn tokens(span: &Value, openinference: &str, convention: &str) -> i64 {
    attribute(span, openinference)
        .or_else(|| attribute(span, convention))
        .and_then(Value::as_i64)
        .unwrap_or_else(|| panic!("no {openinference} on {span}"))
}

fn named<'a>(spans: &'a [Value], name: &str) -> Vec<&'a Value> {
    spans.iter().filter(|span| span["name"] == name).collect()
}

/// Checks that Phoenix holds trace `trace_id` as the two-turn tool run: the run's
/// span (child of `parent_id`), its two model calls and its tool call under it,
/// with the token counts of `usage`, and nowhere the secret argument.
async fn assert_tool_trace(
    phoenix: &Phoenix,
    (trace_id, parent_id): (&str, &str),
    usage: &[(i64, i64)],
) {
    let spans = phoenix.spans_once(trace_id, 4).await;
    let names: Vec<&str> = spans.iter().filter_map(|s| s["name"].as_str()).collect();
    assert_eq!(
        spans.len(),
        4,
        "run, two model calls, a tool call: {names:?}"
    );
    for span in &spans {
        assert_eq!(span["context"]["trace_id"], trace_id, "one trace: {span}");
    }
    let runs = named(&spans, "invoke_agent chat");
    assert_eq!(runs.len(), 1, "{names:?}");
    assert_eq!(
        runs[0]["parent_id"], parent_id,
        "the caller's span is the parent"
    );
    let run_id = &runs[0]["context"]["span_id"];
    let mut models = named(&spans, "chat e2e-model");
    let tools = named(&spans, "execute_tool core__memory_read");
    assert_eq!((models.len(), tools.len()), (2, 1), "{names:?}");
    for child in models.iter().chain(&tools) {
        assert_eq!(&child["parent_id"], run_id, "under the run: {child}");
    }
    models.sort_by_key(|span| span["start_time"].as_str().unwrap_or_default().to_owned());
    let exported: Vec<(i64, i64)> = models
        .iter()
        .map(|span| {
            let input = tokens(span, "llm.token_count.prompt", "gen_ai.usage.input_tokens");
            let output = tokens(
                span,
                "llm.token_count.completion",
                "gen_ai.usage.output_tokens",
            );
            (input, output)
        })
        .collect();
    assert_eq!(exported, usage);
    assert_eq!(exported, [(41, 9), (77, 5)]);
    let otlp = phoenix
        .get(&format!(
            "/v1/projects/{PROJECT}/spans/otlpv1?limit=1000&trace_id={trace_id}"
        ))
        .await;
    for stored in [serde_json::to_string(&spans).unwrap(), otlp] {
        assert!(!stored.contains(SECRET_ARG), "the secret reached Phoenix");
    }
}

/// A caller's trace and span `agent serve` is sent in a `traceparent` header.
const SERVE_TRACE_ID: &str = "0af7651916cd43dd8448eb211c80319c";
const SERVE_PARENT_ID: &str = "b7ad6b7169203331";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telemetry_phoenix_shows_chat_and_serve_tool_runs_as_nested_traces_without_the_secret() {
    let Some(_) = agent_testing::peers::peer(agent_testing::peers::Peer::Phoenix) else {
        return;
    };
    if !agent_testing::browser::available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let phoenix = Phoenix::start(dir.path()).await;
    let traces = format!("{}/v1/traces", phoenix.base);
    let events = traced_tool_run(&[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", &traces)], None).await;
    assert_tool_trace(&phoenix, (TRACE_ID, PARENT_ID), &usage_of(&events)).await;
    screenshot(&phoenix).await;

    // The same run through `agent serve`, the caller's trace in its header.
    let model = OpenAiServer::start([Reply::sse(tool_call_turn()), Reply::sse(answer_turn())])
        .await
        .unwrap();
    let home = Home::new(SECRET_KEY);
    let served = serve_exporting(
        &home,
        &model.base_url(),
        &phoenix.base,
        // Phoenix takes traces only.
        "metrics = false\n",
    )
    .await;
    let request = served
        .post_chat(&chat_body("chat-phoenix", "What do you remember?"))
        .header(
            "traceparent",
            format!("00-{SERVE_TRACE_ID}-{SERVE_PARENT_ID}-01"),
        );
    let answer = body_text(request).await;
    assert_eq!(stream_text(&answer), "Nothing is stored.", "{answer}");
    let usage = usage_of(&run_events(&home, "chat-phoenix").await);
    assert_tool_trace(&phoenix, (SERVE_TRACE_ID, SERVE_PARENT_ID), &usage).await;
    // Exactly the two runs' traces, nothing else.
    let all = phoenix
        .get(&format!("/v1/projects/{PROJECT}/spans?limit=1000"))
        .await;
    let all: Value = serde_json::from_str(&all).unwrap();
    assert_eq!(all["data"].as_array().map(Vec::len), Some(8), "{all}");
}

/// The trace in Phoenix's UI, shot with Chromium into
/// `target/browser-shots/phoenix-trace.png` (and `docs/phoenix-trace.png`
/// when `AGENT_TEST_UPDATE_DOCS` is set).
async fn screenshot(phoenix: &Phoenix) {
    let projects: Value = serde_json::from_str(&phoenix.get("/v1/projects").await).unwrap();
    let project = projects["data"]
        .as_array()
        .and_then(|all| all.iter().find(|p| p["name"] == PROJECT))
        .and_then(|p| p["id"].as_str())
        .expect("the default project")
        .to_owned();
    let url = format!("{}/projects/{project}/traces/{TRACE_ID}", phoenix.base);
    let shot = agent_testing::browser::shots_dir().join("phoenix-trace.png");
    std::fs::create_dir_all(shot.parent().unwrap()).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/phoenix/screenshot.mjs");
    let output = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new("node")
            .arg(&script)
            .arg(&url)
            .arg(&shot)
            .arg("execute_tool core__memory_read")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the screenshot finished")
    .unwrap();
    assert!(
        output.status.success(),
        "screenshot of {url}: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let png = std::fs::read(&shot).unwrap();
    assert!(png.starts_with(b"\x89PNG"), "a PNG at {}", shot.display());
    if std::env::var_os("AGENT_TEST_UPDATE_DOCS").is_some() {
        let docs = repo().join("docs");
        std::fs::create_dir_all(&docs).unwrap();
        std::fs::write(docs.join("phoenix-trace.png"), png).unwrap();
    }
}
