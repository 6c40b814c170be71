//! Subagents (graph-as-tool): one `done` and one final per run, tagged and ordered
//! child events, depth 1, budgets, cancellation, usage and policy.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use agent_graph::{
    Graph,
    graph::{GraphError, GraphRegistry, SubagentBudget},
    run,
    run::{RunDeps, RunError},
};
use agent_testing::{ScriptedModel, Turn};
use ai_core::{AiEvent, ToolPolicy, event::AiEventKind, tool::ToolErrorCode};
use futures::StreamExt;
use serde_json::json;

use crate::support::{Kit, check_invariants, ctx, request, run_to_end};

const PARENT_CALL: &str = "p1";

fn registry(researcher: Graph) -> GraphRegistry {
    let mut registry = GraphRegistry::default();
    registry.insert(Graph::new("main", "main", "Be helpful.").with_subagents(["researcher"]));
    registry.insert(researcher);
    registry
}

fn researcher() -> Graph {
    Graph::new("researcher", "Researches a question.", "You research.")
}

/// Deps of the `main` graph: the kit's tools and `graph__researcher` under `policy`.
fn deps(kit: &Kit, model: &ScriptedModel, policy: ToolPolicy, researcher: Graph) -> RunDeps {
    let registry = registry(researcher);
    let tools = registry.subagent_tools("main").unwrap();
    let deps = kit.deps_with_extra(model, policy, None, tools);
    let catalog = registry
        .get("main")
        .unwrap()
        .select_tools(deps.runner.catalog(&ctx()));
    RunDeps {
        catalog: Arc::new(catalog),
        ..deps
    }
}

fn policy() -> ToolPolicy {
    ToolPolicy::allowing(["core__*", "graph__researcher"]).with_approval_for([])
}

fn call_researcher() -> Turn {
    Turn::new()
        .tool_call(PARENT_CALL, "graph__researcher", json!({"task": "find x"}))
        .usage(10, 5)
}

fn nested(events: &[AiEvent]) -> Vec<&AiEvent> {
    events
        .iter()
        .filter(|e| e.parent_tool_call_id.is_some())
        .collect()
}

fn graph_result(events: &[AiEvent]) -> (bool, Option<ToolErrorCode>, String) {
    events
        .iter()
        .find_map(|e| match &e.kind {
            AiEventKind::ToolCallResult {
                tool_call_id,
                ok,
                error_code,
                message,
                ..
            } if tool_call_id == PARENT_CALL => {
                Some((*ok, *error_code, message.clone().unwrap_or_default()))
            }
            _ => None,
        })
        .expect("the subagent call has a result")
}

