//! Repository chores (`cargo xtask <task>`): the mechanical checks of the
//! architecture that `cargo test` also runs.
//!
//! xtask depends on no project crate and is never depended on; it reads the workspace
//! only through `cargo metadata` and the source tree.
//!
//! Tasks:
//! - `layer-lint`: the dependency rules of DESIGN.md ([`layer_lint`]);
//! - `tidy`: text checks over `crates/*/src` ([`tidy`]).
//!
//! Exit codes: 0 when clean, 1 on violations, 2 on usage or other errors.

mod layer_lint;
mod tidy;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// What `cargo xtask` prints for `help` and on a usage error.
const USAGE: &str = "\
usage: cargo xtask <task> [options]

tasks:
  layer-lint [--manifest-path PATH] [--offline]
                 check the crate dependency rules of DESIGN.md
                 (default: the workspace containing xtask)
  tidy           check crates/*/src for crate docs, leftover dbg!/todo!/unimplemented!
                 and IO in ai-core
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

/// `cargo xtask layer-lint [--manifest-path PATH] [--offline]`.
fn layer_lint_task(args: &[String]) -> ExitCode {
    // Any member's manifest makes cargo report its whole workspace.
    let mut manifest_path = xtask_dir().join("Cargo.toml");
    let mut offline = false;
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--offline" => offline = true,
            "--manifest-path" => match args.next() {
                Some(path) => manifest_path = PathBuf::from(path),
                None => return usage_error("--manifest-path needs a value"),
            },
            other => match other.strip_prefix("--manifest-path=") {
                Some(path) => manifest_path = PathBuf::from(path),
                None => return usage_error(&format!("layer-lint: unknown argument `{other}`")),
            },
        }
    }
    let report = match layer_lint::cargo_metadata(&manifest_path, offline)
        .and_then(|metadata| layer_lint::check(&metadata))
    {
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
    let root = xtask_dir().parent().unwrap_or_else(|| xtask_dir());
    let report = match tidy::check(root) {
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
