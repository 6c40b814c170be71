//! What the stream encoders share: the [`StreamEncoder`] trait the server
//! drives, how a failed call shows, and the usage both protocols report.

use ai_core::{AiEvent, approval::ApprovalBinding, event::AiEventKind, tool::ToolErrorCode};
use bytes::Bytes;
use serde_json::{Map, Value, json};

use crate::parts::{ChunkSink, PartMachine, UiChunk};

/// Names the approval of a call waiting for one: the call's [`ApprovalBinding`]
/// in `scope` (the chat, for a server whose later run continues the call),
/// signed by `sign` (the server's approval key). A copy is cheap: it is two
/// references.
#[derive(Clone, Copy)]
pub struct ApprovalIssuer<'a> {
    /// Where the approval holds.
    pub scope: &'a str,
    /// The id of a binding.
    pub sign: &'a (dyn Fn(&ApprovalBinding) -> String + Sync),
}

impl ApprovalIssuer<'_> {
    /// The approval id of call `tool_call_id` of `tool` with `args_hash`.
    pub fn id(&self, tool_call_id: &str, tool: &str, args_hash: &str) -> String {
        (self.sign)(&ApprovalBinding::new(
            self.scope,
            tool_call_id,
            tool,
            args_hash,
        ))
    }
}

impl std::fmt::Debug for ApprovalIssuer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApprovalIssuer")
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

/// An encoder of one response: the run's events in, the protocol's frames out.
/// [`crate::ui_stream::UiStreamEncoder`] (the UI message stream) and
/// [`crate::data_stream::DataStreamEncoder`] (AI SDK 4's data stream) implement it:
/// both are a [`ChunkEncoder`], one [`PartMachine`] and its protocol's
/// [`ChunkFormat`].
pub trait StreamEncoder: Send {
    /// The response's protocol headers.
    fn headers(&self) -> &'static [(&'static str, &'static str)];

    /// The frames for `event`, in order (none for a subagent's event or after the
    /// end). `approval_id` names the approval of a `tool_approval_requested` from
    /// its call id, tool name and `args_hash`.
    fn frames(&mut self, event: &AiEvent, approval_id: ApprovalIssuer<'_>) -> Vec<Bytes>;

    /// The frames that end the response: what `done` emits, when it did not come,
    /// and the protocol's terminator.
    fn end(&mut self) -> Vec<Bytes>;

    /// A frame parsers ignore, written while the run is quiet so that a client that
    /// went away is noticed; `None` for a protocol without comments.
    fn heartbeat(&self) -> Option<Bytes>;

    /// Queues a warning about the request (a part of it the server left out),
    /// sent before the response's first event: the UI message stream's transient
    /// `data-warning` part, the data stream's `2:` data part. A client that
    /// knows neither ignores it.
    fn warn(&mut self, message: String);

    /// The frames of the queued warnings, now (a server that has no event to
    /// send, while it tells its client something of the run).
    fn flush_warnings(&mut self) -> Vec<Bytes>;
}

/// How a protocol writes the [`UiChunk`]s of a [`PartMachine`]: what a chunk
/// becomes, how the machine is set up for a continuation, and the frames of a
/// response (see [`crate::ui_stream::UiStreamFormat`] and
/// [`crate::data_stream::DataStreamFormat`]).
pub trait ChunkFormat: Default + Send {
    /// What a chunk is written as (zero or more of them per chunk).
    type Piece;

    /// The response's protocol headers.
    const HEADERS: &'static [(&'static str, &'static str)];

    /// The frame written while the run is quiet, if the protocol has one (see
    /// [`StreamEncoder::heartbeat`]).
    const HEARTBEAT: Option<&'static [u8]>;

    /// The frame after the response's last, if the protocol has one.
    const TERMINATOR: Option<&'static [u8]>;

    /// `machine` set up for a continuation whose calls `known` the client has.
    fn continuing(machine: PartMachine, known: Vec<String>) -> PartMachine;

    /// Writes the pieces of `chunk` to `out`.
    fn write(&self, chunk: &UiChunk<'_>, out: &mut Vec<Self::Piece>);

    /// The frame of one piece.
    fn frame(piece: Self::Piece) -> Bytes;

    /// The one frame `machine` makes of `event`, when the format writes it
    /// without the general path (its chunks, then their pieces); `None`: take the
    /// general path.
    fn direct_frame(machine: &PartMachine, event: &AiEvent) -> Option<Bytes> {
        let _ = (machine, event);
        None
    }
}

/// Encodes one response (one assistant message) in format `F`: a thin
/// serializer over one [`PartMachine`], which decides the message's structure.
///
/// Feed it the run's events in order with [`event`](Self::event); call
/// [`finish`](Self::finish) if the response ends before `done` (it emits what
/// `done` would; after either, the encoder emits nothing more).
#[derive(Debug)]
pub struct ChunkEncoder<F> {
    machine: PartMachine,
    format: F,
}

impl<F: ChunkFormat> ChunkEncoder<F> {
    /// An encoder for a new assistant message with id `message_id`.
    pub fn new(message_id: impl Into<String>) -> Self {
        Self::continuing(message_id, std::iter::empty())
    }