#[tokio::test(start_paused = true)]
async fn a_subagent_run_has_one_done_one_final_and_tagged_ordered_child_events() {
    let kit = Kit::new();
    let model = ScriptedModel::new([
        call_researcher(),
        Turn::text("checking")
            .tool_call("c1", "core__echo", json!({"text": "x"}))
            .usage(3, 2),
        Turn::text("found it").usage(4, 1),
        Turn::text("the answer").usage(20, 5),
    ]);
    let (events, outcome) = run_to_end(request(), deps(&kit, &model, policy(), researcher())).await;
    let output = outcome.unwrap();
    assert_eq!(output.content, "the answer");
    let count = |f: fn(&AiEventKind) -> bool| events.iter().filter(|e| f(&e.kind)).count();
    assert_eq!(count(|k| matches!(k, AiEventKind::Done)), 1);
    assert_eq!(
        count(|k| matches!(k, AiEventKind::AssistantFinal { .. })),
        1
    );

    // Every child event is tagged; none is a done, final or error.
    let child = nested(&events);
    assert!(!child.is_empty());
    for event in &child {
        assert_eq!(event.parent_tool_call_id.as_deref(), Some(PARENT_CALL));
        assert_eq!(event.graph.as_deref(), Some("researcher"));
        assert_eq!(event.run_id, crate::support::RUN_ID);
        assert!(!matches!(
            event.kind,
            AiEventKind::Done | AiEventKind::AssistantFinal { .. } | AiEventKind::Error { .. }
        ));
    }
    // Ordered: the parent's start, the child's whole run, the parent's result.
    let position = |pred: &dyn Fn(&AiEvent) -> bool| events.iter().position(pred).unwrap();
    let start = position(
        &|e| matches!(&e.kind, AiEventKind::ToolCallStart { tool_call_id, .. } if tool_call_id == PARENT_CALL),
    );
    let result = position(
        &|e| matches!(&e.kind, AiEventKind::ToolCallResult { tool_call_id, .. } if tool_call_id == PARENT_CALL),
    );
    let first_child = position(&|e| e.parent_tool_call_id.is_some());
    let last_child = events.len()
        - 1
        - events
            .iter()
            .rev()
            .position(|e| e.parent_tool_call_id.is_some())
            .unwrap();
    assert!(start < first_child && last_child < result);
    let labels: Vec<String> = child.iter().map(|e| crate::support::label(e)).collect();
    let text: String = child
        .iter()
        .filter_map(|e| match &e.kind {
            AiEventKind::TextDelta { delta } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "checkingfound it");
    assert!(
        labels.contains(&"tool_call_start:core__echo".to_owned()),
        "{labels:?}"
    );
    assert!(
        labels
            .iter()
            .position(|l| l == "tool_call_start:core__echo")
            < labels
                .iter()
                .position(|l| l == "tool_call_result:core__echo:ok"),
        "{labels:?}"
    );

    // Child usage arrives as usage_reports tagged with the child graph.
    let child_usage: Vec<u64> = child
        .iter()
        .filter_map(|e| match &e.kind {
            AiEventKind::UsageReport { total_tokens, .. } => Some(*total_tokens),
            _ => None,
        })
        .collect();
    assert_eq!(child_usage, vec![5, 5]);

    // Summary first: the parent's model sees the child's final answer.
    let (ok, _, _) = graph_result(&events);
    assert!(ok);
    let tool_message = crate::support::tool_messages(&output.messages)
        .into_iter()
        .find(|(id, _)| id == PARENT_CALL)
        .unwrap();
    assert_eq!(tool_message.1, "found it");
    // The child ran on the same completion port, with the child's system prompt and
    // no graph tools.
    let requests = model.requests();
    assert_eq!(requests.len(), 4);
    assert_eq!(
        requests[1].messages[0],
        ai_core::Message::system("You research.")
    );
    assert!(
        requests[1]
            .tools
            .iter()
            .all(|t| !t.id.as_str().starts_with("graph__"))
    );
    assert!(
        requests[0]
            .tools
            .iter()
            .any(|t| t.id.as_str() == "graph__researcher")
    );
}

#[tokio::test(start_paused = true)]
async fn the_answer_is_bounded_by_the_result_budget() {
    let kit = Kit::new();
    let long = "word ".repeat(400);
    let model = ScriptedModel::new([call_researcher(), Turn::text(long), Turn::text("ok")]);
    let budget = SubagentBudget {
        max_result_bytes: 256,
        ..SubagentBudget::default()
    };
    let (_, outcome) = run_to_end(
        request(),
        deps(&kit, &model, policy(), researcher().with_budget(budget)),
    )
    .await;
    let output = outcome.unwrap();
    let (_, content) = crate::support::tool_messages(&output.messages)
        .into_iter()
        .find(|(id, _)| id == PARENT_CALL)
        .unwrap();
    assert!(content.len() <= 256, "{}", content.len());
    assert!(content.starts_with("word word"));
}

#[test]
fn a_subagent_with_subagents_is_refused_at_construction() {
    let mut registry = registry(researcher().with_subagents(["helper"]));
    registry.insert(Graph::new("helper", "h", "h"));
    assert_eq!(
        registry.subagent_tools("main").unwrap_err(),
        GraphError::DepthExceeded {
            parent: "main".into(),
            child: "researcher".into()
        }
    );
    let registry = registry_with_unknown();
    assert!(matches!(
        registry.subagent_tools("main").unwrap_err(),
        GraphError::UnknownSubagent { .. }
    ));
}

fn registry_with_unknown() -> GraphRegistry {
    let mut registry = GraphRegistry::default();
    registry.insert(Graph::new("main", "m", "m").with_subagents(["ghost"]));
    registry
}

#[tokio::test(start_paused = true)]
async fn a_subagent_calling_a_subagent_is_refused_typed() {
    let kit = Kit::new();
    let model = ScriptedModel::new([
        call_researcher(),
        Turn::new().tool_call("c2", "graph__researcher", json!({"task": "again"})),
        Turn::text("gave up"),
        Turn::text("done"),
    ]);
    let (events, outcome) = run_to_end(request(), deps(&kit, &model, policy(), researcher())).await;
    outcome.unwrap();
    let refused = events
        .iter()
        .find_map(|e| match &e.kind {
            AiEventKind::ToolCallResult {
                tool_call_id,
                error_code,
                ..
            } if tool_call_id == "c2" => Some((*error_code, e.parent_tool_call_id.clone())),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        refused,
        (Some(ToolErrorCode::DepthExceeded), Some(PARENT_CALL.into()))
    );
    assert_eq!(model.calls(), 4);
}

async fn budget_case(
    budget: SubagentBudget,
    child: Vec<Turn>,
) -> (bool, Option<ToolErrorCode>, String) {
    let kit = Kit::new();
    let mut turns = vec![call_researcher()];
    turns.extend(child);
    turns.push(Turn::text("done"));
    let model = ScriptedModel::new(turns);
    let (events, outcome) = run_to_end(
        request(),
        deps(&kit, &model, policy(), researcher().with_budget(budget)),
    )
    .await;
    assert_eq!(outcome.unwrap().content, "done");
    graph_result(&events)
}

#[tokio::test(start_paused = true)]
async fn each_subagent_budget_exceeded_is_a_typed_result() {
    let echo = || Turn::new().tool_call("c1", "core__echo", json!({"text": "x"}));
    let (ok, code, message) = budget_case(
        SubagentBudget {
            max_model_requests: 1,
            ..SubagentBudget::default()
        },
        vec![echo()],
    )
    .await;
    assert!(!ok);
    assert_eq!(code, Some(ToolErrorCode::BudgetExceeded));
    assert!(message.contains("model_requests budget of 1"), "{message}");

    let (_, code, message) = budget_case(
        SubagentBudget {
            max_total_tokens: 10,
            ..SubagentBudget::default()
        },
        vec![echo().usage(20, 5)],
    )
    .await;
    assert_eq!(code, Some(ToolErrorCode::BudgetExceeded));
    assert!(message.contains("total_tokens budget of 10"), "{message}");

    let (_, code, message) = budget_case(
        SubagentBudget {
            max_wall_ms: 1_000,
            ..SubagentBudget::default()
        },
        vec![Turn::text("too late").delay(Duration::from_secs(5))],
    )
    .await;
    assert_eq!(code, Some(ToolErrorCode::BudgetExceeded));
    assert!(message.contains("wall_time budget of 1000 ms"), "{message}");
}

#[tokio::test]
async fn cancelling_the_parent_cancels_the_child() {
    let kit = Kit::new();
    let model = ScriptedModel::new([
        call_researcher(),
        Turn::new().tool_call("c1", "core__wait", json!({})),
        Turn::text("never"),
    ]);
    let handle = run(request(), deps(&kit, &model, policy(), researcher()));
    let cancel = handle.cancel_token();
    let (events, outcome) = handle.into_parts();
    let wait = Arc::clone(&kit.wait);
    let canceller = tokio::spawn(async move {
        while !wait.has_started.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        cancel.cancel();
    });
    let events: Vec<AiEvent> = events.collect().await;
    let outcome = outcome.await;
    canceller.await.unwrap();
    check_invariants(&events, &outcome);
    assert_eq!(outcome.unwrap_err(), RunError::Cancelled);
    assert!(kit.wait.watcher_saw_cancel.load(Ordering::SeqCst));
    let (ok, code, _) = graph_result(&events);
    assert!(!ok);
    assert_eq!(code, Some(ToolErrorCode::Cancelled));
    // The child's own call ended too, tagged.
    assert!(events.iter().any(|e| matches!(
        &e.kind,
        AiEventKind::ToolCallResult { tool_call_id, ok: false, .. } if tool_call_id == "c1"
    ) && e.parent_tool_call_id.as_deref() == Some(PARENT_CALL)));
    // No child model turn was started after the cancel.
    assert_eq!(model.calls(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_tool_denied_to_the_parent_is_denied_to_the_child() {
    let kit = Kit::new();
    let model = ScriptedModel::new([
        call_researcher(),
        Turn::new().tool_call("c1", "core__write", json!({"key": "k"})),
        Turn::text("could not"),
        Turn::text("done"),
    ]);
    let policy = ToolPolicy::allowing(["core__echo", "graph__researcher"]).with_approval_for([]);
    let (events, outcome) = run_to_end(request(), deps(&kit, &model, policy, researcher())).await;
    outcome.unwrap();
    let denied = events
        .iter()
        .find_map(|e| match &e.kind {
            AiEventKind::ToolCallResult {
                tool_call_id,
                error_code,
                ..
            } if tool_call_id == "c1" => Some(*error_code),
            _ => None,
        })
        .unwrap();
    assert_eq!(denied, Some(ToolErrorCode::PolicyDenied));
    assert_eq!(kit.write.calls(), 0);
    // And it was never offered to the child.
    assert!(
        model.requests()[1]
            .tools
            .iter()
            .all(|t| t.id.as_str() != "core__write")
    );
}

/// Records what the runner put in the execution's context.
struct Probe(Arc<std::sync::Mutex<Option<ai_core::tool::ToolCallContext>>>);

impl ai_core::tool::ToolExecutor for Probe {
    fn execute(
        &self,
        cx: ai_core::tool::ToolCallContext,
        _args: serde_json::Value,
    ) -> futures::future::BoxFuture<
        'static,
        Result<ai_core::tool::ToolOutput, ai_core::tool::ToolFailure>,
    > {
        *self.0.lock().unwrap() = Some(cx);
        Box::pin(async { Ok(ai_core::tool::ToolOutput::json(json!({}))) })
    }
}

/// The runner hands executions the graph, prompt hash, nested event sink and nested
/// port of the run.
#[tokio::test(start_paused = true)]
async fn executions_see_the_graph_prompt_hash_and_nested_port_of_the_run() {
    let kit = Kit::new();
    let seen = Arc::new(std::sync::Mutex::new(None));
    let probe = ai_core::tool::RegisteredTool {
        spec: crate::support::spec(
            "probe",
            ai_core::ToolEffect::ReadOnly,
            json!({"type": "object", "properties": {}}),
        ),
        executor: Arc::new(Probe(Arc::clone(&seen))),
    };
    let model = ScriptedModel::new([
        Turn::new().tool_call("c1", "core__probe", json!({})),
        Turn::text("b"),
    ]);
    let mut req = request();
    req.graph = Some("main".into());
    req.prompt_hash = Some("sha256:abc".into());
    let deps = kit.deps_with_extra(&model, policy(), None, vec![probe]);
    run_to_end(req, deps).await.1.unwrap();
    let cx = seen.lock().unwrap().clone().unwrap();
    assert_eq!(cx.graph.as_deref(), Some("main"));
    assert_eq!(cx.prompt_hash.as_deref(), Some("sha256:abc"));
    assert!(cx.events.is_connected());
    assert_eq!(cx.events.parent_tool_call_id(), "c1");
    let port = cx.nested.unwrap();
    assert_eq!((port.depth, port.model_id.as_str()), (0, "test-model"));
}

/// `usage_report` and `assistant_final` carry the run's prompt hash; a subagent's
/// `usage_report`s carry the child's own hash (its system prompt and tools).
#[tokio::test(start_paused = true)]
async fn usage_reports_and_the_final_carry_the_prompt_hash_of_their_run() {
    let kit = Kit::new();
    let model = ScriptedModel::new([
        call_researcher(),
        Turn::text("found it").usage(4, 1),
        Turn::text("the answer").usage(20, 5),
    ]);
    let mut req = request();
    req.prompt_hash = Some("parent-hash".into());
    let (events, outcome) = run_to_end(req, deps(&kit, &model, policy(), researcher())).await;
    outcome.unwrap();
    let hashes: Vec<(bool, Option<&str>)> = events
        .iter()
        .filter_map(|e| match &e.kind {
            AiEventKind::UsageReport { prompt_hash, .. }
            | AiEventKind::AssistantFinal { prompt_hash, .. } => {
                Some((e.parent_tool_call_id.is_some(), prompt_hash.as_deref()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(hashes.len(), 4, "{hashes:?}");
    let child: Vec<_> = hashes.iter().filter(|(nested, _)| *nested).collect();
    assert_eq!(child.len(), 1);
    let child_hash = child[0].1.expect("the child's usage carries its hash");
    assert!(child_hash.starts_with("sha256:"), "{child_hash}");
    for (nested, hash) in &hashes {
        if !nested {
            assert_eq!(*hash, Some("parent-hash"));
        }
    }
    let final_json = events
        .iter()
        .find(|e| matches!(e.kind, AiEventKind::AssistantFinal { .. }))
        .map(|e| serde_json::to_value(e).unwrap())
        .unwrap();
    assert_eq!(final_json["prompt_hash"], "parent-hash");
}
