//! The HTTP completion client: [`OpenAiClient`] implements [`CompletionPort`] for
//! any OpenAI-compatible `/chat/completions` endpoint.
//!
//! Encoding is [`crate::encode`], decoding [`crate::decode`]; the transport
//! (timeouts and the total deadline, retries with `Retry-After`, no redirects,
//! cancellation, secrets kept out of errors) is the shared `completion-http`
//! crate, whose docs give every rule. What is particular to this wire:
//!
//! - `POST {base_url}/chat/completions` with `Authorization: Bearer <key>` when a key
//!   is set. A query string in the base URL (Azure's `?api-version=...`) is kept,
//!   after the path.
//! - A 429 whose error `code` or `type` is `insufficient_quota` is not retried
//!   (waiting does not refill a quota).
//! - Tools and answers sent with a strict schema get their optional properties
//!   back as absent (strict mode made them `null`).
//!
//! It reads no environment or config file: bootstrap builds a [`ClientConfig`].

use std::fmt;
use std::sync::Arc;

use ai_core::{
    CancellationToken, CompletionPort,
    completion::{
        CompletionDelta, CompletionError, CompletionFinal, CompletionRequest, CompletionStream,
    },
};
use bytes::Bytes;
pub use completion_http::{ApiKey, Backoff, Timeouts};
use completion_http::{ErrorBody, HttpTransport, StreamDecoder, TransportConfig, Wire};
use serde_json::Value;

use crate::decode::{self, Decoder, DecoderOptions, DeltaMode};
use crate::encode::{EncodeOptions, encode_request, relax_strict_arguments};

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

    /// The transport's half of the configuration.
    fn transport(&self) -> TransportConfig {
        let mut headers: Vec<(String, String, bool)> = self
            .extra_headers
            .iter()
            .map(|(name, value)| (name.clone(), value.clone(), true))
            .collect();
        if let Some(key) = &self.api_key {
            headers.push((
                "authorization".into(),
                format!("Bearer {}", key.expose()),
                true,
            ));
        }
        TransportConfig {
            base_url: self.base_url.clone(),
            path: "/chat/completions",
            headers,
            secrets: self.api_key.iter().cloned().collect(),
            timeouts: self.timeouts,
            max_retries: self.max_retries,
            backoff: self.backoff,
            error_body,
        }
    }
}

impl fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let header_names: Vec<&str> = self.extra_headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("ClientConfig")
            .field(
                "base_url",
                &completion_http::redact_userinfo(&self.base_url),
            )
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

/// A chat-completions client for OpenAI-compatible endpoints.
#[derive(Clone)]
pub struct OpenAiClient {
    transport: Arc<HttpTransport>,
    config: Arc<ClientConfig>,
}

impl fmt::Debug for OpenAiClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiClient")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl OpenAiClient {
    /// Builds a client. Fails with [`CompletionError::InvalidRequest`] on a bad base
    /// URL, header or key (the message names the problem, never the value).
    pub fn new(config: ClientConfig) -> Result<Self, CompletionError> {
        let transport = HttpTransport::new(config.transport())?;
        Ok(Self {
            transport,
            config: Arc::new(config),
        })
    }

    /// The configuration the client was built with.
    pub fn config(&self) -> &ClientConfig {
        &self.config
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
        let (body, wire) = OpenAiWire::encode(&self.config, &request);
        self.transport.complete(body, wire, cancel, span)
    }
}

/// What one chat-completions call needs besides its body.
struct OpenAiWire {
    stream: bool,
    options: DecoderOptions,
    /// Tools sent with a strict schema, with their original schema.
    strict_tools: Vec<(String, Value)>,
    /// The original schema of an answer asked for with a strict JSON schema that
    /// was sent strict.
    strict_answer: Option<Value>,
}

impl OpenAiWire {
    /// The request body (or why it cannot be encoded) and the call's wire half.
    fn encode(
        config: &ClientConfig,
        request: &CompletionRequest,
    ) -> (Result<Bytes, CompletionError>, Self) {
        let mut options = config.encode.clone();
        options.stream = config.stream;
        let mut wire = Self {
            stream: config.stream,
            options: DecoderOptions {
                deltas: config.deltas,
                model: request.model.clone(),
                ..DecoderOptions::default()
            },
            strict_tools: Vec::new(),
            strict_answer: None,
        };
        let encoded = match encode_request(request, &options) {
            Ok(encoded) => encoded,
            Err(error) => {
                let error = CompletionError::InvalidRequest {
                    message: error.to_string(),
                };
                return (Err(error), wire);
            }
        };
        if let (
            Some(Ok(())),
            Some(ai_core::completion::ResponseFormat::JsonSchema { schema, .. }),
        ) = (&encoded.response_strict, &request.settings.response_format)
        {
            wire.strict_answer = Some(schema.clone());
        }
        for report in &encoded.strict {
            if report.outcome.is_ok()
                && let Some(spec) = request.tools.iter().find(|t| t.id.as_str() == report.tool)
            {
                wire.strict_tools
                    .push((report.tool.clone(), spec.input_schema.clone()));
            }
        }
        let body = serde_json::to_vec(&encoded.body)
            .map(Bytes::from)
            .map_err(|e| CompletionError::InvalidRequest {
                message: format!("cannot serialize the request: {e}"),
            });
        (body, wire)
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
}

impl Wire for OpenAiWire {
    type Decoder = Decoder;

