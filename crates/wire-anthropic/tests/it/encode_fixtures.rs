//! Encoder goldens: each `fixtures/anthropic/encode/<case>.input.json` (a request
//! and the encode options) encodes to the body, or the error, in
//! `snapshots/<case>.snap` (pretty JSON, sorted keys). A snapshot without its input
//! fails the test, so a removed case leaves no stale golden behind.

use agent_testing::wire_fixtures::{EncodeInput, Fixtures, body_or_error};
use serde::Deserialize;
use serde_json::Value;
use wire_anthropic::{AnthropicEncodeOptions, encode_request};

type Input = EncodeInput<OptionsInput>;

#[derive(Deserialize)]
struct OptionsInput {
    stream: bool,
    cache: bool,
    thinking_budget_tokens: Option<u32>,
}

fn fixtures() -> Fixtures {
    Fixtures::new(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/anthropic/encode"
        ),
        ".input.json",
    )
    .at_least(14)
}

fn encode_case(input: Input) -> Value {
    let request = input.request.into_request();
    let options = AnthropicEncodeOptions {
        stream: input.options.stream,
        cache: input.options.cache,
        thinking_budget_tokens: input.options.thinking_budget_tokens,
        ..AnthropicEncodeOptions::default()
    };
    body_or_error(encode_request(&request, &options))
}

#[test]
fn every_encode_fixture_matches_its_snapshot() {
    fixtures().assert_encode_snapshots("fixtures/anthropic/encode", encode_case);
}
