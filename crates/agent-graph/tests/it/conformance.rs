//! Event sequences of runs with text, tools, tool failures and limits.
//!
//! Besides its own assertions, every case compares its whole event list with an insta
//! golden in `snapshots/` (run-dependent values redacted, see
//! `support::event_snapshot_settings`).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agent_graph::run::{RunError, ToolChoiceScope};
use agent_testing::{ScriptedModel, Turn};
use ai_core::{
    Message, ToolEffect, ToolId, ToolPolicy,
    approval::{ApprovalBinding, ApprovalDecision, ApprovalRequest, Approver},
    completion::{CompletionError, FinishReason, ToolCallOutcome, ToolChoice},
    event::{AiEventKind, ToolCallRef},
    message::MessageToolCall,
    tool::{RegisteredTool, ToolCallContext, ToolErrorCode, ToolExecutor, ToolFailure, ToolOutput},
};
use futures::future::BoxFuture;
use serde_json::json;

use crate::support::{
    Kit, assert_balanced, calls_then_answer, echo_round_trip, labels, open_policy, request,
    results, run_to_end, spec, streamed_text, strs, tool_messages,
};

/// Compares the run's whole event list with its golden
/// `snapshots/it__conformance__<test>.snap` (see `support::event_snapshot_settings`
/// for the redactions). Accept deliberate changes locally with
/// `INSTA_UPDATE=always cargo test -p toolwright-agent-graph --test it`; never on CI.
macro_rules! assert_events_snapshot {
    ($events:expr) => {
        crate::support::event_snapshot_settings().bind(|| insta::assert_json_snapshot!($events))
    };
}

#[tokio::test(start_paused = true)]
async fn text_only_run_streams_text_then_final_and_done() {
    let kit = Kit::new();
    let model = ScriptedModel::new([Turn::text("Hello there, friend.").usage(5, 3)]);
    let (events, outcome) = run_to_end(request(), kit.deps(&model)).await;
    assert_eq!(
        labels(&events),
        strs(&["text_delta", "usage_report", "assistant_final", "done"])
    );
    assert_eq!(streamed_text(&events), "Hello there, friend.");
    let output = outcome.unwrap();
    assert_eq!(output.content, "Hello there, friend.");
    assert_eq!(output.usage.len(), 1);
    assert_eq!(output.usage[0].total_tokens, 8);
    assert_eq!(
        output.messages,
        vec![
            Message::user("hi"),
            Message::assistant("Hello there, friend.")
        ]
    );
    assert_eq!(model.calls(), 1);
    assert_events_snapshot!(events);
}

