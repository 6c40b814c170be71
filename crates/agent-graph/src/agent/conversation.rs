//! A multi-turn chat's history, kept without the system prompt.

use ai_core::Message;

use crate::run::RunOutput;

/// The history of a multi-turn chat: user messages, the assistant's answers, tool
/// calls and results, and never a system prompt (the agent puts its own in front of
/// every turn, so it is sent exactly once per request). Serializable, to keep a
/// chat between requests.
///
/// ```
/// use agent_graph::{Agent, Conversation};
/// use agent_testing::{ScriptedModel, Turn};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let model = ScriptedModel::new([Turn::text("Hi, Ada."), Turn::text("Your name is Ada.")]);
/// let agent = Agent::builder(model).system("Be brief.").build()?;
/// let mut chat = Conversation::new();
/// agent.chat(&mut chat, "I am Ada.").await?;
/// let output = agent.chat(&mut chat, "What is my name?").await?;
/// assert_eq!(output.content, "Your name is Ada.");
/// assert_eq!(chat.messages().len(), 4); // two user messages, two answers
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Conversation {
    messages: Vec<Message>,
}

impl Conversation {
    /// An empty conversation.
    pub fn new() -> Self {
        Self::default()
    }

    /// The messages so far, oldest first.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// Number of messages.
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    /// Whether nothing was said yet.
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// Appends a message; a system message is dropped (the agent supplies the
    /// system prompt).
    pub fn push(&mut self, message: Message) {
        if !matches!(message, Message::System { .. }) {
            self.messages.push(message);
        }
    }

    /// Appends a turn's messages ([`RunOutput::new_messages`]): the user's message
    /// and everything the run added. For a turn run with [`crate::Agent::run_turn`];
    /// [`crate::Agent::chat`] records its turns itself.
    pub fn record(&mut self, output: &RunOutput) {
        for message in output.new_messages() {
            self.push(message.clone());
        }
    }

    /// The messages a turn with `text` sends after the system prompt.
    pub(crate) fn with_user(&self, text: String) -> Vec<Message> {
        let mut messages = Vec::with_capacity(self.messages.len() + 1);
        messages.extend(self.messages.iter().cloned());
        messages.push(Message::user(text));
        messages
    }
}

impl From<Vec<Message>> for Conversation {
    /// Keeps every message but the system messages.
    fn from(messages: Vec<Message>) -> Self {
        let mut conversation = Self::new();
        for message in messages {
            conversation.push(message);
        }
        conversation
    }
}
