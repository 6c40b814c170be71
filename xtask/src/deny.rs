//! deny.toml's `[bans] deny` entries that restate the layer table for cargo-deny:
//! derived here from `layers.toml` and the workspace members, checked by layer-lint,
//! rewritten by `cargo xtask layer-lint --write-deny`.
//!
//! cargo-deny reads the graph without dev-dependencies (`[graph] exclude-dev =
//! true`): its bans cannot tell a dev edge from a normal one, so a dev edge that
//! made a crate a wrapper would also let a forbidden normal edge of the same pair
//! through. Dev edges are layer-lint's alone. Two kinds of entries are derived
//! (cargo-deny's `wrappers` are the only crates allowed to depend directly on the
//! banned one):
//! - one per workspace member that other members depend on through a normal or
//!   build edge: `wrappers` is every member that declares such an edge and that the
//!   table lets do so (by `may_depend_on` and `only_dependents`). A declared edge the
//!   table forbids is left out, so cargo-deny fails on it too; a new allowed edge
//!   needs `--write-deny`. A member nothing depends on gets no entry (an entry
//!   without wrappers would make cargo-deny ban the crate itself);
//! - one per crate of `[network].deny_toml_bans` (reqwest): `wrappers` is every member
//!   that declares it directly as a normal or build dependency (any target, optional
//!   or not) and whose layer allows the network. Reading declarations, not the resolved graph, keeps the
//!   entry independent of feature unification and platforms; deriving it from the
//!   network rule alone would list every network layer, used or not. With no such
//!   member the entry has no wrappers, so cargo-deny bans the crate outright. The
//!   external crates of `[network].external_wrappers` (an SDK with its own HTTP
//!   client, such as rmcp) are wrappers too.
//!
//! Entries for other crates are left alone. The derived entries live between a
//! `# layer-lint: begin` and a `# layer-lint: end` line inside the `deny` array;
//! `--write-deny` replaces what lies between them and nothing else.

use std::collections::BTreeSet;

use crate::layer_lint::{DepKind, Package};
use crate::layers::{Layers, Rules, layer_name, list, matches};

/// The file, relative to the workspace root.
pub(crate) const FILE: &str = "deny.toml";

/// The line (trimmed) that opens the derived entries.
const BEGIN: &str = "# layer-lint: begin";

/// The line (trimmed) that closes the derived entries.
const END: &str = "# layer-lint: end";

/// How to fix a disagreement, appended to each message.
const FIX: &str = "`cargo xtask layer-lint --write-deny` rewrites the entries";

/// One derived `[bans] deny` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ban {
    /// The banned crate (its package name).
    pub(crate) krate: String,
    /// The crates allowed to depend on it directly, sorted.
    pub(crate) wrappers: Vec<String>,
    /// cargo-deny's `reason`, shown when the ban fires.
    reason: String,
}

/// The entries `layers` implies for the workspace `members` (see the module docs),
/// HTTP clients first, then project crates in table order (then name order).
pub(crate) fn derive(layers: &Layers, rules: &Rules<'_>, members: &[&Package]) -> Vec<Ban> {
    // cargo-deny knows the members by their package names.
    let package_name = |name: &str| {
        members
            .iter()
            .find(|member| member.name == name)
            .map_or_else(|| name.to_owned(), |member| member.package.clone())
    };
    let mut bans = Vec::new();
    for client in &layers.network.deny_toml_bans {
        let mut wrappers: BTreeSet<String> = members
            .iter()
            .filter(|member| declares_acceptably(layers, member, client))
            .map(|member| member.package.clone())
            .collect();
        wrappers.extend(layers.network.external_wrappers.iter().cloned());
        bans.push(Ban {
            krate: client.clone(),
            wrappers: wrappers.into_iter().collect(),
            reason: format!("layers.toml: only network layers use {client}"),
        });
    }
    let row = |name: &str| {
        layers
            .rows
            .iter()
            .position(|row| matches(&row.pattern, name))
    };
    let mut names = rules.names().to_vec();
    names.sort_by_key(|name| (row(name), *name));
    for name in names {
        // Only members that declare the edge today: cargo-deny warns about every
        // wrapper it never meets, and an edge added later needs `--write-deny`, which
        // lists it only when the table allows it.
        let wrappers: Vec<&str> = rules
            .allowed_normal_dependents(name)
            .into_iter()
            .filter(|dependent| {
                members.iter().any(|m| {
                    m.name == *dependent
                        && m.dependencies.iter().any(|d| d.name == name && !is_dev(d))
                })
            })
            .collect();
        if wrappers.is_empty() {
            continue;
        }
        let mut wrappers: Vec<String> = wrappers.into_iter().map(package_name).collect();
        wrappers.sort();
        bans.push(Ban {
            krate: package_name(name),
            wrappers,
            reason: format!("layers.toml: who may depend on {name}"),
        });
    }
    bans
}

