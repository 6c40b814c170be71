//! Sending a request and reading its response: retries, deadlines, error mapping.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use ai_core::CancellationToken;
use ai_core::completion::{CompletionError, TimeoutPhase};
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use reqwest::header::{self, HeaderMap, HeaderName, HeaderValue};
use tokio::time::Instant;

use crate::config::{ApiKey, ErrorBody, TransportConfig};

/// Largest response body read for a non-streaming call.
pub(crate) const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;
/// Largest error body read.
const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;

/// An endpoint with its HTTP client, headers and retry rules. Cheap to share
/// (`Arc`); one per configured model endpoint.
pub struct HttpTransport {
    http: reqwest::Client,
    endpoint: reqwest::Url,
    headers: HeaderMap,
    pub(crate) config: TransportConfig,
}

impl std::fmt::Debug for HttpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpTransport")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Why reading a body stopped early.
pub(crate) enum ReadError {
    /// Ends the call with this error (timeout, cancellation).
    Completion(CompletionError),
    /// The body broke off (connection cut).
    Body(String),
}

impl HttpTransport {
    /// Builds the transport. The endpoint is the base URL with
    /// [`TransportConfig::path`] appended to its path; a query string in the base
    /// URL (Azure's `?api-version=...`) is kept after it, a fragment is dropped.
    /// Fails with [`CompletionError::InvalidRequest`] on a bad base URL or header
    /// (the message names the problem, never the value).
    pub fn new(config: TransportConfig) -> Result<Arc<Self>, CompletionError> {
        let invalid = |message: String| CompletionError::InvalidRequest { message };
        let endpoint = endpoint(&config.base_url, config.path).map_err(invalid)?;
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        for (name, value, secret) in &config.headers {
            let header_name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| invalid(format!("header name `{name}` is not valid")))?;
            let mut header_value = HeaderValue::from_str(value).map_err(|_| {
                invalid(format!(
                    "the value of header `{name}` contains characters not allowed in a header"
                ))
            })?;
            header_value.set_sensitive(*secret);
            headers.insert(header_name, header_value);
        }
        let tls = client_tls::client_config().map_err(|e| invalid(e.to_string()))?;
        let http = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .connect_timeout(config.timeouts.connect)
            // Never follow a redirect: see the crate docs.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| {
                invalid(format!(
                    "cannot build the HTTP client: {}",
                    error_chain(&e.without_url())
                ))
            })?;
        Ok(Arc::new(Self {
            http,
            endpoint,
            headers,
            config,
        }))
    }

    /// The configuration the transport was built with.
    pub fn config(&self) -> &TransportConfig {
        &self.config
    }

    /// The configured headers, with the call's trace headers when it has some
    /// (a value that is not a valid header is left out); borrowed otherwise.
    fn headers_with(
        &self,
        trace: Option<&crate::call::TraceHeaders>,
    ) -> std::borrow::Cow<'_, HeaderMap> {
        let Some(trace) = trace else {
            return std::borrow::Cow::Borrowed(&self.headers);
        };
        let mut headers = self.headers.clone();
        let values = [
            ("traceparent", Some(trace.parent.as_str())),
            ("tracestate", trace.state.as_deref()),
        ];
        for (name, value) in values {
            if let Some(Ok(value)) = value.map(HeaderValue::from_str) {
                headers.insert(name, value);
            }
        }
        std::borrow::Cow::Owned(headers)
    }

    /// Sends the request, retrying before the first byte where the rules allow.
    /// `path`, when given, is the call's own path (and query), in place of
    /// [`TransportConfig::path`] (see [`HttpTransport::endpoint_at`]); `trace`,
    /// when given, goes out as the `traceparent` and `tracestate` headers.
    pub(crate) async fn send(
        &self,
        cancel: &CancellationToken,
        body: Bytes,
        deadline: Option<Instant>,
        (path, trace): (Option<&str>, Option<&crate::call::TraceHeaders>),
    ) -> Result<reqwest::Response, CompletionError> {
        let endpoint = match path {
            Some(path) => self.endpoint_at(path)?,
            None => self.endpoint.clone(),
        };
        let headers = self.headers_with(trace);
        let mut attempt: u32 = 0;
        loop {
            tracing::debug!(
                host = endpoint.host_str().unwrap_or(""),
                path = endpoint.path(),
                attempt,
                "sending completion request"
            );
            let request = self
                .http
                .post(endpoint.clone())
                .headers(headers.clone().into_owned())
                .body(body.clone())
                .send();
            let (limit, phase) = within(
                after(self.config.timeouts.first_byte),
                TimeoutPhase::FirstByte,
                deadline,
            );
            let sent = tokio::select! {
                biased;
                () = cancel.cancelled() => return Err(CompletionError::Cancelled),
                sent = tokio::time::timeout_at(limit, request) => sent,
            };
            let retry_in = match sent {
                Err(_elapsed) => return Err(CompletionError::Timeout { phase }),
                Ok(Err(error)) => self.after_send_error(error, attempt, deadline)?,
                Ok(Ok(response)) if response.status().is_success() => return Ok(response),
                Ok(Ok(response)) => {
                    self.after_status(cancel, response, attempt, deadline)
                        .await?
                }
            };
            tokio::select! {
                biased;
                () = cancel.cancelled() => return Err(CompletionError::Cancelled),
                () = tokio::time::sleep(retry_in) => {}
            }
            attempt += 1;
        }
    }

    /// The wait before retrying a failed send, or the error when it is final.
    fn after_send_error(
        &self,
        error: reqwest::Error,
        attempt: u32,
        deadline: Option<Instant>,
    ) -> Result<Duration, CompletionError> {
        let (mapped, retryable) = self.map_send_error(error);
        if !retryable || attempt >= self.config.max_retries {
            return Err(mapped);
        }
        let delay = self.backoff(attempt);
        if !starts_before(delay, deadline) {
            tracing::warn!(error = %mapped, "no time left for a retry before the deadline");
            return Err(mapped);
        }
        tracing::warn!(attempt, error = %mapped, "connection failed; retrying");
        Ok(delay)
    }

    /// The wait before retrying an unsuccessful status, or the error when it is final.
    async fn after_status(
        &self,
        cancel: &CancellationToken,
        response: reqwest::Response,
        attempt: u32,
        deadline: Option<Instant>,
    ) -> Result<Duration, CompletionError> {
        let status = response.status();
        if status.is_redirection() {
            return Err(self.redirect_error(&response));
        }
        let retryable = matches!(status.as_u16(), 408 | 409 | 429) || status.is_server_error();
        if !retryable || attempt >= self.config.max_retries {
            return Err(self.http_error(cancel, response, deadline).await.0);
        }
        let server_delay = retry_after(response.headers(), SystemTime::now());
        if server_delay.is_some_and(|d| d > self.config.backoff.max_retry_after) {
            tracing::warn!(
                status = status.as_u16(),
                "Retry-After exceeds the limit; not retrying"
            );
            return Err(self.http_error(cancel, response, deadline).await.0);
        }
        let delay = server_delay.unwrap_or_else(|| self.backoff(attempt));
        if !starts_before(delay, deadline) {
            tracing::warn!(
                status = status.as_u16(),
                "no time left for a retry before the deadline"
            );
            return Err(self.http_error(cancel, response, deadline).await.0);
        }
        if status.as_u16() == 429 {
            // The body tells a rate limit (retry) from an exhausted quota (permanent).
            let (error, body) = self.http_error(cancel, response, deadline).await;
            if error == CompletionError::Cancelled || body.permanent {
                tracing::warn!(status = status.as_u16(), error = %error, "not retrying");
                return Err(error);
            }
        } else {
            drop(response);
        }
        tracing::warn!(
            status = status.as_u16(),
            attempt,
            delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
            "provider asked to retry"
        );
        Ok(delay)
    }

    /// Exponential backoff with jitter (50% to 100% of the computed delay).
    fn backoff(&self, attempt: u32) -> Duration {
        let backoff = self.config.backoff;
        let base = backoff
            .initial
            .saturating_mul(2u32.saturating_pow(attempt.min(16)))
            .min(backoff.max);
        let jitter = (uuid::Uuid::new_v4().as_u128() % 1000) as u32;
        base / 2 + base / 2 * jitter / 1000
    }

    /// The error of a failed send, and whether a retry may help: connection errors
    /// and connect timeouts yes; TLS errors and request-building errors no.
    fn map_send_error(&self, error: reqwest::Error) -> (CompletionError, bool) {
        if error.is_builder() {
            let error = CompletionError::InvalidRequest {
                message: "the HTTP request could not be built".into(),
            };
            return (error, false);
        }
        if error.is_connect() && error.is_timeout() {
            let error = CompletionError::Timeout {
                phase: TimeoutPhase::Connect,
            };
            return (error, true);
        }
        let error = error.without_url();
        let tls = is_tls_error(&error);
        let message = self.scrub(&error_chain(&error));
        (CompletionError::Connect { message }, !tls)
    }

    /// A 3xx answer: redirects are not followed (see the crate docs).
    fn redirect_error(&self, response: &reqwest::Response) -> CompletionError {
        let target = response
            .headers()
            .get(header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|location| self.endpoint.join(location).ok());
        let message = match target {
            Some(url) if url.origin() == self.endpoint.origin() => {
                "the endpoint answered with a redirect, which is not followed; configure the final URL as the base URL".to_owned()
            }
            Some(url) => format!(
                "the endpoint redirected to another origin ({}); redirects are not followed, so credentials stay with the configured origin",
                url.origin().ascii_serialization()
            ),
            None => "the endpoint answered with a redirect, which is not followed".to_owned(),
        };
        CompletionError::Http {
            status: response.status().as_u16(),
            message: self.scrub(&message),
        }
    }

    /// Reads an error response (at most [`MAX_ERROR_BODY_BYTES`]) into an error.
    async fn http_error(
        &self,
        cancel: &CancellationToken,
        response: reqwest::Response,
        deadline: Option<Instant>,
    ) -> (CompletionError, ErrorBody) {
        let status = response.status();
        let mut body = body_chunks(response);
        let mut bytes = Vec::new();
        while bytes.len() < MAX_ERROR_BODY_BYTES {
            let idle = after(self.config.timeouts.between_chunks);
            match self.read_chunk(cancel, &mut body, idle, deadline).await {
                Ok(Some(chunk)) => bytes.extend_from_slice(&chunk),
                Ok(None) | Err(ReadError::Body(_)) => break,
                Err(ReadError::Completion(CompletionError::Cancelled)) => {
                    return (CompletionError::Cancelled, ErrorBody::default());
                }
                Err(ReadError::Completion(_)) => break,
            }
        }
        let parsed = (self.config.error_body)(&bytes);
        let message = parsed
            .message
            .clone()
            .unwrap_or_else(|| status.canonical_reason().unwrap_or("error").to_owned());
        let error = CompletionError::Http {
            status: status.as_u16(),
            message: self.scrub(&message),
        };
        (error, parsed)
    }

    /// The next body chunk, waiting at most until `idle` (then a between-chunks
    /// timeout) and `deadline` (then a total timeout).
    pub(crate) async fn read_chunk(
        &self,
        cancel: &CancellationToken,
        body: &mut BoxStream<'static, reqwest::Result<Bytes>>,
        idle: Instant,
        deadline: Option<Instant>,
    ) -> Result<Option<Bytes>, ReadError> {
        let (limit, phase) = within(idle, TimeoutPhase::BetweenChunks, deadline);
        let next = tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(ReadError::Completion(CompletionError::Cancelled)),
            next = tokio::time::timeout_at(limit, body.next()) => next,
        };
        match next {
            Err(_elapsed) => Err(ReadError::Completion(CompletionError::Timeout { phase })),
            Ok(None) => Ok(None),
            Ok(Some(Ok(chunk))) => Ok(Some(chunk)),
            Ok(Some(Err(error))) => Err(ReadError::Body(error_chain(&error.without_url()))),
        }
    }

    /// Reads a whole (non-streamed) body, at most [`MAX_BODY_BYTES`].
    pub(crate) async fn read_body(
        &self,
        cancel: &CancellationToken,
        response: reqwest::Response,
        deadline: Option<Instant>,
    ) -> Result<Vec<u8>, CompletionError> {
        let mut body = body_chunks(response);
        let mut bytes = Vec::new();
        loop {
            let idle = after(self.config.timeouts.between_chunks);
            match self.read_chunk(cancel, &mut body, idle, deadline).await {
                Ok(Some(chunk)) => {
                    if bytes.len() + chunk.len() > MAX_BODY_BYTES {
                        return Err(CompletionError::Protocol {
                            message: format!("response body larger than {MAX_BODY_BYTES} bytes"),
                        });
                    }
                    bytes.extend_from_slice(&chunk);
                }
                Ok(None) => return Ok(bytes),
                Err(ReadError::Completion(error)) => return Err(error),
                Err(ReadError::Body(message)) => {
                    return Err(CompletionError::Connect {
                        message: self.scrub(&message),
                    });
                }
            }
        }
    }

    /// Replaces any occurrence of a secret (secret header values and
    /// [`TransportConfig::secrets`]) in a message.
    pub(crate) fn scrub(&self, message: &str) -> String {
        let config = &self.config;
        let secrets = config
            .secrets
            .iter()
            .map(ApiKey::expose)
            .chain(
                config
                    .headers
                    .iter()
                    .filter(|(_, _, secret)| *secret)
                    .map(|(_, v, _)| v.as_str()),
            )
            .filter(|s| s.len() >= 4);
        let mut out = message.to_owned();
        for secret in secrets {
            if out.contains(secret) {
                out = out.replace(secret, "[redacted]");
            }
        }
        out
    }
}

