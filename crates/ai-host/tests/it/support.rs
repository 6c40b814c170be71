//! Shared helpers: one call through a real `ToolRunner`.

use ai_core::{
    AiEvent, CancellationToken,
    runner::ToolExecution,
    tool::{RegisteredTool, ToolErrorCode},
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
    agent_testing::run_one(tool, &args.to_string(), cancel).await
}

/// Runs each of `cases`, (arguments, the error they must fail with), with
/// `tool`.
pub(crate) async fn assert_each_refused(
    tool: &RegisteredTool,
    cases: impl IntoIterator<Item = (Value, ToolErrorCode)>,
) {
    for (args, code) in cases {
        let exec = run(tool, &args).await;
        assert_eq!(exec.result.error_code, Some(code), "{args}");
    }
}
