//! What the run store costs a served chat run, in CPU time per run, on SQLite
//! (a file, WAL) and on a real Postgres (Debian's server on loopback, as the
//! tests start it): the store work of a new chat's first run, in the order the
//! chat server does it, without the model or HTTP:
//!
//! - the chat's graph and its stored messages read (one statement);
//! - its turn opened: the thread created and claimed, the user's message, the
//!   run's row and its saved start, in one transaction;
//! - its one model step recorded under the run's fence;
//! - its end written through the batch writer: the status and the thread's
//!   answer, under the fence.
//!
//! Two sizes: `first_turn_cpu` writes a few bytes each (a step body, a
//! one-line answer, no event log), so it measures the statements and round
//! trips; `served_run_cpu` writes what a relay bench run writes (a 9.4 KB step,
//! a 4.4 KB answer, 16 event rows of 275 bytes recorded through the run's
//! recorder), so it measures the bytes too.
//!
//! 64 runs go at once (the end waits for the writer's batch, as served runs
//! do), and the reported time is the **process's CPU time** (user and system,
//! every thread: the runtime's and each SQLite connection's) divided by the
//! runs, not wall time. Postgres's own CPU is in its server processes and is
//! not counted there: that row shows the client side only. The store keeps
//! every run measured (a default run leaves some 10,000 chats in it), so a
//! statement that reads more as the store grows shows here.
//!
//! Run: `cargo bench -p toolwright-agent-store --bench turn`

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use agent_store::{Fence, NewRun, NewTurn, RunEnd, RunRecording, RunStatus, Store, Thread};
use ai_core::event::AiEventKind;
use ai_core::{AiEvent, Message, RunContext};
use criterion::Criterion;
use futures::StreamExt as _;

/// Runs in flight at once.
const AT_ONCE: usize = 64;

/// The CPU time this process has used, every thread's.
fn cpu_time() -> Duration {
    let spent = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(
        u64::try_from(spent.tv_sec).unwrap(),
        u32::try_from(spent.tv_nsec).unwrap(),
    )
}

/// What a run writes: its step body and answer, and the events it records.
#[derive(Clone, Copy)]
struct Sizes {
    /// The model step's JSON body, in bytes.
    step: usize,
    /// The answer's text, in bytes.
    answer: usize,
    /// Event-log rows (merged deltas) and the text of each, in bytes.
    rows: (usize, usize),
}

/// The first bench's sizes: a few bytes each, no event log.
const TINY: Sizes = Sizes {
    step: 0,
    answer: 0,
    rows: (0, 0),
};

/// A streamed answer as the relay bench serves it: 200 deltas of 22 bytes
/// over 4 s (4.4 KB of text), its log 16 rows (deltas merged per 250 ms),
/// and a step holding the turn and its events (the text twice, with JSON).
const SERVED: Sizes = Sizes {
    step: 9_400,
    answer: 4_400,
    rows: (16, 275),
};

/// The store's part of run `n`, a new chat's first.
async fn first_turn(store: &Store, n: u64, sizes: Sizes) {
    let (chat, run_id) = (format!("chat-{n}"), format!("run-{n}"));
    let rows = store.account("bench");
    assert!(rows.graph_and_messages(&chat).await.unwrap().is_none());
    let stored: Vec<agent_store::StoredMessage> = Vec::new();
    let run = NewRun {
        id: run_id.clone(),
        thread_id: Some(chat.clone()),
        graph: "chat".into(),
        model: "model".into(),
        prompt_hash: None,
        owner: "serve:bench".into(),
        started_ms: 0,
    };
    let question = Message::user("What time is it?");
    let turn = NewTurn {
        thread: Thread {
            id: chat.clone(),
            title: "What time is it?".into(),
            graph: "chat".into(),
            created_ms: 0,
            updated_ms: 0,
        },
        kept: 0,
        seen: Some(stored.len() as u64),
        messages: vec![agent_store::TurnMessage {
            id: Some(format!("client-{n}")),
            message: question.clone(),
        }],
        run: run.clone(),
        decisions: Vec::new(),
        start: Some(r#"{"start":"a run's saved start"}"#.into()),
    };
    rows.open_turn(&turn, 0).await.unwrap();
    let fence = Fence {
        owner: run.owner.clone(),
        generation: 0,
    };
    let body = if sizes.step == 0 {
        r#"{"model":"a step's body"}"#.to_owned()
    } else {
        format!(r#"{{"model":"{}"}}"#, "s".repeat(sizes.step))
    };
    rows.record_step(&run_id, (0, "model"), &body, (0, Some(&fence)))
        .await
        .unwrap();
    let answer = if sizes.answer == 0 {
        "It is noon.".to_owned()
    } else {
        "a".repeat(sizes.answer)
    };
    let conversation = [question, Message::assistant(answer)];
    let mut recording = RunRecording::resumed(store.clone(), "bench", &run, None).with_fence(fence);
    let context = RunContext::new(run_id.as_str(), "trace");
    let (count, bytes) = sizes.rows;
    for row in 0..count {
        // Text and reasoning in turn: each delta is a row of its own.
        let delta = "d".repeat(bytes);
        let kind = if row % 2 == 0 {
            AiEventKind::TextDelta { delta }
        } else {
            AiEventKind::ReasoningDelta { delta }
        };
        recording.record(&AiEvent::new(&context, kind)).unwrap();
    }
    let failures = recording
        .finish(RunEnd {
            status: RunStatus::Done,
            error: None,
            conversation: &conversation,
            kept: 0,
            answer_id: Some(format!("answer-{n}")),
        })
        .await;
    assert!(failures.is_empty(), "{failures:?}");
}

fn bench_store(c: &mut Criterion, name: &str, runtime: &tokio::runtime::Runtime, store: &Store) {
    let mut group = c.benchmark_group(format!("turn/{name}"));
    group.measurement_time(Duration::from_secs(8));
    let next = AtomicU64::new(0);
    for (bench, sizes) in [("first_turn_cpu", TINY), ("served_run_cpu", SERVED)] {
        group.bench_function(bench, |b| {
            b.iter_custom(|iters| {
                let first = next.fetch_add(iters, Ordering::Relaxed);
                let before = cpu_time();
                runtime.block_on(
                    futures::stream::iter(first..first + iters)
                        .for_each_concurrent(AT_ONCE, |n| first_turn(store, n, sizes)),
                );
                cpu_time() - before
            });
        });
    }
    group.finish();
}

fn main() {
    common::on_each_store("turn", bench_store);
}
