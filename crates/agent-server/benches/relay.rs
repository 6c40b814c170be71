//! Relay cost of `agent serve`'s chat endpoint against the AI SDK on Node: text
//! deltas relayed per CPU-second, memory per open stream, and the latency each
//! relay adds to a delta, with 100 and 1,000 concurrent clients.
//!
//! Run: `cargo bench -p toolwright-agent-server --bench relay` (options after `--`, below).
//! Needs `node` (>= 20) and `npm ci --prefix tests/js` for the Node rows; without
//! them those rows are skipped, with the reason printed.
//!
//! # What runs
//!
//! Three processes per measured row, started afresh for every row so each memory
//! baseline is clean:
//!
//! - **the server under test**, alone in its process so its CPU and memory are its
//!   own:
//!   - `agent-server`: this binary re-run as `relay --serve-agent`: a
//!     [`ChatService`] (no tools, default policy and limits, `max_streams` 4096)
//!     served by [`agent_server::serve`] on 127.0.0.1 behind
//!     [`Access::loopback`], on a multi-thread tokio runtime with one worker per
//!     core and a `warn` log filter, as `agent serve` runs it. Its model is an
//!     in-process [`CompletionPort`] that streams K text deltas per request, the
//!     i-th due at start + i·I (tokio timers), then the final turn with usage.
//!   - `agent-server-store`: the same as `relay --serve-agent-store`, with every
//!     run recorded in a run store (a SQLite file in a new temporary folder), as
//!     `agent serve` records by default: the thread, the run's row and status,
//!     its event log (deltas merged per 250 ms) and usage.
//!   - `agent-server-otel`: the same as `relay --serve-agent-otel <url>`, with
//!     span and metric export on (the `agent-telemetry` layer beside the log, as
//!     `agent serve` installs it) towards a collector that never answers: a
//!     listener in the load generator that accepts and reads every export
//!     request and never writes a byte back, so every export waits out its
//!     timeout and the bounded queue drops (and counts) what does not fit.
//!   - `node-ai7`: `node tests/js/bench-node.mjs`: `streamText({ model, messages:
//!     await convertToModelMessages(messages) }).toUIMessageStreamResponse()` of
//!     `ai` 7.0.173, the Web `Response` written to `node:http` chunk by chunk (what
//!     a Node adapter does). Its model is `MockLanguageModelV4` from `ai/test` with
//!     a `ReadableStream` paced the same way (`setTimeout`).
//!   - `node-ai7-pipe`: the same with the SDK's own Node path,
//!     `result.pipeUIMessageStreamToResponse(res)`.
//!   - `floor`: `relay --serve-floor`, the least a server can do for the same
//!     load, as a yardstick for the others: on the same tokio runtime, one
//!     task per connection reads the request and writes the same chunked
//!     bytes (head, K stamped `text-delta` frames paced by a timer, `finish`,
//!     `[DONE]`), with no run, no encoder, no HTTP library. Its CPU per delta
//!     is about what the kernel and the runtime cost any server on this
//!     machine, and its tail what the machine adds to any server's.
//! - **the load generator**, this process: C clients, started evenly over a ramp
//!   (default 1 s, so the listen queue never overflows), each `POST /api/chat`
//!   with a `useChat` body over its own raw HTTP/1.1 connection, de-chunking and
//!   splitting the SSE by hand and reading every `text-delta`.
//!
//! Every delta's text is `t<CLOCK_MONOTONIC ns, 20 digits> ` (22 bytes, so both
//! servers carry the same bytes), stamped when the model yields it (Rust:
//! `clock_gettime(CLOCK_MONOTONIC)`; Node: `process.hrtime.bigint()`, which is
//! libuv's `CLOCK_MONOTONIC`; both servers' start-up lines carry a clock reading
//! that is checked against this process's clock). **Added latency** of a delta =
//! the monotonic time the client's `read` returned the bytes holding it − its
//! stamp: model → server pipeline → encoder → socket → client.
//!
//! # Figures
//!
//! Before each row: a warm-up of min(C, 50) full streams (JIT, allocator pools,
//! connection paths), then 500 ms of quiet. Then:
//!
//! - **deltas**: `text-delta`s the clients received (C·K expected);
//! - **CPU s**: user + system time of the server process (all its threads, from
//!   `/proc/<pid>/stat`, in clock ticks) from just before the first client starts
//!   to after the last one ends;
//! - **deltas/CPU-s** = deltas ÷ CPU s;
//! - **µs/delta user+kernel**: the server's CPU time per delta, split into its
//!   user and system (kernel) time (utime and stime of the same reading);
//! - **KiB/stream** = (the highest `VmRSS` sampled, every 20 ms, while all C
//!   streams were open at once − `VmRSS` after the warm-up) ÷ C; the peak over the
//!   whole row is also printed;
//! - **p50/p90/p99/p99.9/max** added latency per delta over all the row's deltas;
//!   the deltas slower than 2 ms are also counted per 100 ms of the row (by
//!   their stamp; the ten busiest windows printed, all in the JSON), to show
//!   when the tail happened;
//! - **busy**: the server's CPU time per second of wall time while all C
//!   streams were open (sampled with the memory; `n/a` when that lasted under
//!   0.5 s): with `--pin`, how busy its core was at full load. Past about 0.8
//!   the tail is queueing: any hiccup leaves every stream's next deltas behind;
//! - **errors**: failed connects, non-200 answers, streams without `finish` and
//!   `[DONE]`, or with fewer than K deltas.
//!
//! Then the targets: agent-server ≥ 5× `node-ai7`'s deltas per CPU-second,
//! ≤ 64 KiB per open stream, p99 ≤ 1 ms at 1,000 streams, `agent-server-store`
//! ≥ 0.9× `agent-server`'s deltas per CPU-second, `agent-server-otel` the same
//! (export towards a dead collector costs a run at most 10%); and one JSON line
//! (`relay-json: {...}`) with every figure.
//!
//! # Options (after `--`)
//!
//! `--clients 100,1000` `--deltas 200` `--interval-ms 20` `--ramp-ms 1000`
//! `--warmup 50` `--servers agent-server,agent-server-store,agent-server-otel,node-ai7,node-ai7-pipe`
//! `--pin` (the load generator on CPU 0 and each server under test on CPU 1,
//! with `taskset`, so neither waits for the other's core); `--keep-awake` (with
//! `--pin`: a spinning process at the idle scheduling class keeps CPU 0 from
//! halting, see below); `--watch-stalls` (with `--pin`: each row also watches
//! both CPUs for stalls, see below); `--busy-client` (with `--pin`: the load
//! generator never sleeps, see below); `RELAY_NODE` names the node binary (default `node`);
//! `RELAY_LOG` is the server's log filter (default `warn`; `sqlx::query=debug`
//! prints each statement the run store runs, to count them per run).
//!
//! The default pace, a delta every 20 ms (50 tokens/s per stream, a fast model),
//! puts 50,000 deltas/s through the server at 1,000 streams.
//!
//! # Caveats
//!
//! - Everything shares the machine: server, model, load generator (and on a 2-core
//!   box they share two cores). The client's own CPU is printed; when the box is
//!   saturated, latency includes waiting for a core, for either server alike.
//! - Loopback TCP: no network latency or loss; per-delta syscalls dominate.
//! - The model is in-process for both servers (no provider connection, no
//!   provider decoding): this measures the relay (run loop, encoder, HTTP), not a
//!   provider client.
//! - CPU time has clock-tick resolution (10 ms at 100 Hz) and RSS is sampled, so
//!   small rows carry a few percent of noise; V8's heap grows and collects in
//!   steps, so Node's RSS figure moves more between runs than Rust's.
//! - Timer granularity (1 ms in tokio and in Node) moves when a delta is emitted,
//!   not its added latency, which starts at the stamp.
//! - On a virtual machine, the load generator's CPU halts while it waits for
//!   data, and a halted vCPU can take 5–20 ms to run again: every stream's
//!   deltas then arrive late together, about once a second, whichever server is
//!   measured (a trace shows the server writing on time while the load
//!   generator reads nothing and its CPU switches no task). That is the load
//!   generator's delay, not the server's. `--keep-awake` keeps that CPU busy
//!   with an idle-class spinner, which removes most of those clusters (the
//!   slow-delta timeline shows whether they were there) but makes each wake-up
//!   of the load generator cost the server more kernel time (a task to preempt
//!   instead of an idle CPU): take CPU figures from rows without it.
//! - A vCPU can also stop while it is busy (its host runs something else).
//!   `--watch-stalls` tells those moments apart from the server's own: during
//!   each row a real-time task on each CPU (`chrt --fifo 1`, so root or
//!   `CAP_SYS_NICE`) wakes every millisecond, and a wake-up more than 1 ms late
//!   means the CPU ran no task in that time: its vCPU was not running, or was
//!   slow to leave a halt (kernel work with preemption off would also show,
//!   and is not a server's either). The row then
//!   prints the stalls of each CPU (count, length in all, the longest with
//!   when they began) and the latencies again without the deltas in flight
//!   during a stall (stamp to arrival overlapping one); the JSON has every
//!   stall. A slow cluster in the timeline with no stall beside it is a delay
//!   of a running task (the server's or the load generator's). The watches
//!   wake both CPUs a thousand times a second, which also keeps them from
//!   halting (as `--keep-awake` does) and costs the server a preemption each:
//!   take CPU figures from rows without it.
//! - Loopback charges the receiving side's work to the sender: each write of
//!   the server runs the client's TCP receive path in the server's system call,
//!   and wakes the load generator's thread when it sleeps (an inter-processor
//!   interrupt to its vCPU). A remote client costs a server neither. With
//!   `--busy-client` the load generator's runtime never sleeps (it polls for
//!   ready sockets without waiting, using all of CPU 0), so the wake-ups drop
//!   out of every server's kernel time alike; the receive path stays. Rows with
//!   and without it measure the same servers under two client models; the
//!   targets are checked on whichever was run.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "a benchmark binary: a failed setup step ends it with a message"
)]

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use agent_server::{Access, ChatService, ChatSetup};
use ai_core::{
    CancellationToken, CompletionPort, ToolPolicy,
    completion::{
        CompletionDelta, CompletionFinal, CompletionItem, CompletionRequest, CompletionStream,
        FinishReason,
    },
    event::UsageFact,
};
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// Bytes of one delta's text: `t`, 20 digits, a space.
const DELTA_TEXT_LEN: usize = 22;
/// The targets of the issue.
const TARGET_RATIO: f64 = 5.0;
const TARGET_KIB_PER_STREAM: f64 = 64.0;
const TARGET_P99_MS: f64 = 1.0;
/// With the run store on, or with export towards a dead collector, at least
/// this share of the deltas per CPU-second without it (within 10%).
const TARGET_SHARE: f64 = 0.9;
/// How long one client may take before it counts as failed.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(180);

