//! The HTTP completion client: [`ResponsesClient`] implements [`ai_core::CompletionPort`]
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
//! [`ResponsesClient`] is the shared `completion_http::WireClient` on
//! [`ResponsesSpec`]. It reads no environment or config file: the composition
//! root builds a [`ResponsesConfig`].

use ai_core::completion::{CompletionDelta, CompletionError, CompletionFinal, CompletionRequest};
pub use completion_http::{ApiKey, Backoff, Timeouts, WireClient, WireSpec};
use completion_http::{ErrorBody, StrictTools, WireConfig};
use serde_json::Value;

use crate::decode::{self, ResponsesAssembler};
use crate::encode::{ResponsesEncodeError, ResponsesEncodeOptions, encode_request, strict_tools};

/// The API's URL up to the version, the default base URL.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// Everything the client needs, built by the composition root: the endpoint
/// settings every wire shares (`base_url` up to the version:
/// [`DEFAULT_BASE_URL`], or a gateway's `.../v1`) and the request encoding
/// options (`options.stream` asks for a stream).
pub type ResponsesConfig = WireConfig<ResponsesEncodeOptions>;

/// A Responses API client.
pub type ResponsesClient = WireClient<ResponsesSpec>;

/// What makes the Responses API wire: `POST /responses`, a bearer key, the
/// API's error bodies, its encoder and its stream's assembler, and the strict
/// tools' arguments given back without the `null`s strict mode added.
#[derive(Debug, Clone, Copy)]
pub struct ResponsesSpec;

impl WireSpec for ResponsesSpec {
    const NAME: &'static str = "responses";
    const PROVIDER: &'static str = "openai";
    const PATH: &'static str = "/responses";
    const DEFAULT_BASE_URL: Option<&'static str> = Some(DEFAULT_BASE_URL);

    type Options = ResponsesEncodeOptions;
    type Assembler = ResponsesAssembler;
    /// The tools sent strict, with their schema as written.
    type Call = StrictTools;
    type EncodeError = ResponsesEncodeError;

    fn auth_header(key: &ApiKey) -> (&'static str, String) {
        ("authorization", format!("Bearer {}", key.expose()))
    }

    /// An error body's message: `message (code)` for the API's shape, else a
    /// short plain-text body.
    fn error_body(bytes: &[u8]) -> ErrorBody {
        ErrorBody::from_parsed(decode::parse_error_body(bytes), bytes)
    }

    fn streams(options: &ResponsesEncodeOptions) -> bool {
        options.stream
    }

    fn encode(
        request: &CompletionRequest,
        options: &ResponsesEncodeOptions,
    ) -> Result<(Value, StrictTools), ResponsesEncodeError> {
        let body = encode_request(request, options)?;
        Ok((body, strict_tools(request, options).into_iter().collect()))
    }

    fn decode_body(
        _: &StrictTools,
        body: &[u8],
        out: &mut Vec<CompletionDelta>,
    ) -> Result<CompletionFinal, CompletionError> {
        decode::decode_response(body, out)
    }

    /// A strict tool's arguments have `null` for the properties that were
    /// optional: they go to the tool without them.
    fn finish_turn(strict: &StrictTools, turn: &mut CompletionFinal) {
        strict.relax(&mut turn.tool_calls);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies() {
        let message = |body: &[u8]| ResponsesSpec::error_body(body).message;
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
        let strict: StrictTools = [("core__write_note".to_owned(), schema)]
            .into_iter()
            .collect();
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
        ResponsesSpec::finish_turn(&strict, &mut turn);
        assert_eq!(turn.tool_calls[0].arguments, r#"{"text":"hi"}"#);
        assert_eq!(
            turn.tool_calls[1].arguments,
            r#"{"text":"hi","title":null}"#
        );
    }
}
