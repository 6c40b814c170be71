//! Approvals: bound to the call id, the tool and the exact canonical arguments.

use std::sync::Arc;

use agent_graph::run::RunDeps;
use agent_testing::{ScriptedModel, Turn};
use ai_core::{
    ToolEffect, ToolPolicy,
    approval::{ApprovalBinding, Approver, GrantLedger},
    completion::ToolCallOutcome,
    tool::ToolErrorCode,
};
use serde_json::{Value, json};

use crate::support::{
    Kit, RUN_ID, RecordingApprover, args_hash, calls_then_answer, labels, request, results,
    run_to_end, strs,
};

fn approval_policy() -> ToolPolicy {
    ToolPolicy::allowing(["core__*"]).with_approval_for([ToolEffect::StateChange])
}

/// The kit's tools for `model`, state changes approved by `approver`.
fn deps_approved_by(
    kit: &Kit,
    model: &ScriptedModel,
    approver: &Arc<RecordingApprover>,
) -> RunDeps {
    let approver = Arc::clone(approver) as Arc<dyn Approver>;
    kit.deps_with(model, approval_policy(), Some(approver))
}

/// A ledger holding one grant for call `g1` of `core__write` with `args`,
/// issued for run `scope`.
fn ledger_granting(scope: &str, args: &Value) -> Arc<GrantLedger> {
    let ledger = Arc::new(GrantLedger::new());
    ledger.insert(ApprovalBinding {
        scope: scope.into(),
        tool_call_id: "g1".into(),
        tool_id: "core__write".into(),
        args_hash: args_hash(args),
    });
    ledger
}

