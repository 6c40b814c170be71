//! Shared helpers: fixture paths, golden files and JSON views of decoder output.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use ai_core::{CompletionDelta, CompletionError, CompletionFinal, UsageFact};
use serde_json::{Value, json};
use wire_openai::decode::{Decoder, DecoderOptions};

/// `fixtures/openai/<sub>` at the workspace root.
pub(crate) fn fixture_dir(sub: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/openai")
        .join(sub)
}

/// Files of a fixture directory with the given suffix, sorted, as (case, path).
pub(crate) fn fixtures(sub: &str, suffix: &str) -> Vec<(String, PathBuf)> {
    let mut out: Vec<(String, PathBuf)> = fs::read_dir(fixture_dir(sub))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter_map(|path| {
            let name = path.file_name()?.to_str()?.to_owned();
            let case = name.strip_suffix(suffix)?;
            if case.ends_with(".expected") {
                return None;
            }
            Some((case.to_owned(), path))
        })
        .collect();
    out.sort();
    assert!(!out.is_empty(), "no fixtures in {sub}");
    out
}

/// Every `<case>.expected.json` in `sub` belongs to an input with `suffix`.
pub(crate) fn assert_no_stale_goldens(sub: &str, suffix: &str) {
    let inputs: Vec<String> = fixtures(sub, suffix).into_iter().map(|(c, _)| c).collect();
    for entry in fs::read_dir(fixture_dir(sub)).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if let Some(case) = name.strip_suffix(".expected.json") {
            assert!(
                inputs.iter().any(|c| c == case),
                "stale golden {sub}/{name}"
            );
        }
    }
}

fn env_is(name: &str, values: &[&str]) -> bool {
    std::env::var(name).is_ok_and(|v| values.contains(&v.as_str()))
}

/// Compares `actual` with the golden JSON file (as JSON values: key order does not
/// matter, key sets do). `UPDATE_GOLDEN=1` rewrites it, except on CI (`CI=true`),
/// where a missing or different golden always fails.
pub(crate) fn check_golden(path: &Path, actual: &Value) {
    let ci = env_is("CI", &["true", "1"]);
    let update = env_is("UPDATE_GOLDEN", &["1", "true"]) && !ci;
    let rendered = format!("{}\n", serde_json::to_string_pretty(actual).unwrap());
    match fs::read_to_string(path) {
        Ok(text) => {
            let expected: Value = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("golden {} is not JSON: {e}", path.display()));
            if &expected == actual {
                return;
            }
            if update {
                fs::write(path, rendered).unwrap();
                return;
            }
            panic!(
                "golden mismatch for {}\n--- expected\n{}\n--- actual\n{}\n(run with UPDATE_GOLDEN=1 to accept, never on CI)",
                path.display(),
                serde_json::to_string_pretty(&expected).unwrap(),
                rendered
            );
        }
        Err(_) if update => fs::write(path, rendered).unwrap(),
        Err(_) => panic!(
            "missing golden {} (run UPDATE_GOLDEN=1 cargo test -p wire-openai; never on CI)",
            path.display()
        ),
    }
}

/// Replaces minted ids (`call_<32 hex>`) by `<minted-N>` in order of first
/// appearance, so goldens are stable and show that one id is used throughout.
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
    json!({
        "text": turn.text,
        "tool_calls": calls,
        "finish_reason": serde_json::to_value(&turn.finish_reason).unwrap(),
        "usage": turn.usage.as_ref().map(usage_json),
    })
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

/// Decoder output for a stream: deltas and result.
pub(crate) type Decoded = (
    Vec<CompletionDelta>,
    Result<CompletionFinal, CompletionError>,
);

/// Decodes `bytes` cut into `chunks` (the lengths; the rest goes in a last chunk).
pub(crate) fn decode_chunks(bytes: &[u8], cuts: &[usize], options: DecoderOptions) -> Decoded {
    let mut decoder = Decoder::with_options(options);
    let mut deltas = Vec::new();
    let mut start = 0;
    let mut ends: Vec<usize> = cuts.iter().copied().filter(|&c| c <= bytes.len()).collect();
    ends.sort_unstable();
    ends.push(bytes.len());
    for end in ends {
        if let Err(error) = decoder.feed(&bytes[start..end], &mut deltas) {
            return (deltas, Err(error.into()));
        }
        start = end;
    }
    let result = decoder.finish_into(&mut deltas);
    (deltas, result)
}

/// Normalized JSON of a decode (minted ids replaced), for goldens and comparisons.
pub(crate) fn decoded_json(decoded: &Decoded) -> Value {
    let mut ids = IdNormalizer::default();
    let deltas: Vec<Value> = decoded.0.iter().map(|d| delta_json(d, &mut ids)).collect();
    let result = result_json(&decoded.1, &mut ids);
    json!({"deltas": deltas, "result": result})
}
