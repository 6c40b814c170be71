//! `tidy`: text checks that complement clippy.
//!
//! Most checks read files as plain lines and know nothing of Rust syntax beyond "a
//! line starting with `//` is a comment"; those that need the syntax (wildcard arms,
//! function lengths, the citations) parse with syn. The dependency graph is
//! layer-lint's job.
//!
//! Checks of `crates/*/src/**/*.rs`:
//! - every crate root (`src/lib.rs`, `src/main.rs`) starts with a `//!` doc;
//! - no `dbg!(`, `todo!(` or `unimplemented!(` outside comments;
//! - `crates/ai-core/src` names no IO outside comments (`std::fs`, `std::net`,
//!   `std::process`, `tokio::net`, `reqwest`): ai-core does no IO;
//! - every `pub enum` is `#[non_exhaustive]` (a variant added later is then not a
//!   breaking change for the crates that match on it), or
//!   `#[cfg_attr(not(agent_workspace), non_exhaustive)]` (the same for users, while
//!   the workspace's own matches must list every variant), unless the line right
//!   above its attributes and docs says `// tidy: exhaustive: <why the set is closed>`;
//! - in a `match` over an enum that the workspace must handle exhaustively, a
//!   wildcard arm outside the enum's crate is `#[cfg(not(agent_workspace))]`
//!   ([`crate::exhaustive`], which parses with syn);
//! - no function on the run and request path (`agent-graph/src/run`, chat-protocol,
//!   the chat handlers of agent-server, the run owner of agent-durable) is longer
//!   than 80 lines, but for a shrinking list of known ones ([`crate::fn_length`]);
//! - no two public types (`pub struct`, `enum`, `trait`, `type`) share a name, in
//!   one crate or across crates: a name says which thing it is;
//! - no crate but the composition root (`bootstrap`), the test harness
//!   (`agent-testing`) and the front door's one-call defaults (`agent`: what an
//!   MCP stdio child inherits) reads environment variables (`env::var`,
//!   `env::vars`, `env::var_os`, `env::vars_os` outside comments): library
//!   crates are handed what they need.
//!
//! Check of the repository's text files (`.rs`, `.md`, `.toml`, `.sh`, `.ts`, `.json`
//! except under a `fixtures` directory, and `.ci/run`): no dangling document
//! references. A reference is a file name ending in `.md` whose stem has a letter or
//! digit, with or without a directory part (`ARCHITECTURE.md`,
//! `fixtures/openai/README.md`), found anywhere in a line, comments included. Not
//! references: URLs (the path contains `//` or follows a `:`), templates and globs
//! (right after `$`, `{`, `}`, `%`, `@`, `~`, or an unpaired `*`), and longer names
//! (`x.mdx`, `x.md.bak`). A reference resolves when:
//! - it starts with `/`: the file exists at that path from the repository root;
//! - it starts with `./` or `../`, or contains `/../`: the file exists relative to the
//!   referring file's directory;
//! - otherwise: the file exists relative to the referring file's directory, or some
//!   repository file's path is the reference or ends with `/` + the reference (so a
//!   bare name may live anywhere, and `openai/README.md` matches
//!   `fixtures/openai/README.md`).
//!
//! Check of the invariants tables (ARCHITECTURE.md, SECURITY.md): every path, Rust
//! path and type name they cite exists ([`crate::citations`]).
//!
//! Check of the dependency sentences of the crate docs and of ARCHITECTURE.md's
//! "Architecture invariant:" paragraphs against layers.toml and each crate's
//! Cargo.toml ([`crate::dep_sentences`]).
//!
//! Check of README.md, when `crates/` holds crates: its crate table (the first table whose header's first cell is
//! `crate`) has exactly one row per crate under `crates/`, named in backticks.
//!
//! "The repository's files" are `git ls-files --cached --others --exclude-standard`
//! (tracked plus untracked-but-not-ignored files that exist), or, outside a git work
//! tree (or without `git`), every file except under `.git`, `target` and
//! `node_modules` directories.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The crates that may read environment variables: the composition root, and the
/// test harness (which detects CI to refuse snapshot updates there).
// The front door (`agent`) reads the environment only for its one-call
// defaults: the variables an MCP stdio child inherits (`agent::mcp::stdio`).
const ENV_READERS: &[&str] = &["bootstrap", "agent-testing", "agent"];

