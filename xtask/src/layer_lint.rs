//! `layer-lint`: the dependency rules of DESIGN.md, checked against `cargo metadata`.
//!
//! It knows the project's layers (the [`LAYERS`] table) and reads only the package
//! graph cargo resolves; it must not know what the crates contain (that is `tidy`'s
//! and clippy's job).
//!
//! Two kinds of rules are checked for every workspace member:
//! - project edges: which project crates it may depend on, separately for normal,
//!   build and dev edges (dev-dependencies follow the same rules: no dev back-edges);
//! - banned external crates: its transitive normal+build closure must not contain the
//!   crates its layer bans, and its own tokio declarations must not enable networking.
//!   Dev-dependencies are exempt here (a test may run an HTTP server).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque, btree_map};
use std::ffi::OsString;
use std::fmt;
use std::path::Path;
use std::process::Command;

use serde::Deserialize;

/// External crates that speak HTTP; layers with [`Network::Forbidden`] must not reach
/// any of them through normal or build dependencies.
const HTTP_CRATES: &[&str] = &["reqwest", "hyper", "hyper-util", "axum", "h2"];

/// Tokio features that open sockets (`full` includes `net`).
const TOKIO_NETWORK_FEATURES: &[&str] = &["net", "full"];

/// The crate that only tests may depend on (besides itself being unrestricted).
const TEST_ONLY_CRATE: &str = "integration-tests";

/// Whether a layer may reach the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Network {
    /// The layer may use HTTP clients and tokio's networking.
    Allowed,
    /// The layer must not reach [`HTTP_CRATES`] nor enable tokio's networking.
    Forbidden,
}

/// One row of the layer table: a project crate (or family of crates) and its rules.
#[derive(Debug)]
struct Layer {
    /// The crate name, or a name prefix when it ends in `*` (`wire-*`).
    crates: &'static str,
    /// Project crates this layer may depend on (same pattern syntax; `*` is any).
    may_depend_on: &'static [&'static str],
    /// `Some(list)`: no crate outside `list` may depend on this layer.
    only_dependents: Option<&'static [&'static str]>,
    /// Whether the layer may reach the network.
    network: Network,
    /// Further external crates banned from the layer's normal+build closure.
    banned: &'static [&'static str],
}

/// The dependency table of DESIGN.md ("Dependency rules"), the one place it lives in
/// code. A workspace member that matches no row is itself a violation, so a new crate
/// is added here deliberately. The first matching row wins.
const LAYERS: &[Layer] = &[
    Layer {
        crates: "ai-core",
        may_depend_on: &[],
        only_dependents: None,
        network: Network::Forbidden,
        banned: &["schemars"],
    },
    Layer {
        crates: "ai-tools",
        may_depend_on: &["ai-core"],
        only_dependents: None,
        network: Network::Forbidden,
        banned: &[],
    },
    Layer {
        crates: "wire-*",
        may_depend_on: &["ai-core"],
        only_dependents: None,
        network: Network::Allowed,
        banned: &[],
    },
    Layer {
        crates: "agent-graph",
        may_depend_on: &["ai-core"],
        only_dependents: None,
        network: Network::Forbidden,
        banned: &[],
    },
    Layer {
        crates: "bootstrap",
        may_depend_on: &["*"],
        only_dependents: Some(&[TEST_ONLY_CRATE]),
        network: Network::Allowed,
        banned: &[],
    },
    Layer {
        crates: TEST_ONLY_CRATE,
        may_depend_on: &["*"],
        only_dependents: Some(&[]),
        network: Network::Allowed,
        banned: &[],
    },
    Layer {
        crates: "xtask",
        may_depend_on: &[],
        only_dependents: Some(&[]),
        network: Network::Allowed,
        banned: &[],
    },
];

/// Whether `name` matches a table pattern: an exact name, or a prefix ending in `*`.
fn matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => pattern == name,
    }
}

/// The layer of a project crate, if the table knows it.
fn layer_of(name: &str) -> Option<&'static Layer> {
    LAYERS.iter().find(|layer| matches(layer.crates, name))
}

