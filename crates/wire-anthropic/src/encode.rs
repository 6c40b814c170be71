//! A [`CompletionRequest`] as the body of `POST /v1/messages` (sans-IO).
//!
//! - System messages become the top-level `system` (joined by a blank line).
//! - A user message is its text, then its attachments: images as base64 `image`
//!   blocks, text files as `text` blocks under their name.
//! - An assistant turn is sent in the order the model produced it (its `blocks`):
//!   thinking with its signature and redacted thinking unchanged, text, and a
//!   `tool_use` per call (arguments parsed; a call whose arguments are not a JSON
//!   object sends `{}`, the model learns why from its result). Without blocks:
//!   text, then the calls. Reasoning without a signature is not sent (the API
//!   refuses thinking it did not sign). Blocks the API produced for itself
//!   (`server_tool_use`, `web_search_tool_result`, text with `citations`: an
//!   [`AssistantBlock::Provider`] of this wire) go back unchanged in their place;
//!   another wire's provider blocks only as their text.
//! - Tool results become `tool_result` blocks (`tool_use_id`, `content`,
//!   `is_error`) at the start of the next user message; consecutive user messages
//!   are merged, as the API alternates roles.
//! - Tools carry `input_schema`; `tool_choice` is `auto`, `any` (required), `tool`
//!   (named) or `none`.
//! - A JSON-schema response format goes out as `output_config.format` (see
//!   [`crate::output`]); one the grammar cannot express, or a bare JSON-object
//!   format, is asked for at the end of the system prompt.
//! - `max_tokens` is always sent (the API requires it): the settings' value, else
//!   [`AnthropicEncodeOptions::default_max_tokens`].
//! - With [`AnthropicEncodeOptions::cache`] (or the settings' `prompt_cache`),
//!   `cache_control: {type: "ephemeral"}` marks the system prompt, the last tool and the last user message's last block: the
//!   prefix up to each mark is cached.
//! - With [`AnthropicEncodeOptions::thinking_budget_tokens`] (or else the
//!   settings' `thinking_budget`), `thinking: {type: "enabled", budget_tokens}` (and `max_tokens` raised above the budget when needed); no
//!   `temperature` is sent then, as the API accepts none with thinking.

use ai_core::Message;
use ai_core::completion::{CompletionRequest, ResponseFormat, ToolChoice};
use ai_core::message::{AssistantBlock, Attachment, MessageToolCall};
use completion_http::{
    HistoryEncoder, RoleTurns, Unsupported, WireEncodeError, encode_body, encode_history,
    object_arguments, system_prompt, user_parts,
};
use serde_json::{Map, Value, json};

use crate::output::{OutputSchema, output_config, output_schema, prompted};

/// This wire in [`WireEncodeError::Unsupported`].
const API: &str = "Messages API";

/// `max_tokens` when the settings give none.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// How to encode (build it with `..AnthropicEncodeOptions::default()`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnthropicEncodeOptions {
    /// Ask for a stream (`stream: true`).
    pub stream: bool,
    /// `max_tokens` when the settings give none.
    pub default_max_tokens: u32,
    /// Mark the system prompt, the tools and the last user message for caching.
    pub cache: bool,
    /// Extended thinking with this budget.
    pub thinking_budget_tokens: Option<u32>,
}

impl Default for AnthropicEncodeOptions {
    fn default() -> Self {
        Self {
            stream: true,
            default_max_tokens: DEFAULT_MAX_TOKENS,
            cache: false,
            thinking_budget_tokens: None,
        }
    }
}

/// Why a request cannot be encoded: it breaks a rule every wire shares, or
/// holds something this wire cannot send.
pub type AnthropicEncodeError = WireEncodeError;

