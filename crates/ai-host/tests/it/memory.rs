//! `core__memory_write` / `core__memory_read` on a real SQLite file: persistence
//! across reopening, ranked full-text search, namespace validation and concurrent
//! writers.

use std::sync::Arc;

use ai_core::tool::{RegisteredTool, ToolErrorCode};
use ai_host::SqliteMemory;
use ai_tools::bind;
use ai_tools::builtin::{MemoryRead, MemoryWrite, MemoryWriteCapabilities};
use ai_tools::capability::{FixedClock, MemoryRecord, MemoryStore};
use serde_json::json;

use crate::support::{assert_each_refused, run};

fn tools(store: SqliteMemory, at_second: i64) -> (RegisteredTool, RegisteredTool) {
    let store: Arc<dyn MemoryStore> = Arc::new(store);
    let clock = Arc::new(FixedClock(jiff::Timestamp::from_second(at_second).unwrap()));
    (
        bind(
            MemoryWrite,
            MemoryWriteCapabilities {
                store: Arc::clone(&store),
                clock,
            },
        )
        .unwrap(),
        bind(MemoryRead, store).unwrap(),
    )
}

#[tokio::test]
async fn memory_survives_reopening_and_keeps_created_at() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state/memory.db");
    {
        let (write, _) = tools(SqliteMemory::open(&path).unwrap(), 1_700_000_000);
        let exec = run(
            &write,
            &json!({"key": "editor", "text": "The user prefers helix", "tags": ["prefs"]}),
        )
        .await;
        assert!(exec.result.ok, "{:?}", exec.result);
        assert_eq!(exec.output.unwrap()["created_at"], "2023-11-14T22:13:20Z");
    }
    let (write, read) = tools(SqliteMemory::open(&path).unwrap(), 1_800_000_000);
    let exec = run(&read, &json!({"key": "editor"})).await;
    assert!(exec.result.ok, "{:?}", exec.result);
    let out = exec.output.unwrap();
    assert_eq!(out["namespace"], "default");
    assert_eq!(out["entries"][0]["text"], "The user prefers helix");
    assert_eq!(out["entries"][0]["tags"], json!(["prefs"]));

    let exec = run(&write, &json!({"key": "editor", "text": "Now vim"})).await;
    let out = exec.output.unwrap();
    assert_eq!(out["created_at"], "2023-11-14T22:13:20Z");
    assert_eq!(out["updated_at"], "2027-01-15T08:00:00Z");
    let exec = run(&read, &json!({"query": "vim"})).await;
    assert_eq!(exec.output.unwrap()["entries"][0]["key"], "editor");
    // The old text is gone from the index.
    let exec = run(&read, &json!({"query": "helix"})).await;
    assert_eq!(exec.output.unwrap()["entries"], json!([]));
}

