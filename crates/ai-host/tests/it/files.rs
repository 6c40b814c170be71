//! The file tools on a real temp folder: success paths and every error code.

use std::fs;
use std::sync::Arc;

use ai_core::runner::ToolExecution;
use ai_core::tool::{RegisteredTool, ToolErrorCode};
use ai_host::LocalWorkspace;
use ai_tools::bind;
use ai_tools::builtin::{EditFile, ListDirectory, ReadFile, WriteFile};
use ai_tools::capability::Workspace;
use serde_json::json;

use crate::support::{assert_each_refused, run};

struct Rig {
    _dir: tempfile::TempDir,
    root: std::path::PathBuf,
    read: RegisteredTool,
    list: RegisteredTool,
    write: RegisteredTool,
    edit: RegisteredTool,
}

fn rig() -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ws");
    fs::create_dir_all(root.join("src/nested")).unwrap();
    fs::write(root.join("a.txt"), "one\ntwo\nthree\nfour\n").unwrap();
    fs::write(root.join("src/lib.rs"), "fn a() {}\nfn a() {}\n").unwrap();
    fs::write(root.join("src/nested/deep.txt"), "deep").unwrap();
    fs::write(root.join("bin.dat"), [0_u8, 1, 2, 3]).unwrap();
    fs::write(root.join("big.txt"), "x".repeat(2048)).unwrap();
    let ws: Arc<dyn Workspace> = Arc::new(LocalWorkspace::new(&root).unwrap());
    Rig {
        root: fs::canonicalize(&root).unwrap(),
        _dir: dir,
        read: bind(ReadFile { max_bytes: 1024 }, Arc::clone(&ws)).unwrap(),
        list: bind(ListDirectory, Arc::clone(&ws)).unwrap(),
        write: bind(WriteFile, Arc::clone(&ws)).unwrap(),
        edit: bind(EditFile { max_bytes: 1024 }, ws).unwrap(),
    }
}

#[tokio::test]
async fn read_file_reads_ranges_and_refuses_what_it_must() {
    let r = rig();
    let exec = run(&r.read, &json!({"path": "a.txt"})).await;
    assert!(exec.result.ok, "{:?}", exec.result);
    let out = exec.output.unwrap();
    assert_eq!(out["content"], "one\ntwo\nthree\nfour\n");
    assert_eq!(out["total_lines"], 4);
    assert_eq!(out["more"], false);

    let exec = run(&r.read, &json!({"path": "a.txt", "offset": 2, "limit": 2})).await;
    let out = exec.output.unwrap();
    assert_eq!(out["content"], "two\nthree\n");
    assert_eq!(out["start_line"], 2);
    assert_eq!(out["more"], true);
    // The content stays out of the redacted UI view.
    assert!(exec.result.value.unwrap().get("content").is_none());

    let cases = [
        (json!({"path": "missing.txt"}), ToolErrorCode::NotFound),
        (json!({"path": "bin.dat"}), ToolErrorCode::ExecutionFailed),
        (json!({"path": "big.txt"}), ToolErrorCode::InvalidArgs),
        (json!({"path": "src"}), ToolErrorCode::InvalidArgs),
        (json!({"path": "../x"}), ToolErrorCode::PermissionDenied),
        (json!({"path": 5}), ToolErrorCode::InvalidArgs),
    ];
    assert_each_refused(&r.read, cases).await;
    let exec = run(&r.read, &json!({"path": "bin.dat"})).await;
    assert!(
        exec.model_content.contains("binary"),
        "{}",
        exec.model_content
    );
}

/// The paths of the entries `list_directory` returned.
fn entry_paths(exec: &ToolExecution) -> Vec<String> {
    let entries = exec.output.as_ref().unwrap()["entries"].as_array().unwrap();
    let paths = entries
        .iter()
        .map(|e| e["path"].as_str().unwrap().to_owned());
    paths.collect()
}

