//! Decoder throughput and allocations on a multi-MB Messages API stream: a
//! thinking block in 4-16 byte deltas (escapes, non-ASCII), a signature, a short
//! answer, and three tool calls whose `partial_json` arrives in 4-16 byte pieces,
//! fed in 1.4-16 KiB chunks.
//!
//! Compared in one run: our decoder, and the limit of splitting the `data:`
//! payloads and parsing each into a `serde_json::Value` (no assembly). Allocations
//! per event are counted with a counting global allocator and printed first.
//!
//! Run: `cargo bench -p toolwright-wire-anthropic --bench decode -- --warm-up-time 1 --measurement-time 3`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use agent_testing::decode_bench::{
    self, ARGUMENT_PARTS, CountingAllocator, Rng, TEXT_WORDS, sse_event,
};
use wire_anthropic::AnthropicDecoder;

#[global_allocator]
static GLOBAL: &CountingAllocator = &decode_bench::COUNTING;

/// The stream and its event count.
fn build_stream(target_bytes: usize) -> (Vec<u8>, usize) {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut out = String::new();
    let mut events = 0;
    let mut push = |out: &mut String, kind: &str, data: String| {
        sse_event(out, kind, &data);
        events += 1;
    };
    push(&mut out, "message_start", r#"{"type":"message_start","message":{"id":"msg_bench","type":"message","role":"assistant","model":"claude-bench","content":[],"usage":{"input_tokens":1200,"cache_read_input_tokens":9000,"output_tokens":1}}}"#.into());
    push(&mut out, "content_block_start", r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}"#.into());
    let budget = target_bytes / 2;
    while out.len() < budget {
        let mut piece = String::new();
        while piece.len() < rng.range(4, 16) {
            piece.push_str(rng.pick(&TEXT_WORDS));
        }
        push(
            &mut out,
            "content_block_delta",
            format!(
                r#"{{"type":"content_block_delta","index":0,"delta":{{"type":"thinking_delta","thinking":"{piece}"}}}}"#
            ),
        );
    }
    push(&mut out, "content_block_delta", r#"{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxDb25zdHJ1Y3RlZA=="}}"#.into());
    push(
        &mut out,
        "content_block_stop",
        r#"{"type":"content_block_stop","index":0}"#.into(),
    );
    for call in 0..3 {
        let index = call + 1;
        push(
            &mut out,
            "content_block_start",
            format!(
                r#"{{"type":"content_block_start","index":{index},"content_block":{{"type":"tool_use","id":"toolu_{call}","name":"core__write_file","input":{{}}}}}}"#
            ),
        );
        push(
            &mut out,
            "content_block_delta",
            format!(
                r#"{{"type":"content_block_delta","index":{index},"delta":{{"type":"input_json_delta","partial_json":"{{\"path\": \"f{call}.txt\", \"content\": \""}}}}"#
            ),
        );
        let until = budget + (call + 1) * budget / 3;
        while out.len() < until {
            let mut piece = String::new();
            while piece.len() < rng.range(4, 16) {
                piece.push_str(rng.pick(&ARGUMENT_PARTS));
            }
            push(
                &mut out,
                "content_block_delta",
                format!(
                    r#"{{"type":"content_block_delta","index":{index},"delta":{{"type":"input_json_delta","partial_json":"{piece}"}}}}"#
                ),
            );
        }
        push(
            &mut out,
            "content_block_delta",
            format!(
                r#"{{"type":"content_block_delta","index":{index},"delta":{{"type":"input_json_delta","partial_json":"\"}}"}}}}"#
            ),
        );
        push(
            &mut out,
            "content_block_stop",
            format!(r#"{{"type":"content_block_stop","index":{index}}}"#),
        );
    }
    push(&mut out, "message_delta", r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":90000}}"#.into());
    push(
        &mut out,
        "message_stop",
        r#"{"type":"message_stop"}"#.into(),
    );
    (out.into_bytes(), events)
}

fn ours(chunks: &[&[u8]]) -> usize {
    let (turn, deltas) = decode_bench::decode_owned(
        AnthropicDecoder::new(),
        chunks,
        |decoder, chunk, deltas| decoder.feed(chunk, deltas),
        |decoder| decoder.finish(),
    );
    assert_eq!(turn.tool_calls.len(), 3);
    deltas
}

fn main() {
    let (body, events) = build_stream(4 * 1024 * 1024);
    let chunks = decode_bench::network_chunks(&body, 7);
    decode_bench::compare(GLOBAL, "anthropic_decode", &body, &chunks, events, ours);
}
