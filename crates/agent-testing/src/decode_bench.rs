//! The decode benches of the wire crates, written once: a deterministic generator for
//! their synthetic streams, network-sized chunks, a counting allocator and the
//! allocations per event it measures, and the comparison every bench runs: the
//! wire's decoder against the limit of parsing each `data:` payload into a
//! `serde_json::Value` (no assembly), throughput in bytes per second (criterion).
//!
//! The counting allocator must be the bench binary's global allocator, declared
//! there:
//!
//! ```ignore
//! use agent_testing::decode_bench::{self, CountingAllocator};
//!
//! #[global_allocator]
//! static GLOBAL: &CountingAllocator = &decode_bench::COUNTING;
//! ```

// Bench helpers: a panic is a bench failure.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::alloc::System;
use std::hint::black_box;

use ai_core::completion::{CompletionDelta, CompletionError, CompletionFinal};
use criterion::{Criterion, Throughput};
use stats_alloc::{Region, StatsAlloc};

/// A global allocator that counts allocations (the system allocator underneath).
pub type CountingAllocator = StatsAlloc<System>;

/// The one counting allocator: a bench binary's `#[global_allocator]` refers to it.
pub use stats_alloc::INSTRUMENTED_SYSTEM as COUNTING;

/// A small deterministic generator (xorshift).
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Default for Rng {
    /// The generator every bench's stream is drawn from.
    fn default() -> Self {
        Self(0x2545_f491_4f6c_dd1d)
    }
}

impl Rng {
    /// The next number.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number from `low` to `high`, both included.
    pub fn range(&mut self, low: usize, high: usize) -> usize {
        low + (self.next_u64() % (high - low + 1) as u64) as usize
    }

    /// One of `words`.
    pub fn pick<'w>(&mut self, words: &[&'w str]) -> &'w str {
        words[self.range(0, words.len() - 1)]
    }

    /// A piece of a streamed delta: `words` drawn until it is at least 4 to 16
    /// bytes long.
    pub fn piece(&mut self, words: &[&str]) -> String {
        let mut piece = String::new();
        let want = self.range(4, 16);
        while piece.len() < want {
            piece.push_str(self.pick(words));
        }
        piece
    }
}

/// A synthetic stream of server-sent events being written, and how many events
/// it holds.
#[derive(Debug, Default)]
pub struct SseWriter {
    out: String,
    events: usize,
}

impl SseWriter {
    /// An empty stream.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends one event of type `kind` carrying `data`.
    pub fn event(&mut self, kind: &str, data: &str) {
        sse_event(&mut self.out, kind, data);
        self.events += 1;
    }

    /// The stream's length so far, in bytes.
    #[must_use]
    pub fn len(&self) -> usize {
        self.out.len()
    }

    /// Whether nothing was written yet.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.out.is_empty()
    }

    /// The stream's bytes and its event count.
    #[must_use]
    pub fn finish(self) -> (Vec<u8>, usize) {
        (self.out.into_bytes(), self.events)
    }
}

/// Words of streamed text, written as JSON string content: escapes and non-ASCII.
pub const TEXT_WORDS: [&str; 8] = [
    "think ",
    "about ",
    "\\\"it\\\" ",
    "déjà ",
    "vu ",
    "\\n",
    "日本 ",
    "ok ",
];

/// Pieces of streamed tool-call arguments, written as JSON string content: escapes
/// and non-ASCII.
pub const ARGUMENT_PARTS: [&str; 6] = ["abcd", "ef\\\"gh", "ijklmnop", "q\\\\r", "stuvwxyz", "é"];

/// Appends one server-sent event of type `kind` carrying `data`.
pub fn sse_event(out: &mut String, kind: &str, data: &str) {
    out.push_str("event: ");
    out.push_str(kind);
    out.push_str("\ndata: ");
    out.push_str(data);
    out.push_str("\n\n");
}