#[tokio::test(start_paused = true)]
async fn usage_names_the_configured_model_and_keeps_the_one_that_served_the_call() {
    let kit = Kit::new();
    let model = ScriptedModel::new([
        Turn::text("Snapshot.")
            .usage(5, 3)
            .served_by("test-model-2026-11-01"),
        Turn::text("Same name.").usage(5, 3),
    ]);
    let (events, outcome) = run_to_end(request(), kit.deps(&model)).await;
    let output = outcome.unwrap();
    let fact = &output.usage[0];
    assert_eq!(fact.model, "test-model");
    assert_eq!(
        fact.response_model.as_deref(),
        Some("test-model-2026-11-01")
    );
    assert_eq!(fact.served_by(), "test-model-2026-11-01");
    let reported: Vec<(String, Option<String>)> = events
        .iter()
        .filter_map(|e| match &e.kind {
            AiEventKind::UsageReport {
                model,
                response_model,
                ..
            } => Some((model.clone(), response_model.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        reported,
        vec![(
            "test-model".to_owned(),
            Some("test-model-2026-11-01".to_owned())
        )]
    );
    // A provider that names the model it was asked for adds nothing.
    let (_, second) = run_to_end(request(), kit.deps(&model)).await;
    let second = second.unwrap();
    assert_eq!(second.usage[0].model, "test-model");
    assert_eq!(second.usage[0].response_model, None);
}

#[tokio::test(start_paused = true)]
async fn one_tool_call_round_trips_through_the_history() {
    let kit = Kit::new();
    let model = ScriptedModel::new([
        Turn::text("Checking.")
            .tool_call("call_1", "core__echo", json!({"text": "ping"}))
            .usage(10, 4),
        Turn::text("It said ping.").usage(20, 5),
    ]);
    let (events, outcome) = run_to_end(request(), kit.deps(&model)).await;
    assert_eq!(labels(&events), echo_round_trip());
    let output = outcome.unwrap();
    assert_eq!(output.content, "It said ping.");
    assert_eq!(output.usage.len(), 2);

    // The second model request carried the assistant's call and the tool's answer.
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[1].messages,
        vec![
            Message::user("hi"),
            Message::Assistant {
                blocks: Vec::new(),
                content: Some("Checking.".into()),
                reasoning: None,
                tool_calls: vec![MessageToolCall {
                    id: "call_1".into(),
                    name: "core__echo".into(),
                    arguments: json!({"text": "ping"}).to_string(),
                    raw: None,
                }],
            },
            Message::tool("call_1", json!({"echo": "ping"}).to_string()),
        ]
    );
    // Each request offered the catalog's tools and carried the run's ids.
    assert!(
        requests[0]
            .tools
            .iter()
            .any(|t| t.id.as_str() == "core__echo")
    );
    assert_eq!(requests[0].context, crate::support::ctx());
    assert_events_snapshot!(events);
}

#[tokio::test(start_paused = true)]
async fn read_only_calls_of_one_turn_run_concurrently_with_results_in_call_order() {
    let kit = Kit::new();
    let model = ScriptedModel::new([
        Turn::new()
            .tool_call("c1", "core__slow", json!({"ms": 60}))
            .tool_call("c2", "core__slow", json!({"ms": 20}))
            .tool_call("c3", "core__slow", json!({"ms": 40})),
        Turn::text("done"),
    ]);
    let started = tokio::time::Instant::now();
    let (events, outcome) = run_to_end(request(), kit.deps(&model)).await;
    // All three start before any finishes; results are emitted as calls finish.
    assert_eq!(
        labels(&events)[..6],
        strs(&[
            "tool_call_start:core__slow",
            "tool_call_start:core__slow",
            "tool_call_start:core__slow",
            "tool_call_result:core__slow:ok",
            "tool_call_result:core__slow:ok",
            "tool_call_result:core__slow:ok",
        ])
    );
    let finish_order: Vec<String> = results(&events).into_iter().map(|r| r.0).collect();
    assert_eq!(finish_order, strs(&["c2", "c3", "c1"]));
    // Overlap: all three were in flight together and the turn took the longest
    // call's time, not the sum.
    assert_eq!(kit.slow.max_in_flight(), 3);
    let spans = kit.slow.spans();
    let latest_start = spans.iter().map(|s| s.0).max().unwrap();
    let earliest_end = spans.iter().map(|s| s.1).min().unwrap();
    assert!(latest_start < earliest_end, "spans overlap: {spans:?}");
    assert!(started.elapsed() < std::time::Duration::from_millis(120));
    // The history keeps call order.
    let output = outcome.unwrap();
    let ids: Vec<String> = tool_messages(&output.messages)
        .into_iter()
        .map(|m| m.0)
        .collect();
    assert_eq!(ids, strs(&["c1", "c2", "c3"]));
    assert_eq!(
        tool_messages(&output.messages)[0].1,
        json!({"slept_ms": 60}).to_string()
    );
    // The events of the concurrent batch are snapshotted as emitted, not sorted: the
    // three calls are polled by one task (`buffered`, starts emitted in call order)
    // and finish on the paused clock at 20, 40 and 60 ms, so the finish order
    // c2, c3, c1 is deterministic (and asserted above).
    assert_events_snapshot!(events);
}

#[tokio::test(start_paused = true)]
async fn state_change_calls_of_one_turn_never_overlap() {
    let kit = Kit::new();
    let model = ScriptedModel::new([
        Turn::new()
            .tool_call("w1", "core__write", json!({"key": "a"}))
            .tool_call("w2", "core__write", json!({"key": "b"}))
            .tool_call("r1", "core__slow", json!({"ms": 5})),
        Turn::text("written"),
    ]);
    let deps = kit.deps_with(
        &model,
        ToolPolicy::allowing(["core__*"]).with_approval_for([]),
        None,
    );
    let (events, outcome) = run_to_end(request(), deps).await;
    // One at a time, in call order: each start is followed by its own result.
    let calls = [
        ("core__write", "ok"),
        ("core__write", "ok"),
        ("core__slow", "ok"),
    ];
    assert_eq!(labels(&events), calls_then_answer(&calls));
    assert_eq!(kit.write.calls(), 2);
    assert_eq!(kit.write.max_in_flight(), 1);
    let spans = kit.write.spans();
    assert!(spans[0].1 <= spans[1].0, "serialized: {spans:?}");
    let ids: Vec<String> = tool_messages(&outcome.unwrap().messages)
        .into_iter()
        .map(|m| m.0)
        .collect();
    assert_eq!(ids, strs(&["w1", "w2", "r1"]));
    assert_events_snapshot!(events);
}

#[tokio::test(start_paused = true)]
async fn a_failing_tool_is_reported_to_the_model_and_the_run_continues() {
    let kit = Kit::new();
    let model = ScriptedModel::new([
        Turn::new().tool_call("f1", "core__fail", json!({})),
        Turn::text("The tool failed, sorry."),
    ]);
    let (events, outcome) = run_to_end(request(), kit.deps(&model)).await;
    assert_eq!(
        labels(&events),
        calls_then_answer(&[("core__fail", "execution_failed")])
    );
    assert_eq!(results(&events)[0].3, "the disk is on fire");
    assert_eq!(outcome.unwrap().content, "The tool failed, sorry.");
    let seen = tool_messages(&model.requests()[1].messages);
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].0, "f1");
    let content: serde_json::Value = serde_json::from_str(&seen[0].1).unwrap();
    assert_eq!(
        content,
        json!({"error": "execution_failed", "message": "the disk is on fire"})
    );
    assert_events_snapshot!(events);
}

