//! What keeping a streaming response for reattaching clients costs per frame:
//! a response's 200 UI message stream `text-delta` frames of 22 bytes of text
//! each (the relay bench's deltas), pushed into a new [`Replay`] with no reader
//! (each merged into the one frame of its part, as a long answer is kept), then
//! the response's end. Reported time is per response; divide by 200 for a
//! frame.
//!
//! `cargo bench -p toolwright-agent-server --bench replay`

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;

use agent_server::resume::ActiveStreams;
use axum::body::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};

const FRAMES: usize = 200;

/// The frames one response writes: its part's start, the deltas, its end.
fn frames() -> Vec<Bytes> {
    let mut frames = vec![Bytes::from_static(
        b"data: {\"id\":\"t1\",\"type\":\"text-start\"}\n\n",
    )];
    for i in 0..FRAMES {
        let delta = format!("t{i:020} ");
        let chunk = serde_json::json!({"delta": delta, "id": "t1", "type": "text-delta"});
        frames.push(Bytes::from(format!("data: {chunk}\n\n")));
    }
    frames.push(Bytes::from_static(
        b"data: {\"id\":\"t1\",\"type\":\"text-end\"}\n\n",
    ));
    frames
}

fn replay(c: &mut Criterion) {
    let frames = frames();
    let streams = ActiveStreams::default();
    let headers: &'static [(&'static str, &'static str)] = &[];
    c.bench_function("replay/200 text deltas of one part", |b| {
        b.iter(|| {
            let stop = tokio_util::sync::CancellationToken::new();
            let replay = streams.open("chat", headers, stop);
            for frame in &frames {
                replay.push(black_box(frame));
            }
            streams.close("chat", &replay);
            black_box(replay);
        });
    });
}

criterion_group!(benches, replay);
criterion_main!(benches);
