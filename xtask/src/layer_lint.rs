//! `layer-lint`: the layer table of `layers.toml`, checked against `cargo metadata`,
//! deny.toml and ARCHITECTURE.md.
//!
//! It knows the project's layers only through [`Layers`] and reads only the package
//! graph cargo resolves; it must not know what the crates contain (that is `tidy`'s
//! and clippy's job).
//!
//! Rules checked for every workspace member:
//! - it matches a row of the table;
//! - project edges: normal and build edges follow the row's `may_depend_on`; dev edges
//!   follow "no dev back-edges" (a dev edge is fine unless its target may itself come
//!   to depend on the member through normal edges the table allows); every edge kind
//!   respects the target's `only_dependents`;
//! - banned external crates: its transitive normal+build closure must not contain the
//!   crates its layer bans, and its own tokio declarations must not enable networking.
//!   Dev-dependencies are exempt here (a test may run an HTTP server).
//!
//! And, when the checked workspace's root has them:
//! - deny.toml's `[bans] deny` entries for project crates and HTTP clients are the ones
//!   derived from the table ([`crate::deny`]);
//! - ARCHITECTURE.md's "Dependency rules" table lists exactly the table's rows with the
//!   same `may_depend_on` ([`crate::architecture`]).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque, btree_map};
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;

use crate::layers::{Forbidden, Layer, Layers, Network, Rules, layer_name};
use crate::{architecture, deny};

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
    pub(crate) fn from_cargo(kind: Option<&str>) -> Result<Self, Error> {
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
    /// The workspace's root directory (where deny.toml and ARCHITECTURE.md live).
    #[serde(default)]
    workspace_root: Option<PathBuf>,
}

/// One package of the metadata.
#[derive(Debug, Deserialize)]
pub(crate) struct Package {
    /// The package id (as used by `resolve` and `workspace_members`).
    id: String,
    /// The package's layer name ([`layer_name`] of its package name).
    pub(crate) name: String,
    /// The package name itself (what cargo-deny and crates.io see).
    #[serde(skip)]
    pub(crate) package: String,
    /// The declared dependencies (all kinds, all targets).
    #[serde(default)]
    pub(crate) dependencies: Vec<Dependency>,
    /// The package's `[features]` table.
    #[serde(default)]
    features: BTreeMap<String, Vec<String>>,
}

/// One declared dependency of a package.
#[derive(Debug, Deserialize)]
pub(crate) struct Dependency {
    /// The depended-on package's name (not its rename).
    pub(crate) name: String,
    /// `null` (normal), `"build"` or `"dev"`.
    pub(crate) kind: Option<String>,
    /// The name the dependency is known by in the depending crate, if renamed.
    rename: Option<String>,
    /// Features the declaration enables (workspace-inherited ones included).
    #[serde(default)]
    features: Vec<String>,
    /// Whether the dependency is optional (behind a feature).
    #[serde(default)]
    optional: bool,
    /// Whether the declaration enables the dependency's default features.
    #[serde(default = "default_true")]
    uses_default_features: bool,
}