impl Layer {
    /// The rule a forbidden outgoing project edge of `name` breaks, in words.
    fn outgoing_rule(&self, name: &str) -> String {
        match self.may_depend_on {
            [] => format!("{name} may depend on no project crate"),
            ["*"] => format!("{name} may depend on any project crate"),
            allowed => format!("{name} may depend only on {}", allowed.join(", ")),
        }
    }

    /// Every external crate banned from this layer's normal+build closure.
    fn banned_externals(&self) -> Vec<&'static str> {
        let mut banned = Vec::new();
        if self.network == Network::Forbidden {
            banned.extend_from_slice(HTTP_CRATES);
        }
        banned.extend_from_slice(self.banned);
        banned
    }
}

/// The kind of a dependency edge, as cargo reports it in `dep_kinds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum DepKind {
    /// A `[dependencies]` edge.
    Normal,
    /// A `[build-dependencies]` edge.
    Build,
    /// A `[dev-dependencies]` edge.
    Dev,
}

impl DepKind {
    /// Maps cargo's `kind` field (`null`, `"build"` or `"dev"`).
    fn from_cargo(kind: Option<&str>) -> Result<Self, Error> {
        match kind {
            None | Some("normal") => Ok(Self::Normal),
            Some("build") => Ok(Self::Build),
            Some("dev") => Ok(Self::Dev),
            Some(other) => Err(Error::Metadata(format!(
                "unknown dependency kind `{other}`"
            ))),
        }
    }
}

impl fmt::Display for DepKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Normal => "normal",
            Self::Build => "build",
            Self::Dev => "dev",
        })
    }
}

/// The subset of `cargo metadata --format-version 1` that layer-lint reads.
#[derive(Debug, Deserialize)]
pub(crate) struct Metadata {
    /// Every package of the dependency graph.
    packages: Vec<Package>,
    /// Package ids of the workspace members.
    workspace_members: Vec<String>,
    /// The resolved graph (absent with `--no-deps`).
    resolve: Option<Resolve>,
}

/// One package of the metadata.
#[derive(Debug, Deserialize)]
struct Package {
    /// The package id (as used by `resolve` and `workspace_members`).
    id: String,
    /// The package name.
    name: String,
    /// The declared dependencies (all kinds, all targets).
    #[serde(default)]
    dependencies: Vec<Dependency>,
    /// The package's `[features]` table.
    #[serde(default)]
    features: BTreeMap<String, Vec<String>>,
}

/// One declared dependency of a package.
#[derive(Debug, Deserialize)]
struct Dependency {
    /// The depended-on package's name (not its rename).
    name: String,
    /// `null` (normal), `"build"` or `"dev"`.
    kind: Option<String>,
    /// The name the dependency is known by in the depending crate, if renamed.
    rename: Option<String>,
    /// Features the declaration enables (workspace-inherited ones included).
    #[serde(default)]
    features: Vec<String>,
}

/// The resolved dependency graph.
#[derive(Debug, Deserialize)]
struct Resolve {
    /// One node per package.
    nodes: Vec<Node>,
}

/// A package and its resolved outgoing edges.
#[derive(Debug, Deserialize)]
struct Node {
    /// The package id.
    id: String,
    /// The outgoing edges.
    #[serde(default)]
    deps: Vec<NodeDep>,
}

/// A resolved edge with the kinds it is used as.
#[derive(Debug, Deserialize)]
struct NodeDep {
    /// The depended-on package id.
    pkg: String,
    /// One entry per (kind, target) the edge is declared with.
    #[serde(default)]
    dep_kinds: Vec<DepKindInfo>,
}

/// One (kind, target) of a resolved edge.
#[derive(Debug, Deserialize)]
struct DepKindInfo {
    /// `null` (normal), `"build"` or `"dev"`.
    kind: Option<String>,
}

impl NodeDep {
    /// The distinct kinds of this edge.
    fn kinds(&self) -> Result<BTreeSet<DepKind>, Error> {
        self.dep_kinds
            .iter()
            .map(|info| DepKind::from_cargo(info.kind.as_deref()))
            .collect()
    }
}

