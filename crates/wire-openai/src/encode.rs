//! The request encoder: [`CompletionRequest`] to a chat-completions JSON body.
//!
//! It maps semantic types to the wire and nothing else: no IO, no HTTP. It owns the
//! request DTOs and OpenAI's strict-schema rules ([`strict_schema`]); semantic
//! schemas in [`ToolSpec`] are never modified in place.

pub use ai_core::schema::strict::{
    NotStrict, NotStrictReason, relax_strict_arguments, strict_schema,
};
use ai_core::{
    Message, ToolSpec,
    completion::{CompletionRequest, CompletionRequestError, ResponseFormat, ToolChoice},
    message::Attachment,
};
use completion_http::add_extra_body;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// Whether tool schemas are sent in OpenAI's strict mode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum StrictMode {
    /// Schemas are sent as they are, without `strict`.
    #[default]
    Off,
    /// Each schema that can be rewritten to the strict rules is sent rewritten with
    /// `strict: true`; the others are sent as they are, and
    /// [`EncodedRequest::strict`] says why, per tool.
    ///
    /// In strict mode the model sends `null` for properties that were optional. Use
    /// [`relax_strict_arguments`] on the assembled arguments to turn them back into
    /// absent properties before validating against the original schema (the client
    /// does this for you).
    WhenPossible,
}

/// Which field carries [`ai_core::completion::ModelSettings::max_tokens`]. In
/// configuration: `max_tokens` or `max_completion_tokens`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum MaxTokensField {
    /// `max_tokens`: understood by every OpenAI-compatible server.
    #[default]
    MaxTokens,
    /// `max_completion_tokens`: what OpenAI's reasoning models require.
    MaxCompletionTokens,
}

/// How [`ToolChoice::Tool`] (a call of one named tool) goes on the wire. In
/// configuration: `object` or `required`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum NamedToolChoice {
    /// OpenAI's object form, `{"type": "function", "function": {"name": ...}}`,
    /// with every tool of the request.
    #[default]
    Object,
    /// `"required"`, with `tools` narrowed to the named tool: the same constraint
    /// for servers that ignore the object form (llama.cpp's server runs it as
    /// `auto`).
    #[serde(rename = "required")]
    RequiredWithOnlyThatTool,
}

/// Encoding settings.
#[derive(Debug, Clone, PartialEq)]
pub struct EncodeOptions {
    /// Ask for a streamed response (`stream: true`).
    pub stream: bool,
    /// When streaming, ask for a final usage chunk (`stream_options.include_usage`).
    pub include_usage: bool,
    /// Strict tool schemas.
    pub strict: StrictMode,
    /// Field name for the token limit.
    pub max_tokens_field: MaxTokensField,
    /// `parallel_tool_calls`, when set (only sent with tools).
    pub parallel_tool_calls: Option<bool>,
    /// How a named tool choice is sent.
    pub named_tool_choice: NamedToolChoice,
    /// Extra top-level fields of every request, for provider-specific options (e.g.
    /// `top_k`). Precedence, highest first: fields the encoder sets (from the
    /// request and its [`ai_core::completion::ModelSettings`]), the request's
    /// [`ai_core::completion::ModelSettings::extra_body`], then these.
    pub extra_body: Map<String, Value>,
}

impl Default for EncodeOptions {
    fn default() -> Self {
        Self {
            stream: true,
            include_usage: true,
            strict: StrictMode::Off,
            max_tokens_field: MaxTokensField::MaxTokens,
            parallel_tool_calls: None,
            named_tool_choice: NamedToolChoice::Object,
            extra_body: Map::new(),
        }
    }
}

