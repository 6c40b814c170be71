//! Contract rules: names, descriptions, derived schemas, rendering.

use ai_core::{
    ToolEffect,
    tool::{ModelView, Redaction, ToolCallContext, ToolErrorCode, ToolFailure},
};
use ai_tools::{ContractError, ToolContract, to_tool_spec};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::run_one;

#[allow(dead_code)] // read only through the schema
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Address {
    street: String,
    zip: u32,
}

#[allow(dead_code)] // read only through the schema
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct Person {
    name: String,
    #[schemars(range(min = 0, max = 150))]
    age: u8,
    addresses: Vec<Address>,
    nickname: Option<String>,
    previous: Option<Address>,
}

#[derive(Debug, Serialize, JsonSchema)]
struct Saved {
    id: u64,
    secret_note: String,
}

struct SavePerson {
    name: &'static str,
    description: &'static str,
    view: fn(&Saved) -> ModelView,
}

impl Default for SavePerson {
    fn default() -> Self {
        Self {
            name: "save_person",
            description: "Save a person record.",
            view: |_| ModelView::Json,
        }
    }
}

impl ToolContract for SavePerson {
    type Args = Person;
    type Output = Saved;
    type Capabilities = ();

    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        self.description
    }
    fn effect(&self) -> ToolEffect {
        ToolEffect::ReadOnly
    }
    fn redaction(&self) -> Redaction {
        Redaction::new(["name", "addresses.zip"], ["id"]).unwrap()
    }
    async fn execute(
        &self,
        _: &(),
        _: &ToolCallContext,
        args: Person,
    ) -> Result<Saved, ToolFailure> {
        if args.name == "fail" {
            return Err(ToolFailure::new(ToolErrorCode::NotFound, "no such person"));
        }
        Ok(Saved {
            id: args.addresses.len() as u64 + u64::from(args.age),
            secret_note: format!(
                "{} lives at {}",
                args.name,
                args.addresses.first().map_or("?", |a| a.street.as_str())
            ),
        })
    }
    fn model_view(&self, output: &Saved) -> ModelView {
        (self.view)(output)
    }
}

const VALID: &str = r#"{"name":"Ada","age":36,"addresses":[{"street":"1 Main St","zip":12345}],"previous":{"street":"x","zip":1}}"#;