/// CLOCK_MONOTONIC in nanoseconds (the clock Node's `process.hrtime` reads).
fn mono_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    u64::try_from(ts.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(ts.tv_nsec).unwrap_or(0)
}

/// A delta's text: its emission time, fixed width.
fn stamp() -> String {
    format!("t{:020} ", mono_ns())
}

// ---------------------------------------------------------------------------
// The server side: a paced model behind ChatService.
// ---------------------------------------------------------------------------

/// Streams `deltas` stamped text deltas, the i-th due at start + i·`interval`.
struct PacedModel {
    deltas: usize,
    interval: Duration,
}

impl CompletionPort for PacedModel {
    fn complete(&self, request: CompletionRequest, cancel: CancellationToken) -> CompletionStream {
        let start = tokio::time::Instant::now();
        let (count, interval) = (self.deltas, self.interval);
        let model = request.model;
        // State: the index of the next item, the text so far (a decoder
        // assembles it too, growing it as the workspace's decoders do with
        // `ai_core::text::append`) and the model's name for
        // the usage. Like a provider's body stream, it does not watch the
        // cancellation itself: the run's model turn does, and drops the stream.
        drop(cancel);
        let state = (0usize, String::new(), model);
        futures::stream::unfold(state, move |(i, mut text, model)| async move {
            if i < count {
                let due = start + interval * u32::try_from(i).unwrap_or(u32::MAX);
                tokio::time::sleep_until(due).await;
                let delta = stamp();
                ai_core::text::append(&mut text, &delta);
                let item = CompletionItem::Delta(CompletionDelta::Text(delta));
                Some((Ok(item), (i + 1, text, model)))
            } else if i == count {
                let done = CompletionFinal {
                    text: std::mem::take(&mut text),
                    finish_reason: FinishReason::Stop,
                    usage: Some(UsageFact {
                        model: model.clone(),
                        prompt_tokens: 1,
                        completion_tokens: count as u64,
                        total_tokens: count as u64 + 1,
                        ..UsageFact::default()
                    }),
                    ..CompletionFinal::default()
                };
                Some((Ok(CompletionItem::Final(done)), (i + 1, text, model)))
            } else {
                None
            }
        })
        .boxed()
    }
}

/// What the server under test adds to the bare chat service.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Extra {
    /// Nothing.
    None,
    /// Every run recorded in a run store (a SQLite file in a new temporary
    /// folder, removed at the end), as `agent serve` does by default.
    Store,
    /// Spans and metrics exported over OTLP to this collector URL.
    Otel(String),
}

/// As `agent serve` logs by default (warnings and errors to stderr), with the
/// exporting layer beside the log when `telemetry` runs.
fn init_logging(telemetry: Option<&agent_telemetry::Telemetry>) {
    use tracing_subscriber::{EnvFilter, Layer as _, layer::SubscriberExt as _};
    let log = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_filter(
            EnvFilter::try_from_env("RELAY_LOG").unwrap_or_else(|_| EnvFilter::new("warn")),
        );
    let subscriber = tracing_subscriber::registry()
        .with(log)
        .with(telemetry.map(agent_telemetry::Telemetry::layer));
    let _ = tracing::subscriber::set_global_default(subscriber);
}

/// `relay --serve-agent`: serves until stdin closes; prints `listening <port> <ns>`.
fn serve_agent(deltas: usize, interval: Duration, extra: Extra) {
    let telemetry = match &extra {
        Extra::Otel(url) => agent_telemetry::Telemetry::start(&agent_telemetry::TelemetryConfig {
            endpoint: Some(url.clone()),
            ..Default::default()
        })
        .expect("the span exporter"),
        Extra::None | Extra::Store => None,
    };
    init_logging(telemetry.as_ref());
    let stored = extra == Extra::Store;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime for the server");
    runtime.block_on(async move {
        let service = ChatService::new(ChatSetup {
            model: Arc::new(PacedModel { deltas, interval }),
            model_id: "paced".into(),
            tools: Vec::new(),
            policy: ToolPolicy::default(),
            graph: agent_graph::Graph::new(
                "bench",
                "The benchmark's graph.",
                "You are a benchmark.",
            ),
        })
        .expect("the chat service");
        let folder = std::env::temp_dir().join(format!("relay-store-{}", std::process::id()));
        let service = if stored {
            std::fs::create_dir_all(&folder).expect("a folder for the store");
            let store = agent_store::Store::open_sqlite(&folder.join("store.db"))
                .await
                .expect("the run store");
            let instance = agent_durable::lease::Instance::start(
                store,
                "serve",
                agent_durable::lease::LeaseTiming::default(),
            )
            .await
            .expect("a lease in the run store");
            service.with_runs(agent_durable::Runs::new(instance))
        } else {
            service
        };
        let (listener, port) = bench_listener();
        // Every client comes from 127.0.0.1: the caps on streams and connections
        // (overall and per address) are raised past the largest load (5,000).
        let mut access = Access::loopback(port).with_token(BENCH_TOKEN);
        access.max_streams = 16_384;
        access.client_stream_share = 100;
        let router = Arc::new(service).router(access);
        // Ends when the parent closes our stdin (or dies).
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        std::thread::spawn(move || {
            let mut sink = Vec::new();
            let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
            let _ = stop_tx.send(());
        });
        println!("listening {port} {}", mono_ns());
        let _ = std::io::stdout().flush();
        let shutdown = async move {
            let _ = stop_rx.await;
        };
        let limits = agent_server::ConnectionLimits {
            max_connections: 16_384,
            max_connections_per_client: 16_384,
            max_unauthenticated: 16_384,
            ..agent_server::ConnectionLimits::default()
        };
        agent_server::serve(listener, router, limits, shutdown, Duration::from_secs(1))
            .await
            .expect("serve");
        if stored {
            let _ = std::fs::remove_dir_all(&folder);
        }
    });
    if let Some(telemetry) = telemetry {
        let lost = telemetry.lost_spans();
        drop(telemetry);
        eprintln!("relay: the dead collector cost {lost} spans");
    }
}

/// A collector that never answers: accepts every connection and reads what
/// comes, never writing back. Ends with the returned task.
async fn dead_collector() -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .await
        .expect("bind the collector");
    let url = format!("http://{}", listener.local_addr().expect("its address"));
    let task = tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut sink = vec![0u8; 64 * 1024];
                while matches!(socket.read(&mut sink).await, Ok(n) if n > 0) {}
            });
        }
    });
    (url, task)
}

