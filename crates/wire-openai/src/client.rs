//! The HTTP completion client: [`OpenAiClient`] implements [`CompletionPort`] over
//! reqwest for any OpenAI-compatible `/chat/completions` endpoint.
//!
//! It owns the transport concerns only (headers, timeouts, retries, cancellation,
//! error mapping); encoding is [`crate::encode`] and decoding is [`crate::decode`].
//! It reads no environment or config file: bootstrap builds a [`ClientConfig`].
//!
//! # Behaviour
//!
//! - `POST {base_url}/chat/completions` with `Authorization: Bearer <key>` when a key
//!   is set (marked sensitive; never logged, never put in an error: any occurrence
//!   of the key in a provider message is replaced by `[redacted]`).
//! - Timeouts: `connect` (TCP/TLS), `first_byte` (from sending until the response
//!   headers arrive; for non-streaming calls that includes the whole generation),
//!   `between_chunks` (any wait for the next body chunk, the first included).
//! - Retries, before the first byte of a successful response only: on 429, on 5xx
//!   and on connection errors, up to `max_retries` times, with exponential backoff
//!   and jitter, or the server's `Retry-After` / `retry-after-ms` when given. A
//!   `Retry-After` longer than [`Backoff::max_retry_after`] is not waited for: the
//!   error is returned. A first-byte timeout is not retried (the server may still be
//!   generating). Nothing is retried once a response body has started.
//! - Cancellation: dropping the stream aborts the request and closes the
//!   connection; firing the [`CancellationToken`] ends the stream with
//!   [`CompletionError::Cancelled`].
//! - A connection cut in the middle of a stream ends it like a truncated stream:
//!   [`CompletionError::TruncatedStream`] with everything assembled so far.
//! - A server that answers a streaming request with a plain JSON body is decoded as a
//!   non-streaming response.

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use ai_core::{
    CancellationToken, CompletionDelta, CompletionError, CompletionItem, CompletionPort,
    CompletionRequest, CompletionStream, TimeoutPhase,
};
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use reqwest::header::{self, HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;
use tracing::Instrument;

use crate::decode::{self, DecodeError, Decoder, DecoderOptions, DeltaMode};
use crate::encode::{EncodeOptions, encode_request, relax_strict_arguments};

/// An API key. Its `Debug` prints `ApiKey([redacted])`; it has no `Display`.
#[derive(Clone)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key.
    pub fn new(key: impl Into<String>) -> Self {
        Self(key.into())
    }

    fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey([redacted])")
    }
}

/// The waits a call may time out on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Establishing the TCP (and TLS) connection.
    pub connect: Duration,
    /// From sending the request until the response headers arrive.
    pub first_byte: Duration,
    /// Waiting for any chunk of the response body.
    pub between_chunks: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(10),
            first_byte: Duration::from_secs(120),
            between_chunks: Duration::from_secs(60),
        }
    }
}

/// Backoff between retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// Delay before the first retry (doubled for each further one).
    pub initial: Duration,
    /// Upper bound of a computed delay.
    pub max: Duration,
    /// Longest `Retry-After` the client waits for; a longer one returns the error.
    pub max_retry_after: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(500),
            max: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

/// Everything the client needs; built by the composition root.
#[derive(Clone)]
pub struct ClientConfig {
    /// Base URL up to and including the API version, e.g.
    /// `https://api.openai.com/v1` or `http://localhost:11434/v1`.
    pub base_url: String,
    /// Sent as `Authorization: Bearer <key>` when set.
    pub api_key: Option<ApiKey>,
    /// Extra headers sent with every request (values are never logged).
    pub extra_headers: Vec<(String, String)>,
    /// Timeouts.
    pub timeouts: Timeouts,
    /// Retries after the first attempt (0 disables retries).
    pub max_retries: u32,
    /// Backoff between retries.
    pub backoff: Backoff,
    /// Ask for a streamed response. `encode.stream` is ignored in favour of this.
    pub stream: bool,
    /// Which deltas the stream yields (the final is the same in every mode).
    pub deltas: DeltaMode,
    /// Request encoding options.
    pub encode: EncodeOptions,
}

