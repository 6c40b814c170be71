//! A [`CompletionRequest`] as the body of `POST
//! /v1beta/models/{model}:streamGenerateContent?alt=sse` (or `:generateContent`),
//! sans-IO.
//!
//! - System messages become `systemInstruction` (joined by a blank line).
//! - `contents` alternate `user` and `model`; consecutive messages of one role
//!   are merged into one content.
//! - A user message is its text, then its attachments: images as `inlineData`
//!   (`mimeType`, base64 `data`), text files as text parts under their name.
//! - An assistant turn is sent in the order the model produced it (its
//!   `blocks`): text parts; a `functionCall {name, args, id?}` per call
//!   (arguments parsed; not a JSON object: `{}`); and the fields Gemini put on a
//!   part ([`AssistantBlock::WireFields`] of this wire: the `thoughtSignature`)
//!   back on that part, exactly as received. A call's own signature travels in
//!   its `raw` (`{"google": {"thought_signature": ..}}`, the shape the OpenAI
//!   wire keeps from Gemini's compatible endpoint, so a thread moves between
//!   the two). Reasoning goes back only as the thought part that carried a
//!   signature (the API needs no unsigned thought summaries); reasoning another
//!   provider signed never goes out.
//! - A tool result is a `functionResponse {name, response, id?}` in a `user`
//!   content: `{result: text}`, or `{error: text}` when the tool failed; the
//!   name is the one of the call it answers. `id` goes out only when the model
//!   gave the call one (a minted id is ours).
//! - Tools are one `{functionDeclarations: [...]}` with schemas reduced to what
//!   the API accepts ([`crate::schema`]); `toolConfig.functionCallingConfig` is
//!   `AUTO`, `NONE`, `ANY`, or `ANY` with `allowedFunctionNames` for a named tool.
//! - `generationConfig`: `temperature`, `maxOutputTokens`, `seed`,
//!   `responseMimeType`/`responseSchema` for a JSON answer, and `thinkingConfig
//!   {includeThoughts, thinkingBudget}` from [`GeminiOptions::thinking`].
//! - `extra_body` keys are added at the top level where the body has none.

use std::collections::HashMap;

use ai_core::Message;
use ai_core::completion::{CompletionRequest, CompletionRequestError, ResponseFormat, ToolChoice};
use ai_core::message::{AssistantBlock, Attachment, MessageToolCall};
use completion_http::{
    HistoryEncoder, RoleTurns, Unsupported, encode_body, encode_history, object_arguments,
    system_prompt,
};
use serde_json::{Map, Value, json};

use crate::WIRE;

/// Thinking: whether thought summaries stream, and how many tokens the model
/// may think for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Thinking {
    /// Ask for thought summaries (`includeThoughts`).
    pub include_thoughts: bool,
    /// `thinkingBudget`: tokens, `0` off (where the model allows), `-1` dynamic;
    /// `None`: the model's default.
    pub budget_tokens: Option<i32>,
}

/// How to encode (build it with `..GeminiOptions::default()`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeminiOptions {
    /// Ask for a stream (`:streamGenerateContent?alt=sse`); else
    /// `:generateContent`.
    pub stream: bool,
    /// `generationConfig.thinkingConfig`, when set; else the settings'
    /// `thinking_budget`, with thought summaries on.
    pub thinking: Option<Thinking>,
}

impl Default for GeminiOptions {
    fn default() -> Self {
        Self {
            stream: true,
            thinking: None,
        }
    }
}

/// Why a request cannot be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GeminiEncodeError {
    /// The request breaks a rule every wire shares ([`CompletionRequest::validate`]).
    #[error(transparent)]
    Request(#[from] CompletionRequestError),
    /// The model name cannot stand in the path.
    #[error(
        "the Gemini model name must be letters, digits, `.`, `_` and `-` (optionally after `models/`)"
    )]
    ModelName,
    /// Something this wire cannot send.
    #[error("the Gemini wire cannot send {0}")]
    Unsupported(&'static str),
}

/// The path of a call for `model` (a `models/` prefix is taken off), with
/// `?alt=sse` when it streams.
pub fn call_path(model: &str, stream: bool) -> Result<String, GeminiEncodeError> {
    let name = model.strip_prefix("models/").unwrap_or(model);
    let valid = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if !valid {
        return Err(GeminiEncodeError::ModelName);
    }
    Ok(if stream {
        format!("/v1beta/models/{name}:streamGenerateContent?alt=sse")
    } else {
        format!("/v1beta/models/{name}:generateContent")
    })
}