/// Whether `dependency` is a dev edge (which cargo-deny does not see).
fn is_dev(dependency: &crate::layer_lint::Dependency) -> bool {
    matches!(
        DepKind::from_cargo(dependency.kind.as_deref()),
        Ok(DepKind::Dev)
    )
}

/// Whether `member` declares `krate` directly as a normal or build dependency and
/// its layer does not ban `krate`.
fn declares_acceptably(layers: &Layers, member: &Package, krate: &str) -> bool {
    let Some(layer) = layers.layer_of(&member.name) else {
        return false;
    };
    let banned = layers.banned_externals(layer).contains(&krate);
    let mut declarations = member
        .dependencies
        .iter()
        .filter(|dep| dep.name == krate && !is_dev(dep))
        .peekable();
    declarations.peek().is_some() && !banned
}

/// One `[bans] deny` entry as deny.toml has it.
struct Entry {
    /// The banned crate's name (a `name@version` spec's name).
    krate: String,
    /// Its wrappers' names (none when the entry has no `wrappers`).
    wrappers: BTreeSet<String>,
}

/// The name of a cargo-deny package spec (`name` or `name@version`).
fn spec_name(spec: &str) -> String {
    spec.split_once('@')
        .map_or(spec, |(name, _)| name)
        .to_owned()
}

/// The `[bans] deny` entries of deny.toml's `text`.
fn entries(text: &str) -> Result<Vec<Entry>, String> {
    let table: toml::Table = toml::from_str(text).map_err(|err| err.to_string())?;
    let Some(deny) = table.get("bans").and_then(|bans| bans.get("deny")) else {
        return Ok(Vec::new());
    };
    let deny = deny
        .as_array()
        .ok_or_else(|| "[bans] deny is not an array".to_owned())?;
    deny.iter()
        .enumerate()
        .map(|(index, item)| {
            let malformed = || {
                format!(
                    "[bans] deny entry {} is neither a crate spec nor a table with `crate`",
                    index + 1
                )
            };
            if let Some(spec) = item.as_str() {
                return Ok(Entry {
                    krate: spec_name(spec),
                    wrappers: BTreeSet::new(),
                });
            }
            let table = item.as_table().ok_or_else(malformed)?;
            let spec = table
                .get("crate")
                .or_else(|| table.get("name"))
                .and_then(toml::Value::as_str)
                .ok_or_else(malformed)?;
            let wrappers = match table.get("wrappers") {
                None => BTreeSet::new(),
                Some(wrappers) => wrappers
                    .as_array()
                    .and_then(|items| {
                        items
                            .iter()
                            .map(|item| item.as_str().map(spec_name))
                            .collect::<Option<BTreeSet<_>>>()
                    })
                    .ok_or_else(|| format!("[bans] deny entry for {spec}: malformed wrappers"))?,
            };
            Ok(Entry {
                krate: spec_name(spec),
                wrappers,
            })
        })
        .collect()
}

/// How deny.toml's `text` disagrees with `derived`, one message per disagreement:
/// derived entries first (in `derived` order), then entries for table crates that
/// have no derived entry (in file order). Entries for other crates are not checked.
pub(crate) fn check(
    text: &str,
    layers: &Layers,
    rules: &Rules<'_>,
    derived: &[Ban],
) -> Result<Vec<String>, String> {
    let entries = entries(text)?;
    let mut messages = Vec::new();
    for ban in derived {
        let found: Vec<&Entry> = entries.iter().filter(|e| e.krate == ban.krate).collect();
        let entry = match found.as_slice() {
            [] => {
                let want = if ban.wrappers.is_empty() {
                    "no wrappers".to_owned()
                } else {
                    format!("wrappers {}", list(&ban.wrappers))
                };
                messages.push(format!(
                    "[bans] deny has no entry for {} (want {want}); {FIX}",
                    ban.krate
                ));
                continue;
            }
            [entry] => entry,
            more => {
                messages.push(format!(
                    "[bans] deny has {} entries for {}, want one; {FIX}",
                    more.len(),
                    ban.krate
                ));
                continue;
            }
        };
        let want: BTreeSet<&str> = ban.wrappers.iter().map(String::as_str).collect();
        let have: BTreeSet<&str> = entry.wrappers.iter().map(String::as_str).collect();
        let missing: Vec<&str> = want.difference(&have).copied().collect();
        let extra: Vec<&str> = have.difference(&want).copied().collect();
        if !missing.is_empty() {
            messages.push(format!(
                "[bans] deny entry for {} lacks wrappers {}; {FIX}",
                ban.krate,
                list(missing)
            ));
        }
        if !extra.is_empty() {
            messages.push(format!(
                "[bans] deny entry for {} has wrappers that do not depend on it or that layers.toml does not allow: {}; {FIX}",
                ban.krate,
                list(extra)
            ));
        }
    }
    let mut reported = BTreeSet::new();
    for entry in &entries {
        if derived.iter().any(|ban| ban.krate == entry.krate) {
            continue;
        }
        let name = layer_name(&entry.krate);
        if layers.layer_of(name).is_none() || !reported.insert(name) {
            continue;
        }
        let why = if rules.names().contains(&name) {
            format!(
                "no member may and does depend on {name}, so it needs no entry \
                 (cargo-deny would ban the crate itself)"
            )
        } else {
            format!("{name} matches a layers.toml row but is not a workspace member")
        };
        messages.push(format!("[bans] deny entry for {name}: {why}; {FIX}"));
    }
    Ok(messages)
}

