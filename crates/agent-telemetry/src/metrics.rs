//! Metrics of the runs' model and tool calls, measured from the same `tracing`
//! spans that are exported as traces: when a `model_call` span closes, its
//! duration goes to `gen_ai.client.operation.duration` and its input and output
//! token counts to `gen_ai.client.token.usage` (the GenAI conventions'
//! histograms); when a `tool_call` span closes, its duration goes to
//! `agent.tool.duration` and one call to `agent.tool.calls`, by tool and outcome.
//! The chat server's traffic spans (agent-server's `traffic` module) give
//! `http.server.request.duration` (by method, route pattern and status) and
//! `agent.server.open_streams` (response streams open now).
//!
//! Attributes are low-cardinality names only (operation, models, tool, outcome,
//! error type): no ids, no content, no argument.

use std::collections::HashMap;
use std::fmt;
use std::time::Instant;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Histogram, Meter, UpDownCounter};
use tracing::Subscriber;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

/// The span of one model call.
const MODEL_SPAN: &str = "model_call";
/// The span of one tool call.
const TOOL_SPAN: &str = "tool_call";
/// The chat server's span of one routed request.
const REQUEST_SPAN: &str = "http_request";
/// The chat server's span of one open response stream.
const STREAM_SPAN: &str = "chat_stream";
/// The spans measured.
pub(crate) const MEASURED_SPANS: [&str; 4] = [MODEL_SPAN, TOOL_SPAN, REQUEST_SPAN, STREAM_SPAN];

/// The span fields metrics read.
const FIELDS: [&str; 11] = [
    "gen_ai.provider.name",
    "gen_ai.request.model",
    "gen_ai.response.model",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.tool.name",
    "agent.tool.outcome",
    "error.type",
    "http.request.method",
    "http.route",
    "http.response.status_code",
];

/// Boundaries of the duration histograms, in seconds (the conventions' advice).
const DURATION_BUCKETS: [f64; 14] = [
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];

/// Boundaries of the token histogram (the conventions' advice).
const TOKEN_BUCKETS: [f64; 14] = [
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0,
    16777216.0, 67108864.0,
];

/// The instruments the layer records to.
#[derive(Clone, Debug)]
pub(crate) struct Instruments {
    operation_duration: Histogram<f64>,
    token_usage: Histogram<u64>,
    tool_duration: Histogram<f64>,
    tool_calls: Counter<u64>,
    request_duration: Histogram<f64>,
    open_streams: UpDownCounter<i64>,
}

impl Instruments {
    /// The instruments, made by `meter`.
    pub(crate) fn new(meter: &Meter) -> Self {
        Self {
            operation_duration: meter
                .f64_histogram("gen_ai.client.operation.duration")
                .with_unit("s")
                .with_description("Duration of GenAI operations")
                .with_boundaries(DURATION_BUCKETS.to_vec())
                .build(),
            token_usage: meter
                .u64_histogram("gen_ai.client.token.usage")
                .with_unit("{token}")
                .with_description("Tokens used by GenAI operations")
                .with_boundaries(TOKEN_BUCKETS.to_vec())
                .build(),
            tool_duration: meter
                .f64_histogram("agent.tool.duration")
                .with_unit("s")
                .with_description("Duration of tool calls")
                .with_boundaries(DURATION_BUCKETS.to_vec())
                .build(),
            tool_calls: meter
                .u64_counter("agent.tool.calls")
                .with_unit("{call}")
                .with_description("Tool calls, by tool and outcome")
                .build(),
            request_duration: meter
                .f64_histogram("http.server.request.duration")
                .with_unit("s")
                .with_description(
                    "Duration of the chat server's HTTP requests, to the response's headers",
                )
                .with_boundaries(DURATION_BUCKETS.to_vec())
                .build(),
            open_streams: meter
                .i64_up_down_counter("agent.server.open_streams")
                .with_unit("{stream}")
                .with_description("The chat server's response streams open now")
                .build(),
        }
    }
}

/// The `tracing` layer that measures model and tool spans.
pub(crate) struct MetricsLayer {
    pub(crate) instruments: Instruments,
}

/// What a measured span recorded so far, and when it started.
struct Measured {
    started: Instant,
    fields: HashMap<&'static str, Value>,
}

/// One field's value.
enum Value {
    Text(String),
    Number(u64),
}

