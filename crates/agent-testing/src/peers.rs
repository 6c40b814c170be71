//! The peers some suites run against (Node, Chromium, Postgres, the MCP servers'
//! Python, Restate, LiteLLM, Phoenix), found or skipped in one place.
//!
//! Plain `cargo test` on a machine without a peer skips the suites that need it and
//! says so once per `cargo test` run, naming the command that runs them all;
//! `cargo xtask test` (which sets `AGENT_TEST_REQUIRE_PEERS`) and CI (where `CI` is
//! set) never skip: a missing peer fails the test that needs it.

use std::io::Write;
use std::path::{Path, PathBuf};

/// A program a peer suite runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Peer {
    /// Node.js with the test packages installed (`npm ci --prefix tests/js`):
    /// the AI SDK's parsers, the stock clients, the page's browser driver.
    Node,
    /// Chromium, with `npm ci` in `web/` (its driver, `playwright-core`): the chat
    /// page's browser tests (`$CHROMIUM` names another binary).
    Chromium,
    /// PostgreSQL's server binaries: the run store on Postgres.
    Postgres,
    /// The MCP test servers' Python venv (`target/test-venv`, or `$AGENT_TEST_PYTHON`).
    Python,
    /// The Restate server binary (`tests/restate/node_modules`, or
    /// `$AGENT_TEST_RESTATE_SERVER`): the durable runs.
    Restate,
    /// LiteLLM's proxy (`target/litellm-venv`, or `$AGENT_TEST_LITELLM`): the live
    /// Anthropic-wire test.
    LiteLlm,
    /// Arize Phoenix (`target/phoenix-venv`, or `$AGENT_TEST_PHOENIX`): the tracing
    /// backend test.
    Phoenix,
}

/// Every peer, in the order the skip notice lists them.
const ALL: [Peer; 7] = [
    Peer::Node,
    Peer::Chromium,
    Peer::Postgres,
    Peer::Python,
    Peer::Restate,
    Peer::LiteLlm,
    Peer::Phoenix,
];

/// The command that runs every suite, installing what it can.
const RUN_ALL: &str = "cargo xtask test";

impl Peer {
    /// What it is and which suites need it.
    fn what(self) -> &'static str {
        match self {
            Self::Node => {
                "Node.js and `npm ci --prefix tests/js` (the AI SDK parser checks, the stock clients, the browser tests)"
            }
            Self::Chromium => "Chromium and `npm ci` in web/ (the chat page's browser tests)",
            Self::Postgres => "PostgreSQL's server binaries (the run store on Postgres)",
            Self::Python => "the MCP test servers' Python venv (the MCP suites)",
            Self::Restate => "the Restate server (the durable-run suites)",
            Self::LiteLlm => "LiteLLM's proxy (the live Anthropic-wire test)",
            Self::Phoenix => "Arize Phoenix (the tracing-backend test)",
        }
    }

    /// Where it is, if this machine has it.
    fn find(self) -> Option<PathBuf> {
        match self {
            // Every Node suite runs the packages of tests/js: Node alone is not
            // enough.
            Self::Node => on_path("node").filter(|_| {
                workspace_root()
                    .join("tests/js/node_modules/.package-lock.json")
                    .is_file()
            }),
            // The browser driver runs it through web/'s playwright-core.
            Self::Chromium => std::env::var_os("CHROMIUM")
                .map(PathBuf::from)
                .filter(|path| path.is_file())
                .or_else(|| on_path("chromium"))
                .filter(|_| {
                    workspace_root()
                        .join("web/node_modules/playwright-core")
                        .is_dir()
                }),
            Self::Postgres => postgres_bindir(),
            Self::Python => std::env::var_os("AGENT_TEST_PYTHON")
                .map(PathBuf::from)
                .or_else(|| Some(workspace_root().join("target/test-venv/bin/python")))
                .filter(|path| path.exists()),
            Self::Restate => Some(restate_server()).filter(|path| path.exists()),
            Self::LiteLlm => env_or(
                "AGENT_TEST_LITELLM",
                workspace_root().join("target/litellm-venv/bin/litellm"),
            ),
            Self::Phoenix => env_or(
                "AGENT_TEST_PHOENIX",
                workspace_root().join("target/phoenix-venv/bin/phoenix"),
            ),
        }
    }
}

