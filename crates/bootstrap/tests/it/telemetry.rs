#![cfg(feature = "telemetry")]
//! OpenTelemetry export end to end: `agent chat` with `OTEL_EXPORTER_OTLP_ENDPOINT`
//! pointing at a loopback OTLP/HTTP receiver that decodes what it is sent.
//! A two-turn tool run continuing a `TRACEPARENT` is one trace: the run's span,
//! child of the caller's span, with its model and tool spans under it, token
//! counts equal to the run's usage events; a tool argument off the tool's
//! allowlist reaches no exported byte, content capture on or not. `agent serve`
//! continues each request's `traceparent` header, or starts the trace its run's
//! events carry. A collector that never answers, or is not there, leaves the run
//! as it is without export, and the spans it could not take are reported.
//! [`phoenix`]: the same run seen in Arize Phoenix.

mod phoenix;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_testing::server::{OpenAiServer, Reply, data};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::metrics::v1::{Metric, metric::Data};
use opentelemetry_proto::tonic::trace::v1::Span;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

use crate::served::{Served, chat_body, stream_text};
use crate::support::{Home, eventually, finish, json_lines, signal, succeeded, turn_end};

const SECRET_KEY: &str = "sk-e2e-telemetry-key-0123456789";
/// A value the model puts in an argument the tool's allowlist leaves out.
const SECRET_ARG: &str = "SECRET-ARG-7f3e9a1c55";
pub(crate) const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
pub(crate) const PARENT_ID: &str = "00f067aa0ba902b7";

/// Every request a receiver was sent: its path and body.
type Bodies = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// A loopback OTLP/HTTP receiver: every request it was sent.
#[derive(Clone, Default)]
pub(crate) struct Receiver {
    bodies: Bodies,
}

impl Receiver {
    /// Starts the receiver; its base URL (`http://127.0.0.1:PORT`).
    pub(crate) async fn start(&self) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let bodies = Arc::clone(&self.bodies);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve_connection(stream, Arc::clone(&bodies)));
            }
        });
        format!("http://{addr}")
    }

    /// The bodies sent to `path`.
    fn bodies(&self, path: &str) -> Vec<Vec<u8>> {
        let bodies = self.bodies.lock().unwrap();
        bodies
            .iter()
            .filter(|(to, _)| to == path)
            .map(|(_, body)| body.clone())
            .collect()
    }

    /// Each body sent to `path` decoded as an `E` export (`what` names it in
    /// the failure), and what `items` takes from it, in order.
    fn decoded<E, T>(&self, path: &str, what: &str, items: impl Fn(E) -> Vec<T>) -> Vec<T>
    where
        E: prost::Message + Default,
    {
        self.bodies(path)
            .iter()
            .flat_map(|body| {
                let export = E::decode(body.as_slice());
                items(export.unwrap_or_else(|e| panic!("{what}: {e:?}")))
            })
            .collect()
    }

    pub(crate) fn spans(&self) -> Vec<Span> {
        let what = "an OTLP protobuf export";
        self.decoded("/v1/traces", what, |export: ExportTraceServiceRequest| {
            let scopes = export
                .resource_spans
                .into_iter()
                .flat_map(|r| r.scope_spans);
            scopes.flat_map(|scope| scope.spans).collect()
        })
    }

    fn metrics(&self) -> Vec<Metric> {
        let what = "an OTLP protobuf metrics export";
        self.decoded(
            "/v1/metrics",
            what,
            |export: ExportMetricsServiceRequest| {
                let scopes = export
                    .resource_metrics
                    .into_iter()
                    .flat_map(|r| r.scope_metrics);
                scopes.flat_map(|scope| scope.metrics).collect()
            },
        )
    }

    fn all_bytes(&self) -> Vec<u8> {
        let bodies = self.bodies.lock().unwrap();
        bodies.iter().flat_map(|(_, body)| body.clone()).collect()
    }
}

