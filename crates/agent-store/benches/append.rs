//! Event-log appends per second, on SQLite (a file, WAL) and on a real Postgres
//! (Debian's server on loopback, as the tests start it), side by side: one event
//! per transaction (a recorder flushing a lone event) and 32 per transaction (a
//! recorder's batch).
//!
//! Run: `cargo bench -p toolwright-agent-store --bench append -- --warm-up-time 1 --measurement-time 3`
//! (Postgres needs Debian's `postgresql` package; without it only SQLite runs).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::atomic::{AtomicU64, Ordering};

use agent_store::Store;
use ai_core::event::AiEventKind;
use ai_core::{AiEvent, RunContext};
use criterion::{Criterion, Throughput};

fn events(n: usize) -> Vec<AiEvent> {
    let ctx = RunContext::new("run-bench", "trace-bench");
    (0..n)
        .map(|i| {
            AiEvent::new(
                &ctx,
                AiEventKind::TextDelta {
                    delta: format!("a merged run of deltas, about sixty bytes long ({i})"),
                },
            )
        })
        .collect()
}

fn bench_store(c: &mut Criterion, name: &str, runtime: &tokio::runtime::Runtime, store: &Store) {
    let mut group = c.benchmark_group(format!("append/{name}"));
    for batch in [1usize, 32] {
        let batch_events = events(batch);
        let next = AtomicU64::new(0);
        group.throughput(Throughput::Elements(batch as u64));
        group.bench_function(format!("{batch}_per_transaction"), |b| {
            b.iter(|| {
                let seq = next.fetch_add(batch as u64, Ordering::Relaxed);
                runtime
                    .block_on(store.account("bench").append_events(
                        &format!("run-{batch}"),
                        seq,
                        &batch_events,
                        0,
                    ))
                    .unwrap();
            });
        });
    }
    group.finish();
}

fn main() {
    common::on_each_store("append", bench_store);
}