/// The request body.
pub fn encode_request(
    request: &CompletionRequest,
    options: &GeminiOptions,
) -> Result<Value, GeminiEncodeError> {
    encode_body(request, |body| {
        if let Some(system) = system_prompt(&request.messages) {
            body.insert(
                "systemInstruction".into(),
                json!({"parts": [{"text": system}]}),
            );
        }
        body.insert(
            "contents".into(),
            Value::Array(contents(&request.messages)?),
        );
        tools(request, body);
        let config = generation_config(request, options)?;
        if !config.is_empty() {
            body.insert("generationConfig".into(), Value::Object(config));
        }
        Ok(())
    })
}

fn generation_config(
    request: &CompletionRequest,
    options: &GeminiOptions,
) -> Result<Map<String, Value>, GeminiEncodeError> {
    let settings = &request.settings;
    let mut config = Map::new();
    if let Some(temperature) = settings.temperature {
        config.insert("temperature".into(), json!(temperature));
    }
    if let Some(max) = settings.max_tokens {
        config.insert("maxOutputTokens".into(), json!(max));
    }
    if let Some(seed) = settings.seed {
        config.insert("seed".into(), json!(seed));
    }
    match &settings.response_format {
        None | Some(ResponseFormat::Text) => {}
        Some(ResponseFormat::JsonObject) => {
            config.insert("responseMimeType".into(), json!("application/json"));
        }
        Some(ResponseFormat::JsonSchema { schema, .. }) => {
            config.insert("responseMimeType".into(), json!("application/json"));
            config.insert("responseSchema".into(), crate::schema::reduce(schema));
        }
        Some(_) => return Err(GeminiEncodeError::Unsupported("this response format")),
    }
    let from_settings = settings.thinking_budget.map(|budget| Thinking {
        include_thoughts: true,
        budget_tokens: Some(i32::try_from(budget).unwrap_or(i32::MAX)),
    });
    if let Some(thinking) = options.thinking.or(from_settings) {
        let mut thinking_config = Map::new();
        thinking_config.insert("includeThoughts".into(), json!(thinking.include_thoughts));
        if let Some(budget) = thinking.budget_tokens {
            thinking_config.insert("thinkingBudget".into(), json!(budget));
        }
        config.insert("thinkingConfig".into(), Value::Object(thinking_config));
    }
    Ok(config)
}

fn tools(request: &CompletionRequest, body: &mut Map<String, Value>) {
    if request.tools.is_empty() {
        return;
    }
    let declarations: Vec<Value> = request
        .tools
        .iter()
        .map(|tool| {
            json!({
                "name": tool.id.as_str(),
                "description": tool.description,
                "parameters": crate::schema::reduce(&tool.input_schema),
            })
        })
        .collect();
    body.insert(
        "tools".into(),
        json!([{ "functionDeclarations": declarations }]),
    );
    let config = match &request.tool_choice {
        ToolChoice::None => json!({"mode": "NONE"}),
        ToolChoice::Required => json!({"mode": "ANY"}),
        ToolChoice::Tool(id) => json!({"mode": "ANY", "allowedFunctionNames": [id.as_str()]}),
        _ => json!({"mode": "AUTO"}),
    };
    body.insert(
        "toolConfig".into(),
        json!({ "functionCallingConfig": config }),
    );
}

/// The `raw` of a call Gemini made: its thought signature and whether the id
/// is the model's (`{"google": {"thought_signature": .., "id": ..}}`).
pub(crate) fn call_raw(signature: Option<&str>, provider_id: Option<&str>) -> Option<Value> {
    let mut google = Map::new();
    if let Some(signature) = signature {
        google.insert("thought_signature".into(), json!(signature));
    }
    if let Some(id) = provider_id {
        google.insert("id".into(), json!(id));
    }
    (!google.is_empty()).then(|| json!({ "google": google }))
}

/// The call's thought signature, from its `raw`.
fn raw_signature(call: &MessageToolCall) -> Option<&str> {
    call.raw
        .as_ref()?
        .get("google")?
        .get("thought_signature")?
        .as_str()
}

/// The call's id when the model gave it (not one minted by the decoder).
fn provider_id(call: &MessageToolCall) -> Option<&str> {
    let id = call.raw.as_ref()?.get("google")?.get("id")?.as_str()?;
    (id == call.id).then_some(id)
}

/// The conversation as alternating `user` and `model` contents.
fn contents(history: &[Message]) -> Result<Vec<Value>, GeminiEncodeError> {
    let mut contents = Contents::default();
    encode_history(history, &mut contents)?;
    Ok(contents.turns.into_json("parts"))
}

