//! The client against a loopback server: the model's path with `alt=sse`, the
//! key in `x-goog-api-key`, a streamed turn, a whole-body turn and a typed
//! error body.

use std::sync::{Arc, Mutex};

use ai_core::completion::{
    CompletionError, CompletionItem, CompletionRequest, FinishReason, ModelSettings, ToolChoice,
};
use ai_core::{CancellationToken, CompletionPort, Message, RunContext};
use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::IntoResponse;
use futures::StreamExt;
use wire_gemini::{GeminiClient, GeminiConfig, GeminiOptions};

/// A request as seen: its URI, its `x-goog-api-key`, its body.
type Request = (String, Option<String>, String);

#[derive(Default, Clone)]
struct Seen(Arc<Mutex<Vec<Request>>>);

async fn serve(
    status: StatusCode,
    content_type: &'static str,
    body: &'static str,
) -> (String, Seen) {
    let seen = Seen::default();
    let record = seen.clone();
    let app = Router::new().fallback(move |uri: Uri, headers: HeaderMap, body_in: Bytes| {
        let record = record.clone();
        async move {
            let key = headers
                .get("x-goog-api-key")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            record.0.lock().unwrap().push((
                uri.to_string(),
                key,
                String::from_utf8_lossy(&body_in).into_owned(),
            ));
            (status, [("content-type", content_type)], body).into_response()
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{address}"), seen)
}

fn request() -> CompletionRequest {
    CompletionRequest {
        model: "gemini-2.5-flash".into(),
        messages: vec![Message::user("Hi")],
        tools: Vec::new().into(),
        tool_choice: ToolChoice::Auto,
        context: RunContext::new("run", "trace"),
        settings: ModelSettings::default(),
    }
}

async fn run(config: GeminiConfig) -> Result<Vec<CompletionItem>, CompletionError> {
    let client = GeminiClient::new(config).unwrap();
    let mut stream = client.complete(request(), CancellationToken::new());
    let mut items = Vec::new();
    while let Some(item) = stream.next().await {
        items.push(item?);
    }
    Ok(items)
}

const STREAM: &str = include_str!("../fixtures/stream/captured_text.sse");

#[tokio::test]
async fn streams_from_the_models_path_with_the_key_in_a_header() {
    let (base, seen) = serve(StatusCode::OK, "text/event-stream", STREAM).await;
    let items = run(GeminiConfig::new(base).with_api_key("AIza-test"))
        .await
        .unwrap();
    let Some(CompletionItem::Final(turn)) = items.last() else {
        panic!("no final: {items:?}");
    };
    assert_eq!(turn.finish_reason, FinishReason::Stop);
    assert!(turn.text.starts_with("Hello"));
    let seen = seen.0.lock().unwrap();
    assert_eq!(
        seen[0].0,
        "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    );
    assert_eq!(seen[0].1.as_deref(), Some("AIza-test"));
    assert!(seen[0].2.contains("\"contents\""));
}

#[tokio::test]
async fn a_whole_body_is_decoded_when_not_streaming() {
    let body = r#"{"candidates":[{"content":{"parts":[{"text":"Whole."}],"role":"model"},"finishReason":"STOP","index":0}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":1,"totalTokenCount":4},"modelVersion":"gemini-2.5-flash"}"#;
    let (base, seen) = serve(StatusCode::OK, "application/json", body).await;
    let mut config = GeminiConfig::new(base);
    config.options = GeminiOptions {
        stream: false,
        ..GeminiOptions::default()
    };
    let items = run(config).await.unwrap();
    let Some(CompletionItem::Final(turn)) = items.last() else {
        panic!("no final");
    };
    assert_eq!(turn.text, "Whole.");
    assert_eq!(turn.usage.as_ref().unwrap().total_tokens, 4);
    assert_eq!(
        seen.0.lock().unwrap()[0].0,
        "/v1beta/models/gemini-2.5-flash:generateContent"
    );
}

#[tokio::test]
async fn an_error_body_keeps_its_status() {
    let body =
        r#"{"error":{"code":400,"message":"API key not valid.","status":"INVALID_ARGUMENT"}}"#;
    let (base, _) = serve(StatusCode::BAD_REQUEST, "application/json", body).await;
    let error = run(GeminiConfig::new(base)).await.unwrap_err();
    assert!(
        matches!(&error, CompletionError::Http { status: 400, message } if message == "API key not valid. (INVALID_ARGUMENT)"),
        "{error:?}"
    );
}
