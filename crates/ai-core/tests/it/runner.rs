//! `ToolRunner::exec`: one test per error code (and per way of reaching it), the empty
//! argument rule, tool call ids, model views and result bounding.
//!
//! Every call goes through `Harness::exec`, which also checks that the call emitted
//! exactly one `tool_call_start` and one `tool_call_result` with the same id.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ai_core::{
    ToolEffect, ToolId, ToolPolicy, ToolRunner,
    completion::ToolCallOutcome,
    policy::Budgets,
    runner::ToolCall,
    text::TRUNCATION_MARKER,
    tool::{ModelView, ToolErrorCode, ToolOutput},
};
use serde_json::{Value, json};

use crate::support::{
    Counted, Echo, Fixed, Flagged, Harness, Panic, Sleep, allow_all, any_object, bare_spec,
    expect_failure, expect_ok, fail, registered, spec,
};

fn call(name: &str, arguments: &str) -> ToolCall {
    ToolCall::new("call-1", name, arguments)
}

fn call_without_id(name: &str, arguments: &str) -> ToolCall {
    ToolCall {
        id: None,
        ..call(name, arguments)
    }
}

fn echo_harness() -> Harness {
    Harness::new(vec![registered(
        spec("core__echo", any_object(), ToolEffect::ReadOnly),
        Echo,
    )])
}

/// Arguments of an order: an object holding a nested object and an array of objects,
/// each with required fields; no extra top-level properties.
fn order_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "customer": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "address": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}, "zip": {"type": "string"}},
                        "required": ["city"]
                    }
                },
                "required": ["name", "address"]
            },
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}},
                    "required": ["sku", "qty"]
                }
            }
        },
        "required": ["customer", "items"],
        "additionalProperties": false
    })
}

fn order_harness() -> Harness {
    Harness::new(vec![registered(
        spec("core__order", order_schema(), ToolEffect::ReadOnly),
        Echo,
    )])
}

// ---------------------------------------------------------------------------------
// invalid_json
// ---------------------------------------------------------------------------------

