//! Deny by default, catalog construction (filtering, deterministic order, collisions)
//! and the checks `ToolRunner::new` makes on the tools it is given.

use ai_core::{
    RunContext, ToolCatalog, ToolEffect, ToolId, ToolPolicy, ToolRunner, ToolSpec,
    policy::{CatalogError, PolicyDecision},
    runner::ToolCall,
    tool::ToolErrorCode,
};
use serde_json::{Value, json};

use crate::support::{ApproveAll, Echo, Harness, any_object, expect_failure, registered, spec};

const EFFECTS: [ToolEffect; 3] = [
    ToolEffect::ReadOnly,
    ToolEffect::StateChange,
    ToolEffect::ExternalSideEffect,
];

fn ctx() -> RunContext {
    RunContext::new("run-1", "trace-1")
}

fn ids(catalog: &ToolCatalog) -> Vec<&str> {
    catalog.specs().iter().map(|s| s.id.as_str()).collect()
}

fn mixed_specs() -> Vec<ToolSpec> {
    vec![
        spec("mcp__srv__zeta", any_object(), ToolEffect::ReadOnly),
        spec("core__write", any_object(), ToolEffect::StateChange),
        spec("core__denied", any_object(), ToolEffect::ReadOnly),
        spec("core__read", any_object(), ToolEffect::ReadOnly),
        spec("mcp__untrusted__list", any_object(), ToolEffect::ReadOnly),
        spec("core__fetch", any_object(), ToolEffect::ExternalSideEffect),
    ]
}

fn mixed_policy() -> ToolPolicy {
    let mut policy = ToolPolicy::allowing(["core__*", "mcp__srv__*"]);
    policy.deny.insert("core__denied".into());
    policy
}

#[tokio::test]
async fn default_policy_denies_every_tool() {
    let policy = ToolPolicy::default();
    for spec in mixed_specs() {
        for effect in EFFECTS {
            assert_eq!(
                policy.decide(&ctx(), &spec.id, effect),
                PolicyDecision::Deny,
                "{}",
                spec.id
            );
        }
    }
    let catalog = ToolCatalog::build(mixed_specs(), &policy, &ctx()).unwrap();
    assert!(catalog.is_empty());

    let h = Harness::with_policy(
        vec![registered(
            spec("core__echo", any_object(), ToolEffect::ReadOnly),
            Echo,
        )],
        ToolPolicy::default(),
    );
    assert!(h.catalog.is_empty());
    assert_eq!(h.runner.specs().len(), 1, "registered but not offered");
    expect_failure(
        &h.exec(ToolCall::new("c", "core__echo", "{}")).await,
        ToolErrorCode::PolicyDenied,
    );
    // Even a catalog that offers the tool cannot override the policy.
    let offered = ToolCatalog::build(
        h.runner.specs().into_iter().cloned(),
        &crate::support::allow_all(),
        &ctx(),
    )
    .unwrap();
    expect_failure(
        &h.exec_in(&offered, ToolCall::new("c", "core__echo", "{}"))
            .await,
        ToolErrorCode::PolicyDenied,
    );
}

#[test]
fn build_keeps_allowed_and_approval_tools_sorted_by_id_whatever_the_input_order() {
    let policy = mixed_policy();
    let expected = ["core__fetch", "core__read", "core__write", "mcp__srv__zeta"];
    let forward = ToolCatalog::build(mixed_specs(), &policy, &ctx()).unwrap();
    assert_eq!(ids(&forward), expected);
    let mut reversed_specs = mixed_specs();
    reversed_specs.reverse();
    let reversed = ToolCatalog::build(reversed_specs, &policy, &ctx()).unwrap();
    let mut rotated_specs = mixed_specs();
    rotated_specs.rotate_left(2);
    let rotated = ToolCatalog::build(rotated_specs, &policy, &ctx()).unwrap();
    assert_eq!(forward, reversed);
    assert_eq!(forward, rotated);

    assert_eq!(forward.len(), 4);
    assert!(
        forward.contains("core__write"),
        "approval-required tools are offered"
    );
    assert!(!forward.contains("core__denied"), "deny wins over allow");
    assert!(
        !forward.contains("mcp__untrusted__list"),
        "not allowed means not offered"
    );
    assert_eq!(
        forward.get("core__read").unwrap().effect,
        ToolEffect::ReadOnly
    );
    assert!(forward.get("core__denied").is_none());

    // Selecting keeps the order.
    let selected = forward.select(|spec| spec.id.as_str() != "core__read");
    assert_eq!(
        ids(&selected),
        ["core__fetch", "core__write", "mcp__srv__zeta"]
    );
    assert!(ToolCatalog::empty().is_empty());
}

