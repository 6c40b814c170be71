//! The path-escape corpus: every case is refused, or proven to stay inside, and
//! nothing outside the workspace is read or written.
//!
//! Layout: `base/ws` is the workspace, `base/outside` a sentinel folder holding a
//! secret. Each case runs all four file tools (read, list, write, edit) through the
//! real runner; afterwards the sentinel's listing and contents must be unchanged and
//! no tool output may contain the secret.
//!
//! Further attacks on the same real files: the agent's own config, lock and state
//! rewritten through the tools (by name, symlink, hard link or after a rename); FIFOs,
//! sockets and devices that would hang a read; and a path component swapped for a
//! symlink in a tight loop while the tools write, create folders and list.
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
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use ai_core::tool::{RegisteredTool, ToolErrorCode};
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
    symlink("sub/../../outside", ws.join("sneaky_up")).unwrap();
    symlink("/proc/self/root", ws.join("proc_root")).unwrap();
    symlink("/proc/self/cwd", ws.join("proc_cwd")).unwrap();
    symlink("/dev/stdin", ws.join("stdin_link")).unwrap();
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
        (
            "symlink with dotdot in its target",
            "sneaky_up/secret.txt".into(),
            Refused,
        ),
        (
            "magic link to the root filesystem",
            format!("proc_root{}", sb.outside.join("secret.txt").display()),
            Refused,
        ),
        (
            "magic link to the process cwd",
            "proc_cwd/x.txt".into(),
            Refused,
        ),
        ("symlink to a device", "stdin_link".into(), Refused),
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
    assert!(cases.len() >= 46, "{}", cases.len());
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

fn assert_protected(exec: &ai_core::runner::ToolExecution, label: &str) {
    assert_eq!(
        exec.result.error_code,
        Some(ToolErrorCode::PermissionDenied),
        "{label}: {:?}",
        exec.result
    );
    assert!(
        exec.model_content.contains("protected"),
        "{label}: {}",
        exec.model_content
    );
}

#[tokio::test]
async fn the_model_cannot_rewrite_the_agents_own_config_lock_or_state() {
    let sb = sandbox();
    // A project config and state folder inside the workspace, a user config outside
    // it (hard-linked in), and a lock file that does not exist yet.
    let config = sb.ws.join("agent.toml");
    fs::write(&config, "[model]\nmodel = \"m\"\n").unwrap();
    let state = sb.ws.join(".agent");
    fs::create_dir_all(state.join("cache")).unwrap();
    fs::write(state.join("memory.db"), "db").unwrap();
    let user_config = sb.outside.join("user.toml");
    fs::write(&user_config, "user").unwrap();
    fs::hard_link(&user_config, sb.ws.join("user_hard")).unwrap();
    fs::hard_link(&config, sb.ws.join("config_hard")).unwrap();
    symlink("agent.toml", sb.ws.join("config_link")).unwrap();
    symlink(".agent", sb.ws.join("state_link")).unwrap();
    let before = snapshot(&sb.base, &sb.ws);
    let local = LocalWorkspace::new(&sb.ws).unwrap().with_protected([
        config.clone(),
        sb.ws.join("agent.lock"),
        state.clone(),
        user_config.clone(),
        sb.base.join("data/agent"),
    ]);
    let [read, _, write, edit] = tools(Arc::new(local.clone()));
    let cases = [
        "agent.toml",
        "./agent.toml",
        "sub/../agent.toml",
        "config_link",
        "config_hard",
        "user_hard",
        "agent.lock",
        ".agent/memory.db",
        ".agent/new.txt",
        ".agent/cache/deeper/new.txt",
        "state_link/memory.db",
    ];
    for path in cases {
        let exec = run(&write, &json!({"path": path, "content": "PWNED"})).await;
        assert_protected(&exec, path);
    }
    for path in ["agent.toml", "config_link", "config_hard", "user_hard"] {
        let exec = run(
            &edit,
            &json!({"path": path, "old": "= \"m\"", "new": "PWNED"}),
        )
        .await;
        if path == "user_hard" {
            // The text does not occur in the user config: the edit fails before writing.
            assert!(!exec.result.ok, "{path}");
        } else {
            assert_protected(&exec, path);
        }
    }
    // The rename trick: the state folder under another name is still the state folder.
    fs::rename(&state, sb.ws.join("renamed_state")).unwrap();
    let exec = run(
        &write,
        &json!({"path": "renamed_state/memory.db", "content": "PWNED"}),
    )
    .await;
    assert_protected(&exec, "renamed state");
    fs::rename(sb.ws.join("renamed_state"), &state).unwrap();
    // A protected file moved to a new name keeps its identity.
    fs::rename(&config, sb.ws.join("moved.toml")).unwrap();
    let exec = run(&write, &json!({"path": "moved.toml", "content": "PWNED"})).await;
    assert_protected(&exec, "moved config");
    // ...and its old name may not be recreated either.
    let exec = run(&write, &json!({"path": "agent.toml", "content": "PWNED"})).await;
    assert_protected(&exec, "recreated config");
    fs::rename(sb.ws.join("moved.toml"), &config).unwrap();

    // Reads are fine, and so are writes elsewhere.
    let exec = run(&read, &json!({"path": "agent.toml"})).await;
    assert!(exec.result.ok, "{:?}", exec.result);
    let exec = run(&write, &json!({"path": "notes.txt", "content": "ok"})).await;
    assert!(exec.result.ok, "{:?}", exec.result);
    assert_eq!(
        fs::read_to_string(&config).unwrap(),
        "[model]\nmodel = \"m\"\n"
    );
    assert_eq!(fs::read_to_string(state.join("memory.db")).unwrap(), "db");
    assert!(!sb.ws.join("agent.lock").exists());
    assert!(!state.join("new.txt").exists());
    assert_eq!(snapshot(&sb.base, &sb.ws), before);
}