#[tokio::test]
async fn invalid_json_for_bad_text_names_position_not_content() {
    let h = echo_harness();
    let exec = h
        .exec(call("core__echo", r#"{"path": "/etc/SECRET-PATH", oops}"#))
        .await;
    let message = expect_failure(&exec, ToolErrorCode::InvalidJson);
    assert_eq!(
        message,
        "arguments are not valid JSON (syntax error at line 1 column 30)"
    );
    assert!(!message.contains("SECRET-PATH"));
    assert_eq!(
        exec.record.args,
        json!({}),
        "unparsed arguments are recorded as {{}}"
    );
}

#[tokio::test]
async fn invalid_json_for_arguments_the_stream_truncated() {
    let h = echo_harness();
    // Even text that happens to parse is refused when the provider cut the stream.
    for arguments in [r#"{"a": 1, "b": "unfinis"#, r#"{"a": 1}"#] {
        let exec = h
            .exec(ToolCall {
                outcome: ToolCallOutcome::Truncated,
                ..call("core__echo", arguments)
            })
            .await;
        let message = expect_failure(&exec, ToolErrorCode::InvalidJson);
        assert!(message.contains("cut off"), "{message}");
        assert!(!message.contains("unfinis"));
    }
}

// ---------------------------------------------------------------------------------
// invalid_args
// ---------------------------------------------------------------------------------

#[tokio::test]
async fn invalid_args_in_nested_schema_lists_pointers_and_never_values() {
    let h = order_harness();
    let injected = "INJECTED-SECRET-7f3a";
    let arguments = json!({
        "customer": {"name": 42, "address": {"zip": injected}},
        "items": [
            {"sku": "a-1", "qty": 2},
            {"qty": injected},
            {"sku": injected, "qty": 0}
        ],
        "extra": injected
    })
    .to_string();
    let exec = h.exec(call("core__order", &arguments)).await;
    let message = expect_failure(&exec, ToolErrorCode::InvalidArgs);
    assert!(
        message.starts_with("arguments do not match the schema: "),
        "{message}"
    );
    for expected in [
        "/: has properties the schema does not allow",
        "/customer/name: wrong type (expected string)",
        "/customer/address: missing required property \"city\"",
        "/items/1: missing required property \"sku\"",
        "/items/1/qty: wrong type (expected integer)",
        "/items/2/qty: fails `minimum`",
    ] {
        assert!(
            message.contains(expected),
            "{expected:?} not in {message:?}"
        );
    }
    assert_eq!(
        message.matches("; ").count(),
        5,
        "exactly six failures: {message}"
    );
    assert!(!message.contains(injected), "{message}");
    assert!(
        !message.contains("extra"),
        "unexpected keys are not echoed: {message}"
    );
    assert!(!exec.model_content.contains(injected));
}

#[tokio::test]
async fn invalid_args_caps_the_list_of_failures() {
    let h = order_harness();
    let items: Vec<Value> = (0..12).map(|_| json!({})).collect();
    let arguments = json!({"customer": {"name": "n", "address": {"city": "c"}}, "items": items});
    let exec = h.exec(call("core__order", &arguments.to_string())).await;
    let message = expect_failure(&exec, ToolErrorCode::InvalidArgs);
    // 24 missing properties: eight listed, the rest counted.
    assert_eq!(
        message.matches("missing required property").count(),
        8,
        "{message}"
    );
    assert!(message.ends_with("; and 16 more"), "{message}");
}

#[tokio::test]
async fn invalid_args_for_oversized_arguments() {
    let h = echo_harness();
    let limit = Budgets::default().max_argument_bytes;
    let filler = "Q".repeat(limit);
    let arguments = json!({ "blob": filler }).to_string();
    assert_eq!(arguments.len(), limit + 11);
    let exec = h.exec(call("core__echo", &arguments)).await;
    let message = expect_failure(&exec, ToolErrorCode::InvalidArgs);
    assert_eq!(
        message,
        format!("arguments are {} bytes; the limit is {limit}", limit + 11)
    );
    assert_eq!(exec.record.args, json!({}));

    // Exactly at the limit is accepted.
    let arguments = json!({ "blob": "Q".repeat(limit - 11) }).to_string();
    assert_eq!(arguments.len(), limit);
    expect_ok(&h.exec(call("core__echo", &arguments)).await);
}

// ---------------------------------------------------------------------------------
// policy_denied
// ---------------------------------------------------------------------------------

#[tokio::test]
async fn policy_denied_for_a_known_tool_policy_does_not_allow() {
    let called = Arc::new(AtomicBool::new(false));
    let tools = vec![
        registered(spec("core__echo", any_object(), ToolEffect::ReadOnly), Echo),
        registered(
            spec("core__secret", any_object(), ToolEffect::ReadOnly),
            Flagged {
                called: called.clone(),
            },
        ),
    ];
    let h = Harness::with_policy(tools.clone(), ToolPolicy::allowing(["core__echo"]));
    assert!(!h.catalog.contains("core__secret"));
    let exec = h.exec(call("core__secret", "{}")).await;
    assert_eq!(
        expect_failure(&exec, ToolErrorCode::PolicyDenied),
        "this tool is not offered in this run"
    );

    // A stale catalog that still offers the tool does not get past the runner's own
    // policy check (defense in depth).
    let permissive = ToolRunner::new(tools, allow_all()).unwrap().catalog(&h.run);
    assert!(permissive.contains("core__secret"));
    let exec = h.exec_in(&permissive, call("core__secret", "{}")).await;
    assert_eq!(
        expect_failure(&exec, ToolErrorCode::PolicyDenied),
        "policy does not allow this tool"
    );
    assert!(!called.load(Ordering::SeqCst));
}

#[tokio::test]
async fn policy_denied_for_an_allowed_tool_left_out_of_the_catalog() {
    let called = Arc::new(AtomicBool::new(false));
    let h = Harness::new(vec![
        registered(spec("core__echo", any_object(), ToolEffect::ReadOnly), Echo),
        registered(
            spec("core__other", any_object(), ToolEffect::ReadOnly),
            Flagged {
                called: called.clone(),
            },
        ),
    ]);
    let selected = h
        .catalog
        .clone()
        .select(|spec| spec.id.as_str() == "core__echo");
    assert_eq!(selected.len(), 1);
    let exec = h.exec_in(&selected, call("core__other", "{}")).await;
    assert_eq!(
        expect_failure(&exec, ToolErrorCode::PolicyDenied),
        "this tool is not offered in this run"
    );
    assert!(!called.load(Ordering::SeqCst));
    // The selected tool itself still runs.
    expect_ok(&h.exec_in(&selected, call("core__echo", "{}")).await);
}

// ---------------------------------------------------------------------------------
// unknown_tool
// ---------------------------------------------------------------------------------

#[tokio::test]
async fn unknown_tool_for_a_valid_but_unregistered_id() {
    let h = echo_harness();
    let exec = h.exec(call("core__nope", "{}")).await;
    let message = expect_failure(&exec, ToolErrorCode::UnknownTool);
    assert_eq!(
        message,
        "no tool with this name exists; call only the tools you were given"
    );
}

#[tokio::test]
async fn unknown_tool_for_a_name_that_is_not_a_tool_id() {
    let h = echo_harness();
    let name = "echo; rm -rf /";
    assert!(ToolId::parse(name).is_err());
    // Even with arguments that are not JSON, the name is reported first.
    let exec = h.exec(call(name, "not json")).await;
    expect_failure(&exec, ToolErrorCode::UnknownTool);
    // Events and records show a sanitized name, never the model's raw text.
    assert_eq!(exec.record.name, "echo??rm?-rf??");
}

#[tokio::test]
async fn unknown_names_with_control_characters_or_unbounded_length_are_sanitized() {
    let h = echo_harness();
    let exec = h.exec(call("core__x\u{1b}[2J\n", "{}")).await;
    expect_failure(&exec, ToolErrorCode::UnknownTool);
    assert_eq!(exec.record.name, "core__x??2J?");
    let long = "a".repeat(10_000);
    let exec = h.exec(call(&long, "{}")).await;
    expect_failure(&exec, ToolErrorCode::UnknownTool);
    assert_eq!(exec.record.name, format!("{}…", "a".repeat(64)));
}

// ---------------------------------------------------------------------------------
// execution_failed, permission_denied, not_found
// ---------------------------------------------------------------------------------

/// Runs a tool that fails with `code` and `text`; returns the safe message.
async fn failing_tool(code: ToolErrorCode, text: &str) -> String {
    let h = Harness::new(vec![registered(
        spec("core__fails", any_object(), ToolEffect::ReadOnly),
        fail(code, text),
    )]);
    let exec = h.exec(call("core__fails", "{}")).await;
    expect_failure(&exec, code)
}

#[tokio::test]
async fn execution_failed_for_a_tool_error() {
    let message = failing_tool(ToolErrorCode::ExecutionFailed, "the disk is full").await;
    assert_eq!(message, "the disk is full");
}

#[tokio::test]
async fn permission_denied_passes_through_from_the_tool() {
    let text = "writing outside the workspace is not allowed";
    assert_eq!(
        failing_tool(ToolErrorCode::PermissionDenied, text).await,
        text
    );
}

#[tokio::test]
async fn not_found_passes_through_from_the_tool() {
    let text = "no such file in the workspace: notes.txt";
    assert_eq!(failing_tool(ToolErrorCode::NotFound, text).await, text);
}

#[tokio::test]
async fn a_tools_long_failure_message_is_bounded_like_a_result() {
    // Multi-byte characters around the cut: the message stays valid UTF-8.
    let text = format!("{}{}", "x".repeat(2040), "日本語".repeat(2000));
    let message = failing_tool(ToolErrorCode::ExecutionFailed, &text).await;
    assert!(
        message.len() <= ai_core::text::MAX_FAILURE_MESSAGE_BYTES,
        "{}",
        message.len()
    );
    assert!(
        message.ends_with(ai_core::text::TRUNCATION_MARKER),
        "{message}"
    );
    let kept = message.trim_end_matches(ai_core::text::TRUNCATION_MARKER);
    assert!(text.starts_with(kept));
    assert!(
        kept.len() > 1900,
        "most of the budget is used: {}",
        kept.len()
    );
    // A message within the budget passes unchanged.
    let exact = "y".repeat(ai_core::text::MAX_FAILURE_MESSAGE_BYTES);
    assert_eq!(
        failing_tool(ToolErrorCode::ExecutionFailed, &exact).await,
        exact
    );
}

#[test]
fn call_ref_names_a_call_as_exec_would() {
    let h = echo_harness();
    let named = h.runner.call_ref(&call("core__echo", "{}"));
    assert_eq!(named.tool_call_id, "call-1");
    assert_eq!(named.tool_name, "core__echo");
    let odd = h.runner.call_ref(&call_without_id("bad\nname", "{}"));
    assert_uuid_v4(&odd.tool_call_id);
    assert_eq!(odd.tool_name, "bad?name");
}

#[tokio::test]
async fn execution_failed_for_a_panic_and_the_runner_keeps_working() {
    for eager in [false, true] {
        let h = Harness::new(vec![
            registered(
                spec("core__panics", any_object(), ToolEffect::ReadOnly),
                Panic { eager },
            ),
            registered(spec("core__echo", any_object(), ToolEffect::ReadOnly), Echo),
        ]);
        let exec = h.exec(call("core__panics", "{}")).await;
        assert_eq!(
            expect_failure(&exec, ToolErrorCode::ExecutionFailed),
            "the tool failed unexpectedly (it panicked)",
            "eager: {eager}"
        );
        // The same runner serves the next calls, including the tool that panicked.
        let exec = h.exec(call("core__echo", r#"{"after": "panic"}"#)).await;
        assert_eq!(expect_ok(&exec), json!({"after": "panic"}));
        expect_failure(
            &h.exec(call("core__panics", "{}")).await,
            ToolErrorCode::ExecutionFailed,
        );
    }
}

// ---------------------------------------------------------------------------------
// timeout, cancelled
// ---------------------------------------------------------------------------------

#[tokio::test]
async fn timeout_when_the_tool_outlives_its_budget() {
    let sleep = Sleep::default();
    let seen = sleep.seen.clone();
    let policy = allow_all().with_budgets(Budgets {
        max_runtime_ms: 50,
        ..Budgets::default()
    });
    let h = Harness::with_policy(
        vec![registered(
            spec("core__sleep", any_object(), ToolEffect::ReadOnly),
            sleep,
        )],
        policy,
    );
    let started = Instant::now();
    let exec = h.exec(call("core__sleep", "{}")).await;
    let elapsed = started.elapsed();
    assert_eq!(
        expect_failure(&exec, ToolErrorCode::Timeout),
        "the tool ran longer than its 50 ms budget"
    );
    assert!(elapsed >= Duration::from_millis(50), "{elapsed:?}");
    assert!(
        elapsed < Duration::from_secs(2),
        "did not return promptly: {elapsed:?}"
    );

    // The tool's own token fired; the run's did not (a timeout ends one call only).
    let cx = seen.lock().unwrap().clone().unwrap();
    assert!(cx.cancel.is_cancelled());
    assert!(!h.cancel.is_cancelled());
    assert_eq!(cx.tool_call_id, "call-1");
    assert_eq!(cx.tool_id.as_str(), "core__sleep");
    assert_eq!(cx.run, h.run);
}

#[tokio::test]
async fn cancelled_when_the_run_is_cancelled_while_the_tool_sleeps() {
    let sleep = Sleep::default();
    let seen = sleep.seen.clone();
    let h = Harness::new(vec![registered(
        spec("core__sleep", any_object(), ToolEffect::ReadOnly),
        sleep,
    )]);
    let cancel = h.cancel.clone();
    let canceller = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        cancel.cancel();
    });
    let started = Instant::now();
    let exec = h.exec(call("core__sleep", "{}")).await;
    let elapsed = started.elapsed();
    canceller.await.unwrap();
    assert_eq!(
        expect_failure(&exec, ToolErrorCode::Cancelled),
        "the run was cancelled while the tool ran"
    );
    assert!(
        elapsed < Duration::from_secs(2),
        "did not return promptly: {elapsed:?}"
    );
    assert!(seen.lock().unwrap().as_ref().unwrap().cancel.is_cancelled());

    // A call made after the run was cancelled does not start the tool at all.
    *seen.lock().unwrap() = None;
    expect_failure(
        &h.exec(call("core__sleep", "{}")).await,
        ToolErrorCode::Cancelled,
    );
    assert!(
        seen.lock().unwrap().is_none(),
        "the executor was called after cancellation"
    );
}

// ---------------------------------------------------------------------------------
// output_invalid, redaction_missing
// ---------------------------------------------------------------------------------

#[tokio::test]
async fn output_invalid_when_output_breaks_the_declared_schema() {
    let output_schema = json!({
        "type": "object",
        "properties": {"count": {"type": "integer"}},
        "required": ["count"]
    });
    let make = |value: Value| {
        registered(
            spec("core__count", any_object(), ToolEffect::ReadOnly)
                .with_output_schema(output_schema.clone()),
            Fixed(ToolOutput::json(value)),
        )
    };
    let h = Harness::new(vec![make(json!({"count": "LEAKED-VALUE"}))]);
    let exec = h.exec(call("core__count", "{}")).await;
    let message = expect_failure(&exec, ToolErrorCode::OutputInvalid);
    assert_eq!(
        message,
        "the tool produced output that does not match its declared schema"
    );
    assert!(!exec.model_content.contains("LEAKED-VALUE"));

    let h = Harness::new(vec![make(json!({"count": 3}))]);
    assert_eq!(
        expect_ok(&h.exec(call("core__count", "{}")).await),
        json!({"count": 3})
    );
}

#[tokio::test]
async fn redaction_missing_refuses_before_the_tool_runs() {
    let flagged = Flagged::default();
    let called = flagged.called.clone();
    let h = Harness::new(vec![registered(
        bare_spec("core__unredacted", any_object(), ToolEffect::ReadOnly),
        flagged,
    )]);
    // The tool is allowed and offered; only its missing redaction stops it.
    assert!(h.catalog.contains("core__unredacted"));
    for arguments in [r#"{"a": 1}"#, "not json"] {
        let exec = h.exec(call("core__unredacted", arguments)).await;
        assert_eq!(
            expect_failure(&exec, ToolErrorCode::RedactionMissing),
            "this tool declares no redaction allowlist, so its result cannot be shown"
        );
        assert_eq!(
            exec.record.args,
            json!({}),
            "no allowlist, no arguments shown"
        );
    }
    assert!(
        !called.load(Ordering::SeqCst),
        "the executor must not be called"
    );
}

// ---------------------------------------------------------------------------------
// Arguments, ids, model views, bounding
// ---------------------------------------------------------------------------------

#[tokio::test]
async fn empty_arguments_mean_an_empty_object() {
    let schema = json!({"type": "object", "properties": {"verbose": {"type": "boolean"}}});
    let h = Harness::new(vec![registered(
        spec("core__status", schema, ToolEffect::ReadOnly),
        Echo,
    )]);
    for arguments in ["", "  \n"] {
        let exec = h.exec(call("core__status", arguments)).await;
        assert_eq!(expect_ok(&exec), json!({}), "{arguments:?}");
        assert_eq!(exec.model_content, "{}");
    }
    // A schema with required properties still rejects the empty object.
    let h = Harness::new(vec![registered(
        spec(
            "core__needs",
            json!({"type": "object", "required": ["x"]}),
            ToolEffect::ReadOnly,
        ),
        Echo,
    )]);
    let message = expect_failure(
        &h.exec(call("core__needs", "")).await,
        ToolErrorCode::InvalidArgs,
    );
    assert_eq!(
        message,
        "arguments do not match the schema: /: missing required property \"x\""
    );
}

#[tokio::test]
async fn arguments_that_are_not_an_object_are_invalid_args() {
    let h = echo_harness();
    for arguments in ["[1, 2]", "null", "\"SECRET-STRING\"", "7"] {
        let message = expect_failure(
            &h.exec(call("core__echo", arguments)).await,
            ToolErrorCode::InvalidArgs,
        );
        assert_eq!(
            message,
            "arguments do not match the schema: /: wrong type (expected object)"
        );
    }
}

#[tokio::test]
async fn model_provided_call_id_is_kept() {
    let h = echo_harness();
    let (exec, events) = h
        .exec_events(ToolCall::new("call_abc123", "core__echo", "{}"))
        .await;
    assert_eq!(exec.result.tool_call_id, "call_abc123");
    assert!(matches!(
        &events.start.kind,
        ai_core::event::AiEventKind::ToolCallStart { tool_call_id, .. } if tool_call_id == "call_abc123"
    ));
    // The limit is inclusive: an id of exactly max_tool_call_id_len is kept.
    let id = "c".repeat(Budgets::default().max_tool_call_id_len);
    let exec = h.exec(ToolCall::new(id.clone(), "core__echo", "{}")).await;
    assert_eq!(exec.result.tool_call_id, id);
}

fn assert_uuid_v4(id: &str) {
    let uuid = uuid::Uuid::parse_str(id).unwrap_or_else(|e| panic!("{id:?} is not a UUID: {e}"));
    assert_eq!(uuid.get_version_num(), 4, "{id}");
    assert_eq!(
        uuid.hyphenated().to_string(),
        id,
        "canonical hyphenated form"
    );
}

#[tokio::test]
async fn missing_call_id_gets_one_uuid_v4_used_everywhere() {
    let h = echo_harness();
    let mut seen = Vec::new();
    for call in [
        call_without_id("core__echo", "{}"),
        ToolCall::new("", "core__echo", "{}"),
        // A failing call gets one too.
        call_without_id("core__nope", "{}"),
    ] {
        // `exec_events` checks the start event, result event, result and record share it.
        let (exec, _) = h.exec_events(call).await;
        assert_uuid_v4(&exec.result.tool_call_id);
        seen.push(exec.result.tool_call_id);
    }
    seen.dedup();
    assert_eq!(seen.len(), 3, "each call gets a fresh id: {seen:?}");
}

#[tokio::test]
async fn overlong_call_id_is_replaced() {
    let h = echo_harness();
    let long = "x".repeat(Budgets::default().max_tool_call_id_len + 1);
    let (exec, events) = h
        .exec_events(ToolCall::new(long.clone(), "core__echo", "{}"))
        .await;
    assert_uuid_v4(&exec.result.tool_call_id);
    let json = serde_json::to_string(&[&events.start, &events.result]).unwrap();
    assert!(!json.contains(&long));
}

#[tokio::test]
async fn text_view_is_what_the_model_sees() {
    let output = ToolOutput {
        value: json!({"rows": [[1, 2], [3, 4]]}),
        model_view: ModelView::Text("| a | b |\n| 1 | 2 |\n| 3 | 4 |".into()),
    };
    let h = Harness::new(vec![registered(
        spec("core__table", any_object(), ToolEffect::ReadOnly),
        Fixed(output),
    )]);
    let (exec, events) = h.exec_events(call("core__table", "{}")).await;
    assert_eq!(exec.model_content, "| a | b |\n| 1 | 2 |\n| 3 | 4 |");
    assert_eq!(expect_ok(&exec), json!({"rows": [[1, 2], [3, 4]]}));
    assert_eq!(
        events.result_value(),
        Some(&json!({"rows": [[1, 2], [3, 4]]}))
    );
    assert!(!exec.truncated);
}

#[tokio::test]
async fn withheld_view_keeps_the_value_out_of_model_content() {
    let output = ToolOutput {
        value: json!({"token": "tok-WITHHELD-99"}),
        model_view: ModelView::Withheld {
            note: "the token was stored; it is not shown to you".into(),
        },
    };
    let tool = spec("core__mint", any_object(), ToolEffect::ReadOnly).with_redaction(
        ai_core::tool::Redaction::new(Vec::<&str>::new(), Vec::<&str>::new()).unwrap(),
    );
    let h = Harness::new(vec![registered(tool, Fixed(output))]);
    let (exec, events) = h.exec_events(call("core__mint", "{}")).await;
    assert_eq!(
        exec.model_content,
        "the token was stored; it is not shown to you"
    );
    assert_eq!(expect_ok(&exec), json!({"token": "tok-WITHHELD-99"}));
    assert_eq!(events.result_value(), Some(&json!({})));
    let json = serde_json::to_string(&[&events.start, &events.result]).unwrap();
    assert!(!json.contains("tok-WITHHELD-99"));
}

#[tokio::test]
async fn long_text_view_is_bounded() {
    let text = "日本語".repeat(30_000);
    let output = ToolOutput {
        value: json!({"len": text.len()}),
        model_view: ModelView::Text(text.clone()),
    };
    let policy = allow_all().with_budgets(Budgets {
        max_result_bytes: 1000,
        ..Budgets::default()
    });
    let h = Harness::with_policy(
        vec![registered(
            spec("core__text", any_object(), ToolEffect::ReadOnly),
            Fixed(output),
        )],
        policy,
    );
    let exec = h.exec(call("core__text", "{}")).await;
    assert!(exec.truncated);
    assert!(
        exec.model_content.len() <= 1000,
        "{}",
        exec.model_content.len()
    );
    let kept = exec.model_content.strip_suffix(TRUNCATION_MARKER).unwrap();
    assert!(text.starts_with(kept));
}

#[tokio::test]
async fn huge_string_output_is_truncated_for_the_model_only() {
    let huge = "x".repeat(200_000);
    let h = Harness::new(vec![registered(
        spec("core__big", any_object(), ToolEffect::ReadOnly),
        Fixed(ToolOutput::json(json!(huge))),
    )]);
    let (exec, events) = h.exec_events(call("core__big", "{}")).await;
    let max = Budgets::default().max_result_bytes;
    assert!(exec.truncated);
    assert!(
        exec.model_content.len() <= max,
        "{}",
        exec.model_content.len()
    );
    let shown: String = serde_json::from_str(&exec.model_content).unwrap();
    assert!(shown.ends_with(TRUNCATION_MARKER));
    assert!(
        shown.len() > max / 2,
        "keeps most of the budget: {}",
        shown.len()
    );
    assert_eq!(
        expect_ok(&exec),
        json!(huge),
        "the caller gets the full output"
    );
    assert!(matches!(
        events.result.kind,
        ai_core::event::AiEventKind::ToolCallResult {
            truncated: true,
            ..
        }
    ));
}

#[tokio::test]
async fn huge_array_output_keeps_leading_items_and_a_sentinel() {
    let items: Vec<Value> = (0..10_000)
        .map(|i| json!({"i": i, "name": format!("item {i}")}))
        .collect();
    let policy = allow_all().with_budgets(Budgets {
        max_result_bytes: 4096,
        ..Budgets::default()
    });
    let h = Harness::with_policy(
        vec![registered(
            spec("core__list", any_object(), ToolEffect::ReadOnly),
            Fixed(ToolOutput::json(Value::Array(items.clone()))),
        )],
        policy,
    );
    let exec = h.exec(call("core__list", "{}")).await;
    assert!(exec.truncated);
    assert!(
        exec.model_content.len() <= 4096,
        "{}",
        exec.model_content.len()
    );
    let shown: Vec<Value> = serde_json::from_str(&exec.model_content).unwrap();
    let (sentinel, kept) = shown.split_last().unwrap();
    assert!(!kept.is_empty());
    assert_eq!(kept, &items[..kept.len()]);
    assert_eq!(
        sentinel,
        &json!({"_truncated": true, "omitted_items": items.len() - kept.len()})
    );
    assert_eq!(
        exec.output.as_ref().unwrap().as_array().unwrap().len(),
        10_000
    );
}

#[tokio::test]
async fn small_outputs_are_not_truncated() {
    let h = echo_harness();
    let exec = h
        .exec(call("core__echo", r#"{"b": [1, 2], "a": "é"}"#))
        .await;
    assert!(!exec.truncated);
    assert_eq!(
        serde_json::from_str::<Value>(&exec.model_content).unwrap(),
        json!({"a": "é", "b": [1, 2]})
    );
}

#[tokio::test]
async fn executor_receives_parsed_arguments_and_its_call_context() {
    let counted = Counted::default();
    let calls = counted.calls.clone();
    let h = Harness::new(vec![registered(
        spec(
            "mcp__files__list",
            crate::support::ab_schema(),
            ToolEffect::ReadOnly,
        ),
        counted,
    )]);
    let exec = h
        .exec(call("mcp__files__list", r#"{"a": 1, "b": "x"}"#))
        .await;
    assert_eq!(expect_ok(&exec), json!({"a": 1, "b": "x"}));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    // A failed validation does not reach the executor.
    expect_failure(
        &h.exec(call("mcp__files__list", r#"{"a": "1", "b": "x"}"#))
            .await,
        ToolErrorCode::InvalidArgs,
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}
