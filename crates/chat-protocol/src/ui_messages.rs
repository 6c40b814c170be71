//! A stored thread as the AI SDK's UI messages (`GET /api/chats/{id}`), for a
//! client to show and continue (`useChat({ messages })`).
//!
//! The thread's messages are stored as the model saw them, unredacted; a UI
//! never sees them so. The text and files of user messages and the text of
//! assistant messages are shown as they are (the user's own words and files,
//! and the answers the live stream showed); a tool
//! call's input and output are the redacted views its run's event log holds,
//! as the live stream showed them. A call the log has no view of shows `{}`.
//! A call waiting for an approval is shown as the approval request, with an
//! approval id the server issues anew, and a denied one as `output-denied`; a
//! client tool's output is the client's own.

use std::collections::HashMap;

use ai_core::tool::ToolErrorCode;
use ai_core::{AiEvent, Message};
use serde_json::{Map, Value, json};

use crate::parts::{CallEvent, CallOutcome};

/// One message of a stored thread, as the model saw it: its position, its UI
/// id and the run that wrote it (the run store's row, without the store).
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadMessage {
    /// Its position (from 0).
    pub seq: u64,
    /// Its UI id, when it has one.
    pub id: Option<String>,
    /// The run that wrote it, if any.
    pub run_id: Option<String>,
    /// The message.
    pub message: Message,
}

/// What the event log shows of one call.
#[derive(Debug, Clone, Default)]
pub struct CallView {
    input: Option<Value>,
    output: Option<Value>,
    error: Option<String>,
    /// `sha256:` of the arguments, when the call asked for an approval.
    approval_hash: Option<String>,
    /// The user denied the call.
    denied: bool,
}

/// The views of the calls in `events`, by call id.
pub fn call_views<'a>(events: impl IntoIterator<Item = &'a AiEvent>) -> HashMap<String, CallView> {
    let mut views: HashMap<String, CallView> = HashMap::new();
    for event in events {
        let Some(call) = CallEvent::of(&event.kind) else {
            continue;
        };
        match call {
            CallEvent::Start {
                tool_call_id, args, ..
            }
            | CallEvent::Client {
                tool_call_id, args, ..
            } => {
                views.entry(tool_call_id.to_owned()).or_default().input = Some(args.clone());
            }
            CallEvent::ApprovalRequested {
                tool_call_id,
                args,
                args_hash,
                ..
            } => {
                let view = views.entry(tool_call_id.to_owned()).or_default();
                view.input = Some(args.clone());
                view.approval_hash = Some(args_hash.to_owned());
            }
            CallEvent::Result {
                tool_call_id,
                outcome,
                ..
            } => {
                let view = views.entry(tool_call_id.to_owned()).or_default();
                match outcome {
                    CallOutcome::Ok(result) => {
                        view.denied = false;
                        view.output = Some(result.cloned().unwrap_or_else(empty));
                    }
                    CallOutcome::Failed { code, message } => {
                        view.denied = code == Some(ToolErrorCode::ApprovalDenied);
                        view.error = Some(message.map_or_else(
                            || code.map_or_else(|| "failed".to_owned(), |c| format!("{c:?}")),
                            str::to_owned,
                        ));
                    }
                }
            }
        }
    }
    views
}

fn empty() -> Value {
    Value::Object(Map::new())
}

/// Issues an approval id for (call id, tool, arguments hash).
pub type IssueApproval<'a> = crate::stream::ApprovalIssuer<'a>;