#[tokio::test(start_paused = true)]
async fn invalid_json_arguments_give_an_invalid_json_result_and_the_run_continues() {
    let kit = Kit::new();
    let model = ScriptedModel::new([
        Turn::new().tool_call_with_outcome(
            "j1",
            "core__echo",
            "{bad",
            ToolCallOutcome::InvalidJson,
        ),
        Turn::text("retrying later"),
    ]);
    let (events, outcome) = run_to_end(request(), kit.deps(&model)).await;
    assert_eq!(
        labels(&events),
        calls_then_answer(&[("core__echo", "invalid_json")])
    );
    // The message is safe: it does not echo the raw argument text.
    assert!(!results(&events)[0].3.contains("{bad"));
    outcome.unwrap();
    let seen = tool_messages(&model.requests()[1].messages);
    assert!(seen[0].1.contains("invalid_json"), "{seen:?}");
    // History never carries arguments that are not JSON (providers reject them).
    let recorded = model.requests()[1].messages.iter().find_map(|m| match m {
        Message::Assistant { tool_calls, .. } if !tool_calls.is_empty() => {
            Some(tool_calls[0].arguments.clone())
        }
        _ => None,
    });
    assert_eq!(recorded.as_deref(), Some("{}"));
    assert_events_snapshot!(events);
}

#[tokio::test(start_paused = true)]
async fn truncated_arguments_give_an_invalid_json_result_about_truncation() {
    let kit = Kit::new();
    let model = ScriptedModel::new([
        Turn::new().tool_call_with_outcome(
            "t1",
            "core__echo",
            r#"{"text": "a very long"#,
            ToolCallOutcome::Truncated,
        ),
        Turn::text("ok"),
    ]);
    let (events, outcome) = run_to_end(request(), kit.deps(&model)).await;
    assert_eq!(
        labels(&events),
        calls_then_answer(&[("core__echo", "invalid_json")])
    );
    let (_, ok, code, message) = results(&events).remove(0);
    assert!(!ok);
    assert_eq!(code, Some(ToolErrorCode::InvalidJson));
    assert!(message.contains("cut off"), "{message}");
    outcome.unwrap();
    assert_events_snapshot!(events);
}

#[tokio::test(start_paused = true)]
async fn an_unknown_tool_gives_unknown_tool_and_the_run_continues() {
    let kit = Kit::new();
    let model = ScriptedModel::new([
        Turn::new().tool_call("u1", "core__nope", json!({})),
        Turn::text("ok"),
    ]);
    let (events, outcome) = run_to_end(request(), kit.deps(&model)).await;
    assert_eq!(
        labels(&events),
        calls_then_answer(&[("core__nope", "unknown_tool")])
    );
    outcome.unwrap();
    assert!(
        tool_messages(&model.requests()[1].messages)[0]
            .1
            .contains("unknown_tool")
    );
    assert_events_snapshot!(events);
}

