//! With a run store the stored thread is the truth: a request's history is the
//! thread as the store holds it, continued by what the request adds. A client
//! may send only its last message (as the AI SDK's `prepareSendMessagesRequest`
//! lets it) or its whole history; what it sends never replaces a stored tool
//! call or result.
//!
//! The request and the thread are compared turn by turn (a turn: the user's
//! messages and the answer that follows them):
//!
//! - A new message sent by a client that is behind the thread (a UI-message
//!   body's plain send, naming no message to replace, whose earlier user
//!   messages the thread holds by their ids and whose new one it does not: a
//!   second tab that missed turns another added) is added after the whole
//!   thread; the turns it missed stay.
//! - Else, a new message (the request ends with a user message) continues the stored
//!   turns the request has before it: a request with fewer turns than the
//!   thread rewinds it (an edit, a regeneration; the rest of the thread is
//!   replaced when the run is recorded). A request holding only the new message
//!   and no `messageId` is appended to the whole thread. A regeneration holding
//!   only the user message continues the thread up to the last stored turn that
//!   has that message.
//! - A continuation (the request ends with the assistant's message: approval
//!   decisions, a client tool's output, a continue after a stop) continues the
//!   stored turn it names; a request holding only that message continues the
//!   thread's last turn.
//! - Turns the request has beyond the thread (the store lost a record, or the
//!   thread began before the store) are taken from the request.
//!
//! In the stored turns kept, a call without a result gets one: a client tool's
//! output the request carries (checked by the caller against the calls handed
//! out), the request's own "denied" or "not run" text, or "not run"; never a
//! result the client made up for a server tool. Calls waiting on the request's
//! decisions are left for the resumed run.

use std::collections::{HashMap, HashSet};

use ai_core::Message;

use crate::contract::{ChatRequest, NOT_RUN, Trigger};

/// A run's history built on the stored thread.
#[derive(Debug, Clone, PartialEq)]
pub struct Continued {
    /// The conversation for the model.
    pub history: Vec<Message>,
    /// How many of its first messages are the stored thread's, as stored.
    pub kept: usize,
}

/// The history of `chat` on a thread that holds `stored`, whose messages have
/// the UI ids `stored_ids` where known (see the module docs).
pub fn continue_thread(
    stored: &[Message],
    stored_ids: &[Option<String>],
    chat: &ChatRequest,
) -> Continued {
    let client = &chat.history;
    if let Some(from) = sent_from_behind(stored, stored_ids, chat) {
        let (mut history, kept) = with_results(stored, chat);
        history.extend_from_slice(&client[from..]);
        return Continued { history, kept };
    }
    if stored.is_empty() {
        return Continued {
            history: client.clone(),
            kept: 0,
        };
    }
    let stored_turns = turn_starts(stored);
    let client_turns = turn_starts(client);
    let turns = kept_turns(stored, &stored_turns, chat, client_turns.len());
    let used = end_of(&stored_turns, turns, stored.len());
    let (mut history, kept) = with_results(&stored[..used], chat);
    let added = kept_len(client, &client_turns, chat, turns);
    history.extend_from_slice(&client[added..]);
    Continued { history, kept }
}

/// Where the new turn of a send from a client that is behind the thread
/// starts in its history: a new message (a UI-message body's
/// `submit-message` naming no message to replace) whose earlier user
/// messages the thread holds by their ids, while it does not hold the new
/// one. Such a client (a second tab) missed the turns others added since;
/// its message is added after them, never in their place.
fn sent_from_behind(
    stored: &[Message],
    stored_ids: &[Option<String>],
    chat: &ChatRequest,
) -> Option<usize> {
    let plain_send = chat.format == crate::body_format::BodyFormat::UiMessages
        && chat.trigger == Trigger::SubmitMessage
        && chat.message_id.is_none()
        && chat.continuing.is_none();
    let (new, earlier) = chat.user_ids.split_last()?;
    let known = |id: &String| stored_ids.iter().flatten().any(|s| s == id);
    if !plain_send || earlier.is_empty() || known(new) || !earlier.iter().all(known) {
        return None;
    }
    let starts = turn_starts(&chat.history);
    let last = *starts.last()?;
    // A client with more turns than the thread (the store lost a record) is
    // not behind: its turns are taken as the module docs say.
    (starts.len() <= turn_starts(stored).len() + 1).then_some(last)
}

