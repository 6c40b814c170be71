//! The front door's second pass: conversations send one system prompt, settings
//! per agent and per run, typed answers with retries, approval closures, tools that
//! see their context (and get a grace to clean up), the run handle's halves.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use agent_graph::{Agent, Conversation, run::RunError};
use agent_testing::{ScriptedModel, Turn};
use ai_core::{
    Message, RunContext, ToolEffect,
    approval::{ApprovalDecision, approver_fn},
    completion::{CompletionRequest, ModelSettings, ResponseFormat},
    event::AiEventKind,
    tool::{ToolCallContext, ToolErrorCode, ToolFailure},
};
use futures::StreamExt;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

fn systems(request: &CompletionRequest) -> usize {
    request
        .messages
        .iter()
        .filter(|m| matches!(m, Message::System { .. }))
        .count()
}

#[tokio::test]
async fn a_conversation_sends_the_system_prompt_once_per_request() {
    let model = ScriptedModel::new([
        Turn::text("Hi Ada."),
        Turn::text("You are Ada."),
        Turn::text("Still Ada."),
    ]);
    let agent = Agent::builder(model.clone())
        .system("Be brief.")
        .build()
        .unwrap();
    let mut chat = Conversation::new();
    agent.chat(&mut chat, "I am Ada.").await.unwrap();
    agent.chat(&mut chat, "Who am I?").await.unwrap();
    let output = agent.chat(&mut chat, "And now?").await.unwrap();
    assert_eq!(output.content, "Still Ada.");
    // The turn's own messages, apart from the history.
    assert_eq!(
        output.new_messages(),
        [Message::user("And now?"), Message::assistant("Still Ada.")]
    );
    assert_eq!(chat.len(), 6);
    assert!(
        chat.messages()
            .iter()
            .all(|m| !matches!(m, Message::System { .. }))
    );
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    for (turn, request) in requests.iter().enumerate() {
        assert_eq!(systems(request), 1, "turn {turn}");
        assert_eq!(request.messages[0], Message::system("Be brief."));
    }
    assert_eq!(requests[2].messages.len(), 1 + 5);
}

#[tokio::test]
async fn passing_a_run_s_messages_back_sends_no_second_system_prompt() {
    let model = ScriptedModel::new([Turn::text("one"), Turn::text("two"), Turn::text("three")]);
    let agent = Agent::builder(model.clone()).system("S").build().unwrap();
    let mut history = vec![Message::user("a")];
    for text in ["b", "c"] {
        let output = agent
            .run_with(RunContext::generate(), history)
            .into_outcome()
            .await
            .unwrap();
        // The natural way: the whole output back, plus the next message.
        history = output.messages.clone();
        history.push(Message::user(text));
    }
    agent
        .run_with(RunContext::generate(), history)
        .into_outcome()
        .await
        .unwrap();
    for request in model.requests() {
        assert_eq!(systems(&request), 1);
    }
}

#[tokio::test]
async fn thinking_budget_prompt_caching_and_stop_grace_are_set_on_the_builder() {
    let model = ScriptedModel::new([Turn::text("a")]);
    let agent = Agent::builder(model.clone())
        .thinking_budget(2048)
        .prompt_caching(true)
        .stop_grace(std::time::Duration::from_millis(1500))
        .build()
        .unwrap();
    agent.prompt("x").await.unwrap();
    let settings = &model.requests()[0].settings;
    assert_eq!(settings.thinking_budget, Some(2048));
    assert!(settings.prompt_cache);
    assert_eq!(agent.runner().policy().budgets.stop_grace_ms, 1500);
}

#[tokio::test]
async fn settings_apply_per_agent_and_with_settings_per_run() {
    let model = ScriptedModel::new([Turn::text("a"), Turn::text("b"), Turn::text("c")]);
    let agent = Agent::builder(model.clone())
        .settings(ModelSettings {
            temperature: Some(0.7),
            seed: Some(1),
            ..ModelSettings::default()
        })
        .build()
        .unwrap();
    agent.prompt("x").await.unwrap();
    let exact = agent.with_settings(ModelSettings {
        temperature: Some(0.0),
        ..agent.settings().clone()
    });
    exact.prompt("y").await.unwrap();
    agent.prompt("z").await.unwrap();
    let temperatures: Vec<_> = model
        .requests()
        .iter()
        .map(|r| (r.settings.temperature, r.settings.seed))
        .collect();
    assert_eq!(
        temperatures,
        [
            (Some(0.7), Some(1)),
            (Some(0.0), Some(1)),
            (Some(0.7), Some(1))
        ]
    );
}