fn default_true() -> bool {
    true
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
    /// Package names are read as layer names ([`layer_name`]): the rules, the
    /// messages and ARCHITECTURE.md speak of `ai-core`, not `toolwright-ai-core`.
    pub(crate) fn from_json(json: &[u8]) -> Result<Self, Error> {
        let mut metadata: Self =
            serde_json::from_slice(json).map_err(|err| Error::Metadata(err.to_string()))?;
        for package in &mut metadata.packages {
            package.package = std::mem::take(&mut package.name);
            package.name = layer_name(&package.package).to_owned();
            for dependency in &mut package.dependencies {
                dependency.name = layer_name(&dependency.name).to_owned();
            }
        }
        Ok(metadata)
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
    /// A file next to the workspace (deny.toml, ARCHITECTURE.md) could not be read,
    /// parsed or written.
    File(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Cargo(message) | Self::File(message) => f.write_str(message),
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
    /// A file that must agree with the layer table and does not.
    File {
        /// The file, relative to the workspace root (`deny.toml`, `ARCHITECTURE.md`).
        file: &'static str,
        /// The 1-based line, when the disagreement is about one line.
        line: Option<usize>,
        /// What disagrees, in words.
        message: String,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownCrate { name } => write!(
                f,
                "crate {name} is not in the layer table (add a row for it to layers.toml)"
            ),
            Self::Edge {
                from,
                to,
                kind,
                rule,
            } => write!(f, "{from} -> {to} ({kind}): {rule}"),
            Self::File {
                file,
                line: Some(line),
                message,
            } => write!(f, "{file}:{line}: {message}"),
            Self::File {
                file,
                line: None,
                message,
            } => write!(f, "{file}: {message}"),
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
    /// names along a shortest path to it, in the order of `banned`. Optional
    /// dependencies of workspace members are followed only when the features
    /// `start` turns on (its defaults, and what each member asks of the next)
    /// enable them: a crate is judged as its users build it.
    fn banned_in_closure(
        &self,
        start: &'m Package,
        seed: DepKind,
        banned: &[&str],
    ) -> Result<Vec<(String, Vec<&'m str>)>, Error> {
        let features = self.member_features(start)?;
        let mut parent: HashMap<&'m str, &'m str> = HashMap::new();
        let mut queue = VecDeque::new();
        for dep in self.followed(&start.id, &features)? {
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
            for dep in self.followed(id, &features)? {
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

    /// The resolved edges of `id` a build of the crate that turned on
    /// `features` follows: a workspace member's optional dependency only when
    /// one of its turned-on features enables it (an external crate's, all:
    /// cargo unifies them anyway).
    fn followed(
        &self,
        id: &str,
        features: &HashMap<&'m str, BTreeSet<String>>,
    ) -> Result<Vec<&'m NodeDep>, Error> {
        let node = self.node(id)?;
        let Some(on) = features.get(id) else {
            return Ok(node.deps.iter().collect());
        };
        let package = self.package(id)?;
        let (enabled, _) = enabled_dependencies(package, on);
        let mut followed = Vec::new();
        for dep in &node.deps {
            let target = self.package(&dep.pkg)?;
            let optional = package
                .dependencies
                .iter()
                .filter(|d| d.name == target.name && d.kind.as_deref() != Some("dev"))
                .all(|d| d.optional);
            if !optional || enabled.contains(target.name.as_str()) {
                followed.push(dep);
            }
        }
        Ok(followed)
    }

    /// The features of each workspace member a build of `start` (with its
    /// default features) turns on.
    fn member_features(
        &self,
        start: &'m Package,
    ) -> Result<HashMap<&'m str, BTreeSet<String>>, Error> {
        let mut on: HashMap<&'m str, BTreeSet<String>> = HashMap::new();
        on.insert(&start.id, expand(start, ["default".to_owned()]));
        let mut work = vec![start.id.as_str()];
        while let Some(id) = work.pop() {
            let package = self.package(id)?;
            let (enabled, asked) = enabled_dependencies(package, &on[id]);
            for dep in &self.node(id)?.deps {
                let target = self.package(&dep.pkg)?;
                if !self.members.contains(dep.pkg.as_str()) {
                    continue;
                }
                for decl in package
                    .dependencies
                    .iter()
                    .filter(|d| d.name == target.name && d.kind.as_deref() != Some("dev"))
                {
                    if decl.optional && !enabled.contains(target.name.as_str()) {
                        continue;
                    }
                    let mut want: Vec<String> = decl.features.clone();
                    if decl.uses_default_features {
                        want.push("default".to_owned());
                    }
                    want.extend(
                        asked
                            .get(target.name.as_str())
                            .into_iter()
                            .flatten()
                            .cloned(),
                    );
                    let wanted = expand(target, want);
                    let have = on.entry(&target.id).or_default();
                    if !wanted.is_subset(have) {
                        have.extend(wanted);
                        work.push(&target.id);
                    }
                }
            }
        }
        Ok(on)
    }
}

/// `features` of `package` with every feature they turn on, by its `[features]`
/// table (names it does not have are dropped).
fn expand(package: &Package, features: impl IntoIterator<Item = String>) -> BTreeSet<String> {
    let mut on = BTreeSet::new();
    let mut work: Vec<String> = features.into_iter().collect();
    while let Some(feature) = work.pop() {
        let Some(entries) = package.features.get(&feature) else {
            continue;
        };
        if !on.insert(feature) {
            continue;
        }
        work.extend(
            entries
                .iter()
                .filter(|e| package.features.contains_key(e.as_str()))
                .cloned(),
        );
    }
    on
}

/// The optional dependencies of `package` its features `on` enable (by
/// name), and the features they ask of each dependency (`dep/feature`).
fn enabled_dependencies<'p>(
    package: &'p Package,
    on: &BTreeSet<String>,
) -> (HashSet<&'p str>, HashMap<&'p str, Vec<String>>) {
    let mut enabled = HashSet::new();
    let mut asked: HashMap<&'p str, Vec<String>> = HashMap::new();
    for entry in on.iter().filter_map(|f| package.features.get(f)).flatten() {
        if let Some(dep) = entry.strip_prefix("dep:") {
            enabled.insert(dep);
        } else if let Some((dep, feature)) = entry.split_once('/') {
            let weak = dep.ends_with('?');
            let dep = dep.trim_end_matches('?');
            if !weak {
                enabled.insert(dep);
            }
            asked.entry(dep).or_default().push(feature.to_owned());
        } else if !package.features.contains_key(entry.as_str()) {
            enabled.insert(entry.as_str());
        }
    }
    (enabled, asked)
}

/// The workspace members of `metadata`, sorted by name (then id).
fn sorted_members<'m>(
    graph: &Graph<'m>,
    metadata: &'m Metadata,
) -> Result<Vec<&'m Package>, Error> {
    let mut members = metadata
        .workspace_members
        .iter()
        .map(|id| graph.package(id))
        .collect::<Result<Vec<_>, _>>()?;
    members.sort_by(|a, b| a.name.cmp(&b.name).then_with(|| a.id.cmp(&b.id)));
    Ok(members)
}

/// Checks the workspace described by `metadata` against `layers`, and the deny.toml
/// and ARCHITECTURE.md at its root when they exist.
pub(crate) fn check(metadata: &Metadata, layers: &Layers) -> Result<Report, Error> {
    let graph = Graph::new(metadata)?;
    let members = sorted_members(&graph, metadata)?;
    let rules = Rules::new(layers, members.iter().map(|package| package.name.as_str()));

    let mut violations = Vec::new();
    for package in &members {
        match layers.layer_of(&package.name) {
            None => violations.push(Violation::UnknownCrate {
                name: package.name.clone(),
            }),
            Some(layer) => {
                check_project_edges(&graph, &rules, package, &mut violations)?;
                check_banned_externals(&graph, layers, package, layer, &mut violations)?;
                check_tokio_features(layers, package, layer, &mut violations);
            }
        }
    }

    if let Some(root) = &metadata.workspace_root {
        let deny_path = root.join(deny::FILE);
        if let Some(text) = read_if_exists(&deny_path)? {
            let derived = deny::derive(layers, &rules, &members);
            let messages = deny::check(&text, layers, &rules, &derived)
                .map_err(|err| Error::File(format!("{}: {err}", deny_path.display())))?;
            violations.extend(messages.into_iter().map(|message| Violation::File {
                file: deny::FILE,
                line: None,
                message,
            }));
        }
        if let Some(text) = read_if_exists(&root.join(architecture::FILE))? {
            violations.extend(architecture::check(&text, layers).into_iter().map(
                |(line, message)| Violation::File {
                    file: architecture::FILE,
                    line,
                    message,
                },
            ));
        }
    }

    Ok(Report {
        crates: members.len(),
        violations,
    })
}

/// Rewrites the layer-lint entries of the deny.toml at the workspace root so that
/// they match `layers`; returns the file's path.
pub(crate) fn write_deny(metadata: &Metadata, layers: &Layers) -> Result<PathBuf, Error> {
    let graph = Graph::new(metadata)?;
    let members = sorted_members(&graph, metadata)?;
    let rules = Rules::new(layers, members.iter().map(|package| package.name.as_str()));
    let root = metadata
        .workspace_root
        .as_ref()
        .ok_or_else(|| Error::Metadata("no `workspace_root`".to_owned()))?;
    let path = root.join(deny::FILE);
    let text = read_if_exists(&path)?
        .ok_or_else(|| Error::File(format!("{}: no such file", path.display())))?;
    let derived = deny::derive(layers, &rules, &members);
    let rewritten = deny::rewrite(&text, &derived)
        .map_err(|err| Error::File(format!("{}: {err}", path.display())))?;
    if rewritten != text {
        std::fs::write(&path, rewritten)
            .map_err(|err| Error::File(format!("cannot write {}: {err}", path.display())))?;
    }
    Ok(path)
}

/// The text of `path`, or `None` when there is no such file.
fn read_if_exists(path: &Path) -> Result<Option<String>, Error> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(Error::File(format!(
            "cannot read {}: {err}",
            path.display()
        ))),
    }
}