    fn streams(&self) -> bool {
        self.stream
    }

    fn decoder(&self) -> Decoder {
        Decoder::with_options(self.options.clone())
    }

    fn decode_body(
        &self,
        body: &[u8],
        out: &mut Vec<CompletionDelta>,
    ) -> Result<CompletionFinal, CompletionError> {
        decode::decode_response_into(body, self.options.clone(), out)
    }

    fn finish_turn(&self, turn: &mut CompletionFinal) {
        self.relax_strict(&mut turn.tool_calls);
        // A strict answer has `null` for the properties that were optional: the
        // final content gets them back as absent (streamed text deltas keep them).
        if let Some(schema) = &self.strict_answer
            && let Some(relaxed) = relax_strict_arguments(&turn.text, schema)
        {
            turn.text = relaxed;
        }
    }
}

impl StreamDecoder for Decoder {
    fn feed(
        &mut self,
        chunk: &[u8],
        out: &mut Vec<CompletionDelta>,
    ) -> Result<(), CompletionError> {
        Decoder::feed(self, chunk, out).map_err(CompletionError::from)
    }

    fn events(&self) -> u64 {
        Decoder::events(self)
    }

    fn is_done(&self) -> bool {
        Decoder::is_done(self)
    }

    fn finish(self, out: &mut Vec<CompletionDelta>) -> Result<CompletionFinal, CompletionError> {
        self.finish_into(out)
    }
}

/// What an error body says: the provider's message (OpenAI's `{"error":
/// {"message"}}`, a bare `{"message"}` / `{"error": "..."}`, Gemini's array,
/// FastAPI's `detail`, or a short plain-text body), and whether it is OpenAI's
/// `insufficient_quota` (as `code` or `type`): out of credit, which no retry fixes
/// (unlike a rate limit, also a 429).
fn error_body(bytes: &[u8]) -> ErrorBody {
    let message = decode::parse_error_body(bytes).map(|(code, message)| match code {
        Some(code) => format!("{message} ({code})"),
        None => message,
    });
    ErrorBody {
        message,
        permanent: insufficient_quota(bytes),
    }
}

fn insufficient_quota(bytes: &[u8]) -> bool {
    let Ok(value) = serde_json::from_slice::<Value>(bytes) else {
        return false;
    };
    // Gemini wraps the error object in an array.
    let value = match &value {
        Value::Array(items) => items.first().unwrap_or(&value),
        _ => &value,
    };
    let error = value.get("error").unwrap_or(value);
    ["code", "type"]
        .iter()
        .any(|field| error.get(field).and_then(Value::as_str) == Some("insufficient_quota"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insufficient_quota_is_recognised_as_code_or_type() {
        let quota = |body: &str| error_body(body.as_bytes()).permanent;
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
    fn error_body_messages() {
        let message = |body: &[u8]| error_body(body).message;
        assert_eq!(
            message(br#"{"error":{"message":"Rate limit","type":"requests","code":"rate_limit_exceeded"}}"#),
            Some("Rate limit (rate_limit_exceeded)".into())
        );
        assert_eq!(message(br#"{"error":"bad"}"#), Some("bad".into()));
        assert_eq!(
            message(b"upstream timeout"),
            Some("upstream timeout".into())
        );
        assert_eq!(message(b"<html>502</html>"), None);
    }

    #[test]
    fn config_debug_hides_secrets() {
        let mut config =
            ClientConfig::new("https://user:pass-9876@host/v1").with_api_key("sk-secret-123");
        config
            .extra_headers
            .push(("api-key".into(), "hdr-secret-456".into()));
        let text = format!("{config:?}");
        for secret in ["sk-secret-123", "hdr-secret-456", "pass-9876"] {
            assert!(!text.contains(secret), "{text}");
        }
        let client = OpenAiClient::new(config).unwrap();
        let text = format!("{client:?}");
        assert!(!text.contains("sk-secret-123") && !text.contains("pass-9876"));
    }

    #[test]
    fn bad_configuration_is_invalid_request_without_values() {
        let err = OpenAiClient::new(ClientConfig::new("not a url")).unwrap_err();
        assert_eq!(err.code(), "invalid_request");
        let err = OpenAiClient::new(ClientConfig::new("http://x/v1").with_api_key("sk-bad\nkey"))
            .unwrap_err();
        assert!(!err.to_string().contains("sk-bad"), "{err}");
    }
}
