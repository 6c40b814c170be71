//! The HTTP completion client: [`ResponsesClient`] implements [`CompletionPort`]
//! for `POST {base_url}/responses`.
//!
//! Encoding is [`crate::encode`], decoding [`crate::decode`]; the transport
//! (timeouts and the total deadline, retries with `Retry-After`, no redirects,
//! cancellation, secrets kept out of errors) is the shared `completion-http`
//! crate, whose docs give every rule. What is particular to this wire:
//!
//! - The base URL goes up to the version, as OpenAI's SDKs and
//!   `OPENAI_BASE_URL` take it (`https://api.openai.com/v1`, or a gateway's
//!   `http://127.0.0.1:4000/v1`); the client appends `/responses`.
//! - Headers: `Authorization: Bearer <key>` (when a key is set; secret).
//! - Error bodies `{error: {message, code|type}}` become `message (code)`.
//! - `error` and `response.failed` events after HTTP 200 are typed provider
//!   errors; a stream cut before `response.completed` a truncated stream.
//!
//! It reads no environment or config file: the composition root builds an
//! [`ResponsesConfig`].

use std::fmt;
use std::sync::Arc;

use ai_core::completion::{
    CompletionDelta, CompletionError, CompletionFinal, CompletionRequest, CompletionStream,
};
use ai_core::{CancellationToken, CompletionPort};
pub use completion_http::{ApiKey, Backoff, Timeouts};
use completion_http::{ErrorBody, HttpTransport, StreamDecoder, TransportConfig, Wire};

use crate::decode::{self, ResponsesDecoder};
use crate::encode::{ResponsesEncodeOptions, encode_request};

/// The API's origin, the default base URL.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// Everything the client needs; built by the composition root.
#[derive(Clone)]
pub struct ResponsesConfig {
    /// The API's URL up to the version ([`DEFAULT_BASE_URL`], or a gateway's
    /// `.../v1`). The `Debug` output hides any user name and password in it.
    pub base_url: String,
    /// Sent as `Authorization: Bearer` when set.
    pub api_key: Option<ApiKey>,
    /// Extra headers sent with every request (values are never logged), e.g.
    /// `OpenAI-Organization`.
    pub extra_headers: Vec<(String, String)>,
    /// Timeouts.
    pub timeouts: Timeouts,
    /// Retries after the first attempt (0 disables retries).
    pub max_retries: u32,
    /// Backoff between retries.
    pub backoff: Backoff,
    /// Request encoding options (`encode.stream` asks for a stream).
    pub encode: ResponsesEncodeOptions,
}

impl ResponsesConfig {
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
            encode: ResponsesEncodeOptions::default(),
        }
    }

    /// Sets the API key.
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(ApiKey::new(key));
        self
    }

    /// The transport's half of the configuration.
    fn transport(&self) -> TransportConfig {
        let mut headers: Vec<(String, String, bool)> = Vec::new();
        headers.extend(
            self.extra_headers
                .iter()
                .map(|(name, value)| (name.clone(), value.clone(), true)),
        );
        if let Some(key) = &self.api_key {
            headers.push((
                "authorization".into(),
                format!("Bearer {}", key.expose()),
                true,
            ));
        }
        TransportConfig {
            base_url: self.base_url.clone(),
            path: "/responses",
            headers,
            secrets: Vec::new(),
            timeouts: self.timeouts,
            max_retries: self.max_retries,
            backoff: self.backoff,
            error_body,
        }
    }
}

impl fmt::Debug for ResponsesConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let header_names: Vec<&str> = self.extra_headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("ResponsesConfig")
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
pub struct ResponsesClient {
    transport: Arc<HttpTransport>,
    config: Arc<ResponsesConfig>,
}

