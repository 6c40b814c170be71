//! `cargo xtask test-env` and `cargo xtask test`: what the test suite needs beyond
//! cargo, installed when missing, then the test command.
//!
//! - a Python virtual environment, `target/test-venv`, with the pinned requirements
//!   of the MCP test servers (`crates/tools-mcp/tests/servers/requirements.txt`,
//!   the official `mcp` SDK);
//! - a second one, `target/litellm-venv`, with LiteLLM's proxy for the live test of
//!   the Anthropic wire (`crates/bootstrap/tests/litellm/requirements.txt`; its
//!   pins conflict with the MCP SDK's, hence a venv of its own);
//! - a third, `target/phoenix-venv`, with Arize Phoenix, the tracing backend the
//!   telemetry test exports runs to (`crates/bootstrap/tests/phoenix/requirements.txt`);
//! - the Node packages of `tests/js` (the real AI SDK and assistant-stream parsers
//!   the chat endpoint is checked against) and of `web` (the chat page and the
//!   `playwright-core` that drives Debian's Chromium in its browser tests) and of
//!   `tests/restate` (the Restate server binary that agent-testing's `restate`
//!   feature starts), installed with `npm ci` from their locks.
//!
//! Each is rebuilt only when its pins change (a copy of the requirements file or
//! lockfile is kept beside the install as a stamp).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// A pinned Python virtual environment the tests need.
pub(crate) struct Venv {
    /// Its requirements file, relative to the repository root.
    pub(crate) requirements: &'static str,
    /// The venv, relative to the repository root.
    pub(crate) path: &'static str,
}

/// The MCP test servers' venv.
pub(crate) const MCP_VENV: Venv = Venv {
    requirements: "crates/tools-mcp/tests/servers/requirements.txt",
    path: "target/test-venv",
};

/// LiteLLM's proxy, the live peer of the Anthropic wire.
pub(crate) const LITELLM_VENV: Venv = Venv {
    requirements: "crates/bootstrap/tests/litellm/requirements.txt",
    path: "target/litellm-venv",
};

/// Arize Phoenix, the tracing backend of the telemetry test.
pub(crate) const PHOENIX_VENV: Venv = Venv {
    requirements: "crates/bootstrap/tests/phoenix/requirements.txt",
    path: "target/phoenix-venv",
};

/// The stamp: the requirements a venv was built from.
const STAMP: &str = ".requirements.txt";

/// The Node package of the parser checks, relative to the repository root.
pub(crate) const JS: &str = "tests/js";
/// The chat page's sources (its `playwright-core` drives the browser tests).
pub(crate) const WEB: &str = "web";
/// The Restate server's npm package (agent-testing's `restate` feature).
pub(crate) const RESTATE: &str = "tests/restate";
/// Where `npm ci` keeps its stamp, inside `node_modules`.
const JS_STAMP: &str = "node_modules/.package-lock.stamp.json";

/// A venv's Python.
pub(crate) fn python(root: &Path, venv: &Venv) -> PathBuf {
    root.join(venv.path).join("bin/python")
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

/// Makes sure `venv` exists with its current requirements.
pub(crate) fn ensure(root: &Path, venv: &Venv) -> Result<(), String> {
    let requirements = root.join(venv.requirements);
    let wanted = std::fs::read_to_string(&requirements)
        .map_err(|e| format!("cannot read {}: {e}", requirements.display()))?;
    let dir = root.join(venv.path);
    let stamp = dir.join(STAMP);
    let name = venv.path;
    if python(root, venv).exists()
        && std::fs::read_to_string(&stamp).ok().as_deref() == Some(&wanted)
    {
        println!("test-env: {name} is up to date");
        return Ok(());
    }
    println!("test-env: building {name} from {}", venv.requirements);
    if dir.exists() {
        std::fs::remove_dir_all(&dir)
            .map_err(|e| format!("cannot remove the old {}: {e}", dir.display()))?;
    }
    run(Command::new("python3").args(["-m", "venv"]).arg(&dir))?;
    run(Command::new(python(root, venv))
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

/// A program the tests need that cargo does not install.
struct Prerequisite {
    /// What it is for.
    what: &'static str,
    /// The programs it takes (all of them).
    needs: &'static [&'static str],
    /// The command that installs it (Debian's packages).
    install: &'static str,
}

/// What the test suite needs from the system.
const PREREQUISITES: [Prerequisite; 4] = [
    Prerequisite {
        what: "Python 3 with venv (the MCP test servers, LiteLLM's proxy, Arize Phoenix)",
        needs: &["python3"],
        install: "sudo apt-get install -y python3 python3-venv",
    },
    Prerequisite {
        what: "Node.js and npm (the AI SDK parsers, the page's browser driver, the Restate server)",
        needs: &["node", "npm"],
        install: "sudo apt-get install -y nodejs npm",
    },
    Prerequisite {
        what: "Chromium (the chat page's browser tests; $CHROMIUM names another binary)",
        needs: &["chromium"],
        install: "sudo apt-get install -y chromium",
    },
    Prerequisite {
        what: "PostgreSQL's server binaries (the run store's Postgres tests start their own server)",
        needs: &["initdb"],
        install: "sudo apt-get install -y postgresql",
    },
];

/// Whether `program` can be run: on `PATH`; `initdb` also in Debian's
/// `/usr/lib/postgresql/*/bin`; `chromium` also where `$CHROMIUM` says.
fn installed(program: &str) -> bool {
    if program == "chromium"
        && std::env::var_os("CHROMIUM").is_some_and(|p| Path::new(&p).is_file())
    {
        return true;
    }
    let on_path = std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()));
    on_path
        || (program == "initdb"
            && std::fs::read_dir("/usr/lib/postgresql").is_ok_and(|versions| {
                versions
                    .flatten()
                    .any(|v| v.path().join("bin/initdb").is_file())
            }))
}