/// A listener of a server under test on 127.0.0.1, and its port: the same
/// accept queue as the Node server's.
fn bench_listener() -> (tokio::net::TcpListener, u16) {
    let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
    socket
        .bind(SocketAddr::from(([127, 0, 0, 1], 0)))
        .expect("bind 127.0.0.1:0");
    let listener = socket.listen(4096).expect("listen");
    let port = listener.local_addr().expect("the bound address").port();
    (listener, port)
}

/// `relay --serve-floor` (see the module docs): prints `listening <port>
/// <clock>` and serves until stdin closes.
fn serve_floor(deltas: usize, interval: Duration) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime for the floor");
    runtime.block_on(async move {
        let (listener, port) = bench_listener();
        exit_when_stdin_closes();
        println!("listening {port} {}", mono_ns());
        let _ = std::io::stdout().flush();
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            tokio::spawn(floor_stream(stream, deltas, interval));
        }
    });
}

/// One floor response: the request read, then the stream written.
async fn floor_stream(mut stream: TcpStream, deltas: usize, interval: Duration) {
    let _ = stream.set_nodelay(true);
    let mut request = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    loop {
        let Ok(n) = stream.read(&mut buf).await else {
            return;
        };
        if n == 0 {
            return;
        }
        request.extend_from_slice(&buf[..n]);
        if let Some(end) = find(&request, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&request[..end]).to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|line| line.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            if request.len() >= end + 4 + length {
                break;
            }
        }
    }
    let head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
        x-vercel-ai-ui-message-stream: v1\r\ntransfer-encoding: chunked\r\n\r\n";
    if stream.write_all(head).await.is_err() {
        return;
    }
    let chunk = |frame: &str| format!("{:x}\r\n{frame}\r\n", frame.len());
    let start = tokio::time::Instant::now();
    for i in 0..deltas {
        tokio::time::sleep_until(start + interval * i as u32).await;
        let frame = format!(
            "data: {{\"delta\":\"{}\",\"id\":\"0\",\"type\":\"text-delta\"}}\n\n",
            stamp()
        );
        if stream.write_all(chunk(&frame).as_bytes()).await.is_err() {
            return;
        }
    }
    let end = format!(
        "{}{}0\r\n\r\n",
        chunk("data: {\"type\":\"finish\"}\n\n"),
        chunk("data: [DONE]\n\n")
    );
    let _ = stream.write_all(end.as_bytes()).await;
}

/// The bearer token of the benchmark's server.
const BENCH_TOKEN: &str = "bench-token";

// ---------------------------------------------------------------------------
// The load generator.
// ---------------------------------------------------------------------------

/// Counters shared by a row's clients and its memory sampler.
#[derive(Default)]
struct Shared {
    /// Streams with a 200 answer that have not ended.
    open: AtomicUsize,
    /// The most streams open at once.
    max_open: AtomicUsize,
}

/// What one client saw.
struct ClientResult {
    deltas: u64,
    /// Added latency of each delta, ns.
    latencies: Vec<u64>,
    /// Deltas stamped after they arrived (a clock mismatch; counted as 0 ns).
    negative: u64,
    /// The stamp (monotonic ns) and added latency of each delta that took
    /// longer than [`TRACKED_NS`]: when the tail happened, and which deltas
    /// were in flight during a stall of a vCPU.
    tracked: Vec<(u64, u64)>,
    error: Option<String>,
}

/// Added latency past which a delta is counted in the tail's timeline.
const SLOW_NS: u64 = 2_000_000;
/// Added latency past which a delta's stamp is kept (the timeline, and the
/// figures without the deltas in flight during a vCPU stall).
const TRACKED_NS: u64 = 250_000;

/// The index of `needle` in `hay`.
fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// HTTP/1.1 chunked transfer decoding, incremental.
#[derive(Default)]
struct Dechunk {
    /// Bytes left in the current chunk.
    remaining: usize,
    /// A chunk's trailing CRLF is due.
    crlf_due: bool,
    /// The last (0-size) chunk was seen.
    ended: bool,
}

impl Dechunk {
    /// Moves the payload of `raw` into `out`; leaves an incomplete size line in `raw`.
    fn feed(&mut self, raw: &mut Vec<u8>, out: &mut Vec<u8>) -> Result<(), String> {
        let mut at = 0;
        while at < raw.len() && !self.ended {
            if self.remaining > 0 {
                let n = self.remaining.min(raw.len() - at);
                out.extend_from_slice(&raw[at..at + n]);
                at += n;
                self.remaining -= n;
                if self.remaining == 0 {
                    self.crlf_due = true;
                }
            } else if self.crlf_due {
                if raw.len() - at < 2 {
                    break;
                }
                if &raw[at..at + 2] != b"\r\n" {
                    return Err("chunk not followed by CRLF".into());
                }
                at += 2;
                self.crlf_due = false;
            } else {
                let Some(end) = find(&raw[at..], b"\r\n") else {
                    break;
                };
                let line = std::str::from_utf8(&raw[at..at + end])
                    .map_err(|_| "chunk size line is not UTF-8".to_owned())?;
                let hex = line.split(';').next().unwrap_or("").trim();
                let size = usize::from_str_radix(hex, 16)
                    .map_err(|_| format!("bad chunk size line {line:?}"))?;
                at += end + 2;
                if size == 0 {
                    self.ended = true;
                } else {
                    self.remaining = size;
                }
            }
        }
        raw.drain(..at);
        Ok(())
    }
}

/// The 20 digits after `"delta":"t` in a `text-delta` payload.
fn delta_stamp(payload: &[u8]) -> Option<u64> {
    let key = b"\"delta\":\"t";
    let at = find(payload, key)? + key.len();
    let digits = payload.get(at..at + 20)?;
    std::str::from_utf8(digits).ok()?.parse().ok()
}

/// One client: POST, then read the stream to `[DONE]`.
async fn client(addr: SocketAddr, id: usize, deltas: usize, shared: Arc<Shared>) -> ClientResult {
    let mut result = ClientResult {
        deltas: 0,
        latencies: Vec::with_capacity(deltas),
        negative: 0,
        tracked: Vec::new(),
        error: None,
    };
    let mut opened = false;
    let outcome = tokio::time::timeout(
        CLIENT_TIMEOUT,
        stream_once(addr, id, &mut result, &shared, &mut opened),
    )
    .await
    .unwrap_or_else(|_| Err("timed out".into()));
    if opened {
        shared.open.fetch_sub(1, Ordering::SeqCst);
    }
    if let Err(error) = outcome {
        result.error = Some(error);
    } else if result.deltas != deltas as u64 {
        result.error = Some(format!("{} deltas of {deltas}", result.deltas));
    }
    result
}

