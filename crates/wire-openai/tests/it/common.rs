//! Shared helpers: fixture paths, decoding in pieces and JSON views of decoder output.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

pub(crate) use agent_testing::wire_fixtures::Decoded;
use agent_testing::wire_fixtures::{Fixtures, cut, decode_in_pieces};

use ai_core::{
    completion::{CompletionDelta, CompletionError, CompletionFinal},
    event::UsageFact,
};
use serde_json::{Value, json};
use wire_openai::decode::{Decoder, DecoderOptions, DeltaRef};

/// `fixtures/openai/<sub>` at the workspace root.
pub(crate) fn fixture_dir(sub: &str) -> PathBuf {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap();
    workspace.join("fixtures/openai").join(sub)
}

/// The fixtures of `fixtures/openai/<sub>` with the given suffix, with their insta
/// snapshots in its `snapshots` folder.
pub(crate) fn fixture_set(sub: &str, suffix: &'static str) -> Fixtures {
    Fixtures::new(fixture_dir(sub), suffix)
}

/// Files of a fixture directory with the given suffix, sorted, as (case, path).
pub(crate) fn fixtures(sub: &str, suffix: &'static str) -> Vec<(String, PathBuf)> {
    fixture_set(sub, suffix).cases()
}

/// Replaces minted ids (`call_<32 hex>`) by `<minted-N>` in order of first
/// appearance, so snapshots are stable and show that one id is used throughout.
#[derive(Default)]
pub(crate) struct IdNormalizer {
    seen: HashMap<String, String>,
}

impl IdNormalizer {
    pub(crate) fn id(&mut self, id: &str) -> String {
        let minted = id
            .strip_prefix("call_")
            .is_some_and(|rest| rest.len() == 32 && rest.bytes().all(|b| b.is_ascii_hexdigit()));
        if !minted {
            return id.to_owned();
        }
        let next = self.seen.len();
        self.seen
            .entry(id.to_owned())
            .or_insert_with(|| format!("<minted-{next}>"))
            .clone()
    }
}

fn usage_json(usage: &UsageFact) -> Value {
    serde_json::to_value(usage).unwrap()
}

pub(crate) fn delta_json(delta: &CompletionDelta, ids: &mut IdNormalizer) -> Value {
    match delta {
        CompletionDelta::Text(text) => json!({"text": text}),
        CompletionDelta::ToolCallStart { index, id, name } => {
            json!({"tool_call_start": {"index": index, "id": ids.id(id), "name": name}})
        }
        CompletionDelta::ToolCallArgs { index, fragment } => {
            json!({"tool_call_args": {"index": index, "fragment": fragment}})
        }
        CompletionDelta::Usage(usage) => json!({"usage": usage_json(usage)}),
        CompletionDelta::Reasoning(text) => json!({"reasoning": text}),
        CompletionDelta::Refusal(text) => json!({"refusal": text}),
        other => panic!("unexpected delta {other:?}"),
    }
}

pub(crate) fn final_json(turn: &CompletionFinal, ids: &mut IdNormalizer) -> Value {
    let calls: Vec<Value> = turn
        .tool_calls
        .iter()
        .map(|call| {
            let mut value = serde_json::to_value(call).unwrap();
            value["id"] = Value::String(ids.id(&call.id));
            value
        })
        .collect();
    let mut value = json!({
        "text": turn.text,
        "tool_calls": calls,
        "finish_reason": serde_json::to_value(&turn.finish_reason).unwrap(),
        "usage": turn.usage.as_ref().map(usage_json),
    });
    // Only when present, so snapshots of providers without them stay as they were.
    if let Some(reasoning) = &turn.reasoning {
        value["reasoning"] = json!(reasoning);
    }
    if let Some(refusal) = &turn.refusal {
        value["refusal"] = json!(refusal);
    }
    value
}

pub(crate) fn result_json(
    result: &Result<CompletionFinal, CompletionError>,
    ids: &mut IdNormalizer,
) -> Value {
    match result {
        Ok(turn) => json!({"ok": final_json(turn, ids)}),
        Err(CompletionError::TruncatedStream { partial }) => json!({"error": {
            "code": "provider_stream_truncated",
            "partial": final_json(partial, ids),
        }}),
        Err(CompletionError::Provider { code, message }) => json!({"error": {
            "code": "provider_error", "provider_code": code, "message": message,
        }}),
        Err(error) => json!({"error": {"code": error.code(), "message": error.to_string()}}),
    }
}

/// Decodes `bytes` cut at `cuts`.
pub(crate) fn decode_chunks(bytes: &[u8], cuts: &[usize], options: DecoderOptions) -> Decoded {
    Decoder::with_options(options).decode_pieces(cut(bytes, cuts))
}

/// Like [`decode_chunks`], taking the deltas borrowed (`feed_with`, `finish_with`)
/// and making each owned only here, to compare with the owned path.
pub(crate) fn decode_chunks_borrowed(
    bytes: &[u8],
    cuts: &[usize],
    options: DecoderOptions,
) -> Decoded {
    decode_in_pieces(
        Decoder::with_options(options),
        bytes,
        cuts,
        |decoder, piece, deltas| {
            decoder.feed_with(piece, &mut |delta: DeltaRef<'_>| {
                deltas.push(delta.into_owned());
            })
        },
        |decoder, deltas| {
            decoder.finish_with(&mut |delta: DeltaRef<'_>| deltas.push(delta.into_owned()))
        },
    )
}

/// Normalized JSON of a decode (minted ids replaced), for snapshots and comparisons.
pub(crate) fn decoded_json(decoded: &Decoded) -> Value {
    let mut ids = IdNormalizer::default();
    let deltas: Vec<Value> = decoded.0.iter().map(|d| delta_json(d, &mut ids)).collect();
    let result = result_json(&decoded.1, &mut ids);
    json!({"deltas": deltas, "result": result})
}
