//! Shared test harness: where the test servers' Python is, a state folder per test,
//! server configs, a runner over the sources, and process checks.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use ai_core::{
    AiEvent, CancellationToken, RunContext, ToolEffect, ToolPolicy, ToolRunner,
    event::EventSink,
    runner::{CallScope, ToolCall, ToolExecution},
};
use serde_json::Value;
use tools_mcp::{McpSources, Pins, ServerConfig};

pub(crate) use agent_testing::mcp_servers::{python, script};

/// A temporary folder where the server writes its pid, port and markers.
pub(crate) struct State(tempfile::TempDir);

impl State {
    /// A fresh state folder; `None` (the test is skipped) on a machine without the
    /// test servers' Python, unless peers are required.
    pub(crate) fn new() -> Option<Self> {
        agent_testing::peers::peer(agent_testing::peers::Peer::Python)?;
        Some(Self(tempfile::tempdir().unwrap()))
    }

    pub(crate) fn path(&self) -> &Path {
        self.0.path()
    }

    /// Waits for a file the server writes; its content.
    pub(crate) async fn wait(&self, name: &str, limit: Duration) -> Option<String> {
        agent_testing::process::wait_file(&self.0.path().join(name), limit).await
    }

    pub(crate) async fn pid(&self, transport: &str) -> u32 {
        agent_testing::process::read_pid(
            &self.0.path().join(format!("pid-{transport}")),
            Duration::from_secs(30),
        )
        .await
        .expect("the server wrote its pid")
    }
}

/// A stdio server config running the test server with `args`.
pub(crate) fn stdio(state: &State, args: &[&str]) -> ServerConfig {
    let mut all = vec![
        script("testserver.py"),
        "--state-dir".to_owned(),
        state.path().display().to_string(),
    ];
    all.extend(args.iter().map(|a| (*a).to_owned()));
    ServerConfig {
        command: Some(python().display().to_string()),
        args: all,
        // A cold Python start on a busy 2-core machine takes seconds.
        startup_timeout_s: Some(60),
        ..Default::default()
    }
}

/// Starts one server named `t`.
/// What a test process gives its servers: `broker`, and its own environment.
pub(crate) fn host(
    broker: Option<std::sync::Arc<dyn tools_mcp::ConnectionBroker>>,
) -> tools_mcp::ServerHost {
    tools_mcp::ServerHost {
        broker,
        inherited_env: tools_mcp::inherited_env(std::env::vars_os()),
    }
}

pub(crate) async fn start(config: ServerConfig, pins: &Pins) -> McpSources {
    start_named("t", config, pins).await
}

pub(crate) async fn start_named(id: &str, config: ServerConfig, pins: &Pins) -> McpSources {
    let configs = BTreeMap::from([(id.to_owned(), config)]);
    McpSources::start(&configs, pins, host(None)).await.unwrap()
}

/// A runner over the sources' tools, allowing `mcp__t__*` without approvals.
pub(crate) fn runner(sources: &McpSources) -> ToolRunner {
    let policy = ToolPolicy::allowing(["mcp__t__*"]).with_approval_for(Vec::<ToolEffect>::new());
    ToolRunner::new(sources.tools(), policy).unwrap()
}

/// Records every event.
#[derive(Default)]
pub(crate) struct Events(std::sync::Mutex<Vec<AiEvent>>);

impl EventSink for Events {
    fn emit(&self, event: AiEvent) {
        self.0.lock().unwrap().push(event);
    }
}

impl Events {
    pub(crate) fn json(&self) -> String {
        serde_json::to_string(&*self.0.lock().unwrap()).unwrap()
    }
}

/// Runs one call through the whole pipeline.
pub(crate) async fn call(runner: &ToolRunner, name: &str, args: Value) -> ToolExecution {
    call_with(
        runner,
        name,
        args,
        &CancellationToken::new(),
        &Events::default(),
    )
    .await
}

pub(crate) async fn call_with(
    runner: &ToolRunner,
    name: &str,
    args: Value,
    cancel: &CancellationToken,
    events: &Events,
) -> ToolExecution {
    let ctx = RunContext::generate();
    let catalog = runner.catalog(&ctx);
    runner
        .exec(
            &ctx,
            &catalog,
            ToolCall::new("call-1", name, args.to_string()),
            cancel,
            events,
            &CallScope::default(),
        )
        .await
}

/// Waits until `check` holds.
pub(crate) async fn eventually(limit: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while !check() {
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    true
}
