//! The client over real HTTP on loopback: agent-testing's `OpenAiServer` streams
//! fixtures with chunked transfer and injects faults.

use std::fs;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime};

use agent_testing::server::{OpenAiServer, Reply, data, write_all};
use ai_core::{
    CancellationToken, CompletionPort, Message, RunContext, ToolEffect, ToolId, ToolSpec,
    completion::{
        CompletionDelta, CompletionError, CompletionFinal, CompletionItem, CompletionRequest,
        TimeoutPhase, ToolChoice,
    },
};
use futures::StreamExt;
use serde_json::json;
use wire_openai::client::{Backoff, ClientConfig, OpenAiClient, Timeouts};
use wire_openai::encode::StrictMode;

use crate::common::{decode_chunks, fixture_dir};

const KEY: &str = "sk-test-SECRET-0123456789abcdef";

fn fixture(name: &str) -> Vec<u8> {
    fs::read(fixture_dir("stream").join(format!("{name}.sse"))).unwrap()
}

/// `fixture` as SSE in `size`-byte chunks with a pause before each.
fn chunked(name: &str, size: usize, pause: Duration) -> Reply {
    Reply::sse_bytes(fixture(name), size).paced(pause)
}

/// An OpenAI-style JSON error.
fn json_error(status: u16, message: &str) -> Reply {
    Reply::json(
        status,
        &json!({"error": {"message": message, "type": "server_error", "code": null}}),
    )
}

/// A header value computed by the test (`Reply::header` takes `'static` text; a test
/// leaks a few bytes).
fn leak(text: String) -> &'static str {
    Box::leak(text.into_boxed_str())
}

/// Runs `future`, failing the test instead of hanging when it takes over 10 s.
async fn bounded<F: std::future::Future>(future: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(10), future)
        .await
        .expect("the call ended within 10 s")
}

/// A first byte that never comes in time: the response head waits 3 s.
fn slow_first_byte() -> Reply {
    Reply::sse(["data: [DONE]\n\n"]).delayed(Duration::from_secs(3))
}

/// An SSE stream of `tick <n>` text deltas every 20 ms, never ending.
fn endless() -> Reply {
    Reply::endless(Duration::from_millis(20), |n| {
        data(&format!(
            r#"{{"choices":[{{"delta":{{"content":"tick {n} "}}}}]}}"#
        ))
    })
}

/// The recorded non-streaming response with two tool calls, as `application/json`.
fn json_response() -> Reply {
    Reply::new(200)
        .header("content-type", "application/json")
        .then_bytes(fs::read(fixture_dir("response").join("openai_tool_calls.json")).unwrap())
}

async fn server(script: impl IntoIterator<Item = Reply>) -> OpenAiServer {
    OpenAiServer::start(script).await.unwrap()
}

/// A server playing `script` and a client of it with the default [`config`].
async fn served(script: impl IntoIterator<Item = Reply>) -> (OpenAiServer, OpenAiClient) {
    let server = server(script).await;
    let client = OpenAiClient::new(config(&server)).unwrap();
    (server, client)
}

/// At least `at_least` and less than `under` have passed since `started`.
fn assert_waited(started: Instant, at_least: Duration, under: Duration) {
    let waited = started.elapsed();
    assert!(waited >= at_least && waited < under, "{waited:?}");
}

/// The server sees its one connection closed within 5 s.
async fn assert_connection_closed(server: &OpenAiServer) {
    tokio::time::timeout(Duration::from_secs(5), server.wait_abandoned(1))
        .await
        .expect("the server saw the connection close");
}

/// How many requests the server received, each checked to have gone to the
/// chat-completions path under the configured base URL.
fn hits(server: &OpenAiServer) -> usize {
    let requests = server.requests();
    for request in &requests {
        assert_eq!(request.path, "/v1/chat/completions");
    }
    requests.len()
}

