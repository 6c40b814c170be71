//! Fidelity findings on constructed streams (`fixtures/responses/fidelity`,
//! shaped after the public streams the README names): DeepSeek's plain
//! reasoning sent back, and xAI's finish reasons.

use std::fs;
use std::path::Path;

use ai_core::completion::{CompletionFinal, CompletionRequest};
use ai_core::{Message, RunContext};
use serde_json::{Value, json};
use wire_responses::{ResponsesEncodeOptions, decode_stream, encode_request};

fn decode(name: &str) -> CompletionFinal {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/responses/fidelity")
        .join(name);
    decode_stream(&fs::read(path).unwrap()).unwrap().1
}

/// The `input` items of a request whose history is `messages`.
fn input(messages: Vec<Message>) -> Vec<Value> {
    let request = CompletionRequest {
        model: "deepseek-fidelity".into(),
        messages,
        tools: Vec::new().into(),
        tool_choice: Default::default(),
        context: RunContext::new("run-1", "trace-1"),
        settings: Default::default(),
    };
    let body = encode_request(&request, &ResponsesEncodeOptions::default()).unwrap();
    body["input"].as_array().unwrap().clone()
}

#[test]
fn deepseek_plain_reasoning_goes_back_before_its_call() {
    let turn = decode("constructed_deepseek_reasoning_text_call.sse");
    assert_eq!(
        turn.reasoning.as_deref(),
        Some("The user wants the files; list the directory first.")
    );
    let assistant: Message = serde_json::from_value(json!({
        "role": "assistant",
        "reasoning": turn.reasoning,
        "tool_calls": [{"id": "call_fid02", "name": "core__list_dir", "arguments": "{\"path\":\".\"}"}],
        "blocks": turn.blocks,
    }))
    .unwrap();
    let items = input(vec![
        Message::user("Which files are there?"),
        assistant,
        Message::tool("call_fid02", "a.txt"),
    ]);
    assert_eq!(
        items[1],
        json!({"type": "reasoning", "id": "rs_fid02", "summary": [], "content": [
            {"type": "reasoning_text", "text": "The user wants the files; list the directory first."}]})
    );
    assert_eq!(items[2]["type"], json!("function_call"));
    assert_eq!(items.len(), 4);
}

#[test]
fn reasoning_of_another_provider_never_goes_out() {
    // Anthropic's signed thinking, reasoning written by hand, and the
    // message's own reasoning field: none has this API's item id.
    let assistant: Message = serde_json::from_value(json!({
        "role": "assistant", "content": "Hello.", "reasoning": "Greet back.",
        "blocks": [
            {"type": "reasoning", "text": "Greet back.", "signature": "anthropic-sig=="},
            {"type": "reasoning", "text": "plain"},
            {"type": "text", "text": "Hello."}
        ],
    }))
    .unwrap();
    let items = input(vec![Message::user("Hi"), assistant, Message::user("Bye")]);
    assert!(
        items.iter().all(|item| item["type"] != "reasoning"),
        "{items:?}"
    );
}

#[test]
fn xai_reason_max_len_is_length_with_the_raw_reason_beside_it() {
    let turn = serde_json::to_value(decode("constructed_xai_reason_max_len.sse")).unwrap();
    assert_eq!(turn["finish_reason"], json!("length"));
    assert_eq!(turn["raw_finish_reason"], json!("REASON_MAX_LEN"));
    assert_eq!(turn["text"], json!("The list goes on and"));
}