/// Project edges of `package`: each kind checked against the table.
fn check_project_edges(
    graph: &Graph<'_>,
    rules: &Rules<'_>,
    package: &Package,
    violations: &mut Vec<Violation>,
) -> Result<(), Error> {
    let mut edges = Vec::new();
    for dep in &graph.node(&package.id)?.deps {
        if !graph.members.contains(dep.pkg.as_str()) {
            continue;
        }
        let target = graph.package(&dep.pkg)?;
        for kind in dep.kinds()? {
            edges.push((target.name.as_str(), kind));
        }
    }
    edges.sort_unstable();
    for (target, kind) in edges {
        // An unknown target is reported once, as an unknown crate (`forbidden` is None).
        let rule = match rules.forbidden(&package.name, target, kind == DepKind::Dev) {
            None => continue,
            Some(Forbidden::Dependents(rule) | Forbidden::Outgoing(rule)) => rule,
            Some(Forbidden::BackEdge(path)) => {
                let via = if path.len() > 2 {
                    format!(" (via {})", path.join(" -> "))
                } else {
                    String::new()
                };
                format!(
                    "no dev back-edges: {target} may depend on {}{via}",
                    package.name
                )
            }
        };
        violations.push(Violation::Edge {
            from: package.name.clone(),
            to: target.to_owned(),
            kind,
            rule,
        });
    }
    Ok(())
}

