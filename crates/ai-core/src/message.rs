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
        /// Files attached to it, in order: images the model sees, text files it
        /// reads inline (see [`Attachment`]).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        attachments: Vec<Attachment>,
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
        /// The turn as the model produced it, in order: its text, reasoning
        /// (with the signature a provider needs back), redacted reasoning (opaque
        /// data, sent back unchanged) and calls. Empty when the provider gives no
        /// such structure or the turn was written by hand; a wire then sends
        /// `reasoning`, `content` and `tool_calls` in that order.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        blocks: Vec<AssistantBlock>,
    },
    /// The result of one tool call.
    Tool {
        /// Id of the call this answers.
        tool_call_id: String,
        /// The model-facing (bounded) result text.
        content: String,
        /// The call failed: `content` says how (wires that have the flag, such as
        /// Anthropic's `is_error`, send it).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
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
            attachments: Vec::new(),
        }
    }

    /// A user message with files attached.
    pub fn user_with(content: impl Into<String>, attachments: Vec<Attachment>) -> Self {
        Self::User {
            content: content.into(),
            attachments,
        }
    }

    /// An assistant message with text only.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::Assistant {
            content: Some(content.into()),
            reasoning: None,
            tool_calls: Vec::new(),
            blocks: Vec::new(),
        }
    }

    /// A tool result message.
    pub fn tool(tool_call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self::Tool {
            tool_call_id: tool_call_id.into(),
            content: content.into(),
            is_error: false,
        }
    }

    /// The result of a tool call that failed (`content` says how).
    pub fn tool_error(tool_call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self::Tool {
            tool_call_id: tool_call_id.into(),
            content: content.into(),
            is_error: true,
        }
    }

    /// A tool result's call id, content and whether the call failed (`None` for
    /// any other message).
    pub fn tool_result(&self) -> Option<(&str, &str, bool)> {
        match self {
            Self::Tool {
                tool_call_id,
                content,
                is_error,
            } => Some((tool_call_id, content, *is_error)),
            Self::System { .. } | Self::User { .. } | Self::Assistant { .. } => None,
        }
    }
}

/// One block of an assistant turn, in the order the model produced it (see
/// [`Message::Assistant`]'s `blocks`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum AssistantBlock {
    /// Answer text.
    Text {
        /// The text.
        text: String,
    },
    /// Reasoning the model showed.
    Reasoning {
        /// The reasoning text.
        text: String,
        /// The provider's signature over it (Anthropic's thinking signature),
        /// which the provider verifies when the block is sent back.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
        /// The provider's id of the reasoning item (OpenAI's Responses API,
        /// whose `signature` is the item's encrypted content), sent back with it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        item_id: Option<String>,
    },
    /// Reasoning the provider keeps encrypted: sent back unchanged, never shown.
    RedactedReasoning {
        /// The opaque data.
        data: String,
    },
    /// A tool call (its id in `tool_calls`).
    ToolCall {
        /// The call id.
        id: String,
    },
    /// Fields of the block before it that only one wire reads back, kept exactly
    /// as the provider sent them (Gemini's `thoughtSignature` on a text or thought
    /// part). That wire sends them on that block's part again; every other wire
    /// leaves them out, and nothing shows them.
    WireFields {
        /// The wire that produced them (`gemini`).
        wire: String,
        /// The fields, a JSON object.
        fields: Value,
    },
    /// A block the provider produced for itself and wants back as it sent it:
    /// a tool it ran on its side and that tool's result (Anthropic's
    /// `server_tool_use` and `web_search_tool_result`), or text carrying its
    /// citations. Only the wire named by `wire` sends it back, unchanged and
    /// in its place; every other wire leaves it out (and sends `text`, when
    /// there is any, as plain answer text).
    Provider {
        /// The name of the wire that produced it (`anthropic`).
        wire: String,
        /// The block as the provider sent it.
        block: Value,
        /// The answer text the block holds, when it holds any (a cited text
        /// block's text; it is part of the turn's text too).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
    },
}

/// The image types a user message may carry (what vision models accept).
pub const IMAGE_MEDIA_TYPES: &[&str] = &["image/png", "image/jpeg", "image/webp", "image/gif"];