/// An encoded request body and what happened to each tool's strictness.
#[derive(Debug, Clone, PartialEq)]
pub struct EncodedRequest {
    /// The JSON body.
    pub body: Value,
    /// One entry per tool, in request order, when strict mode was asked for; empty
    /// otherwise.
    pub strict: Vec<StrictReport>,
    /// When the request asks for a strict JSON-schema answer
    /// (`ResponseFormat::JsonSchema { strict: true, .. }`): `Ok` when its schema was
    /// sent rewritten to the strict rules ([`strict_schema`]) with `strict: true`;
    /// otherwise why it was sent as given, without `strict`. `None` for other
    /// requests.
    pub response_strict: Option<Result<(), NotStrict>>,
}

/// Whether one tool was sent strict.
#[derive(Debug, Clone, PartialEq)]
pub struct StrictReport {
    /// The tool (function) name.
    pub tool: String,
    /// `Ok` when sent with `strict: true`; otherwise why not.
    pub outcome: Result<(), NotStrict>,
}

/// Why a request could not be encoded (a caller mistake, not provider input).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// The request breaks a rule every wire shares ([`CompletionRequest::validate`]).
    #[error(transparent)]
    Request(#[from] CompletionRequestError),
    /// A message, tool choice or response format this encoder does not know (added
    /// to ai-core after it was written).
    #[error("this encoder cannot send {0}")]
    Unsupported(&'static str),
}

#[derive(Serialize)]
struct ToolDto<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: FunctionDefDto<'a>,
}

#[derive(Serialize)]
struct FunctionDefDto<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    strict: Option<bool>,
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "snake_case")]
enum MessageDto<'a> {
    System {
        content: &'a str,
    },
    User {
        content: UserContentDto<'a>,
    },
    Assistant {
        content: Option<&'a str>,
        /// The turn's reasoning, sent back where it came from: DeepSeek's thinking
        /// mode rejects an assistant tool-call message without it.
        #[serde(skip_serializing_if = "Option::is_none")]
        reasoning_content: Option<&'a str>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCallDto<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
}

/// A user message's content: its text alone, or (with attachments) an array of
/// parts: the text, then each file (an image as a data URL, a text file inline
/// under its name).
#[derive(Serialize)]
#[serde(untagged)]
enum UserContentDto<'a> {
    Text(&'a str),
    Parts(Vec<UserPartDto>),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum UserPartDto {
    Text { text: String },
    ImageUrl { image_url: ImageUrlDto },
}

#[derive(Serialize)]
struct ImageUrlDto {
    url: String,
}

fn user_content<'a>(
    content: &'a str,
    attachments: &[Attachment],
) -> Result<UserContentDto<'a>, EncodeError> {
    if attachments.is_empty() {
        return Ok(UserContentDto::Text(content));
    }
    let mut parts = Vec::with_capacity(attachments.len() + 1);
    if !content.is_empty() {
        parts.push(UserPartDto::Text {
            text: content.to_owned(),
        });
    }
    for attachment in attachments {
        parts.push(match attachment {
            Attachment::Image {
                media_type, data, ..
            } => UserPartDto::ImageUrl {
                image_url: ImageUrlDto {
                    url: format!("data:{media_type};base64,{data}"),
                },
            },
            Attachment::Text { name, text, .. } => UserPartDto::Text {
                text: format!("<file name={}>\n{text}\n</file>", serde_json::json!(name)),
            },
            _ => return Err(EncodeError::Unsupported("this kind of attachment")),
        });
    }
    Ok(UserContentDto::Parts(parts))
}

#[derive(Serialize)]
struct ToolCallDto<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: FunctionCallDto<'a>,
    /// The provider's extras on the call as the decoder kept them
    /// ([`ai_core::message::MessageToolCall::raw`]), e.g. Gemini's thought signature, which
    /// Gemini requires back on the call.
    #[serde(skip_serializing_if = "Option::is_none")]
    extra_content: Option<&'a Value>,
}

#[derive(Serialize)]
struct FunctionCallDto<'a> {
    name: &'a str,
    arguments: &'a str,
}

