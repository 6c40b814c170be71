//! Encoder snapshots: each `<case>.input.json` (a request and options) encodes to
//! the body (or error) in `snapshots/<case>.snap` (pretty JSON with sorted keys).
//!
//! A request's `settings` is [`ai_core::completion::ModelSettings`] as JSON; the older
//! `max_tokens` / `temperature` keys beside it fill the same fields.

use std::fs;
use std::path::Path;

use ai_core::{
    Message, RunContext, ToolEffect, ToolId, ToolSpec,
    completion::{CompletionRequest, ModelSettings, ToolChoice},
};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use wire_openai::encode::{
    EncodeOptions, MaxTokensField, NamedToolChoice, StrictMode, encode_request,
};

use crate::common::{
    assert_no_stale_snapshots, check_all_cases, fixture_dir, fixtures, snapshot_json,
    snapshot_settings,
};

#[derive(Deserialize)]
struct Input {
    request: RequestInput,
    options: OptionsInput,
}

#[derive(Deserialize)]
struct RequestInput {
    model: String,
    messages: Vec<Message>,
    tools: Vec<ToolInput>,
    tool_choice: ToolChoice,
    #[serde(default)]
    max_tokens: Option<u32>,
    #[serde(default)]
    temperature: Option<f32>,
    #[serde(default)]
    settings: ModelSettings,
}

#[derive(Deserialize)]
struct ToolInput {
    id: ToolId,
    description: String,
    input_schema: Value,
    effect: ToolEffect,
}

#[derive(Deserialize)]
struct OptionsInput {
    stream: bool,
    include_usage: bool,
    strict: String,
    max_tokens_field: String,
    parallel_tool_calls: Option<bool>,
    /// `object` (the default) or `required_with_only_that_tool`.
    #[serde(default)]
    named_tool_choice: String,
    extra_body: Map<String, Value>,
}

fn encode_case(input: Input) -> Value {
    let request = CompletionRequest {
        model: input.request.model,
        messages: input.request.messages,
        tools: input
            .request
            .tools
            .into_iter()
            .map(|t| ToolSpec::new(t.id, t.description, t.input_schema, t.effect))
            .collect(),
        tool_choice: input.request.tool_choice,
        context: RunContext::new("run-1", "trace-1"),
        settings: ModelSettings {
            max_tokens: input
                .request
                .max_tokens
                .or(input.request.settings.max_tokens),
            temperature: input
                .request
                .temperature
                .or(input.request.settings.temperature),
            ..input.request.settings
        },
    };
    let options = EncodeOptions {
        stream: input.options.stream,
        include_usage: input.options.include_usage,
        strict: match input.options.strict.as_str() {
            "when_possible" => StrictMode::WhenPossible,
            _ => StrictMode::Off,
        },
        max_tokens_field: match input.options.max_tokens_field.as_str() {
            "max_completion_tokens" => MaxTokensField::MaxCompletionTokens,
            _ => MaxTokensField::MaxTokens,
        },
        parallel_tool_calls: input.options.parallel_tool_calls,
        named_tool_choice: match input.options.named_tool_choice.as_str() {
            "" | "object" => NamedToolChoice::Object,
            "required_with_only_that_tool" => NamedToolChoice::RequiredWithOnlyThatTool,
            other => panic!("unknown named_tool_choice `{other}`"),
        },
        extra_body: input.options.extra_body,
    };
    match encode_request(&request, &options) {
        Ok(encoded) => {
            let strict: Vec<Value> = encoded
                .strict
                .iter()
                .map(|report| match &report.outcome {
                    Ok(()) => json!({"tool": report.tool, "strict": true}),
                    Err(why) => {
                        json!({"tool": report.tool, "strict": false, "why": why.to_string()})
                    }
                })
                .collect();
            json!({"body": encoded.body, "strict": strict})
        }
        Err(error) => json!({"error": error.to_string()}),
    }
}

fn check(case: &str, path: &Path) {
    let input: Input = serde_json::from_str(&fs::read_to_string(path).unwrap())
        .unwrap_or_else(|e| panic!("{case}: bad input: {e}"));
    let rendered = snapshot_json(&encode_case(input));
    snapshot_settings(
        "encode",
        path,
        "encoded request body and per-tool strict verdicts (or the encoding error)",
    )
    .bind(|| insta::assert_snapshot!(case, rendered));
}

#[test]
fn every_encode_fixture_matches_its_snapshot() {
    check_all_cases(&fixtures("encode", ".input.json"), check);
    assert_no_stale_snapshots("encode", ".input.json");
}

#[test]
fn tool_call_arguments_are_json_objects_and_history_round_trips() {
    for case in ["history_with_tool_calls", "history_invalid_arguments"] {
        let path = fixture_dir("encode").join(format!("{case}.input.json"));
        let input: Input = serde_json::from_str(&fs::read_to_string(path).unwrap()).unwrap();
        let body = &encode_case(input)["body"];
        for message in body["messages"].as_array().unwrap() {
            for call in message["tool_calls"].as_array().into_iter().flatten() {
                let arguments = call["function"]["arguments"]
                    .as_str()
                    .expect("arguments is a string");
                let parsed = serde_json::from_str::<Value>(arguments).expect("arguments hold JSON");
                assert!(parsed.is_object(), "{case}: {arguments}");
                assert_eq!(call["type"], "function");
            }
            if message["role"] == "tool" {
                assert!(message["content"].is_string() && message["tool_call_id"].is_string());
            }
        }
    }
}

#[test]
fn history_arguments_that_are_no_json_object_are_sent_as_empty_objects() {
    let path = fixture_dir("encode").join("history_invalid_arguments.input.json");
    let input: Input = serde_json::from_str(&fs::read_to_string(path).unwrap()).unwrap();
    let sent: Vec<String> = encode_case(input)["body"]["messages"][1]["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|call| call["function"]["arguments"].as_str().unwrap().to_owned())
        .collect();
    // Truncated, not JSON, an array, two objects: `{}`. A valid object: verbatim.
    assert_eq!(sent, ["{}", "{}", "{}", "{}", r#" {"city" : "Rome"} "#]);
}
