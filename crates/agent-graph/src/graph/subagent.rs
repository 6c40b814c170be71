//! Subagents: a [`Graph`] offered to another graph as the tool `graph__<name>`
//! (invariant SUBAGENTS_BOUNDED).
//!
//! The tool is an ordinary [`RegisteredTool`] whose executor runs a nested loop, so a
//! subagent call goes through `ToolRunner::exec` like any other (validation, policy,
//! approval, timeout, bounding, redaction, one start and one result event). Rules:
//! - a graph offers only the subagents its `subagents` allowlist names
//!   ([`Graph::select_tools`]); [`GraphRegistry::subagent_tools`] refuses unknown
//!   names and a subagent that has subagents of its own ([`GraphError`]);
//! - depth at most 1: the child's catalog holds no `graph__` tool, and the runner
//!   refuses a `graph__` call made from inside a subagent (`depth_exceeded`);
//! - each call has a [`SubagentBudget`] (wall time, model requests, total tokens)
//!   whose overrun ends it with a `budget_exceeded` result naming the budget;
//! - the result is summary-first: the child's final answer, truncated to the budget's
//!   `max_result_bytes` (and then to the runner's result budget);
//! - the child's events go into the parent's one event queue, tagged with the
//!   parent's tool call id (`parent_tool_call_id`) and the child graph (`graph`), with
//!   no `assistant_final`, `error` or `done` of its own; its usage arrives as tagged
//!   `usage_report`s;
//! - the child runs inside the parent's call, on its cancellation token: cancelling
//!   the parent cancels the child, and no task outlives the call;
//! - the child's tools go through the same runner, policy and completion port (the
//!   `NestedPort` of the call's context): it cannot reach a tool the parent's policy
//!   denies.

use std::sync::Arc;
use std::time::Duration;

use ai_core::{
    Message, ToolId, ToolSpec,
    event::EventSink,
    text::bound_text,
    tool::{
        ModelView, Redaction, RegisteredTool, ToolCallContext, ToolErrorCode, ToolExecutor,
        ToolFailure, ToolOutput,
    },
};
use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::{Graph, GraphError, GraphRegistry};
use crate::prompt::Params;
use crate::run::{RunError, RunLimits, run_nested};

/// Budgets of one subagent call. Plain data (loadable from configuration).
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct SubagentBudget {
    /// Wall time of the whole call, in milliseconds (default 120 000).
    pub max_wall_ms: u64,
    /// Model requests of the call (default 8).
    pub max_model_requests: u32,
    /// Total tokens (as reported) of the call (default 50 000).
    pub max_total_tokens: u64,
    /// Bytes of the answer returned to the parent (default 4 096).
    pub max_result_bytes: usize,
}

impl Default for SubagentBudget {
    fn default() -> Self {
        Self {
            max_wall_ms: 120_000,
            max_model_requests: 8,
            max_total_tokens: 50_000,
            max_result_bytes: 4096,
        }
    }
}

impl GraphRegistry {
    /// The subagent tools `parent` may call (its allowlist, in order), each a
    /// `graph__<name>` tool to register with the runner. Fails on an unknown graph or
    /// subagent and on a subagent that has subagents (depth 2).
    pub fn subagent_tools(&self, parent: &str) -> Result<Vec<RegisteredTool>, GraphError> {
        let graph = self
            .get(parent)
            .ok_or_else(|| GraphError::UnknownGraph(parent.to_owned()))?;
        graph
            .subagents
            .iter()
            .map(|name| {
                let child = self.get(name).ok_or_else(|| GraphError::UnknownSubagent {
                    parent: parent.to_owned(),
                    child: name.clone(),
                })?;
                if !child.subagents.is_empty() {
                    return Err(GraphError::DepthExceeded {
                        parent: parent.to_owned(),
                        child: name.clone(),
                    });
                }
                child.subagent_tool()
            })
            .collect()
    }
}

/// The subagent tool's argument schema: a task and optional structured input.
fn input_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "task": {"type": "string", "description": "What the subagent should do, self-contained."},
            "input": {"type": "object", "description": "Optional structured input for the task."}
        },
        "required": ["task"],
        "additionalProperties": false
    })
}

impl Graph {
    /// This graph as the tool `graph__<name>` (arguments `{task, input?}`); register
    /// it with the runner and list the name in a parent's `subagents`.
    pub fn subagent_tool(&self) -> Result<RegisteredTool, GraphError> {
        let id =
            ToolId::graph(&self.name).map_err(|_| GraphError::InvalidName(self.name.clone()))?;
        let redaction = Redaction::new(
            ["task"],
            [
                "graph",
                "answer",
                "truncated",
                "model_requests",
                "total_tokens",
            ],
        )
        .map_err(|_| GraphError::InvalidName(self.name.clone()))?;
        let spec = ToolSpec::new(id, self.description.clone(), input_schema(), self.effect)
            .with_redaction(redaction)
            .with_origin(format!("graph {}", self.name));
        Ok(RegisteredTool {
            spec,
            executor: Arc::new(Subagent {
                graph: Arc::new(self.clone()),
            }),
        })
    }
}

