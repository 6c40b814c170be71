//! A stdio server: discovery, calls, errors, list changes, pins, crashes, timeouts,
//! cancellation and shutdown.

use std::time::Duration;

use ai_core::{
    CancellationToken, RunContext,
    runner::{CallScope, ToolCall},
    tool::ToolErrorCode,
};
use serde_json::json;
use tools_mcp::{PinState, Pins};

use agent_testing::process::{alive, wait_gone};

use crate::support::{Events, State, call, call_with, eventually, runner, start, stdio};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovery_maps_names_translates_schemas_and_keeps_out_what_cannot_be_translated() {
    let Some(state) = State::new() else { return };
    let sources = start(stdio(&state, &["--pages", "3"]), &Pins::default()).await;
    let runner = runner(&sources);
    let ctx = RunContext::generate();
    let catalog = runner.catalog(&ctx);
    let ids: Vec<&str> = catalog.specs().iter().map(|s| s.id.as_str()).collect();
    // Every page was listed (16 tools over 3 pages), one kept out.
    for id in [
        "mcp__t__echo",
        "mcp__t__add",
        "mcp__t__profile",
        "mcp__t__pid",
        "mcp__t__toggle",
    ] {
        assert!(ids.contains(&id), "{id} in {ids:?}");
    }
    assert_eq!(ids.len(), 15, "{ids:?}");
    // A name outside [a-zA-Z0-9_-] is mapped reversibly.
    let mapped = ids
        .iter()
        .find(|id| id.starts_with("mcp__t__notes_search_v2_"))
        .expect("notes.search/v2 is offered under a mapped id");
    let found = call(&runner, mapped, json!({"q": "rust"})).await;
    assert!(found.result.ok, "{found:?}");
    assert_eq!(found.model_content, "found: rust");

    // The 2020-12 schema became the catalog's draft-07 subset.
    let profile = catalog.get("mcp__t__profile").unwrap();
    assert_eq!(
        profile.input_schema["properties"]["age"]["type"],
        json!(["integer", "null"])
    );
    assert_eq!(
        profile.input_schema["properties"]["kind"],
        json!({"enum": ["person"]})
    );
    assert_eq!(
        profile.input_schema["properties"]["address"]["properties"]["zip"]["type"],
        json!(["string", "null"])
    );
    assert!(profile.input_schema.get("$defs").is_none());
    let ok = call(
        &runner,
        "mcp__t__profile",
        json!({"name": "Ada", "kind": "person", "address": {"city": "London", "zip": null}, "age": null}),
    )
    .await;
    assert!(ok.result.ok, "{ok:?}");
    assert_eq!(ok.model_content, "profile ok: Ada");
    let bad = call(
        &runner,
        "mcp__t__profile",
        json!({"name": "Ada", "kind": "robot", "address": {"city": "x"}}),
    )
    .await;
    assert_eq!(bad.result.error_code, Some(ToolErrorCode::InvalidArgs));

    // The oneOf schema is kept out, with a warning naming the keyword path.
    assert!(!ids.contains(&"mcp__t__weird"));
    let warning = sources
        .warnings()
        .iter()
        .find(|w| w.tool.as_deref() == Some("weird"))
        .expect("a warning about `weird`");
    assert!(
        warning.message.contains("/properties/shape/oneOf"),
        "{warning}"
    );
    let report = &sources.report()[0];
    assert!(
        report.status.starts_with("connected (protocol 20"),
        "{}",
        report.status
    );
    let weird = report.tools.iter().find(|t| t.name == "weird").unwrap();
    assert!(weird.withheld.as_deref().unwrap().contains("kept out"));
    // Default effect: external side effect; events show no content by default.
    assert!(
        catalog
            .specs()
            .iter()
            .all(|s| s.effect == ai_core::ToolEffect::ExternalSideEffect)
    );
    sources.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_return_text_structured_content_placeholders_and_typed_errors() {
    let Some(state) = State::new() else { return };
    let sources = start(stdio(&state, &[]), &Pins::default()).await;
    let runner = runner(&sources);
    let events = Events::default();
    let echo = call_with(
        &runner,
        "mcp__t__echo",
        json!({"text": "hello"}),
        &CancellationToken::new(),
        &events,
    )
    .await;
    assert!(echo.result.ok);
    assert_eq!(echo.model_content, "hello");
    // Default redaction: events carry metadata only.
    assert!(!events.json().contains("hello"), "{}", events.json());

    let add = call(&runner, "mcp__t__add", json!({"a": 2, "b": 3})).await;
    assert!(add.result.ok, "{add:?}");
    assert_eq!(add.output, Some(json!({"sum": 5})));

    let image = call(&runner, "mcp__t__image", json!({})).await;
    assert!(image.result.ok);
    assert!(
        image.model_content.contains("[image: image/png,"),
        "{}",
        image.model_content
    );
    assert!(
        image.model_content.contains("[audio: audio/wav,"),
        "{}",
        image.model_content
    );
    assert!(image.model_content.contains("see attachments"));
    assert!(
        !image.model_content.contains("iVBOR"),
        "no base64 in the context"
    );

    let link = call(&runner, "mcp__t__link", json!({})).await;
    assert_eq!(
        link.model_content,
        "[resource: today.txt <file:///notes/today.txt>]"
    );

    let fail = call(&runner, "mcp__t__fail", json!({})).await;
    assert!(!fail.result.ok);
    assert_eq!(fail.result.error_code, Some(ToolErrorCode::ExecutionFailed));
    assert_eq!(
        fail.result.safe_message.as_deref(),
        Some("the widget broke")
    );

    let unknown = call(&runner, "mcp__t__nope", json!({})).await;
    assert_eq!(unknown.result.error_code, Some(ToolErrorCode::UnknownTool));
    sources.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_sees_only_its_env_and_the_allowlist() {
    let Some(state) = State::new() else { return };
    let mut config = stdio(&state, &[]);
    config.env.insert("LOG_LEVEL".into(), "warn".into());
    let sources = start(config, &Pins::default()).await;
    let runner = runner(&sources);
    let env = call(&runner, "mcp__t__env", json!({})).await;
    let names: Vec<&str> = env.model_content.split(' ').collect();
    assert!(names.contains(&"LOG_LEVEL"), "{names:?}");
    for name in &names {
        assert!(
            *name == "LOG_LEVEL"
                || *name == tools_mcp::SERVER_MARKER_VAR
                || tools_mcp::INHERITED_ENV.contains(name)
                || name.starts_with("LC_CTYPE"),
            "{name} leaked into the server's environment ({names:?})"
        );
    }
    assert!(!names.contains(&"CARGO_MANIFEST_DIR"));
    sources.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_list_that_changes_at_run_time_never_enables_a_new_tool() {
    let Some(state) = State::new() else { return };
    let sources = start(stdio(&state, &[]), &Pins::default()).await;
    let runner = runner(&sources);
    let ctx = RunContext::generate();
    let old_catalog = runner.catalog(&ctx);
    assert!(old_catalog.get("mcp__t__ephemeral").is_some());
    let toggled = call(&runner, "mcp__t__toggle", json!({})).await;
    assert_eq!(toggled.model_content, "toggled");
    // The notification arrives and the list is refreshed.
    assert!(
        eventually(Duration::from_secs(10), || runner
            .catalog(&ctx)
            .get("mcp__t__ephemeral")
            .is_none())
        .await,
        "the removed tool left the catalog"
    );
    let catalog = runner.catalog(&ctx);
    // A new tool is not enabled by appearing; a changed one is withheld.
    assert!(catalog.get("mcp__t__newcomer").is_none());
    assert!(catalog.get("mcp__t__add").is_none());
    assert!(
        catalog.get("mcp__t__echo").is_some(),
        "policy and other tools are kept"
    );
    let withheld = runner.withheld(&ctx);
    let reasons: Vec<(&str, &str)> = withheld
        .iter()
        .map(|(id, r)| (id.as_str(), r.as_str()))
        .collect();
    assert!(
        reasons
            .iter()
            .any(|(id, r)| *id == "mcp__t__add" && r.contains("agent mcp pin t")),
        "{reasons:?}"
    );
    assert!(
        reasons
            .iter()
            .any(|(id, r)| *id == "mcp__t__ephemeral" && r.contains("no longer lists")),
        "{reasons:?}"
    );
    let report = &sources.report()[0];
    let newcomer = report.tools.iter().find(|t| t.name == "newcomer").unwrap();
    assert_eq!(newcomer.pin, PinState::New);
    assert!(newcomer.withheld.is_some());
    // A call made from the catalog of before the change ends typed.
    let removed = runner
        .exec(
            &ctx,
            &old_catalog,
            ToolCall::new("late", "mcp__t__ephemeral", "{}"),
            &CancellationToken::new(),
            &Events::default(),
            &CallScope::default(),
        )
        .await;
    assert_eq!(
        removed.result.error_code,
        Some(ToolErrorCode::ExecutionFailed),
        "{removed:?}"
    );
    assert!(
        removed
            .result
            .safe_message
            .as_deref()
            .unwrap()
            .contains("no longer lists")
    );
    // A call in flight when its tool is removed ends typed too (see below).
    // Accepting the server's current definitions pins add and newcomer, forgets ephemeral.
    let accepted = sources.accept("t", &Pins::default()).unwrap();
    let pinned = &accepted.servers["t"];
    assert!(pinned.contains_key("newcomer") && pinned.contains_key("add"));
    assert!(!pinned.contains_key("ephemeral"));
    sources.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_in_flight_when_the_server_removes_its_tool_ends_typed() {
    let Some(state) = State::new() else { return };
    let sources = start(stdio(&state, &[]), &Pins::default()).await;
    let runner = std::sync::Arc::new(runner(&sources));
    let in_flight = {
        let runner = std::sync::Arc::clone(&runner);
        tokio::spawn(
            async move { call(&runner, "mcp__t__ephemeral", json!({"seconds": 30})).await },
        )
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        call(&runner, "mcp__t__toggle", json!({}))
            .await
            .model_content,
        "toggled"
    );
    let ended = tokio::time::timeout(Duration::from_secs(10), in_flight)
        .await
        .expect("the call ended well before the server would have answered")
        .unwrap();
    assert_eq!(
        ended.result.error_code,
        Some(ToolErrorCode::ExecutionFailed),
        "{ended:?}"
    );
    assert!(
        ended
            .result
            .safe_message
            .as_deref()
            .unwrap()
            .contains("removed or changed this tool during the call"),
        "{ended:?}"
    );
    sources.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_definition_that_changed_since_it_was_pinned_is_disabled_until_pinned_again() {
    let Some(state) = State::new() else { return };
    let first = start(stdio(&state, &[]), &Pins::default()).await;
    let pins = first
        .updated_pins(&Pins::default())
        .expect("first sight pins everything");
    assert!(pins.get("t", "echo").unwrap().starts_with("sha256:"));
    first.shutdown().await;
    assert_eq!(
        first.updated_pins(&pins),
        None,
        "nothing new on a second look"
    );

    // The server now describes `echo` differently.
    let second = start(stdio(&state, &["--variant", "2"]), &pins).await;
    let second_runner = runner(&second);
    let ctx = RunContext::generate();
    assert!(second_runner.catalog(&ctx).get("mcp__t__echo").is_none());
    assert!(second_runner.catalog(&ctx).get("mcp__t__add").is_some());
    let warning = second
        .warnings()
        .iter()
        .find(|w| w.tool.as_deref() == Some("echo"))
        .unwrap();
    assert!(warning.message.contains("agent mcp pin t"), "{warning}");
    let refused = call(&second_runner, "mcp__t__echo", json!({"text": "x"})).await;
    assert!(!refused.result.ok);
    let echo = second.report()[0]
        .tools
        .iter()
        .find(|t| t.name == "echo")
        .cloned()
        .unwrap();
    assert_eq!(echo.pin, PinState::Changed);
    assert_eq!(
        echo.description, "Echoes the text back, loudly.",
        "descriptions are shown"
    );

    let accepted = second.accept("t", &pins).unwrap();
    second.shutdown().await;
    let third = start(stdio(&state, &["--variant", "2"]), &accepted).await;
    let third_runner = runner(&third);
    let echo = call(&third_runner, "mcp__t__echo", json!({"text": "back"})).await;
    assert!(echo.result.ok, "{echo:?}");
    third.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_call_is_a_typed_failure_and_is_restarted_on_the_next_use() {
    let Some(state) = State::new() else { return };
    let sources = start(stdio(&state, &[]), &Pins::default()).await;
    let runner = runner(&sources);
    let first_pid = state.pid("stdio").await;
    let crash = call(&runner, "mcp__t__crash", json!({})).await;
    assert!(!crash.result.ok);
    assert_eq!(
        crash.result.error_code,
        Some(ToolErrorCode::ExecutionFailed)
    );
    assert!(
        crash
            .result
            .safe_message
            .as_deref()
            .unwrap()
            .contains("closed the connection"),
        "{crash:?}"
    );
    assert!(wait_gone(first_pid, Duration::from_secs(10)).await);
    std::fs::remove_file(state.path().join("pid-stdio")).unwrap();
    let echo = call(&runner, "mcp__t__echo", json!({"text": "again"})).await;
    assert!(echo.result.ok, "{echo:?}");
    let second_pid = state.pid("stdio").await;
    assert_ne!(first_pid, second_pid);
    sources.shutdown().await;
    assert!(wait_gone(second_pid, Duration::from_secs(10)).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_answers_times_out_and_is_told_to_cancel() {
    let Some(state) = State::new() else { return };
    let mut config = stdio(&state, &[]);
    config.call_timeout_s = Some(1);
    let sources = start(config, &Pins::default()).await;
    let runner = runner(&sources);
    let hang = call(&runner, "mcp__t__hang", json!({})).await;
    assert_eq!(
        hang.result.error_code,
        Some(ToolErrorCode::Timeout),
        "{hang:?}"
    );
    assert!(
        state
            .wait("cancelled-hang", Duration::from_secs(10))
            .await
            .is_some(),
        "the server saw notifications/cancelled"
    );
    // The connection is still good.
    assert!(
        call(&runner, "mcp__t__echo", json!({"text": "ok"}))
            .await
            .result
            .ok
    );
    sources.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_call_sends_notifications_cancelled() {
    let Some(state) = State::new() else { return };
    let sources = start(stdio(&state, &[]), &Pins::default()).await;
    let runner = runner(&sources);
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(500)).await;
        trigger.cancel();
    });
    let slow = call_with(
        &runner,
        "mcp__t__slow",
        json!({"seconds": 30}),
        &cancel,
        &Events::default(),
    )
    .await;
    assert_eq!(
        slow.result.error_code,
        Some(ToolErrorCode::Cancelled),
        "{slow:?}"
    );
    let marker = state.wait("cancelled-slow", Duration::from_secs(10)).await;
    assert!(marker.is_some(), "the server saw notifications/cancelled");
    sources.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_server_process_outlives_shutdown() {
    let Some(state) = State::new() else { return };
    let sources = start(stdio(&state, &[]), &Pins::default()).await;
    let pid = state.pid("stdio").await;
    assert_eq!(sources.pid("t").await, Some(pid));
    assert!(alive(pid));
    sources.shutdown().await;
    assert!(
        wait_gone(pid, Duration::from_secs(10)).await,
        "server {pid} still runs"
    );
}

/// A process the server starts in a new session (`setsid`) leaves its process
/// group and its tree; it still ends with the server (it outlived it before).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_the_server_started_in_a_new_session_ends_with_it() {
    let Some(state) = State::new() else { return };
    let sources = start(stdio(&state, &["--spawn-escapee"]), &Pins::default()).await;
    let escapee = state.pid("escapee").await;
    assert!(alive(escapee));
    sources.shutdown().await;
    assert!(
        wait_gone(escapee, Duration::from_secs(10)).await,
        "the server's escaped child {escapee} still runs"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_does_not_start_is_a_warning_and_offers_nothing() {
    let Some(state) = State::new() else { return };
    let mut config = stdio(&state, &[]);
    config.command = Some("/nonexistent/mcp-server".into());
    let sources = start(config, &Pins::default()).await;
    assert!(sources.tools().is_empty());
    let warning = &sources.warnings()[0];
    assert!(warning.message.contains("not started"), "{warning}");
    assert!(sources.report()[0].status.starts_with("down"));
}