/// A response's body as a stream of its chunks (what reqwest's `stream`
/// feature offers, without the file-system half of tokio it turns on).
pub(crate) fn body_chunks(
    response: reqwest::Response,
) -> BoxStream<'static, reqwest::Result<Bytes>> {
    futures::stream::unfold(Some(response), |response| async move {
        let mut response = response?;
        match response.chunk().await {
            Ok(Some(chunk)) => Some((Ok(chunk), Some(response))),
            Ok(None) => None,
            Err(error) => Some((Err(error), None)),
        }
    })
    .boxed()
}

/// `duration` from now; a duration too long to represent ends in 30 years (a
/// configured `Duration::MAX` must not panic).
pub(crate) fn after(duration: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(duration)
        .unwrap_or_else(|| now + Duration::from_secs(30 * 365 * 86_400))
}

/// `at`, or the total deadline when that comes first, with the phase to report.
fn within(at: Instant, phase: TimeoutPhase, deadline: Option<Instant>) -> (Instant, TimeoutPhase) {
    match deadline {
        Some(deadline) if deadline <= at => (deadline, TimeoutPhase::Total),
        _ => (at, phase),
    }
}

/// Whether a retry after `delay` starts before the deadline.
fn starts_before(delay: Duration, deadline: Option<Instant>) -> bool {
    deadline.is_none_or(|deadline| after(delay) < deadline)
}

