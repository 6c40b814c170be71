//! The HTTP completion client: [`AnthropicClient`] implements [`CompletionPort`]
//! for `POST {base_url}/v1/messages`.
//!
//! Encoding is [`crate::encode`], decoding [`crate::decode`]; the transport
//! (timeouts and the total deadline, retries with `Retry-After`, no redirects,
//! cancellation, secrets kept out of errors) is the shared `completion-http`
//! crate, whose docs give every rule. What is particular to this wire:
//!
//! - The base URL is the API's origin without the version, as Anthropic's own
//!   SDKs and `ANTHROPIC_BASE_URL` take it (`https://api.anthropic.com`, or a
//!   gateway's root such as `http://127.0.0.1:4000`); the client appends
//!   `/v1/messages`.
//! - Headers: `x-api-key` (when a key is set; secret) and `anthropic-version`
//!   ([`crate::API_VERSION`]).
//! - Error bodies `{type: "error", error: {type, message}}` become
//!   `message (type)`; 529 (`overloaded_error`) is retried like 503, and a 429
//!   (`rate_limit_error`) like any rate limit, honouring `retry-after`.
//! - A streamed `error` event after HTTP 200 is a typed provider error; a stream
//!   cut before `message_stop` a truncated stream.
//!
//! It reads no environment or config file: the composition root builds an
//! [`AnthropicConfig`].

use std::fmt;
use std::sync::Arc;

use ai_core::completion::{
    CompletionDelta, CompletionError, CompletionFinal, CompletionRequest, CompletionStream,
};
use ai_core::{CancellationToken, CompletionPort};
pub use completion_http::{ApiKey, Backoff, Timeouts};
use completion_http::{ErrorBody, HttpTransport, StreamDecoder, TransportConfig, Wire};

use crate::decode::{self, AnthropicDecoder};
use crate::encode::{AnthropicEncodeOptions, encode_request};

/// The API's origin, the default base URL.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";

/// Everything the client needs; built by the composition root.
#[derive(Clone)]
pub struct AnthropicConfig {
    /// The API's origin without `/v1` ([`DEFAULT_BASE_URL`], or a gateway's root).
    /// The `Debug` output hides any user name and password in it.
    pub base_url: String,
    /// Sent as `x-api-key` when set.
    pub api_key: Option<ApiKey>,
    /// Extra headers sent with every request (values are never logged), e.g.
    /// `anthropic-beta`.
    pub extra_headers: Vec<(String, String)>,
    /// Timeouts.
    pub timeouts: Timeouts,
    /// Retries after the first attempt (0 disables retries).
    pub max_retries: u32,
    /// Backoff between retries.
    pub backoff: Backoff,
    /// Request encoding options (`encode.stream` asks for a stream).
    pub encode: AnthropicEncodeOptions,
}

impl AnthropicConfig {
    /// A streaming configuration for `base_url` with default timeouts, 2 retries
    /// and no key.
    pub fn new(base_url: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            api_key: None,
            extra_headers: Vec::new(),
            timeouts: Timeouts::default(),
            max_retries: 2,
            backoff: Backoff::default(),
            encode: AnthropicEncodeOptions::default(),
        }
    }

    /// Sets the API key.
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(ApiKey::new(key));
        self
    }

    /// The transport's half of the configuration.
    fn transport(&self) -> TransportConfig {
        let mut headers: Vec<(String, String, bool)> =
            vec![("anthropic-version".into(), crate::API_VERSION.into(), false)];
        headers.extend(
            self.extra_headers
                .iter()
                .map(|(name, value)| (name.clone(), value.clone(), true)),
        );
        if let Some(key) = &self.api_key {
            headers.push(("x-api-key".into(), key.expose().to_owned(), true));
        }
        TransportConfig {
            base_url: self.base_url.clone(),
            path: "/v1/messages",
            headers,
            secrets: Vec::new(),
            timeouts: self.timeouts,
            max_retries: self.max_retries,
            backoff: self.backoff,
            error_body,
        }
    }
}

impl fmt::Debug for AnthropicConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let header_names: Vec<&str> = self.extra_headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("AnthropicConfig")
            .field(
                "base_url",
                &completion_http::redact_userinfo(&self.base_url),
            )
            .field("api_key", &self.api_key)
            .field("extra_headers", &header_names)
            .field("timeouts", &self.timeouts)
            .field("max_retries", &self.max_retries)
            .field("backoff", &self.backoff)
            .field("encode", &self.encode)
            .finish()
    }
}