impl Visit for Measured {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.keep(field, Value::Text(value.to_owned()));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.keep(field, Value::Number(value));
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        if let Ok(value) = u64::try_from(value) {
            self.keep(field, Value::Number(value));
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.keep(field, Value::Text(format!("{value:?}")));
    }
}

impl Measured {
    fn keep(&mut self, field: &Field, value: Value) {
        if let Some(name) = FIELDS.iter().find(|name| **name == field.name()) {
            self.fields.insert(name, value);
        }
    }

    fn text(&self, name: &str) -> Option<String> {
        match self.fields.get(name)? {
            Value::Text(text) => Some(text.clone()),
            Value::Number(n) => Some(n.to_string()),
        }
    }

    fn number(&self, name: &str) -> Option<u64> {
        match self.fields.get(name)? {
            Value::Number(n) => Some(*n),
            Value::Text(text) => text.parse().ok(),
        }
    }

    /// `key = field` for each named field this span recorded.
    fn attributes(&self, names: &[(&'static str, &str)]) -> Vec<KeyValue> {
        names
            .iter()
            .filter_map(|(key, field)| {
                let value = self.text(field)?;
                Some(KeyValue::new(*key, value))
            })
            .collect()
    }
}

impl MetricsLayer {
    fn record_model_call(&self, measured: &Measured, seconds: f64) {
        let mut attributes = measured.attributes(&[
            ("gen_ai.provider.name", "gen_ai.provider.name"),
            ("gen_ai.request.model", "gen_ai.request.model"),
            ("gen_ai.response.model", "gen_ai.response.model"),
            ("error.type", "error.type"),
        ]);
        attributes.push(KeyValue::new("gen_ai.operation.name", "chat"));
        let instruments = &self.instruments;
        instruments.operation_duration.record(seconds, &attributes);
        for (kind, field) in [
            ("input", "gen_ai.usage.input_tokens"),
            ("output", "gen_ai.usage.output_tokens"),
        ] {
            if let Some(tokens) = measured.number(field) {
                let mut with_type = attributes.clone();
                with_type.push(KeyValue::new("gen_ai.token.type", kind));
                instruments.token_usage.record(tokens, &with_type);
            }
        }
    }

    fn record_tool_call(&self, measured: &Measured, seconds: f64) {
        let attributes = measured.attributes(&[
            ("gen_ai.tool.name", "gen_ai.tool.name"),
            ("agent.tool.outcome", "agent.tool.outcome"),
            ("error.type", "error.type"),
        ]);
        self.instruments.tool_duration.record(seconds, &attributes);
        self.instruments.tool_calls.add(1, &attributes);
    }

    fn record_request(&self, measured: &Measured, seconds: f64) {
        let mut attributes = measured.attributes(&[
            ("http.request.method", "http.request.method"),
            ("http.route", "http.route"),
        ]);
        if let Some(status) = measured.number("http.response.status_code") {
            attributes.push(KeyValue::new(
                "http.response.status_code",
                i64::try_from(status).unwrap_or(0),
            ));
        }
        self.instruments
            .request_duration
            .record(seconds, &attributes);
    }
}

impl<S> Layer<S> for MetricsLayer
where
    S: Subscriber + for<'span> LookupSpan<'span>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let name = attrs.metadata().name();
        if !MEASURED_SPANS.contains(&name) {
            return;
        }
        if name == STREAM_SPAN {
            self.instruments.open_streams.add(1, &[]);
        }
        let Some(span) = ctx.span(id) else {
            return;
        };
        let mut measured = Measured {
            started: Instant::now(),
            fields: HashMap::new(),
        };
        attrs.record(&mut measured);
        span.extensions_mut().insert(measured);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else {
            return;
        };
        if let Some(measured) = span.extensions_mut().get_mut::<Measured>() {
            values.record(measured);
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(&id) else {
            return;
        };
        let Some(measured) = span.extensions_mut().remove::<Measured>() else {
            return;
        };
        let seconds = measured.started.elapsed().as_secs_f64();
        match span.name() {
            MODEL_SPAN => self.record_model_call(&measured, seconds),
            TOOL_SPAN => self.record_tool_call(&measured, seconds),
            REQUEST_SPAN => self.record_request(&measured, seconds),
            _ => self.instruments.open_streams.add(-1, &[]),
        }
    }
}
