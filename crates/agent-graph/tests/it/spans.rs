//! Tracing: each tool call's log lines land in its own `tool_call` span, also when
//! the read-only calls of one turn run at once in one task; span fields carry the
//! run's correlation ids (the ingress request id included), sanitized and bounded.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_testing::{ScriptedModel, Turn};
use ai_core::{
    RunContext, ToolEffect,
    text::MAX_LOG_FIELD_CHARS,
    tool::{RegisteredTool, ToolCallContext, ToolExecutor, ToolFailure, ToolOutput},
};
use futures::future::BoxFuture;
use serde_json::{Value, json};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

use crate::support::{INGRESS_ID, Kit, RUN_ID, TRACE_ID, open_policy, request, run_to_end, spec};

type Fields = HashMap<String, String>;

/// One recorded log line: its message and fields, and every span it was in, root
/// first, with the fields each span was created with.
#[derive(Debug, Clone)]
struct Line {
    fields: Fields,
    spans: Vec<(String, Fields)>,
}

impl Line {
    fn message(&self) -> &str {
        self.fields.get("message").map_or("", String::as_str)
    }

    fn span(&self, name: &str) -> Option<&Fields> {
        self.spans
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, f)| f)
    }
}

#[derive(Default)]
struct FieldMap(Fields);

impl Visit for FieldMap {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

/// The fields a span was created with, kept in its extensions.
struct SpanFields(Fields);

/// A layer that records (span fields, event) pairs.
#[derive(Clone, Default)]
struct Recorder {
    lines: Arc<Mutex<Vec<Line>>>,
}

impl Recorder {
    fn lines(&self) -> Vec<Line> {
        self.lines.lock().unwrap().clone()
    }
}

/// The one recorder of this test binary, installed as the global subscriber.
///
/// A scoped subscriber (`set_default`) per test is flaky while other tests run on
/// other threads without one: tracing caches each callsite's interest globally, and a
/// callsite first hit on a thread with no subscriber can be cached as "never". A
/// global subscriber that records everything avoids that; each test picks its own
/// lines (by tool label or by its run's ingress id).
fn recorder() -> Recorder {
    static GLOBAL: std::sync::OnceLock<Recorder> = std::sync::OnceLock::new();
    GLOBAL
        .get_or_init(|| {
            let recorder = Recorder::default();
            tracing::subscriber::set_global_default(
                tracing_subscriber::registry().with(recorder.clone()),
            )
            .expect("no other global subscriber in this test binary");
            recorder
        })
        .clone()
}

impl<S> Layer<S> for Recorder
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = FieldMap::default();
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(SpanFields(fields.0));
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = FieldMap::default();
        event.record(&mut fields);
        let spans = ctx
            .event_scope(event)
            .map(|scope| {
                scope
                    .from_root()
                    .map(|span| {
                        let fields = span
                            .extensions()
                            .get::<SpanFields>()
                            .map(|f| f.0.clone())
                            .unwrap_or_default();
                        (span.name().to_owned(), fields)
                    })
                    .collect()
            })
            .unwrap_or_default();
        self.lines.lock().unwrap().push(Line {
            fields: fields.0,
            spans,
        });
    }
}

/// `core__log` (read_only): logs a line, sleeps `ms`, logs another line; both name
/// the `label` argument.
struct Log;

impl ToolExecutor for Log {
    fn execute(
        &self,
        _cx: ToolCallContext,
        args: Value,
    ) -> BoxFuture<'static, Result<ToolOutput, ToolFailure>> {
        Box::pin(async move {
            let label = args["label"].as_str().unwrap_or_default().to_owned();
            let ms = args["ms"].as_u64().unwrap_or(0);
            tracing::info!(label = %label, "tool line before");
            tokio::time::sleep(Duration::from_millis(ms)).await;
            tracing::info!(label = %label, "tool line after");
            Ok(ToolOutput::json(json!({"logged": label})))
        })
    }
}

fn log_tool() -> RegisteredTool {
    RegisteredTool {
        spec: spec(
            "log",
            ToolEffect::ReadOnly,
            json!({"type": "object", "required": ["label", "ms"], "additionalProperties": false,
                   "properties": {"label": {"type": "string"}, "ms": {"type": "integer"}}}),
        ),
        executor: Arc::new(Log),
    }
}

