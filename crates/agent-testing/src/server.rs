//! A loopback OpenAI-compatible chat-completions server that plays scripted replies
//! and records every request (feature `server`).
//!
//! It plays the other wires' APIs too: the Anthropic Messages API (`POST
//! .../v1/messages`, replies from [`Reply::anthropic_text`] and
//! [`Reply::anthropic_tool_uses`], base URL [`OpenAiServer::anthropic_base_url`]),
//! the Responses API (`POST .../responses`, [`Reply::responses_text`] and
//! [`Reply::responses_function_calls`]) and Gemini's (`POST
//! .../models/{model}:streamGenerateContent`, [`Reply::gemini_text`] and
//! [`Reply::gemini_function_calls`], base URL [`OpenAiServer::gemini_base_url`]).
//!
//! Each `POST .../chat/completions` is recorded, then takes the next [`Reply`] of the
//! script: an SSE stream or any other body written piece by piece (with pauses, a
//! delayed response head or a cut connection where the script says, or endlessly),
//! possibly computed from the recorded request. When the script is exhausted the
//! server answers `500` with an OpenAI-style JSON error. It binds `127.0.0.1:0` and
//! stops when the [`OpenAiServer`] is dropped.
//!
//! A reply body the client drops before it was fully written (it closed the
//! connection mid-stream) is counted; see [`OpenAiServer::abandoned`] and
//! [`OpenAiServer::wait_abandoned`].

use std::collections::VecDeque;
use std::fmt;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_util::sync::{CancellationToken, DropGuard};

/// `data: <json>\n\n`: one SSE event.
pub fn data(json: &str) -> String {
    format!("data: {json}\n\n")
}

/// Writes all of `bytes` to `stream`, waiting while its send buffer is full: how
/// a hand-written server or client in a test sends a raw HTTP message.
///
/// # Errors
/// The write's error, but for the wait on a full buffer.
pub async fn write_all(stream: &tokio::net::TcpStream, bytes: &[u8]) -> std::io::Result<()> {
    let mut rest = bytes;
    while !rest.is_empty() {
        stream.writable().await?;
        match stream.try_write(rest) {
            Ok(n) => rest = &rest[n..],
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Computes a reply from the request it answers.
type Compute = Arc<dyn Fn(&Recorded) -> Reply + Send + Sync>;

/// The `n`-th event of an endless reply.
type Event = Arc<dyn Fn(u64) -> String + Send + Sync>;

/// One piece of a reply body.
#[derive(Clone)]
enum Piece {
    Bytes(Bytes),
    Pause(Duration),
    Cut,
    Endless { every: Duration, event: Event },
}

impl fmt::Debug for Piece {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Bytes(bytes) => f.debug_tuple("Bytes").field(bytes).finish(),
            Self::Pause(pause) => f.debug_tuple("Pause").field(pause).finish(),
            Self::Cut => f.write_str("Cut"),
            Self::Endless { every, .. } => f.debug_struct("Endless").field("every", every).finish(),
        }
    }
}

/// One scripted answer: a status, headers and a body written piece by piece, or a
/// reply computed from the request ([`Reply::from_request`]).
#[derive(Clone)]
pub struct Reply {
    status: StatusCode,
    delay: Duration,
    headers: Vec<(HeaderName, HeaderValue)>,
    pieces: Vec<Piece>,
    computed: Option<Compute>,
}

impl fmt::Debug for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.computed.is_some() {
            return f.write_str("Reply::from_request(..)");
        }
        f.debug_struct("Reply")
            .field("status", &self.status)
            .field("delay", &self.delay)
            .field("headers", &self.headers)
            .field("pieces", &self.pieces)
            .finish()
    }
}

impl Reply {
    /// A reply with `status` (`500` if it is not a valid status code), no headers and
    /// an empty body, to build on with [`Reply::header`] and the `then_*` methods.
    pub fn new(status: u16) -> Self {
        Self {
            status: StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            delay: Duration::ZERO,
            headers: Vec::new(),
            pieces: Vec::new(),
            computed: None,
        }
    }

