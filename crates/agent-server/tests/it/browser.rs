//! The chat page in a real browser: Debian's Chromium driven by `playwright-core`
//! (`web/tests/browser.mjs`) against the live server, which serves the embedded
//! page at `/` and plays scripted model turns. Screenshots of each state are
//! written to `target/browser-shots/`.

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

/// Runs one scenario of the driver against `live`; its JSON line.
async fn scenario(live: &Live, name: &str) -> Value {
    scenario_with(live, name, &[]).await
}

/// [`scenario`] with more driver arguments. The page is opened at the address
/// `agent serve` prints: the token in its fragment.
async fn scenario_with(live: &Live, name: &str, extra: &[&str]) -> Value {
    agent_testing::browser::scenario(&page_url(live), name, extra).await
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

/// The chat as a product: conversations listed from the server, the same in
/// two tabs, renamed, opened by keyboard and deleted; kept across reloads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conversations_come_from_the_server_in_every_tab() {
    let (live, dir) = crate::support::start_stored(ScriptedModel::new([
        Turn::text("First answer."),
        Turn::text("Second answer."),
    ]))
    .await;
    scenario(&live, "conversations").await;
    let threads = dir.open().await.account("local").threads(10).await.unwrap();
    assert_eq!(threads.len(), 1, "one deleted of two: {threads:?}");
    assert_eq!(live.model.requests().len(), 2);
}

/// A reload in the middle of a streaming answer reattaches to it
/// (`resume: true`): the answer goes on to its last word, shown once, and the
/// model is not asked again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_mid_answer_resumes_the_stream() {
    let words: Vec<String> = (1..=60).map(|i| format!("word{i}")).collect();
    let (live, _dir) =
        crate::support::start_stored(ScriptedModel::new([
            Turn::text(words.join(" ")).delay_between(Duration::from_millis(100))
        ]))
        .await;
    scenario_with(&live, "resume", &["--expect", "word60"]).await;
    assert_eq!(live.model.requests().len(), 1, "the reload asked nothing");
}

/// A graph picked for a new chat is the graph its run uses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graph_picked_for_a_chat_runs_it() {
    let (live, dir) =
        crate::support::start_stored(ScriptedModel::new([Turn::text("Found it.")])).await;
    scenario(&live, "graph").await;
    let requests = live.model.requests();
    assert_eq!(requests.len(), 1);
    let system = requests[0].messages.iter().find_map(|m| match m {
        ai_core::Message::System { content, .. } => Some(content.as_str()),
        _ => None,
    });
    assert_eq!(system, Some(crate::support::RESEARCHER_PROMPT));
    let threads = dir.open().await.account("local").threads(10).await.unwrap();
    assert_eq!(threads[0].graph, crate::support::RESEARCHER);
}

/// The answer's Markdown as HTML through the Markdown library: a table, lists,
/// highlighted code, safe links; raw HTML never becomes elements.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn markdown_renders_tables_lists_and_code_and_never_raw_html() {
    let answer = "Here is the plan.\n\n\
        | Step | Owner |\n|------|-------|\n| Build | Ada |\n| Ship | Lin |\n\n\
        - apples\n- pears\n\n\
        1. first\n2. second\n3. third\n\n\
        ```rust\nfn main() {\n    println!(\"hi\");\n}\n```\n\n\
        See [the docs](https://example.com/docs) or [this](javascript:alert(1)).\n\n\
        <img src=x onerror=alert(1)> <script>alert(2)</script>\n";
    let live = start(ScriptedModel::new([Turn::text(answer)]), Access::loopback).await;
    scenario(&live, "markdown").await;
}

/// An image picked with the paperclip and a text file dropped on the composer
/// reach the model as an image part and a text file; a file over the limit is
/// refused in the page with its name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attachments_reach_the_model_and_oversized_files_are_refused() {
    let live = start(
        ScriptedModel::new([Turn::text("I see the image.")]),
        Access::loopback,
    )
    .await;
    scenario(&live, "attach").await;
    let requests = live.model.requests();
    assert_eq!(requests.len(), 1);
    let attachments = requests[0]
        .messages
        .iter()
        .find_map(|m| match m {
            ai_core::Message::User { attachments, .. } => Some(attachments.clone()),
            _ => None,
        })
        .expect("a user message");
    let kinds: Vec<Value> = attachments
        .iter()
        .map(|a| serde_json::to_value(a).unwrap())
        .collect();
    assert!(
        kinds
            .iter()
            .any(|a| a["type"] == "image" && a["media_type"] == "image/png"),
        "{kinds:?}"
    );
    assert!(kinds.iter().any(|a| a["type"] == "text"), "{kinds:?}");
}

/// A long argument streams into its card as it arrives (collapsed), and the
/// approval card then shows all of it, with the effect in words.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_arguments_stream_into_the_card_and_approval_shows_them_whole() {
    let long = "0123456789".repeat(400);
    let live = start(
        ScriptedModel::new([
            Turn::new()
                .tool_call("w1", "app__write", json!({"key": long, "value": 1}))
                .arg_chunk_size(40)
                .delay_between(Duration::from_millis(20)),
            Turn::text("Not written."),
        ]),
        Access::loopback,
    )
    .await;
    scenario(&live, "tool-stream").await;
    assert_eq!(live.writes.load(Ordering::SeqCst), 0, "denied");
}

/// axe-core finds no serious or critical violation in any state of the page,
/// in both colour schemes; the page works from the keyboard alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_passes_axe_and_works_from_the_keyboard() {
    let live = start(
        ScriptedModel::new([
            Turn::new().tool_call("e1", "app__echo", json!({"text": "hello from the page"})),
            Turn::text("I echoed your text."),
            Turn::new().tool_call("w1", "app__write", json!({"key": "k", "value": 1})),
            Turn::text("Written."),
            Turn::new().tool_call("e2", "app__echo", json!({"text": "typed"})),
            Turn::text("Done from the keyboard."),
            Turn::new().tool_call("w2", "app__write", json!({"key": "k2", "value": 2})),
            Turn::text("Written again."),
        ]),
        Access::loopback,
    )
    .await;
    let result = scenario(&live, "a11y").await;
    println!("axe: {}", result["steps"]);
}

/// Screenshots of a finished exchange at desktop and phone sizes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn screenshots_at_desktop_and_phone_sizes() {
    let (live, _dir) = crate::support::start_stored(ScriptedModel::new([
        Turn::new().tool_call("e1", "app__echo", json!({"text": "hello from the page"})),
        Turn::text(
            "I echoed your text.\n\n| tool | result |\n|---|---|\n| app__echo | hello |\n\n- one\n- two\n",
        )
        .usage(120, 14),
    ]))
    .await;
    let result = scenario(&live, "screens").await;
    println!("screens: {}", result["shots"]);
}