#[tokio::test]
async fn a_fifo_socket_or_device_never_hangs_the_file_tools() {
    let sb = sandbox();
    let ws_fd = rustix::fs::open(
        &sb.ws,
        rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::RDONLY,
        rustix::fs::Mode::empty(),
    )
    .unwrap();
    rustix::fs::mkfifoat(&ws_fd, "p", rustix::fs::Mode::from_raw_mode(0o644)).unwrap();
    let _socket = std::os::unix::net::UnixListener::bind(sb.ws.join("sock")).unwrap();
    let mut special = vec!["p", "sock"];
    // A character device (like /dev/null) where this process may create one.
    if rustix::fs::mknodat(
        &ws_fd,
        "dev",
        rustix::fs::FileType::CharacterDevice,
        rustix::fs::Mode::from_raw_mode(0o666),
        rustix::fs::makedev(1, 3),
    )
    .is_ok()
    {
        special.push("dev");
    }
    for local in [
        LocalWorkspace::new(&sb.ws).unwrap(),
        LocalWorkspace::new(&sb.ws).unwrap().without_openat2(),
    ] {
        let [read, list, write, edit] = tools(Arc::new(local));
        for path in &special {
            let calls = [
                ("read", &read, json!({"path": path})),
                ("write", &write, json!({"path": path, "content": "x"})),
                ("edit", &edit, json!({"path": path, "old": "a", "new": "b"})),
            ];
            for (tool, registered, args) in calls {
                let exec = tokio::time::timeout(Duration::from_secs(5), run(registered, &args))
                    .await
                    .unwrap_or_else(|_| panic!("{tool} {path} hung"));
                assert_eq!(
                    exec.result.error_code,
                    Some(ToolErrorCode::InvalidArgs),
                    "{tool} {path}: {:?}",
                    exec.result
                );
            }
        }
        let exec = tokio::time::timeout(Duration::from_secs(5), run(&list, &json!({})))
            .await
            .unwrap();
        let listing = exec.output.unwrap().to_string();
        assert!(listing.contains(r#""kind":"other""#), "{listing}");
    }
    // The FIFO is still a FIFO: nothing replaced it.
    let meta = fs::symlink_metadata(sb.ws.join("p")).unwrap();
    assert!(std::os::unix::fs::FileTypeExt::is_fifo(&meta.file_type()));
}

/// Swaps `ws/swap` (a real folder) with `ws/decoy` (a symlink to the outside folder)
/// atomically, again and again, until told to stop.
fn swapper(
    ws: PathBuf,
    stop: Arc<AtomicBool>,
    swaps: Arc<AtomicUsize>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let dir = rustix::fs::open(
            &ws,
            rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::RDONLY,
            rustix::fs::Mode::empty(),
        )
        .unwrap();
        while !stop.load(Ordering::Relaxed) {
            rustix::fs::renameat_with(
                &dir,
                "swap",
                &dir,
                "decoy",
                rustix::fs::RenameFlags::EXCHANGE,
            )
            .unwrap();
            swaps.fetch_add(1, Ordering::Relaxed);
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_path_component_swapped_for_a_symlink_in_a_tight_loop_never_escapes() {
    for openat2 in [true, false] {
        let sb = sandbox();
        fs::create_dir_all(sb.ws.join("swap/inner")).unwrap();
        fs::write(sb.ws.join("swap/inner.txt"), "inside TOP\n").unwrap();
        symlink(&sb.outside, sb.ws.join("decoy")).unwrap();
        let before = snapshot(&sb.base, &sb.ws);
        let mut local = LocalWorkspace::new(&sb.ws).unwrap();
        if !openat2 {
            local = local.without_openat2();
        }
        let [read, list, write, edit] = tools(Arc::new(local));
        let stop = Arc::new(AtomicBool::new(false));
        let swaps = Arc::new(AtomicUsize::new(0));
        let thread = swapper(sb.ws.clone(), Arc::clone(&stop), Arc::clone(&swaps));
        let mut listed = Vec::new();
        let mut outputs = String::new();
        for i in 0..150 {
            let execs = [
                run(&write, &json!({"path": "swap/new.txt", "content": "PWNED"})).await,
                run(
                    &write,
                    &json!({"path": format!("swap/made{i}/a/b/c.txt"), "content": "PWNED"}),
                )
                .await,
                run(&list, &json!({"path": "swap", "depth": 3})).await,
                run(&list, &json!({"path": ".", "depth": 4})).await,
                run(&read, &json!({"path": "swap/secret.txt"})).await,
                run(&read, &json!({"path": "swap/deeper/more.txt"})).await,
                run(
                    &edit,
                    &json!({"path": "swap/inner.txt", "old": "TOP", "new": "TOP"}),
                )
                .await,
            ];
            for exec in execs {
                outputs.push_str(&format!("{} {:?}\n", exec.model_content, exec.output));
                if let Some(entries) = exec.output.as_ref().and_then(|o| o["entries"].as_array()) {
                    listed.extend(
                        entries
                            .iter()
                            .filter_map(|e| e["path"].as_str().map(str::to_owned)),
                    );
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        thread.join().unwrap();
        assert!(
            swaps.load(Ordering::Relaxed) > 100,
            "the swapper barely ran"
        );
        assert_eq!(
            snapshot(&sb.base, &sb.ws),
            before,
            "openat2={openat2}: something outside was created or changed"
        );
        assert!(
            !outputs.contains(SECRET),
            "openat2={openat2}: the secret leaked"
        );
        for name in &listed {
            assert!(
                !name.contains("secret.txt")
                    && !name.contains("deeper")
                    && !name.contains("more.txt"),
                "openat2={openat2}: an outside entry was listed: {name}"
            );
        }
        // The writes that won the race landed inside.
        assert!(
            sb.ws.join("swap/new.txt").exists() || sb.ws.join("decoy/new.txt").exists(),
            "openat2={openat2}: no write ever succeeded"
        );
    }
}
