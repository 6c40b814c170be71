//! Every stream fixture of `fixtures/responses/stream` decodes to its snapshot,
//! whole and cut at random byte positions; the quirks each case is about hold.

use std::fs;

use agent_testing::wire_fixtures::{Cuts, Decoded, Fixtures, StreamRendering, cut};
use ai_core::completion::{CompletionError, CompletionFinal};
use serde_json::Value;
use wire_responses::ResponsesDecoder;

/// Refusals and signatures by name; usage as its `Debug` text, provider errors as
/// their text.
const RENDERING: StreamRendering = StreamRendering {
    refusal: true,
    signature: true,
    ..StreamRendering::PLAIN
};

fn fixtures() -> Fixtures {
    Fixtures::new(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/responses/stream"
        ),
        ".sse",
    )
    .at_least(13)
}

/// Decodes `body` fed in pieces cut at `cuts`.
fn decode(body: &[u8], cuts: &[usize]) -> Decoded {
    ResponsesDecoder::new().decode_pieces(cut(body, cuts))
}

#[test]
fn every_fixture_decodes_to_its_snapshot_wherever_the_bytes_are_cut() {
    let shown_as = "fixtures/responses/stream";
    fixtures().assert_stream_fixtures(shown_as, RENDERING, decode, Cuts::TEXT);
}

/// The turn of fixture `case`.
fn turn_of(case: &str) -> CompletionFinal {
    decode(&fixtures().read(case), &[]).1.unwrap()
}

/// The `encrypted_content` values of the events of `case` whose type is `kind`.
fn encrypted_in(case: &str, kind: &str) -> Vec<String> {
    let body = fs::read_to_string(fixtures().path(case)).unwrap();
    body.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter(|v| v["type"] == kind)
        .filter_map(|v| {
            let item = if v["item"].is_object() {
                &v["item"]
            } else {
                &v["response"]["output"][0]
            };
            item["encrypted_content"].as_str().map(str::to_owned)
        })
        .collect()
}

#[test]
fn the_encrypted_content_kept_is_the_one_output_item_done_carries() {
    let added = encrypted_in(
        "reasoning_encrypted_then_call",
        "response.output_item.added",
    );
    let done = encrypted_in("reasoning_encrypted_then_call", "response.output_item.done");
    assert_ne!(added, done, "the fixture's two values differ");
    let turn = turn_of("reasoning_encrypted_then_call");
    match &turn.blocks[0] {
        ai_core::message::AssistantBlock::Reasoning {
            signature,
            item_id,
            text,
            ..
        } => {
            assert_eq!(signature.as_deref(), done.first().map(String::as_str));
            assert!(item_id.as_deref().is_some_and(|id| id.starts_with("rs_")));
            assert!(!text.is_empty());
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        turn.finish_reason,
        ai_core::completion::FinishReason::ToolCalls
    );
}

#[test]
fn litellm_s_encrypted_content_comes_from_the_completed_response() {
    assert!(encrypted_in("litellm_no_event_lines", "response.output_item.done").is_empty());
    let turn = turn_of("litellm_no_event_lines");
    let Some(ai_core::message::AssistantBlock::Reasoning { signature, .. }) = turn.blocks.first()
    else {
        panic!("{:?}", turn.blocks);
    };
    assert!(signature.as_deref().is_some_and(|s| !s.is_empty()));
    assert!(
        !turn.text.is_empty(),
        "the message's deltas under the reasoning's index are text"
    );
}

#[test]
fn interleaved_parallel_calls_assemble_apart() {
    let turn = turn_of("parallel_calls_interleaved");
    assert_eq!(turn.tool_calls.len(), 2);
    for call in &turn.tool_calls {
        assert_eq!(
            call.outcome,
            ai_core::completion::ToolCallOutcome::Complete,
            "{call:?}"
        );
        serde_json::from_str::<Value>(&call.arguments).unwrap();
    }
    assert_ne!(turn.tool_calls[0].arguments, turn.tool_calls[1].arguments);
}

#[test]
fn failures_are_typed() {
    match decode(&fixtures().read("truncated"), &[]).1 {
        Err(CompletionError::TruncatedStream { partial }) => assert_eq!(
            partial.tool_calls[0].outcome,
            ai_core::completion::ToolCallOutcome::Truncated
        ),
        other => panic!("{other:?}"),
    }
    for (case, code) in [
        ("failed_only", "server_error"),
        ("error_event", "rate_limit_exceeded"),
    ] {
        match decode(&fixtures().read(case), &[]).1 {
            Err(CompletionError::Provider { code: Some(c), .. }) => assert_eq!(c, code, "{case}"),
            other => panic!("{case}: {other:?}"),
        }
    }
    assert_eq!(
        turn_of("incomplete_max_tokens").finish_reason,
        ai_core::completion::FinishReason::Length
    );
    assert_eq!(
        turn_of("incomplete_content_filter").finish_reason,
        ai_core::completion::FinishReason::ContentFilter
    );
}