impl Metadata {
    /// Parses the JSON printed by `cargo metadata --format-version 1`.
    pub(crate) fn from_json(json: &[u8]) -> Result<Self, Error> {
        serde_json::from_slice(json).map_err(|err| Error::Metadata(err.to_string()))
    }
}

/// Runs `cargo metadata` (the `CARGO` cargo if set) on the workspace of `manifest_path`.
pub(crate) fn cargo_metadata(manifest_path: &Path, offline: bool) -> Result<Metadata, Error> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
    let mut command = Command::new(cargo);
    command
        .args(["metadata", "--format-version", "1", "--manifest-path"])
        .arg(manifest_path);
    if offline {
        command.arg("--offline");
    }
    let output = command
        .output()
        .map_err(|err| Error::Cargo(format!("could not run cargo metadata: {err}")))?;
    if !output.status.success() {
        return Err(Error::Cargo(format!(
            "cargo metadata failed ({}):\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim_end()
        )));
    }
    Metadata::from_json(&output.stdout)
}

/// Why layer-lint could not check a workspace (as opposed to finding violations).
#[derive(Debug)]
pub(crate) enum Error {
    /// `cargo metadata` could not be run or failed.
    Cargo(String),
    /// The metadata was malformed or incomplete.
    Metadata(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cargo(message) => f.write_str(message),
            Self::Metadata(message) => write!(f, "unexpected cargo metadata: {message}"),
        }
    }
}

impl std::error::Error for Error {}

/// One broken rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Violation {
    /// A workspace member that no row of the layer table matches.
    UnknownCrate {
        /// The member's name.
        name: String,
    },
    /// A forbidden dependency of `from` on `to` (direct, transitive or a feature).
    Edge {
        /// The project crate that breaks the rule.
        from: String,
        /// The crate it must not depend on (or whose feature it must not enable).
        to: String,
        /// The kind of `from`'s edge the dependency comes through.
        kind: DepKind,
        /// The rule, in words.
        rule: String,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownCrate { name } => write!(
                f,
                "crate {name} is not in the layer table (add it to LAYERS in xtask/src/layer_lint.rs)"
            ),
            Self::Edge {
                from,
                to,
                kind,
                rule,
            } => write!(f, "{from} -> {to} ({kind}): {rule}"),
        }
    }
}

/// The outcome of [`check`].
#[derive(Debug)]
pub(crate) struct Report {
    /// How many workspace members were checked.
    pub(crate) crates: usize,
    /// Every violation, grouped by crate (crates in name order).
    pub(crate) violations: Vec<Violation>,
}

impl fmt::Display for Report {
    /// The one-line summary.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plural = |n: usize| if n == 1 { "" } else { "s" };
        write!(
            f,
            "layer-lint: {} crate{}, {} violation{}",
            self.crates,
            plural(self.crates),
            self.violations.len(),
            plural(self.violations.len())
        )
    }
}

/// The metadata indexed for lookups.
struct Graph<'m> {
    /// Packages by id.
    packages: HashMap<&'m str, &'m Package>,
    /// Resolve nodes by id.
    nodes: HashMap<&'m str, &'m Node>,
    /// Ids of the workspace members.
    members: HashSet<&'m str>,
}

impl<'m> Graph<'m> {
    /// Indexes `metadata`; fails when it has no resolve graph.
    fn new(metadata: &'m Metadata) -> Result<Self, Error> {
        let resolve = metadata.resolve.as_ref().ok_or_else(|| {
            Error::Metadata("no `resolve` graph (was --no-deps passed?)".to_owned())
        })?;
        Ok(Self {
            packages: metadata
                .packages
                .iter()
                .map(|package| (package.id.as_str(), package))
                .collect(),
            nodes: resolve
                .nodes
                .iter()
                .map(|node| (node.id.as_str(), node))
                .collect(),
            members: metadata
                .workspace_members
                .iter()
                .map(String::as_str)
                .collect(),
        })
    }

