//! The request body: the rules of `wire_gemini::encode`, checked on the JSON,
//! and a decoded turn sent back with its signatures on the same parts.

use std::path::Path;

use agent_testing::wire_fixtures::assistant_message;
use ai_core::completion::{
    CompletionFinal, CompletionRequest, ModelSettings, ResponseFormat, ToolChoice,
};
use ai_core::message::{AssistantBlock, Attachment, MessageToolCall};
use ai_core::{Message, RunContext, ToolEffect, ToolId, ToolSpec};
use serde_json::{Value, json};
use wire_gemini::decode::decode_stream;
use wire_gemini::encode::{GeminiOptions, Thinking, encode_request};

fn request(messages: Vec<Message>) -> CompletionRequest {
    CompletionRequest {
        model: "gemini-test".into(),
        messages,
        tools: vec![ToolSpec::new(
            ToolId::core("read_file").unwrap(),
            "Reads a file.",
            json!({
                "type": "object",
                "additionalProperties": false,
                "properties": {"path": {"$ref": "#/$defs/path"}},
                "required": ["path"],
                "$defs": {"path": {"type": "string", "description": "A path."}}
            }),
            ToolEffect::ReadOnly,
        )]
        .into(),
        tool_choice: ToolChoice::Auto,
        context: RunContext::new("run", "trace"),
        settings: ModelSettings::default(),
    }
}

/// The request body of the next call: `turn` sent back after the user's message,
/// with an `ok` result for each of its calls.
fn sent_back(turn: &CompletionFinal) -> Value {
    let mut messages = vec![Message::user("Go."), assistant_message(turn)];
    for call in &turn.tool_calls {
        messages.push(Message::Tool {
            tool_call_id: call.id.clone(),
            content: "ok".into(),
            is_error: false,
        });
    }
    encode_request(&request(messages), &GeminiOptions::default()).unwrap()
}

fn fixture(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/stream")
        .join(name);
    std::fs::read(path).unwrap()
}