    /// A `200 text/event-stream` reply writing each item as its own body chunk.
    pub fn sse<I, S>(chunks: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut reply = Self::new(200).header("content-type", "text/event-stream");
        reply.pieces = chunks
            .into_iter()
            .map(|c| Piece::Bytes(Bytes::from(c.into())))
            .collect();
        reply
    }

    /// A `200 text/event-stream` reply writing `bytes` (a recorded stream, say) in
    /// body chunks of `piece` bytes, the last one possibly shorter; `0` writes them
    /// as one chunk.
    pub fn sse_bytes(bytes: impl Into<Bytes>, piece: usize) -> Self {
        let bytes: Bytes = bytes.into();
        let piece = if piece == 0 {
            bytes.len().max(1)
        } else {
            piece
        };
        let mut reply = Self::new(200).header("content-type", "text/event-stream");
        reply.pieces = (0..bytes.len())
            .step_by(piece)
            .map(|start| Piece::Bytes(bytes.slice(start..bytes.len().min(start + piece))))
            .collect();
        reply
    }

    /// A `200 text/event-stream` reply that never ends: it waits `every`, writes
    /// `event(0)`, waits again, writes `event(1)`, and so on until the client goes
    /// away (which [`OpenAiServer::wait_abandoned`] observes).
    pub fn endless(every: Duration, event: impl Fn(u64) -> String + Send + Sync + 'static) -> Self {
        let mut reply = Self::new(200).header("content-type", "text/event-stream");
        reply.pieces = vec![Piece::Endless {
            every,
            event: Arc::new(event),
        }];
        reply
    }

    /// A reply with `status` (`500` if it is not a valid status code) and a JSON
    /// `body`.
    pub fn json(status: u16, body: &Value) -> Self {
        Self::new(status)
            .header("content-type", "application/json")
            .then_bytes(body.to_string())
    }

