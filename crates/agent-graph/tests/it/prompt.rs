//! Prompt sections: render goldens (nested, disabled, overridden), construction and
//! render errors, and the prompt hash.

use std::sync::Arc;

use agent_graph::prompt::{Params, Prompt, PromptError, Section, ToolOverride, prompt_hash};
use agent_testing::Echo;
use ai_core::{ToolEffect, tool::RegisteredTool};
use serde_json::{Value, json};

use crate::support::spec;

fn tool(name: &str) -> RegisteredTool {
    RegisteredTool {
        spec: spec(
            name,
            ToolEffect::ReadOnly,
            json!({"type": "object",
                   "properties": {"query": {"type": "string", "description": "What to look for."}},
                   "required": ["query"], "additionalProperties": false}),
        ),
        executor: Arc::new(Echo),
    }
}

fn params(value: Value) -> Params {
    value.as_object().unwrap().clone()
}

/// A render as a JSON document for the golden: text, sections and offered specs.
fn golden(prompt: &Prompt, params: &Params) -> Value {
    let rendered = prompt.render(params).unwrap();
    json!({
        "text": rendered.text,
        "sections": rendered.sections,
        "tools": rendered.tools.iter().map(|t| json!({
            "id": t.spec.id.as_str(),
            "description": t.spec.description,
            "input_schema": t.spec.input_schema,
            "schema_hash": t.spec.schema_hash,
        })).collect::<Vec<_>>(),
        "hash": rendered.hash("test-model"),
    })
}

fn settings() -> insta::Settings {
    agent_testing::refuse_snapshot_updates_on_ci();
    let mut settings = insta::Settings::clone_current();
    // Not under `snapshots/`, which holds only the conformance event goldens.
    settings.set_snapshot_path("prompt_snapshots");
    settings.set_omit_expression(true);
    settings
}

fn tree() -> Prompt {
    Prompt::new([
        Section::new("Role", "You are {name}, helping {user}."),
        Section::new("Tools", "Use tools when they help.")
            .tool(tool("search"))
            .child(
                Section::new("Files", "The workspace is {workspace}.")
                    .enabled_if("files")
                    .tool(tool("read"))
                    .child(Section::new("Writing", "Ask before writing.").tool(tool("write"))),
            )
            .child(
                Section::new("Terse", "Describe tools tersely.")
                    .enabled_if("terse")
                    .override_tool(
                        "core__search",
                        ToolOverride::description("Search.").parameter("query", "Terms."),
                    ),
            ),
        Section::new("Notes", "{notes?}"),
    ])
    .unwrap()
}

#[test]
fn nested_sections_render_depth_first_with_their_tools_in_order() {
    let p = params(json!({"name": "Ada", "user": "Bob", "files": true, "workspace": "/w"}));
    snapshot("nested", golden(&tree(), &p));
    let rendered = tree().render(&p).unwrap();
    let ids: Vec<&str> = rendered.tools.iter().map(|t| t.spec.id.as_str()).collect();
    assert_eq!(ids, ["core__search", "core__read", "core__write"]);
}

#[test]
fn a_disabled_section_hides_its_text_and_its_childrens_tools() {
    let p = params(json!({"name": "Ada", "user": "Bob", "files": false}));
    snapshot("disabled", golden(&tree(), &p));
    let rendered = tree().render(&p).unwrap();
    let ids: Vec<&str> = rendered.tools.iter().map(|t| t.spec.id.as_str()).collect();
    assert_eq!(ids, ["core__search"]);
    assert!(!rendered.text.contains("workspace"));
    assert!(!rendered.text.contains("Ask before writing"));
    // Every contributed tool is still there to register with the runner.
    assert_eq!(tree().tools().len(), 3);
}

