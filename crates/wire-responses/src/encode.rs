//! A [`CompletionRequest`] as the body of `POST /v1/responses` (sans-IO).
//!
//! - System messages become `instructions` (joined by a blank line).
//! - `input` is the conversation as items, in order:
//!   - a user message: `{role: "user", content: [input_text, input_image ...]}`
//!     (images as data URLs, text files as text under their name);
//!   - an assistant turn, in the order the model produced it (its `blocks`):
//!     each reasoning item replayed before what followed it (`{type:
//!     "reasoning", id, summary, encrypted_content}`, only reasoning this API
//!     gave: an item id is its provenance, as only this wire's decoder sets
//!     one; plain reasoning with an item id but no encrypted content, as
//!     DeepSeek gives and requires back, goes as `{type: "reasoning", id,
//!     summary: [], content: [{type: "reasoning_text", text}]}`; reasoning
//!     another provider signed, or written by hand, is never sent), text as an assistant
//!     `output_text` message, and a `function_call` per call (`call_id`, `name`,
//!     `arguments`); without blocks: text, then the calls;
//!   - a tool result: `{type: "function_call_output", call_id, output}`.
//! - `tools` are function tools, strict when the schema allows it (rewritten
//!   by `ai_core::schema::strict::strict_schema`, `strict: true`; the client
//!   undoes the rewrite on the arguments that come back), else sent as written
//!   with `strict: false`; `tool_choice` is `auto`, `none`, `required` or
//!   `{type: "function", name}`.
//! - `store: false` always, with `include: ["reasoning.encrypted_content"]`:
//!   nothing is kept on the provider's side, and reasoning comes back encrypted
//!   so the next request can carry it.
//! - `reasoning.effort` (and a `summary: "auto"` so summaries stream),
//!   `max_output_tokens`, `temperature`, structured output as `text.format` (a
//!   strict JSON schema rewritten to the same strict rules as the tools, or
//!   sent as written with `strict: false` when it cannot be).

use ai_core::Message;
use ai_core::completion::{CompletionRequest, ResponseFormat, ToolChoice};
use ai_core::message::{AssistantBlock, Attachment, MessageToolCall};
use completion_http::{
    HistoryEncoder, Unsupported, WireEncodeError, encode_body, encode_history, system_prompt,
    user_parts,
};
use serde_json::{Map, Value, json};

/// This wire in [`WireEncodeError::Unsupported`].
const API: &str = "Responses API";

/// How to encode (build it with `..ResponsesEncodeOptions::default()`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ResponsesEncodeOptions {
    /// Ask for a stream (`stream: true`).
    pub stream: bool,
    /// Send function tools strict when their schema allows it (default).
    pub strict_tools: bool,
}

impl Default for ResponsesEncodeOptions {
    fn default() -> Self {
        Self {
            stream: true,
            strict_tools: true,
        }
    }
}

/// Why a request cannot be encoded: it breaks a rule every wire shares, or
/// holds something this wire cannot send.
pub type ResponsesEncodeError = WireEncodeError;

/// The request body.
pub fn encode_request(
    request: &CompletionRequest,
    options: &ResponsesEncodeOptions,
) -> Result<Value, ResponsesEncodeError> {
    encode_body(request, |body| {
        body.insert("model".into(), json!(request.model));
        body.insert("store".into(), json!(false));
        body.insert("include".into(), json!(["reasoning.encrypted_content"]));
        if options.stream {
            body.insert("stream".into(), json!(true));
        }
        let settings = &request.settings;
        if let Some(temperature) = settings.temperature {
            body.insert("temperature".into(), json!(temperature));
        }
        if let Some(max) = settings.max_tokens {
            body.insert("max_output_tokens".into(), json!(max));
        }
        if let Some(effort) = &settings.reasoning_effort {
            body.insert(
                "reasoning".into(),
                json!({"effort": effort, "summary": "auto"}),
            );
        }
        match &settings.response_format {
            Some(ResponseFormat::JsonSchema {
                name,
                schema,
                strict,
            }) => {
                let (schema, strict) = answer_schema(name, schema, *strict);
                body.insert(
                    "text".into(),
                    json!({"format": {"type": "json_schema", "name": name, "schema": schema, "strict": strict}}),
                );
            }
            Some(ResponseFormat::JsonObject) => {
                body.insert("text".into(), json!({"format": {"type": "json_object"}}));
            }
            _ => {}
        }
        if let Some(system) = system_prompt(&request.messages) {
            body.insert("instructions".into(), json!(system));
        }
        body.insert("input".into(), Value::Array(input(&request.messages)?));
        tools(request, options.strict_tools, body)?;
        Ok(())
    })
}

/// A JSON-schema answer's schema and strictness: asked strict, the schema goes
/// out rewritten to OpenAI's strict rules (the same as chat completions'); one
/// that cannot be is sent as written, not strict, with a warning (the answer is
/// still checked by whoever asked for it).
fn answer_schema(name: &str, schema: &Value, strict: bool) -> (Value, bool) {
    if !strict {
        return (schema.clone(), false);
    }
    match ai_core::schema::strict::strict_schema(schema) {
        Ok(rewritten) => (rewritten, true),
        Err(why) => {
            tracing::warn!(schema = %name, %why, "answer schema sent without strict");
            (schema.clone(), false)
        }
    }
}

