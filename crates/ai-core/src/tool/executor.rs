//! What a tool is to the runner: the [`ToolExecutor`] that runs it with validated
//! arguments, its [`ToolOutput`] or [`ToolFailure`], and the [`ToolCallContext`] of
//! one execution.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::completion::CompletionPort;
use crate::context::RunContext;
use crate::event::{AiEvent, EventSink};
use crate::runner::ToolRunner;
use crate::tool::{ToolErrorCode, ToolId, ToolSpec};

/// How a successful output is shown to the model.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ModelView {
    /// Compact JSON of the (bounded) value.
    #[default]
    Json,
    /// Tool-rendered text, bounded as text.
    Text(String),
    /// The value stays out of the model context; the model sees only this note. The
    /// caller still receives the value.
    Withheld {
        /// What the model is told instead.
        note: String,
    },
}

/// What an executor returns on success.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// The structured output.
    pub value: Value,
    /// How the model sees it.
    pub model_view: ModelView,
}

impl ToolOutput {
    /// An output shown to the model as compact JSON.
    pub fn json(value: Value) -> Self {
        Self {
            value,
            model_view: ModelView::Json,
        }
    }
}

/// A tool's own failure, with a code and a message safe to show the model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ToolFailure {
    /// Error code (typically `execution_failed`, `permission_denied`, `not_found`).
    pub code: ToolErrorCode,
    /// Safe message: no secrets, no paths outside the sandbox, no raw arguments.
    pub message: String,
}

impl ToolFailure {
    /// A failure with the given code and safe message.
    pub fn new(code: ToolErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// The tool ran and failed (`execution_failed`).
    pub fn failed(message: impl Into<String>) -> Self {
        Self::new(ToolErrorCode::ExecutionFailed, message)
    }

    /// Something the call names does not exist (`not_found`).
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(ToolErrorCode::NotFound, message)
    }

    /// The call is not allowed to do this (`permission_denied`).
    pub fn permission_denied(message: impl Into<String>) -> Self {
        Self::new(ToolErrorCode::PermissionDenied, message)
    }

    /// The arguments passed the schema but the tool's own checks refused them
    /// (`invalid_args`): the model is told to correct them.
    pub fn invalid_args(message: impl Into<String>) -> Self {
        Self::new(ToolErrorCode::InvalidArgs, message)
    }
}

/// `execution_failed` with the text as its message, so `Err("out of stock")?` and
/// `Err(format!(..))?` work in a tool. The text reaches the model: keep secrets out.
impl From<String> for ToolFailure {
    fn from(message: String) -> Self {
        Self::failed(message)
    }
}

/// See `From<String>`.
impl From<&str> for ToolFailure {
    fn from(message: &str) -> Self {
        Self::failed(message)
    }
}

/// By kind only: `not_found`, `permission_denied`, or `execution_failed` naming the
/// kind. The error's own text (which may hold a path) is not passed on.
impl From<std::io::Error> for ToolFailure {
    fn from(error: std::io::Error) -> Self {
        match error.kind() {
            std::io::ErrorKind::NotFound => Self::not_found("not found"),
            std::io::ErrorKind::PermissionDenied => Self::permission_denied("permission denied"),
            kind => Self::failed(format!("the operation failed: {kind}")),
        }
    }
}

/// What an executor knows about the call it runs: an immutable snapshot made for
/// this one execution and discarded after it. Nothing in it is a secret.
#[derive(Debug, Clone)]
pub struct ToolCallContext {
    /// Correlation ids of the run.
    pub run: RunContext,
    /// The call id.
    pub tool_call_id: String,
    /// The tool being run.
    pub tool_id: ToolId,
    /// Fires when the run is cancelled or the call times out. The tool then has the
    /// policy's stop grace (`Budgets::stop_grace_ms`, default 500 ms) to observe it
    /// (`select!` on `cancel.cancelled()`) and clean up before its future is dropped;
    /// the call ends `cancelled` or `timeout` whatever it returns.
    pub cancel: CancellationToken,
    /// The graph whose run made the call, when the caller named one.
    pub graph: Option<String>,
    /// The prompt hash of that run (see `agent_graph::prompt::prompt_hash`), when known.
    pub prompt_hash: Option<String>,
    /// Where the execution may emit nested events (e.g. a subagent's): into the
    /// run's one event queue, tagged with this call's id. Discards them when the
    /// caller gave no sink.
    pub events: NestedEvents,
    /// The completion port and runner of the run, to run a nested prompt through
    /// (subagents); `None` when the caller is not a loop.
    pub nested: Option<NestedPort>,
}

impl ToolCallContext {
    /// A context with no graph, prompt hash, nested event sink or nested port (for
    /// callers other than the runner, such as benchmarks and tests).
    pub fn new(
        run: RunContext,
        tool_call_id: impl Into<String>,
        tool_id: ToolId,
        cancel: CancellationToken,
    ) -> Self {
        let tool_call_id = tool_call_id.into();
        Self {
            run,
            events: NestedEvents {
                sink: None,
                parent_tool_call_id: (&tool_call_id).into(),
            },
            tool_call_id,
            tool_id,
            cancel,
            graph: None,
            prompt_hash: None,
            nested: None,
        }
    }

