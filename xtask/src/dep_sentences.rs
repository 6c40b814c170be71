//! The dependency sentences of the crate docs and of ARCHITECTURE.md, checked against
//! `layers.toml` and each crate's `Cargo.toml`.
//!
//! Where they are read, for each crate under `crates/` that has a `layers.toml` row:
//! - its crate doc: the leading `//!` lines of `src/lib.rs` (else `src/main.rs`),
//!   in paragraphs (a blank `//!` line ends one);
//! - ARCHITECTURE.md: the paragraphs starting with `Architecture invariant:` in the
//!   section whose heading is `` ### `crates/<dir>` `` (up to the next heading).
//!
//! Each of the two must hold a **positive clause**: `<subject> depends on <list>`,
//! whose subject (the word right before `depends`) is the crate's name, `it` or
//! `this crate`. The list runs up to the first `:`, `;`, `.`, `only`, `among`,
//! `but` or `except`; it is either `no ...`/`nothing ...` (no project crate) or
//! items separated by `,`, `and` and `or`. In the paragraphs that hold a positive
//! clause, every `not on <list>` and `not depend on <list>` is a **negative
//! clause**, its list read the same way. Parenthesized remarks and backticks are
//! ignored; a sentence may span lines.
//!
//! An item is normalised so: leading `the`, `a`, `an`, `any`, `another`, `every`,
//! `other` are dropped; then a project crate's name or a `layers.toml` pattern
//! (`wire-*`) is itself; `<name or pattern> crate(s)` is the name or pattern;
//! `<p> crate(s)` is the pattern `<p>-*` when `layers.toml` has a row `<p>-*` (so
//! `wire crates`, `a wire crate`, `another wire crate` and `` any `wire-*` crate ``
//! are all `wire-*`); `project crate(s)` is `*` (`any project crate`). Anything
//! else (`the loop`, `an HTTP client`, `schemars`) is no project crate: a negative
//! clause may name it freely, a positive clause may not.
//!
//! Violations, each at the file and line of the clause or item:
//! - a positive item that is no project crate, or that `layers.toml` does not allow
//!   the crate to depend on (the row's `may_depend_on`: `*`, the pattern itself, or
//!   a pattern matching the name);
//! - a positive item the crate's `Cargo.toml` does not depend on (no normal or
//!   build dependency it matches; `*` needs none);
//! - a normal or build dependency on a project crate that `layers.toml` allows and
//!   that no positive item matches (a forbidden one is layer-lint's to report);
//! - a negative item `layers.toml` allows (the pattern itself is in
//!   `may_depend_on`, or a project crate it matches is allowed);
//! - no positive clause at all.
//!
//! The check runs when the root has a `layers.toml`.

use std::collections::BTreeSet;
use std::fs;
use std::io;
use std::path::Path;

use crate::layers::{Layer, Layers, matches};
use crate::tidy::Violation;

/// The file with the per-crate sections.
const ARCHITECTURE: &str = "ARCHITECTURE.md";

/// What starts an invariant paragraph of ARCHITECTURE.md.
const INVARIANT: &str = "Architecture invariant:";

/// Words dropped at the start of an item.
const DETERMINERS: &[&str] = &["the", "a", "an", "any", "another", "every", "other"];

/// Words that end a list.
const LIST_END_WORDS: &[&str] = &["only", "among", "but", "except"];

/// Punctuation that ends a list.
const LIST_END_PUNCT: &[char] = &[':', ';', '.'];

/// A crate under `crates/`.
#[derive(Debug)]
struct Krate {
    /// Its directory name.
    dir: String,
    /// Its package name.
    name: String,
    /// Its normal and build dependencies (names of packages, all of them).
    deps: BTreeSet<String>,
}

/// A word or punctuation mark of a paragraph, outside parentheses and backticks.
#[derive(Debug, Clone)]
struct Token {
    /// The 1-based line.
    line: usize,
    /// A word (letters, digits, `_`, `-`, `*`), or one punctuation character.
    text: String,
}

impl Token {
    fn is_word(&self) -> bool {
        self.text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '*'))
    }

    fn word(&self) -> Option<String> {
        self.is_word().then(|| self.text.to_lowercase())
    }
}

