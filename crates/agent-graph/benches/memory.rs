//! Memory per parked run: starts 10,000 runs whose model call never answers
//! (`Turn::pending()`), waits until every run is parked on it, and prints the growth
//! of the process RSS (from `/proc/self/statm`) divided by the number of runs. Then
//! cancels every run and checks each ends cancelled. Target: <= 32 KiB per run.
//!
//! Criterion cannot measure memory, so this is a plain `main` (harness = false).
//! Without `--bench` (e.g. under `cargo test --benches`) it runs a small smoke size.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;

use agent_graph::{Agent, run::RunError};
use agent_testing::{ScriptedModel, Turn, echo_tool};
use ai_core::{Message, RunContext};

/// Resident set size in bytes.
fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let resident: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    resident * 4096
}

fn start(agent: &Agent, i: usize) -> agent_graph::RunHandle {
    agent.run_with(
        RunContext::new(format!("run-{i}"), format!("trace-{i}")),
        vec![Message::user("What time is it?")],
    )
}

async fn wait_until_parked(model: &ScriptedModel, expected: usize) {
    while model.calls() < expected {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    // One more round so every task is back to waiting on its model stream.
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let runs: usize = if full { 10_000 } else { 200 };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    runtime.block_on(async {
        let model = ScriptedModel::repeating(Turn::pending()).without_request_log();
        let agent = Agent::builder(model.clone())
            .system("You are a helpful assistant.")
            .tool(echo_tool())
            .build()
            .unwrap();

        // Warm up allocator pools and lazy statics with a first batch, then measure
        // a second batch on top of it.
        let warm: Vec<_> = (0..runs / 10).map(|i| start(&agent, i)).collect();
        wait_until_parked(&model, runs / 10).await;
        for handle in &warm {
            handle.cancel();
        }
        for handle in warm {
            assert_eq!(handle.into_outcome().await, Err(RunError::Cancelled));
        }
        let parked_before = model.calls();

        let before = rss_bytes();
        let handles: Vec<_> = (0..runs).map(|i| start(&agent, i)).collect();
        wait_until_parked(&model, parked_before + runs).await;
        let after = rss_bytes();
        let per_run = after.saturating_sub(before) as f64 / runs as f64;
        println!(
            "memory/parked_run: {runs} runs parked, RSS {:.1} MiB -> {:.1} MiB, {:.0} bytes ({:.2} KiB) per run (target <= 32 KiB)",
            before as f64 / 1048576.0,
            after as f64 / 1048576.0,
            per_run,
            per_run / 1024.0
        );

        for handle in &handles {
            handle.cancel();
        }
        let mut cancelled = 0;
        for handle in handles {
            if handle.into_outcome().await == Err(RunError::Cancelled) {
                cancelled += 1;
            }
        }
        assert_eq!(cancelled, runs, "every parked run ended cancelled");
        println!("memory/parked_run: all {runs} runs cancelled and finished");
    });
}
