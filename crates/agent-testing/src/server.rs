//! A loopback OpenAI-compatible chat-completions server that plays scripted replies
//! and records every request (feature `server`).
//!
//! Each `POST .../chat/completions` takes the next [`Reply`] of the script: an SSE
//! stream written piece by piece (with pauses or a cut connection where the script
//! says), or any status with a body. When the script is exhausted the server answers
//! `500` with an OpenAI-style JSON error. It binds `127.0.0.1:0` and stops when the
//! [`OpenAiServer`] is dropped.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use futures::StreamExt;
use serde_json::{Value, json};
use tokio_util::sync::{CancellationToken, DropGuard};

/// `data: <json>\n\n`: one SSE event.
pub fn data(json: &str) -> String {
    format!("data: {json}\n\n")
}

/// One piece of a reply body.
#[derive(Debug, Clone)]
enum Piece {
    Bytes(Bytes),
    Pause(Duration),
    Cut,
}

/// One scripted answer.
#[derive(Debug, Clone)]
pub struct Reply {
    status: StatusCode,
    headers: Vec<(HeaderName, HeaderValue)>,
    pieces: Vec<Piece>,
}

impl Reply {
    /// A `200 text/event-stream` reply writing each item as its own body chunk.
    pub fn sse<I, S>(chunks: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            status: StatusCode::OK,
            headers: vec![(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/event-stream"),
            )],
            pieces: chunks
                .into_iter()
                .map(|c| Piece::Bytes(Bytes::from(c.into())))
                .collect(),
        }
    }

    /// A reply with `status` and a JSON `body`.
    pub fn json(status: u16, body: &Value) -> Self {
        Self {
            status: StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            headers: vec![(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            pieces: vec![Piece::Bytes(Bytes::from(body.to_string()))],
        }
    }

    /// A streamed text answer: the role chunk, one chunk per piece of `text` (split
    /// on spaces, spaces kept), a `stop` chunk, a usage chunk and `[DONE]`.
    pub fn text(text: &str) -> Self {
        let mut chunks = vec![data(
            &json!({"id": "chatcmpl-t", "object": "chat.completion.chunk", "model": "test-model",
                    "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": null}]})
            .to_string(),
        )];
        for word in text.split_inclusive(' ') {
            chunks.push(data(
                &json!({"id": "chatcmpl-t", "object": "chat.completion.chunk", "model": "test-model",
                        "choices": [{"index": 0, "delta": {"content": word}, "finish_reason": null}]})
                .to_string(),
            ));
        }
        chunks.push(finish_chunk("stop"));
        chunks.push(usage_chunk(20, 5));
        chunks.push("data: [DONE]\n\n".into());
        Self::sse(chunks)
    }

    /// A streamed turn calling tools: for each `(call id, function name, arguments
    /// JSON)`, a first delta with id and name and then the arguments in two fragments;
    /// then a `tool_calls` finish chunk, usage and `[DONE]`.
    pub fn tool_calls(calls: &[(&str, &str, Value)]) -> Self {
        let mut chunks = Vec::new();
        for (index, (id, name, args)) in calls.iter().enumerate() {
            chunks.push(data(
                &json!({"id": "chatcmpl-c", "object": "chat.completion.chunk", "model": "test-model",
                        "choices": [{"index": 0, "delta": {"role": "assistant", "content": null,
                          "tool_calls": [{"index": index, "id": id, "type": "function",
                                          "function": {"name": name, "arguments": ""}}]},
                          "finish_reason": null}]})
                .to_string(),
            ));
            let args = args.to_string();
            let mid = args.len() / 2;
            let mid = (mid..=args.len())
                .find(|&i| args.is_char_boundary(i))
                .unwrap_or(args.len());
            for fragment in [&args[..mid], &args[mid..]] {
                chunks.push(data(
                    &json!({"id": "chatcmpl-c", "object": "chat.completion.chunk", "model": "test-model",
                            "choices": [{"index": 0, "delta": {"tool_calls": [{"index": index,
                              "function": {"arguments": fragment}}]}, "finish_reason": null}]})
                    .to_string(),
                ));
            }
        }
        chunks.push(finish_chunk("tool_calls"));
        chunks.push(usage_chunk(30, 10));
        chunks.push("data: [DONE]\n\n".into());
        Self::sse(chunks)
    }

    /// Adds a response header.
    pub fn header(mut self, name: &'static str, value: &'static str) -> Self {
        self.headers.push((
            HeaderName::from_static(name),
            HeaderValue::from_static(value),
        ));
        self
    }

    /// Waits `pause` before every piece of the body (the first one included).
    pub fn paced(mut self, pause: Duration) -> Self {
        self.pieces = self
            .pieces
            .into_iter()
            .flat_map(|piece| [Piece::Pause(pause), piece])
            .collect();
        self
    }

    /// Appends a pause to the body.
    pub fn then_pause(mut self, pause: Duration) -> Self {
        self.pieces.push(Piece::Pause(pause));
        self
    }

    /// Appends raw bytes to the body.
    pub fn then_bytes(mut self, bytes: impl Into<Bytes>) -> Self {
        self.pieces.push(Piece::Bytes(bytes.into()));
        self
    }

    /// Breaks the connection after what was written so far (the client sees a body
    /// error, not a clean end).
    pub fn then_cut(mut self) -> Self {
        self.pieces.push(Piece::Cut);
        self
    }
}