/// The executor of a `graph__` tool.
struct Subagent {
    graph: Arc<Graph>,
}

fn failure(code: ToolErrorCode, message: impl Into<String>) -> ToolFailure {
    ToolFailure::new(code, message)
}

impl ToolExecutor for Subagent {
    fn execute(
        &self,
        cx: ToolCallContext,
        args: Value,
    ) -> BoxFuture<'static, Result<ToolOutput, ToolFailure>> {
        let graph = Arc::clone(&self.graph);
        Box::pin(async move { run_subagent(&graph, cx, args).await })
    }
}

async fn run_subagent(
    graph: &Graph,
    cx: ToolCallContext,
    args: Value,
) -> Result<ToolOutput, ToolFailure> {
    let Some(port) = cx.nested.clone() else {
        return Err(failure(
            ToolErrorCode::ExecutionFailed,
            "a subagent runs only inside an agent loop",
        ));
    };
    if port.depth >= 1 {
        return Err(failure(
            ToolErrorCode::DepthExceeded,
            "a subagent cannot call another subagent (graphs nest at most one level deep)",
        ));
    }
    let task = args["task"].as_str().unwrap_or_default().to_owned();
    let input = args.get("input").and_then(Value::as_object).cloned();
    let params: Params = input.clone().unwrap_or_default();
    let mut user = task;
    if let Some(input) = &input {
        user.push_str("\n\nInput:\n");
        user.push_str(&Value::Object(input.clone()).to_string());
    }
    let mut prepared = graph
        .prepare(
            cx.run.clone(),
            &port.runner,
            &port.model_id,
            vec![Message::user(user)],
            &params,
        )
        .map_err(|e| match e {
            GraphError::Prompt(e) => failure(ToolErrorCode::InvalidArgs, e.to_string()),
            e => failure(ToolErrorCode::ExecutionFailed, e.to_string()),
        })?;
    // The budget caps the graph's own limits.
    let budget = &graph.budget;
    let limits = &mut prepared.request.limits;
    *limits = RunLimits {
        max_model_requests: Some(
            limits
                .max_model_requests
                .map_or(budget.max_model_requests, |l| {
                    l.min(budget.max_model_requests)
                }),
        ),
        max_total_tokens: Some(
            limits
                .max_total_tokens
                .map_or(budget.max_total_tokens, |l| l.min(budget.max_total_tokens)),
        ),
        ..limits.clone()
    };
    let deps = prepared.deps(port.model, port.runner);
    let request = prepared.request;
    let sink: Arc<dyn EventSink> = Arc::new(cx.events.clone());
    let wall = Duration::from_millis(budget.max_wall_ms);
    // Over its wall time the child is cancelled, not dropped: it winds down on its
    // token, so each of its calls still ends with a result event.
    let child_cancel = cx.cancel.child_token();
    let nested = run_nested(request, &deps, sink, &cx.tool_call_id, &child_cancel);
    let mut nested = std::pin::pin!(nested);
    let outcome = tokio::select! {
        biased;
        outcome = nested.as_mut() => Ok(outcome),
        () = tokio::time::sleep(wall) => Err(()),
    };
    if outcome.is_err() {
        child_cancel.cancel();
        let _ = nested.as_mut().await;
    }
    let name = &graph.name;
    let output = match outcome {
        Err(()) => {
            return Err(failure(
                ToolErrorCode::BudgetExceeded,
                format!(
                    "subagent `{name}` exceeded its wall_time budget of {} ms",
                    budget.max_wall_ms
                ),
            ));
        }
        Ok(Err(RunError::UsageLimit { what, limit, .. })) => {
            return Err(failure(
                ToolErrorCode::BudgetExceeded,
                format!("subagent `{name}` exceeded its {what} budget of {limit}"),
            ));
        }
        Ok(Err(RunError::MaxIterations { limit, .. })) => {
            return Err(failure(
                ToolErrorCode::BudgetExceeded,
                format!("subagent `{name}` exceeded its iterations budget of {limit}"),
            ));
        }
        Ok(Err(RunError::Cancelled)) => {
            return Err(failure(
                ToolErrorCode::Cancelled,
                format!("subagent `{name}` was cancelled"),
            ));
        }
        Ok(Err(error)) => {
            return Err(failure(
                ToolErrorCode::ExecutionFailed,
                format!("subagent `{name}` failed: {}", error.code()),
            ));
        }
        Ok(Ok(output)) => output,
    };
    let answer = bound_text(&output.content, budget.max_result_bytes);
    let total_tokens: u64 = output.usage.iter().map(|u| u.total_tokens).sum();
    let value = json!({
        "answer": answer.text,
        "truncated": answer.truncated,
        "graph": name,
        "model_requests": output.usage.len(),
        "total_tokens": total_tokens,
    });
    Ok(ToolOutput {
        model_view: ModelView::Text(answer.text),
        value,
    })
}
