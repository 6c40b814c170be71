//! The HTTP completion client: [`OpenAiClient`] implements [`ai_core::CompletionPort`] for
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
//! [`OpenAiClient`] is the shared `completion_http::WireClient` on
//! [`OpenAiSpec`]. It reads no environment or config file: bootstrap builds a
//! [`ClientConfig`].

use ai_core::completion::{
    CompletionDelta, CompletionError, CompletionFinal, CompletionRequest, ResponseFormat,
};
pub use completion_http::{ApiKey, Backoff, Timeouts, WireClient, WireSpec};
use completion_http::{ErrorBody, StrictTools};
use serde_json::Value;

use crate::decode::{self, DecoderOptions, DeltaMode, OpenAiAssembler};
use crate::encode::{EncodeError, EncodeOptions, encode_request, relax_strict_arguments};

/// Everything the client needs, built by the composition root: the endpoint
/// settings every wire shares (`base_url` up to and including the API version,
/// e.g. `https://api.openai.com/v1` or `http://localhost:11434/v1`) and
/// [`OpenAiOptions`].
pub type ClientConfig = completion_http::WireConfig<OpenAiOptions>;

/// A chat-completions client for OpenAI-compatible endpoints.
pub type OpenAiClient = WireClient<OpenAiSpec>;

/// The chat-completions wire's own options.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OpenAiOptions {
    /// Which deltas the stream yields (the final is the same in every mode).
    pub deltas: DeltaMode,
    /// Request encoding options (`encode.stream` asks for a streamed response).
    pub encode: EncodeOptions,
}

/// What makes the chat-completions wire: `POST /chat/completions`, a bearer
/// key, error bodies of every gateway's shape (`insufficient_quota` never
/// retried), its encoder and its stream's assembler, and the strict-mode `null`s
/// taken out of the final turn.
#[derive(Debug, Clone, Copy)]
pub struct OpenAiSpec;

/// What decoding one chat-completions call needs from its request.
#[derive(Debug)]
pub struct OpenAiCall {
    /// The decoder's options (delta mode, the request's model).
    decoder: DecoderOptions,
    /// Tools sent with a strict schema, with their original schema.
    strict_tools: StrictTools,
    /// The original schema of an answer asked for with a strict JSON schema that
    /// was sent strict.
    strict_answer: Option<Value>,
}

impl WireSpec for OpenAiSpec {
    const NAME: &'static str = "openai";
    const PATH: &'static str = "/chat/completions";

    type Options = OpenAiOptions;
    type Assembler = OpenAiAssembler;
    type Call = OpenAiCall;
    type EncodeError = EncodeError;

    fn auth_header(key: &ApiKey) -> (&'static str, String) {
        ("authorization", format!("Bearer {}", key.expose()))
    }

    fn error_body(bytes: &[u8]) -> ErrorBody {
        error_body(bytes)
    }

    fn streams(options: &OpenAiOptions) -> bool {
        options.encode.stream
    }

    fn encode(
        request: &CompletionRequest,
        options: &OpenAiOptions,
    ) -> Result<(Value, OpenAiCall), EncodeError> {
        let encoded = encode_request(request, &options.encode)?;
        let mut call = OpenAiCall {
            decoder: DecoderOptions {
                deltas: options.deltas,
                model: request.model.clone(),
                ..DecoderOptions::default()
            },
            strict_tools: StrictTools::default(),
            strict_answer: None,
        };
        if let (Some(Ok(())), Some(ResponseFormat::JsonSchema { schema, .. })) =
            (&encoded.response_strict, &request.settings.response_format)
        {
            call.strict_answer = Some(schema.clone());
        }
        for report in &encoded.strict {
            if report.outcome.is_ok()
                && let Some(spec) = request.tools.iter().find(|t| t.id.as_str() == report.tool)
            {
                call.strict_tools
                    .push(report.tool.clone(), spec.input_schema.clone());
            }
        }
        Ok((encoded.body, call))
    }

    fn assembler_options(call: &OpenAiCall) -> DecoderOptions {
        call.decoder.clone()
    }

    fn decode_body(
        call: &OpenAiCall,
        body: &[u8],
        out: &mut Vec<CompletionDelta>,
    ) -> Result<CompletionFinal, CompletionError> {
        decode::decode_response_into(body, call.decoder.clone(), out)
    }

    fn finish_turn(call: &OpenAiCall, turn: &mut CompletionFinal) {
        call.strict_tools.relax(&mut turn.tool_calls);
        // A strict answer has `null` for the properties that were optional: the
        // final content gets them back as absent (streamed text deltas keep them).
        if let Some(schema) = &call.strict_answer
            && let Some(relaxed) = relax_strict_arguments(&turn.text, schema)
        {
            turn.text = relaxed;
        }
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