#[tokio::test]
async fn nested_derived_args_validate_and_run() {
    let tool = ai_tools::bind(SavePerson::default(), ()).unwrap();
    let (exec, events) = run_one(tool, VALID).await;
    assert!(exec.result.ok, "{:?}", exec.result);
    assert_eq!(exec.result.value, Some(json!({"id": 37})));
    assert!(exec.model_content.contains("secret_note"));
    match &events[0].kind {
        ai_core::event::AiEventKind::ToolCallStart { args, .. } => {
            assert_eq!(args, &json!({"name": "Ada", "addresses": [{"zip": 12345}]}))
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn nested_bad_input_is_rejected_with_paths_and_without_values() {
    let tool = ai_tools::bind(SavePerson::default(), ()).unwrap();
    let bad = r#"{"name":"Ada","age":"INJECTED-VALUE","addresses":[{"street":"s","zip":"INJECTED-ZIP"},{"zip":1}],"previous":{"zip":2}}"#;
    let (exec, _) = run_one(tool, bad).await;
    assert_eq!(exec.result.error_code, Some(ToolErrorCode::InvalidArgs));
    let message = exec.result.safe_message.unwrap();
    for path in ["/age", "/addresses/0/zip", "/addresses/1", "/previous"] {
        assert!(message.contains(path), "{path} missing from {message}");
    }
    assert!(!message.contains("INJECTED"), "{message}");
    assert!(message.contains("street"), "{message}");
}

#[tokio::test]
async fn a_tool_failure_keeps_its_code() {
    let tool = ai_tools::bind(SavePerson::default(), ()).unwrap();
    let (exec, _) = run_one(tool, r#"{"name":"fail","age":1,"addresses":[]}"#).await;
    assert_eq!(exec.result.error_code, Some(ToolErrorCode::NotFound));
}

#[tokio::test]
async fn rendering_overrides_and_withholding_reach_the_model_content() {
    let text = SavePerson {
        view: |saved| ModelView::Text(format!("saved as #{}", saved.id)),
        ..SavePerson::default()
    };
    let (exec, _) = run_one(ai_tools::bind(text, ()).unwrap(), VALID).await;
    assert_eq!(exec.model_content, "saved as #37");

    let hidden = SavePerson {
        view: |_| ModelView::Withheld {
            note: "saved; details withheld".into(),
        },
        ..SavePerson::default()
    };
    let (exec, _) = run_one(ai_tools::bind(hidden, ()).unwrap(), VALID).await;
    assert_eq!(exec.model_content, "saved; details withheld");
    assert_eq!(
        exec.output.unwrap()["secret_note"],
        json!("Ada lives at 1 Main St")
    );
}

#[test]
fn spec_has_draft07_schemas_and_a_stable_hash() {
    let a = to_tool_spec(&SavePerson::default()).unwrap();
    let b = to_tool_spec(&SavePerson::default()).unwrap();
    assert_eq!(a.schema_hash, b.schema_hash);
    assert!(a.schema_hash.starts_with("sha256:"));
    assert_eq!(a.input_schema["type"], json!("object"));
    assert_eq!(a.input_schema["additionalProperties"], json!(false));
    assert!(a.output_schema.as_ref().unwrap()["properties"]["secret_note"].is_object());
    // Self-contained: no `$ref` and no `$schema` for non-recursive types.
    let text = a.input_schema.to_string();
    assert!(
        !text.contains("$ref") && !text.contains("$schema"),
        "{text}"
    );
    assert_eq!(a.origin, "application");
    assert_eq!(a.id.as_str(), "app__save_person");
    let v: Value = a.input_schema.clone();
    assert_eq!(
        v["properties"]["previous"]["type"],
        json!(["object", "null"])
    );
}

#[test]
fn names_and_descriptions_follow_the_rules() {
    let cases: &[(&str, &str, &str)] = &[
        ("Save", "ok", "lowercase"),
        ("save person", "ok", "lowercase"),
        ("", "ok", "1 to 59"),
        (
            "a_very_long_tool_name_that_goes_on_and_on_and_on_for_ever_xx",
            "ok",
            "1 to 59",
        ),
        ("save", "", "1 to 200"),
        ("save", "Sauvegarde une personne é", "ASCII"),
    ];
    for (name, description, expected) in cases {
        let contract = SavePerson {
            name,
            description,
            ..SavePerson::default()
        };
        let err = to_tool_spec(&contract).unwrap_err();
        assert!(
            matches!(
                err,
                ContractError::InvalidName { .. } | ContractError::InvalidDescription { .. }
            ),
            "{err}"
        );
        assert!(
            err.to_string().contains(expected),
            "{name:?}/{description:?}: {err}"
        );
    }
    let long = Box::leak("x".repeat(201).into_boxed_str());
    let contract = SavePerson {
        description: long,
        ..SavePerson::default()
    };
    assert!(to_tool_spec(&contract).is_err());
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct AddArgs {
    a: i64,
    b: i64,
}

#[derive(serde::Serialize, schemars::JsonSchema)]
struct Sum {
    sum: i64,
}

fn add_tool() -> ai_tools::ToolFn<AddArgs, Sum> {
    ai_tools::tool_fn(
        String::from("add"),
        format!("Add two integers ({}).", "runtime text"),
        ToolEffect::ReadOnly,
        |args: AddArgs| {
            std::future::ready(Ok(Sum {
                sum: args.a + args.b,
            }))
        },
    )
    .unwrap()
}

#[tokio::test]
async fn closure_tools_get_derived_schemas_an_app_id_and_run_through_the_runner() {
    let tool = add_tool();
    let spec = tool.spec().clone();
    assert_eq!(spec.id.as_str(), "app__add");
    assert_eq!(spec.origin, "application");
    assert_eq!(spec.description, "Add two integers (runtime text).");
    assert_eq!(
        spec.input_schema["required"],
        json!(["a", "b"]),
        "{}",
        spec.input_schema
    );
    assert!(spec.output_schema.as_ref().unwrap()["properties"]["sum"].is_object());
    let (exec, events) = crate::run_one(tool.into(), r#"{"a": 2, "b": 40}"#).await;
    assert_eq!(exec.model_content, r#"{"sum":42}"#);
    // Default redaction: no argument or output field reaches events.
    let text = serde_json::to_string(&events).unwrap();
    assert!(!text.contains("42") && !text.contains("\"a\""), "{text}");

    let (exec, _) = crate::run_one(add_tool().into(), r#"{"a": "two"}"#).await;
    assert_eq!(
        exec.result.error_code,
        Some(ai_core::tool::ToolErrorCode::InvalidArgs)
    );
}

#[tokio::test]
async fn closure_tools_redact_and_change_namespace() {
    let tool = add_tool()
        .redact(ai_core::tool::Redaction::new(["a"], ["sum"]).unwrap())
        .namespace("billing")
        .unwrap();
    assert_eq!(tool.spec().id.as_str(), "billing__add");
    let (exec, events) = crate::run_one(tool.into(), r#"{"a": 2, "b": 40}"#).await;
    assert!(exec.result.ok);
    let text = serde_json::to_string(&events).unwrap();
    assert!(text.contains(r#""sum":42"#), "{text}");
    assert!(
        text.contains(r#""a":2"#) && !text.contains(r#""b":40"#),
        "{text}"
    );

    for reserved in ["core", "mcp", "graph", "Bad", ""] {
        let err = add_tool().namespace(reserved).unwrap_err();
        assert!(
            matches!(err, ContractError::InvalidName { .. }),
            "{reserved}: {err}"
        );
    }
    let err = ai_tools::tool_fn("Add", "x", ToolEffect::ReadOnly, |args: AddArgs| {
        std::future::ready(Ok(Sum { sum: args.a }))
    })
    .unwrap_err();
    assert!(err.to_string().contains("lowercase"), "{err}");
}

/// A contract in the application namespace it names.
struct InNamespace(&'static str);

impl ToolContract for InNamespace {
    type Args = AddArgs;
    type Output = Sum;
    type Capabilities = ();
    fn name(&self) -> &str {
        "refund"
    }
    fn description(&self) -> &str {
        "Refund an order."
    }
    fn namespace(&self) -> ai_tools::Namespace {
        ai_tools::Namespace::app(self.0)
    }
    fn effect(&self) -> ToolEffect {
        ToolEffect::ExternalSideEffect
    }
    fn redaction(&self) -> Redaction {
        Redaction::default()
    }
    async fn execute(
        &self,
        _: &(),
        _: &ToolCallContext,
        args: AddArgs,
    ) -> Result<Sum, ToolFailure> {
        Ok(Sum { sum: args.a })
    }
}

#[test]
fn a_contract_may_choose_its_namespace_but_never_core() {
    let spec = to_tool_spec(&InNamespace("billing")).unwrap();
    assert_eq!(spec.id.as_str(), "billing__refund");
    assert_eq!(spec.origin, "application");
    // An application cannot pass itself off as a built-in, an MCP server or a graph.
    for reserved in ["core", "mcp", "graph"] {
        let err = to_tool_spec(&InNamespace(reserved)).unwrap_err();
        assert!(err.to_string().contains("reserved"), "{reserved}: {err}");
    }
}