#[test]
fn overrides_of_enabled_sections_change_the_specs_sent() {
    let p = params(json!({"name": "Ada", "user": "Bob", "terse": true}));
    snapshot("overridden", golden(&tree(), &p));
    let plain = tree()
        .render(&params(json!({"name": "Ada", "user": "Bob"})))
        .unwrap();
    let terse = tree().render(&p).unwrap();
    let (a, b) = (&plain.tools[0].spec, &terse.tools[0].spec);
    assert_eq!(a.description, "search tool");
    assert_eq!(b.description, "Search.");
    assert_eq!(
        b.input_schema["properties"]["query"]["description"],
        "Terms."
    );
    assert_ne!(a.schema_hash, b.schema_hash);
    assert_ne!(plain.hash("m"), terse.hash("m"));
}

#[test]
fn duplicate_tools_are_a_construction_error_naming_both_sections() {
    let err = Prompt::new([
        Section::new("Search", "").tool(tool("search")),
        Section::new("More", "").child(Section::new("Again", "").tool(tool("search"))),
    ])
    .unwrap_err();
    assert_eq!(
        err,
        PromptError::DuplicateTool {
            tool: "core__search".into(),
            first: "Search".into(),
            second: "More > Again".into(),
        }
    );
    let message = err.to_string();
    assert!(
        message.contains("`Search`") && message.contains("`More > Again`"),
        "{message}"
    );

    // Twice in one section names it twice.
    let err = Prompt::new([Section::new("One", "").tool(tool("x")).tool(tool("x"))]).unwrap_err();
    assert!(
        matches!(err, PromptError::DuplicateTool { first, second, .. } if first == "One" && second == "One")
    );
}

#[test]
fn bad_overrides_and_templates_are_construction_errors() {
    let err = Prompt::new([
        Section::new("A", "").override_tool("core__nope", ToolOverride::description("x"))
    ])
    .unwrap_err();
    assert!(matches!(err, PromptError::UnknownOverride { .. }), "{err}");
    let err = Prompt::new([Section::new("A", "")
        .tool(tool("s"))
        .override_tool("core__s", ToolOverride::default().parameter("nope", "x"))])
    .unwrap_err();
    assert!(matches!(err, PromptError::UnknownParameter { .. }), "{err}");
    for bad in ["{unclosed", "stray }", "{bad name}", "{}"] {
        let err = Prompt::new([Section::new("T", bad)]).unwrap_err();
        assert!(
            matches!(err, PromptError::InvalidTemplate { .. }),
            "{bad}: {err}"
        );
    }
    // Escaped braces are text.
    let p = Prompt::new([Section::new("T", "{{literal}}")]).unwrap();
    assert_eq!(p.render(&Params::new()).unwrap().text, "# T\n\n{literal}");
}

#[test]
fn a_missing_placeholder_is_a_render_error_naming_it_and_its_section() {
    let err = tree()
        .render(&params(
            json!({"name": "Ada", "user": "Bob", "files": true}),
        ))
        .unwrap_err();
    assert_eq!(
        err,
        PromptError::MissingPlaceholder {
            placeholder: "workspace".into(),
            section: "Tools > Files".into(),
        }
    );
    // A disabled section's placeholders are not needed.
    tree()
        .render(&params(json!({"name": "Ada", "user": "Bob"})))
        .unwrap();
}

#[test]
fn the_prompt_hash_is_stable_and_covers_text_tools_and_model() {
    let p = params(json!({"name": "Ada", "user": "Bob"}));
    let rendered = tree().render(&p).unwrap();
    let hash = rendered.hash("m");
    assert_eq!(hash, tree().render(&p).unwrap().hash("m"));
    assert!(hash.starts_with("sha256:") && hash.len() == 71);
    assert_ne!(hash, rendered.hash("other-model"));
    assert_ne!(hash, prompt_hash(&rendered.text, [], "m"));
    assert_ne!(
        hash,
        prompt_hash("other text", rendered.tools.iter().map(|t| &t.spec), "m")
    );
    assert_eq!(
        hash,
        prompt_hash(&rendered.text, rendered.tools.iter().map(|t| &t.spec), "m")
    );
}

fn snapshot(name: &str, value: Value) {
    settings().bind(|| insta::assert_json_snapshot!(name, value));
}
