//! Decoder throughput and allocations on a multi-MB Responses API stream: a
//! reasoning item whose summary arrives in 4-16 byte deltas (escapes,
//! non-ASCII), its encrypted content, and three function calls whose arguments
//! arrive in 4-16 byte pieces, fed in 1.4-16 KiB chunks.
//!
//! Compared in one run: our decoder, and the limit of splitting the `data:`
//! payloads and parsing each into a `serde_json::Value` (no assembly). Allocations
//! per event are counted with a counting global allocator and printed first.
//!
//! Run: `cargo bench -p wire-responses --bench decode -- --warm-up-time 1 --measurement-time 3`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::alloc::System;
use std::hint::black_box;

use criterion::{Criterion, Throughput};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use wire_responses::ResponsesDecoder;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn range(&mut self, low: usize, high: usize) -> usize {
        low + (self.next() % (high - low + 1) as u64) as usize
    }
}

fn event(out: &mut String, kind: &str, data: &str) {
    out.push_str("event: ");
    out.push_str(kind);
    out.push_str("\ndata: ");
    out.push_str(data);
    out.push_str("\n\n");
}

/// The stream and its event count.
fn build_stream(target_bytes: usize) -> (Vec<u8>, usize) {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let words = [
        "think ",
        "about ",
        "\\\"it\\\" ",
        "déjà ",
        "vu ",
        "\\n",
        "日本 ",
        "ok ",
    ];
    let mut out = String::new();
    let mut events = 0;
    let mut push = |out: &mut String, kind: &str, data: String| {
        event(out, kind, &data);
        events += 1;
    };
    push(&mut out, "response.created", r#"{"type":"response.created","sequence_number":0,"response":{"id":"resp_bench","object":"response","status":"in_progress","model":"gpt-bench","output":[]}}"#.into());
    push(&mut out, "response.output_item.added", r#"{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"id":"rs_bench","type":"reasoning","summary":[]}}"#.into());
    let budget = target_bytes / 2;
    while out.len() < budget {
        let mut piece = String::new();
        while piece.len() < rng.range(4, 16) {
            piece.push_str(words[rng.range(0, words.len() - 1)]);
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
            let parts = ["abcd", "ef\\\"gh", "ijklmnop", "q\\\\r", "stuvwxyz", "é"];
            let mut piece = String::new();
            while piece.len() < rng.range(4, 16) {
                piece.push_str(parts[rng.range(0, parts.len() - 1)]);
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

fn chunks(body: &[u8]) -> Vec<&[u8]> {
    let mut rng = Rng(7);
    let mut out = Vec::new();
    let mut at = 0;
    while at < body.len() {
        let end = (at + rng.range(1400, 16 * 1024)).min(body.len());
        out.push(&body[at..end]);
        at = end;
    }
    out
}

fn ours(chunks: &[&[u8]]) -> usize {
    let mut decoder = ResponsesDecoder::new();
    let mut deltas = Vec::with_capacity(64);
    let mut count = 0;
    for chunk in chunks {
        decoder.feed(chunk, &mut deltas).unwrap();
        count += deltas.len();
        deltas.clear();
    }
    let turn = decoder.finish().unwrap();
    assert_eq!(turn.tool_calls.len(), 3);
    count
}

/// Every `data:` payload parsed into a `serde_json::Value`, nothing assembled.
fn value_baseline(body: &[u8]) -> usize {
    let text = std::str::from_utf8(body).unwrap();
    let mut parsed = 0;
    for data in text.lines().filter_map(|line| line.strip_prefix("data: ")) {
        black_box(serde_json::from_str::<serde_json::Value>(data).unwrap());
        parsed += 1;
    }
    parsed
}

fn main() {
    let (body, events) = build_stream(4 * 1024 * 1024);
    let pieces = chunks(&body);
    for (name, run) in [
        ("ours", &(|| ours(&pieces)) as &dyn Fn() -> usize),
        ("serde_json_value_baseline", &|| value_baseline(&body)),
    ] {
        let region = Region::new(GLOBAL);
        black_box(run());
        let stats = region.change();
        println!(
            "{name}: {} events, {:.3} allocations per event, {} bytes",
            events,
            stats.allocations as f64 / events as f64,
            body.len()
        );
    }
    let mut criterion = Criterion::default().configure_from_args();
    let mut group = criterion.benchmark_group("responses_decode");
    group.throughput(Throughput::Bytes(body.len() as u64));
    group.bench_function("ours", |b| b.iter(|| ours(black_box(&pieces))));
    group.bench_function("serde_json_value_baseline", |b| {
        b.iter(|| value_baseline(black_box(&body)))
    });
    group.finish();
    criterion.final_summary();
}
