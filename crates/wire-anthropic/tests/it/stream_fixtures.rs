//! Every stream fixture of `fixtures/anthropic/stream` decodes to its snapshot,
//! whole and cut at random byte positions.

use agent_testing::wire_fixtures::{Cuts, Decoded, Fixtures, StreamRendering, cut};
use wire_anthropic::AnthropicDecoder;

/// Signatures by name; refusals and usage as their `Debug` text, provider errors as
/// their text.
const RENDERING: StreamRendering = StreamRendering {
    signature: true,
    ..StreamRendering::PLAIN
};

fn fixtures() -> Fixtures {
    Fixtures::new(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/anthropic/stream"
        ),
        ".sse",
    )
    .at_least(13)
}

/// Decodes `body` fed in pieces cut at `cuts`.
fn decode(body: &[u8], cuts: &[usize]) -> Decoded {
    AnthropicDecoder::new().decode_pieces(cut(body, cuts))
}

#[test]
fn every_fixture_decodes_to_its_snapshot_wherever_the_bytes_are_cut() {
    let shown_as = "fixtures/anthropic/stream";
    fixtures().assert_stream_fixtures(shown_as, RENDERING, decode, Cuts::TEXT);
}

#[test]
fn the_litellm_thinking_echo_is_taken_once() {
    let (_, result) = decode(&fixtures().read("litellm_thinking_echo"), &[]);
    let turn = result.unwrap();
    assert_eq!(turn.reasoning.as_deref(), Some("Let me think. More."));
    assert_eq!(turn.text, "Answer.");
}
