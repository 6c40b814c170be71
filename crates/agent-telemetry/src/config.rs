//! Where spans go: the collector's endpoint, headers and service name, from a
//! configuration and the standard `OTEL_*` environment variables.

use std::time::Duration;

/// `OTEL_EXPORTER_OTLP_ENDPOINT`: the collector's base URL (`/v1/traces` is added).
pub const ENV_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`: the traces URL, used as it is.
pub const ENV_TRACES_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
/// `OTEL_EXPORTER_OTLP_HEADERS`: `key=value` pairs, comma-separated, values
/// percent-encoded.
pub const ENV_HEADERS: &str = "OTEL_EXPORTER_OTLP_HEADERS";
/// `OTEL_EXPORTER_OTLP_TRACES_HEADERS`: headers of trace exports only.
pub const ENV_TRACES_HEADERS: &str = "OTEL_EXPORTER_OTLP_TRACES_HEADERS";
/// `OTEL_SERVICE_NAME`: the `service.name` of every span.
pub const ENV_SERVICE_NAME: &str = "OTEL_SERVICE_NAME";
/// `OTEL_EXPORTER_OTLP_TIMEOUT`: how long one export request may take, in
/// milliseconds.
pub const ENV_TIMEOUT: &str = "OTEL_EXPORTER_OTLP_TIMEOUT";
/// `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`: the same, for trace exports only (wins).
pub const ENV_TRACES_TIMEOUT: &str = "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT";
/// `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`: the metrics URL, used as it is.
pub const ENV_METRICS_ENDPOINT: &str = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT";
/// `OTEL_METRICS_EXPORTER`: `none` turns metrics off (spans are still exported).
pub const ENV_METRICS_EXPORTER: &str = "OTEL_METRICS_EXPORTER";
/// `OTEL_SDK_DISABLED`: `true` turns export off whatever else is set.
pub const ENV_SDK_DISABLED: &str = "OTEL_SDK_DISABLED";

/// The service name when none is configured.
pub const DEFAULT_SERVICE_NAME: &str = "agent";

/// How spans are exported. Export is off unless an endpoint is set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TelemetryConfig {
    /// The collector's base URL (`http://host:4318`): traces go to
    /// `{endpoint}/v1/traces`.
    pub endpoint: Option<String>,
    /// The traces URL, used as it is (wins over `endpoint`).
    pub traces_endpoint: Option<String>,
    /// The metrics URL, used as it is (wins over `endpoint`).
    pub metrics_endpoint: Option<String>,
    /// Whether metrics are exported too (to `{endpoint}/v1/metrics`, or
    /// `metrics_endpoint`). On by default.
    pub metrics: bool,
    /// Headers of every export request (an API key of a hosted collector).
    pub headers: Vec<(String, String)>,
    /// The `service.name` resource attribute.
    pub service_name: String,
    /// Whether spans carry content: prompts and model text, and the redacted
    /// views of tool arguments and results (raw tool values never). Off by default.
    pub capture_content: bool,
    /// Spans waiting for export at most; more are dropped (and counted).
    pub max_queue: usize,
    /// How long one export request may take.
    pub export_timeout: Duration,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        Self {
            endpoint: None,
            traces_endpoint: None,
            metrics_endpoint: None,
            metrics: true,
            headers: Vec::new(),
            service_name: DEFAULT_SERVICE_NAME.to_owned(),
            capture_content: false,
            max_queue: 2048,
            export_timeout: Duration::from_secs(5),
        }
    }
}

