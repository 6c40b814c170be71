//! The tables that say where each invariant is enforced must name things that exist.
//!
//! Read: the table rows (lines starting with `|`) of ARCHITECTURE.md's section
//! "Invariants and where each is enforced" (up to the next `## ` heading) and of
//! SECURITY.md, for every kind of citation below; every other line of
//! ARCHITECTURE.md, SECURITY.md and README.md for Rust paths only. A code span
//! (`` `...` ``) is a citation when it is:
//! - a **path**: no whitespace and no `<`, `*`, `{`, `$`, `::`, and either a `/` in it
//!   but not first (`/api/chat` is a URL path) or a name ending in `.rs` (a bare
//!   `agent.toml` is the user's file). It exists when the path
//!   exists from the repository root, or from the directory of the crate the row
//!   names last before it (`agent-server` `tests/it/http.rs` is
//!   `crates/agent-server/tests/it/http.rs`), or when a file of that crate ends with
//!   `/` + the path (a bare `approval.rs`);
//! - a **Rust path**: `a::b::c`, optionally followed by `(...)`. It exists when each
//!   consecutive pair names a member of an owner that the workspace's Rust sources
//!   define: a module's items (its file, an inline `mod`, a crate root under the
//!   crate's name with `_`, `pub use` re-exports included), a type's methods and
//!   associated items (any `impl`), an enum's variants, a struct's fields and a
//!   trait's items. A path whose first segment is an external crate of
//!   [`EXTERNAL_ROOTS`] is not checked;
//! - a **type name**: one CamelCase identifier. It exists when the sources define an
//!   item of that name, or it is in [`EXTERNAL_NAMES`].
//!
//! The sources are every `.rs` file of the repository outside `fixtures` directories,
//! parsed with syn, so a renamed function, a moved test file or a deleted test fails
//! `cargo xtask tidy` instead of leaving the table to rot.

use std::collections::{BTreeSet, HashSet};
use std::fs;
use std::io;
use std::path::Path;

use crate::tidy::Violation;

/// The files whose tables are read, and the heading (lowercase) whose section holds
/// the tables, or `None` for every table of the file.
const TABLES: &[(&str, Option<&str>)] = &[
    (
        "ARCHITECTURE.md",
        Some("## invariants and where each is enforced"),
    ),
    ("SECURITY.md", None),
];

/// The files whose every line is read for Rust paths (only).
const PROSE: &[&str] = &["ARCHITECTURE.md", "SECURITY.md", "README.md"];

/// Crates outside the workspace whose paths the tables may cite unchecked.
pub(crate) const EXTERNAL_ROOTS: &[&str] = &[
    "std", "core", "alloc", "tokio", "serde", "reqwest", "axum", "rmcp", "rustls", "hyper",
];

/// CamelCase names from outside the workspace that the tables may cite: std and
/// serde traits, HTTP headers.
pub(crate) const EXTERNAL_NAMES: &[&str] = &[
    "Debug",
    "Display",
    "Serialize",
    "Deserialize",
    "Authorization",
    "Cookie",
    "Host",
    "Origin",
];

/// Everything the workspace's Rust sources define.
#[derive(Debug, Default)]
struct Index {
    /// (owner, member): a module's items, a type's associated items, an enum's
    /// variants, a struct's fields, a trait's items.
    members: HashSet<(String, String)>,
    /// Every defined name (owners and members).
    names: HashSet<String>,
}

impl Index {
    fn add(&mut self, owner: &str, member: &str) {
        self.names.insert(owner.to_owned());
        self.names.insert(member.to_owned());
        self.members.insert((owner.to_owned(), member.to_owned()));
    }

    /// Indexes the items of one module `owner`.
    fn items(&mut self, owner: &str, items: &[syn::Item]) {
        for item in items {
            self.item(owner, item);
        }
    }

