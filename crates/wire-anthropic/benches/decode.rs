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

use agent_testing::decode_bench::{self, CountingAllocator, ReasoningThenCalls, SseWriter};
use wire_anthropic::AnthropicDecoder;

#[global_allocator]
static GLOBAL: &CountingAllocator = &decode_bench::COUNTING;

/// The stream in Messages API events: a thinking block, then a `tool_use` block
/// per call.
struct Messages;

impl Messages {
    fn delta(out: &mut SseWriter, index: usize, delta: &str) {
        out.event(
            "content_block_delta",
            &format!(r#"{{"type":"content_block_delta","index":{index},"delta":{delta}}}"#),
        );
    }

    fn block_stop(out: &mut SseWriter, index: usize) {
        out.event(
            "content_block_stop",
            &format!(r#"{{"type":"content_block_stop","index":{index}}}"#),
        );
    }
}

impl ReasoningThenCalls for Messages {
    fn start(&self, out: &mut SseWriter) {
        out.event("message_start", r#"{"type":"message_start","message":{"id":"msg_bench","type":"message","role":"assistant","model":"claude-bench","content":[],"usage":{"input_tokens":1200,"cache_read_input_tokens":9000,"output_tokens":1}}}"#);
        out.event("content_block_start", r#"{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}"#);
    }

    fn reasoning(&self, out: &mut SseWriter, piece: &str) {
        Self::delta(
            out,
            0,
            &format!(r#"{{"type":"thinking_delta","thinking":"{piece}"}}"#),
        );
    }

    fn reasoning_end(&self, out: &mut SseWriter) {
        Self::delta(
            out,
            0,
            r#"{"type":"signature_delta","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxDb25zdHJ1Y3RlZA=="}"#,
        );
        Self::block_stop(out, 0);
    }

    fn call_start(&self, out: &mut SseWriter, call: usize) {
        let index = call + 1;
        out.event(
            "content_block_start",
            &format!(
                r#"{{"type":"content_block_start","index":{index},"content_block":{{"type":"tool_use","id":"toolu_{call}","name":"core__write_file","input":{{}}}}}}"#
            ),
        );
    }

    fn arguments(&self, out: &mut SseWriter, call: usize, piece: &str) {
        let delta = format!(r#"{{"type":"input_json_delta","partial_json":"{piece}"}}"#);
        Self::delta(out, call + 1, &delta);
    }

    fn call_end(&self, out: &mut SseWriter, call: usize) {
        Self::block_stop(out, call + 1);
    }

    fn end(&self, out: &mut SseWriter) {
        out.event("message_delta", r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":90000}}"#);
        out.event("message_stop", r#"{"type":"message_stop"}"#);
    }
}

fn main() {
    decode_bench::bench_decoder(
        GLOBAL,
        "anthropic_decode",
        decode_bench::reasoning_then_calls(&Messages, 4 * 1024 * 1024),
        AnthropicDecoder::new,
        AnthropicDecoder::feed,
        AnthropicDecoder::finish,
        3,
    );
}
