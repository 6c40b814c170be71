//! The endpoint in the caller's own axum app: a service from an `Agent`, the
//! caller's authentication hook in place of the bearer tokens, a chat route of
//! the caller's own and a bare run streamed.

use std::sync::Arc;
use std::time::Duration;

use agent_graph::Agent;
use agent_server::access::{Access, Account, AuthError, auth_fn};
use agent_server::{ChatService, ConnectionLimits};
use agent_testing::{ScriptedModel, Turn};
use axum::extract::{Request, State};
use axum::routing::{get, post};
use serde_json::json;

use crate::support::{anonymous_client, body, chunks, types, user};

/// Serves `router` on loopback; its address and the shutdown sender.
async fn serve(router: axum::Router) -> (String, tokio::sync::oneshot::Sender<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(agent_server::serve(
        listener,
        router,
        ConnectionLimits::default(),
        async move {
            let _ = rx.await;
        },
        Duration::from_secs(5),
    ));
    (format!("http://{addr}"), tx)
}

fn agent(answer: &str) -> Agent {
    Agent::builder(ScriptedModel::new([Turn::text(answer)]))
        .system("Be brief.")
        .model_name("m-1")
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_hook_decides_who_calls_on_any_address_and_the_agent_is_served_as_built() {
    let service = Arc::new(ChatService::from_agent(&agent("Hello from the agent.")));
    let auth = auth_fn(|parts| match parts.headers.get("x-api-key") {
        Some(key) if key == "k-alice" => Ok(Account("alice".into())),
        _ => Err(AuthError::Unauthorized("an API key is required".into())),
    });
    // No host checks and no token: the hook alone decides.
    let router = service.router_with_auth(Access::tokens(Vec::new()), Arc::new(auth));
    let (base, _stop) = serve(router).await;
    let refused = anonymous_client()
        .post(format!("{base}/api/chat"))
        .json(&body(vec![user("Hi")]))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status().as_u16(), 401);
    let answered = anonymous_client()
        .post(format!("{base}/api/chat"))
        .header("x-api-key", "k-alice")
        .json(&body(vec![user("Hi")]))
        .send()
        .await
        .unwrap();
    assert_eq!(answered.status().as_u16(), 200);
    let chunks = chunks(&answered.text().await.unwrap());
    assert!(types(&chunks).contains(&"text-delta"), "{chunks:?}");
    assert_eq!(answer(&chunks), "Hello from the agent.");
}

/// The text of a response's `text-delta` chunks.
fn answer(chunks: &[serde_json::Value]) -> String {
    chunks
        .iter()
        .filter(|c| c["type"] == "text-delta")
        .filter_map(|c| c["delta"].as_str())
        .collect()
}

async fn own_chat(
    State(service): State<Arc<ChatService>>,
    request: Request,
) -> axum::response::Response {
    service.serve_chat(Account("bob".into()), request).await
}

async fn bare_run() -> axum::response::Response {
    agent_server::run_response(agent("A bare run.").run("Hi"))
}

async fn bare_run_as_data_stream() -> axum::response::Response {
    agent_server::run_data_stream_response(agent("A bare data stream.").run("Hi"))
}

#[tokio::test]
async fn own_routes_answer_a_chat_request_and_stream_a_bare_run() {
    let service = Arc::new(ChatService::from_agent(&agent("Served on my route.")));
    let router = axum::Router::new()
        .route("/my/chat", post(own_chat))
        .route("/my/run", get(bare_run))
        .route("/my/data", get(bare_run_as_data_stream))
        .with_state(service);
    let (base, _stop) = serve(router).await;
    let client = anonymous_client();
    let chat = client
        .post(format!("{base}/my/chat"))
        .json(&json!({"id": "c1", "messages": [user("Hi")], "trigger": "submit-message"}))
        .send()
        .await
        .unwrap();
    assert_eq!(chat.status().as_u16(), 200);
    assert_eq!(
        chat.headers()["x-vercel-ai-ui-message-stream"],
        "v1",
        "the UI message stream's header"
    );
    let text = chat.text().await.unwrap();
    assert_eq!(answer(&chunks(&text)), "Served on my route.", "{text}");
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    let run = client.get(format!("{base}/my/run")).send().await.unwrap();
    assert_eq!(run.status().as_u16(), 200);
    let text = run.text().await.unwrap();
    let chunks = chunks(&text);
    assert_eq!(types(&chunks).first(), Some(&"start"), "{text}");
    assert_eq!(types(&chunks).last(), Some(&"finish"), "{text}");
    assert_eq!(answer(&chunks), "A bare run.", "{text}");

    // The same run as AI SDK 4's data stream: `f:` first, the text in `0:`
    // lines, `d:` last.
    let data = client.get(format!("{base}/my/data")).send().await.unwrap();
    assert_eq!(data.status().as_u16(), 200);
    assert_eq!(data.headers()["x-vercel-ai-data-stream"], "v1");
    let text = data.text().await.unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines.first().is_some_and(|l| l.starts_with("f:")), "{text}");
    assert!(lines.last().is_some_and(|l| l.starts_with("d:")), "{text}");
    let said: String = lines
        .iter()
        .filter_map(|l| l.strip_prefix("0:"))
        .map(|l| serde_json::from_str::<String>(l).unwrap())
        .collect();
    assert_eq!(said, "A bare data stream.", "{text}");
}
