//! `cargo xtask test-env` and `cargo xtask test`: what the test suite needs beyond
//! cargo, installed when missing, then the test command.
//!
//! - a Python virtual environment, `target/test-venv`, with the pinned requirements
//!   of the MCP test servers (`crates/tools-mcp/tests/servers/requirements.txt`,
//!   the official `mcp` SDK);
//! - the Node packages of `tests/js` (the real AI SDK and assistant-stream parsers
//!   the chat endpoint is checked against) and of `web` (the chat page and the
//!   `playwright-core` that drives Debian's Chromium in its browser tests),
//!   installed with `npm ci` from their locks.
//!
//! Each is rebuilt only when its pins change (a copy of the requirements file or
//! lockfile is kept beside the install as a stamp).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// The requirements of the Python test servers, relative to the repository root.
pub(crate) const REQUIREMENTS: &str = "crates/tools-mcp/tests/servers/requirements.txt";
/// The venv, relative to the repository root.
pub(crate) const VENV: &str = "target/test-venv";
/// The stamp: the requirements the venv was built from.
const STAMP: &str = ".requirements.txt";

/// The Node package of the parser checks, relative to the repository root.
pub(crate) const JS: &str = "tests/js";
/// The chat page's sources (its `playwright-core` drives the browser tests).
pub(crate) const WEB: &str = "web";
/// Where `npm ci` keeps its stamp, inside `node_modules`.
const JS_STAMP: &str = "node_modules/.package-lock.stamp.json";

/// The venv's Python.
pub(crate) fn python(root: &Path) -> PathBuf {
    root.join(VENV).join("bin/python")
}

/// Runs `command`; an error names it and its exit status.
pub(crate) fn run(command: &mut Command) -> Result<(), String> {
    let shown = format!("{command:?}");
    let status = command
        .status()
        .map_err(|e| format!("cannot run {shown}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{shown} failed ({status})"))
    }
}

/// Makes sure the venv exists with the current requirements.
pub(crate) fn ensure(root: &Path) -> Result<(), String> {
    let requirements = root.join(REQUIREMENTS);
    let wanted = std::fs::read_to_string(&requirements)
        .map_err(|e| format!("cannot read {}: {e}", requirements.display()))?;
    let venv = root.join(VENV);
    let stamp = venv.join(STAMP);
    if python(root).exists() && std::fs::read_to_string(&stamp).ok().as_deref() == Some(&wanted) {
        println!("test-env: {VENV} is up to date");
        return Ok(());
    }
    println!("test-env: building {VENV} from {REQUIREMENTS}");
    if venv.exists() {
        std::fs::remove_dir_all(&venv)
            .map_err(|e| format!("cannot remove the old {}: {e}", venv.display()))?;
    }
    run(Command::new("python3").args(["-m", "venv"]).arg(&venv))?;
    run(Command::new(python(root))
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-input",
            "-r",
        ])
        .arg(&requirements))?;
    std::fs::write(&stamp, wanted).map_err(|e| format!("cannot write {}: {e}", stamp.display()))
}

/// Makes sure `<dir>/node_modules` matches `<dir>/package-lock.json` (`npm ci`
/// when the lockfile changed since the last install).
pub(crate) fn npm_ci(root: &Path, dir: &str) -> Result<(), String> {
    let path = root.join(dir);
    let lock = path.join("package-lock.json");
    let wanted = std::fs::read_to_string(&lock)
        .map_err(|e| format!("cannot read {}: {e}", lock.display()))?;
    let stamp = path.join(JS_STAMP);
    if std::fs::read_to_string(&stamp).ok().as_deref() == Some(&wanted) {
        println!("test-env: {dir}/node_modules is up to date");
        return Ok(());
    }
    println!("test-env: npm ci in {dir}");
    run(Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
        .current_dir(&path))?;
    std::fs::write(&stamp, wanted).map_err(|e| format!("cannot write {}: {e}", stamp.display()))
}

/// Both environments.
fn ensure_all(root: &Path) -> Result<(), String> {
    ensure(root)?;
    npm_ci(root, JS)?;
    npm_ci(root, WEB)
}

/// `cargo xtask test-env`.
pub(crate) fn test_env_task(root: &Path) -> ExitCode {
    match ensure_all(root) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::from(crate::ERROR)
        }
    }
}

/// `cargo xtask test [ARGS]`: the test environment, then `cargo test --workspace
/// --locked ARGS` with `AGENT_TEST_PYTHON` pointing at the venv.
pub(crate) fn test_task(root: &Path, args: &[String]) -> ExitCode {
    if let Err(e) = ensure_all(root) {
        eprintln!("xtask: {e}");
        return ExitCode::from(crate::ERROR);
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(root)
        .args(["test", "--workspace", "--locked"])
        .args(args)
        .env("AGENT_TEST_PYTHON", python(root))
        .status();
    match status {
        Ok(status) if status.success() => ExitCode::SUCCESS,
        Ok(_) => ExitCode::from(crate::VIOLATIONS),
        Err(e) => {
            eprintln!("xtask: cannot run cargo test: {e}");
            ExitCode::from(crate::ERROR)
        }
    }
}
