//! Encoder goldens: each `fixtures/responses/encode/<case>.input.json` (a request
//! and the encode options) encodes to the body, or the error, in
//! `snapshots/<case>.snap` (pretty JSON, sorted keys). A snapshot without its input
//! fails the test, so a removed case leaves no stale golden behind.

use agent_testing::wire_fixtures::{EncodeInput, Fixtures, body_or_error};
use serde::Deserialize;
use serde_json::Value;
use wire_responses::{ResponsesEncodeOptions, encode_request};

type Input = EncodeInput<OptionsInput>;

#[derive(Deserialize)]
struct OptionsInput {
    stream: bool,
}

fn fixtures() -> Fixtures {
    Fixtures::new(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/responses/encode"
        ),
        ".input.json",
    )
    .at_least(6)
}

fn encode_case(input: Input) -> Value {
    let request = input.request.into_request();
    let mut options = ResponsesEncodeOptions::default();
    options.stream = input.options.stream;
    body_or_error(encode_request(&request, &options))
}

#[test]
fn every_encode_fixture_matches_its_snapshot() {
    fixtures().assert_encode_snapshots("fixtures/responses/encode", encode_case);
}
