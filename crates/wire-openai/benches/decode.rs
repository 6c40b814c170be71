//! Decoder throughput and allocations on a multi-MB stream of three parallel tool
//! calls whose arguments arrive in 4-16 byte fragments, fed in 1.4-16 KiB chunks,
//! and on a reasoning-heavy stream (DeepSeek style: `reasoning_content` in 4-16 byte
//! fragments with escapes and non-ASCII, then a short answer and one call), so the
//! reasoning path is counted too.
//!
//! Compared in one run: our decoder (with every delta taken borrowed, assemble-only,
//! and with every delta taken owned), the limit of splitting `data:` payloads and
//! parsing each into `serde_json::Value`, and a peer pipeline (eventsource-stream,
//! owned serde structs, assembly by index); for reference also the floor of
//! serde_json itself (every payload parsed into `IgnoredAny`, no framing, no
//! assembly). Allocations per SSE event are counted with a counting global
//! allocator, in every delta mode, and printed before the timings.
//!
//! Run: `cargo bench -p toolwright-wire-openai --bench decode -- --warm-up-time 1 --measurement-time 3`
//!
//! On a shared machine wall-clock figures move by ±20% between runs; for a stable
//! comparison count instructions instead: `DECODE_BENCH_ONCE=<pipeline>` (`none`,
//! `ours_with_deltas`, `ours_skip_arg_fragments`, `ours_assemble_only`,
//! `ours_with_owned_deltas`, `serde_json_value_baseline`,
//! `serde_json_ignored_any_floor`, `peer_eventsource_owned_structs`) runs one
//! pipeline once, e.g. under `valgrind --tool=callgrind`; subtract the `none` run
//! (stream generation). On the reasoning stream: `reasoning_ours_with_deltas`,
//! `reasoning_ours_assemble_only`, `reasoning_ours_with_owned_deltas`,
//! `reasoning_serde_json_value_baseline`, `reasoning_serde_json_ignored_any_floor`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::hint::black_box;

use agent_testing::decode_bench::{
    self, CountingAllocator, Rng, allocations_per_event, value_baseline,
};
use bytes::Bytes;
use criterion::{Criterion, Throughput};
use futures::StreamExt;
use serde::Deserialize;
use wire_openai::decode::{Decoder, DecoderOptions, DeltaMode, DeltaRef};

#[global_allocator]
static GLOBAL: &CountingAllocator = &decode_bench::COUNTING;