#[tokio::test(start_paused = true)]
async fn concurrent_tool_calls_log_into_their_own_spans() {
    let recorder = recorder();
    let kit = Kit::new();
    // Three read-only calls of one turn, run at once by one task, finishing in the
    // order b, c, a: each one's lines interleave with the others'.
    let model = ScriptedModel::new([
        Turn::new()
            .tool_call("call_a", "core__log", json!({"label": "a", "ms": 30}))
            .tool_call("call_b", "core__log", json!({"label": "b", "ms": 10}))
            .tool_call("call_c", "core__log", json!({"label": "c", "ms": 20})),
        Turn::text("logged"),
    ]);
    let deps = kit.deps_with_extra(&model, open_policy(), None, vec![log_tool()]);
    let (_, outcome) = run_to_end(request(), deps).await;
    outcome.unwrap();

    let lines: Vec<Line> = recorder
        .lines()
        .into_iter()
        .filter(|l| l.message().starts_with("tool line"))
        .filter(|l| ["a", "b", "c"].contains(&l.fields.get("label").map_or("", String::as_str)))
        .collect();
    assert_eq!(lines.len(), 6, "{lines:#?}");
    let order: Vec<String> = lines
        .iter()
        .map(|l| format!("{}:{}", l.fields["label"], l.message()))
        .collect();
    assert_eq!(
        order[3..],
        [
            "b:tool line after",
            "c:tool line after",
            "a:tool line after"
        ],
        "the calls overlapped"
    );
    for line in &lines {
        let label = &line.fields["label"];
        let call = line
            .span("tool_call")
            .unwrap_or_else(|| panic!("a tool line outside any tool_call span: {line:#?}"));
        assert_eq!(
            call["tool_call_id"],
            format!("call_{label}"),
            "tool {label}'s line landed in another call's span: {line:#?}"
        );
        // Exactly one tool_call span: no other call's span is stacked around it.
        let call_spans = line.spans.iter().filter(|(n, _)| n == "tool_call").count();
        assert_eq!(call_spans, 1, "{line:#?}");
        assert_eq!(call["tool"], "core__log");
        assert_eq!(call["run_id"], RUN_ID);
        assert_eq!(call["trace_id"], TRACE_ID);
        assert_eq!(call["ingress_request_id"], INGRESS_ID);
        let run = line.span("run").expect("inside the run span");
        assert_eq!(run["run_id"], RUN_ID);
        assert_eq!(run["ingress_request_id"], INGRESS_ID);
    }
}

#[tokio::test(start_paused = true)]
async fn span_fields_are_sanitized_and_bounded() {
    let recorder = recorder();
    let kit = Kit::new();
    let model = ScriptedModel::new([
        Turn::new().tool_call(
            "call\u{1b}[31m_\nx",
            "core__log",
            json!({"label": "x", "ms": 0}),
        ),
        Turn::new().tool_call("call_2", "core__no\r\nsuch", json!({})),
        Turn::text("ok"),
    ]);
    let deps = kit.deps_with_extra(&model, open_policy(), None, vec![log_tool()]);
    let long_ingress = format!("req\u{0}\u{7}{}", "é".repeat(300));
    let mut req = request();
    req.context = RunContext::new(RUN_ID, TRACE_ID).with_ingress_request_id(&long_ingress);
    let (events, outcome) = {
        let (events, outcome) = agent_graph::run(req, deps).into_parts();
        use futures::StreamExt;
        (events.collect::<Vec<_>>().await, outcome.await)
    };
    outcome.unwrap();
    assert_eq!(
        events[0].ingress_request_id.as_deref(),
        Some(long_ingress.as_str()),
        "events carry the id as given; only logs are sanitized"
    );

    // This run's lines: its `run` span carries the (sanitized) long ingress id.
    let lines: Vec<Line> = recorder
        .lines()
        .into_iter()
        .filter(|l| {
            l.span("run")
                .and_then(|run| run.get("ingress_request_id"))
                .is_some_and(|id| id.starts_with("reqéé"))
        })
        .collect();
    let tool_line = lines
        .iter()
        .find(|l| l.message() == "tool line before")
        .expect("the tool logged");
    let call = tool_line.span("tool_call").unwrap();
    assert_eq!(call["tool_call_id"], "call[31m_x");
    let ingress = &call["ingress_request_id"];
    assert!(ingress.starts_with("reqéé"), "{ingress}");
    assert_eq!(ingress.chars().count(), MAX_LOG_FIELD_CHARS + 1);
    assert!(ingress.ends_with('…'));
    assert_eq!(
        &tool_line.span("run").unwrap()["ingress_request_id"],
        ingress
    );
    // A model-chosen tool name reaches the span without its control characters.
    let unknown = lines
        .iter()
        .filter_map(|l| l.span("tool_call"))
        .find(|call| call["tool_call_id"] == "call_2")
        .expect("the unknown tool's call logged its failure");
    assert_eq!(unknown["tool"], "core__nosuch");
    for line in &lines {
        for (_, fields) in &line.spans {
            for value in fields.values() {
                assert!(!value.chars().any(char::is_control), "{value:?}");
                assert!(
                    value.chars().count() <= MAX_LOG_FIELD_CHARS + 1,
                    "{value:?}"
                );
            }
        }
    }
}