/// A file attached to a user message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Attachment {
    /// An image the model sees: one of [`IMAGE_MEDIA_TYPES`], base64-encoded.
    Image {
        /// Its media type.
        media_type: String,
        /// Its bytes, base64 (standard alphabet, padded).
        data: String,
        /// Its file name, when known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
    /// A text file the model reads inline, under its name.
    Text {
        /// Its file name.
        name: String,
        /// Its media type (`text/plain` when unknown).
        media_type: String,
        /// Its text.
        text: String,
    },
}

/// Why bytes cannot be attached.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AttachmentError {
    /// Over the size limit.
    #[error("{name} is {size} bytes, over the limit of {limit} bytes")]
    TooLarge {
        /// The file.
        name: String,
        /// Its size.
        size: usize,
        /// The limit.
        limit: usize,
    },
    /// Neither an accepted image nor UTF-8 text.
    #[error(
        "{name} is {media_type}, which is not accepted (images: png, jpeg, webp, gif; or UTF-8 text)"
    )]
    Unsupported {
        /// The file.
        name: String,
        /// Its media type, as declared or detected.
        media_type: String,
    },
    /// A data URL that is not one (or not base64).
    #[error("{name}: {reason}")]
    Malformed {
        /// The file.
        name: String,
        /// What is wrong.
        reason: String,
    },
}

impl Attachment {
    /// Attaches `bytes` named `name`: an image when the bytes are one of
    /// [`IMAGE_MEDIA_TYPES`] (by their signature, not the name), else text when
    /// they are UTF-8 (`media_type` kept when it is a text type), else
    /// [`AttachmentError::Unsupported`]. At most `limit` bytes.
    pub fn from_bytes(
        name: &str,
        media_type: Option<&str>,
        bytes: &[u8],
        limit: usize,
    ) -> Result<Self, AttachmentError> {
        use base64::Engine as _;
        if bytes.len() > limit {
            return Err(AttachmentError::TooLarge {
                name: name.to_owned(),
                size: bytes.len(),
                limit,
            });
        }
        if let Some(image) = image_type(bytes) {
            return Ok(Self::Image {
                media_type: image.to_owned(),
                data: base64::engine::general_purpose::STANDARD.encode(bytes),
                name: Some(name.to_owned()),
            });
        }
        let declared = media_type.unwrap_or("text/plain");
        let textual = declared.starts_with("text/")
            || matches!(
                declared,
                "application/json" | "application/xml" | "application/x-yaml" | "application/toml"
            )
            || media_type.is_none();
        match std::str::from_utf8(bytes) {
            Ok(text) if textual && !text.contains('\0') => Ok(Self::Text {
                name: name.to_owned(),
                media_type: declared.to_owned(),
                text: text.to_owned(),
            }),
            _ => Err(AttachmentError::Unsupported {
                name: name.to_owned(),
                media_type: media_type.unwrap_or("binary data").to_owned(),
            }),
        }
    }

    /// Attaches the contents of a `data:<type>;base64,<data>` URL (the form
    /// browsers send files in), as [`Attachment::from_bytes`] would; the size
    /// limit is checked before decoding.
    pub fn from_data_url(name: &str, url: &str, limit: usize) -> Result<Self, AttachmentError> {
        use base64::Engine as _;
        let malformed = |reason: &str| AttachmentError::Malformed {
            name: name.to_owned(),
            reason: reason.to_owned(),
        };
        let rest = url.strip_prefix("data:").ok_or_else(|| {
            malformed("only data: URLs are accepted (the server fetches nothing)")
        })?;
        let (header, data) = rest
            .split_once(',')
            .ok_or_else(|| malformed("a data URL needs a comma before its data"))?;
        let Some(media_type) = header.strip_suffix(";base64") else {
            return Err(malformed("the data URL must be base64"));
        };
        let media_type = media_type.split(';').next().unwrap_or_default();
        if data.len() / 4 * 3 > limit.saturating_add(3) {
            return Err(AttachmentError::TooLarge {
                name: name.to_owned(),
                size: data.len() / 4 * 3,
                limit,
            });
        }
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .map_err(|_| malformed("its data is not valid base64"))?;
        let declared = (!media_type.is_empty()).then_some(media_type);
        if let Some(declared) = declared
            && declared.starts_with("image/")
            && !IMAGE_MEDIA_TYPES.contains(&declared)
        {
            return Err(AttachmentError::Unsupported {
                name: name.to_owned(),
                media_type: declared.to_owned(),
            });
        }
        Self::from_bytes(name, declared, &bytes, limit)
    }

