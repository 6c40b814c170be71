//! Every stream fixture of `tests/fixtures/stream` decodes to its snapshot,
//! whole, cut at every byte boundary, and cut at random byte positions.

use agent_testing::wire_fixtures::{Cuts, Decoded, Fixtures, StreamRendering, cut};
use ai_core::completion::{CompletionDelta, CompletionError, FinishReason};
use proptest::prelude::*;
use wire_gemini::GeminiDecoder;

const MODEL: &str = "gemini-requested";

/// Usage and provider errors by name; refusals and signatures as their `Debug` text.
const RENDERING: StreamRendering = StreamRendering {
    usage: true,
    provider_errors: true,
    ..StreamRendering::PLAIN
};

fn fixtures() -> Fixtures {
    Fixtures::new(
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/stream"),
        ".sse",
    )
    .at_least(11)
}

/// Decodes `body` fed in pieces cut at `cuts`.
fn decode(body: &[u8], cuts: &[usize]) -> Decoded {
    GeminiDecoder::with_options(MODEL.to_owned()).decode_pieces(cut(body, cuts))
}

/// Every chunk is a whole event, so the deltas are the same wherever the bytes
/// are cut, not just their joined text.
#[test]
fn every_fixture_decodes_to_its_snapshot_wherever_the_bytes_are_cut() {
    let cuts = Cuts {
        draws: 128,
        max_cuts: 32,
        exact_deltas: true,
    };
    fixtures().assert_stream_fixtures("tests/fixtures/stream", RENDERING, decode, cuts);
}

/// One cut at each byte boundary gives the same deltas.
#[test]
fn every_byte_boundary_yields_the_same_events() {
    for (case, body) in fixtures().bodies() {
        let (whole_deltas, whole) = decode(&body, &[]);
        for cut in 0..=body.len() {
            let (deltas, result) = decode(&body, &[cut]);
            assert_eq!(deltas, whole_deltas, "{case} cut at {cut}");
            assert_eq!(
                RENDERING.result_json(&result),
                RENDERING.result_json(&whole),
                "{case} cut at {cut}"
            );
        }
    }
}

#[test]
fn malformed_input_never_panics() {
    for (_, body) in fixtures().bodies() {
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
    let body = fixtures().read("captured_tool_call_signature");
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
    let (deltas, result) = decode(&fixtures().read("constructed_midstream_error"), &[]);
    assert!(matches!(deltas.last(), Some(CompletionDelta::Usage(u)) if u.prompt_tokens == 30));
    assert!(matches!(
        result,
        Err(CompletionError::Provider { code: Some(code), .. }) if code == "UNAVAILABLE"
    ));
}
