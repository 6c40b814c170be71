//! A streamable HTTP server with a bearer token from a connection.

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tools_mcp::{
    ConnectionBroker, ConnectionError, Credential, McpSources, Pins, Secret, ServerConfig,
};

use agent_testing::process::wait_gone;

use crate::support::{Events, State, call_with, python, runner, script};

const TOKEN: &str = "tok-3f9a7c1e-never-in-logs";

struct HttpServer {
    child: Child,
    port: u16,
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn serve(state: &State) -> HttpServer {
    let child = Command::new(python())
        .args([
            script("testserver.py").as_str(),
            "--transport",
            "http",
            "--port",
            "0",
            "--token-env",
            "MCP_TEST_TOKEN",
            "--state-dir",
        ])
        .arg(state.path())
        .env("MCP_TEST_TOKEN", TOKEN)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let port = state
        .wait("port", Duration::from_secs(60))
        .await
        .expect("the HTTP server listens")
        .trim()
        .parse()
        .unwrap();
    HttpServer { child, port }
}

struct Broker(Option<&'static str>);

impl ConnectionBroker for Broker {
    fn resolve(&self, connection: &str) -> Result<Credential, ConnectionError> {
        match self.0 {
            Some(token) => Ok(Credential::Bearer(Secret::new(token))),
            None => Err(ConnectionError::Unavailable {
                connection: connection.to_owned(),
                message: "environment variable NOTES_TOKEN is not set".into(),
            }),
        }
    }
}

fn config(port: u16) -> ServerConfig {
    ServerConfig {
        url: Some(format!("http://127.0.0.1:{port}/mcp")),
        connection: Some("notes".into()),
        startup_timeout_s: Some(30),
        ..Default::default()
    }
}

async fn start(port: u16, token: Option<&'static str>) -> McpSources {
    let configs = BTreeMap::from([("t".to_owned(), config(port))]);
    let broker: Arc<dyn ConnectionBroker> = Arc::new(Broker(token));
    McpSources::start(
        &configs,
        &Pins::default(),
        crate::support::host(Some(broker)),
    )
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_discovery_call_and_session_delete_with_a_connection_token() {
    let Some(state) = State::new() else { return };
    let server = serve(&state).await;
    let sources = start(server.port, Some(TOKEN)).await;
    assert!(
        sources.warnings().iter().all(|w| w.tool.is_some()),
        "{:?}",
        sources.warnings()
    );
    let report = &sources.report()[0];
    assert_eq!(report.transport, "http");
    assert!(report.status.starts_with("connected"), "{}", report.status);
    let runner = runner(&sources);
    let events = Events::default();
    let cancel = ai_core::CancellationToken::new();
    let whoami = call_with(&runner, "mcp__t__whoami", json!({}), &cancel, &events).await;
    assert_eq!(whoami.model_content, "authorized");
    let echo = call_with(
        &runner,
        "mcp__t__echo",
        json!({"text": "over http"}),
        &cancel,
        &events,
    )
    .await;
    assert_eq!(echo.model_content, "over http");
    // list_changed arrives over HTTP too.
    let toggled = call_with(&runner, "mcp__t__toggle", json!({}), &cancel, &events).await;
    assert_eq!(toggled.model_content, "toggled");
    let ctx = ai_core::RunContext::generate();
    assert!(
        crate::support::eventually(Duration::from_secs(10), || runner
            .catalog(&ctx)
            .get("mcp__t__ephemeral")
            .is_none())
        .await
    );
    // The secret is nowhere a user or log could see it.
    let shown = format!("{:?} {:?} {}", sources, sources.report(), events.json());
    assert!(!shown.contains(TOKEN), "{shown}");
    sources.shutdown().await;
    assert!(
        state
            .wait("deleted-session", Duration::from_secs(10))
            .await
            .is_some(),
        "shutdown deletes the session"
    );
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_or_wrong_credential_is_a_warning_without_the_secret() {
    let Some(state) = State::new() else { return };
    let server = serve(&state).await;
    let unresolved = start(server.port, None).await;
    let warning = unresolved.warnings()[0].to_string();
    assert!(warning.contains("NOTES_TOKEN is not set"), "{warning}");
    assert!(unresolved.tools().is_empty());

    let wrong = start(server.port, Some("wrong-token")).await;
    let warning = wrong.warnings()[0].to_string();
    assert!(warning.contains("authorization"), "{warning}");
    assert!(!warning.contains("wrong-token"), "{warning}");
    assert!(wrong.tools().is_empty());
    let pid = server.child.id();
    drop(server);
    assert!(wait_gone(pid, Duration::from_secs(10)).await);
}
