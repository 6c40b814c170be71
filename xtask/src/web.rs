//! `cargo xtask web [--check]`: the chat page's bundle, built from `web/` with the
//! locked Node packages into `crates/agent-server/web-dist/` (which the server
//! embeds). `--check` builds into a temporary folder and fails when the committed
//! bundle differs (CI runs it, so a stale bundle cannot land).

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// The page's sources, relative to the repository root.
const WEB: &str = "web";
/// The committed bundle, relative to the repository root.
const DIST: &str = "crates/agent-server/web-dist";
/// The files of the bundle (fixed names, embedded by agent-server).
const FILES: &[&str] = &[
    "index.html",
    "assets/app.js",
    "assets/app.css",
    "assets/highlight.js",
];

/// Installs the locked packages (when the lockfile changed) and builds into `out`.
fn build(root: &Path, out: &Path) -> Result<(), String> {
    crate::test_env::npm_ci(root, WEB)?;
    let dir = root.join(WEB);
    crate::test_env::run(
        Command::new("npm")
            .args(["run", "--silent", "build"])
            .env("AGENT_WEB_OUT", out)
            .current_dir(&dir),
    )
}

/// `cargo xtask web [--check]`.
pub(crate) fn web_task(root: &Path, args: &[String]) -> ExitCode {
    let check = match args {
        [] => false,
        [flag] if flag == "--check" => true,
        _ => {
            eprintln!("xtask: web takes no argument but --check");
            return ExitCode::from(crate::ERROR);
        }
    };
    let dist = root.join(DIST);
    let out: PathBuf = if check {
        root.join("target/web-check")
    } else {
        dist.clone()
    };
    if check {
        let _ = std::fs::remove_dir_all(&out);
    }
    if let Err(e) = build(root, &out) {
        eprintln!("xtask: {e}");
        return ExitCode::from(crate::ERROR);
    }
    if !check {
        println!("web: built {DIST}");
        return ExitCode::SUCCESS;
    }
    let mut stale = Vec::new();
    for file in FILES {
        let fresh = std::fs::read(out.join(file)).ok();
        let committed = std::fs::read(dist.join(file)).ok();
        if fresh.is_none() || fresh != committed {
            stale.push(*file);
        }
    }
    if stale.is_empty() {
        println!("web: {DIST} matches a fresh build");
        ExitCode::SUCCESS
    } else {
        eprintln!(
            "web: {DIST} is stale ({}); run `cargo xtask web` and commit the result",
            stale.join(", ")
        );
        ExitCode::from(crate::VIOLATIONS)
    }
}
