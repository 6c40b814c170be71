//! The completion port: how the loop calls a model without knowing its wire format.
//!
//! A wire crate implements [`CompletionPort`]; the loop consumes the returned
//! [`CompletionStream`]: zero or more [`CompletionItem::Delta`]s as they arrive, then
//! exactly one [`CompletionItem::Final`] with the assembled turn, or an error. Tool
//! calls are executed only from [`CompletionFinal::tool_calls`], never from deltas.

use std::sync::Arc;

use futures::stream::BoxStream;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::context::RunContext;
use crate::event::UsageFact;
use crate::message::Message;
use crate::tool::ToolId;
use crate::tool::ToolSpec;

/// Which tools the model may or must call this turn.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "mode", content = "tool")]
#[non_exhaustive]
pub enum ToolChoice {
    /// The model decides.
    #[default]
    Auto,
    /// No tool calls.
    None,
    /// At least one tool call.
    Required,
    /// Exactly this tool.
    Tool(ToolId),
}

/// How the model must shape its answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ResponseFormat {
    /// Free text (the default).
    Text,
    /// Any JSON object.
    JsonObject,
    /// JSON matching `schema` (structured output).
    JsonSchema {
        /// A name for the schema (`[a-zA-Z0-9_-]`, at most 64 characters).
        name: String,
        /// The JSON Schema.
        schema: Value,
        /// Whether the provider must enforce the schema exactly. A wire crate sends
        /// the schema rewritten to its provider's strict rules when it can (for
        /// OpenAI: every property required, optional ones nullable, no additional
        /// properties) and gives the final text back with those `null`s removed, so
        /// the answer matches `schema` as written; a schema that cannot be made
        /// strict is sent as given, not strict.
        #[serde(default)]
        strict: bool,
    },
}

/// Sampling and output settings of a model call. Plain data: set per agent, per run
/// or per request; `None` leaves the provider's default.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelSettings {
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Upper bound on generated tokens.
    pub max_tokens: Option<u32>,
    /// Seed for providers that support reproducible sampling.
    pub seed: Option<i64>,
    /// Reasoning effort for reasoning models (`low`, `medium`, `high`, ...),
    /// as the OpenAI wires send it (chat completions' `reasoning_effort`, the
    /// Responses API's `reasoning.effort`). Anthropic and Gemini take a token
    /// budget instead ([`ModelSettings::thinking_budget`]) and leave it out.
    pub reasoning_effort: Option<String>,
    /// A token budget for the model's thinking, on the wires whose provider
    /// takes one: Anthropic's extended thinking (`thinking.budget_tokens`) and
    /// Gemini's `thinkingBudget`. The OpenAI wires take `reasoning_effort`
    /// instead and leave it out. A wire's own thinking option wins over it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thinking_budget: Option<u32>,
    /// Mark the request's stable prefix for the provider's prompt cache where
    /// the provider wants marks (Anthropic's `cache_control` on the system
    /// prompt, the last tool and the last user message). OpenAI and Gemini
    /// cache long prefixes on their own and need nothing.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub prompt_cache: bool,
    /// The shape of the answer (structured output).
    pub response_format: Option<ResponseFormat>,
    /// Further top-level request fields, sent as given (provider-specific options).
    /// Fields the request already sets are not overridden.
    pub extra_body: Map<String, Value>,
}

/// One model call.
#[derive(Debug, Clone, PartialEq)]
pub struct CompletionRequest {
    /// Model id as the endpoint knows it.
    pub model: String,
    /// Conversation so far.
    pub messages: Vec<Message>,
    /// Tools offered this turn (the run's catalog, in catalog order); shared, so
    /// every turn of a run offers the same specs without copying them.
    pub tools: Arc<[ToolSpec]>,
    /// Tool choice.
    pub tool_choice: ToolChoice,
    /// Correlation ids for logs and spans.
    pub context: RunContext,
    /// Sampling and output settings.
    pub settings: ModelSettings,
}