fn message_dto(message: &Message) -> Result<MessageDto<'_>, EncodeError> {
    Ok(match message {
        Message::System { content } => MessageDto::System { content },
        Message::User {
            content,
            attachments,
        } => MessageDto::User {
            content: user_content(content, attachments)?,
        },
        Message::Assistant {
            content,
            reasoning,
            tool_calls,
            ..
        } => MessageDto::Assistant {
            // OpenAI wants `content` present: null beside tool calls, text otherwise.
            content: match (content.as_deref(), tool_calls.is_empty()) {
                (Some(text), _) => Some(text),
                (None, true) => Some(""),
                (None, false) => None,
            },
            reasoning_content: reasoning.as_deref().filter(|r| !r.is_empty()),
            tool_calls: tool_calls
                .iter()
                .map(|call| ToolCallDto {
                    id: &call.id,
                    kind: "function",
                    function: FunctionCallDto {
                        name: &call.name,
                        arguments: if call.arguments.trim().is_empty() {
                            "{}"
                        } else {
                            &call.arguments
                        },
                    },
                    extra_content: call.raw.as_ref().filter(|raw| !raw.is_null()),
                })
                .collect(),
        },
        Message::Tool {
            tool_call_id,
            content,
            ..
        } => MessageDto::Tool {
            tool_call_id,
            content,
        },
        _ => return Err(EncodeError::Unsupported("this kind of message")),
    })
}

