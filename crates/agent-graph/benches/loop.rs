//! Loop overhead per iteration: one run of 10 tool-call turns of a trivial read-only
//! tool, then a text turn, against an instant scripted model. Reported time is per
//! loop iteration (a run's time / 11). Target: <= 50 us per iteration.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_graph::{RunDeps, RunRequest, run};
use agent_testing::{ScriptedModel, Turn};
use ai_core::{
    Message, Redaction, RegisteredTool, RunContext, ToolCallContext, ToolEffect, ToolExecutor,
    ToolFailure, ToolId, ToolOutput, ToolPolicy, ToolRunner, ToolSpec,
};
use criterion::{Criterion, criterion_group, criterion_main};
use futures::future::BoxFuture;
use serde_json::{Value, json};

const TOOL_TURNS: usize = 10;
const ITERATIONS: u32 = TOOL_TURNS as u32 + 1;

struct Echo;

impl ToolExecutor for Echo {
    fn execute(
        &self,
        _cx: ToolCallContext,
        args: Value,
    ) -> BoxFuture<'static, Result<ToolOutput, ToolFailure>> {
        Box::pin(async move { Ok(ToolOutput::json(json!({"echo": args["text"]}))) })
    }
}

fn deps(model: ScriptedModel) -> RunDeps {
    let spec = ToolSpec::new(
        ToolId::core("echo").unwrap(),
        "Echoes its text.",
        json!({"type": "object", "properties": {"text": {"type": "string"}},
               "required": ["text"], "additionalProperties": false}),
        ToolEffect::ReadOnly,
    )
    .with_redaction(Redaction::new(["$"], ["$"]).unwrap());
    let runner = ToolRunner::new(
        vec![RegisteredTool {
            spec,
            executor: Arc::new(Echo),
        }],
        ToolPolicy::allowing(["core__*"]),
    )
    .unwrap();
    let catalog = runner.catalog(&RunContext::new("r", "t"));
    RunDeps {
        model: Arc::new(model),
        runner: Arc::new(runner),
        catalog: Arc::new(catalog),
    }
}

fn script() -> Vec<Turn> {
    let mut turns: Vec<Turn> = (0..TOOL_TURNS)
        .map(|i| {
            Turn::new()
                .tool_call(format!("call_{i}"), "core__echo", json!({"text": "hi"}))
                .usage(10, 2)
        })
        .collect();
    turns.push(Turn::text("all done").usage(10, 2));
    turns
}

fn loop_overhead(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let script = script();
    let mut group = c.benchmark_group("loop");
    group.bench_function("per_iteration", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let model = ScriptedModel::new(script.clone()).without_request_log();
                let deps = deps(model);
                let request = RunRequest::new(
                    RunContext::new("run", "trace"),
                    "bench-model",
                    vec![Message::system("sys"), Message::user("go")],
                );
                let started = Instant::now();
                let output = runtime.block_on(async { run(request, deps).outcome.await });
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
