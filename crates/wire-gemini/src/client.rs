//! [`GeminiSpec`]: what makes Gemini's API a wire for the shared
//! `completion-http` client, and [`GeminiClient`], the [`ai_core::CompletionPort`]
//! on it.
//!
//! The transport (timeouts and the total deadline, retries with `Retry-After`,
//! no redirects, cancellation, secrets kept out of errors) is the shared
//! `completion-http` crate, whose docs give every rule. What is particular to
//! this wire:
//!
//! - The base URL is the API's origin without the version
//!   (`https://generativelanguage.googleapis.com`, or a gateway's root); each
//!   call posts to `/v1beta/models/{model}:streamGenerateContent?alt=sse`
//!   (`:generateContent` when not streaming): the path names the request's
//!   model.
//! - The key goes in `x-goog-api-key` (secret), never in the URL.
//! - Error bodies `{"error": {"code", "message", "status"}}` become
//!   `message (STATUS)`; a 429 `RESOURCE_EXHAUSTED` is retried like any rate
//!   limit, honouring `Retry-After`.

use ai_core::completion::{CompletionDelta, CompletionError, CompletionFinal, CompletionRequest};
pub use completion_http::{ApiKey, Backoff, Timeouts, WireClient, WireSpec};
use completion_http::{ErrorBody, WireConfig};
use serde_json::Value;

use crate::decode::{self, GeminiAssembler};
use crate::encode::{GeminiEncodeError, GeminiOptions, call_path, encode_request};

/// The API's origin, the default base URL.
pub const DEFAULT_BASE_URL: &str = "https://generativelanguage.googleapis.com";

/// Everything the client needs, built by the composition root: the endpoint
/// settings every wire shares (`base_url` is the API's origin without the
/// version) and the encoding options (`options.stream` asks for a stream).
pub type GeminiConfig = WireConfig<GeminiOptions>;

/// A Gemini API client.
pub type GeminiClient = WireClient<GeminiSpec>;

/// What one call needs once encoded: its path (which names the model) and the
/// model, the usage's model when the response names none.
#[derive(Debug, Clone)]
pub struct GeminiCall {
    path: String,
    model: String,
}

/// What makes Gemini's API a wire: the model's `generateContent` path,
/// `x-goog-api-key`, the API's error bodies, its encoder and its stream's
/// assembler.
#[derive(Debug, Clone, Copy)]
pub struct GeminiSpec;

impl WireSpec for GeminiSpec {
    const NAME: &'static str = crate::WIRE;
    const PROVIDER: &'static str = "gcp.gemini";
    /// The common prefix of every call's path ([`WireSpec::call_path`] gives the
    /// whole one).
    const PATH: &'static str = "/v1beta/models";
    const DEFAULT_BASE_URL: Option<&'static str> = Some(DEFAULT_BASE_URL);

    type Options = GeminiOptions;
    type Assembler = GeminiAssembler;
    type Call = GeminiCall;
    type EncodeError = GeminiEncodeError;

    fn auth_header(key: &ApiKey) -> (&'static str, String) {
        ("x-goog-api-key", key.expose().to_owned())
    }

    /// An error body's message: `message (STATUS)`, else a short plain-text body.
    fn error_body(bytes: &[u8]) -> ErrorBody {
        ErrorBody::from_parsed(decode::parse_error_body(bytes), bytes)
    }

    fn streams(options: &GeminiOptions) -> bool {
        options.stream
    }

    fn encode(
        request: &CompletionRequest,
        options: &GeminiOptions,
    ) -> Result<(Value, GeminiCall), GeminiEncodeError> {
        let path = call_path(&request.model, options.stream)?;
        let body = encode_request(request, options)?;
        let call = GeminiCall {
            path,
            model: request.model.clone(),
        };
        Ok((body, call))
    }

    fn assembler_options(call: &GeminiCall) -> String {
        call.model.clone()
    }

    fn decode_body(
        call: &GeminiCall,
        body: &[u8],
        out: &mut Vec<CompletionDelta>,
    ) -> Result<CompletionFinal, CompletionError> {
        decode::decode_response(body, &call.model, out)
    }

    fn call_path(call: &GeminiCall) -> Option<&str> {
        Some(&call.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies() {
        let message = |body: &[u8]| GeminiSpec::error_body(body).message;
        assert_eq!(
            message(
                br#"{"error":{"code":429,"message":"Quota exceeded","status":"RESOURCE_EXHAUSTED"}}"#
            ),
            Some("Quota exceeded (RESOURCE_EXHAUSTED)".into())
        );
        assert_eq!(
            message(br#"[{"error":{"code":503,"message":"overloaded","status":"UNAVAILABLE"}}]"#),
            Some("overloaded (UNAVAILABLE)".into())
        );
        assert_eq!(
            message(b"upstream timeout"),
            Some("upstream timeout".into())
        );
        assert_eq!(message(b"<html>502</html>"), None);
    }

    #[test]
    fn paths_headers_and_debug() {
        assert_eq!(
            call_path("models/gemini-2.5-flash", true).unwrap(),
            "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
        );
        assert_eq!(
            call_path("gemini-2.5-pro", false).unwrap(),
            "/v1beta/models/gemini-2.5-pro:generateContent"
        );
        assert!(call_path("../x", true).is_err());
        assert!(call_path("a?b", true).is_err());
        let config =
            GeminiConfig::new("https://user:pw-1234@gateway.example").with_api_key("AIza-secret-1");
        let key = config.api_key.as_ref().unwrap();
        assert_eq!(
            GeminiSpec::auth_header(key),
            ("x-goog-api-key", "AIza-secret-1".to_owned())
        );
        let client = GeminiClient::new(config).unwrap();
        let text = format!("{client:?}");
        assert!(
            !text.contains("AIza-secret-1") && !text.contains("pw-1234"),
            "{text}"
        );
    }
}