async fn stream_once(
    addr: SocketAddr,
    id: usize,
    result: &mut ClientResult,
    shared: &Shared,
    opened: &mut bool,
) -> Result<(), String> {
    let body = json!({
        "id": format!("chat-{id}"),
        "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "go"}]}],
        "trigger": "submit-message",
    })
    .to_string();
    let request = format!(
        "POST /api/chat HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Authorization: Bearer {BENCH_TOKEN}\r\n\
         Accept: text/event-stream\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut socket = TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    socket
        .set_nodelay(true)
        .map_err(|e| format!("nodelay: {e}"))?;
    socket
        .write_all(request.as_bytes())
        .await
        .map_err(|e| format!("write: {e}"))?;
    let mut buf = vec![0u8; 16 * 1024];
    let mut raw: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut sse: Vec<u8> = Vec::with_capacity(4 * 1024);
    let mut head_done = false;
    let mut dechunk = Dechunk::default();
    let (mut finished, mut done) = (false, false);
    loop {
        let n = socket
            .read(&mut buf)
            .await
            .map_err(|e| format!("read: {e}"))?;
        let now = mono_ns();
        if n == 0 {
            return Err(if head_done {
                format!("connection closed before [DONE] (finish seen: {finished})")
            } else {
                "connection closed before the response head".into()
            });
        }
        raw.extend_from_slice(&buf[..n]);
        if !head_done {
            let Some(end) = find(&raw, b"\r\n\r\n") else {
                continue;
            };
            let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
            let status = head.split_whitespace().nth(1).unwrap_or("");
            if status != "200" {
                let body = String::from_utf8_lossy(&raw[end + 4..]);
                return Err(format!(
                    "HTTP {status}: {}",
                    body.chars().take(200).collect::<String>()
                ));
            }
            if !head.contains("transfer-encoding: chunked") {
                return Err("response is not chunked".into());
            }
            raw.drain(..end + 4);
            head_done = true;
            *opened = true;
            let open = shared.open.fetch_add(1, Ordering::SeqCst) + 1;
            shared.max_open.fetch_max(open, Ordering::SeqCst);
        }
        dechunk.feed(&mut raw, &mut sse)?;
        // Whole SSE events.
        let mut at = 0;
        while let Some(end) = find(&sse[at..], b"\n\n") {
            let event = &sse[at..at + end];
            at += end + 2;
            let Some(payload) = event.strip_prefix(b"data: ") else {
                continue; // a comment (keep-alive)
            };
            if payload == b"[DONE]" {
                done = true;
            } else if find(payload, b"\"type\":\"text-delta\"").is_some() {
                let stamp = delta_stamp(payload)
                    .ok_or_else(|| "a text-delta without a stamp".to_owned())?;
                result.deltas += 1;
                if stamp > now {
                    result.negative += 1;
                }
                let latency = now.saturating_sub(stamp);
                if latency > TRACKED_NS {
                    result.tracked.push((stamp, latency));
                }
                result.latencies.push(latency);
            } else if find(payload, b"\"type\":\"finish\"").is_some() {
                finished = true;
            } else if find(payload, b"\"type\":\"error\"").is_some() {
                return Err(format!("error chunk: {}", String::from_utf8_lossy(payload)));
            }
        }
        sse.drain(..at);
        if done || dechunk.ended {
            return if finished && done {
                Ok(())
            } else {
                Err(format!(
                    "stream ended without finish/[DONE] ({finished}/{done})"
                ))
            };
        }
    }
}

/// Everything a load of C clients produced.
struct Load {
    deltas: u64,
    latencies: Vec<u64>,
    negative: u64,
    /// Stamps and latencies of the deltas slower than [`TRACKED_NS`].
    tracked: Vec<(u64, u64)>,
    /// When the first client started (monotonic ns).
    t0_ns: u64,
    errors: Vec<String>,
    wall: Duration,
}

/// C clients, started evenly over `ramp`; waits for all of them.
async fn load(
    addr: SocketAddr,
    clients: usize,
    deltas: usize,
    ramp: Duration,
    shared: Arc<Shared>,
) -> Load {
    let started = Instant::now();
    let t0_ns = mono_ns();
    let t0 = tokio::time::Instant::now();
    let mut tasks = Vec::with_capacity(clients);
    for id in 0..clients {
        let shared = Arc::clone(&shared);
        let at = t0 + ramp.mul_f64(id as f64 / clients.max(1) as f64);
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep_until(at).await;
            client(addr, id, deltas, shared).await
        }));
    }
    let mut out = Load {
        deltas: 0,
        latencies: Vec::with_capacity(clients * deltas),
        negative: 0,
        tracked: Vec::new(),
        t0_ns,
        errors: Vec::new(),
        wall: Duration::ZERO,
    };
    for task in tasks {
        match task.await {
            Ok(r) => {
                out.deltas += r.deltas;
                out.negative += r.negative;
                out.latencies.extend(r.latencies);
                out.tracked.extend(r.tracked);
                if let Some(e) = r.error {
                    out.errors.push(e);
                }
            }
            Err(e) => out.errors.push(format!("client task: {e}")),
        }
    }
    out.wall = started.elapsed();
    out
}

// ---------------------------------------------------------------------------
// /proc readings.
// ---------------------------------------------------------------------------

/// User and system CPU time of `pid` (all threads, live and ended), in seconds.
#[derive(Debug, Clone, Copy, Default)]
struct CpuTimes {
    user: f64,
    system: f64,
}

impl CpuTimes {
    fn total(self) -> f64 {
        self.user + self.system
    }

    /// The time spent from `before` to this reading.
    fn since(self, before: CpuTimes) -> CpuTimes {
        CpuTimes {
            user: self.user - before.user,
            system: self.system - before.system,
        }
    }
}

/// [`CpuTimes`] of `pid` now.
fn cpu_times(pid: &str) -> CpuTimes {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/<pid>/stat");
    // Fields after the command (which may hold spaces): state is field 3, utime 14, stime 15.
    let rest = &stat[stat.rfind(')').expect("a stat line") + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |field: &str| field.parse::<u64>().expect("a tick count") as f64;
    let per_second = rustix::param::clock_ticks_per_second() as f64;
    CpuTimes {
        user: ticks(fields[11]) / per_second,
        system: ticks(fields[12]) / per_second,
    }
}

/// User + system CPU time of `pid`, in seconds.
fn cpu_seconds(pid: &str) -> f64 {
    cpu_times(pid).total()
}

/// Resident set of `pid`, KiB.
fn rss_kib(pid: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

// ---------------------------------------------------------------------------
// Rows.
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Agent,
    AgentStore,
    AgentOtel,
    Node,
    NodePipe,
    Floor,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Self::Agent => "agent-server",
            Self::AgentStore => "agent-server-store",
            Self::AgentOtel => "agent-server-otel",
            Self::Node => "node-ai7",
            Self::NodePipe => "node-ai7-pipe",
            Self::Floor => "floor",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        [
            Self::Agent,
            Self::AgentStore,
            Self::AgentOtel,
            Self::Node,
            Self::NodePipe,
            Self::Floor,
        ]
        .into_iter()
        .find(|k| k.name() == name)
    }
}

struct Config {
    clients: Vec<usize>,
    deltas: usize,
    interval_ms: u64,
    ramp: Duration,
    warmup: usize,
    servers: Vec<Kind>,
    node: String,
    /// `--pin`: the load generator on CPU 0, the server under test on CPU 1.
    pin: bool,
    /// `--keep-awake`: CPU 0 never idles (see [`keep_awake`]).
    keep_awake: bool,
    /// `--watch-stalls` (with `--pin`): each row watches both CPUs for
    /// stalls (see [`watch_cpu`]).
    watch_stalls: bool,
    /// `--busy-client` (with `--pin`): the load generator never sleeps (see
    /// [`keep_polling`]).
    busy_client: bool,
}

/// A server process under test.
struct Server {
    child: tokio::process::Child,
    _stdout: BufReader<tokio::process::ChildStdout>,
    pid: String,
    addr: SocketAddr,
    /// The dead collector of `agent-server-otel`, stopped with the server.
    collector: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(collector) = self.collector.take() {
            collector.abort();
        }
    }
}

fn bench_node_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/js/bench-node.mjs")
}

/// `program`, run on CPU 1 (`taskset -c 1`) when `pin`.
fn pinned(pin: bool, program: &std::ffi::OsStr) -> tokio::process::Command {
    if pin {
        let mut c = tokio::process::Command::new("taskset");
        c.args(["-c", "1"]).arg(program);
        c
    } else {
        tokio::process::Command::new(program)
    }
}

/// `--keep-awake` (with `--pin`): this binary again as `relay --spin` on CPU 0
/// at the idle scheduling class (`chrt --idle 0`), so that CPU never halts.
/// On a virtual machine a halted vCPU can take 5–20 ms to run again when a
/// socket's data arrives for the load generator, which sleeps between reads:
/// every stream's deltas then arrive late together, a delay of the load
/// generator's machine, not of the server under test. An idle-class task
/// gives way at once to any other task on the CPU (see the module's caveats
/// for what it costs the server's figures).
fn keep_awake() -> std::process::Child {
    let exe = std::env::current_exe().expect("this binary");
    std::process::Command::new("chrt")
        .args(["--idle", "0", "taskset", "-c", "0"])
        .arg(exe)
        .arg("--spin")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("--keep-awake needs `chrt` and `taskset` (util-linux)")
}

/// `--busy-client`: a task that yields for ever, so the load generator's
/// runtime worker never sleeps: between polls of its tasks it asks the kernel
/// for ready sockets without waiting (tokio polls its I/O driver with a zero
/// timeout while a yielded task waits). A server's write to a client then
/// never has to wake the client's thread: on loopback that wake-up (an
/// inter-processor interrupt to the other vCPU, the sleeping thread scheduled
/// in) runs in the writer's system call and is counted as the server's kernel
/// time, a cost a client on another machine never puts on a server.
async fn keep_polling() {
    loop {
        tokio::task::yield_now().await;
    }
}

/// Ends this process when its parent closes its stdin (or dies).
fn exit_when_stdin_closes() {
    std::thread::spawn(|| {
        let mut sink = Vec::new();
        let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
        std::process::exit(0);
    });
}

