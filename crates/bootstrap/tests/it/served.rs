//! `agent serve` as the tests start it and talk to it: the process with the
//! address and token it printed ([`Served`]), and the requests a page sends it
//! ([`Api`]).

use std::time::Duration;

use reqwest::{Method, RequestBuilder, Response};
use serde_json::Value;

use crate::support::{first_line, sigkill};

/// An HTTP client with the project's TLS setup.
pub(crate) fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .tls_backend_preconfigured(client_tls::client_config().unwrap())
        .build()
        .unwrap()
}

/// The body a page sends for a new message `text` in chat `chat`.
pub(crate) fn chat_body(chat: &str, text: &str) -> Value {
    serde_json::json!({"id": chat, "trigger": "submit-message", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]}
    ]})
}

/// The chunks of a UI message stream body (its `data: <chunk>` lines,
/// `[DONE]` left out).
pub(crate) fn ui_chunks(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect()
}

/// The text of a chat stream's chunks: its text deltas, joined.
pub(crate) fn text_of(chunks: &[Value]) -> String {
    chunks
        .iter()
        .filter(|c| c["type"] == "text-delta")
        .filter_map(|c| c["delta"].as_str())
        .collect()
}

/// The text of a UI message stream body: its text deltas, joined.
pub(crate) fn stream_text(body: &str) -> String {
    text_of(&ui_chunks(body))
}

/// The whole body of `request`'s answer, as text.
pub(crate) async fn body_text(request: RequestBuilder) -> String {
    let response = request.send().await.unwrap();
    response.text().await.unwrap()
}

/// What a client needs to reach one `agent serve`: its base URL and the token
/// it sends (the server's own, or an account's).
#[derive(Clone)]
pub(crate) struct Api {
    client: reqwest::Client,
    pub(crate) base: String,
    pub(crate) token: String,
}

impl Api {
    /// The server at `base`, reached with `token`.
    pub(crate) fn new(base: &str, token: &str) -> Self {
        Self {
            client: http(),
            base: base.to_owned(),
            token: token.to_owned(),
        }
    }

    /// The same server, reached with another account's `token`.
    pub(crate) fn with_token(&self, token: &str) -> Self {
        Self {
            token: token.to_owned(),
            ..self.clone()
        }
    }

    /// `method {base}{path}`, with the token.
    pub(crate) fn request(&self, method: Method, path: &str) -> RequestBuilder {
        let url = format!("{}{path}", self.base);
        self.client.request(method, url).bearer_auth(&self.token)
    }

    /// `GET {base}{path}`, with the token.
    pub(crate) fn get(&self, path: &str) -> RequestBuilder {
        self.request(Method::GET, path)
    }

    /// `POST /api/chat` with `body`.
    pub(crate) fn post_chat(&self, body: &Value) -> RequestBuilder {
        self.request(Method::POST, "/api/chat").json(body)
    }

    /// One chat turn: the chunks of its whole stream.
    pub(crate) async fn chat(&self, body: &Value) -> Vec<Value> {
        ui_chunks(&body_text(self.post_chat(body)).await)
    }

    /// One chat turn sending message `text` in chat `chat`: its chunks.
    pub(crate) async fn say(&self, chat: &str, text: &str) -> Vec<Value> {
        self.chat(&chat_body(chat, text)).await
    }

    /// POSTs chat `body` and reads its stream until `bytes` arrived; the
    /// response, still streaming.
    pub(crate) async fn streaming(&self, body: &Value, bytes: usize) -> Response {
        let mut response = self.post_chat(body).send().await.unwrap();
        let mut seen = 0;
        while seen < bytes {
            let chunk = tokio::time::timeout(Duration::from_secs(30), response.chunk())
                .await
                .expect("the server streams")
                .unwrap()
                .expect("the stream goes on");
            seen += chunk.len();
        }
        response
    }

    /// The status of `method {base}{path}`.
    pub(crate) async fn status(&self, method: Method, path: &str) -> u16 {
        let response = self.request(method, path).send().await.unwrap();
        response.status().as_u16()
    }

    /// The JSON body of `GET {base}{path}` (`null` when it is not JSON).
    pub(crate) async fn json(&self, path: &str) -> Value {
        let response = self.get(path).send().await.unwrap();
        response.json().await.unwrap_or(Value::Null)
    }

    /// The body of `GET {base}{path}`, as text.
    pub(crate) async fn text(&self, path: &str) -> String {
        body_text(self.get(path)).await
    }
}

/// One `agent serve` process (killed when dropped) and the [`Api`] of the
/// address it printed.
pub(crate) struct Served {
    pub(crate) child: tokio::process::Child,
    pub(crate) api: Api,
}

impl std::ops::Deref for Served {
    type Target = Api;

    fn deref(&self) -> &Api {
        &self.api
    }
}

impl Served {
    /// Spawns `command` (an `agent ... serve --port 0`) and reads the address
    /// it prints (`http://host:port/#token=...`).
    pub(crate) async fn spawn(mut command: tokio::process::Command) -> Self {
        let mut child = command.spawn().unwrap();
        let line = first_line(&mut child, Duration::from_secs(30), "the server's address").await;
        let page = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .unwrap_or_else(|| panic!("no address in {line:?}"));
        let (base, token) = page
            .split_once("/#token=")
            .unwrap_or_else(|| panic!("no token in the address {page:?}"));
        assert_eq!(token.len(), 64, "{line}");
        Self {
            child,
            api: Api::new(base, token),
        }
    }

    /// Kills the process with SIGKILL and waits until it is gone.
    pub(crate) async fn kill(&mut self) {
        sigkill(&self.child);
        self.child.wait().await.unwrap();
    }
}
