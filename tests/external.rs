//! An external crate, outside the workspace and depending on the project's front
//! door (the `agent` facade) by path, does the six first tasks of a library user
//! against a loopback OpenAI-compatible server: a stateful tool behind an approval
//! closure, a multi-turn chat, streamed events, a typed answer, a sandboxed built-in
//! tool and a cancelled run (see `tests/external-crate/src/main.rs`, which checks
//! what the server received).
//!
//! The crate lives in `tests/external-crate/`. This test copies it to a temporary
//! folder, points its path dependencies at this checkout, reuses the workspace's
//! `Cargo.lock` (so no dependency version differs and nothing is fetched), builds it
//! with the `cargo` running this test into `target/external-crate`, runs it, and
//! checks its output.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// `target/` of the workspace (this test binary runs from `target/<profile>/deps`).
fn target_dir() -> PathBuf {
    if let Ok(dir) = std::env::var("CARGO_TARGET_DIR") {
        return PathBuf::from(dir);
    }
    let exe = std::env::current_exe().unwrap();
    exe.ancestors().nth(3).unwrap().to_path_buf()
}

#[test]
fn an_external_crate_does_the_six_first_tasks_through_the_facade() {
    let root = workspace_root();
    let source = root.join("tests/external-crate");
    let copy = tempfile_dir();
    std::fs::create_dir_all(copy.join("src")).unwrap();
    let manifest = std::fs::read_to_string(source.join("Cargo.toml"))
        .unwrap()
        .replace("../../crates/", &format!("{}/crates/", root.display()));
    std::fs::write(copy.join("Cargo.toml"), manifest).unwrap();
    std::fs::copy(source.join("src/main.rs"), copy.join("src/main.rs")).unwrap();
    std::fs::copy(root.join("Cargo.lock"), copy.join("Cargo.lock")).unwrap();

    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .current_dir(&copy)
        .args(["run", "--quiet", "--offline"])
        .env("CARGO_TARGET_DIR", target_dir().join("external-crate"))
        .env_remove("RUSTFLAGS")
        .output()
        .expect("cargo runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the external crate failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(stdout.contains("external crate: ok"), "{stdout}");
    let events: Vec<serde_json::Value> = stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert!(kinds.contains(&"tool_call_start") && kinds.contains(&"tool_call_result"));
    assert_eq!(kinds.last(), Some(&"done"));
    let denied: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["error_code"] == "approval_denied")
        .collect();
    assert_eq!(denied.len(), 1, "{events:?}");
    // The approval closure's reason, and the arguments the tool lets events show.
    let start = events
        .iter()
        .find(|e| e["type"] == "tool_call_start" && e["tool_call_id"] == "r2")
        .unwrap();
    assert_eq!(
        start["args"],
        serde_json::json!({"order": 2, "amount": 250})
    );
    std::fs::remove_dir_all(&copy).unwrap();
}

/// A fresh folder under the system temp dir.
fn tempfile_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "external-crate-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}
