//! `LocalWorkspace`: the real [`Workspace`], file IO confined to a sandbox folder.
//!
//! Every model path is joined to the canonical root and resolved one component at a
//! time: `..` may not climb above the root, every existing symlink is canonicalized
//! and must land inside the root (dangling links and loops are refused), and the
//! components that do not exist yet are kept literally under the deepest existing
//! (checked) ancestor. Empty paths, absolute paths, `~`, backslashes, NUL bytes and
//! paths over 4096 bytes (or a component over 255) are refused outright.
//! Percent-encoded text (`%2e%2e%2f`) and Unicode look-alike separators (`∕`, `／`,
//! `․`) are ordinary file-name characters: they name files inside the root.
//!
//! Files are opened with `O_NOFOLLOW`, and the opened handle is re-checked (through
//! `/proc/self/fd` on Linux, else by device and inode) against the root, which closes
//! the gap between the check and the use when a symlink is swapped in. Writes go to a
//! temporary file in the target folder, re-checked the same way, then renamed over
//! the target (a rename never follows a symlink at the destination).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use ai_tools::capability::{DirEntry, DirListing, EntryKind, Workspace, WorkspaceError};
use futures::future::BoxFuture;

/// Longest accepted path, in bytes.
pub const MAX_PATH_BYTES: usize = 4096;
/// Longest accepted path component, in bytes.
pub const MAX_COMPONENT_BYTES: usize = 255;

/// File IO rooted at a canonical sandbox folder.
#[derive(Debug, Clone)]
pub struct LocalWorkspace {
    root: Arc<PathBuf>,
}

fn io_error(error: &io::Error) -> WorkspaceError {
    match error.kind() {
        io::ErrorKind::NotFound => WorkspaceError::NotFound,
        io::ErrorKind::PermissionDenied => WorkspaceError::Denied,
        io::ErrorKind::NotADirectory => WorkspaceError::NotFound,
        io::ErrorKind::IsADirectory => WorkspaceError::NotAFile,
        kind => WorkspaceError::Io(kind.to_string()),
    }
}

impl LocalWorkspace {
    /// A workspace rooted at `root`, which must be an existing folder.
    pub fn new(root: impl AsRef<Path>) -> io::Result<Self> {
        let root = fs::canonicalize(root)?;
        if !root.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                "the workspace root is not a folder",
            ));
        }
        Ok(Self {
            root: Arc::new(root),
        })
    }

    /// The canonical root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Resolves a model path to an absolute path inside the root (see the module
    /// docs). The result may not exist yet.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, WorkspaceError> {
        if path.is_empty()
            || path.len() > MAX_PATH_BYTES
            || path.contains(['\0', '\\'])
            || path.starts_with('~')
        {
            return Err(WorkspaceError::Denied);
        }
        let root: &Path = &self.root;
        let mut current = root.to_path_buf();
        for component in Path::new(path).components() {
            match component {
                Component::CurDir => {}
                Component::ParentDir => {
                    if current == root {
                        return Err(WorkspaceError::Denied);
                    }
                    current.pop();
                }
                Component::Normal(name) => {
                    if name.len() > MAX_COMPONENT_BYTES {
                        return Err(WorkspaceError::Denied);
                    }
                    current.push(name);
                    match fs::symlink_metadata(&current) {
                        Ok(meta) if meta.file_type().is_symlink() => {
                            // Loops and dangling links fail to canonicalize: refused.
                            let target =
                                fs::canonicalize(&current).map_err(|_| WorkspaceError::Denied)?;
                            if !target.starts_with(root) {
                                return Err(WorkspaceError::Denied);
                            }
                            current = target;
                        }
                        Ok(_) => {}
                        Err(e)
                            if matches!(
                                e.kind(),
                                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                            ) => {}
                        Err(e) => return Err(io_error(&e)),
                    }
                }
                Component::RootDir | Component::Prefix(_) => return Err(WorkspaceError::Denied),
            }
        }
        if !current.starts_with(root) {
            return Err(WorkspaceError::Denied);
        }
        Ok(current)
    }

    /// Opens a resolved path for reading without following a final symlink, then
    /// checks that the opened handle is inside the root.
    pub fn open_checked(&self, resolved: &Path) -> Result<File, WorkspaceError> {
        let file = OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(resolved)
            .map_err(|e| {
                if e.raw_os_error() == Some(rustix::io::Errno::LOOP.raw_os_error()) {
                    WorkspaceError::Denied
                } else {
                    io_error(&e)
                }
            })?;
        self.check_handle(&file, resolved)?;
        Ok(file)
    }

    /// Checks that an open handle lies inside the root.
    fn check_handle(&self, file: &File, opened_as: &Path) -> Result<(), WorkspaceError> {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            let _ = opened_as;
            let real = fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
                .map_err(|e| io_error(&e))?;
            if !real.starts_with(&*self.root) {
                tracing::warn!("workspace: an opened file resolved outside the root; refused");
                return Err(WorkspaceError::Denied);
            }
            Ok(())
        }
        #[cfg(not(target_os = "linux"))]
        {
            use std::os::unix::fs::MetadataExt;
            let held = file.metadata().map_err(|e| io_error(&e))?;
            let checked = fs::canonicalize(opened_as).map_err(|_| WorkspaceError::Denied)?;
            let now = fs::metadata(&checked).map_err(|e| io_error(&e))?;
            if !checked.starts_with(&*self.root)
                || held.dev() != now.dev()
                || held.ino() != now.ino()
            {
                return Err(WorkspaceError::Denied);
            }
            Ok(())
        }
    }

    fn read_blocking(&self, path: &str, max_bytes: u64) -> Result<Vec<u8>, WorkspaceError> {
        let resolved = self.resolve(path)?;
        let file = self.open_checked(&resolved)?;
        let meta = file.metadata().map_err(|e| io_error(&e))?;
        if !meta.is_file() {
            return Err(WorkspaceError::NotAFile);
        }
        if meta.len() > max_bytes {
            return Err(WorkspaceError::TooLarge { limit: max_bytes });
        }
        let mut bytes = Vec::new();
        file.take(max_bytes.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|e| io_error(&e))?;
        if bytes.len() as u64 > max_bytes {
            return Err(WorkspaceError::TooLarge { limit: max_bytes });
        }
        Ok(bytes)
    }

    fn list_blocking(
        &self,
        path: &str,
        max_depth: u32,
        max_entries: usize,
    ) -> Result<DirListing, WorkspaceError> {
        let resolved = self.resolve(path)?;
        let dir = self.open_checked(&resolved)?;
        if !dir.metadata().map_err(|e| io_error(&e))?.is_dir() {
            return Err(WorkspaceError::NotADirectory);
        }
        let mut listing = DirListing::default();
        walk(&resolved, "", max_depth, max_entries, &mut listing)?;
        Ok(listing)
    }

    fn write_blocking(&self, path: &str, content: &[u8]) -> Result<bool, WorkspaceError> {
        let resolved = self.resolve(path)?;
        let (Some(parent), Some(_)) = (resolved.parent(), resolved.file_name()) else {
            return Err(WorkspaceError::NotAFile);
        };
        if resolved == *self.root {
            return Err(WorkspaceError::NotAFile);
        }
        fs::create_dir_all(parent).map_err(|e| io_error(&e))?;
        // Re-check the folder now that it exists (a link may have been swapped in).
        let parent = fs::canonicalize(parent).map_err(|e| io_error(&e))?;
        if !parent.starts_with(&*self.root) {
            return Err(WorkspaceError::Denied);
        }
        let (existed, mode) = match fs::symlink_metadata(&resolved) {
            Ok(meta) if meta.is_dir() => return Err(WorkspaceError::NotAFile),
            Ok(meta) if meta.file_type().is_symlink() => return Err(WorkspaceError::Denied),
            Ok(meta) => (true, meta.permissions().mode() & 0o7777),
            Err(e) if e.kind() == io::ErrorKind::NotFound => (false, 0o644),
            Err(e) => return Err(io_error(&e)),
        };
        let mut tmp = tempfile::Builder::new()
            .prefix(".agent-write-")
            .tempfile_in(&parent)
            .map_err(|e| io_error(&e))?;
        self.check_handle(tmp.as_file(), tmp.path())?;
        tmp.write_all(content).map_err(|e| io_error(&e))?;
        tmp.as_file().sync_all().map_err(|e| io_error(&e))?;
        fs::set_permissions(tmp.path(), fs::Permissions::from_mode(mode))
            .map_err(|e| io_error(&e))?;
        tmp.persist(&resolved).map_err(|e| io_error(&e.error))?;
        Ok(existed)
    }
}

