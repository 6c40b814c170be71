//! Event sequences of runs with text, tools, tool failures and limits.
//!
//! Besides its own assertions, every case compares its whole event list with an insta
//! golden in `snapshots/` (run-dependent values redacted, see
//! `support::event_snapshot_settings`).

use agent_testing::{ScriptedModel, Turn};
use ai_core::{
    CompletionError, Message, MessageToolCall, ToolCallOutcome, ToolErrorCode, ToolPolicy,
};
use serde_json::json;

use crate::support::{
    Kit, assert_balanced, labels, request, results, run_to_end, streamed_text, strs, tool_messages,
};

/// Compares the run's whole event list with its golden
/// `snapshots/it__conformance__<test>.snap` (see `support::event_snapshot_settings`
/// for the redactions). Accept deliberate changes locally with
/// `INSTA_UPDATE=always cargo test -p agent-graph --test it`; never on CI.
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
async fn one_tool_call_round_trips_through_the_history() {
    let kit = Kit::new();
    let model = ScriptedModel::new([
        Turn::text("Checking.")
            .tool_call("call_1", "core__echo", json!({"text": "ping"}))
            .usage(10, 4),
        Turn::text("It said ping.").usage(20, 5),
    ]);
    let (events, outcome) = run_to_end(request(), kit.deps(&model)).await;
    assert_eq!(
        labels(&events),
        strs(&[
            "text_delta",
            "usage_report",
            "tool_call_start:core__echo",
            "tool_call_result:core__echo:ok",
            "text_delta",
            "usage_report",
            "assistant_final",
            "done",
        ])
    );
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
    assert_eq!(
        labels(&events),
        strs(&[
            "tool_call_start:core__write",
            "tool_call_result:core__write:ok",
            "tool_call_start:core__write",
            "tool_call_result:core__write:ok",
            "tool_call_start:core__slow",
            "tool_call_result:core__slow:ok",
            "text_delta",
            "assistant_final",
            "done",
        ])
    );
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
        strs(&[
            "tool_call_start:core__fail",
            "tool_call_result:core__fail:execution_failed",
            "text_delta",
            "assistant_final",
            "done",
        ])
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
        strs(&[
            "tool_call_start:core__echo",
            "tool_call_result:core__echo:invalid_json",
            "text_delta",
            "assistant_final",
            "done",
        ])
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
        strs(&[
            "tool_call_start:core__echo",
            "tool_call_result:core__echo:invalid_json",
            "text_delta",
            "assistant_final",
            "done",
        ])
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
        strs(&[
            "tool_call_start:core__nope",
            "tool_call_result:core__nope:unknown_tool",
            "text_delta",
            "assistant_final",
            "done",
        ])
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
        strs(&[
            "tool_call_start:core__echo",
            "tool_call_result:core__echo:ok",
            "tool_call_start:core__echo",
            "tool_call_result:core__echo:ok",
            "text_delta",
            "assistant_final",
            "done",
        ])
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
        strs(&[
            "tool_call_start:core__fail",
            "tool_call_result:core__fail:policy_denied",
            "text_delta",
            "assistant_final",
            "done",
        ])
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

#[tokio::test(start_paused = true)]
async fn max_iterations_stops_the_run_with_a_balanced_history() {
    let kit = Kit::new();
    let turns = (1..=5)
        .map(|i| Turn::new().tool_call(format!("m{i}"), "core__echo", json!({"text": "again"})));
    let model = ScriptedModel::new(turns);
    let mut req = request();
    req.limits.max_iterations = 3;
    let (events, outcome) = run_to_end(req, kit.deps(&model)).await;
    let round = [
        "tool_call_start:core__echo",
        "tool_call_result:core__echo:ok",
    ];
    let mut expected: Vec<&str> = round.repeat(3);
    expected.extend(["error:max_iterations_exceeded", "done"]);
    assert_eq!(labels(&events), strs(&expected));
    let error = outcome.unwrap_err();
    assert_eq!(error.code(), "max_iterations_exceeded");
    assert!(error.to_string().contains("max_iterations"), "{error}");
    assert_eq!(model.calls(), 3);
    assert_eq!(model.remaining(), 2);
    // The last request the model saw had two complete rounds, balanced.
    let last = model.requests().pop().unwrap();
    assert_eq!(tool_messages(&last.messages).len(), 2);
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
    assert_eq!(labels(&events).last().unwrap(), "done");
    assert_eq!(outcome.unwrap_err().code(), "usage_limit_exceeded");
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
