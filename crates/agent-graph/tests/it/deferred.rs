//! Calls the loop does not execute itself, and what it streams before a call is
//! complete: argument text as `tool_input_delta`s, and calls of tools the client
//! runs (`client__<name>`), which pause a run with deferred calls until the
//! client's output resumes it.

use std::sync::Arc;

use agent_graph::run::{self, Decision, NO_CLIENT_OUTPUT, RunRequest};
use agent_testing::{ScriptedModel, Turn};
use ai_core::{
    Message, ToolEffect, ToolId, ToolPolicy, ToolSpec, event::AiEventKind, tool::RegisteredTool,
};
use futures::StreamExt;
use serde_json::json;

use crate::support::{Kit, ctx, open_policy, request, run_to_end};

#[tokio::test]
async fn arguments_stream_as_tool_input_deltas() {
    let kit = Kit::new();
    let text = "a".repeat(600);
    let model = ScriptedModel::new([
        Turn::text("")
            .tool_call("c1", "core__echo", json!({"text": text}))
            .arg_chunk_size(7),
        Turn::text("done"),
    ]);
    let (events, outcome) = run_to_end(request(), kit.deps(&model)).await;
    outcome.unwrap();
    let deltas: Vec<&str> = events
        .iter()
        .filter_map(|e| match &e.kind {
            AiEventKind::ToolInputDelta {
                tool_call_id,
                tool_name,
                delta,
            } => {
                assert_eq!(
                    (tool_call_id.as_str(), tool_name.as_str()),
                    ("c1", "core__echo")
                );
                Some(delta.as_str())
            }
            _ => None,
        })
        .collect();
    // The first fragment at once, then pieces of about 256 bytes, then the rest:
    // together, exactly the argument text the model sent.
    assert_eq!(deltas[0].len(), 7);
    assert!(deltas.len() >= 3 && deltas.len() <= 5, "{deltas:?}");
    assert_eq!(deltas.concat(), json!({"text": text}).to_string());
    let start = events
        .iter()
        .position(|e| matches!(e.kind, AiEventKind::ToolCallStart { .. }))
        .unwrap();
    let last_delta = events
        .iter()
        .rposition(|e| matches!(e.kind, AiEventKind::ToolInputDelta { .. }))
        .unwrap();
    assert!(
        last_delta < start,
        "every delta comes before the call starts"
    );
}

#[tokio::test]
async fn arguments_a_redaction_hides_do_not_stream() {
    let kit = Kit::new();
    let hidden = RegisteredTool {
        spec: ToolSpec::new(
            ToolId::core("secret").unwrap(),
            "takes a secret",
            json!({"type": "object", "properties": {"token": {"type": "string"}}}),
            ToolEffect::ReadOnly,
        )
        .with_redaction(ai_core::tool::Redaction::new(Vec::<&str>::new(), ["$"]).unwrap()),
        executor: Arc::new(ai_core::tool::ClientToolExecutor),
    };
    let model = ScriptedModel::new([
        Turn::text("").tool_call("s1", "core__secret", json!({"token": "hunter2"})),
        Turn::text("ok"),
    ]);
    let deps = kit.deps_with_extra(&model, open_policy(), None, vec![hidden]);
    let (events, _) = run_to_end(request(), deps).await;
    assert!(
        !events
            .iter()
            .any(|e| matches!(e.kind, AiEventKind::ToolInputDelta { .. })),
        "{events:#?}"
    );
}

fn client_tool() -> RegisteredTool {
    RegisteredTool::client(ToolSpec::new(
        ToolId::client("get_location").unwrap(),
        "The user's city",
        json!({"type": "object", "properties": {"precise": {"type": "boolean"}}}),
        ToolEffect::ReadOnly,
    ))
}

fn deferred_request() -> RunRequest {
    let mut request = request();
    request.defer_approvals = true;
    request
}

#[tokio::test]
async fn a_client_tool_call_pauses_the_run_and_its_output_resumes_it() {
    let kit = Kit::new();
    let model = ScriptedModel::new([
        Turn::text("")
            .tool_call("e1", "core__echo", json!({"text": "x"}))
            .tool_call("g1", "client__get_location", json!({"precise": false})),
        Turn::text("You are in Lyon."),
    ]);
    let policy = ToolPolicy::allowing(["core__*", "client__*"]).with_approval_for([]);
    let deps = kit.deps_with_extra(&model, policy, None, vec![client_tool()]);
    let (events, outcome) = run_to_end(deferred_request(), deps.clone()).await;
    let output = outcome.unwrap();
    // The server tool ran; the client tool was handed over, not executed.
    let handed: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.kind {
            AiEventKind::ClientToolCall {
                tool_call_id,
                tool_name,
                args,
            } => Some((tool_call_id.clone(), tool_name.clone(), args.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        handed,
        [(
            "g1".to_owned(),
            "client__get_location".to_owned(),
            json!({"precise": false})
        )]
    );
    assert!(!events.iter().any(|e| matches!(
        &e.kind,
        AiEventKind::ToolCallStart { tool_name, .. } if tool_name == "client__get_location"
    )));
    let paused = output.paused.clone().expect("paused for the client");
    assert!(paused.pending.is_empty());
    assert_eq!(paused.client_calls.len(), 1);
    assert_eq!(model.calls(), 1);

    // Serialized and resumed with the client's output: the model reads it.
    let paused: run::PausedRun =
        serde_json::from_str(&serde_json::to_string(&paused).unwrap()).unwrap();
    let decisions = vec![Decision::ClientOutput {
        tool_call_id: "g1".into(),
        output: json!({"city": "Lyon"}),
    }];
    let resumed = run::resume(paused, decisions, deps)
        .into_outcome()
        .await
        .unwrap();
    assert_eq!(resumed.content, "You are in Lyon.");
    let seen = &model.requests()[1].messages;
    assert!(
        seen.contains(&Message::tool("g1", r#"{"city":"Lyon"}"#)),
        "{seen:#?}"
    );
    assert!(
        seen.contains(&Message::tool("e1", r#"{"echo":"x"}"#)),
        "{seen:#?}"
    );
}

#[tokio::test]
async fn a_client_call_resumed_without_output_is_settled_and_outside_a_deferred_run_it_fails() {
    let kit = Kit::new();
    let model = ScriptedModel::new([
        Turn::text("").tool_call("g1", "client__get_location", json!({})),
        Turn::text("No location."),
        Turn::text("").tool_call("g2", "client__get_location", json!({})),
        Turn::text("Still none."),
    ]);
    let policy = ToolPolicy::allowing(["core__*", "client__*"]).with_approval_for([]);
    let deps = kit.deps_with_extra(&model, policy, None, vec![client_tool()]);
    let output = run::run(deferred_request(), deps.clone())
        .into_outcome()
        .await
        .unwrap();
    let paused = output.paused.unwrap();
    run::resume(*paused, Vec::new(), deps.clone())
        .into_outcome()
        .await
        .unwrap();
    assert!(
        model.requests()[1]
            .messages
            .contains(&Message::tool("g1", NO_CLIENT_OUTPUT))
    );
    // Without deferred calls there is no client to hand it to: the call fails and
    // the model is told.
    let mut events = run::run(
        RunRequest::new(ctx(), "test-model", vec![Message::user("hi")]),
        deps,
    )
    .into_events();
    let mut failed = false;
    while let Some(event) = events.next().await {
        if let AiEventKind::ToolCallResult {
            tool_call_id, ok, ..
        } = &event.kind
        {
            failed |= tool_call_id == "g2" && !ok;
        }
    }
    assert!(failed);
}
