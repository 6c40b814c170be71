//! Non-streaming responses decode into the same final a stream would give.

use std::fs;
use std::path::Path;

use wire_openai::decode::{DecoderOptions, decode_response_into};

use crate::common::{IdNormalizer, delta_json, fixture_set, result_json};

fn check(case: &str, path: &Path) {
    let bytes = fs::read(path).unwrap();
    let mut deltas = Vec::new();
    let options = DecoderOptions {
        model: "request-model".into(),
        ..DecoderOptions::default()
    };
    let result = decode_response_into(&bytes, options, &mut deltas);
    let mut ids = IdNormalizer::default();
    let deltas: Vec<_> = deltas.iter().map(|d| delta_json(d, &mut ids)).collect();
    let actual = serde_json::json!({"deltas": deltas, "result": result_json(&result, &mut ids)});
    fixture_set("response", ".json").assert_snapshot(
        case,
        "deltas and result of decoding the response body",
        Some(path),
        &actual,
    );
}

#[test]
fn every_response_fixture_matches_its_snapshot() {
    fixture_set("response", ".json").check_each(check);
}

/// The next request built from a decoded turn the way the loop builds history (the
/// assistant message carries the turn's reasoning and each call's `raw`).
fn next_request_messages(fixture: &str) -> Vec<serde_json::Value> {
    use agent_testing::wire_fixtures::assistant_message;
    use ai_core::{
        Message, RunContext,
        completion::{CompletionRequest, ModelSettings},
    };
    use wire_openai::encode::{EncodeOptions, encode_request};

    let bytes = fs::read(crate::common::fixture_dir("response").join(fixture)).unwrap();
    let turn = wire_openai::decode::decode_response(&bytes, DecoderOptions::default()).unwrap();
    let assistant = assistant_message(&turn);
    let mut messages = vec![Message::user("What time is it in Tokyo?"), assistant];
    for call in &turn.tool_calls {
        messages.push(Message::tool(call.id.clone(), r#"{"now":"12:00"}"#));
    }
    let request = CompletionRequest {
        model: "m".into(),
        messages,
        tools: Vec::new().into(),
        tool_choice: ai_core::completion::ToolChoice::Auto,
        context: RunContext::new("run", "trace"),
        settings: ModelSettings::default(),
    };
    let body = encode_request(&request, &EncodeOptions::default())
        .unwrap()
        .body;
    body["messages"].as_array().unwrap().clone()
}

/// DeepSeek's thinking mode wants the turn's `reasoning_content` back on the
/// assistant tool-call message; Gemini wants each call's `extra_content` (the thought
/// signature) back on the call. Neither is sent when the turn had none.
#[test]
fn reasoning_and_call_extras_go_back_on_the_wire() {
    let messages = next_request_messages("deepseek_reasoning_tool_call.json");
    assert_eq!(
        messages[1]["reasoning_content"],
        "The user wants the time in Tokyo; call the clock tool."
    );
    assert!(messages[1]["tool_calls"][0].get("extra_content").is_none());

    let messages = next_request_messages("gemini_thought_signature.json");
    assert!(messages[1].get("reasoning_content").is_none());
    assert_eq!(
        messages[1]["tool_calls"][0]["extra_content"],
        serde_json::json!({"google": {"thought_signature": "CiQB0e2Kb7vZ1ZQ0x6S0hQ3QwM4bY2l0c2lnbmF0dXJlLWJ5dGVzLWhlcmU="}})
    );
    assert_eq!(
        messages[1]["tool_calls"][0]["id"],
        "function-call-8201334470551740651"
    );

    let messages = next_request_messages("openai_tool_calls.json");
    assert!(messages[1].get("reasoning_content").is_none());
    for call in messages[1]["tool_calls"].as_array().unwrap() {
        assert!(call.get("extra_content").is_none(), "{call}");
    }
}