    /// The package with `id`.
    fn package(&self, id: &str) -> Result<&'m Package, Error> {
        self.packages
            .get(id)
            .copied()
            .ok_or_else(|| Error::Metadata(format!("no package with id `{id}`")))
    }

    /// The resolve node of `id`.
    fn node(&self, id: &str) -> Result<&'m Node, Error> {
        self.nodes
            .get(id)
            .copied()
            .ok_or_else(|| Error::Metadata(format!("no resolve node for `{id}`")))
    }

    /// The package names from `start` to `id` along the `parent` links of a search.
    fn path(
        &self,
        parent: &HashMap<&'m str, &'m str>,
        start: &str,
        id: &str,
    ) -> Result<Vec<&'m str>, Error> {
        let mut path = vec![self.package(id)?.name.as_str()];
        let mut at = id;
        while at != start {
            let Some(&up) = parent.get(at) else { break };
            path.push(self.package(up)?.name.as_str());
            at = up;
        }
        path.reverse();
        Ok(path)
    }

    /// The crates of `banned` reachable from `start` through its `seed` edges and then
    /// normal and build edges (not through another banned crate), each with the
    /// names along a shortest path to it, in the order of `banned`.
    fn banned_in_closure(
        &self,
        start: &'m Package,
        seed: DepKind,
        banned: &[&str],
    ) -> Result<Vec<(String, Vec<&'m str>)>, Error> {
        let mut parent: HashMap<&'m str, &'m str> = HashMap::new();
        let mut queue = VecDeque::new();
        for dep in &self.node(&start.id)?.deps {
            if dep.kinds()?.contains(&seed) && !parent.contains_key(dep.pkg.as_str()) {
                parent.insert(&dep.pkg, &start.id);
                queue.push_back(dep.pkg.as_str());
            }
        }
        let mut found: BTreeMap<usize, (String, Vec<&'m str>)> = BTreeMap::new();
        while let Some(id) = queue.pop_front() {
            let package = self.package(id)?;
            if let Some(rank) = banned.iter().position(|name| *name == package.name) {
                if let btree_map::Entry::Vacant(entry) = found.entry(rank) {
                    entry.insert((package.name.clone(), self.path(&parent, &start.id, id)?));
                }
                // What a banned crate pulls in is its own business: one line is enough.
                continue;
            }
            for dep in &self.node(id)?.deps {
                let kinds = dep.kinds()?;
                let runtime = kinds.contains(&DepKind::Normal) || kinds.contains(&DepKind::Build);
                if runtime && dep.pkg != start.id && !parent.contains_key(dep.pkg.as_str()) {
                    parent.insert(&dep.pkg, id);
                    queue.push_back(dep.pkg.as_str());
                }
            }
        }
        Ok(found.into_values().collect())
    }
}

/// Checks the workspace described by `metadata` against [`LAYERS`].
pub(crate) fn check(metadata: &Metadata) -> Result<Report, Error> {
    let graph = Graph::new(metadata)?;
    let mut members = metadata
        .workspace_members
        .iter()
        .map(|id| graph.package(id))
        .collect::<Result<Vec<_>, _>>()?;
    members.sort_by(|a, b| a.name.cmp(&b.name).then_with(|| a.id.cmp(&b.id)));

    let mut violations = Vec::new();
    for package in &members {
        match layer_of(&package.name) {
            None => violations.push(Violation::UnknownCrate {
                name: package.name.clone(),
            }),
            Some(layer) => {
                check_project_edges(&graph, package, layer, &mut violations)?;
                check_banned_externals(&graph, package, layer, &mut violations)?;
                check_tokio_features(package, layer, &mut violations);
            }
        }
    }
    Ok(Report {
        crates: members.len(),
        violations,
    })
}

