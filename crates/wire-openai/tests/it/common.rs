//! Shared helpers: fixture paths, insta snapshots and JSON views of decoder output.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

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

/// Files of a fixture directory with the given suffix, sorted, as (case, path).
pub(crate) fn fixtures(sub: &str, suffix: &str) -> Vec<(String, PathBuf)> {
    let mut out: Vec<(String, PathBuf)> = fs::read_dir(fixture_dir(sub))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter_map(|path| {
            let case = path.file_name()?.to_str()?.strip_suffix(suffix)?.to_owned();
            Some((case, path))
        })
        .collect();
    out.sort();
    assert!(!out.is_empty(), "no fixtures in {sub}");
    out
}

/// `fixtures/openai/<sub>/snapshots`: the insta snapshots of that fixture kind.
pub(crate) fn snapshot_dir(sub: &str) -> PathBuf {
    fixture_dir(sub).join("snapshots")
}

/// insta settings for the snapshot of one fixture: stored as
/// `fixtures/openai/<sub>/snapshots/<case>.snap` (name the snapshot after the case),
/// with the fixture recorded as its input file.
pub(crate) fn snapshot_settings(sub: &str, input: &Path, description: &str) -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(snapshot_dir(sub));
    settings.set_prepend_module_to_snapshot(false);
    settings.set_input_file(input);
    settings.set_description(description);
    settings.set_omit_expression(true);
    settings
}

/// The snapshot text of a JSON value: pretty-printed by `serde_json` (so numbers
/// read as they go on the wire) with sorted keys (key order is not an expectation).
pub(crate) fn snapshot_json(value: &Value) -> String {
    let mut value = value.clone();
    value.sort_all_objects();
    serde_json::to_string_pretty(&value).unwrap()
}

/// Runs `check` on every case and fails with all failing cases, not just the first.
/// (insta panics on a mismatch; locally it also writes `<case>.snap.new`, on CI nothing.)
pub(crate) fn check_all_cases(cases: &[(String, PathBuf)], check: impl Fn(&str, &Path)) {
    agent_testing::refuse_snapshot_updates_on_ci();
    let mut failures = Vec::new();
    for (case, path) in cases {
        let run = std::panic::AssertUnwindSafe(|| check(case, path));
        if let Err(panic) = std::panic::catch_unwind(run) {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            failures.push(format!("{case}: {message}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{}\n(accept deliberate changes with `INSTA_UPDATE=always cargo test -p wire-openai --test it`, never on CI)",
        failures.join("\n")
    );
}

/// Every file in `<sub>/snapshots` is the snapshot (`.snap`, or a pending `.snap.new`)
/// of an input with `suffix`: insta itself never notices a snapshot whose fixture is gone.
pub(crate) fn assert_no_stale_snapshots(sub: &str, suffix: &str) {
    let inputs: Vec<String> = fixtures(sub, suffix).into_iter().map(|(c, _)| c).collect();
    for entry in fs::read_dir(snapshot_dir(sub)).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        let case = name
            .strip_suffix(".snap")
            .or_else(|| name.strip_suffix(".snap.new"))
            .unwrap_or_else(|| panic!("unexpected file {sub}/snapshots/{name}"));
        assert!(
            inputs.iter().any(|c| c == case),
            "stale snapshot {sub}/snapshots/{name}: no fixture {case}{suffix}; delete it"
        );
    }
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

/// Like [`decode_chunks`], taking the deltas borrowed (`feed_with`, `finish_with`)
/// and making each owned only here, to compare with the owned path.
pub(crate) fn decode_chunks_borrowed(
    bytes: &[u8],
    cuts: &[usize],
    options: DecoderOptions,
) -> Decoded {
    let mut decoder = Decoder::with_options(options);
    let mut deltas = Vec::new();
    let mut sink = |delta: DeltaRef<'_>| deltas.push(delta.into_owned());
    let mut start = 0;
    let mut ends: Vec<usize> = cuts.iter().copied().filter(|&c| c <= bytes.len()).collect();
    ends.sort_unstable();
    ends.push(bytes.len());
    for end in ends {
        if let Err(error) = decoder.feed_with(&bytes[start..end], &mut sink) {
            return (deltas, Err(error.into()));
        }
        start = end;
    }
    let result = decoder.finish_with(&mut sink);
    (deltas, result)
}

/// Normalized JSON of a decode (minted ids replaced), for snapshots and comparisons.
pub(crate) fn decoded_json(decoded: &Decoded) -> Value {
    let mut ids = IdNormalizer::default();
    let deltas: Vec<Value> = decoded.0.iter().map(|d| delta_json(d, &mut ids)).collect();
    let result = result_json(&decoded.1, &mut ids);
    json!({"deltas": deltas, "result": result})
}