#[derive(Debug, PartialEq, Deserialize, JsonSchema)]
struct Order {
    id: u32,
    status: Status,
    note: Option<String>,
}

#[derive(Debug, PartialEq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Status {
    Open,
    Shipped,
}

#[tokio::test]
async fn a_typed_answer_is_asked_for_strict_checked_and_asked_again_once() {
    let model = ScriptedModel::new([
        Turn::text(r#"{"id": "seven", "status": "open"}"#),
        Turn::text(r#"{"id": 7, "status": "shipped", "note": null}"#),
    ]);
    let agent = Agent::builder(model.clone())
        .system("Answer in JSON.")
        .build()
        .unwrap();
    let typed = agent
        .run_typed::<Order>(
            RunContext::new("run-t", "trace-t"),
            vec![Message::user("Order 7?")],
        )
        .await
        .unwrap();
    assert_eq!(
        typed.value,
        Order {
            id: 7,
            status: Status::Shipped,
            note: None
        }
    );
    assert_eq!(typed.rejected.len(), 1);
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    let Some(ResponseFormat::JsonSchema {
        name,
        schema,
        strict,
    }) = &requests[0].settings.response_format
    else {
        panic!("no JSON-schema response format: {:?}", requests[0].settings);
    };
    assert!(*strict);
    assert_eq!(name, "Order");
    assert_eq!(
        schema["properties"]["status"]["enum"],
        json!(["open", "shipped"])
    );
    // The retry is a run of the same trace, with the rejected answer and what was
    // wrong with it (by place, not by value).
    assert_eq!(requests[1].context.run_id, "run-t.1");
    assert_eq!(requests[1].context.trace_id, "trace-t");
    let Some(Message::User { content, .. }) = requests[1].messages.last() else {
        panic!("the retry ends with a user message");
    };
    assert!(content.contains("/id: wrong type"), "{content}");
    assert!(!content.contains("seven"), "{content}");
    assert_eq!(systems(&requests[1]), 1);
}

#[tokio::test]
async fn a_typed_answer_that_never_matches_is_a_typed_error() {
    let model = ScriptedModel::new([Turn::text("Sure!"), Turn::text("{}"), Turn::text("[]")]);
    let agent = Agent::builder(model.clone())
        .output_retries(2)
        .build()
        .unwrap();
    let error = agent.prompt_typed::<Order>("Order 7?").await.unwrap_err();
    let RunError::InvalidOutput { attempts, message } = &error else {
        panic!("{error:?}");
    };
    assert_eq!(*attempts, 3);
    assert!(message.contains("wrong type"), "{message}");
    assert_eq!(error.code(), "invalid_output");
    assert_eq!(model.calls(), 3);
}

#[derive(Deserialize, JsonSchema)]
struct Refund {
    order: u32,
    amount: u32,
}

#[tokio::test]
async fn an_approval_closure_denies_by_argument_value_with_approval_denied() {
    let refunds = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&refunds);
    let refund = ai_tools::tool_fn(
        "refund",
        "Refund an order.",
        ToolEffect::ExternalSideEffect,
        move |args: Refund| {
            counter.fetch_add(1, Ordering::SeqCst);
            async move { Ok(json!({"refunded": args.amount, "order": args.order})) }
        },
    )
    .unwrap();
    let model = ScriptedModel::new([
        Turn::new()
            .tool_call("r1", "app__refund", json!({"order": 1, "amount": 40}))
            .tool_call("r2", "app__refund", json!({"order": 2, "amount": 250})),
        Turn::text("One refund done, one refused."),
    ]);
    let agent = Agent::builder(model.clone())
        .tool(refund)
        .approver(approver_fn(|request| match request.args::<Refund>() {
            Ok(refund) if refund.amount <= 100 => ApprovalDecision::approve(request),
            Ok(_) => ApprovalDecision::deny("refunds over 100 need a manager"),
            Err(_) => ApprovalDecision::deny("unreadable arguments"),
        }))
        .build()
        .unwrap();
    let output = agent.prompt_output("Refund both.").await.unwrap();
    assert_eq!(
        refunds.load(Ordering::SeqCst),
        1,
        "only the small refund ran"
    );
    let errors: Vec<_> = output.records.iter().map(|r| r.error).collect();
    assert_eq!(errors, [None, Some(ToolErrorCode::ApprovalDenied)]);
    // The model reads that the user said no, and why.
    let tool_text = crate::support::tool_message_for(&model.requests()[1].messages, "r2");
    assert!(tool_text.contains("approval_denied"), "{tool_text}");
    assert!(
        tool_text.contains("refunds over 100 need a manager"),
        "{tool_text}"
    );
}

#[derive(Deserialize, JsonSchema)]
struct Export {
    rows: u32,
}

#[tokio::test]
async fn a_cancelled_tool_sees_its_token_and_gets_time_to_clean_up() {
    let observed = Arc::new(AtomicBool::new(false));
    let cleaned = Arc::new(AtomicBool::new(false));
    let started = Arc::new(tokio::sync::Notify::new());
    let (seen, done, go) = (
        Arc::clone(&observed),
        Arc::clone(&cleaned),
        Arc::clone(&started),
    );
    let export = ai_tools::tool_fn(
        "export",
        "Export rows.",
        ToolEffect::ReadOnly,
        move |args: Export, cx: ToolCallContext| {
            let (seen, done, go) = (Arc::clone(&seen), Arc::clone(&done), Arc::clone(&go));
            async move {
                go.notify_one();
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(60)) => Ok(args.rows),
                    _ = cx.cancel.cancelled() => {
                        seen.store(true, Ordering::SeqCst);
                        // Cleanup that awaits: it finishes within the grace.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        done.store(true, Ordering::SeqCst);
                        Err(ToolFailure::failed("export stopped"))
                    }
                }
            }
        },
    )
    .unwrap();
    let model = ScriptedModel::new([
        Turn::new().tool_call("e1", "app__export", json!({"rows": 10})),
        Turn::text("never"),
    ]);
    let agent = Agent::builder(model).tool(export).build().unwrap();
    let (events, outcome) = agent.run("Export.").into_parts();
    started.notified().await;
    let cancel = tokio::spawn(async move {
        let events: Vec<_> = events.collect().await;
        events
    });
    drop(outcome); // the outcome half holds the run: dropping it cancels
    let events = cancel.await.unwrap();
    assert!(observed.load(Ordering::SeqCst), "the tool saw its token");
    assert!(cleaned.load(Ordering::SeqCst), "its cleanup ran to the end");
    let result = events
        .iter()
        .find_map(|e| match &e.kind {
            AiEventKind::ToolCallResult { error_code, .. } => Some(*error_code),
            _ => None,
        })
        .unwrap();
    assert_eq!(result, Some(ToolErrorCode::Cancelled));
}