/// Answers HTTP/1.1 requests on one connection with an empty 200, keeping
/// their paths and bodies.
async fn serve_connection(stream: tokio::net::TcpStream, bodies: Bodies) {
    let mut reader = BufReader::new(stream);
    loop {
        let mut length = 0usize;
        let mut line = String::new();
        let mut path = None;
        loop {
            line.clear();
            if reader.read_line(&mut line).await.unwrap_or(0) == 0 {
                return;
            }
            if line == "\r\n" && path.is_some() {
                break;
            }
            if path.is_none() {
                path = Some(line.split_whitespace().nth(1).unwrap_or("").to_owned());
                continue;
            }
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).await.is_err() {
            return;
        }
        bodies
            .lock()
            .unwrap()
            .push((path.take().unwrap_or_default(), body));
        let response =
            "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
        if reader
            .get_mut()
            .write_all(response.as_bytes())
            .await
            .is_err()
        {
            return;
        }
    }
}

/// First turn: one `core__memory_read` call whose `query` (not on the tool's
/// argument allowlist) holds the secret.
fn tool_call_turn() -> Vec<String> {
    let arguments = serde_json::to_string(&format!(r#"{{"query":"{SECRET_ARG}"}}"#)).unwrap();
    let call = data(&format!(
        r#"{{"id":"t1","object":"chat.completion.chunk","choices":[{{"index":0,"delta":{{"role":"assistant","tool_calls":[{{"index":0,"id":"call_tel_1","type":"function","function":{{"name":"core__memory_read","arguments":{arguments}}}}}]}},"finish_reason":null}}]}}"#
    ));
    std::iter::once(call)
        .chain(turn_end("t1", "tool_calls", (41, 9)))
        .collect()
}

/// How long the answer turn takes to stream, at least.
const ANSWER_STREAM: Duration = Duration::from_millis(200);

fn answer_turn() -> Vec<String> {
    let text = data(
        r#"{"id":"t2","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"Nothing is stored."},"finish_reason":null}]}"#,
    );
    std::iter::once(text)
        .chain(turn_end("t2", "stop", (77, 5)))
        .collect()
}

fn attribute<'a>(span: &'a Span, key: &str) -> Option<&'a AnyValue> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| v.value.as_ref())
}

fn int_attribute(span: &Span, key: &str) -> Option<i64> {
    match attribute(span, key)? {
        AnyValue::IntValue(n) => Some(*n),
        AnyValue::StringValue(s) => s.parse().ok(),
        _ => None,
    }
}

fn str_attribute<'a>(span: &'a Span, key: &str) -> Option<&'a str> {
    match attribute(span, key)? {
        AnyValue::StringValue(s) => Some(s),
        _ => None,
    }
}

