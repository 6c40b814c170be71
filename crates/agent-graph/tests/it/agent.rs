//! The `Agent` front door: closure tools, secure defaults, concurrent runs.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agent_graph::{Agent, agent::AgentError, run::RunError};
use agent_testing::{ScriptedModel, Turn};
use ai_core::{
    AiEvent, Message, RunContext, ToolEffect, ToolPolicy,
    event::AiEventKind,
    tool::{ToolErrorCode, ToolFailure},
};
use futures::StreamExt;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::support::{
    INGRESS_ID, RecordingApprover, calls_then_answer, check_invariants, ctx, labels, results,
};

#[derive(Deserialize, JsonSchema)]
struct AddArgs {
    a: i64,
    b: i64,
}

#[derive(Serialize, JsonSchema)]
struct Sum {
    sum: i64,
}

fn add() -> ai_tools::ToolFn<AddArgs, Sum> {
    ai_tools::tool_fn(
        "add",
        "Add two integers.",
        ToolEffect::ReadOnly,
        |args: AddArgs| {
            std::future::ready(Ok(Sum {
                sum: args.a + args.b,
            }))
        },
    )
    .unwrap()
}

#[derive(Deserialize, JsonSchema)]
struct NoteArgs {
    text: String,
}

#[derive(Serialize, JsonSchema)]
struct Saved {
    saved: bool,
}

/// `app__save_note` (state_change): counts its executions.
fn save_note(count: Arc<AtomicUsize>) -> ai_tools::ToolFn<NoteArgs, Saved> {
    ai_tools::tool_fn(
        "save_note",
        "Save a note.",
        ToolEffect::StateChange,
        move |args: NoteArgs| {
            count.fetch_add(1, Ordering::SeqCst);
            std::future::ready(Ok(Saved {
                saved: !args.text.is_empty(),
            }))
        },
    )
    .unwrap()
}

fn add_then_answer() -> ScriptedModel {
    ScriptedModel::new([
        Turn::new().tool_call("call_1", "app__add", json!({"a": 2, "b": 40})),
        Turn::text("2 + 40 = 42"),
    ])
}

