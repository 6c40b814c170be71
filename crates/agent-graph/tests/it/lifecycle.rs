//! Cancellation and teardown: cancelling, dropping the events, dropping the handle.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use agent_graph::{
    run,
    run::{RunDeps, RunError},
};
use agent_testing::{ScriptedModel, Turn};
use ai_core::{
    CancellationToken, CompletionPort, ToolCatalog, ToolPolicy, ToolRunner,
    completion::{CompletionError, CompletionRequest, CompletionStream},
    tool::ToolErrorCode,
};
use futures::StreamExt;
use serde_json::json;

use crate::support::{Kit, check_invariants, labels, request, results, run_to_end, strs};

#[tokio::test(start_paused = true)]
async fn cancelling_while_a_tool_runs_stops_the_tool_and_ends_the_run() {
    let kit = Kit::new();
    let model = ScriptedModel::new([
        Turn::new().tool_call("w1", "core__wait", json!({})),
        Turn::text("never reached"),
    ]);
    let handle = run(request(), kit.deps(&model));
    let cancel = handle.cancel_token();
    let probe = Arc::clone(&kit.wait);
    tokio::spawn(async move {
        if !probe.has_started.load(Ordering::SeqCst) {
            probe.started.notified().await;
        }
        cancel.cancel();
    });
    let (events, outcome) = handle.into_parts();
    let events: Vec<_> = events.collect().await;
    let outcome = outcome.await;
    check_invariants(&events, &outcome);
    assert_eq!(
        labels(&events),
        strs(&[
            "tool_call_start:core__wait",
            "tool_call_result:core__wait:cancelled",
            "error:cancelled",
            "done",
        ])
    );
    assert_eq!(results(&events)[0].2, Some(ToolErrorCode::Cancelled));
    assert_eq!(outcome.unwrap_err(), RunError::Cancelled);
    assert_eq!(model.calls(), 1, "no model call after the cancel");
    // The tool's token fired: its future was dropped with the token cancelled, and
    // work it handed the token to saw it fire.
    assert!(kit.wait.dropped_cancelled.load(Ordering::SeqCst));
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
    assert!(kit.wait.watcher_saw_cancel.load(Ordering::SeqCst));
}

#[tokio::test(start_paused = true)]
async fn cancelling_while_the_model_streams_ends_the_run() {
    let kit = Kit::new();
    let model = ScriptedModel::new([Turn::pending()]);
    let handle = run(request(), kit.deps(&model));
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(model.calls(), 1);
    handle.cancel();
    let (events, outcome) = handle.into_parts();
    let events: Vec<_> = events.collect().await;
    let outcome = outcome.await;
    check_invariants(&events, &outcome);
    assert_eq!(labels(&events), strs(&["error:cancelled", "done"]));
    assert_eq!(outcome.unwrap_err().code(), "cancelled");
}

fn current_thread_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap()
}