impl TelemetryConfig {
    /// This configuration with the `OTEL_*` variables `lookup` gives applied over
    /// it: an endpoint, headers or service name set there wins (the convention's
    /// order: the environment configures the process).
    pub fn with_env(mut self, lookup: impl Fn(&str) -> Option<String>) -> Self {
        let get = |name: &str| lookup(name).filter(|value| !value.trim().is_empty());
        if let Some(endpoint) = get(ENV_ENDPOINT) {
            self.endpoint = Some(endpoint);
        }
        if let Some(endpoint) = get(ENV_TRACES_ENDPOINT) {
            self.traces_endpoint = Some(endpoint);
        }
        if let Some(endpoint) = get(ENV_METRICS_ENDPOINT) {
            self.metrics_endpoint = Some(endpoint);
        }
        if get(ENV_METRICS_EXPORTER).is_some_and(|v| v.trim().eq_ignore_ascii_case("none")) {
            self.metrics = false;
        }
        for name in [ENV_HEADERS, ENV_TRACES_HEADERS] {
            if let Some(headers) = get(name) {
                self.headers.extend(parse_headers(&headers));
            }
        }
        for name in [ENV_TIMEOUT, ENV_TRACES_TIMEOUT] {
            if let Some(millis) = get(name).and_then(|v| v.trim().parse::<u64>().ok()) {
                self.export_timeout = Duration::from_millis(millis.max(1));
            }
        }
        if let Some(name) = get(ENV_SERVICE_NAME) {
            self.service_name = name;
        }
        if get(ENV_SDK_DISABLED).is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
            self.endpoint = None;
            self.traces_endpoint = None;
            self.metrics_endpoint = None;
        }
        self
    }

    /// The URL spans are sent to, when export is on.
    pub fn traces_url(&self) -> Option<String> {
        if let Some(url) = &self.traces_endpoint {
            return Some(url.clone());
        }
        let base = self.endpoint.as_deref()?;
        Some(format!("{}/v1/traces", base.trim_end_matches('/')))
    }
}

impl TelemetryConfig {
    /// The URL metrics are sent to, when they are exported: only while spans
    /// are, and with `metrics` on.
    pub fn metrics_url(&self) -> Option<String> {
        if !self.metrics {
            return None;
        }
        self.traces_url()?;
        if let Some(url) = &self.metrics_endpoint {
            return Some(url.clone());
        }
        let base = self.endpoint.as_deref()?;
        Some(format!("{}/v1/metrics", base.trim_end_matches('/')))
    }
}

/// Parses `key=value,key2=value2` (values percent-decoded); a pair without `=` or
/// with an empty key is skipped.
pub fn parse_headers(text: &str) -> Vec<(String, String)> {
    text.split(',')
        .filter_map(|pair| {
            let (key, value) = pair.split_once('=')?;
            let key = key.trim();
            (!key.is_empty()).then(|| (key.to_owned(), percent_decode(value.trim())))
        })
        .collect()
}

/// Decodes `%XX` escapes; anything malformed is kept as it is.
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'%')
            .then(|| bytes.get(i + 1..i + 3))
            .flatten()
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escaped {
            Some(byte) => {
                out.push(byte);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    #[test]
    fn export_is_off_without_an_endpoint() {
        let config = TelemetryConfig::default().with_env(env(&[]));
        assert_eq!(config.traces_url(), None);
    }

    #[test]
    fn the_environment_configures_the_exporter() {
        let config = TelemetryConfig::default().with_env(env(&[
            (ENV_ENDPOINT, "http://collector:4318/"),
            (ENV_HEADERS, "api-key=a%20b, x=1,broken"),
            (ENV_SERVICE_NAME, "svc"),
        ]));
        assert_eq!(
            config.traces_url().as_deref(),
            Some("http://collector:4318/v1/traces")
        );
        assert_eq!(
            config.headers,
            vec![("api-key".into(), "a b".into()), ("x".into(), "1".into())]
        );
        assert_eq!(config.service_name, "svc");
        assert_eq!(config.export_timeout, Duration::from_secs(5));
        let config = config.with_env(env(&[(ENV_TIMEOUT, "700"), (ENV_TRACES_TIMEOUT, "x")]));
        assert_eq!(config.export_timeout, Duration::from_millis(700));
        let config = config.with_env(env(&[(ENV_TRACES_TIMEOUT, "250")]));
        assert_eq!(config.export_timeout, Duration::from_millis(250));
        assert_eq!(
            config.metrics_url().as_deref(),
            Some("http://collector:4318/v1/metrics")
        );
        let config = config.with_env(env(&[(ENV_TRACES_ENDPOINT, "http://t/x")]));
        assert_eq!(config.traces_url().as_deref(), Some("http://t/x"));
        let off = config
            .clone()
            .with_env(env(&[(ENV_METRICS_EXPORTER, "none")]));
        assert_eq!(off.metrics_url(), None);
        assert!(off.traces_url().is_some());
        let config = config.with_env(env(&[(ENV_SDK_DISABLED, "true")]));
        assert_eq!(config.traces_url(), None);
        assert_eq!(config.metrics_url(), None);
    }

    #[test]
    fn percent_decoding_keeps_what_is_malformed() {
        assert_eq!(percent_decode("a%2Cb%zz%"), "a,b%zz%");
    }
}
