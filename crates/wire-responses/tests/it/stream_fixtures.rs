//! Every stream fixture of `fixtures/responses/stream` decodes to its snapshot,
//! whole and cut at random byte positions; the quirks each case is about hold.

use std::fs;
use std::path::{Path, PathBuf};

use ai_core::completion::{CompletionDelta, CompletionError, CompletionFinal};
use proptest::prelude::*;
use serde_json::{Value, json};
use wire_responses::ResponsesDecoder;

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/responses/stream")
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
        CompletionDelta::Refusal(t) => json!({"refusal": t}),
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
    let mut decoder = ResponsesDecoder::new();
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
    let result = decoder.finish_into(&mut deltas);
    (deltas, result)
}

/// Text deltas joined, so a cut that splits nothing differently compares equal.
fn joined(deltas: &[CompletionDelta]) -> Value {
    let (mut text, mut reasoning, mut args) = (String::new(), String::new(), String::new());
    for delta in deltas {
        match delta {
            CompletionDelta::Text(t) => text.push_str(t),
            CompletionDelta::Reasoning(t) | CompletionDelta::Refusal(t) => reasoning.push_str(t),
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
            "fixtures/responses/stream/{case}.sse: deltas and the assembled turn (or the error)"
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

/// The turn of fixture `case`.
fn turn_of(case: &str) -> CompletionFinal {
    let body = fs::read(fixture_dir().join(format!("{case}.sse"))).unwrap();
    decode(&body, &[]).1.unwrap()
}

/// The `encrypted_content` values of the events of `case` whose type is `kind`.
fn encrypted_in(case: &str, kind: &str) -> Vec<String> {
    let body = fs::read_to_string(fixture_dir().join(format!("{case}.sse"))).unwrap();
    body.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter(|v| v["type"] == kind)
        .filter_map(|v| {
            let item = if v["item"].is_object() {
                &v["item"]
            } else {
                &v["response"]["output"][0]
            };
            item["encrypted_content"].as_str().map(str::to_owned)
        })
        .collect()
}

#[test]
fn the_encrypted_content_kept_is_the_one_output_item_done_carries() {
    let added = encrypted_in(
        "reasoning_encrypted_then_call",
        "response.output_item.added",
    );
    let done = encrypted_in("reasoning_encrypted_then_call", "response.output_item.done");
    assert_ne!(added, done, "the fixture's two values differ");
    let turn = turn_of("reasoning_encrypted_then_call");
    match &turn.blocks[0] {
        ai_core::message::AssistantBlock::Reasoning {
            signature,
            item_id,
            text,
            ..
        } => {
            assert_eq!(signature.as_deref(), done.first().map(String::as_str));
            assert!(item_id.as_deref().is_some_and(|id| id.starts_with("rs_")));
            assert!(!text.is_empty());
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        turn.finish_reason,
        ai_core::completion::FinishReason::ToolCalls
    );
}

#[test]
fn litellm_s_encrypted_content_comes_from_the_completed_response() {
    assert!(encrypted_in("litellm_no_event_lines", "response.output_item.done").is_empty());
    let turn = turn_of("litellm_no_event_lines");
    let Some(ai_core::message::AssistantBlock::Reasoning { signature, .. }) = turn.blocks.first()
    else {
        panic!("{:?}", turn.blocks);
    };
    assert!(signature.as_deref().is_some_and(|s| !s.is_empty()));
    assert!(
        !turn.text.is_empty(),
        "the message's deltas under the reasoning's index are text"
    );
}

#[test]
fn interleaved_parallel_calls_assemble_apart() {
    let turn = turn_of("parallel_calls_interleaved");
    assert_eq!(turn.tool_calls.len(), 2);
    for call in &turn.tool_calls {
        assert_eq!(
            call.outcome,
            ai_core::completion::ToolCallOutcome::Complete,
            "{call:?}"
        );
        serde_json::from_str::<Value>(&call.arguments).unwrap();
    }
    assert_ne!(turn.tool_calls[0].arguments, turn.tool_calls[1].arguments);
}

#[test]
fn failures_are_typed() {
    let body = fs::read(fixture_dir().join("truncated.sse")).unwrap();
    match decode(&body, &[]).1 {
        Err(CompletionError::TruncatedStream { partial }) => assert_eq!(
            partial.tool_calls[0].outcome,
            ai_core::completion::ToolCallOutcome::Truncated
        ),
        other => panic!("{other:?}"),
    }
    for (case, code) in [
        ("failed_only", "server_error"),
        ("error_event", "rate_limit_exceeded"),
    ] {
        let body = fs::read(fixture_dir().join(format!("{case}.sse"))).unwrap();
        match decode(&body, &[]).1 {
            Err(CompletionError::Provider { code: Some(c), .. }) => assert_eq!(c, code, "{case}"),
            other => panic!("{case}: {other:?}"),
        }
    }
    assert_eq!(
        turn_of("incomplete_max_tokens").finish_reason,
        ai_core::completion::FinishReason::Length
    );
    assert_eq!(
        turn_of("incomplete_content_filter").finish_reason,
        ai_core::completion::FinishReason::ContentFilter
    );
}