#[test]
fn runner_catalog_is_deterministic_and_specs_are_sorted() {
    let tools = |specs: Vec<ToolSpec>| {
        specs
            .into_iter()
            .map(|s| registered(s, Echo))
            .collect::<Vec<_>>()
    };
    let a = ToolRunner::new(tools(mixed_specs()), mixed_policy()).unwrap();
    let mut reversed = mixed_specs();
    reversed.reverse();
    let b = ToolRunner::new(tools(reversed), mixed_policy()).unwrap();
    assert_eq!(a.catalog(&ctx()), b.catalog(&ctx()));
    // Without an approver, tools that need approval are not offered
    // (CATALOG_IS_EXPLICIT); with one, they are.
    assert!(!a.has_approver());
    assert_eq!(ids(&a.catalog(&ctx())), ["core__read", "mcp__srv__zeta"]);
    let a = a.with_approver(std::sync::Arc::new(ApproveAll::default()));
    assert!(a.has_approver());
    assert_eq!(
        ids(&a.catalog(&ctx())),
        ["core__fetch", "core__read", "core__write", "mcp__srv__zeta"]
    );
    let all: Vec<&str> = a.specs().iter().map(|s| s.id.as_str()).collect();
    assert_eq!(
        all,
        [
            "core__denied",
            "core__fetch",
            "core__read",
            "core__write",
            "mcp__srv__zeta",
            "mcp__untrusted__list"
        ]
    );
}

fn colliding() -> Vec<ToolSpec> {
    vec![
        spec("core__search", any_object(), ToolEffect::ReadOnly).with_origin("built-in"),
        spec("core__other", any_object(), ToolEffect::ReadOnly).with_origin("built-in"),
        spec("core__search", any_object(), ToolEffect::ReadOnly).with_origin("mcp server github"),
    ]
}

#[test]
fn catalog_collision_names_both_origins() {
    let error =
        ToolCatalog::build(colliding(), &ToolPolicy::allowing(["core__*"]), &ctx()).unwrap_err();
    assert_eq!(
        error.to_string(),
        "tool id `core__search` is defined twice: by built-in and by mcp server github"
    );
    assert_eq!(
        error,
        CatalogError::Collision {
            id: ToolId::parse("core__search").unwrap(),
            first: "built-in".into(),
            second: "mcp server github".into(),
        }
    );
    // A collision is an error even when policy would hide both tools.
    assert!(matches!(
        ToolCatalog::build(colliding(), &ToolPolicy::default(), &ctx()),
        Err(CatalogError::Collision { .. })
    ));
}

#[test]
fn runner_rejects_collisions() {
    let tools = colliding()
        .into_iter()
        .map(|s| registered(s, Echo))
        .collect();
    let error = ToolRunner::new(tools, ToolPolicy::default()).unwrap_err();
    assert_eq!(
        error.to_string(),
        "tool id `core__search` is defined twice: by built-in and by mcp server github"
    );
}

fn runner_error(input_schema: Value) -> CatalogError {
    let tool = registered(spec("core__bad", input_schema, ToolEffect::ReadOnly), Echo);
    ToolRunner::new(vec![tool], ToolPolicy::default()).unwrap_err()
}