    fn item(&mut self, owner: &str, item: &syn::Item) {
        match item {
            syn::Item::Fn(item) => self.add(owner, &item.sig.ident.to_string()),
            syn::Item::Const(item) => self.add(owner, &item.ident.to_string()),
            syn::Item::Static(item) => self.add(owner, &item.ident.to_string()),
            syn::Item::Type(item) => self.add(owner, &item.ident.to_string()),
            syn::Item::Macro(item) => {
                if let Some(ident) = &item.ident {
                    self.add(owner, &ident.to_string());
                }
            }
            syn::Item::Mod(item) => {
                let name = item.ident.to_string();
                self.add(owner, &name);
                if let Some((_, items)) = &item.content {
                    self.items(&name, items);
                }
            }
            syn::Item::Struct(item) => {
                let name = item.ident.to_string();
                self.add(owner, &name);
                for field in &item.fields {
                    if let Some(ident) = &field.ident {
                        self.add(&name, &ident.to_string());
                    }
                }
            }
            syn::Item::Enum(item) => {
                let name = item.ident.to_string();
                self.add(owner, &name);
                for variant in &item.variants {
                    self.add(&name, &variant.ident.to_string());
                }
            }
            syn::Item::Trait(item) => {
                let name = item.ident.to_string();
                self.add(owner, &name);
                for member in &item.items {
                    if let Some(ident) = trait_item_name(member) {
                        self.add(&name, &ident);
                    }
                }
            }
            syn::Item::Impl(item) => {
                let syn::Type::Path(path) = &*item.self_ty else {
                    return;
                };
                let Some(last) = path.path.segments.last() else {
                    return;
                };
                let name = last.ident.to_string();
                for member in &item.items {
                    if let Some(ident) = impl_item_name(member) {
                        self.add(&name, &ident);
                    }
                }
            }
            syn::Item::Use(item) if !matches!(item.vis, syn::Visibility::Inherited) => {
                self.uses(owner, &item.tree);
            }
            _ => {}
        }
    }

    /// Indexes the names a `pub use` tree brings into `owner`.
    fn uses(&mut self, owner: &str, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(path) => self.uses(owner, &path.tree),
            syn::UseTree::Name(name) => self.add(owner, &name.ident.to_string()),
            syn::UseTree::Rename(rename) => self.add(owner, &rename.rename.to_string()),
            syn::UseTree::Group(group) => {
                for tree in &group.items {
                    self.uses(owner, tree);
                }
            }
            syn::UseTree::Glob(_) => {}
        }
    }
}

fn trait_item_name(item: &syn::TraitItem) -> Option<String> {
    match item {
        syn::TraitItem::Fn(item) => Some(item.sig.ident.to_string()),
        syn::TraitItem::Const(item) => Some(item.ident.to_string()),
        syn::TraitItem::Type(item) => Some(item.ident.to_string()),
        _ => None,
    }
}

fn impl_item_name(item: &syn::ImplItem) -> Option<String> {
    match item {
        syn::ImplItem::Fn(item) => Some(item.sig.ident.to_string()),
        syn::ImplItem::Const(item) => Some(item.ident.to_string()),
        syn::ImplItem::Type(item) => Some(item.ident.to_string()),
        _ => None,
    }
}

/// The module name of the Rust file at repository path `path`: its stem; for
/// `mod.rs`, its directory; for a crate root `crates/<dir>/src/{lib,main}.rs`, `<dir>`
/// with `_` (a test target's `main.rs` is its directory's name).
fn module_name(path: &str) -> String {
    let mut parts: Vec<&str> = path.split('/').collect();
    let file = parts.pop().unwrap_or_default();
    let stem = file.strip_suffix(".rs").unwrap_or(file);
    let dir = parts.last().copied().unwrap_or_default();
    match stem {
        "lib" | "main" if dir == "src" && parts.len() >= 2 => {
            parts[parts.len() - 2].replace('-', "_")
        }
        "mod" | "main" | "lib" => dir.replace('-', "_"),
        _ => stem.to_owned(),
    }
}