#[tokio::test(start_paused = true)]
async fn unusable_call_ids_are_replaced_by_minted_ids_used_throughout() {
    let kit = Kit::new();
    let too_long = "x".repeat(200);
    let model = ScriptedModel::new([
        // One call per turn, so the order of the events is not a scheduling question.
        Turn::new().tool_call("", "core__echo", json!({"text": "no id"})),
        Turn::new().tool_call(too_long.clone(), "core__echo", json!({"text": "long id"})),
        Turn::text("ok"),
    ]);
    let (events, outcome) = run_to_end(request(), kit.deps(&model)).await;
    assert_eq!(
        labels(&events),
        calls_then_answer(&[("core__echo", "ok"), ("core__echo", "ok")])
    );
    // Two fresh, distinct UUIDs (the checker paired each start with its result).
    let ids: Vec<String> = results(&events).into_iter().map(|r| r.0).collect();
    assert_eq!(ids.len(), 2);
    assert_ne!(ids[0], ids[1]);
    for id in &ids {
        assert_eq!(id.len(), 36, "{id}");
        assert_ne!(id, &too_long);
    }
    // The history the model saw last uses the same minted ids, balanced.
    let seen = model.requests()[2].messages.clone();
    let seen_ids: Vec<String> = tool_messages(&seen).into_iter().map(|m| m.0).collect();
    assert_eq!(seen_ids, ids);
    assert_balanced(&seen);
    outcome.unwrap();
    assert_events_snapshot!(events);
}

#[tokio::test(start_paused = true)]
async fn a_registered_but_disallowed_tool_is_not_offered_and_is_policy_denied() {
    let kit = Kit::new();
    let model = ScriptedModel::new([
        Turn::new().tool_call("p1", "core__fail", json!({})),
        Turn::text("ok"),
    ]);
    let deps = kit.deps_with(&model, ToolPolicy::allowing(["core__echo"]), None);
    let (events, outcome) = run_to_end(request(), deps).await;
    assert_eq!(
        labels(&events),
        calls_then_answer(&[("core__fail", "policy_denied")])
    );
    outcome.unwrap();
    let offered: Vec<String> = model.requests()[0]
        .tools
        .iter()
        .map(|t| t.id.as_str().to_owned())
        .collect();
    assert_eq!(offered, strs(&["core__echo"]));
    assert_events_snapshot!(events);
}

/// The last allowed turn asks for tools: they are not executed (no model would see
/// their results); the caller learns which calls were skipped from the
/// `tool_calls_not_executed` event and from the error.
#[tokio::test(start_paused = true)]
async fn max_iterations_stops_the_run_with_a_balanced_history() {
    let kit = Kit::new();
    let turns = (1..=5).map(|i| {
        Turn::new()
            .tool_call(format!("m{i}"), "core__echo", json!({"text": "again"}))
            .tool_call(format!("s{i}"), "core__slow", json!({"ms": 1}))
    });
    let model = ScriptedModel::new(turns);
    let mut req = request();
    req.limits.max_iterations = 3;
    let (events, outcome) = run_to_end(req, kit.deps(&model)).await;
    // (`echo` answers as soon as it is polled, before `slow` starts.)
    let round = [
        "tool_call_start:core__echo",
        "tool_call_result:core__echo:ok",
        "tool_call_start:core__slow",
        "tool_call_result:core__slow:ok",
    ];
    let mut expected: Vec<&str> = round.repeat(2);
    expected.extend([
        "tool_calls_not_executed:2",
        "error:max_iterations_exceeded",
        "done",
    ]);
    assert_eq!(labels(&events), strs(&expected));
    // Only the two executed rounds ran the tool.
    assert_eq!(kit.slow.calls(), 2);
    let skipped = vec![
        ToolCallRef {
            tool_call_id: "m3".into(),
            tool_name: "core__echo".into(),
        },
        ToolCallRef {
            tool_call_id: "s3".into(),
            tool_name: "core__slow".into(),
        },
    ];
    let listed = events.iter().find_map(|e| match &e.kind {
        AiEventKind::ToolCallsNotExecuted { code, calls } => Some((code.clone(), calls.clone())),
        _ => None,
    });
    assert_eq!(
        listed,
        Some(("max_iterations_exceeded".to_owned(), skipped.clone()))
    );
    let error = outcome.unwrap_err();
    assert_eq!(
        error,
        RunError::MaxIterations {
            limit: 3,
            not_executed: skipped.clone()
        }
    );
    assert_eq!(error.not_executed(), skipped.as_slice());
    assert_eq!(error.code(), "max_iterations_exceeded");
    assert!(error.to_string().contains("max_iterations"), "{error}");
    assert!(
        error.to_string().contains("2 tool calls were not executed"),
        "{error}"
    );
    assert_eq!(model.calls(), 3);
    assert_eq!(model.remaining(), 2);
    // The last request the model saw had two complete rounds, balanced.
    let last = model.requests().pop().unwrap();
    assert_eq!(tool_messages(&last.messages).len(), 4);
    assert_balanced(&last.messages);
    assert_events_snapshot!(events);
}