/// The `Retry-After` (seconds or an HTTP date, relative to `now`) or
/// `retry-after-ms` delay of a response. A date in the past is no delay.
fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let text = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = text("retry-after-ms").and_then(|v| v.parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    let value = text("retry-after")?;
    if let Ok(seconds) = value.parse::<f64>() {
        return (seconds.is_finite() && seconds >= 0.0)
            .then(|| Duration::from_secs_f64(seconds.min(86_400.0)));
    }
    // RFC 9110 (ex 7231) HTTP-date: IMF-fixdate, or the obsolete RFC 850 and asctime
    // forms a recipient must also accept.
    let at = httpdate::parse_http_date(value).ok()?;
    Some(
        at.duration_since(now)
            .unwrap_or(Duration::ZERO)
            .min(Duration::from_secs(86_400)),
    )
}

/// Whether a rustls error (a failed handshake, a bad certificate, a peer that does
/// not speak TLS) is in the chain, also inside an IO error, which `source()` skips.
fn is_tls_error(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(current) = next {
        if current.is::<rustls::Error>() {
            return true;
        }
        if let Some(io) = current.downcast_ref::<std::io::Error>()
            && let Some(inner) = io.get_ref()
            && is_tls_error(inner)
        {
            return true;
        }
        next = current.source();
    }
    false
}

