//! The endpoint over real HTTP: contract rejections, server-bound approvals
//! (approved, denied, forged, replayed, edited), cancellation on disconnect, and
//! who may call it.

use std::sync::atomic::Ordering;
use std::time::Duration;

use agent_server::Access;
use agent_testing::{ScriptedModel, Turn};
use serde_json::{Value, json};

use crate::support::{Live, body, chunks, start, types, user, write_k};

fn write_then_answer() -> ScriptedModel {
    ScriptedModel::new([
        write_k(),
        Turn::text("Written."),
        Turn::text("Second answer."),
        Turn::text("Third answer."),
    ])
}

/// The error text of the first `tool-output-error` chunk of `chunks`.
fn output_error(chunks: &[Value]) -> &str {
    let error = chunks.iter().find(|c| c["type"] == "tool-output-error");
    let error = error.unwrap_or_else(|| panic!("no tool-output-error in {chunks:?}"));
    error["errorText"].as_str().unwrap()
}

/// A model that calls `app__wait` (which runs until its call is cancelled),
/// then would answer "never".
fn waiting_model() -> ScriptedModel {
    ScriptedModel::new([
        Turn::new().tool_call("x1", "app__wait", json!({})),
        Turn::text("never"),
    ])
}

/// `POST /api/chat` with `body`, sent by `client` from the page at `origin`
/// (none: no `Origin` header).
async fn post_chat(
    client: &reqwest::Client,
    live: &Live,
    origin: Option<&str>,
    body: &Value,
) -> reqwest::Response {
    let mut request = client.post(live.url("/api/chat")).json(body);
    if let Some(origin) = origin {
        request = request.header("origin", origin);
    }
    request.send().await.unwrap()
}

/// Asks for the write; returns the assistant message as a client would keep it
/// (tool part awaiting approval) and the approval id.
async fn request_approval(live: &Live) -> (Value, String) {
    let (status, chunks, raw) = live.chat(&body(vec![user("write k")])).await;
    assert_eq!(status, 200, "{raw}");
    assert!(raw.ends_with("data: [DONE]\n\n"), "{raw}");
    let request = chunks
        .iter()
        .find(|c| c["type"] == "tool-approval-request")
        .unwrap_or_else(|| panic!("no approval request in {raw}"));
    assert_eq!(request["toolCallId"], "w1");
    let approval_id = request["approvalId"].as_str().unwrap().to_owned();
    assert!(approval_id.starts_with("apv1."), "{approval_id}");
    assert_eq!(types(&chunks).iter().filter(|t| **t == "finish").count(), 1);
    assert_eq!(
        live.writes.load(Ordering::SeqCst),
        0,
        "nothing ran before the approval"
    );
    let input = chunks
        .iter()
        .find(|c| c["type"] == "tool-input-available")
        .unwrap()["input"]
        .clone();
    assert_eq!(input, json!({"key": "k", "value": 1}));
    let message_id = chunks[0]["messageId"].as_str().unwrap().to_owned();
    let assistant = json!({"id": message_id, "role": "assistant", "parts": [
        {"type": "step-start"},
        {"type": "tool-app__write", "toolCallId": "w1", "state": "approval-requested",
         "input": input, "approval": {"id": approval_id}}
    ]});
    (assistant, approval_id)
}

