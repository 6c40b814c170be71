//! The offline `TestModel` demo over the read-only built-ins (`agent chat` without an
//! endpoint): with the argument hints the composition root passes, no call fails for
//! its own generated arguments.

use std::sync::Arc;

use agent_graph::Agent;
use agent_testing::TestModel;
use ai_core::{
    AiEvent, Message,
    tool::{RegisteredTool, ToolErrorCode},
};
use ai_tools::builtin::{GetCurrentTime, ListDirectory, MemoryRead, ReadFile};
use ai_tools::capability::{
    Clock, FixedClock, MemoryStore, MemoryStoreDouble, MemoryWorkspace, Workspace,
};
use futures::StreamExt;

use crate::support::{check_invariants, ctx, results};

/// The four read-only built-ins the demo calls, over in-memory capabilities.
fn builtins() -> Vec<RegisteredTool> {
    let workspace: Arc<dyn Workspace> = Arc::new(MemoryWorkspace::with_files([
        ("docs/guide.txt", "# Guide\n"),
        ("notes.txt", "hello\n"),
    ]));
    let clock: Arc<dyn Clock> = Arc::new(FixedClock(
        jiff::Timestamp::from_second(1_700_000_000).unwrap(),
    ));
    let memory: Arc<dyn MemoryStore> = Arc::new(MemoryStoreDouble::new());
    vec![
        ai_tools::bind(GetCurrentTime, clock).unwrap(),
        ai_tools::bind(ListDirectory, Arc::clone(&workspace)).unwrap(),
        ai_tools::bind(ReadFile::default(), workspace).unwrap(),
        ai_tools::bind(MemoryRead, memory).unwrap(),
    ]
}

/// The model `agent chat` embeds.
fn demo_model() -> TestModel {
    TestModel::builtin_demo()
}

async fn demo(model: TestModel) -> (Vec<AiEvent>, String) {
    let agent = Agent::builder(model).tools(builtins()).build().unwrap();
    let (events, outcome) = agent
        .run_with(ctx(), vec![Message::user("What is around?")])
        .into_parts();
    let events: Vec<AiEvent> = events.collect().await;
    let outcome = outcome.await;
    check_invariants(&events, &outcome);
    (events, outcome.unwrap().content)
}

#[tokio::test]
async fn the_offline_demo_makes_no_call_that_fails_for_its_own_arguments() {
    let (events, answer) = demo(demo_model()).await;
    let calls: Vec<(String, bool, Option<ToolErrorCode>, String)> = results(&events);
    let names: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.kind {
            ai_core::event::AiEventKind::ToolCallStart { tool_name, .. } => Some(tool_name.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        names,
        vec![
            "core__get_current_time",
            "core__list_directory",
            "core__memory_read",
            "core__read_file",
        ]
    );
    for (id, ok, code, message) in &calls {
        assert!(ok, "{id} failed: {code:?} {message}");
    }
    assert!(answer.starts_with("Called 4 tool(s):"), "{answer}");
    assert!(answer.contains("- core__read_file -> "), "{answer}");
    assert!(answer.contains("hello"), "read the listed file: {answer}");
}

/// Without hints the generator cannot know that `memory_read` needs one of two
/// optional fields, and the `path` name hint (`.`) is a folder, not a file.
#[tokio::test]
async fn without_hints_the_schema_alone_cannot_say_what_these_tools_need() {
    let (events, _) = demo(TestModel::new()).await;
    let failed: Vec<(String, Option<ToolErrorCode>)> = results(&events)
        .into_iter()
        .filter(|r| !r.1)
        .map(|r| (r.0, r.2))
        .collect();
    assert_eq!(
        failed,
        vec![
            ("call_2".to_owned(), Some(ToolErrorCode::InvalidArgs)),
            ("call_3".to_owned(), Some(ToolErrorCode::InvalidArgs)),
        ]
    );
}
