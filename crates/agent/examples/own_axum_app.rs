//! Serving the AI SDK's UI message stream from your own axum app, behind your
//! own authentication: the agent configured once ([`ChatService::from_agent`]),
//! your hook mapping an API key to an account on the service's router, and a
//! route of your own answering through the same service.
//!
//! ```sh
//! cargo run -p toolwright --example own_axum_app --features server,testing
//! ```
//!
//! A browser's `useChat` (`ai` 5 or later) posts to either route.

use std::sync::Arc;

use agent::openai::{ClientConfig, OpenAiClient};
use agent::prelude::*;
use agent::server::{Access, Account, AuthError, ChatService, auth_fn};
use agent::testing::{OpenAiServer, Reply};
use axum::extract::{Request, State};
use axum::routing::post;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Your route: your own check, then the service answers as that account.
async fn my_chat(
    State(service): State<Arc<ChatService>>,
    request: Request,
) -> axum::response::Response {
    let user = request
        .headers()
        .get("x-user")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    match user {
        Some(user) => service.serve_chat(Account(user), request).await,
        None => axum::http::StatusCode::UNAUTHORIZED.into_response(),
    }
}

use axum::response::IntoResponse;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let model = OpenAiServer::start([
        Reply::text("Hello from the hook route."),
        Reply::text("Hello from my route."),
    ])
    .await?;
    let client = OpenAiClient::new(ClientConfig::new(model.base_url()))?;
    let agent = Agent::builder(client).system("Be brief.").build()?;
    let service = Arc::new(ChatService::from_agent(&agent));

    // The service's router (`/api/chat`, `/api/chats`, ...) behind your hook.
    let auth = auth_fn(|parts| match parts.headers.get("x-api-key") {
        Some(key) if key == "key-of-alice" => Ok(Account("alice".into())),
        _ => Err(AuthError::Unauthorized("an API key is required".into())),
    });
    let api = Arc::clone(&service).router_with_auth(Access::tokens(Vec::new()), Arc::new(auth));
    let app = axum::Router::new()
        .route("/my/chat", post(my_chat))
        .with_state(service)
        .merge(api);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move { axum::serve(listener, app).await });

    let body = r#"{"id":"chat-1","messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"Hi"}]}],"trigger":"submit-message"}"#;
    let refused = post_json(addr, "/api/chat", "", body).await?;
    println!(
        "without a key: {}",
        refused.lines().next().unwrap_or_default()
    );
    assert!(refused.starts_with("HTTP/1.1 401"));
    let hooked = post_json(addr, "/api/chat", "x-api-key: key-of-alice\r\n", body).await?;
    println!("{}", hooked.split("\r\n\r\n").nth(1).unwrap_or_default());
    assert!(hooked.contains("\"delta\":\"hook \""));
    let mine = post_json(addr, "/my/chat", "x-user: bob\r\n", body).await?;
    assert!(mine.contains("\"delta\":\"my \""));
    assert!(mine.contains("x-vercel-ai-ui-message-stream: v1"));
    Ok(())
}

/// POSTs `body` to `path` with `headers` (HTTP/1.1, closed after the answer);
/// the whole response.
async fn post_json(
    addr: std::net::SocketAddr,
    path: &str,
    headers: &str,
    body: &str,
) -> std::io::Result<String> {
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    Ok(response)
}