/// `messages` (a thread, as stored) as UI messages, with `views` of its calls:
/// each known by its stored id (a user message by its client's id, an answer
/// by the id its stream gave it; `u-<seq>` and `a-<seq>` for messages stored
/// without one), an answer with the `metadata` of the last run that wrote it
/// (as its live stream's `message-metadata` left it).
pub fn ui_messages(
    messages: &[ThreadMessage],
    views: &HashMap<String, CallView>,
    approval: IssueApproval<'_>,
    metadata: &HashMap<String, Value>,
) -> Vec<Value> {
    let plain: Vec<Message> = messages.iter().map(|m| m.message.clone()).collect();
    let results = results_of(&plain);
    let mut shown: Vec<Value> = Vec::new();
    let mut assistant: Option<Value> = None;
    for stored in messages {
        let seq = stored.seq;
        match &stored.message {
            Message::User {
                content,
                attachments,
            } => {
                shown.extend(assistant.take());
                let mut parts: Vec<Value> = attachments
                    .iter()
                    .map(|file| {
                        let mut part = json!({"type": "file", "mediaType": file.media_type(),
                                              "url": file.to_data_url()});
                        if let Some(name) = file.name() {
                            part["filename"] = name.into();
                        }
                        part
                    })
                    .collect();
                if !content.is_empty() || parts.is_empty() {
                    parts.insert(0, json!({"type": "text", "text": content}));
                }
                let id = stored.id.clone().unwrap_or_else(|| format!("u-{seq}"));
                shown.push(json!({"id": id, "role": "user", "parts": parts}));
            }
            Message::Assistant {
                content,
                reasoning,
                tool_calls,
                ..
            } => {
                let current = assistant.get_or_insert_with(|| {
                    let id = stored.id.clone().unwrap_or_else(|| format!("a-{seq}"));
                    json!({"id": id, "role": "assistant", "parts": []})
                });
                if let Some(shown_metadata) = stored.run_id.as_ref().and_then(|r| metadata.get(r)) {
                    current["metadata"] = shown_metadata.clone();
                }
                let Some(parts) = current["parts"].as_array_mut() else {
                    continue;
                };
                parts.push(json!({"type": "step-start"}));
                if let Some(text) = reasoning {
                    parts.push(json!({"type": "reasoning", "text": text, "state": "done"}));
                }
                if let Some(text) = content {
                    parts.push(json!({"type": "text", "text": text, "state": "done"}));
                }
                for call in tool_calls {
                    let view = views.get(&call.id).cloned().unwrap_or_default();
                    parts.push(tool_part(
                        &call.id,
                        &call.name,
                        view,
                        results.get(call.id.as_str()),
                        approval,
                    ));
                }
            }
            _ => {}
        }
    }
    shown.extend(assistant);
    shown
}

/// The `message-metadata` the live stream of a run with `events` ended with
/// (`{usage, model}`), when the run reported usage.
pub fn run_metadata(events: &[AiEvent]) -> Option<Value> {
    let mut usage = crate::stream::UsageTotals::default();
    for event in events.iter().filter(|e| crate::stream::shown(e)) {
        usage.add(&event.kind);
    }
    usage.metadata()
}

/// Adds the answer of a run still running, as its `events` so far show it: to
/// the last message when the run continues it (the thread ends with an answer:
/// a continuation after approvals), else as a new message known by
/// `answer_id`, the id its stream gives it.
pub fn with_running_answer(
    shown: &mut Vec<Value>,
    answer_id: &str,
    events: &[AiEvent],
    approval: IssueApproval<'_>,
) {
    let continues = shown.last().is_some_and(|m| m["role"] == "assistant");
    let id = match shown.last() {
        Some(last) if continues => last["id"].as_str().unwrap_or_default().to_owned(),
        _ => answer_id.to_owned(),
    };
    let mut encoder = crate::ui_stream::UiStreamEncoder::new(id.clone());
    let chunks: Vec<Value> = events
        .iter()
        .flat_map(|event| encoder.event(event, approval))
        .collect();
    if !continues {
        shown.push(json!({"id": id, "role": "assistant", "parts": []}));
    }
    if let Some(message) = shown.last_mut() {
        crate::ui_stream::apply_chunks(message, &chunks);
    }
}

/// The thread's tool results, by call id: (content, is_error).
fn results_of(messages: &[Message]) -> HashMap<&str, (&str, bool)> {
    messages
        .iter()
        .filter_map(Message::tool_result)
        .map(|(tool_call_id, content, is_error)| (tool_call_id, (content, is_error)))
        .collect()
}

