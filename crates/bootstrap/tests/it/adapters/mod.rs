//! Tests of the real adapters, each through the real `ToolRunner`.

mod bind;
mod files;
mod memory;
mod sandbox;
mod shell;
mod web;

use std::sync::Mutex;

use ai_core::{
    AiEvent, CancellationToken, RegisteredTool, RunContext, ToolCall, ToolExecution, ToolPolicy,
    ToolRunner,
};
use serde_json::Value;

/// Runs one call through a runner holding `tool`, allowed by policy, without approval.
pub(crate) async fn run(tool: &RegisteredTool, args: &Value) -> ToolExecution {
    run_with(tool, args, &CancellationToken::new()).await.0
}

/// Like [`run`], with a cancellation token; also returns the events.
pub(crate) async fn run_with(
    tool: &RegisteredTool,
    args: &Value,
    cancel: &CancellationToken,
) -> (ToolExecution, Vec<AiEvent>) {
    let id = tool.spec.id.as_str().to_owned();
    let runner = ToolRunner::new(
        vec![tool.clone()],
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
            ToolCall::new("call-1", id, args.to_string()),
            cancel,
            &sink,
        )
        .await;
    (exec, events.into_inner().unwrap())
}
