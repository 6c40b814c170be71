//! What a durable run's journal adds to each loop iteration: one run of 10
//! tool-call turns of a trivial `state_change` tool (each call records an intent
//! and a result: three steps per turn with its model step), then a text turn,
//! against an instant scripted model. Reported time is per loop iteration (a
//! run's time / 11), side by side:
//!
//! - `off`: `run::run`, no journal;
//! - `memory`: `run::durable` with `journal::MemoryJournal` (the seam's own cost:
//!   capturing each step's events, serializing nothing);
//! - `sqlite`: `run::durable` with the server's `StoreJournal` on a SQLite store
//!   in a temporary folder (WAL, `synchronous = NORMAL`): every step a row
//!   written and awaited before the run goes on, as `agent serve` does.
//!
//! `cargo bench -p toolwright-agent-server --bench journal`

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_durable::StoreJournal;
use agent_graph::journal::{MemoryJournal, RunStart, StepJournal};
use agent_graph::run::{self, RunDeps, RunRequest};
use agent_testing::{ScriptedModel, echo_loop_script, echo_tool};
use ai_core::{Message, RunContext, ToolEffect, ToolPolicy, ToolRunner};
use criterion::{Criterion, criterion_group, criterion_main};

const TOOL_TURNS: usize = 10;

/// Makes the journal of one run.
type MakeJournal<'a> = dyn Fn() -> Arc<dyn StepJournal> + 'a;
const ITERATIONS: u32 = TOOL_TURNS as u32 + 1;

fn deps(model: ScriptedModel) -> RunDeps {
    let mut tool = echo_tool();
    tool.spec.effect = ToolEffect::StateChange;
    let policy = ToolPolicy::allowing(["app__*"]).with_approval_for([]);
    let runner = ToolRunner::new(vec![tool], policy).unwrap();
    let catalog = runner.catalog(&RunContext::new("run", "trace"));
    RunDeps {
        model: Arc::new(model),
        runner: Arc::new(runner),
        catalog: Arc::new(catalog),
    }
}

/// Every run has its own id, so no run replays another's steps.
fn request(n: u64) -> RunRequest {
    RunRequest::new(
        RunContext::new(format!("run-{n}"), "trace"),
        "m",
        vec![Message::system("sys"), Message::user("go")],
    )
}

fn journal_overhead(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = runtime
        .block_on(agent_store::Store::open_sqlite(
            &dir.path().join("bench.db"),
        ))
        .unwrap();
    let memory: Arc<dyn StepJournal> = Arc::new(MemoryJournal::new());
    let in_memory = || Arc::clone(&memory);
    // A store journal serves one run (it reads the run's steps once).
    let sqlite =
        || -> Arc<dyn StepJournal> { Arc::new(StoreJournal::new(store.clone(), "bench", None)) };
    let journals: Vec<(&str, Option<&MakeJournal<'_>>)> = vec![
        ("off", None),
        ("memory", Some(&in_memory)),
        ("sqlite", Some(&sqlite)),
    ];
    let script = echo_loop_script(TOOL_TURNS);
    let mut group = c.benchmark_group("journal");
    let mut n = 0u64;
    for (name, journal) in journals {
        group.bench_function(format!("per_iteration/{name}"), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    n += 1;
                    let deps = deps(ScriptedModel::new(script.clone()).without_request_log());
                    let started = Instant::now();
                    let output = runtime.block_on(async {
                        let handle = match &journal {
                            None => run::run(request(n), deps),
                            Some(journal) => {
                                let start = RunStart::New {
                                    request: request(n),
                                };
                                run::durable(start, deps, journal())
                            }
                        };
                        handle.into_outcome().await
                    });
                    total += started.elapsed();
                    black_box(output.unwrap());
                }
                total / ITERATIONS
            });
        });
    }
    group.finish();
}

criterion_group!(benches, journal_overhead);
criterion_main!(benches);
