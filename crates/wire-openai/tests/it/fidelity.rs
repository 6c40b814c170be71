//! Fidelity findings on constructed streams (`fixtures/openai/fidelity`, shaped
//! after the public streams the README names): typed content parts with
//! thinking, xAI's finish reasons, and the usage of an error chunk.

use std::fs;
use std::path::Path;

use ai_core::completion::{CompletionDelta, CompletionError, CompletionFinal};
use serde_json::json;
use wire_openai::Decoder;

fn decode(
    name: &str,
) -> (
    Vec<CompletionDelta>,
    Result<CompletionFinal, CompletionError>,
) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/openai/fidelity")
        .join(name);
    let body = fs::read(path).unwrap();
    let mut decoder = Decoder::new();
    let mut deltas = Vec::new();
    if let Err(error) = decoder.feed(&body, &mut deltas) {
        return (deltas, Err(error.into()));
    }
    let result = decoder.finish_into(&mut deltas);
    (deltas, result)
}

#[test]
fn mistral_thinking_parts_are_reasoning_and_text_parts_text() {
    let (deltas, result) = decode("constructed_mistral_thinking_parts.sse");
    let turn = result.unwrap();
    // Shown and recorded (the deltas), never sent back: Mistral answers 422
    // `extra_forbidden` to `reasoning_content` on an assistant message.
    assert_eq!(turn.reasoning, None);
    assert_eq!(turn.text, "It is four.");
    let reasoning: String = deltas
        .iter()
        .filter_map(|d| match d {
            CompletionDelta::Reasoning(r) => Some(r.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(reasoning, "Two and two make four.");
}

#[test]
fn xai_reason_max_len_is_length_with_the_raw_reason_beside_it() {
    let (_, result) = decode("constructed_xai_reason_max_len.sse");
    let turn = serde_json::to_value(result.unwrap()).unwrap();
    assert_eq!(turn["finish_reason"], json!("length"));
    assert_eq!(turn["raw_finish_reason"], json!("REASON_MAX_LEN"));
}

#[test]
fn an_error_chunk_reports_its_usage_before_the_error() {
    let (deltas, result) = decode("constructed_openrouter_error_chunk_usage.sse");
    assert!(
        matches!(result, Err(CompletionError::Provider { .. })),
        "{result:?}"
    );
    let usage = deltas.iter().find_map(|d| match d {
        CompletionDelta::Usage(usage) => Some(usage.clone()),
        _ => None,
    });
    let usage = usage.expect("the error chunk's usage goes out before the error");
    assert_eq!((usage.prompt_tokens, usage.completion_tokens), (43, 10));
}
