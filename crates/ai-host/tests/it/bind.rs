//! `bind_builtin_tools`: every built-in tool, bound to real adapters, with the right
//! effect; and the runner's own timeout still kills a shell's process group.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ai_core::{
    AiEvent, CancellationToken, RunContext, ToolEffect, ToolPolicy, ToolRunner, policy::Budgets,
    runner::ToolCall, tool::ToolErrorCode,
};
use ai_host::{
    BindError, BuiltinConfig, SearchKey, SearchProvider, WebSearchSettings, bind_builtin_tools,
};
use serde_json::json;

#[test]
fn binds_every_builtin_tool_with_its_effect() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = BuiltinConfig::new(dir.path(), dir.path().join("memory.db"));
    // Without a search provider there is no web_search tool at all.
    let tools = bind_builtin_tools(&cfg).unwrap();
    assert!(
        tools
            .iter()
            .all(|t| t.spec.id.as_str() != "core__web_search")
    );
    cfg.web_search = Some(WebSearchSettings::new(
        SearchProvider::Searxng,
        Some("https://search.example/".into()),
        None,
    ));
    let tools = bind_builtin_tools(&cfg).unwrap();
    let effects: BTreeMap<&str, ToolEffect> = tools
        .iter()
        .map(|t| (t.spec.id.as_str(), t.spec.effect))
        .collect();
    let expected = BTreeMap::from([
        ("core__edit_file", ToolEffect::StateChange),
        ("core__exec_shell", ToolEffect::ExternalSideEffect),
        ("core__get_current_time", ToolEffect::ReadOnly),
        ("core__list_directory", ToolEffect::ReadOnly),
        ("core__memory_read", ToolEffect::ReadOnly),
        ("core__memory_write", ToolEffect::StateChange),
        ("core__read_file", ToolEffect::ReadOnly),
        ("core__web_fetch", ToolEffect::ExternalSideEffect),
        ("core__web_search", ToolEffect::ExternalSideEffect),
        ("core__write_file", ToolEffect::StateChange),
    ]);
    assert_eq!(effects, expected);
    assert!(tools.iter().all(|t| t.spec.redaction.is_some()));
    // The display list in ai-tools agrees.
    let specs = ai_tools::builtin::specs().unwrap();
    let ids: Vec<&str> = specs.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, expected.keys().copied().collect::<Vec<_>>());
    // And the runner accepts them all.
    ToolRunner::new(tools, ToolPolicy::default()).unwrap();
}

#[test]
fn bad_configuration_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = BuiltinConfig::new(dir.path().join("missing"), dir.path().join("m.db"));
    assert!(matches!(
        bind_builtin_tools(&cfg),
        Err(BindError::Workspace(_))
    ));
    let mut cfg = BuiltinConfig::new(dir.path(), dir.path().join("m.db"));
    cfg.web_allowlist = vec!["not a host!".into()];
    assert!(matches!(
        bind_builtin_tools(&cfg),
        Err(BindError::Allowlist(_))
    ));
    cfg.web_allowlist = Vec::new();
    let mut search = WebSearchSettings::new(SearchProvider::Searxng, None, None);
    cfg.web_search = Some(search.clone());
    let err = bind_builtin_tools(&cfg).unwrap_err();
    assert!(matches!(err, BindError::WebSearch(_)), "{err}");
    assert!(err.to_string().contains("needs an endpoint"), "{err}");
    search.endpoint = Some("http://127.0.0.1:8888".into());
    search.allowlist = vec!["127.0.0.1:port".into()];
    cfg.web_search = Some(search);
    assert!(matches!(
        bind_builtin_tools(&cfg),
        Err(BindError::Allowlist(_))
    ));
    let brave = WebSearchSettings::new(SearchProvider::Brave, None, None);
    cfg.web_search = Some(brave.clone());
    let err = bind_builtin_tools(&cfg).unwrap_err();
    assert!(err.to_string().contains("needs an API key"), "{err}");
    // An unset variable binds (each search then says which variable is missing).
    cfg.web_search = Some(WebSearchSettings {
        key: Some(SearchKey::from_env("BRAVE_API_KEY", None)),
        ..brave
    });
    assert!(bind_builtin_tools(&cfg).is_ok());
}

#[tokio::test]
async fn the_runner_timeout_kills_the_shell_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = BuiltinConfig::new(dir.path(), dir.path().join("m.db"));
    cfg.shell_timeout = Duration::from_secs(20);
    let tools = bind_builtin_tools(&cfg).unwrap();
    let policy = ToolPolicy::allowing(["core__exec_shell"])
        .with_approval_for([])
        .with_budgets(Budgets {
            max_runtime_ms: 500,
            ..Budgets::default()
        });
    let runner = ToolRunner::new(tools, policy).unwrap();
    let ctx = RunContext::new("run-1", "trace-1");
    let catalog = runner.catalog(&ctx);
    let events = Mutex::new(Vec::new());
    let sink = |e: AiEvent| events.lock().unwrap().push(e);
    let args = json!({"command": "sleep 30 & echo $! > child.pid; wait"}).to_string();
    let started = Instant::now();
    let exec = runner
        .exec(
            &ctx,
            &catalog,
            ToolCall::new("c", "core__exec_shell", args),
            &CancellationToken::new(),
            &sink,
            &ai_core::runner::CallScope::default(),
        )
        .await;
    assert_eq!(exec.result.error_code, Some(ToolErrorCode::Timeout));
    assert!(started.elapsed() < Duration::from_secs(5));
    let pid: u32 = std::fs::read_to_string(dir.path().join("child.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let zombie_or_gone = stat.is_empty()
            || stat
                .rsplit(')')
                .next()
                .unwrap()
                .trim_start()
                .starts_with('Z');
        if zombie_or_gone {
            break;
        }
        assert!(
            Instant::now() < until,
            "child {pid} survived the runner's timeout"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
