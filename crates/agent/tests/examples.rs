//! Runs every example of this crate (built by `cargo test` beside this test)
//! and checks that it exits 0: each plays its task against a loopback model,
//! offline, and checks what it got.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

/// The examples, as `[[example]]` names them.
const EXAMPLES: &[&str] = &[
    "closure_tool",
    "ui_events",
    "builtins",
    "shared_state_approver",
    "conversation",
    "streaming",
    "typed_output",
    "sandboxed_file",
    "cancellation",
    "own_axum_app",
    "recorded_runs",
    "claude",
    "other_wires",
    "mcp_stdio",
];

/// `target/<profile>/examples` (this test runs from `target/<profile>/deps`).
fn examples_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().join("examples")
}

#[test]
fn every_example_runs_offline_and_exits_0() {
    let dir = examples_dir();
    let mut failed = Vec::new();
    for name in EXAMPLES {
        let binary = dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
        assert!(
            binary.exists(),
            "example {name} is not built at {}",
            binary.display()
        );
        if let Err(failure) = agent_testing::process::run_offline(&binary) {
            failed.push(failure);
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}

#[test]
fn every_example_is_listed_in_the_manifest_and_the_readme() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let workspace = root.parent().unwrap().parent().unwrap();
    let readme = std::fs::read_to_string(workspace.join("README.md")).unwrap();
    for entry in std::fs::read_dir(root.join("examples")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
        assert!(EXAMPLES.contains(&name.as_str()), "{name} is not run here");
        assert!(
            manifest.contains(&format!("name = \"{name}\"")),
            "{name} has no [[example]]"
        );
        assert!(
            readme.contains(&format!("`{name}`")),
            "{name} is not in README.md"
        );
    }
}
