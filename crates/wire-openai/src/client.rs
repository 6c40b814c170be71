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
//!   of the key in a provider message is replaced by `[redacted]`). A query string
//!   in the base URL (Azure's `?api-version=...`) is kept, after the path.
//! - Timeouts ([`Timeouts`]): `connect` (TCP/TLS, per attempt), `first_byte` (from
//!   sending until the response headers arrive; for non-streaming calls that
//!   includes the whole generation), `between_chunks` (the idle limit of a body, see
//!   below) and `total`, a deadline for the whole call: it starts when the stream is
//!   first polled (the request is sent) and covers every attempt, every wait between
//!   retries and the whole body, streamed or not. Its expiry is
//!   [`CompletionError::Timeout`] with [`TimeoutPhase::Total`]; a retry that could
//!   not start before it is not attempted (the last error is returned instead).
//! - Idle limit of a stream: `between_chunks` counts from the response head or from
//!   the last server-sent *event* (a dispatched `data:` event); bytes that complete
//!   no event, SSE comments such as `: ping` keepalives in particular, do not reset
//!   it. So a server that only sends keepalives times out after `between_chunks`,
//!   and one that keeps sending data is bounded by `total`. For a non-streaming body
//!   any chunk resets it.
//! - Retries, before the first byte of a successful response only: on 408, 409,
//!   429, 5xx, connection errors and connect timeouts, up to `max_retries` times,
//!   with exponential backoff and jitter, or the server's `Retry-After` (seconds or
//!   an HTTP date) / `retry-after-ms` when given. Not retried: a `Retry-After`
//!   longer than [`Backoff::max_retry_after`] (the error is returned), a 429 whose
//!   error `code` or `type` is `insufficient_quota` (waiting does not refill a
//!   quota), TLS errors (a bad certificate or a non-TLS server does not heal), a
//!   first-byte timeout (the server may still be generating). Nothing is retried once
//!   a response body has started.
//! - Redirects are never followed: any 3xx answer is a [`CompletionError::Http`]
//!   naming only the target's origin. So the key and the extra headers (an Azure
//!   `api-key`, say) never leave the configured origin, and a request body is never
//!   replayed somewhere else. Configure the final URL as the base URL.
//! - Cancellation: dropping the stream aborts the request and closes the
//!   connection; firing the [`CancellationToken`] ends the stream with
//!   [`CompletionError::Cancelled`].
//! - A connection cut in the middle of a stream ends it like a truncated stream:
//!   [`CompletionError::TruncatedStream`] with everything assembled so far.
//! - A server that answers a streaming request with a plain JSON body is decoded as a
//!   non-streaming response.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use ai_core::{
    CancellationToken, CompletionPort,
    completion::{
        CompletionDelta, CompletionError, CompletionItem, CompletionRequest, CompletionStream,
        TimeoutPhase,
    },
};
use bytes::Bytes;
use futures::StreamExt;
use futures::stream::BoxStream;
use reqwest::header::{self, HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;
use tokio::time::Instant;
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
    /// Idle limit of a response body: for a stream, the longest wait for the next
    /// server-sent event (keepalive comments do not count as one); for a
    /// non-streaming body, for the next chunk.
    pub between_chunks: Duration,
    /// Deadline of the whole call, retries and body included (`None`: no deadline).
    pub total: Option<Duration>,
}

