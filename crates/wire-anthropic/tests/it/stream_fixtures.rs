//! Every stream fixture of `fixtures/anthropic/stream` decodes to its snapshot,
//! whole and cut at random byte positions.

use std::fs;
use std::path::{Path, PathBuf};

use ai_core::completion::{CompletionDelta, CompletionError, CompletionFinal};
use proptest::prelude::*;
use serde_json::{Value, json};
use wire_anthropic::AnthropicDecoder;

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/anthropic/stream")
}

fn cases() -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = fs::read_dir(fixture_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter_map(|path| {
            let case = path.file_name()?.to_str()?.strip_suffix(".sse")?.to_owned();
            Some((case, fs::read(&path).unwrap()))
        })
        .collect();
    out.sort();
    assert!(out.len() >= 13, "fixtures missing");
    out
}

fn delta_json(delta: &CompletionDelta) -> Value {
    match delta {
        CompletionDelta::Text(t) => json!({"text": t}),
        CompletionDelta::Reasoning(t) => json!({"reasoning": t}),
        CompletionDelta::ReasoningSignature(s) => json!({"signature": s}),
        CompletionDelta::ToolCallStart { index, id, name } => {
            json!({"tool_call_start": {"index": index, "id": id, "name": name}})
        }
        CompletionDelta::ToolCallArgs { index, fragment } => {
            json!({"tool_call_args": {"index": index, "fragment": fragment}})
        }
        other => json!({"other": format!("{other:?}")}),
    }
}

fn result_json(result: &Result<CompletionFinal, CompletionError>) -> Value {
    match result {
        Ok(turn) => json!({"final": turn}),
        Err(CompletionError::TruncatedStream { partial }) => {
            json!({"error": "truncated_stream", "partial": partial})
        }
        Err(error) => json!({"error": error.to_string()}),
    }
}

/// Decodes `body` fed in pieces cut at `cuts`.
fn decode(
    body: &[u8],
    cuts: &[usize],
) -> (
    Vec<CompletionDelta>,
    Result<CompletionFinal, CompletionError>,
) {
    let mut decoder = AnthropicDecoder::new();
    let mut deltas = Vec::new();
    let mut at = 0;
    let mut bounds: Vec<usize> = cuts.iter().map(|c| c % (body.len() + 1)).collect();
    bounds.sort_unstable();
    bounds.push(body.len());
    for end in bounds {
        if end < at {
            continue;
        }
        if let Err(error) = decoder.feed(&body[at..end], &mut deltas) {
            return (deltas, Err(error.into()));
        }
        at = end;
    }
    (deltas, decoder.finish())
}

/// Text deltas joined, so a cut that splits nothing differently compares equal.
fn joined(deltas: &[CompletionDelta]) -> Value {
    let (mut text, mut reasoning, mut args) = (String::new(), String::new(), String::new());
    for delta in deltas {
        match delta {
            CompletionDelta::Text(t) => text.push_str(t),
            CompletionDelta::Reasoning(t) => reasoning.push_str(t),
            CompletionDelta::ToolCallArgs { fragment, .. } => args.push_str(fragment),
            _ => {}
        }
    }
    json!([text, reasoning, args])
}

#[test]
fn every_fixture_decodes_to_its_snapshot() {
    for (case, body) in cases() {
        let (deltas, result) = decode(&body, &[]);
        let mut value = json!({
            "deltas": deltas.iter().map(delta_json).collect::<Vec<_>>(),
            "result": result_json(&result),
        });
        value.sort_all_objects();
        let mut settings = insta::Settings::clone_current();
        settings.set_snapshot_path(fixture_dir().join("snapshots"));
        settings.set_prepend_module_to_snapshot(false);
        settings.set_omit_expression(true);
        settings.set_description(format!(
            "fixtures/anthropic/stream/{case}.sse: deltas and the assembled turn (or the error)"
        ));
        settings.bind(|| {
            insta::assert_snapshot!(case.clone(), serde_json::to_string_pretty(&value).unwrap());
        });
    }
}

#[test]
fn the_turn_does_not_depend_on_where_the_bytes_are_cut() {
    let cases = cases();
    proptest!(ProptestConfig::with_cases(64), |(index in 0..cases.len(), cuts in proptest::collection::vec(0usize..100_000, 0..24))| {
        let (_, body) = &cases[index];
        let (whole_deltas, whole) = decode(body, &[]);
        let (cut_deltas, cut) = decode(body, &cuts);
        prop_assert_eq!(result_json(&whole), result_json(&cut));
        prop_assert_eq!(joined(&whole_deltas), joined(&cut_deltas));
    });
}

#[test]
fn the_litellm_thinking_echo_is_taken_once() {
    let body = fs::read(fixture_dir().join("litellm_thinking_echo.sse")).unwrap();
    let (_, result) = decode(&body, &[]);
    let turn = result.unwrap();
    assert_eq!(turn.reasoning.as_deref(), Some("Let me think. More."));
    assert_eq!(turn.text, "Answer.");
}