/// Project edges of `package`: each kind checked against the table.
fn check_project_edges(
    graph: &Graph<'_>,
    package: &Package,
    layer: &Layer,
    violations: &mut Vec<Violation>,
) -> Result<(), Error> {
    let mut edges = Vec::new();
    for dep in &graph.node(&package.id)?.deps {
        if !graph.members.contains(dep.pkg.as_str()) {
            continue;
        }
        let target = graph.package(&dep.pkg)?;
        // An unknown target is reported once, as an unknown crate.
        let Some(target_layer) = layer_of(&target.name) else {
            continue;
        };
        for kind in dep.kinds()? {
            edges.push((target.name.as_str(), kind, target_layer));
        }
    }
    edges.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
    for (target, kind, target_layer) in edges {
        let rule = match target_layer.only_dependents {
            Some(allowed) if !allowed.iter().any(|p| matches(p, &package.name)) => {
                Some(match allowed {
                    [] => format!("nothing may depend on {target}"),
                    _ => format!(
                        "nothing may depend on {target} except {}",
                        allowed.join(", ")
                    ),
                })
            }
            _ if !layer.may_depend_on.iter().any(|p| matches(p, target)) => {
                Some(layer.outgoing_rule(&package.name))
            }
            _ => None,
        };
        if let Some(rule) = rule {
            violations.push(Violation::Edge {
                from: package.name.clone(),
                to: target.to_owned(),
                kind,
                rule,
            });
        }
    }
    Ok(())
}

/// Banned external crates in the normal and build closures of `package`.
fn check_banned_externals(
    graph: &Graph<'_>,
    package: &Package,
    layer: &Layer,
    violations: &mut Vec<Violation>,
) -> Result<(), Error> {
    let banned = layer.banned_externals();
    if banned.is_empty() {
        return Ok(());
    }
    for seed in [DepKind::Normal, DepKind::Build] {
        for (name, path) in graph.banned_in_closure(package, seed, &banned)? {
            let via = if path.len() > 2 {
                format!(" (via {})", path.join(" -> "))
            } else {
                String::new()
            };
            violations.push(Violation::Edge {
                from: package.name.clone(),
                rule: format!(
                    "{} must not depend on {name}, even transitively{via}",
                    package.name
                ),
                to: name,
                kind: seed,
            });
        }
    }
    Ok(())
}