    /// Its size as the model receives it (base64 for an image, text for a file).
    pub fn size(&self) -> usize {
        match self {
            Self::Image { data, .. } => data.len(),
            Self::Text { text, .. } => text.len(),
        }
    }

    /// Its size as a file: the decoded bytes of an image, the bytes of a
    /// text (what budgets of files count).
    pub fn file_size(&self) -> usize {
        match self {
            Self::Image { data, .. } => {
                let padding = data.bytes().rev().take_while(|b| *b == b'=').count();
                (data.len() / 4 * 3).saturating_sub(padding)
            }
            Self::Text { text, .. } => text.len(),
        }
    }

    /// Its file name, when known.
    pub fn name(&self) -> Option<&str> {
        match self {
            Self::Image { name, .. } => name.as_deref(),
            Self::Text { name, .. } => Some(name),
        }
    }

    /// Its media type.
    pub fn media_type(&self) -> &str {
        match self {
            Self::Image { media_type, .. } | Self::Text { media_type, .. } => media_type,
        }
    }

    /// As a `data:<type>;base64,<data>` URL, the form
    /// [`Attachment::from_data_url`] reads back (and a browser shows).
    pub fn to_data_url(&self) -> String {
        use base64::Engine as _;
        match self {
            Self::Image {
                media_type, data, ..
            } => format!("data:{media_type};base64,{data}"),
            Self::Text {
                media_type, text, ..
            } => format!(
                "data:{media_type};base64,{}",
                base64::engine::general_purpose::STANDARD.encode(text)
            ),
        }
    }
}

/// The image type of `bytes`, by signature.
fn image_type(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(&[0xff, 0xd8, 0xff]) {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && &bytes[..4] == b"RIFF" && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

#[cfg(test)]
mod attachment_tests {
    use super::*;

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

    #[test]
    fn images_are_known_by_their_bytes_and_text_by_utf8() {
        let image = Attachment::from_bytes("a.txt", Some("text/plain"), PNG, 100).unwrap();
        assert!(
            matches!(image, Attachment::Image { ref media_type, .. } if media_type == "image/png")
        );
        let text = Attachment::from_bytes("notes", Some("text/markdown"), b"# hi", 100).unwrap();
        assert_eq!(
            text,
            Attachment::Text {
                name: "notes".into(),
                media_type: "text/markdown".into(),
                text: "# hi".into()
            }
        );
        let pdf = Attachment::from_bytes("a.pdf", Some("application/pdf"), b"%PDF-1.7", 100);
        assert!(matches!(pdf, Err(AttachmentError::Unsupported { .. })));
        let binary = Attachment::from_bytes("a.bin", None, &[0xff, 0xfe, 0x00], 100);
        assert!(matches!(binary, Err(AttachmentError::Unsupported { .. })));
        let big = Attachment::from_bytes("a.txt", None, &[b'a'; 101], 100);
        assert!(matches!(
            big,
            Err(AttachmentError::TooLarge { size: 101, .. })
        ));
    }

    #[test]
    fn data_urls_are_decoded_and_checked() {
        use base64::Engine as _;
        let url = format!(
            "data:image/png;base64,{}",
            base64::engine::general_purpose::STANDARD.encode(PNG)
        );
        assert!(matches!(
            Attachment::from_data_url("a.png", &url, 100),
            Ok(Attachment::Image { .. })
        ));
        for bad in [
            "https://example.com/a.png",
            "data:image/png,raw",
            "data:image/png;base64,***",
            "data:image/svg+xml;base64,PHN2Zz4=",
        ] {
            assert!(Attachment::from_data_url("a", bad, 100).is_err(), "{bad}");
        }
        let big = format!("data:text/plain;base64,{}", "YWFh".repeat(100));
        assert!(matches!(
            Attachment::from_data_url("a", &big, 100),
            Err(AttachmentError::TooLarge { .. })
        ));
    }
}
