//! The client over real HTTP on loopback: an axum server streams fixtures with
//! chunked transfer and injects faults.

use std::convert::Infallible;
use std::fs;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ai_core::{
    CancellationToken, CompletionDelta, CompletionError, CompletionFinal, CompletionItem,
    CompletionPort, CompletionRequest, Message, RunContext, TimeoutPhase, ToolChoice, ToolEffect,
    ToolId, ToolSpec,
};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::{Mutex, Notify};
use wire_openai::client::{Backoff, ClientConfig, OpenAiClient, Timeouts};
use wire_openai::encode::StrictMode;

use crate::common::{decode_chunks, fixture_dir};

const KEY: &str = "sk-test-SECRET-0123456789abcdef";

#[derive(Default)]
struct Recorded {
    hits: AtomicUsize,
    requests: Mutex<Vec<(HeaderMap, Value)>>,
    body_dropped: Notify,
}

struct DropSignal(Arc<Recorded>);

impl Drop for DropSignal {
    fn drop(&mut self) {
        self.0.body_dropped.notify_one();
    }
}

fn fixture(name: &str) -> Vec<u8> {
    fs::read(fixture_dir("stream").join(format!("{name}.sse"))).unwrap()
}

/// A chunked body sending `bytes` in `size`-byte pieces with a pause between them.
fn chunked(bytes: Vec<u8>, size: usize, pause: Duration) -> Body {
    let pieces: Vec<Bytes> = bytes.chunks(size).map(Bytes::copy_from_slice).collect();
    let stream = futures::stream::iter(pieces).then(move |piece| async move {
        tokio::time::sleep(pause).await;
        Ok::<_, Infallible>(piece)
    });
    Body::from_stream(stream)
}

fn sse(body: Body) -> Response {
    ([(header::CONTENT_TYPE, "text/event-stream")], body).into_response()
}

fn json_error(status: StatusCode, message: &str) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        json!({"error": {"message": message, "type": "server_error", "code": null}}).to_string(),
    )
        .into_response()
}

async fn handle(
    State(recorded): State<Arc<Recorded>>,
    Path(scenario): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let hit = recorded.hits.fetch_add(1, Ordering::SeqCst);
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    recorded
        .requests
        .lock()
        .await
        .push((headers.clone(), request));
    match scenario.as_str() {
        "parallel" => sse(chunked(fixture("openai_parallel_calls"), 61, Duration::from_millis(1))),
        "rate-limited" if hit == 0 => (
            StatusCode::TOO_MANY_REQUESTS,
            [("retry-after", "1"), ("content-type", "application/json")],
            r#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#,
        )
            .into_response(),
        "rate-limited" => sse(chunked(fixture("openai_text_usage"), 200, Duration::ZERO)),
        "too-long-retry-after" => (
            StatusCode::TOO_MANY_REQUESTS,
            [("retry-after", "3600")],
            "slow down",
        )
            .into_response(),
        "server-error" => json_error(StatusCode::INTERNAL_SERVER_ERROR, "The server had an error processing your request."),
        "bad-request" => json_error(StatusCode::BAD_REQUEST, "Invalid 'messages': empty"),
        "echo-key" => {
            let auth = headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned();
            json_error(StatusCode::UNAUTHORIZED, &format!("Incorrect API key provided: {auth}"))
        }
        "slow-first-byte" => {
            tokio::time::sleep(Duration::from_secs(3)).await;
            sse(Body::from("data: [DONE]\n\n"))
        }
        "stall" => {
            let first = Bytes::from_static(b"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n");
            let stream = futures::stream::iter([first]).map(Ok::<_, Infallible>).chain(
                futures::stream::once(async {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                    Ok(Bytes::from_static(b"data: [DONE]\n\n"))
                }),
            );
            sse(Body::from_stream(stream))
        }
        "cut-mid-stream" => {
            let whole = fixture("openai_parallel_calls");
            // Send the first ~60% of a parallel-call stream, then break the body.
            let cut = whole.len() * 6 / 10;
            let head = Bytes::copy_from_slice(&whole[..cut]);
            let stream = futures::stream::iter([Ok::<_, std::io::Error>(head)]).chain(futures::stream::once(async {
                tokio::time::sleep(Duration::from_millis(20)).await;
                Err(std::io::Error::other("cut"))
            }));
            sse(Body::from_stream(stream))
        }
        "in-band-error" => sse(chunked(fixture("error_frame"), 50, Duration::ZERO)),
        "endless" => {
            let guard = DropSignal(Arc::clone(&recorded));
            let stream = futures::stream::unfold((0u64, guard), |(n, guard)| async move {
                tokio::time::sleep(Duration::from_millis(20)).await;
                let line = format!("data: {{\"choices\":[{{\"delta\":{{\"content\":\"tick {n} \"}}}}]}}\n\n");
                Some((Ok::<_, Infallible>(Bytes::from(line)), (n + 1, guard)))
            });
            sse(Body::from_stream(stream))
        }
        "json" => (
            [(header::CONTENT_TYPE, "application/json")],
            fs::read(fixture_dir("response").join("openai_tool_calls.json")).unwrap(),
        )
            .into_response(),
        "strict" => sse(Body::from(concat!(
            "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"type\":\"function\",",
            "\"function\":{\"name\":\"core__get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\",\\\"unit\\\":null}\"}}]},",
            "\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n"
        ))),
        _ => (StatusCode::NOT_FOUND, "no such scenario").into_response(),
    }
}