#[tokio::test(start_paused = true)]
async fn max_iterations_is_clamped_to_at_least_one() {
    let kit = Kit::new();
    let model = ScriptedModel::new([Turn::text("once")]);
    let mut req = request();
    req.limits.max_iterations = 0;
    let (events, outcome) = run_to_end(req, kit.deps(&model)).await;
    assert_eq!(outcome.unwrap().content, "once");
    assert_events_snapshot!(events);
}

#[tokio::test(start_paused = true)]
async fn a_provider_error_mid_stream_ends_the_run_after_the_partial_text() {
    let kit = Kit::new();
    let model = ScriptedModel::new([Turn::new().and_text("partial").error_after_deltas(
        CompletionError::Provider {
            code: Some("overloaded".into()),
            message: "try again".into(),
        },
    )]);
    let (events, outcome) = run_to_end(request(), kit.deps(&model)).await;
    assert_eq!(
        labels(&events),
        strs(&["text_delta", "error:provider_error", "done"])
    );
    assert_eq!(streamed_text(&events), "partial");
    assert_eq!(outcome.unwrap_err().code(), "provider_error");
    assert_events_snapshot!(events);
}

#[tokio::test(start_paused = true)]
async fn a_provider_error_before_anything_ends_the_run() {
    let kit = Kit::new();
    let model = ScriptedModel::new([Turn::error(CompletionError::Http {
        status: 503,
        message: "unavailable".into(),
    })]);
    let (events, outcome) = run_to_end(request(), kit.deps(&model)).await;
    assert_eq!(
        labels(&events),
        strs(&["error:provider_http_error", "done"])
    );
    assert!(outcome.is_err());
    assert_events_snapshot!(events);
}

#[tokio::test(start_paused = true)]
async fn a_model_request_limit_stops_the_run() {
    let kit = Kit::new();
    let turns =
        (1..=4).map(|i| Turn::new().tool_call(format!("q{i}"), "core__echo", json!({"text": "x"})));
    let model = ScriptedModel::new(turns);
    let mut req = request();
    req.limits.max_model_requests = Some(2);
    let (events, outcome) = run_to_end(req, kit.deps(&model)).await;
    // The second (last allowed) request's call is not executed: no third request
    // could show its result to the model.
    assert_eq!(
        labels(&events),
        strs(&[
            "tool_call_start:core__echo",
            "tool_call_result:core__echo:ok",
            "tool_calls_not_executed:1",
            "error:usage_limit_exceeded",
            "done",
        ])
    );
    let error = outcome.unwrap_err();
    assert_eq!(error.code(), "usage_limit_exceeded");
    assert_eq!(
        error.not_executed(),
        [ToolCallRef {
            tool_call_id: "q2".into(),
            tool_name: "core__echo".into()
        }]
    );
    assert_eq!(model.calls(), 2);
    assert_events_snapshot!(events);
}

/// A snapshot whose test was renamed or deleted fails here (insta itself does not
/// notice): every file in `snapshots/` must name a test function of this file.
#[test]
fn every_snapshot_belongs_to_a_test() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/snapshots");
    let source = include_str!("conformance.rs");
    for entry in std::fs::read_dir(dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".snap.new") {
            continue; // a pending local update, reviewed by its author
        }
        let test = name
            .strip_prefix("it__conformance__")
            .and_then(|n| n.strip_suffix(".snap"))
            .unwrap_or_else(|| panic!("unexpected file in snapshots/: {name}"));
        assert!(
            source.contains(&format!("fn {test}()")),
            "stale snapshot {name}: no test `{test}` in conformance.rs; delete it"
        );
    }
}

/// The tool choice of each request `model` received.
fn tool_choices(model: &ScriptedModel) -> Vec<ToolChoice> {
    let requests = model.requests();
    requests.iter().map(|r| r.tool_choice.clone()).collect()
}

