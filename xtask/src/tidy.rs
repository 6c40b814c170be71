//! `tidy`: text checks over `crates/*/src/**/*.rs` that complement clippy.
//!
//! It reads source files as plain lines and knows nothing of Rust syntax beyond
//! "a line starting with `//` is a comment"; the dependency graph is layer-lint's job.
//!
//! Checks:
//! - every crate root (`src/lib.rs`, `src/main.rs`) starts with a `//!` doc;
//! - no `dbg!(`, `todo!(` or `unimplemented!(` outside comments;
//! - `crates/ai-core/src` names no IO outside comments (`std::fs`, `std::net`,
//!   `std::process`, `tokio::net`, `reqwest`): ai-core does no IO.

use std::fmt;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Text that must not appear in code lines of any crate.
const LEFTOVERS: &[(&str, &str)] = &[
    ("dbg!(", "`dbg!` left in code"),
    ("todo!(", "`todo!` left in code"),
    ("unimplemented!(", "`unimplemented!` left in code"),
];

/// The crate that does no IO.
const NO_IO_CRATE: &str = "ai-core";

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

/// Checks `root/crates/*/src/**/*.rs`, where `root` is a workspace root.
pub(crate) fn check(root: &Path) -> io::Result<Report> {
    let mut files = Vec::new();
    for krate in sorted_entries(&root.join("crates"))? {
        let src = krate.join("src");
        if src.is_dir() {
            collect_rust_files(&src, &mut files)?;
        }
    }
    let mut violations = Vec::new();
    for file in &files {
        let text = fs::read_to_string(file)?;
        check_file(root, file, &text, &mut violations);
    }
    Ok(Report {
        files: files.len(),
        violations,
    })
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
        if crate_name == NO_IO_CRATE {
            for needle in IO_TEXT {
                if line.contains(needle) {
                    report(format!("{NO_IO_CRATE} does no IO: found `{needle}`"));
                }
            }
        }
    }
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
            "//! Docs.\n\nfn h() { unimplemented!() }\nfn i() { std::net::Ipv4Addr::LOCALHOST; }\n",
        );
        write(&root, "crates/ai-tools/src/notes.txt", "todo!()");
        write(&root, "crates/bootstrap/src/main.rs", "fn main() {}\n");
        write(&root, "crates/bootstrap/src/lib.rs", "//! Docs.\n");

        let report = check(&root).unwrap();
        let lines: Vec<String> = report.violations.iter().map(ToString::to_string).collect();
        assert_eq!(
            lines,
            [
                "crates/ai-core/src/lib.rs: crate root must start with a `//!` doc",
                "crates/ai-core/src/lib.rs:2: ai-core does no IO: found `std::fs`",
                "crates/ai-core/src/lib.rs:4: `dbg!` left in code",
                "crates/ai-core/src/wire/mod.rs:2: `todo!` left in code",
                "crates/ai-core/src/wire/mod.rs:2: ai-core does no IO: found `reqwest`",
                "crates/ai-tools/src/lib.rs:3: `unimplemented!` left in code",
                "crates/bootstrap/src/main.rs: crate root must start with a `//!` doc",
            ]
        );
        assert_eq!(report.files, 5);
        fs::remove_dir_all(&root).unwrap();
    }
}