/// How many stored turns the request continues.
fn kept_turns(stored: &[Message], starts: &[usize], chat: &ChatRequest, client: usize) -> usize {
    let all = starts.len();
    if chat.continuing.is_some() {
        if !has_user(&chat.history) {
            return all;
        }
        return client.min(all);
    }
    if client > 1 {
        return (client - 1).min(all);
    }
    match chat.trigger {
        Trigger::RegenerateMessage => {
            let asked = chat
                .history
                .iter()
                .find(|m| matches!(m, Message::User { .. }));
            (0..all)
                .rev()
                .find(|&turn| stored.get(starts[turn]) == asked)
                .unwrap_or(all.saturating_sub(1))
        }
        _ if chat.message_id.is_some() => 0,
        _ => all,
    }
}

/// Where the request's own messages start: past the turns the stored ones
/// replace (none when the request holds only its last message).
fn kept_len(client: &[Message], starts: &[usize], chat: &ChatRequest, turns: usize) -> usize {
    let only_last = if chat.continuing.is_some() {
        !has_user(client)
    } else {
        starts.len() == 1
    };
    if only_last && !replaces_first_turn(chat) {
        return if chat.continuing.is_some() {
            client.len()
        } else {
            0
        };
    }
    end_of(starts, turns, client.len())
}

/// A one-turn request that stands for the first turn itself (an edit of the
/// first message), not for a message added to the thread.
fn replaces_first_turn(chat: &ChatRequest) -> bool {
    chat.continuing.is_none() && chat.trigger == Trigger::SubmitMessage && chat.message_id.is_some()
}

fn has_user(messages: &[Message]) -> bool {
    messages.iter().any(|m| matches!(m, Message::User { .. }))
}

/// Where each turn starts: at the first message, and at each user message that
/// follows another kind.
fn turn_starts(messages: &[Message]) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut after_user = false;
    for (index, message) in messages.iter().enumerate() {
        let user = matches!(message, Message::User { .. });
        if index == 0 || (user && !after_user) {
            starts.push(index);
        }
        after_user = user;
    }
    starts
}

/// The end of the first `turns` turns.
fn end_of(starts: &[usize], turns: usize, len: usize) -> usize {
    starts.get(turns).copied().unwrap_or(len)
}

/// `stored` with a result for every call that has none and is not waiting on
/// one of the request's decisions (see the module docs), each after the
/// results its assistant message already has; and how many of its first
/// messages are `stored`'s, unchanged.
fn with_results(stored: &[Message], chat: &ChatRequest) -> (Vec<Message>, usize) {
    let waiting: HashSet<&str> = chat
        .decisions
        .iter()
        .map(|d| d.tool_call_id.as_str())
        .collect();
    let offered = client_results(chat);
    let mut history = Vec::with_capacity(stored.len());
    let mut unchanged = None;
    let mut open: Vec<(&str, &str)> = Vec::new();
    for (index, message) in stored.iter().enumerate() {
        match message {
            Message::Tool { tool_call_id, .. } => open.retain(|(id, _)| id != tool_call_id),
            _ => {
                if settle(&mut history, &mut open, &offered, &waiting) {
                    unchanged.get_or_insert(index);
                }
                if let Message::Assistant { tool_calls, .. } = message {
                    open = tool_calls
                        .iter()
                        .map(|c| (c.id.as_str(), c.name.as_str()))
                        .collect();
                }
            }
        }
        history.push(message.clone());
    }
    settle(&mut history, &mut open, &offered, &waiting);
    (history, unchanged.unwrap_or(stored.len()))
}

/// Results for the calls still `open`; `true` when it added any.
fn settle(
    history: &mut Vec<Message>,
    open: &mut Vec<(&str, &str)>,
    offered: &HashMap<&str, &Message>,
    waiting: &HashSet<&str>,
) -> bool {
    let before = history.len();
    for (id, tool) in open.drain(..) {
        if waiting.contains(id) {
            continue;
        }
        let result = match offered.get(id) {
            Some(message) if tool.starts_with("client__") || is_server_result(message) => {
                (*message).clone()
            }
            _ => Message::tool_error(id, NOT_RUN),
        };
        history.push(result);
    }
    history.len() > before
}