fn config(server: &OpenAiServer) -> ClientConfig {
    let mut config = ClientConfig::new(format!("{}/", server.base_url())).with_api_key(KEY);
    config.timeouts = Timeouts {
        connect: Duration::from_secs(2),
        first_byte: Duration::from_secs(2),
        between_chunks: Duration::from_secs(2),
        total: Some(Duration::from_secs(20)),
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
        settings: ai_core::completion::ModelSettings::default(),
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
            Ok(other) => panic!("unexpected item {other:?}"),
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
    let server = server([chunked(
        "openai_parallel_calls",
        61,
        Duration::from_millis(1),
    )])
    .await;
    let mut config = config(&server);
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

    assert_eq!(hits(&server), 1);
    let requests = server.requests();
    let (headers, body) = (&requests[0].headers, &requests[0].body);
    assert_eq!(headers["authorization"], format!("Bearer {KEY}").as_str());
    assert_eq!(headers["x-trace"], "trace-1");
    assert_eq!(headers["content-type"], "application/json");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(body["tools"][0]["function"]["name"], "core__get_weather");
}

#[tokio::test]
async fn a_request_carries_the_trace_the_run_continues() {
    let caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let (server, client) = served([Reply::text("ok")]).await;
    let mut traced = request();
    traced.context = RunContext::from_traceparent(Some(caller)).with_trace_state(Some("ro=1"));
    let mut stream = client.complete(traced, CancellationToken::new());
    while stream.next().await.is_some() {}
    let requests = server.requests();
    // No exporter in this process: the caller's span is the parent it names.
    assert_eq!(requests[0].header("traceparent"), Some(caller));
    assert_eq!(requests[0].header("tracestate"), Some("ro=1"));
    // A run whose trace id is not a W3C id sends none.
    let (server, client) = served([Reply::text("ok")]).await;
    let mut stream = client.complete(request(), CancellationToken::new());
    while stream.next().await.is_some() {}
    assert_eq!(server.requests()[0].header("traceparent"), None);
}

#[tokio::test]
async fn retries_429_after_retry_after_then_succeeds() {
    let server = server([
        Reply::new(429)
            .header("retry-after", "1")
            .header("content-type", "application/json")
            .then_bytes(r#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#),
        Reply::sse_bytes(fixture("openai_text_usage"), 200),
    ])
    .await;
    let client = OpenAiClient::new(config(&server)).unwrap();
    let started = Instant::now();
    let (_, result) = collect(&client, CancellationToken::new()).await;
    assert!(result.unwrap().text.starts_with("The capital of France"));
    assert_eq!(hits(&server), 2);
    assert!(
        started.elapsed() >= Duration::from_millis(950),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn retry_after_beyond_the_limit_is_not_waited_for() {
    let server = server([Reply::new(429)
        .header("retry-after", "3600")
        .header("content-type", "text/plain; charset=utf-8")
        .then_bytes("slow down")])
    .await;
    let client = OpenAiClient::new(config(&server)).unwrap();
    let started = Instant::now();
    let (_, result) = collect(&client, CancellationToken::new()).await;
    assert_eq!(
        result.unwrap_err(),
        CompletionError::Http {
            status: 429,
            message: "slow down".into()
        }
    );
    assert_eq!(hits(&server), 1);
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test]
async fn server_errors_are_retried_then_typed_with_the_provider_message() {
    let server = server(std::iter::repeat_n(
        json_error(500, "The server had an error processing your request."),
        3,
    ))
    .await;
    let mut config = config(&server);
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
    assert_eq!(hits(&server), 3);
    assert_no_key(&error);
}

#[tokio::test]
async fn client_errors_are_not_retried() {
    let (server, client) = served([json_error(400, "Invalid 'messages': empty")]).await;
    let (_, result) = collect(&client, CancellationToken::new()).await;
    assert!(matches!(
        result,
        Err(CompletionError::Http { status: 400, .. })
    ));
    assert_eq!(hits(&server), 1);
}

#[tokio::test]
async fn the_api_key_never_appears_in_errors() {
    let server = server([Reply::from_request(|request| {
        let auth = request.header("authorization").unwrap_or("");
        json_error(401, &format!("Incorrect API key provided: {auth}"))
    })])
    .await;
    let client = OpenAiClient::new(config(&server)).unwrap();
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
    let server = server([slow_first_byte()]).await;
    let mut config = config(&server);
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
    assert_eq!(hits(&server), 1);
    assert_no_key(&error);
}

#[tokio::test]
async fn a_stall_between_chunks_times_out() {
    let server = server([Reply::sse([
        "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n",
    ])
    .then_pause(Duration::from_secs(5))
    .then_bytes("data: [DONE]\n\n")])
    .await;
    let mut config = config(&server);
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
    // Send the first ~60% of a parallel-call stream, then break the body.
    let whole = fixture("openai_parallel_calls");
    let cut = whole.len() * 6 / 10;
    let server = server([Reply::sse_bytes(whole[..cut].to_vec(), 0)
        .then_pause(Duration::from_millis(20))
        .then_cut()])
    .await;
    let client = OpenAiClient::new(config(&server)).unwrap();
    let (deltas, result) = collect(&client, CancellationToken::new()).await;
    let Err(CompletionError::TruncatedStream { partial }) = result else {
        panic!("expected a truncated stream, got {result:?}");
    };
    assert!(!deltas.is_empty());
    assert!(!partial.tool_calls.is_empty());
    let first = &partial.tool_calls[0];
    assert_eq!(first.id, "call_pK2vQ8sR1tU4wX7y");
    assert_eq!(first.arguments, r#"{"city": "Paris", "unit": "celsius"}"#);
    assert_eq!(
        first.outcome,
        ai_core::completion::ToolCallOutcome::Complete
    );
    assert_eq!(hits(&server), 1, "no retry after the first byte");
}

#[tokio::test]
async fn an_in_band_error_frame_is_a_provider_error() {
    let (_server, client) = served([Reply::sse_bytes(fixture("error_frame"), 50)]).await;
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
    let (server, client) = served([endless()]).await;
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
    assert_connection_closed(&server).await;
}

#[tokio::test]
async fn dropping_the_stream_closes_the_connection() {
    let (server, client) = served([endless()]).await;
    let mut stream = client.complete(request(), CancellationToken::new());
    for _ in 0..3 {
        assert!(stream.next().await.unwrap().is_ok());
    }
    drop(stream);
    assert_connection_closed(&server).await;
}

#[tokio::test]
async fn cancelling_before_the_response_arrives() {
    let (_server, client) = served([slow_first_byte()]).await;
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
    let server = server([json_response()]).await;
    let mut config = config(&server);
    config.options.encode.stream = false;
    let client = OpenAiClient::new(config).unwrap();
    let (deltas, result) = collect(&client, CancellationToken::new()).await;
    let turn = result.unwrap();
    assert_eq!(turn.tool_calls.len(), 2);
    assert_eq!(
        turn.finish_reason,
        ai_core::completion::FinishReason::ToolCalls
    );
    assert!(
        deltas
            .iter()
            .any(|d| matches!(d, CompletionDelta::ToolCallStart { .. }))
    );
    assert_eq!(hits(&server), 1);
    let requests = server.requests();
    assert_eq!(requests[0].body["stream"], false);
    assert!(requests[0].body.get("stream_options").is_none());
}

#[tokio::test]
async fn a_json_answer_to_a_streaming_request_is_decoded() {
    let (_server, client) = served([json_response()]).await;
    let (_, result) = collect(&client, CancellationToken::new()).await;
    assert_eq!(
        result.unwrap().tool_calls[1].arguments,
        r#"{"city": "Nice"}"#
    );
}

#[tokio::test]
async fn strict_mode_sends_strict_schemas_and_relaxes_the_nulls_back() {
    let server = server([Reply::sse([concat!(
        "data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c1\",\"type\":\"function\",",
        "\"function\":{\"name\":\"core__get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\",\\\"unit\\\":null}\"}}]},",
        "\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n"
    )])])
    .await;
    let mut config = config(&server);
    config.options.encode.strict = StrictMode::WhenPossible;
    let client = OpenAiClient::new(config).unwrap();
    let (deltas, result) = collect(&client, CancellationToken::new()).await;
    let turn = result.unwrap();
    assert_eq!(turn.tool_calls[0].arguments, r#"{"city":"Paris"}"#);
    // Deltas stay raw; only the assembled record is relaxed.
    assert!(deltas.iter().any(
        |d| matches!(d, CompletionDelta::ToolCallArgs { fragment, .. } if fragment.contains("null"))
    ));
    let requests = server.requests();
    let function = &requests[0].body["tools"][0]["function"];
    assert_eq!(function["strict"], true);
    assert_eq!(function["parameters"]["required"], json!(["city", "unit"]));
}

#[tokio::test]
async fn request_timeout_408_and_conflict_409_are_retried() {
    for status in [408, 409] {
        let (server, client) =
            served([json_error(status, "try again"), Reply::text("Fine.")]).await;
        let (_, result) = collect(&client, CancellationToken::new()).await;
        assert_eq!(result.unwrap().text, "Fine.", "status {status}");
        assert_eq!(hits(&server), 2, "status {status}");
    }
}

#[tokio::test]
async fn a_429_for_insufficient_quota_is_not_retried() {
    let server = server([
        Reply::json(
            429,
            &json!({"error": {"message": "You exceeded your current quota, please check your plan and billing details.",
                              "type": "insufficient_quota", "param": null, "code": "insufficient_quota"}}),
        ),
        Reply::text("never"),
    ])
    .await;
    let client = OpenAiClient::new(config(&server)).unwrap();
    let (_, result) = collect(&client, CancellationToken::new()).await;
    let error = result.unwrap_err();
    assert!(
        matches!(&error, CompletionError::Http { status: 429, message } if message.contains("insufficient_quota")),
        "{error:?}"
    );
    assert_eq!(hits(&server), 1);
    assert_eq!(server.remaining(), 1);
}

#[tokio::test]
async fn retry_after_as_an_http_date_is_honoured() {
    // Whole seconds: "now + 2 s" is between 1 and 2 s away when the client reads it.
    let date = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(2));
    let server = server([
        Reply::json(
            429,
            &json!({"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}),
        )
        .header("retry-after", leak(date)),
        Reply::text("Fine."),
    ])
    .await;
    let client = OpenAiClient::new(config(&server)).unwrap();
    let started = Instant::now();
    let (_, result) = bounded(collect(&client, CancellationToken::new())).await;
    assert_eq!(result.unwrap().text, "Fine.");
    assert_eq!(hits(&server), 2);
    // The computed backoff would be 10 to 20 ms.
    assert_waited(started, Duration::from_millis(900), Duration::from_secs(5));
}

#[tokio::test]
async fn a_cross_origin_redirect_is_not_followed_and_the_secrets_stay_home() {
    let elsewhere = server([Reply::text("stolen"), Reply::text("stolen")]).await;
    let target = leak(format!("{}/chat/completions", elsewhere.base_url()));
    let home = server([Reply::new(307).header("location", target)]).await;
    let mut config = config(&home);
    config
        .extra_headers
        .push(("api-key".into(), "azure-SECRET-key".into()));
    let client = OpenAiClient::new(config).unwrap();
    let (_, result) = collect(&client, CancellationToken::new()).await;
    let error = result.unwrap_err();
    let CompletionError::Http { status, message } = &error else {
        panic!("expected an HTTP error, got {error:?}");
    };
    assert_eq!(*status, 307);
    assert!(
        message.contains(&format!("http://{}", elsewhere.addr())),
        "{message}"
    );
    assert_eq!(hits(&home), 1, "a redirect is not retried");
    assert_eq!(
        elsewhere.requests().len(),
        0,
        "nothing reached the other origin"
    );
    assert_no_key(&error);
}

#[tokio::test]
async fn a_redirect_within_the_origin_is_not_followed_either() {
    let home = server([Reply::new(308).header("location", "/v2/chat/completions")]).await;
    let client = OpenAiClient::new(config(&home)).unwrap();
    let (_, result) = collect(&client, CancellationToken::new()).await;
    assert!(
        matches!(result, Err(CompletionError::Http { status: 308, .. })),
        "{result:?}"
    );
    assert_eq!(hits(&home), 1);
}

#[tokio::test]
async fn keepalive_comments_do_not_hold_a_stalled_stream_open() {
    // One text event, then nothing but `: ping` comments every 50 ms, forever.
    let server = server([Reply::endless(Duration::from_millis(50), |n| {
        if n == 0 {
            data(r#"{"choices":[{"delta":{"content":"hi"}}]}"#)
        } else {
            ": ping\n\n".to_owned()
        }
    })])
    .await;
    let mut config = config(&server);
    config.timeouts.between_chunks = Duration::from_millis(400);
    config.timeouts.total = None;
    let client = OpenAiClient::new(config).unwrap();
    let started = Instant::now();
    let (deltas, result) = bounded(collect(&client, CancellationToken::new())).await;
    assert_eq!(deltas, [CompletionDelta::Text("hi".into())]);
    assert_eq!(
        result.unwrap_err(),
        CompletionError::Timeout {
            phase: TimeoutPhase::BetweenChunks
        }
    );
    assert_waited(started, Duration::from_millis(400), Duration::from_secs(3));
    assert_connection_closed(&server).await;
}

#[tokio::test]
async fn the_total_deadline_bounds_a_stream_that_keeps_sending_data() {
    let server = server([endless()]).await;
    let mut config = config(&server);
    config.timeouts.total = Some(Duration::from_millis(500));
    let client = OpenAiClient::new(config).unwrap();
    let started = Instant::now();
    let (deltas, result) = bounded(collect(&client, CancellationToken::new())).await;
    assert!(deltas.len() > 3, "{deltas:?}");
    assert_eq!(
        result.unwrap_err(),
        CompletionError::Timeout {
            phase: TimeoutPhase::Total
        }
    );
    assert_waited(started, Duration::from_millis(500), Duration::from_secs(3));
}

#[tokio::test]
async fn the_total_deadline_bounds_a_slow_non_streaming_response() {
    // A JSON body trickling in 20-byte pieces every 100 ms: each chunk comes well
    // within the idle limit, the whole takes seconds.
    let body = fs::read(fixture_dir("response").join("openai_tool_calls.json")).unwrap();
    assert!(body.len() > 400);
    let trickle = Reply::sse_bytes(body, 20)
        .header("content-type", "application/json")
        .paced(Duration::from_millis(100));
    // And a server that takes long to produce its response head at all.
    let slow_head = json_response().delayed(Duration::from_secs(3));
    for reply in [trickle, slow_head] {
        let server = server([reply]).await;
        let mut config = config(&server);
        config.options.encode.stream = false;
        config.timeouts.first_byte = Duration::from_secs(10);
        config.timeouts.total = Some(Duration::from_millis(600));
        let client = OpenAiClient::new(config).unwrap();
        let started = Instant::now();
        let (_, result) = bounded(collect(&client, CancellationToken::new())).await;
        assert_eq!(
            result.unwrap_err(),
            CompletionError::Timeout {
                phase: TimeoutPhase::Total
            }
        );
        assert_waited(started, Duration::from_millis(600), Duration::from_secs(2));
        assert_eq!(hits(&server), 1);
    }
}

#[tokio::test]
async fn no_retry_starts_after_the_total_deadline() {
    // The server asks for a 2 s pause; 1 s is left: the 503 is returned at once.
    let server = server([
        json_error(503, "overloaded").header("retry-after", "2"),
        Reply::text("Fine."),
    ])
    .await;
    let mut config = config(&server);
    config.timeouts.total = Some(Duration::from_secs(1));
    let client = OpenAiClient::new(config).unwrap();
    let started = Instant::now();
    let (_, result) = bounded(collect(&client, CancellationToken::new())).await;
    assert!(
        matches!(result, Err(CompletionError::Http { status: 503, .. })),
        "{result:?}"
    );
    assert!(started.elapsed() < Duration::from_millis(900));
    assert_eq!(hits(&server), 1);
}

#[tokio::test]
async fn tls_errors_are_not_retried() {
    // A plain TCP server answering a TLS ClientHello with plain HTTP: the handshake
    // fails. Count the connections the client opens.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&accepted);
    let acceptor = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            let _ = stream.writable().await;
            let _ = stream.try_write(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n");
        }
    });
    let mut config = ClientConfig::new(format!("https://{addr}/v1")).with_api_key(KEY);
    config.max_retries = 2;
    config.backoff.initial = Duration::from_millis(10);
    let client = OpenAiClient::new(config).unwrap();
    let (_, result) = bounded(collect(&client, CancellationToken::new())).await;
    let error = result.unwrap_err();
    assert_eq!(error.code(), "provider_unreachable", "{error:?}");
    assert_no_key(&error);
    assert_eq!(accepted.load(Ordering::SeqCst), 1, "{error}");
    acceptor.abort();
}

#[tokio::test]
async fn a_base_url_with_a_query_string_keeps_it_after_the_chat_path() {
    let server = server([Reply::text("Fine.")]).await;
    let mut config = config(&server);
    config.base_url = format!("{}/?api-version=2024-10-21", server.base_url());
    let client = OpenAiClient::new(config).unwrap();
    let (_, result) = collect(&client, CancellationToken::new()).await;
    assert_eq!(result.unwrap().text, "Fine.");
    assert_eq!(hits(&server), 1);
    assert_eq!(
        server.requests()[0].query.as_deref(),
        Some("api-version=2024-10-21")
    );
}

#[tokio::test]
async fn model_settings_reach_the_request_body() {
    let server = server([Reply::text("{}")]).await;
    let mut config = config(&server);
    config
        .options
        .encode
        .extra_body
        .insert("top_k".into(), json!(40));
    let client = OpenAiClient::new(config).unwrap();
    let mut request = request();
    request.settings = ai_core::completion::ModelSettings {
        temperature: Some(0.3),
        max_tokens: Some(64),
        seed: Some(11),
        reasoning_effort: Some("high".into()),
        response_format: Some(ai_core::completion::ResponseFormat::JsonObject),
        extra_body: [
            ("top_k".to_owned(), json!(1)),
            ("seed".to_owned(), json!(0)),
        ]
        .into_iter()
        .collect(),
        ..Default::default()
    };
    let mut stream = client.complete(request, CancellationToken::new());
    while let Some(item) = stream.next().await {
        item.unwrap();
    }
    let body = &server.requests()[0].body;
    assert_eq!(body["temperature"], json!(0.3));
    assert_eq!(body["max_tokens"], json!(64));
    assert_eq!(body["seed"], json!(11), "the encoder's field wins");
    assert_eq!(body["reasoning_effort"], json!("high"));
    assert_eq!(body["response_format"], json!({"type": "json_object"}));
    assert_eq!(
        body["top_k"],
        json!(1),
        "the request's extras win over the endpoint's"
    );
}

/// A strict JSON-schema answer: sent rewritten to the strict rules, and the final
/// text has the `null`s strict mode forces on optional properties taken back out,
/// so the answer matches the schema that was asked for. A schema that cannot be
/// strict goes as given, without `strict`.
#[tokio::test]
async fn a_strict_answer_schema_is_sent_strict_and_its_nulls_read_back_as_absent() {
    let schema = json!({"type": "object", "properties": {
        "id": {"type": "integer"}, "note": {"type": "string"}}, "required": ["id"]});
    let open = json!({"type": "object", "properties": {"id": {"type": "integer"}},
        "additionalProperties": true});
    let server = server([
        Reply::text(r#"{"id":7,"note":null}"#),
        Reply::text(r#"{"id":7}"#),
    ])
    .await;
    let client = OpenAiClient::new(config(&server)).unwrap();
    let mut finals = Vec::new();
    for schema in [&schema, &open] {
        let mut request = request();
        request.settings.response_format = Some(ai_core::completion::ResponseFormat::JsonSchema {
            name: "Order".into(),
            schema: schema.clone(),
            strict: true,
        });
        let mut stream = client.complete(request, CancellationToken::new());
        while let Some(item) = stream.next().await {
            if let CompletionItem::Final(turn) = item.unwrap() {
                finals.push(turn.text);
            }
        }
    }
    assert_eq!(finals, [r#"{"id":7}"#, r#"{"id":7}"#]);
    let requests = server.requests();
    let sent = &requests[0].body["response_format"]["json_schema"];
    assert_eq!(sent["strict"], json!(true));
    assert_eq!(sent["schema"]["required"], json!(["id", "note"]));
    assert_eq!(sent["schema"]["additionalProperties"], json!(false));
    assert_eq!(
        sent["schema"]["properties"]["note"]["type"],
        json!(["string", "null"])
    );
    let sent = &requests[1].body["response_format"]["json_schema"];
    assert_eq!(
        sent["strict"],
        json!(false),
        "an open object cannot be strict"
    );
    assert_eq!(sent["schema"], open);
}

/// Reads one HTTP/1.1 request (head and `content-length` body) from `stream`.
async fn read_request(stream: &tokio::net::TcpStream) {
    let mut buf = Vec::new();
    let mut read = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().unwrap());
            if buf.len() >= end + 4 + length {
                return;
            }
        }
        stream.readable().await.unwrap();
        match stream.try_read(&mut read) {
            Ok(0) => panic!("the client closed the connection mid-request"),
            Ok(n) => buf.extend_from_slice(&read[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("read: {e}"),
        }
    }
}

/// Linux drops the SYN of a connection whose listener's accept queue is full, so the
/// connect hangs: a connect timeout on loopback.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_connect_timeout_is_retried() {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(0).unwrap();
    let addr = listener.local_addr().unwrap();
    // Takes the one place in the accept queue.
    let filler = tokio::net::TcpStream::connect(addr).await.unwrap();
    let server = tokio::spawn(async move {
        // After the first attempt timed out (200 ms), free the queue: the attempt
        // under way still times out (its SYN is retransmitted only after 1 s), the
        // next one connects.
        tokio::time::sleep(Duration::from_millis(300)).await;
        drop(filler);
        drop(listener.accept().await.unwrap());
        let (stream, _) = listener.accept().await.unwrap();
        read_request(&stream).await;
        let body = "data: {\"choices\":[{\"delta\":{\"content\":\"Fine.\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
        let response = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        write_all(&stream, response.as_bytes()).await.unwrap();
        // Keep the connection until the client has read the answer.
        let _ = stream.readable().await;
    });
    let mut config = ClientConfig::new(format!("http://{addr}/v1")).with_api_key(KEY);
    config.timeouts.connect = Duration::from_millis(200);
    config.max_retries = 3;
    config.backoff.initial = Duration::from_millis(10);
    config.backoff.max = Duration::from_millis(10);
    let client = OpenAiClient::new(config).unwrap();
    let started = Instant::now();
    let (_, result) = bounded(collect(&client, CancellationToken::new())).await;
    assert_eq!(result.unwrap().text, "Fine.");
    assert!(
        started.elapsed() >= Duration::from_millis(400),
        "{:?}",
        started.elapsed()
    );
    server.abort();
}

/// Issue items 3, 5 and 6 over real HTTP: the same streams as the decoder fixtures,
/// served in 7-byte chunks through the client.
#[tokio::test]
async fn split_names_azure_empty_models_and_refusals_survive_the_wire() {
    let server = server([
        Reply::sse_bytes(fixture("name_split_fragments"), 7),
        Reply::sse_bytes(fixture("azure_empty_model_usage"), 7),
        Reply::sse_bytes(fixture("refusal_stream"), 7),
    ])
    .await;
    let client = OpenAiClient::new(config(&server)).unwrap();

    let (_, split) = collect(&client, CancellationToken::new()).await;
    let names: Vec<String> = split
        .unwrap()
        .tool_calls
        .into_iter()
        .map(|call| call.name)
        .collect();
    assert_eq!(names, ["get_weather", "core__get_current_time"]);

    let (_, azure) = collect(&client, CancellationToken::new()).await;
    let usage = azure.unwrap().usage.unwrap();
    assert_eq!(
        usage.model, "gpt-4o-2024-11-20",
        "the empty first model lost"
    );

    let (deltas, refusal) = collect(&client, CancellationToken::new()).await;
    let refusal = refusal.unwrap();
    assert_eq!(
        refusal.refusal.as_deref(),
        Some("I'm sorry, I can't help with that.")
    );
    assert!(refusal.text.is_empty());
    assert!(
        deltas
            .iter()
            .any(|d| matches!(d, CompletionDelta::Refusal(_))),
        "{deltas:?}"
    );
    assert_eq!(hits(&server), 3);
}

/// The client brings its own TLS configuration: an https request is made (here
/// against a listener that answers a TLS hello with plain text, so the handshake
/// fails with a typed error) without a process-wide rustls provider, which a
/// library must leave to its user (before, building a client installed one).
#[tokio::test]
async fn https_needs_no_process_wide_tls_provider() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let mut hello = [0u8; 512];
            let _ = socket.read(&mut hello).await;
            let _ = socket.write_all(b"HTTP/1.1 400 Bad Request\r\n\r\n").await;
        }
    });
    let mut config = ClientConfig::new(format!("https://127.0.0.1:{port}/v1")).with_api_key(KEY);
    config.max_retries = 0;
    let client = OpenAiClient::new(config).unwrap();
    let (_, result) = bounded(collect(&client, CancellationToken::new())).await;
    let error = result.unwrap_err();
    assert!(!error.to_string().contains(KEY), "{error}");
    assert!(
        rustls::crypto::CryptoProvider::get_default().is_none(),
        "a process-wide provider was installed"
    );
}

/// What a call cost, as a gateway reports it: LiteLLM's proxy in the
/// `x-litellm-response-cost` header of a whole response, OpenRouter and LiteLLM
/// as `usage.cost` in a stream's last usage chunk (US dollars, kept as
/// millionths). A cost that is not a sane number is not kept.
#[tokio::test]
async fn a_cost_the_gateway_reports_reaches_the_usage() {
    let with_header = json_response().header("x-litellm-response-cost", "0.0004215");
    let in_usage = Reply::sse([concat!(
        r#"data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}"#,
        "\n\n",
        r#"data: {"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4,"cost":0.0000125}}"#,
        "\n\ndata: [DONE]\n\n"
    )]);
    let absurd = json_response().header("x-litellm-response-cost", "NaN");
    let (_server, client) = served([with_header, in_usage, absurd]).await;
    let mut costs = Vec::new();
    for _ in 0..3 {
        let (_, result) = collect(&client, CancellationToken::new()).await;
        costs.push(result.unwrap().usage.and_then(|u| u.cost_micros));
    }
    assert_eq!(costs, [Some(422), Some(13), None]);
}
