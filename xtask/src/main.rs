//! Repository chores (`cargo xtask <task>`): the mechanical checks of the
//! architecture that `cargo test` also runs.
//!
//! xtask depends on no project crate and is never depended on; it reads the workspace
//! only through `cargo metadata` and the source tree.
//!
//! Tasks:
//! - `layer-lint`: the layer table in layers.toml, checked against the workspace,
//!   deny.toml and ARCHITECTURE.md ([`layer_lint`], [`layers`], [`deny`],
//!   [`architecture`]);
//! - `tidy`: text checks over `crates/*/src`, dangling Markdown references, the
//!   citations of the invariants tables and the dependency sentences ([`tidy`],
//!   [`citations`], [`exhaustive`], [`fn_length`], [`dep_sentences`]);
//! - `test-env` and `test`: what the tests need beyond cargo (the Python venvs of
//!   the MCP test servers and of LiteLLM's proxy, the Node parsers of the chat
//!   endpoint), then README's test command ([`test_env`]);
//! - `web [--check]`: the chat page's embedded bundle, built or checked ([`web`]);
//! - `features`: the facade's feature combinations, each checked ([`features`]);
//! - `build-cost`: the quick start's cold build beside a peer's, and its release
//!   binary's size ([`build_cost`]).
//!
//! Exit codes: 0 when clean, 1 on violations, 2 on usage or other errors.

mod architecture;
mod build_cost;
mod citations;
mod deny;
mod dep_sentences;
mod exhaustive;
mod features;
mod fn_length;
mod layer_lint;
mod layers;
mod test_env;
mod tidy;
mod web;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// What `cargo xtask` prints for `help` and on a usage error.
const USAGE: &str = "\
usage: cargo xtask <task> [options]

