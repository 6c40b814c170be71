//! The client every wire is: [`WireClient`], configured by the wire's
//! [`WireSpec`] (its path, auth header, error bodies, encoder and assembler).

use std::fmt;
use std::sync::Arc;

use ai_core::completion::{
    AssembledToolCall, CompletionDelta, CompletionError, CompletionFinal, CompletionRequest,
    CompletionStream, ToolCallOutcome,
};
use ai_core::{CancellationToken, CompletionPort};
use bytes::Bytes;
use serde_json::Value;

use crate::call::{TraceHeaders, Wire};
use crate::config::{ApiKey, ErrorBody, TransportConfig, WireConfig};
use crate::stream::{Assembler, SseDecoder};
use crate::transport::HttpTransport;

/// What makes a wire: the few things that differ between providers. A wire
/// crate implements it on a unit type and names its client
/// `WireClient<ItsSpec>`; everything else (the transport's rules, the stream's
/// framing, the client's config) is shared.
pub trait WireSpec: Send + Sync + 'static {
    /// The wire's name, in logs (`openai`, `anthropic`, `responses`).
    const NAME: &'static str;
    /// The provider whose API this is, as the OpenTelemetry GenAI conventions
    /// name it (`gen_ai.provider.name`); the wire's name by default.
    const PROVIDER: &'static str = Self::NAME;
    /// The path appended to the base URL's path, e.g. `/chat/completions`.
    const PATH: &'static str;
    /// The base URL when the configuration gives none (`None`: one is required).
    const DEFAULT_BASE_URL: Option<&'static str> = None;
    /// Headers every request carries, not secret (a protocol version). The
    /// configured extra headers come after them and may replace them.
    const HEADERS: &'static [(&'static str, &'static str)] = &[];

    /// The wire's own options ([`WireConfig::options`]).
    type Options: Clone + fmt::Debug + Default + Send + Sync + 'static;
    /// The state machine of a streamed response.
    type Assembler: Assembler;
    /// What decoding one call's response needs from its request (the decoder's
    /// options, schemas sent strict); `()` when nothing.
    type Call: Send + 'static;
    /// Why a request cannot be encoded (a caller's mistake, not provider input).
    type EncodeError: std::error::Error;

    /// The header that carries the API key, with its value (always secret).
    fn auth_header(key: &ApiKey) -> (&'static str, String);

    /// Reads an error response's body (at most 64 KiB of it).
    fn error_body(bytes: &[u8]) -> ErrorBody;

    /// Whether requests ask for a streamed response.
    fn streams(options: &Self::Options) -> bool;

    /// The JSON body of `request`, and what decoding its response needs.
    fn encode(
        request: &CompletionRequest,
        options: &Self::Options,
    ) -> Result<(Value, Self::Call), Self::EncodeError>;

    /// The options of the assembler that reads the call's stream; the
    /// default ones unless the wire says otherwise.
    fn assembler_options(_call: &Self::Call) -> <Self::Assembler as Assembler>::Options {
        Default::default()
    }

    /// Decodes a whole JSON response (a non-streaming call, or a server that
    /// answered a streaming request with JSON), appending the deltas a stream of
    /// it would have produced to `out`.
    fn decode_body(
        call: &Self::Call,
        body: &[u8],
        out: &mut Vec<CompletionDelta>,
    ) -> Result<CompletionFinal, CompletionError>;

    /// Last changes to the assembled turn before it is passed on.
    fn finish_turn(_call: &Self::Call, _turn: &mut CompletionFinal) {}

    /// The path of one call, when it depends on the request (a path that names
    /// the model, as Gemini's does), with an optional query after `?`: appended
    /// to the base URL's path in place of [`WireSpec::PATH`], its query after the
    /// base URL's own. `None` (the default): [`WireSpec::PATH`].
    fn call_path(_call: &Self::Call) -> Option<&str> {
        None
    }
}

/// A wire's completion client: a [`CompletionPort`] for `POST {base_url}{PATH}`
/// over the shared [`HttpTransport`] (see the crate docs for its rules). Cheap to
/// clone.
pub struct WireClient<S: WireSpec> {
    transport: Arc<HttpTransport>,
    config: Arc<WireConfig<S::Options>>,
}

impl<S: WireSpec> Clone for WireClient<S> {
    fn clone(&self) -> Self {
        Self {
            transport: Arc::clone(&self.transport),
            config: Arc::clone(&self.config),
        }
    }
}

impl<S: WireSpec> fmt::Debug for WireClient<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WireClient")
            .field("wire", &S::NAME)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl<S: WireSpec> WireClient<S> {
    /// Builds a client. Fails with [`CompletionError::InvalidRequest`] on a bad base
    /// URL, header or key (the message names the problem, never the value).
    pub fn new(config: WireConfig<S::Options>) -> Result<Self, CompletionError> {
        let transport = HttpTransport::new(transport_config::<S>(&config))?;
        Ok(Self {
            transport,
            config: Arc::new(config),
        })
    }

    /// The configuration the client was built with.
    pub fn config(&self) -> &WireConfig<S::Options> {
        &self.config
    }
}