impl fmt::Debug for ResponsesClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponsesClient")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl ResponsesClient {
    /// Builds a client. Fails with [`CompletionError::InvalidRequest`] on a bad base
    /// URL, header or key (the message names the problem, never the value).
    pub fn new(config: ResponsesConfig) -> Result<Self, CompletionError> {
        let transport = HttpTransport::new(config.transport())?;
        Ok(Self {
            transport,
            config: Arc::new(config),
        })
    }

    /// The configuration the client was built with.
    pub fn config(&self) -> &ResponsesConfig {
        &self.config
    }
}

impl CompletionPort for ResponsesClient {
    fn complete(&self, request: CompletionRequest, cancel: CancellationToken) -> CompletionStream {
        let span = tracing::info_span!(
            "responses_completion",
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
        let wire = ResponsesWire {
            stream: self.config.encode.stream,
            strict_tools: crate::encode::strict_tools(&request, &self.config.encode),
        };
        self.transport.complete(body, wire, cancel, span)
    }
}

/// What one Messages API call needs besides its body.
struct ResponsesWire {
    stream: bool,
    /// Tools sent strict, with their schema as written.
    strict_tools: Vec<(String, serde_json::Value)>,
}

impl Wire for ResponsesWire {
    type Decoder = ResponsesDecoder;

    fn streams(&self) -> bool {
        self.stream
    }

    fn decoder(&self) -> ResponsesDecoder {
        ResponsesDecoder::new()
    }

    fn decode_body(
        &self,
        body: &[u8],
        out: &mut Vec<CompletionDelta>,
    ) -> Result<CompletionFinal, CompletionError> {
        decode::decode_response(body, out)
    }

    /// A strict tool's arguments have `null` for the properties that were
    /// optional: they go to the tool without them.
    fn finish_turn(&self, turn: &mut CompletionFinal) {
        for call in &mut turn.tool_calls {
            if call.outcome != ai_core::completion::ToolCallOutcome::Complete {
                continue;
            }
            if let Some((_, schema)) = self
                .strict_tools
                .iter()
                .find(|(name, _)| *name == call.name)
                && let Some(relaxed) =
                    ai_core::schema::strict::relax_strict_arguments(&call.arguments, schema)
            {
                call.arguments = relaxed;
            }
        }
    }
}

impl StreamDecoder for ResponsesDecoder {
    fn feed(
        &mut self,
        chunk: &[u8],
        out: &mut Vec<CompletionDelta>,
    ) -> Result<(), CompletionError> {
        ResponsesDecoder::feed(self, chunk, out).map_err(CompletionError::from)
    }

    fn events(&self) -> u64 {
        ResponsesDecoder::events(self)
    }

    fn is_done(&self) -> bool {
        ResponsesDecoder::is_done(self)
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
            message(br#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#),
            Some("Rate limit reached (rate_limit_exceeded)".into())
        );
        assert_eq!(
            message(br#"{"error":{"message":"bad key"}}"#),
            Some("bad key".into())
        );
        assert_eq!(
            message(b"upstream timed out"),
            Some("upstream timed out".into())
        );
        assert_eq!(message(b"<html>"), None);
    }

    #[test]
    fn a_strict_tool_s_arguments_lose_the_nulls_strict_mode_added() {
        let schema = serde_json::json!({"type": "object", "properties": {
            "text": {"type": "string"}, "title": {"type": "string"}}, "required": ["text"]});
        let wire = ResponsesWire {
            stream: true,
            strict_tools: vec![("core__write_note".into(), schema)],
        };
        let call = |name: &str| ai_core::completion::AssembledToolCall {
            index: 0,
            id: "call_1".into(),
            name: name.into(),
            arguments: r#"{"text":"hi","title":null}"#.into(),
            outcome: ai_core::completion::ToolCallOutcome::Complete,
            raw: None,
        };
        let mut turn = CompletionFinal {
            tool_calls: vec![call("core__write_note"), call("core__other")],
            ..CompletionFinal::default()
        };
        wire.finish_turn(&mut turn);
        assert_eq!(turn.tool_calls[0].arguments, r#"{"text":"hi"}"#);
        assert_eq!(
            turn.tool_calls[1].arguments,
            r#"{"text":"hi","title":null}"#
        );
    }
}