/// A TOML basic string holding `text`.
fn quote(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

/// The lines of `derived`, each indented by `indent`.
fn render(derived: &[Ban], indent: &str) -> String {
    let mut out = String::new();
    for ban in derived {
        let wrappers = if ban.wrappers.is_empty() {
            String::new()
        } else {
            let quoted: Vec<String> = ban.wrappers.iter().map(|w| quote(w)).collect();
            format!(", wrappers = [{}]", quoted.join(", "))
        };
        out.push_str(&format!(
            "{indent}{{ crate = {}{wrappers}, reason = {} }},\n",
            quote(&ban.krate),
            quote(&ban.reason)
        ));
    }
    out
}

/// deny.toml's `text` with the lines between its begin and end markers replaced by
/// `derived` (indented like the begin marker). Fails without the markers, or when
/// the result is not valid TOML (markers outside the `deny` array).
pub(crate) fn rewrite(text: &str, derived: &[Ban]) -> Result<String, String> {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let marker = |from: usize, marker: &str| {
        lines
            .iter()
            .enumerate()
            .skip(from)
            .find(|(_, line)| line.trim_start().starts_with(marker))
            .map(|(index, _)| index)
    };
    let missing = || {
        format!(
            "no `{BEGIN}` line followed by a `{END}` line; put both inside `[bans] deny = [...]` \
             around the entries layer-lint derives"
        )
    };
    let begin = marker(0, BEGIN).ok_or_else(missing)?;
    let end = marker(begin + 1, END).ok_or_else(missing)?;
    let begin_line = lines[begin];
    let indent = &begin_line[..begin_line.len() - begin_line.trim_start().len()];
    let mut out: String = lines[..=begin].concat();
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&render(derived, indent));
    out.push_str(&lines[end..].concat());
    entries(&out).map_err(|err| format!("the rewritten file does not parse: {err}"))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A derived entry.
    fn ban(krate: &str, wrappers: &[&str]) -> Ban {
        Ban {
            krate: krate.to_owned(),
            wrappers: wrappers.iter().map(|w| (*w).to_owned()).collect(),
            reason: format!("why {krate}"),
        }
    }

    #[test]
    fn rewrite_replaces_only_the_marked_lines() {
        let text = "[bans]\ndeny = [\n  { crate = \"openssl\" },\n  # layer-lint: begin\n  \
                    { crate = \"old\" },\n  # layer-lint: end\n]\n";
        let derived = [ban("reqwest", &[]), ban("ai-core", &["ai-tools", "xtask"])];
        let rewritten = rewrite(text, &derived).unwrap();
        assert_eq!(
            rewritten,
            "[bans]\ndeny = [\n  { crate = \"openssl\" },\n  # layer-lint: begin\n  \
             { crate = \"reqwest\", reason = \"why reqwest\" },\n  \
             { crate = \"ai-core\", wrappers = [\"ai-tools\", \"xtask\"], reason = \"why ai-core\" },\n  \
             # layer-lint: end\n]\n"
        );
        assert_eq!(rewrite(&rewritten, &derived).unwrap(), rewritten);
    }

    #[test]
    fn rewrite_needs_markers_inside_the_array() {
        let err = rewrite("[bans]\ndeny = []\n", &[]).unwrap_err();
        assert!(err.starts_with("no `# layer-lint: begin` line"), "{err}");
        let outside = "# layer-lint: begin\n# layer-lint: end\n[bans]\ndeny = []\n";
        let err = rewrite(outside, &[ban("ai-core", &["ai-tools"])]).unwrap_err();
        assert!(
            err.starts_with("the rewritten file does not parse"),
            "{err}"
        );
    }

    #[test]
    fn entries_read_specs_tables_and_versions() {
        let found = entries(
            "[bans]\ndeny = [\"openssl@0.10\", { name = \"ai-core\", wrappers = [\"ai-tools@0.0.0\"] }]\n",
        )
        .unwrap();
        let found: Vec<(&str, Vec<&str>)> = found
            .iter()
            .map(|e| {
                (
                    e.krate.as_str(),
                    e.wrappers.iter().map(String::as_str).collect(),
                )
            })
            .collect();
        assert_eq!(found, [("openssl", vec![]), ("ai-core", vec!["ai-tools"])]);
    }
}