/// The request's tool results, by call id.
fn client_results(chat: &ChatRequest) -> HashMap<&str, &Message> {
    chat.history
        .iter()
        .filter_map(|m| match m {
            Message::Tool { tool_call_id, .. } => Some((tool_call_id.as_str(), m)),
            _ => None,
        })
        .collect()
}

/// A result holding one of the server's own texts for a call that did not run.
fn is_server_result(message: &Message) -> bool {
    matches!(message, Message::Tool { content, .. } if crate::contract::is_server_text(content))
}

/// The calls of `messages` that have no result yet: call id to (tool, canonical
/// arguments).
pub fn unanswered(messages: &[Message]) -> HashMap<&str, (&str, &str)> {
    let mut open = HashMap::new();
    for message in messages {
        match message {
            Message::Assistant { tool_calls, .. } => {
                for call in tool_calls {
                    open.insert(
                        call.id.as_str(),
                        (call.name.as_str(), call.arguments.as_str()),
                    );
                }
            }
            Message::Tool { tool_call_id, .. } => {
                open.remove(tool_call_id.as_str());
            }
            _ => {}
        }
    }
    open
}

/// Holds the files of a model request (`history`: the stored thread and what
/// the request adds) to `budget` bytes together, counted exactly (decoded
/// bytes): the newest are kept, and each older file past the budget is
/// replaced by a short text saying it was left out (its name and size), so
/// the model knows it existed. The stored thread keeps every file; this shapes
/// only what one request sends. Returns how many files were left out.
pub fn bound_files(history: &mut [Message], budget: usize) -> usize {
    let mut used = 0usize;
    let mut omitted = 0;
    for message in history.iter_mut().rev() {
        let Message::User { attachments, .. } = message else {
            continue;
        };
        for attachment in attachments.iter_mut().rev() {
            let size = attachment.file_size();
            if used.saturating_add(size) <= budget {
                used += size;
                continue;
            }
            let name = attachment.name().unwrap_or("file").to_owned();
            *attachment = ai_core::message::Attachment::Text {
                text: format!(
                    "[file omitted: {name}, {size} bytes: this request's files are over {budget} bytes together; ask for it again if it is needed]"
                ),
                media_type: "text/plain".into(),
                name,
            };
            omitted += 1;
        }
    }
    omitted
}

#[cfg(test)]
mod tests {
    use ai_core::message::MessageToolCall;

    use super::*;
    use crate::contract::{ApprovalResponse, BodyFormat, DENIED};

    fn with_file(name: &str, bytes: usize) -> Message {
        Message::User {
            content: format!("see {name}"),
            attachments: vec![ai_core::message::Attachment::Text {
                name: name.into(),
                media_type: "text/plain".into(),
                text: "a".repeat(bytes),
            }],
        }
    }

    /// Finding of the local-attacker review: every model request carried every
    /// stored file of the chat (48 MiB after twelve turns of 4 MiB). The
    /// newest files that fit the budget go; the older are left out, named.
    #[test]
    fn a_requests_files_are_bounded_the_oldest_left_out_by_name() {
        let mut history: Vec<Message> = (0..12)
            .map(|i| with_file(&format!("f{i}.txt"), 4 << 20))
            .collect();
        let omitted = bound_files(&mut history, 10 << 20);
        assert_eq!(omitted, 10);
        let sizes: Vec<usize> = history
            .iter()
            .map(|m| match m {
                Message::User { attachments, .. } => attachments[0].file_size(),
                _ => 0,
            })
            .collect();
        assert!(sizes.iter().sum::<usize>() > 8 << 20);
        assert!(sizes.iter().sum::<usize>() <= 10 << 20, "{sizes:?}");
        assert_eq!(sizes[11], 4 << 20, "the newest is whole");
        let Message::User { attachments, .. } = &history[0] else {
            unreachable!()
        };
        let ai_core::message::Attachment::Text { name, text, .. } = &attachments[0] else {
            panic!("{attachments:?}")
        };
        assert_eq!(name, "f0.txt");
        assert!(
            text.starts_with("[file omitted: f0.txt, 4194304 bytes"),
            "{text}"
        );
    }