/// `relay --spin`: keeps its CPU busy until stdin closes.
fn spin() -> ! {
    exit_when_stdin_closes();
    loop {
        std::hint::spin_loop();
    }
}

/// Pins this process (its threads started from now on) to CPU 0.
fn pin_self() {
    let pid = std::process::id().to_string();
    let status = std::process::Command::new("taskset")
        .args(["-cp", "0", &pid])
        .stdout(Stdio::null())
        .status();
    assert!(
        status.is_ok_and(|s| s.success()),
        "--pin needs `taskset` (util-linux) and two CPUs"
    );
}

// ---------------------------------------------------------------------------
// vCPU stalls (`--watch-stalls`).
// ---------------------------------------------------------------------------

/// How often a stall watch wakes.
const WATCH_PERIOD: Duration = Duration::from_millis(1);
/// A watch that wakes this much later than due saw a stall of its CPU.
const STALL_NS: u64 = 1_000_000;

/// `relay --watch-cpu`, run by [`StallWatch::start`] at real-time priority
/// on one CPU: wakes every [`WATCH_PERIOD`] until stdin closes, then prints
/// each late wake-up as `<last wake ns> <this wake ns>` (monotonic).
///
/// A real-time task runs as soon as its timer fires, ahead of every other task
/// on the CPU (the server, the load generator, the spinner of
/// `--keep-awake`): waking more than [`STALL_NS`] late means the CPU ran no
/// task meanwhile (a virtual machine's vCPU that its host did not schedule,
/// or one slow to leave a halt; kernel work with preemption off would also
/// show). The stall lies between the last wake-up and this one.
fn watch_cpu() -> ! {
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut sink = Vec::new();
            let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
            stop.store(true, Ordering::SeqCst);
        });
    }
    let due_gap = WATCH_PERIOD.as_nanos() as u64 + STALL_NS;
    let mut late = Vec::new();
    let mut last = mono_ns();
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(WATCH_PERIOD);
        let now = mono_ns();
        if now.saturating_sub(last) > due_gap {
            late.push((last, now));
        }
        last = now;
    }
    let mut out = String::new();
    for (from, to) in late {
        out.push_str(&format!("{from} {to}\n"));
    }
    print!("{out}");
    std::process::exit(0);
}

/// One CPU's stall watch: this binary as `relay --watch-cpu` under
/// `chrt --fifo 1 taskset -c <cpu>`, for one row.
struct StallWatch {
    cpu: u8,
    child: tokio::process::Child,
}

impl StallWatch {
    /// Starts the watch on `cpu`; exits the bench when it cannot run at
    /// real-time priority (it needs root or `CAP_SYS_NICE`).
    async fn start(cpu: u8) -> Self {
        let exe = std::env::current_exe().expect("this binary");
        let mut child = tokio::process::Command::new("chrt")
            .args(["--fifo", "1", "taskset", "-c", &cpu.to_string()])
            .arg(exe)
            .arg("--watch-cpu")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("--watch-stalls needs `chrt` and `taskset` (util-linux)");
        tokio::time::sleep(Duration::from_millis(50)).await;
        if let Ok(Some(status)) = child.try_wait() {
            eprintln!(
                "relay: the stall watch on CPU {cpu} did not start ({status}); \
                 --watch-stalls needs real-time priority (root or CAP_SYS_NICE)"
            );
            std::process::exit(2);
        }
        Self { cpu, child }
    }

    /// Stops the watch; the stalls it saw as `(cpu, from ns, to ns)`.
    async fn stop(mut self) -> Vec<(u8, u64, u64)> {
        drop(self.child.stdin.take());
        let output = match self.child.wait_with_output().await {
            Ok(output) => output,
            Err(error) => {
                eprintln!("relay: the stall watch on CPU {}: {error}", self.cpu);
                return Vec::new();
            }
        };
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter_map(|line| {
                let (from, to) = line.split_once(' ')?;
                Some((self.cpu, from.parse().ok()?, to.parse().ok()?))
            })
            .collect()
    }
}

/// The vCPU stalls of a row and the latencies without the deltas they held.
struct Stalls {
    /// `(cpu, from ns, to ns)`, monotonic.
    windows: Vec<(u8, u64, u64)>,
    /// Deltas whose flight (stamp to arrival) overlapped a stall.
    held: usize,
    /// The row's latencies without those deltas, sorted.
    outside: Vec<u64>,
}

impl Stalls {
    /// `latencies` sorted; `tracked` the `(stamp, latency)` of every delta
    /// slower than [`TRACKED_NS`] (a delta held by a stall of at least
    /// [`STALL_NS`] is among them).
    fn new(mut windows: Vec<(u8, u64, u64)>, latencies: &[u64], tracked: &[(u64, u64)]) -> Self {
        windows.sort_unstable_by_key(|&(_, from, _)| from);
        let mut held: Vec<u64> = tracked
            .iter()
            .filter(|&&(stamp, latency)| {
                let arrived = stamp + latency;
                windows
                    .iter()
                    .any(|&(_, from, to)| from < arrived && stamp < to)
            })
            .map(|&(_, latency)| latency)
            .collect();
        held.sort_unstable();
        // `latencies` without the multiset `held` (both sorted).
        // `held` is drawn from `latencies`: never longer.
        let mut outside = Vec::with_capacity(latencies.len() - held.len());
        let mut skip = held.iter().peekable();
        for &latency in latencies {
            if skip.next_if_eq(&&latency).is_none() {
                outside.push(latency);
            }
        }
        Self {
            windows,
            held: held.len(),
            outside,
        }
    }

    /// The stalls of `cpu`: how many, and their length in all (ms).
    fn of_cpu(&self, cpu: u8) -> (usize, f64) {
        let mine = self.windows.iter().filter(|w| w.0 == cpu);
        let ns: u64 = mine.clone().map(|&(_, from, to)| to - from).sum();
        (mine.count(), ns as f64 / 1e6)
    }

    /// The `q` quantile of the latencies outside stalls, ms.
    fn latency_ms(&self, q: f64) -> f64 {
        quantile_ms(&self.outside, q)
    }

    fn json(&self, t0_ns: u64) -> Value {
        let cpu = |c| {
            let (count, ms) = self.of_cpu(c);
            json!({"count": count, "ms": ms})
        };
        let windows: Vec<Value> = self
            .windows
            .iter()
            .map(|&(c, from, to)| {
                json!([
                    c,
                    (from as f64 - t0_ns as f64) / 1e6,
                    (to - from) as f64 / 1e6
                ])
            })
            .collect();
        json!({
            "cpu0": cpu(0),
            "cpu1": cpu(1),
            "windows_ms_since_t0_and_length": windows,
            "deltas_held": self.held,
            "latency_ms_outside_stalls": {
                "p50": self.latency_ms(0.5),
                "p90": self.latency_ms(0.9),
                "p99": self.latency_ms(0.99),
                "p999": self.latency_ms(0.999),
                "max": self.latency_ms(1.0),
            },
        })
    }
}

/// Why the Node rows cannot run, if they cannot.
fn node_missing(config: &Config) -> Option<String> {
    let script = bench_node_script();
    if !script.exists() {
        return Some(format!("{} is missing", script.display()));
    }
    let modules = script.with_file_name("node_modules").join("ai7");
    if !modules.exists() {
        return Some("tests/js/node_modules is missing: run `npm ci --prefix tests/js`".into());
    }
    match std::process::Command::new(&config.node)
        .arg("--version")
        .output()
    {
        Ok(out) if out.status.success() => None,
        Ok(out) => Some(format!(
            "`{} --version` failed: {}",
            config.node, out.status
        )),
        Err(e) => Some(format!("cannot run `{}`: {e}", config.node)),
    }
}