#[test]
fn runner_rejects_schemas_outside_the_p0_subset_with_their_paths() {
    let error = runner_error(json!({
        "type": "object",
        "properties": {
            "filter": {"type": "object", "properties": {"kind": {"anyOf": [{"type": "string"}, {"type": "integer"}]}}},
            "items": {"type": "array", "items": {"$ref": "https://example.com/item.json"}}
        }
    }));
    let CatalogError::SchemaSubset { id, violations } = &error else {
        panic!("expected a subset error: {error:?}");
    };
    assert_eq!(id.as_str(), "core__bad");
    let pointers: Vec<&str> = violations.iter().map(|v| v.pointer.as_str()).collect();
    assert_eq!(
        pointers,
        [
            "/properties/filter/properties/kind/anyOf",
            "/properties/items/items/$ref"
        ]
    );
    let text = error.to_string();
    assert!(
        text.starts_with("tool `core__bad` has a schema outside the supported subset: "),
        "{text}"
    );
    assert!(text.contains(
        "/properties/filter/properties/kind/anyOf: `anyOf` is outside the supported schema subset"
    ));
    assert!(text.contains("/properties/items/items/$ref: only local `$ref`"));

    // A root that is not an object schema.
    let error = runner_error(json!({"type": "string"}));
    assert!(
        error
            .to_string()
            .contains("/type: the root of a tool input schema must have"),
        "{error}"
    );

    // The catalog applies the same check.
    let bad = spec(
        "core__bad",
        json!({"type": "object", "oneOf": []}),
        ToolEffect::ReadOnly,
    );
    let error = ToolCatalog::build([bad], &ToolPolicy::default(), &ctx()).unwrap_err();
    assert!(error.to_string().contains("/oneOf"), "{error}");
}

#[test]
fn runner_rejects_schemas_the_validator_cannot_compile() {
    let error = runner_error(
        json!({"type": "object", "properties": {"n": {"type": "number", "minimum": "zero"}}}),
    );
    assert!(
        matches!(&error, CatalogError::InvalidSchema { which: "input", id, .. } if id.as_str() == "core__bad"),
        "{error:?}"
    );
    let tool = registered(
        spec("core__bad", any_object(), ToolEffect::ReadOnly)
            .with_output_schema(json!({"type": 12})),
        Echo,
    );
    let error = ToolRunner::new(vec![tool], ToolPolicy::default()).unwrap_err();
    assert!(
        matches!(
            &error,
            CatalogError::InvalidSchema {
                which: "output",
                ..
            }
        ),
        "{error:?}"
    );
    assert!(
        error
            .to_string()
            .starts_with("tool `core__bad` has an invalid output schema: "),
        "{error}"
    );
}

/// Available while its flag is up; says why not otherwise.
struct Switchable(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl ai_core::tool::ToolExecutor for Switchable {
    fn execute(
        &self,
        _cx: ai_core::tool::ToolCallContext,
        args: Value,
    ) -> futures::future::BoxFuture<
        'static,
        Result<ai_core::tool::ToolOutput, ai_core::tool::ToolFailure>,
    > {
        Box::pin(async move { Ok(ai_core::tool::ToolOutput::json(args)) })
    }

    fn availability(&self) -> Result<(), String> {
        if self.0.load(std::sync::atomic::Ordering::SeqCst) {
            Ok(())
        } else {
            Err("its source withdrew it".into())
        }
    }
}

#[test]
fn unavailable_tools_leave_later_catalogs_and_are_reported_as_withheld() {
    let up = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let runner = ToolRunner::new(
        vec![
            registered(
                spec("mcp__s__come_and_go", any_object(), ToolEffect::ReadOnly),
                Switchable(up.clone()),
            ),
            registered(
                spec("mcp__s__steady", any_object(), ToolEffect::ReadOnly),
                Echo,
            ),
            registered(
                spec("mcp__other__gone", any_object(), ToolEffect::ReadOnly),
                Switchable(up.clone()),
            ),
        ],
        ToolPolicy::allowing(["mcp__s__*"]),
    )
    .unwrap();
    let ctx = ctx();
    assert_eq!(
        ids(&runner.catalog(&ctx)),
        ["mcp__s__come_and_go", "mcp__s__steady"]
    );
    assert!(runner.withheld(&ctx).is_empty());
    up.store(false, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(ids(&runner.catalog(&ctx)), ["mcp__s__steady"]);
    // Only tools policy would offer are reported (mcp__other__gone is denied anyway).
    let withheld = runner.withheld(&ctx);
    assert_eq!(withheld.len(), 1);
    assert_eq!(withheld[0].0.as_str(), "mcp__s__come_and_go");
    assert_eq!(withheld[0].1, "its source withdrew it");
    assert_eq!(
        runner.availability("mcp__s__come_and_go"),
        Some(Err("its source withdrew it".into()))
    );
    assert_eq!(runner.availability("mcp__s__steady"), Some(Ok(())));
    assert_eq!(runner.availability("mcp__s__nope"), None);
    up.store(true, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(ids(&runner.catalog(&ctx)).len(), 2);
}
