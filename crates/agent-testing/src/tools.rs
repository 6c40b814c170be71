//! Tools for tests: an echo tool and a one-call runner.

use std::sync::{Arc, Mutex};

use ai_core::{
    AiEvent, CancellationToken, RunContext, ToolEffect, ToolId, ToolPolicy, ToolRunner, ToolSpec,
    runner::{ToolCall, ToolExecution},
    tool::{Redaction, RegisteredTool, ToolCallContext, ToolExecutor, ToolFailure, ToolOutput},
};
use futures::future::BoxFuture;
use serde_json::{Value, json};

use crate::Turn;

/// What [`ToolExecutor::execute`] returns: the future of one call's output or
/// failure (an alias that keeps test executors' signatures on one line).
pub type ToolFuture = BoxFuture<'static, Result<ToolOutput, ToolFailure>>;

/// Executor of [`echo_tool`]: returns `{"echo": <the `text` argument>}`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Echo;

impl ToolExecutor for Echo {
    fn execute(&self, _cx: ToolCallContext, args: Value) -> ToolFuture {
        Box::pin(async move { Ok(ToolOutput::json(json!({"echo": args["text"]}))) })
    }
}

/// A script of `calls` turns that each call [`echo_tool`] once (`call_0`,
/// `call_1`, ...), then a text turn ("all done"); every turn reports 10 prompt
/// and 2 completion tokens. The run the loop benchmarks time.
pub fn echo_loop_script(calls: usize) -> Vec<Turn> {
    let call = |i| Turn::new().tool_call(format!("call_{i}"), "app__echo", json!({"text": "hi"}));
    let mut turns: Vec<Turn> = (0..calls).map(|i| call(i).usage(10, 2)).collect();
    turns.push(Turn::text("all done").usage(10, 2));
    turns
}

/// The argument schema of [`echo_tool`]: `{"text": string}`, required, nothing else.
pub fn echo_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
        "additionalProperties": false
    })
}

/// `app__echo`: a read-only tool whose output is `{"echo": text}`; every argument
/// and output field may reach events.
pub fn echo_tool() -> RegisteredTool {
    echo_tool_with_id("app__echo")
}

/// [`echo_tool`] under another id (any namespace, e.g. `core__echo` to stand in for
/// a built-in).
///
/// # Panics
/// When `id` is not a valid tool id: this is a test helper, and a bad id is a bug in
/// the test.
#[allow(clippy::expect_used)]
pub fn echo_tool_with_id(id: &str) -> RegisteredTool {
    let id = ToolId::parse(id).expect("echo_tool_with_id: a valid tool id");
    let redaction = Redaction::new(["$"], ["$"]).unwrap_or_default();
    RegisteredTool {
        spec: ToolSpec::new(id, "Echoes its text.", echo_schema(), ToolEffect::ReadOnly)
            .with_redaction(redaction)
            .with_origin("test"),
        executor: Arc::new(Echo),
    }
}

/// Runs one call of `tool` with the raw argument text `arguments` through a real
/// [`ToolRunner`] whose policy allows it without approval; returns the execution and
/// every event emitted.
///
/// # Panics
/// When the runner refuses the tool (a colliding or invalid spec): a bug in the test.
#[allow(clippy::expect_used)]
pub async fn run_one(
    tool: &RegisteredTool,
    arguments: &str,
    cancel: &CancellationToken,
) -> (ToolExecution, Vec<AiEvent>) {
    let id = tool.spec.id.as_str().to_owned();
    let runner = ToolRunner::new(
        vec![tool.clone()],
        ToolPolicy::allowing([id.clone()]).with_approval_for([]),
    )
    .expect("run_one: the runner accepts the tool");
    let ctx = RunContext::new("run-1", "trace-1");
    let catalog = runner.catalog(&ctx);
    let events = Mutex::new(Vec::new());
    let sink = |e: AiEvent| {
        if let Ok(mut events) = events.lock() {
            events.push(e);
        }
    };
    let exec = runner
        .exec(
            &ctx,
            &catalog,
            ToolCall::new("call-1", id, arguments),
            cancel,
            &sink,
            &ai_core::runner::CallScope::default(),
        )
        .await;
    (exec, events.into_inner().unwrap_or_default())
}