/// Reads of environment variables.
const ENV_READS: &[&str] = &["env::var(", "env::vars(", "env::var_os(", "env::vars_os("];

/// Text that must not appear in code lines of any crate.
const LEFTOVERS: &[(&str, &str)] = &[
    ("dbg!(", "`dbg!` left in code"),
    ("todo!(", "`todo!` left in code"),
    ("unimplemented!(", "`unimplemented!` left in code"),
];

/// The crate that does no IO.
const NO_IO_CRATE: &str = "ai-core";

/// Extensions of the files searched for document references.
const DOC_REF_EXTENSIONS: &[&str] = &["rs", "md", "toml", "sh", "ts", "json"];

/// Files searched for document references whatever their extension.
const DOC_REF_FILES: &[&str] = &[".ci/run"];

/// Text that must not appear in code lines of [`NO_IO_CRATE`].
const IO_TEXT: &[&str] = &[
    "std::fs",
    "std::net",
    "std::process",
    "tokio::net",
    "reqwest",
];

/// One broken rule at a place in a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Violation {
    /// The file, relative to the checked root, with `/` separators.
    pub(crate) path: String,
    /// The 1-based line, when the rule is about one line.
    pub(crate) line: Option<usize>,
    /// The rule, in words.
    pub(crate) message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: {}", self.path, self.message),
            None => write!(f, "{}: {}", self.path, self.message),
        }
    }
}

/// The outcome of [`check`].
#[derive(Debug)]
pub(crate) struct Report {
    /// How many files were read.
    pub(crate) files: usize,
    /// Every violation, in path and line order.
    pub(crate) violations: Vec<Violation>,
}

impl fmt::Display for Report {
    /// The one-line summary.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plural = |n: usize| if n == 1 { "" } else { "s" };
        write!(
            f,
            "tidy: {} file{}, {} violation{}",
            self.files,
            plural(self.files),
            self.violations.len(),
            plural(self.violations.len())
        )
    }
}

/// Checks `root/crates/*/src/**/*.rs` and the document references of the text files
/// under `root`, where `root` is the repository (and workspace) root.
pub(crate) fn check(root: &Path) -> io::Result<Report> {
    let mut files = Vec::new();
    let crates = root.join("crates");
    if crates.is_dir() {
        for krate in sorted_entries(&crates)? {
            let src = krate.join("src");
            if src.is_dir() {
                collect_rust_files(&src, &mut files)?;
            }
        }
    }
    let mut violations = Vec::new();
    let mut read: BTreeSet<String> = BTreeSet::new();
    let mut types: BTreeMap<String, Vec<(String, usize)>> = BTreeMap::new();
    for file in &files {
        let text = fs::read_to_string(file)?;
        check_file(root, file, &text, &mut violations);
        let path = display_path(root, file);
        for (line, name) in public_types(&text) {
            types.entry(name).or_default().push((path.clone(), line));
        }
        read.insert(path);
    }
    for (name, places) in types.iter().filter(|(_, places)| places.len() > 1) {
        let (first, first_line) = &places[0];
        for (path, line) in &places[1..] {
            violations.push(Violation {
                path: path.clone(),
                line: Some(*line),
                message: format!(
                    "public type `{name}` is also declared at {first}:{first_line}; give one of them another name"
                ),
            });
        }
    }

    let repo_files = repo_files(root)?;
    let known: HashSet<&str> = repo_files.iter().map(String::as_str).collect();
    crate::citations::check(root, &repo_files, &mut violations)?;
    crate::dep_sentences::check(root, &mut violations)?;
    check_readme_crates(root, &repo_files, &mut violations);
    for path in repo_files.iter().filter(|path| searched_for_doc_refs(path)) {
        // A file that is not UTF-8 text holds no references this check can read.
        let Ok(text) = fs::read_to_string(root.join(path)) else {
            continue;
        };
        check_doc_refs(path, &text, &repo_files, &known, &mut violations);
        read.insert(path.clone());
    }
    violations.sort_by(|a, b| (&a.path, a.line).cmp(&(&b.path, b.line)));
    Ok(Report {
        files: read.len(),
        violations,
    })
}