/// The contents so far, and each call's name and provider id by call id (for
/// the results that answer it).
#[derive(Default)]
struct Contents<'m> {
    turns: RoleTurns,
    calls: HashMap<&'m str, (&'m str, Option<&'m str>)>,
}

impl<'m> HistoryEncoder<'m> for Contents<'m> {
    type Error = GeminiEncodeError;

    fn unsupported(&self, what: &'static str) -> Self::Error {
        GeminiEncodeError::Unsupported(what)
    }

    fn user(&mut self, content: &str, attachments: &[Attachment]) -> Result<(), Self::Error> {
        self.turns.push("user", user_parts(content, attachments)?);
        Ok(())
    }

    fn assistant(
        &mut self,
        content: Option<&'m str>,
        calls: &'m [MessageToolCall],
        blocks: &'m [AssistantBlock],
    ) -> Result<(), Self::Error> {
        for call in calls {
            self.calls.insert(&call.id, (&call.name, provider_id(call)));
        }
        self.turns
            .push("model", model_parts(content, calls, blocks));
        Ok(())
    }

    /// A `functionResponse` naming the call's function (and its id, when the
    /// model gave one): the content under `result`, or `error`.
    fn tool_result(
        &mut self,
        id: &'m str,
        content: &str,
        is_error: bool,
    ) -> Result<(), Self::Error> {
        let (name, id) = self.calls.get(id).copied().unwrap_or((id, None));
        let key = if is_error { "error" } else { "result" };
        let mut response = json!({"name": name, "response": { key: content }});
        if let Some(id) = id {
            response["id"] = json!(id);
        }
        self.turns
            .push("user", vec![json!({ "functionResponse": response })]);
        Ok(())
    }
}

fn user_parts(content: &str, attachments: &[Attachment]) -> Result<Vec<Value>, GeminiEncodeError> {
    completion_http::user_parts(
        content,
        attachments,
        |text| json!({ "text": text }),
        |media_type, data| json!({"inlineData": {"mimeType": media_type, "data": data}}),
    )
    .map_err(|Unsupported(what)| GeminiEncodeError::Unsupported(what))
}

fn function_call(call: &MessageToolCall) -> Value {
    let args = object_arguments(call);
    let mut inner = json!({"name": call.name, "args": args});
    if let Some(id) = provider_id(call) {
        inner["id"] = json!(id);
    }
    let mut part = json!({ "functionCall": inner });
    if let Some(signature) = raw_signature(call) {
        part["thoughtSignature"] = json!(signature);
    }
    part
}

/// This wire's fields for the part of the block at `at`, when the next block
/// holds them.
fn fields_after(blocks: &[AssistantBlock], at: usize) -> Option<&Map<String, Value>> {
    match blocks.get(at + 1) {
        Some(AssistantBlock::WireFields { wire, fields }) if wire == WIRE => fields.as_object(),
        _ => None,
    }
}

fn with_fields(mut part: Value, fields: Option<&Map<String, Value>>) -> Value {
    if let (Value::Object(part), Some(fields)) = (&mut part, fields) {
        for (key, value) in fields {
            part.insert(key.clone(), value.clone());
        }
    }
    part
}

fn model_parts(
    content: Option<&str>,
    calls: &[MessageToolCall],
    blocks: &[AssistantBlock],
) -> Vec<Value> {
    let mut out = Vec::new();
    let mut sent: Vec<&str> = Vec::new();
    let mut has_text = false;
    for (at, block) in blocks.iter().enumerate() {
        let fields = fields_after(blocks, at);
        match block {
            AssistantBlock::Text { text } if !text.is_empty() || fields.is_some() => {
                has_text |= !text.is_empty();
                out.push(with_fields(json!({ "text": text }), fields));
            }
            // Only a thought part Gemini signed is known to be Gemini's.
            AssistantBlock::Reasoning { text, .. } if fields.is_some() => {
                out.push(with_fields(json!({"text": text, "thought": true}), fields));
            }
            AssistantBlock::ToolCall { id } => {
                if let Some(call) = calls.iter().find(|c| &c.id == id) {
                    out.push(function_call(call));
                    sent.push(&call.id);
                }
            }
            _ => {}
        }
    }
    if !has_text && let Some(text) = content.filter(|t| !t.is_empty()) {
        // Text the blocks do not hold (a turn built by hand) goes before the calls.
        let at = out
            .iter()
            .position(|p| p.get("functionCall").is_some())
            .unwrap_or(out.len());
        out.insert(at, json!({ "text": text }));
    }
    for call in calls {
        if !sent.contains(&call.id.as_str()) {
            out.push(function_call(call));
        }
    }
    out
}
