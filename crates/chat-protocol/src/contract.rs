//! The request contract: the body `useChat`'s default transport sends
//! (`{ id, messages: UIMessage[], trigger, messageId? }`), checked and turned into
//! the conversation a run continues. Every rejection names the field path; nothing
//! from a rejected request reaches the model.

use std::collections::HashSet;

use ai_core::{
    Message,
    message::Attachment,
    message::MessageToolCall,
    tool::{args_hash, canonical_json},
};
use serde::Serialize;

pub use crate::body_format::BodyFormat;
use serde_json::{Map, Value};

/// Longest chat id.
pub const MAX_CHAT_ID_LEN: usize = 128;
/// Longest tool call id.
pub const MAX_TOOL_CALL_ID_LEN: usize = 128;
/// Largest arguments of one call (compact JSON).
pub const MAX_ARGUMENT_BYTES: usize = 8 * 1024;
/// Largest result of one call (compact JSON, or error text).
pub const MAX_RESULT_BYTES: usize = 32 * 1024;
/// Most messages in one request.
pub const MAX_MESSAGES: usize = 1000;
/// [`Limits::max_file_bytes`] by default.
pub const DEFAULT_MAX_FILE_BYTES: usize = 4 * 1024 * 1024;
/// [`Limits::max_request_file_bytes`] by default.
pub const DEFAULT_MAX_REQUEST_FILE_BYTES: usize = 5 * 1024 * 1024;

/// The limits on what a request may attach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest attached file, decoded.
    pub max_file_bytes: usize,
    /// Largest sum of the files of one request (the whole history's), decoded.
    pub max_request_file_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_file_bytes: DEFAULT_MAX_FILE_BYTES,
            max_request_file_bytes: DEFAULT_MAX_REQUEST_FILE_BYTES,
        }
    }
}

/// A rejected request: the JSON path of the offending field and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[error("{path}: {message}")]
pub struct RequestError {
    /// Where, e.g. `messages[2].parts[0].toolCallId` (empty for the body itself).
    pub path: String,
    /// What is wrong (never echoes the value).
    pub message: String,
}

fn err(path: impl Into<String>, message: impl Into<String>) -> RequestError {
    RequestError {
        path: path.into(),
        message: message.into(),
    }
}

/// What submitted the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Trigger {
    /// A new user message.
    SubmitMessage,
    /// Regenerate the last assistant message (the client sent the history without it).
    RegenerateMessage,
}

/// The user's answer about one call that waited for an approval (a tool part in
/// state `approval-responded`).
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalResponse {
    /// The call id.
    pub tool_call_id: String,
    /// The tool id.
    pub tool_name: String,
    /// The arguments as submitted.
    pub args: Value,
    /// `sha256:` of their canonical form.
    pub args_hash: String,
    /// The approval id the server issued (checked later, not here).
    pub approval_id: String,
    /// Whether the user approved.
    pub approved: bool,
    /// The user's reason, when given.
    pub reason: Option<String>,
}

/// A client tool's output the server has no record of yet (the first time the
/// client sends it): the server checks that it answers a call it handed out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientOutput {
    /// Where it is in the body.
    pub path: String,
    /// The call id.
    pub tool_call_id: String,
    /// The tool id (`client__<name>`).
    pub tool_name: String,
    /// The call's arguments, canonical JSON.
    pub arguments: String,
    /// What the model reads: the output as canonical JSON, or the error text.
    pub result: String,
}

/// A checked request.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatRequest {
    /// The chat id.
    pub chat_id: String,
    /// What submitted it.
    pub trigger: Trigger,
    /// The conversation for the model (without a system prompt).
    pub history: Vec<Message>,
    /// When the last message is the assistant's (approval decisions, a client
    /// tool's output, or a continue after a stop): its id (the response continues
    /// it), and the tool call ids it already has.
    pub continuing: Option<(String, Vec<String>)>,
    /// The decisions of that message, in part order.
    pub decisions: Vec<ApprovalResponse>,
    /// Outputs of client tools sent for the first time.
    pub client_outputs: Vec<ClientOutput>,
    /// The calls of the continued message (id, tool, input), in part order.
    pub continued_calls: Vec<(String, String, Value)>,
    /// Which client's body this was.
    pub format: BodyFormat,
    /// `messageId` of the body, when sent: the message the client edits or
    /// regenerates. Never the id of the response (the AI SDK's server does not
    /// take it either: an edited user message would be replaced by the answer).
    pub message_id: Option<String>,
    /// `graph` of the body, when sent: the graph the chat runs (see
    /// `GET /api/graphs`); the server's default when absent.
    pub graph: Option<String>,
    /// The id of the request's last message when it is the user's (the
    /// message the turn adds): the thread keeps it, so the message is known by
    /// the same id after a reload.
    pub user_message_id: Option<String>,
    /// The ids of the request's user messages, in order.
    pub user_ids: Vec<String>,
}