/// Parses every Rust file of `files` (outside `fixtures` directories). A file syn
/// cannot parse is a violation: its items would be invisible to the check.
fn index(root: &Path, files: &[String], violations: &mut Vec<Violation>) -> io::Result<Index> {
    let mut index = Index::default();
    for path in files {
        if !path.ends_with(".rs") || path.split('/').any(|part| part == "fixtures") {
            continue;
        }
        let text = fs::read_to_string(root.join(path))?;
        match syn::parse_file(&text) {
            Ok(file) => index.items(&module_name(path), &file.items),
            Err(error) => violations.push(Violation {
                path: path.clone(),
                line: None,
                message: format!("cannot be read for the invariants tables' citations: {error}"),
            }),
        }
    }
    Ok(index)
}

/// The code spans of `line`.
fn code_spans(line: &str) -> Vec<&str> {
    line.split('`').skip(1).step_by(2).collect()
}

/// The workspace crate (a directory under `crates/`) named last in `before`, as a
/// whole word.
fn last_crate<'a>(before: &str, crates: &'a [String]) -> Option<&'a str> {
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    crates
        .iter()
        .filter_map(|name| {
            before
                .match_indices(name.as_str())
                .filter(|(at, _)| {
                    let prev = before[..*at].chars().next_back();
                    let next = before[at + name.len()..].chars().next();
                    !prev.is_some_and(is_word) && !next.is_some_and(is_word)
                })
                .map(|(at, _)| at)
                .last()
                .map(|at| (at, name.as_str()))
        })
        .max_by_key(|(at, _)| *at)
        .map(|(_, name)| name)
}

/// How a code span is read.
enum Citation<'a> {
    Path(&'a str),
    Rust(Vec<&'a str>),
    Type(&'a str),
}

fn classify(span: &str) -> Option<Citation<'_>> {
    let is_ident = |s: &str| {
        s.chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    let code = span.split_once('(').map_or(span, |(before, _)| before);
    if code.contains("::") {
        let segments: Vec<&str> = code.split("::").collect();
        return segments
            .iter()
            .all(|s| is_ident(s))
            .then_some(Citation::Rust(segments));
    }
    if span
        .chars()
        .any(|c| c.is_whitespace() || "<*{$".contains(c))
    {
        return None;
    }
    if (span.contains('/') && !span.starts_with('/')) || span.ends_with(".rs") {
        return Some(Citation::Path(span));
    }
    let camel = span.chars().next().is_some_and(|c| c.is_ascii_uppercase())
        && span.chars().any(|c| c.is_ascii_lowercase());
    (camel && is_ident(span)).then_some(Citation::Type(span))
}

/// Whether a cited path exists (see the module docs).
fn path_exists(root: &Path, files: &[String], path: &str, krate: Option<&str>) -> bool {
    let path = path.trim_end_matches('/');
    if root.join(path).exists() {
        return true;
    }
    let Some(krate) = krate else {
        return false;
    };
    let dir = format!("crates/{krate}/");
    let suffix = format!("/{path}");
    root.join(&dir).join(path).exists()
        || files
            .iter()
            .any(|file| file.starts_with(&dir) && file.ends_with(&suffix))
}

/// Why `citation` names nothing, or `None` when it exists.
fn missing(
    citation: &Citation<'_>,
    index: &Index,
    root: &Path,
    files: &[String],
    krate: Option<&str>,
) -> Option<String> {
    match citation {
        Citation::Path(path) => (!path_exists(root, files, path, krate)).then(|| match krate {
            Some(krate) => format!("`{path}` exists neither from the root nor in crate {krate}"),
            None => format!("`{path}` does not exist"),
        }),
        Citation::Rust(segments) => {
            if EXTERNAL_ROOTS.contains(&segments[0]) {
                return None;
            }
            segments.windows(2).find_map(|pair| {
                let key = (pair[0].to_owned(), pair[1].to_owned());
                (!index.members.contains(&key)).then(|| {
                    format!(
                        "`{}` cites `{}::{}`, which no Rust source defines",
                        segments.join("::"),
                        pair[0],
                        pair[1]
                    )
                })
            })
        }
        Citation::Type(name) => (!index.names.contains(*name) && !EXTERNAL_NAMES.contains(name))
            .then(|| format!("`{name}` is defined by no Rust source")),
    }
}

/// The lines of `file` that are read, with their 1-based numbers and whether they
/// are rows of a table of [`TABLES`] (read for every kind of citation) or prose
/// (read for Rust paths).
fn lines<'a>(file: &str, text: &'a str) -> Vec<(usize, &'a str, bool)> {
    let tables = TABLES.iter().find(|(name, _)| *name == file);
    let prose = PROSE.contains(&file);
    let mut inside = tables.is_some_and(|(_, heading)| heading.is_none());
    let mut lines = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if let Some((_, Some(heading))) = tables
            && line.starts_with("## ")
        {
            inside = line.to_lowercase().starts_with(heading);
        }
        let row = tables.is_some() && inside && line.starts_with('|');
        if row || prose {
            lines.push((index + 1, line, row));
        }
    }
    lines
}

