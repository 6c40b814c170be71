//! Every stream fixture decodes to its snapshot (deltas and assembled result).

use std::fs;
use std::path::Path;

use ai_core::completion::{CompletionDelta, CompletionError, CompletionFinal, ToolCallOutcome};
use wire_openai::decode::{DecoderOptions, DeltaMode};

use crate::common::{decode_chunks, decode_chunks_borrowed, decoded_json, fixture_set, fixtures};

fn check(case: &str, path: &Path) {
    let bytes = fs::read(path).unwrap();
    let decoded = decode_chunks(
        &bytes,
        &[],
        DecoderOptions {
            model: "request-model".into(),
            ..DecoderOptions::default()
        },
    );
    fixture_set("stream", ".sse").assert_snapshot(
        case,
        "deltas and result of decoding the stream in one chunk",
        Some(path),
        &decoded_json(&decoded),
    );
}

#[test]
fn every_stream_fixture_matches_its_snapshot() {
    fixture_set("stream", ".sse").at_least(68).check_each(check);
}

/// The final is the same whatever deltas are emitted; fewer deltas in lighter modes.
#[test]
fn delta_modes_change_deltas_not_the_final() {
    for (case, path) in fixtures("stream", ".sse") {
        let bytes = fs::read(&path).unwrap();
        let run = |deltas| {
            decode_chunks(
                &bytes,
                &[],
                DecoderOptions {
                    deltas,
                    id_minting: wire_openai::decode::IdMinting::Sequential,
                    ..DecoderOptions::default()
                },
            )
        };
        let all = run(DeltaMode::All);
        let skip = run(DeltaMode::SkipArgFragments);
        let none = run(DeltaMode::AssembleOnly);
        assert_eq!(all.1, skip.1, "{case}");
        assert_eq!(all.1, none.1, "{case}");
        assert!(none.0.is_empty(), "{case}");
        let without_args: Vec<_> = all
            .0
            .iter()
            .filter(|d| !matches!(d, CompletionDelta::ToolCallArgs { .. }))
            .cloned()
            .collect();
        assert_eq!(without_args, skip.0, "{case}");
    }
}

/// Borrowed deltas (`feed_with`) are the owned ones (`feed`): same pieces, same
/// order, same final, in every mode, whole and byte by byte.
#[test]
fn borrowed_deltas_are_the_owned_deltas_in_every_mode() {
    for (case, path) in fixtures("stream", ".sse") {
        let bytes = fs::read(&path).unwrap();
        for deltas in [
            DeltaMode::All,
            DeltaMode::SkipArgFragments,
            DeltaMode::AssembleOnly,
        ] {
            let options = || DecoderOptions {
                deltas,
                id_minting: wire_openai::decode::IdMinting::Sequential,
                ..DecoderOptions::default()
            };
            let owned = decode_chunks(&bytes, &[], options());
            assert_eq!(
                decode_chunks_borrowed(&bytes, &[], options()),
                owned,
                "{case} {deltas:?}"
            );
            let every: Vec<usize> = (1..bytes.len()).collect();
            assert_eq!(
                decode_chunks_borrowed(&bytes, &every, options()),
                owned,
                "{case} {deltas:?} byte by byte"
            );
        }
    }
}

/// Every stream fixture decoded with the default options, as (case, deltas, turn):
/// a truncated stream's turn is what was assembled; a failed stream is left out.
fn assembled_turns() -> Vec<(String, Vec<CompletionDelta>, CompletionFinal)> {
    let mut out = Vec::new();
    for (case, path) in fixtures("stream", ".sse") {
        let bytes = fs::read(&path).unwrap();
        let (deltas, result) = decode_chunks(&bytes, &[], DecoderOptions::default());
        match result {
            Ok(turn) => out.push((case, deltas, turn)),
            Err(CompletionError::TruncatedStream { partial }) => out.push((case, deltas, *partial)),
            Err(_) => {}
        }
    }
    out
}

/// With every fragment delta, concatenating a call's fragments gives its arguments,
/// and each call's start comes before its fragments (streaming UIs rely on it).
#[test]
fn fragments_concatenate_to_the_assembled_arguments() {
    for (case, deltas, turn) in assembled_turns() {
        for call in &turn.tool_calls {
            let mut started = false;
            let mut text = String::new();
            for delta in &deltas {
                match delta {
                    CompletionDelta::ToolCallStart { index, id, name } if *index == call.index => {
                        assert!(!started, "{case}: two starts for call {index}");
                        started = true;
                        assert_eq!((id, name), (&call.id, &call.name), "{case}");
                    }
                    CompletionDelta::ToolCallArgs { index, fragment } if *index == call.index => {
                        assert!(started, "{case}: fragment before start");
                        text.push_str(fragment);
                    }
                    _ => {}
                }
            }
            if call.name.is_empty() {
                continue;
            }
            assert!(started, "{case}: call {} never started", call.index);
            if text.is_empty() {
                assert_eq!(call.arguments, "{}", "{case}");
            } else {
                assert_eq!(text, call.arguments, "{case}");
            }
        }
    }
}

/// Reasoning and refusal deltas concatenate to the final's `reasoning` and
/// `refusal`, which are `None` exactly when no such delta was emitted; reasoning never
/// leaks into the answer text.
#[test]
fn reasoning_and_refusal_deltas_concatenate_to_the_final() {
    let mut with_reasoning = 0;
    for (case, deltas, turn) in assembled_turns() {
        let mut reasoning = String::new();
        let mut refusal = String::new();
        for delta in &deltas {
            match delta {
                CompletionDelta::Reasoning(text) => {
                    assert!(!text.is_empty(), "{case}: empty reasoning delta");
                    reasoning.push_str(text);
                }
                CompletionDelta::Refusal(text) => {
                    assert!(!text.is_empty(), "{case}: empty refusal delta");
                    refusal.push_str(text);
                }
                _ => {}
            }
        }
        assert_eq!(turn.reasoning.as_deref().unwrap_or(""), reasoning, "{case}");
        assert_eq!(turn.refusal.as_deref().unwrap_or(""), refusal, "{case}");
        assert_eq!(turn.reasoning.is_some(), !reasoning.is_empty(), "{case}");
        if let Some(reasoning) = &turn.reasoning {
            with_reasoning += 1;
            assert!(!turn.text.contains(reasoning.as_str()), "{case}");
        }
    }
    assert!(with_reasoning >= 5, "reasoning fixtures: {with_reasoning}");
}

#[test]
fn tool_calls_are_in_index_order_and_ids_unique() {
    for (case, path) in fixtures("stream", ".sse") {
        let bytes = fs::read(&path).unwrap();
        let (_, result) = decode_chunks(&bytes, &[], DecoderOptions::default());
        let Ok(turn) = result else { continue };
        let indices: Vec<u32> = turn.tool_calls.iter().map(|c| c.index).collect();
        let mut sorted = indices.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(indices, sorted, "{case}");
        let mut ids: Vec<&str> = turn.tool_calls.iter().map(|c| c.id.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), turn.tool_calls.len(), "{case}");
        for call in &turn.tool_calls {
            if call.outcome == ToolCallOutcome::Complete {
                serde_json::from_str::<serde_json::Value>(&call.arguments)
                    .unwrap_or_else(|e| panic!("{case}: complete but not JSON: {e}"));
            }
        }
    }
}