async fn start_server(kind: Kind, config: &Config) -> Server {
    let mut collector = None;
    let mut command = match kind {
        Kind::Agent | Kind::AgentStore | Kind::AgentOtel => {
            let exe = std::env::current_exe().expect("this binary");
            let mut c = pinned(config.pin, exe.as_os_str());
            match kind {
                Kind::AgentStore => c.arg("--serve-agent-store"),
                Kind::AgentOtel => {
                    let (url, task) = dead_collector().await;
                    collector = Some(task);
                    c.args(["--serve-agent-otel", &url])
                }
                _ => c.arg("--serve-agent"),
            };
            c
        }
        Kind::Floor => {
            let exe = std::env::current_exe().expect("this binary");
            let mut c = pinned(config.pin, exe.as_os_str());
            c.arg("--serve-floor");
            c
        }
        Kind::Node | Kind::NodePipe => {
            let mut c = pinned(config.pin, config.node.as_ref());
            c.arg(bench_node_script());
            c.args([
                "--mode",
                if kind == Kind::Node {
                    "response"
                } else {
                    "pipe"
                },
            ]);
            c
        }
    };
    command
        .args(["--deltas", &config.deltas.to_string()])
        .args(["--interval-ms", &config.interval_ms.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    let before = mono_ns();
    let mut child = command.spawn().expect("start the server process");
    let pid = child.id().expect("the server's pid").to_string();
    // Kept open for the server's lifetime: a closed pipe would fail its later writes.
    let mut stdout = BufReader::new(child.stdout.take().expect("the server's stdout"));
    let mut line = String::new();
    tokio::time::timeout(Duration::from_secs(60), stdout.read_line(&mut line))
        .await
        .expect("the server did not print `listening` within 60 s")
        .expect("reading the server's stdout");
    let after = mono_ns();
    let mut words = line.split_whitespace();
    assert_eq!(words.next(), Some("listening"), "server said {line:?}");
    let port: u16 = words.next().and_then(|p| p.parse().ok()).expect("a port");
    let clock: u64 = words
        .next()
        .and_then(|c| c.parse().ok())
        .expect("a clock reading");
    assert!(
        (before..=after).contains(&clock),
        "{}'s monotonic clock ({clock}) is not this process's ({before}..{after}): latencies would be meaningless",
        kind.name()
    );
    Server {
        child,
        _stdout: stdout,
        pid,
        addr: SocketAddr::from(([127, 0, 0, 1], port)),
        collector,
    }
}

/// One measured row.
struct Row {
    server: &'static str,
    clients: usize,
    deltas: u64,
    expected: u64,
    cpu_s: f64,
    /// The server's CPU time split into user and kernel time.
    cpu: CpuTimes,
    client_cpu_s: f64,
    wall_s: f64,
    rss_base_kib: u64,
    rss_open_kib: Option<u64>,
    rss_peak_kib: u64,
    /// The server's CPU time per second of wall time while all C streams were
    /// open (over at least 0.5 s of it): how busy its core was at full load
    /// (1.0 = one core all the time; the tail grows steeply as it nears that).
    busy_all_open: Option<f64>,
    max_open: usize,
    latencies: Vec<u64>,
    negative: u64,
    /// Deltas slower than [`SLOW_NS`] per 100 ms of the row (by their stamp,
    /// from the first client's start): when the tail happened.
    slow_timeline: Vec<(u64, usize)>,
    /// When the first client started (monotonic ns).
    t0_ns: u64,
    /// With `--watch-stalls`: the vCPU stalls seen during the row, and the
    /// latencies of the deltas that were not in flight during one.
    stalls: Option<Stalls>,
    errors: Vec<String>,
    warmup_errors: usize,
}

impl Row {
    fn per_cpu_s(&self) -> f64 {
        if self.cpu_s > 0.0 {
            self.deltas as f64 / self.cpu_s
        } else {
            f64::NAN
        }
    }

    /// The server's CPU microseconds per delta: (user, kernel).
    fn us_per_delta(&self) -> (f64, f64) {
        if self.deltas == 0 {
            return (f64::NAN, f64::NAN);
        }
        let per = |seconds: f64| seconds * 1e6 / self.deltas as f64;
        (per(self.cpu.user), per(self.cpu.system))
    }

    /// KiB per open stream (while all C were open), if that moment was seen.
    fn kib_per_stream(&self) -> Option<f64> {
        self.rss_open_kib
            .map(|open| open.saturating_sub(self.rss_base_kib) as f64 / self.clients as f64)
    }

    fn kib_per_stream_peak(&self) -> f64 {
        self.rss_peak_kib.saturating_sub(self.rss_base_kib) as f64 / self.clients as f64
    }

    /// The `q` quantile (nearest rank) of the sorted latencies, ms.
    fn latency_ms(&self, q: f64) -> f64 {
        quantile_ms(&self.latencies, q)
    }

    fn mean_ms(&self) -> f64 {
        if self.latencies.is_empty() {
            return f64::NAN;
        }
        self.latencies.iter().map(|&l| l as f64).sum::<f64>() / self.latencies.len() as f64 / 1e6
    }

    fn json(&self) -> Value {
        json!({
            "server": self.server,
            "clients": self.clients,
            "deltas": self.deltas,
            "deltas_expected": self.expected,
            "server_cpu_s": self.cpu_s,
            "server_user_s": self.cpu.user,
            "server_system_s": self.cpu.system,
            "cpu_us_per_delta": {
                "user": self.us_per_delta().0,
                "kernel": self.us_per_delta().1,
            },
            "deltas_per_cpu_s": self.per_cpu_s(),
            "rss_base_kib": self.rss_base_kib,
            "rss_all_open_kib": self.rss_open_kib,
            "rss_peak_kib": self.rss_peak_kib,
            "server_cpu_per_wall_s_all_open": self.busy_all_open,
            "kib_per_open_stream": self.kib_per_stream(),
            "kib_per_stream_at_peak": self.kib_per_stream_peak(),
            "max_open_streams": self.max_open,
            "latency_ms": {
                "p50": self.latency_ms(0.50),
                "p90": self.latency_ms(0.90),
                "p99": self.latency_ms(0.99),
                "p999": self.latency_ms(0.999),
                "max": self.latency_ms(1.0),
                "mean": self.mean_ms(),
            },
            "slow_by_100ms": self.slow_timeline,
            "vcpu_stalls": self.stalls.as_ref().map(|s| s.json(self.t0_ns)),
            "stamps_after_arrival": self.negative,
            "errors": self.errors.len(),
            "first_errors": self.errors.iter().take(3).collect::<Vec<_>>(),
            "warmup_errors": self.warmup_errors,
            "wall_s": self.wall_s,
            "client_cpu_s": self.client_cpu_s,
        })
    }
}

async fn measure(kind: Kind, clients: usize, config: &Config) -> Row {
    let mut server = start_server(kind, config).await;
    let pid = server.pid.clone();
    // Warm-up: full streams, not measured.
    let warm = load(
        server.addr,
        config.warmup.min(clients),
        config.deltas,
        config.ramp / 4,
        Arc::new(Shared::default()),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    let shared = Arc::new(Shared::default());
    let rss_base = rss_kib(&pid).expect("the server's VmRSS");
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let (shared, sampling, pid) = (Arc::clone(&shared), Arc::clone(&sampling), pid.clone());
        tokio::spawn(async move {
            let (mut all_open, mut peak) = (None::<u64>, rss_base);
            // The server's CPU time when all streams were first and last seen open.
            let mut busy: Option<[(Instant, f64); 2]> = None;
            let mut tick = tokio::time::interval(Duration::from_millis(20));
            while sampling.load(Ordering::SeqCst) {
                tick.tick().await;
                let Some(rss) = rss_kib(&pid) else { break };
                peak = peak.max(rss);
                if shared.open.load(Ordering::SeqCst) == clients {
                    all_open = Some(all_open.map_or(rss, |r| r.max(rss)));
                    let now = (Instant::now(), cpu_times(&pid).total());
                    busy = Some(busy.map_or([now, now], |[first, _]| [first, now]));
                }
            }
            let busy = busy.and_then(|[(t0, c0), (t1, c1)]| {
                let wall = (t1 - t0).as_secs_f64();
                (wall >= 0.5).then(|| (c1 - c0) / wall)
            });
            (all_open, peak, busy)
        })
    };
    let watches = if config.watch_stalls {
        vec![StallWatch::start(0).await, StallWatch::start(1).await]
    } else {
        Vec::new()
    };
    let client_cpu_before = cpu_seconds("self");
    let cpu_before = cpu_times(&pid);
    let run = load(
        server.addr,
        clients,
        config.deltas,
        config.ramp,
        Arc::clone(&shared),
    )
    .await;
    let cpu = cpu_times(&pid).since(cpu_before);
    let mut windows = Vec::new();
    for watch in watches {
        windows.extend(watch.stop().await);
    }
    let client_cpu_after = cpu_seconds("self");
    sampling.store(false, Ordering::SeqCst);
    let (rss_open, rss_peak, busy_all_open) = sampler.await.expect("the memory sampler");

    drop(server.child.stdin.take());
    let _ = server.child.start_kill();
    let _ = server.child.wait().await;
    // A killed server cannot remove its run store's folder: it is removed here.
    if kind == Kind::AgentStore {
        let _ = std::fs::remove_dir_all(std::env::temp_dir().join(format!("relay-store-{pid}")));
    }

    let mut latencies = run.latencies;
    latencies.sort_unstable();
    let stalls = config
        .watch_stalls
        .then(|| Stalls::new(windows, &latencies, &run.tracked));
    Row {
        server: kind.name(),
        clients,
        deltas: run.deltas,
        expected: (clients * config.deltas) as u64,
        cpu_s: cpu.total(),
        cpu,
        client_cpu_s: client_cpu_after - client_cpu_before,
        wall_s: run.wall.as_secs_f64(),
        rss_base_kib: rss_base,
        rss_open_kib: rss_open,
        rss_peak_kib: rss_peak,
        busy_all_open,
        max_open: shared.max_open.load(Ordering::SeqCst),
        latencies,
        negative: run.negative,
        slow_timeline: timeline(&run.tracked, run.t0_ns),
        stalls,
        t0_ns: run.t0_ns,
        errors: run.errors,
        warmup_errors: warm.errors.len(),
    }
}

/// The deltas slower than [`SLOW_NS`] among `tracked`, counted per 100 ms since
/// `t0_ns` by their stamps: the windows that have any.
fn timeline(tracked: &[(u64, u64)], t0_ns: u64) -> Vec<(u64, usize)> {
    let mut windows = std::collections::BTreeMap::new();
    let slow = tracked.iter().filter(|&&(_, latency)| latency > SLOW_NS);
    for &(stamp, _) in slow {
        *windows
            .entry(stamp.saturating_sub(t0_ns) / 100_000_000)
            .or_insert(0) += 1;
    }
    windows.into_iter().map(|(w, n)| (w * 100, n)).collect()
}

/// The `q` quantile of `sorted` (ns) in ms; NaN when it is empty.
fn quantile_ms(sorted: &[u64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1] as f64 / 1e6
}

fn fmt_opt(value: Option<f64>, digits: usize) -> String {
    value.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.digits$}"))
}

fn print_table(rows: &[Row]) {
    println!();
    println!(
        "{:<14} {:>5} {:>9} {:>7} {:>12} {:>13} {:>10} {:>10} {:>8} {:>8} {:>8} {:>8} {:>8} {:>6} {:>6} {:>8} {:>5}",
        "server",
        "C",
        "deltas",
        "CPU s",
        "deltas/CPU-s",
        "us/delta u+k",
        "KiB/strm",
        "KiB@peak",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "p99.9 ms",
        "max ms",
        "open",
        "errors",
        "client s",
        "busy"
    );
    for r in rows {
        println!(
            "{:<14} {:>5} {:>9} {:>7.2} {:>12.0} {:>13} {:>10} {:>10.1} {:>8.3} {:>8.3} {:>8.3} {:>8.3} {:>8.1} {:>6} {:>6} {:>8.2} {:>5}",
            r.server,
            r.clients,
            r.deltas,
            r.cpu_s,
            r.per_cpu_s(),
            {
                let (user, kernel) = r.us_per_delta();
                format!("{user:.1}+{kernel:.1}")
            },
            fmt_opt(r.kib_per_stream(), 1),
            r.kib_per_stream_peak(),
            r.latency_ms(0.50),
            r.latency_ms(0.90),
            r.latency_ms(0.99),
            r.latency_ms(0.999),
            r.latency_ms(1.0),
            r.max_open,
            r.errors.len(),
            r.client_cpu_s,
            fmt_opt(r.busy_all_open, 2),
        );
    }
    for r in rows {
        if let Some(first) = r.errors.first() {
            println!("  {} C={}: first error: {first}", r.server, r.clients);
        }
        if r.negative > 0 {
            println!(
                "  {} C={}: {} stamps after arrival (clock mismatch)",
                r.server, r.clients, r.negative
            );
        }
        if r.warmup_errors > 0 {
            println!(
                "  {} C={}: {} warm-up errors",
                r.server, r.clients, r.warmup_errors
            );
        }
        if !r.slow_timeline.is_empty() {
            // The ten windows with the most (a long, overloaded row has hundreds).
            let mut shown = r.slow_timeline.clone();
            shown.sort_by_key(|&(_, n)| std::cmp::Reverse(n));
            shown.truncate(10);
            shown.sort_unstable();
            let windows: Vec<String> = shown.iter().map(|(ms, n)| format!("{ms}:{n}")).collect();
            println!(
                "  {} C={}: deltas over {} ms by 100 ms window, the ten busiest (ms since the first client at {} ns: count): {}",
                r.server,
                r.clients,
                SLOW_NS / 1_000_000,
                r.t0_ns,
                windows.join(" ")
            );
        }
        if let Some(stalls) = &r.stalls {
            print_stalls(r, stalls);
        }
    }
}

/// A row's vCPU stalls and its latencies without the deltas they held.
fn print_stalls(r: &Row, stalls: &Stalls) {
    let ((n0, ms0), (n1, ms1)) = (stalls.of_cpu(0), stalls.of_cpu(1));
    let longest: Vec<String> = {
        let mut by_length = stalls.windows.clone();
        by_length.sort_by_key(|&(_, from, to)| std::cmp::Reverse(to - from));
        by_length.truncate(8);
        by_length.sort_by_key(|&(_, from, _)| from);
        by_length
            .iter()
            .map(|&(cpu, from, to)| {
                let at = from.saturating_sub(r.t0_ns) / 1_000_000;
                format!("cpu{cpu}@{at}:{:.1}", (to - from) as f64 / 1e6)
            })
            .collect()
    };
    println!(
        "  {} C={}: vCPU stalls: CPU 0 (load generator) {n0}, {ms0:.1} ms in all; CPU 1 (server) {n1}, {ms1:.1} ms; the longest (ms since the first client: ms) {}",
        r.server,
        r.clients,
        longest.join(" ")
    );
    println!(
        "  {} C={}: without the {} deltas in flight during a stall: p50 {:.3} p90 {:.3} p99 {:.3} p99.9 {:.3} max {:.1} ms",
        r.server,
        r.clients,
        stalls.held,
        stalls.latency_ms(0.5),
        stalls.latency_ms(0.9),
        stalls.latency_ms(0.99),
        stalls.latency_ms(0.999),
        stalls.latency_ms(1.0),
    );
}

fn verdict(ok: Option<bool>) -> &'static str {
    match ok {
        Some(true) => "PASS",
        Some(false) => "FAIL",
        None => "n/a",
    }
}

