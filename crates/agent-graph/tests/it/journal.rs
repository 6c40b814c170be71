//! Durable runs on the step seam (`agent_graph::journal`), with an in-memory
//! journal: steps recorded in order, a run started again replays them, and a call
//! that acts never runs twice. A crash is staged by cutting the journal back to
//! what a process killed at that point would have recorded (the server's tests
//! kill real processes).

use std::sync::{Arc, Mutex};

use agent_graph::journal::{MemoryJournal, RunStart, StepBody, StepJournal, StepKind};
use agent_graph::run::{self, RunDeps};
use agent_testing::{ScriptedModel, Turn};
use ai_core::{
    AiEvent, Message, ToolEffect, ToolRunner,
    tool::{RegisteredTool, ToolCallContext, ToolErrorCode, ToolExecutor, ToolFailure, ToolOutput},
};
use futures::StreamExt;
use futures::future::BoxFuture;
use serde_json::{Value, json};

use crate::support::{
    Outcome, check_invariants, labels, open_policy, request, results, spec, strs,
};

/// `core__bump` (state_change): counts its calls and the keys it saw; an
/// idempotent one acts once per key.
#[derive(Default)]
struct Bump {
    keys: Mutex<Vec<String>>,
    acted: Mutex<u32>,
}

struct BumpTool(Arc<Bump>, bool);

impl ToolExecutor for BumpTool {
    fn execute(
        &self,
        cx: ToolCallContext,
        _args: Value,
    ) -> BoxFuture<'static, Result<ToolOutput, ToolFailure>> {
        let (bump, idempotent) = (Arc::clone(&self.0), self.1);
        Box::pin(async move {
            let key = cx.idempotency_key();
            let seen = {
                let mut keys = bump.keys.lock().unwrap();
                let seen = keys.contains(&key);
                keys.push(key);
                seen
            };
            let mut acted = bump.acted.lock().unwrap();
            if !(idempotent && seen) {
                *acted += 1;
            }
            Ok(ToolOutput::json(json!({"count": *acted})))
        })
    }
}

fn deps(model: &ScriptedModel, bump: &Arc<Bump>, idempotent: bool) -> RunDeps {
    let schema = json!({"type": "object", "properties": {}, "additionalProperties": false});
    let tools = vec![
        RegisteredTool {
            spec: spec("bump", ToolEffect::StateChange, schema.clone()).with_idempotent(idempotent),
            executor: Arc::new(BumpTool(Arc::clone(bump), idempotent)),
        },
        RegisteredTool {
            spec: spec("look", ToolEffect::ReadOnly, schema),
            executor: Arc::new(BumpTool(Arc::clone(bump), false)),
        },
    ];
    let runner = ToolRunner::new(tools, open_policy()).unwrap();
    let catalog = runner.catalog(&crate::support::ctx());
    RunDeps {
        model: Arc::new(model.clone()),
        runner: Arc::new(runner),
        catalog: Arc::new(catalog),
    }
}

async fn durable(deps: RunDeps, journal: &Arc<MemoryJournal>) -> (Vec<AiEvent>, Outcome) {
    let start = RunStart::New { request: request() };
    let journal: Arc<dyn StepJournal> = Arc::clone(journal) as Arc<dyn StepJournal>;
    let (events, outcome) = run::durable(start, deps, journal).into_parts();
    let events: Vec<AiEvent> = events.collect().await;
    let outcome = outcome.await;
    check_invariants(&events, &outcome);
    (events, outcome)
}

fn script() -> Vec<Turn> {
    vec![
        Turn::new()
            .and_text("Bumping.")
            .tool_call("b1", "core__bump", json!({}))
            .usage(10, 2),
        Turn::text("Bumped once.").usage(20, 3),
    ]
}

fn kinds(journal: &MemoryJournal) -> Vec<(u32, StepKind)> {
    journal
        .recorded("run-1")
        .iter()
        .map(|s| (s.number, s.kind()))
        .collect()
}

