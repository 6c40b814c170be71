//! Encoder goldens: each `fixtures/responses/encode/<case>.input.json` (a request
//! and the encode options) encodes to the body, or the error, in
//! `snapshots/<case>.snap` (pretty JSON, sorted keys). A snapshot without its input
//! fails the test, so a removed case leaves no stale golden behind.

use std::fs;
use std::path::{Path, PathBuf};

use ai_core::completion::{CompletionRequest, ModelSettings, ToolChoice};
use ai_core::{Message, RunContext, ToolEffect, ToolId, ToolSpec};
use serde::Deserialize;
use serde_json::{Value, json};
use wire_responses::{ResponsesEncodeOptions, encode_request};

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
}

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/responses/encode")
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
        settings: input.request.settings,
    };
    let mut options = ResponsesEncodeOptions::default();
    options.stream = input.options.stream;
    match encode_request(&request, &options) {
        Ok(body) => json!({ "body": body }),
        Err(error) => json!({ "error": error.to_string() }),
    }
}

#[test]
fn every_encode_fixture_matches_its_snapshot() {
    let mut cases: Vec<(String, PathBuf)> = fs::read_dir(fixture_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter_map(|path| {
            let name = path.file_name()?.to_str()?;
            let case = name.strip_suffix(".input.json")?.to_owned();
            Some((case, path))
        })
        .collect();
    cases.sort();
    assert!(cases.len() >= 6, "fixtures missing");
    for (case, path) in &cases {
        let input: Input = serde_json::from_str(&fs::read_to_string(path).unwrap())
            .unwrap_or_else(|e| panic!("{case}: {e}"));
        let mut value = encode_case(input);
        value.sort_all_objects();
        let mut settings = insta::Settings::clone_current();
        settings.set_snapshot_path(fixture_dir().join("snapshots"));
        settings.set_prepend_module_to_snapshot(false);
        settings.set_omit_expression(true);
        settings.set_description(format!(
            "fixtures/responses/encode/{case}.input.json: the request body (or the error)"
        ));
        settings.bind(|| {
            insta::assert_snapshot!(case.clone(), serde_json::to_string_pretty(&value).unwrap());
        });
    }
    let snapshots = fixture_dir().join("snapshots");
    for entry in fs::read_dir(&snapshots).into_iter().flatten() {
        let path = entry.unwrap().path();
        let Some(case) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".snap"))
        else {
            continue;
        };
        assert!(
            cases.iter().any(|(c, _)| c == case),
            "{} has no input",
            path.display()
        );
    }
}
