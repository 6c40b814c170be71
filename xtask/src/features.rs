//! `cargo xtask features`: the facade's feature combinations, each checked alone.
//!
//! The facade (`toolwright`, library `agent`) gates each wire and each optional part
//! behind a feature; a combination nobody builds is where a missing `#[cfg]` or a
//! dependency that only another feature turns on hides. The combinations are an
//! explicit list ([`COMBINATIONS`]): no features, each wire alone, each optional
//! part alone, the defaults and everything. The list must name every feature of the
//! manifest (read through `cargo metadata`), so a new feature gets a row here
//! deliberately.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, ExitCode};

/// The facade's package name.
const FACADE: &str = crate::layers::PRODUCT;

/// One combination: a label and the `--features` value (`None`: the defaults;
/// `Some("")`: no features at all; `Some("*")`: every feature).
type Combination = (&'static str, Option<&'static str>);

/// Every combination `cargo xtask features` checks, in order.
const COMBINATIONS: &[Combination] = &[
    ("defaults", None),
    ("no features", Some("")),
    ("openai alone", Some("openai")),
    ("anthropic alone", Some("anthropic")),
    ("responses alone", Some("responses")),
    ("gemini alone", Some("gemini")),
    ("host alone", Some("host")),
    ("testing alone", Some("testing")),
    ("mcp alone", Some("mcp")),
    ("store alone", Some("store")),
    ("server alone", Some("server")),
    ("all features", Some("*")),
];

/// The features the list turns on somewhere.
fn listed() -> BTreeSet<&'static str> {
    COMBINATIONS
        .iter()
        .filter_map(|(_, features)| *features)
        .flat_map(|features| features.split(','))
        .filter(|feature| !feature.is_empty() && *feature != "*")
        .collect()
}

/// The facade's features (without `default`), from `cargo metadata`.
fn manifest_features(root: &Path, cargo: &std::ffi::OsStr) -> Result<BTreeSet<String>, String> {
    let output = Command::new(cargo)
        .current_dir(root)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .output()
        .map_err(|e| format!("cannot run cargo metadata: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr).trim_end()
        ));
    }
    let metadata: serde_json::Value =
        serde_json::from_slice(&output.stdout).map_err(|e| e.to_string())?;
    let package = metadata["packages"]
        .as_array()
        .and_then(|packages| packages.iter().find(|p| p["name"] == FACADE))
        .ok_or_else(|| format!("no package `{FACADE}` in the workspace"))?;
    let features = package["features"]
        .as_object()
        .ok_or_else(|| format!("`{FACADE}` has no features table"))?;
    Ok(features
        .keys()
        .filter(|name| *name != "default")
        .cloned()
        .collect())
}

/// The features of the manifest that no combination names, or names the list has
/// that the manifest lacks.
fn drift(manifest: &BTreeSet<String>) -> Vec<String> {
    let listed = listed();
    let mut messages = Vec::new();
    for feature in manifest {
        if !listed.contains(feature.as_str()) {
            messages.push(format!(
                "feature `{feature}` of {FACADE} is in no combination of xtask/src/features.rs"
            ));
        }
    }
    for feature in listed {
        if !manifest.contains(feature) {
            messages.push(format!(
                "xtask/src/features.rs names `{feature}`, which {FACADE} does not have"
            ));
        }
    }
    messages
}

/// `cargo xtask features`: checks the list against the manifest, then `cargo check`s
/// the facade's library once per combination.
pub(crate) fn features_task(root: &Path) -> ExitCode {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let manifest = match manifest_features(root, &cargo) {
        Ok(manifest) => manifest,
        Err(e) => {
            eprintln!("features: error: {e}");
            return ExitCode::from(crate::ERROR);
        }
    };
    let drift = drift(&manifest);
    if !drift.is_empty() {
        for message in &drift {
            println!("{message}");
        }
        return ExitCode::from(crate::VIOLATIONS);
    }
    let mut failed = Vec::new();
    for (label, features) in COMBINATIONS {
        let mut command = Command::new(&cargo);
        command
            .current_dir(root)
            .args(["check", "--locked", "--quiet", "-p", FACADE, "--lib"]);
        match features {
            None => {}
            Some("*") => {
                command.arg("--all-features");
            }
            Some(list) => {
                command.args(["--no-default-features", "--features", list]);
            }
        }
        println!("features: {label}");
        match command.status() {
            Ok(status) if status.success() => {}
            Ok(_) => failed.push(*label),
            Err(e) => {
                eprintln!("features: cannot run cargo check: {e}");
                return ExitCode::from(crate::ERROR);
            }
        }
    }
    if failed.is_empty() {
        println!("features: {} combinations build", COMBINATIONS.len());
        ExitCode::SUCCESS
    } else {
        println!("features: failed: {}", failed.join(", "));
        ExitCode::from(crate::VIOLATIONS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_feature_missing_from_the_list_is_named() {
        let mut manifest: BTreeSet<String> = listed().into_iter().map(str::to_owned).collect();
        assert!(drift(&manifest).is_empty());
        manifest.insert("telemetry".to_owned());
        let messages = drift(&manifest);
        assert_eq!(messages.len(), 1, "{messages:?}");
        assert!(messages[0].contains("`telemetry`"), "{messages:?}");
    }

    #[test]
    fn each_wire_is_checked_alone() {
        for wire in ["openai", "anthropic", "responses", "gemini"] {
            assert!(COMBINATIONS.iter().any(|(_, f)| *f == Some(wire)), "{wire}");
        }
    }
}