#[tokio::test]
async fn a_closure_tool_runs_in_a_streamed_loop() {
    let model = add_then_answer();
    let agent = Agent::builder(model.clone())
        .system("You add numbers.")
        .tool(add())
        .build()
        .unwrap();
    let handle = agent.run_with(ctx(), vec![Message::user("What is 2 + 40?")]);
    let (events, outcome) = handle.into_parts();
    let events: Vec<AiEvent> = events.collect().await;
    let outcome = outcome.await;
    check_invariants(&events, &outcome);
    assert_eq!(labels(&events), calls_then_answer(&[("app__add", "ok")]));
    let output = outcome.unwrap();
    assert_eq!(output.content, "2 + 40 = 42");
    // The model saw the system prompt, the tool, and the tool's full result.
    let requests = model.requests();
    assert_eq!(requests[0].messages[0], Message::system("You add numbers."));
    assert_eq!(requests[0].tools[0].id.as_str(), "app__add");
    assert!(
        output
            .messages
            .contains(&Message::tool("call_1", r#"{"sum":42}"#)),
        "{:?}",
        output.messages
    );
    // Default redaction of a closure tool: no field of arguments or output in events.
    let text = serde_json::to_string(&events).unwrap();
    assert!(
        !text.contains("42,") && !text.contains(r#""sum""#),
        "{text}"
    );
}

#[tokio::test]
async fn prompt_returns_the_final_text() {
    let agent = Agent::builder(add_then_answer())
        .tool(add())
        .build()
        .unwrap();
    assert_eq!(
        agent.prompt("What is 2 + 40?").await.unwrap(),
        "2 + 40 = 42"
    );
}

#[tokio::test]
async fn only_tools_handed_to_the_builder_exist() {
    // The model asks for a built-in that was never registered.
    let model = ScriptedModel::new([
        Turn::new().tool_call("call_1", "core__read_file", json!({"path": "/etc/passwd"})),
        Turn::text("ok"),
    ]);
    let agent = Agent::builder(model.clone()).tool(add()).build().unwrap();
    let (events, outcome) = agent.run_with(ctx(), vec![Message::user("x")]).into_parts();
    let events: Vec<AiEvent> = events.collect().await;
    let outcome = outcome.await;
    check_invariants(&events, &outcome);
    assert_eq!(results(&events)[0].2, Some(ToolErrorCode::UnknownTool));
    let offered: Vec<String> = model.requests()[0]
        .tools
        .iter()
        .map(|s| s.id.as_str().to_owned())
        .collect();
    assert_eq!(offered, vec!["app__add".to_owned()]);
}

#[test]
fn a_tool_that_needs_approval_needs_an_approver_under_the_default_policy() {
    let count = Arc::new(AtomicUsize::new(0));
    let err = Agent::builder(ScriptedModel::new([]))
        .tool(save_note(count))
        .build()
        .unwrap_err();
    assert!(
        matches!(&err, AgentError::NeedsApprover { tool, effect: ToolEffect::StateChange } if tool.as_str() == "app__save_note"),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(
        message.contains(".approver(") && message.contains(".policy("),
        "{message}"
    );
}

#[tokio::test]
async fn with_an_explicit_policy_and_no_approver_such_tools_are_not_offered() {
    let count = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new([
        Turn::new().tool_call("call_1", "app__save_note", json!({"text": "hi"})),
        Turn::text("done"),
    ]);
    let agent = Agent::builder(model.clone())
        .tool(add())
        .tool(save_note(Arc::clone(&count)))
        .policy(ToolPolicy::allowing(["app__*"]))
        .build()
        .unwrap();
    let catalog = agent.catalog(&ctx());
    let offered: Vec<&str> = catalog.specs().iter().map(|s| s.id.as_str()).collect();
    assert_eq!(offered, vec!["app__add"]);
    assert_eq!(agent.tools().len(), 2);
    // A model that calls it anyway gets a typed refusal; nothing runs.
    let (events, outcome) = agent.run_with(ctx(), vec![Message::user("x")]).into_parts();
    let events: Vec<AiEvent> = events.collect().await;
    check_invariants(&events, &outcome.await);
    assert!(!results(&events)[0].1);
    assert_eq!(count.load(Ordering::SeqCst), 0);
    assert_eq!(model.requests()[0].tools.len(), 1);
}

#[tokio::test]
async fn with_an_approver_the_tool_is_offered_and_runs_only_when_approved() {
    for approve in [true, false] {
        let count = Arc::new(AtomicUsize::new(0));
        let approver = RecordingApprover::new(approve);
        let model = ScriptedModel::new([
            Turn::new().tool_call("call_1", "app__save_note", json!({"text": "hi"})),
            Turn::text("done"),
        ]);
        let agent = Agent::builder(model.clone())
            .tool(save_note(Arc::clone(&count)))
            .approver(approver.clone())
            .build()
            .unwrap();
        assert_eq!(agent.catalog(&ctx()).len(), 1);
        let (events, outcome) = agent.run_with(ctx(), vec![Message::user("x")]).into_parts();
        let events: Vec<AiEvent> = events.collect().await;
        check_invariants(&events, &outcome.await);
        assert_eq!(approver.seen.lock().unwrap().len(), 1);
        assert_eq!(count.load(Ordering::SeqCst), usize::from(approve));
        assert_eq!(results(&events)[0].1, approve);
    }
}

#[test]
fn duplicate_tools_are_an_error_naming_both_origins() {
    let err = Agent::builder(ScriptedModel::new([]))
        .tool(add())
        .tool(add())
        .build()
        .unwrap_err();
    assert!(matches!(err, AgentError::Catalog(_)), "{err:?}");
    assert!(err.to_string().contains("app__add"), "{err}");
}

#[tokio::test]
async fn clones_run_concurrently_with_their_own_ids() {
    let model = ScriptedModel::repeating(Turn::text("hi"));
    let agent = Agent::builder(model).tool(add()).build().unwrap();
    let runs: Vec<_> = (0..8)
        .map(|i| {
            let agent = agent.clone();
            tokio::spawn(async move {
                let context = RunContext::new(format!("run-{i}"), "trace")
                    .with_ingress_request_id(INGRESS_ID);
                let (events, outcome) = agent
                    .run_with(context, vec![Message::user("x")])
                    .into_parts();
                let events: Vec<AiEvent> = events.collect().await;
                (i, events, outcome.await)
            })
        })
        .collect();
    for run in runs {
        let (i, events, outcome) = run.await.unwrap();
        assert_eq!(outcome.unwrap().content, "hi");
        assert!(events.iter().all(|e| e.run_id == format!("run-{i}")));
        assert!(matches!(events.last().unwrap().kind, AiEventKind::Done));
    }
    // Fresh ids per `run`.
    let a = agent.run("x").into_parts().0.collect::<Vec<_>>().await;
    let b = agent.run("x").into_parts().0.collect::<Vec<_>>().await;
    assert_ne!(a[0].run_id, b[0].run_id);
}

#[tokio::test]
async fn a_failed_run_is_a_typed_error() {
    let agent = Agent::builder(ScriptedModel::new([])).build().unwrap();
    let err = agent.prompt("x").await.unwrap_err();
    assert!(matches!(err, RunError::Model(_)), "{err:?}");
}

/// A tool its source has withdrawn (as an MCP server does with a changed definition).
struct Withdrawn;

impl ai_core::tool::ToolExecutor for Withdrawn {
    fn execute(
        &self,
        _cx: ai_core::tool::ToolCallContext,
        _args: serde_json::Value,
    ) -> futures::future::BoxFuture<'static, Result<ai_core::tool::ToolOutput, ToolFailure>> {
        Box::pin(async { Ok(ai_core::tool::ToolOutput::json(json!(null))) })
    }

    fn availability(&self) -> Result<(), String> {
        Err("its definition changed; accept it first".into())
    }
}

#[tokio::test]
async fn a_withheld_tool_is_not_offered_and_the_run_says_so_first() {
    let spec = ai_core::ToolSpec::new(
        ai_core::ToolId::mcp("srv", "lookup").unwrap(),
        "Looks things up.",
        json!({"type": "object", "properties": {}}),
        ToolEffect::ReadOnly,
    )
    .with_redaction(ai_core::tool::Redaction::default());
    let model = ScriptedModel::new([Turn::text("nothing to look up")]);
    let agent = Agent::builder(model)
        .tool(ai_core::tool::RegisteredTool {
            spec,
            executor: Arc::new(Withdrawn),
        })
        .tool(add())
        .build()
        .unwrap();
    let offered: Vec<String> = agent
        .catalog(&ctx())
        .specs()
        .iter()
        .map(|s| s.id.as_str().to_owned())
        .collect();
    assert_eq!(offered, ["app__add"]);
    let events: Vec<AiEvent> = agent.run("hi").into_parts().0.collect().await;
    match &events[0].kind {
        AiEventKind::ToolWithheld { tool_name, reason } => {
            assert_eq!(tool_name, "mcp__srv__lookup");
            assert!(reason.contains("accept it first"));
        }
        other => panic!("first event: {other:?}"),
    }
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e.kind, AiEventKind::ToolWithheld { .. }))
            .count(),
        1
    );
}
