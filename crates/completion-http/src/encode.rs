//! The parts of a request body that the JSON wires write alike: the system
//! prompt, the parts of a user message, a call's arguments as an object, the
//! extra body keys, and the error of an encoder that has no rules of its own.

use ai_core::Message;
use ai_core::completion::{CompletionRequest, CompletionRequestError};
use ai_core::message::{AssistantBlock, Attachment, MessageToolCall};
use serde_json::{Map, Value, json};

/// Something a wire has no way to send, named as in "cannot send {0}".
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("cannot send {0}")]
pub struct Unsupported(pub &'static str);

/// Why a request cannot be encoded, for a wire whose only rules are the ones
/// every wire shares and what it cannot send.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WireEncodeError {
    /// The request breaks a rule every wire shares ([`ai_core::completion::CompletionRequest::validate`]).
    #[error(transparent)]
    Request(#[from] CompletionRequestError),
    /// Something this wire cannot send.
    #[error("the {wire} wire cannot send {what}")]
    Unsupported {
        /// The wire, as its API is called (`Messages API`).
        wire: &'static str,
        /// What it cannot send.
        what: &'static str,
    },
}

impl WireEncodeError {
    /// The error of `wire` for `what` it cannot send.
    pub fn unsupported(wire: &'static str, what: &'static str) -> Self {
        Self::Unsupported { wire, what }
    }
}

/// How a wire spells each kind of message of a conversation (the system
/// messages go elsewhere: [`system_prompt`]). [`encode_history`] hands it the
/// messages in order; `'m` is the conversation's lifetime.
pub trait HistoryEncoder<'m> {
    /// Why a message cannot be spelled.
    type Error;
    /// The error for `what` this wire cannot send.
    fn unsupported(&self, what: &'static str) -> Self::Error;
    /// A user message: its text, then its attachments.
    fn user(&mut self, content: &'m str, attachments: &'m [Attachment]) -> Result<(), Self::Error>;
    /// An assistant message: its text, its calls and its blocks (the order the
    /// model produced them in; empty for a message from elsewhere).
    fn assistant(
        &mut self,
        content: Option<&'m str>,
        calls: &'m [MessageToolCall],
        blocks: &'m [AssistantBlock],
    ) -> Result<(), Self::Error>;
    /// The result of call `call_id`: its content, and whether it is an error.
    fn tool_result(
        &mut self,
        call_id: &'m str,
        content: &'m str,
        is_error: bool,
    ) -> Result<(), Self::Error>;
}

/// Hands each message of `history` but the system ones to `encoder`, in order.
/// A kind of message it does not know is [`HistoryEncoder::unsupported`].
pub fn encode_history<'m, E: HistoryEncoder<'m>>(
    history: &'m [Message],
    encoder: &mut E,
) -> Result<(), E::Error> {
    for message in history {
        match message {
            Message::System { .. } => {}
            Message::User {
                content,
                attachments,
            } => encoder.user(content, attachments)?,
            Message::Assistant {
                content,
                tool_calls,
                blocks,
                ..
            } => encoder.assistant(content.as_deref(), tool_calls, blocks)?,
            Message::Tool {
                tool_call_id,
                content,
                is_error,
            } => encoder.tool_result(tool_call_id, content, *is_error)?,
            _ => return Err(encoder.unsupported("this kind of message")),
        }
    }
    Ok(())
}

/// The system messages of `history`, joined by a blank line; `None` when there
/// is none.
pub fn system_prompt(history: &[Message]) -> Option<String> {
    let system: Vec<&str> = history
        .iter()
        .filter_map(|m| match m {
            Message::System { content } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    (!system.is_empty()).then(|| system.join("\n\n"))
}

/// The parts of a user message: its text (when there is any), then one part per
/// attachment. A text attachment is text framed as `<file name="…">`; `text` and
/// `image` (media type, base64 data) write a part as the wire does.
pub fn user_parts(
    content: &str,
    attachments: &[Attachment],
    text: impl Fn(&str) -> Value,
    image: impl Fn(&str, &str) -> Value,
) -> Result<Vec<Value>, Unsupported> {
    let mut parts = Vec::new();
    if !content.is_empty() {
        parts.push(text(content));
    }
    for attachment in attachments {
        parts.push(match attachment {
            Attachment::Image {
                media_type, data, ..
            } => image(media_type, data),
            Attachment::Text {
                name, text: body, ..
            } => text(&format!("<file name={}>\n{body}\n</file>", json!(name))),
            _ => return Err(Unsupported("this kind of attachment")),
        });
    }
    Ok(parts)
}

/// A conversation as the turns of an API whose roles alternate: parts pushed
/// for the role of the turn before join that turn, as two turns of one role in
/// a row are refused; no parts make no turn.
#[derive(Debug, Default)]
pub struct RoleTurns(Vec<(&'static str, Vec<Value>)>);

impl RoleTurns {
    /// No turn yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `parts` said in `role`.
    pub fn push(&mut self, role: &'static str, parts: Vec<Value>) {
        if parts.is_empty() {
            return;
        }
        match self.0.last_mut() {
            Some((last, turn)) if *last == role => turn.extend(parts),
            _ => self.0.push((role, parts)),
        }
    }

    /// Each turn as `{"role": <role>, <parts_key>: [<parts>]}`.
    pub fn into_json(self, parts_key: &str) -> Vec<Value> {
        self.0
            .into_iter()
            .map(|(role, parts)| {
                let mut turn = Map::new();
                turn.insert("role".into(), json!(role));
                turn.insert(parts_key.into(), Value::Array(parts));
                Value::Object(turn)
            })
            .collect()
    }
}

/// A call's arguments as the JSON object a wire sends back; `{}` when its text
/// is no JSON object (a model's broken arguments).
pub fn object_arguments(call: &MessageToolCall) -> Value {
    serde_json::from_str::<Value>(&call.arguments)
        .ok()
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}))
}

/// The JSON body of `request`: the request checked against the rules every
/// wire shares, the fields `write` puts in an empty object, then the settings'
/// extra keys the body does not have yet ([`add_extra_body`]).
pub fn encode_body<E: From<CompletionRequestError>>(
    request: &CompletionRequest,
    write: impl FnOnce(&mut Map<String, Value>) -> Result<(), E>,
) -> Result<Value, E> {
    request.validate()?;
    let mut body = Map::new();
    write(&mut body)?;
    add_extra_body(&mut body, &request.settings.extra_body);
    Ok(Value::Object(body))
}

/// Adds the `extra` keys the body does not have yet (an extra never replaces a
/// field the encoder set).
pub fn add_extra_body(body: &mut Map<String, Value>, extra: &Map<String, Value>) {
    for (key, value) in extra {
        body.entry(key.clone()).or_insert_with(|| value.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_messages_join() {
        let history = [
            Message::system("a"),
            Message::user("hi"),
            Message::system("b"),
        ];
        assert_eq!(system_prompt(&history).as_deref(), Some("a\n\nb"));
        assert_eq!(system_prompt(&[Message::user("hi")]), None);
    }

    #[test]
    fn turns_of_one_role_merge_and_empty_ones_vanish() {
        let mut turns = RoleTurns::new();
        turns.push("user", vec![json!(1)]);
        turns.push("model", Vec::new());
        turns.push("user", vec![json!(2)]);
        turns.push("model", vec![json!(3)]);
        assert_eq!(
            turns.into_json("parts"),
            [
                json!({"role": "user", "parts": [1, 2]}),
                json!({"role": "model", "parts": [3]}),
            ]
        );
    }

    #[test]
    fn extras_never_replace_a_field() {
        let mut body = Map::new();
        body.insert("model".into(), json!("m"));
        let mut extra = Map::new();
        extra.insert("model".into(), json!("other"));
        extra.insert("seed".into(), json!(1));
        add_extra_body(&mut body, &extra);
        assert_eq!(Value::Object(body), json!({"model": "m", "seed": 1}));
    }
}