tasks:
  layer-lint [--manifest-path PATH] [--layers PATH] [--offline] [--write-deny]
                 check the workspace's crate dependencies against the layer table in
                 layers.toml, and deny.toml's [bans] and ARCHITECTURE.md's
                 \"Dependency rules\" table (when the workspace root has them) against
                 the same table
                 --manifest-path: the workspace to check (default: the one containing
                   xtask); --layers: the table (default: layers.toml at the root of
                   the repository containing xtask); --write-deny: first rewrite the
                   derived entries of deny.toml (between its `# layer-lint: begin`
                   and `# layer-lint: end` lines)
  tidy           check crates/*/src for crate docs, leftover dbg!/todo!/unimplemented!,
                 IO in ai-core, wildcard arms over the enums the workspace matches
                 exhaustively and long functions on the run and request path; that
                 every Markdown file named in the repo's text files exists; that every
                 path, Rust path and type the invariants tables of ARCHITECTURE.md and
                 SECURITY.md cite exists; and that the dependency sentences of the
                 crate docs and ARCHITECTURE.md agree with layers.toml
  test-env       build target/test-venv (the MCP test servers' Python packages,
                 pinned in crates/tools-mcp/tests/servers/requirements.txt) and
                 target/litellm-venv (LiteLLM's proxy, pinned in
                 crates/bootstrap/tests/litellm/requirements.txt) and
                 target/phoenix-venv (Arize Phoenix, pinned in
                 crates/bootstrap/tests/phoenix/requirements.txt), and run `npm ci`
                 in tests/js (the AI SDK parsers), web and tests/restate (the Restate
                 server), unless up to date
  test [ARGS]    test-env, then `cargo test --workspace --locked ARGS` with
                 AGENT_TEST_PYTHON, AGENT_TEST_LITELLM and AGENT_TEST_PHOENIX set
                 from the venvs and AGENT_TEST_REQUIRE_PEERS=1 (a missing peer
                 fails its tests; plain `cargo test` skips them)
  web [--check]  build the chat page from web/ (npm ci from the lockfile, vite) into
                 crates/agent-server/web-dist; --check builds into target/web-check and
                 fails when the committed bundle differs
  features       cargo check the facade's library once per feature combination of
                 the list in xtask/src/features.rs (no features, each wire alone,
                 each optional part alone, the defaults, all); fails when the list
                 and the facade's [features] disagree
  build-cost [--rounds N]
                 time a cold dev build of the README's quick start (the facade with
                 its default features, serde, schemars, tokio) and of the same
                 program's companions with rig-core, each in a new target folder,
                 N rounds in alternation; then print the quick start's release
                 binary size (fetches what the local registry lacks first)
  help           print this message";

/// Exit code for violations.
const VIOLATIONS: u8 = 1;

/// Exit code for usage and other errors.
const ERROR: u8 = 2;

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let task = args.next();
    let rest: Vec<String> = args.collect();
    match task.as_deref() {
        Some("layer-lint") => layer_lint_task(&rest),
        Some("tidy") if rest.is_empty() => tidy_task(),
        Some("tidy") => usage_error(&format!(
            "tidy takes no arguments, got `{}`",
            rest.join(" ")
        )),
        Some("test-env") if rest.is_empty() => test_env::test_env_task(repo_root()),
        Some("test") => test_env::test_task(repo_root(), &rest),
        Some("web") => web::web_task(repo_root(), &rest),
        Some("features") if rest.is_empty() => features::features_task(repo_root()),
        Some("features") => usage_error(&format!(
            "features takes no arguments, got `{}`",
            rest.join(" ")
        )),
        Some("build-cost") => build_cost::build_cost_task(repo_root(), &rest),
        Some("help" | "-h" | "--help") => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        Some(other) => usage_error(&format!("unknown task `{other}`")),
        None => usage_error("no task given"),
    }
}

/// Prints `message` and the usage to stderr; exits with [`ERROR`].
fn usage_error(message: &str) -> ExitCode {
    eprintln!("xtask: {message}\n\n{USAGE}");
    ExitCode::from(ERROR)
}

/// The directory of xtask's own manifest (set by cargo at build time).
fn xtask_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The repository root: the parent of xtask's directory.
fn repo_root() -> &'static Path {
    xtask_dir().parent().unwrap_or_else(|| xtask_dir())
}

/// `cargo xtask layer-lint [--manifest-path PATH] [--layers PATH] [--offline]
/// [--write-deny]`.
fn layer_lint_task(args: &[String]) -> ExitCode {
    // Any member's manifest makes cargo report its whole workspace.
    let mut manifest_path = xtask_dir().join("Cargo.toml");
    let mut layers_path = repo_root().join("layers.toml");
    let mut offline = false;
    let mut write_deny = false;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) => (flag, Some(value.to_owned())),
            None => (arg.as_str(), None),
        };
        match (flag, inline) {
            ("--offline", None) => offline = true,
            ("--write-deny", None) => write_deny = true,
            ("--manifest-path" | "--layers", inline) => {
                let Some(value) = inline.or_else(|| args.next().cloned()) else {
                    return usage_error(&format!("{flag} needs a value"));
                };
                if flag == "--layers" {
                    layers_path = PathBuf::from(value);
                } else {
                    manifest_path = PathBuf::from(value);
                }
            }
            _ => return usage_error(&format!("layer-lint: unknown argument `{arg}`")),
        }
    }
    let layers = match layers::Layers::load(&layers_path) {
        Ok(layers) => layers,
        Err(err) => {
            eprintln!("layer-lint: error: {err}");
            return ExitCode::from(ERROR);
        }
    };
    let run = || {
        let metadata = layer_lint::cargo_metadata(&manifest_path, offline)?;
        if write_deny {
            let path = layer_lint::write_deny(&metadata, &layers)?;
            println!(
                "layer-lint: rewrote the derived entries of {}",
                path.display()
            );
        }
        layer_lint::check(&metadata, &layers)
    };
    let report = match run() {
        Ok(report) => report,
        Err(err) => {
            eprintln!("layer-lint: error: {err}");
            return ExitCode::from(ERROR);
        }
    };
    print_report(&report.violations, &report)
}

/// `cargo xtask tidy`.
fn tidy_task() -> ExitCode {
    let report = match tidy::check(repo_root()) {
        Ok(report) => report,
        Err(err) => {
            eprintln!("tidy: error: {err}");
            return ExitCode::from(ERROR);
        }
    };
    print_report(&report.violations, &report)
}

/// Prints each violation, then the summary line; exits 1 when there was any.
fn print_report(
    violations: &[impl std::fmt::Display],
    summary: &impl std::fmt::Display,
) -> ExitCode {
    for violation in violations {
        println!("{violation}");
    }
    println!("{summary}");
    if violations.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(VIOLATIONS)
    }
}
