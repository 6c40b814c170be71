//! Non-streaming responses decode into the same final a stream would give.

use std::fs;

use wire_openai::decode::{DecoderOptions, decode_response_into};

use crate::common::{
    IdNormalizer, assert_no_stale_goldens, check_golden, delta_json, fixture_dir, fixtures,
    result_json,
};

#[test]
fn every_response_fixture_matches_its_golden() {
    for (case, path) in fixtures("response", ".json") {
        let bytes = fs::read(&path).unwrap();
        let mut deltas = Vec::new();
        let options = DecoderOptions {
            model: "request-model".into(),
            ..DecoderOptions::default()
        };
        let result = decode_response_into(&bytes, options, &mut deltas);
        let mut ids = IdNormalizer::default();
        let deltas: Vec<_> = deltas.iter().map(|d| delta_json(d, &mut ids)).collect();
        let actual =
            serde_json::json!({"deltas": deltas, "result": result_json(&result, &mut ids)});
        check_golden(
            &fixture_dir("response").join(format!("{case}.expected.json")),
            &actual,
        );
    }
    assert_no_stale_goldens("response", ".json");
}