fn tools(
    request: &CompletionRequest,
    strict: bool,
    body: &mut Map<String, Value>,
) -> Result<(), ResponsesEncodeError> {
    if request.tools.is_empty() {
        return Ok(());
    }
    let tools: Vec<Value> = request
        .tools
        .iter()
        .map(|tool| {
            let strict_schema = strict
                .then(|| ai_core::schema::strict::strict_schema(&tool.input_schema).ok())
                .flatten();
            json!({
                "type": "function",
                "name": tool.id.as_str(),
                "description": tool.description,
                "strict": strict_schema.is_some(),
                "parameters": strict_schema.as_ref().unwrap_or(&tool.input_schema),
            })
        })
        .collect();
    body.insert("tools".into(), Value::Array(tools));
    let choice = match &request.tool_choice {
        ToolChoice::Auto => json!("auto"),
        ToolChoice::None => json!("none"),
        ToolChoice::Required => json!("required"),
        ToolChoice::Tool(id) => json!({"type": "function", "name": id.as_str()}),
        _ => return Err(WireEncodeError::unsupported(API, "this tool choice")),
    };
    body.insert("tool_choice".into(), choice);
    Ok(())
}

/// The conversation as input items.
fn input(history: &[Message]) -> Result<Vec<Value>, ResponsesEncodeError> {
    let mut input = Input(Vec::new());
    encode_history(history, &mut input)?;
    Ok(input.0)
}

/// The input items so far.
struct Input(Vec<Value>);

impl<'m> HistoryEncoder<'m> for Input {
    type Error = ResponsesEncodeError;

    fn unsupported(&self, what: &'static str) -> Self::Error {
        WireEncodeError::unsupported(API, what)
    }

    fn user(&mut self, content: &str, attachments: &[Attachment]) -> Result<(), Self::Error> {
        let content = user_content(content, attachments)?;
        self.0.push(json!({"role": "user", "content": content}));
        Ok(())
    }

    fn assistant(
        &mut self,
        content: Option<&str>,
        calls: &[MessageToolCall],
        blocks: &[AssistantBlock],
    ) -> Result<(), Self::Error> {
        assistant_items(content, calls, blocks, &mut self.0);
        Ok(())
    }

    /// A `function_call_output` item (the API has no error flag: the content says it).
    fn tool_result(&mut self, id: &str, content: &str, _: bool) -> Result<(), Self::Error> {
        let output = json!({"type": "function_call_output", "call_id": id, "output": content});
        self.0.push(output);
        Ok(())
    }
}

fn user_content(
    content: &str,
    attachments: &[Attachment],
) -> Result<Vec<Value>, ResponsesEncodeError> {
    user_parts(
        content,
        attachments,
        |text| json!({"type": "input_text", "text": text}),
        |media_type, data| {
            json!({
                "type": "input_image",
                "image_url": format!("data:{media_type};base64,{data}"),
            })
        },
    )
    .map_err(|Unsupported(what)| WireEncodeError::unsupported(API, what))
}

/// An assistant turn's items, in the order the model produced them.
fn assistant_items(
    content: Option<&str>,
    calls: &[MessageToolCall],
    blocks: &[AssistantBlock],
    items: &mut Vec<Value>,
) {
    let text_item = |text: &str| {
        json!({
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text}],
        })
    };
    if blocks.is_empty() {
        if let Some(text) = content.filter(|t| !t.is_empty()) {
            items.push(text_item(text));
        }
        items.extend(calls.iter().map(function_call));
        return;
    }
    let mut sent = Vec::new();
    for block in blocks {
        match block {
            // Only reasoning this API gave comes back (another provider's
            // signature means nothing here, and plain reasoning it cannot verify).
            AssistantBlock::Reasoning {
                text,
                signature: Some(encrypted),
                item_id: Some(id),
            } => {
                let summary: Vec<Value> = if text.is_empty() {
                    Vec::new()
                } else {
                    vec![json!({"type": "summary_text", "text": text})]
                };
                items.push(json!({
                    "type": "reasoning",
                    "id": id,
                    "summary": summary,
                    "encrypted_content": encrypted,
                }));
            }
            // Plain reasoning this API gave (its item id, no encrypted
            // content: DeepSeek's, which it requires back before the calls
            // that followed it) goes back as the provider sent it.
            AssistantBlock::Reasoning {
                text,
                signature: None,
                item_id: Some(id),
            } if !text.is_empty() => items.push(json!({
                "type": "reasoning",
                "id": id,
                "summary": [],
                "content": [{"type": "reasoning_text", "text": text}],
            })),
            AssistantBlock::Text { text } if !text.is_empty() => items.push(text_item(text)),
            // Another provider's own block: only the answer text it holds.
            AssistantBlock::Provider {
                text: Some(text), ..
            } if !text.is_empty() => items.push(text_item(text)),
            AssistantBlock::ToolCall { id } => {
                if let Some(call) = calls.iter().find(|c| &c.id == id) {
                    items.push(function_call(call));
                    sent.push(&call.id);
                }
            }
            _ => {}
        }
    }
    // Calls the blocks did not place go last.
    items.extend(
        calls
            .iter()
            .filter(|c| !sent.contains(&&c.id))
            .map(function_call),
    );
}

fn function_call(call: &MessageToolCall) -> Value {
    json!({
        "type": "function_call",
        "call_id": call.id,
        "name": call.name,
        "arguments": call.arguments,
    })
}

/// The tools of `request` that [`encode_request`] sends strict with `options`,
/// with their schema as written (to undo the rewrite on their arguments).
pub fn strict_tools(
    request: &CompletionRequest,
    options: &ResponsesEncodeOptions,
) -> Vec<(String, Value)> {
    if !options.strict_tools {
        return Vec::new();
    }
    request
        .tools
        .iter()
        .filter(|tool| ai_core::schema::strict::strict_schema(&tool.input_schema).is_ok())
        .map(|tool| (tool.id.as_str().to_owned(), tool.input_schema.clone()))
        .collect()
}
