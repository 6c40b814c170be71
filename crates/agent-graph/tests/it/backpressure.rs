//! Memory under a stalled consumer: the run never waits for its readers, merges the
//! text deltas a reader is behind on, and drops nothing else; a fan-out's lossless
//! subscribers get every event, its lossy ones mark each gap where it happened.

use agent_graph::{
    fanout::{Fanout, SubscriberItem},
    run,
};
use agent_testing::{ScriptedModel, Turn};
use ai_core::{AiEvent, event::AiEventKind};
use futures::StreamExt;
use serde_json::json;

use crate::support::{
    Kit, assert_consistent, check_invariants, echo_round_trip, label, labels, request,
    streamed_text,
};

/// `words` words of text: `w0 w1 w2 ...`, streamed as one delta per word.
fn words(from: usize, words: usize) -> String {
    (from..from + words).map(|i| format!("w{i} ")).collect()
}

/// A text turn with a tool call, then a text answer: `2 * n` text deltas in all.
fn chatty(n: usize) -> ScriptedModel {
    ScriptedModel::new([
        Turn::text(words(0, n))
            .tool_call("e1", "core__echo", json!({"text": "x"}))
            .usage(10, 5),
        Turn::text(words(n, n)).usage(20, 5),
    ])
    .without_request_log()
}

/// Runs the chatty model while nobody reads the events; returns how many events were
/// queued once the run ended, how many deltas were merged, and then all the events.
async fn stalled_run(n: usize) -> (usize, u64, Vec<AiEvent>) {
    let kit = Kit::new();
    let (events, outcome) = run(request(), kit.deps(&chatty(n))).into_parts();
    // Nobody reads the events until the run is over.
    let output = outcome.await;
    let pending = events.pending();
    let coalesced = events.coalesced();
    let events: Vec<AiEvent> = events.collect().await;
    check_invariants(&events, &output);
    let output = output.unwrap();
    assert_eq!(output.content, words(n, n));
    (pending, coalesced, events)
}

#[tokio::test(start_paused = true)]
async fn a_stalled_consumer_holds_a_bounded_queue_and_loses_no_text() {
    let n = 50_000;
    let (pending, coalesced, events) = stalled_run(n).await;
    // 100,000 text deltas, a handful of other events: the queue held at most a
    // hundred events, because deltas past a small slack were merged.
    assert!(pending <= 100, "{pending} events queued");
    assert_eq!(pending, events.len());
    assert!(coalesced as usize >= 2 * n - 200, "{coalesced} merged");
    assert_eq!(streamed_text(&events), words(0, 2 * n));
    assert_eq!(labels(&events), echo_round_trip());
    // The bound does not grow with the stream: ten times fewer deltas, same queue.
    let (small, _, _) = stalled_run(n / 10).await;
    assert_eq!(small, pending);
}

#[tokio::test(start_paused = true)]
async fn a_consumer_that_keeps_up_gets_every_delta_as_it_came() {
    let kit = Kit::new();
    let model = ScriptedModel::new([
        Turn::text(words(0, 500)).delay_between(std::time::Duration::from_millis(1))
    ]);
    let handle = run(request(), kit.deps(&model));
    let events: Vec<AiEvent> = handle.collect().await;
    let deltas = events
        .iter()
        .filter(|e| matches!(e.kind, AiEventKind::TextDelta { .. }))
        .count();
    assert_eq!(deltas, 500);
    assert_eq!(streamed_text(&events), words(0, 500));
}

#[tokio::test(start_paused = true)]
async fn fanout_lossless_subscribers_get_everything_and_lossy_ones_mark_gaps_in_place() {
    let n = 20_000;
    let kit = Kit::new();
    let (events, outcome) = run(request(), kit.deps(&chatty(n))).into_parts();
    let mut fanout = Fanout::new();
    let mut billing = fanout.subscribe_lossless();
    let mut ui = fanout.subscribe(8);
    // Nobody reads until the whole run was published. (What the fan-out gets is
    // recorded: the run's own stream already merges deltas its reader is behind on.)
    let mut published: Vec<AiEvent> = Vec::new();
    fanout
        .pump(events.inspect(|event| published.push(event.clone())))
        .await;
    let output = outcome.await.unwrap();
    assert!(billing.pending() <= 100, "{} queued", billing.pending());
    assert!(ui.pending() <= 8 + 3, "{} queued", ui.pending());

    let mut history = Vec::new();
    while let Some(item) = billing.recv().await {
        match item {
            SubscriberItem::Event(event) => history.push(event),
            SubscriberItem::Lagged(n) => panic!("a lossless subscriber lagged by {n}"),
        }
    }
    check_invariants(&history, &Ok(output.clone()));
    assert_eq!(streamed_text(&history), words(0, 2 * n));
    let usage: Vec<&AiEvent> = history
        .iter()
        .filter(|e| matches!(e.kind, AiEventKind::UsageReport { .. }))
        .collect();
    assert_eq!(usage.len(), output.usage.len());
    assert_eq!(labels(&history), echo_round_trip());

    let mut shown = Vec::new();
    while let Some(item) = ui.recv().await {
        shown.push(item);
    }
    // The UI saw the start of the text, one gap, and how the run ended.
    let kinds: Vec<String> = shown
        .iter()
        .map(|item| match item {
            SubscriberItem::Event(e) => label(e),
            SubscriberItem::Lagged(_) => "lagged".to_owned(),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            vec!["text_delta"; 8],
            vec!["lagged", "assistant_final", "done"]
        ]
        .concat()
    );
    // Each event the UI got is the next published one (or several published deltas
    // merged), and the gap stands for exactly the events published in between.
    assert_eq!(streamed_text(&published), words(0, 2 * n));
    assert_consistent(&shown, &published);
}
