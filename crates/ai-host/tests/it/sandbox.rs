//! The path-escape corpus: every case is refused, or proven to stay inside, and
//! nothing outside the workspace is read or written.
//!
//! Layout: `base/ws` is the workspace, `base/outside` a sentinel folder holding a
//! secret. Each case runs all four file tools (read, list, write, edit) through the
//! real runner; afterwards the sentinel's listing and contents must be unchanged and
//! no tool output may contain the secret.
//!
//! Decision: percent-encoded text and Unicode look-alike separators are ordinary
//! file-name characters, so such paths name files inside the workspace (`Inside`
//! cases assert where the write landed). Backslashes, `~`, NUL, absolute and empty
//! paths are refused.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ai_core::{RegisteredTool, ToolErrorCode};
use ai_host::LocalWorkspace;
use ai_tools::bind;
use ai_tools::builtin::{EditFile, ListDirectory, ReadFile, WriteFile};
use ai_tools::capability::{Workspace, WorkspaceError};
use serde_json::json;

use crate::support::run;

const SECRET: &str = "TOP-SECRET-7f3a9c";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// Every tool answers `permission_denied`.
    Refused,
    /// Nothing is refused, but the write lands inside the workspace.
    Inside,
}

struct Sandbox {
    _dir: tempfile::TempDir,
    base: PathBuf,
    ws: PathBuf,
    outside: PathBuf,
}

fn sandbox() -> Sandbox {
    let dir = tempfile::tempdir().unwrap();
    let base = fs::canonicalize(dir.path()).unwrap();
    let ws = base.join("ws");
    let outside = base.join("outside");
    fs::create_dir_all(ws.join("sub")).unwrap();
    fs::create_dir_all(outside.join("deeper")).unwrap();
    fs::write(outside.join("secret.txt"), format!("{SECRET} TOP\n")).unwrap();
    fs::write(outside.join("deeper/more.txt"), SECRET).unwrap();
    fs::write(ws.join("sub/file.txt"), "inside TOP\n").unwrap();
    symlink(outside.join("secret.txt"), ws.join("link_file")).unwrap();
    symlink(&outside, ws.join("link_dir")).unwrap();
    symlink("../outside", ws.join("rel_link_up")).unwrap();
    symlink("link_dir", ws.join("chain")).unwrap();
    symlink("loop_b", ws.join("loop_a")).unwrap();
    symlink("loop_a", ws.join("loop_b")).unwrap();
    symlink("self_loop", ws.join("self_loop")).unwrap();
    symlink(outside.join("created.txt"), ws.join("dangling")).unwrap();
    symlink("sub", ws.join("inner_link")).unwrap();
    Sandbox {
        _dir: dir,
        base,
        ws,
        outside,
    }
}

