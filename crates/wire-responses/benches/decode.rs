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

use agent_testing::decode_bench::{
    self, ARGUMENT_PARTS, CountingAllocator, Rng, TEXT_WORDS, sse_event,
};
use wire_responses::ResponsesDecoder;

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
    push(&mut out, "response.created", r#"{"type":"response.created","sequence_number":0,"response":{"id":"resp_bench","object":"response","status":"in_progress","model":"gpt-bench","output":[]}}"#.into());
    push(&mut out, "response.output_item.added", r#"{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"rs_bench","type":"reasoning","summary":[]}}"#.into());
    let budget = target_bytes / 2;
    while out.len() < budget {
        let mut piece = String::new();
        while piece.len() < rng.range(4, 16) {
            piece.push_str(rng.pick(&TEXT_WORDS));
        }
        push(
            &mut out,
            "response.reasoning_summary_text.delta",
            format!(
                r#"{{"type":"response.reasoning_summary_text.delta","item_id":"rs_bench","output_index":0,"summary_index":0,"delta":"{piece}","obfuscation":"aB3x"}}"#
            ),
        );
    }
    push(&mut out, "response.output_item.done", r#"{"type":"response.output_item.done","output_index":0,"item":{"id":"rs_bench","type":"reasoning","summary":[],"encrypted_content":"gAAAAABbenchEqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxDb25zdHJ1Y3RlZA=="}}"#.into());
    for call in 0..3 {
        let index = call + 1;
        push(
            &mut out,
            "response.output_item.added",
            format!(
                r#"{{"type":"response.output_item.added","output_index":{index},"item":{{"id":"fc_{call}","type":"function_call","call_id":"call_{call}","name":"core__write_file","arguments":""}}}}"#
            ),
        );
        push(
            &mut out,
            "response.function_call_arguments.delta",
            format!(
                r#"{{"type":"response.function_call_arguments.delta","item_id":"fc_{call}","output_index":{index},"delta":"{{\"path\": \"f{call}.txt\", \"content\": \""}}"#
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
                "response.function_call_arguments.delta",
                format!(
                    r#"{{"type":"response.function_call_arguments.delta","item_id":"fc_{call}","output_index":{index},"delta":"{piece}","obfuscation":"x9"}}"#
                ),
            );
        }
        push(
            &mut out,
            "response.function_call_arguments.delta",
            format!(
                r#"{{"type":"response.function_call_arguments.delta","item_id":"fc_{call}","output_index":{index},"delta":"\"}}"}}"#
            ),
        );
    }
    push(&mut out, "response.completed", r#"{"type":"response.completed","response":{"id":"resp_bench","object":"response","status":"completed","model":"gpt-bench","output":[],"usage":{"input_tokens":1200,"input_tokens_details":{"cached_tokens":900},"output_tokens":90000,"output_tokens_details":{"reasoning_tokens":40000},"total_tokens":91200}}}"#.into());
    (out.into_bytes(), events)
}

fn ours(chunks: &[&[u8]]) -> usize {
    let (turn, deltas) = decode_bench::decode_owned(
        ResponsesDecoder::new(),
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
    decode_bench::compare(GLOBAL, "responses_decode", &body, &chunks, events, ours);
}