/// Checks the citations of the invariants tables under `root` against the Rust
/// sources of `files` (the repository's files, relative to `root`).
pub(crate) fn check(
    root: &Path,
    files: &[String],
    violations: &mut Vec<Violation>,
) -> io::Result<()> {
    let index = index(root, files, violations)?;
    let mut crates: Vec<String> = files
        .iter()
        .filter_map(|file| file.strip_prefix("crates/")?.split_once("/Cargo.toml"))
        .filter(|(_, rest)| rest.is_empty())
        .map(|(name, _)| name.to_owned())
        .collect();
    crates.sort();
    let files_read: BTreeSet<&str> = TABLES
        .iter()
        .map(|(file, _)| *file)
        .chain(PROSE.iter().copied())
        .collect();
    for file in files_read {
        let Ok(text) = fs::read_to_string(root.join(file)) else {
            continue;
        };
        for (line, text, row) in lines(file, &text) {
            let mut offset = 0;
            for span in code_spans(text) {
                let at = text[offset..].find(span).map_or(offset, |at| offset + at);
                offset = at + span.len();
                let citation = match classify(span) {
                    Some(citation @ Citation::Rust(_)) => citation,
                    Some(citation) if row => citation,
                    _ => continue,
                };
                let krate = last_crate(&text[..at], &crates);
                if let Some(message) = missing(&citation, &index, root, files, krate) {
                    violations.push(Violation {
                        path: file.to_owned(),
                        line: Some(line),
                        message,
                    });
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_names() {
        assert_eq!(module_name("crates/ai-core/src/lib.rs"), "ai_core");
        assert_eq!(module_name("crates/ai-core/src/text/mod.rs"), "text");
        assert_eq!(module_name("crates/ai-core/src/text/display.rs"), "display");
        assert_eq!(module_name("crates/agent-server/tests/it/main.rs"), "it");
        assert_eq!(module_name("tests/lib.rs"), "tests");
    }

    #[test]
    fn spans_are_classified() {
        assert!(
            matches!(classify("ToolRunner::exec"), Some(Citation::Rust(s)) if s == ["ToolRunner", "exec"])
        );
        assert!(matches!(
            classify("RunRequest::defer_approvals(true)"),
            Some(Citation::Rust(_))
        ));
        assert!(matches!(
            classify("tests/it/http.rs"),
            Some(Citation::Path(_))
        ));
        assert!(matches!(classify("approval.rs"), Some(Citation::Path(_))));
        assert!(matches!(classify("ToolPolicy"), Some(Citation::Type(_))));
        assert!(classify("mcp__<server>__*").is_none());
        assert!(classify("agent mcp list|pin").is_none());
        assert!(classify("ok: false").is_none());
        assert!(classify("graph__").is_none());
        assert!(classify("POST /api/chat").is_none());
        assert!(classify("/#token=...").is_none());
        assert!(classify("agent.toml").is_none());
    }

    #[test]
    fn the_crate_named_last_before_a_span() {
        let crates = vec![
            "ai-core".to_owned(),
            "agent-graph".to_owned(),
            "ai-core-x".to_owned(),
        ];
        assert_eq!(
            last_crate("| x | ai-core `a`, agent-graph ", &crates),
            Some("agent-graph")
        );
        assert_eq!(
            last_crate("| `ai-core-x` and ai-core", &crates),
            Some("ai-core")
        );
        assert_eq!(last_crate("| nothing here", &crates), None);
    }

    #[test]
    fn rotten_citations_fail() {
        let root = std::env::temp_dir().join(format!("xtask-citations-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let files = [
            ("crates/a-b/Cargo.toml", "[package]\n"),
            (
                "crates/a-b/src/lib.rs",
                "//! A.\npub mod run;\npub use run::Runner;\n\
                 pub enum Code { Denied }\nmod tests { fn it_works() {} }\n",
            ),
            (
                "crates/a-b/src/run.rs",
                "pub struct Runner { pub limit: u8 }\nimpl Runner { pub fn exec(&self) {} }\n",
            ),
            ("crates/a-b/tests/it/approval.rs", "fn replayed() {}\n"),
            ("crates/a-b/fixtures/gone.rs", "fn only_in_a_fixture() {}\n"),
            (
                "ARCHITECTURE.md",
                "# A\n\
                 | `Gone` and `no/path` are outside the section |\n\
                 ## Invariants and where each is enforced\n\
                 | X | `Runner::exec`, `a_b::run::Runner::limit`, `a_b::Runner`, `Code::Denied` | \
                 a-b `tests/it/approval.rs`, `approval::replayed`, `tests::it_works()`, `Runner`, `Debug` |\n\
                 | Y | `Runner::run`, `a_b::Code::Allowed`, a-b `tests/it/gone.rs`, `Missing`, \
                 `gone::only_in_a_fixture`, `std::fs::File`, `crates/a-b/src/run.rs` |\n\
                 ## Events\n\
                 | `Gone::exec` is a Rust path, read everywhere |\n\
                 Prose cites `Runner::exec`, `Runner::gone`, `NotChecked` and `no/such/path`.\n",
            ),
            (
                "SECURITY.md",
                "# S\n| z | `tests/it/approval.rs` needs a crate; `a_b::run` |\n",
            ),
        ];
        for (path, text) in files {
            let path = root.join(path);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, text).unwrap();
        }
        let paths: Vec<String> = files.iter().map(|(path, _)| (*path).to_owned()).collect();
        let mut violations = Vec::new();
        check(&root, &paths, &mut violations).unwrap();
        let lines: Vec<String> = violations.iter().map(ToString::to_string).collect();
        assert_eq!(
            lines,
            [
                "ARCHITECTURE.md:5: `Runner::run` cites `Runner::run`, which no Rust source defines",
                "ARCHITECTURE.md:5: `a_b::Code::Allowed` cites `Code::Allowed`, which no Rust source defines",
                "ARCHITECTURE.md:5: `tests/it/gone.rs` exists neither from the root nor in crate a-b",
                "ARCHITECTURE.md:5: `Missing` is defined by no Rust source",
                "ARCHITECTURE.md:5: `gone::only_in_a_fixture` cites `gone::only_in_a_fixture`, which no Rust source defines",
                "ARCHITECTURE.md:7: `Gone::exec` cites `Gone::exec`, which no Rust source defines",
                "ARCHITECTURE.md:8: `Runner::gone` cites `Runner::gone`, which no Rust source defines",
                "SECURITY.md:2: `tests/it/approval.rs` does not exist",
            ]
        );
        fs::remove_dir_all(&root).unwrap();
    }
}
