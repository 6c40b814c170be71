//! The facade's examples, built as the binaries of a crate outside the workspace
//! that depends on the project's front door (the `agent` facade) by path and on
//! nothing else of the project, pass there as they pass in the workspace: a
//! closure tool, UI events, a stateful tool behind an approval closure with its
//! events streamed, a multi-turn chat, streaming to a terminal, a typed answer, a
//! sandboxed built-in tool and a cancelled run, each against a loopback
//! OpenAI-compatible server and each checking what that server received.
//!
//! The crate's manifest lives in `tests/external-crate/`. This test copies it to a
//! temporary folder with the examples as `src/bin/*.rs`, points its path
//! dependencies at this checkout, reuses the workspace's `Cargo.lock` (so no
//! dependency version differs and nothing is fetched), builds it with the `cargo`
//! running this test into `target/external-crate`, and runs every binary.

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

/// The facade features the external crate turns on (see its manifest).
const FEATURES: &[&str] = &["openai", "host", "testing"];

/// The facade's examples that need only [`FEATURES`], as its manifest's
/// `[[example]]` entries say (the others need more of the facade or other
/// crates).
fn examples(root: &Path) -> Vec<String> {
    let manifest = std::fs::read_to_string(root.join("crates/agent/Cargo.toml")).unwrap();
    let manifest: toml::Table = manifest.parse().unwrap();
    let entries = manifest["example"].as_array().unwrap();
    let examples: Vec<String> = entries
        .iter()
        .filter(|entry| {
            entry["required-features"]
                .as_array()
                .unwrap()
                .iter()
                .all(|feature| FEATURES.contains(&feature.as_str().unwrap()))
        })
        .map(|entry| entry["name"].as_str().unwrap().to_owned())
        .collect();
    assert!(examples.len() >= 8, "{examples:?}");
    examples
}

#[test]
fn the_facade_examples_pass_in_a_crate_outside_the_workspace() {
    let root = workspace_root();
    let source = root.join("tests/external-crate");
    let copy = tempfile_dir();
    std::fs::create_dir_all(copy.join("src/bin")).unwrap();
    let manifest = std::fs::read_to_string(source.join("Cargo.toml"))
        .unwrap()
        .replace("../../crates/", &format!("{}/crates/", root.display()));
    std::fs::write(copy.join("Cargo.toml"), manifest).unwrap();
    let examples = examples(&root);
    for name in &examples {
        let example = root.join(format!("crates/agent/examples/{name}.rs"));
        std::fs::copy(&example, copy.join(format!("src/bin/{name}.rs"))).unwrap();
    }
    std::fs::copy(root.join("Cargo.lock"), copy.join("Cargo.lock")).unwrap();

    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let target = target_dir().join("external-crate");
    let build = Command::new(&cargo)
        .current_dir(&copy)
        .args(["build", "--quiet", "--offline", "--bins"])
        .env("CARGO_TARGET_DIR", &target)
        .env_remove("RUSTFLAGS")
        .output()
        .expect("cargo runs");
    assert!(
        build.status.success(),
        "the external crate does not build\n{}",
        String::from_utf8_lossy(&build.stderr)
    );
    let mut failed = Vec::new();
    for name in &examples {
        let binary = target.join("debug").join(name);
        if let Err(failure) = agent_testing::process::run_offline(&binary) {
            failed.push(failure);
        }
    }
    std::fs::remove_dir_all(&copy).unwrap();
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
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
