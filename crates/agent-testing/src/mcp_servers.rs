//! The MCP test servers (the Python scripts in `crates/tools-mcp/tests/servers`)
//! and the Python that runs them, for the tests of `tools-mcp` and of the
//! `agent` binary.

use std::path::{Path, PathBuf};

/// The workspace's `crates` folder.
fn crates_dir() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// The Python that has the test servers' requirements
/// (`crates/tools-mcp/tests/servers/requirements.txt`): `$AGENT_TEST_PYTHON`,
/// else the workspace's `target/test-venv` (made by `cargo xtask test-env`).
///
/// # Panics
///
/// When neither is there.
pub fn python() -> PathBuf {
    if let Some(path) = std::env::var_os("AGENT_TEST_PYTHON") {
        return PathBuf::from(path);
    }
    let venv = crates_dir().join("../target/test-venv/bin/python");
    assert!(
        venv.exists(),
        "the MCP test servers need a Python venv with tests/servers/requirements.txt: \
         run `cargo xtask test-env` (or `cargo xtask test`), or set AGENT_TEST_PYTHON"
    );
    venv
}

/// The path of the test server script `name` (`testserver.py`, ...).
pub fn script(name: &str) -> String {
    crates_dir()
        .join("tools-mcp/tests/servers")
        .join(name)
        .display()
        .to_string()
}