/// The tokens of the lines `(1-based line, text)` of one paragraph.
fn tokens(lines: &[(usize, &str)]) -> Vec<Token> {
    let mut tokens = Vec::new();
    let mut depth = 0usize;
    for &(line, text) in lines {
        let mut word = String::new();
        let flush = |word: &mut String, tokens: &mut Vec<Token>| {
            if !word.is_empty() {
                tokens.push(Token {
                    line,
                    text: std::mem::take(word),
                });
            }
        };
        for c in text.chars() {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '*') {
                if depth == 0 {
                    word.push(c);
                }
                continue;
            }
            flush(&mut word, &mut tokens);
            match c {
                '(' => depth += 1,
                ')' => depth = depth.saturating_sub(1),
                _ if depth > 0 || c.is_whitespace() || c == '`' => {}
                _ => tokens.push(Token {
                    line,
                    text: c.to_string(),
                }),
            }
        }
        flush(&mut word, &mut tokens);
    }
    tokens
}

/// One item of a list: its line, its words as written, and what it names.
#[derive(Debug)]
struct Item {
    line: usize,
    said: String,
    /// A project crate, a pattern (`wire-*`) or `*`; `None` for anything else.
    names: Option<String>,
}

/// A clause: `depends on` (positive) or `not on`/`not depend on` (negative).
#[derive(Debug)]
struct Clause {
    line: usize,
    positive: bool,
    /// The items; empty for `depends on no ...`.
    items: Vec<Item>,
}

/// What the words of an item name (see the module docs).
fn normalise(words: &[String], crates: &BTreeSet<String>, layers: &Layers) -> Option<String> {
    let mut words = words;
    while let [first, rest @ ..] = words
        && DETERMINERS.contains(&first.as_str())
    {
        words = rest;
    }
    let is_pattern = |word: &str| {
        word.ends_with('*')
            && (layers.rows.iter().any(|row| row.pattern == word)
                || layers
                    .rows
                    .iter()
                    .any(|row| row.may_depend_on.iter().any(|p| p == word)))
    };
    let known = |word: &str| crates.contains(word) || is_pattern(word);
    match words {
        [name] if known(name) => Some(name.clone()),
        [name, noun] if noun == "crate" || noun == "crates" => {
            if known(name) {
                Some(name.clone())
            } else if name == "project" {
                Some("*".to_owned())
            } else {
                let family = format!("{name}-*");
                layers
                    .rows
                    .iter()
                    .any(|row| row.pattern == family)
                    .then_some(family)
            }
        }
        _ => None,
    }
}

/// The list that starts at `tokens[start]`.
fn list(tokens: &[Token], start: usize, crates: &BTreeSet<String>, layers: &Layers) -> Vec<Item> {
    let mut items = Vec::new();
    let mut words: Vec<String> = Vec::new();
    let mut line = tokens.get(start).map_or(0, |token| token.line);
    let push = |words: &mut Vec<String>, line: usize, items: &mut Vec<Item>| {
        if !words.is_empty() {
            items.push(Item {
                line,
                said: words.join(" "),
                names: normalise(words, crates, layers),
            });
            words.clear();
        }
    };
    for token in &tokens[start..] {
        match token.word() {
            Some(word) if LIST_END_WORDS.contains(&word.as_str()) => break,
            Some(word) if word == "and" || word == "or" || word == "nor" => {
                push(&mut words, line, &mut items);
            }
            Some(word) => {
                if words.is_empty() {
                    line = token.line;
                }
                words.push(word);
            }
            None if token.text.starts_with(LIST_END_PUNCT) => break,
            None if token.text == "," => push(&mut words, line, &mut items),
            None => {}
        }
    }
    push(&mut words, line, &mut items);
    items
}

