//! The CLI's span export: started as `[telemetry]` and the `OTEL_*` variables say,
//! its layer added to the process's subscriber, flushed when the command ends.
//!
//! Built without the `telemetry` cargo feature (on by default), nothing is
//! exported: a configured endpoint gets a warning, and [`Exporter`] has no value.

use crate::config::AgentConfig;

/// A running span exporter.
#[cfg(feature = "telemetry")]
pub(crate) type Exporter = agent_telemetry::Telemetry;

/// A running span exporter: none without the `telemetry` feature.
#[cfg(not(feature = "telemetry"))]
pub(crate) enum Exporter {}

/// The exporter's configuration: `[telemetry]`, with the `OTEL_*` variables
/// applied over it.
#[cfg(feature = "telemetry")]
fn exporter_config(config: &AgentConfig) -> agent_telemetry::TelemetryConfig {
    let file = &config.file.telemetry;
    let mut telemetry = agent_telemetry::TelemetryConfig {
        endpoint: file.endpoint.clone(),
        headers: file
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        capture_content: file.content,
        metrics: file.metrics.unwrap_or(true),
        ..Default::default()
    };
    if let Some(name) = &file.service_name {
        telemetry.service_name = name.clone();
    }
    telemetry.with_env(|name| std::env::var(name).ok())
}

/// Starts export (off when neither the file nor the environment names an
/// endpoint). A failure is reported and export stays off.
#[cfg(feature = "telemetry")]
pub(crate) async fn start(config: &AgentConfig) -> Option<Exporter> {
    let telemetry = exporter_config(config);
    // The exporter's HTTP client blocks: built off the runtime's workers.
    let started =
        tokio::task::spawn_blocking(move || agent_telemetry::Telemetry::start(&telemetry)).await;
    match started {
        Ok(Ok(telemetry)) => telemetry,
        Ok(Err(e)) => {
            eprintln!("agent: warning: {e}; spans are not exported");
            None
        }
        Err(_) => None,
    }
}

/// Without the `telemetry` feature: nothing starts; a configured endpoint is
/// reported.
#[cfg(not(feature = "telemetry"))]
pub(crate) async fn start(config: &AgentConfig) -> Option<Exporter> {
    let env_endpoint = [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ]
    .iter()
    .any(|name| std::env::var(name).is_ok_and(|v| !v.trim().is_empty()));
    if config.file.telemetry.endpoint.is_some() || env_endpoint {
        eprintln!("agent: warning: built without the `telemetry` feature; spans are not exported");
    }
    None
}

/// Flushes and stops export (off the runtime's workers: it blocks, at most the
/// exporter's shutdown bound); spans that were not exported are reported.
#[cfg(feature = "telemetry")]
pub(crate) async fn stop(telemetry: Option<Exporter>) {
    let Some(telemetry) = telemetry else {
        return;
    };
    match tokio::task::spawn_blocking(move || telemetry.shutdown()).await {
        Ok(Ok(unexported)) if unexported.is_nothing() => {}
        Ok(Ok(unexported)) => eprintln!(
            "agent: warning: {} spans could not be exported, {} metric exports failed",
            unexported.spans, unexported.metric_exports
        ),
        Err(_) => {}
        Ok(Err(e)) => eprintln!("agent: warning: {e}"),
    }
}

/// Without the `telemetry` feature there is nothing to stop.
#[cfg(not(feature = "telemetry"))]
pub(crate) async fn stop(telemetry: Option<Exporter>) {
    if let Some(exporter) = telemetry {
        match exporter {}
    }
}