    fn request(history: Vec<Message>) -> ChatRequest {
        ChatRequest {
            chat_id: "c".into(),
            trigger: Trigger::SubmitMessage,
            history,
            continuing: None,
            decisions: Vec::new(),
            client_outputs: Vec::new(),
            continued_calls: Vec::new(),
            format: BodyFormat::UiMessages,
            message_id: None,
            graph: None,
            user_message_id: None,
            user_ids: Vec::new(),
        }
    }

    fn calls(text: Option<&str>, calls: &[(&str, &str)]) -> Message {
        Message::Assistant {
            content: text.map(str::to_owned),
            reasoning: None,
            blocks: Vec::new(),
            tool_calls: calls
                .iter()
                .map(|(id, name)| MessageToolCall {
                    id: (*id).into(),
                    name: (*name).into(),
                    arguments: r#"{"path":"secret.txt"}"#.into(),
                    raw: None,
                })
                .collect(),
        }
    }

    fn answer(text: &str) -> Message {
        calls(Some(text), &[])
    }

    /// Two stored turns: a tool call with its real result, then an answer.
    fn stored() -> Vec<Message> {
        vec![
            Message::user("read it"),
            calls(None, &[("c1", "builtin__read_file")]),
            Message::tool("c1", "the real contents"),
            answer("It says: the real contents."),
            Message::user("thanks"),
            answer("You're welcome."),
        ]
    }

    /// A second tab that missed a turn another tab added sends its message
    /// with the history it has: its message is added after that turn, which
    /// stays. An edit (naming the message it replaces) still rewinds.
    #[test]
    fn a_send_from_a_tab_behind_the_thread_adds_its_turn_after_the_others() {
        let thread = stored();
        let ids: Vec<Option<String>> = ["u1", "a1", "t1", "a1b", "u2", "a2"]
            .iter()
            .map(|id| Some((*id).to_owned()))
            .collect();
        // The tab holds the first turn only, then its new message.
        let mut chat = request(vec![
            thread[0].clone(),
            thread[1].clone(),
            thread[2].clone(),
            thread[3].clone(),
            Message::user("from the other tab"),
        ]);
        chat.user_ids = vec!["u1".into(), "u9".into()];
        let continued = continue_thread(&thread, &ids, &chat);
        let mut expected = thread.clone();
        expected.push(Message::user("from the other tab"));
        assert_eq!(continued.history, expected);
        assert_eq!(continued.kept, 6);
        // The same body naming the message it replaces is an edit: it rewinds.
        chat.message_id = Some("u2".into());
        let continued = continue_thread(&thread, &ids, &chat);
        assert_eq!(continued.history.len(), 5);
        assert_eq!(continued.kept, 4);
        // A body whose new message the thread holds already is a repeat, not
        // a tab behind (the count-based rules apply).
        chat.message_id = None;
        chat.user_ids = vec!["u1".into(), "u2".into()];
        assert_eq!(continue_thread(&thread, &ids, &chat).kept, 4);
    }

    #[test]
    fn the_last_message_alone_is_appended_to_the_thread() {
        let chat = request(vec![Message::user("again?")]);
        let continued = continue_thread(&stored(), &[], &chat);
        let mut expected = stored();
        expected.push(Message::user("again?"));
        assert_eq!(continued.history, expected);
        assert_eq!(continued.kept, 6);
    }

    #[test]
    fn a_full_history_never_overrides_a_stored_call_or_result() {
        let mut forged = stored();
        forged[2] = Message::tool("c1", "{}");
        forged[3] = answer("edited by the client");
        forged.push(Message::user("again?"));
        let continued = continue_thread(&stored(), &[], &request(forged));
        assert_eq!(
            continued.history[2],
            Message::tool("c1", "the real contents")
        );
        assert_eq!(continued.history[3], answer("It says: the real contents."));
        assert_eq!(continued.history.len(), 7);
        assert_eq!(continued.kept, 6);
    }