/// A Messages API client.
#[derive(Clone)]
pub struct AnthropicClient {
    transport: Arc<HttpTransport>,
    config: Arc<AnthropicConfig>,
}

impl fmt::Debug for AnthropicClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnthropicClient")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl AnthropicClient {
    /// Builds a client. Fails with [`CompletionError::InvalidRequest`] on a bad base
    /// URL, header or key (the message names the problem, never the value).
    pub fn new(config: AnthropicConfig) -> Result<Self, CompletionError> {
        let transport = HttpTransport::new(config.transport())?;
        Ok(Self {
            transport,
            config: Arc::new(config),
        })
    }

    /// The configuration the client was built with.
    pub fn config(&self) -> &AnthropicConfig {
        &self.config
    }
}

impl CompletionPort for AnthropicClient {
    fn complete(&self, request: CompletionRequest, cancel: CancellationToken) -> CompletionStream {
        let span = tracing::info_span!(
            "anthropic_completion",
            run_id = %request.context.run_id,
            trace_id = %request.context.trace_id,
            model = %request.model,
        );
        let body = encode_request(&request, &self.config.encode)
            .map_err(|error| CompletionError::InvalidRequest {
                message: error.to_string(),
            })
            .and_then(|body| {
                serde_json::to_vec(&body)
                    .map(bytes::Bytes::from)
                    .map_err(|e| CompletionError::InvalidRequest {
                        message: format!("cannot serialize the request: {e}"),
                    })
            });
        let wire = MessagesWire {
            stream: self.config.encode.stream,
        };
        self.transport.complete(body, wire, cancel, span)
    }
}

/// What one Messages API call needs besides its body.
struct MessagesWire {
    stream: bool,
}

impl Wire for MessagesWire {
    type Decoder = AnthropicDecoder;

    fn streams(&self) -> bool {
        self.stream
    }

    fn decoder(&self) -> AnthropicDecoder {
        AnthropicDecoder::new()
    }

    fn decode_body(
        &self,
        body: &[u8],
        out: &mut Vec<CompletionDelta>,
    ) -> Result<CompletionFinal, CompletionError> {
        decode::decode_message(body, out)
    }
}

impl StreamDecoder for AnthropicDecoder {
    fn feed(
        &mut self,
        chunk: &[u8],
        out: &mut Vec<CompletionDelta>,
    ) -> Result<(), CompletionError> {
        AnthropicDecoder::feed(self, chunk, out).map_err(CompletionError::from)
    }

    fn events(&self) -> u64 {
        AnthropicDecoder::events(self)
    }

    fn is_done(&self) -> bool {
        AnthropicDecoder::is_done(self)
    }

    fn finish(self, out: &mut Vec<CompletionDelta>) -> Result<CompletionFinal, CompletionError> {
        self.finish_into(out)
    }
}

/// An error body's message: `message (code)` for the API's shape (and for an
/// OpenAI-shaped body from a gateway), else a short plain-text body.
fn error_body(bytes: &[u8]) -> ErrorBody {
    ErrorBody::from_parsed(decode::parse_error_body(bytes), bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies() {
        let message = |body: &[u8]| error_body(body).message;
        assert_eq!(
            message(
                br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#
            ),
            Some("Overloaded (overloaded_error)".into())
        );
        assert_eq!(
            message(br#"{"error":{"message":"bad key"}}"#),
            Some("bad key".into())
        );
        assert_eq!(
            message(b"upstream timeout"),
            Some("upstream timeout".into())
        );
        assert_eq!(message(b"<html>502</html>"), None);
        assert_eq!(message(b""), None);
    }

    #[test]
    fn headers_and_debug() {
        let config = AnthropicConfig::new("https://user:pw-1234@gateway.example")
            .with_api_key("sk-ant-secret-1");
        let transport = config.transport();
        assert_eq!(transport.path, "/v1/messages");
        let names: Vec<&str> = transport
            .headers
            .iter()
            .map(|(n, _, _)| n.as_str())
            .collect();
        assert_eq!(names, ["anthropic-version", "x-api-key"]);
        assert!(
            transport
                .headers
                .iter()
                .all(|(n, _, secret)| *secret == (n == "x-api-key"))
        );
        let client = AnthropicClient::new(config).unwrap();
        let text = format!("{client:?}");
        assert!(
            !text.contains("sk-ant-secret-1") && !text.contains("pw-1234"),
            "{text}"
        );
    }
}
