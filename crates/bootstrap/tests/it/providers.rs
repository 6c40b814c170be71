//! Provider dialects end to end through the `agent` binary: what a provider sends
//! beside the answer (DeepSeek's reasoning, Gemini's thought signatures) must come
//! back on the next request, or the provider refuses the second turn.
//!
//! Each server checks the second request the way the real provider does and answers
//! with that provider's HTTP 400 error when the check fails.

use serde_json::{Value, json};

use agent_testing::server::{OpenAiServer, Recorded, Reply, data};

use crate::support::{Home, json_lines};

const API_KEY: &str = "sk-e2e-providers-0123456789";

/// What every test here asks.
const QUESTION: &str = "What time is it in Tokyo?";

/// A provider playing `turns`, asked [`QUESTION`] by `agent chat` in a fresh
/// home (with `--json` when `json`): the provider, the exit code, stdout and
/// stderr.
async fn ask(turns: [Reply; 2], json: bool) -> (OpenAiServer, i32, String, String) {
    let server = OpenAiServer::start(turns).await.unwrap();
    let args: &[&str] = if json {
        &["chat", "--json", QUESTION]
    } else {
        &["chat", QUESTION]
    };
    let (code, stdout, stderr) = Home::new(API_KEY).run(Some(&server.base_url()), args).await;
    (server, code, stdout, stderr)
}

/// The first event of type `kind` in `events`.
fn first_event<'a>(events: &'a [Value], kind: &str) -> &'a Value {
    let found = events.iter().find(|e| e["type"] == kind);
    found.unwrap_or_else(|| panic!("no {kind} event in {events:?}"))
}

/// The deltas of the events of type `kind` in `events`, joined.
fn deltas(events: &[Value], kind: &str) -> String {
    let of_kind = events.iter().filter(|e| e["type"] == kind);
    of_kind.map(|e| e["delta"].as_str().unwrap()).collect()
}

/// The assistant message with tool calls in a recorded request.
fn assistant_tool_call_message(request: &Recorded) -> Option<&Value> {
    request.body["messages"]
        .as_array()?
        .iter()
        .find(|m| m["role"] == "assistant" && m["tool_calls"].is_array())
}

// --- DeepSeek: thinking mode with tool calls -------------------------------------

const DEEPSEEK_REASONING: [&str; 3] = [
    "The user wants the time in Tokyo. ",
    "I will call the clock tool with \"Asia/Tokyo\"",
    " and then answer.",
];

const DEEPSEEK_ANSWER: &str = "It is evening in Tokyo.";

