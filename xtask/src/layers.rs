//! The layer table of `layers.toml` (repository root): which project crate may depend
//! on which, and which layers may reach the network.
//!
//! This module loads and validates the table and answers rule questions about crate
//! names; it knows nothing of `cargo metadata` (that is [`crate::layer_lint`]).
//! The file's own header documents its fields and the dev-dependency rule.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::fmt;
use std::path::Path;

use serde::Deserialize;

/// Whether a layer may reach the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Network {
    /// The layer may use HTTP crates and tokio's networking.
    Allowed,
    /// The layer must not reach the HTTP crates nor enable tokio's networking.
    Forbidden,
}

/// One row of the table: a project crate (or family of crates) and its rules.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Layer {
    /// The crate name, or a name prefix when it ends in `*` (`wire-*`).
    #[serde(rename = "crate")]
    pub(crate) pattern: String,
    /// What the crate is, in one line.
    pub(crate) description: String,
    /// Project crates this layer may depend on through normal and build edges (same
    /// pattern syntax; `*` alone is any project crate).
    pub(crate) may_depend_on: Vec<String>,
    /// `Some(list)`: no crate outside `list` may depend on this layer (any edge kind).
    #[serde(default)]
    pub(crate) only_dependents: Option<Vec<String>>,
    /// Whether the layer may reach the network.
    pub(crate) network: Network,
    /// Further external crates banned from the layer's normal+build closure.
    #[serde(default)]
    pub(crate) banned: Vec<String>,
}

/// The `[network]` table: what "network" means.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NetworkRules {
    /// External crates that speak HTTP; banned from [`Network::Forbidden`] layers.
    pub(crate) http_crates: Vec<String>,
    /// Tokio features that open sockets; [`Network::Forbidden`] layers must not enable
    /// them.
    pub(crate) tokio_features: Vec<String>,
    /// HTTP clients that deny.toml bans with derived `wrappers`.
    pub(crate) deny_toml_bans: Vec<String>,
    /// External crates allowed to wrap those clients (an SDK that speaks HTTP
    /// itself); added to the derived `wrappers`. The layers that may depend on such a
    /// crate are still only the network layers (it should be in `http_crates` too).
    #[serde(default)]
    pub(crate) external_wrappers: Vec<String>,
}

/// The whole of `layers.toml`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Layers {
    /// What "network" means.
    pub(crate) network: NetworkRules,
    /// The rows, in file order (the first matching row wins).
    #[serde(rename = "layer")]
    pub(crate) rows: Vec<Layer>,
}

/// Why `layers.toml` could not be used.
#[derive(Debug)]
pub(crate) struct Error(String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "layers.toml: {}", self.0)
    }
}

impl std::error::Error for Error {}

/// Whether `name` matches a table pattern: an exact name, or a prefix ending in `*`.
pub(crate) fn matches(pattern: &str, name: &str) -> bool {
    match pattern.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => pattern == name,
    }
}

/// Whether every name `inner` matches is also matched by `outer`.
fn covers(outer: &str, inner: &str) -> bool {
    match outer.strip_suffix('*') {
        // `inner`'s names all start with `inner` minus its `*`, so with `prefix` too.
        Some(prefix) => inner.starts_with(prefix),
        None => outer == inner,
    }
}

/// The facade's package name, which is the product's name; every other published
/// package is this name, a `-`, and a suffix.
pub(crate) const PRODUCT: &str = "toolwright";

/// The layer name of a package: the one place package names (what crates.io and
/// cargo-deny see) map to the names of the layer table, ARCHITECTURE.md and the
/// directories under `crates/`. The facade is `agent`, the binary's package
/// `bootstrap`, and `toolwright-<name>` is `<name>`; other names are their own.
pub(crate) fn layer_name(package: &str) -> &str {
    match package {
        PRODUCT => "agent",
        "toolwright-cli" => "bootstrap",
        other => other
            .strip_prefix(PRODUCT)
            .and_then(|rest| rest.strip_prefix('-'))
            .unwrap_or(other),
    }
}

/// `items` joined with ", ".
pub(crate) fn list(items: impl IntoIterator<Item = impl AsRef<str>>) -> String {
    items
        .into_iter()
        .map(|item| item.as_ref().to_owned())
        .collect::<Vec<_>>()
        .join(", ")
}

