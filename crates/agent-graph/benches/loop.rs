//! Loop overhead per iteration: one run of 10 tool-call turns of a trivial read-only
//! tool, then a text turn, against an instant scripted model. Reported time is per
//! loop iteration (a run's time / 11). Target: <= 50 us per iteration.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use agent_graph::Agent;
use agent_testing::{ScriptedModel, echo_loop_script, echo_tool};
use ai_core::{Message, RunContext};
use criterion::{Criterion, criterion_group, criterion_main};

const TOOL_TURNS: usize = 10;
const ITERATIONS: u32 = TOOL_TURNS as u32 + 1;

fn loop_overhead(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let script = echo_loop_script(TOOL_TURNS);
    let mut group = c.benchmark_group("loop");
    group.bench_function("per_iteration", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let model = ScriptedModel::new(script.clone()).without_request_log();
                let agent = Agent::builder(model)
                    .system("sys")
                    .tool(echo_tool())
                    .build()
                    .unwrap();
                let started = Instant::now();
                let output = runtime.block_on(async {
                    agent
                        .run_with(RunContext::new("run", "trace"), vec![Message::user("go")])
                        .into_outcome()
                        .await
                });
                total += started.elapsed();
                let output = output.unwrap();
                black_box(output);
            }
            total / ITERATIONS
        });
    });
    group.finish();
}

criterion_group!(benches, loop_overhead);
criterion_main!(benches);
