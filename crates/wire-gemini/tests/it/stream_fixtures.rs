//! Every stream fixture of `tests/fixtures/stream` decodes to its snapshot,
//! whole, cut at every byte boundary, and cut at random byte positions.

use std::fs;
use std::path::{Path, PathBuf};

use ai_core::completion::{CompletionDelta, CompletionError, CompletionFinal, FinishReason};
use proptest::prelude::*;
use serde_json::{Value, json};
use wire_gemini::GeminiDecoder;

const MODEL: &str = "gemini-requested";

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/stream")
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
    assert!(out.len() >= 11, "fixtures missing");
    out
}

fn delta_json(delta: &CompletionDelta) -> Value {
    match delta {
        CompletionDelta::Text(t) => json!({"text": t}),
        CompletionDelta::Reasoning(t) => json!({"reasoning": t}),
        CompletionDelta::ToolCallStart { index, id, name } => {
            json!({"tool_call_start": {"index": index, "id": id, "name": name}})
        }
        CompletionDelta::ToolCallArgs { index, fragment } => {
            json!({"tool_call_args": {"index": index, "fragment": fragment}})
        }
        CompletionDelta::Usage(usage) => json!({ "usage": usage }),
        other => json!({"other": format!("{other:?}")}),
    }
}

fn result_json(result: &Result<CompletionFinal, CompletionError>) -> Value {
    match result {
        Ok(turn) => json!({"final": turn}),
        Err(CompletionError::TruncatedStream { partial }) => {
            json!({"error": "truncated_stream", "partial": partial})
        }
        Err(CompletionError::Provider { code, message }) => {
            json!({"error": "provider", "code": code, "message": message})
        }
        Err(error) => json!({"error": error.to_string()}),
    }
}

type Decoded = (
    Vec<CompletionDelta>,
    Result<CompletionFinal, CompletionError>,
);

/// Decodes `body` fed in pieces cut at `cuts`.
fn decode(body: &[u8], cuts: &[usize]) -> Decoded {
    let mut decoder = GeminiDecoder::with_options(MODEL.to_owned());
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

fn deltas_json(deltas: &[CompletionDelta]) -> Value {
    Value::Array(deltas.iter().map(delta_json).collect())
}

#[test]
fn every_fixture_decodes_to_its_snapshot() {
    for (case, body) in cases() {
        let (deltas, result) = decode(&body, &[]);
        let mut value = json!({
            "deltas": deltas_json(&deltas),
            "result": result_json(&result),
        });
        value.sort_all_objects();
        let mut settings = insta::Settings::clone_current();
        settings.set_snapshot_path(fixture_dir().join("snapshots"));
        settings.set_prepend_module_to_snapshot(false);
        settings.set_omit_expression(true);
        settings.set_description(format!(
            "tests/fixtures/stream/{case}.sse: deltas and the assembled turn (or the error)"
        ));
        settings.bind(|| {
            insta::assert_snapshot!(case.clone(), serde_json::to_string_pretty(&value).unwrap());
        });
    }
}

/// Every chunk is a whole event, so the deltas are identical wherever the
/// bytes are cut, not just their joined text.
#[test]
fn every_byte_boundary_yields_the_same_events() {
    for (case, body) in cases() {
        let (whole_deltas, whole) = decode(&body, &[]);
        for cut in 0..=body.len() {
            let (deltas, result) = decode(&body, &[cut]);
            assert_eq!(deltas, whole_deltas, "{case} cut at {cut}");
            assert_eq!(
                result_json(&result),
                result_json(&whole),
                "{case} cut at {cut}"
            );
        }
    }
}

#[test]
fn random_cuts_yield_the_same_events() {
    let cases = cases();
    proptest!(ProptestConfig::with_cases(128), |(index in 0..cases.len(), cuts in proptest::collection::vec(0usize..100_000, 0..32))| {
        let (_, body) = &cases[index];
        let (whole_deltas, whole) = decode(body, &[]);
        let (cut_deltas, cut) = decode(body, &cuts);
        prop_assert_eq!(result_json(&whole), result_json(&cut));
        prop_assert_eq!(whole_deltas, cut_deltas);
    });
}

#[test]
fn malformed_input_never_panics() {
    for (_, body) in cases() {
        proptest!(ProptestConfig::with_cases(32), |(at in 0usize..4096, byte in any::<u8>())| {
            let mut bytes = body.clone();
            let at = at % bytes.len();
            bytes[at] = byte;
            let _ = decode(&bytes, &[at]);
        });
    }
}

#[test]
fn signatures_are_kept_exactly_as_received() {
    let body = fs::read(fixture_dir().join("captured_tool_call_signature.sse")).unwrap();
    let text = String::from_utf8(body.clone()).unwrap();
    let (_, result) = decode(&body, &[]);
    let turn = result.unwrap();
    assert_eq!(turn.finish_reason, FinishReason::ToolCalls);
    let signature = turn.tool_calls[0].raw.as_ref().unwrap()["google"]["thought_signature"]
        .as_str()
        .unwrap();
    assert!(text.contains(&format!("\"thoughtSignature\":\"{signature}\"")));
}

#[test]
fn a_midstream_error_keeps_its_status_and_reports_usage_first() {
    let body = fs::read(fixture_dir().join("constructed_midstream_error.sse")).unwrap();
    let (deltas, result) = decode(&body, &[]);
    assert!(matches!(deltas.last(), Some(CompletionDelta::Usage(u)) if u.prompt_tokens == 30));
    assert!(matches!(
        result,
        Err(CompletionError::Provider { code: Some(code), .. }) if code == "UNAVAILABLE"
    ));
}