/// The targets: prints them and returns them as JSON.
fn targets(rows: &[Row], clients: &[usize]) -> Value {
    let row = |server: &str, c: usize| rows.iter().find(|r| r.server == server && r.clients == c);
    let mut out = Vec::new();
    println!();
    println!("targets:");
    for &c in clients {
        let Some(agent) = row("agent-server", c) else {
            continue;
        };
        for peer in ["node-ai7", "node-ai7-pipe"] {
            if let Some(node) = row(peer, c) {
                let ratio = agent.per_cpu_s() / node.per_cpu_s();
                let ok = ratio.is_finite().then_some(ratio >= TARGET_RATIO);
                println!(
                    "  C={c:>4}: deltas/CPU-s agent-server / {peer} = {:.0} / {:.0} = {ratio:.2}x (target >= {TARGET_RATIO}x): {}",
                    agent.per_cpu_s(),
                    node.per_cpu_s(),
                    verdict(ok)
                );
                out.push(
                    json!({"target": "deltas_per_cpu_s_ratio", "vs": peer, "clients": c,
                                "value": ratio, "limit": TARGET_RATIO, "pass": ok}),
                );
            }
        }
        for (server, what, target) in [
            (
                "agent-server-store",
                "the run store",
                "store_deltas_per_cpu_s_share",
            ),
            (
                "agent-server-otel",
                "export to a dead collector",
                "otel_deltas_per_cpu_s_share",
            ),
        ] {
            let Some(with) = row(server, c) else {
                continue;
            };
            let share = with.per_cpu_s() / agent.per_cpu_s();
            let ok = share.is_finite().then_some(share >= TARGET_SHARE);
            println!(
                "  C={c:>4}: deltas/CPU-s with {what} / without = {:.0} / {:.0} = {share:.3} (target >= {TARGET_SHARE}): {}",
                with.per_cpu_s(),
                agent.per_cpu_s(),
                verdict(ok)
            );
            out.push(json!({"target": target, "clients": c,
                            "value": share, "limit": TARGET_SHARE, "pass": ok}));
        }
        let kib = agent.kib_per_stream();
        let ok = kib.map(|k| k <= TARGET_KIB_PER_STREAM);
        println!(
            "  C={c:>4}: agent-server memory per open stream = {} KiB (target <= {TARGET_KIB_PER_STREAM} KiB): {}",
            fmt_opt(kib, 1),
            verdict(ok)
        );
        out.push(
            json!({"target": "kib_per_open_stream", "clients": c, "value": kib,
                        "limit": TARGET_KIB_PER_STREAM, "pass": ok}),
        );
        if c == 1000 {
            let p99 = agent.latency_ms(0.99);
            let ok = p99.is_finite().then_some(p99 <= TARGET_P99_MS);
            println!(
                "  C={c:>4}: agent-server p99 added latency = {p99:.3} ms (target <= {TARGET_P99_MS} ms): {}",
                verdict(ok)
            );
            out.push(json!({"target": "p99_ms", "clients": c, "value": p99,
                            "limit": TARGET_P99_MS, "pass": ok}));
        }
        if let Some(floor) = row("floor", c) {
            out.push(yardstick(agent, floor, row("node-ai7", c)));
        }
    }
    Value::Array(out)
}