impl Layers {
    /// Reads and validates the table at `path`.
    pub(crate) fn load(path: &Path) -> Result<Self, Error> {
        let text = std::fs::read_to_string(path)
            .map_err(|err| Error(format!("cannot read {}: {err}", path.display())))?;
        Self::parse(&text)
    }

    /// Parses and validates the text of a `layers.toml`.
    pub(crate) fn parse(text: &str) -> Result<Self, Error> {
        let layers: Self = toml::from_str(text).map_err(|err| Error(err.to_string()))?;
        layers.validate()?;
        Ok(layers)
    }

    /// Checks what serde cannot: shadowed rows, dangling patterns, empty text.
    fn validate(&self) -> Result<(), Error> {
        if self.rows.is_empty() {
            return Err(Error("no [[layer]] rows".to_owned()));
        }
        for (index, row) in self.rows.iter().enumerate() {
            let name = &row.pattern;
            let body = name.strip_suffix('*').unwrap_or(name);
            if body.is_empty() || body.contains('*') {
                return Err(Error(format!(
                    "row {} has crate = {name:?}; want a crate name or a `prefix*` pattern",
                    index + 1
                )));
            }
            if let Some(earlier) = self.rows[..index]
                .iter()
                .find(|earlier| covers(&earlier.pattern, name))
            {
                return Err(Error(format!(
                    "row {name} can never apply: row {} comes first and matches all its crates",
                    earlier.pattern
                )));
            }
            let description = row.description.trim();
            if description.is_empty() || description.contains('\n') {
                return Err(Error(format!(
                    "row {name}: description must be one non-empty line"
                )));
            }
            let refs = row
                .may_depend_on
                .iter()
                .map(|p| ("may_depend_on", p))
                .chain(
                    row.only_dependents
                        .iter()
                        .flatten()
                        .map(|p| ("only_dependents", p)),
                );
            for (field, pattern) in refs {
                if pattern != "*"
                    && !self
                        .rows
                        .iter()
                        .any(|r| r.pattern == *pattern || matches(&r.pattern, pattern))
                {
                    return Err(Error(format!(
                        "row {name}: {field} names {pattern}, which no row matches"
                    )));
                }
            }
        }
        Ok(())
    }

    /// The row of a project crate, if the table knows it.
    pub(crate) fn layer_of(&self, name: &str) -> Option<&Layer> {
        self.rows.iter().find(|row| matches(&row.pattern, name))
    }

    /// Every external crate banned from `layer`'s normal+build closure, HTTP crates
    /// first.
    pub(crate) fn banned_externals<'a>(&'a self, layer: &'a Layer) -> Vec<&'a str> {
        let mut banned: Vec<&str> = Vec::new();
        if layer.network == Network::Forbidden {
            banned.extend(self.network.http_crates.iter().map(String::as_str));
        }
        for name in &layer.banned {
            if !banned.contains(&name.as_str()) {
                banned.push(name);
            }
        }
        banned
    }
}

impl Layer {
    /// Whether the row's `may_depend_on` names `target`.
    pub(crate) fn may_depend_on(&self, target: &str) -> bool {
        self.may_depend_on
            .iter()
            .any(|p| p == "*" || matches(p, target))
    }

    /// Whether the row's `only_dependents` (if any) admits `dependent`.
    pub(crate) fn admits(&self, dependent: &str) -> bool {
        match &self.only_dependents {
            None => true,
            Some(allowed) => allowed.iter().any(|p| p == "*" || matches(p, dependent)),
        }
    }

    /// The rule a forbidden outgoing normal/build edge of `name` breaks, in words.
    pub(crate) fn outgoing_rule(&self, name: &str) -> String {
        match self.may_depend_on.as_slice() {
            [] => format!("{name} may depend on no project crate"),
            [any] if any == "*" => format!("{name} may depend on any project crate"),
            allowed => format!("{name} may depend only on {}", list(allowed)),
        }
    }

    /// The rule a dependent of `name` outside `only_dependents` breaks, in words.
    pub(crate) fn dependents_rule(&self, name: &str) -> Option<String> {
        self.only_dependents
            .as_ref()
            .map(|allowed| match allowed.as_slice() {
                [] => format!("nothing may depend on {name}"),
                _ => format!("nothing may depend on {name} except {}", list(allowed)),
            })
    }
}