impl CompletionRequest {
    /// Checks the rules every wire shares, before any encoding: a tool choice
    /// that requires a call needs tools, a named one must name an offered tool,
    /// and a temperature must be a finite number. A wire's encoder calls it first
    /// and checks only what is particular to its provider.
    pub fn validate(&self) -> Result<(), CompletionRequestError> {
        if self.settings.temperature.is_some_and(|t| !t.is_finite()) {
            return Err(CompletionRequestError::InvalidTemperature);
        }
        match &self.tool_choice {
            ToolChoice::Required | ToolChoice::Tool(_) if self.tools.is_empty() => {
                Err(CompletionRequestError::ToolChoiceWithoutTools)
            }
            ToolChoice::Tool(id) if !self.tools.iter().any(|tool| &tool.id == id) => {
                Err(CompletionRequestError::UnknownToolChoice(id.to_string()))
            }
            _ => Ok(()),
        }
    }
}

/// Why a [`CompletionRequest`] breaks a rule every wire shares
/// ([`CompletionRequest::validate`]): a caller's mistake, not provider input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CompletionRequestError {
    /// `ToolChoice::Tool` names a tool that is not in `tools`.
    #[error("tool choice names `{0}`, which is not among the request's tools")]
    UnknownToolChoice(String),
    /// `ToolChoice::Required` or `ToolChoice::Tool` without any tool.
    #[error("tool choice requires a tool call but the request has no tools")]
    ToolChoiceWithoutTools,
    /// The temperature is not a finite number.
    #[error("temperature must be a finite number")]
    InvalidTemperature,
}

/// A semantic piece of a streamed model turn.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum CompletionDelta {
    /// Assistant text.
    Text(String),
    /// A piece of the model's reasoning (never part of the answer text).
    Reasoning(String),
    /// A piece of a refusal: the model declined to answer.
    Refusal(String),
    /// A tool call opened (id minted by the decoder when the provider gave none).
    ToolCallStart {
        /// Position of the call in the turn.
        index: u32,
        /// Call id.
        id: String,
        /// Function name.
        name: String,
    },
    /// A fragment of a call's argument text.
    ToolCallArgs {
        /// Position of the call in the turn.
        index: u32,
        /// The fragment.
        fragment: String,
    },
    /// Token usage of this call.
    Usage(UsageFact),
    /// The signature of the reasoning streamed so far in this block (Anthropic's
    /// `signature_delta`): kept with the reasoning for the next request.
    ReasoningSignature(String),
}

/// How an assembled tool call's argument text ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolCallOutcome {
    /// Arguments are one complete JSON value (an empty string counts as `{}`).
    Complete,
    /// Arguments are not valid JSON.
    InvalidJson,
    /// The stream stopped (e.g. `finish_reason: length`) while arguments were open.
    Truncated,
}

/// A tool call assembled from a whole model turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AssembledToolCall {
    /// Position in the turn (tool calls are returned in index order).
    pub index: u32,
    /// Call id (model-provided, or minted once by the decoder and kept stable).
    pub id: String,
    /// Function name as the model sent it.
    pub name: String,
    /// Raw argument text.
    pub arguments: String,
    /// Whether the arguments are usable.
    pub outcome: ToolCallOutcome,
    /// Provider-native payload the provider needs back on this call in later
    /// requests (e.g. a thought signature). Observability and round-tripping only:
    /// it never influences execution and never reaches events or UIs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<Value>,
}

/// Why a model turn stopped.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FinishReason {
    /// Natural end.
    Stop,
    /// The model wants tool calls run.
    ToolCalls,
    /// Token limit reached.
    Length,
    /// Provider filtered the content.
    ContentFilter,
    /// The provider paused a long turn it runs itself (Anthropic's
    /// `pause_turn`, while its server tools work): the turn is not over, and
    /// sending it back as it is lets the model go on. The loop does so, a
    /// bounded number of times.
    Paused,
    /// Any other reason, verbatim.
    Other(String),
    /// The provider sent none.
    #[default]
    Unknown,
}