/// Everything outside the workspace: relative path to contents (`<dir>` for folders).
fn snapshot(base: &Path, ws: &Path) -> BTreeMap<PathBuf, String> {
    fn walk(dir: &Path, base: &Path, ws: &Path, out: &mut BTreeMap<PathBuf, String>) {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path == ws {
                continue;
            }
            let rel = path.strip_prefix(base).unwrap().to_path_buf();
            let meta = fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                out.insert(rel, "<dir>".to_owned());
                walk(&path, base, ws, out);
            } else {
                out.insert(rel, fs::read_to_string(&path).unwrap_or_default());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(base, base, ws, &mut out);
    out
}

fn corpus(sb: &Sandbox) -> Vec<(&'static str, String, Expect)> {
    use Expect::{Inside, Refused};
    let abs_secret = sb.outside.join("secret.txt").display().to_string();
    vec![
        ("dotdot", "../outside/secret.txt".into(), Refused),
        ("dotdot twice", "../../outside/secret.txt".into(), Refused),
        (
            "dotdot after sub",
            "sub/../../outside/secret.txt".into(),
            Refused,
        ),
        ("dot then dotdot", "./../outside/secret.txt".into(), Refused),
        (
            "long dotdot chain",
            "sub/../../../../../../outside/secret.txt".into(),
            Refused,
        ),
        (
            "dotdot through missing",
            "missing/../../outside/secret.txt".into(),
            Refused,
        ),
        (
            "dotdot through missing chain",
            "a/b/c/../../../../outside/new.txt".into(),
            Refused,
        ),
        ("bare dotdot", "..".into(), Refused),
        ("dots and slashes", "sub/./../..".into(), Refused),
        ("absolute outside", abs_secret.clone(), Refused),
        ("absolute double slash", format!("/{abs_secret}"), Refused),
        (
            "absolute inside",
            sb.ws.join("sub/file.txt").display().to_string(),
            Refused,
        ),
        ("symlink to outside file", "link_file".into(), Refused),
        ("symlink to outside dir", "link_dir".into(), Refused),
        (
            "through symlinked dir",
            "link_dir/secret.txt".into(),
            Refused,
        ),
        (
            "new file in symlinked dir",
            "link_dir/new.txt".into(),
            Refused,
        ),
        (
            "relative symlink up",
            "rel_link_up/secret.txt".into(),
            Refused,
        ),
        ("symlink chain", "chain/secret.txt".into(), Refused),
        ("symlink after dotdot", "sub/../link_file".into(), Refused),
        (
            "symlink then dotdot",
            "inner_link/../../outside/secret.txt".into(),
            Refused,
        ),
        ("symlink loop", "loop_a".into(), Refused),
        ("symlink loop below", "loop_a/x.txt".into(), Refused),
        ("self loop", "self_loop".into(), Refused),
        ("dangling symlink to outside", "dangling".into(), Refused),
        (
            "NUL inside",
            "sub\0/../../outside/secret.txt".into(),
            Refused,
        ),
        ("NUL at end", "sub/file.txt\0".into(), Refused),
        ("very long path", "a/".repeat(2100), Refused),
        ("very long component", "x".repeat(300), Refused),
        ("backslashes", "..\\outside\\secret.txt".into(), Refused),
        (
            "mixed separators",
            "sub\\..\\..\\outside\\secret.txt".into(),
            Refused,
        ),
        ("tilde home", "~/.ssh/id_rsa".into(), Refused),
        ("bare tilde", "~".into(), Refused),
        ("empty", String::new(), Refused),
        (
            "percent-encoded dots",
            "%2e%2e/outside/secret.txt".into(),
            Inside,
        ),
        (
            "percent-encoded slash",
            "..%2foutside%2fsecret.txt".into(),
            Inside,
        ),
        (
            "percent-encoded all",
            "%2e%2e%2f%2e%2e%2foutside%2fsecret.txt".into(),
            Inside,
        ),
        (
            "division slash",
            "\u{2215}..\u{2215}outside\u{2215}secret.txt".into(),
            Inside,
        ),
        (
            "fullwidth solidus",
            "..\u{ff0f}outside\u{ff0f}secret.txt".into(),
            Inside,
        ),
        ("fraction slash", "..\u{2044}outside".into(), Inside),
        (
            "one dot leaders",
            "\u{2024}\u{2024}/outside/secret.txt".into(),
            Inside,
        ),
        ("file URL", "file:///outside/secret.txt".into(), Inside),
        (
            "trailing dots",
            "sub/file.txt/../../../outside".into(),
            Refused,
        ),
    ]
}

fn tools(ws: Arc<dyn Workspace>) -> [RegisteredTool; 4] {
    [
        bind(ReadFile::default(), Arc::clone(&ws)).unwrap(),
        bind(ListDirectory, Arc::clone(&ws)).unwrap(),
        bind(WriteFile, Arc::clone(&ws)).unwrap(),
        bind(EditFile::default(), ws).unwrap(),
    ]
}

#[tokio::test]
async fn escape_corpus_is_refused_or_stays_inside() {
    let sb = sandbox();
    let before = snapshot(&sb.base, &sb.ws);
    let local = LocalWorkspace::new(&sb.ws).unwrap();
    let [read, list, write, edit] = tools(Arc::new(local.clone()));
    let cases = corpus(&sb);
    assert!(cases.len() >= 30, "{}", cases.len());
    for (label, path, expect) in &cases {
        let execs = [
            ("read", run(&read, &json!({"path": path})).await),
            ("list", run(&list, &json!({"path": path})).await),
            (
                "write",
                run(&write, &json!({"path": path, "content": "PWNED"})).await,
            ),
            (
                "edit",
                run(&edit, &json!({"path": path, "old": "TOP", "new": "PWNED"})).await,
            ),
        ];
        for (tool, exec) in &execs {
            let text = format!("{} {:?} {:?}", exec.model_content, exec.output, exec.result);
            assert!(
                !text.contains(SECRET),
                "{label}/{tool}: the secret leaked: {text}"
            );
            assert!(
                !exec.model_content.contains(&sb.base.display().to_string()),
                "{label}/{tool}: a real path leaked: {}",
                exec.model_content
            );
            match expect {
                Expect::Refused => assert_eq!(
                    exec.result.error_code,
                    Some(ToolErrorCode::PermissionDenied),
                    "{label}/{tool}: {:?}",
                    exec.result
                ),
                Expect::Inside => assert_ne!(
                    exec.result.error_code,
                    Some(ToolErrorCode::PermissionDenied),
                    "{label}/{tool}"
                ),
            }
        }
        if *expect == Expect::Inside {
            assert!(
                execs[2].1.result.ok,
                "{label}: write failed {:?}",
                execs[2].1.result
            );
            let landed = local.resolve(path).unwrap();
            assert!(landed.starts_with(&sb.ws), "{label}");
            assert_eq!(fs::read_to_string(&landed).unwrap(), "PWNED", "{label}");
        }
        assert_eq!(
            snapshot(&sb.base, &sb.ws),
            before,
            "{label}: outside changed"
        );
    }
}

#[tokio::test]
async fn a_file_swapped_for_a_symlink_after_the_check_is_refused() {
    let sb = sandbox();
    let before = snapshot(&sb.base, &sb.ws);
    let local = LocalWorkspace::new(&sb.ws).unwrap();
    let checked = local.resolve("sub/file.txt").unwrap();
    // The attacker swaps the checked file for a link to the secret.
    fs::remove_file(&checked).unwrap();
    symlink(sb.outside.join("secret.txt"), &checked).unwrap();
    assert_eq!(
        local.open_checked(&checked).err(),
        Some(WorkspaceError::Denied)
    );
    assert_eq!(snapshot(&sb.base, &sb.ws), before);
}

#[tokio::test]
async fn a_folder_swapped_for_a_symlink_after_the_check_is_refused() {
    let sb = sandbox();
    fs::create_dir(sb.ws.join("swap")).unwrap();
    fs::write(sb.ws.join("swap/secret.txt"), "decoy").unwrap();
    let before = snapshot(&sb.base, &sb.ws);
    let local = LocalWorkspace::new(&sb.ws).unwrap();
    let checked = local.resolve("swap/secret.txt").unwrap();
    // The attacker swaps an intermediate folder for a link to the outside.
    fs::rename(sb.ws.join("swap"), sb.ws.join("swap_old")).unwrap();
    symlink(&sb.outside, sb.ws.join("swap")).unwrap();
    assert_eq!(
        local.open_checked(&checked).err(),
        Some(WorkspaceError::Denied)
    );
    // And the tools, resolving afresh, refuse too.
    let [read, _, write, _] = tools(Arc::new(local));
    let exec = run(&read, &json!({"path": "swap/secret.txt"})).await;
    assert_eq!(
        exec.result.error_code,
        Some(ToolErrorCode::PermissionDenied)
    );
    let exec = run(
        &write,
        &json!({"path": "swap/secret.txt", "content": "PWNED"}),
    )
    .await;
    assert_eq!(
        exec.result.error_code,
        Some(ToolErrorCode::PermissionDenied)
    );
    assert_eq!(snapshot(&sb.base, &sb.ws), before);
}

#[tokio::test]
async fn symlinks_inside_the_workspace_still_work() {
    let sb = sandbox();
    let [read, list, _, _] = tools(Arc::new(LocalWorkspace::new(&sb.ws).unwrap()));
    let exec = run(&read, &json!({"path": "inner_link/file.txt"})).await;
    assert!(exec.result.ok, "{:?}", exec.result);
    assert_eq!(exec.output.unwrap()["content"], "inside TOP\n");
    // Listing reports links without following them.
    let exec = run(&list, &json!({"path": "."})).await;
    let listing = exec.output.unwrap().to_string();
    assert!(listing.contains(r#""kind":"symlink""#), "{listing}");
    assert!(!listing.contains("secret.txt"), "{listing}");
}
