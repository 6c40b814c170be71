//! Round trip of one MCP `tools/call` over stdio, through the whole tool pipeline,
//! next to the official Python client calling the same server.
//!
//! What is measured, in one run:
//! 1. Criterion group `mcp_tools_call_stdio`, benchmark `ours/tool_runner_exec`: one
//!    `echo` call with `{"text":"hello"}` through `ToolRunner::exec` (argument
//!    validation, policy, the rmcp request to the server and its answer, output
//!    bounding, redaction, events to a no-op sink). The server is
//!    `tests/servers/testserver.py` (official Python `mcp` SDK) started over stdio by
//!    `McpSources::start` as server `t`, with `mcp__t__*` allowed and no approvals.
//!    Each iteration is one `runtime.block_on` on a multi-thread tokio runtime
//!    (criterion's async support is not enabled in this workspace), so the
//!    estimate includes entering `block_on` once per call.
//! 2. A side-by-side table `client  mean_us  p50_us  p99_us`: ours from a separate
//!    loop of 2000 timed calls after 200 untimed ones, each call timed inside one
//!    async task (as the Python client does), and the Python client from
//!    `tests/servers/bench_client.py --calls 2000 --warmup 200` run once with the
//!    same interpreter (it spawns its own testserver.py over stdio). Same
//!    statistics as bench_client.py: the mean, and nearest-rank percentiles
//!    (rank = max(1, ceil(p/100 * n))) of per-call microseconds, rounded to 0.1.
//! 3. `McpSources::shutdown`, so no server process outlives the benchmark.
//!
//! Needs the test venv (`cargo xtask test-env`, or `$AGENT_TEST_PYTHON` pointing at a
//! Python with `tests/servers/requirements.txt`); without it the benchmark exits
//! non-zero saying so. Both clients run on the same machine as the server, so the
//! figures move with machine load: compare them within one run only.
//!
//! Run with `cargo bench -p toolwright-tools-mcp --bench roundtrip`.

// Benchmark setup may panic with a clear message: there is no caller to recover.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

use ai_core::{
    AiEvent, CancellationToken, RunContext, ToolCatalog, ToolEffect, ToolPolicy, ToolRunner,
    event::EventSink,
    runner::{CallScope, ToolCall},
};
use criterion::Criterion;
use serde_json::Value;
use tools_mcp::{McpSources, Pins, ServerConfig};

const SERVER_ID: &str = "t";
const TOOL: &str = "mcp__t__echo";
const ARGS: &str = r#"{"text":"hello"}"#;
const CALLS: usize = 2000;
const WARMUP: usize = 200;

/// Drops every event (the cheapest sink the runner can be given).
struct NoopSink;

impl EventSink for NoopSink {
    fn emit(&self, event: AiEvent) {
        black_box(event);
    }
}

/// The Python with the test servers' requirements: `$AGENT_TEST_PYTHON`, else the
/// workspace's `target/test-venv` (as the integration tests find it).
fn python() -> Result<PathBuf, String> {
    let (path, origin) = match std::env::var_os("AGENT_TEST_PYTHON") {
        Some(path) => (PathBuf::from(path), "$AGENT_TEST_PYTHON"),
        None => (
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/test-venv/bin/python"),
            "the test venv",
        ),
    };
    if path.exists() {
        Ok(path)
    } else {
        Err(format!(
            "roundtrip bench: no Python at {} ({origin}). The MCP test server needs a venv \
             with crates/tools-mcp/tests/servers/requirements.txt: run `cargo xtask test-env`, \
             or set AGENT_TEST_PYTHON to such a Python.",
            path.display()
        ))
    }
}

fn script(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/servers")
        .join(name)
        .display()
        .to_string()
}

/// Per-call figures, as bench_client.py computes them.
struct Stats {
    mean_us: f64,
    p50_us: f64,
    p99_us: f64,
}

impl Stats {
    fn of(mut samples_us: Vec<f64>) -> Self {
        assert!(!samples_us.is_empty(), "no samples");
        samples_us.sort_by(f64::total_cmp);
        let round = |v: f64| (v * 10.0).round() / 10.0;
        let percentile = |p: f64| {
            // Nearest rank: max(1, ceil(p / 100 * n)), 1-based.
            let rank = ((p / 100.0 * samples_us.len() as f64).ceil() as usize).max(1);
            samples_us[rank - 1]
        };
        Self {
            mean_us: round(samples_us.iter().sum::<f64>() / samples_us.len() as f64),
            p50_us: round(percentile(50.0)),
            p99_us: round(percentile(99.0)),
        }
    }

    fn from_json(line: &Value) -> Option<Self> {
        Some(Self {
            mean_us: line.get("mean_us")?.as_f64()?,
            p50_us: line.get("p50_us")?.as_f64()?,
            p99_us: line.get("p99_us")?.as_f64()?,
        })
    }
}

/// What the runner needs for a call, built once.
struct Fixture {
    runner: ToolRunner,
    run: RunContext,
    catalog: ToolCatalog,
    cancel: CancellationToken,
    sink: NoopSink,
}

impl Fixture {
    async fn call(&self) -> ai_core::runner::ToolExecution {
        self.runner
            .exec(
                &self.run,
                &self.catalog,
                ToolCall::new("call-1", TOOL, black_box(ARGS)),
                &self.cancel,
                &self.sink,
                &CallScope::default(),
            )
            .await
    }

