//! The HTTP client against a loopback server speaking the Messages API: headers,
//! streamed and whole responses, the API's error bodies, 529 retried with
//! `retry-after`, in-stream errors, truncated streams, redirects, secrets.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ai_core::completion::{
    CompletionError, CompletionFinal, CompletionItem, CompletionRequest, FinishReason,
    ModelSettings, ToolChoice,
};
use ai_core::{CancellationToken, CompletionPort, Message, RunContext};
use axum::body::Body;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use futures::StreamExt;
use wire_anthropic::client::{AnthropicClient, AnthropicConfig, Backoff};

/// One canned answer of the test server.
#[derive(Clone)]
struct Answer {
    status: u16,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
}

fn sse(body: Vec<u8>) -> Answer {
    Answer {
        status: 200,
        headers: vec![("content-type", "text/event-stream".into())],
        body,
    }
}

fn json(status: u16, body: &str) -> Answer {
    Answer {
        status,
        headers: vec![("content-type", "application/json".into())],
        body: body.as_bytes().to_vec(),
    }
}

/// What the server saw of one request.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    headers: HeaderMap,
    body: serde_json::Value,
}

/// A server answering each request with the next answer (the last one repeats).
async fn serve(answers: Vec<Answer>) -> (String, Arc<Mutex<Vec<Seen>>>) {
    let seen = Arc::new(Mutex::new(Vec::<Seen>::new()));
    let log = Arc::clone(&seen);
    let app = axum::Router::new().fallback(
        move |uri: axum::http::Uri, headers: HeaderMap, body: axum::body::Bytes| {
            let log = Arc::clone(&log);
            let answers = answers.clone();
            async move {
                let mut seen = log.lock().unwrap();
                let answer = answers[seen.len().min(answers.len() - 1)].clone();
                seen.push(Seen {
                    path: uri.path().to_owned(),
                    headers,
                    body: serde_json::from_slice(&body).unwrap_or_default(),
                });
                let mut response =
                    Response::builder().status(StatusCode::from_u16(answer.status).unwrap());
                for (name, value) in answer.headers {
                    response = response.header(name, value);
                }
                response.body(Body::from(answer.body)).unwrap()
            }
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{address}"), seen)
}

fn fixture(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/anthropic/stream")
        .join(name);
    std::fs::read(path).unwrap()
}

fn client(base_url: &str) -> AnthropicClient {
    let mut config = AnthropicConfig::new(base_url).with_api_key("sk-ant-test-key-42");
    config.backoff = Backoff {
        initial: Duration::from_millis(5),
        max: Duration::from_millis(20),
        max_retry_after: Duration::from_secs(5),
    };
    AnthropicClient::new(config).unwrap()
}

fn request() -> CompletionRequest {
    CompletionRequest {
        model: "claude-test".into(),
        messages: vec![Message::system("be brief"), Message::user("hi")],
        tools: Vec::new().into(),
        tool_choice: ToolChoice::Auto,
        context: RunContext::new("run", "trace"),
        settings: ModelSettings::default(),
    }
}

/// Deltas seen and the final turn, or the error.
async fn run(client: &AnthropicClient) -> (usize, Result<CompletionFinal, CompletionError>) {
    let mut stream = client.complete(request(), CancellationToken::new());
    let mut deltas = 0;
    while let Some(item) = stream.next().await {
        match item {
            Ok(CompletionItem::Delta(_)) => deltas += 1,
            Ok(CompletionItem::Final(turn)) => return (deltas, Ok(turn)),
            Err(error) => return (deltas, Err(error)),
            Ok(other) => panic!("unexpected item {other:?}"),
        }
    }
    panic!("the stream ended without a final or an error");
}

#[tokio::test]
async fn streams_a_tool_turn_with_the_api_headers() {
    let (url, seen) = serve(vec![sse(fixture("two_tool_calls.sse"))]).await;
    let (deltas, turn) = run(&client(&url)).await;
    let turn = turn.unwrap();
    assert!(deltas > 0);
    assert_eq!(turn.finish_reason, FinishReason::ToolCalls);
    assert_eq!(turn.tool_calls.len(), 2);
    let seen = seen.lock().unwrap();
    let request = &seen[0];
    assert_eq!(request.path, "/v1/messages");
    assert_eq!(request.headers["x-api-key"], "sk-ant-test-key-42");
    assert_eq!(
        request.headers["anthropic-version"],
        wire_anthropic::API_VERSION
    );
    assert_eq!(request.headers[header::CONTENT_TYPE], "application/json");
    assert!(request.headers.get(header::AUTHORIZATION).is_none());
    assert_eq!(request.body["stream"], true);
    assert_eq!(request.body["system"][0]["text"], "be brief");
    assert!(request.body["max_tokens"].as_u64().is_some());
}

#[tokio::test]
async fn overloaded_529_is_retried_after_the_servers_delay() {
    let overloaded = Answer {
        headers: vec![
            ("content-type", "application/json".into()),
            ("retry-after", "0".into()),
        ],
        ..json(
            529,
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        )
    };
    let (url, seen) = serve(vec![overloaded, sse(fixture("text.sse"))]).await;
    let (_, turn) = run(&client(&url)).await;
    assert_eq!(turn.unwrap().finish_reason, FinishReason::Stop);
    assert_eq!(seen.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn error_bodies_are_typed_and_not_retried_when_final() {
    let body = r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: field required"}}"#;
    let (url, seen) = serve(vec![json(400, body)]).await;
    let (_, turn) = run(&client(&url)).await;
    match turn {
        Err(CompletionError::Http { status, message }) => {
            assert_eq!(status, 400);
            assert_eq!(
                message,
                "max_tokens: field required (invalid_request_error)"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(seen.lock().unwrap().len(), 1);
    // Retries end: the last 529 is returned as it is.
    let body = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    let (url, seen) = serve(vec![json(529, body)]).await;
    let (_, turn) = run(&client(&url)).await;
    assert!(
        matches!(&turn, Err(CompletionError::Http { status: 529, message }) if message == "Overloaded (overloaded_error)"),
        "{turn:?}"
    );
    assert_eq!(
        seen.lock().unwrap().len(),
        3,
        "the first attempt and 2 retries"
    );
}

#[tokio::test]
async fn the_key_never_appears_in_an_error() {
    let body = r#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key sk-ant-test-key-42"}}"#;
    let (url, _) = serve(vec![json(401, body)]).await;
    let (_, turn) = run(&client(&url)).await;
    let error = turn.unwrap_err().to_string();
    assert!(!error.contains("sk-ant-test-key-42"), "{error}");
    assert!(error.contains("[redacted]"), "{error}");
}

#[tokio::test]
async fn in_stream_errors_and_cut_streams_are_typed() {
    let (url, _) = serve(vec![sse(fixture("in_stream_error.sse"))]).await;
    let (_, turn) = run(&client(&url)).await;
    assert!(
        matches!(&turn, Err(CompletionError::Provider { code: Some(code), .. }) if code == "overloaded_error"),
        "{turn:?}"
    );
    let (url, _) = serve(vec![sse(fixture("truncated.sse"))]).await;
    let (_, turn) = run(&client(&url)).await;
    assert!(
        matches!(&turn, Err(CompletionError::TruncatedStream { .. })),
        "{turn:?}"
    );
}

#[tokio::test]
async fn a_whole_json_message_is_decoded() {
    let body = r#"{"id":"msg_1","type":"message","role":"assistant","model":"claude-test",
        "content":[{"type":"thinking","thinking":"look it up","signature":"sig-1"},
                   {"type":"text","text":"Let me check."},
                   {"type":"tool_use","id":"toolu_1","name":"clock","input":{"tz":"UTC"}}],
        "stop_reason":"tool_use","usage":{"input_tokens":10,"output_tokens":5,"cache_read_input_tokens":4}}"#;
    let (url, _) = serve(vec![json(200, body)]).await;
    let (deltas, turn) = run(&client(&url)).await;
    let turn = turn.unwrap();
    assert_eq!(deltas, 4, "reasoning, text, call start, call arguments");
    assert_eq!(turn.text, "Let me check.");
    assert_eq!(turn.finish_reason, FinishReason::ToolCalls);
    assert_eq!(turn.tool_calls[0].arguments, r#"{"tz":"UTC"}"#);
    assert_eq!(turn.blocks.len(), 3);
    let usage = turn.usage.unwrap();
    assert_eq!((usage.prompt_tokens, usage.cached_tokens), (14, Some(4)));
}

#[tokio::test]
async fn redirects_are_not_followed() {
    let redirect = Answer {
        status: 307,
        headers: vec![("location", "http://elsewhere.example/v1/messages".into())],
        body: Vec::new(),
    };
    let (url, seen) = serve(vec![redirect]).await;
    let (_, turn) = run(&client(&url)).await;
    match turn {
        Err(CompletionError::Http {
            status: 307,
            message,
        }) => {
            assert!(message.contains("http://elsewhere.example"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(seen.lock().unwrap().len(), 1);
}