/// What is missing, each with the command that installs it; `Ok` when
/// nothing is.
fn check_prerequisites(has: &dyn Fn(&str) -> bool) -> Result<(), String> {
    let missing: Vec<String> = PREREQUISITES
        .iter()
        .filter(|p| !p.needs.iter().all(|program| has(program)))
        .map(|p| format!("  missing: {}\n    install: {}", p.what, p.install))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(format!(
        "the tests need programs this machine lacks (nothing was built):\n{}",
        missing.join("\n")
    ))
}

/// Every environment.
fn ensure_all(root: &Path) -> Result<(), String> {
    check_prerequisites(&installed)?;
    ensure(root, &MCP_VENV)?;
    ensure(root, &LITELLM_VENV)?;
    ensure(root, &PHOENIX_VENV)?;
    npm_ci(root, JS)?;
    npm_ci(root, WEB)?;
    npm_ci(root, RESTATE)
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
/// --locked --no-fail-fast ARGS` with `AGENT_TEST_PYTHON` pointing at the MCP venv's Python,
/// `AGENT_TEST_LITELLM` at LiteLLM's command and `AGENT_TEST_PHOENIX` at Phoenix's,
/// and `AGENT_TEST_REQUIRE_PEERS` set, so no peer suite is skipped.
pub(crate) fn test_task(root: &Path, args: &[String]) -> ExitCode {
    if let Err(e) = ensure_all(root) {
        eprintln!("xtask: {e}");
        return ExitCode::from(crate::ERROR);
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(root)
        // Every suite runs even after one fails, so one run shows every failure.
        .args(["test", "--workspace", "--locked", "--no-fail-fast"])
        .args(args)
        // Every peer suite runs: a missing peer fails instead of being skipped.
        .env("AGENT_TEST_REQUIRE_PEERS", "1")
        .env("AGENT_TEST_PYTHON", python(root, &MCP_VENV))
        .env(
            "AGENT_TEST_LITELLM",
            root.join(LITELLM_VENV.path).join("bin/litellm"),
        )
        .env(
            "AGENT_TEST_PHOENIX",
            root.join(PHOENIX_VENV.path).join("bin/phoenix"),
        )
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_programs_are_named_with_their_install_command() {
        let none = check_prerequisites(&|_| false).unwrap_err();
        for needle in [
            "Python 3",
            "Node.js",
            "Chromium",
            "PostgreSQL",
            "apt-get install -y chromium",
        ] {
            assert!(none.contains(needle), "{needle}: {none}");
        }
        let only_chromium_missing = check_prerequisites(&|p| p != "chromium").unwrap_err();
        assert!(
            only_chromium_missing.contains("Chromium"),
            "{only_chromium_missing}"
        );
        assert!(
            !only_chromium_missing.contains("Node.js"),
            "{only_chromium_missing}"
        );
        assert!(check_prerequisites(&|_| true).is_ok());
    }
}