fn to_value<T: Serialize>(value: &T) -> Value {
    // The DTOs above are plain structs of strings and values: serialization cannot
    // fail, but a failure would still be reported as null rather than a panic.
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// Encodes a request body.
///
/// Besides the messages and tools it sends the request's [`ai_core::completion::ModelSettings`]
/// (`temperature`, `max_tokens` or `max_completion_tokens`, `seed`,
/// `reasoning_effort`, `response_format`) and merges the extra fields of the settings
/// and then of the options at the top level, never over a field it set itself (see
/// [`EncodeOptions::extra_body`]). Assistant tool-call arguments in the history that
/// are not a JSON object are sent as `{}`: vLLM `json.loads` them unguarded and chat
/// templates iterate them as a mapping, so one bad call in the history would fail
/// every later turn. Valid objects are sent byte for byte as they were.
///
/// ```
/// use ai_core::{Message, RunContext, completion::{CompletionRequest, ModelSettings, ToolChoice}};
/// use wire_openai::encode::{EncodeOptions, encode_request};
///
/// let request = CompletionRequest {
///     model: "gpt-4o-mini".into(),
///     messages: vec![Message::user("hi")],
///     tools: Vec::new().into(),
///     tool_choice: ToolChoice::Auto,
///     context: RunContext::new("run", "trace"),
///     settings: ModelSettings::default(),
/// };
/// let encoded = encode_request(&request, &EncodeOptions::default()).unwrap();
/// assert_eq!(encoded.body["stream_options"]["include_usage"], true);
/// assert!(encoded.body.get("tools").is_none());
/// ```
pub fn encode_request(
    request: &CompletionRequest,
    options: &EncodeOptions,
) -> Result<EncodedRequest, EncodeError> {
    request.validate()?;
    let mut body = Map::new();
    body.insert("model".into(), Value::String(request.model.clone()));
    let mut messages: Vec<Value> = request
        .messages
        .iter()
        .map(|m| message_dto(m).map(|dto| to_value(&dto)))
        .collect::<Result<_, _>>()?;
    normalize_history_arguments(&mut messages);
    body.insert("messages".into(), Value::Array(messages));

    let mut strict_reports = Vec::new();
    if !request.tools.is_empty() {
        // A named choice as `required` offers only that tool.
        let narrowed = match &request.tool_choice {
            ToolChoice::Tool(id)
                if options.named_tool_choice == NamedToolChoice::RequiredWithOnlyThatTool =>
            {
                Some(id)
            }
            _ => None,
        };
        let mut tools = Vec::with_capacity(request.tools.len());
        for spec in request.tools.iter() {
            if narrowed.is_some_and(|id| *id != spec.id) {
                continue;
            }
            let (tool, report) = encode_tool(spec, options.strict);
            tools.push(tool);
            strict_reports.extend(report);
        }
        body.insert("tools".into(), Value::Array(tools));
        let choice = match &request.tool_choice {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::None => json!("none"),
            ToolChoice::Required => json!("required"),
            ToolChoice::Tool(_) if narrowed.is_some() => json!("required"),
            ToolChoice::Tool(id) => {
                json!({"type": "function", "function": {"name": id.as_str()}})
            }
            _ => return Err(EncodeError::Unsupported("this tool choice")),
        };
        body.insert("tool_choice".into(), choice);
        if let Some(parallel) = options.parallel_tool_calls {
            body.insert("parallel_tool_calls".into(), Value::Bool(parallel));
        }
    }

    if let Some(max_tokens) = request.settings.max_tokens {
        let field = match options.max_tokens_field {
            MaxTokensField::MaxTokens => "max_tokens",
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
        };
        body.insert(field.into(), Value::from(max_tokens));
    }
    if let Some(temperature) = request.settings.temperature {
        // Through the shortest decimal form, so 0.7f32 is sent as 0.7, not
        // 0.699999988079071. (`validate` made sure it is finite.)
        let number = temperature
            .to_string()
            .parse::<f64>()
            .ok()
            .and_then(serde_json::Number::from_f64)
            .ok_or(CompletionRequestError::InvalidTemperature)?;
        body.insert("temperature".into(), Value::Number(number));
    }
    let settings = &request.settings;
    if let Some(seed) = settings.seed {
        body.insert("seed".into(), Value::from(seed));
    }
    if let Some(effort) = &settings.reasoning_effort {
        body.insert("reasoning_effort".into(), Value::String(effort.clone()));
    }
    let mut response_strict = None;
    if let Some(format) = &settings.response_format {
        let (value, strict) = response_format(format)?;
        body.insert("response_format".into(), value);
        response_strict = strict;
    }
    body.insert("stream".into(), Value::Bool(options.stream));
    if options.stream && options.include_usage {
        body.insert("stream_options".into(), json!({"include_usage": true}));
    }
    // The request's extras before the endpoint's; neither replaces a set field.
    add_extra_body(&mut body, &settings.extra_body);
    add_extra_body(&mut body, &options.extra_body);
    Ok(EncodedRequest {
        body: Value::Object(body),
        strict: strict_reports,
        response_strict,
    })
}

/// OpenAI's `response_format`, and for a strict JSON schema whether it could be sent
/// strict. A strict schema is rewritten to OpenAI's strict rules (every property
/// required, optional ones nullable, no additional properties); one that cannot be
/// is sent as given with `strict: false`, since the answer is still checked by
/// whoever asked for it.
fn response_format(
    format: &ResponseFormat,
) -> Result<(Value, Option<Result<(), NotStrict>>), EncodeError> {
    Ok(match format {
        ResponseFormat::Text => (json!({"type": "text"}), None),
        ResponseFormat::JsonObject => (json!({"type": "json_object"}), None),
        ResponseFormat::JsonSchema {
            name,
            schema,
            strict: false,
        } => (
            json!({
                "type": "json_schema",
                "json_schema": {"name": name, "schema": schema, "strict": false}
            }),
            None,
        ),
        ResponseFormat::JsonSchema {
            name,
            schema,
            strict: true,
        } => match strict_schema(schema) {
            Ok(strict) => (
                json!({
                    "type": "json_schema",
                    "json_schema": {"name": name, "schema": strict, "strict": true}
                }),
                Some(Ok(())),
            ),
            Err(why) => {
                tracing::warn!(schema = %name, %why, "answer schema sent without strict");
                (
                    json!({
                        "type": "json_schema",
                        "json_schema": {"name": name, "schema": schema, "strict": false}
                    }),
                    Some(Err(why)),
                )
            }
        },
        _ => return Err(EncodeError::Unsupported("this response format")),
    })
}

/// Replaces the `arguments` of assistant tool calls in encoded `messages` by `{}`
/// when they are not a JSON object: truncated or malformed text a model produced
/// (the run answered that call with an `invalid_json` result), or a JSON value of
/// another type. Servers parse history arguments: vLLM `json.loads` them unguarded
/// and chat templates iterate them as a mapping, so one bad call in the history would
/// fail every later turn. Valid objects are sent byte for byte as they were.
fn normalize_history_arguments(messages: &mut [Value]) {
    for message in messages {
        let Some(Value::Array(calls)) = message.get_mut("tool_calls") else {
            continue;
        };
        for call in calls {
            if let Some(Value::String(arguments)) = call.pointer_mut("/function/arguments")
                && !is_json_object(arguments)
            {
                "{}".clone_into(arguments);
            }
        }
    }
}

/// Whether `text` is one JSON object (checked without building it).
fn is_json_object(text: &str) -> bool {
    struct Object;
    struct ObjectVisitor;
    impl<'de> serde::de::Visitor<'de> for ObjectVisitor {
        type Value = Object;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Object, A::Error> {
            while map
                .next_entry::<serde::de::IgnoredAny, serde::de::IgnoredAny>()?
                .is_some()
            {}
            Ok(Object)
        }
    }
    impl<'de> Deserialize<'de> for Object {
        fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            deserializer.deserialize_map(ObjectVisitor)
        }
    }
    serde_json::from_str::<Object>(text).is_ok()
}

