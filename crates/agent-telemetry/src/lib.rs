//! OpenTelemetry export of runs: the GenAI spans agent-graph and ai-core write
//! with plain `tracing` (a run's `invoke_agent`, each model call's `chat`, each
//! tool call's `execute_tool`) sent to a collector over OTLP/HTTP (protobuf).
//!
//! What it owns:
//! - [`Telemetry`]: the tracer provider and its exporter. [`Telemetry::start`]
//!   reads a [`TelemetryConfig`] (with the `OTEL_EXPORTER_OTLP_*` and
//!   `OTEL_SERVICE_NAME` variables the caller looked up applied through
//!   [`TelemetryConfig::with_env`]: this crate reads no environment itself);
//!   [`Telemetry::layer`] is the `tracing` layer to put on a subscriber
//!   ([`install`] does it for a subscriber the caller built); dropping it, or
//!   [`Telemetry::shutdown`], flushes what is queued.
//! - the trace a run joins: [`Telemetry::start`] installs an
//!   [`ai_core::trace::SpanLinker`] that gives each run's span the caller's span
//!   (from the run's [`ai_core::RunContext`], a W3C `traceparent`) as its parent,
//!   or starts a new trace whose id is the run's trace id.
//! - metrics measured from the same spans (`gen_ai.client.operation.duration`,
//!   `gen_ai.client.token.usage`, tool call duration and outcome counts),
//!   exported over OTLP/HTTP beside the spans unless
//!   [`TelemetryConfig::metrics`] is off.
//! - export that never blocks a run: a bounded queue and a background thread;
//!   spans that find the queue full are dropped and counted
//!   ([`Telemetry::lost_spans`]), and so are failed metric exports
//!   ([`Telemetry::failed_metric_exports`]), each with a warning.
//!
//! What only reaches a span: the layer exports the spans named above and the
//! events inside them from ai-core and agent-graph only (approvals, pauses,
//! failures), never another crate's spans or logs. Tool arguments and results
//! appear only as the redacted views events carry, and only with
//! [`TelemetryConfig::capture_content`] on; raw values never.
//!
//! agent-telemetry depends on ai-core and client-tls only. It must not depend on agent-graph, the wires, the host tools or the composition
//! root: it sees a run only through `tracing` and ai-core's trace seam. It speaks
//! HTTP with the workspace's reqwest over client-tls (rustls); no gRPC.

mod config;
mod export;
mod link;
mod metrics;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use opentelemetry::KeyValue;
use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider};
use tracing::Subscriber;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::FilterFn;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;

pub use config::{
    DEFAULT_SERVICE_NAME, ENV_ENDPOINT, ENV_HEADERS, ENV_METRICS_ENDPOINT, ENV_METRICS_EXPORTER,
    ENV_SDK_DISABLED, ENV_SERVICE_NAME, ENV_TIMEOUT, ENV_TRACES_ENDPOINT, ENV_TRACES_HEADERS,
    ENV_TRACES_TIMEOUT, TelemetryConfig, parse_headers,
};

/// The tracing spans that are exported.
pub const EXPORTED_SPANS: [&str; 4] = ["run", "subagent_run", "model_call", "tool_call"];

/// The crates whose spans and events are exported (tracing targets, by prefix).
const EXPORTED_TARGETS: [&str; 2] = ["ai_core", "agent_graph"];

/// Why telemetry could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TelemetryError {
    /// The TLS configuration of the HTTP client.
    #[error("telemetry: TLS: {0}")]
    Tls(String),
    /// The HTTP client or the exporter could not be built (a malformed endpoint).
    #[error("telemetry: cannot build the exporter: {0}")]
    Exporter(String),
    /// Shutting down did not finish cleanly (in time, or an export failed).
    #[error(
        "telemetry: shutdown: {reason} ({} spans not exported, {} metric exports failed)",
        unexported.spans,
        unexported.metric_exports
    )]
    Shutdown {
        /// What went wrong.
        reason: String,
        /// What did not reach the collector.
        unexported: Unexported,
    },
}

/// What did not reach the collector over an exporter's life.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Unexported {
    /// Spans dropped (the queue was full), lost (an export failed) or still
    /// waiting when the time was up.
    pub spans: u64,
    /// Metric exports that failed (each one period's data points).
    pub metric_exports: u64,
}

impl Unexported {
    /// Whether everything reached the collector.
    pub fn is_nothing(&self) -> bool {
        self.spans == 0 && self.metric_exports == 0
    }
}

/// A running exporter. Dropping it flushes and shuts it down.
#[derive(Debug)]
pub struct Telemetry {
    provider: SdkTracerProvider,
    meters: Option<(SdkMeterProvider, metrics::Instruments)>,
    tracer: link::RunTracer,
    counts: Arc<export::Counts>,
    export_timeout: Duration,
}

