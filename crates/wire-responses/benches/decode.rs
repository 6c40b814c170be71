//! Decoder throughput and allocations on a multi-MB Responses API stream: a
//! reasoning item whose summary arrives in 4-16 byte deltas (escapes,
//! non-ASCII), its encrypted content, and three function calls whose arguments
//! arrive in 4-16 byte pieces, fed in 1.4-16 KiB chunks.
//!
//! Compared in one run: our decoder, and the limit of splitting the `data:`
//! payloads and parsing each into a `serde_json::Value` (no assembly). Allocations
//! per event are counted with a counting global allocator and printed first.
//!
//! Run: `cargo bench -p toolwright-wire-responses --bench decode -- --warm-up-time 1 --measurement-time 3`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use agent_testing::decode_bench::{self, CountingAllocator, ReasoningThenCalls, SseWriter};
use wire_responses::ResponsesDecoder;

#[global_allocator]
static GLOBAL: &CountingAllocator = &decode_bench::COUNTING;

/// The stream in Responses API events: a reasoning item, then a
/// `function_call` item per call.
struct Responses;

impl ReasoningThenCalls for Responses {
    fn start(&self, out: &mut SseWriter) {
        out.event("response.created", r#"{"type":"response.created","sequence_number":0,"response":{"id":"resp_bench","object":"response","status":"in_progress","model":"gpt-bench","output":[]}}"#);
        out.event("response.output_item.added", r#"{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"rs_bench","type":"reasoning","summary":[]}}"#);
    }

    fn reasoning(&self, out: &mut SseWriter, piece: &str) {
        out.event(
            "response.reasoning_summary_text.delta",
            &format!(
                r#"{{"type":"response.reasoning_summary_text.delta","item_id":"rs_bench","output_index":0,"summary_index":0,"delta":"{piece}","obfuscation":"aB3x"}}"#
            ),
        );
    }

    fn reasoning_end(&self, out: &mut SseWriter) {
        out.event("response.output_item.done", r#"{"type":"response.output_item.done","output_index":0,"item":{"id":"rs_bench","type":"reasoning","summary":[],"encrypted_content":"gAAAAABbenchEqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxDb25zdHJ1Y3RlZA=="}}"#);
    }

    fn call_start(&self, out: &mut SseWriter, call: usize) {
        let index = call + 1;
        out.event(
            "response.output_item.added",
            &format!(
                r#"{{"type":"response.output_item.added","output_index":{index},"item":{{"id":"fc_{call}","type":"function_call","call_id":"call_{call}","name":"core__write_file","arguments":""}}}}"#
            ),
        );
    }

    fn arguments(&self, out: &mut SseWriter, call: usize, piece: &str) {
        let index = call + 1;
        out.event(
            "response.function_call_arguments.delta",
            &format!(
                r#"{{"type":"response.function_call_arguments.delta","item_id":"fc_{call}","output_index":{index},"delta":"{piece}","obfuscation":"x9"}}"#
            ),
        );
    }

    fn end(&self, out: &mut SseWriter) {
        out.event("response.completed", r#"{"type":"response.completed","response":{"id":"resp_bench","object":"response","status":"completed","model":"gpt-bench","output":[],"usage":{"input_tokens":1200,"input_tokens_details":{"cached_tokens":900},"output_tokens":90000,"output_tokens_details":{"reasoning_tokens":40000},"total_tokens":91200}}}"#);
    }
}

fn main() {
    decode_bench::bench_decoder(
        GLOBAL,
        "responses_decode",
        decode_bench::reasoning_then_calls(&Responses, 4 * 1024 * 1024),
        ResponsesDecoder::new,
        ResponsesDecoder::feed,
        ResponsesDecoder::finish,
        3,
    );
}