    #[test]
    fn fewer_turns_than_the_thread_rewind_it() {
        // A regeneration of the second answer: the request ends with its question.
        let mut chat = request(stored()[..5].to_vec());
        chat.trigger = Trigger::RegenerateMessage;
        let continued = continue_thread(&stored(), &[], &chat);
        assert_eq!(continued.history, stored()[..5].to_vec());
        assert_eq!(continued.kept, 4);
        // An edit of the first message, holding only it.
        let mut chat = request(vec![Message::user("read the other one")]);
        chat.message_id = Some("u1".into());
        let continued = continue_thread(&stored(), &[], &chat);
        assert_eq!(continued.history, vec![Message::user("read the other one")]);
        assert_eq!(continued.kept, 0);
    }

    #[test]
    fn a_regeneration_of_the_last_message_alone_finds_its_turn() {
        let mut chat = request(vec![Message::user("thanks")]);
        chat.trigger = Trigger::RegenerateMessage;
        let continued = continue_thread(&stored(), &[], &chat);
        assert_eq!(continued.history, stored()[..5].to_vec());
        assert_eq!(continued.kept, 4);
    }

    #[test]
    fn turns_the_store_lacks_come_from_the_request() {
        let mut chat = stored();
        chat.push(Message::user("a third"));
        let continued = continue_thread(&stored()[..4], &[], &request(chat.clone()));
        assert_eq!(continued.history, chat);
        assert_eq!(continued.kept, 4);
    }

    #[test]
    fn a_continuation_keeps_the_stored_turn_and_adds_only_client_outputs() {
        let thread = vec![
            Message::user("where am I?"),
            calls(
                None,
                &[
                    ("k1", "client__location"),
                    ("k2", "builtin__exec_shell"),
                    ("k3", "builtin__exec_shell"),
                ],
            ),
        ];
        // The client answers its own tool, forges a result for a server tool,
        // and decides about the third call.
        let mut chat = request(vec![
            calls(
                None,
                &[
                    ("k1", "client__location"),
                    ("k2", "builtin__exec_shell"),
                    ("k3", "builtin__exec_shell"),
                ],
            ),
            Message::tool("k1", r#"{"city":"Oslo"}"#),
            Message::tool("k2", "forged output"),
        ]);
        chat.continuing = Some(("a1".into(), vec!["k1".into(), "k2".into(), "k3".into()]));
        chat.decisions.push(ApprovalResponse {
            tool_call_id: "k3".into(),
            tool_name: "builtin__exec_shell".into(),
            args: serde_json::json!({}),
            args_hash: String::new(),
            approval_id: String::new(),
            approved: true,
            reason: None,
        });
        let continued = continue_thread(&thread, &[], &chat);
        assert_eq!(
            continued.history[2..],
            [
                Message::tool("k1", r#"{"city":"Oslo"}"#),
                Message::tool_error("k2", NOT_RUN),
            ]
        );
        assert_eq!(continued.kept, 2);
    }

    #[test]
    fn calls_left_without_a_result_get_the_requests_own_texts_or_not_run() {
        let thread = vec![
            Message::user("delete it"),
            calls(None, &[("d1", "builtin__exec_shell")]),
            Message::user("never mind"),
        ];
        let mut chat = request(vec![
            Message::user("delete it"),
            calls(None, &[("d1", "builtin__exec_shell")]),
            Message::tool_error("d1", DENIED),
            Message::user("never mind"),
            answer("ok"),
            Message::user("bye"),
        ]);
        chat.trigger = Trigger::SubmitMessage;
        let continued = continue_thread(&thread, &[], &chat);
        // The stored turns win (the client's answer "ok" is not the thread's);
        // the stored part is rewritten from the result it gained.
        assert_eq!(continued.history[2], Message::tool_error("d1", DENIED));
        assert_eq!(
            continued.history[3..],
            [Message::user("never mind"), Message::user("bye")]
        );
        assert_eq!(continued.kept, 2);
        assert!(unanswered(&continued.history).is_empty());
    }
}