/// The stream and its SSE event count.
fn build_stream(target_bytes: usize) -> (Vec<u8>, usize) {
    let mut rng = Rng::default();
    let head = r#"{"id":"chatcmpl-BqT8x2LhW1nZ9cVfK3","object":"chat.completion.chunk","created":1731418260,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_831e067d82","choices":[{"index":0,"delta":"#;
    let tail = r#","logprobs":null,"finish_reason":null}],"usage":null}"#;
    let mut out = String::new();
    let mut events = 0;
    let push = |out: &mut String, delta: &str| {
        out.push_str("data: ");
        out.push_str(head);
        out.push_str(delta);
        out.push_str(tail);
        out.push_str("\n\n");
    };
    push(&mut out, r#"{"role":"assistant","content":null}"#);
    events += 1;
    for i in 0..3 {
        push(
            &mut out,
            &format!(
                r#"{{"tool_calls":[{{"index":{i},"id":"call_{i}abcdefghijklmnop","type":"function","function":{{"name":"core__write_file","arguments":""}}}}]}}"#
            ),
        );
        events += 1;
    }
    // Argument texts: JSON objects with quotes, escapes and non-ASCII, generated
    // until the stream is large enough; fragments interleave round-robin.
    let words = [
        "alpha",
        "beta \"quoted\"",
        "gamma\nnewline",
        "δέλτα",
        "epsilon\ttab",
        "zeta/slash",
    ];
    let mut arguments: [String; 3] = Default::default();
    for (i, text) in arguments.iter_mut().enumerate() {
        text.push_str(&format!("{{\"path\": \"src/file_{i}.rs\", \"content\": \""));
    }
    let mut cursor = [0usize; 3];
    let mut call = 0;
    while out.len() < target_bytes {
        let text = &mut arguments[call];
        while text.len() < cursor[call] + 32 {
            let word = words[rng.range(0, words.len() - 1)];
            let escaped = serde_json::to_string(word).unwrap();
            text.push_str(&escaped[1..escaped.len() - 1]);
            text.push(' ');
        }
        let mut end = (cursor[call] + rng.range(4, 16)).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        let fragment = &text[cursor[call]..end];
        cursor[call] = end;
        let fragment_json = serde_json::to_string(fragment).unwrap();
        push(
            &mut out,
            &format!(
                r#"{{"tool_calls":[{{"index":{call},"function":{{"arguments":{fragment_json}}}}}]}}"#
            ),
        );
        events += 1;
        call = (call + 1) % 3;
    }
    for (i, text) in arguments.iter().enumerate() {
        let rest = format!("{}\"}}", &text[cursor[i]..]);
        let rest_json = serde_json::to_string(&rest).unwrap();
        push(
            &mut out,
            &format!(
                r#"{{"tool_calls":[{{"index":{i},"function":{{"arguments":{rest_json}}}}}]}}"#
            ),
        );
        events += 1;
    }
    out.push_str(r#"data: {"id":"chatcmpl-BqT8x2LhW1nZ9cVfK3","object":"chat.completion.chunk","created":1731418260,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#);
    out.push_str("\n\n");
    out.push_str(r#"data: {"id":"chatcmpl-BqT8x2LhW1nZ9cVfK3","object":"chat.completion.chunk","created":1731418260,"model":"gpt-4o-2024-08-06","choices":[],"usage":{"prompt_tokens":1000,"completion_tokens":50000,"total_tokens":51000}}"#);
    out.push_str("\n\ndata: [DONE]\n\n");
    events += 3;
    (out.into_bytes(), events)
}

/// A DeepSeek-style thinking turn: reasoning in 4-16 byte fragments until the
/// stream is `target_bytes` long, a short answer, one tool call, usage. Returns the
/// stream, its SSE event count and the reasoning text it carries.
fn build_reasoning_stream(target_bytes: usize) -> (Vec<u8>, usize, String) {
    let mut rng = Rng(0x6a09_e667_f3bc_c908);
    let head = r#"{"id":"9f3c1d2e-7a4b-4c1d-9e2f-5a6b7c8d9e0f","object":"chat.completion.chunk","created":1762000000,"model":"deepseek-reasoner","system_fingerprint":"fp_ffc7281d48_prod0820_fp8_kvcache","choices":[{"index":0,"delta":"#;
    let tail = r#","logprobs":null,"finish_reason":null}]}"#;
    let mut out = String::new();
    let mut events = 0;
    let mut push = |out: &mut String, delta: &str| {
        out.push_str("data: ");
        out.push_str(head);
        out.push_str(delta);
        out.push_str(tail);
        out.push_str("\n\n");
        events += 1;
    };
    push(
        &mut out,
        r#"{"role":"assistant","content":null,"reasoning_content":""}"#,
    );
    let words = [
        "Let me think",
        "the user \"asked\"",
        "step\nby step",
        "δέλτα",
        "so",
        "therefore",
    ];
    let mut reasoning = String::new();
    let mut text = String::new();
    let mut cursor = 0;
    while out.len() < target_bytes {
        while text.len() < cursor + 32 {
            text.push_str(words[rng.range(0, words.len() - 1)]);
            text.push(' ');
        }
        let mut end = (cursor + rng.range(4, 16)).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        let fragment = &text[cursor..end];
        cursor = end;
        reasoning.push_str(fragment);
        let fragment_json = serde_json::to_string(fragment).unwrap();
        push(
            &mut out,
            &format!(r#"{{"content":null,"reasoning_content":{fragment_json}}}"#),
        );
    }
    for piece in ["It is ", "noon."] {
        push(
            &mut out,
            &format!(r#"{{"content":"{piece}","reasoning_content":null}}"#),
        );
    }
    push(
        &mut out,
        r#"{"content":null,"reasoning_content":null,"tool_calls":[{"index":0,"id":"call_00_5sXbNpYlJH7bL4cYx2mQ","type":"function","function":{"name":"core__get_current_time","arguments":""}}]}"#,
    );
    push(
        &mut out,
        r#"{"tool_calls":[{"index":0,"function":{"arguments":"{\"timezone\": \"UTC\"}"}}]}"#,
    );
    out.push_str(r#"data: {"id":"9f3c1d2e-7a4b-4c1d-9e2f-5a6b7c8d9e0f","object":"chat.completion.chunk","created":1762000000,"model":"deepseek-reasoner","choices":[{"index":0,"delta":{"content":"","reasoning_content":null},"logprobs":null,"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":1000,"completion_tokens":50000,"total_tokens":51000,"prompt_tokens_details":{"cached_tokens":960},"completion_tokens_details":{"reasoning_tokens":49000},"prompt_cache_hit_tokens":960,"prompt_cache_miss_tokens":40}}"#);
    out.push_str("\n\ndata: [DONE]\n\n");
    events += 2;
    (out.into_bytes(), events, reasoning)
}

/// Network-sized chunks of 1.4 to 16 KiB, as the `Bytes` a response body yields.
fn network_chunks(stream: &[u8]) -> Vec<Bytes> {
    decode_bench::network_chunks(stream, 0x9e37_79b9_7f4a_7c15)
        .into_iter()
        .map(Bytes::copy_from_slice)
        .collect()
}

/// How a pipeline takes our decoder's deltas.
#[derive(Clone, Copy)]
enum Take {
    /// Borrowed (`Decoder::feed_with`): a consumer that looks at every delta (its
    /// bytes are summed) and keeps none, like a UI relay.
    Borrowed,
    /// Owned (`Decoder::feed`): a `CompletionDelta` per delta, for a consumer that
    /// keeps them (the completion port).
    Owned,
}

/// Our decoder over `chunks`: the turn and a sum over the deltas it emitted.
fn decode_ours(
    chunks: &[Bytes],
    deltas: DeltaMode,
    take: Take,
) -> (ai_core::completion::CompletionFinal, usize) {
    let mut decoder = Decoder::with_options(DecoderOptions {
        deltas,
        ..DecoderOptions::default()
    });
    let mut emitted = 0;
    match take {
        Take::Borrowed => {
            let mut sink = |delta: DeltaRef<'_>| {
                emitted += match delta {
                    DeltaRef::Text(text) | DeltaRef::Reasoning(text) | DeltaRef::Refusal(text) => {
                        text.len()
                    }
                    DeltaRef::ToolCallArgs { fragment, .. } => fragment.len(),
                    _ => 1,
                };
            };
            for chunk in chunks {
                decoder.feed_with(chunk, &mut sink).unwrap();
            }
            (decoder.finish_with(&mut sink).unwrap(), emitted)
        }
        Take::Owned => {
            let mut out = Vec::with_capacity(64);
            for chunk in chunks {
                decoder.feed(chunk, &mut out).unwrap();
                emitted += out.len();
                out.clear();
            }
            (decoder.finish().unwrap(), emitted)
        }
    }
}

/// Our decoder on the reasoning stream; the result counts the reasoning it kept.
fn ours_reasoning(chunks: &[Bytes], deltas: DeltaMode, take: Take) -> usize {
    let (turn, emitted) = decode_ours(chunks, deltas, take);
    assert_eq!(turn.tool_calls.len(), 1);
    emitted + turn.text.len() + turn.reasoning.map_or(0, |r| r.len())
}

fn ours(chunks: &[Bytes], deltas: DeltaMode, take: Take) -> usize {
    let (turn, emitted) = decode_ours(chunks, deltas, take);
    assert_eq!(turn.tool_calls.len(), 3);
    emitted
        + turn
            .tool_calls
            .iter()
            .map(|c| c.arguments.len())
            .sum::<usize>()
}

/// The floor of serde_json itself: split `data:` lines of the whole buffer, check
/// each payload as UTF-8 and parse it into `IgnoredAny`; no framing, no assembly.
fn ignored_any_floor(stream: &[u8]) -> usize {
    let mut n = 0;
    for line in stream.split(|&b| b == b'\n') {
        if let Some(payload) = line.strip_prefix(b"data: ")
            && payload != b"[DONE]"
        {
            let text = std::str::from_utf8(payload).unwrap();
            serde_json::from_str::<serde::de::IgnoredAny>(text).unwrap();
            n += 1;
        }
    }
    n
}

#[derive(Deserialize)]
struct PeerChunk {
    #[serde(default)]
    choices: Vec<PeerChoice>,
}

#[derive(Deserialize)]
struct PeerChoice {
    delta: PeerDelta,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct PeerDelta {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<PeerToolCall>>,
}

#[derive(Deserialize)]
struct PeerToolCall {
    index: u32,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<PeerFunction>,
}

#[derive(Deserialize)]
struct PeerFunction {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Default)]
struct PeerCall {
    id: String,
    name: String,
    arguments: String,
}

/// What peers do: eventsource-stream, owned structs, assembly by index.
fn peer(chunks: &[Bytes]) -> usize {
    use eventsource_stream::Eventsource;
    let stream = futures::stream::iter(
        chunks
            .iter()
            .cloned()
            .map(Ok::<_, std::convert::Infallible>),
    );
    let mut events = stream.eventsource();
    let mut calls: BTreeMap<u32, PeerCall> = BTreeMap::new();
    let mut text = String::new();
    let mut finish = None;
    futures::executor::block_on(async {
        while let Some(event) = events.next().await {
            let event = event.unwrap();
            if event.data == "[DONE]" {
                break;
            }
            let chunk: PeerChunk = serde_json::from_str(&event.data).unwrap();
            for choice in chunk.choices {
                if let Some(content) = choice.delta.content {
                    text.push_str(&content);
                }
                for call in choice.delta.tool_calls.into_iter().flatten() {
                    let entry = calls.entry(call.index).or_default();
                    if let Some(id) = call.id {
                        entry.id = id;
                    }
                    if let Some(function) = call.function {
                        if let Some(name) = function.name {
                            entry.name = name;
                        }
                        if let Some(arguments) = function.arguments {
                            entry.arguments.push_str(&arguments);
                        }
                    }
                }
                if choice.finish_reason.is_some() {
                    finish = choice.finish_reason;
                }
            }
        }
    });
    assert_eq!(calls.len(), 3);
    assert!(finish.is_some());
    calls
        .values()
        .map(|c| c.arguments.len() + c.id.len() + c.name.len())
        .sum::<usize>()
        + text.len()
}

/// A pipeline whose allocations are reported: its name, its stream and that
/// stream's event count, and one run of it.
type Reported<'a> = (&'a str, (&'a [u8], usize), &'a dyn Fn() -> usize);

fn main() {
    let (stream, events) = build_stream(4 * 1024 * 1024);
    let chunks = network_chunks(&stream);
    println!(
        "stream: {:.2} MiB, {} SSE events, {} network chunks",
        stream.len() as f64 / (1024.0 * 1024.0),
        events,
        chunks.len()
    );
    let (reasoning_stream, reasoning_events, reasoning_text) =
        build_reasoning_stream(4 * 1024 * 1024);
    let reasoning_chunks = network_chunks(&reasoning_stream);
    println!(
        "reasoning stream: {:.2} MiB, {} SSE events, {} network chunks, {} bytes of reasoning",
        reasoning_stream.len() as f64 / (1024.0 * 1024.0),
        reasoning_events,
        reasoning_chunks.len(),
        reasoning_text.len()
    );
    // `DECODE_BENCH_ONCE=<pipeline>` runs one pipeline once and exits: for
    // instruction counts under `valgrind --tool=callgrind`, which noisy shared
    // machines cannot disturb.
    if let Ok(pipeline) = std::env::var("DECODE_BENCH_ONCE") {
        let result = match pipeline.as_str() {
            "none" => 0,
            "ours_with_deltas" => ours(&chunks, DeltaMode::All, Take::Borrowed),
            "ours_skip_arg_fragments" => ours(&chunks, DeltaMode::SkipArgFragments, Take::Borrowed),
            "ours_assemble_only" => ours(&chunks, DeltaMode::AssembleOnly, Take::Borrowed),
            "ours_with_owned_deltas" => ours(&chunks, DeltaMode::All, Take::Owned),
            "serde_json_value_baseline" => value_baseline(&stream),
            "serde_json_ignored_any_floor" => ignored_any_floor(&stream),
            "peer_eventsource_owned_structs" => peer(&chunks),
            "reasoning_ours_with_deltas" => {
                ours_reasoning(&reasoning_chunks, DeltaMode::All, Take::Borrowed)
            }
            "reasoning_ours_assemble_only" => {
                ours_reasoning(&reasoning_chunks, DeltaMode::AssembleOnly, Take::Borrowed)
            }
            "reasoning_ours_with_owned_deltas" => {
                ours_reasoning(&reasoning_chunks, DeltaMode::All, Take::Owned)
            }
            "reasoning_serde_json_value_baseline" => value_baseline(&reasoning_stream),
            "reasoning_serde_json_ignored_any_floor" => ignored_any_floor(&reasoning_stream),
            other => panic!("unknown pipeline {other}"),
        };
        println!("{pipeline}: {}", black_box(result));
        return;
    }
    let plain = (&stream[..], events);
    let reasoning = (&reasoning_stream[..], reasoning_events);
    let pipelines: [Reported<'_>; 11] = [
        ("ours_with_deltas", plain, &|| {
            ours(&chunks, DeltaMode::All, Take::Borrowed)
        }),
        ("ours_skip_arg_fragments", plain, &|| {
            ours(&chunks, DeltaMode::SkipArgFragments, Take::Borrowed)
        }),
        ("ours_assemble_only", plain, &|| {
            ours(&chunks, DeltaMode::AssembleOnly, Take::Borrowed)
        }),
        ("ours_with_owned_deltas", plain, &|| {
            ours(&chunks, DeltaMode::All, Take::Owned)
        }),
        ("serde_json_value_baseline", plain, &|| {
            value_baseline(&stream)
        }),
        ("peer_eventsource_owned_structs", plain, &|| peer(&chunks)),
        ("reasoning_ours_with_deltas", reasoning, &|| {
            ours_reasoning(&reasoning_chunks, DeltaMode::All, Take::Borrowed)
        }),
        ("reasoning_ours_skip_arg_fragments", reasoning, &|| {
            ours_reasoning(
                &reasoning_chunks,
                DeltaMode::SkipArgFragments,
                Take::Borrowed,
            )
        }),
        ("reasoning_ours_assemble_only", reasoning, &|| {
            ours_reasoning(&reasoning_chunks, DeltaMode::AssembleOnly, Take::Borrowed)
        }),
        ("reasoning_ours_with_owned_deltas", reasoning, &|| {
            ours_reasoning(&reasoning_chunks, DeltaMode::All, Take::Owned)
        }),
        ("reasoning_serde_json_value_baseline", reasoning, &|| {
            value_baseline(&reasoning_stream)
        }),
    ];
    for (name, (stream, events), run) in pipelines {
        let allocations = allocations_per_event(GLOBAL, events, run);
        decode_bench::report_allocations(name, events, stream.len(), allocations);
    }

    let mut criterion = Criterion::default().configure_from_args();
    let mut group = criterion.benchmark_group("decode");
    group.throughput(Throughput::Bytes(stream.len() as u64));
    group.sample_size(10);
    group.bench_function("ours_with_deltas", |b| {
        b.iter(|| ours(black_box(&chunks), DeltaMode::All, Take::Borrowed))
    });
    group.bench_function("ours_assemble_only", |b| {
        b.iter(|| ours(black_box(&chunks), DeltaMode::AssembleOnly, Take::Borrowed))
    });
    group.bench_function("ours_with_owned_deltas", |b| {
        b.iter(|| ours(black_box(&chunks), DeltaMode::All, Take::Owned))
    });
    group.bench_function("serde_json_value_baseline", |b| {
        b.iter(|| value_baseline(black_box(&stream)))
    });
    group.bench_function("serde_json_ignored_any_floor", |b| {
        b.iter(|| ignored_any_floor(black_box(&stream)))
    });
    group.bench_function("peer_eventsource_owned_structs", |b| {
        b.iter(|| peer(black_box(&chunks)))
    });
    group.finish();
    let mut group = criterion.benchmark_group("decode_reasoning");
    group.throughput(Throughput::Bytes(reasoning_stream.len() as u64));
    group.sample_size(10);
    group.bench_function("ours_with_deltas", |b| {
        b.iter(|| ours_reasoning(black_box(&reasoning_chunks), DeltaMode::All, Take::Borrowed))
    });
    group.bench_function("ours_assemble_only", |b| {
        b.iter(|| {
            ours_reasoning(
                black_box(&reasoning_chunks),
                DeltaMode::AssembleOnly,
                Take::Borrowed,
            )
        })
    });
    group.bench_function("ours_with_owned_deltas", |b| {
        b.iter(|| ours_reasoning(black_box(&reasoning_chunks), DeltaMode::All, Take::Owned))
    });
    group.bench_function("serde_json_value_baseline", |b| {
        b.iter(|| value_baseline(black_box(&reasoning_stream)))
    });
    group.bench_function("serde_json_ignored_any_floor", |b| {
        b.iter(|| ignored_any_floor(black_box(&reasoning_stream)))
    });
    group.finish();
    criterion.final_summary();
}