fn finish_chunk(reason: &str) -> String {
    data(
        &json!({"id": "chatcmpl-f", "object": "chat.completion.chunk", "model": "test-model",
                "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
        .to_string(),
    )
}

fn usage_chunk(prompt: u64, completion: u64) -> String {
    data(
        &json!({"id": "chatcmpl-u", "object": "chat.completion.chunk", "model": "test-model", "choices": [],
                "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                          "total_tokens": prompt + completion}})
        .to_string(),
    )
}

/// One request the server received.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// Request path (e.g. `/v1/chat/completions`).
    pub path: String,
    /// Request headers.
    pub headers: HeaderMap,
    /// The body as JSON (`null` when it was not JSON).
    pub body: Value,
}

impl Recorded {
    /// The value of header `name`, if present and text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

#[derive(Default)]
struct Shared {
    script: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<Recorded>>,
}

/// A running loopback server; stops when dropped.
pub struct OpenAiServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    _stop: DropGuard,
}

impl OpenAiServer {
    /// Binds `127.0.0.1:0` and serves `script` in order, one reply per request.
    pub async fn start(script: impl IntoIterator<Item = Reply>) -> std::io::Result<Self> {
        let shared = Arc::new(Shared {
            script: Mutex::new(script.into_iter().collect()),
            requests: Mutex::default(),
        });
        let app = Router::new()
            .fallback(handle)
            .with_state(Arc::clone(&shared));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move { stopped.cancelled().await })
                .await;
        });
        Ok(Self {
            addr,
            shared,
            _stop: stop.drop_guard(),
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL to configure a client with: `http://127.0.0.1:<port>/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared
            .requests
            .lock()
            .map(|r| r.clone())
            .unwrap_or_default()
    }

    /// Replies not yet served.
    pub fn remaining(&self) -> usize {
        self.shared.script.lock().map(|s| s.len()).unwrap_or(0)
    }
}

async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    if parts.method != Method::POST || !parts.uri.path().ends_with("/chat/completions") {
        return plain(StatusCode::NOT_FOUND, "not found");
    }
    let body = axum::body::to_bytes(body, 16 * 1024 * 1024)
        .await
        .unwrap_or_default();
    if let Ok(mut requests) = shared.requests.lock() {
        requests.push(Recorded {
            path: parts.uri.path().to_owned(),
            headers: parts.headers.clone(),
            body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        });
    }
    let next = shared.script.lock().ok().and_then(|mut s| s.pop_front());
    let Some(reply) = next else {
        let body =
            json!({"error": {"message": "the test script is exhausted", "type": "server_error"}});
        let mut response = plain(StatusCode::INTERNAL_SERVER_ERROR, &body.to_string());
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        return response;
    };
    let stream = futures::stream::iter(reply.pieces).filter_map(|piece| async move {
        match piece {
            Piece::Bytes(bytes) => Some(Ok(bytes)),
            Piece::Pause(pause) => {
                tokio::time::sleep(pause).await;
                None
            }
            Piece::Cut => Some(Err(std::io::Error::other("connection cut by the script"))),
        }
    });
    let mut response = Response::new(Body::from_stream(stream));
    *response.status_mut() = reply.status;
    for (name, value) in reply.headers {
        response.headers_mut().insert(name, value);
    }
    response
}

fn plain(status: StatusCode, text: &str) -> Response {
    let mut response = Response::new(Body::from(text.to_owned()));
    *response.status_mut() = status;
    response
}