/// The `floor` row beside `agent-server`'s (and Node's): what any server could
/// show on this machine. Not a target: a reading of the machine.
fn yardstick(agent: &Row, floor: &Row, node: Option<&Row>) -> Value {
    let c = agent.clients;
    let cost = floor.per_cpu_s() / agent.per_cpu_s();
    let node_ratio = node.map(|node| floor.per_cpu_s() / node.per_cpu_s());
    println!(
        "  C={c:>4}: (yardstick) agent-server's CPU per delta = {cost:.2}x the floor's; the floor's tail p99 {:.3} ms, p99.9 {:.3} ms{}",
        floor.latency_ms(0.99),
        floor.latency_ms(0.999),
        node_ratio.map_or_else(String::new, |r| format!(
            "; floor / node-ai7 = {r:.1}x (no server here can beat that ratio)"
        )),
    );
    json!({"reference": "floor", "clients": c, "agent_cpu_per_delta_over_floor": cost,
           "floor_p99_ms": floor.latency_ms(0.99), "floor_p999_ms": floor.latency_ms(0.999),
           "floor_over_node_ai7": node_ratio})
}

fn parse_args() -> Result<Option<Config>, String> {
    let mut config = Config {
        clients: vec![100, 1000],
        deltas: 200,
        interval_ms: 20,
        ramp: Duration::from_millis(1000),
        warmup: 50,
        servers: vec![
            Kind::Agent,
            Kind::AgentStore,
            Kind::AgentOtel,
            Kind::Node,
            Kind::NodePipe,
        ],
        node: std::env::var("RELAY_NODE").unwrap_or_else(|_| "node".into()),
        pin: false,
        keep_awake: false,
        watch_stalls: false,
        busy_client: false,
    };
    let mut serve_agent_mode = None;
    let mut floor = false;
    let mut args = std::env::args().skip(1);
    let number = |flag: &str, value: Option<String>| -> Result<u64, String> {
        value
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("{flag} needs a number"))
    };
    while let Some(arg) = args.next() {
        match arg.as_str() {
            // cargo bench passes --bench to harness = false targets.
            "--bench" => {}
            "--serve-agent" => serve_agent_mode = Some(Extra::None),
            "--pin" => config.pin = true,
            "--keep-awake" => config.keep_awake = true,
            "--spin" => spin(),
            "--watch-stalls" => config.watch_stalls = true,
            "--busy-client" => config.busy_client = true,
            "--watch-cpu" => watch_cpu(),
            "--serve-agent-store" => serve_agent_mode = Some(Extra::Store),
            "--serve-floor" => floor = true,
            "--serve-agent-otel" => {
                let url = args.next().ok_or("--serve-agent-otel needs a URL")?;
                serve_agent_mode = Some(Extra::Otel(url));
            }
            "--deltas" => config.deltas = number(&arg, args.next())?.max(1) as usize,
            "--interval-ms" => config.interval_ms = number(&arg, args.next())?,
            "--ramp-ms" => config.ramp = Duration::from_millis(number(&arg, args.next())?),
            "--warmup" => config.warmup = number(&arg, args.next())? as usize,
            "--clients" => {
                config.clients = args
                    .next()
                    .unwrap_or_default()
                    .split(',')
                    .map(|c| c.trim().parse::<usize>().ok().filter(|&c| c > 0))
                    .collect::<Option<Vec<_>>>()
                    .ok_or("--clients needs numbers, e.g. 100,1000")?;
            }
            "--servers" => {
                config.servers = args
                    .next()
                    .unwrap_or_default()
                    .split(',')
                    .map(|s| Kind::parse(s.trim()))
                    .collect::<Option<Vec<_>>>()
                    .ok_or(
                        "--servers takes agent-server,agent-server-store,agent-server-otel,node-ai7,node-ai7-pipe,floor",
                    )?;
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if config.watch_stalls && !config.pin {
        return Err("--watch-stalls needs --pin (it watches the two pinned CPUs)".into());
    }
    if config.busy_client && !config.pin {
        return Err("--busy-client needs --pin (it keeps the load generator's CPU busy)".into());
    }
    if floor {
        serve_floor(config.deltas, Duration::from_millis(config.interval_ms));
        return Ok(None);
    }
    if let Some(extra) = serve_agent_mode {
        serve_agent(
            config.deltas,
            Duration::from_millis(config.interval_ms),
            extra,
        );
        return Ok(None);
    }
    Ok(Some(config))
}

/// Raises the open-file limit to its hard limit (1,000 clients need 1,000+ sockets,
/// and the servers inherit the limit).
fn raise_nofile() -> Option<u64> {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let mut limit = getrlimit(Resource::Nofile);
    limit.current = limit.maximum;
    let _ = setrlimit(Resource::Nofile, limit);
    getrlimit(Resource::Nofile).current
}

fn main() {
    let config = match parse_args() {
        Ok(Some(config)) => config,
        Ok(None) => return,
        Err(e) => {
            eprintln!("relay: {e}");
            std::process::exit(2);
        }
    };
    let nofile = raise_nofile();
    let most = config.clients.iter().copied().max().unwrap_or(0);
    if let Some(n) = nofile
        && n < most as u64 + 64
    {
        eprintln!(
            "relay: RLIMIT_NOFILE is {n}; raise it (ulimit -n) above {}",
            most + 64
        );
        std::process::exit(2);
    }
    let mut servers = config.servers.clone();
    let mut skipped = Vec::new();
    let node = |k: &Kind| matches!(k, Kind::Node | Kind::NodePipe);
    if servers.iter().any(node)
        && let Some(why) = node_missing(&config)
    {
        eprintln!("relay: skipping the Node rows: {why}");
        skipped.push(why);
        servers.retain(|k| !node(k));
    }
    println!(
        "relay: {} deltas per stream, one every {} ms ({} B of text each), clients {:?} started over {} ms, warm-up {} streams; {} cores; RLIMIT_NOFILE {:?}",
        config.deltas,
        config.interval_ms,
        DELTA_TEXT_LEN,
        config.clients,
        config.ramp.as_millis(),
        config.warmup,
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        nofile,
    );
    if config.pin {
        pin_self();
    }
    // Held until the end; its stdin closes (and it exits) with this process.
    let _awake = (config.pin && config.keep_awake).then(keep_awake);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime for the clients");
    if config.busy_client {
        runtime.spawn(keep_polling());
    }
    let rows = runtime.block_on(async {
        let mut rows = Vec::new();
        for &clients in &config.clients {
            for &kind in &servers {
                let row = measure(kind, clients, &config).await;
                println!(
                    "  {} C={}: {} deltas, {:.2} CPU s, p99 {:.3} ms, {} errors",
                    row.server,
                    row.clients,
                    row.deltas,
                    row.cpu_s,
                    row.latency_ms(0.99),
                    row.errors.len()
                );
                rows.push(row);
            }
        }
        rows
    });
    print_table(&rows);
    let targets = targets(&rows, &config.clients);
    let report = json!({
        "bench": "relay",
        "deltas_per_stream": config.deltas,
        "interval_ms": config.interval_ms,
        "delta_text_bytes": DELTA_TEXT_LEN,
        "ramp_ms": config.ramp.as_millis() as u64,
        "warmup_streams": config.warmup,
        "pin": config.pin,
        "keep_awake": config.pin && config.keep_awake,
        "watch_stalls": config.watch_stalls,
        "busy_client": config.busy_client,
        "cores": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "skipped": skipped,
        "rows": rows.iter().map(Row::json).collect::<Vec<_>>(),
        "targets": targets,
    });
    println!();
    println!("relay-json: {report}");
}