fn read_rows(rows: u32) -> Result<u32, std::io::Error> {
    match rows {
        0 => Err(std::io::Error::from(std::io::ErrorKind::NotFound)),
        n => Ok(n),
    }
}

fn at_most_five(rows: u32) -> Result<u32, String> {
    match rows {
        0..=5 => Ok(rows),
        n => Err(format!("{n} rows is too many")),
    }
}

#[tokio::test]
async fn tool_failures_convert_from_text_and_io_errors() {
    let failing = ai_tools::tool_fn(
        "lookup",
        "Look up an order.",
        ToolEffect::ReadOnly,
        |args: Export| async move {
            let rows = read_rows(args.rows)?;
            Ok::<_, ToolFailure>(at_most_five(rows)?)
        },
    )
    .unwrap();
    let model = ScriptedModel::new([
        Turn::new()
            .tool_call("a", "app__lookup", json!({"rows": 0}))
            .tool_call("b", "app__lookup", json!({"rows": 9})),
        Turn::text("ok"),
    ]);
    let agent = Agent::builder(model).tool(failing).build().unwrap();
    let output = agent.prompt_output("Look.").await.unwrap();
    let errors: Vec<_> = output.records.iter().map(|r| r.error).collect();
    assert_eq!(
        errors,
        [
            Some(ToolErrorCode::NotFound),
            Some(ToolErrorCode::ExecutionFailed)
        ]
    );
}
