//! The request body: every rule of `wire_anthropic::encode`, checked on the JSON.

use ai_core::completion::{CompletionRequest, CompletionRequestError, ModelSettings, ToolChoice};
use ai_core::message::{AssistantBlock, Attachment, MessageToolCall};
use ai_core::{Message, RunContext, ToolEffect, ToolId, ToolSpec};
use serde_json::json;
use wire_anthropic::encode::{AnthropicEncodeError, AnthropicEncodeOptions, encode_request};

fn request(messages: Vec<Message>) -> CompletionRequest {
    CompletionRequest {
        model: "claude-test".into(),
        messages,
        tools: vec![ToolSpec::new(
            ToolId::core("get_current_time").unwrap(),
            "The time.",
            json!({"type": "object", "properties": {"timezone": {"type": "string"}}}),
            ToolEffect::ReadOnly,
        )]
        .into(),
        tool_choice: ToolChoice::Auto,
        context: RunContext::new("run", "trace"),
        settings: ModelSettings::default(),
    }
}

fn thinking_turn() -> Message {
    Message::Assistant {
        content: None,
        reasoning: Some("I will call the tool.".into()),
        tool_calls: vec![MessageToolCall {
            id: "toolu_02".into(),
            name: "core__get_current_time".into(),
            arguments: r#"{"timezone":"UTC"}"#.into(),
            raw: None,
        }],
        blocks: vec![
            AssistantBlock::Reasoning {
                text: "I will call the tool.".into(),
                signature: Some("c2lnbmVk".into()),
                item_id: None,
            },
            AssistantBlock::RedactedReasoning {
                data: "b3BhcXVl".into(),
            },
            AssistantBlock::ToolCall {
                id: "toolu_02".into(),
            },
        ],
    }
}

#[test]
fn a_tool_turn_after_thinking_is_sent_back_as_it_came() {
    let body = encode_request(
        &request(vec![
            Message::system("Be brief."),
            Message::user("What time is it?"),
            thinking_turn(),
            Message::tool_error("toolu_02", "execution_failed: the clock is gone"),
            Message::user("And now?"),
        ]),
        &AnthropicEncodeOptions::default(),
    )
    .unwrap();
    assert_eq!(
        body["system"],
        json!([{"type": "text", "text": "Be brief."}])
    );
    assert_eq!(body["max_tokens"], 4096);
    assert_eq!(body["stream"], true);
    assert_eq!(body["tool_choice"], json!({"type": "auto"}));
    assert_eq!(body["tools"][0]["input_schema"]["type"], "object");
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3, "{body:#}");
    assert_eq!(
        messages[1]["content"],
        json!([
            {"type": "thinking", "thinking": "I will call the tool.", "signature": "c2lnbmVk"},
            {"type": "redacted_thinking", "data": "b3BhcXVl"},
            {"type": "tool_use", "id": "toolu_02", "name": "core__get_current_time", "input": {"timezone": "UTC"}}
        ])
    );
    // The result first, then the user's next words, in one user message.
    assert_eq!(
        messages[2]["content"],
        json!([
            {"type": "tool_result", "tool_use_id": "toolu_02", "content": "execution_failed: the clock is gone", "is_error": true},
            {"type": "text", "text": "And now?"}
        ])
    );
}

#[test]
fn caching_marks_system_tools_and_the_last_user_block() {
    let options = AnthropicEncodeOptions {
        cache: true,
        thinking_budget_tokens: Some(8000),
        ..AnthropicEncodeOptions::default()
    };
    let body = encode_request(
        &request(vec![Message::system("S"), Message::user("Q")]),
        &options,
    )
    .unwrap();
    let mark = json!({"type": "ephemeral"});
    assert_eq!(body["system"][0]["cache_control"], mark);
    assert_eq!(body["tools"][0]["cache_control"], mark);
    assert_eq!(body["messages"][0]["content"][0]["cache_control"], mark);
    assert_eq!(
        body["thinking"],
        json!({"type": "enabled", "budget_tokens": 8000})
    );
    assert!(body["max_tokens"].as_u64().unwrap() > 8000);
}

#[test]
fn choices_attachments_and_refusals() {
    let mut req = request(vec![Message::user_with(
        "Look",
        vec![
            Attachment::from_bytes("dot.png", None, b"\x89PNG\r\n\x1a\n\0", 100).unwrap(),
            Attachment::from_bytes("n.txt", None, b"milk", 100).unwrap(),
        ],
    )]);
    req.tool_choice = ToolChoice::Required;
    let body = encode_request(&req, &AnthropicEncodeOptions::default()).unwrap();
    assert_eq!(body["tool_choice"], json!({"type": "any"}));
    let content = &body["messages"][0]["content"];
    assert_eq!(content[1]["source"]["media_type"], "image/png");
    assert_eq!(content[2]["text"], "<file name=\"n.txt\">\nmilk\n</file>");
    req.tool_choice = ToolChoice::Tool(ToolId::core("get_current_time").unwrap());
    let body = encode_request(&req, &AnthropicEncodeOptions::default()).unwrap();
    assert_eq!(
        body["tool_choice"],
        json!({"type": "tool", "name": "core__get_current_time"})
    );
    req.tool_choice = ToolChoice::Tool(ToolId::core("other").unwrap());
    assert!(matches!(
        encode_request(&req, &AnthropicEncodeOptions::default()),
        Err(AnthropicEncodeError::Request(
            CompletionRequestError::UnknownToolChoice(_)
        ))
    ));
    // Reasoning the provider did not sign is not sent back.
    let unsigned = Message::Assistant {
        content: Some("Hi".into()),
        reasoning: Some("hm".into()),
        tool_calls: Vec::new(),
        blocks: vec![AssistantBlock::Reasoning {
            text: "hm".into(),
            signature: None,
            item_id: None,
        }],
    };
    let body = encode_request(
        &request(vec![Message::user("x"), unsigned]),
        &AnthropicEncodeOptions::default(),
    )
    .unwrap();
    assert_eq!(
        body["messages"][1]["content"],
        json!([{"type": "text", "text": "Hi"}])
    );
}