fn respond(mut assistant: Value, approved: bool, input: Option<Value>, approval_id: &str) -> Value {
    let part = &mut assistant["parts"][1];
    part["state"] = json!("approval-responded");
    part["approval"] = json!({"id": approval_id, "approved": approved});
    if let Some(input) = input {
        part["input"] = input;
    }
    assistant
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_call_runs_once_and_the_answer_continues_the_message() {
    let live = start(write_then_answer(), Access::loopback).await;
    let (assistant, approval_id) = request_approval(&live).await;
    let continuation = respond(assistant.clone(), true, None, &approval_id);
    let (status, chunks, raw) = live
        .chat(&body(vec![user("write k"), continuation.clone()]))
        .await;
    assert_eq!(status, 200, "{raw}");
    assert_eq!(live.writes.load(Ordering::SeqCst), 1);
    assert_eq!(chunks[0]["type"], "start");
    assert_eq!(
        chunks[0]["messageId"], assistant["id"],
        "the same assistant message continues"
    );
    let output = chunks
        .iter()
        .find(|c| c["type"] == "tool-output-available")
        .unwrap();
    assert_eq!(output["toolCallId"], "w1");
    assert_eq!(output["output"], json!({"written": "k"}));
    assert!(raw.contains("Written."), "{raw}");
    let finish = types(&chunks).iter().position(|t| *t == "finish").unwrap();
    let result = types(&chunks)
        .iter()
        .position(|t| *t == "tool-output-available")
        .unwrap();
    assert!(result < finish);
    // The model's second turn saw the call and its result.
    let requests = live.model.requests();
    let seen = serde_json::to_string(&requests[1].messages).unwrap();
    assert!(seen.contains("w1") && seen.contains("written"), "{seen}");

    // The same approval again (a replay) runs nothing.
    let (status, chunks, raw) = live.chat(&body(vec![user("write k"), continuation])).await;
    assert_eq!(status, 200, "{raw}");
    assert!(output_error(&chunks).contains("already used"), "{raw}");
    assert_eq!(live.writes.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_and_edited_approvals_execute_nothing() {
    let live = start(write_then_answer(), Access::loopback).await;
    let (assistant, approval_id) = request_approval(&live).await;
    // Forged: the tag changed.
    let mut forged = approval_id.clone();
    let last = forged.pop().unwrap();
    forged.push(if last == '0' { '1' } else { '0' });
    let (_, chunks, raw) = live
        .chat(&body(vec![
            user("write k"),
            respond(assistant.clone(), true, None, &forged),
        ]))
        .await;
    assert!(
        output_error(&chunks).starts_with("approval refused"),
        "{raw}"
    );
    // Edited: the arguments changed on the client after the approval was requested.
    let edited = respond(
        assistant,
        true,
        Some(json!({"key": "other", "value": 1})),
        &approval_id,
    );
    let (_, chunks, raw) = live.chat(&body(vec![user("write k"), edited])).await;
    assert!(output_error(&chunks).contains("does not match"), "{raw}");
    assert_eq!(live.writes.load(Ordering::SeqCst), 0, "nothing executed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_call_is_denied_and_the_model_is_told() {
    let live = start(write_then_answer(), Access::loopback).await;
    let (assistant, approval_id) = request_approval(&live).await;
    let (status, chunks, raw) = live
        .chat(&body(vec![
            user("write k"),
            respond(assistant, false, None, &approval_id),
        ]))
        .await;
    assert_eq!(status, 200, "{raw}");
    let denied = chunks
        .iter()
        .find(|c| c["type"] == "tool-output-denied")
        .unwrap();
    assert_eq!(denied["toolCallId"], "w1");
    assert_eq!(live.writes.load(Ordering::SeqCst), 0);
    let seen = serde_json::to_string(&live.model.requests()[1].messages).unwrap();
    assert!(seen.contains("denied"), "{seen}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejected_requests_are_400_naming_the_field_and_reach_no_model() {
    let live = start(write_then_answer(), Access::loopback).await;
    let client = crate::support::client();
    for (raw, path) in [
        ("{", ""),
        (r#"{"messages":[]}"#, "id"),
        (
            r#"{"id":"c","messages":[{"id":"m","role":"system","parts":[]}]}"#,
            "messages[0].role",
        ),
        (
            r#"{"id":"c","messages":[{"id":"u","role":"user","parts":[{"type":"text","text":"x"}]},{"id":"a","role":"assistant","parts":[{"type":"tool-app__echo","toolCallId":"c1","state":"output-available","output":1}]},{"id":"u2","role":"user","parts":[{"type":"text","text":"y"}]}]}"#,
            "messages[1].parts[0].input",
        ),
    ] {
        let response = client
            .post(live.url("/api/chat"))
            .header("content-type", "application/json")
            .body(raw)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 400, "{raw}");
        let error: Value = response.json().await.unwrap();
        assert_eq!(error["error"], "invalid_request");
        assert_eq!(error["path"], path, "{raw}: {error}");
    }
    let response = client
        .post(live.url("/api/chat?protocol=smoke"))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 400);
    let big = "x".repeat(agent_server::DEFAULT_MAX_BODY_BYTES + 1);
    let response = client
        .post(live.url("/api/chat"))
        .body(big)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 413);
    assert!(
        live.model.requests().is_empty(),
        "nothing reached the model"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_disconnects_mid_tool_cancels_the_run() {
    disconnect_mid_tool(Duration::from_millis(50)).await;
}

/// With no write to fail (no heartbeat within the test), the close is still
/// seen at once: the server watches the socket mid-response.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disconnect_is_seen_while_nothing_is_written() {
    disconnect_mid_tool(Duration::from_secs(3600)).await;
}

/// A client closes its connection while the run's tool waits: the run is
/// cancelled and its stream slot freed, whatever the heartbeat.
async fn disconnect_mid_tool(heartbeat: Duration) {
    let live = start(waiting_model(), |port| Access {
        heartbeat,
        // One stream at a time: the next request gets through only once the
        // cancelled response's task has ended and given its slot back.
        max_streams: 1,
        // Cancelled as soon as the client goes (no wait for a reattach).
        detach_grace: Duration::ZERO,
        ..Access::loopback(port)
    })
    .await;
    // A raw connection, closed the way a browser tab that goes away closes it.
    let (socket, _) = raw_chat(&live, &body(vec![user("wait")]), "tool-input-available").await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !live.wait_started.load(Ordering::SeqCst) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the tool never started"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Still running while the client is there.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !live.wait_cancelled.load(Ordering::SeqCst),
        "stopped while the client was there"
    );
    drop(socket);
    while !live.wait_cancelled.load(Ordering::SeqCst) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the tool never saw the cancellation"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        live.model.requests().len(),
        1,
        "no model turn after the disconnect"
    );
    let mut status = 0;
    while tokio::time::Instant::now() < deadline {
        let (code, _, _) = live.chat(&body(vec![user("again")])).await;
        status = code;
        if status != 503 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        status, 200,
        "the cancelled response's task ended and freed its slot"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loopback_checks_host_and_origin_and_tokens_are_checked_elsewhere() {
    let live = start(ScriptedModel::new([Turn::text("hi")]), Access::loopback).await;
    let client = crate::support::client();
    let tools = |host: Option<&str>, origin: Option<&str>| {
        let mut request = client.get(live.url("/api/tools"));
        if let Some(host) = host {
            request = request.header("host", host);
        }
        if let Some(origin) = origin {
            request = request.header("origin", origin);
        }
        request.send()
    };
    let ok = tools(None, None).await.unwrap();
    assert_eq!(ok.status().as_u16(), 200);
    let listing: Value = ok.json().await.unwrap();
    let write = listing["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == "app__write")
        .unwrap()
        .clone();
    assert_eq!(write["decision"], "approval");
    assert_eq!(write["effect"], "state_change");
    let port = live.addr.port();
    assert_eq!(
        tools(Some("evil.example"), None)
            .await
            .unwrap()
            .status()
            .as_u16(),
        403
    );
    assert_eq!(
        tools(None, Some("http://evil.example"))
            .await
            .unwrap()
            .status()
            .as_u16(),
        403
    );
    let same = format!("http://localhost:{port}");
    assert_eq!(
        tools(Some(&format!("localhost:{port}")), Some(&same))
            .await
            .unwrap()
            .status()
            .as_u16(),
        200
    );

    let token_hash: [u8; 32] = {
        use sha2::Digest;
        sha2::Sha256::digest(b"s3cret").into()
    };
    let guarded = start(ScriptedModel::new([Turn::text("hi")]), move |_| {
        Access::tokens(vec![token_hash])
    })
    .await;
    let url = guarded.url("/api/tools");
    let anonymous = crate::support::anonymous_client();
    let status = |auth: Option<&'static str>| {
        let mut request = anonymous.get(&url);
        if let Some(auth) = auth {
            request = request.header("authorization", auth);
        }
        async move { request.send().await.unwrap().status().as_u16() }
    };
    assert_eq!(status(None).await, 401);
    assert_eq!(status(Some("Bearer wrong")).await, 401);
    assert_eq!(status(Some("Bearer s3cret")).await, 200);
    let _ = chunks("");
}

/// Loopback is not authentication: without the token every API request is a 401
/// (today's code served them to anyone on the host); the page itself is served on
/// the host checks alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loopback_api_requests_need_the_token_and_the_page_does_not() {
    let live = start(write_then_answer(), Access::loopback).await;
    let anonymous = crate::support::anonymous_client();
    let tools = anonymous.get(live.url("/api/tools")).send().await.unwrap();
    assert_eq!(tools.status().as_u16(), 401);
    assert_eq!(tools.headers()["www-authenticate"], "Bearer");
    let refusal: Value = tools.json().await.unwrap();
    assert_eq!(refusal["error"], "unauthorized");
    let chat = post_chat(&anonymous, &live, None, &body(vec![user("write it")])).await;
    assert_eq!(chat.status().as_u16(), 401);
    assert!(
        live.model.requests().is_empty(),
        "nothing reached the model"
    );
    let page = anonymous.get(live.url("/")).send().await.unwrap();
    assert_eq!(page.status().as_u16(), 200);
    // A token in the query string is not a credential (it would end up in logs
    // and Referer headers); the page reads it from the fragment instead.
    let query = anonymous
        .get(live.url(&format!("/api/tools?token={}", crate::support::TOKEN)))
        .send()
        .await
        .unwrap();
    assert_eq!(query.status().as_u16(), 401);
}

/// RFC 9110 makes the scheme case-insensitive (today's code refused `bearer`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bearer_scheme_is_matched_case_insensitively() {
    let live = start(ScriptedModel::new([]), Access::loopback).await;
    let anonymous = crate::support::anonymous_client();
    for scheme in ["Bearer", "bearer", "BEARER"] {
        let response = anonymous
            .get(live.url("/api/tools"))
            .header(
                "authorization",
                format!("{scheme} {}", crate::support::TOKEN),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(response.status().as_u16(), 200, "{scheme}");
    }
}

/// `without_auth` opens a loopback server to every local user, and only a
/// loopback one: on an access without host checks it changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_auth_is_honoured_only_with_host_checks() {
    let open = start(ScriptedModel::new([]), |port| {
        Access::loopback(port).without_auth()
    })
    .await;
    let anonymous = crate::support::anonymous_client();
    let status = |url: String| {
        let request = anonymous.get(url);
        async move { request.send().await.unwrap().status().as_u16() }
    };
    assert_eq!(status(open.url("/api/tools")).await, 200);
    let anywhere = start(ScriptedModel::new([]), |_| {
        Access::tokens(Vec::new()).without_auth()
    })
    .await;
    assert_eq!(status(anywhere.url("/api/tools")).await, 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cors_answers_allowed_origins_and_refuses_the_rest() {
    let allowed = "http://localhost:5173";
    let live = start(ScriptedModel::new([Turn::text("Hi.")]), |port| {
        let mut access = Access::loopback(port);
        access.allowed_origins = vec![allowed.to_owned()];
        access
    })
    .await;
    let client = crate::support::anonymous_client();
    let preflight = |origin: &str| {
        client
            .request(reqwest::Method::OPTIONS, live.url("/api/chat"))
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header(
                "access-control-request-headers",
                "authorization, content-type",
            )
            .send()
    };
    // An allowed origin's preflight is answered, without a token (browsers send none).
    let ok = preflight(allowed).await.unwrap();
    assert_eq!(ok.status().as_u16(), 204);
    assert_eq!(ok.headers()["access-control-allow-origin"], allowed);
    let headers = ok.headers()["access-control-allow-headers"]
        .to_str()
        .unwrap();
    assert!(headers.contains("authorization") && headers.contains("content-type"));
    assert!(
        ok.headers()["access-control-allow-methods"]
            .to_str()
            .unwrap()
            .contains("POST")
    );
    // Any other origin: refused, and no CORS header to read anything by.
    for refused in ["http://evil.example", "http://localhost:5174", "null"] {
        let response = preflight(refused).await.unwrap();
        assert_eq!(response.status().as_u16(), 403, "{refused}");
        assert!(
            response
                .headers()
                .get("access-control-allow-origin")
                .is_none()
        );
    }
    // The request itself from the allowed origin still needs the token; the
    // refusal is readable by the page.
    let request = json!({"id": "c", "messages": [user("hi")]});
    let anonymous = post_chat(&client, &live, Some(allowed), &request).await;
    assert_eq!(anonymous.status().as_u16(), 401);
    assert_eq!(anonymous.headers()["access-control-allow-origin"], allowed);
    let answered = post_chat(&crate::support::client(), &live, Some(allowed), &request).await;
    assert_eq!(answered.status().as_u16(), 200);
    assert_eq!(answered.headers()["access-control-allow-origin"], allowed);
    assert!(
        answered.headers()["access-control-expose-headers"]
            .to_str()
            .unwrap()
            .contains("x-vercel-ai-ui-message-stream")
    );
    assert!(answered.text().await.unwrap().contains("Hi."));
    // A foreign origin's request is refused as before.
    let evil = Some("http://evil.example");
    let foreign = post_chat(&crate::support::client(), &live, evil, &request).await;
    assert_eq!(foreign.status().as_u16(), 403);
}

/// Sends `POST /api/chat` with `body` on a raw connection and reads until the
/// stream holds `until`; the open socket and what it read.
async fn raw_chat(live: &Live, body: &Value, until: &str) -> (tokio::net::TcpStream, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut socket = tokio::net::TcpStream::connect(live.addr).await.unwrap();
    let payload = body.to_string();
    let request = format!(
        "POST /api/chat HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nauthorization: Bearer {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{payload}",
        live.addr.port(),
        crate::support::TOKEN,
        payload.len()
    );
    socket.write_all(request.as_bytes()).await.unwrap();
    let mut seen = String::new();
    let mut buffer = [0u8; 4096];
    while !seen.contains(until) {
        let n = tokio::time::timeout(Duration::from_secs(10), socket.read(&mut buffer))
            .await
            .unwrap()
            .unwrap();
        assert!(n > 0, "the server closed the stream early: {seen}");
        seen.push_str(&String::from_utf8_lossy(&buffer[..n]));
    }
    (socket, seen)
}

/// Waits up to `within` for `flag`.
async fn eventually(flag: &std::sync::atomic::AtomicBool, within: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    while !flag.load(Ordering::SeqCst) {
        if tokio::time::Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    true
}

/// A reload: the client goes away mid-answer, the run goes on, and a client
/// that reattaches within the grace gets the whole answer from its start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_outlives_its_client_and_a_reattach_gets_the_whole_answer() {
    let words: Vec<String> = (1..=30).map(|i| format!("w{i}")).collect();
    let live = start(
        ScriptedModel::new([Turn::text(words.join(" ")).delay_between(Duration::from_millis(30))]),
        |port| Access {
            detach_grace: Duration::from_secs(5),
            ..Access::loopback(port)
        },
    )
    .await;
    let (socket, _) = raw_chat(&live, &body(vec![user("count")]), "w3 ").await;
    drop(socket);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let text = crate::support::client()
        .get(live.url("/api/chat/chat-1/stream"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let chunks = chunks(&text);
    assert_eq!(types(&chunks).first(), Some(&"start"), "{text}");
    assert_eq!(types(&chunks).last(), Some(&"finish"), "{text}");
    let said: String = chunks
        .iter()
        .filter(|c| c["type"] == "text-delta")
        .map(|c| c["delta"].as_str().unwrap())
        .collect();
    assert_eq!(said, words.join(" "));
    assert_eq!(live.model.requests().len(), 1);
}

/// With nobody reattached when the grace ends, the run is cancelled; not
/// before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_nobody_comes_back_for_is_cancelled_after_the_grace() {
    let live = start(waiting_model(), |port| Access {
        detach_grace: Duration::from_millis(600),
        ..Access::loopback(port)
    })
    .await;
    let (socket, _) = raw_chat(&live, &body(vec![user("wait")]), "tool-input-available").await;
    assert!(eventually(&live.wait_started, Duration::from_secs(10)).await);
    drop(socket);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !live.wait_cancelled.load(Ordering::SeqCst),
        "cancelled within the grace"
    );
    assert!(
        eventually(&live.wait_cancelled, Duration::from_secs(5)).await,
        "never cancelled after the grace"
    );
    assert_eq!(live.model.requests().len(), 1, "no model turn after it");
}

/// Finding of the local-attacker review: a client that never read a large
/// answer held its stream slot for as long as it kept the connection open
/// (over 70 s for a 30 MB answer). Now a client that takes nothing for the
/// write timeout is let go: its slot is free for the next request at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_reads_nothing_loses_its_stream_slot() {
    let word = "x".repeat(20_000);
    let answer = vec![word; 600].join(" ");
    let live = start(
        ScriptedModel::new([
            Turn::text(answer).delay_between(Duration::from_millis(20)),
            Turn::text("second"),
        ]),
        |port| Access {
            max_streams: 1,
            client_stream_share: 100,
            write_timeout: Duration::from_millis(500),
            detach_grace: Duration::ZERO,
            ..Access::loopback(port)
        },
    )
    .await;
    // A client that sends its request and never reads.
    let (_stalled, _) = raw_chat(&live, &body(vec![user("a lot")]), "text-start").await;
    let mut second = body(vec![user("hello")]);
    second["id"] = json!("chat-2");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let served = loop {
        let response = post_chat(&crate::support::client(), &live, None, &second).await;
        if response.status().as_u16() == 200 {
            break true;
        }
        assert_eq!(response.status().as_u16(), 503);
        if tokio::time::Instant::now() > deadline {
            break false;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert!(served, "the stalled client kept the only stream slot");
}

/// `POST /api/chat/{id}/stop` (the page's Stop) cancels the run at once,
/// whatever the grace; only the chat's own account can stop it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_cancels_the_run_at_once() {
    let live = start(waiting_model(), Access::loopback).await;
    let (_socket, _) = raw_chat(&live, &body(vec![user("wait")]), "tool-input-available").await;
    assert!(eventually(&live.wait_started, Duration::from_secs(10)).await);
    let stop = |token: &'static str| {
        crate::support::anonymous_client()
            .post(live.url("/api/chat/chat-1/stop"))
            .bearer_auth(token)
            .send()
    };
    let other = stop(crate::support::GUEST_TOKEN).await.unwrap();
    assert_eq!(
        other.status().as_u16(),
        204,
        "another account has no such run"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!live.wait_cancelled.load(Ordering::SeqCst));
    let stopped = stop(crate::support::TOKEN).await.unwrap();
    assert_eq!(stopped.status().as_u16(), 202);
    assert!(
        eventually(&live.wait_cancelled, Duration::from_secs(2)).await,
        "Stop did not cancel the run"
    );
}