/// What [`Telemetry::shutdown`] may take beyond one export timeout.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(1);

impl Telemetry {
    /// Starts exporting as `config` says; `Ok(None)` when it names no endpoint
    /// (export off). Also installs the run span linker and, when configured,
    /// turns content capture on. Call it outside an async context (it builds a
    /// blocking HTTP client), or inside one through `spawn_blocking`.
    pub fn start(config: &TelemetryConfig) -> Result<Option<Self>, TelemetryError> {
        let Some(url) = config.traces_url() else {
            return Ok(None);
        };
        let resource = Resource::builder_empty()
            .with_attributes([KeyValue::new("service.name", config.service_name.clone())])
            .build();
        let counts = Arc::new(export::Counts::default());
        let provider = span_provider(config, url, &counts, resource.clone())?;
        let meters = match config.metrics_url() {
            Some(url) => {
                let meters = meter_provider(config, url, &counts, resource)?;
                let instruments = metrics::Instruments::new(&meters.meter("agent"));
                Some((meters, instruments))
            }
            None => None,
        };
        let tracer = link::RunTracer(provider.tracer("agent"));
        ai_core::trace::install_span_linker(Box::new(link::Linker));
        if config.capture_content {
            ai_core::trace::set_capture_content(true);
        }
        Ok(Some(Self {
            provider,
            meters,
            tracer,
            counts,
            export_timeout: config.export_timeout,
        }))
    }

    /// The `tracing` layer that exports the run's spans through this exporter,
    /// for a subscriber that keeps span data (`tracing_subscriber::registry()`).
    pub fn layer<S>(&self) -> impl Layer<S>
    where
        S: Subscriber + for<'span> LookupSpan<'span>,
    {
        let metrics = self.meters.as_ref().map(|(_, instruments)| {
            metrics::MetricsLayer {
                instruments: instruments.clone(),
            }
            .with_filter(FilterFn::new(measured))
        });
        tracing_opentelemetry::layer()
            .with_tracer(self.tracer.clone())
            .with_location(false)
            .with_threads(false)
            .with_target(false)
            // Nothing on every enter and exit of a span (a run's futures enter
            // theirs at every poll, once per delta or more): no busy/idle
            // timing, and no OpenTelemetry context made current (nothing here
            // reads it: outgoing requests name their span through the span
            // itself). With both on, entering cost about 7% of the relay's CPU.
            .with_tracked_inactivity(false)
            .with_context_activation(false)
            .with_filter(FilterFn::new(exported))
            .and_then(metrics)
    }

    /// Spans dropped (the queue was full) or lost (an export failed) so far.
    pub fn lost_spans(&self) -> u64 {
        self.counts.lost()
    }

    /// Metric exports that failed so far (each lost one period's data points).
    pub fn failed_metric_exports(&self) -> u64 {
        self.counts.failed_metric_exports()
    }

    /// Sends what is queued and stops the exporter; what was not exported over
    /// its life (spans dropped, lost, or still waiting when the time was up;
    /// metric exports that failed). Blocks at most [`Telemetry::shutdown_bound`]
    /// (the export timeout plus one second), whether the collector answers or
    /// not: call it outside an async context or through `spawn_blocking`.
    pub fn shutdown(self) -> Result<Unexported, TelemetryError> {
        let bound = self.shutdown_bound();
        // Both at once: each is bounded by the export timeout.
        let (traces, metrics) = std::thread::scope(|scope| {
            let metrics = self
                .meters
                .as_ref()
                .map(|(meters, _)| scope.spawn(|| meters.shutdown_with_timeout(bound)));
            let traces = self.provider.shutdown_with_timeout(bound);
            (traces, metrics.map(|handle| handle.join()))
        });
        let unexported = Unexported {
            spans: self.counts.lost() + self.counts.pending() as u64,
            metric_exports: self.counts.failed_metric_exports(),
        };
        let mut failures = Vec::new();
        if let Err(e) = traces {
            failures.push(format!("spans: {e}"));
        }
        match metrics {
            Some(Ok(Err(e))) => failures.push(format!("metrics: {e}")),
            Some(Err(_)) => failures.push("metrics: the exporter panicked".to_owned()),
            Some(Ok(Ok(()))) | None => {}
        }
        if failures.is_empty() {
            Ok(unexported)
        } else {
            Err(TelemetryError::Shutdown {
                reason: failures.join("; "),
                unexported,
            })
        }
    }

    /// The longest [`Telemetry::shutdown`] blocks.
    pub fn shutdown_bound(&self) -> Duration {
        self.export_timeout.saturating_add(SHUTDOWN_GRACE)
    }
}