#[tokio::test(start_paused = true)]
async fn an_approved_call_runs_and_the_approver_saw_the_canonical_arguments() {
    let kit = Kit::new();
    let approver = RecordingApprover::new(true);
    let model = ScriptedModel::new([
        // Keys out of order and spaced: the approver must see the canonical form.
        Turn::new().tool_call_with_outcome(
            "a1",
            "core__write",
            r#"{ "value": 7,  "key": "k" }"#,
            ToolCallOutcome::Complete,
        ),
        Turn::text("stored"),
    ]);
    let deps = deps_approved_by(&kit, &model, &approver);
    let (events, outcome) = run_to_end(request(), deps).await;
    assert_eq!(labels(&events), calls_then_answer(&[("core__write", "ok")]));
    outcome.unwrap();
    assert_eq!(kit.write.calls(), 1);
    let seen = approver.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    let req = &seen[0];
    assert_eq!(req.run_id, RUN_ID);
    assert_eq!(req.tool_call_id, "a1");
    assert_eq!(req.tool_id.as_str(), "core__write");
    assert_eq!(req.effect, ToolEffect::StateChange);
    assert_eq!(req.canonical_args, r#"{"key":"k","value":7}"#);
    assert_eq!(req.args_hash, args_hash(&json!({"key": "k", "value": 7})));
}

#[tokio::test(start_paused = true)]
async fn read_only_calls_are_not_sent_for_approval() {
    let kit = Kit::new();
    let approver = RecordingApprover::new(false);
    let model = ScriptedModel::new([
        Turn::new().tool_call("e1", "core__echo", json!({"text": "x"})),
        Turn::text("ok"),
    ]);
    let deps = deps_approved_by(&kit, &model, &approver);
    let (events, _) = run_to_end(request(), deps).await;
    assert!(results(&events)[0].1);
    assert!(approver.seen.lock().unwrap().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_denied_call_does_not_run_and_the_model_is_told() {
    let kit = Kit::new();
    let approver = RecordingApprover::new(false);
    let model = ScriptedModel::new([
        Turn::new().tool_call("d1", "core__write", json!({"key": "k"})),
        Turn::text("understood"),
    ]);
    let deps = deps_approved_by(&kit, &model, &approver);
    let (events, outcome) = run_to_end(request(), deps).await;
    let denied = [("core__write", "approval_denied")];
    assert_eq!(labels(&events), calls_then_answer(&denied));
    assert!(results(&events)[0].3.contains("the user said no"));
    assert_eq!(kit.write.calls(), 0);
    outcome.unwrap();
    let seen = crate::support::tool_messages(&model.requests()[1].messages);
    assert!(seen[0].1.contains("approval_denied"));
}

#[tokio::test(start_paused = true)]
async fn without_an_approver_a_state_change_needs_approval() {
    let kit = Kit::new();
    let model = ScriptedModel::new([
        Turn::new().tool_call("n1", "core__write", json!({"key": "k"})),
        Turn::text("ok"),
    ]);
    let (events, _) = run_to_end(request(), kit.deps_with(&model, approval_policy(), None)).await;
    assert_eq!(results(&events)[0].2, Some(ToolErrorCode::ApprovalRequired));
    assert_eq!(kit.write.calls(), 0);
}

#[tokio::test(start_paused = true)]
async fn a_grant_for_other_arguments_is_refused() {
    let kit = Kit::new();
    let ledger = ledger_granting(RUN_ID, &json!({"key": "harmless"}));
    let model = ScriptedModel::new([
        Turn::new().tool_call("g1", "core__write", json!({"key": "dangerous"})),
        Turn::text("ok"),
    ]);
    let deps = kit.deps_with(&model, approval_policy(), Some(ledger.clone()));
    let (events, outcome) = run_to_end(request(), deps).await;
    let (_, ok, code, message) = results(&events).remove(0);
    assert!(!ok);
    assert_eq!(code, Some(ToolErrorCode::ApprovalInvalid));
    assert!(message.contains("exact arguments"), "{message}");
    assert_eq!(kit.write.calls(), 0);
    assert!(ledger.is_empty(), "the grant was consumed by the attempt");
    outcome.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_grant_is_used_once_and_a_replayed_call_id_is_refused() {
    let kit = Kit::new();
    let args = json!({"key": "k"});
    let ledger = ledger_granting(RUN_ID, &args);
    let model = ScriptedModel::new([
        Turn::new().tool_call("g1", "core__write", args.clone()),
        Turn::new().tool_call("g1", "core__write", args.clone()),
        Turn::text("ok"),
    ]);
    let deps = kit.deps_with(&model, approval_policy(), Some(ledger.clone()));
    let (events, outcome) = run_to_end(request(), deps).await;
    let replayed = [("core__write", "ok"), ("core__write", "approval_required")];
    assert_eq!(labels(&events), calls_then_answer(&replayed));
    assert_eq!(kit.write.calls(), 1);
    assert!(ledger.is_empty());
    outcome.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_grant_issued_for_another_run_is_refused_and_left_for_that_run() {
    let kit = Kit::new();
    let args = json!({"key": "k"});
    // Exactly this call id, tool and arguments, but issued for another run.
    let ledger = ledger_granting("another-run", &args);
    let model = ScriptedModel::new([
        Turn::new().tool_call("g1", "core__write", args),
        Turn::text("ok"),
    ]);
    let deps = kit.deps_with(&model, approval_policy(), Some(ledger.clone()));
    let (events, outcome) = run_to_end(request(), deps).await;
    let (_, ok, code, message) = results(&events).remove(0);
    assert!(!ok);
    assert_eq!(code, Some(ToolErrorCode::ApprovalRequired));
    assert!(message.contains("no approval was given"), "{message}");
    assert_eq!(kit.write.calls(), 0);
    assert_eq!(
        ledger.len(),
        1,
        "the other run's grant is neither used nor consumed"
    );
    outcome.unwrap();
}

#[tokio::test(start_paused = true)]
async fn without_an_approver_approval_tools_are_not_offered_to_the_model() {
    let kit = Kit::new();
    let model = ScriptedModel::new([Turn::text("ok")]);
    run_to_end(request(), kit.deps_with(&model, approval_policy(), None))
        .await
        .1
        .unwrap();
    let offered: Vec<String> = model.requests()[0]
        .tools
        .iter()
        .map(|t| t.id.as_str().to_owned())
        .collect();
    assert!(!offered.contains(&"core__write".to_owned()), "{offered:?}");
    assert!(offered.contains(&"core__echo".to_owned()), "{offered:?}");

    // With an approver, the same runner setup offers it.
    let model = ScriptedModel::new([Turn::text("ok")]);
    let approver: Arc<dyn Approver> = RecordingApprover::new(true);
    run_to_end(
        request(),
        kit.deps_with(&model, approval_policy(), Some(approver)),
    )
    .await
    .1
    .unwrap();
    assert!(
        model.requests()[0]
            .tools
            .iter()
            .any(|t| t.id.as_str() == "core__write")
    );
}

#[tokio::test(start_paused = true)]
async fn with_deferred_approvals_the_run_pauses_and_runs_only_what_needs_no_approval() {
    let kit = Kit::new();
    let ledger = Arc::new(GrantLedger::new());
    let model = ScriptedModel::new([
        Turn::new()
            .tool_call("e1", "core__echo", json!({"text": "x"}))
            .tool_call("w1", "core__write", json!({"key": "k", "value": 1}))
            // Invalid arguments are not worth an approval: the runner refuses them.
            .tool_call("w2", "core__write", json!({"key": 3})),
        Turn::text("never asked for"),
    ]);
    let deps = kit.deps_with(
        &model,
        approval_policy(),
        Some(Arc::clone(&ledger) as Arc<dyn Approver>),
    );
    let mut req = request();
    req.defer_approvals = true;
    let (events, outcome) = run_to_end(req, deps).await;
    assert_eq!(
        labels(&events),
        strs(&[
            "tool_call_start:core__echo",
            "tool_call_result:core__echo:ok",
            "tool_call_start:core__write",
            "tool_call_result:core__write:invalid_args",
            "tool_approval_requested:core__write",
            "done",
        ])
    );
    let output = outcome.unwrap();
    assert_eq!(kit.write.calls(), 0, "nothing that needs approval ran");
    assert_eq!(output.pending_approvals().len(), 1);
    let pending = &output.pending_approvals()[0];
    assert_eq!(pending.tool_call_id, "w1");
    assert_eq!(pending.tool_name, "core__write");
    assert_eq!(pending.args, json!({"key": "k", "value": 1}));
    assert_eq!(
        pending.args_hash,
        args_hash(&json!({"value": 1, "key": "k"}))
    );
    let requested = events
        .iter()
        .find(|e| {
            matches!(
                e.kind,
                ai_core::event::AiEventKind::ToolApprovalRequested { .. }
            )
        })
        .expect("an approval request");
    match &requested.kind {
        ai_core::event::AiEventKind::ToolApprovalRequested {
            tool_call_id,
            args,
            args_hash: hash,
            ..
        } => {
            assert_eq!(tool_call_id, "w1");
            assert_eq!(args, &json!({"key": "k", "value": 1}));
            assert_eq!(hash, &pending.args_hash);
        }
        other => panic!("{other:?}"),
    }
    // The history has the assistant message with all three calls and tool messages
    // for the two that ran; the pending one waits for the continuation.
    let tools: Vec<&str> = output
        .messages
        .iter()
        .filter_map(|m| match m {
            ai_core::Message::Tool { tool_call_id, .. } => Some(tool_call_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(tools, ["e1", "w2"]);
    assert_eq!(model.requests().len(), 1, "no second model turn");
    assert!(ledger.is_empty());
}