/// The table applied to one set of crate names (the workspace members): who may
/// depend on whom, edge by edge and transitively.
pub(crate) struct Rules<'l> {
    /// The table.
    layers: &'l Layers,
    /// The known members (those some row matches), sorted.
    names: Vec<&'l str>,
    /// For each known member, the members it may depend on directly through a normal
    /// or build edge.
    normal: HashMap<&'l str, Vec<&'l str>>,
}

/// Why a dependency edge is forbidden.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Forbidden {
    /// The target's `only_dependents` does not admit the dependent.
    Dependents(String),
    /// The dependent's `may_depend_on` does not name the target (normal/build edges).
    Outgoing(String),
    /// A dev edge whose target may itself depend on the dependent; the path is the
    /// names from the target to the dependent along allowed normal edges.
    BackEdge(Vec<String>),
}

impl<'l> Rules<'l> {
    /// The rules among `names` (unknown names are ignored).
    pub(crate) fn new(layers: &'l Layers, names: impl IntoIterator<Item = &'l str>) -> Self {
        let names: BTreeSet<&'l str> = names
            .into_iter()
            .filter(|name| layers.layer_of(name).is_some())
            .collect();
        let names: Vec<&'l str> = names.into_iter().collect();
        let normal = names
            .iter()
            .map(|&from| {
                let targets = names
                    .iter()
                    .copied()
                    .filter(|&to| to != from && Self::normal_allowed(layers, from, to))
                    .collect();
                (from, targets)
            })
            .collect();
        Self {
            layers,
            names,
            normal,
        }
    }

    /// Whether the table lets `from` depend on `to` through a normal or build edge.
    fn normal_allowed(layers: &Layers, from: &str, to: &str) -> bool {
        match (layers.layer_of(from), layers.layer_of(to)) {
            (Some(from_layer), Some(to_layer)) => {
                from_layer.may_depend_on(to) && to_layer.admits(from)
            }
            _ => false,
        }
    }

    /// The known members, sorted.
    pub(crate) fn names(&self) -> &[&'l str] {
        &self.names
    }

    /// A shortest path of allowed normal edges from `start` to `goal` (both included),
    /// if `start` may come to depend on `goal`.
    fn normal_path(&self, start: &'l str, goal: &str) -> Option<Vec<String>> {
        let mut parent: HashMap<&str, &str> = HashMap::new();
        let mut queue = VecDeque::from([start]);
        while let Some(at) = queue.pop_front() {
            for &next in self.normal.get(at).into_iter().flatten() {
                if next == start || parent.contains_key(next) {
                    continue;
                }
                parent.insert(next, at);
                if next == goal {
                    let mut path = vec![next.to_owned()];
                    let mut up = next;
                    while let Some(&p) = parent.get(up) {
                        path.push(p.to_owned());
                        up = p;
                    }
                    path.reverse();
                    return Some(path);
                }
                queue.push_back(next);
            }
        }
        None
    }

    /// Why the table forbids `from` -> `to` as a normal/build edge (`dev == false`) or
    /// as a dev edge (`dev == true`); `None` when it is allowed. Both must be known.
    pub(crate) fn forbidden(&self, from: &str, to: &str, dev: bool) -> Option<Forbidden> {
        let from_layer = self.layers.layer_of(from)?;
        let to_layer = self.layers.layer_of(to)?;
        if !to_layer.admits(from) {
            return to_layer.dependents_rule(to).map(Forbidden::Dependents);
        }
        if from_layer.may_depend_on(to) {
            return None;
        }
        if !dev {
            return Some(Forbidden::Outgoing(from_layer.outgoing_rule(from)));
        }
        let to_name = self.names.iter().copied().find(|name| *name == to)?;
        self.normal_path(to_name, from).map(Forbidden::BackEdge)
    }
    /// The members that may depend on `to` through a normal or build edge.
    pub(crate) fn allowed_normal_dependents(&self, to: &str) -> Vec<&'l str> {
        self.names
            .iter()
            .copied()
            .filter(|&from| from != to && self.forbidden(from, to, false).is_none())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn package_names_map_to_layer_names() {
        assert_eq!(layer_name("toolwright"), "agent");
        assert_eq!(layer_name("toolwright-cli"), "bootstrap");
        assert_eq!(layer_name("toolwright-ai-core"), "ai-core");
        assert_eq!(layer_name("toolwright-wire-openai"), "wire-openai");
        assert_eq!(layer_name("xtask"), "xtask");
        assert_eq!(layer_name("toolwrightish"), "toolwrightish");
        assert_eq!(layer_name("reqwest"), "reqwest");
    }