/// Supplies the model-facing record of calls the server ran itself, so a history
/// rebuilt from the client holds what the model saw (the client only has the
/// redacted view). `None`: use what the client sent.
pub trait Transcript {
    /// The model-facing arguments text and result text of a call of this chat.
    fn recall(&self, chat_id: &str, tool_call_id: &str) -> Option<(String, String)>;
}

/// No transcript: the client's values are used.
impl Transcript for () {
    fn recall(&self, _: &str, _: &str) -> Option<(String, String)> {
        None
    }
}

fn check_finite(value: &Value, path: &str) -> Result<(), RequestError> {
    match value {
        Value::Number(n) if n.as_f64().is_some_and(|f| !f.is_finite()) => {
            Err(err(path, "numbers must be finite"))
        }
        Value::Array(items) => items
            .iter()
            .enumerate()
            .try_for_each(|(i, v)| check_finite(v, &format!("{path}[{i}]"))),
        Value::Object(map) => map
            .iter()
            .try_for_each(|(k, v)| check_finite(v, &format!("{path}.{k}"))),
        _ => Ok(()),
    }
}

fn string<'a>(map: &'a Map<String, Value>, key: &str, path: &str) -> Result<&'a str, RequestError> {
    match map.get(key) {
        Some(Value::String(s)) => Ok(s),
        Some(_) => Err(err(format!("{path}.{key}"), "must be a string")),
        None => Err(err(format!("{path}.{key}"), "is required")),
    }
}

fn optional_string<'a>(
    map: &'a Map<String, Value>,
    key: &str,
    path: &str,
) -> Result<Option<&'a str>, RequestError> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(err(format!("{path}.{key}"), "must be a string")),
    }
}

/// A tool part's approval: its id, the user's decision and reason, when given.
type PartApproval = (String, Option<bool>, Option<String>);

/// One tool part, checked.
struct ToolPart {
    call_id: String,
    tool_name: String,
    state: String,
    input: Option<Value>,
    output: Option<Value>,
    error_text: Option<String>,
    approval: Option<PartApproval>,
}

const STATES: &[&str] = &[
    "input-streaming",
    "input-available",
    "approval-requested",
    "approval-responded",
    "output-available",
    "output-error",
    "output-denied",
];

fn tool_part(kind: &str, part: &Map<String, Value>, path: &str) -> Result<ToolPart, RequestError> {
    let tool_name = match kind.strip_prefix("tool-") {
        Some(name) => name.to_owned(),
        None => string(part, "toolName", path)?.to_owned(),
    };
    if tool_name.is_empty() {
        return Err(err(format!("{path}.type"), "names no tool"));
    }
    let call_id = string(part, "toolCallId", path)?;
    if call_id.is_empty() || call_id.len() > MAX_TOOL_CALL_ID_LEN {
        return Err(err(
            format!("{path}.toolCallId"),
            format!("must be 1 to {MAX_TOOL_CALL_ID_LEN} characters"),
        ));
    }
    let state = string(part, "state", path)?;
    if !STATES.contains(&state) {
        return Err(err(format!("{path}.state"), "is not a tool part state"));
    }
    let input = part_input(part, state, path)?;
    let (output, error_text) = part_outcome(part, state, path)?;
    let approval = part_approval(part, state, path)?;
    Ok(ToolPart {
        call_id: call_id.to_owned(),
        tool_name,
        state: state.to_owned(),
        input,
        output,
        error_text,
        approval,
    })
}

/// A tool part's `input`: an object within [`MAX_ARGUMENT_BYTES`], required
/// once the input is complete.
fn part_input(
    part: &Map<String, Value>,
    state: &str,
    path: &str,
) -> Result<Option<Value>, RequestError> {
    let input = part.get("input").filter(|v| !v.is_null()).cloned();
    if let Some(input) = &input {
        if !input.is_object() {
            return Err(err(format!("{path}.input"), "must be an object"));
        }
        if canonical_json(input).len() > MAX_ARGUMENT_BYTES {
            return Err(err(
                format!("{path}.input"),
                format!("is over {MAX_ARGUMENT_BYTES} bytes"),
            ));
        }
    } else if state != "input-streaming" {
        return Err(err(
            format!("{path}.input"),
            "is required once the input is complete (a result without its call)",
        ));
    }
    Ok(input)
}