impl ClientConfig {
    /// A streaming configuration with default timeouts, 2 retries and no key.
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            api_key: None,
            extra_headers: Vec::new(),
            timeouts: Timeouts::default(),
            max_retries: 2,
            backoff: Backoff::default(),
            stream: true,
            deltas: DeltaMode::All,
            encode: EncodeOptions::default(),
        }
    }

    /// Sets the API key.
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(ApiKey::new(key));
        self
    }
}

impl fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let header_names: Vec<&str> = self.extra_headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("ClientConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key)
            .field("extra_headers", &header_names)
            .field("timeouts", &self.timeouts)
            .field("max_retries", &self.max_retries)
            .field("backoff", &self.backoff)
            .field("stream", &self.stream)
            .field("deltas", &self.deltas)
            .field("encode", &self.encode)
            .finish()
    }
}

/// Largest response body read for a non-streaming call or an error.
const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;
/// Largest error body read.
const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;

struct Inner {
    http: reqwest::Client,
    endpoint: reqwest::Url,
    headers: HeaderMap,
    config: ClientConfig,
}

/// Transport steps. They borrow only `Inner` (which is `Sync`), so the stream's
/// futures stay `Send`.
impl Inner {
    async fn send(
        &self,
        cancel: &CancellationToken,
        body: Bytes,
    ) -> Result<reqwest::Response, CompletionError> {
        let config = &self.config;
        let mut attempt: u32 = 0;
        loop {
            tracing::debug!(
                host = self.endpoint.host_str().unwrap_or(""),
                path = self.endpoint.path(),
                attempt,
                "sending chat completion request"
            );
            let request = self
                .http
                .post(self.endpoint.clone())
                .headers(self.headers.clone())
                .body(body.clone())
                .send();
            let sent = tokio::select! {
                biased;
                () = cancel.cancelled() => return Err(CompletionError::Cancelled),
                sent = tokio::time::timeout(config.timeouts.first_byte, request) => sent,
            };
            let retry_in = match sent {
                Err(_elapsed) => {
                    return Err(CompletionError::Timeout {
                        phase: TimeoutPhase::FirstByte,
                    });
                }
                Ok(Err(error)) => {
                    let mapped = self.map_send_error(error);
                    let retryable = matches!(mapped, CompletionError::Connect { .. });
                    if !retryable || attempt >= config.max_retries {
                        return Err(mapped);
                    }
                    tracing::warn!(attempt, error = %mapped, "connection failed; retrying");
                    self.backoff(attempt)
                }
                Ok(Ok(response)) => {
                    let status = response.status();
                    if status.is_success() {
                        return Ok(response);
                    }
                    let retryable = status.as_u16() == 429 || status.is_server_error();
                    let server_delay = retry_after(response.headers());
                    if !retryable || attempt >= config.max_retries {
                        return Err(self.http_error(cancel, response).await);
                    }
                    if server_delay.is_some_and(|d| d > config.backoff.max_retry_after) {
                        tracing::warn!(
                            status = status.as_u16(),
                            "Retry-After exceeds the limit; not retrying"
                        );
                        return Err(self.http_error(cancel, response).await);
                    }
                    let delay = server_delay.unwrap_or_else(|| self.backoff(attempt));
                    tracing::warn!(
                        status = status.as_u16(),
                        attempt,
                        delay_ms = u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                        "provider asked to retry"
                    );
                    drop(response);
                    delay
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

    fn map_send_error(&self, error: reqwest::Error) -> CompletionError {
        if error.is_builder() {
            return CompletionError::InvalidRequest {
                message: "the HTTP request could not be built".into(),
            };
        }
        if error.is_connect() && error.is_timeout() {
            return CompletionError::Timeout {
                phase: TimeoutPhase::Connect,
            };
        }
        CompletionError::Connect {
            message: self.scrub(&error_chain(&error.without_url())),
        }
    }

    async fn http_error(
        &self,
        cancel: &CancellationToken,
        response: reqwest::Response,
    ) -> CompletionError {
        let status = response.status();
        let mut body = response.bytes_stream().boxed();
        let mut bytes = Vec::new();
        while bytes.len() < MAX_ERROR_BODY_BYTES {
            match self.read_chunk(cancel, &mut body).await {
                Ok(Some(chunk)) => bytes.extend_from_slice(&chunk),
                Ok(None) | Err(ReadError::Body(_)) => break,
                Err(ReadError::Completion(CompletionError::Cancelled)) => {
                    return CompletionError::Cancelled;
                }
                Err(ReadError::Completion(_)) => break,
            }
        }
        let message = error_body_message(&bytes)
            .unwrap_or_else(|| status.canonical_reason().unwrap_or("error").to_owned());
        CompletionError::Http {
            status: status.as_u16(),
            message: self.scrub(&message),
        }
    }

    async fn read_chunk(
        &self,
        cancel: &CancellationToken,
        body: &mut BoxStream<'static, reqwest::Result<Bytes>>,
    ) -> Result<Option<Bytes>, ReadError> {
        let next = tokio::select! {
            biased;
            () = cancel.cancelled() => return Err(ReadError::Completion(CompletionError::Cancelled)),
            next = tokio::time::timeout(self.config.timeouts.between_chunks, body.next()) => next,
        };
        match next {
            Err(_elapsed) => Err(ReadError::Completion(CompletionError::Timeout {
                phase: TimeoutPhase::BetweenChunks,
            })),
            Ok(None) => Ok(None),
            Ok(Some(Ok(chunk))) => Ok(Some(chunk)),
            Ok(Some(Err(error))) => Err(ReadError::Body(error_chain(&error.without_url()))),
        }
    }

    /// Replaces any occurrence of the API key (and extra header values) in a message.
    fn scrub(&self, message: &str) -> String {
        let config = &self.config;
        let secrets = config
            .api_key
            .iter()
            .map(ApiKey::expose)
            .chain(config.extra_headers.iter().map(|(_, v)| v.as_str()))
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

/// A chat-completions client for OpenAI-compatible endpoints.
#[derive(Clone)]
pub struct OpenAiClient {
    inner: Arc<Inner>,
}

impl fmt::Debug for OpenAiClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiClient")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl OpenAiClient {
    /// Builds a client. Fails with [`CompletionError::InvalidRequest`] on a bad base
    /// URL, header or key (the message names the problem, never the value).
    pub fn new(config: ClientConfig) -> Result<Self, CompletionError> {
        let invalid = |message: String| CompletionError::InvalidRequest { message };
        let base = config.base_url.trim_end_matches('/');
        let endpoint = reqwest::Url::parse(&format!("{base}/chat/completions"))
            .map_err(|e| invalid(format!("base URL is not a valid URL: {e}")))?;
        if !matches!(endpoint.scheme(), "http" | "https") {
            return Err(invalid("base URL must use http or https".into()));
        }
        let mut headers = HeaderMap::new();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        for (name, value) in &config.extra_headers {
            let header_name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| invalid(format!("extra header name `{name}` is not valid")))?;
            let mut header_value = HeaderValue::from_str(value)
                .map_err(|_| invalid(format!("value of extra header `{name}` is not valid")))?;
            header_value.set_sensitive(true);
            headers.insert(header_name, header_value);
        }
        if let Some(key) = &config.api_key {
            let mut value =
                HeaderValue::from_str(&format!("Bearer {}", key.expose())).map_err(|_| {
                    invalid("the API key contains characters not allowed in a header".into())
                })?;
            value.set_sensitive(true);
            headers.insert(header::AUTHORIZATION, value);
        }
        // Idempotent: keeps a provider someone else installed first.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .connect_timeout(config.timeouts.connect)
            .build()
            .map_err(|e| {
                invalid(format!(
                    "cannot build the HTTP client: {}",
                    error_chain(&e.without_url())
                ))
            })?;
        Ok(Self {
            inner: Arc::new(Inner {
                http,
                endpoint,
                headers,
                config,
            }),
        })
    }

    /// The configuration the client was built with.
    pub fn config(&self) -> &ClientConfig {
        &self.inner.config
    }
}

impl CompletionPort for OpenAiClient {
    fn complete(&self, request: CompletionRequest, cancel: CancellationToken) -> CompletionStream {
        let span = tracing::info_span!(
            "openai_completion",
            run_id = %request.context.run_id,
            trace_id = %request.context.trace_id,
            model = %request.model,
        );
        let call = Call::new(Arc::clone(&self.inner), &request, cancel);
        futures::stream::unfold(call, move |mut call| {
            let span = span.clone();
            async move {
                let item = call.next().await?;
                Some((item, call))
            }
            .instrument(span)
        })
        .boxed()
    }
}

enum Phase {
    /// Not sent yet (or the request could not be encoded).
    Start(Result<Bytes, CompletionError>),
    /// Reading a streamed body.
    Streaming {
        body: BoxStream<'static, reqwest::Result<Bytes>>,
        decoder: Box<Decoder>,
    },
    /// Nothing more to read; drain the queue.
    Finished,
}

/// One model call in progress.
struct Call {
    inner: Arc<Inner>,
    cancel: CancellationToken,
    model: String,
    /// Tools sent with a strict schema, with their original schema.
    strict_tools: Vec<(String, Value)>,
    phase: Phase,
    queue: VecDeque<Result<CompletionItem, CompletionError>>,
    scratch: Vec<CompletionDelta>,
    /// A final or an error was queued.
    terminal: bool,
}

impl Call {
    fn new(inner: Arc<Inner>, request: &CompletionRequest, cancel: CancellationToken) -> Self {
        let mut options = inner.config.encode.clone();
        options.stream = inner.config.stream;
        let mut strict_tools = Vec::new();
        let body = match encode_request(request, &options) {
            Ok(encoded) => {
                for report in &encoded.strict {
                    if report.outcome.is_ok()
                        && let Some(spec) =
                            request.tools.iter().find(|t| t.id.as_str() == report.tool)
                    {
                        strict_tools.push((report.tool.clone(), spec.input_schema.clone()));
                    }
                }
                serde_json::to_vec(&encoded.body)
                    .map(Bytes::from)
                    .map_err(|e| CompletionError::InvalidRequest {
                        message: format!("cannot serialize the request: {e}"),
                    })
            }
            Err(error) => Err(CompletionError::InvalidRequest {
                message: error.to_string(),
            }),
        };
        Self {
            inner,
            cancel,
            model: request.model.clone(),
            strict_tools,
            phase: Phase::Start(body),
            queue: VecDeque::new(),
            scratch: Vec::new(),
            terminal: false,
        }
    }

    fn decoder_options(&self) -> DecoderOptions {
        DecoderOptions {
            deltas: self.inner.config.deltas,
            model: self.model.clone(),
            ..DecoderOptions::default()
        }
    }

    async fn next(&mut self) -> Option<Result<CompletionItem, CompletionError>> {
        loop {
            if !self.terminal && self.cancel.is_cancelled() {
                return Some(self.fail(CompletionError::Cancelled));
            }
            if let Some(item) = self.queue.pop_front() {
                return Some(item);
            }
            match std::mem::replace(&mut self.phase, Phase::Finished) {
                Phase::Finished => return None,
                Phase::Start(body) => {
                    let result = match body {
                        Ok(body) => self.start(body).await,
                        Err(error) => Err(error),
                    };
                    if let Err(error) = result {
                        return Some(self.fail(error));
                    }
                }
                Phase::Streaming {
                    mut body,
                    mut decoder,
                } => {
                    let inner = Arc::clone(&self.inner);
                    match inner.read_chunk(&self.cancel, &mut body).await {
                        Ok(Some(chunk)) => {
                            let fed = decoder.feed(&chunk, &mut self.scratch);
                            self.queue_deltas();
                            match fed {
                                Ok(()) if decoder.is_done() => self.finish(*decoder),
                                Ok(()) => self.phase = Phase::Streaming { body, decoder },
                                Err(error) => self.queue_error(self.decode_error(error)),
                            }
                        }
                        Ok(None) => self.finish(*decoder),
                        Err(ReadError::Completion(error)) => return Some(self.fail(error)),
                        Err(ReadError::Body(message)) => {
                            tracing::warn!(
                                message = %self.scrub(&message),
                                "connection lost in the middle of the stream"
                            );
                            self.finish(*decoder);
                        }
                    }
                }
            }
        }
    }

    /// Sends (with retries) and sets up reading the response.
    async fn start(&mut self, body: Bytes) -> Result<(), CompletionError> {
        let inner = Arc::clone(&self.inner);
        let response = inner.send(&self.cancel, body).await?;
        let is_json = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim_start().starts_with("application/json"));
        if self.inner.config.stream && !is_json {
            let body = response.bytes_stream().boxed();
            self.phase = Phase::Streaming {
                body,
                decoder: Box::new(Decoder::with_options(self.decoder_options())),
            };
            return Ok(());
        }
        let mut body = response.bytes_stream().boxed();
        let mut bytes = Vec::new();
        loop {
            match inner.read_chunk(&self.cancel, &mut body).await {
                Ok(Some(chunk)) => {
                    if bytes.len() + chunk.len() > MAX_BODY_BYTES {
                        return Err(CompletionError::Protocol {
                            message: format!("response body larger than {MAX_BODY_BYTES} bytes"),
                        });
                    }
                    bytes.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(ReadError::Completion(error)) => return Err(error),
                Err(ReadError::Body(message)) => {
                    return Err(CompletionError::Connect {
                        message: self.scrub(&message),
                    });
                }
            }
        }
        let decoded =
            decode::decode_response_into(&bytes, self.decoder_options(), &mut self.scratch);
        self.queue_deltas();
        match decoded {
            Ok(turn) => self.queue_final(turn),
            Err(error) => self.queue_error(self.scrub_error(error)),
        }
        Ok(())
    }

    fn finish(&mut self, decoder: Decoder) {
        let result = decoder.finish_into(&mut self.scratch);
        self.queue_deltas();
        match result {
            Ok(turn) => self.queue_final(turn),
            Err(error) => self.queue_error(self.scrub_error(error)),
        }
    }

    fn queue_deltas(&mut self) {
        self.queue.extend(
            self.scratch
                .drain(..)
                .map(|delta| Ok(CompletionItem::Delta(delta))),
        );
    }

    fn queue_final(&mut self, mut turn: ai_core::CompletionFinal) {
        self.relax_strict(&mut turn.tool_calls);
        tracing::debug!(
            finish_reason = ?turn.finish_reason,
            tool_calls = turn.tool_calls.len(),
            "completion finished"
        );
        self.terminal = true;
        self.phase = Phase::Finished;
        self.queue.push_back(Ok(CompletionItem::Final(turn)));
    }

    fn queue_error(&mut self, error: CompletionError) {
        tracing::debug!(code = error.code(), "completion failed");
        self.terminal = true;
        self.phase = Phase::Finished;
        self.queue.push_back(Err(error));
    }

    /// Ends the stream now with `error` (queued deltas are dropped).
    fn fail(&mut self, error: CompletionError) -> Result<CompletionItem, CompletionError> {
        tracing::debug!(code = error.code(), "completion failed");
        self.terminal = true;
        self.phase = Phase::Finished;
        self.queue.clear();
        Err(error)
    }

    fn relax_strict(&self, calls: &mut [ai_core::AssembledToolCall]) {
        if self.strict_tools.is_empty() {
            return;
        }
        for call in calls {
            if call.outcome != ai_core::ToolCallOutcome::Complete {
                continue;
            }
            if let Some((_, schema)) = self
                .strict_tools
                .iter()
                .find(|(name, _)| *name == call.name)
                && let Some(relaxed) = relax_strict_arguments(&call.arguments, schema)
            {
                call.arguments = relaxed;
            }
        }
    }

    fn decode_error(&self, error: DecodeError) -> CompletionError {
        self.scrub_error(error.into())
    }

    fn scrub_error(&self, error: CompletionError) -> CompletionError {
        match error {
            CompletionError::Provider { code, message } => CompletionError::Provider {
                code,
                message: self.scrub(&message),
            },
            CompletionError::Protocol { message } => CompletionError::Protocol {
                message: self.scrub(&message),
            },
            other => other,
        }
    }

    fn scrub(&self, message: &str) -> String {
        self.inner.scrub(message)
    }
}

enum ReadError {
    /// Ends the call with this error (timeout, cancellation).
    Completion(CompletionError),
    /// The body broke off (connection cut).
    Body(String),
}

/// The `Retry-After` (seconds) or `retry-after-ms` delay of a response.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
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
    let seconds = text("retry-after")?.parse::<f64>().ok()?;
    (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds.min(86_400.0)))
}

/// The provider's message in an error body: OpenAI's `{"error": {"message"}}`, a
/// bare `{"message"}` / `{"error": "..."}`, or a short plain-text body.
fn error_body_message(bytes: &[u8]) -> Option<String> {
    if let Ok(value) = serde_json::from_slice::<Value>(bytes) {
        let error = match value {
            Value::Object(mut map) => map.remove("error").unwrap_or(Value::Object(map)),
            other => other,
        };
        return match decode::provider_error(error) {
            DecodeError::Provider { code, message } => Some(match code {
                Some(code) => format!("{message} ({code})"),
                None => message,
            }),
            DecodeError::Protocol { .. } => None,
        };
    }
    let text = std::str::from_utf8(bytes).ok()?.trim();
    (!text.is_empty() && text.len() <= 300 && !text.contains('<')).then(|| text.to_owned())
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

    #[test]
    fn retry_after_forms() {
        let mut headers = HeaderMap::new();
        assert_eq!(retry_after(&headers), None);
        headers.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
        headers.insert("retry-after-ms", HeaderValue::from_static("150"));
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(150)));
        let mut headers = HeaderMap::new();
        headers.insert(
            "retry-after",
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after(&headers), None);
    }