/// A forced tool choice applies to the first turn only, so the run can finish.
#[tokio::test(start_paused = true)]
async fn a_forced_tool_choice_applies_to_the_first_turn_only_by_default() {
    let echo = ToolId::parse("core__echo").unwrap();
    for forced in [ToolChoice::Required, ToolChoice::Tool(echo)] {
        let kit = Kit::new();
        let model = ScriptedModel::new([
            Turn::new().tool_call("c1", "core__echo", json!({"text": "x"})),
            Turn::text("done"),
        ]);
        let mut req = request();
        req.tool_choice = forced.clone();
        let (_, outcome) = run_to_end(req, kit.deps(&model)).await;
        assert_eq!(outcome.unwrap().content, "done");
        let choices = tool_choices(&model);
        assert_eq!(choices, vec![forced.clone(), ToolChoice::Auto]);

        // Every turn, when asked for.
        let model = ScriptedModel::new([
            Turn::new().tool_call("c1", "core__echo", json!({"text": "x"})),
            Turn::text("done"),
        ]);
        let mut req = request();
        req.tool_choice = forced.clone();
        req.tool_choice_scope = ToolChoiceScope::EveryTurn;
        run_to_end(req, kit.deps(&model)).await.1.unwrap();
        let choices = tool_choices(&model);
        assert_eq!(choices, vec![forced.clone(), forced.clone()]);
    }
    // `none` is not a forced call: it holds for every turn.
    let kit = Kit::new();
    let model = ScriptedModel::new([
        Turn::new().tool_call("c1", "core__echo", json!({"text": "x"})),
        Turn::text("done"),
    ]);
    let mut req = request();
    req.tool_choice = ToolChoice::None;
    run_to_end(req, kit.deps(&model)).await.1.unwrap();
    let choices = tool_choices(&model);
    assert_eq!(choices, vec![ToolChoice::None, ToolChoice::None]);
}

/// The `finish_reason` of the `assistant_final` event.
fn final_reason(events: &[ai_core::AiEvent]) -> String {
    events
        .iter()
        .find_map(|e| match &e.kind {
            AiEventKind::AssistantFinal { finish_reason, .. } => Some(finish_reason.clone()),
            _ => None,
        })
        .expect("an assistant_final")
}

#[tokio::test(start_paused = true)]
async fn a_final_answer_cut_by_the_token_limit_is_not_a_silent_success() {
    let kit = Kit::new();
    let model = ScriptedModel::new([Turn::text("The answer is").finish(FinishReason::Length)]);
    let (events, outcome) = run_to_end(request(), kit.deps(&model)).await;
    assert_eq!(final_reason(&events), "length");
    let output = outcome.unwrap();
    assert_eq!(output.content, "The answer is");
    assert_eq!(output.finish_reason, FinishReason::Length);
    assert_eq!(
        output.complete(),
        Err(RunError::Incomplete {
            reason: "length".into()
        })
    );
    assert_eq!(output.complete().unwrap_err().code(), "incomplete_answer");
    assert_events_snapshot!(events);
}

#[tokio::test(start_paused = true)]
async fn a_filtered_final_answer_is_not_a_silent_success() {
    let kit = Kit::new();
    let model = ScriptedModel::new([Turn::text("Here is how").finish(FinishReason::ContentFilter)]);
    let (events, outcome) = run_to_end(request(), kit.deps(&model)).await;
    assert_eq!(final_reason(&events), "content_filter");
    let output = outcome.unwrap();
    assert_eq!(
        output.complete(),
        Err(RunError::Incomplete {
            reason: "content_filter".into()
        })
    );
    assert_events_snapshot!(events);
}

#[tokio::test(start_paused = true)]
async fn a_refusal_is_not_a_silent_success() {
    let kit = Kit::new();
    let model = ScriptedModel::new([Turn::refusal("I can't help with that.").usage(4, 6)]);
    let (events, outcome) = run_to_end(request(), kit.deps(&model)).await;
    assert_eq!(final_reason(&events), "refusal");
    assert_eq!(
        labels(&events),
        strs(&["usage_report", "assistant_final", "done"])
    );
    let output = outcome.unwrap();
    assert_eq!(output.content, "I can't help with that.");
    assert_eq!(output.refusal.as_deref(), Some("I can't help with that."));
    assert_eq!(
        output.complete(),
        Err(RunError::Incomplete {
            reason: "refusal".into()
        })
    );
    assert_events_snapshot!(events);
}

