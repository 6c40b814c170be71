//! The one state machine from a run's events to the parts of one assistant
//! message: [`PartMachine`] takes [`AiEvent`]s (and the end of the run) and
//! yields typed, protocol-neutral [`UiChunk`]s. The UI message stream
//! ([`crate::ui_stream`]) and AI SDK 4's data stream ([`crate::data_stream`])
//! are thin serializers of those chunks.
//!
//! # The message
//!
//! Every message is [`UiChunk::Start`], zero or more steps, then
//! [`UiChunk::MessageMetadata`] (when the run reported usage) and exactly one
//! [`UiChunk::Finish`]; nothing follows `Finish`. Every text or reasoning part
//! start is matched by its end before the step ends, and every step is
//! [`UiChunk::StartStep`] ... [`UiChunk::FinishStep`]. Events of subagents
//! (`parent_tool_call_id` set) are not part of the message and yield nothing.
//!
//! # Steps
//!
//! A step is one model call and the execution of its tool calls. The events carry
//! no turn number, so boundaries follow from the order the loop emits in: a model
//! call streams its text and reasoning, then reports its usage, then its tools run
//! (sequentially or concurrently), and approval requests come after the turn's
//! executed calls. Hence a new step begins with
//! - a text or reasoning delta (or a streamed tool input), or a `usage_report`,
//!   once the current step has seen a `usage_report` or a tool result (the model
//!   call of the step is over);
//! - any event that belongs in a step when none is open.
//!
//! Tool call starts and approval requests never begin a step of their own while
//! one is open: a turn's calls run after its usage report, and state-changing calls
//! of one turn alternate start/result. (A next turn that streams no text and
//! reports no usage is therefore merged into the step before it; with usage
//! reporting on, every turn is its own step.)
//!
//! # Parts and calls
//!
//! A text or reasoning part is closed before anything else is yielded in its
//! step (tool chunks, a part of the other kind, an error, the step's end). Part
//! ids ([`PartId`]) are `text-<n>` and `reasoning-<n>`, numbered in order within
//! the message. A call's input is yielded once ([`UiChunk::ToolInputStart`],
//! [`UiChunk::ToolInputAvailable`]), when the client does not have it yet: calls
//! known from an earlier response ([`PartMachine::with_known_calls`]) are not
//! repeated, and a result for a call neither known nor started gets its input
//! first (input `{}`), since a client rejects an output for a call it has never
//! seen. The outcome of a call of the continued message that comes before
//! anything else ([`PartMachine::with_continued_calls`]) is yielded outside any
//! step: it belongs to the message's earlier step.

use std::borrow::Cow;

use crate::stream::ApprovalIssuer;
use std::collections::HashSet;
use std::fmt;
use std::sync::LazyLock;

use ai_core::{AiEvent, event::AiEventKind, tool::ToolErrorCode};
use serde_json::{Map, Value};

use crate::stream::{FailureView, UsageTotals, failure_view, map_finish_reason, shown};

// tidy: exhaustive: a model streams text and reasoning; a new kind is a new protocol part
/// The kind of a streamed part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PartKind {
    /// Answer text.
    Text,
    /// The model's reasoning.
    Reasoning,
}

impl PartKind {
    /// The protocols' name of the kind: `text` or `reasoning`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Text => "text",
            Self::Reasoning => "reasoning",
        }
    }
}

/// The id of a text or reasoning part: `<kind>-<n>`, numbered from 1 in order
/// within the message (both kinds share the count).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PartId {
    kind: PartKind,
    number: u32,
}

impl PartId {
    /// The part's kind.
    pub fn kind(self) -> PartKind {
        self.kind
    }

    /// Its number within the message.
    pub fn number(self) -> u32 {
        self.number
    }
}

impl fmt::Display for PartId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.kind.name(), self.number)
    }
}

/// Prompt and completion tokens, of a step's model call or summed over a
/// message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TokenCounts {
    /// Prompt (input) tokens.
    pub prompt_tokens: u64,
    /// Completion (output) tokens.
    pub completion_tokens: u64,
}