impl FinishReason {
    /// The reason as a snake_case word (`stop`, `tool_calls`, `length`,
    /// `content_filter`, `paused`, `unknown`, or the provider's own word).
    pub fn as_str(&self) -> &str {
        match self {
            Self::Stop => "stop",
            Self::ToolCalls => "tool_calls",
            Self::Length => "length",
            Self::ContentFilter => "content_filter",
            Self::Paused => "paused",
            Self::Other(other) => other,
            Self::Unknown => "unknown",
        }
    }
}

/// A whole assembled model turn. Serializable, so a recorded turn can be stored
/// and replayed without calling the model again.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CompletionFinal {
    /// All assistant text of the turn.
    pub text: String,
    /// The model's reasoning text of the turn, when it streamed any.
    pub reasoning: Option<String>,
    /// The refusal text, when the model declined to answer.
    pub refusal: Option<String>,
    /// Tool calls in index order.
    pub tool_calls: Vec<AssembledToolCall>,
    /// Why the turn stopped.
    pub finish_reason: FinishReason,
    /// The provider's own word for why the turn stopped, verbatim, when
    /// `finish_reason` does not already say it: a word outside the wire's usual
    /// vocabulary that the wire read as one of the contract's reasons (xAI's
    /// `REASON_MAX_LEN` as [`FinishReason::Length`], Anthropic's `pause_turn`
    /// as [`FinishReason::Paused`]) or one it does not know
    /// ([`FinishReason::Other`]). `None` when the provider gave the wire's usual
    /// word for the reason (`stop`, `end_turn`, `tool_use`, ...) or none.
    /// Observability only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw_finish_reason: Option<String>,
    /// The provider's id of the response (`chatcmpl-…`, `msg_…`, `resp_…`,
    /// Gemini's `responseId`), when it sent one: what its logs and support
    /// know the call by. Observability only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_id: Option<String>,
    /// Token usage, when reported.
    pub usage: Option<UsageFact>,
    /// The turn's blocks in the order the model produced them, when the wire
    /// gives an order that matters (see [`crate::message::AssistantBlock`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub blocks: Vec<crate::message::AssistantBlock>,
}

/// One item of a [`CompletionStream`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum CompletionItem {
    /// A piece of the turn as it arrives.
    Delta(CompletionDelta),
    /// The assembled turn; always the last item of a successful stream.
    Final(CompletionFinal),
}

/// Which wait timed out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TimeoutPhase {
    /// Establishing the connection.
    Connect,
    /// Waiting for the first byte of the response.
    FirstByte,
    /// Waiting between two chunks of a stream.
    BetweenChunks,
    /// The whole call (every attempt, retry wait and the body) took too long.
    Total,
}

/// A failed model call. Messages are safe: no API key, no request body.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CompletionError {
    /// Could not reach the endpoint.
    #[error("connection failed: {message}")]
    Connect {
        /// Safe description.
        message: String,
    },
    /// A timeout expired.
    #[error("timed out waiting for {phase:?}")]
    Timeout {
        /// Which wait.
        phase: TimeoutPhase,
    },
    /// The endpoint answered with a non-success status.
    #[error("provider returned HTTP {status}: {message}")]
    Http {
        /// HTTP status.
        status: u16,
        /// The provider's error message (safe to show).
        message: String,
    },
    /// The provider reported an error inside the stream.
    #[error("provider error: {message}")]
    Provider {
        /// Provider error code or type, if given.
        code: Option<String>,
        /// The provider's message.
        message: String,
    },
    /// The response violated the protocol (malformed SSE or JSON).
    #[error("protocol error: {message}")]
    Protocol {
        /// What was wrong.
        message: String,
    },
    /// The stream ended before the turn finished; `partial` holds what was assembled.
    #[error("stream ended before the turn finished")]
    TruncatedStream {
        /// Everything assembled before the stream ended.
        partial: Box<CompletionFinal>,
    },
    /// The call was cancelled.
    #[error("cancelled")]
    Cancelled,
    /// The request could not be built (bad configuration).
    #[error("invalid request: {message}")]
    InvalidRequest {
        /// What was wrong.
        message: String,
    },
}