    /// An encoder for a continuation of the assistant message `message_id`, whose
    /// earlier parts the client already has, among them the tool calls
    /// `known_tool_call_ids`: their inputs are not sent again (their outputs,
    /// approvals and denials may still arrive). The format says what else a
    /// continuation changes.
    ///
    /// `message_id` must be the id the client has for that message: `useChat`
    /// (AI SDK 5 and later) continues its last message only when the response
    /// names its id, and otherwise adds a second assistant message; AI SDK 4
    /// merges a response into its last assistant message whatever the id, but
    /// other clients see one message only with it.
    pub fn continuing(
        message_id: impl Into<String>,
        known_tool_call_ids: impl IntoIterator<Item = String>,
    ) -> Self {
        let known = known_tool_call_ids.into_iter().collect();
        Self {
            machine: F::continuing(PartMachine::new(message_id), known),
            format: F::default(),
        }
    }

    /// The same encoder writing with `format`.
    pub(crate) fn with_format(mut self, format: F) -> Self {
        self.format = format;
        self
    }

    /// The machine.
    #[cfg(test)]
    pub(crate) fn machine(&self) -> &PartMachine {
        &self.machine
    }

    /// The pieces for `event`, in order (none for a subagent's event or after the
    /// finish). `approval_id` names the approval of a `tool_approval_requested`
    /// from its call id, tool name and `args_hash`.
    pub fn event(&mut self, event: &AiEvent, approval_id: ApprovalIssuer<'_>) -> Vec<F::Piece> {
        self.pieces(|machine, sink| machine.event(event, approval_id, sink))
    }

    /// The pieces of the denied call `tool_call_id` (e.g. the user denied its
    /// approval before this continuation started), within a step (after the
    /// message's start when nothing was sent yet). The call must be one the
    /// client has: a known call of a continuation, or one started in this
    /// response.
    pub fn denied(&mut self, tool_call_id: &str) -> Vec<F::Piece> {
        self.pieces(|machine, sink| machine.denied(tool_call_id, sink))
    }

    /// The pieces of the call `tool_call_id` failed with `error_text` (e.g. a
    /// call the server refuses before the run starts), within a step. The call
    /// must be one the client has, as for [`denied`](Self::denied).
    pub fn tool_error(&mut self, tool_call_id: &str, error_text: &str) -> Vec<F::Piece> {
        self.pieces(|machine, sink| machine.tool_error(tool_call_id, error_text, sink))
    }

    /// What `done` emits, for a response that ends without it: closes the open
    /// part and step, then ends the message. Emits nothing when the response
    /// already finished.
    pub fn finish(&mut self) -> Vec<F::Piece> {
        self.pieces(|machine, sink| machine.finish(sink))
    }

    /// The queued warnings' pieces (after the message's start).
    fn warnings(&mut self) -> Vec<F::Piece> {
        self.pieces(|machine, sink| machine.warnings(sink))
    }

    /// The pieces of the chunks `run` yields.
    fn pieces(&mut self, run: impl FnOnce(&mut PartMachine, &mut ChunkSink<'_>)) -> Vec<F::Piece> {
        let mut out = Vec::new();
        let Self { machine, format } = self;
        run(machine, &mut |chunk| format.write(&chunk, &mut out));
        out
    }

    /// The frames of the queued warnings.
    fn warning_frames(&mut self) -> Vec<Bytes> {
        self.warnings().into_iter().map(F::frame).collect()
    }
}

impl<F: ChunkFormat> StreamEncoder for ChunkEncoder<F> {
    fn headers(&self) -> &'static [(&'static str, &'static str)] {
        F::HEADERS
    }

    fn frames(&mut self, event: &AiEvent, approval_id: ApprovalIssuer<'_>) -> Vec<Bytes> {
        let mut frames = self.warning_frames();
        match F::direct_frame(&self.machine, event) {
            Some(frame) => frames.push(frame),
            None => frames.extend(self.event(event, approval_id).into_iter().map(F::frame)),
        }
        frames
    }

    fn end(&mut self) -> Vec<Bytes> {
        let mut frames = self.warning_frames();
        frames.extend(self.finish().into_iter().map(F::frame));
        frames.extend(F::TERMINATOR.map(Bytes::from_static));
        frames
    }

    fn heartbeat(&self) -> Option<Bytes> {
        F::HEARTBEAT.map(Bytes::from_static)
    }

    fn warn(&mut self, message: String) {
        self.machine.warn(message);
    }