/// Lets the runtime settle, then returns how many tasks are still alive.
fn settle(runtime: &tokio::runtime::Runtime) -> usize {
    for _ in 0..50 {
        runtime.block_on(async {
            for _ in 0..10 {
                tokio::task::yield_now().await;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        });
        if runtime.metrics().num_alive_tasks() == 0 {
            break;
        }
    }
    runtime.metrics().num_alive_tasks()
}

#[test]
fn dropping_the_event_stream_early_does_not_stop_the_run_nor_leak_tasks() {
    let runtime = current_thread_runtime();
    let kit = Kit::new();
    let model = ScriptedModel::new([
        Turn::text("Let me look.").tool_call("e1", "core__echo", json!({"text": "a"})),
        Turn::text("Here it is."),
    ]);
    let outcome = runtime.block_on(async {
        let (mut events, outcome) = run(request(), kit.deps(&model)).into_parts();
        let first = events.next().await.unwrap();
        assert_eq!(crate::support::label(&first), "text_delta");
        drop(events);
        outcome.await
    });
    let output = outcome.unwrap();
    assert_eq!(output.content, "Here it is.");
    assert_eq!(model.calls(), 2);
    assert_eq!(settle(&runtime), 0, "no task left running");
}

/// A model whose stream never yields; it records that it was polled, and whether its
/// token was cancelled when the stream was dropped.
#[derive(Default)]
struct ParkedModel {
    calls: AtomicUsize,
    dropped: Arc<AtomicBool>,
    cancelled_at_drop: Arc<AtomicBool>,
}

struct StreamWitness {
    cancel: CancellationToken,
    dropped: Arc<AtomicBool>,
    cancelled_at_drop: Arc<AtomicBool>,
}

impl Drop for StreamWitness {
    fn drop(&mut self) {
        self.cancelled_at_drop
            .store(self.cancel.is_cancelled(), Ordering::SeqCst);
        self.dropped.store(true, Ordering::SeqCst);
    }
}

impl CompletionPort for ParkedModel {
    fn complete(&self, _request: CompletionRequest, cancel: CancellationToken) -> CompletionStream {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let witness = StreamWitness {
            cancel: cancel.clone(),
            dropped: Arc::clone(&self.dropped),
            cancelled_at_drop: Arc::clone(&self.cancelled_at_drop),
        };
        futures::stream::once(async move {
            let _witness = witness;
            cancel.cancelled().await;
            Err(CompletionError::Cancelled)
        })
        .boxed()
    }
}

fn parked_deps(model: &Arc<ParkedModel>) -> RunDeps {
    RunDeps {
        model: Arc::clone(model) as Arc<dyn CompletionPort>,
        runner: Arc::new(ToolRunner::new(Vec::new(), ToolPolicy::default()).unwrap()),
        catalog: Arc::new(ToolCatalog::empty()),
    }
}

#[test]
fn dropping_the_handle_cancels_the_model_call_and_ends_the_task() {
    let runtime = current_thread_runtime();
    let model = Arc::new(ParkedModel::default());
    let handle = runtime.block_on(async {
        let handle = run(request(), parked_deps(&model));
        tokio::time::sleep(Duration::from_millis(5)).await;
        handle
    });
    assert_eq!(model.calls.load(Ordering::SeqCst), 1);
    assert!(!model.dropped.load(Ordering::SeqCst), "parked on the model");
    assert_eq!(runtime.metrics().num_alive_tasks(), 1);
    drop(handle);
    assert_eq!(settle(&runtime), 0, "the run task ended");
    assert!(
        model.dropped.load(Ordering::SeqCst),
        "the model stream was dropped"
    );
    assert!(
        model.cancelled_at_drop.load(Ordering::SeqCst),
        "the model call's token fired"
    );
}

#[test]
fn dropping_only_the_outcome_cancels_the_run_and_the_events_still_end_with_done() {
    let runtime = current_thread_runtime();
    let model = Arc::new(ParkedModel::default());
    let events = runtime.block_on(async {
        let (events, outcome) = run(request(), parked_deps(&model)).into_parts();
        tokio::time::sleep(Duration::from_millis(5)).await;
        drop(outcome);
        events.collect::<Vec<_>>().await
    });
    assert_eq!(labels(&events), strs(&["error:cancelled", "done"]));
    assert!(model.cancelled_at_drop.load(Ordering::SeqCst));
    assert_eq!(settle(&runtime), 0);
}

#[tokio::test(start_paused = true)]
async fn many_runs_share_deps_without_interfering() {
    let kit = Kit::new();
    let model = ScriptedModel::repeating(Turn::text("same answer")).without_request_log();
    let deps = kit.deps(&model);
    let runs = (0..20).map(|_| run_to_end(request(), deps.clone()));
    for (events, outcome) in futures::future::join_all(runs).await {
        assert_eq!(labels(&events).last().unwrap(), "done");
        assert_eq!(outcome.unwrap().content, "same answer");
    }
    assert_eq!(model.calls(), 20);
    assert!(model.requests().is_empty());
}

/// Waits (on real time, at most a few seconds) for `probe`'s tool to start.
async fn started(probe: &crate::support::WaitProbe) {
    if !probe.has_started.load(Ordering::SeqCst) {
        tokio::time::timeout(Duration::from_secs(5), probe.started.notified())
            .await
            .expect("the tool started");
    }
}

#[test]
fn dropping_the_event_stream_mid_tool_cancels_the_run_and_the_tool() {
    let runtime = current_thread_runtime();
    let kit = Kit::new();
    let model = ScriptedModel::new([
        Turn::new().tool_call("w1", "core__wait", json!({})),
        Turn::text("never reached"),
    ]);
    runtime.block_on(async {
        // The handle is the event stream: dropping it mid-tool cancels the run.
        let handle = run(request(), kit.deps(&model));
        started(&kit.wait).await;
        drop(handle);
    });
    assert_eq!(settle(&runtime), 0, "no task left running");
    assert_eq!(model.calls(), 1, "no model call after the drop");
    // The tool's token fired: its future was dropped cancelled, and work it handed
    // the token to saw it fire.
    assert!(kit.wait.dropped_cancelled.load(Ordering::SeqCst));
    assert!(kit.wait.watcher_saw_cancel.load(Ordering::SeqCst));

    // The same through `into_events`, with the outcome observed through the split.
    let kit = Kit::new();
    let model = ScriptedModel::new([
        Turn::new().tool_call("w2", "core__wait", json!({})),
        Turn::text("never reached"),
    ]);
    runtime.block_on(async {
        let events = run(request(), kit.deps(&model)).into_events();
        started(&kit.wait).await;
        drop(events);
    });
    assert_eq!(settle(&runtime), 0);
    assert_eq!(model.calls(), 1);
    assert!(kit.wait.dropped_cancelled.load(Ordering::SeqCst));
}

#[test]
fn the_outcome_alone_keeps_the_run_and_dropping_it_cancels() {
    let runtime = current_thread_runtime();
    let kit = Kit::new();
    let model = ScriptedModel::new([
        Turn::new().tool_call("s1", "core__slow", json!({"ms": 20})),
        Turn::text("done"),
    ]);
    // Events discarded, run kept: the outcome resolves with the answer.
    let output = runtime.block_on(async { run(request(), kit.deps(&model)).into_outcome().await });
    assert_eq!(output.unwrap().content, "done");
    assert_eq!(kit.slow.calls(), 1);
    assert_eq!(model.calls(), 2);

    // Dropping that outcome mid-tool cancels the run and the tool.
    let model = ScriptedModel::new([
        Turn::new().tool_call("w1", "core__wait", json!({})),
        Turn::text("never reached"),
    ]);
    runtime.block_on(async {
        let outcome = run(request(), kit.deps(&model)).into_outcome();
        started(&kit.wait).await;
        drop(outcome);
    });
    assert_eq!(settle(&runtime), 0);
    assert_eq!(model.calls(), 1);
    assert!(kit.wait.dropped_cancelled.load(Ordering::SeqCst));
}

#[test]
fn events_taken_out_of_the_handle_stream_the_whole_run() {
    let runtime = current_thread_runtime();
    let kit = Kit::new();
    let model = ScriptedModel::new([
        Turn::text("Let me look.").tool_call("e1", "core__echo", json!({"text": "a"})),
        Turn::text("Here it is."),
    ]);
    let events = runtime.block_on(async {
        // The outcome is discarded right away: that alone does not cancel the run.
        let events = run(request(), kit.deps(&model)).into_events();
        events.collect::<Vec<_>>().await
    });
    assert_eq!(
        labels(&events)[labels(&events).len() - 2..],
        strs(&["assistant_final", "done"])
    );
    assert_eq!(model.calls(), 2);
    assert_eq!(settle(&runtime), 0);
}

#[test]
fn a_detached_run_finishes_although_its_handle_is_dropped() {
    let runtime = current_thread_runtime();
    let kit = Kit::new();
    let model = ScriptedModel::new([
        Turn::new().tool_call("s1", "core__slow", json!({"ms": 20})),
        Turn::text("done"),
    ]);
    runtime.block_on(async {
        drop(run(request(), kit.deps(&model)).detach());
    });
    assert_eq!(settle(&runtime), 0, "the run ended on its own");
    assert_eq!(kit.slow.calls(), 1, "the tool ran");
    assert_eq!(model.calls(), 2, "the model saw its result");

    // A detached event stream alone: dropping it leaves the run to finish.
    let model = ScriptedModel::new([
        Turn::new().tool_call("s2", "core__slow", json!({"ms": 20})),
        Turn::text("done"),
    ]);
    let output = runtime.block_on(async {
        let (events, outcome) = run(request(), kit.deps(&model)).detach().into_parts();
        drop(events);
        outcome.await
    });
    assert_eq!(output.unwrap().content, "done");
    assert_eq!(kit.slow.calls(), 2);
    assert_eq!(settle(&runtime), 0);
}

#[test]
fn a_detached_run_still_stops_on_cancel() {
    let runtime = current_thread_runtime();
    let kit = Kit::new();
    let model = ScriptedModel::new([Turn::new().tool_call("w1", "core__wait", json!({}))]);
    let outcome = runtime.block_on(async {
        let handle = run(request(), kit.deps(&model)).detach();
        let cancel = handle.cancel_token();
        let (events, outcome) = handle.into_parts();
        drop(events);
        started(&kit.wait).await;
        cancel.cancel();
        outcome.await
    });
    assert_eq!(outcome.unwrap_err(), RunError::Cancelled);
    assert_eq!(settle(&runtime), 0);
}
