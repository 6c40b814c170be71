//! Decoder throughput and allocations on a multi-MB Gemini stream: thought
//! summaries in 4-16 byte pieces (escapes, non-ASCII), answer text in the same
//! pieces, then three whole function calls with large arguments and a thought
//! signature; every chunk carries `usageMetadata`, `modelVersion` and
//! `responseId`, as the API sends them. Fed in 1.4-16 KiB chunks.
//!
//! Compared in one run: our decoder, and the limit of splitting the `data:`
//! payloads and parsing each into a `serde_json::Value` (no assembly).
//! Allocations per event are counted with a counting global allocator and
//! printed first.
//!
//! Run: `cargo bench -p wire-gemini --bench decode -- --warm-up-time 1 --measurement-time 3`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::alloc::System;
use std::hint::black_box;

use criterion::{Criterion, Throughput};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};
use wire_gemini::GeminiDecoder;

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

const TAIL: &str = r#"],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":1200,"candidatesTokenCount":40,"totalTokenCount":2040,"cachedContentTokenCount":900,"thoughtsTokenCount":800},"modelVersion":"gemini-bench","responseId":"bench-response-1"}"#;

fn chunk(out: &mut String, parts: &str, finish: bool) {
    out.push_str(r#"data: {"candidates":[{"content":{"parts":["#);
    out.push_str(parts);
    if finish {
        out.push_str(&TAIL.replacen(r#""index":0"#, r#""finishReason":"STOP","index":0"#, 1));
    } else {
        out.push_str(TAIL);
    }
    out.push_str("\r\n\r\n");
}

fn piece(rng: &mut Rng, words: &[&str]) -> String {
    let mut piece = String::new();
    let want = rng.range(4, 16);
    while piece.len() < want {
        piece.push_str(words[rng.range(0, words.len() - 1)]);
    }
    piece
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
    while out.len() < target_bytes / 3 {
        let text = piece(&mut rng, &words);
        chunk(
            &mut out,
            &format!(r#"{{"text":"{text}","thought":true}}"#),
            false,
        );
        events += 1;
    }
    while out.len() < target_bytes / 2 {
        let text = piece(&mut rng, &words);
        chunk(&mut out, &format!(r#"{{"text":"{text}"}}"#), false);
        events += 1;
    }
    let parts = ["abcd", "ef\\\"gh", "ijklmnop", "q\\\\r", "stuvwxyz", "é"];
    for call in 0..3 {
        let mut content = String::new();
        while content.len() < target_bytes / 6 {
            content.push_str(&piece(&mut rng, &parts));
        }
        chunk(
            &mut out,
            &format!(
                r#"{{"functionCall":{{"name":"core__write_file","args":{{"path":"f{call}.txt","content":"{content}"}}}},"thoughtSignature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxDb25zdHJ1Y3RlZA=="}}"#
            ),
            call == 2,
        );
        events += 1;
    }
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
    let mut decoder = GeminiDecoder::with_options("gemini-bench".to_owned());
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
    let mut group = criterion.benchmark_group("gemini_decode");
    group.throughput(Throughput::Bytes(body.len() as u64));
    group.bench_function("ours", |b| b.iter(|| ours(black_box(&pieces))));
    group.bench_function("serde_json_value_baseline", |b| {
        b.iter(|| value_baseline(black_box(&body)))
    });
    group.finish();
    criterion.final_summary();
}