/// The request body.
pub fn encode_request(
    request: &CompletionRequest,
    options: &AnthropicEncodeOptions,
) -> Result<Value, AnthropicEncodeError> {
    let options = &with_settings(options, &request.settings);
    encode_body(request, |body| {
        body.insert("model".into(), json!(request.model));
        let settings = &request.settings;
        let mut max_tokens = settings.max_tokens.unwrap_or(options.default_max_tokens);
        if let Some(budget) = options.thinking_budget_tokens {
            max_tokens = max_tokens.max(budget.saturating_add(1024));
            body.insert(
                "thinking".into(),
                json!({"type": "enabled", "budget_tokens": budget}),
            );
        }
        body.insert("max_tokens".into(), json!(max_tokens));
        if options.stream {
            body.insert("stream".into(), json!(true));
        }
        // The API refuses a temperature other than 1 with thinking on: none is sent.
        if let Some(temperature) = settings
            .temperature
            .filter(|_| options.thinking_budget_tokens.is_none())
        {
            body.insert("temperature".into(), json!(temperature));
        }
        let asked = answer_format(settings.response_format.as_ref(), body)?;
        let system = system_prompt(&request.messages);
        let system = match (system, asked) {
            (Some(system), Some(asked)) => Some(format!("{system}\n\n{asked}")),
            (system, asked) => system.or(asked),
        };
        if let Some(system) = system {
            let mut block = json!({"type": "text", "text": system});
            if options.cache {
                block["cache_control"] = json!({"type": "ephemeral"});
            }
            body.insert("system".into(), json!([block]));
        }
        let mut messages = messages(&request.messages)?;
        if options.cache {
            mark_last_user_block(&mut messages);
        }
        body.insert("messages".into(), Value::Array(messages));
        tools(request, options, body)?;
        Ok(())
    })
}

/// `options` with what the request's settings ask for where the options leave
/// it open: a thinking budget, prompt-cache marks.
fn with_settings(
    options: &AnthropicEncodeOptions,
    settings: &ai_core::completion::ModelSettings,
) -> AnthropicEncodeOptions {
    AnthropicEncodeOptions {
        thinking_budget_tokens: options.thinking_budget_tokens.or(settings.thinking_budget),
        cache: options.cache || settings.prompt_cache,
        ..options.clone()
    }
}

/// The answer's shape: a JSON schema as `output_config.format` (see
/// [`crate::output`]); what the grammar cannot express, and a bare JSON
/// object, asked for in the system prompt (the text returned).
fn answer_format(
    format: Option<&ResponseFormat>,
    body: &mut Map<String, Value>,
) -> Result<Option<String>, AnthropicEncodeError> {
    Ok(match format {
        None | Some(ResponseFormat::Text) => None,
        Some(ResponseFormat::JsonObject) => {
            Some("Answer with only a JSON object, no prose and no code fence.".to_owned())
        }
        Some(ResponseFormat::JsonSchema { schema, .. }) => match output_schema(schema) {
            OutputSchema::Native(reduced) => {
                body.insert("output_config".into(), output_config(reduced));
                None
            }
            OutputSchema::Prompted(_) => Some(prompted(schema)),
        },
        Some(_) => return Err(WireEncodeError::unsupported(API, "this response format")),
    })
}

fn tools(
    request: &CompletionRequest,
    options: &AnthropicEncodeOptions,
    body: &mut Map<String, Value>,
) -> Result<(), AnthropicEncodeError> {
    if request.tools.is_empty() {
        return Ok(());
    }
    let mut tools: Vec<Value> = request
        .tools
        .iter()
        .map(|tool| {
            json!({
                "name": tool.id.as_str(),
                "description": tool.description,
                "input_schema": tool.input_schema,
            })
        })
        .collect();
    if options.cache
        && let Some(last) = tools.last_mut()
    {
        last["cache_control"] = json!({"type": "ephemeral"});
    }
    body.insert("tools".into(), Value::Array(tools));
    let choice = match &request.tool_choice {
        ToolChoice::Auto => json!({"type": "auto"}),
        ToolChoice::None => json!({"type": "none"}),
        ToolChoice::Required => json!({"type": "any"}),
        ToolChoice::Tool(id) => json!({"type": "tool", "name": id.as_str()}),
        _ => return Err(WireEncodeError::unsupported(API, "this tool choice")),
    };
    body.insert("tool_choice".into(), choice);
    Ok(())
}

/// The conversation as alternating user and assistant messages.
fn messages(history: &[Message]) -> Result<Vec<Value>, AnthropicEncodeError> {
    let mut messages = Messages(RoleTurns::new());
    encode_history(history, &mut messages)?;
    Ok(messages.0.into_json("content"))
}

/// The messages as they are spelled, by role.
struct Messages(RoleTurns);

