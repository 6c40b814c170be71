//! Encoder snapshots: each `<case>.input.json` (a request and options) encodes to
//! the body (or error) in `snapshots/<case>.snap` (pretty JSON with sorted keys).
//!
//! A request's `settings` is [`ai_core::completion::ModelSettings`] as JSON; the older
//! `max_tokens` / `temperature` keys beside it fill the same fields (see
//! [`agent_testing::wire_fixtures::RequestInput`]).

use std::path::Path;

use agent_testing::wire_fixtures::{EncodeInput, read_input};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use wire_openai::encode::{
    EncodeOptions, MaxTokensField, NamedToolChoice, StrictMode, encode_request,
};

use crate::common::fixture_set;

type Input = EncodeInput<OptionsInput>;

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
    let request = input.request.into_request();
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

/// The input of fixture `case`.
fn encode_input(case: &str) -> Input {
    read_input(case, &fixture_set("encode", ".input.json").path(case))
}

fn check(case: &str, path: &Path) {
    fixture_set("encode", ".input.json").assert_snapshot(
        case,
        "encoded request body and per-tool strict verdicts (or the encoding error)",
        Some(path),
        &encode_case(read_input(case, path)),
    );
}

#[test]
fn every_encode_fixture_matches_its_snapshot() {
    fixture_set("encode", ".input.json").check_each(check);
}

#[test]
fn tool_call_arguments_are_json_objects_and_history_round_trips() {
    for case in ["history_with_tool_calls", "history_invalid_arguments"] {
        let body = &encode_case(encode_input(case))["body"];
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
    let sent: Vec<String> =
        encode_case(encode_input("history_invalid_arguments"))["body"]["messages"][1]["tool_calls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|call| call["function"]["arguments"].as_str().unwrap().to_owned())
            .collect();
    // Truncated, not JSON, an array, two objects: `{}`. A valid object: verbatim.
    assert_eq!(sent, ["{}", "{}", "{}", "{}", r#" {"city" : "Rome"} "#]);
}
