//! Fidelity findings on constructed streams (`fixtures/anthropic/fidelity`,
//! shaped after the public streams the README names): a failed call's usage
//! and error type, `pause_turn`, and the API's own blocks sent back.

use std::fs;
use std::path::{Path, PathBuf};

use ai_core::completion::{CompletionDelta, CompletionError, CompletionFinal, CompletionRequest};
use ai_core::{Message, RunContext};
use serde_json::{Value, json};
use wire_anthropic::client::WireSpec;
use wire_anthropic::{AnthropicDecoder, AnthropicEncodeOptions, AnthropicSpec};

fn fixture(name: &str) -> Vec<u8> {
    let dir: PathBuf =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/anthropic/fidelity");
    fs::read(dir.join(name)).unwrap()
}

fn decode(
    body: &[u8],
) -> (
    Vec<CompletionDelta>,
    Result<CompletionFinal, CompletionError>,
) {
    let mut decoder = AnthropicDecoder::new();
    let mut deltas = Vec::new();
    if let Err(error) = decoder.feed(body, &mut deltas) {
        return (deltas, Err(error.into()));
    }
    let result = decoder.finish_into(&mut deltas);
    (deltas, result)
}

#[test]
fn a_mid_stream_error_reports_usage_first_and_keeps_its_type() {
    let (deltas, result) = decode(&fixture("constructed_overloaded_after_usage.sse"));
    let usage = deltas.iter().find_map(|d| match d {
        CompletionDelta::Usage(usage) => Some(usage.clone()),
        _ => None,
    });
    let usage = usage.expect("the usage of message_start goes out before the error");
    assert_eq!((usage.prompt_tokens, usage.completion_tokens), (12, 1));
    let error = result.unwrap_err();
    match &error {
        CompletionError::Provider { code, .. } => {
            assert_eq!(code.as_deref(), Some("overloaded_error"));
        }
        other => panic!("{other:?}"),
    }
    // The message names the type as the HTTP 529 path's does.
    let body = br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    let http = AnthropicSpec::error_body(body).message.unwrap();
    assert!(error.to_string().ends_with(&http), "{error} / {http}");
    assert_eq!(
        error.to_string(),
        "provider error: Overloaded (overloaded_error)"
    );
}

#[test]
fn pause_turn_is_paused_with_its_raw_reason_and_keeps_the_server_tool_call() {
    let (_, result) = decode(&fixture("constructed_pause_turn.sse"));
    let turn = serde_json::to_value(result.unwrap()).unwrap();
    assert_eq!(turn["finish_reason"], json!("paused"));
    assert_eq!(turn["raw_finish_reason"], json!("pause_turn"));
    assert_eq!(turn["text"], json!("Searching first."));
    assert_eq!(
        turn["blocks"][1],
        json!({"type": "provider", "wire": "anthropic", "block": {
            "type": "server_tool_use", "id": "srvtoolu_fid02", "name": "web_search",
            "input": {"query": "tide tables"}}})
    );
}

/// The body the assistant turn of `turn` encodes to, in a request after it.
fn echoed(turn: &CompletionFinal) -> Value {
    let assistant: Message = serde_json::from_value(json!({
        "role": "assistant", "content": turn.text, "blocks": turn.blocks,
    }))
    .unwrap();
    let request = CompletionRequest {
        model: "claude-fidelity".into(),
        messages: vec![
            Message::user("When does the harbour open?"),
            assistant,
            Message::user("Thanks."),
        ],
        tools: Vec::new().into(),
        tool_choice: Default::default(),
        context: RunContext::new("run-1", "trace-1"),
        settings: Default::default(),
    };
    let options = AnthropicEncodeOptions {
        stream: true,
        ..AnthropicEncodeOptions::default()
    };
    wire_anthropic::encode_request(&request, &options).unwrap()["messages"][1].clone()
}

#[test]
fn server_tool_blocks_and_citations_are_kept_and_sent_back_as_they_came() {
    let (deltas, result) = decode(&fixture("constructed_web_search_citations.sse"));
    let turn = result.unwrap();
    assert_eq!(turn.text, "Here is what I found: the harbour opens at six.");
    let text: String = deltas
        .iter()
        .filter_map(|d| match d {
            CompletionDelta::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, turn.text);
    let sent = echoed(&turn);
    assert_eq!(sent["role"], json!("assistant"));
    assert_eq!(
        sent["content"],
        json!([
            {"type": "server_tool_use", "id": "srvtoolu_fid03", "name": "web_search",
             "input": {"query": "harbour opening hours"}},
            {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_fid03", "content": [
                {"type": "web_search_result", "title": "Harbour notices",
                 "url": "https://harbour.example/notices",
                 "encrypted_content": "RmlkZWxpdHlSZXN1bHQx", "page_age": "2 days ago"}]},
            {"type": "text", "text": "Here is what I found: "},
            {"type": "text", "text": "the harbour opens at six.", "citations": [
                {"type": "web_search_result_location", "cited_text": "Open daily from six.",
                 "url": "https://harbour.example/notices", "title": "Harbour notices",
                 "encrypted_index": "RmlkZWxpdHlJbmRleDE="}]}
        ])
    );
}
