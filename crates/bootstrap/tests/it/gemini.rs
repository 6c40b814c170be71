//! `--api gemini` end to end through the `agent` binary: a two-turn tool loop
//! against a loopback server that plays Gemini's `streamGenerateContent?alt=sse`
//! (the chunk shapes of the wire's captured fixtures) and records each request.
//! The thought signature of turn 1's function call must come back unchanged, on
//! the same part, in the second request.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::support::{Home, json_lines, succeeded};

const GEMINI_KEY: &str = "AIza-e2e-gemini-0123456789";
const SIGNATURE: &str =
    "Ck4BVKhc7v+Zq0/Tj2gQx1n8W3r6yKpLmA9dE5fH7iJ0uN4oS2bC1eD6vR8tY3wXkQzP+aB9cF0gH2jK4lM6nO8pQ==";
const ANSWER: &str = "It is 09:00 in Tokyo.";

/// One request as the server saw it: request line, `x-goog-api-key`, body.
#[derive(Debug, Clone)]
struct Seen {
    line: String,
    key: Option<String>,
    body: Value,
}

fn chunk(parts: Value, finish: Option<&str>) -> String {
    let mut candidate = json!({"content": {"parts": parts, "role": "model"}, "index": 0});
    if let Some(finish) = finish {
        candidate["finishReason"] = json!(finish);
    }
    let body = json!({
        "candidates": [candidate],
        "usageMetadata": {"promptTokenCount": 40, "candidatesTokenCount": 12,
                          "thoughtsTokenCount": 30, "totalTokenCount": 82},
        "modelVersion": "gemini-e2e", "responseId": "e2e-response"
    });
    format!("data: {body}\r\n\r\n")
}

fn turn(index: usize) -> String {
    if index == 0 {
        [
            chunk(json!([{"text": "Let me check the clock."}]), None),
            chunk(
                json!([{"functionCall": {"name": "core__get_current_time",
                                         "args": {"timezone": "Asia/Tokyo"}},
                        "thoughtSignature": SIGNATURE}]),
                None,
            ),
            chunk(json!([{"text": ""}]), Some("STOP")),
        ]
        .concat()
    } else {
        chunk(json!([{"text": ANSWER}]), Some("STOP"))
    }
}

/// Reads one HTTP/1.1 request (headers, then `content-length` bytes).
async fn read_request(socket: &mut tokio::net::TcpStream) -> Option<Seen> {
    let mut bytes = Vec::new();
    let mut buffer = [0u8; 8192];
    let head_end = loop {
        let n = socket.read(&mut buffer).await.ok()?;
        if n == 0 {
            return None;
        }
        bytes.extend_from_slice(&buffer[..n]);
        if let Some(at) = bytes.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
    };
    let head = String::from_utf8_lossy(&bytes[..head_end]).into_owned();
    let header = |name: &str| {
        head.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name)
                .then(|| value.trim().to_owned())
        })
    };
    let length: usize = header("content-length")?.parse().ok()?;
    while bytes.len() < head_end + length {
        let n = socket.read(&mut buffer).await.ok()?;
        if n == 0 {
            return None;
        }
        bytes.extend_from_slice(&buffer[..n]);
    }
    Some(Seen {
        line: head.lines().next()?.to_owned(),
        key: header("x-goog-api-key"),
        body: serde_json::from_slice(&bytes[head_end..head_end + length]).ok()?,
    })
}

/// A server answering the n-th request with `turn(n)`; its base URL and what it saw.
async fn serve() -> (String, Arc<Mutex<Vec<Seen>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let Some(request) = read_request(&mut socket).await else {
                continue;
            };
            let index = {
                let mut seen = record.lock().unwrap();
                seen.push(request);
                seen.len() - 1
            };
            let body = turn(index);
            let response = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = socket.write_all(response.as_bytes()).await;
            let _ = socket.shutdown().await;
        }
    });
    (base, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_two_turn_tool_loop_returns_the_thought_signature_unchanged() {
    let (base, seen) = serve().await;
    let home = Home::new("sk-unused");
    let output = home
        .command(
            Some(&base),
            &[
                "--api",
                "gemini",
                "chat",
                "--json",
                "What time is it in Tokyo?",
            ],
        )
        .env("GEMINI_API_KEY", GEMINI_KEY)
        .output()
        .await
        .unwrap();
    let (stdout, _) = succeeded(output);
    let events = json_lines(&stdout);
    let result = events
        .iter()
        .find(|e| e["type"] == "tool_call_result")
        .unwrap_or_else(|| panic!("no tool result: {stdout}"));
    assert_eq!(result["ok"], true, "{result}");
    assert!(stdout.contains(ANSWER), "{stdout}");
    // The signature is for the provider only: it never reaches events.
    assert!(!stdout.contains(SIGNATURE), "{stdout}");

    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2, "{seen:?}");
    for request in &seen {
        assert!(
            request
                .line
                .starts_with("POST /v1beta/models/e2e-model:streamGenerateContent?alt=sse "),
            "{}",
            request.line
        );
        assert_eq!(request.key.as_deref(), Some(GEMINI_KEY));
    }
    let contents = seen[1].body["contents"].as_array().unwrap();
    let model = contents.iter().find(|c| c["role"] == "model").unwrap();
    let call = model["parts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p.get("functionCall").is_some())
        .unwrap();
    assert_eq!(call["thoughtSignature"], SIGNATURE, "{model}");
    assert_eq!(call["functionCall"]["name"], "core__get_current_time");
    assert_eq!(
        call["functionCall"]["args"],
        json!({"timezone": "Asia/Tokyo"})
    );
    let response = contents
        .iter()
        .flat_map(|c| c["parts"].as_array().into_iter().flatten())
        .find_map(|p| p.get("functionResponse"))
        .unwrap_or_else(|| panic!("no function response: {contents:?}"));
    assert_eq!(response["name"], "core__get_current_time");
    assert!(response["response"].get("result").is_some(), "{response}");
}