/// One piece of an assistant message as it streams, protocol-neutral. Field
/// names follow the AI SDK's `uiMessageChunkSchema`; fields a protocol has no
/// place for are left out by its serializer.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum UiChunk<'a> {
    /// The message begins (first, once).
    Start {
        /// The message's id.
        message_id: &'a str,
    },
    /// A step begins.
    StartStep {
        /// The id of the message the step belongs to.
        message_id: &'a str,
    },
    /// A text part opens.
    TextStart {
        /// The part.
        id: PartId,
    },
    /// More text of the open text part.
    TextDelta {
        /// The part.
        id: PartId,
        /// The text.
        delta: &'a str,
    },
    /// The text part closes.
    TextEnd {
        /// The part.
        id: PartId,
    },
    /// A reasoning part opens.
    ReasoningStart {
        /// The part.
        id: PartId,
    },
    /// More text of the open reasoning part.
    ReasoningDelta {
        /// The part.
        id: PartId,
        /// The text.
        delta: &'a str,
    },
    /// The reasoning part closes.
    ReasoningEnd {
        /// The part.
        id: PartId,
    },
    /// A call's input begins (streamed, or whole right after).
    ToolInputStart {
        /// The call id.
        tool_call_id: &'a str,
        /// The namespaced tool id.
        tool_name: &'a str,
    },
    /// A fragment of a call's input text, as the model streams it.
    ToolInputDelta {
        /// The call id.
        tool_call_id: &'a str,
        /// The fragment.
        input_text_delta: &'a str,
    },
    /// A call's whole input (the redacted view the events carry).
    ToolInputAvailable {
        /// The call id.
        tool_call_id: &'a str,
        /// The namespaced tool id.
        tool_name: &'a str,
        /// The input (`{}` for a result whose call was never seen).
        input: &'a Value,
    },
    /// The call waits for the user's approval.
    ToolApprovalRequest {
        /// The approval id the client answers with.
        approval_id: String,
        /// The call id.
        tool_call_id: &'a str,
    },
    /// The call's output.
    ToolOutputAvailable {
        /// The call id.
        tool_call_id: &'a str,
        /// The output (`null` when the result carried none).
        output: &'a Value,
    },
    /// The call failed, or was refused.
    ToolOutputError {
        /// The call id.
        tool_call_id: &'a str,
        /// What the client shows: `<code>: <message>`, or the server's text.
        error_text: Cow<'a, str>,
    },
    /// The user denied the call.
    ToolOutputDenied {
        /// The call id.
        tool_call_id: &'a str,
    },
    /// The run failed.
    Error {
        /// The error text (the event's message).
        error_text: &'a str,
    },
    /// The step ends.
    FinishStep {
        /// The step's finish reason: `error` for the last step of a failed run,
        /// `tool-calls` for a step with tool activity, the message's for the last
        /// step, else `other`.
        finish_reason: &'static str,
        /// The usage its model call reported (the last report of the step).
        usage: Option<TokenCounts>,
    },
    /// The message's metadata: `{usage, model}`, the usage summed over its model
    /// calls with the AI SDK's `LanguageModelUsage` names.
    MessageMetadata {
        /// The metadata.
        metadata: Value,
    },
    /// The message ends (last, once).
    Finish {
        /// The AI SDK finish reason: `stop`, `length`, `content-filter`,
        /// `tool-calls`, `error` or `other`.
        finish_reason: &'static str,
        /// The usage summed over the message's model calls, when any was reported.
        usage: Option<TokenCounts>,
    },
    /// A warning about the request, sent before the next chunk (not part of the
    /// message).
    Warning {
        /// What the server left out, in words.
        message: &'a str,
    },
}

/// What receives the chunks [`PartMachine`] yields, in order.
pub type ChunkSink<'s> = dyn FnMut(UiChunk<'_>) + 's;

/// `null`, for an output the result did not carry.
static NULL: Value = Value::Null;

/// An event of a tool call that a message shows: its start, its result, an
/// approval it waits for, or a call the client runs.
#[derive(Debug, Clone, Copy)]
pub(crate) enum CallEvent<'e> {
    /// `tool_call_start`: the call is about to run.
    Start {
        /// The call id.
        tool_call_id: &'e str,
        /// The tool.
        tool_name: &'e str,
        /// The (redacted) arguments.
        args: &'e Value,
    },
    /// `tool_call_result`: the call finished.
    Result {
        /// The call id.
        tool_call_id: &'e str,
        /// The tool.
        tool_name: &'e str,
        /// Its value, or how it failed.
        outcome: CallOutcome<'e>,
    },
    /// `tool_approval_requested`: the call waits for the user's approval.
    ApprovalRequested {
        /// The call id.
        tool_call_id: &'e str,
        /// The tool.
        tool_name: &'e str,
        /// The arguments, whole.
        args: &'e Value,
        /// `sha256:` of the arguments.
        args_hash: &'e str,
    },
    /// `client_tool_call`: the client runs the call.
    Client {
        /// The call id.
        tool_call_id: &'e str,
        /// The tool.
        tool_name: &'e str,
        /// The arguments, whole.
        args: &'e Value,
    },
}