/// Banned external crates in the normal and build closures of `package`.
fn check_banned_externals(
    graph: &Graph<'_>,
    layers: &Layers,
    package: &Package,
    layer: &Layer,
    violations: &mut Vec<Violation>,
) -> Result<(), Error> {
    let banned = layers.banned_externals(layer);
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
fn check_tokio_features(
    layers: &Layers,
    package: &Package,
    layer: &Layer,
    violations: &mut Vec<Violation>,
) {
    if layer.network == Network::Allowed {
        return;
    }
    let network_features = &layers.network.tokio_features;
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
            if network_features.contains(feature) {
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
                if dep_name == key && network_features.iter().any(|f| f == feature) {
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

    /// The repository's layer table.
    fn layers() -> Layers {
        Layers::load(&xtask_dir().join("../layers.toml")).unwrap()
    }

    /// The metadata of the fixture workspace `tests/fixtures/<case>`.
    fn fixture_metadata(case: &str) -> Metadata {
        let manifest = xtask_dir()
            .join("tests/fixtures")
            .join(case)
            .join("Cargo.toml");
        cargo_metadata(&manifest, true).unwrap()
    }

    /// The violation lines of the fixture workspace `tests/fixtures/<case>`.
    fn lint_fixture(case: &str) -> Vec<String> {
        let report = check(&fixture_metadata(case), &layers()).unwrap();
        report.violations.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn real_workspace_passes() {
        // Cargo resolves the whole workspace from any member's manifest.
        let metadata = cargo_metadata(&xtask_dir().join("Cargo.toml"), false).unwrap();
        let report = check(&metadata, &layers()).unwrap();
        let lines: Vec<String> = report.violations.iter().map(ToString::to_string).collect();
        assert_eq!(lines, Vec::<String>::new(), "{report}");
        assert!(report.crates >= 9, "{report}");
    }

    #[test]
    fn clean_fixture_passes() {
        // Includes sideways dev edges (agent-graph -> ai-tools, agent-testing, ai-host,
        // wire-openai), a deny.toml and an ARCHITECTURE.md in step with layers.toml.
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
    fn ai_host_depending_on_agent_graph_fails() {
        assert_eq!(
            lint_fixture("host-depends-on-graph"),
            [
                "ai-host -> agent-graph (normal): ai-host may depend only on ai-core, ai-tools, process-scope, client-tls"
            ]
        );
    }

    #[test]
    fn agent_testing_depending_on_a_wire_crate_fails() {
        assert_eq!(
            lint_fixture("testing-depends-on-wire"),
            ["agent-testing -> wire-openai (normal): agent-testing may depend only on ai-core"]
        );
    }

    #[test]
    fn dev_back_edges_fail() {
        assert_eq!(
            lint_fixture("dev-back-edge"),
            [
                "ai-core -> agent-testing (dev): no dev back-edges: agent-testing may depend on ai-core",
                "ai-tools -> ai-host (dev): no dev back-edges: ai-host may depend on ai-tools",
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
            ["crate mcp is not in the layer table (add a row for it to layers.toml)"]
        );
    }

    #[test]
    fn wire_prefix_is_the_wire_layer() {
        // wire-anthropic needs no row of its own; wire-* rules apply to it.
        assert_eq!(
            lint_fixture("wire-prefix"),
            [
                "wire-anthropic -> ai-tools (normal): wire-anthropic may depend only on ai-core, completion-http, sse"
            ]
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
    fn deny_toml_drift_fails() {
        let fix = "`cargo xtask layer-lint --write-deny` rewrites the entries";
        assert_eq!(
            lint_fixture("deny-drift"),
            [
                format!(
                    "deny.toml: [bans] deny entry for ai-core lacks wrappers ai-host, wire-openai; {fix}"
                ),
                format!(
                    "deny.toml: [bans] deny entry for ai-core has wrappers that do not depend on it or that layers.toml does not allow: bootstrap; {fix}"
                ),
                format!(
                    "deny.toml: [bans] deny has no entry for ai-tools (want wrappers ai-host); {fix}"
                ),
                format!(
                    "deny.toml: [bans] deny entry for wire-openai: no member may and does depend on wire-openai, so it needs no entry (cargo-deny would ban the crate itself); {fix}"
                ),
                format!(
                    "deny.toml: [bans] deny entry for wire-anthropic: wire-anthropic matches a layers.toml row but is not a workspace member; {fix}"
                ),
            ]
        );
    }

    #[test]
    fn write_deny_fixes_the_drift_and_leaves_other_entries_alone() {
        let metadata = fixture_metadata("deny-drift");
        let layers = layers();
        let graph = Graph::new(&metadata).unwrap();
        let members = sorted_members(&graph, &metadata).unwrap();
        let rules = Rules::new(&layers, members.iter().map(|p| p.name.as_str()));
        let derived = deny::derive(&layers, &rules, &members);
        let path = xtask_dir().join("tests/fixtures/deny-drift/deny.toml");
        let text = std::fs::read_to_string(path).unwrap();
        let rewritten = deny::rewrite(&text, &derived).unwrap();
        assert_eq!(
            deny::check(&rewritten, &layers, &rules, &derived).unwrap(),
            Vec::<String>::new()
        );
        assert!(rewritten.contains("{ crate = \"openssl\", reason = \"not derived from layers.toml: layer-lint leaves it alone\" },\n"));
        assert!(rewritten.contains(
            "  { crate = \"reqwest\", wrappers = [\"opentelemetry-http\", \"opentelemetry-otlp\", \"rmcp\", \"wire-openai\"], reason = \"layers.toml: only network layers use reqwest\" },\n"
        ));
    }

    #[test]
    fn architecture_table_drift_fails() {
        assert_eq!(
            lint_fixture("architecture-drift"),
            [
                "ARCHITECTURE.md:15: row ai-host says it may depend on ai-core; layers.toml says ai-core, ai-tools, client-tls, process-scope",
                "ARCHITECTURE.md:16: row wire-* says it may depend on ai-core; layers.toml says ai-core, completion-http, sse",
                "ARCHITECTURE.md:17: row agent-graph says it may depend on ai-core, ai-tools; layers.toml says ai-core",
                "ARCHITECTURE.md:19: row agent-testing appears twice (first at line 18)",
                "ARCHITECTURE.md:21: row mcp is not a layers.toml row",
                "ARCHITECTURE.md:11: the \"Dependency rules\" table has no row for process-scope (a layers.toml row)",
                "ARCHITECTURE.md:11: the \"Dependency rules\" table has no row for sse (a layers.toml row)",
                "ARCHITECTURE.md:11: the \"Dependency rules\" table has no row for client-tls (a layers.toml row)",
                "ARCHITECTURE.md:11: the \"Dependency rules\" table has no row for completion-http (a layers.toml row)",
                "ARCHITECTURE.md:11: the \"Dependency rules\" table has no row for tools-mcp (a layers.toml row)",
                "ARCHITECTURE.md:11: the \"Dependency rules\" table has no row for agent-telemetry (a layers.toml row)",
                "ARCHITECTURE.md:11: the \"Dependency rules\" table has no row for agent-store (a layers.toml row)",
                "ARCHITECTURE.md:11: the \"Dependency rules\" table has no row for chat-protocol (a layers.toml row)",
                "ARCHITECTURE.md:11: the \"Dependency rules\" table has no row for agent (a layers.toml row)",
                "ARCHITECTURE.md:11: the \"Dependency rules\" table has no row for agent-durable (a layers.toml row)",
                "ARCHITECTURE.md:11: the \"Dependency rules\" table has no row for agent-server (a layers.toml row)",
                "ARCHITECTURE.md:11: the \"Dependency rules\" table has no row for integration-tests (a layers.toml row)",
            ]
        );
    }

    /// A copy of `clean` where agent-graph gains a normal dependency on
    /// wire-openai, which only its dev edge allowed: layer-lint refuses the edge,
    /// and so does cargo-deny with clean's deny.toml (it reads no dev edges, so the
    /// dev edge does not make agent-graph a wrapper). cargo-deny passes on `clean`
    /// itself, so its failure here is the edge's.
    #[test]
    fn a_normal_edge_that_only_a_dev_edge_allowed_fails_both_checks() {
        assert_eq!(
            lint_fixture("graph-uses-wire"),
            [
                "agent-graph -> wire-openai (normal): agent-graph may depend only on ai-core",
                "agent-graph -> reqwest (normal): agent-graph must not depend on reqwest, even transitively (via agent-graph -> wire-openai -> reqwest)",
            ]
        );
        let deny = |case: &str| {
            let manifest = xtask_dir()
                .join("tests/fixtures")
                .join(case)
                .join("Cargo.toml");
            std::process::Command::new("cargo")
                .args(["deny", "--offline", "--manifest-path"])
                .arg(&manifest)
                .args(["check", "bans"])
                .output()
        };
        match deny("clean") {
            Ok(clean) if clean.status.success() => {
                let out = deny("graph-uses-wire").unwrap();
                let text = String::from_utf8_lossy(&out.stderr);
                assert!(!out.status.success(), "cargo-deny passed: {text}");
                assert!(
                    text.contains("banned") && text.contains("wire-openai"),
                    "{text}"
                );
            }
            Ok(clean) if String::from_utf8_lossy(&clean.stderr).contains("no such command") => {
                eprintln!("SKIPPED the cargo-deny half: cargo-deny is not installed");
            }
            other => panic!("cargo-deny on the clean fixture: {other:?}"),
        }
    }

    #[test]
    fn metadata_without_resolve_is_an_error() {
        let metadata =
            Metadata::from_json(br#"{"packages": [], "workspace_members": [], "resolve": null}"#)
                .unwrap();
        let err = check(&metadata, &layers()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "unexpected cargo metadata: no `resolve` graph (was --no-deps passed?)"
        );
    }
}