impl<S: WireSpec> CompletionPort for WireClient<S> {
    fn complete(&self, request: CompletionRequest, cancel: CancellationToken) -> CompletionStream {
        let span = tracing::info_span!(
            "completion",
            wire = S::NAME,
            run_id = %request.context.run_id,
            trace_id = %request.context.trace_id,
            model = %request.model,
        );
        let options = &self.config.options;
        let prepared = S::encode(&request, options)
            .map_err(|error| CompletionError::InvalidRequest {
                message: error.to_string(),
            })
            .and_then(|(body, call)| {
                let body =
                    serde_json::to_vec(&body).map_err(|e| CompletionError::InvalidRequest {
                        message: format!("cannot serialize the request: {e}"),
                    })?;
                let trace = ai_core::trace::outgoing_headers(&request.context)
                    .map(|(parent, state)| TraceHeaders { parent, state });
                let call = Prepared::<S> {
                    streams: S::streams(options),
                    call,
                    trace,
                };
                Ok((Bytes::from(body), call))
            });
        self.transport.complete(prepared, cancel, span)
    }

    fn provider_name(&self) -> Option<&str> {
        Some(S::PROVIDER)
    }
}

/// The transport's half of a client's configuration: the wire's path, its fixed
/// headers, then the extra headers, then the auth header (secret, as the extra
/// headers are).
fn transport_config<S: WireSpec>(config: &WireConfig<S::Options>) -> TransportConfig {
    let mut headers: Vec<(String, String, bool)> = S::HEADERS
        .iter()
        .map(|(name, value)| ((*name).to_owned(), (*value).to_owned(), false))
        .collect();
    headers.extend(
        config
            .extra_headers
            .iter()
            .map(|(name, value)| (name.clone(), value.clone(), true)),
    );
    if let Some(key) = &config.api_key {
        let (name, value) = S::auth_header(key);
        headers.push((name.to_owned(), value, true));
    }
    TransportConfig {
        base_url: config.base_url.clone(),
        path: S::PATH,
        headers,
        secrets: config.api_key.iter().cloned().collect(),
        timeouts: config.timeouts,
        max_retries: config.max_retries,
        backoff: config.backoff,
        error_body: S::error_body,
    }
}

/// One call of a wire once its request is encoded.
struct Prepared<S: WireSpec> {
    streams: bool,
    call: S::Call,
    /// Read when the call is made, inside the model call's span.
    trace: Option<TraceHeaders>,
}

impl<S: WireSpec> Wire for Prepared<S> {
    type Decoder = SseDecoder<S::Assembler>;

    fn streams(&self) -> bool {
        self.streams
    }

    fn decoder(&self) -> Self::Decoder {
        SseDecoder::with_options(S::assembler_options(&self.call))
    }

    fn decode_body(
        &self,
        body: &[u8],
        out: &mut Vec<CompletionDelta>,
    ) -> Result<CompletionFinal, CompletionError> {
        S::decode_body(&self.call, body, out)
    }

    fn finish_turn(&self, turn: &mut CompletionFinal) {
        S::finish_turn(&self.call, turn);
    }

    fn path(&self) -> Option<&str> {
        S::call_path(&self.call)
    }

    fn trace(&self) -> Option<&TraceHeaders> {
        self.trace.as_ref()
    }
}

/// The tools of a request that went out with a strict schema, each with its
/// schema as written. Strict mode makes every optional property required and
/// nullable, so the model sends `null` for what it leaves out;
/// [`StrictTools::relax`] gives those properties back as absent, so the
/// arguments match the schema the tool declared.
#[derive(Debug, Clone, Default)]
pub struct StrictTools(Vec<(String, Value)>);

impl StrictTools {
    /// Records that the tool `name` was sent strict; `schema` is its schema as
    /// written.
    pub fn push(&mut self, name: impl Into<String>, schema: Value) {
        self.0.push((name.into(), schema));
    }

    /// Whether no tool was sent strict.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Removes the `null`s strict mode added from the arguments of each
    /// complete call of a strict tool.
    pub fn relax(&self, calls: &mut [AssembledToolCall]) {
        if self.0.is_empty() {
            return;
        }
        for call in calls {
            if call.outcome != ToolCallOutcome::Complete {
                continue;
            }
            if let Some((_, schema)) = self.0.iter().find(|(name, _)| *name == call.name)
                && let Some(relaxed) =
                    ai_core::schema::strict::relax_strict_arguments(&call.arguments, schema)
            {
                call.arguments = relaxed;
            }
        }
    }
}

impl FromIterator<(String, Value)> for StrictTools {
    fn from_iter<I: IntoIterator<Item = (String, Value)>>(iter: I) -> Self {
        Self(iter.into_iter().collect())
    }
}