impl<'m> HistoryEncoder<'m> for Messages {
    type Error = AnthropicEncodeError;

    fn unsupported(&self, what: &'static str) -> Self::Error {
        WireEncodeError::unsupported(API, what)
    }

    fn user(&mut self, content: &str, attachments: &[Attachment]) -> Result<(), Self::Error> {
        self.0.push("user", user_blocks(content, attachments)?);
        Ok(())
    }

    fn assistant(
        &mut self,
        content: Option<&str>,
        calls: &[MessageToolCall],
        blocks: &[AssistantBlock],
    ) -> Result<(), Self::Error> {
        let blocks = assistant_blocks(content, calls, blocks);
        self.0.push("assistant", blocks);
        Ok(())
    }

    /// A `tool_result` block, at the start of the next user message.
    fn tool_result(&mut self, id: &str, content: &str, is_error: bool) -> Result<(), Self::Error> {
        let mut result = json!({"type": "tool_result", "tool_use_id": id, "content": content});
        if is_error {
            result["is_error"] = json!(true);
        }
        self.0.push("user", vec![result]);
        Ok(())
    }
}

fn user_blocks(
    content: &str,
    attachments: &[Attachment],
) -> Result<Vec<Value>, AnthropicEncodeError> {
    user_parts(
        content,
        attachments,
        |text| json!({"type": "text", "text": text}),
        |media_type, data| {
            json!({
                "type": "image",
                "source": {"type": "base64", "media_type": media_type, "data": data},
            })
        },
    )
    .map_err(|Unsupported(what)| WireEncodeError::unsupported(API, what))
}

fn tool_use(call: &MessageToolCall) -> Value {
    let input = object_arguments(call);
    json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input})
}

fn assistant_blocks(
    content: Option<&str>,
    calls: &[MessageToolCall],
    blocks: &[AssistantBlock],
) -> Vec<Value> {
    let mut out = Vec::new();
    let mut sent: Vec<&str> = Vec::new();
    for block in blocks {
        match block {
            AssistantBlock::Text { text } if !text.is_empty() => {
                out.push(json!({"type": "text", "text": text}));
            }
            // Reasoning another provider signed (a Responses API item) is not
            // Anthropic's to verify: left out.
            AssistantBlock::Reasoning {
                text,
                signature: Some(signature),
                item_id: None,
            } => out.push(json!({"type": "thinking", "thinking": text, "signature": signature})),
            AssistantBlock::RedactedReasoning { data } => {
                out.push(json!({"type": "redacted_thinking", "data": data}));
            }
            AssistantBlock::ToolCall { id } => {
                if let Some(call) = calls.iter().find(|c| &c.id == id) {
                    out.push(tool_use(call));
                    sent.push(&call.id);
                }
            }
            // The API's own blocks (a search it ran, its results, cited text)
            // go back unchanged, in their place; another wire's only as text.
            AssistantBlock::Provider { wire, block, .. } if wire == crate::decode::WIRE => {
                out.push(block.clone());
            }
            AssistantBlock::Provider {
                text: Some(text), ..
            } if !text.is_empty() => out.push(json!({"type": "text", "text": text})),
            _ => {}
        }
    }
    let has_text = blocks.iter().any(|b| match b {
        AssistantBlock::Text { text } => !text.is_empty(),
        AssistantBlock::Provider { text, .. } => text.as_deref().is_some_and(|t| !t.is_empty()),
        _ => false,
    });
    if !has_text && let Some(text) = content.filter(|t| !t.is_empty()) {
        // Text the blocks do not hold (a turn built by hand) goes before the calls.
        let at = out
            .iter()
            .position(|b| b["type"] == "tool_use")
            .unwrap_or(out.len());
        out.insert(at, json!({"type": "text", "text": text}));
    }
    for call in calls {
        if !sent.contains(&call.id.as_str()) {
            out.push(tool_use(call));
        }
    }
    out
}

/// Marks the last block of the last user message for caching.
fn mark_last_user_block(messages: &mut [Value]) {
    let last_user = messages.iter_mut().rev().find(|m| m["role"] == "user");
    if let Some(block) = last_user
        .and_then(|m| m["content"].as_array_mut())
        .and_then(|content| content.last_mut())
    {
        block["cache_control"] = json!({"type": "ephemeral"});
    }
}
