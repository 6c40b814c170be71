//! The request bodies of other clients, rewritten into the one the contract checks
//! (`{id, messages: UIMessage[], trigger?}`, what `useChat` of AI SDK 5 to 7
//! sends):
//!
//! - AI SDK 4's `useChat`: `{id, messages}` whose messages carry `content` (text),
//!   and, depending on the version and options, `id`, `parts` (`text`,
//!   `reasoning`, `step-start`, `tool-invocation`, `source`, `file`),
//!   `toolInvocations` and `experimental_attachments` (`{name?, contentType?,
//!   url}`). Without `sendExtraMessageFields` messages have no `id`: they get
//!   `m<index>`. A tool invocation in state `call` becomes `input-available`,
//!   `partial-call` `input-streaming`, `result` `output-available`.
//! - assistant-ui's `useDataStreamRuntime`: `{messages, tools, system?,
//!   threadId?, unstable_assistantMessageId?, runConfig?, state?}` whose messages
//!   are language-model messages (`role` user, assistant or tool; `content` an
//!   array of `text`, `file` (`{data, mediaType, filename?}`), `tool-call`
//!   (`{toolCallId, toolName, input}`) and `tool-result` (`{toolCallId, output:
//!   {type: json|error-json|text|error-text, value}}`) parts). Its chat id is
//!   `threadId`, else [`ASSISTANT_UI_CHAT`]. A body that sets `system` or
//!   `tools` is refused before any rewrite, in every format (the server's graph
//!   sets both; see [`crate::contract::parse`]).
//!
//! Everything the rewritten body holds is then checked by [`crate::contract`] as
//! for any client; a rewrite only moves fields.

use serde_json::{Map, Value, json};

use crate::contract::RequestError;

/// The chat id of an assistant-ui body without a `threadId`.
pub const ASSISTANT_UI_CHAT: &str = "assistant-ui";

/// Which client's body a request has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum BodyFormat {
    /// UI messages (AI SDK 5, 6, 7 and the project's page).
    #[default]
    UiMessages,
    /// AI SDK 4's `useChat`.
    AiSdk4,
    /// assistant-ui's `useDataStreamRuntime`.
    AssistantUi,
}

fn err(path: impl Into<String>, message: impl Into<String>) -> RequestError {
    RequestError {
        path: path.into(),
        message: message.into(),
    }
}

/// Which format `body` is in: UI messages have `parts` and no `content`;
/// language-model messages have array contents or a `tool` role; anything else
/// with `content` is AI SDK 4's.
pub fn detect(body: &Map<String, Value>) -> BodyFormat {
    let Some(Value::Array(messages)) = body.get("messages") else {
        return BodyFormat::UiMessages;
    };
    let has = |key: &str| {
        messages
            .iter()
            .any(|m| m.get(key).is_some_and(|v| !v.is_null()))
    };
    if !has("content") {
        return BodyFormat::UiMessages;
    }
    let language_model = messages.iter().any(|m| {
        m.get("content").is_some_and(Value::is_array) || m.get("role") == Some(&json!("tool"))
    });
    if language_model {
        BodyFormat::AssistantUi
    } else {
        BodyFormat::AiSdk4
    }
}

/// `body` as a UI-message body.
pub fn to_ui_messages(
    format: BodyFormat,
    body: Map<String, Value>,
) -> Result<Map<String, Value>, RequestError> {
    match format {
        BodyFormat::UiMessages => Ok(body),
        BodyFormat::AiSdk4 => ai_sdk4(body),
        BodyFormat::AssistantUi => assistant_ui(body),
    }
}

fn messages(body: &Map<String, Value>) -> Result<&Vec<Value>, RequestError> {
    match body.get("messages") {
        Some(Value::Array(messages)) => Ok(messages),
        _ => Err(err("messages", "must be an array")),
    }
}

fn ai_sdk4(mut body: Map<String, Value>) -> Result<Map<String, Value>, RequestError> {
    let converted = messages(&body)?
        .iter()
        .enumerate()
        .map(|(index, message)| ai_sdk4_message(index, message))
        .collect::<Result<Vec<Value>, RequestError>>()?;
    body.insert("messages".into(), Value::Array(converted));
    Ok(body)
}

