//! Integration tests of ai-tools: contracts through the real `ToolRunner`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod builtin;
mod contract;
mod time;

use std::sync::Mutex;

use ai_core::{
    AiEvent, CancellationToken, RegisteredTool, RunContext, ToolCall, ToolExecution, ToolPolicy,
    ToolRunner,
};

/// Runs one call through a runner holding `tool`, allowed by policy.
async fn run_one(tool: RegisteredTool, arguments: &str) -> (ToolExecution, Vec<AiEvent>) {
    let id = tool.spec.id.as_str().to_owned();
    let runner = ToolRunner::new(
        vec![tool],
        ToolPolicy::allowing([id.clone()]).with_approval_for([]),
    )
    .expect("runner");
    let ctx = RunContext::new("run-1", "trace-1");
    let catalog = runner.catalog(&ctx);
    let events = Mutex::new(Vec::new());
    let sink = |e: AiEvent| events.lock().unwrap().push(e);
    let exec = runner
        .exec(
            &ctx,
            &catalog,
            ToolCall::new("call-1", id, arguments),
            &CancellationToken::new(),
            &sink,
        )
        .await;
    (exec, events.into_inner().unwrap())
}