/// The blocking HTTP client of the exporters (client-tls, no redirects, the
/// export timeout on every request).
fn http_client(config: &TelemetryConfig) -> Result<reqwest::blocking::Client, TelemetryError> {
    let tls = client_tls::client_config().map_err(|e| TelemetryError::Tls(e.to_string()))?;
    reqwest::blocking::Client::builder()
        .tls_backend_preconfigured(tls)
        .redirect(reqwest::redirect::Policy::none())
        .timeout(config.export_timeout)
        .connect_timeout(config.export_timeout)
        .build()
        .map_err(|e| TelemetryError::Exporter(e.to_string()))
}

/// An exporter builder (spans or metrics) set to send protobuf to `url` with
/// the configured client, headers and timeout.
fn over_http<B: WithExportConfig + WithHttpConfig>(
    builder: B,
    config: &TelemetryConfig,
    url: String,
) -> Result<B, TelemetryError> {
    let headers: HashMap<String, String> = config.headers.iter().cloned().collect();
    Ok(builder
        .with_http_client(http_client(config)?)
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(url)
        .with_headers(headers)
        .with_timeout(config.export_timeout))
}

/// The tracer provider: spans to `url` in batches, through the bounded queue.
fn span_provider(
    config: &TelemetryConfig,
    url: String,
    counts: &Arc<export::Counts>,
    resource: Resource,
) -> Result<SdkTracerProvider, TelemetryError> {
    let exporter = over_http(
        opentelemetry_otlp::SpanExporter::builder().with_http(),
        config,
        url,
    )?
    .build()
    .map_err(|e| TelemetryError::Exporter(e.to_string()))?;
    let exporter = export::Counted {
        inner: exporter,
        counts: Arc::clone(counts),
    };
    let batch = BatchConfigBuilder::default()
        // Never full before the bounded count is.
        .with_max_queue_size(config.max_queue.saturating_add(1).max(2))
        .build();
    let processor = export::Bounded {
        inner: BatchSpanProcessor::builder(exporter)
            .with_batch_config(batch)
            .build(),
        counts: Arc::clone(counts),
        max_queue: config.max_queue.max(1),
    };
    Ok(SdkTracerProvider::builder()
        .with_span_processor(processor)
        .with_id_generator(link::RunIds::default())
        .with_resource(resource)
        .build())
}

/// The meter provider: metrics to `url`, read periodically on a thread of its
/// own and once more at shutdown.
fn meter_provider(
    config: &TelemetryConfig,
    url: String,
    counts: &Arc<export::Counts>,
    resource: Resource,
) -> Result<SdkMeterProvider, TelemetryError> {
    let exporter = over_http(
        opentelemetry_otlp::MetricExporter::builder().with_http(),
        config,
        url,
    )?
    .build()
    .map_err(|e| TelemetryError::Exporter(e.to_string()))?;
    let exporter = export::CountedMetrics {
        inner: exporter,
        counts: Arc::clone(counts),
    };
    Ok(SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(exporter).build())
        .with_resource(resource)
        .build())
}

/// Whether a span or event is exported: the run's spans, and the INFO-or-above
/// events of ai-core and agent-graph (which sit inside them).
fn exported(metadata: &tracing::Metadata<'_>) -> bool {
    let ours = EXPORTED_TARGETS
        .iter()
        .any(|target| metadata.target().starts_with(target));
    if !ours {
        return false;
    }
    if metadata.is_span() {
        return EXPORTED_SPANS.contains(&metadata.name());
    }
    *metadata.level() <= tracing::Level::INFO
}

/// The chat server's traffic spans' target (agent-server's `traffic::TARGET`).
const TRAFFIC_TARGET: &str = "agent_server::traffic";

/// Whether a span is measured: the run's model and tool call spans, and the
/// chat server's traffic spans.
fn measured(metadata: &tracing::Metadata<'_>) -> bool {
    let target = metadata.target();
    let ours = target == TRAFFIC_TARGET
        || EXPORTED_TARGETS
            .iter()
            .any(|prefix| target.starts_with(prefix));
    ours && metadata.is_span() && metrics::MEASURED_SPANS.contains(&metadata.name())
}

/// `subscriber` with the exporting layer of `telemetry` added (for a library
/// user's own subscriber; install the result as the default).
pub fn install<S>(
    subscriber: S,
    telemetry: &Telemetry,
) -> tracing_subscriber::layer::Layered<impl Layer<S>, S>
where
    S: Subscriber + for<'span> LookupSpan<'span>,
{
    subscriber.with(telemetry.layer())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_an_endpoint_nothing_starts() {
        let started = Telemetry::start(&TelemetryConfig::default());
        assert!(matches!(started, Ok(None)));
    }
}