/// The repository's files under `root` (relative, `/`-separated, sorted): git's
/// tracked and untracked-but-not-ignored files that exist, or, when `root` is not in
/// a git work tree (or there is no `git`), every file outside
/// [`NOT_THE_REPOSITORY`].
fn repo_files(root: &Path) -> io::Result<Vec<String>> {
    let output = Command::new("git")
        .arg("-C")
        .arg(root)
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .output();
    let mut files: Vec<String> = match output {
        Ok(output) if output.status.success() => String::from_utf8_lossy(&output.stdout)
            .split('\0')
            .filter(|path| !path.is_empty() && root.join(path).is_file())
            .map(str::to_owned)
            .collect(),
        _ => {
            let mut found = Vec::new();
            walk(root, root, &mut found)?;
            found
        }
    };
    files.sort();
    files.dedup();
    Ok(files)
}

/// Directories that hold no file of the repository (git's, cargo's, npm's).
const NOT_THE_REPOSITORY: [&str; 3] = [".git", "target", "node_modules"];

/// Appends every file under `dir` (outside [`NOT_THE_REPOSITORY`]) to `files`,
/// relative to `root`.
fn walk(root: &Path, dir: &Path, files: &mut Vec<String>) -> io::Result<()> {
    for path in sorted_entries(dir)? {
        if path.is_dir() {
            if !path
                .file_name()
                .is_some_and(|name| NOT_THE_REPOSITORY.iter().any(|n| name == *n))
            {
                walk(root, &path, files)?;
            }
        } else if path.is_file() {
            files.push(display_path(root, &path));
        }
    }
    Ok(())
}

/// Whether the file at repository path `path` is searched for document references.
fn searched_for_doc_refs(path: &str) -> bool {
    if DOC_REF_FILES.contains(&path) {
        return true;
    }
    let Some((_, extension)) = path.rsplit_once('.') else {
        return false;
    };
    if extension.contains('/') || !DOC_REF_EXTENSIONS.contains(&extension) {
        return false;
    }
    // Golden JSON under fixtures is data, not prose.
    !(extension == "json" && path.split('/').any(|part| part == "fixtures"))
}

/// Whether `byte` may be part of a referenced path.
fn is_path_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'-' | b'.' | b'/')
}

/// The document references in `line` (see the module docs), in order.
fn doc_refs(line: &str) -> Vec<&str> {
    let bytes = line.as_bytes();
    let mut refs = Vec::new();
    let mut from = 0;
    while let Some(offset) = line[from..].find(".md") {
        let dot = from + offset;
        let end = dot + 3;
        from = end;
        match bytes.get(end) {
            Some(&next) if next.is_ascii_alphanumeric() || next == b'_' => continue,
            Some(b'.') if bytes.get(end + 1).is_some_and(u8::is_ascii_alphanumeric) => continue,
            _ => {}
        }
        let mut start = dot;
        while start > 0 && is_path_byte(bytes[start - 1]) {
            start -= 1;
        }
        let reference = &line[start..end];
        let name = reference.rsplit('/').next().unwrap_or(reference);
        let stem = &name[..name.len() - 3];
        if !stem.bytes().any(|b| b.is_ascii_alphanumeric()) || reference.contains("//") {
            continue;
        }
        match start.checked_sub(1).map(|before| bytes[before]) {
            Some(b':' | b'$' | b'{' | b'}' | b'%' | b'@' | b'~') => continue,
            Some(b'*') if bytes.get(end) != Some(&b'*') => continue,
            _ => {}
        }
        if !refs.contains(&reference) {
            refs.push(reference);
        }
    }
    refs
}

/// `path` with `.` and `..` parts resolved; `None` when it climbs above its start.
fn normalize(path: &str) -> Option<String> {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            part => parts.push(part),
        }
    }
    Some(parts.join("/"))
}

/// Whether `reference`, found in the repository file `referrer`, names a file of
/// `files` (see the module docs for the rule).
fn resolves(referrer: &str, reference: &str, files: &[String], known: &HashSet<&str>) -> bool {
    if let Some(rooted) = reference.strip_prefix('/') {
        return normalize(rooted).is_some_and(|path| known.contains(path.as_str()));
    }
    let dir = referrer.rsplit_once('/').map_or("", |(dir, _)| dir);
    let relative = normalize(&format!("{dir}/{reference}"));
    if relative.is_some_and(|path| known.contains(path.as_str())) {
        return true;
    }
    let explicit =
        reference.starts_with("./") || reference.starts_with("../") || reference.contains("/../");
    if explicit {
        return false;
    }
    let suffix = format!("/{reference}");
    files
        .iter()
        .any(|file| file == reference || file.ends_with(&suffix))
}