#[tokio::test(start_paused = true)]
async fn reasoning_streams_as_its_own_events_and_stays_out_of_the_answer() {
    let kit = Kit::new();
    let model = ScriptedModel::new([
        Turn::reasoning("I should echo first.").tool_call("r1", "core__echo", json!({"text": "x"})),
        Turn::reasoning("Now answer.").and_text("Done."),
    ]);
    let (events, outcome) = run_to_end(request(), kit.deps(&model)).await;
    assert_eq!(
        labels(&events),
        strs(&[
            "reasoning_delta",
            "reasoning_delta",
            "reasoning_delta",
            "reasoning_delta",
            "tool_call_start:core__echo",
            "tool_call_result:core__echo:ok",
            "reasoning_delta",
            "reasoning_delta",
            "text_delta",
            "assistant_final",
            "done",
        ])
    );
    assert_eq!(final_reason(&events), "stop");
    let output = outcome.unwrap();
    assert_eq!(output.complete(), Ok("Done."));
    // The reasoning of the tool-call turn went back to the model with its calls.
    let history = &model.requests()[1].messages;
    assert!(
        matches!(&history[1], Message::Assistant { reasoning: Some(r), .. } if r == "I should echo first."),
        "{history:?}"
    );
    assert_events_snapshot!(events);
}

/// `RunOutput.records`: one audit record per call, in call order, with the ids,
/// tools, outcomes and redacted values the events showed.
#[tokio::test(start_paused = true)]
async fn the_output_records_every_tool_call_in_call_order() {
    let kit = Kit::new();
    let model = ScriptedModel::new([
        Turn::new()
            .tool_call("c1", "core__slow", json!({"ms": 30}))
            .tool_call("c2", "core__fail", json!({}))
            .tool_call("c3", "core__nope", json!({})),
        Turn::new()
            .tool_call("c4", "core__write", json!({"key": "k"}))
            .tool_call_with_outcome("c5", "core__echo", "{bad", ToolCallOutcome::InvalidJson),
        Turn::text("recorded"),
    ]);
    let (events, outcome) = run_to_end(request(), kit.deps(&model)).await;
    let output = outcome.unwrap();
    let records: Vec<(&str, &str, Option<ToolErrorCode>)> = output
        .records
        .iter()
        .map(|r| (r.tool_call_id.as_str(), r.name.as_str(), r.error))
        .collect();
    assert_eq!(
        records,
        vec![
            ("c1", "core__slow", None),
            ("c2", "core__fail", Some(ToolErrorCode::ExecutionFailed)),
            ("c3", "core__nope", Some(ToolErrorCode::UnknownTool)),
            ("c4", "core__write", None),
            ("c5", "core__echo", Some(ToolErrorCode::InvalidJson)),
        ]
    );
    // The same calls as the events (which list results as they finished), and the
    // same order as the history's tool messages.
    let mut by_events: Vec<(String, bool, Option<ToolErrorCode>)> = results(&events)
        .into_iter()
        .map(|(id, ok, code, _)| (id, ok, code))
        .collect();
    by_events.sort_by(|a, b| a.0.cmp(&b.0));
    let mut by_records: Vec<(String, bool, Option<ToolErrorCode>)> = output
        .records
        .iter()
        .map(|r| (r.tool_call_id.clone(), r.error.is_none(), r.error))
        .collect();
    by_records.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(by_records, by_events);
    let history_ids: Vec<String> = tool_messages(&output.messages)
        .into_iter()
        .map(|m| m.0)
        .collect();
    let record_ids: Vec<String> = output
        .records
        .iter()
        .map(|r| r.tool_call_id.clone())
        .collect();
    assert_eq!(record_ids, history_ids);
    for record in &output.records {
        assert!(record.started_at_ms <= record.ended_at_ms);
        assert_eq!(record.result.is_some(), record.error.is_none());
    }
    assert_eq!(output.records[0].args, json!({"ms": 30}));
    assert_eq!(output.records[0].result, Some(json!({"slept_ms": 30})));
    assert_eq!(output.records[3].result, Some(json!({"written": "k"})));
}

/// `core__boom` (state_change): panics while it runs.
struct Boom;

impl ToolExecutor for Boom {
    fn execute(
        &self,
        _cx: ToolCallContext,
        _args: serde_json::Value,
    ) -> BoxFuture<'static, Result<ToolOutput, ToolFailure>> {
        Box::pin(async { panic!("boom") })
    }
}

/// `core__verbose` (read_only): fails with a 20 KB message.
struct Verbose;

