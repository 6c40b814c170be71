//! A live chat service on loopback over a scripted model, with an echo tool, a
//! counting `app__write` (state change, needs approval), an `app__wait` that
//! runs until cancelled and `client__get_location`, which the client runs.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use agent_server::{Access, ChatService, ChatSetup};
use agent_testing::{ScriptedModel, ToolFuture, Turn, echo_tool};
use ai_core::{
    CompletionPort, ToolEffect, ToolId, ToolPolicy, ToolSpec,
    tool::{Redaction, RegisteredTool, ToolCallContext, ToolExecutor, ToolOutput},
};
use serde_json::{Value, json};
use sha2::Digest as _;

/// Counts executions; returns `{"written": key}`.
pub(crate) struct Write(pub(crate) Arc<AtomicUsize>);

impl ToolExecutor for Write {
    fn execute(&self, _cx: ToolCallContext, args: Value) -> ToolFuture {
        self.0.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move { Ok(ToolOutput::json(json!({"written": args["key"]}))) })
    }
}

/// Sets its flag when dropped: the runner stops a cancelled call by firing its
/// token and, after a grace period, dropping its future.
struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Waits until its call is cancelled (or dropped), then records that it stopped.
pub(crate) struct Wait {
    pub(crate) started: Arc<AtomicBool>,
    pub(crate) cancelled: Arc<AtomicBool>,
}

impl ToolExecutor for Wait {
    fn execute(&self, cx: ToolCallContext, _args: Value) -> ToolFuture {
        let started = Arc::clone(&self.started);
        let cancelled = Arc::clone(&self.cancelled);
        Box::pin(async move {
            let _stopped = SetOnDrop(cancelled);
            started.store(true, Ordering::SeqCst);
            cx.cancel.cancelled().await;
            Ok(ToolOutput::json(json!({})))
        })
    }
}

pub(crate) struct Live {
    pub(crate) addr: SocketAddr,
    pub(crate) model: Arc<ScriptedModel>,
    pub(crate) writes: Arc<AtomicUsize>,
    pub(crate) wait_started: Arc<AtomicBool>,
    pub(crate) wait_cancelled: Arc<AtomicBool>,
    _shutdown: tokio::sync::oneshot::Sender<()>,
}

/// Tool `name`, described as "The <name> tool.", every argument and output
/// field of which may reach events.
fn spec(name: &str, effect: ToolEffect, schema: Value) -> ToolSpec {
    let id = ToolId::parse(name).unwrap();
    let shown = Redaction::new(["$"], ["$"]).unwrap();
    ToolSpec::new(id, format!("The {name} tool."), schema, effect).with_redaction(shown)
}

/// The bearer token every live server of these tests accepts (besides any the
/// test's own access adds); [`client`] sends it.
pub(crate) const TOKEN: &str = "test-token-0123456789";

/// The token of the `guest` account of every live server, which may use only
/// the [`RESEARCHER`] graph.
pub(crate) const GUEST_TOKEN: &str = "guest-token-0123456789";

/// The second graph of every live server (the default is `test`): only
/// `app__echo`, its own prompt.
pub(crate) const RESEARCHER: &str = "researcher";

/// The system prompt of [`RESEARCHER`].
pub(crate) const RESEARCHER_PROMPT: &str = "You are a researcher.";

/// Starts the service with `model` behind `access` (built for the bound port),
/// which also accepts [`TOKEN`].
pub(crate) async fn start(model: ScriptedModel, access: impl FnOnce(u16) -> Access) -> Live {
    start_with(model, access, agent_server::ConnectionLimits::default()).await
}

/// [`start`] under these connection limits.
pub(crate) async fn start_with(
    model: ScriptedModel,
    access: impl FnOnce(u16) -> Access,
    limits: agent_server::ConnectionLimits,
) -> Live {
    start_full(model, access, limits, None).await
}

/// [`start`] on a run store: a new SQLite file (removed with the returned
/// folder guard).
pub(crate) async fn start_stored(model: ScriptedModel) -> (Live, StoreDir) {
    let dir = StoreDir(std::env::temp_dir().join(format!("agent-store-{}", uuid::Uuid::new_v4())));
    std::fs::create_dir_all(&dir.0).unwrap();
    let store = agent_store::Store::open_sqlite(&dir.0.join("store.db"))
        .await
        .unwrap();
    let instance = agent_durable::lease::Instance::start(
        store,
        "serve",
        agent_durable::lease::LeaseTiming::default(),
    )
    .await
    .unwrap();
    let store = agent_durable::Runs::new(instance);
    let live = start_full(
        model,
        Access::loopback,
        agent_server::ConnectionLimits::default(),
        Some(store),
    )
    .await;
    (live, dir)
}

/// A folder removed when dropped.
pub(crate) struct StoreDir(std::path::PathBuf);

impl StoreDir {
    /// The store the server uses, opened again (SQLite: many connections).
    pub(crate) async fn open(&self) -> agent_store::Store {
        agent_store::Store::open_sqlite(&self.0.join("store.db"))
            .await
            .unwrap()
    }
}

impl Drop for StoreDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