/// Every `thoughtSignature` in `body`, in order.
fn signatures(body: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(body);
    text.split("\"thoughtSignature\":\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next().map(str::to_owned))
        .collect()
}

#[test]
fn system_tools_choice_and_config() {
    let mut req = request(vec![
        Message::system("Be brief."),
        Message::user("Read a.txt"),
    ]);
    req.tool_choice = ToolChoice::Tool(ToolId::core("read_file").unwrap());
    req.settings.temperature = Some(0.5);
    req.settings.max_tokens = Some(256);
    let options = GeminiOptions {
        thinking: Some(Thinking {
            include_thoughts: true,
            budget_tokens: Some(1024),
        }),
        ..GeminiOptions::default()
    };
    let body = encode_request(&req, &options).unwrap();
    assert_eq!(
        body["systemInstruction"],
        json!({"parts": [{"text": "Be brief."}]})
    );
    assert_eq!(
        body["contents"],
        json!([{"role": "user", "parts": [{"text": "Read a.txt"}]}])
    );
    assert_eq!(
        body["tools"][0]["functionDeclarations"][0],
        json!({
            "name": "core__read_file",
            "description": "Reads a file.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string", "description": "A path."}},
                "required": ["path"]
            }
        })
    );
    assert_eq!(
        body["toolConfig"],
        json!({"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["core__read_file"]}})
    );
    assert_eq!(
        body["generationConfig"],
        json!({
            "temperature": 0.5,
            "maxOutputTokens": 256,
            "thinkingConfig": {"includeThoughts": true, "thinkingBudget": 1024}
        })
    );
    for (choice, mode) in [
        (ToolChoice::Auto, "AUTO"),
        (ToolChoice::None, "NONE"),
        (ToolChoice::Required, "ANY"),
    ] {
        req.tool_choice = choice;
        let body = encode_request(&req, &GeminiOptions::default()).unwrap();
        assert_eq!(body["toolConfig"]["functionCallingConfig"]["mode"], mode);
    }
}

#[test]
fn images_results_and_json_answers() {
    let mut req = request(vec![
        Message::User {
            content: "What is this?".into(),
            attachments: vec![Attachment::Image {
                media_type: "image/png".into(),
                data: "iVBORw0KGgo=".into(),
                name: None,
            }],
        },
        Message::Assistant {
            content: None,
            reasoning: None,
            tool_calls: vec![MessageToolCall {
                id: "call_7".into(),
                name: "core__read_file".into(),
                arguments: "not json".into(),
                raw: None,
            }],
            blocks: vec![],
        },
        Message::tool_error("call_7", "no such file"),
    ]);
    req.settings.response_format = Some(ResponseFormat::JsonObject);
    let body = encode_request(&req, &GeminiOptions::default()).unwrap();
    assert_eq!(
        body["contents"][0]["parts"][1],
        json!({"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}})
    );
    // A minted id is not sent; the arguments that are not an object are `{}`.
    assert_eq!(
        body["contents"][1],
        json!({"role": "model", "parts": [{"functionCall": {"name": "core__read_file", "args": {}}}]})
    );
    assert_eq!(
        body["contents"][2],
        json!({"role": "user", "parts": [{"functionResponse": {
            "name": "core__read_file", "response": {"error": "no such file"}
        }}]})
    );
    assert_eq!(
        body["generationConfig"]["responseMimeType"],
        "application/json"
    );
}

#[test]
fn a_typed_answer_goes_out_as_a_response_schema_in_gemini_s_subset() {
    let mut req = request(vec![Message::user("Where is order 7?")]);
    req.settings.response_format = Some(ResponseFormat::JsonSchema {
        name: "Order".into(),
        schema: json!({
            "type": "object",
            "properties": {
                "id": {"type": "integer", "format": "uint32", "minimum": 0},
                "note": {"type": ["string", "null"]},
                "lines": {"type": "array", "items": {"$ref": "#/$defs/Line"}}
            },
            "required": ["id", "lines"],
            "additionalProperties": false,
            "$defs": {"Line": {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}}
        }),
        strict: true,
    });
    let body = encode_request(&req, &GeminiOptions::default()).unwrap();
    let config = &body["generationConfig"];
    assert_eq!(config["responseMimeType"], "application/json");
    assert_eq!(
        config["responseSchema"],
        json!({
            "type": "object",
            "properties": {
                "id": {"type": "integer", "minimum": 0},
                "note": {"type": "string", "nullable": true},
                "lines": {"type": "array", "items": {
                    "type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]
                }}
            },
            "required": ["id", "lines"]
        })
    );
}

#[test]
fn a_decoded_turn_goes_back_with_every_signature_on_its_part() {
    for name in [
        "captured_tool_call_signature.sse",
        "captured_signature_on_empty_text.sse",
        "constructed_thoughts_and_cache.sse",
        "constructed_parallel_calls_with_ids.sse",
    ] {
        let stream = fixture(name);
        let (_, turn) = decode_stream(&stream, "gemini-test").unwrap();
        let body = sent_back(&turn);
        let sent = serde_json::to_vec(&body).unwrap();
        assert_eq!(signatures(&sent), signatures(&stream), "{name}");
        let model = &body["contents"][1];
        assert_eq!(model["role"], "model", "{name}");
        let call_parts = model["parts"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p.get("functionCall").is_some());
        for (call, part) in turn.tool_calls.iter().zip(call_parts) {
            assert_eq!(part["functionCall"]["name"], call.name.as_str(), "{name}");
            let signature = call
                .raw
                .as_ref()
                .and_then(|raw| raw["google"]["thought_signature"].as_str());
            assert_eq!(part["thoughtSignature"].as_str(), signature, "{name}");
        }
    }
}

#[test]
fn provider_ids_go_back_on_the_call_and_its_response() {
    let (_, turn) =
        decode_stream(&fixture("constructed_parallel_calls_with_ids.sse"), "m").unwrap();
    let body = sent_back(&turn);
    let parts = &body["contents"][1]["parts"];
    assert_eq!(parts[1]["functionCall"]["id"], "fc-a1");
    assert_eq!(
        parts[3]["functionCall"].get("id"),
        None,
        "a minted id stays ours"
    );
    let responses = &body["contents"][2]["parts"];
    assert_eq!(responses[0]["functionResponse"]["id"], "fc-a1");
    assert_eq!(responses[1]["functionResponse"]["id"], "fc-b2");
    assert_eq!(responses[2]["functionResponse"].get("id"), None);
    assert_eq!(responses[2]["functionResponse"]["name"], "core__list");
}

#[test]
fn reasoning_another_provider_signed_never_goes_out() {
    let messages = vec![
        Message::user("Hi"),
        Message::Assistant {
            content: Some("Hello".into()),
            reasoning: Some("thinking".into()),
            tool_calls: vec![],
            blocks: vec![
                AssistantBlock::Reasoning {
                    text: "thinking".into(),
                    signature: Some("anthropic-signature".into()),
                    item_id: None,
                },
                AssistantBlock::WireFields {
                    wire: "other".into(),
                    fields: json!({"x": 1}),
                },
                AssistantBlock::Text {
                    text: "Hello".into(),
                },
            ],
        },
    ];
    let body = encode_request(&request(messages), &GeminiOptions::default()).unwrap();
    assert_eq!(
        body["contents"][1],
        json!({"role": "model", "parts": [{"text": "Hello"}]})
    );
    let text: Value = body;
    assert!(!text.to_string().contains("anthropic-signature"));
}