    #[test]
    fn error_body_messages() {
        assert_eq!(
            error_body_message(br#"{"error":{"message":"Rate limit","type":"requests","code":"rate_limit_exceeded"}}"#),
            Some("Rate limit (rate_limit_exceeded)".into())
        );
        assert_eq!(
            error_body_message(br#"{"error":"bad"}"#),
            Some("bad".into())
        );
        assert_eq!(
            error_body_message(b"upstream timeout"),
            Some("upstream timeout".into())
        );
        assert_eq!(error_body_message(b"<html>502</html>"), None);
    }

    #[test]
    fn config_debug_hides_secrets() {
        let mut config = ClientConfig::new("http://x/v1").with_api_key("sk-secret-123");
        config
            .extra_headers
            .push(("api-key".into(), "hdr-secret-456".into()));
        let text = format!("{config:?}");
        assert!(
            !text.contains("sk-secret-123") && !text.contains("hdr-secret-456"),
            "{text}"
        );
        let client = OpenAiClient::new(config).unwrap();
        assert!(!format!("{client:?}").contains("sk-secret-123"));
    }

    #[test]
    fn bad_configuration_is_invalid_request_without_values() {
        let err = OpenAiClient::new(ClientConfig::new("not a url")).unwrap_err();
        assert_eq!(err.code(), "invalid_request");
        let err = OpenAiClient::new(ClientConfig::new("ftp://x/v1")).unwrap_err();
        assert_eq!(err.code(), "invalid_request");
        let err = OpenAiClient::new(ClientConfig::new("http://x/v1").with_api_key("sk-bad\nkey"))
            .unwrap_err();
        assert!(!err.to_string().contains("sk-bad"), "{err}");
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let client = OpenAiClient::new(ClientConfig::new("http://x/v1")).unwrap();
        let call_inner = Arc::clone(&client.inner);
        let call = Call {
            inner: call_inner,
            cancel: CancellationToken::new(),
            model: String::new(),
            strict_tools: Vec::new(),
            phase: Phase::Finished,
            queue: VecDeque::new(),
            scratch: Vec::new(),
            terminal: false,
        };
        for attempt in 0..40 {
            let delay = call.inner.backoff(attempt);
            assert!(delay <= Duration::from_secs(8), "{delay:?}");
            assert!(
                delay >= Duration::from_millis(250).min(Duration::from_secs(4)),
                "{delay:?}"
            );
        }
    }
}