/// The clauses of one paragraph about crate `name`: none when it holds no positive
/// clause.
fn clauses(
    lines: &[(usize, &str)],
    name: &str,
    crates: &BTreeSet<String>,
    layers: &Layers,
) -> Vec<Clause> {
    let tokens = tokens(lines);
    let word = |index: usize| tokens.get(index).and_then(Token::word);
    let is = |index: usize, text: &str| word(index).is_some_and(|word| word == text);
    let mut found = Vec::new();
    for index in 0..tokens.len() {
        let line = tokens[index].line;
        if is(index, "depends") && is(index + 1, "on") {
            let subject = index.checked_sub(1).and_then(word);
            let this_crate = index >= 2 && is(index - 1, "crate") && is(index - 2, "this");
            if !(subject.as_deref() == Some(name) || subject.as_deref() == Some("it") || this_crate)
            {
                continue;
            }
            let none = word(index + 2).is_some_and(|word| word == "no" || word == "nothing");
            let items = if none {
                Vec::new()
            } else {
                list(&tokens, index + 2, crates, layers)
            };
            found.push(Clause {
                line,
                positive: true,
                items,
            });
        } else if is(index, "not") && is(index + 1, "on") {
            let items = list(&tokens, index + 2, crates, layers);
            found.push(Clause {
                line,
                positive: false,
                items,
            });
        } else if is(index, "not") && is(index + 1, "depend") && is(index + 2, "on") {
            let items = list(&tokens, index + 3, crates, layers);
            found.push(Clause {
                line,
                positive: false,
                items,
            });
        }
    }
    if found.iter().any(|clause| clause.positive) {
        found
    } else {
        Vec::new()
    }
}

/// Whether `layer` allows the item `names` (a name, a pattern or `*`) as a
/// dependency.
fn allowed(layer: &Layer, names: &str) -> bool {
    layer.may_depend_on.iter().any(|p| p == "*" || p == names)
        || (!names.contains('*') && layer.may_depend_on(names))
}

/// Checks the clauses `found` in `path` about `krate` (none: the sentence is missing,
/// reported at `missing_line`).
fn check_clauses(
    path: &str,
    missing_line: usize,
    krate: &Krate,
    layer: &Layer,
    crates: &BTreeSet<String>,
    found: &[Clause],
    violations: &mut Vec<Violation>,
) {
    let name = &krate.name;
    let mut report = |line: usize, message: String| {
        violations.push(Violation {
            path: path.to_owned(),
            line: Some(line),
            message,
        });
    };
    if !found.iter().any(|clause| clause.positive) {
        report(
            missing_line,
            format!(
                "says nothing of what {name} depends on: add \"{name} depends on ... only\" ({})",
                layer.outgoing_rule(name)
            ),
        );
        return;
    }
    let used: Vec<&String> = krate
        .deps
        .iter()
        .filter(|dep| crates.contains(*dep))
        .collect();
    for clause in found {
        for item in &clause.items {
            let Some(names) = &item.names else {
                if clause.positive {
                    report(
                        item.line,
                        format!(
                            "the dependency sentence of {name} names `{}`, which is no project crate (write crate names, `wire-*` or `wire crates`)",
                            item.said
                        ),
                    );
                }
                continue;
            };
            if clause.positive {
                if !allowed(layer, names) {
                    report(
                        item.line,
                        format!(
                            "says {name} depends on {names}; layers.toml does not allow it ({})",
                            layer.outgoing_rule(name)
                        ),
                    );
                } else if names != "*" && !used.iter().any(|dep| matches(names, dep)) {
                    report(
                        item.line,
                        format!("says {name} depends on {names}; its Cargo.toml does not"),
                    );
                }
            } else {
                let allows = layer.may_depend_on.iter().any(|p| p == names)
                    || crates
                        .iter()
                        .filter(|krate| names == "*" || matches(names, krate))
                        .any(|krate| layer.may_depend_on(krate));
                if allows {
                    report(
                        item.line,
                        format!(
                            "says {name} does not depend on {names}; layers.toml allows it ({})",
                            layer.outgoing_rule(name)
                        ),
                    );
                }
            }
        }
        if !clause.positive {
            continue;
        }
        for dep in used.iter().filter(|dep| layer.may_depend_on(dep)) {
            let named = clause.items.iter().any(|item| {
                item.names
                    .as_deref()
                    .is_some_and(|names| names == "*" || matches(names, dep))
            });
            if !named {
                report(
                    clause.line,
                    format!(
                        "{name} depends on {dep} (its Cargo.toml), which the dependency sentence does not name"
                    ),
                );
            }
        }
    }
}

