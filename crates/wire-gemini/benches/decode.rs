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
//! Run: `cargo bench -p toolwright-wire-gemini --bench decode -- --warm-up-time 1 --measurement-time 3`

#![allow(clippy::unwrap_used, clippy::expect_used)]

use agent_testing::decode_bench::{self, ARGUMENT_PARTS, CountingAllocator, Rng, TEXT_WORDS};
use wire_gemini::GeminiDecoder;

#[global_allocator]
static GLOBAL: &CountingAllocator = &decode_bench::COUNTING;

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

/// The stream and its event count.
fn build_stream(target_bytes: usize) -> (Vec<u8>, usize) {
    let mut rng = Rng::default();
    let mut out = String::new();
    let mut events = 0;
    while out.len() < target_bytes / 3 {
        let text = rng.piece(&TEXT_WORDS);
        chunk(
            &mut out,
            &format!(r#"{{"text":"{text}","thought":true}}"#),
            false,
        );
        events += 1;
    }
    while out.len() < target_bytes / 2 {
        let text = rng.piece(&TEXT_WORDS);
        chunk(&mut out, &format!(r#"{{"text":"{text}"}}"#), false);
        events += 1;
    }
    for call in 0..3 {
        let mut content = String::new();
        while content.len() < target_bytes / 6 {
            content.push_str(&rng.piece(&ARGUMENT_PARTS));
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

fn main() {
    decode_bench::bench_decoder(
        GLOBAL,
        "gemini_decode",
        build_stream(4 * 1024 * 1024),
        || GeminiDecoder::with_options("gemini-bench".to_owned()),
        GeminiDecoder::feed,
        GeminiDecoder::finish,
        3,
    );
}