/// `program` on `PATH`.
fn on_path(program: &str) -> Option<PathBuf> {
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .map(|dir| dir.join(program))
        .find(|path| path.is_file())
}

/// `$variable` if set, else `default`; either only if it exists.
fn env_or(variable: &str, default: PathBuf) -> Option<PathBuf> {
    Some(std::env::var_os(variable).map_or(default, PathBuf::from)).filter(|path| path.exists())
}

/// `$AGENT_TEST_RESTATE_SERVER`, else the platform package's binary under
/// `tests/restate/node_modules` (where `restate::TestRestate` runs it from),
/// whether or not it exists.
pub(crate) fn restate_server() -> PathBuf {
    if let Some(path) = std::env::var_os("AGENT_TEST_RESTATE_SERVER") {
        return PathBuf::from(path);
    }
    let os = match std::env::consts::OS {
        "macos" => "darwin",
        other => other,
    };
    let arch = match std::env::consts::ARCH {
        "x86_64" => "x64",
        "aarch64" => "arm64",
        other => other,
    };
    workspace_root()
        .join("tests/restate/node_modules/@restatedev")
        .join(format!("restate-server-{os}-{arch}"))
        .join("bin/restate-server")
}

/// `$AGENT_TEST_PG_BINDIR`, else the newest of Debian's `/usr/lib/postgresql/*/bin`
/// that has `initdb`.
fn postgres_bindir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("AGENT_TEST_PG_BINDIR") {
        let dir = PathBuf::from(dir);
        return dir.join("initdb").is_file().then_some(dir);
    }
    std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .max()
        .map(|(_, bin)| bin)
}

/// The workspace root (this crate lives in `crates/agent-testing`).
fn workspace_root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// Whether every peer suite must run: `AGENT_TEST_REQUIRE_PEERS` or `CI` is set
/// (to anything but empty, `0` or `false`).
fn required() -> bool {
    ["AGENT_TEST_REQUIRE_PEERS", "CI"].iter().any(|name| {
        std::env::var(name).is_ok_and(|value| !matches!(value.as_str(), "" | "0" | "false"))
    })
}

/// Where `peer` is, for a test that needs it. `None` when this machine lacks it and
/// peers are not required: the test returns early (skipped), and the first skip of a
/// `cargo test` run prints which peers are missing and the command that runs them
/// all. When peers are required (`cargo xtask test`, CI), a missing peer panics with
/// what to install.
///
/// ```no_run
/// use agent_testing::peers::{Peer, peer};
/// # fn a_postgres_test() {
/// let Some(_bindir) = peer(Peer::Postgres) else { return };
/// # }
/// ```
#[must_use]
pub fn peer(peer: Peer) -> Option<PathBuf> {
    if let Some(found) = peer.find() {
        return Some(found);
    }
    assert!(
        !required(),
        "this test needs {}, which this machine lacks; `{RUN_ALL}` installs what it can \
         and names the rest (AGENT_TEST_REQUIRE_PEERS or CI is set, so nothing is skipped)",
        peer.what()
    );
    notice_once();
    None
}

/// Prints, once per `cargo test` run (the test binaries of one run share their
/// parent, cargo), which peers are missing and the command that runs their suites.
/// Written to stderr directly, past the test harness's capture.
fn notice_once() {
    let marker = std::env::temp_dir().join(format!(
        "agent-testing-peer-skips-{}",
        std::os::unix::process::parent_id()
    ));
    if std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&marker)
        .is_err()
    {
        return;
    }
    let missing: Vec<String> = ALL
        .iter()
        .filter(|peer| peer.find().is_none())
        .map(|peer| format!("  - {}", peer.what()))
        .collect();
    let _ = writeln!(
        std::io::stderr(),
        "\nskipped the peer suites that need what this machine lacks:\n{}\n\
         `{RUN_ALL}` runs every suite (and fails on a missing peer).\n",
        missing.join("\n")
    );
}
