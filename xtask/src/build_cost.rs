//! `cargo xtask build-cost`: what the library's quick start costs to build cold,
//! beside a peer's, measured in one run on this machine.
//!
//! Two scratch crates in a new temporary folder, each with the same three
//! companions the README's quick start adds (`serde` with derive, `schemars`,
//! `tokio` with macros and the multi-thread runtime): one depending on this
//! checkout's facade with its default features, and two on `rig-core` (the peer
//! the figure is compared with): with its default features, which build no HTTP
//! client (no reqwest, hyper or TLS: nothing that can call a provider), and with
//! its `reqwest` feature, which a rig program calling a provider turns on (the
//! facade's defaults include its HTTPS client). Each is built with `cargo build`
//! (the dev profile) into its own new target folder, one after the other,
//! `rounds` times in alternation (default 1); the wall time of each build is
//! printed. Then the facade's scratch crate is built once more with `--release`
//! and its binary's size printed.
//!
//! Both builds fetch from crates.io what the local registry lacks (the
//! download is not timed: `cargo fetch` runs first).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;

/// The peer's builds: a label and its dependency line.
const PEERS: [(&str, &str); 2] = [
    ("rig-core (defaults)", "rig-core = \"0.44\"\n"),
    (
        "rig-core + reqwest",
        "rig-core = { version = \"0.44\", features = [\"reqwest\"] }\n",
    ),
];

/// The companions of the quick start, as `Cargo.toml` lines.
const COMPANIONS: &str = r#"serde = { version = "1", features = ["derive"] }
schemars = "1"
tokio = { version = "1", features = ["macros", "rt-multi-thread"] }
"#;

/// The facade's scratch program: the quick start's agent with one closure
/// tool, against an endpoint that is never called.
const OURS_MAIN: &str = r#"use agent::openai::{ClientConfig, OpenAiClient};
use agent::prelude::*;

#[derive(Deserialize, JsonSchema)]
struct AddArgs {
    a: i64,
    b: i64,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let add = tool_fn("add", "Add two integers.", ToolEffect::ReadOnly, |args: AddArgs| async move {
        Ok(args.a + args.b)
    })?;
    let client = OpenAiClient::new(ClientConfig::new("http://127.0.0.1:9/v1"))?;
    let agent = Agent::builder(client).model_name("m").tool(add).build()?;
    println!("{}", std::mem::size_of_val(&agent));
    Ok(())
}
"#;

/// The peer's scratch program: it names one of the peer's types (the whole
/// library is built either way).
const PEER_MAIN: &str = r#"fn main() {
    println!("{}", std::any::type_name::<rig_core::completion::message::Message>());
}
"#;

/// `cargo xtask build-cost [--rounds N]`.
pub(crate) fn build_cost_task(root: &Path, args: &[String]) -> ExitCode {
    let rounds = match args {
        [] => 1,
        [flag, n] if flag == "--rounds" => match n.parse::<u32>() {
            Ok(n) if n > 0 => n,
            _ => return crate::usage_error("build-cost: --rounds takes a positive number"),
        },
        _ => return crate::usage_error(&format!("build-cost: unexpected `{}`", args.join(" "))),
    };
    match measure(root, rounds) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("build-cost: error: {error}");
            ExitCode::from(2)
        }
    }
}

fn measure(root: &Path, rounds: u32) -> Result<(), String> {
    let scratch =
        std::env::temp_dir().join(format!("toolwright-build-cost-{}", std::process::id()));
    let facade = root.join("crates/agent");
    let ours = scaffold(
        &scratch.join("ours"),
        &format!(
            "toolwright = {{ path = {:?} }}\n",
            facade.display().to_string()
        ),
        OURS_MAIN,
    )?;
    let mut builds = vec![("toolwright (defaults)", ours.clone())];
    for (index, (label, dependency)) in PEERS.iter().enumerate() {
        let dir = scaffold(
            &scratch.join(format!("peer-{index}")),
            dependency,
            PEER_MAIN,
        )?;
        builds.push((label, dir));
    }
    for (_, dir) in &builds {
        cargo(dir, &["fetch"], None)?;
    }
    for round in 1..=rounds {
        for (label, dir) in &builds {
            let target = scratch.join(format!("target-{round}-{}", dir_name(dir)));
            let started = Instant::now();
            cargo(dir, &["build", "--offline"], Some(&target))?;
            let secs = started.elapsed().as_secs_f64();
            println!("round {round}: {label:<24} cold dev build {secs:>6.1} s");
        }
    }
    let target = scratch.join("target-release");
    cargo(&ours, &["build", "--release", "--offline"], Some(&target))?;
    let binary = target.join("release/quick-start");
    let size = std::fs::metadata(&binary)
        .map_err(|e| format!("{}: {e}", binary.display()))?
        .len();
    println!(
        "toolwright quick start, release binary: {:.1} MiB",
        size as f64 / (1024.0 * 1024.0)
    );
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(())
}

/// Writes a scratch binary crate `quick-start` at `dir` depending on `dependency`
/// and the companions, with `main` as its program.
fn scaffold(dir: &Path, dependency: &str, main: &str) -> Result<PathBuf, String> {
    let src = dir.join("src");
    std::fs::create_dir_all(&src).map_err(|e| format!("{}: {e}", src.display()))?;
    let manifest = format!(
        "[package]\nname = \"quick-start\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n[workspace]\n\n[dependencies]\n{dependency}{COMPANIONS}"
    );
    for (path, text) in [
        (dir.join("Cargo.toml"), manifest.as_str()),
        (src.join("main.rs"), main),
    ] {
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(dir.to_path_buf())
}

fn dir_name(dir: &Path) -> String {
    dir.file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Runs `cargo ARGS` in `dir` (its output passed through on failure only), with
/// `target` as the target folder when given.
fn cargo(dir: &Path, args: &[&str], target: Option<&Path>) -> Result<(), String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command.current_dir(dir).args(args).env_remove("RUSTFLAGS");
    if let Some(target) = target {
        command.env("CARGO_TARGET_DIR", target);
    }
    let output = command
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if output.status.success() {
        return Ok(());
    }
    Err(format!(
        "`cargo {}` in {} failed:\n{}",
        args.join(" "),
        dir.display(),
        String::from_utf8_lossy(&output.stderr)
    ))
}