/// Tokio networking enabled by `package`'s own normal or build declarations of tokio,
/// or by its `[features]` table. (Cargo unifies features workspace-wide, so the
/// resolved tokio features cannot tell who asked for `net`; the declarations can.)
fn check_tokio_features(package: &Package, layer: &Layer, violations: &mut Vec<Violation>) {
    if layer.network == Network::Allowed {
        return;
    }
    let mut found = BTreeSet::new();
    for dep in package
        .dependencies
        .iter()
        .filter(|dep| dep.name == "tokio")
    {
        let kind = match DepKind::from_cargo(dep.kind.as_deref()) {
            Ok(DepKind::Dev) | Err(_) => continue,
            Ok(kind) => kind,
        };
        for feature in &dep.features {
            if TOKIO_NETWORK_FEATURES.contains(&feature.as_str()) {
                found.insert((kind, feature.clone(), None));
            }
        }
        let key = dep.rename.as_deref().unwrap_or("tokio");
        for (own, enables) in &package.features {
            for enabled in enables {
                let Some((dep_name, feature)) = enabled.split_once('/') else {
                    continue;
                };
                let dep_name = dep_name.strip_suffix('?').unwrap_or(dep_name);
                if dep_name == key && TOKIO_NETWORK_FEATURES.contains(&feature) {
                    found.insert((kind, feature.to_owned(), Some(own.clone())));
                }
            }
        }
    }
    for (kind, feature, through) in found {
        let through = through
            .map(|own| format!(" (through its feature `{own}`)"))
            .unwrap_or_default();
        violations.push(Violation::Edge {
            from: package.name.clone(),
            to: "tokio".to_owned(),
            kind,
            rule: format!(
                "{} must not enable tokio's `{feature}` feature{through}",
                package.name
            ),
        });
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    /// The directory of `xtask`.
    fn xtask_dir() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
    }

    /// The violation lines of the fixture workspace `tests/fixtures/<case>`.
    fn lint_fixture(case: &str) -> Vec<String> {
        let manifest = xtask_dir()
            .join("tests/fixtures")
            .join(case)
            .join("Cargo.toml");
        let metadata = cargo_metadata(&manifest, true).unwrap();
        let report = check(&metadata).unwrap();
        report.violations.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn real_workspace_passes() {
        // Cargo resolves the whole workspace from any member's manifest.
        let metadata = cargo_metadata(&xtask_dir().join("Cargo.toml"), false).unwrap();
        let report = check(&metadata).unwrap();
        let lines: Vec<String> = report.violations.iter().map(ToString::to_string).collect();
        assert_eq!(lines, Vec::<String>::new(), "{report}");
        assert!(report.crates >= 7, "{report}");
    }

    #[test]
    fn clean_fixture_passes() {
        assert_eq!(lint_fixture("clean"), Vec::<String>::new());
    }

    #[test]
    fn normal_back_edge_fails() {
        assert_eq!(
            lint_fixture("normal-back-edge"),
            ["ai-core -> ai-tools (normal): ai-core may depend on no project crate"]
        );
    }

    #[test]
    fn build_edge_fails() {
        assert_eq!(
            lint_fixture("build-edge"),
            ["agent-graph -> ai-tools (build): agent-graph may depend only on ai-core"]
        );
    }

    #[test]
    fn dev_back_edges_fail() {
        assert_eq!(
            lint_fixture("dev-back-edge"),
            [
                "ai-core -> ai-tools (dev): ai-core may depend on no project crate",
                "ai-tools -> bootstrap (dev): nothing may depend on bootstrap except integration-tests",
            ]
        );
    }

    #[test]
    fn depending_on_bootstrap_fails() {
        assert_eq!(
            lint_fixture("bootstrap-dependent"),
            [
                "agent-graph -> bootstrap (normal): nothing may depend on bootstrap except integration-tests",
                "wire-openai -> bootstrap (dev): nothing may depend on bootstrap except integration-tests",
                "xtask -> bootstrap (normal): nothing may depend on bootstrap except integration-tests",
            ]
        );
    }

    #[test]
    fn unknown_crate_fails() {
        assert_eq!(
            lint_fixture("unknown-crate"),
            ["crate mcp is not in the layer table (add it to LAYERS in xtask/src/layer_lint.rs)"]
        );
    }

    #[test]
    fn wire_prefix_is_the_wire_layer() {
        // wire-anthropic needs no row of its own; wire-* rules apply to it.
        assert_eq!(
            lint_fixture("wire-prefix"),
            ["wire-anthropic -> ai-tools (normal): wire-anthropic may depend only on ai-core"]
        );
    }

    #[test]
    fn banned_http_crates_fail_even_transitively() {
        assert_eq!(
            lint_fixture("banned-http"),
            [
                "agent-graph -> reqwest (normal): agent-graph must not depend on reqwest, even transitively",
                "ai-tools -> hyper (normal): ai-tools must not depend on hyper, even transitively (via ai-tools -> fetch-lib -> hyper)",
                "ai-tools -> reqwest (build): ai-tools must not depend on reqwest, even transitively",
            ]
        );
    }

    #[test]
    fn schemars_in_ai_core_fails() {
        assert_eq!(
            lint_fixture("schemars-in-core"),
            [
                "ai-core -> schemars (normal): ai-core must not depend on schemars, even transitively"
            ]
        );
    }

    #[test]
    fn tokio_net_fails() {
        assert_eq!(
            lint_fixture("tokio-net"),
            [
                "agent-graph -> tokio (normal): agent-graph must not enable tokio's `net` feature (through its feature `sockets`)",
                "ai-tools -> tokio (normal): ai-tools must not enable tokio's `net` feature",
                "ai-tools -> tokio (build): ai-tools must not enable tokio's `full` feature",
            ]
        );
    }

    #[test]
    fn metadata_without_resolve_is_an_error() {
        let metadata =
            Metadata::from_json(br#"{"packages": [], "workspace_members": [], "resolve": null}"#)
                .unwrap();
        let err = check(&metadata).unwrap_err();
        assert_eq!(
            err.to_string(),
            "unexpected cargo metadata: no `resolve` graph (was --no-deps passed?)"
        );
    }

    #[test]
    fn every_layer_is_reachable() {
        // A row shadowed by an earlier, broader pattern would never apply.
        for (index, layer) in LAYERS.iter().enumerate() {
            let name = layer.crates.replace('*', "x");
            assert_eq!(
                layer_of(&name).map(|found| found.crates),
                Some(layer.crates),
                "row {index} is shadowed"
            );
        }
    }
}