fn ai_sdk4_message(index: usize, message: &Value) -> Result<Value, RequestError> {
    let path = format!("messages[{index}]");
    let Value::Object(message) = message else {
        return Err(err(path, "must be an object"));
    };
    let id = message
        .get("id")
        .and_then(Value::as_str)
        .map_or_else(|| format!("m{index}"), str::to_owned);
    let role = message.get("role").cloned().unwrap_or(Value::Null);
    let mut parts: Vec<Value> = match message.get("parts") {
        Some(Value::Array(parts)) if !parts.is_empty() => parts
            .iter()
            .filter_map(|part| ai_sdk4_part(part).transpose())
            .collect::<Result<_, _>>()
            .map_err(|e: RequestError| err(format!("{path}.parts"), e.message))?,
        _ => {
            let mut parts = Vec::new();
            if let Some(Value::String(text)) = message.get("content")
                && !text.is_empty()
            {
                parts.push(json!({"type": "text", "text": text}));
            }
            if let Some(Value::Array(invocations)) = message.get("toolInvocations") {
                for invocation in invocations {
                    parts.push(ai_sdk4_invocation(invocation));
                }
            }
            parts
        }
    };
    if let Some(Value::Array(attachments)) = message.get("experimental_attachments") {
        for attachment in attachments {
            parts.push(json!({
                "type": "file",
                "mediaType": attachment.get("contentType").cloned().unwrap_or(Value::Null),
                "filename": attachment.get("name").cloned().unwrap_or(Value::Null),
                "url": attachment.get("url").cloned().unwrap_or(Value::Null),
            }));
        }
    }
    Ok(json!({"id": id, "role": role, "parts": parts}))
}

/// A v4 part as a UI part (`None`: nothing the model reads).
fn ai_sdk4_part(part: &Value) -> Result<Option<Value>, RequestError> {
    Ok(match part.get("type").and_then(Value::as_str) {
        Some("text" | "step-start") => Some(part.clone()),
        Some("tool-invocation") => Some(ai_sdk4_invocation(
            part.get("toolInvocation").unwrap_or(&Value::Null),
        )),
        Some("file") => Some(json!({
            "type": "file",
            "mediaType": part.get("mimeType").cloned().unwrap_or(Value::Null),
            "url": match (part.get("mimeType"), part.get("data")) {
                (Some(Value::String(mime)), Some(Value::String(data))) => json!(format!("data:{mime};base64,{data}")),
                _ => Value::Null,
            },
        })),
        Some("reasoning" | "redacted-reasoning" | "source") => None,
        _ => return Err(err("", "a part of a type AI SDK 4 does not send")),
    })
}

fn ai_sdk4_invocation(invocation: &Value) -> Value {
    let state = match invocation.get("state").and_then(Value::as_str) {
        Some("result") => "output-available",
        Some("partial-call") => "input-streaming",
        _ => "input-available",
    };
    let mut part = json!({
        "type": "dynamic-tool",
        "toolName": invocation.get("toolName").cloned().unwrap_or(Value::Null),
        "toolCallId": invocation.get("toolCallId").cloned().unwrap_or(Value::Null),
        "state": state,
        "input": invocation.get("args").cloned().unwrap_or(Value::Null),
    });
    if state == "output-available" {
        part["output"] = invocation.get("result").cloned().unwrap_or(Value::Null);
    }
    part
}

fn assistant_ui(mut body: Map<String, Value>) -> Result<Map<String, Value>, RequestError> {
    let mut out: Vec<Value> = Vec::new();
    for (index, message) in messages(&body)?.iter().enumerate() {
        let path = format!("messages[{index}]");
        let content = match message.get("content") {
            Some(Value::Array(content)) => content.clone(),
            Some(Value::String(text)) => vec![json!({"type": "text", "text": text})],
            _ => return Err(err(format!("{path}.content"), "must be an array")),
        };
        match message.get("role").and_then(Value::as_str) {
            Some("user") => {
                let parts = content
                    .iter()
                    .map(|part| match part.get("type").and_then(Value::as_str) {
                        Some("file") => json!({
                            "type": "file",
                            "mediaType": part.get("mediaType").cloned().unwrap_or(Value::Null),
                            "filename": part.get("filename").cloned().unwrap_or(Value::Null),
                            "url": file_url(part),
                        }),
                        _ => part.clone(),
                    })
                    .collect::<Vec<_>>();
                out.push(json!({"id": format!("m{index}"), "role": "user", "parts": parts}));
            }
            Some("assistant") => {
                let parts: Vec<Value> = content
                    .iter()
                    .filter_map(|part| match part.get("type").and_then(Value::as_str) {
                        Some("tool-call") => Some(json!({
                            "type": "dynamic-tool",
                            "toolName": part.get("toolName").cloned().unwrap_or(Value::Null),
                            "toolCallId": part.get("toolCallId").cloned().unwrap_or(Value::Null),
                            "state": "input-available",
                            "input": part.get("input").or_else(|| part.get("args")).cloned().unwrap_or(Value::Null),
                        })),
                        Some("text") => Some(part.clone()),
                        _ => None,
                    })
                    .collect();
                out.push(json!({"id": format!("m{index}"), "role": "assistant", "parts": parts}));
            }
            Some("tool") => attach_results(&mut out, &content, &path)?,
            Some("system") => {
                return Err(err(
                    format!("{path}.role"),
                    "system messages are set by the server, not the client",
                ));
            }
            _ => {
                return Err(err(
                    format!("{path}.role"),
                    "must be \"user\", \"assistant\" or \"tool\"",
                ));
            }
        }
    }
    // The last assistant message may be the one the response will fill (empty).
    if out.last().is_some_and(|m| {
        m["role"] == "assistant" && m["parts"].as_array().is_some_and(Vec::is_empty)
    }) {
        out.pop();
    }
    let chat = body
        .get("threadId")
        .and_then(Value::as_str)
        .unwrap_or(ASSISTANT_UI_CHAT)
        .to_owned();
    body.insert("id".into(), Value::String(chat));
    body.insert("messages".into(), Value::Array(out));
    Ok(body)
}