impl CompletionError {
    /// Stable snake_case code for events and exit reports.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Connect { .. } => "provider_unreachable",
            Self::Timeout { .. } => "provider_timeout",
            Self::Http { .. } => "provider_http_error",
            Self::Provider { .. } => "provider_error",
            Self::Protocol { .. } => "provider_protocol_error",
            Self::TruncatedStream { .. } => "provider_stream_truncated",
            Self::Cancelled => "cancelled",
            Self::InvalidRequest { .. } => "invalid_request",
        }
    }
}

/// A streamed model turn.
pub type CompletionStream = BoxStream<'static, Result<CompletionItem, CompletionError>>;

/// How the loop calls a model. Implemented by wire crates and test models.
///
/// The returned stream does its work lazily when polled. Dropping it, or firing
/// `cancel`, stops the call (the stream then ends, with [`CompletionError::Cancelled`]
/// when it was cancelled by token).
pub trait CompletionPort: Send + Sync {
    /// Starts one model call.
    fn complete(&self, request: CompletionRequest, cancel: CancellationToken) -> CompletionStream;

    /// The provider, in the OpenTelemetry GenAI conventions' words
    /// (`gen_ai.provider.name`: `openai`, `anthropic`, `gcp.gemini`, ...), when
    /// the port knows it; `None` by default.
    fn provider_name(&self) -> Option<&str> {
        None
    }
}

impl<T: CompletionPort + ?Sized> CompletionPort for std::sync::Arc<T> {
    fn complete(&self, request: CompletionRequest, cancel: CancellationToken) -> CompletionStream {
        (**self).complete(request, cancel)
    }

    fn provider_name(&self) -> Option<&str> {
        (**self).provider_name()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(tools: &[&str], choice: ToolChoice, temperature: Option<f32>) -> CompletionRequest {
        let tool = |name: &str| {
            ToolSpec::new(
                ToolId::parse(name).unwrap_or_else(|e| panic!("{e}")),
                "A tool.",
                serde_json::json!({"type": "object"}),
                crate::tool::ToolEffect::ReadOnly,
            )
        };
        CompletionRequest {
            model: "m".into(),
            messages: vec![Message::user("hi")],
            tools: tools.iter().map(|name| tool(name)).collect(),
            tool_choice: choice,
            context: RunContext::new("run", "trace"),
            settings: ModelSettings {
                temperature,
                ..ModelSettings::default()
            },
        }
    }

    #[test]
    fn the_rules_every_wire_shares() {
        let named =
            |name: &str| ToolChoice::Tool(ToolId::parse(name).unwrap_or_else(|e| panic!("{e}")));
        assert_eq!(request(&[], ToolChoice::Auto, Some(0.5)).validate(), Ok(()));
        assert_eq!(
            request(&["core__a"], named("core__a"), None).validate(),
            Ok(())
        );
        assert_eq!(
            request(&[], ToolChoice::Required, None).validate(),
            Err(CompletionRequestError::ToolChoiceWithoutTools)
        );
        assert_eq!(
            request(&[], named("core__a"), None).validate(),
            Err(CompletionRequestError::ToolChoiceWithoutTools)
        );
        let unknown = request(&["core__a"], named("core__b"), None).validate();
        assert_eq!(
            unknown,
            Err(CompletionRequestError::UnknownToolChoice("core__b".into()))
        );
        assert_eq!(
            unknown.unwrap_err().to_string(),
            "tool choice names `core__b`, which is not among the request's tools"
        );
        for bad in [f32::NAN, f32::INFINITY] {
            assert_eq!(
                request(&[], ToolChoice::Auto, Some(bad)).validate(),
                Err(CompletionRequestError::InvalidTemperature)
            );
        }
    }
}