/// How a finished call ended.
#[derive(Debug, Clone, Copy)]
pub(crate) enum CallOutcome<'e> {
    /// It produced a value (its redacted result, when it has one).
    Ok(Option<&'e Value>),
    /// It failed.
    Failed {
        /// The error code, when the event has one.
        code: Option<ToolErrorCode>,
        /// The safe message, when the event has one.
        message: Option<&'e str>,
    },
}

impl<'e> CallEvent<'e> {
    /// The call event `kind` is, if it is one.
    pub(crate) fn of(kind: &'e AiEventKind) -> Option<Self> {
        match kind {
            AiEventKind::ToolCallStart {
                tool_call_id,
                tool_name,
                args,
            } => Some(Self::Start {
                tool_call_id,
                tool_name,
                args,
            }),
            AiEventKind::ToolCallResult {
                tool_call_id,
                tool_name,
                ok,
                result,
                error_code,
                message,
                ..
            } => Some(Self::Result {
                tool_call_id,
                tool_name,
                outcome: if *ok {
                    CallOutcome::Ok(result.as_ref())
                } else {
                    CallOutcome::Failed {
                        code: *error_code,
                        message: message.as_deref(),
                    }
                },
            }),
            AiEventKind::ToolApprovalRequested {
                tool_call_id,
                tool_name,
                args,
                args_hash,
            } => Some(Self::ApprovalRequested {
                tool_call_id,
                tool_name,
                args,
                args_hash,
            }),
            AiEventKind::ClientToolCall {
                tool_call_id,
                tool_name,
                args,
            } => Some(Self::Client {
                tool_call_id,
                tool_name,
                args,
            }),
            AiEventKind::TextDelta { .. }
            | AiEventKind::ReasoningDelta { .. }
            | AiEventKind::ToolInputDelta { .. }
            | AiEventKind::UsageReport { .. }
            | AiEventKind::ToolCallsNotExecuted { .. }
            | AiEventKind::AssistantFinal { .. }
            | AiEventKind::ToolWithheld { .. }
            | AiEventKind::Error { .. }
            | AiEventKind::Done => None,
            #[cfg(not(agent_workspace))]
            _ => None,
        }
    }
}
/// `{}`, the input of a call whose start was never seen.
static EMPTY_INPUT: LazyLock<Value> = LazyLock::new(|| Value::Object(Map::new()));

/// What an event does to the step structure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Activity {
    /// A text, reasoning or tool input delta: streamed by a model call.
    Delta,
    /// A model call's usage report: the end of its stream.
    Usage,
    /// A tool call starts or asks for approval.
    Call,
    /// A tool call's result (or a denial or refusal in its place).
    Result,
}

/// What the open step has seen.
#[derive(Debug, Clone, Default)]
struct Step {
    /// The step's model call reported its usage.
    saw_usage: bool,
    /// A tool result (or denial, or refusal) arrived in the step.
    saw_result: bool,
    /// A call started, asked for approval or got a result in the step.
    tools: bool,
    /// The step's usage report.
    usage: Option<TokenCounts>,
}

impl Step {
    /// Whether `activity` begins a new step, given the open step (if any).
    fn needs_new(step: Option<&Self>, activity: Activity) -> bool {
        match (step, activity) {
            (None, _) => true,
            (Some(step), Activity::Delta | Activity::Usage) => step.saw_usage || step.saw_result,
            (Some(_), Activity::Call | Activity::Result) => false,
        }
    }
}

/// How the message ends, and its usage.
#[derive(Debug, Default)]
struct Outcome {
    /// `assistant_final`'s finish reason, when the run answered.
    final_reason: Option<String>,
    /// The run failed (`error`).
    error: bool,
    /// The run paused for an approval (or a client's tool).
    paused: bool,
    /// Summed usage of the message's model calls.
    usage: UsageTotals,
}

impl Outcome {
    /// The AI SDK finish reason of the message.
    fn finish_reason(&self) -> &'static str {
        if self.error {
            "error"
        } else if let Some(reason) = &self.final_reason {
            map_finish_reason(reason)
        } else if self.paused {
            "tool-calls"
        } else {
            "other"
        }
    }
}