/// The crates under `root/crates` (a directory with a `Cargo.toml` naming a package).
fn crates(root: &Path) -> io::Result<Vec<Krate>> {
    let mut found = Vec::new();
    let dir = root.join("crates");
    if !dir.is_dir() {
        return Ok(found);
    }
    let mut entries: Vec<_> = fs::read_dir(&dir)?
        .map(|entry| entry.map(|entry| entry.path()))
        .collect::<io::Result<_>>()?;
    entries.sort();
    for path in entries {
        let Ok(text) = fs::read_to_string(path.join("Cargo.toml")) else {
            continue;
        };
        let Ok(manifest) = text.parse::<toml::Table>() else {
            continue;
        };
        let Some(name) = manifest
            .get("package")
            .and_then(|package| package.get("name"))
            .and_then(toml::Value::as_str)
        else {
            continue;
        };
        let mut tables: Vec<&toml::Table> = Vec::new();
        for section in ["dependencies", "build-dependencies"] {
            tables.extend(manifest.get(section).and_then(toml::Value::as_table));
            let targets = manifest.get("target").and_then(toml::Value::as_table);
            for target in targets.into_iter().flat_map(|targets| targets.values()) {
                tables.extend(target.get(section).and_then(toml::Value::as_table));
            }
        }
        let deps = tables
            .iter()
            .flat_map(|table| table.iter())
            .map(|(key, value)| {
                value
                    .get("package")
                    .and_then(toml::Value::as_str)
                    .unwrap_or(key)
                    .to_owned()
            })
            .collect();
        found.push(Krate {
            dir: path
                .file_name()
                .map(|name| name.to_string_lossy().into_owned())
                .unwrap_or_default(),
            name: name.to_owned(),
            deps,
        });
    }
    Ok(found)
}

/// The paragraphs of the crate doc of `text` (a crate root): 1-based lines and
/// their text after `//!`.
fn doc_paragraphs(text: &str) -> Vec<Vec<(usize, &str)>> {
    let mut paragraphs = vec![Vec::new()];
    for (index, line) in text.lines().enumerate() {
        let Some(doc) = line.trim_start().strip_prefix("//!") else {
            if line.trim().is_empty() {
                continue;
            }
            break;
        };
        if doc.trim().is_empty() {
            paragraphs.push(Vec::new());
        } else if let Some(last) = paragraphs.last_mut() {
            last.push((index + 1, doc));
        }
    }
    paragraphs.retain(|paragraph| !paragraph.is_empty());
    paragraphs
}

/// The `Architecture invariant:` paragraphs of each `` ### `crates/<dir>` `` section
/// of ARCHITECTURE.md's `text`: (dir, heading line, paragraphs).
type Sections<'a> = Vec<(String, usize, Vec<Vec<(usize, &'a str)>>)>;

fn sections(text: &str) -> Sections<'_> {
    let mut sections: Sections<'_> = Vec::new();
    let mut current: Option<usize> = None;
    let mut in_invariant = false;
    for (index, line) in text.lines().enumerate() {
        if line.starts_with('#') {
            in_invariant = false;
            current = line
                .strip_prefix("### `crates/")
                .and_then(|rest| rest.strip_suffix('`'))
                .filter(|dir| !dir.contains('/'))
                .map(|dir| {
                    sections.push((dir.to_owned(), index + 1, Vec::new()));
                    sections.len() - 1
                });
            continue;
        }
        let Some(at) = current else { continue };
        if line.trim().is_empty() {
            in_invariant = false;
        } else if line.starts_with(INVARIANT) {
            in_invariant = true;
            sections[at].2.push(vec![(index + 1, line)]);
        } else if in_invariant && let Some(paragraph) = sections[at].2.last_mut() {
            paragraph.push((index + 1, line));
        }
    }
    sections
}