/// Reports every reference in `text` (the file at repository path `path`) that
/// resolves to no file.
fn check_doc_refs(
    path: &str,
    text: &str,
    files: &[String],
    known: &HashSet<&str>,
    violations: &mut Vec<Violation>,
) {
    for (index, line) in text.lines().enumerate() {
        for reference in doc_refs(line) {
            if !resolves(path, reference, files, known) {
                violations.push(Violation {
                    path: path.to_owned(),
                    line: Some(index + 1),
                    message: format!("`{reference}` names no file in the repository"),
                });
            }
        }
    }
}

/// The file whose crate table [`check_readme_crates`] reads.
const README: &str = "README.md";

/// Reports the crates under `crates/` (a directory with a `Cargo.toml`) that
/// README.md's crate table misses, and its rows that name no such crate.
fn check_readme_crates(root: &Path, files: &[String], violations: &mut Vec<Violation>) {
    let Ok(text) = fs::read_to_string(root.join(README)) else {
        return;
    };
    let crates: BTreeSet<&str> = files
        .iter()
        .filter_map(|file| file.strip_prefix("crates/")?.strip_suffix("/Cargo.toml"))
        .filter(|name| !name.contains('/'))
        .collect();
    if crates.is_empty() {
        return;
    }
    let lines: Vec<&str> = text.lines().collect();
    let first_cell = |line: &str| {
        line.strip_prefix('|')
            .and_then(|rest| rest.split('|').next())
            .map(|cell| cell.trim().trim_matches('`').to_owned())
    };
    let Some(header) = lines
        .iter()
        .position(|line| first_cell(line).is_some_and(|cell| cell == "crate"))
    else {
        violations.push(Violation {
            path: README.to_owned(),
            line: None,
            message: "has no crate table (a table whose first column is `crate`)".to_owned(),
        });
        return;
    };
    let mut listed = BTreeSet::new();
    for (index, line) in lines.iter().enumerate().skip(header + 2) {
        let Some(name) = first_cell(line) else { break };
        if !crates.contains(name.as_str()) {
            violations.push(Violation {
                path: README.to_owned(),
                line: Some(index + 1),
                message: format!("the crate table names `{name}`, which is no crate under crates/"),
            });
        }
        listed.insert(name);
    }
    for name in crates.iter().filter(|name| !listed.contains(**name)) {
        violations.push(Violation {
            path: README.to_owned(),
            line: Some(header + 1),
            message: format!("the crate table misses `{name}`"),
        });
    }
}

/// The entries of `dir`, sorted by path.
fn sorted_entries(dir: &Path) -> io::Result<Vec<PathBuf>> {
    let mut entries = fs::read_dir(dir)?
        .map(|entry| entry.map(|entry| entry.path()))
        .collect::<io::Result<Vec<_>>>()?;
    entries.sort();
    Ok(entries)
}