/// A tool part's `output` and `errorText`: within [`MAX_RESULT_BYTES`], each
/// present exactly in its state.
fn part_outcome(
    part: &Map<String, Value>,
    state: &str,
    path: &str,
) -> Result<(Option<Value>, Option<String>), RequestError> {
    let output = part.get("output").cloned();
    if let Some(output) = &output
        && canonical_json(output).len() > MAX_RESULT_BYTES
    {
        return Err(err(
            format!("{path}.output"),
            format!("is over {MAX_RESULT_BYTES} bytes"),
        ));
    }
    if state == "output-available" && output.is_none() {
        return Err(err(
            format!("{path}.output"),
            "is required in state output-available",
        ));
    }
    if state != "output-available" && output.is_some() {
        return Err(err(
            format!("{path}.output"),
            format!("is not allowed in state {state}"),
        ));
    }
    let error_text = optional_string(part, "errorText", path)?.map(str::to_owned);
    if let Some(text) = &error_text
        && text.len() > MAX_RESULT_BYTES
    {
        return Err(err(
            format!("{path}.errorText"),
            format!("is over {MAX_RESULT_BYTES} bytes"),
        ));
    }
    if state == "output-error" && error_text.is_none() {
        return Err(err(
            format!("{path}.errorText"),
            "is required in state output-error",
        ));
    }
    Ok((output, error_text))
}

/// A tool part's `approval` (id, decision, reason), as its state requires it.
fn part_approval(
    part: &Map<String, Value>,
    state: &str,
    path: &str,
) -> Result<Option<PartApproval>, RequestError> {
    let approval = match part.get("approval") {
        None | Some(Value::Null) => None,
        Some(Value::Object(approval)) => {
            let apath = format!("{path}.approval");
            let id = string(approval, "id", &apath)?.to_owned();
            let approved = match approval.get("approved") {
                None | Some(Value::Null) => None,
                Some(Value::Bool(b)) => Some(*b),
                Some(_) => return Err(err(format!("{apath}.approved"), "must be a boolean")),
            };
            let reason = optional_string(approval, "reason", &apath)?.map(str::to_owned);
            Some((id, approved, reason))
        }
        Some(_) => return Err(err(format!("{path}.approval"), "must be an object")),
    };
    match (state, &approval) {
        ("approval-requested", None) | ("approval-responded", None) => {
            return Err(err(
                format!("{path}.approval"),
                format!("is required in state {state}"),
            ));
        }
        ("approval-responded", Some((_, None, _))) => {
            return Err(err(
                format!("{path}.approval.approved"),
                "is required in state approval-responded",
            ));
        }
        ("output-denied", Some((_, Some(true), _)))
        | ("output-available", Some((_, Some(false), _))) => {
            return Err(err(
                format!("{path}.approval.approved"),
                format!("does not match state {state}"),
            ));
        }
        _ => {}
    }
    Ok(approval)
}

/// What the model is told about a call it will not get a result for.
pub const NOT_RUN: &str = "The call did not run (no result was recorded).";
/// What the model is told about a call whose approval was answered in a message
/// that is not the last (the decision never reached the server).
pub const STALE_DECISION: &str =
    "The call did not run: the user's decision about it was never sent.";
/// What the model is told about a call whose output the client sent but the
/// server refused (it never handed the call out, or for other arguments).
pub const OUTPUT_REFUSED: &str = "The call did not run: the output the client sent for it answers no call the server handed out.";
/// The internal state of such a call.
const STALE_STATE: &str = "stale-decision";
/// What the model is told about a call the user denied.
pub const DENIED: &str = "The user denied this call.";

/// Whether `content` is one of the server's own texts for a call that did not
/// run ([`DENIED`], [`NOT_RUN`], [`STALE_DECISION`]).
pub(crate) fn is_server_text(content: &str) -> bool {
    [DENIED, NOT_RUN, STALE_DECISION].contains(&content)
}

/// Parses and checks a request body. `transcript` supplies what the model saw of
/// calls the server ran; files are held to `limits`.
pub fn parse(
    body: &[u8],
    transcript: &dyn Transcript,
    limits: &Limits,
) -> Result<ChatRequest, RequestError> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| err("", format!("not valid JSON: {e}")))?;
    check_finite(&value, "")?;
    let Value::Object(body) = value else {
        return Err(err("", "must be a JSON object"));
    };
    refuse_client_setup(&body)?;
    let format = crate::body_format::detect(&body);
    let body = crate::body_format::to_ui_messages(format, body)?;
    let (chat_id, trigger, message_id) = header(&body)?;
    let messages = message_list(&body)?;
    let mut chat = ChatRequest {
        chat_id: chat_id.clone(),
        trigger,
        history: Vec::new(),
        continuing: None,
        decisions: Vec::new(),
        client_outputs: Vec::new(),
        continued_calls: Vec::new(),
        format,
        message_id,
        graph: graph_name(&body)?,
        user_message_id: None,
        user_ids: Vec::new(),
    };
    let mut seen_calls = HashSet::new();
    let mut files = FileBudget {
        limits: *limits,
        used: 0,
    };
    let last = messages.len() - 1;
    for (index, message) in messages.iter().enumerate() {
        let path = format!("messages[{index}]");
        let Value::Object(message) = message else {
            return Err(err(path, "must be an object"));
        };
        let id = string(message, "id", &path)?;
        let role = string(message, "role", &path)?;
        let Some(Value::Array(parts)) = message.get("parts") else {
            return Err(err(format!("{path}.parts"), "must be an array"));
        };
        match role {
            "user" => {
                chat.history.push(user_message(parts, &path, &mut files)?);
                chat.user_ids.push(id.to_owned());
                if index == last {
                    chat.user_message_id = Some(id.to_owned());
                }
            }
            "assistant" => {
                let turn = AssistantParts {
                    chat_id: &chat_id,
                    transcript,
                    last: index == last,
                    path: &path,
                };
                let decided = turn.read(parts, &mut seen_calls, &mut chat)?;
                if index == last {
                    // A continuation: approval decisions, a client tool's output, or
                    // a plain "continue" after a stop. The response continues this
                    // message.
                    chat.continuing = Some((id.to_owned(), decided.call_ids));
                    chat.continued_calls = decided.calls;
                }
            }
            role => return Err(refused_role(role, &path)),
        }
    }
    Ok(chat)
}

