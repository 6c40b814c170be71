//! The built-in tools over the in-memory doubles and fake capabilities.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use ai_core::{CancellationToken, ToolEffect, tool::ToolErrorCode};
use ai_tools::builtin::{
    EditFile, ExecShell, ListDirectory, MemoryRead, ReadFile, WebSearch, WriteFile, specs,
};
use ai_tools::capability::{
    BlockReason, MemoryStore, MemoryStoreDouble, MemoryWorkspace, SearchEngine, SearchError,
    SearchHit, SearchRequest, Shell, ShellError, ShellOutcome, ShellRequest, Workspace,
};
use futures::future::BoxFuture;

use crate::run_one;
use crate::support::{memory_write, web_fetch};

fn workspace() -> Arc<MemoryWorkspace> {
    Arc::new(MemoryWorkspace::with_files([
        ("notes.txt", "alpha\nbeta\ngamma\n"),
        ("dir/a.rs", "x x"),
    ]))
}

#[tokio::test]
async fn file_tools_over_the_memory_workspace() {
    let ws = workspace();
    let dyn_ws: Arc<dyn Workspace> = ws.clone();
    let read = ai_tools::bind(ReadFile::default(), Arc::clone(&dyn_ws)).unwrap();
    let (exec, _) = run_one(read.clone(), r#"{"path":"notes.txt","offset":3}"#).await;
    assert_eq!(exec.output.unwrap()["content"], "gamma\n");
    let (exec, _) = run_one(read, r#"{"path":"../notes.txt"}"#).await;
    assert_eq!(
        exec.result.error_code,
        Some(ToolErrorCode::PermissionDenied)
    );

    let list = ai_tools::bind(ListDirectory, Arc::clone(&dyn_ws)).unwrap();
    let (exec, _) = run_one(list, r#"{"depth":2}"#).await;
    assert!(
        exec.model_content.contains("dir/a.rs"),
        "{}",
        exec.model_content
    );

    let write = ai_tools::bind(WriteFile, Arc::clone(&dyn_ws)).unwrap();
    let (exec, _) = run_one(write, r#"{"path":"new.txt","content":"hi"}"#).await;
    assert_eq!(exec.output.unwrap()["created"], true);
    assert_eq!(ws.get("new.txt").unwrap(), b"hi");

    let edit = ai_tools::bind(EditFile::default(), dyn_ws).unwrap();
    let (exec, _) = run_one(edit.clone(), r#"{"path":"dir/a.rs","old":"x","new":"y"}"#).await;
    assert_eq!(exec.result.error_code, Some(ToolErrorCode::ExecutionFailed));
    let (exec, _) = run_one(
        edit,
        r#"{"path":"dir/a.rs","old":"x","new":"y","replace_all":true}"#,
    )
    .await;
    assert!(exec.result.ok, "{:?}", exec.result);
    assert_eq!(ws.get("dir/a.rs").unwrap(), b"y y");
}

struct FakeShell(Mutex<Vec<ShellRequest>>);

impl Shell for FakeShell {
    fn run(
        &self,
        request: ShellRequest,
        _cancel: CancellationToken,
    ) -> BoxFuture<'_, Result<ShellOutcome, ShellError>> {
        Box::pin(async move {
            let command = request.command.clone();
            self.0.lock().unwrap().push(request);
            match command.as_str() {
                "slow" => Err(ShellError::Timeout(Duration::from_secs(1))),
                _ => Ok(ShellOutcome {
                    exit_code: Some(0),
                    stdout: "ok\n".into(),
                    ..ShellOutcome::default()
                }),
            }
        })
    }
}

#[tokio::test]
async fn exec_shell_caps_the_timeout_and_refuses_denied_commands() {
    let shell = Arc::new(FakeShell(Mutex::new(Vec::new())));
    let tool = ai_tools::bind(
        ExecShell {
            default_timeout: Duration::from_secs(5),
            max_timeout: Duration::from_secs(10),
            max_output_bytes: 100,
        },
        shell.clone() as Arc<dyn Shell>,
    )
    .unwrap();
    assert_eq!(tool.spec.effect, ToolEffect::ExternalSideEffect);
    let (exec, _) = run_one(tool.clone(), r#"{"command":"ls","timeout_secs":999}"#).await;
    assert!(exec.result.ok);
    assert_eq!(shell.0.lock().unwrap()[0].timeout, Duration::from_secs(10));
    let (exec, _) = run_one(tool.clone(), r#"{"command":"slow"}"#).await;
    assert_eq!(exec.result.error_code, Some(ToolErrorCode::Timeout));
    let (exec, _) = run_one(tool, r#"{"command":"sudo rm x"}"#).await;
    assert_eq!(
        exec.result.error_code,
        Some(ToolErrorCode::PermissionDenied)
    );
    assert!(!exec.model_content.contains("rm x"));
    assert_eq!(shell.0.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn web_fetch_reduces_html_and_maps_refusals() {
    let page = "<p>Hi &lt;there&gt;</p><script>x()</script>";
    let tool = web_fetch(page, &["http://blocked/"]);
    let (exec, _) = run_one(tool.clone(), r#"{"url":"http://example.test/"}"#).await;
    assert_eq!(exec.output.unwrap()["text"], "Hi <there>\n");
    let (exec, _) = run_one(tool, r#"{"url":"http://blocked/"}"#).await;
    assert_eq!(
        exec.result.error_code,
        Some(ToolErrorCode::PermissionDenied)
    );
}

#[tokio::test]
async fn memory_tools_over_the_double() {
    let store: Arc<dyn MemoryStore> = Arc::new(MemoryStoreDouble::new());
    let write = memory_write(&store, 0);
    let read = ai_tools::bind(MemoryRead, store).unwrap();
    let (exec, _) = run_one(write, r#"{"key":"k","text":"likes tea","tags":["drinks"]}"#).await;
    assert_eq!(exec.output.unwrap()["created_at"], "1970-01-01T00:00:00Z");
    let (exec, _) = run_one(read.clone(), r#"{"query":"drinks"}"#).await;
    assert_eq!(exec.output.unwrap()["entries"][0]["key"], "k");
    let (exec, _) = run_one(read, r#"{"key":"nope"}"#).await;
    assert_eq!(exec.result.error_code, Some(ToolErrorCode::NotFound));
}

/// Answers with `hits` results (every third not a web URL, long texts) and records
/// each request; the query `fail:<what>` fails.
struct FakeSearch(Mutex<Vec<SearchRequest>>);

impl SearchEngine for FakeSearch {
    fn search(
        &self,
        request: SearchRequest,
        _cancel: CancellationToken,
    ) -> BoxFuture<'_, Result<Vec<SearchHit>, SearchError>> {
        self.0.lock().unwrap().push(request.clone());
        Box::pin(async move {
            match request.query.as_str() {
                "fail:blocked" => Err(SearchError::Blocked(BlockReason::Loopback)),
                "fail:timeout" => Err(SearchError::Timeout),
                "fail:key" => Err(SearchError::MissingKey {
                    env: "SEARCH_KEY".into(),
                }),
                _ => Ok((0..30)
                    .map(|i| SearchHit {
                        title: format!("Result\n  {i}"),
                        url: if i % 3 == 2 {
                            format!("javascript:alert({i})")
                        } else {
                            format!("https://r{i}.test/")
                        },
                        snippet: "é".repeat(1_500),
                    })
                    .collect()),
            }
        })
    }
}

#[tokio::test]
async fn web_search_bounds_results_and_maps_failures() {
    let engine = Arc::new(FakeSearch(Mutex::default()));
    let tool = ai_tools::bind(
        WebSearch {
            max_results: 7,
            ..WebSearch::default()
        },
        Arc::clone(&engine) as Arc<dyn SearchEngine>,
    )
    .unwrap();
    assert_eq!(tool.spec.effect, ToolEffect::ExternalSideEffect);
    let schema = &tool.spec.input_schema["properties"];
    assert_eq!(schema["query"]["minLength"], 1);
    assert_eq!(schema["query"]["maxLength"], 400);
    assert_eq!(schema["count"]["minimum"], 1);
    assert_eq!(schema["count"]["maximum"], 10);

    // Default count: 5 results, the non-web URLs dropped before counting.
    let (exec, _) = run_one(tool.clone(), r#"{"query":"  rust  "}"#).await;
    let out = exec.output.unwrap();
    let results = out["results"].as_array().unwrap();
    assert_eq!(results.len(), 5);
    assert!(
        results
            .iter()
            .all(|r| r["url"].as_str().unwrap().starts_with("https://"))
    );
    assert_eq!(results[0]["title"], "Result 0");
    assert_eq!(
        results[0]["snippet"].as_str().unwrap().chars().count(),
        1_000
    );
    assert_eq!(out["truncated"], true);
    // Snippets stay out of the redacted view.
    let shown = exec.result.value.unwrap();
    assert!(shown["results"][0].get("snippet").is_none(), "{shown}");
    assert_eq!(shown["results"][0]["url"], "https://r0.test/");
    // A count above the configured cap gets the cap.
    let (exec, _) = run_one(tool.clone(), r#"{"query":"rust","count":10}"#).await;
    assert_eq!(exec.output.unwrap()["results"].as_array().unwrap().len(), 7);
    {
        let requests = engine.0.lock().unwrap();
        assert_eq!(requests[0].query, "rust");
        assert_eq!(requests[0].count, 5);
        assert_eq!(requests[1].count, 7);
    }
    // The schema bounds the arguments.
    for bad in [
        r#"{"query":""}"#,
        r#"{"query":"x","count":0}"#,
        r#"{"query":"x","count":11}"#,
        r#"{"query":"x","site":"y"}"#,
    ] {
        let (exec, _) = run_one(tool.clone(), bad).await;
        assert_eq!(
            exec.result.error_code,
            Some(ToolErrorCode::InvalidArgs),
            "{bad}"
        );
    }
    let long = serde_json::json!({"query": "q".repeat(401)}).to_string();
    let (exec, _) = run_one(tool.clone(), &long).await;
    assert_eq!(exec.result.error_code, Some(ToolErrorCode::InvalidArgs));
    let (exec, _) = run_one(tool.clone(), r#"{"query":"   "}"#).await;
    assert_eq!(exec.result.error_code, Some(ToolErrorCode::InvalidArgs));
    assert_eq!(
        engine.0.lock().unwrap().len(),
        2,
        "refused before searching"
    );

    for (query, code, needle) in [
        ("fail:blocked", ToolErrorCode::PermissionDenied, "loopback"),
        ("fail:timeout", ToolErrorCode::Timeout, "timed out"),
        ("fail:key", ToolErrorCode::ExecutionFailed, "`SEARCH_KEY`"),
    ] {
        let args = serde_json::json!({"query": query}).to_string();
        let (exec, _) = run_one(tool.clone(), &args).await;
        assert_eq!(exec.result.error_code, Some(code), "{query}");
        assert!(
            exec.model_content.contains(needle),
            "{}",
            exec.model_content
        );
    }
}

#[test]
fn specs_list_every_builtin_tool() {
    let specs = specs().unwrap();
    assert_eq!(specs.len(), 10);
    for spec in &specs {
        ai_core::schema::check_schema_subset(&spec.input_schema)
            .unwrap_or_else(|v| panic!("{}: {v:?}", spec.id));
        assert!(spec.redaction.is_some());
    }
}
