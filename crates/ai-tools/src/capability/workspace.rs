//! File IO rooted at a sandbox: the `Workspace` capability and an in-memory double.
//!
//! Paths are the model's relative paths, passed through untouched: resolving them
//! against the real root (symlinks, `..`, paths that do not exist yet) is the real
//! adapter's job (`ai-host`'s `LocalWorkspace`). This module knows no filesystem.

use std::collections::BTreeMap;
use std::sync::Mutex;

use futures::future::BoxFuture;

/// Why a workspace operation failed. Messages never name paths.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WorkspaceError {
    /// The path leaves the sandbox, or is not an acceptable path at all.
    #[error("the path is outside the workspace or not allowed")]
    Denied,
    /// Nothing exists at the path.
    #[error("no such file or directory in the workspace")]
    NotFound,
    /// The file is larger than the read cap.
    #[error(
        "the file is larger than the {limit} byte limit (read a line range with offset and limit)"
    )]
    TooLarge {
        /// The cap, in bytes.
        limit: u64,
    },
    /// A file was expected and something else is there.
    #[error("the path is not a regular file (use core__list_directory for folders)")]
    NotAFile,
    /// A directory was expected and something else is there.
    #[error("the path is not a directory")]
    NotADirectory,
    /// The path is a FIFO, socket or device: only regular files are read or written
    /// (opening one could block or have side effects).
    #[error("the path is a FIFO, socket or device; only regular files can be read or written")]
    SpecialFile,
    /// The path is, or lies under, something the host protects from the file tools
    /// (the agent's own configuration, lock file or state).
    #[error(
        "the path is protected (the agent's own configuration or state) and cannot be written by a tool"
    )]
    Protected,
    /// Another IO failure, described by its kind only.
    #[error("file operation failed: {0}")]
    Io(String),
}

/// What kind of thing a directory entry is. Symlinks are reported, never followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (not followed).
    Symlink,
    /// Anything else (socket, device, fifo).
    Other,
}

/// One entry of a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// Path relative to the listed directory, `/`-separated.
    pub path: String,
    /// What it is.
    pub kind: EntryKind,
    /// Size in bytes, for files.
    pub size: Option<u64>,
}

/// A listing in stable (depth-first, name-sorted) order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DirListing {
    /// The entries.
    pub entries: Vec<DirEntry>,
    /// Whether the entry cap cut the listing short.
    pub truncated: bool,
}

/// File IO confined to one workspace root. Object-safe.
pub trait Workspace: Send + Sync {
    /// Reads a whole file; fails with [`WorkspaceError::TooLarge`] above `max_bytes`.
    fn read(&self, path: String, max_bytes: u64) -> BoxFuture<'_, Result<Vec<u8>, WorkspaceError>>;

    /// Lists a directory down to `max_depth` levels (1 = direct children), at most
    /// `max_entries` entries.
    fn list(
        &self,
        path: String,
        max_depth: u32,
        max_entries: usize,
    ) -> BoxFuture<'_, Result<DirListing, WorkspaceError>>;

    /// Writes a whole file atomically, creating parent folders inside the workspace.
    /// Returns whether the file existed before.
    fn write(&self, path: String, content: Vec<u8>) -> BoxFuture<'_, Result<bool, WorkspaceError>>;
}

/// An in-memory workspace for tests: files keyed by normalized relative path.
///
/// Normalization is lexical: empty, absolute, `~`-prefixed paths, NUL bytes,
/// backslashes and `..` that climb above the root are refused.
#[derive(Debug, Default)]
pub struct MemoryWorkspace {
    files: Mutex<BTreeMap<String, Vec<u8>>>,
}

impl MemoryWorkspace {
    /// An empty workspace.
    pub fn new() -> Self {
        Self::default()
    }