    /// A reply computed from the request it answers (after that request was
    /// recorded), e.g. an error body echoing a request header. Methods called on the
    /// result apply to the computed reply.
    pub fn from_request(compute: impl Fn(&Recorded) -> Reply + Send + Sync + 'static) -> Self {
        Self {
            computed: Some(Arc::new(compute)),
            ..Self::new(200)
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

    /// A streamed Anthropic Messages API turn (for `POST /v1/messages`) that
    /// answers `text`, a word per delta, with usage.
    pub fn anthropic_text(text: &str) -> Self {
        let mut events = vec![anthropic_start()];
        events.push(anthropic_event(
            "content_block_start",
            &json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ));
        for word in text.split_inclusive(' ') {
            events.push(anthropic_event(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": word}}),
            ));
        }
        events.push(anthropic_event(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": 0}),
        ));
        events.extend(anthropic_end("end_turn"));
        Self::sse(events)
    }

    /// A streamed Anthropic Messages API turn calling tools: for each `(call id,
    /// tool name, input)`, a `tool_use` block with its input in one delta.
    pub fn anthropic_tool_uses(calls: &[(&str, &str, Value)]) -> Self {
        let mut events = vec![anthropic_start()];
        for (index, (id, name, input)) in calls.iter().enumerate() {
            events.push(anthropic_event(
                "content_block_start",
                &json!({"type": "content_block_start", "index": index,
                        "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
            ));
            events.push(anthropic_event(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index,
                        "delta": {"type": "input_json_delta", "partial_json": input.to_string()}}),
            ));
            events.push(anthropic_event(
                "content_block_stop",
                &json!({"type": "content_block_stop", "index": index}),
            ));
        }
        events.extend(anthropic_end("tool_use"));
        Self::sse(events)
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

    /// Sets a response header, replacing one of the same name (`content-type` of the
    /// constructors included).
    ///
    /// # Panics
    ///
    /// If `name` is not a valid lowercase header name or `value` not a valid header
    /// value (both are written by the test, never taken from a request).
    pub fn header(self, name: &'static str, value: &'static str) -> Self {
        let name = HeaderName::from_static(name);
        let value = HeaderValue::from_static(value);
        self.map(move |mut reply| {
            reply.headers.retain(|(n, _)| *n != name);
            reply.headers.push((name.clone(), value.clone()));
            reply
        })
    }

    /// Waits `delay` before answering at all: no status line or header reaches the
    /// client until then (a server slow to produce its first byte).
    pub fn delayed(self, delay: Duration) -> Self {
        self.map(move |mut reply| {
            reply.delay = delay;
            reply
        })
    }

    /// Waits `pause` before every piece of the body written so far (the first one
    /// included).
    pub fn paced(self, pause: Duration) -> Self {
        self.map(move |mut reply| {
            reply.pieces = reply
                .pieces
                .into_iter()
                .flat_map(|piece| [Piece::Pause(pause), piece])
                .collect();
            reply
        })
    }

    /// Appends a pause to the body.
    pub fn then_pause(self, pause: Duration) -> Self {
        self.then(Piece::Pause(pause))
    }

    /// Appends raw bytes to the body, written as one chunk.
    pub fn then_bytes(self, bytes: impl Into<Bytes>) -> Self {
        self.then(Piece::Bytes(bytes.into()))
    }

    /// Breaks the connection after what was written so far (the client sees a body
    /// error, not a clean end).
    pub fn then_cut(self) -> Self {
        self.then(Piece::Cut)
    }

    fn then(self, piece: Piece) -> Self {
        self.map(move |mut reply| {
            reply.pieces.push(piece.clone());
            reply
        })
    }

    /// Applies `change` now, or to the computed reply of [`Reply::from_request`].
    fn map(self, change: impl Fn(Self) -> Self + Send + Sync + 'static) -> Self {
        match self.computed {
            Some(compute) => {
                Self::from_request(move |request| change(resolve(compute(request), request)))
            }
            None => change(self),
        }
    }
}

/// The reply to serve for `request`: computed replies evaluated.
fn resolve(mut reply: Reply, request: &Recorded) -> Reply {
    while let Some(compute) = reply.computed.take() {
        reply = compute(request);
    }
    reply
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
    /// The query string, without its `?` (e.g. `api-version=2024-10-21`).
    pub query: Option<String>,
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

struct Shared {
    script: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<Recorded>>,
    /// How many reply bodies were dropped before their end.
    abandoned: watch::Sender<usize>,
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
            abandoned: watch::Sender::new(0),
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

    /// The base URL to configure a Gemini client with (`http://127.0.0.1:<port>`:
    /// it adds `/v1beta/models/{model}:streamGenerateContent`); script its
    /// replies with [`Reply::gemini_text`] and [`Reply::gemini_function_calls`].
    pub fn gemini_base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The base URL to configure an Anthropic Messages API client with
    /// (`http://127.0.0.1:<port>`: it adds `/v1/messages`); script its
    /// replies with [`Reply::anthropic_text`] and [`Reply::anthropic_tool_uses`].
    pub fn anthropic_base_url(&self) -> String {
        format!("http://{}", self.addr)
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

    /// How many reply bodies were dropped before they were fully written: the client
    /// closed the connection mid-body. A scripted cut ([`Reply::then_cut`]) does not
    /// count.
    pub fn abandoned(&self) -> usize {
        *self.shared.abandoned.borrow()
    }

    /// Waits until at least `count` reply bodies were abandoned (see
    /// [`OpenAiServer::abandoned`]); wrap it in a timeout.
    pub async fn wait_abandoned(&self, count: usize) {
        let mut abandoned = self.shared.abandoned.subscribe();
        // The sender lives in `self.shared`, so this cannot fail while `self` lives.
        let _ = abandoned.wait_for(|n| *n >= count).await;
    }
}

/// One Anthropic SSE event: `event: NAME` and its data.
fn anthropic_event(name: &str, data: &Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

/// The `message_start` event of a scripted Anthropic turn.
fn anthropic_start() -> String {
    anthropic_event(
        "message_start",
        &json!({"type": "message_start", "message": {"id": "msg_test", "type": "message",
                "role": "assistant", "model": "claude-test", "content": [], "stop_reason": null,
                "usage": {"input_tokens": 20, "output_tokens": 1}}}),
    )
}

/// The closing events of a scripted Anthropic turn ending with `stop_reason`.
fn anthropic_end(stop_reason: &str) -> [String; 2] {
    [
        anthropic_event(
            "message_delta",
            &json!({"type": "message_delta", "delta": {"stop_reason": stop_reason, "stop_sequence": null},
                    "usage": {"output_tokens": 5}}),
        ),
        anthropic_event("message_stop", &json!({"type": "message_stop"})),
    ]
}

async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path();
    let served = path.ends_with("/chat/completions")
        || path.ends_with("/v1/messages")
        || path.ends_with("/responses")
        || path.ends_with(":streamGenerateContent")
        || path.ends_with(":generateContent");
    if parts.method != Method::POST || !served {
        return plain(StatusCode::NOT_FOUND, "not found");
    }
    let body = axum::body::to_bytes(body, 16 * 1024 * 1024)
        .await
        .unwrap_or_default();
    let recorded = Recorded {
        path: parts.uri.path().to_owned(),
        query: parts.uri.query().map(str::to_owned),
        headers: parts.headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    };
    if let Ok(mut requests) = shared.requests.lock() {
        requests.push(recorded.clone());
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
    let reply = resolve(reply, &recorded);
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    let writer = Writer {
        done: reply.pieces.is_empty(),
        pieces: reply.pieces.into(),
        events: 0,
        shared,
    };
    let stream = futures::stream::unfold(writer, |mut writer| async move {
        let chunk = writer.next().await?;
        Some((chunk, writer))
    });
    let mut response = Response::new(Body::from_stream(stream));
    *response.status_mut() = reply.status;
    for (name, value) in reply.headers {
        response.headers_mut().insert(name, value);
    }
    response
}

/// Writes the pieces of one reply body; counts it as abandoned if dropped before
/// its end.
struct Writer {
    pieces: VecDeque<Piece>,
    /// Events written by an endless piece so far.
    events: u64,
    /// The body reached its end (or its scripted cut).
    done: bool,
    shared: Arc<Shared>,
}

impl Writer {
    async fn next(&mut self) -> Option<Result<Bytes, std::io::Error>> {
        loop {
            let Some(piece) = self.pieces.pop_front() else {
                self.done = true;
                return None;
            };
            match piece {
                Piece::Bytes(bytes) if bytes.is_empty() => {}
                Piece::Bytes(bytes) => return Some(Ok(bytes)),
                Piece::Pause(pause) if pause.is_zero() => {}
                Piece::Pause(pause) => tokio::time::sleep(pause).await,
                Piece::Cut => {
                    self.pieces.clear();
                    self.done = true;
                    return Some(Err(std::io::Error::other("connection cut by the script")));
                }
                Piece::Endless { every, event } => {
                    tokio::time::sleep(every).await;
                    let chunk = Bytes::from(event(self.events));
                    self.events += 1;
                    self.pieces.push_front(Piece::Endless { every, event });
                    return Some(Ok(chunk));
                }
            }
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        if !self.done {
            self.shared.abandoned.send_modify(|n| *n += 1);
        }
    }
}

fn plain(status: StatusCode, text: &str) -> Response {
    let mut response = Response::new(Body::from(text.to_owned()));
    *response.status_mut() = status;
    response
}

#[cfg(test)]
mod tests {
    //! The server over a hand-written HTTP/1.1 client on a plain `TcpStream`, so the
    //! chunk framing, the timing and the connection's end are seen as sent.

    use std::time::Instant;

    use tokio::net::TcpStream;

    use super::*;

    /// One body chunk of a chunked response, or how the body ended.
    #[derive(Debug, PartialEq)]
    enum Chunk {
        Data(Vec<u8>),
        /// The terminating `0` chunk: a clean end.
        End,
        /// The connection closed without the terminating chunk.
        Broken,
    }

    /// One request on its own connection (`connection: close`).
    struct Client {
        stream: TcpStream,
        buf: Vec<u8>,
    }

    impl Client {
        async fn post(server: &OpenAiServer, headers: &[(&str, &str)], body: &str) -> Self {
            let mut request = format!(
                "POST /v1/chat/completions HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
                server.addr(),
                body.len()
            );
            for (name, value) in headers {
                request.push_str(&format!("{name}: {value}\r\n"));
            }
            request.push_str("\r\n");
            request.push_str(body);
            let stream = TcpStream::connect(server.addr()).await.unwrap();
            write_all(&stream, request.as_bytes()).await.unwrap();
            Self {
                stream,
                buf: Vec::new(),
            }
        }

        /// Reads more bytes into the buffer; false at the end of the connection.
        async fn fill(&mut self) -> bool {
            let mut read = [0u8; 4096];
            loop {
                if self.stream.readable().await.is_err() {
                    return false;
                }
                match self.stream.try_read(&mut read) {
                    Ok(0) => return false,
                    Ok(n) => {
                        self.buf.extend_from_slice(&read[..n]);
                        return true;
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(_) => return false,
                }
            }
        }

        /// Takes the buffer's first line (without its CRLF), reading as needed.
        async fn line(&mut self) -> Option<String> {
            loop {
                if let Some(at) = self.buf.windows(2).position(|w| w == b"\r\n") {
                    let line = String::from_utf8(self.buf[..at].to_vec()).unwrap();
                    self.buf.drain(..at + 2);
                    return Some(line);
                }
                if !self.fill().await {
                    return None;
                }
            }
        }

        /// The status and headers (names lowercased).
        async fn head(&mut self) -> (u16, Vec<(String, String)>) {
            let status = self.line().await.unwrap();
            let status = status.split(' ').nth(1).unwrap().parse().unwrap();
            let mut headers = Vec::new();
            loop {
                let line = self.line().await.unwrap();
                if line.is_empty() {
                    return (status, headers);
                }
                let (name, value) = line.split_once(':').unwrap();
                headers.push((name.to_ascii_lowercase(), value.trim().to_owned()));
            }
        }

        /// The next chunk of a chunked body.
        async fn chunk(&mut self) -> Chunk {
            let Some(size) = self.line().await else {
                return Chunk::Broken;
            };
            let size = usize::from_str_radix(&size, 16).unwrap();
            while self.buf.len() < size + 2 {
                if !self.fill().await {
                    return Chunk::Broken;
                }
            }
            let data: Vec<u8> = self.buf.drain(..size + 2).take(size).collect();
            if size == 0 {
                Chunk::End
            } else {
                Chunk::Data(data)
            }
        }

        /// The rest of a chunked body: its chunks and how it ended.
        async fn chunks(&mut self) -> (Vec<Vec<u8>>, Chunk) {
            let mut chunks = Vec::new();
            loop {
                match self.chunk().await {
                    Chunk::Data(data) => chunks.push(data),
                    end => return (chunks, end),
                }
            }
        }
    }

    fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    #[tokio::test]
    async fn plays_the_script_in_order_and_records_requests() {
        let server = OpenAiServer::start([
            Reply::sse_bytes("data: 0123456789\n\n", 8).header("retry-after", "7"),
            Reply::from_request(|request| {
                Reply::json(401, &json!({"echo": request.header("x-key")}))
            })
            .header("x-extra", "1"),
        ])
        .await
        .unwrap();

        let mut client = Client::post(&server, &[], r#"{"stream":true}"#).await;
        let (status, headers) = client.head().await;
        assert_eq!(status, 200);
        assert_eq!(header(&headers, "content-type"), Some("text/event-stream"));
        assert_eq!(header(&headers, "retry-after"), Some("7"));
        let (chunks, end) = client.chunks().await;
        assert_eq!(
            chunks,
            [&b"data: 01"[..], b"23456789", b"\n\n"].map(<[u8]>::to_vec)
        );
        assert_eq!(end, Chunk::End);

        let mut client = Client::post(&server, &[("x-key", "abc")], "not json").await;
        let (status, headers) = client.head().await;
        assert_eq!(status, 401);
        assert_eq!(header(&headers, "content-type"), Some("application/json"));
        assert_eq!(header(&headers, "x-extra"), Some("1"));
        let (chunks, end) = client.chunks().await;
        assert_eq!(
            serde_json::from_slice::<Value>(&chunks.concat()).unwrap(),
            json!({"echo": "abc"})
        );
        assert_eq!(end, Chunk::End);

        let mut client = Client::post(&server, &[], "{}").await;
        assert_eq!(client.head().await.0, 500, "the script is exhausted");

        let requests = server.requests();
        assert_eq!(requests.len(), 3);
        assert_eq!(requests[0].path, "/v1/chat/completions");
        assert_eq!(requests[0].body, json!({"stream": true}));
        assert_eq!(requests[1].header("x-key"), Some("abc"));
        assert_eq!(requests[1].body, Value::Null);
        assert_eq!(server.remaining(), 0);
        assert_eq!(server.abandoned(), 0);
    }

    #[tokio::test]
    async fn a_delayed_head_and_a_pause_between_chunks_hold_the_bytes_back() {
        let pause = Duration::from_millis(300);
        let server = OpenAiServer::start([
            Reply::sse(["a"]).delayed(pause),
            Reply::sse(["a"]).then_pause(pause).then_bytes("b"),
        ])
        .await
        .unwrap();

        let started = Instant::now();
        let mut client = Client::post(&server, &[], "{}").await;
        assert_eq!(client.head().await.0, 200);
        assert!(started.elapsed() >= pause, "{:?}", started.elapsed());
        assert_eq!(client.chunks().await, (vec![b"a".to_vec()], Chunk::End));

        let started = Instant::now();
        let mut client = Client::post(&server, &[], "{}").await;
        assert_eq!(client.head().await.0, 200);
        assert_eq!(client.chunk().await, Chunk::Data(b"a".to_vec()));
        assert!(started.elapsed() < pause, "{:?}", started.elapsed());
        assert_eq!(client.chunk().await, Chunk::Data(b"b".to_vec()));
        assert!(started.elapsed() >= pause, "{:?}", started.elapsed());
        assert_eq!(client.chunk().await, Chunk::End);
    }

    #[tokio::test]
    async fn a_cut_ends_the_connection_without_the_final_chunk() {
        let server = OpenAiServer::start([Reply::sse([data("{}")])
            .then_pause(Duration::from_millis(20))
            .then_cut()
            .then_bytes("never sent")])
        .await
        .unwrap();
        let mut client = Client::post(&server, &[], "{}").await;
        assert_eq!(client.head().await.0, 200);
        assert_eq!(
            client.chunks().await,
            (vec![b"data: {}\n\n".to_vec()], Chunk::Broken)
        );
        assert_eq!(server.abandoned(), 0, "a scripted cut is not abandonment");
    }

    #[tokio::test]
    async fn an_endless_reply_runs_until_the_client_goes_away() {
        let server = OpenAiServer::start([Reply::endless(Duration::from_millis(10), |n| {
            data(&format!("{{\"n\":{n}}}"))
        })])
        .await
        .unwrap();
        let mut client = Client::post(&server, &[], "{}").await;
        assert_eq!(client.head().await.0, 200);
        for n in 0..3 {
            assert_eq!(
                client.chunk().await,
                Chunk::Data(data(&format!("{{\"n\":{n}}}")).into_bytes())
            );
        }
        assert_eq!(server.abandoned(), 0);
        drop(client);
        tokio::time::timeout(Duration::from_secs(5), server.wait_abandoned(1))
            .await
            .expect("the server saw the client go away");
        assert_eq!(server.abandoned(), 1);
    }
}