fn encode_tool(spec: &ToolSpec, mode: StrictMode) -> (Value, Option<StrictReport>) {
    let name = spec.id.as_str();
    let plain = |strict: Option<bool>, parameters: &Value| {
        to_value(&ToolDto {
            kind: "function",
            function: FunctionDefDto {
                name,
                description: &spec.description,
                parameters,
                strict,
            },
        })
    };
    match mode {
        StrictMode::Off => (plain(None, &spec.input_schema), None),
        StrictMode::WhenPossible => match strict_schema(&spec.input_schema) {
            Ok(schema) => (
                plain(Some(true), &schema),
                Some(StrictReport {
                    tool: name.to_owned(),
                    outcome: Ok(()),
                }),
            ),
            Err(why) => {
                tracing::warn!(tool = name, reason = %why, "sending tool schema without strict mode");
                (
                    plain(None, &spec.input_schema),
                    Some(StrictReport {
                        tool: name.to_owned(),
                        outcome: Err(why),
                    }),
                )
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_rewrites_nested_objects_arrays_and_defs() {
        let schema = json!({
            "type": "object",
            "properties": {
                "filter": {"type": "object", "properties": {"tag": {"type": "string", "enum": ["a", "b"]}}},
                "items": {"type": "array", "items": {"$ref": "#/$defs/item"}},
                "mode": {"anyOf": [{"type": "string"}, {"type": "integer"}]}
            },
            "required": ["items"],
            "$defs": {"item": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}
        });
        let strict = strict_schema(&schema).unwrap();
        assert_eq!(
            strict,
            json!({
                "type": "object",
                "properties": {
                    "filter": {"type": ["object", "null"], "properties": {
                        "tag": {"type": ["string", "null"], "enum": ["a", "b", null]}},
                        "required": ["tag"], "additionalProperties": false},
                    "items": {"type": "array", "items": {"$ref": "#/$defs/item"}},
                    "mode": {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]}
                },
                "required": ["filter", "items", "mode"],
                "additionalProperties": false,
                "$defs": {"item": {"type": "object", "properties": {"n": {"type": "integer"}},
                    "required": ["n"], "additionalProperties": false}}
            })
        );
    }

    #[test]
    fn strict_refusals_name_path_and_rule() {
        let cases = [
            (
                json!({"type": "string"}),
                "#",
                NotStrictReason::RootNotObject,
            ),
            (
                json!({"type": "object", "properties": {"m": {"type": "object", "additionalProperties": {"type": "string"}}}}),
                "#/properties/m",
                NotStrictReason::OpenObject,
            ),
            (
                json!({"type": "object", "properties": {"m": {"type": "object"}}}),
                "#/properties/m",
                NotStrictReason::OpenObject,
            ),
            (
                json!({"type": "object", "properties": {"s": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}}),
                "#/properties/s",
                NotStrictReason::UnsupportedKeyword("oneOf".into()),
            ),
            (
                json!({"type": "object", "properties": {"s": {"$ref": "https://x/y"}}}),
                "#/properties/s",
                NotStrictReason::NonLocalRef,
            ),
            (
                json!({"type": "object", "properties": {"s": {"description": "anything"}}}),
                "#/properties/s",
                NotStrictReason::Untyped,
            ),
        ];
        for (schema, path, reason) in cases {
            let err = strict_schema(&schema).unwrap_err();
            assert_eq!(
                (err.path.as_str(), &err.reason),
                (path, &reason),
                "{schema}"
            );
        }
        let mut deep = json!({"type": "string"});
        for _ in 0..12 {
            deep = json!({"type": "object", "properties": {"x": deep}, "required": ["x"]});
        }
        assert_eq!(
            strict_schema(&deep).unwrap_err().reason,
            NotStrictReason::TooDeep(10)
        );
    }

    #[test]
    fn validation_keywords_strict_mode_refuses_are_removed_not_fatal() {
        let schema = json!({"type": "object", "properties": {
            "s": {"type": "string", "minLength": 1, "maxLength": 9},
            "n": {"type": "integer", "format": "uint32", "minimum": 0},
            "when": {"type": "string", "format": "date-time"},
            "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true}
        }, "required": ["s"]});
        let strict = strict_schema(&schema).unwrap();
        assert_eq!(strict["properties"]["s"], json!({"type": "string"}));
        // Bounds strict mode takes stay; a format it does not know goes.
        assert_eq!(
            strict["properties"]["n"],
            json!({"type": ["integer", "null"], "minimum": 0})
        );
        assert_eq!(strict["properties"]["when"]["format"], "date-time");
        assert_eq!(strict["properties"]["tags"].get("uniqueItems"), None);
    }

    #[test]
    fn only_json_objects_count_as_history_arguments() {
        for ok in [
            "{}",
            r#" {"a": [1, {"b": null}], "c": "}"} "#,
            r#"{"a":"\u00e9"}"#,
        ] {
            assert!(is_json_object(ok), "{ok}");
        }
        for bad in [
            "",
            "   ",
            r#"{"city": "Par"#,
            "not json",
            "[1,2]",
            r#""{}""#,
            "null",
            "42",
            r#"{"a":1} trailing"#,
            r#"{"a":1}{"b":2}"#,
        ] {
            assert!(!is_json_object(bad), "{bad}");
        }
    }

    #[test]
    fn relax_removes_only_nulls_of_optional_non_nullable_properties() {
        let schema = json!({
            "type": "object",
            "properties": {
                "a": {"type": "string"},
                "b": {"type": ["string", "null"]},
                "c": {"type": "object", "properties": {"d": {"type": "integer"}}},
                "e": {"type": "array", "items": {"$ref": "#/$defs/i"}}
            },
            "required": ["a"],
            "$defs": {"i": {"type": "object", "properties": {"f": {"type": "string"}}}}
        });
        let relaxed = relax_strict_arguments(
            r#"{"a":null,"b":null,"c":{"d":null},"e":[{"f":null},{"f":"x"}]}"#,
            &schema,
        )
        .unwrap();
        let relaxed: Value = serde_json::from_str(&relaxed).unwrap();
        assert_eq!(
            relaxed,
            json!({"a": null, "b": null, "c": {}, "e": [{}, {"f": "x"}]})
        );
        assert_eq!(relax_strict_arguments(r#"{"a":"x"}"#, &schema), None);
        assert_eq!(relax_strict_arguments("not json", &schema), None);
    }
}