struct TestServer {
    addr: SocketAddr,
    recorded: Arc<Recorded>,
}

async fn server() -> TestServer {
    let recorded = Arc::new(Recorded::default());
    let app = Router::new()
        .route("/{scenario}/v1/chat/completions", post(handle))
        .with_state(Arc::clone(&recorded));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    TestServer { addr, recorded }
}

fn config(server: &TestServer, scenario: &str) -> ClientConfig {
    let mut config =
        ClientConfig::new(format!("http://{}/{scenario}/v1/", server.addr)).with_api_key(KEY);
    config.timeouts = Timeouts {
        connect: Duration::from_secs(2),
        first_byte: Duration::from_secs(2),
        between_chunks: Duration::from_secs(2),
    };
    config.backoff = Backoff {
        initial: Duration::from_millis(20),
        max: Duration::from_millis(100),
        max_retry_after: Duration::from_secs(5),
    };
    config
}

fn weather_tool() -> ToolSpec {
    ToolSpec::new(
        ToolId::parse("core__get_weather").unwrap(),
        "Weather",
        json!({"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}}, "required": ["city"]}),
        ToolEffect::ReadOnly,
    )
}

fn request() -> CompletionRequest {
    CompletionRequest {
        model: "gpt-4o".into(),
        messages: vec![Message::user("weather?")],
        tools: vec![weather_tool()].into(),
        tool_choice: ToolChoice::Auto,
        context: RunContext::new("run-1", "trace-1"),
        max_tokens: None,
        temperature: None,
    }
}

async fn collect(
    client: &OpenAiClient,
    cancel: CancellationToken,
) -> (
    Vec<CompletionDelta>,
    Result<CompletionFinal, CompletionError>,
) {
    let mut stream = client.complete(request(), cancel);
    let mut deltas = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(CompletionItem::Delta(delta)) => deltas.push(delta),
            Ok(CompletionItem::Final(turn)) => {
                assert!(stream.next().await.is_none(), "final must be last");
                return (deltas, Ok(turn));
            }
            Err(error) => {
                assert!(stream.next().await.is_none(), "an error ends the stream");
                return (deltas, Err(error));
            }
        }
    }
    panic!("stream ended without a final or an error");
}

fn assert_no_key(error: &CompletionError) {
    for text in [error.to_string(), format!("{error:?}")] {
        assert!(!text.contains(KEY), "API key leaked: {text}");
        assert!(!text.contains("SECRET"), "API key leaked: {text}");
    }
}

#[tokio::test]
async fn streams_a_fixture_over_chunked_http_like_the_sans_io_decoder() {
    let server = server().await;
    let mut config = config(&server, "parallel");
    config
        .extra_headers
        .push(("x-trace".into(), "trace-1".into()));
    let client = OpenAiClient::new(config).unwrap();
    let (deltas, result) = collect(&client, CancellationToken::new()).await;
    let turn = result.unwrap();
    let (expected_deltas, expected) =
        decode_chunks(&fixture("openai_parallel_calls"), &[], Default::default());
    let expected = expected.unwrap();
    assert_eq!(turn, expected);
    assert_eq!(deltas, expected_deltas);
    assert_eq!(turn.tool_calls.len(), 3);

    let requests = server.recorded.requests.lock().await;
    let (headers, body) = &requests[0];
    assert_eq!(
        headers[header::AUTHORIZATION],
        format!("Bearer {KEY}").as_str()
    );
    assert_eq!(headers["x-trace"], "trace-1");
    assert_eq!(headers[header::CONTENT_TYPE], "application/json");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(body["tools"][0]["function"]["name"], "core__get_weather");
}