/// Runs the two-turn tool run with export on; the receiver and the run's events.
async fn exported_run(content: bool) -> (Receiver, Vec<serde_json::Value>) {
    let receiver = Receiver::default();
    let endpoint = receiver.start().await;
    let config = content.then_some("[telemetry]\ncontent = true\n");
    let events = traced_tool_run(&[("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)], config).await;
    (receiver, events)
}

/// The two-turn tool run through `agent chat --json`, continuing the trace
/// `TRACEPARENT` names, with `env` set and `config` (trusted) as its
/// `agent.toml`; the run's events.
async fn traced_tool_run(env: &[(&str, &str)], config: Option<&str>) -> Vec<serde_json::Value> {
    let home = Home::new(SECRET_KEY);
    if let Some(config) = config {
        home.trust_config(config).await;
    }
    let traceparent = format!("00-{TRACE_ID}-{PARENT_ID}-01");
    let mut env = env.to_vec();
    env.extend([
        ("OTEL_SERVICE_NAME", "agent-e2e"),
        ("TRACEPARENT", &traceparent),
    ]);
    let finished = tool_run(&home, &env).await;
    let stderr = finished.stderr;
    assert!(!stderr.contains("could not be exported"), "{stderr}");
    json_lines(&finished.stdout)
}

/// What one `agent chat --json` of the two-turn tool run gave.
struct Finished {
    stdout: String,
    stderr: String,
    took: Duration,
}

/// The two-turn tool run through `agent chat --json` in `home`, with `env`
/// set; it exits 0.
async fn tool_run(home: &Home, env: &[(&str, &str)]) -> Finished {
    // The answer streams for at least ANSWER_STREAM (a pause before each of
    // its four chunks), so a model span that ends when its stream does shows it.
    let answer = Reply::sse(answer_turn()).paced(ANSWER_STREAM / 4);
    let server = OpenAiServer::start([Reply::sse(tool_call_turn()), answer])
        .await
        .unwrap();
    let base_url = server.base_url();
    let mut command = home.command(
        Some(&base_url),
        &["chat", "--json", "What do you remember?"],
    );
    command.envs(env.iter().copied());
    let started = Instant::now();
    let output = finish(&mut command).await;
    let took = started.elapsed();
    let (stdout, stderr) = succeeded(output);
    Finished {
        stdout,
        stderr,
        took,
    }
}

/// The (input, output) tokens of each usage event, in order.
fn usage_of(events: &[serde_json::Value]) -> Vec<(i64, i64)> {
    events
        .iter()
        .filter(|e| e["type"] == "usage_report")
        .map(|e| {
            (
                e["prompt_tokens"].as_i64().unwrap(),
                e["completion_tokens"].as_i64().unwrap(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telemetry_a_tool_run_is_one_trace_continuing_the_callers() {
    let (receiver, events) = exported_run(false).await;
    let spans = receiver.spans();
    let trace_id = hex_of(TRACE_ID);
    assert!(!spans.is_empty(), "nothing was exported");
    for span in &spans {
        assert_eq!(span.trace_id, trace_id, "span {} left the trace", span.name);
    }
    let by_name: HashMap<&str, Vec<&Span>> = spans.iter().fold(HashMap::new(), |mut map, span| {
        map.entry(span.name.as_str()).or_default().push(span);
        map
    });
    let runs = &by_name["invoke_agent chat"];
    assert_eq!(runs.len(), 1, "one run span: {:?}", by_name.keys());
    let run = runs[0];
    assert_eq!(
        run.parent_span_id,
        hex_of(PARENT_ID),
        "the caller's span is the run's parent"
    );
    assert_eq!(
        str_attribute(run, "gen_ai.operation.name"),
        Some("invoke_agent")
    );
    assert_eq!(str_attribute(run, "gen_ai.agent.name"), Some("chat"));

    let models = &by_name["chat e2e-model"];
    assert_eq!(models.len(), 2, "two model calls");
    for model in models {
        assert_eq!(str_attribute(model, "gen_ai.provider.name"), Some("openai"));
    }
    let tools = &by_name["execute_tool core__memory_read"];
    assert_eq!(tools.len(), 1, "one tool call");
    for child in models.iter().chain(tools.iter()) {
        assert_eq!(
            child.parent_span_id, run.span_id,
            "{} is the run's child",
            child.name
        );
    }
    let tool = tools[0];
    assert_eq!(
        str_attribute(tool, "gen_ai.tool.call.id"),
        Some("call_tel_1")
    );
    assert_eq!(str_attribute(tool, "agent.tool.effect"), Some("read_only"));
    assert_eq!(
        str_attribute(tool, "agent.tool.policy_decision"),
        Some("allow")
    );
    assert!(str_attribute(tool, "agent.tool.outcome").is_some());

    // Token counts equal the run's usage events, turn by turn.
    let usage = usage_of(&events);
    let mut models = models.clone();
    models.sort_by_key(|span| span.start_time_unix_nano);
    let exported: Vec<(i64, i64)> = models
        .iter()
        .map(|span| {
            (
                int_attribute(span, "gen_ai.usage.input_tokens").unwrap(),
                int_attribute(span, "gen_ai.usage.output_tokens").unwrap(),
            )
        })
        .collect();
    assert_eq!(exported, usage);
    assert_eq!(usage, [(41, 9), (77, 5)]);
    // Each model span names the response the provider sent (its chunks' `id`).
    let ids: Vec<Option<&str>> = models
        .iter()
        .map(|span| str_attribute(span, "gen_ai.response.id"))
        .collect();
    assert_eq!(ids, [Some("t1"), Some("t2")]);
    // A model span lasts until its stream ends, not just until the call starts.
    let answering = models[1];
    let lasted = answering.end_time_unix_nano - answering.start_time_unix_nano;
    assert!(
        lasted >= ANSWER_STREAM.as_nanos() as u64,
        "the answer's span lasted {lasted} ns"
    );
    assert!(!contains(&receiver.all_bytes(), SECRET_ARG.as_bytes()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telemetry_an_argument_off_the_allowlist_is_never_exported_even_with_content_on() {
    let (receiver, events) = exported_run(true).await;
    let spans = receiver.spans();
    let tool = spans
        .iter()
        .find(|span| span.name == "execute_tool core__memory_read")
        .expect("the tool's span");
    // Content is on: the redacted view is there, the secret is not.
    assert!(attribute(tool, "gen_ai.tool.call.arguments").is_some());
    assert!(
        spans
            .iter()
            .any(|span| attribute(span, "gen_ai.output.messages").is_some())
    );
    assert!(
        events
            .iter()
            .any(|e| e.to_string().contains("core__memory_read")),
        "the run called the tool"
    );
    assert!(
        !contains(&receiver.all_bytes(), SECRET_ARG.as_bytes()),
        "the secret reached an exported span"
    );
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

pub(crate) fn hex_of(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
        .collect()
}

/// Polls `receiver` (every 100 ms, at most 30 s: the batch goes out on its
/// schedule) until its spans past the first `after` hold one named `name`;
/// those spans.
pub(crate) async fn spans_once(receiver: &Receiver, after: usize, name: &str) -> Vec<Span> {
    for _ in 0..300 {
        let spans = receiver.spans().split_off(after);
        if spans.iter().any(|span| span.name == name) {
            return spans;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "no {name} span was exported: {:?}",
        names(&receiver.spans().split_off(after))
    );
}

fn names(spans: &[Span]) -> Vec<&str> {
    spans.iter().map(|span| span.name.as_str()).collect()
}

/// `agent serve` with `[telemetry] endpoint` at `endpoint` (and the keys
/// `more`), its model at `model`.
async fn serve_exporting(home: &Home, model: &str, endpoint: &str, more: &str) -> Served {
    home.trust_config(&format!("[telemetry]\nendpoint = \"{endpoint}\"\n{more}"))
        .await;
    Served::spawn(home.command(Some(model), &["serve", "--port", "0"])).await
}

/// The events of chat `chat`'s latest run (as JSON), once all are stored (its
/// `done` among them).
async fn run_events(home: &Home, chat: &str) -> Vec<serde_json::Value> {
    let store = home.store().await;
    let rows = store.account("local");
    let run = eventually(
        || async { rows.latest_run(chat).await.unwrap() },
        Option::is_some,
    )
    .await
    .expect("the run is stored");
    // The recorder writes in batches, after the stream may have ended.
    let events = eventually(
        || async {
            let stored = rows.events(&run.run.id, None).await.unwrap();
            stored
                .iter()
                .map(|e| serde_json::to_value(&e.event).unwrap())
                .collect::<Vec<_>>()
        },
        |events| events.iter().any(|e| e["type"] == "done"),
    )
    .await;
    assert!(
        events.iter().any(|e| e["type"] == "done"),
        "the run's events are stored: {events:?}"
    );
    events
}

/// The trace id the events of chat `chat`'s latest run carry.
pub(crate) async fn events_trace_id(home: &Home, chat: &str) -> String {
    let events = run_events(home, chat).await;
    let ids: Vec<String> = events
        .iter()
        .map(|e| e["trace_id"].as_str().unwrap().to_owned())
        .collect();
    assert!(!ids.is_empty(), "the run has events");
    assert!(ids.iter().all(|id| *id == ids[0]), "one trace id: {ids:?}");
    ids[0].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telemetry_serve_continues_the_requests_traceparent_or_starts_the_runs_trace() {
    let receiver = Receiver::default();
    let endpoint = receiver.start().await;
    let model = OpenAiServer::start([
        Reply::sse(tool_call_turn()),
        Reply::sse(answer_turn()),
        Reply::text("A new trace."),
    ])
    .await
    .unwrap();
    let home = Home::new(SECRET_KEY);
    let mut served = serve_exporting(&home, &model.base_url(), &endpoint, "").await;

    let traced = served
        .post_chat(&chat_body("chat-traced", "What do you remember?"))
        .header("traceparent", format!("00-{TRACE_ID}-{PARENT_ID}-01"))
        .header("tracestate", "vendor=abc");
    let answer = crate::served::body_text(traced).await;
    assert_eq!(stream_text(&answer), "Nothing is stored.", "{answer}");
    let spans = spans_once(&receiver, 0, "invoke_agent chat").await;
    let run = spans
        .iter()
        .find(|span| span.name == "invoke_agent chat")
        .unwrap();
    assert_eq!(run.trace_id, hex_of(TRACE_ID), "the caller's trace");
    assert_eq!(run.parent_span_id, hex_of(PARENT_ID), "the caller's span");
    assert_eq!(run.trace_state, "vendor=abc", "the caller's tracestate");
    // The model server was told which span called it, and the caller's state.
    let calls = model.requests();
    let model_spans: Vec<&Span> = spans
        .iter()
        .filter(|span| span.name.starts_with("chat "))
        .collect();
    for call in &calls[..2] {
        let parent = call.header("traceparent").expect("a traceparent");
        let span_id = parent.split('-').nth(2).unwrap();
        assert!(parent.starts_with(&format!("00-{TRACE_ID}-")), "{parent}");
        assert!(
            model_spans
                .iter()
                .any(|span| span.span_id == hex_of(span_id)),
            "{parent} names a model call's span"
        );
        assert_eq!(call.header("tracestate"), Some("vendor=abc"));
    }
    let children: Vec<&Span> = spans
        .iter()
        .filter(|span| span.parent_span_id == run.span_id)
        .collect();
    assert_eq!(
        names(&spans).len(),
        4,
        "run, two model calls, one tool call: {:?}",
        names(&spans)
    );
    assert_eq!(children.len(), 3, "{:?}", names(&spans));
    assert_eq!(events_trace_id(&home, "chat-traced").await, TRACE_ID);

    // No header: a new trace, the one the run's events carry.
    let before = receiver.spans().len();
    let answer = crate::served::body_text(served.post_chat(&chat_body("chat-new", "Hi"))).await;
    assert_eq!(stream_text(&answer), "A new trace.", "{answer}");
    let trace_id = events_trace_id(&home, "chat-new").await;
    assert_ne!(trace_id, TRACE_ID);
    let fresh = spans_once(&receiver, before, "invoke_agent chat").await;
    let run = fresh
        .iter()
        .find(|span| span.name == "invoke_agent chat")
        .unwrap_or_else(|| panic!("the second run's span: {:?}", names(&fresh)));
    assert_eq!(run.trace_id, hex_of(&trace_id), "the events' trace id");
    assert!(run.parent_span_id.is_empty(), "a root span");
    assert!(
        !contains(&receiver.all_bytes(), SECRET_ARG.as_bytes()),
        "the secret reached an exported span"
    );

    // Stopped as an operator stops it, the server flushes its metrics: its
    // requests by route and status, and no stream left open.
    signal(&served.child, "INT");
    let stopped = tokio::time::timeout(Duration::from_secs(30), served.child.wait()).await;
    assert!(stopped.is_ok(), "agent serve stops on SIGINT");
    let metrics = eventually(
        || async { receiver.metrics() },
        |metrics| {
            metrics
                .iter()
                .any(|m| m.name == "http.server.request.duration")
        },
    )
    .await;
    let (chats, _) = histogram(
        &metrics,
        "http.server.request.duration",
        ("http.route", "/api/chat"),
    );
    assert_eq!(chats, 2, "two chat requests measured");
    let open: Vec<i64> = metrics
        .iter()
        .filter(|metric| metric.name == "agent.server.open_streams")
        .filter_map(|metric| match &metric.data {
            Some(Data::Sum(sum)) => sum.data_points.last().map(|point| match point.value {
                Some(opentelemetry_proto::tonic::metrics::v1::number_data_point::Value::AsInt(
                    n,
                )) => n,
                _ => -1,
            }),
            _ => None,
        })
        .collect();
    assert_eq!(open.last(), Some(&0), "every stream closed: {open:?}");
}

/// A loopback port that accepts connections and never answers on them.
async fn black_hole() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = listener.accept().await {
            held.push(stream);
        }
    });
    format!("http://{addr}")
}

/// A loopback address nothing listens on.
fn nobody_listening() -> String {
    format!("http://127.0.0.1:{}", crate::support::free_port())
}

/// The two-turn tool run through `agent chat`, exporting to `endpoint` (none:
/// export off) with a two-second export timeout.
async fn run_with_collector(endpoint: Option<&str>) -> Finished {
    let env = match endpoint {
        Some(endpoint) => vec![
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "2000"),
        ],
        None => Vec::new(),
    };
    tool_run(&Home::new(SECRET_KEY), &env).await
}

/// The answer's text in the events `stdout` holds.
fn answer_of(stdout: &str) -> String {
    json_lines(stdout)
        .iter()
        .filter(|e| e["type"] == "text_delta")
        .filter_map(|e| e["delta"].as_str().map(str::to_owned))
        .collect()
}

/// The count in `agent: warning: N spans could not be exported` (or the
/// shutdown's `(N spans not exported)`), when there is one.
fn reported_lost(stderr: &str) -> Option<u64> {
    stderr.lines().find_map(|line| {
        let before = line
            .split_once(" spans could not be exported")
            .or_else(|| line.split_once(" spans not exported"))?
            .0;
        before
            .rsplit(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    })
}

/// The count in `..., N metric exports failed` (the warning at exit or the
/// shutdown's error), when there is one.
fn reported_failed_metric_exports(stderr: &str) -> Option<u64> {
    stderr.lines().find_map(|line| {
        let before = line.split_once(" metric exports failed")?.0;
        before
            .rsplit(|c: char| !c.is_ascii_digit())
            .next()?
            .parse()
            .ok()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telemetry_a_collector_that_never_answers_or_is_not_there_leaves_the_run_as_it_is() {
    let off = run_with_collector(None).await;
    let answer = answer_of(&off.stdout);
    assert_eq!(answer, "Nothing is stored.", "{}", off.stderr);
    assert_eq!(reported_lost(&off.stderr), None, "{}", off.stderr);
    for endpoint in [black_hole().await, nobody_listening()] {
        let on = run_with_collector(Some(&endpoint)).await;
        assert_eq!(answer_of(&on.stdout), answer, "{endpoint}: {}", on.stderr);
        let lost = reported_lost(&on.stderr)
            .unwrap_or_else(|| panic!("{endpoint}: no lost spans reported: {}", on.stderr));
        assert_eq!(
            lost, 4,
            "{endpoint}: run, two model calls, a tool call: {}",
            on.stderr
        );
        // The metrics of the run go in one export at shutdown (the period is
        // longer than the run): it fails, and is counted.
        assert_eq!(
            reported_failed_metric_exports(&on.stderr),
            Some(1),
            "{endpoint}: {}",
            on.stderr
        );
        // Shutdown waits one export timeout (2 s) and a second at most: the
        // run itself is not held up. Generous slack for a loaded machine.
        let bound = off.took + Duration::from_secs(3) + Duration::from_secs(5);
        assert!(
            on.took < bound,
            "{endpoint}: took {:?}, export off {:?}",
            on.took,
            off.took
        );
    }
}

/// A data point's attribute `key`, as text.
fn point_attribute<'a>(
    attributes: &'a [opentelemetry_proto::tonic::common::v1::KeyValue],
    key: &str,
) -> Option<&'a str> {
    match attributes
        .iter()
        .find(|kv| kv.key == key)?
        .value
        .as_ref()?
        .value
        .as_ref()?
    {
        AnyValue::StringValue(s) => Some(s),
        _ => None,
    }
}

/// The (count, sum) of histogram `name`'s points whose attribute `key` is `value`.
fn histogram(metrics: &[Metric], name: &str, (key, value): (&str, &str)) -> (u64, f64) {
    metrics
        .iter()
        .filter(|metric| metric.name == name)
        .filter_map(|metric| match &metric.data {
            Some(Data::Histogram(histogram)) => Some(histogram.data_points.iter()),
            _ => None,
        })
        .flatten()
        .filter(|point| point_attribute(&point.attributes, key) == Some(value))
        .fold((0, 0.0), |(count, sum), point| {
            (count + point.count, sum + point.sum.unwrap_or(0.0))
        })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telemetry_metrics_count_tokens_durations_and_tool_outcomes() {
    let (receiver, events) = exported_run(false).await;
    let metrics = receiver.metrics();
    let names: Vec<&str> = metrics.iter().map(|m| m.name.as_str()).collect();
    let usage = usage_of(&events);
    let input: i64 = usage.iter().map(|(input, _)| input).sum();
    let output: i64 = usage.iter().map(|(_, output)| output).sum();
    let tokens = "gen_ai.client.token.usage";
    assert_eq!(
        histogram(&metrics, tokens, ("gen_ai.token.type", "input")),
        (2, input as f64),
        "{names:?}"
    );
    assert_eq!(
        histogram(&metrics, tokens, ("gen_ai.token.type", "output")),
        (2, output as f64)
    );
    let (calls, seconds) = histogram(
        &metrics,
        "gen_ai.client.operation.duration",
        ("gen_ai.request.model", "e2e-model"),
    );
    assert_eq!(calls, 2, "two model calls timed: {names:?}");
    let by_provider = histogram(
        &metrics,
        "gen_ai.client.operation.duration",
        ("gen_ai.provider.name", "openai"),
    );
    assert_eq!(by_provider.0, 2, "by provider: {names:?}");
    assert!(seconds > 0.0);
    let tool = ("gen_ai.tool.name", "core__memory_read");
    assert_eq!(histogram(&metrics, "agent.tool.duration", tool).0, 1);
    let outcomes: Vec<(&str, i64)> = metrics
        .iter()
        .filter(|metric| metric.name == "agent.tool.calls")
        .filter_map(|metric| match &metric.data {
            Some(Data::Sum(sum)) => Some(sum.data_points.iter()),
            _ => None,
        })
        .flatten()
        .map(|point| {
            let outcome = point_attribute(&point.attributes, "agent.tool.outcome");
            let count = match point.value {
                Some(opentelemetry_proto::tonic::metrics::v1::number_data_point::Value::AsInt(
                    n,
                )) => n,
                _ => -1,
            };
            (outcome.unwrap_or(""), count)
        })
        .collect();
    assert_eq!(outcomes, [("ok", 1)], "{names:?}");
    assert!(!contains(&receiver.all_bytes(), SECRET_ARG.as_bytes()));
}
