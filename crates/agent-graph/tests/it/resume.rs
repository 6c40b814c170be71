//! A run paused on an approval, written to JSON, and resumed from the JSON alone by
//! a new `Agent`: the approved call runs inside the resumed run (its events on the
//! run's stream, its record among the run's records, in call order), exactly once,
//! and the run ends as one whose approval was given in process.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agent_graph::run::{Decision, PausedRun, RunError};
use agent_graph::{Agent, RunOutput};
use agent_testing::{ScriptedModel, Turn};
use ai_core::{
    AiEvent, ToolEffect, ToolId, ToolSpec,
    event::AiEventKind,
    runner::ToolInvocationRecord,
    tool::{Redaction, RegisteredTool, ToolCallContext, ToolExecutor, ToolFailure, ToolOutput},
};
use futures::StreamExt;
use futures::future::BoxFuture;
use serde_json::{Value, json};

use crate::support::RecordingApprover;

/// Counts its executions; answers `{"tool": name, "key": ...}`.
struct Counted {
    name: &'static str,
    calls: Arc<AtomicUsize>,
}

impl ToolExecutor for Counted {
    fn execute(
        &self,
        _cx: ToolCallContext,
        args: Value,
    ) -> BoxFuture<'static, Result<ToolOutput, ToolFailure>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let value = json!({"tool": self.name, "key": args["key"]});
        Box::pin(async move { Ok(ToolOutput::json(value)) })
    }
}

fn tool(name: &'static str, effect: ToolEffect, calls: &Arc<AtomicUsize>) -> RegisteredTool {
    let schema =
        json!({"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]});
    RegisteredTool {
        spec: ToolSpec::new(
            ToolId::parse(&format!("app__{name}")).unwrap(),
            name,
            schema,
            effect,
        )
        .with_redaction(Redaction::new(["key"], ["tool", "key"]).unwrap()),
        executor: Arc::new(Counted {
            name,
            calls: Arc::clone(calls),
        }),
    }
}

/// A read (runs freely) and a write (needs an approval) in one turn, then the answer.
fn turns() -> Vec<Turn> {
    vec![
        Turn::new()
            .tool_call("r1", "app__read", json!({"key": "a"}))
            .tool_call("w1", "app__write", json!({"key": "b"})),
        Turn::text("Read a, wrote b."),
    ]
}

struct Tools {
    reads: Arc<AtomicUsize>,
    writes: Arc<AtomicUsize>,
}

impl Tools {
    fn new() -> Self {
        Self {
            reads: Arc::new(AtomicUsize::new(0)),
            writes: Arc::new(AtomicUsize::new(0)),
        }
    }

    fn all(&self) -> Vec<RegisteredTool> {
        vec![
            tool("read", ToolEffect::ReadOnly, &self.reads),
            tool("write", ToolEffect::StateChange, &self.writes),
        ]
    }
}

async fn drain(handle: agent_graph::RunHandle) -> (Vec<AiEvent>, Result<RunOutput, RunError>) {
    let (events, outcome) = handle.into_parts();
    let events: Vec<AiEvent> = events.collect().await;
    (events, outcome.await)
}

/// What a record says, without its clock times.
fn essence(records: &[ToolInvocationRecord]) -> Vec<Value> {
    records
        .iter()
        .map(|r| {
            json!([
                r.tool_call_id,
                r.name,
                r.args,
                r.result,
                r.error,
                r.truncated
            ])
        })
        .collect()
}

fn kinds(events: &[AiEvent]) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            let value = serde_json::to_value(e).unwrap();
            let kind = value["type"].as_str().unwrap().to_owned();
            match value["tool_call_id"].as_str() {
                Some(id) => format!("{kind}:{id}"),
                None => kind,
            }
        })
        .collect()
}