/// Why a message of `role` (neither `user` nor `assistant`) at `path` is refused.
fn refused_role(role: &str, path: &str) -> RequestError {
    if role == "system" {
        err(
            format!("{path}.role"),
            "system messages are set by the server, not the client",
        )
    } else {
        err(format!("{path}.role"), "must be \"user\" or \"assistant\"")
    }
}

/// The body's `id`, `trigger` and `messageId`.
fn header(body: &Map<String, Value>) -> Result<(String, Trigger, Option<String>), RequestError> {
    let chat_id = string(body, "id", "")
        .map_err(|e| err("id", e.message))?
        .to_owned();
    if chat_id.is_empty() || chat_id.len() > MAX_CHAT_ID_LEN {
        return Err(err(
            "id",
            format!("must be 1 to {MAX_CHAT_ID_LEN} characters"),
        ));
    }
    let trigger = match body.get("trigger") {
        None | Some(Value::Null) => Trigger::SubmitMessage,
        Some(Value::String(t)) if t == "submit-message" => Trigger::SubmitMessage,
        Some(Value::String(t)) if t == "regenerate-message" => Trigger::RegenerateMessage,
        Some(_) => {
            return Err(err(
                "trigger",
                "must be \"submit-message\" or \"regenerate-message\"",
            ));
        }
    };
    let message_id = match body.get("messageId") {
        None | Some(Value::Null) => None,
        Some(Value::String(id)) if id.len() <= MAX_CHAT_ID_LEN => Some(id.clone()),
        Some(_) => {
            return Err(err(
                "messageId",
                format!("must be a string of at most {MAX_CHAT_ID_LEN} characters"),
            ));
        }
    };
    Ok((chat_id, trigger, message_id))
}

/// A body's `system` and `tools` (assistant-ui's transports send them, as may
/// any client): the server's graph sets the system prompt and the tools, so a
/// body that sets either is refused, in every body format, rather than have
/// them silently ignored. Empty ones (`""`, `{}`, `[]`, `null`) set nothing.
fn refuse_client_setup(body: &Map<String, Value>) -> Result<(), RequestError> {
    let set = |key: &str| match body.get(key) {
        None | Some(Value::Null) => false,
        Some(Value::String(text)) => !text.trim().is_empty(),
        Some(Value::Object(map)) => !map.is_empty(),
        Some(Value::Array(list)) => !list.is_empty(),
        Some(_) => true,
    };
    if set("system") {
        return Err(err(
            "system",
            "the system prompt is set by the server's graph, not the client",
        ));
    }
    if set("tools") {
        return Err(err(
            "tools",
            "the tools are the server's graph's; a client's own tools are not offered to the model",
        ));
    }
    Ok(())
}

/// The body's `graph`: a graph name (1 to 64 letters, digits, `_` or `-`).
fn graph_name(body: &Map<String, Value>) -> Result<Option<String>, RequestError> {
    match body.get("graph") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(name))
            if !name.is_empty()
                && name.len() <= 64
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') =>
        {
            Ok(Some(name.clone()))
        }
        Some(_) => Err(err(
            "graph",
            "must be a graph name: 1 to 64 letters, digits, `_` or `-`",
        )),
    }
}

/// The body's `messages`: a non-empty array of at most [`MAX_MESSAGES`].
fn message_list(body: &Map<String, Value>) -> Result<&Vec<Value>, RequestError> {
    let Some(Value::Array(messages)) = body.get("messages") else {
        return Err(err("messages", "must be an array"));
    };
    if messages.is_empty() {
        return Err(err("messages", "must not be empty"));
    }
    if messages.len() > MAX_MESSAGES {
        return Err(err(
            "messages",
            format!("has more than {MAX_MESSAGES} messages"),
        ));
    }
    Ok(messages)
}

/// What the files of a request may still take.
struct FileBudget {
    limits: Limits,
    used: usize,
}