/// Depth-first, name-sorted walk that never follows symlinks.
fn walk(
    dir: &Path,
    prefix: &str,
    depth: u32,
    cap: usize,
    listing: &mut DirListing,
) -> Result<(), WorkspaceError> {
    let mut children: Vec<fs::DirEntry> = fs::read_dir(dir)
        .map_err(|e| io_error(&e))?
        .filter_map(Result::ok)
        .collect();
    children.sort_by_key(|e| e.file_name());
    for child in children {
        if listing.truncated {
            return Ok(());
        }
        if listing.entries.len() == cap {
            listing.truncated = true;
            return Ok(());
        }
        let name = child.file_name().to_string_lossy().into_owned();
        let rel = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        let Ok(kind) = child.file_type() else {
            continue;
        };
        let entry_kind = if kind.is_symlink() {
            EntryKind::Symlink
        } else if kind.is_dir() {
            EntryKind::Dir
        } else if kind.is_file() {
            EntryKind::File
        } else {
            EntryKind::Other
        };
        let size = if kind.is_file() {
            child.metadata().ok().map(|m| m.len())
        } else {
            None
        };
        listing.entries.push(DirEntry {
            path: rel.clone(),
            kind: entry_kind,
            size,
        });
        if kind.is_dir() && depth > 1 {
            walk(&child.path(), &rel, depth - 1, cap, listing)?;
        }
    }
    Ok(())
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, WorkspaceError> + Send + 'static,
) -> Result<T, WorkspaceError> {
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|_| Err(WorkspaceError::Io("the file task failed".to_owned())))
}

impl Workspace for LocalWorkspace {
    fn read(&self, path: String, max_bytes: u64) -> BoxFuture<'_, Result<Vec<u8>, WorkspaceError>> {
        let ws = self.clone();
        Box::pin(blocking(move || ws.read_blocking(&path, max_bytes)))
    }

    fn list(
        &self,
        path: String,
        max_depth: u32,
        max_entries: usize,
    ) -> BoxFuture<'_, Result<DirListing, WorkspaceError>> {
        let ws = self.clone();
        Box::pin(blocking(move || {
            ws.list_blocking(&path, max_depth, max_entries)
        }))
    }

    fn write(&self, path: String, content: Vec<u8>) -> BoxFuture<'_, Result<bool, WorkspaceError>> {
        let ws = self.clone();
        Box::pin(blocking(move || ws.write_blocking(&path, &content)))
    }
}