    /// Checks that a call echoes, so no figure below measures a failure.
    async fn check(&self) -> Result<(), String> {
        let execution = self.call().await;
        if execution.result.ok && execution.model_content == "hello" {
            Ok(())
        } else {
            Err(format!("the echo call did not echo: {execution:?}"))
        }
    }
}

async fn start(python: &Path) -> McpSources {
    let config = ServerConfig {
        command: Some(python.display().to_string()),
        args: vec![script("testserver.py")],
        // A cold Python start on a busy machine takes seconds.
        startup_timeout_s: Some(60),
        ..Default::default()
    };
    let configs = BTreeMap::from([(SERVER_ID.to_owned(), config)]);
    let host = tools_mcp::ServerHost {
        broker: None,
        inherited_env: tools_mcp::inherited_env(std::env::vars_os()),
    };
    McpSources::start(&configs, &Pins::default(), host)
        .await
        .expect("the server config is valid")
}

fn fixture(sources: &McpSources) -> Result<Fixture, String> {
    let policy = ToolPolicy::allowing(["mcp__t__*"]).with_approval_for(Vec::<ToolEffect>::new());
    let runner = ToolRunner::new(sources.tools(), policy).expect("the MCP tools form a catalog");
    let run = RunContext::new("run-bench", "trace-bench");
    let catalog = runner.catalog(&run);
    if catalog.get(TOOL).is_none() {
        let warnings: Vec<String> = sources.warnings().iter().map(|w| w.to_string()).collect();
        return Err(format!(
            "{TOOL} is not offered; server warnings: {warnings:?}"
        ));
    }
    Ok(Fixture {
        runner,
        run,
        catalog,
        cancel: CancellationToken::new(),
        sink: NoopSink,
    })
}

fn bench_criterion(c: &mut Criterion, rt: &tokio::runtime::Runtime, fixture: &Fixture) {
    let mut group = c.benchmark_group("mcp_tools_call_stdio");
    group.bench_function("ours/tool_runner_exec", |b| {
        b.iter(|| black_box(rt.block_on(fixture.call())));
    });
    group.finish();
}

/// Our per-call figures: `WARMUP` untimed calls, then `CALLS` timed ones, in one task.
fn measure_ours(rt: &tokio::runtime::Runtime, fixture: &Fixture) -> Result<Stats, String> {
    rt.block_on(async {
        for _ in 0..WARMUP {
            black_box(fixture.call().await);
        }
        let mut samples_us = Vec::with_capacity(CALLS);
        let mut failures = 0_usize;
        for _ in 0..CALLS {
            let started = Instant::now();
            let execution = fixture.call().await;
            samples_us.push(started.elapsed().as_nanos() as f64 / 1000.0);
            if !execution.result.ok {
                failures += 1;
            }
        }
        if failures > 0 {
            return Err(format!("{failures} of {CALLS} timed calls failed"));
        }
        Ok(Stats::of(samples_us))
    })
}

/// Runs bench_client.py once; its JSON line and figures.
fn measure_python(python: &Path) -> Result<(String, Stats), String> {
    let output = Command::new(python)
        .arg(script("bench_client.py"))
        .args([
            "--calls",
            &CALLS.to_string(),
            "--warmup",
            &WARMUP.to_string(),
        ])
        .output()
        .map_err(|e| {
            format!(
                "could not run bench_client.py with {}: {e}",
                python.display()
            )
        })?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(format!(
            "bench_client.py failed ({}): {stdout}{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let line = stdout
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .ok_or("bench_client.py printed nothing")?
        .trim()
        .to_owned();
    let stats = serde_json::from_str::<Value>(&line)
        .ok()
        .as_ref()
        .and_then(Stats::from_json)
        .ok_or_else(|| format!("bench_client.py printed an unexpected line: {line}"))?;
    Ok((line, stats))
}

fn compare(rt: &tokio::runtime::Runtime, fixture: &Fixture, python: &Path) -> Result<(), String> {
    let ours = measure_ours(rt, fixture)?;
    let (python_line, theirs) = measure_python(python)?;
    println!();
    println!(
        r#"{{"client":"tools-mcp","calls":{CALLS},"mean_us":{:.1},"p50_us":{:.1},"p99_us":{:.1}}}"#,
        ours.mean_us, ours.p50_us, ours.p99_us
    );
    println!("{python_line}");
    println!();
    println!("echo round trip over stdio, {CALLS} sequential calls after {WARMUP} warmup calls");
    println!("client         mean_us    p50_us    p99_us");
    for (client, stats) in [("tools-mcp", &ours), ("python-mcp", &theirs)] {
        println!(
            "{client:<12}{:>10.1}{:>10.1}{:>10.1}",
            stats.mean_us, stats.p50_us, stats.p99_us
        );
    }
    Ok(())
}

fn main() -> ExitCode {
    let python = match python() {
        Ok(python) => python,
        Err(message) => {
            eprintln!("{message}");
            return ExitCode::FAILURE;
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let sources = rt.block_on(start(&python));
    let mut criterion = Criterion::default().configure_from_args();

    let outcome = fixture(&sources).and_then(|fixture| {
        rt.block_on(fixture.check())?;
        bench_criterion(&mut criterion, &rt, &fixture);
        compare(&rt, &fixture, &python)
    });

    rt.block_on(sources.shutdown());
    criterion.final_summary();
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("roundtrip bench: {message}");
            ExitCode::FAILURE
        }
    }
}
