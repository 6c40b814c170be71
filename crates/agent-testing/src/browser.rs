//! The chat page in a real browser: runs one scenario of the repository's
//! driver (`web/tests/browser.mjs`: Debian's Chromium through
//! `playwright-core`, see `web/README.md`) against a live server and hands back
//! its JSON report.
//!
//! Needs Node, `npm ci` in `web/` and Chromium (`cargo xtask test-env`
//! installs the first two; CI installs Chromium).

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

/// How long one scenario may take (not counting its wait for [`ONE_AT_A_TIME`]).
const SCENARIO_TIMEOUT: Duration = Duration::from_secs(120);

/// Held while a scenario runs: a test binary's scenarios run one after the
/// other, never two browsers beside each other. Some scenarios hold a
/// wall-clock budget (no main-thread task over 200 ms, an answer formatted
/// within 20 s) that two Chromiums sharing a two-core machine can miss.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The repository's root (this crate is `crates/agent-testing`).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Where scenarios write their screenshots: `target/browser-shots/`.
pub fn shots_dir() -> PathBuf {
    root().join("target/browser-shots")
}

/// Whether this machine has what the browser tests need (Node and Chromium); when
/// not, a test returns early (skipped) unless peers are required, where a missing
/// one panics (see [`crate::peers::peer`]).
#[must_use]
pub fn available() -> bool {
    use crate::peers::{Peer, peer};
    peer(Peer::Node).is_some() && peer(Peer::Chromium).is_some()
}

/// Runs scenario `name` against the page at `page_url` (the address `agent
/// serve` prints, the token in its fragment) with more driver arguments
/// `extra`; its JSON report.
///
/// # Panics
///
/// When the driver is not installed, does not finish in two minutes, prints
/// no JSON line, or reports the scenario failed (a test's failure, with the
/// report in the message).
pub async fn scenario(page_url: &str, name: &str, extra: &[&str]) -> Value {
    let result = scenario_report(page_url, name, extra).await;
    assert_eq!(result["ok"], true, "{name}: {result}");
    result
}

/// [`scenario`]'s report, whether the scenario passed or not (`ok`, `error`,
/// `steps`, `timings`).
///
/// # Panics
///
/// When the driver is not installed, does not finish in two minutes or prints
/// no JSON line.
#[allow(clippy::expect_used)]
pub async fn scenario_report(page_url: &str, name: &str, extra: &[&str]) -> Value {
    let driver = root().join("web/tests/browser.mjs");
    assert!(
        root().join("web/node_modules/playwright-core").exists(),
        "the browser tests need `npm ci` in web/ (run `cargo xtask test-env`)"
    );
    let _turn = ONE_AT_A_TIME.lock().await;
    let output = tokio::time::timeout(
        SCENARIO_TIMEOUT,
        tokio::process::Command::new("node")
            .arg(&driver)
            .args(["--url", page_url, "--scenario", name, "--shots"])
            .arg(shots_dir())
            .args(extra)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the browser scenario finished")
    .expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    let result: Value = serde_json::from_str(line.trim()).unwrap_or_else(|e| {
        panic!(
            "{name}: no JSON line ({e}): {stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    result
}