/// Checks the dependency sentences under `root` (see the module docs).
pub(crate) fn check(root: &Path, violations: &mut Vec<Violation>) -> io::Result<()> {
    let table = root.join("layers.toml");
    if !table.is_file() {
        return Ok(());
    }
    let layers = match Layers::load(&table) {
        Ok(layers) => layers,
        Err(error) => {
            violations.push(Violation {
                path: "layers.toml".to_owned(),
                line: None,
                message: format!("cannot be read for the dependency sentences: {error}"),
            });
            return Ok(());
        }
    };
    let krates = crates(root)?;
    let names: BTreeSet<String> = krates.iter().map(|krate| krate.name.clone()).collect();
    let architecture = fs::read_to_string(root.join(ARCHITECTURE)).unwrap_or_default();
    let sections = sections(&architecture);
    for krate in &krates {
        let Some(layer) = layers.layer_of(&krate.name) else {
            continue;
        };
        let src = format!("crates/{}/src", krate.dir);
        let doc = ["lib.rs", "main.rs"]
            .iter()
            .map(|file| format!("{src}/{file}"))
            .find_map(|path| Some((fs::read_to_string(root.join(&path)).ok()?, path)));
        if let Some((text, path)) = doc {
            let found: Vec<Clause> = doc_paragraphs(&text)
                .iter()
                .flat_map(|paragraph| clauses(paragraph, &krate.name, &names, &layers))
                .collect();
            check_clauses(&path, 1, krate, layer, &names, &found, violations);
        }
        for (_, heading, paragraphs) in sections.iter().filter(|(dir, ..)| *dir == krate.dir) {
            let found: Vec<Clause> = paragraphs
                .iter()
                .flat_map(|paragraph| clauses(paragraph, &krate.name, &names, &layers))
                .collect();
            let missing_line = paragraphs
                .first()
                .and_then(|paragraph| paragraph.first())
                .map_or(*heading, |(line, _)| *line);
            check_clauses(
                ARCHITECTURE,
                missing_line,
                krate,
                layer,
                &names,
                &found,
                violations,
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A layer table: `core` and `tls` at the bottom, the `wire-*` family over them,
    /// `app` over `core` and the wires, `root` over everything.
    const TABLE: &str = "[network]\nhttp_crates = []\ntokio_features = []\n\
        deny_toml_bans = []\nexternal_wrappers = []\n\
        [[layer]]\ncrate = \"core\"\ndescription = \"c\"\nmay_depend_on = []\nnetwork = \"forbidden\"\n\
        [[layer]]\ncrate = \"tls\"\ndescription = \"t\"\nmay_depend_on = []\nnetwork = \"forbidden\"\n\
        [[layer]]\ncrate = \"wire-*\"\ndescription = \"w\"\nmay_depend_on = [\"core\", \"tls\"]\nnetwork = \"allowed\"\n\
        [[layer]]\ncrate = \"app\"\ndescription = \"a\"\nmay_depend_on = [\"core\", \"wire-*\"]\nnetwork = \"allowed\"\n\
        [[layer]]\ncrate = \"root\"\ndescription = \"r\"\nmay_depend_on = [\"*\"]\nnetwork = \"allowed\"\n";

    fn layers() -> Layers {
        Layers::parse(TABLE).unwrap()
    }

    fn names() -> BTreeSet<String> {
        ["core", "tls", "wire-a", "wire-b", "app", "root"]
            .map(str::to_owned)
            .into()
    }

    fn said(text: &str, name: &str) -> Vec<(bool, Vec<Option<String>>)> {
        let lines: Vec<(usize, &str)> = text.lines().enumerate().map(|(i, l)| (i + 1, l)).collect();
        clauses(&lines, name, &names(), &layers())
            .into_iter()
            .map(|clause| {
                (
                    clause.positive,
                    clause.items.into_iter().map(|item| item.names).collect(),
                )
            })
            .collect()
    }

    #[test]
    fn sentences_are_read() {
        let some = |name: &str| Some(name.to_owned());
        assert_eq!(
            said(
                "app depends on `core` (types only), a wire crate and\nwire-b only: not on tls,\nthe loop or another wire crate.",
                "app"
            ),
            [
                (true, vec![some("core"), some("wire-*"), some("wire-b")]),
                (false, vec![some("tls"), None, some("wire-*")]),
            ]
        );
        assert_eq!(
            said(
                "It depends on no project crate and not on schemars.",
                "core"
            ),
            [(true, vec![]), (false, vec![None])]
        );
        assert_eq!(
            said("This crate depends on any project crate.", "root"),
            [(true, vec![some("*")])]
        );
        // No positive clause, or another subject: not a dependency paragraph.
        assert!(said("It must not depend on tls.", "app").is_empty());
        assert!(said("Nothing depends on app but root.", "app").is_empty());
    }

    #[test]
    fn drifted_sentences_fail() {
        let root = std::env::temp_dir().join(format!("xtask-dep-sentences-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let write = |path: &str, text: &str| {
            let path = root.join(path);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, text).unwrap();
        };
        write("layers.toml", TABLE);
        let manifest = |name: &str, deps: &str| {
            format!(
                "[package]\nname = \"{name}\"\n\n[dependencies]\n{deps}\n[dev-dependencies]\ntls.workspace = true\n"
            )
        };
        write("crates/core/Cargo.toml", &manifest("core", ""));
        write(
            "crates/core/src/lib.rs",
            "//! Types.\n//!\n//! core depends on no project crate.\n",
        );
        write("crates/tls/Cargo.toml", &manifest("tls", ""));
        write("crates/tls/src/lib.rs", "//! TLS, of no one.\n");
        write(
            "crates/wire-a/Cargo.toml",
            &manifest(
                "wire-a",
                "core.workspace = true\ntls = { workspace = true }\n",
            ),
        );
        write(
            "crates/wire-a/src/lib.rs",
            "//! A wire.\n//!\n//! wire-a depends on core only: not on tls, app or a\n//! wire crate.\n",
        );
        write(
            "crates/wire-b/Cargo.toml",
            &manifest("wire-b", "core.workspace = true\n"),
        );
        write(
            "crates/wire-b/src/lib.rs",
            "//! B wire: wire-b depends on core only.\n",
        );
        write(
            "crates/app/Cargo.toml",
            &manifest("app", "core.workspace = true\nwire-a.workspace = true\n"),
        );
        write(
            "crates/app/src/main.rs",
            "//! The app.\n//!\n//! app depends on core, tls, wire crates, wire-b\n//! and the loop only.\nfn main() {}\n",
        );
        write(
            ARCHITECTURE,
            "# A\n\n### `crates/core`\n\nText.\n\nArchitecture invariant: core does no IO.\n\n\
             ### `crates/app`\n\nArchitecture invariant: it depends on core and wire-*\nonly.\n\n\
             ### `crates/wire-a`\n\nNo invariant.\n",
        );

        let mut violations = Vec::new();
        check(&root, &mut violations).unwrap();
        violations.sort_by(|a, b| (&a.path, a.line).cmp(&(&b.path, b.line)));
        let lines: Vec<String> = violations.iter().map(ToString::to_string).collect();
        assert_eq!(
            lines,
            [
                "ARCHITECTURE.md:7: says nothing of what core depends on: add \"core depends on ... only\" (core may depend on no project crate)",
                "ARCHITECTURE.md:14: says nothing of what wire-a depends on: add \"wire-a depends on ... only\" (wire-a may depend only on core, tls)",
                "crates/app/src/main.rs:3: says app depends on tls; layers.toml does not allow it (app may depend only on core, wire-*)",
                "crates/app/src/main.rs:3: says app depends on wire-b; its Cargo.toml does not",
                "crates/app/src/main.rs:4: the dependency sentence of app names `the loop`, which is no project crate (write crate names, `wire-*` or `wire crates`)",
                "crates/tls/src/lib.rs:1: says nothing of what tls depends on: add \"tls depends on ... only\" (tls may depend on no project crate)",
                "crates/wire-a/src/lib.rs:3: wire-a depends on tls (its Cargo.toml), which the dependency sentence does not name",
                "crates/wire-a/src/lib.rs:3: says wire-a does not depend on tls; layers.toml allows it (wire-a may depend only on core, tls)",
            ]
        );
        fs::remove_dir_all(&root).unwrap();
    }
}