impl ToolExecutor for Verbose {
    fn execute(
        &self,
        _cx: ToolCallContext,
        _args: serde_json::Value,
    ) -> BoxFuture<'static, Result<ToolOutput, ToolFailure>> {
        Box::pin(async {
            Err(ToolFailure::new(
                ToolErrorCode::ExecutionFailed,
                "日本".repeat(3_500),
            ))
        })
    }
}

fn failing_tools() -> Vec<RegisteredTool> {
    let any = json!({"type": "object"});
    vec![
        RegisteredTool {
            spec: spec("boom", ToolEffect::StateChange, any.clone()),
            executor: Arc::new(Boom),
        },
        RegisteredTool {
            spec: spec("verbose", ToolEffect::ReadOnly, any),
            executor: Arc::new(Verbose),
        },
    ]
}

/// Approves everything but panics on its `nth` request (counting from 1).
struct PanicsOn {
    nth: usize,
    seen: AtomicUsize,
}

impl Approver for PanicsOn {
    fn review(&self, request: ApprovalRequest) -> BoxFuture<'static, ApprovalDecision> {
        let n = self.seen.fetch_add(1, Ordering::SeqCst) + 1;
        assert_ne!(n, self.nth, "the approver crashed");
        let grant = ApprovalBinding::for_request(&request);
        Box::pin(std::future::ready(ApprovalDecision::Approved(grant)))
    }
}

#[tokio::test(start_paused = true)]
async fn a_tool_that_panics_mid_turn_leaves_its_siblings_and_the_run_intact() {
    let kit = Kit::new();
    let model = ScriptedModel::new([
        Turn::new()
            .tool_call("w1", "core__write", json!({"key": "a"}))
            .tool_call("b2", "core__boom", json!({}))
            .tool_call("w3", "core__write", json!({"key": "c"})),
        Turn::text("two of three"),
    ]);
    let deps = kit.deps_with_extra(&model, open_policy(), None, failing_tools());
    let (events, outcome) = run_to_end(request(), deps).await;
    let calls = [
        ("core__write", "ok"),
        ("core__boom", "execution_failed"),
        ("core__write", "ok"),
    ];
    assert_eq!(labels(&events), calls_then_answer(&calls));
    assert_eq!(kit.write.calls(), 2);
    assert_eq!(outcome.unwrap().content, "two of three");
    assert_events_snapshot!(events);
}

#[tokio::test(start_paused = true)]
async fn an_approver_that_panics_mid_turn_is_a_typed_refusal_and_the_run_continues() {
    let kit = Kit::new();
    let model = ScriptedModel::new([
        Turn::new()
            .tool_call("w1", "core__write", json!({"key": "a"}))
            .tool_call("w2", "core__write", json!({"key": "b"}))
            .tool_call("w3", "core__write", json!({"key": "c"})),
        Turn::text("two of three"),
    ]);
    let approver = Arc::new(PanicsOn {
        nth: 2,
        seen: AtomicUsize::new(0),
    });
    let policy = ToolPolicy::allowing(["core__*"]).with_approval_for([ToolEffect::StateChange]);
    let deps = kit.deps_with_extra(&model, policy, Some(approver), failing_tools());
    let (events, outcome) = run_to_end(request(), deps).await;
    let calls = [
        ("core__write", "ok"),
        ("core__write", "approval_required"),
        ("core__write", "ok"),
    ];
    assert_eq!(labels(&events), calls_then_answer(&calls));
    assert_eq!(
        results(&events)[1].3,
        "the approver failed, so the call was not approved"
    );
    assert_eq!(kit.write.calls(), 2);
    outcome.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_long_tool_failure_message_is_bounded_for_events_and_the_model() {
    let kit = Kit::new();
    let model = ScriptedModel::new([
        Turn::new().tool_call("v1", "core__verbose", json!({})),
        Turn::text("ok"),
    ]);
    let deps = kit.deps_with_extra(&model, open_policy(), None, failing_tools());
    let (events, outcome) = run_to_end(request(), deps).await;
    outcome.unwrap();
    let message = results(&events).remove(0).3;
    assert!(
        message.len() <= ai_core::text::MAX_FAILURE_MESSAGE_BYTES,
        "{}",
        message.len()
    );
    assert!(message.ends_with(ai_core::text::TRUNCATION_MARKER));
    assert!(message.starts_with("日本日本"));
    let seen = tool_messages(&model.requests()[1].messages);
    let content: serde_json::Value = serde_json::from_str(&seen[0].1).unwrap();
    assert_eq!(content["message"], json!(message));
}