#[tokio::test]
async fn retries_429_after_retry_after_then_succeeds() {
    let server = server().await;
    let client = OpenAiClient::new(config(&server, "rate-limited")).unwrap();
    let started = Instant::now();
    let (_, result) = collect(&client, CancellationToken::new()).await;
    assert!(result.unwrap().text.starts_with("The capital of France"));
    assert_eq!(server.recorded.hits.load(Ordering::SeqCst), 2);
    assert!(
        started.elapsed() >= Duration::from_millis(950),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn retry_after_beyond_the_limit_is_not_waited_for() {
    let server = server().await;
    let client = OpenAiClient::new(config(&server, "too-long-retry-after")).unwrap();
    let started = Instant::now();
    let (_, result) = collect(&client, CancellationToken::new()).await;
    assert_eq!(
        result.unwrap_err(),
        CompletionError::Http {
            status: 429,
            message: "slow down".into()
        }
    );
    assert_eq!(server.recorded.hits.load(Ordering::SeqCst), 1);
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn server_errors_are_retried_then_typed_with_the_provider_message() {
    let server = server().await;
    let mut config = config(&server, "server-error");
    config.max_retries = 2;
    let client = OpenAiClient::new(config).unwrap();
    let (_, result) = collect(&client, CancellationToken::new()).await;
    let error = result.unwrap_err();
    assert_eq!(
        error,
        CompletionError::Http {
            status: 500,
            message: "The server had an error processing your request. (server_error)".into()
        }
    );
    assert_eq!(error.code(), "provider_http_error");
    assert_eq!(server.recorded.hits.load(Ordering::SeqCst), 3);
    assert_no_key(&error);
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    let server = server().await;
    let client = OpenAiClient::new(config(&server, "bad-request")).unwrap();
    let (_, result) = collect(&client, CancellationToken::new()).await;
    assert!(matches!(
        result,
        Err(CompletionError::Http { status: 400, .. })
    ));
    assert_eq!(server.recorded.hits.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn the_api_key_never_appears_in_errors() {
    let server = server().await;
    let client = OpenAiClient::new(config(&server, "echo-key")).unwrap();
    let (_, result) = collect(&client, CancellationToken::new()).await;
    let error = result.unwrap_err();
    assert!(
        matches!(&error, CompletionError::Http { status: 401, message } if message.contains("[redacted]")),
        "{error:?}"
    );
    assert_no_key(&error);

    // Connection refused, before any byte: retried, then a connect error.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    let mut config = ClientConfig::new(format!("http://{addr}/v1")).with_api_key(KEY);
    config.backoff.initial = Duration::from_millis(10);
    config.max_retries = 2;
    let client = OpenAiClient::new(config).unwrap();
    let (_, result) = collect(&client, CancellationToken::new()).await;
    let error = result.unwrap_err();
    assert_eq!(error.code(), "provider_unreachable", "{error:?}");
    assert_no_key(&error);
    // The URL (which may carry credentials or query keys) is left out as well.
    assert!(!error.to_string().contains(&addr.to_string()), "{error}");
}

#[tokio::test]
async fn slow_first_byte_times_out_without_retry() {
    let server = server().await;
    let mut config = config(&server, "slow-first-byte");
    config.timeouts.first_byte = Duration::from_millis(200);
    let client = OpenAiClient::new(config).unwrap();
    let started = Instant::now();
    let (_, result) = collect(&client, CancellationToken::new()).await;
    let error = result.unwrap_err();
    assert_eq!(
        error,
        CompletionError::Timeout {
            phase: TimeoutPhase::FirstByte
        }
    );
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(server.recorded.hits.load(Ordering::SeqCst), 1);
    assert_no_key(&error);
}

#[tokio::test]
async fn a_stall_between_chunks_times_out() {
    let server = server().await;
    let mut config = config(&server, "stall");
    config.timeouts.between_chunks = Duration::from_millis(200);
    let client = OpenAiClient::new(config).unwrap();
    let (deltas, result) = collect(&client, CancellationToken::new()).await;
    assert_eq!(deltas, [CompletionDelta::Text("hi".into())]);
    assert_eq!(
        result.unwrap_err(),
        CompletionError::Timeout {
            phase: TimeoutPhase::BetweenChunks
        }
    );
}

#[tokio::test]
async fn a_connection_cut_mid_stream_keeps_what_was_assembled() {
    let server = server().await;
    let client = OpenAiClient::new(config(&server, "cut-mid-stream")).unwrap();
    let (deltas, result) = collect(&client, CancellationToken::new()).await;
    let Err(CompletionError::TruncatedStream { partial }) = result else {
        panic!("expected a truncated stream, got {result:?}");
    };
    assert!(!deltas.is_empty());
    assert!(!partial.tool_calls.is_empty());
    let first = &partial.tool_calls[0];
    assert_eq!(first.id, "call_pK2vQ8sR1tU4wX7y");
    assert_eq!(first.arguments, r#"{"city": "Paris", "unit": "celsius"}"#);
    assert_eq!(first.outcome, ai_core::ToolCallOutcome::Complete);
    assert_eq!(
        server.recorded.hits.load(Ordering::SeqCst),
        1,
        "no retry after the first byte"
    );
}

#[tokio::test]
async fn an_in_band_error_frame_is_a_provider_error() {
    let server = server().await;
    let client = OpenAiClient::new(config(&server, "in-band-error")).unwrap();
    let (_, result) = collect(&client, CancellationToken::new()).await;
    assert_eq!(
        result.unwrap_err(),
        CompletionError::Provider {
            code: Some("429".into()),
            message: "litellm.RateLimitError: upstream rate limit".into()
        }
    );
}

#[tokio::test]
async fn cancelling_mid_stream_ends_with_cancelled_and_closes_the_connection() {
    let server = server().await;
    let client = OpenAiClient::new(config(&server, "endless")).unwrap();
    let cancel = CancellationToken::new();
    let mut stream = client.complete(request(), cancel.clone());
    let first = stream.next().await.unwrap().unwrap();
    assert!(matches!(
        first,
        CompletionItem::Delta(CompletionDelta::Text(_))
    ));
    cancel.cancel();
    assert_eq!(
        stream.next().await.unwrap().unwrap_err(),
        CompletionError::Cancelled
    );
    assert!(stream.next().await.is_none());
    drop(stream);
    tokio::time::timeout(
        Duration::from_secs(5),
        server.recorded.body_dropped.notified(),
    )
    .await
    .expect("the server saw the connection close");
}

#[tokio::test]
async fn dropping_the_stream_closes_the_connection() {
    let server = server().await;
    let client = OpenAiClient::new(config(&server, "endless")).unwrap();
    let mut stream = client.complete(request(), CancellationToken::new());
    for _ in 0..3 {
        assert!(stream.next().await.unwrap().is_ok());
    }
    drop(stream);
    tokio::time::timeout(
        Duration::from_secs(5),
        server.recorded.body_dropped.notified(),
    )
    .await
    .expect("the server saw the connection close");
}

#[tokio::test]
async fn cancelling_before_the_response_arrives() {
    let server = server().await;
    let client = OpenAiClient::new(config(&server, "slow-first-byte")).unwrap();
    let cancel = CancellationToken::new();
    let canceller = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        canceller.cancel();
    });
    let started = Instant::now();
    let (_, result) = collect(&client, cancel).await;
    assert_eq!(result.unwrap_err(), CompletionError::Cancelled);
    assert!(started.elapsed() < Duration::from_secs(1));
}

#[tokio::test]
async fn non_streaming_calls_decode_the_whole_response() {
    let server = server().await;
    let mut config = config(&server, "json");
    config.stream = false;
    let client = OpenAiClient::new(config).unwrap();
    let (deltas, result) = collect(&client, CancellationToken::new()).await;
    let turn = result.unwrap();
    assert_eq!(turn.tool_calls.len(), 2);
    assert_eq!(turn.finish_reason, ai_core::FinishReason::ToolCalls);
    assert!(
        deltas
            .iter()
            .any(|d| matches!(d, CompletionDelta::ToolCallStart { .. }))
    );
    let requests = server.recorded.requests.lock().await;
    assert_eq!(requests[0].1["stream"], false);
    assert!(requests[0].1.get("stream_options").is_none());
}

#[tokio::test]
async fn a_json_answer_to_a_streaming_request_is_decoded() {
    let server = server().await;
    let client = OpenAiClient::new(config(&server, "json")).unwrap();
    let (_, result) = collect(&client, CancellationToken::new()).await;
    assert_eq!(
        result.unwrap().tool_calls[1].arguments,
        r#"{"city": "Nice"}"#
    );
}

#[tokio::test]
async fn strict_mode_sends_strict_schemas_and_relaxes_the_nulls_back() {
    let server = server().await;
    let mut config = config(&server, "strict");
    config.encode.strict = StrictMode::WhenPossible;
    let client = OpenAiClient::new(config).unwrap();
    let (deltas, result) = collect(&client, CancellationToken::new()).await;
    let turn = result.unwrap();
    assert_eq!(turn.tool_calls[0].arguments, r#"{"city":"Paris"}"#);
    // Deltas stay raw; only the assembled record is relaxed.
    assert!(deltas.iter().any(
        |d| matches!(d, CompletionDelta::ToolCallArgs { fragment, .. } if fragment.contains("null"))
    ));
    let requests = server.recorded.requests.lock().await;
    let function = &requests[0].1["tools"][0]["function"];
    assert_eq!(function["strict"], true);
    assert_eq!(function["parameters"]["required"], json!(["city", "unit"]));
}
