//! The event contract of tool calls: one start and one result per call on every path,
//! redacted views in events, and the serde shape of the event table in ARCHITECTURE.md.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use ai_core::{
    AiEvent, RunContext, ToolEffect, ToolRunner,
    approval::{ApprovalBinding, Approver},
    completion::ToolCallOutcome,
    event::{AiEventKind, UsageFact},
    policy::Budgets,
    runner::ToolCall,
    tool::{Redaction, ToolErrorCode, ToolOutput},
};
use serde_json::{Value, json};

use crate::support::{
    DenyAll, Echo, Fixed, Harness, Panic, Replay, Sleep, ab_schema, allow_all, any_object,
    bare_spec, expect_ok, fail, registered, spec,
};

/// One harness whose tools reach every error code.
fn every_path_harness() -> Harness {
    let mut policy = allow_all();
    policy.deny.insert("core__denied".into());
    let ro = ToolEffect::ReadOnly;
    Harness::with_policy(
        vec![
            registered(spec("core__echo", any_object(), ro), Echo),
            registered(spec("core__ab", ab_schema(), ro), Echo),
            registered(
                spec("core__write", any_object(), ToolEffect::StateChange),
                Echo,
            ),
            registered(spec("core__denied", any_object(), ro), Echo),
            registered(
                spec("core__fails", any_object(), ro),
                fail(ToolErrorCode::ExecutionFailed, "broke"),
            ),
            registered(
                spec("core__perm", any_object(), ro),
                fail(ToolErrorCode::PermissionDenied, "sandbox"),
            ),
            registered(
                spec("core__missing", any_object(), ro),
                fail(ToolErrorCode::NotFound, "gone"),
            ),
            // A subagent's failures, as its executor reports them (agent-graph's
            // subagent tests reach them through a real nested run).
            registered(
                spec("core__budget", any_object(), ro),
                fail(ToolErrorCode::BudgetExceeded, "wall_time"),
            ),
            registered(
                spec("core__deep", any_object(), ro),
                fail(ToolErrorCode::DepthExceeded, "nested"),
            ),
            registered(
                spec("core__panics", any_object(), ro),
                Panic { eager: false },
            ),
            registered(spec("core__sleep", any_object(), ro), Sleep::default()),
            registered(
                spec("core__badout", any_object(), ro).with_output_schema(json!({"type": "array"})),
                Fixed(ToolOutput::json(json!({"not": "an array"}))),
            ),
            registered(bare_spec("core__unredacted", any_object(), ro), Echo),
        ],
        policy,
    )
}