impl Default for Timeouts {
    /// 10 s to connect, 120 s to the first byte, 60 s idle, 10 minutes in total.
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(10),
            first_byte: Duration::from_secs(120),
            between_chunks: Duration::from_secs(60),
            total: Some(Duration::from_secs(600)),
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
    /// `https://api.openai.com/v1` or `http://localhost:11434/v1`. A query string is
    /// kept: `https://x.openai.azure.com/openai/deployments/d?api-version=2024-10-21`
    /// posts to `.../deployments/d/chat/completions?api-version=2024-10-21`. The
    /// `Debug` output hides any user name and password in it.
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
            .field("base_url", &redact_userinfo(&self.base_url))
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
    /// Sends the request, retrying before the first byte where the rules allow.
    async fn send(
        &self,
        cancel: &CancellationToken,
        body: Bytes,
        deadline: Option<Instant>,
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
            let (limit, phase) = within(
                after(config.timeouts.first_byte),
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
                Ok(Err(error)) => {
                    let (mapped, retryable) = self.map_send_error(error);
                    if !retryable || attempt >= config.max_retries {
                        return Err(mapped);
                    }
                    let delay = self.backoff(attempt);
                    if !starts_before(delay, deadline) {
                        tracing::warn!(error = %mapped, "no time left for a retry before the deadline");
                        return Err(mapped);
                    }
                    tracing::warn!(attempt, error = %mapped, "connection failed; retrying");
                    delay
                }
                Ok(Ok(response)) => {
                    let status = response.status();
                    if status.is_success() {
                        return Ok(response);
                    }
                    if status.is_redirection() {
                        return Err(self.redirect_error(&response));
                    }
                    let retryable =
                        matches!(status.as_u16(), 408 | 409 | 429) || status.is_server_error();
                    if !retryable || attempt >= config.max_retries {
                        return Err(self.http_error(cancel, response, deadline).await.0);
                    }
                    let server_delay = retry_after(response.headers(), SystemTime::now());
                    if server_delay.is_some_and(|d| d > config.backoff.max_retry_after) {
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
                        // The body tells a rate limit (retry) from an exhausted quota.
                        let (error, kind) = self.http_error(cancel, response, deadline).await;
                        if error == CompletionError::Cancelled {
                            return Err(error);
                        }
                        if kind.insufficient_quota {
                            tracing::warn!("quota exhausted; not retrying");
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

    /// A 3xx answer: redirects are not followed (see the module docs).
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
    ) -> (CompletionError, ErrorKind) {
        let status = response.status();
        let mut body = response.bytes_stream().boxed();
        let mut bytes = Vec::new();
        while bytes.len() < MAX_ERROR_BODY_BYTES {
            let idle = after(self.config.timeouts.between_chunks);
            match self.read_chunk(cancel, &mut body, idle, deadline).await {
                Ok(Some(chunk)) => bytes.extend_from_slice(&chunk),
                Ok(None) | Err(ReadError::Body(_)) => break,
                Err(ReadError::Completion(CompletionError::Cancelled)) => {
                    return (CompletionError::Cancelled, ErrorKind::default());
                }
                Err(ReadError::Completion(_)) => break,
            }
        }
        let message = error_body_message(&bytes)
            .unwrap_or_else(|| status.canonical_reason().unwrap_or("error").to_owned());
        let error = CompletionError::Http {
            status: status.as_u16(),
            message: self.scrub(&message),
        };
        (error, error_kind(&bytes))
    }

    /// The next body chunk, waiting at most until `idle` (then a between-chunks
    /// timeout) and `deadline` (then a total timeout).
    async fn read_chunk(
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
        let endpoint = chat_endpoint(&config.base_url).map_err(invalid)?;
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
        let tls = client_tls::client_config().map_err(|e| invalid(e.to_string()))?;
        let http = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .connect_timeout(config.timeouts.connect)
            // Never follow a redirect: see the module docs.
            .redirect(reqwest::redirect::Policy::none())
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
        /// When the idle limit expires unless an event arrives first.
        idle: Instant,
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
    /// The original schema of an answer asked for with a strict JSON schema that
    /// was sent strict.
    strict_answer: Option<Value>,
    /// The total deadline, set when the request is first sent.
    deadline: Option<Instant>,
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
        let mut strict_answer = None;
        let body = match encode_request(request, &options) {
            Ok(encoded) => {
                if let (
                    Some(Ok(())),
                    Some(ai_core::completion::ResponseFormat::JsonSchema { schema, .. }),
                ) = (&encoded.response_strict, &request.settings.response_format)
                {
                    strict_answer = Some(schema.clone());
                }
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
            strict_answer,
            deadline: None,
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
                    idle,
                } => {
                    let inner = Arc::clone(&self.inner);
                    match inner
                        .read_chunk(&self.cancel, &mut body, idle, self.deadline)
                        .await
                    {
                        Ok(Some(chunk)) => {
                            let events = decoder.events();
                            let fed = decoder.feed(&chunk, &mut self.scratch);
                            // Only a completed event resets the idle limit, so
                            // keepalive comments cannot hold a stalled stream open.
                            let idle = if decoder.events() > events {
                                after(inner.config.timeouts.between_chunks)
                            } else {
                                idle
                            };
                            self.queue_deltas();
                            match fed {
                                Ok(()) if decoder.is_done() => self.finish(*decoder),
                                Ok(()) => {
                                    self.phase = Phase::Streaming {
                                        body,
                                        decoder,
                                        idle,
                                    }
                                }
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
        self.deadline = inner.config.timeouts.total.map(after);
        let response = inner.send(&self.cancel, body, self.deadline).await?;
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
                idle: after(inner.config.timeouts.between_chunks),
            };
            return Ok(());
        }
        let mut body = response.bytes_stream().boxed();
        let mut bytes = Vec::new();
        loop {
            let idle = after(inner.config.timeouts.between_chunks);
            match inner
                .read_chunk(&self.cancel, &mut body, idle, self.deadline)
                .await
            {
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

    fn queue_final(&mut self, mut turn: ai_core::completion::CompletionFinal) {
        self.relax_strict(&mut turn.tool_calls);
        // A strict answer has `null` for the properties that were optional: the
        // final content gets them back as absent (streamed text deltas keep them).
        if let Some(schema) = &self.strict_answer
            && let Some(relaxed) = relax_strict_arguments(&turn.text, schema)
        {
            turn.text = relaxed;
        }
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

    fn relax_strict(&self, calls: &mut [ai_core::completion::AssembledToolCall]) {
        if self.strict_tools.is_empty() {
            return;
        }
        for call in calls {
            if call.outcome != ai_core::completion::ToolCallOutcome::Complete {
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

/// `duration` from now; a duration too long to represent ends in 30 years (a
/// configured `Duration::MAX` must not panic).
fn after(duration: Duration) -> Instant {
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

/// What an error body says beyond its message.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct ErrorKind {
    /// OpenAI's `insufficient_quota` (as `code` or `type`): out of credit, which no
    /// retry fixes (unlike a rate limit, also a 429).
    insufficient_quota: bool,
}

fn error_kind(bytes: &[u8]) -> ErrorKind {
    let Ok(value) = serde_json::from_slice::<Value>(bytes) else {
        return ErrorKind::default();
    };
    // Gemini wraps the error object in an array.
    let value = match &value {
        Value::Array(items) => items.first().unwrap_or(&value),
        _ => &value,
    };
    let error = value.get("error").unwrap_or(value);
    let insufficient_quota = ["code", "type"]
        .iter()
        .any(|field| error.get(field).and_then(Value::as_str) == Some("insufficient_quota"));
    ErrorKind { insufficient_quota }
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

/// The chat-completions URL under `base_url`: the path gets `/chat/completions`, a
/// query string is kept after it, a fragment is dropped. Errors never quote the URL.
fn chat_endpoint(base_url: &str) -> Result<reqwest::Url, String> {
    let mut url = reqwest::Url::parse(base_url.trim())
        .map_err(|e| format!("base URL is not a valid URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") || url.cannot_be_a_base() {
        return Err("base URL must use http or https".into());
    }
    let path = format!("{}/chat/completions", url.path().trim_end_matches('/'));
    url.set_path(&path);
    url.set_fragment(None);
    Ok(url)
}

/// `url` with any user name and password replaced by `redacted` (for `Debug`).
/// Works on the text, so a URL that does not parse is redacted too.
fn redact_userinfo(url: &str) -> Cow<'_, str> {
    let Some(scheme_end) = url.find("://") else {
        return Cow::Borrowed(url);
    };
    let authority_start = scheme_end + 3;
    let rest = &url[authority_start..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => Cow::Owned(format!(
            "{}redacted@{}",
            &url[..authority_start],
            &rest[at + 1..]
        )),
        None => Cow::Borrowed(url),
    }
}

/// The provider's message in an error body: OpenAI's `{"error": {"message"}}`, a
/// bare `{"message"}` / `{"error": "..."}`, or a short plain-text body.
fn error_body_message(bytes: &[u8]) -> Option<String> {
    // One parser for every error body shape (OpenAI's object, Gemini's array, plain
    // text, FastAPI's `detail`), bounded and with secrets scrubbed.
    let (code, message) = decode::parse_error_body(bytes)?;
    Some(match code {
        Some(code) => format!("{message} ({code})"),
        None => message,
    })
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
    fn insufficient_quota_is_recognised_as_code_or_type() {
        let quota = |body: &str| error_kind(body.as_bytes()).insufficient_quota;
        assert!(quota(
            r#"{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#
        ));
        assert!(quota(
            r#"{"error":{"message":"quota","type":"insufficient_quota","code":null}}"#
        ));
        assert!(quota(r#"{"code":"insufficient_quota","message":"quota"}"#));
        assert!(quota(
            r#"[{"error":{"code":429,"message":"quota","status":"RESOURCE_EXHAUSTED","type":"insufficient_quota"}}]"#
        ));
        assert!(!quota(
            r#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#
        ));
        assert!(!quota("insufficient_quota"));
        assert!(!quota(""));
    }

    #[test]
    fn endpoint_keeps_the_query_after_the_path() {
        let cases = [
            ("http://x/v1", "http://x/v1/chat/completions"),
            ("http://x/v1/", "http://x/v1/chat/completions"),
            ("http://x", "http://x/chat/completions"),
            (
                "https://r.openai.azure.com/openai/deployments/d?api-version=2024-10-21",
                "https://r.openai.azure.com/openai/deployments/d/chat/completions?api-version=2024-10-21",
            ),
            (
                "https://r.example/openai/v1/?api-version=preview&x=1#frag",
                "https://r.example/openai/v1/chat/completions?api-version=preview&x=1",
            ),
        ];
        for (base, expected) in cases {
            assert_eq!(chat_endpoint(base).unwrap().as_str(), expected, "{base}");
        }
        assert!(chat_endpoint("mailto:a@b").is_err());
    }

    #[test]
    fn config_debug_hides_url_userinfo() {
        for (url, shown) in [
            ("https://user:pass@host/v1", "https://redacted@host/v1"),
            (
                "https://pass@host:8443/v1?q=1",
                "https://redacted@host:8443/v1?q=1",
            ),
            ("http://host/v1?email=a@b", "http://host/v1?email=a@b"),
            ("no scheme user:pass@host", "no scheme user:pass@host"),
            ("weird://us:er:pass@@host/x", "weird://redacted@host/x"),
        ] {
            assert_eq!(redact_userinfo(url), shown, "{url}");
        }
        let config = ClientConfig::new("https://user:pass-9876@host/v1");
        let text = format!("{config:?}");
        assert!(
            !text.contains("pass-9876") && !text.contains("user:"),
            "{text}"
        );
        let client = OpenAiClient::new(config).unwrap();
        assert!(!format!("{client:?}").contains("pass-9876"));
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
        let client = OpenAiClient::new(ClientConfig::new("http://x/v1")).unwrap();
        let call_inner = Arc::clone(&client.inner);
        let call = Call {
            inner: call_inner,
            cancel: CancellationToken::new(),
            model: String::new(),
            strict_tools: Vec::new(),
            strict_answer: None,
            deadline: None,
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
