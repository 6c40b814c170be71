//! Conversation messages, independent of any wire format.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A tool call as recorded in an assistant message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageToolCall {
    /// The tool call id (model-provided or minted at the boundary).
    pub id: String,
    /// The function name the model used (normally a tool id; kept verbatim even when
    /// it names no known tool, so history stays faithful).
    pub name: String,
    /// The raw argument text the model produced.
    pub arguments: String,
    /// Provider-native payload to send back with this call (e.g. a thought
    /// signature); never influences execution.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<Value>,
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Message {
    /// Instructions for the model.
    System {
        /// Text.
        content: String,
    },
    /// The user's turn.
    User {
        /// Text.
        content: String,
    },
    /// The model's turn: text and/or tool calls.
    Assistant {
        /// Text, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        content: Option<String>,
        /// The model's reasoning for this turn, kept so providers that need it back
        /// (DeepSeek's thinking mode with tool calls) receive it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reasoning: Option<String>,
        /// Tool calls, in call order.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<MessageToolCall>,
    },
    /// The result of one tool call.
    Tool {
        /// Id of the call this answers.
        tool_call_id: String,
        /// The model-facing (bounded) result text.
        content: String,
    },
}

impl Message {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self::System {
            content: content.into(),
        }
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::User {
            content: content.into(),
        }
    }

    /// An assistant message with text only.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::Assistant {
            content: Some(content.into()),
            reasoning: None,
            tool_calls: Vec::new(),
        }
    }

    /// A tool result message.
    pub fn tool(tool_call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self::Tool {
            tool_call_id: tool_call_id.into(),
            content: content.into(),
        }
    }
}
