//! The HTTP completion client: [`AnthropicClient`] implements [`ai_core::CompletionPort`]
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
//! [`AnthropicClient`] is the shared `completion_http::WireClient` on
//! [`AnthropicSpec`]. It reads no environment or config file: the composition
//! root builds an [`AnthropicConfig`].

use ai_core::completion::{CompletionDelta, CompletionError, CompletionFinal, CompletionRequest};
pub use completion_http::{ApiKey, Backoff, Timeouts, WireClient, WireSpec};
use completion_http::{ErrorBody, WireConfig};
use serde_json::Value;

use crate::decode::{self, AnthropicAssembler};
use crate::encode::{AnthropicEncodeError, AnthropicEncodeOptions, encode_request};

/// The API's origin, the default base URL.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";

/// Everything the client needs, built by the composition root: the endpoint
/// settings every wire shares (`base_url` is the API's origin without `/v1`:
/// [`DEFAULT_BASE_URL`], or a gateway's root; extra headers such as
/// `anthropic-beta`) and the request encoding options (`options.stream` asks for
/// a stream).
pub type AnthropicConfig = WireConfig<AnthropicEncodeOptions>;

/// A Messages API client.
pub type AnthropicClient = WireClient<AnthropicSpec>;

/// What makes the Messages API wire: `POST /v1/messages`, `x-api-key`,
/// `anthropic-version`, the API's error bodies, its encoder and its stream's
/// assembler.
#[derive(Debug, Clone, Copy)]
pub struct AnthropicSpec;

impl WireSpec for AnthropicSpec {
    const NAME: &'static str = "anthropic";
    const PATH: &'static str = "/v1/messages";
    const DEFAULT_BASE_URL: Option<&'static str> = Some(DEFAULT_BASE_URL);
    const HEADERS: &'static [(&'static str, &'static str)] =
        &[("anthropic-version", crate::API_VERSION)];

    type Options = AnthropicEncodeOptions;
    type Assembler = AnthropicAssembler;
    type Call = ();
    type EncodeError = AnthropicEncodeError;

    fn auth_header(key: &ApiKey) -> (&'static str, String) {
        ("x-api-key", key.expose().to_owned())
    }

    /// An error body's message: `message (code)` for the API's shape (and for an
    /// OpenAI-shaped body from a gateway), else a short plain-text body.
    fn error_body(bytes: &[u8]) -> ErrorBody {
        ErrorBody::from_parsed(decode::parse_error_body(bytes), bytes)
    }

    fn streams(options: &AnthropicEncodeOptions) -> bool {
        options.stream
    }

    fn encode(
        request: &CompletionRequest,
        options: &AnthropicEncodeOptions,
    ) -> Result<(Value, ()), AnthropicEncodeError> {
        encode_request(request, options).map(|body| (body, ()))
    }

    fn decode_body(
        (): &(),
        body: &[u8],
        out: &mut Vec<CompletionDelta>,
    ) -> Result<CompletionFinal, CompletionError> {
        decode::decode_message(body, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies() {
        let message = |body: &[u8]| AnthropicSpec::error_body(body).message;
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
        assert_eq!(AnthropicSpec::PATH, "/v1/messages");
        assert_eq!(
            AnthropicSpec::HEADERS,
            [("anthropic-version", crate::API_VERSION)]
        );
        let key = config.api_key.as_ref().unwrap();
        assert_eq!(
            AnthropicSpec::auth_header(key),
            ("x-api-key", "sk-ant-secret-1".to_owned())
        );
        let client = AnthropicClient::new(config).unwrap();
        let text = format!("{client:?}");
        assert!(
            !text.contains("sk-ant-secret-1") && !text.contains("pw-1234"),
            "{text}"
        );
    }
}