impl HttpTransport {
    /// The endpoint of a call whose path depends on its request (a path that
    /// names the model): `path_and_query`'s path appended to the base URL's path,
    /// its query (after `?`) appended to the base URL's own query. Errors never
    /// quote the URL.
    pub(crate) fn endpoint_at(
        &self,
        path_and_query: &str,
    ) -> Result<reqwest::Url, CompletionError> {
        let (path, query) = match path_and_query.split_once('?') {
            Some((path, query)) => (path, Some(query)),
            None => (path_and_query, None),
        };
        let mut url = endpoint(&self.config.base_url, path)
            .map_err(|message| CompletionError::InvalidRequest { message })?;
        if let Some(query) = query.filter(|q| !q.is_empty()) {
            let joined = match url.query() {
                Some(own) if !own.is_empty() => format!("{own}&{query}"),
                _ => query.to_owned(),
            };
            url.set_query(Some(&joined));
        }
        Ok(url)
    }
}

/// The endpoint under `base_url`: its path gets `path`, a query string is kept
/// after it, a fragment is dropped. Errors never quote the URL.
fn endpoint(base_url: &str, path: &str) -> Result<reqwest::Url, String> {
    let mut url = reqwest::Url::parse(base_url.trim())
        .map_err(|e| format!("base URL is not a valid URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") || url.cannot_be_a_base() {
        return Err("base URL must use http or https".into());
    }
    let joined = format!("{}{path}", url.path().trim_end_matches('/'));
    url.set_path(&joined);
    url.set_fragment(None);
    Ok(url)
}

/// An error and its sources, joined with `: ` (reqwest's own message says little).
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut out = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        let text = inner.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = inner.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Backoff, Timeouts};

    fn config(base_url: &str) -> TransportConfig {
        TransportConfig {
            base_url: base_url.into(),
            path: "/chat/completions",
            headers: Vec::new(),
            secrets: Vec::new(),
            timeouts: Timeouts::default(),
            max_retries: 2,
            backoff: Backoff::default(),
            error_body: |_| ErrorBody::default(),
        }
    }

    #[test]
    fn retry_after_forms() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_445_412_470); // 07:27:50
        let mut headers = HeaderMap::new();
        assert_eq!(retry_after(&headers, now), None);
        headers.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(retry_after(&headers, now), Some(Duration::from_secs(2)));
        headers.insert("retry-after-ms", HeaderValue::from_static("150"));
        assert_eq!(retry_after(&headers, now), Some(Duration::from_millis(150)));
        // An HTTP date, in each form RFC 9110 makes recipients accept.
        for date in [
            "Wed, 21 Oct 2015 07:28:00 GMT",
            "Wednesday, 21-Oct-15 07:28:00 GMT",
            "Wed Oct 21 07:28:00 2015",
        ] {
            let mut headers = HeaderMap::new();
            headers.insert("retry-after", HeaderValue::from_static(date));
            assert_eq!(
                retry_after(&headers, now),
                Some(Duration::from_secs(10)),
                "{date}"
            );
        }
        // A date in the past is no delay; garbage is no header.
        let later = now + Duration::from_secs(3600);
        let mut headers = HeaderMap::new();
        headers.insert(
            "retry-after",
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after(&headers, later), Some(Duration::ZERO));
        headers.insert("retry-after", HeaderValue::from_static("soon"));
        assert_eq!(retry_after(&headers, now), None);
        headers.insert("retry-after", HeaderValue::from_static("NaN"));
        assert_eq!(retry_after(&headers, now), None);
    }

    #[test]
    fn a_call_path_joins_the_base_path_and_query() {
        let transport = HttpTransport::new(config("https://host.example/root?key=1")).unwrap();
        let url = transport
            .endpoint_at("/v1beta/models/m:streamGenerateContent?alt=sse")
            .unwrap();
        assert_eq!(
            url.as_str(),
            "https://host.example/root/v1beta/models/m:streamGenerateContent?key=1&alt=sse"
        );
        let transport = HttpTransport::new(config("https://host.example")).unwrap();
        assert_eq!(
            transport.endpoint_at("/v1/x").unwrap().as_str(),
            "https://host.example/v1/x"
        );
    }

    #[test]
    fn endpoint_keeps_the_query_after_the_path() {
        let cases = [
            (
                "http://x/v1",
                "/chat/completions",
                "http://x/v1/chat/completions",
            ),
            (
                "http://x/v1/",
                "/chat/completions",
                "http://x/v1/chat/completions",
            ),
            ("http://x", "/v1/messages", "http://x/v1/messages"),
            ("http://x/", "/v1/messages", "http://x/v1/messages"),
            (
                "https://r.openai.azure.com/openai/deployments/d?api-version=2024-10-21",
                "/chat/completions",
                "https://r.openai.azure.com/openai/deployments/d/chat/completions?api-version=2024-10-21",
            ),
            (
                "https://r.example/openai/v1/?api-version=preview&x=1#frag",
                "/chat/completions",
                "https://r.example/openai/v1/chat/completions?api-version=preview&x=1",
            ),
        ];
        for (base, path, expected) in cases {
            assert_eq!(endpoint(base, path).unwrap().as_str(), expected, "{base}");
        }
        assert!(endpoint("mailto:a@b", "/x").is_err());
    }

    #[test]
    fn bad_configuration_is_invalid_request_without_values() {
        let err = HttpTransport::new(config("not a url")).unwrap_err();
        assert_eq!(err.code(), "invalid_request");
        let err = HttpTransport::new(config("ftp://x/v1")).unwrap_err();
        assert_eq!(err.code(), "invalid_request");
        let mut bad = config("http://x/v1");
        bad.headers
            .push(("x-api-key".into(), "sk-bad\nkey".into(), true));
        let err = HttpTransport::new(bad).unwrap_err();
        assert!(!err.to_string().contains("sk-bad"), "{err}");
    }

    #[test]
    fn secrets_are_scrubbed_and_hidden_from_debug() {
        let mut with_secrets = config("https://user:pass-9876@host/v1");
        with_secrets
            .headers
            .push(("api-key".into(), "hdr-secret-456".into(), true));
        with_secrets.secrets.push(ApiKey::new("sk-secret-123"));
        let transport = HttpTransport::new(with_secrets).unwrap();
        let debug = format!("{transport:?}");
        for secret in ["pass-9876", "hdr-secret-456", "sk-secret-123"] {
            assert!(!debug.contains(secret), "{debug}");
        }
        assert_eq!(
            transport.scrub("key sk-secret-123 and hdr-secret-456"),
            "key [redacted] and [redacted]"
        );
    }

    #[tokio::test]
    async fn huge_durations_do_not_overflow() {
        let far = after(Duration::MAX);
        assert!(far > Instant::now() + Duration::from_secs(86_400 * 365));
        assert!(starts_before(Duration::MAX, None));
        assert!(!starts_before(
            Duration::MAX,
            Some(after(Duration::from_secs(1)))
        ));
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let transport = HttpTransport::new(config("http://x/v1")).unwrap();
        for attempt in 0..40 {
            let delay = transport.backoff(attempt);
            assert!(delay <= Duration::from_secs(8), "{delay:?}");
            assert!(delay >= Duration::from_millis(250), "{delay:?}");
        }
    }
}