/// How a wire writes the events of [`reasoning_then_calls`]: a stream's start,
/// reasoning text streamed in pieces, three tool calls whose arguments stream in
/// pieces, the stream's end. Pieces are JSON string content.
pub trait ReasoningThenCalls {
    /// The events before the reasoning text (the response's, the reasoning
    /// block's start).
    fn start(&self, out: &mut SseWriter);
    /// One piece of reasoning text.
    fn reasoning(&self, out: &mut SseWriter, piece: &str);
    /// The end of the reasoning (its signature or encrypted content).
    fn reasoning_end(&self, out: &mut SseWriter);
    /// The start of call `call` (0, 1 or 2), before its arguments.
    fn call_start(&self, out: &mut SseWriter, call: usize);
    /// One piece of call `call`'s arguments.
    fn arguments(&self, out: &mut SseWriter, call: usize, piece: &str);
    /// The end of call `call`, after its arguments; nothing by default.
    fn call_end(&self, _out: &mut SseWriter, _call: usize) {}
    /// The events after the calls (the stop reason, usage, the end).
    fn end(&self, out: &mut SseWriter);
}

/// The stream of about `target_bytes` a wire with streamed reasoning and
/// streamed call arguments is benched on, written by `wire`: reasoning in 4-16
/// byte pieces of [`TEXT_WORDS`] for half of it, then three `core__write_file`
/// calls whose `content` arrives in 4-16 byte pieces of [`ARGUMENT_PARTS`], a
/// sixth of it each. Returns the stream and its event count.
pub fn reasoning_then_calls(
    wire: &impl ReasoningThenCalls,
    target_bytes: usize,
) -> (Vec<u8>, usize) {
    let mut rng = Rng::default();
    let mut out = SseWriter::new();
    wire.start(&mut out);
    let budget = target_bytes / 2;
    while out.len() < budget {
        wire.reasoning(&mut out, &rng.piece(&TEXT_WORDS));
    }
    wire.reasoning_end(&mut out);
    for call in 0..3 {
        wire.call_start(&mut out, call);
        let head = format!(r#"{{\"path\": \"f{call}.txt\", \"content\": \""#);
        wire.arguments(&mut out, call, &head);
        let until = budget + (call + 1) * budget / 3;
        while out.len() < until {
            wire.arguments(&mut out, call, &rng.piece(&ARGUMENT_PARTS));
        }
        wire.arguments(&mut out, call, r#"\"}"#);
        wire.call_end(&mut out, call);
    }
    wire.end(&mut out);
    out.finish()
}

/// Feeds every chunk to `decoder`, taking its deltas owned into one reused buffer,
/// and finishes it: the turn and how many deltas were emitted.
///
/// # Panics
/// When the stream fails to decode.
pub fn decode_owned<D, E: std::fmt::Debug>(
    mut decoder: D,
    chunks: &[&[u8]],
    mut feed: impl FnMut(&mut D, &[u8], &mut Vec<CompletionDelta>) -> Result<(), E>,
    finish: impl FnOnce(D) -> Result<CompletionFinal, CompletionError>,
) -> (CompletionFinal, usize) {
    let mut deltas = Vec::with_capacity(64);
    let mut count = 0;
    for chunk in chunks {
        feed(&mut decoder, chunk, &mut deltas).unwrap();
        count += deltas.len();
        deltas.clear();
    }
    (finish(decoder).unwrap(), count)
}

/// The bench of a wire whose decoder is fed owned deltas: the stream `body` of
/// `events` events, cut into [`network_chunks`], decoded by a decoder from `new`
/// through `feed` and `finish` (the turn must hold `tool_calls` calls), compared
/// against [`value_baseline`] in criterion group `group` (see [`compare`]).
///
/// # Panics
/// When the stream fails to decode or the turn holds another number of calls.
pub fn bench_decoder<D, E: std::fmt::Debug>(
    counter: &'static CountingAllocator,
    group: &str,
    (body, events): (Vec<u8>, usize),
    new: impl Fn() -> D,
    feed: impl Fn(&mut D, &[u8], &mut Vec<CompletionDelta>) -> Result<(), E>,
    finish: impl Fn(D) -> Result<CompletionFinal, CompletionError>,
    tool_calls: usize,
) {
    let chunks = network_chunks(&body, 7);
    let ours = |chunks: &[&[u8]]| {
        let (turn, deltas) = decode_owned(new(), chunks, &feed, &finish);
        assert_eq!(turn.tool_calls.len(), tool_calls);
        deltas
    };
    compare(counter, group, &body, &chunks, events, ours);
}

/// `body` cut into network-sized chunks of 1.4 to 16 KiB, drawn from `Rng(seed)`.
#[must_use]
pub fn network_chunks(body: &[u8], seed: u64) -> Vec<&[u8]> {
    let mut rng = Rng(seed);
    let mut out = Vec::new();
    let mut at = 0;
    while at < body.len() {
        let end = (at + rng.range(1400, 16 * 1024)).min(body.len());
        out.push(&body[at..end]);
        at = end;
    }
    out
}

/// The limit of a `serde_json::Value` decoder: every `data:` payload of the whole
/// buffer (but `[DONE]`) parsed into a `Value`; no framing state, no assembly.
/// Returns how many were parsed.
///
/// # Panics
/// When the body is no UTF-8 or a payload no JSON.
#[must_use]
pub fn value_baseline(body: &[u8]) -> usize {
    let text = std::str::from_utf8(body).unwrap();
    let mut parsed = 0;
    for data in text.lines().filter_map(|line| line.strip_prefix("data: ")) {
        if data == "[DONE]" {
            continue;
        }
        black_box(serde_json::from_str::<serde_json::Value>(data).unwrap());
        parsed += 1;
    }
    parsed
}

/// Allocations made by one call of `run`, per event of a stream of `events`
/// events, and in all. `counter` must be the binary's global allocator.
pub fn allocations_per_event(
    counter: &'static CountingAllocator,
    events: usize,
    run: impl FnOnce() -> usize,
) -> (f64, usize) {
    let region = Region::new(counter);
    black_box(run());
    let stats = region.change();
    (stats.allocations as f64 / events as f64, stats.allocations)
}

/// Prints the allocations of one pipeline on a stream of `events` events and
/// `bytes` bytes: one line, before the timings.
pub fn report_allocations(name: &str, events: usize, bytes: usize, (per_event, _): (f64, usize)) {
    println!("{name}: {events} events, {per_event:.3} allocations per event, {bytes} bytes");
}

/// The comparison every wire's bench runs on its stream `body` of `events` SSE
/// events: `ours` (the wire's decoder fed `chunks`, the stream's network chunks;
/// returns anything that depends on the result) against [`value_baseline`] over
/// `body`. Prints the allocations per event of each, then measures both in
/// criterion group `group` with the stream's bytes as throughput.
pub fn compare(
    counter: &'static CountingAllocator,
    group: &str,
    body: &[u8],
    chunks: &[&[u8]],
    events: usize,
    ours: impl Fn(&[&[u8]]) -> usize,
) {
    let pipelines: [(&str, &dyn Fn() -> usize); 2] = [
        ("ours", &|| ours(chunks)),
        ("serde_json_value_baseline", &|| value_baseline(body)),
    ];
    for (name, run) in pipelines {
        report_allocations(
            name,
            events,
            body.len(),
            allocations_per_event(counter, events, run),
        );
    }
    let mut criterion = Criterion::default().configure_from_args();
    let mut group = criterion.benchmark_group(group);
    group.throughput(Throughput::Bytes(body.len() as u64));
    group.bench_function("ours", |b| b.iter(|| ours(black_box(chunks))));
    group.bench_function("serde_json_value_baseline", |b| {
        b.iter(|| value_baseline(black_box(body)))
    });
    group.finish();
    criterion.final_summary();
}