    /// The repository's `layers.toml`.
    fn real() -> Layers {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../layers.toml");
        Layers::load(&path).unwrap()
    }

    /// A table from `rows` (TOML `[[layer]]` text) with a default `[network]`.
    fn table(rows: &str) -> Result<Layers, Error> {
        Layers::parse(&format!(
            "[network]\nhttp_crates = [\"reqwest\"]\ntokio_features = [\"net\"]\n\
             deny_toml_bans = [\"reqwest\"]\n{rows}"
        ))
    }

    #[test]
    fn real_table_loads_and_every_row_is_reachable() {
        let layers = real();
        for row in &layers.rows {
            let name = row.pattern.replace('*', "x");
            assert_eq!(
                layers.layer_of(&name).map(|found| found.pattern.as_str()),
                Some(row.pattern.as_str())
            );
        }
        assert!(layers.layer_of("wire-anthropic").is_some());
        assert!(layers.layer_of("mcp").is_none());
    }

    #[test]
    fn real_dev_rules() {
        let layers = real();
        let names = [
            "ai-core",
            "ai-tools",
            "ai-host",
            "wire-openai",
            "agent-graph",
            "agent-testing",
            "bootstrap",
            "integration-tests",
            "xtask",
        ];
        let rules = Rules::new(&layers, names);
        for to in ["ai-tools", "ai-host", "wire-openai", "agent-testing"] {
            assert_eq!(rules.forbidden("agent-graph", to, true), None, "{to}");
        }
        for to in names.iter().filter(|to| **to != "ai-core") {
            assert!(rules.forbidden("ai-core", to, true).is_some(), "{to}");
        }
        assert_eq!(
            rules.forbidden("ai-core", "agent-testing", true),
            Some(Forbidden::BackEdge(vec![
                "agent-testing".to_owned(),
                "ai-core".to_owned()
            ]))
        );
        assert_eq!(
            rules.allowed_normal_dependents("bootstrap"),
            ["integration-tests"]
        );
        assert_eq!(rules.allowed_normal_dependents("xtask"), Vec::<&str>::new());
        assert_eq!(
            rules.forbidden("agent-graph", "ai-tools", false),
            Some(Forbidden::Outgoing(
                "agent-graph may depend only on ai-core".to_owned()
            ))
        );
    }

    #[test]
    fn back_edge_path_goes_through_other_members() {
        let layers = table(
            "[[layer]]\ncrate = \"a\"\ndescription = \"a\"\nmay_depend_on = []\nnetwork = \"allowed\"\n\
             [[layer]]\ncrate = \"b\"\ndescription = \"b\"\nmay_depend_on = [\"a\"]\nnetwork = \"allowed\"\n\
             [[layer]]\ncrate = \"c\"\ndescription = \"c\"\nmay_depend_on = [\"b\"]\nnetwork = \"allowed\"\n",
        )
        .unwrap();
        let rules = Rules::new(&layers, ["a", "b", "c"]);
        assert_eq!(
            rules.forbidden("a", "c", true),
            Some(Forbidden::BackEdge(vec![
                "c".to_owned(),
                "b".to_owned(),
                "a".to_owned()
            ]))
        );
        // Without b among the members, c cannot reach a.
        let rules = Rules::new(&layers, ["a", "c"]);
        assert_eq!(rules.forbidden("a", "c", true), None);
    }

    #[test]
    fn bad_tables_are_errors() {
        let row = |name: &str, deps: &str| {
            format!(
                "[[layer]]\ncrate = \"{name}\"\ndescription = \"d\"\nmay_depend_on = {deps}\nnetwork = \"allowed\"\n"
            )
        };
        let cases = [
            (
                format!("{}{}", row("wire-*", "[]"), row("wire-openai", "[]")),
                "layers.toml: row wire-openai can never apply: row wire-* comes first and matches all its crates",
            ),
            (
                row("a", "[\"b\"]"),
                "layers.toml: row a: may_depend_on names b, which no row matches",
            ),
            (
                row("*", "[]"),
                "layers.toml: row 1 has crate = \"*\"; want a crate name or a `prefix*` pattern",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(table(&text).unwrap_err().to_string(), want);
        }
        let unknown_field = table(&format!("{}extra = 1\n", row("a", "[]"))).unwrap_err();
        assert!(
            unknown_field.to_string().contains("unknown field `extra`"),
            "{unknown_field}"
        );
    }
}