#[tokio::test]
async fn every_path_emits_exactly_one_start_and_one_result_with_one_id() {
    let h = every_path_harness();
    let truncated = ToolCall {
        outcome: ToolCallOutcome::Truncated,
        ..ToolCall::new("", "core__echo", r#"{"a": "#)
    };
    let huge_args = format!(r#"{{"a": "{}"}}"#, "x".repeat(9000));
    let scenarios: Vec<(ToolCall, Option<ToolErrorCode>)> = vec![
        (ToolCall::new("", "core__echo", r#"{"a": 1}"#), None),
        (
            ToolCall::new("", "core__echo", "{oops"),
            Some(ToolErrorCode::InvalidJson),
        ),
        (truncated, Some(ToolErrorCode::InvalidJson)),
        (
            ToolCall::new("", "core__ab", r#"{"a": "1"}"#),
            Some(ToolErrorCode::InvalidArgs),
        ),
        (
            ToolCall::new("", "core__echo", &huge_args),
            Some(ToolErrorCode::InvalidArgs),
        ),
        (
            ToolCall::new("", "core__denied", "{}"),
            Some(ToolErrorCode::PolicyDenied),
        ),
        (
            ToolCall::new("", "core__write", "{}"),
            Some(ToolErrorCode::ApprovalRequired),
        ),
        (
            ToolCall::new("", "core__nope", "{}"),
            Some(ToolErrorCode::UnknownTool),
        ),
        (
            ToolCall::new("", "not a tool id!", "{}"),
            Some(ToolErrorCode::UnknownTool),
        ),
        (
            ToolCall::new("", "core__fails", "{}"),
            Some(ToolErrorCode::ExecutionFailed),
        ),
        (
            ToolCall::new("", "core__panics", "{}"),
            Some(ToolErrorCode::ExecutionFailed),
        ),
        (
            ToolCall::new("", "core__badout", "{}"),
            Some(ToolErrorCode::OutputInvalid),
        ),
        (
            ToolCall::new("", "core__unredacted", "{}"),
            Some(ToolErrorCode::RedactionMissing),
        ),
        (
            ToolCall::new("", "core__perm", "{}"),
            Some(ToolErrorCode::PermissionDenied),
        ),
        (
            ToolCall::new("", "core__missing", "{}"),
            Some(ToolErrorCode::NotFound),
        ),
        (
            ToolCall::new("", "core__budget", "{}"),
            Some(ToolErrorCode::BudgetExceeded),
        ),
        (
            ToolCall::new("", "core__deep", "{}"),
            Some(ToolErrorCode::DepthExceeded),
        ),
    ];
    let mut covered = BTreeSet::new();
    let mut ids = Vec::new();
    for (n, (call, expected)) in scenarios.into_iter().enumerate() {
        let call = ToolCall {
            id: Some(format!("call-{n}")),
            ..call
        };
        // `Harness::exec` checks the two events of this call.
        let exec = h.exec(call).await;
        assert_eq!(exec.result.error_code, expected, "scenario {n}");
        assert_eq!(exec.result.tool_call_id, format!("call-{n}"));
        covered.insert(expected.map(|c| c.as_str()));
        ids.push(exec.result.tool_call_id);
    }

    // A durable run's call whose outcome is unknown: it ends without running.
    let scope = ai_core::runner::CallScope {
        outcome_unknown: vec!["call-unknown".into()],
        ..ai_core::runner::CallScope::default()
    };
    let exec = h
        .exec_scoped(ToolCall::new("call-unknown", "core__fails", "{}"), &scope)
        .await;
    assert_eq!(exec.result.error_code, Some(ToolErrorCode::OutcomeUnknown));
    assert!(
        exec.model_content
            .contains("may or may not have taken effect")
    );
    covered.insert(Some("outcome_unknown"));
    ids.push(exec.result.tool_call_id);

    // The last path: the run is cancelled while a tool sleeps (its budget is 30 s).
    let cancel = h.cancel.clone();
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        cancel.cancel();
    });
    let exec = h
        .exec(ToolCall::new("call-cancel", "core__sleep", "{}"))
        .await;
    canceller.await.unwrap();
    assert_eq!(exec.result.error_code, Some(ToolErrorCode::Cancelled));
    covered.insert(Some("cancelled"));
    ids.push(exec.result.tool_call_id);

    // Timeouts need a small budget, hence their own runner (its events are checked by
    // `Harness::exec` the same way).
    let timeout = Harness::with_policy(
        vec![registered(
            spec("core__sleep", any_object(), ToolEffect::ReadOnly),
            Sleep::default(),
        )],
        allow_all().with_budgets(Budgets {
            max_runtime_ms: 50,
            ..Budgets::default()
        }),
    );
    let exec = timeout
        .exec(ToolCall::new("call-timeout", "core__sleep", "{}"))
        .await;
    assert_eq!(exec.result.error_code, Some(ToolErrorCode::Timeout));
    covered.insert(Some("timeout"));
    assert_eq!(timeout.events.all().len(), 2);

    // Approvals answered no, or with a grant for something else, need an approver.
    for (approver, code) in [
        (
            Arc::new(DenyAll("no")) as Arc<dyn Approver>,
            ToolErrorCode::ApprovalDenied,
        ),
        (
            Arc::new(Replay(ApprovalBinding {
                scope: "another run".into(),
                tool_call_id: "call-approval".into(),
                tool_id: "core__write".into(),
                args_hash: "sha256:00".into(),
            })),
            ToolErrorCode::ApprovalInvalid,
        ),
    ] {
        let harness = Harness::from_runner(
            ToolRunner::new(
                vec![registered(
                    spec("core__write", any_object(), ToolEffect::StateChange),
                    Echo,
                )],
                allow_all(),
            )
            .unwrap()
            .with_approver(approver),
        );
        let exec = harness
            .exec(ToolCall::new("call-approval", "core__write", "{}"))
            .await;
        assert_eq!(exec.result.error_code, Some(code));
        covered.insert(Some(code.as_str()));
    }

    let all: BTreeSet<Option<&str>> = ToolErrorCode::ALL
        .iter()
        .map(|c| Some(c.as_str()))
        .chain([None])
        .collect();
    assert_eq!(covered, all, "every error code and success were exercised");

    // Over the whole log: start, result, start, result ... one pair per call, in order.
    let events = h.events.all();
    assert_eq!(events.len(), 2 * ids.len());
    for (pair, id) in events.chunks(2).zip(&ids) {
        assert!(
            matches!(&pair[0].kind, AiEventKind::ToolCallStart { tool_call_id, .. } if tool_call_id == id)
        );
        assert!(
            matches!(&pair[1].kind, AiEventKind::ToolCallResult { tool_call_id, .. } if tool_call_id == id)
        );
    }
}

#[tokio::test]
async fn events_carry_redacted_args_and_output_while_the_model_and_caller_get_everything() {
    let output = json!({
        "entries": [{"name": "a.txt", "owner_token": "tok-OUT-SECRET-1"}, {"name": "b.txt"}],
        "count": 2,
        "cursor": "tok-OUT-SECRET-2"
    });
    let tool = spec("core__list", any_object(), ToolEffect::ReadOnly)
        .with_redaction(Redaction::new(["path"], ["entries.name", "count"]).unwrap());
    let h = Harness::new(vec![registered(
        tool,
        Fixed(ToolOutput::json(output.clone())),
    )]);
    let (exec, events) = h
        .exec_events(ToolCall::new(
            "call-1",
            "core__list",
            r#"{"path": "docs", "api_key": "sk-ARG-SECRET"}"#,
        ))
        .await;

    assert_eq!(events.start_args(), &json!({"path": "docs"}));
    assert_eq!(
        events.result_value(),
        Some(&json!({"entries": [{"name": "a.txt"}, {"name": "b.txt"}], "count": 2}))
    );
    let event_json = serde_json::to_string(&[&events.start, &events.result]).unwrap();
    for secret in [
        "sk-ARG-SECRET",
        "api_key",
        "tok-OUT-SECRET-1",
        "tok-OUT-SECRET-2",
        "cursor",
    ] {
        assert!(
            !event_json.contains(secret),
            "{secret} leaked into events: {event_json}"
        );
    }
    let record_json = serde_json::to_string(&exec.record).unwrap();
    assert!(!record_json.contains("SECRET"), "{record_json}");
    assert_eq!(exec.result.value, events.result_value().cloned());

    // The caller and the model get the full output.
    assert_eq!(expect_ok(&exec), output);
    assert!(exec.model_content.contains("tok-OUT-SECRET-1"));
    assert!(exec.model_content.contains("tok-OUT-SECRET-2"));
}

/// An event as JSON, with its (timing-dependent) `duration_ms` checked and zeroed.
fn golden(event: &AiEvent) -> Value {
    let mut value = serde_json::to_value(event).unwrap();
    if let Some(duration) = value.get_mut("duration_ms") {
        assert!(duration.is_u64(), "{duration}");
        *duration = json!(0);
    }
    let back: AiEvent = serde_json::from_value(value.clone()).unwrap();
    assert_eq!(back.kind.clone(), {
        let mut kind = event.kind.clone();
        if let AiEventKind::ToolCallResult { duration_ms, .. } = &mut kind {
            *duration_ms = 0;
        }
        kind
    });
    value
}

#[tokio::test]
async fn tool_call_events_match_the_design_table() {
    let tool = spec("core__ab", ab_schema(), ToolEffect::ReadOnly)
        .with_redaction(Redaction::new(["a"], ["b"]).unwrap());
    let h = Harness::new(vec![registered(tool, Echo)]);

    let (_, ok) = h
        .exec_events(ToolCall::new(
            "call-ok",
            "core__ab",
            r#"{"a": 1, "b": "x"}"#,
        ))
        .await;
    assert_eq!(
        golden(&ok.start),
        json!({
            "type": "tool_call_start",
            "run_id": "run-1",
            "trace_id": "trace-1",
            "ingress_request_id": "req-1",
            "tool_call_id": "call-ok",
            "tool_name": "core__ab",
            "args": {"a": 1}
        })
    );
    assert_eq!(
        golden(&ok.result),
        json!({
            "type": "tool_call_result",
            "run_id": "run-1",
            "trace_id": "trace-1",
            "ingress_request_id": "req-1",
            "tool_call_id": "call-ok",
            "tool_name": "core__ab",
            "ok": true,
            "result": {"b": "x"},
            "duration_ms": 0,
            "truncated": false
        })
    );

    let (_, failed) = h
        .exec_events(ToolCall::new("call-bad", "core__ab", r#"{"a": 1}"#))
        .await;
    assert_eq!(
        golden(&failed.start),
        json!({
            "type": "tool_call_start",
            "run_id": "run-1",
            "trace_id": "trace-1",
            "ingress_request_id": "req-1",
            "tool_call_id": "call-bad",
            "tool_name": "core__ab",
            "args": {"a": 1}
        })
    );
    assert_eq!(
        golden(&failed.result),
        json!({
            "type": "tool_call_result",
            "run_id": "run-1",
            "trace_id": "trace-1",
            "ingress_request_id": "req-1",
            "tool_call_id": "call-bad",
            "tool_name": "core__ab",
            "ok": false,
            "error_code": "invalid_args",
            "message": "arguments do not match the schema: /: missing required property \"b\"",
            "duration_ms": 0,
            "truncated": false
        })
    );
}

#[test]
fn other_events_match_the_design_table() {
    let ctx = RunContext::new("run-1", "trace-1");
    let usage = UsageFact {
        model: "gpt-test".into(),
        prompt_tokens: 10,
        completion_tokens: 5,
        total_tokens: 15,
        ..UsageFact::default()
    };
    let cached = UsageFact {
        cached_tokens: Some(8),
        reasoning_tokens: Some(3),
        ..usage.clone()
    };
    let cases = [
        (
            AiEventKind::TextDelta {
                delta: "Hel".into(),
            },
            json!({"type": "text_delta", "delta": "Hel"}),
        ),
        (
            AiEventKind::from(usage),
            json!({"type": "usage_report", "model": "gpt-test", "prompt_tokens": 10,
                   "completion_tokens": 5, "total_tokens": 15}),
        ),
        (
            AiEventKind::from(cached),
            json!({"type": "usage_report", "model": "gpt-test", "prompt_tokens": 10,
                   "completion_tokens": 5, "total_tokens": 15, "cached_tokens": 8,
                   "reasoning_tokens": 3}),
        ),
        (
            AiEventKind::AssistantFinal {
                content: "done.".into(),
                finish_reason: "stop".into(),
                prompt_hash: None,
            },
            json!({"type": "assistant_final", "content": "done.", "finish_reason": "stop"}),
        ),
        (
            AiEventKind::AssistantFinal {
                content: "done.".into(),
                finish_reason: "stop".into(),
                prompt_hash: Some("ab12".into()),
            },
            json!({"type": "assistant_final", "content": "done.", "finish_reason": "stop",
                   "prompt_hash": "ab12"}),
        ),
        (
            AiEventKind::UsageReport {
                model: "gpt-test".into(),
                response_model: None,
                prompt_tokens: 10,
                completion_tokens: 5,
                total_tokens: 15,
                cached_tokens: None,
                reasoning_tokens: None,
                cache_creation_tokens: None,
                cost_micros: None,
                prompt_hash: Some("ab12".into()),
            },
            json!({"type": "usage_report", "model": "gpt-test", "prompt_tokens": 10,
                   "completion_tokens": 5, "total_tokens": 15, "prompt_hash": "ab12"}),
        ),
        (
            AiEventKind::AssistantFinal {
                content: "The answer is".into(),
                finish_reason: "length".into(),
                prompt_hash: None,
            },
            json!({"type": "assistant_final", "content": "The answer is", "finish_reason": "length"}),
        ),
        (
            AiEventKind::ReasoningDelta {
                delta: "Let me think".into(),
            },
            json!({"type": "reasoning_delta", "delta": "Let me think"}),
        ),
        (
            AiEventKind::Error {
                code: "provider_timeout".into(),
                message: "timed out".into(),
            },
            json!({"type": "error", "code": "provider_timeout", "message": "timed out"}),
        ),
        (
            AiEventKind::ToolCallsNotExecuted {
                code: "max_iterations_exceeded".into(),
                calls: vec![
                    ai_core::event::ToolCallRef {
                        tool_call_id: "call_7".into(),
                        tool_name: "core__read_file".into(),
                    },
                    ai_core::event::ToolCallRef {
                        tool_call_id: "call_8".into(),
                        tool_name: "core__list_directory".into(),
                    },
                ],
            },
            json!({"type": "tool_calls_not_executed", "code": "max_iterations_exceeded",
            "calls": [
                {"tool_call_id": "call_7", "tool_name": "core__read_file"},
                {"tool_call_id": "call_8", "tool_name": "core__list_directory"}
            ]}),
        ),
        (AiEventKind::Done, json!({"type": "done"})),
    ];
    for (kind, mut expected) in cases {
        let event = AiEvent::new(&ctx, kind);
        expected["run_id"] = json!("run-1");
        expected["trace_id"] = json!("trace-1");
        assert_eq!(golden(&event), expected);
        assert_eq!(serde_json::from_value::<AiEvent>(expected).unwrap(), event);
    }
}