/// The state of one assistant message as it streams (see the module docs):
/// feed it the run's events in order with [`event`](Self::event); call
/// [`finish`](Self::finish) if the run ends before `done` (it yields what
/// `done` would; after either, the machine yields nothing more).
#[derive(Debug)]
pub struct PartMachine {
    message_id: String,
    /// `tool_input_delta` events stream a call's input.
    stream_tool_input: bool,
    /// Calls whose input the client already has (this response or an earlier one).
    inputs_sent: HashSet<String>,
    /// Calls whose input is streaming (`ToolInputStart` yielded, not yet complete).
    inputs_streaming: HashSet<String>,
    /// The calls of the continued message: their outcomes before the first step
    /// are yielded outside any step.
    continued: HashSet<String>,
    started: bool,
    finished: bool,
    step: Option<Step>,
    open: Option<PartId>,
    parts: u32,
    outcome: Outcome,
    /// Warnings to yield before the next chunk.
    warnings: Vec<String>,
}

impl PartMachine {
    /// A machine for a new assistant message with id `message_id`, streaming
    /// tool inputs, knowing no calls.
    pub fn new(message_id: impl Into<String>) -> Self {
        Self {
            message_id: message_id.into(),
            stream_tool_input: true,
            inputs_sent: HashSet::new(),
            inputs_streaming: HashSet::new(),
            continued: HashSet::new(),
            started: false,
            finished: false,
            step: None,
            open: None,
            parts: 0,
            outcome: Outcome::default(),
            warnings: Vec::new(),
        }
    }

    /// Calls the client already has (a continued message's): their input is not
    /// yielded again (their outputs, approvals and denials may still arrive).
    #[must_use]
    pub fn with_known_calls(mut self, tool_call_ids: impl IntoIterator<Item = String>) -> Self {
        self.inputs_sent.extend(tool_call_ids);
        self
    }

    /// The calls of the continued message: an outcome of one of them (a start
    /// too) before the message's first step is yielded outside any step, as the
    /// AI SDK's own server sends it, not in a new, empty step.
    #[must_use]
    pub fn with_continued_calls(mut self, tool_call_ids: impl IntoIterator<Item = String>) -> Self {
        self.continued.extend(tool_call_ids);
        self
    }

    /// Ignores `tool_input_delta` events (for a protocol that cannot stream a
    /// call's input): a call's input is yielded whole when it starts.
    #[must_use]
    pub fn without_tool_input_streaming(mut self) -> Self {
        self.stream_tool_input = false;
        self
    }

    /// The message's id.
    pub fn message_id(&self) -> &str {
        &self.message_id
    }

    /// Whether the message finished ([`UiChunk::Finish`] was yielded).
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Queues a warning, yielded (after [`UiChunk::Start`]) by the next
    /// [`warnings`](Self::warnings).
    pub fn warn(&mut self, message: String) {
        self.warnings.push(message);
    }

    /// The queued warnings, each a [`UiChunk::Warning`], after
    /// [`UiChunk::Start`] when nothing was yielded yet; nothing once finished.
    pub fn warnings(&mut self, sink: &mut ChunkSink<'_>) {
        if self.warnings.is_empty() || self.finished {
            return;
        }
        self.start(sink);
        for message in std::mem::take(&mut self.warnings) {
            sink(UiChunk::Warning { message: &message });
        }
    }

    /// Yields the chunks for `event`, in order (none for a subagent's event or
    /// after the finish). `approval_id` names the approval of a
    /// `tool_approval_requested` from its call id, tool name and `args_hash`.
    pub fn event(
        &mut self,
        event: &AiEvent,
        approval_id: ApprovalIssuer<'_>,
        sink: &mut ChunkSink<'_>,
    ) {
        if self.finished || !shown(event) {
            return;
        }
        if matches!(event.kind, AiEventKind::Done) {
            return self.finish(sink);
        }
        self.start(sink);
        match &event.kind {
            AiEventKind::TextDelta { delta } if !delta.is_empty() => {
                self.step_for(Activity::Delta, sink);
                self.delta(PartKind::Text, delta, sink);
            }
            AiEventKind::ReasoningDelta { delta } if !delta.is_empty() => {
                self.step_for(Activity::Delta, sink);
                self.delta(PartKind::Reasoning, delta, sink);
            }
            AiEventKind::ToolInputDelta {
                tool_call_id,
                tool_name,
                delta,
            } => self.input_delta(tool_call_id, tool_name, delta, sink),
            AiEventKind::UsageReport {
                prompt_tokens,
                completion_tokens,
                ..
            } => {
                self.step_for(Activity::Usage, sink);
                self.outcome.usage.add(&event.kind);
                let usage = TokenCounts {
                    prompt_tokens: *prompt_tokens,
                    completion_tokens: *completion_tokens,
                };
                if let Some(step) = &mut self.step {
                    step.saw_usage = true;
                    step.usage = Some(usage);
                }
            }
            AiEventKind::AssistantFinal { finish_reason, .. } => {
                self.outcome.final_reason = Some(finish_reason.clone());
            }
            AiEventKind::Error { message, .. } => {
                self.close_part(sink);
                sink(UiChunk::Error {
                    error_text: message,
                });
                self.outcome.error = true;
            }
            kind => self.tool_event(kind, approval_id, sink),
        }
    }

