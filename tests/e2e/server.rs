//! A loopback OpenAI-compatible chat-completions server that plays scripted SSE
//! responses and records every request body.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use axum::routing::post;
use serde_json::Value;

/// One recorded request.
#[derive(Debug, Clone)]
pub(crate) struct Recorded {
    pub(crate) authorization: Option<String>,
    pub(crate) body: Value,
}

#[derive(Clone)]
struct Shared {
    responses: Arc<Mutex<Vec<Vec<String>>>>,
    requests: Arc<Mutex<Vec<Recorded>>>,
}

/// A running server.
pub(crate) struct ChatServer {
    pub(crate) addr: SocketAddr,
    requests: Arc<Mutex<Vec<Recorded>>>,
}

impl ChatServer {
    /// Starts a server answering the n-th request with the n-th list of SSE chunks
    /// (each chunk is written as its own piece of the chunked body).
    pub(crate) async fn start(responses: Vec<Vec<String>>) -> Self {
        let requests = Arc::new(Mutex::new(Vec::new()));
        let shared = Shared {
            responses: Arc::new(Mutex::new(responses.into_iter().rev().collect())),
            requests: Arc::clone(&requests),
        };
        let app = Router::new()
            .route("/v1/chat/completions", post(handle))
            .with_state(shared);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { addr, requests }
    }

    /// Every request received so far.
    pub(crate) fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }
}

async fn handle(State(shared): State<Shared>, headers: HeaderMap, body: String) -> Response {
    let body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    shared.requests.lock().unwrap().push(Recorded {
        authorization: headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
        body,
    });
    let Some(chunks) = shared.responses.lock().unwrap().pop() else {
        return Response::builder()
            .status(StatusCode::INTERNAL_SERVER_ERROR)
            .body(Body::from(r#"{"error":{"message":"script exhausted"}}"#))
            .unwrap();
    };
    let stream = futures::stream::iter(
        chunks
            .into_iter()
            .map(|c| Ok::<_, std::convert::Infallible>(axum::body::Bytes::from(c))),
    );
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(stream))
        .unwrap()
}

/// `data: <json>\n\n`.
pub(crate) fn data(json: &str) -> String {
    format!("data: {json}\n\n")
}