/// One call as a tool part.
fn tool_part(
    id: &str,
    tool: &str,
    view: CallView,
    result: Option<&(&str, bool)>,
    approval: IssueApproval<'_>,
) -> Value {
    let mut part = json!({"type": format!("tool-{tool}"), "toolCallId": id,
                          "input": view.input.clone().unwrap_or_else(empty)});
    let client_tool = tool.starts_with("client__");
    match (result, view) {
        (Some((content, false)), view) => {
            part["state"] = "output-available".into();
            part["output"] = match view.output {
                Some(output) => output,
                // The client's own output, as it sent it.
                None if client_tool => {
                    serde_json::from_str(content).unwrap_or_else(|_| json!(content))
                }
                None => empty(),
            };
        }
        (Some((content, true)), view) if view.denied || *content == crate::contract::DENIED => {
            // As the AI SDK shows a denied approval; sent back, it reads as a
            // denial again.
            part["state"] = "output-denied".into();
            part["approval"] = json!({"id": format!("denied-{id}"), "approved": false});
        }
        (Some((content, true)), view) => {
            part["state"] = "output-error".into();
            part["errorText"] = view
                .error
                .unwrap_or_else(|| {
                    if client_tool || crate::contract::is_server_text(content) {
                        (*content).to_owned()
                    } else {
                        "The call failed.".to_owned()
                    }
                })
                .into();
        }
        (
            None,
            CallView {
                approval_hash: Some(hash),
                ..
            },
        ) => {
            part["state"] = "approval-requested".into();
            part["approval"] = json!({"id": approval.id(id, tool, &hash)});
        }
        (None, _) if client_tool => part["state"] = "input-available".into(),
        (None, _) => {
            part["state"] = "output-error".into();
            part["errorText"] = crate::contract::NOT_RUN.into();
        }
    }
    part
}

#[cfg(test)]
mod tests {
    use ai_core::RunContext;
    use ai_core::message::MessageToolCall;

    use super::*;
    use crate::stream::ApprovalIssuer;
    use ai_core::approval::ApprovalBinding;
    use ai_core::event::AiEventKind;