/// Appends every `.rs` file under `dir` (recursively, sorted) to `files`.
fn collect_rust_files(dir: &Path, files: &mut Vec<PathBuf>) -> io::Result<()> {
    for path in sorted_entries(dir)? {
        if path.is_dir() {
            collect_rust_files(&path, files)?;
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
    Ok(())
}

/// `path` relative to `root`, with `/` separators.
fn display_path(root: &Path, path: &Path) -> String {
    let relative = path.strip_prefix(root).unwrap_or(path);
    relative
        .components()
        .map(|part| part.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// Checks one file; `file` is `root/crates/<crate>/src/...`.
fn check_file(root: &Path, file: &Path, text: &str, violations: &mut Vec<Violation>) {
    let path = display_path(root, file);
    // ["crates", "<crate>", "src", ...]
    let parts: Vec<&str> = path.split('/').collect();
    let crate_name = parts.get(1).copied().unwrap_or_default();
    let is_crate_root = matches!(parts.as_slice(), [_, _, "src", "lib.rs" | "main.rs"]);

    if is_crate_root {
        let first = text.lines().find(|line| !line.trim().is_empty());
        if !first.is_some_and(|line| line.starts_with("//!")) {
            violations.push(Violation {
                path: path.clone(),
                line: None,
                message: "crate root must start with a `//!` doc".to_owned(),
            });
        }
    }

    crate::exhaustive::check(&path, crate_name, text, violations);
    crate::fn_length::check(&path, text, violations);

    let lines: Vec<&str> = text.lines().collect();
    for (index, line) in lines.iter().enumerate() {
        if line.trim_start().starts_with("pub enum ") && !may_be_exhaustive(&lines, index) {
            violations.push(Violation {
                path: path.clone(),
                line: Some(index + 1),
                message: "a public enum must be `#[non_exhaustive]` (or say `// tidy: exhaustive: <why>` above it)".to_owned(),
            });
        }
    }

    for (index, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("//") {
            continue;
        }
        let mut report = |message: String| {
            violations.push(Violation {
                path: path.clone(),
                line: Some(index + 1),
                message,
            });
        };
        for (needle, message) in LEFTOVERS {
            if line.contains(needle) {
                report((*message).to_owned());
            }
        }
        if !ENV_READERS.contains(&crate_name) {
            for needle in ENV_READS {
                if line.contains(needle) {
                    report(format!(
                        "only bootstrap (and the test harness) reads environment variables: found `{needle}`"
                    ));
                }
            }
        }
        if crate_name == NO_IO_CRATE {
            for needle in IO_TEXT {
                if line.contains(needle) {
                    report(format!("{NO_IO_CRATE} does no IO: found `{needle}`"));
                }
            }
        }
    }
}

/// The public types a file declares: (line, name) of each `pub struct`, `pub enum`,
/// `pub trait` and `pub type` outside comments.
fn public_types(text: &str) -> Vec<(usize, String)> {
    text.lines()
        .enumerate()
        .filter_map(|(index, line)| {
            let rest = ["pub struct ", "pub enum ", "pub trait ", "pub type "]
                .iter()
                .find_map(|kw| line.trim_start().strip_prefix(kw))?;
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            (!name.is_empty()).then_some((index + 1, name))
        })
        .collect()
}

/// The attribute of an enum that is `#[non_exhaustive]` outside the workspace only
/// (see [`crate::exhaustive`]).
const WORKSPACE_EXHAUSTIVE: &str = "#[cfg_attr(not(agent_workspace), non_exhaustive)]";

/// Whether the `pub enum` at `lines[at]` is `#[non_exhaustive]` (or
/// [`WORKSPACE_EXHAUSTIVE`]) or marked as closed: its attributes, doc comments and
/// plain comments directly above are read.
fn may_be_exhaustive(lines: &[&str], at: usize) -> bool {
    for line in lines[..at].iter().rev() {
        let line = line.trim();
        if line.starts_with("#[non_exhaustive]")
            || line.starts_with(WORKSPACE_EXHAUSTIVE)
            || line.starts_with("// tidy: exhaustive: ")
        {
            return true;
        }
        if !(line.starts_with("#[") || line.starts_with("//")) {
            return false;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fresh, empty directory under the system temp dir.
    fn temp_root(name: &str) -> PathBuf {
        let root = std::env::temp_dir().join(format!("xtask-tidy-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(&root).unwrap();
        root
    }

    /// Writes `text` to `root/path`, creating parent directories.
    fn write(root: &Path, path: &str, text: &str) {
        let path = root.join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    #[test]
    fn real_tree_passes() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let report = check(root).unwrap();
        let lines: Vec<String> = report.violations.iter().map(ToString::to_string).collect();
        assert_eq!(lines, Vec::<String>::new(), "{report}");
        assert!(report.files > 0, "{report}");
    }

    #[test]
    fn dangling_doc_refs_fail() {
        // `.MD` stands for the real extension, so that this file names no missing
        // document itself.
        let md = |text: &str| text.replace(".MD", ".md");
        let root = temp_root("doc-refs");
        write(
            &root,
            &md("docs/guide.MD"),
            &md("Back to ../README.MD and README.MD; see other/guide.MD.\n"),
        );
        write(
            &root,
            "README.md",
            &md(
                "See docs/guide.MD, guide.MD, ./docs/guide.MD and /docs/guide.MD.\n\
                 Not refs: https://example.com/NOPE.MD, *.MD, {name}.MD, $DIR/NOPE.MD, NOPE.MDX, \
                 NOPE.MD.bak, and **README.MD** is one that resolves.\n\
                 Dangling: DESIGN.MD, docs/STYLE.MD, ../README.MD.\n",
            ),
        );
        write(
            &root,
            "crates/a/src/lib.rs",
            &md("//! Docs (guide.MD, docs/guide.MD, DESIGN.MD).\n"),
        );
        write(&root, "fixtures/x.json", &md("{\"a\": \"DESIGN.MD\"}\n"));
        write(&root, "tools/x.json", &md("{\"a\": \"DESIGN.MD\"}\n"));
        write(&root, ".ci/run", &md("cat NOPE.MD\n"));
        write(&root, "notes.txt", &md("DESIGN.MD\n"));
        write(&root, &md("target/debug/x.MD"), &md("DESIGN.MD\n"));

        let report = check(&root).unwrap();
        let lines: Vec<String> = report
            .violations
            .iter()
            .map(|violation| violation.to_string().replace(".md", ".MD"))
            .collect();
        assert_eq!(
            lines,
            [
                ".ci/run:1: `NOPE.MD` names no file in the repository",
                "README.MD:3: `DESIGN.MD` names no file in the repository",
                "README.MD:3: `docs/STYLE.MD` names no file in the repository",
                "README.MD:3: `../README.MD` names no file in the repository",
                "crates/a/src/lib.rs:1: `DESIGN.MD` names no file in the repository",
                "docs/guide.MD:1: `other/guide.MD` names no file in the repository",
                "tools/x.json:1: `DESIGN.MD` names no file in the repository",
            ]
        );
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn violations_fail() {
        let root = temp_root("violations");
        write(
            &root,
            "crates/ai-core/src/lib.rs",
            "\nuse std::fs::File;\n// std::net in a comment is fine\nfn f() { dbg!(1); }\n",
        );
        write(
            &root,
            "crates/ai-core/src/wire/mod.rs",
            "//! Docs.\nfn g() -> reqwest::Client { todo!() }\n",
        );
        write(
            &root,
            "crates/ai-tools/src/lib.rs",
            "//! Docs.\n\nfn h() { unimplemented!() }\nfn i() { std::net::Ipv4Addr::LOCALHOST; }\nfn j() { std::env::var(\"HOME\"); }\n",
        );
        write(&root, "crates/ai-tools/src/notes.txt", "todo!()");
        write(
            &root,
            "crates/ai-tools/src/kinds.rs",
            "/// Grows.\n#[derive(Debug)]\npub enum Open { A }\n\n\
             /// Grows too.\n#[derive(Debug)]\n#[non_exhaustive]\npub enum Marked { A }\n\n\
             // tidy: exhaustive: yes or no.\n/// Closed.\n#[derive(Debug)]\npub enum Closed { Yes, No }\n\n\
             pub(crate) enum Private { A }\n",
        );
        write(&root, "crates/bootstrap/src/main.rs", "fn main() {}\n");
        write(&root, "crates/bootstrap/Cargo.toml", "[package]\n");
        write(&root, "crates/ai-core/Cargo.toml", "[package]\n");
        write(
            &root,
            "README.md",
            "# R\n\n| crate | what |\n|---|---|\n| `ai-core` | types |\n| `gone` | was |\n\nText.\n",
        );
        write(
            &root,
            "crates/bootstrap/src/lib.rs",
            "//! Docs.\npub struct Closed;\n// pub struct Open;\n",
        );

        let report = check(&root).unwrap();
        let lines: Vec<String> = report.violations.iter().map(ToString::to_string).collect();
        assert_eq!(
            lines,
            [
                "README.md:3: the crate table misses `bootstrap`",
                "README.md:6: the crate table names `gone`, which is no crate under crates/",
                "crates/ai-core/src/lib.rs: crate root must start with a `//!` doc",
                "crates/ai-core/src/lib.rs:2: ai-core does no IO: found `std::fs`",
                "crates/ai-core/src/lib.rs:4: `dbg!` left in code",
                "crates/ai-core/src/wire/mod.rs:2: `todo!` left in code",
                "crates/ai-core/src/wire/mod.rs:2: ai-core does no IO: found `reqwest`",
                "crates/ai-tools/src/kinds.rs:3: a public enum must be `#[non_exhaustive]` (or say `// tidy: exhaustive: <why>` above it)",
                "crates/ai-tools/src/lib.rs:3: `unimplemented!` left in code",
                "crates/ai-tools/src/lib.rs:5: only bootstrap (and the test harness) reads environment variables: found `env::var(`",
                "crates/bootstrap/src/lib.rs:2: public type `Closed` is also declared at crates/ai-tools/src/kinds.rs:13; give one of them another name",
                "crates/bootstrap/src/main.rs: crate root must start with a `//!` doc",
            ]
        );
        assert_eq!(report.files, 9);
        fs::remove_dir_all(&root).unwrap();
    }
}