    /// A workspace holding `files` (path, content).
    pub fn with_files<I, P, C>(files: I) -> Self
    where
        I: IntoIterator<Item = (P, C)>,
        P: Into<String>,
        C: Into<Vec<u8>>,
    {
        let ws = Self::new();
        if let Ok(mut map) = ws.files.lock() {
            for (p, c) in files {
                if let Ok(p) = normalize(&p.into()) {
                    map.insert(p, c.into());
                }
            }
        }
        ws
    }

    /// The content of a file, if present.
    pub fn get(&self, path: &str) -> Option<Vec<u8>> {
        let p = normalize(path).ok()?;
        self.files.lock().ok()?.get(&p).cloned()
    }
}

/// Lexically normalizes a relative path to `a/b/c` (the root is `""`).
fn normalize(path: &str) -> Result<String, WorkspaceError> {
    if path.is_empty() || path.starts_with('/') || path.starts_with('~') {
        return Err(WorkspaceError::Denied);
    }
    if path.contains('\0') || path.contains('\\') {
        return Err(WorkspaceError::Denied);
    }
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop().ok_or(WorkspaceError::Denied)?;
            }
            p => parts.push(p),
        }
    }
    Ok(parts.join("/"))
}

fn lock_err<T>(_: T) -> WorkspaceError {
    WorkspaceError::Io("workspace lock poisoned".to_owned())
}

impl Workspace for MemoryWorkspace {
    fn read(&self, path: String, max_bytes: u64) -> BoxFuture<'_, Result<Vec<u8>, WorkspaceError>> {
        Box::pin(async move {
            let p = normalize(&path)?;
            let files = self.files.lock().map_err(lock_err)?;
            match files.get(&p) {
                Some(c) if c.len() as u64 > max_bytes => {
                    Err(WorkspaceError::TooLarge { limit: max_bytes })
                }
                Some(c) => Ok(c.clone()),
                None if is_dir(&files, &p) => Err(WorkspaceError::NotAFile),
                None => Err(WorkspaceError::NotFound),
            }
        })
    }

    fn list(
        &self,
        path: String,
        max_depth: u32,
        max_entries: usize,
    ) -> BoxFuture<'_, Result<DirListing, WorkspaceError>> {
        Box::pin(async move {
            let p = normalize(&path)?;
            let files = self.files.lock().map_err(lock_err)?;
            if files.contains_key(&p) {
                return Err(WorkspaceError::NotADirectory);
            }
            if !is_dir(&files, &p) {
                return Err(WorkspaceError::NotFound);
            }
            let prefix = if p.is_empty() {
                String::new()
            } else {
                format!("{p}/")
            };
            let mut all: BTreeMap<String, DirEntry> = BTreeMap::new();
            for (name, content) in files.iter() {
                let Some(rel) = name.strip_prefix(&prefix) else {
                    continue;
                };
                let parts: Vec<&str> = rel.split('/').collect();
                for depth in 1..=parts.len() {
                    if depth as u32 > max_depth {
                        break;
                    }
                    let sub = parts[..depth].join("/");
                    let file = depth == parts.len();
                    all.entry(sub.clone()).or_insert(DirEntry {
                        path: sub,
                        kind: if file {
                            EntryKind::File
                        } else {
                            EntryKind::Dir
                        },
                        size: file.then_some(content.len() as u64),
                    });
                }
            }
            let truncated = all.len() > max_entries;
            Ok(DirListing {
                entries: all.into_values().take(max_entries).collect(),
                truncated,
            })
        })
    }

    fn write(&self, path: String, content: Vec<u8>) -> BoxFuture<'_, Result<bool, WorkspaceError>> {
        Box::pin(async move {
            let p = normalize(&path)?;
            if p.is_empty() {
                return Err(WorkspaceError::NotAFile);
            }
            let mut files = self.files.lock().map_err(lock_err)?;
            if is_dir(&files, &p) {
                return Err(WorkspaceError::NotAFile);
            }
            Ok(files.insert(p, content).is_some())
        })
    }
}

fn is_dir(files: &BTreeMap<String, Vec<u8>>, p: &str) -> bool {
    p.is_empty() || files.keys().any(|k| k.starts_with(&format!("{p}/")))
}