    /// Approval ids that are all empty (for tests that do not look at them).
    const NO_IDS: ApprovalIssuer<'static> = ApprovalIssuer {
        scope: "chat",
        sign: &|_| String::new(),
    };

    fn event(kind: AiEventKind) -> AiEvent {
        AiEvent::new(&RunContext::new("r1", "t1"), kind)
    }

    /// `thread` as stored without UI ids or runs.
    fn stored(thread: Vec<Message>) -> Vec<ThreadMessage> {
        (0..)
            .zip(thread)
            .map(|(seq, message)| ThreadMessage {
                seq,
                id: None,
                run_id: None,
                message,
            })
            .collect()
    }

    fn call(id: &str, name: &str) -> MessageToolCall {
        MessageToolCall {
            id: id.into(),
            name: name.into(),
            arguments: r#"{"path":"secret.txt","token":"hunter2"}"#.into(),
            raw: None,
        }
    }

    #[test]
    fn calls_show_the_logs_redacted_views_never_the_stored_values() {
        let thread = vec![
            Message::user("read it"),
            Message::Assistant {
                content: None,
                reasoning: None,
                blocks: Vec::new(),
                tool_calls: vec![
                    call("c1", "core__read_file"),
                    call("c2", "core__exec_shell"),
                    call("c4", "core__exec_shell"),
                ],
            },
            Message::tool("c1", "the secret contents"),
            Message::tool_error("c4", crate::contract::DENIED),
            Message::tool_error("c2", "exit 1: hunter2 rejected"),
            Message::Assistant {
                content: Some("Done.".into()),
                reasoning: None,
                blocks: Vec::new(),
                tool_calls: vec![call("c3", "core__exec_shell")],
            },
        ];
        let events = [
            event(AiEventKind::ToolCallStart {
                tool_call_id: "c1".into(),
                tool_name: "core__read_file".into(),
                args: json!({"path": "secret.txt"}),
            }),
            event(AiEventKind::ToolApprovalRequested {
                tool_call_id: "c3".into(),
                tool_name: "core__exec_shell".into(),
                args: json!({"command": "ls"}),
                args_hash: "sha256:ab".into(),
            }),
        ];
        let views = call_views(&events);
        let sign =
            |b: &ApprovalBinding| format!("{}|{}|{}", b.tool_call_id, b.tool_id, b.args_hash);
        let issue = ApprovalIssuer {
            scope: "chat",
            sign: &sign,
        };
        let shown = ui_messages(&stored(thread), &views, issue, &HashMap::new());
        let text = serde_json::to_string(&shown).unwrap();
        assert!(
            !text.contains("hunter2") && !text.contains("secret contents"),
            "{text}"
        );
        assert_eq!(shown.len(), 2);
        assert_eq!(shown[0]["id"], "u-0");
        let parts = shown[1]["parts"].as_array().unwrap();
        assert_eq!(shown[1]["id"], "a-1");
        assert_eq!(parts[1]["input"], json!({"path": "secret.txt"}));
        assert_eq!(parts[1]["state"], "output-available");
        assert_eq!(parts[1]["output"], json!({}));
        assert_eq!(parts[2]["state"], "output-error");
        assert_eq!(parts[2]["errorText"], "The call failed.");
        assert_eq!(parts[2]["input"], json!({}));
        assert_eq!(parts[3]["state"], "output-denied");
        assert_eq!(parts[3]["approval"]["approved"], false);
        assert_eq!(parts[4], json!({"type": "step-start"}));
        assert_eq!(parts[5]["text"], "Done.");
        assert_eq!(parts[6]["state"], "approval-requested");
        assert_eq!(parts[6]["approval"]["id"], "c3|core__exec_shell|sha256:ab");
        assert_eq!(parts[6]["input"], json!({"command": "ls"}));
    }

    #[test]
    fn a_users_files_come_back_as_the_file_parts_it_sent() {
        let png = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUg==";
        let image = ai_core::message::Attachment::from_data_url("dot.png", png, 1024).unwrap();
        let notes = ai_core::message::Attachment::from_data_url(
            "notes.txt",
            "data:text/plain;base64,aGVsbG8=",
            1024,
        )
        .unwrap();
        let thread = vec![Message::User {
            content: "look".into(),
            attachments: vec![image.clone(), notes.clone()],
        }];
        let shown = ui_messages(&stored(thread), &HashMap::new(), NO_IDS, &HashMap::new());
        let parts = shown[0]["parts"].as_array().unwrap();
        assert_eq!(parts[0], json!({"type": "text", "text": "look"}));
        assert_eq!(
            parts[1],
            json!({"type": "file", "mediaType": "image/png", "filename": "dot.png", "url": png})
        );
        // What the page would send back is the same attachment again.
        for (part, file) in parts[1..].iter().zip([image, notes]) {
            let url = part["url"].as_str().unwrap();
            let name = part["filename"].as_str().unwrap();
            assert_eq!(
                ai_core::message::Attachment::from_data_url(name, url, 1024).unwrap(),
                file
            );
        }
    }

    #[test]
    fn messages_keep_their_stored_ids_and_an_answer_its_last_runs_metadata() {
        let mut thread = stored(vec![
            Message::user("one"),
            Message::assistant("first"),
            Message::user("two"),
            Message::assistant("second, part one"),
            Message::assistant("second, part two"),
        ]);
        thread[0].id = Some("client-1".into());
        thread[1].id = Some("msg-r1".into());
        thread[1].run_id = Some("r1".into());
        thread[3].id = Some("msg-r2".into());
        thread[3].run_id = Some("r2".into());
        thread[4].run_id = Some("r3".into());
        let metadata = HashMap::from([
            ("r1".to_owned(), json!({"model": "m1"})),
            ("r3".to_owned(), json!({"model": "m3"})),
        ]);
        let shown = ui_messages(&thread, &HashMap::new(), NO_IDS, &metadata);
        let ids: Vec<&str> = shown.iter().map(|m| m["id"].as_str().unwrap()).collect();
        assert_eq!(ids, ["client-1", "msg-r1", "u-2", "msg-r2"]);
        assert_eq!(shown[1]["metadata"], json!({"model": "m1"}));
        // An answer two runs wrote (a continuation) shows the last one's.
        assert_eq!(shown[3]["metadata"], json!({"model": "m3"}));
        assert_eq!(shown[3]["parts"].as_array().unwrap().len(), 4);
    }
}