fn deepseek_chunk(delta: &Value, finish: Option<&str>) -> String {
    data(
        &json!({"id": "ds-1", "object": "chat.completion.chunk", "created": 1_762_000_000,
                "model": "deepseek-chat", "system_fingerprint": "fp_ds",
                "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]})
        .to_string(),
    )
}

/// Turn 1: reasoning deltas, then a call of `core__get_current_time`.
fn deepseek_tool_turn() -> Vec<String> {
    let mut chunks = vec![deepseek_chunk(
        &json!({"role": "assistant", "content": null, "reasoning_content": ""}),
        None,
    )];
    for piece in DEEPSEEK_REASONING {
        chunks.push(deepseek_chunk(
            &json!({"content": null, "reasoning_content": piece}),
            None,
        ));
    }
    chunks.push(deepseek_chunk(
        &json!({"content": null, "reasoning_content": null, "tool_calls": [{"index": 0,
                "id": "call_00_ds", "type": "function",
                "function": {"name": "core__get_current_time", "arguments": ""}}]}),
        None,
    ));
    for fragment in ["{\"timezone\":", " \"Asia/Tokyo\"}"] {
        chunks.push(deepseek_chunk(
            &json!({"tool_calls": [{"index": 0, "function": {"arguments": fragment}}]}),
            None,
        ));
    }
    chunks.push(deepseek_chunk(
        &json!({"content": null, "reasoning_content": null}),
        Some("tool_calls"),
    ));
    chunks.push(data(
        &json!({"id": "ds-1", "object": "chat.completion.chunk", "model": "deepseek-chat", "choices": [],
                "usage": {"prompt_tokens": 300, "completion_tokens": 60, "total_tokens": 360,
                          "prompt_tokens_details": {"cached_tokens": 256},
                          "completion_tokens_details": {"reasoning_tokens": 30},
                          "prompt_cache_hit_tokens": 256, "prompt_cache_miss_tokens": 44}})
        .to_string(),
    ));
    chunks.push("data: [DONE]\n\n".into());
    chunks
}

/// Turn 2: the answer, but only when the assistant tool-call message carries the
/// turn's `reasoning_content` (DeepSeek answers 400 otherwise).
fn deepseek_answer_turn() -> Reply {
    Reply::from_request(|request| {
        let expected = DEEPSEEK_REASONING.concat();
        let sent = assistant_tool_call_message(request)
            .and_then(|m| m["reasoning_content"].as_str())
            .map(str::to_owned);
        if sent.as_deref() != Some(expected.as_str()) {
            return Reply::json(
                400,
                &json!({"error": {
                    "message": "Missing `reasoning_content` field in the assistant message at message index 1. For more information, please refer to https://api-docs.deepseek.com/guides/thinking_mode#tool-calls",
                    "type": "invalid_request_error", "param": null, "code": "invalid_request_error"}}),
            );
        }
        Reply::sse([
            deepseek_chunk(
                &json!({"role": "assistant", "content": "", "reasoning_content": "Answer now."}),
                None,
            ),
            deepseek_chunk(
                &json!({"content": DEEPSEEK_ANSWER, "reasoning_content": null}),
                None,
            ),
            deepseek_chunk(&json!({"content": ""}), Some("stop")),
            "data: [DONE]\n\n".to_owned(),
        ])
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deepseek_reasoning_goes_back_with_the_tool_call() {
    let deepseek = || [Reply::sse(deepseek_tool_turn()), deepseek_answer_turn()];
    let (server, code, stdout, stderr) = ask(deepseek(), true).await;
    assert_eq!(code, 0, "stderr: {stderr}\nstdout: {stdout}");
    let events = json_lines(&stdout);

    // Reasoning streams as its own events, never as answer text.
    assert_eq!(
        deltas(&events, "reasoning_delta"),
        format!("{}Answer now.", DEEPSEEK_REASONING.concat())
    );
    assert_eq!(deltas(&events, "text_delta"), DEEPSEEK_ANSWER);

    // The tool ran, and the run ended with the answer alone.
    let result = first_event(&events, "tool_call_result");
    assert_eq!(result["tool_call_id"], "call_00_ds");
    assert_eq!(result["ok"], true, "{result}");
    assert_eq!(result["result"]["timezone"], "Asia/Tokyo");
    let final_event = first_event(&events, "assistant_final");
    assert_eq!(final_event["content"], DEEPSEEK_ANSWER);
    for piece in DEEPSEEK_REASONING.iter().chain(["Answer now."].iter()) {
        assert!(
            !final_event["content"]
                .as_str()
                .unwrap()
                .contains(piece.trim()),
            "{final_event}"
        );
    }
    // Usage details of turn 1 reach the usage event.
    let usage = first_event(&events, "usage_report");
    // Named by the configured model; the name the provider reported is kept.
    assert_eq!(usage["model"], "e2e-model", "{usage}");
    assert_eq!(usage["response_model"], "deepseek-chat", "{usage}");
    assert_eq!(usage["cached_tokens"], 256, "{usage}");
    assert_eq!(usage["reasoning_tokens"], 30, "{usage}");
    assert_eq!(events.last().unwrap()["type"], "done");

    // The second request carried the reasoning on the assistant tool-call message.
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let assistant = assistant_tool_call_message(&requests[1]).unwrap();
    assert_eq!(assistant["reasoning_content"], DEEPSEEK_REASONING.concat());
    assert_eq!(assistant["tool_calls"][0]["id"], "call_00_ds");
    assert!(assistant["tool_calls"][0].get("extra_content").is_none());

    // Human output: the answer on stdout, reasoning nowhere.
    let (_, code, stdout, stderr) = ask(deepseek(), false).await;
    assert_eq!(code, 0, "stderr: {stderr}\nstdout: {stdout}");
    assert!(stdout.contains(DEEPSEEK_ANSWER), "{stdout}");
    assert!(
        !stdout.contains("clock tool") && !stderr.contains("clock tool"),
        "{stdout}\n{stderr}"
    );
}

// --- Gemini 3: thought signatures on tool calls -----------------------------------

const THOUGHT_SIGNATURE: &str = "CiQB0e2Kb7vZ1ZQ0x6S0hQ3QwM4bY2l0c2lnbmF0dXJlLWJ5dGVzLWhlcmU=";

const GEMINI_ANSWER: &str = "It is 09:00 in Tokyo.";

/// Gemini's error body when a call comes back without its signature: an array.
fn gemini_missing_signature() -> Reply {
    Reply::json(
        400,
        &json!([{"error": {
            "code": 400,
            "message": "Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call `default_api:core__get_current_time` , position 2. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details.",
            "status": "INVALID_ARGUMENT"}}]),
    )
}

fn gemini_chunk(choice: &Value, usage: Option<Value>) -> String {
    let mut chunk = json!({"choices": [choice], "created": 1_762_000_300, "id": "gm-1",
                           "model": "gemini-3-pro-preview", "object": "chat.completion.chunk"});
    if let Some(usage) = usage {
        chunk["usage"] = usage;
    }
    data(&chunk.to_string())
}

/// Turn 1, as Gemini's OpenAI endpoint streams it: the whole call in one chunk,
/// without `index`, its thought signature in `extra_content`, finish and usage in
/// the same chunk.
fn gemini_tool_turn(signature: bool) -> Vec<String> {
    let mut call = json!({"function": {"arguments": "{\"timezone\":\"Asia/Tokyo\"}",
                                       "name": "core__get_current_time"},
                          "id": "function-call-1562459293821634313", "type": "function"});
    if signature {
        call["extra_content"] = json!({"google": {"thought_signature": THOUGHT_SIGNATURE}});
    }
    vec![
        gemini_chunk(
            &json!({"delta": {"role": "assistant", "tool_calls": [call]},
                    "finish_reason": "tool_calls", "index": 0}),
            Some(
                json!({"completion_tokens": 20, "prompt_tokens": 100, "total_tokens": 180,
                        "completion_tokens_details": {"reasoning_tokens": 60}}),
            ),
        ),
        "data: [DONE]\n\n".into(),
    ]
}

/// Turn 2: the answer, but only when the call carries the same signature.
fn gemini_answer_turn() -> Reply {
    Reply::from_request(|request| {
        let signature = assistant_tool_call_message(request)
            .and_then(|m| {
                m["tool_calls"][0]["extra_content"]["google"]["thought_signature"].as_str()
            })
            .map(str::to_owned);
        if signature.as_deref() != Some(THOUGHT_SIGNATURE) {
            return gemini_missing_signature();
        }
        Reply::sse([
            gemini_chunk(
                &json!({"delta": {"content": GEMINI_ANSWER, "role": "assistant"}, "index": 0}),
                None,
            ),
            gemini_chunk(
                &json!({"delta": {"role": "assistant"}, "finish_reason": "stop", "index": 0}),
                Some(json!({"completion_tokens": 8, "prompt_tokens": 150, "total_tokens": 158})),
            ),
            "data: [DONE]\n\n".to_owned(),
        ])
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_thought_signature_goes_back_on_the_call() {
    let gemini = || [Reply::sse(gemini_tool_turn(true)), gemini_answer_turn()];
    let (server, code, stdout, stderr) = ask(gemini(), true).await;
    assert_eq!(code, 0, "stderr: {stderr}\nstdout: {stdout}");
    let events = json_lines(&stdout);
    let result = first_event(&events, "tool_call_result");
    assert_eq!(result["tool_call_id"], "function-call-1562459293821634313");
    assert_eq!(result["ok"], true, "{result}");
    let final_event = first_event(&events, "assistant_final");
    assert_eq!(final_event["content"], GEMINI_ANSWER);
    // The signature is for the provider only: it never reaches events.
    assert!(!stdout.contains(THOUGHT_SIGNATURE), "{stdout}");

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let assistant = assistant_tool_call_message(&requests[1]).unwrap();
    assert_eq!(
        assistant["tool_calls"][0]["extra_content"],
        json!({"google": {"thought_signature": THOUGHT_SIGNATURE}})
    );
    assert!(assistant.get("reasoning_content").is_none());

    // Human output prints the answer.
    let (_, code, stdout, stderr) = ask(gemini(), false).await;
    assert_eq!(code, 0, "stderr: {stderr}\nstdout: {stdout}");
    assert!(stdout.contains(GEMINI_ANSWER), "{stdout}");
}

/// The same server refuses a call without a signature with its array-shaped error
/// body: the run fails with that message and code (the check above is real).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_array_error_body_reaches_the_error_event() {
    let unsigned = [Reply::sse(gemini_tool_turn(false)), gemini_answer_turn()];
    let (_, code, stdout, stderr) = ask(unsigned, true).await;
    assert_eq!(code, 1, "stderr: {stderr}\nstdout: {stdout}");
    let events = json_lines(&stdout);
    let error = first_event(&events, "error");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("Function call is missing a thought_signature"),
        "{error}"
    );
    assert!(message.contains("400"), "{error}");
    assert!(!events.iter().any(|e| e["type"] == "assistant_final"));
}
