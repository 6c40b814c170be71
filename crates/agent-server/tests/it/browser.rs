//! The chat page in a real browser: Debian's Chromium driven by `playwright-core`
//! (`web/tests/browser.mjs`) against the live server, which serves the embedded
//! page at `/` and plays scripted model turns. Screenshots of each state are
//! written to `target/browser-shots/`.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Duration;

use agent_server::Access;
use agent_testing::{ScriptedModel, Turn};
use ai_core::completion::CompletionError;
use serde_json::{Value, json};

use crate::support::{Live, start};

/// The arguments of the approval the `rlo` scenario shows: a command that a
/// bidi-aware renderer draws with `touch X` seemingly commented out (the first
/// case of `fixtures/printable/cases.json`).
const RLO_COMMAND: &str = "echo safe-looking \u{202e}\u{2066} ;touch X\u{2069} #\u{202c}";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs one scenario of the driver against `live`; its JSON line.
async fn scenario(live: &Live, name: &str) -> Value {
    scenario_with(live, name, &[]).await
}

/// [`scenario`] with more driver arguments. The page is opened at the address
/// `agent serve` prints: the token in its fragment.
async fn scenario_with(live: &Live, name: &str, extra: &[&str]) -> Value {
    let driver = root().join("web/tests/browser.mjs");
    assert!(
        root().join("web/node_modules/playwright-core").exists(),
        "the browser tests need `npm ci` in web/ (run `cargo xtask test-env`)"
    );
    let shots = root().join("target/browser-shots");
    let output = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new("node")
            .arg(&driver)
            .args(["--url", &page_url(live), "--scenario", name, "--shots"])
            .arg(&shots)
            .args(extra)
            .output(),
    )
    .await
    .expect("the browser scenario finished")
    .expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let result: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
        panic!(
            "{name}: no JSON line ({e}): {stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    assert_eq!(result["ok"], true, "{name}: {result}");
    result
}

fn page_url(live: &Live) -> String {
    format!("{}#token={}", live.url("/"), crate::support::TOKEN)
}

fn echo_then_answer() -> Vec<Turn> {
    vec![
        Turn::new().tool_call("e1", "app__echo", json!({"text": "hello from the page"})),
        Turn::text("I echoed your text."),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_runs_a_tool_and_streams_the_answer() {
    let live = start(ScriptedModel::new(echo_then_answer()), Access::loopback).await;
    scenario(&live, "tool-run").await;
    assert_eq!(live.model.requests().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approve_runs_the_tool_with_a_server_bound_approval() {
    let live = start(
        ScriptedModel::new([
            Turn::new().tool_call("w1", "app__write", json!({"key": "k", "value": 1})),
            Turn::text("Written."),
        ]),
        Access::loopback,
    )
    .await;
    scenario(&live, "approve").await;
    assert_eq!(
        live.writes.load(Ordering::SeqCst),
        1,
        "approved once, ran once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deny_shows_denied_and_the_models_follow_up() {
    let live = start(
        ScriptedModel::new([
            Turn::new().tool_call("w1", "app__write", json!({"key": "k", "value": 1})),
            Turn::text("Understood, nothing was written."),
        ]),
        Access::loopback,
    )
    .await;
    scenario(&live, "deny").await;
    assert_eq!(live.writes.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_mid_tool_cancels_the_run_on_the_server() {
    let live = start(
        ScriptedModel::new([
            Turn::new().tool_call("x1", "app__wait", json!({})),
            Turn::text("never"),
        ]),
        |port| Access {
            heartbeat: Duration::from_millis(100),
            ..Access::loopback(port)
        },
    )
    .await;
    scenario(&live, "stop").await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !live.wait_cancelled.load(Ordering::SeqCst) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the server never cancelled the tool"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(live.model.requests().len(), 1, "no model turn after Stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_conversation_survives_a_reload_and_can_be_cleared() {
    let live = start(ScriptedModel::new(echo_then_answer()), Access::loopback).await;
    scenario(&live, "reload").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_request_is_a_readable_banner() {
    let live = start(
        ScriptedModel::new([Turn::error(CompletionError::Protocol {
            message: "the model endpoint is unreachable".into(),
        })]),
        Access::loopback,
    )
    .await;
    // The provider's text stays in the server log; the banner says what failed.
    scenario_with(&live, "error", &["--expect", "could not answer"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_its_token_the_page_asks_for_it() {
    let live = start(ScriptedModel::new([]), Access::loopback).await;
    scenario(&live, "token").await;
}

/// The approval card shows bidi controls escaped, as the CLI does, with a
/// warning (the old page printed them raw: `touch X` looked commented out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_card_shows_bidi_controls_escaped_with_a_warning() {
    let live = start(
        ScriptedModel::new([
            Turn::new().tool_call("w1", "app__write", json!({"key": RLO_COMMAND, "value": 1})),
            Turn::text("Not written."),
        ]),
        Access::loopback,
    )
    .await;
    scenario(&live, "rlo").await;
    assert_eq!(live.writes.load(Ordering::SeqCst), 0, "denied: nothing ran");
}

/// A 1 MB single-word answer (39 s to render in the old page, again on every
/// reload) is shown a window at a time, and restoring it never blocks the main
/// thread for more than 200 ms.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_answer_renders_a_window_at_a_time_and_restores_quickly() {
    let live = start(
        ScriptedModel::new([Turn::text("x".repeat(1024 * 1024))]),
        Access::loopback,
    )
    .await;
    let result = scenario(&live, "huge").await;
    println!("huge answer: {}", result["timings"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_loads_from_the_server_alone_and_reports_its_size() {
    let live = start(ScriptedModel::new([]), Access::loopback).await;
    let result = scenario(&live, "metrics").await;
    // Printed for the record (cargo test shows it with --nocapture).
    println!(
        "page metrics: {}",
        json!({"timings": result["timings"], "bytes": result["bytes"]})
    );
    let page = crate::support::client()
        .get(live.url("/"))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status().as_u16(), 200);
    let csp = page.headers()["content-security-policy"]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(csp.contains("default-src 'self'"), "{csp}");
    let html = page.text().await.unwrap();
    assert!(html.contains("/assets/app.js"), "{html}");
    for external in [
        "src=\"http",
        "href=\"http",
        "src='http",
        "href='http",
        "url(http",
        "//cdn",
    ] {
        assert!(
            !html.contains(external),
            "no external resources ({external}): {html}"
        );
    }
}