#[tokio::test]
async fn list_directory_is_stable_capped_and_says_when_truncated() {
    let r = rig();
    let exec = run(&r.list, &json!({})).await;
    assert!(exec.result.ok, "{:?}", exec.result);
    let paths = entry_paths(&exec);
    assert_eq!(paths, ["a.txt", "big.txt", "bin.dat", "src"]);

    let exec = run(&r.list, &json!({"path": ".", "depth": 3})).await;
    let paths = entry_paths(&exec);
    assert_eq!(
        paths,
        [
            "a.txt",
            "big.txt",
            "bin.dat",
            "src",
            "src/lib.rs",
            "src/nested",
            "src/nested/deep.txt"
        ]
    );

    let exec = run(&r.list, &json!({"depth": 3, "max_entries": 5})).await;
    let out = exec.output.unwrap();
    assert_eq!(out["entries"].as_array().unwrap().len(), 5);
    assert_eq!(out["truncated"], true);
    assert!(
        exec.model_content.contains("truncated"),
        "{}",
        exec.model_content
    );

    assert_each_refused(
        &r.list,
        [
            (json!({"path": "nope"}), ToolErrorCode::NotFound),
            (json!({"path": "a.txt"}), ToolErrorCode::InvalidArgs),
            (json!({"path": ".."}), ToolErrorCode::PermissionDenied),
        ],
    )
    .await;
}

#[tokio::test]
async fn write_file_creates_parents_atomically_and_reports_creation() {
    let r = rig();
    let exec = run(
        &r.write,
        &json!({"path": "new/dir/f.txt", "content": "hello"}),
    )
    .await;
    assert!(exec.result.ok, "{:?}", exec.result);
    assert_eq!(exec.output.unwrap()["created"], true);
    assert_eq!(
        fs::read_to_string(r.root.join("new/dir/f.txt")).unwrap(),
        "hello"
    );

    let exec = run(&r.write, &json!({"path": "a.txt", "content": "replaced"})).await;
    let out = exec.output.unwrap();
    assert_eq!(out["created"], false);
    assert_eq!(out["bytes_written"], 8);
    assert_eq!(
        fs::read_to_string(r.root.join("a.txt")).unwrap(),
        "replaced"
    );
    // No temporary file is left behind.
    let leftovers: Vec<_> = fs::read_dir(&r.root)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with(".agent-write-"))
        .collect();
    assert!(leftovers.is_empty());

    assert_each_refused(
        &r.write,
        [
            (
                json!({"path": "src", "content": "x"}),
                ToolErrorCode::InvalidArgs,
            ),
            (
                json!({"path": ".", "content": "x"}),
                ToolErrorCode::InvalidArgs,
            ),
            (
                json!({"path": "a.txt/below", "content": "x"}),
                ToolErrorCode::ExecutionFailed,
            ),
            (
                json!({"path": "../x", "content": "x"}),
                ToolErrorCode::PermissionDenied,
            ),
            (json!({"path": "x"}), ToolErrorCode::InvalidArgs),
        ],
    )
    .await;
}

#[tokio::test]
async fn edit_file_replaces_exactly_once_or_all() {
    let r = rig();
    let exec = run(&r.edit, &json!({"path": "a.txt", "old": "two", "new": "2"})).await;
    assert!(exec.result.ok, "{:?}", exec.result);
    assert_eq!(exec.output.unwrap()["replacements"], 1);
    assert_eq!(
        fs::read_to_string(r.root.join("a.txt")).unwrap(),
        "one\n2\nthree\nfour\n"
    );

    let exec = run(
        &r.edit,
        &json!({"path": "src/lib.rs", "old": "fn a", "new": "fn b"}),
    )
    .await;
    assert_eq!(exec.result.error_code, Some(ToolErrorCode::ExecutionFailed));
    assert!(
        exec.model_content.contains("2 times"),
        "{}",
        exec.model_content
    );
    assert_eq!(
        fs::read_to_string(r.root.join("src/lib.rs")).unwrap(),
        "fn a() {}\nfn a() {}\n"
    );

    let exec = run(
        &r.edit,
        &json!({"path": "src/lib.rs", "old": "fn a", "new": "fn b", "replace_all": true}),
    )
    .await;
    assert_eq!(exec.output.unwrap()["replacements"], 2);
    assert_eq!(
        fs::read_to_string(r.root.join("src/lib.rs")).unwrap(),
        "fn b() {}\nfn b() {}\n"
    );

    assert_each_refused(
        &r.edit,
        [
            (
                json!({"path": "a.txt", "old": "zzz", "new": "y"}),
                ToolErrorCode::ExecutionFailed,
            ),
            (
                json!({"path": "a.txt", "old": "", "new": "y"}),
                ToolErrorCode::InvalidArgs,
            ),
            (
                json!({"path": "nope.txt", "old": "a", "new": "b"}),
                ToolErrorCode::NotFound,
            ),
            (
                json!({"path": "bin.dat", "old": "a", "new": "b"}),
                ToolErrorCode::ExecutionFailed,
            ),
            (
                json!({"path": "../a.txt", "old": "a", "new": "b"}),
                ToolErrorCode::PermissionDenied,
            ),
        ],
    )
    .await;
}