async fn start_full(
    model: ScriptedModel,
    access: impl FnOnce(u16) -> Access,
    limits: agent_server::ConnectionLimits,
    store: Option<agent_durable::Runs>,
) -> Live {
    let model = Arc::new(model);
    let writes = Arc::new(AtomicUsize::new(0));
    let wait_started = Arc::new(AtomicBool::new(false));
    let wait_cancelled = Arc::new(AtomicBool::new(false));
    let tools: Vec<RegisteredTool> = vec![
        echo_tool(),
        RegisteredTool {
            spec: spec(
                "app__write",
                ToolEffect::StateChange,
                json!({"type": "object", "properties": {"key": {"type": "string"}, "value": {"type": "integer"}}, "required": ["key", "value"]}),
            ),
            executor: Arc::new(Write(Arc::clone(&writes))),
        },
        RegisteredTool {
            spec: spec(
                "app__wait",
                ToolEffect::ReadOnly,
                json!({"type": "object", "properties": {}}),
            ),
            executor: Arc::new(Wait {
                started: Arc::clone(&wait_started),
                cancelled: Arc::clone(&wait_cancelled),
            }),
        },
        RegisteredTool::client(ToolSpec::new(
            ToolId::client("get_location").unwrap(),
            "The user's city, from the browser.",
            json!({"type": "object", "properties": {"precise": {"type": "boolean"}}}),
            ToolEffect::ReadOnly,
        )),
    ];
    let service = ChatService::new(ChatSetup {
        model: Arc::clone(&model) as Arc<dyn CompletionPort>,
        model_id: "test-model".into(),
        tools,
        policy: ToolPolicy::allowing(["app__*", "client__*"])
            .with_approval_for([ToolEffect::StateChange]),
        graph: agent_graph::Graph::new("test", "The tests' graph.", "You are a test."),
    })
    .unwrap()
    .with_graph(
        agent_graph::Graph::new(RESEARCHER, "Finds things out.", RESEARCHER_PROMPT).with_tools(
            agent_graph::graph::ToolFilter::Ids(vec!["app__echo".into()]),
        ),
    )
    .with_account_graphs("guest", [RESEARCHER.to_owned()]);
    let service = match store {
        Some(runs) => service.with_runs(runs),
        None => service,
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let guest: [u8; 32] = sha2::Sha256::digest(GUEST_TOKEN.as_bytes()).into();
    let access = access(addr.port())
        .with_token(TOKEN)
        .with_account("guest", guest);
    let router = Arc::new(service).router(access);
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(agent_server::serve(
        listener,
        router,
        limits,
        async move {
            let _ = rx.await;
        },
        Duration::from_secs(5),
    ));
    Live {
        addr,
        model,
        writes,
        wait_started,
        wait_cancelled,
        _shutdown: tx,
    }
}

/// A client sending [`TOKEN`]; in a workspace build reqwest needs a rustls
/// provider installed.
pub(crate) fn client() -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert(
        reqwest::header::AUTHORIZATION,
        reqwest::header::HeaderValue::from_static("Bearer test-token-0123456789"),
    );
    anonymous_client_builder()
        .default_headers(headers)
        .build()
        .unwrap()
}

/// A client sending no credential.
pub(crate) fn anonymous_client() -> reqwest::Client {
    anonymous_client_builder().build().unwrap()
}

fn anonymous_client_builder() -> reqwest::ClientBuilder {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
}

impl Live {
    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// POSTs `body` to `/api/chat` (UI stream); status and the parsed chunks.
    pub(crate) async fn chat(&self, body: &Value) -> (u16, Vec<Value>, String) {
        let response = client()
            .post(self.url("/api/chat"))
            .json(body)
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        (status, chunks(&text), text)
    }
}

/// The JSON chunks of an SSE body (without the `[DONE]` terminator).
pub(crate) fn chunks(text: &str) -> Vec<Value> {
    text.split("\n\n")
        .filter_map(|event| event.strip_prefix("data: "))
        .filter(|data| *data != "[DONE]")
        .map(|data| serde_json::from_str(data).unwrap())
        .collect()
}

pub(crate) fn types(chunks: &[Value]) -> Vec<&str> {
    chunks.iter().map(|c| c["type"].as_str().unwrap()).collect()
}

pub(crate) fn user(text: &str) -> Value {
    json!({"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]})
}

pub(crate) fn body(messages: Vec<Value>) -> Value {
    json!({"id": "chat-1", "messages": messages, "trigger": "submit-message"})
}

/// The model's call `w1` of `app__write` with `{"key": "k", "value": 1}`: a
/// state change, which needs an approval.
pub(crate) fn write_k() -> Turn {
    Turn::new().tool_call("w1", "app__write", json!({"key": "k", "value": 1}))
}

/// A model that calls `app__write` ([`write_k`]), then answers `answer`.
pub(crate) fn write_then(answer: &str) -> ScriptedModel {
    ScriptedModel::new([write_k(), Turn::text(answer)])
}

/// `tests/js`, once its packages are installed.
pub(crate) fn js_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/js");
    assert!(
        dir.join("node_modules").exists(),
        "the JS client tests need `npm ci --prefix tests/js` (run `cargo xtask test-env`)"
    );
    dir
}

/// Runs `tests/js/<script>` with Node: `args`, [`TOKEN`] as an authorization
/// header, and `input` written to a temporary file passed with `input_flag`.
/// Its one JSON line; `what` names the run in failures.
pub(crate) async fn run_js(
    script: &str,
    args: &[&str],
    (input_flag, input): (&str, &Value),
    what: &str,
) -> Value {
    let file = std::env::temp_dir().join(format!("agent-server-js-{}.json", uuid::Uuid::new_v4()));
    std::fs::write(&file, input.to_string()).unwrap();
    let output = tokio::process::Command::new("node")
        .arg(js_dir().join(script))
        .args(args)
        .arg("--header")
        .arg(format!("authorization: Bearer {TOKEN}"))
        .arg(input_flag)
        .arg(&file)
        .output()
        .await
        .expect("node runs");
    let _ = std::fs::remove_file(&file);
    let stdout = String::from_utf8_lossy(&output.stdout);
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "{what}: no JSON line ({e}): {stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        )
    })
}