#[tokio::test]
async fn search_is_ranked_namespaced_and_injection_safe() {
    let dir = tempfile::tempdir().unwrap();
    let (write, read) = tools(SqliteMemory::open(dir.path().join("m.db")).unwrap(), 0);
    for (key, text, ns) in [
        ("a", "rust borrow checker rust lifetimes", "default"),
        ("b", "rust is a language", "default"),
        ("c", "gardening tips", "default"),
        ("d", "rust rust rust", "other"),
    ] {
        let exec = run(&write, &json!({"key": key, "text": text, "namespace": ns})).await;
        assert!(exec.result.ok, "{:?}", exec.result);
    }
    let exec = run(&read, &json!({"query": "rust lifetimes"})).await;
    let keys: Vec<String> = exec.output.unwrap()["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["key"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(keys, ["a", "b"]);
    let exec = run(&read, &json!({"query": "rust", "namespace": "other"})).await;
    assert_eq!(exec.output.unwrap()["entries"][0]["key"], "d");
    // FTS5 syntax in a query is just words.
    let exec = run(&read, &json!({"query": "rust\" OR * NEAR( -- )"})).await;
    assert!(exec.result.ok, "{:?}", exec.result);
    // Text stays out of the redacted view.
    assert!(
        exec.result
            .value
            .unwrap()
            .to_string()
            .find("borrow")
            .is_none()
    );
}

#[tokio::test]
async fn error_codes() {
    let dir = tempfile::tempdir().unwrap();
    let (write, read) = tools(SqliteMemory::open(dir.path().join("m.db")).unwrap(), 0);
    let long = "n".repeat(257);
    assert_each_refused(
        &read,
        [
            (json!({"key": "missing"}), ToolErrorCode::NotFound),
            (json!({}), ToolErrorCode::InvalidArgs),
            (
                json!({"key": "a", "query": "b"}),
                ToolErrorCode::InvalidArgs,
            ),
            (json!({"query": "!!! ???"}), ToolErrorCode::InvalidArgs),
            (
                json!({"key": "a", "namespace": "../etc"}),
                ToolErrorCode::InvalidArgs,
            ),
            (
                json!({"key": "a", "namespace": "a/b"}),
                ToolErrorCode::InvalidArgs,
            ),
            (
                json!({"key": "a", "namespace": "a\\b"}),
                ToolErrorCode::InvalidArgs,
            ),
            (
                json!({"key": "a", "namespace": "a\u{0}b"}),
                ToolErrorCode::InvalidArgs,
            ),
            (
                json!({"key": "a", "namespace": "a\nb"}),
                ToolErrorCode::InvalidArgs,
            ),
            (
                json!({"key": "a", "namespace": ""}),
                ToolErrorCode::InvalidArgs,
            ),
            (
                json!({"key": "a", "namespace": long}),
                ToolErrorCode::InvalidArgs,
            ),
        ],
    )
    .await;
    for args in [
        json!({"key": "", "text": "x"}),
        json!({"key": "a\u{7}", "text": "x"}),
        json!({"key": "a", "text": "x", "namespace": ".."}),
        json!({"key": "a", "text": "x", "tags": vec!["t"; 33]}),
    ] {
        let exec = run(&write, &args).await;
        assert_eq!(
            exec.result.error_code,
            Some(ToolErrorCode::InvalidArgs),
            "{args}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_writers_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.db");
    SqliteMemory::open(&path).unwrap();
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let path = path.clone();
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .unwrap();
                // Each writer has its own connection.
                let store = SqliteMemory::open(&path).unwrap();
                rt.block_on(async {
                    for i in 0..100 {
                        store
                            .put(MemoryRecord {
                                namespace: "default".into(),
                                key: format!("w{w}-{i}"),
                                text: format!("entry {i} from writer{w}"),
                                tags: vec![],
                                created_at_ms: i,
                                updated_at_ms: i,
                            })
                            .await
                            .unwrap();
                    }
                });
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let store = SqliteMemory::open(&path).unwrap();
    for w in 0..2 {
        for i in 0..100 {
            assert!(
                store
                    .get("default".into(), format!("w{w}-{i}"))
                    .await
                    .unwrap()
                    .is_some()
            );
        }
        let hits = store
            .search("default".into(), format!("writer{w}"), 1000)
            .await
            .unwrap();
        assert_eq!(hits.len(), 100);
    }
}

#[tokio::test]
async fn memory_namespace_flooding_is_capped() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteMemory::open(dir.path().join("m.db"))
        .unwrap()
        .with_max_entries(5);
    let (write, read) = tools(store, 1_700_000_000);
    for i in 0..5 {
        let exec = run(&write, &json!({"key": format!("k{i}"), "text": "t"})).await;
        assert!(exec.result.ok, "{:?}", exec.result);
    }
    let exec = run(&write, &json!({"key": "k5", "text": "t"})).await;
    assert_eq!(exec.result.error_code, Some(ToolErrorCode::ExecutionFailed));
    assert!(
        exec.model_content.contains("full"),
        "{}",
        exec.model_content
    );
    // An existing key may be replaced; another namespace has its own room.
    let exec = run(&write, &json!({"key": "k0", "text": "new"})).await;
    assert!(exec.result.ok, "{:?}", exec.result);
    let exec = run(
        &write,
        &json!({"key": "k5", "text": "t", "namespace": "other"}),
    )
    .await;
    assert!(exec.result.ok, "{:?}", exec.result);
    let exec = run(&read, &json!({"key": "k5"})).await;
    assert_eq!(exec.result.error_code, Some(ToolErrorCode::NotFound));
}