#[tokio::test]
async fn each_model_call_and_tool_call_is_a_step_recorded_in_order() {
    let bump = Arc::new(Bump::default());
    let journal = Arc::new(MemoryJournal::new());
    let model = ScriptedModel::new(script());
    let (events, outcome) = durable(deps(&model, &bump, false), &journal).await;
    assert_eq!(outcome.unwrap().content, "Bumped once.");
    assert_eq!(
        kinds(&journal),
        vec![
            (0, StepKind::Model),
            (1, StepKind::Intent),
            (1, StepKind::Tool),
            (2, StepKind::Model)
        ]
    );
    let steps = journal.recorded("run-1");
    // The intent names the call and the key an idempotent tool would see.
    assert!(matches!(
        &steps[1].body,
        StepBody::Intent { tool_call_id, idempotency_key, .. }
            if tool_call_id == "b1" && idempotency_key == "run-1:b1"
    ));
    // Each step keeps its own events: the model step its text and usage, the
    // tool step the call's start and result.
    assert_eq!(
        labels(&steps[0].events),
        strs(&["text_delta", "usage_report"])
    );
    assert_eq!(
        labels(&steps[2].events),
        strs(&[
            "tool_call_start:core__bump",
            "tool_call_result:core__bump:ok"
        ])
    );
    assert_eq!(labels(&events).len(), 8, "{:?}", labels(&events));
}

#[tokio::test]
async fn a_run_started_again_replays_its_recorded_steps_and_calls_the_model_only_for_the_rest() {
    let bump = Arc::new(Bump::default());
    let journal = Arc::new(MemoryJournal::new());
    let first = ScriptedModel::new(script());
    let (first_events, _) = durable(deps(&first, &bump, false), &journal).await;
    // Killed during the last model call: it was not recorded.
    journal.truncate("run-1", 3);
    let again = ScriptedModel::new([Turn::text("Bumped once.").usage(20, 3)]);
    let (events, outcome) = durable(deps(&again, &bump, false), &journal).await;
    let output = outcome.unwrap();
    assert_eq!(output.content, "Bumped once.");
    assert_eq!(again.calls(), 1, "only the unrecorded model step is called");
    assert_eq!(
        *bump.acted.lock().unwrap(),
        1,
        "the recorded call is not run again"
    );
    // The model's second request is the one the first process would have sent.
    assert_eq!(again.requests()[0].messages, first.requests()[1].messages);
    // The resumed run shows the whole run: the same events as the first.
    assert_eq!(labels(&events), labels(&first_events));
    assert_eq!(output.usage.len(), 2, "the replayed turn's usage counts");
}

#[tokio::test]
async fn a_call_that_acted_without_a_recorded_result_is_outcome_unknown_not_run_again() {
    let bump = Arc::new(Bump::default());
    let journal = Arc::new(MemoryJournal::new());
    let first = ScriptedModel::new(script());
    durable(deps(&first, &bump, false), &journal)
        .await
        .1
        .unwrap();
    // Killed after the tool acted and before its result was recorded.
    journal.truncate("run-1", 2);
    let again = ScriptedModel::new([Turn::text("I will check first.")]);
    let (events, outcome) = durable(deps(&again, &bump, false), &journal).await;
    outcome.unwrap();
    assert_eq!(*bump.acted.lock().unwrap(), 1, "the call acted once");
    let (id, ok, code, _) = results(&events).remove(0);
    assert_eq!(
        (id.as_str(), ok, code),
        ("b1", false, Some(ToolErrorCode::OutcomeUnknown))
    );
    // The model's next turn reads it.
    let last = again.requests()[0].messages.last().cloned().unwrap();
    assert!(
        matches!(&last, Message::Tool { content, .. } if content.contains("outcome_unknown")),
        "{last:?}"
    );
    // And the unknown outcome is itself recorded: a third start replays it.
    assert!(kinds(&journal).contains(&(1, StepKind::Tool)));
}

#[tokio::test]
async fn an_idempotent_call_runs_again_with_the_same_key_and_acts_once() {
    let bump = Arc::new(Bump::default());
    let journal = Arc::new(MemoryJournal::new());
    durable(deps(&ScriptedModel::new(script()), &bump, true), &journal)
        .await
        .1
        .unwrap();
    journal.truncate("run-1", 2);
    let again = ScriptedModel::new([Turn::text("Bumped once.")]);
    let (events, outcome) = durable(deps(&again, &bump, true), &journal).await;
    outcome.unwrap();
    assert_eq!(
        *bump.keys.lock().unwrap(),
        vec!["run-1:b1".to_owned(), "run-1:b1".to_owned()],
        "the tool saw the same key twice"
    );
    assert_eq!(*bump.acted.lock().unwrap(), 1, "and acted once");
    assert!(results(&events)[0].1, "its result is the real one");
}