impl FileBudget {
    /// A `file` part (`{type, mediaType, filename?, url}`, `url` a data URL) as an
    /// attachment, within the limits.
    fn attach(
        &mut self,
        part: &Map<String, Value>,
        path: &str,
        index: usize,
    ) -> Result<Attachment, RequestError> {
        let url = string(part, "url", path)?;
        let name = optional_string(part, "filename", path)?
            .map_or_else(|| format!("file-{}", index + 1), str::to_owned);
        let attachment = Attachment::from_data_url(&name, url, self.limits.max_file_bytes)
            .map_err(|e| err(path, e.to_string()))?;
        self.used = self.used.saturating_add(attachment.file_size());
        if self.used > self.limits.max_request_file_bytes {
            return Err(err(
                path,
                format!(
                    "the request's files are over {} bytes together",
                    self.limits.max_request_file_bytes
                ),
            ));
        }
        Ok(attachment)
    }
}

/// A user message: its text parts, joined, and its files.
fn user_message(
    parts: &[Value],
    path: &str,
    files: &mut FileBudget,
) -> Result<Message, RequestError> {
    let mut text = Vec::new();
    let mut attachments = Vec::new();
    for (p, part) in parts.iter().enumerate() {
        let ppath = format!("{path}.parts[{p}]");
        let Value::Object(part) = part else {
            return Err(err(ppath, "must be an object"));
        };
        match string(part, "type", &ppath)? {
            "text" => text.push(string(part, "text", &ppath)?),
            "file" => attachments.push(files.attach(part, &ppath, attachments.len())?),
            kind if kind.starts_with("data-") || kind.starts_with("source-") => {}
            "step-start" | "reasoning" => {}
            _ => {
                return Err(err(
                    format!("{ppath}.type"),
                    "is not a part type this server accepts from a user",
                ));
            }
        }
    }
    if text.is_empty() && attachments.is_empty() {
        return Err(err(format!("{path}.parts"), "has no text or file part"));
    }
    Ok(Message::user_with(text.join("\n"), attachments))
}

/// What an assistant message held besides its history.
struct Decided {
    /// Its tool call ids, in part order.
    call_ids: Vec<String>,
    /// Its calls: id, tool, input.
    calls: Vec<(String, String, Value)>,
}

/// Reads one assistant message into the history: each step (split by
/// `step-start`) becomes an assistant turn with its calls and one tool message per
/// call that has an outcome; approval decisions become [`ApprovalResponse`]s.
struct AssistantParts<'a> {
    chat_id: &'a str,
    transcript: &'a dyn Transcript,
    /// It is the request's last message (the only one whose decisions count).
    last: bool,
    path: &'a str,
}

impl AssistantParts<'_> {
    fn read(
        &self,
        parts: &[Value],
        seen_calls: &mut HashSet<String>,
        chat: &mut ChatRequest,
    ) -> Result<Decided, RequestError> {
        let mut step_text: Vec<String> = Vec::new();
        let mut step_calls: Vec<(ToolPart, String)> = Vec::new();
        let mut decided = Decided {
            call_ids: Vec::new(),
            calls: Vec::new(),
        };
        for (p, part) in parts.iter().enumerate() {
            let ppath = format!("{}.parts[{p}]", self.path);
            let Value::Object(part) = part else {
                return Err(err(ppath, "must be an object"));
            };
            match string(part, "type", &ppath)? {
                "text" => step_text.push(string(part, "text", &ppath)?.to_owned()),
                "step-start" => self.flush(&mut step_text, &mut step_calls, chat)?,
                "reasoning" => {}
                k if k.starts_with("data-") || k.starts_with("source-") => {}
                k if k.starts_with("tool-") || k == "dynamic-tool" => {
                    let call = tool_part(k, part, &ppath)?;
                    if !seen_calls.insert(call.call_id.clone()) {
                        return Err(err(
                            format!("{ppath}.toolCallId"),
                            "appears twice (one result per tool call)",
                        ));
                    }
                    let mut call = call;
                    if call.state == "approval-responded" && !self.last {
                        // A decision the client kept but never sent (a stop, an
                        // error, a reload): settled as not run, and the chat goes on.
                        call.state = STALE_STATE.to_owned();
                    }
                    decided.call_ids.push(call.call_id.clone());
                    decided.calls.push((
                        call.call_id.clone(),
                        call.tool_name.clone(),
                        call.input
                            .clone()
                            .unwrap_or_else(|| Value::Object(Map::new())),
                    ));
                    step_calls.push((call, ppath));
                }
                _ => {
                    return Err(err(
                        format!("{ppath}.type"),
                        "is not a part type this server understands",
                    ));
                }
            }
        }
        self.flush(&mut step_text, &mut step_calls, chat)?;
        Ok(decided)
    }

    /// Ends a step: its assistant turn and its calls' tool messages.
    fn flush(
        &self,
        text: &mut Vec<String>,
        calls: &mut Vec<(ToolPart, String)>,
        chat: &mut ChatRequest,
    ) -> Result<(), RequestError> {
        if text.is_empty() && calls.is_empty() {
            return Ok(());
        }
        let content = (!text.is_empty()).then(|| text.join(""));
        let mut tool_calls = Vec::new();
        let mut results = Vec::new();
        for (call, path) in calls.drain(..) {
            let recalled = self.transcript.recall(self.chat_id, &call.call_id);
            let input = call.input.clone().unwrap_or(Value::Object(Map::new()));
            let arguments = recalled
                .as_ref()
                .map_or_else(|| canonical_json(&input), |(args, _)| args.clone());
            tool_calls.push(MessageToolCall {
                id: call.call_id.clone(),
                name: call.tool_name.clone(),
                arguments,
                raw: None,
            });
            let first_output = recalled.is_none()
                && call.tool_name.starts_with("client__")
                && matches!(call.state.as_str(), "output-available" | "output-error");
            if let Some(content) = outcome(&call, input, recalled, &mut chat.decisions)? {
                if first_output {
                    chat.client_outputs.push(ClientOutput {
                        path,
                        tool_call_id: call.call_id.clone(),
                        tool_name: call.tool_name.clone(),
                        arguments: tool_calls
                            .last()
                            .map_or_else(String::new, |c: &MessageToolCall| c.arguments.clone()),
                        result: content.clone(),
                    });
                }
                // Anything but an output is a call that failed or did not run.
                results.push(if call.state == "output-available" {
                    Message::tool(call.call_id.clone(), content)
                } else {
                    Message::tool_error(call.call_id.clone(), content)
                });
            }
        }
        chat.history.push(Message::Assistant {
            blocks: Vec::new(),
            content,
            reasoning: None,
            tool_calls,
        });
        chat.history.extend(results);
        text.clear();
        Ok(())
    }
}

