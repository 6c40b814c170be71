//! Cost of one call through `ToolRunner::exec` against the bare minimum (parse the
//! arguments and call the executor), with a catalog of 1 and of 1000 tools.
//!
//! Knows only ai-core's public API; the tool, its schema and the sink are stand-ins.
//! Run with `cargo bench -p toolwright-ai-core --bench runner`.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::hint::black_box;
use std::sync::Arc;

use ai_core::{
    AiEvent, CancellationToken, RunContext, ToolEffect, ToolId, ToolPolicy, ToolRunner,
    event::EventSink,
    runner::{CallScope, ToolCall},
    tool::{Redaction, RegisteredTool, ToolCallContext, ToolExecutor},
};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::Value;

const ARGS: &str = r#"{"a": 1, "b": "x"}"#;
const TOOL: &str = "core__small";

/// The integration tests' support module: the same echo executor and spec helpers.
#[allow(dead_code, unreachable_pub)]
#[path = "../tests/it/support.rs"]
mod support;

struct NoopSink;

impl EventSink for NoopSink {
    fn emit(&self, event: AiEvent) {
        black_box(event);
    }
}

fn tool(id: &str) -> RegisteredTool {
    let spec = support::spec(id, support::ab_schema(), ToolEffect::ReadOnly)
        .with_redaction(Redaction::new(["a"], ["a", "b"]).unwrap());
    support::registered(spec, support::Echo)
}

fn runner(extra_tools: usize) -> ToolRunner {
    let mut tools = vec![tool(TOOL)];
    tools.extend((0..extra_tools).map(|i| tool(&format!("core__t{i:04}"))));
    ToolRunner::new(tools, ToolPolicy::allowing(["core__*"])).unwrap()
}

fn bench_runner(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let run = RunContext::new("run-bench", "trace-bench");
    let cancel = CancellationToken::new();
    let sink = NoopSink;

    let mut group = c.benchmark_group("tool_runner");
    for (label, extra) in [("exec_catalog_1", 0), ("exec_catalog_1000", 999)] {
        let runner = runner(extra);
        let catalog = runner.catalog(&run);
        assert_eq!(catalog.len(), extra + 1);
        let check = rt.block_on(runner.exec(
            &run,
            &catalog,
            ToolCall::new("call-1", TOOL, ARGS),
            &cancel,
            &sink,
            &CallScope::default(),
        ));
        assert!(check.result.ok, "{check:?}");
        group.bench_function(label, |b| {
            b.iter(|| {
                let call = ToolCall::new("call-1", TOOL, black_box(ARGS));
                black_box(rt.block_on(runner.exec(
                    &run,
                    &catalog,
                    call,
                    &cancel,
                    &sink,
                    &CallScope::default(),
                )))
            })
        });
    }

    // Baseline: what any tool call must do at least (parse, then run the tool).
    let executor: Arc<dyn ToolExecutor> = Arc::new(support::Echo);
    let cx = ToolCallContext::new(
        run.clone(),
        "call-1",
        ToolId::parse(TOOL).unwrap(),
        cancel.clone(),
    );
    group.bench_function("baseline_parse_and_execute", |b| {
        b.iter(|| {
            let args: Value = serde_json::from_str(black_box(ARGS)).unwrap();
            black_box(rt.block_on(executor.execute(cx.clone(), args)).unwrap())
        })
    });
    group.finish();
}

criterion_group!(benches, bench_runner);
criterion_main!(benches);