    fn flush_warnings(&mut self) -> Vec<Bytes> {
        self.warning_frames()
    }
}

/// The JSON of a warning: `{"warning": message}`.
pub(crate) fn warning_data(message: &str) -> Value {
    json!({"warning": message})
}

/// How a failed call's result shows in a stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FailureView {
    /// The user denied its approval.
    Denied,
    /// Any other failure: the error text the client shows.
    Error(String),
}

/// The view of a failed call with `code` and `message`: a denied approval is a
/// denial; an approval that did not hold is `approval refused: ...`; anything else
/// `<code>: <message>`.
pub(crate) fn failure_view(code: Option<ToolErrorCode>, message: Option<&str>) -> FailureView {
    match code {
        Some(ToolErrorCode::ApprovalDenied) => FailureView::Denied,
        Some(ToolErrorCode::ApprovalInvalid) => FailureView::Error(format!(
            "approval refused: {}",
            message.unwrap_or("the approval does not hold")
        )),
        None
        | Some(
            ToolErrorCode::InvalidJson
            | ToolErrorCode::InvalidArgs
            | ToolErrorCode::PolicyDenied
            | ToolErrorCode::ApprovalRequired
            | ToolErrorCode::UnknownTool
            | ToolErrorCode::ExecutionFailed
            | ToolErrorCode::Timeout
            | ToolErrorCode::Cancelled
            | ToolErrorCode::OutputInvalid
            | ToolErrorCode::RedactionMissing
            | ToolErrorCode::PermissionDenied
            | ToolErrorCode::NotFound
            | ToolErrorCode::BudgetExceeded
            | ToolErrorCode::DepthExceeded
            | ToolErrorCode::OutcomeUnknown,
        ) => FailureView::Error(tool_error_text(code, message)),
        #[cfg(not(agent_workspace))]
        _ => FailureView::Error(tool_error_text(code, message)),
    }
}

/// Whether `event` belongs in a response (subagents' events do not).
pub(crate) fn shown(event: &AiEvent) -> bool {
    event.parent_tool_call_id.is_none()
}

/// The text of a failed call's result: `<code>: <message>`.
pub(crate) fn tool_error_text(code: Option<ToolErrorCode>, message: Option<&str>) -> String {
    match (code, message) {
        (Some(code), Some(message)) => format!("{code}: {message}"),
        (Some(code), None) => code.to_string(),
        (None, Some(message)) => message.to_owned(),
        (None, None) => "tool call failed".to_owned(),
    }
}

/// Our `finish_reason` as one of the AI SDK's finish reasons.
pub(crate) fn map_finish_reason(reason: &str) -> &'static str {
    match reason {
        "stop" => "stop",
        "length" => "length",
        "content_filter" | "refusal" => "content-filter",
        "tool_calls" => "tool-calls",
        "error" => "error",
        _ => "other",
    }
}

/// Usage summed over `usage_report`s.
#[derive(Debug, Default, Clone)]
pub(crate) struct UsageTotals {
    /// How many reports were summed.
    pub(crate) reports: u32,
    /// Prompt tokens.
    pub(crate) prompt: u64,
    /// Completion tokens.
    pub(crate) completion: u64,
    /// Total tokens.
    pub(crate) total: u64,
    /// Cached prompt tokens, when any report gave them.
    pub(crate) cached: Option<u64>,
    /// Reasoning tokens, when any report gave them.
    pub(crate) reasoning: Option<u64>,
    /// The model that served the last report (the provider's name for it,
    /// else the model asked for): what a UI shows as the answer's model.
    pub(crate) model: Option<String>,
}

impl UsageTotals {
    /// Adds a `usage_report` (other events are ignored).
    pub(crate) fn add(&mut self, kind: &AiEventKind) {
        let AiEventKind::UsageReport {
            model,
            response_model,
            prompt_tokens,
            completion_tokens,
            total_tokens,
            cached_tokens,
            reasoning_tokens,
            ..
        } = kind
        else {
            return;
        };
        let sum = |acc: Option<u64>, more: Option<u64>| match (acc, more) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
        };
        self.reports += 1;
        self.prompt = self.prompt.saturating_add(*prompt_tokens);
        self.completion = self.completion.saturating_add(*completion_tokens);
        self.total = self.total.saturating_add(*total_tokens);
        self.cached = sum(self.cached, *cached_tokens);
        self.reasoning = sum(self.reasoning, *reasoning_tokens);
        self.model = Some(response_model.as_ref().unwrap_or(model).clone());
    }

    /// The message metadata `{usage, model}`, when any usage was reported.
    pub(crate) fn metadata(&self) -> Option<Value> {
        if self.reports == 0 {
            return None;
        }
        let mut usage = Map::new();
        usage.insert("inputTokens".into(), self.prompt.into());
        usage.insert("outputTokens".into(), self.completion.into());
        usage.insert("totalTokens".into(), self.total.into());
        if let Some(cached) = self.cached {
            usage.insert(
                "inputTokenDetails".into(),
                json!({"cacheReadTokens": cached}),
            );
        }
        if let Some(reasoning) = self.reasoning {
            usage.insert(
                "outputTokenDetails".into(),
                json!({"reasoningTokens": reasoning}),
            );
        }
        Some(json!({"usage": usage, "model": self.model}))
    }
}