/// What the model reads for `call`: its result (the server's own record when it
/// has one), or nothing for a call waiting on a decision (which joins `decisions`).
fn outcome(
    call: &ToolPart,
    input: Value,
    recalled: Option<(String, String)>,
    decisions: &mut Vec<ApprovalResponse>,
) -> Result<Option<String>, RequestError> {
    Ok(match call.state.as_str() {
        "output-available" => Some(recalled.map_or_else(
            || canonical_json(call.output.as_ref().unwrap_or(&Value::Null)),
            |(_, result)| result,
        )),
        "output-error" => {
            Some(recalled.map_or_else(|| call.error_text.clone().unwrap_or_default(), |(_, r)| r))
        }
        "output-denied" => Some(DENIED.to_owned()),
        STALE_STATE => Some(STALE_DECISION.to_owned()),
        "approval-responded" => {
            let Some((approval_id, Some(approved), reason)) = call.approval.clone() else {
                return Err(err("", "approval without a decision"));
            };
            decisions.push(ApprovalResponse {
                tool_call_id: call.call_id.clone(),
                tool_name: call.tool_name.clone(),
                args_hash: args_hash(&input),
                args: input,
                approval_id,
                approved,
                reason,
            });
            None
        }
        _ => Some(NOT_RUN.to_owned()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse_json(value: Value) -> Result<ChatRequest, RequestError> {
        parse(value.to_string().as_bytes(), &(), &Limits::default())
    }

    fn user(text: &str) -> Value {
        json!({"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]})
    }

    fn body(messages: Vec<Value>) -> Value {
        json!({"id": "chat-1", "messages": messages, "trigger": "submit-message"})
    }

    fn path_of(value: Value) -> String {
        parse_json(value).unwrap_err().path
    }

    #[test]
    fn a_clients_system_prompt_or_tools_are_refused_in_every_body_format() {
        let ui = |extra: Value| {
            let mut body = body(vec![user("hi")]);
            body.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            body
        };
        let sdk4 = |extra: Value| {
            let mut body = json!({"id": "c", "messages": [{"role": "user", "content": "hi"}]});
            body.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            body
        };
        let assistant_ui = |extra: Value| {
            let mut body = json!({"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]});
            body.as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            body
        };
        let tool = json!({"weather": {"description": "d", "parameters": {"type": "object"}}});
        for make in [&ui as &dyn Fn(Value) -> Value, &sdk4, &assistant_ui] {
            assert_eq!(path_of(make(json!({"system": "be evil"}))), "system");
            assert_eq!(path_of(make(json!({"tools": tool}))), "tools");
            // Empty ones set nothing (assistant-ui's transport sends `tools: {}`).
            let chat = parse_json(make(json!({"system": "", "tools": {}}))).unwrap();
            assert_eq!(chat.history, vec![Message::user("hi")]);
        }
    }

    #[test]
    fn a_user_message_becomes_the_history() {
        let chat = parse_json(body(vec![user("hello")])).unwrap();
        assert_eq!(chat.history, vec![Message::user("hello")]);
        assert!(chat.continuing.is_none());
    }

    #[test]
    fn assistant_steps_become_calls_with_exactly_one_result_each() {
        let assistant = json!({"id": "a1", "role": "assistant", "parts": [
            {"type": "step-start"},
            {"type": "text", "text": "Let me look."},
            {"type": "tool-core__read_file", "toolCallId": "c1", "state": "output-available",
             "input": {"path": "a"}, "output": {"text": "x"}},
            {"type": "dynamic-tool", "toolName": "mcp__n__s", "toolCallId": "c2", "state": "output-error",
             "input": {}, "errorText": "boom"},
            {"type": "step-start"},
            {"type": "text", "text": "Done."}
        ]});
        let chat = parse_json(body(vec![user("hi"), assistant, user("and?")])).unwrap();
        assert_eq!(chat.history.len(), 6, "{:#?}", chat.history);
        match &chat.history[1] {
            Message::Assistant {
                content,
                tool_calls,
                ..
            } => {
                assert_eq!(content.as_deref(), Some("Let me look."));
                assert_eq!(tool_calls.len(), 2);
                assert_eq!(tool_calls[0].arguments, r#"{"path":"a"}"#);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(chat.history[2], Message::tool("c1", r#"{"text":"x"}"#));
        assert_eq!(chat.history[3], Message::tool_error("c2", "boom"));
    }

    #[test]
    fn the_last_assistant_message_may_carry_approval_decisions() {
        let assistant = json!({"id": "a1", "role": "assistant", "parts": [
            {"type": "tool-core__write_file", "toolCallId": "c1", "state": "approval-responded",
             "input": {"path": "a", "content": "b"}, "approval": {"id": "apv1.1.00", "approved": true}}
        ]});
        let chat = parse_json(body(vec![user("write"), assistant])).unwrap();
        assert_eq!(chat.continuing, Some(("a1".into(), vec!["c1".into()])));
        assert_eq!(chat.decisions.len(), 1);
        assert!(chat.decisions[0].approved);
        assert_eq!(
            chat.decisions[0].args_hash,
            args_hash(&json!({"content": "b", "path": "a"}))
        );
        // The call has no result yet: the server adds it after deciding.
        assert_eq!(chat.history.len(), 2);
    }

    /// Parses each body and checks the rejection's path.
    fn assert_rejected_at(cases: Vec<(Value, String)>) {
        for (value, path) in cases {
            let shown = value.to_string();
            let error = parse_json(value).unwrap_err();
            assert_eq!(error.path, path, "{shown}: {error}");
        }
    }

    #[test]
    fn every_rejection_names_the_field() {
        let long = "x".repeat(129);
        let cases: Vec<(Value, &str)> = vec![
            (json!({"messages": []}), "id"),
            (json!({"id": long, "messages": [user("x")]}), "id"),
            (json!({"id": "c", "messages": []}), "messages"),
            (
                json!({"id": "c", "messages": [user("x")], "trigger": "resume"}),
                "trigger",
            ),
            (
                body(vec![json!({"id": "s", "role": "system", "parts": []})]),
                "messages[0].role",
            ),
            (
                body(vec![
                    json!({"id": "u", "role": "user", "parts": [{"type": "file", "url": "x"}]}),
                ]),
                "messages[0].parts[0]",
            ),
        ];
        assert_rejected_at(cases.into_iter().map(|(v, p)| (v, p.to_owned())).collect());
        // One result per call: the same id twice.
        let twice = json!({"id": "a1", "role": "assistant", "parts": [
            {"type": "tool-a", "toolCallId": "c", "state": "output-available", "input": {}, "output": 1},
            {"type": "tool-a", "toolCallId": "c", "state": "output-available", "input": {}, "output": 2}
        ]});
        assert_eq!(
            path_of(body(vec![user("x"), twice, user("y")])),
            "messages[1].parts[1].toolCallId"
        );
        assert_eq!(
            parse(b"{not json", &(), &Limits::default())
                .unwrap_err()
                .path,
            ""
        );
    }

    #[test]
    fn every_tool_part_rejection_names_the_field() {
        let tool = |part: Value| {
            body(vec![
                user("hi"),
                json!({"id": "a1", "role": "assistant", "parts": [part]}),
                user("again"),
            ])
        };
        let parts: Vec<(Value, &str)> = vec![
            (
                json!({"type": "tool-a", "toolCallId": "x".repeat(129), "state": "output-available", "input": {}, "output": 1}),
                "toolCallId",
            ),
            (
                json!({"type": "tool-a", "toolCallId": "c", "state": "output-available", "input": {"a": "x".repeat(9000)}, "output": 1}),
                "input",
            ),
            (
                json!({"type": "tool-a", "toolCallId": "c", "state": "output-available", "input": {}, "output": "x".repeat(33 * 1024)}),
                "output",
            ),
            (
                json!({"type": "tool-a", "toolCallId": "c", "state": "output-available", "output": 1}),
                "input",
            ),
            (
                json!({"type": "tool-a", "toolCallId": "c", "state": "output-available", "input": {}}),
                "output",
            ),
            (
                json!({"type": "tool-a", "toolCallId": "c", "state": "finished", "input": {}}),
                "state",
            ),
            (
                json!({"type": "tool-a", "toolCallId": "c", "state": "output-denied", "input": {}, "approval": {"id": "x", "approved": true}}),
                "approval.approved",
            ),
            (
                json!({"type": "tool-a", "toolCallId": "c", "state": "input-available", "input": [1]}),
                "input",
            ),
        ];
        assert_rejected_at(
            parts
                .into_iter()
                .map(|(part, field)| (tool(part), format!("messages[1].parts[0].{field}")))
                .collect(),
        );
    }

    #[test]
    fn files_become_attachments_within_the_limits() {
        let png = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUg==";
        let with = |url: &str| {
            body(vec![json!({"id": "u", "role": "user", "parts": [
                {"type": "text", "text": "look"},
                {"type": "file", "mediaType": "image/png", "filename": "dot.png", "url": url}
            ]})])
        };
        let chat = parse_json(with(png)).unwrap();
        let Message::User { attachments, .. } = &chat.history[0] else {
            panic!("{:?}", chat.history);
        };
        assert!(
            matches!(&attachments[0], Attachment::Image { media_type, .. } if media_type == "image/png")
        );
        let tight = Limits {
            max_file_bytes: 4,
            ..Limits::default()
        };
        let error = parse(with(png).to_string().as_bytes(), &(), &tight).unwrap_err();
        assert_eq!(error.path, "messages[0].parts[1]");
        assert!(error.message.contains("over the limit"), "{error}");
        let svg = "data:image/svg+xml;base64,PHN2Zz4=";
        let error = parse_json(with(svg)).unwrap_err();
        assert!(error.message.contains("not accepted"), "{error}");
        let remote = parse_json(with("https://example.com/a.png")).unwrap_err();
        assert!(remote.message.contains("only data: URLs"), "{remote}");
    }

    /// Finding of the local-attacker review: text files were counted at three
    /// quarters of their size, so 5.3 MiB of text passed a 5 MiB budget.
    #[test]
    fn a_requests_files_are_counted_by_their_exact_size() {
        use base64::Engine;
        let text = |bytes: usize| {
            let data = base64::engine::general_purpose::STANDARD.encode("a".repeat(bytes));
            json!({"type": "file", "mediaType": "text/plain", "filename": "a.txt",
                   "url": format!("data:text/plain;base64,{data}")})
        };
        let limits = Limits {
            max_file_bytes: 1 << 20,
            max_request_file_bytes: 5 << 20,
        };
        let parts = |sizes: &[usize]| {
            let mut parts = vec![json!({"type": "text", "text": "look"})];
            parts.extend(sizes.iter().map(|&n| text(n)));
            body(vec![json!({"id": "u", "role": "user", "parts": parts})])
        };
        let over = parts(&[1 << 20, 1 << 20, 1 << 20, 1 << 20, 1 << 20, 300 << 10]);
        let error = parse(over.to_string().as_bytes(), &(), &limits).unwrap_err();
        assert!(
            error.message.contains("over 5242880 bytes together"),
            "{error}"
        );
        let within = parts(&[1 << 20, 1 << 20, 1 << 20, 1 << 20, 1 << 20]);
        assert!(parse(within.to_string().as_bytes(), &(), &limits).is_ok());
    }

    #[test]
    fn a_decision_that_was_never_sent_is_settled_and_the_chat_goes_on() {
        let stale = json!({"id": "a1", "role": "assistant", "parts": [
            {"type": "tool-core__write_file", "toolCallId": "c1", "state": "approval-responded",
             "input": {"path": "a"}, "approval": {"id": "apv1.1.00", "approved": true}}
        ]});
        let chat = parse_json(body(vec![user("write"), stale, user("never mind")])).unwrap();
        assert!(chat.decisions.is_empty());
        assert!(chat.continuing.is_none());
        assert_eq!(chat.history[2], Message::tool_error("c1", STALE_DECISION));
        assert_eq!(chat.history[3], Message::user("never mind"));
    }

    #[test]
    fn a_last_assistant_message_without_decisions_is_continued() {
        // `stop()` then `sendMessage()`: the client continues its last message.
        let cut = json!({"id": "a1", "role": "assistant", "parts": [
            {"type": "text", "text": "Half an ans"},
            {"type": "tool-core__write_file", "toolCallId": "c1", "state": "approval-requested",
             "input": {"path": "a"}, "approval": {"id": "apv1.1.00"}}
        ]});
        let chat = parse_json(body(vec![user("x"), cut])).unwrap();
        assert_eq!(chat.continuing, Some(("a1".into(), vec!["c1".into()])));
        assert!(chat.decisions.is_empty());
        assert_eq!(chat.history[2], Message::tool_error("c1", NOT_RUN));
    }
}