#[tokio::test]
async fn a_read_only_call_without_a_result_simply_runs_again() {
    let bump = Arc::new(Bump::default());
    let journal = Arc::new(MemoryJournal::new());
    let script = || {
        vec![
            Turn::new()
                .tool_call("l1", "core__look", json!({}))
                .tool_call("l2", "core__look", json!({})),
            Turn::text("Looked."),
        ]
    };
    durable(deps(&ScriptedModel::new(script()), &bump, false), &journal)
        .await
        .1
        .unwrap();
    // Concurrent read-only calls keep the numbers of their call order.
    let mut recorded = kinds(&journal);
    recorded.sort_by_key(|(n, _)| *n);
    assert_eq!(
        recorded,
        vec![
            (0, StepKind::Model),
            (1, StepKind::Tool),
            (2, StepKind::Tool),
            (3, StepKind::Model)
        ]
    );
    // Killed before either result was recorded.
    journal.truncate("run-1", 1);
    let again = ScriptedModel::new([Turn::text("Looked.")]);
    let (_, outcome) = durable(deps(&again, &bump, false), &journal).await;
    outcome.unwrap();
    assert_eq!(
        *bump.acted.lock().unwrap(),
        4,
        "both calls ran in each process"
    );
}

#[tokio::test]
async fn a_journal_that_fails_stops_the_run_before_the_call_acts() {
    struct Broken;
    struct BrokenSlot;
    impl agent_graph::journal::OpenStep for BrokenSlot {
        fn record(
            self: Box<Self>,
            step: agent_graph::journal::Step,
        ) -> BoxFuture<'static, Result<(), agent_graph::journal::JournalError>> {
            let kind = step.kind();
            Box::pin(async move {
                match kind {
                    StepKind::Intent => Err(agent_graph::journal::JournalError("disk full".into())),
                    _ => Ok(()),
                }
            })
        }
    }
    impl StepJournal for Broken {
        fn step<'a>(
            &'a self,
            _: agent_graph::journal::StepKey<'a>,
        ) -> BoxFuture<'a, Result<agent_graph::journal::StepSlot, agent_graph::journal::JournalError>>
        {
            Box::pin(async { Ok(agent_graph::journal::StepSlot::Open(Box::new(BrokenSlot))) })
        }
    }
    let bump = Arc::new(Bump::default());
    let model = ScriptedModel::new(script());
    let start = RunStart::New { request: request() };
    let (events, outcome) =
        run::durable(start, deps(&model, &bump, false), Arc::new(Broken)).into_parts();
    let events: Vec<AiEvent> = events.collect().await;
    let outcome = outcome.await;
    check_invariants(&events, &outcome);
    assert_eq!(outcome.unwrap_err().code(), "journal_failed");
    assert_eq!(*bump.acted.lock().unwrap(), 0, "nothing acted unrecorded");
}

/// A tool its source withholds.
struct Gone;

impl ToolExecutor for Gone {
    fn availability(&self) -> Result<(), String> {
        Err("its definition changed".into())
    }

    fn execute(
        &self,
        _cx: ToolCallContext,
        _args: Value,
    ) -> BoxFuture<'static, Result<ToolOutput, ToolFailure>> {
        Box::pin(async { Ok(ToolOutput::json(json!({}))) })
    }
}

#[tokio::test]
async fn what_a_run_says_before_its_first_step_is_said_once_when_it_starts_again() {
    let bump = Arc::new(Bump::default());
    let journal = Arc::new(MemoryJournal::new());
    let with_gone = |model: &ScriptedModel| {
        let mut deps = deps(model, &bump, false);
        let schema = json!({"type": "object", "properties": {}});
        let mut tools = vec![RegisteredTool {
            spec: spec("gone", ToolEffect::ReadOnly, schema),
            executor: Arc::new(Gone),
        }];
        tools.extend([RegisteredTool {
            spec: spec(
                "bump",
                ToolEffect::StateChange,
                json!({"type": "object", "properties": {}}),
            ),
            executor: Arc::new(BumpTool(Arc::clone(&bump), false)),
        }]);
        let runner = ToolRunner::new(tools, open_policy()).unwrap();
        deps.catalog = Arc::new(runner.catalog(&crate::support::ctx()));
        deps.runner = Arc::new(runner);
        deps
    };
    let (first, _) = durable(with_gone(&ScriptedModel::new(script())), &journal).await;
    journal.truncate("run-1", 3);
    let again = ScriptedModel::new([Turn::text("Bumped once.")]);
    let (events, outcome) = durable(with_gone(&again), &journal).await;
    outcome.unwrap();
    let withheld = |events: &[AiEvent]| {
        events
            .iter()
            .filter(|e| matches!(e.kind, ai_core::event::AiEventKind::ToolWithheld { .. }))
            .count()
    };
    assert_eq!(withheld(&first), 1);
    assert_eq!(withheld(&events), 1, "{:?}", labels(&events));
}