#[tokio::test]
async fn a_paused_run_resumes_from_json_in_a_new_agent_as_if_approved_in_process() {
    // The reference: the approval given in process.
    let reference_tools = Tools::new();
    let reference_model = Arc::new(ScriptedModel::new(turns()));
    let reference = Agent::builder(Arc::clone(&reference_model))
        .system("Be exact.")
        .tools(reference_tools.all())
        .approver(RecordingApprover::new(true))
        .build()
        .unwrap();
    let (_, expected) = drain(reference.run("go")).await;
    let expected = expected.unwrap();
    assert_eq!(reference_tools.writes.load(Ordering::SeqCst), 1);

    // The same run with deferred approvals pauses on `w1` after `r1` ran.
    let tools = Tools::new();
    let json = {
        let model = ScriptedModel::new(turns());
        let agent = Agent::builder(model)
            .system("Be exact.")
            .tools(tools.all())
            .defer_approvals()
            .build()
            .unwrap();
        let (events, output) = drain(agent.run("go")).await;
        let output = output.unwrap();
        let paused = output.paused.expect("the run paused");
        assert_eq!(paused.pending.len(), 1);
        assert_eq!(paused.pending[0].tool_call_id, "w1");
        assert!(
            kinds(&events).contains(&"tool_approval_requested:w1".to_owned()),
            "{:?}",
            kinds(&events)
        );
        assert!(!kinds(&events).iter().any(|k| k == "assistant_final"));
        serde_json::to_string(&paused).unwrap()
        // Agent, model, output and events are dropped here.
    };
    assert_eq!(tools.reads.load(Ordering::SeqCst), 1);
    assert_eq!(
        tools.writes.load(Ordering::SeqCst),
        0,
        "nothing written yet"
    );

    // A fresh agent (same tools) and the rest of the model's script.
    let paused: PausedRun = serde_json::from_str(&json).unwrap();
    let model = Arc::new(ScriptedModel::new(turns().split_off(1)));
    let agent = Agent::builder(Arc::clone(&model))
        .system("Be exact.")
        .tools(tools.all())
        .defer_approvals()
        .build()
        .unwrap();
    let (events, output) = drain(agent.resume(paused, vec![Decision::approve("w1")])).await;
    let output = output.unwrap();

    assert_eq!(output.content, expected.content);
    assert_eq!(essence(&output.records), essence(&expected.records));
    assert_eq!(
        essence(&output.records)
            .iter()
            .map(|r| r[0].clone())
            .collect::<Vec<_>>(),
        [json!("r1"), json!("w1")],
        "records in call order"
    );
    assert_eq!(output.messages, expected.messages, "the same history");
    assert!(output.paused.is_none());
    let (writes, reads) = (
        tools.writes.load(Ordering::SeqCst),
        tools.reads.load(Ordering::SeqCst),
    );
    assert_eq!(writes, 1, "written exactly once");
    assert_eq!(reads, 1, "the read did not run again");
    // The model's next turn saw what it saw in the reference run.
    assert_eq!(
        model.requests()[0].messages,
        reference_model.requests()[1].messages
    );
    // The approved call's events are the run's own; one `done`, at the end.
    let kinds = kinds(&events);
    assert_eq!(
        kinds.iter().filter(|k| *k == "done").count(),
        1,
        "{kinds:?}"
    );
    assert_eq!(kinds.last().map(String::as_str), Some("done"));
    let start = kinds.iter().position(|k| k == "tool_call_start:w1");
    let result = kinds.iter().position(|k| k == "tool_call_result:w1");
    let answer = kinds.iter().position(|k| k == "assistant_final");
    assert!(start < result && result < answer, "{kinds:?}");
    assert!(events.iter().all(|e| e.run_id == events[0].run_id));
}

#[tokio::test]
async fn denied_and_invalid_decisions_tell_the_model_and_run_nothing() {
    for (decision, code) in [
        (
            Decision::deny("w1", Some("not now".into())),
            "approval_denied",
        ),
        (
            Decision::invalid("w1", "the approval expired"),
            "approval_invalid",
        ),
    ] {
        let tools = Tools::new();
        let agent = |model: ScriptedModel| {
            Agent::builder(model)
                .tools(tools.all())
                .defer_approvals()
                .build()
                .unwrap()
        };
        let (_, output) = drain(agent(ScriptedModel::new(turns())).run("go")).await;
        let paused = *output.unwrap().paused.unwrap();
        let model = Arc::new(ScriptedModel::new([Turn::text("Understood.")]));
        let resumed = agent(ScriptedModel::new([])).resume(paused.clone(), vec![]);
        // With no decision the pending call counts as invalid.
        let (_, output) = drain(resumed).await;
        assert!(output.is_err(), "the empty script ends the run: {output:?}");
        let (events, output) = drain(
            Agent::builder(Arc::clone(&model))
                .tools(tools.all())
                .defer_approvals()
                .build()
                .unwrap()
                .resume(paused, vec![decision]),
        )
        .await;
        output.unwrap();
        assert_eq!(tools.writes.load(Ordering::SeqCst), 0);
        let result = events
            .iter()
            .find_map(|e| match &e.kind {
                AiEventKind::ToolCallResult {
                    tool_call_id,
                    error_code,
                    ..
                } if tool_call_id == "w1" => *error_code,
                _ => None,
            })
            .expect("a result event for w1");
        assert_eq!(result.as_str(), code);
        let told = crate::support::tool_message_for(&model.requests()[0].messages, "w1");
        assert!(told.contains(code), "{told}");
    }
}

#[tokio::test]
async fn a_paused_run_of_another_version_or_graph_is_refused() {
    let tools = Tools::new();
    let agent = Agent::builder(ScriptedModel::new(turns()))
        .tools(tools.all())
        .defer_approvals()
        .build()
        .unwrap();
    let (_, output) = drain(agent.run("go")).await;
    let mut paused = *output.unwrap().paused.unwrap();
    paused.version = 99;
    let (events, output) = drain(agent.resume(paused.clone(), vec![Decision::approve("w1")])).await;
    assert!(
        matches!(output, Err(RunError::InvalidResume(_))),
        "{output:?}"
    );
    assert_eq!(kinds(&events), ["error", "done"]);
    paused.version = agent_graph::run::PAUSED_RUN_VERSION;
    paused.request.graph = Some("another".into());
    let (_, output) = drain(agent.resume(paused, vec![Decision::approve("w1")])).await;
    assert!(
        matches!(output, Err(RunError::InvalidResume(_))),
        "{output:?}"
    );
    assert_eq!(tools.writes.load(Ordering::SeqCst), 0);
}