    /// The chunks of a tool call's event (nothing for any other event).
    fn tool_event(
        &mut self,
        kind: &AiEventKind,
        approval_id: ApprovalIssuer<'_>,
        sink: &mut ChunkSink<'_>,
    ) {
        let Some(event) = CallEvent::of(kind) else {
            return;
        };
        match event {
            CallEvent::Start { tool_call_id, .. }
                if self.step.is_none() && self.continued.contains(tool_call_id) => {}
            CallEvent::Start {
                tool_call_id,
                tool_name,
                args,
            } => self.call(tool_call_id, tool_name, args, sink),
            CallEvent::Result {
                tool_call_id,
                tool_name,
                outcome,
            } => {
                let output = match outcome {
                    CallOutcome::Ok(result) => Ok(result.unwrap_or(&NULL)),
                    CallOutcome::Failed { code, message } => Err(failure_view(code, message)),
                };
                self.call_result(tool_call_id, tool_name, output, sink);
            }
            CallEvent::ApprovalRequested {
                tool_call_id,
                tool_name,
                args,
                args_hash,
            } => {
                self.call(tool_call_id, tool_name, args, sink);
                sink(UiChunk::ToolApprovalRequest {
                    approval_id: approval_id.id(tool_call_id, tool_name, args_hash),
                    tool_call_id,
                });
                self.outcome.paused = true;
            }
            CallEvent::Client {
                tool_call_id,
                tool_name,
                args,
            } => {
                self.call(tool_call_id, tool_name, args, sink);
                self.outcome.paused = true;
            }
        }
    }

    /// [`UiChunk::ToolOutputDenied`] for the call `tool_call_id` (e.g. the user
    /// denied its approval before this continuation started), within a step
    /// (after [`UiChunk::Start`] when nothing was yielded yet). The call must be
    /// one the client has: a known call of a continuation, or one started in
    /// this message.
    pub fn denied(&mut self, tool_call_id: &str, sink: &mut ChunkSink<'_>) {
        self.server_result(tool_call_id, None, sink);
    }

    /// [`UiChunk::ToolOutputError`] with `error_text` for the call
    /// `tool_call_id` (e.g. a call the server refuses before the run starts), as
    /// [`denied`](Self::denied) places it.
    pub fn tool_error(&mut self, tool_call_id: &str, error_text: &str, sink: &mut ChunkSink<'_>) {
        self.server_result(tool_call_id, Some(error_text), sink);
    }

    /// What `done` yields, for a message that ends without it: closes the open
    /// part and step, then [`UiChunk::MessageMetadata`] (when usage was
    /// reported) and [`UiChunk::Finish`]. Yields nothing when the message
    /// already finished.
    pub fn finish(&mut self, sink: &mut ChunkSink<'_>) {
        if self.finished {
            return;
        }
        self.start(sink);
        self.end_step(true, sink);
        let usage = &self.outcome.usage;
        if let Some(metadata) = usage.metadata() {
            sink(UiChunk::MessageMetadata { metadata });
        }
        let usage = (usage.reports > 0).then_some(TokenCounts {
            prompt_tokens: usage.prompt,
            completion_tokens: usage.completion,
        });
        sink(UiChunk::Finish {
            finish_reason: self.outcome.finish_reason(),
            usage,
        });
        self.finished = true;
    }

