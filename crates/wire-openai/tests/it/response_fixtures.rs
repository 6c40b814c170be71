//! Non-streaming responses decode into the same final a stream would give.

use std::fs;
use std::path::Path;

use wire_openai::decode::{DecoderOptions, decode_response_into};

use crate::common::{
    IdNormalizer, assert_no_stale_snapshots, check_all_cases, delta_json, fixtures, result_json,
    snapshot_json, snapshot_settings,
};

fn check(case: &str, path: &Path) {
    let bytes = fs::read(path).unwrap();
    let mut deltas = Vec::new();
    let options = DecoderOptions {
        model: "request-model".into(),
        ..DecoderOptions::default()
    };
    let result = decode_response_into(&bytes, options, &mut deltas);
    let mut ids = IdNormalizer::default();
    let deltas: Vec<_> = deltas.iter().map(|d| delta_json(d, &mut ids)).collect();
    let actual = serde_json::json!({"deltas": deltas, "result": result_json(&result, &mut ids)});
    let rendered = snapshot_json(&actual);
    snapshot_settings(
        "response",
        path,
        "deltas and result of decoding the response body",
    )
    .bind(|| insta::assert_snapshot!(case, rendered));
}

#[test]
fn every_response_fixture_matches_its_snapshot() {
    check_all_cases(&fixtures("response", ".json"), check);
    assert_no_stale_snapshots("response", ".json");
}