    /// The key an idempotent tool dedupes on: `RUN_ID:TOOL_CALL_ID`, the same
    /// every time a durable run executes this call (a run keeps its id when it
    /// resumes, and a call its id). Send it where the effect happens (an
    /// `Idempotency-Key` header, a unique column) so a repeat does not act twice.
    pub fn idempotency_key(&self) -> String {
        format!("{}:{}", self.run.run_id, self.tool_call_id)
    }
}

/// An event sink for events nested under one tool call: each emitted event is tagged
/// with the call's id as `parent_tool_call_id`. Emitting never waits.
#[derive(Clone)]
pub struct NestedEvents {
    pub(crate) sink: Option<Arc<dyn EventSink>>,
    pub(crate) parent_tool_call_id: crate::Id,
}

impl std::fmt::Debug for NestedEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NestedEvents")
            .field("connected", &self.sink.is_some())
            .field("parent_tool_call_id", &self.parent_tool_call_id)
            .finish()
    }
}

impl NestedEvents {
    /// Whether emitted events go anywhere.
    pub fn is_connected(&self) -> bool {
        self.sink.is_some()
    }

    /// The parent call id the events are tagged with.
    pub fn parent_tool_call_id(&self) -> &str {
        &self.parent_tool_call_id
    }
}

impl EventSink for NestedEvents {
    fn emit(&self, event: AiEvent) {
        if let Some(sink) = &self.sink {
            sink.emit(event.nested(&self.parent_tool_call_id, None));
        }
    }
}

/// The run's own completion port and tool runner, handed to executions that run a
/// nested prompt (a subagent), so the nested run uses the same model client (same
/// retries and usage accounting), the same runner and the same policy.
#[derive(Clone)]
pub struct NestedPort {
    /// The completion port of the run.
    pub model: Arc<dyn CompletionPort>,
    /// The tool runner of the run.
    pub runner: Arc<ToolRunner>,
    /// The model id of the run.
    pub model_id: String,
    /// How deep the calling run is nested: 0 for a top-level run, 1 inside a
    /// subagent. The runner refuses `graph__` calls at depth 1 or more
    /// (`depth_exceeded`).
    pub depth: u32,
}

impl std::fmt::Debug for NestedPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NestedPort")
            .field("model_id", &self.model_id)
            .field("depth", &self.depth)
            .finish_non_exhaustive()
    }
}

/// Runs one tool with already validated arguments. Implementations are bound to
/// their capabilities by the composition root; the runner is their only caller.
pub trait ToolExecutor: Send + Sync {
    /// Executes the tool.
    fn execute(
        &self,
        cx: ToolCallContext,
        args: Value,
    ) -> BoxFuture<'static, Result<ToolOutput, ToolFailure>>;

    /// Whether the tool can be offered right now, or why not. A source whose tools
    /// come and go (an MCP server that removed a tool, or changed a definition the
    /// user has not accepted) answers `Err(reason)`, and every catalog built from
    /// then on leaves the tool out ([`ToolRunner::catalog`]; [`ToolRunner::withheld`]
    /// says which and why). A call already in flight, or made from an older catalog,
    /// is the executor's to refuse with a typed failure. Default: always available.
    fn availability(&self) -> Result<(), String> {
        Ok(())
    }
}

/// A spec with the executor that runs it.
#[derive(Clone)]
pub struct RegisteredTool {
    /// The spec.
    pub spec: ToolSpec,
    /// The executor.
    pub executor: Arc<dyn ToolExecutor>,
}

impl std::fmt::Debug for RegisteredTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegisteredTool")
            .field("spec", &self.spec.id)
            .finish_non_exhaustive()
    }
}

/// The executor of a tool the client runs ([`crate::tool::ToolSource::Client`]):
/// a run that defers calls hands such a call to its client instead of executing
/// it (the loop pauses, and the client's output continues the run). Called, it
/// fails: nothing here can run it.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClientToolExecutor;

impl ToolExecutor for ClientToolExecutor {
    fn execute(
        &self,
        _cx: ToolCallContext,
        _args: Value,
    ) -> BoxFuture<'static, Result<ToolOutput, ToolFailure>> {
        Box::pin(async {
            Err(ToolFailure::failed(
                "this tool runs in the client, and this run has no client to hand it to",
            ))
        })
    }
}

impl RegisteredTool {
    /// A tool the client runs: `spec` (its id in the `client` namespace) with a
    /// [`ClientToolExecutor`].
    pub fn client(spec: ToolSpec) -> Self {
        Self {
            spec,
            executor: Arc::new(ClientToolExecutor),
        }
    }
}