    /// The part and the text of a text or reasoning delta that only continues the
    /// open part of its kind in the open step (most of a message's events): for
    /// it [`event`](Self::event) would yield exactly one
    /// [`UiChunk::TextDelta`] or [`UiChunk::ReasoningDelta`] and change no state,
    /// so a serializer may write that chunk straight away instead. `None` for any
    /// other event.
    pub fn open_delta<'e>(&self, event: &'e AiEvent) -> Option<(PartId, &'e str)> {
        let (kind, delta) = match &event.kind {
            AiEventKind::TextDelta { delta } => (PartKind::Text, delta),
            AiEventKind::ReasoningDelta { delta } => (PartKind::Reasoning, delta),
            AiEventKind::ToolCallStart { .. }
            | AiEventKind::ToolInputDelta { .. }
            | AiEventKind::ToolCallResult { .. }
            | AiEventKind::UsageReport { .. }
            | AiEventKind::ToolCallsNotExecuted { .. }
            | AiEventKind::AssistantFinal { .. }
            | AiEventKind::ToolApprovalRequested { .. }
            | AiEventKind::ClientToolCall { .. }
            | AiEventKind::ToolWithheld { .. }
            | AiEventKind::Error { .. }
            | AiEventKind::Done => return None,
            #[cfg(not(agent_workspace))]
            _ => return None,
        };
        let id = self.open.filter(|id| id.kind == kind)?;
        if self.finished
            || delta.is_empty()
            || !self.started
            || !shown(event)
            || Step::needs_new(self.step.as_ref(), Activity::Delta)
        {
            return None;
        }
        Some((id, delta))
    }

    fn server_result(
        &mut self,
        tool_call_id: &str,
        error_text: Option<&str>,
        sink: &mut ChunkSink<'_>,
    ) {
        if self.finished {
            return;
        }
        self.start(sink);
        let outside = self.step.is_none() && self.continued.contains(tool_call_id);
        if !outside {
            self.step_for(Activity::Result, sink);
        }
        self.close_part(sink);
        sink(match error_text {
            None => UiChunk::ToolOutputDenied { tool_call_id },
            Some(text) => UiChunk::ToolOutputError {
                tool_call_id,
                error_text: Cow::Borrowed(text),
            },
        });
        if !outside {
            self.saw_result();
        }
    }

    fn input_delta(
        &mut self,
        tool_call_id: &str,
        tool_name: &str,
        delta: &str,
        sink: &mut ChunkSink<'_>,
    ) {
        if !self.stream_tool_input || delta.is_empty() || self.inputs_sent.contains(tool_call_id) {
            return;
        }
        self.step_for(Activity::Delta, sink);
        self.close_part(sink);
        if !self.inputs_streaming.contains(tool_call_id) {
            self.inputs_streaming.insert(tool_call_id.to_owned());
            sink(UiChunk::ToolInputStart {
                tool_call_id,
                tool_name,
            });
        }
        sink(UiChunk::ToolInputDelta {
            tool_call_id,
            input_text_delta: delta,
        });
    }

    /// A call starts, asks for approval or waits for the client: its input,
    /// within a step.
    fn call(
        &mut self,
        tool_call_id: &str,
        tool_name: &str,
        args: &Value,
        sink: &mut ChunkSink<'_>,
    ) {
        self.step_for(Activity::Call, sink);
        self.close_part(sink);
        self.input(tool_call_id, tool_name, args, sink);
    }

    /// A call's result: its output, or how it failed.
    fn call_result(
        &mut self,
        tool_call_id: &str,
        tool_name: &str,
        output: Result<&Value, FailureView>,
        sink: &mut ChunkSink<'_>,
    ) {
        let outside = self.step.is_none() && self.continued.contains(tool_call_id);
        if !outside {
            self.step_for(Activity::Result, sink);
        }
        self.close_part(sink);
        self.input(tool_call_id, tool_name, &EMPTY_INPUT, sink);
        sink(match output {
            Ok(output) => UiChunk::ToolOutputAvailable {
                tool_call_id,
                output,
            },
            Err(FailureView::Denied) => UiChunk::ToolOutputDenied { tool_call_id },
            Err(FailureView::Error(text)) => UiChunk::ToolOutputError {
                tool_call_id,
                error_text: Cow::Owned(text),
            },
        });
        if !outside {
            self.saw_result();
        }
    }

    fn start(&mut self, sink: &mut ChunkSink<'_>) {
        if !self.started {
            self.started = true;
            sink(UiChunk::Start {
                message_id: &self.message_id,
            });
        }
    }

    fn step_for(&mut self, activity: Activity, sink: &mut ChunkSink<'_>) {
        if Step::needs_new(self.step.as_ref(), activity) {
            self.end_step(false, sink);
            sink(UiChunk::StartStep {
                message_id: &self.message_id,
            });
            self.step = Some(Step::default());
        }
        if let (Some(step), Activity::Call | Activity::Result) = (&mut self.step, activity) {
            step.tools = true;
        }
    }

    /// Closes the open part and step; `last` when the message ends with it.
    fn end_step(&mut self, last: bool, sink: &mut ChunkSink<'_>) {
        self.close_part(sink);
        let Some(step) = self.step.take() else {
            return;
        };
        let finish_reason = if last && self.outcome.error {
            "error"
        } else if step.tools {
            "tool-calls"
        } else if last {
            self.outcome.finish_reason()
        } else {
            "other"
        };
        sink(UiChunk::FinishStep {
            finish_reason,
            usage: step.usage,
        });
    }

    fn saw_result(&mut self) {
        if let Some(step) = &mut self.step {
            step.saw_result = true;
        }
    }

    fn delta(&mut self, kind: PartKind, delta: &str, sink: &mut ChunkSink<'_>) {
        let id = match self.open {
            Some(id) if id.kind == kind => id,
            _ => {
                self.close_part(sink);
                self.parts += 1;
                let id = PartId {
                    kind,
                    number: self.parts,
                };
                sink(match kind {
                    PartKind::Text => UiChunk::TextStart { id },
                    PartKind::Reasoning => UiChunk::ReasoningStart { id },
                });
                self.open = Some(id);
                id
            }
        };
        sink(match kind {
            PartKind::Text => UiChunk::TextDelta { id, delta },
            PartKind::Reasoning => UiChunk::ReasoningDelta { id, delta },
        });
    }

    fn close_part(&mut self, sink: &mut ChunkSink<'_>) {
        if let Some(id) = self.open.take() {
            sink(match id.kind {
                PartKind::Text => UiChunk::TextEnd { id },
                PartKind::Reasoning => UiChunk::ReasoningEnd { id },
            });
        }
    }

    /// The input chunks of a call, unless the client already has them.
    fn input(
        &mut self,
        tool_call_id: &str,
        tool_name: &str,
        args: &Value,
        sink: &mut ChunkSink<'_>,
    ) {
        if self.inputs_sent.contains(tool_call_id) {
            return;
        }
        self.inputs_sent.insert(tool_call_id.to_owned());
        if !self.inputs_streaming.remove(tool_call_id) {
            sink(UiChunk::ToolInputStart {
                tool_call_id,
                tool_name,
            });
        }
        sink(UiChunk::ToolInputAvailable {
            tool_call_id,
            tool_name,
            input: args,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_events::*;

    /// The chunks of `events`, named as the UI message stream names them (with
    /// their call id or part id).
    fn run(machine: &mut PartMachine, events: &[AiEvent]) -> Vec<String> {
        let mut names = Vec::new();
        for event in events {
            machine.event(event, APR, &mut |chunk| names.push(name(&chunk)));
        }
        names
    }

    fn name(chunk: &UiChunk<'_>) -> String {
        match chunk {
            UiChunk::Start { .. } => "start".into(),
            UiChunk::StartStep { .. } => "start-step".into(),
            UiChunk::TextStart { id } | UiChunk::ReasoningStart { id } => format!("{id} start"),
            UiChunk::TextDelta { id, delta } | UiChunk::ReasoningDelta { id, delta } => {
                format!("{id} {delta}")
            }
            UiChunk::TextEnd { id } | UiChunk::ReasoningEnd { id } => format!("{id} end"),
            UiChunk::ToolInputStart { tool_call_id, .. } => format!("input-start {tool_call_id}"),
            UiChunk::ToolInputDelta { tool_call_id, .. } => format!("input-delta {tool_call_id}"),
            UiChunk::ToolInputAvailable { tool_call_id, .. } => format!("input {tool_call_id}"),
            UiChunk::ToolApprovalRequest { approval_id, .. } => format!("approval {approval_id}"),
            UiChunk::ToolOutputAvailable { tool_call_id, .. } => format!("output {tool_call_id}"),
            UiChunk::ToolOutputError { tool_call_id, .. } => format!("error {tool_call_id}"),
            UiChunk::ToolOutputDenied { tool_call_id } => format!("denied {tool_call_id}"),
            UiChunk::Error { .. } => "error".into(),
            UiChunk::FinishStep { finish_reason, .. } => format!("finish-step {finish_reason}"),
            UiChunk::MessageMetadata { .. } => "metadata".into(),
            UiChunk::Finish { finish_reason, .. } => format!("finish {finish_reason}"),
            UiChunk::Warning { message } => format!("warning {message}"),
        }
    }

    fn input_delta(id: &str) -> AiEvent {
        ev(AiEventKind::ToolInputDelta {
            tool_call_id: id.into(),
            tool_name: "core__echo".into(),
            delta: "{".into(),
        })
    }

    #[test]
    fn parts_open_close_and_number_across_kinds_and_steps() {
        let mut machine = PartMachine::new("m1");
        let names = run(
            &mut machine,
            &[
                reasoning("r"),
                text("a"),
                text("b"),
                usage_of(1),
                text("c"),
                done(),
            ],
        );
        assert_eq!(
            names,
            [
                "start",
                "start-step",
                "reasoning-1 start",
                "reasoning-1 r",
                "reasoning-1 end",
                "text-2 start",
                "text-2 a",
                "text-2 b",
                "text-2 end",
                "finish-step other",
                "start-step",
                "text-3 start",
                "text-3 c",
                "text-3 end",
                "finish-step other",
                "metadata",
                "finish other"
            ]
        );
        assert!(machine.is_finished());
    }

    #[test]
    fn the_open_delta_is_the_one_chunk_event_would_yield() {
        let mut machine = PartMachine::new("m1");
        let first = text("a");
        assert_eq!(machine.open_delta(&first), None, "no part is open yet");
        run(&mut machine, &[first]);
        let next = text("b");
        let (id, delta) = machine.open_delta(&next).unwrap();
        assert_eq!((id.to_string().as_str(), delta), ("text-1", "b"));
        assert_eq!(run(&mut machine, &[next]), ["text-1 b"]);
        assert_eq!(machine.open_delta(&reasoning("r")), None, "another kind");
        run(&mut machine, &[usage_of(1)]);
        assert_eq!(machine.open_delta(&text("c")), None, "a new step");
    }

    #[test]
    fn streamed_inputs_are_announced_once_unless_streaming_is_off() {
        let mut machine = PartMachine::new("m1");
        let names = run(
            &mut machine,
            &[input_delta("c1"), input_delta("c1"), call("c1"), done()],
        );
        assert_eq!(
            names[2..6],
            [
                "input-start c1",
                "input-delta c1",
                "input-delta c1",
                "input c1"
            ]
        );
        let mut machine = PartMachine::new("m1").without_tool_input_streaming();
        let names = run(&mut machine, &[input_delta("c1"), call("c1"), done()]);
        assert_eq!(
            names,
            [
                "start",
                "start-step",
                "input-start c1",
                "input c1",
                "finish-step tool-calls",
                "finish other"
            ]
        );
    }

    #[test]
    fn continued_outcomes_go_outside_steps_and_known_inputs_are_not_repeated() {
        let continued = || vec!["c1".to_owned()];
        let mut machine = PartMachine::new("m1")
            .with_known_calls(continued())
            .with_continued_calls(continued());
        let names = run(
            &mut machine,
            &[call("c1"), result("c1"), text("ok"), done()],
        );
        assert_eq!(names[..3], ["start", "output c1", "start-step"]);
        // Known only: the outcome opens a step, the input is still not repeated.
        let mut machine = PartMachine::new("m1").with_known_calls(continued());
        let names = run(&mut machine, &[call("c1"), result("c1"), done()]);
        assert_eq!(
            names,
            [
                "start",
                "start-step",
                "output c1",
                "finish-step tool-calls",
                "finish other"
            ]
        );
    }

    #[test]
    fn warnings_come_after_start_and_never_after_finish() {
        let mut machine = PartMachine::new("m1");
        machine.warn("left out".into());
        let mut names = Vec::new();
        machine.warnings(&mut |chunk| names.push(name(&chunk)));
        machine.warnings(&mut |chunk| names.push(name(&chunk)));
        assert_eq!(names, ["start", "warning left out"]);
        machine.finish(&mut |_| {});
        machine.warn("late".into());
        machine.warnings(&mut |_| panic!("nothing after the finish"));
    }

    #[test]
    fn steps_end_with_their_own_reason_and_usage() {
        let mut machine = PartMachine::new("m1");
        let mut ends = Vec::new();
        for event in two_steps_with_usage() {
            machine.event(&event, APR, &mut |chunk| {
                if let UiChunk::FinishStep {
                    finish_reason,
                    usage,
                } = chunk
                {
                    ends.push((finish_reason, usage.map(|u| u.prompt_tokens)));
                }
            });
        }
        let mut finish = None;
        machine.finish(&mut |chunk| match chunk {
            UiChunk::FinishStep {
                finish_reason,
                usage,
            } => ends.push((finish_reason, usage.map(|u| u.prompt_tokens))),
            UiChunk::Finish { usage, .. } => finish = usage,
            _ => {}
        });
        assert_eq!(ends, [("tool-calls", Some(5)), ("other", Some(7))]);
        assert_eq!(
            finish,
            Some(TokenCounts {
                prompt_tokens: 12,
                completion_tokens: 4
            })
        );
    }
}