/// A language-model file part's data as a data URL (`data` is base64, or
/// already a URL).
fn file_url(part: &Value) -> Value {
    match (part.get("data"), part.get("mediaType")) {
        (Some(Value::String(data)), _) if data.starts_with("data:") || data.contains("://") => {
            json!(data)
        }
        (Some(Value::String(data)), Some(Value::String(media))) => {
            json!(format!("data:{media};base64,{data}"))
        }
        _ => Value::Null,
    }
}

/// A `tool` message's results, set on the calls of the assistant message before.
fn attach_results(out: &mut [Value], content: &[Value], path: &str) -> Result<(), RequestError> {
    let Some(assistant) = out.last_mut().filter(|m| m["role"] == "assistant") else {
        return Err(err(
            path,
            "a tool message must follow the assistant message with its calls",
        ));
    };
    let Some(parts) = assistant["parts"].as_array_mut() else {
        return Err(err(path, "has no calls to answer"));
    };
    for result in content {
        let id = result.get("toolCallId").cloned().unwrap_or(Value::Null);
        let Some(call) = parts.iter_mut().find(|p| p["toolCallId"] == id) else {
            return Err(err(
                path,
                "answers a call the assistant message does not have",
            ));
        };
        let output = result.get("output").cloned().unwrap_or(Value::Null);
        let kind = output.get("type").and_then(Value::as_str).unwrap_or("json");
        let value = output.get("value").cloned().unwrap_or(Value::Null);
        if kind.starts_with("error") {
            call["state"] = json!("output-error");
            call["errorText"] = match value {
                Value::String(text) => json!(text),
                other => json!(other.to_string()),
            };
        } else {
            call["state"] = json!("output-available");
            call["output"] = value;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => unreachable!(),
        }
    }

    #[test]
    fn formats_are_told_apart() {
        let ui = map(json!({"id": "c", "messages": [{"id": "u", "role": "user", "parts": []}]}));
        assert_eq!(detect(&ui), BodyFormat::UiMessages);
        let v4 = map(json!({"id": "c", "messages": [{"role": "user", "content": "hi"}]}));
        assert_eq!(detect(&v4), BodyFormat::AiSdk4);
        let aui = map(
            json!({"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]}),
        );
        assert_eq!(detect(&aui), BodyFormat::AssistantUi);
    }

    #[test]
    fn a_v4_tool_invocation_is_a_tool_part_not_a_tool_named_invocation() {
        let v4 = map(json!({"id": "c", "messages": [
            {"role": "user", "content": "time?"},
            {"role": "assistant", "content": "", "parts": [
                {"type": "step-start"},
                {"type": "tool-invocation", "toolInvocation": {"state": "result", "step": 0,
                  "toolCallId": "t1", "toolName": "core__get_current_time", "args": {}, "result": {"now": "x"}}},
                {"type": "text", "text": "It is x."}
            ]},
            {"role": "user", "content": "thanks"}
        ]}));
        let ui = to_ui_messages(BodyFormat::AiSdk4, v4).unwrap();
        let parts = &ui["messages"][1]["parts"];
        assert_eq!(parts[1]["type"], "dynamic-tool");
        assert_eq!(parts[1]["toolName"], "core__get_current_time");
        assert_eq!(parts[1]["state"], "output-available");
        assert_eq!(ui["messages"][0]["id"], "m0");
    }

    #[test]
    fn assistant_ui_results_join_their_calls_and_the_thread_is_the_chat() {
        let body = map(json!({"threadId": "t-1", "tools": {}, "messages": [
            {"role": "user", "content": [{"type": "text", "text": "time?"}]},
            {"role": "assistant", "content": [{"type": "tool-call", "toolCallId": "t1", "toolName": "core__get_current_time", "input": {}}]},
            {"role": "tool", "content": [{"type": "tool-result", "toolCallId": "t1", "toolName": "core__get_current_time", "output": {"type": "json", "value": {"now": "x"}}}]},
            {"role": "user", "content": [{"type": "text", "text": "thanks"}]}
        ]}));
        let ui = to_ui_messages(BodyFormat::AssistantUi, body).unwrap();
        assert_eq!(ui["id"], "t-1");
        assert_eq!(ui["messages"][1]["parts"][0]["state"], "output-available");
        assert_eq!(ui["messages"][1]["parts"][0]["output"], json!({"now": "x"}));
    }
}
