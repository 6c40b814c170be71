//! `LocalWorkspace`: the real [`Workspace`], file IO confined to a sandbox folder.
//!
//! Every model path is first resolved as text against the canonical root, one
//! component at a time: `..` may not climb above the root, every existing symlink is
//! canonicalized and must land inside the root (dangling links and loops are refused),
//! and the components that do not exist yet are kept literally under the deepest
//! existing (checked) ancestor. Empty paths, absolute paths, `~`, backslashes, NUL
//! bytes and paths over 4096 bytes (or a component over 255) are refused outright.
//! Percent-encoded text (`%2e%2e%2f`) and Unicode look-alike separators (`∕`, `／`,
//! `․`) are ordinary file-name characters: they name files inside the root.
//!
//! That text check only chooses the path; the kernel enforces the boundary. The root
//! is held open as a handle (`O_PATH | O_DIRECTORY`) and every operation works on
//! handles beneath it, with the resolved path (which has no symlink and no `..` left):
//!
//! - reads and listings open with `openat2(root, path, RESOLVE_BENEATH |
//!   RESOLVE_NO_SYMLINKS)`, so a symlink swapped in after the check (anywhere on the
//!   path) fails the open instead of being followed. A file is first opened `O_PATH`
//!   and its type checked on the handle: only regular files are read (FIFOs, sockets
//!   and devices are refused without being opened for reading, so nothing blocks),
//!   then it is opened `O_RDONLY | O_NONBLOCK` and must be the same inode. A listing
//!   reads the directory through its handle and descends with `openat(dir, name,
//!   O_NOFOLLOW | O_DIRECTORY)`, never by path.
//! - writes walk the parent folders from the root handle one component at a time with
//!   `openat(.., O_NOFOLLOW | O_DIRECTORY)`, creating missing ones with `mkdirat` on
//!   the parent's handle; write a temporary file created `O_EXCL | O_NOFOLLOW` in the
//!   final folder's handle; `fchmod` it on its handle; and `renameat` it over the
//!   target relative to that same handle (a rename replaces the name, never follows a
//!   symlink and never writes into the inode of an existing file or hard link).
//!
//! Without `openat2` (Linux before 5.6, or a seccomp filter answering `ENOSYS`), the
//! same guarantee comes from walking the path one component at a time with
//! `openat(.., O_NOFOLLOW)` from the root handle; the switch is logged once.
//!
//! Protected paths ([`LocalWorkspace::with_protected`]): the agent's configuration
//! file, its lock file and its state folders can never be written through the tools.
//! Files are recognised by device and inode (so a hard link or a rename does not hide
//! them), folders by the device and inode of every component on the path being
//! written, and paths that do not exist yet by their parent folder's identity and
//! their name.
//!
//! What remains (see SECURITY.md): a file hard-linked into the workspace from outside
//! before the agent started is readable (it is a regular file beneath the root); a
//! folder held open while someone else moves it out of the root is still the folder
//! the operation works in.

use std::ffi::{OsStr, OsString};
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use ai_tools::capability::{DirEntry, DirListing, EntryKind, Workspace, WorkspaceError};
use futures::future::BoxFuture;
use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat};
use rustix::io::Errno;

/// Longest accepted path, in bytes.
pub const MAX_PATH_BYTES: usize = 4096;
/// Longest accepted path component, in bytes.
pub const MAX_COMPONENT_BYTES: usize = 255;

/// Flags of a handle used only to name and inspect (never to read) a file or folder.
#[cfg(any(target_os = "linux", target_os = "android"))]
const PROBE: OFlags = OFlags::PATH;
#[cfg(not(any(target_os = "linux", target_os = "android")))]
const PROBE: OFlags = OFlags::RDONLY.union(OFlags::NONBLOCK);

/// How many times a write tries a fresh temporary name.
const TEMP_ATTEMPTS: u32 = 32;

/// File IO rooted at a canonical sandbox folder, held open as a handle.
#[derive(Debug, Clone)]
pub struct LocalWorkspace {
    root: Arc<PathBuf>,
    root_fd: Arc<OwnedFd>,
    protected: Arc<Vec<PathBuf>>,
    /// The protected identities as they were when the paths were given: a protected
    /// file or folder renamed since is still recognised.
    protection: Arc<Protection>,
    use_openat2: Arc<AtomicBool>,
}

fn errno_error(error: Errno) -> WorkspaceError {
    match error {
        Errno::LOOP | Errno::XDEV | Errno::ACCESS | Errno::PERM | Errno::NAMETOOLONG => {
            WorkspaceError::Denied
        }
        Errno::NOENT | Errno::NOTDIR => WorkspaceError::NotFound,
        Errno::ISDIR => WorkspaceError::NotAFile,
        Errno::NXIO | Errno::NODEV | Errno::OPNOTSUPP => WorkspaceError::SpecialFile,
        other => WorkspaceError::Io(io::Error::from(other).kind().to_string()),
    }
}

fn io_error(error: &io::Error) -> WorkspaceError {
    match error.raw_os_error() {
        Some(code) => errno_error(Errno::from_raw_os_error(code)),
        None => WorkspaceError::Io(error.kind().to_string()),
    }
}

/// Device and inode: what a file or folder is, whatever it is called.
type Identity = (u64, u64);

#[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
fn identity(stat: &Stat) -> Identity {
    (stat.st_dev as u64, stat.st_ino as u64)
}

fn file_type(stat: &Stat) -> FileType {
    FileType::from_raw_mode(stat.st_mode)
}

/// The protected paths as identities: taken when the paths are given, and again for
/// each write (so a protected file created after binding is recognised too).
#[derive(Debug, Default, Clone)]
struct Protection {
    /// Existing protected folders: nothing beneath them may be written.
    dirs: Vec<Identity>,
    /// Existing protected files: never replaced, whatever name they go by.
    files: Vec<Identity>,
    /// Names in a folder that may not be created or replaced (protected paths that do
    /// not exist yet: the first missing component under the deepest existing folder;
    /// and the literal name of every protected path).
    names: Vec<(Identity, OsString)>,
    /// The workspace root itself lies inside a protected folder.
    everything: bool,
}

impl Protection {
    fn compute(root: &Path, paths: &[PathBuf]) -> Self {
        let mut protection = Self::default();
        for path in paths {
            protection.add(root, path);
        }
        protection
    }

    fn add(&mut self, root: &Path, path: &Path) {
        // The literal name: a protected path that is a symlink may not be replaced by
        // a file either.
        if let (Some(parent), Some(name)) = (path.parent(), path.file_name())
            && let Ok(meta) = fs::metadata(parent)
        {
            self.names
                .push(((meta.dev(), meta.ino()), name.to_os_string()));
        }
        match fs::canonicalize(path) {
            Ok(real) => {
                let Ok(meta) = fs::metadata(&real) else {
                    return;
                };
                if meta.is_dir() {
                    self.dirs.push((meta.dev(), meta.ino()));
                    if root.starts_with(&real) {
                        self.everything = true;
                    }
                } else {
                    self.files.push((meta.dev(), meta.ino()));
                }
                if let (Some(parent), Some(name)) = (real.parent(), real.file_name())
                    && let Ok(parent) = fs::metadata(parent)
                {
                    self.names
                        .push(((parent.dev(), parent.ino()), name.to_os_string()));
                }
            }
            Err(_) => {
                // Not there yet: protect the first missing component under the
                // deepest existing ancestor (the whole subtree it would start).
                let mut missing = path.to_path_buf();
                while let (Some(parent), Some(name)) = (missing.parent(), missing.file_name()) {
                    let name = name.to_os_string();
                    let parent = parent.to_path_buf();
                    if let Ok(real_parent) = fs::canonicalize(&parent) {
                        if let Ok(meta) = fs::metadata(&real_parent) {
                            self.names.push(((meta.dev(), meta.ino()), name));
                        }
                        return;
                    }
                    missing = parent;
                }
            }
        }
    }

    fn merge(&mut self, other: &Self) {
        self.dirs.extend_from_slice(&other.dirs);
        self.files.extend_from_slice(&other.files);
        self.names.extend(other.names.iter().cloned());
        self.everything |= other.everything;
    }

    fn check_dir(&self, stat: &Stat) -> Result<(), WorkspaceError> {
        if self.everything || self.dirs.contains(&identity(stat)) {
            return Err(WorkspaceError::Protected);
        }
        Ok(())
    }

    fn check_entry(&self, parent: &Stat, name: &OsStr) -> Result<(), WorkspaceError> {
        let id = identity(parent);
        if self.names.iter().any(|(p, n)| *p == id && n == name) {
            return Err(WorkspaceError::Protected);
        }
        Ok(())
    }

    fn check_file(&self, stat: &Stat) -> Result<(), WorkspaceError> {
        if self.files.contains(&identity(stat)) || self.dirs.contains(&identity(stat)) {
            return Err(WorkspaceError::Protected);
        }
        Ok(())
    }
}

/// `flags` plus `O_NOFOLLOW | O_CLOEXEC`, and `O_NOCTTY` unless it is an `O_PATH`
/// open (`openat2` refuses any other flag beside `O_PATH`).
fn with_open_flags(flags: OFlags) -> OFlags {
    let flags = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    #[cfg(any(target_os = "linux", target_os = "android"))]
    if flags.contains(OFlags::PATH) {
        return flags;
    }
    flags | OFlags::NOCTTY
}

/// Opens one component `name` (no `/`, not `..`) under `dir` without following a
/// symlink; a symlink there is `ELOOP`.
fn open_component(dir: BorrowedFd<'_>, name: &OsStr, flags: OFlags) -> Result<OwnedFd, Errno> {
    match rustix::fs::openat(dir, name, with_open_flags(flags), Mode::empty()) {
        Err(Errno::NOTDIR)
            if rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
                .is_ok_and(|st| file_type(&st) == FileType::Symlink) =>
        {
            Err(Errno::LOOP)
        }
        other => other,
    }
}

/// The normal components of a resolved relative path (which has no `..`).
fn components(rel: &Path) -> Result<Vec<&OsStr>, Errno> {
    rel.components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(Ok(name)),
            Component::CurDir => None,
            _ => Some(Err(Errno::XDEV)),
        })
        .collect()
}

/// Removes a temporary file when a write fails half-way.
struct TempFile<'a> {
    dir: BorrowedFd<'a>,
    name: Option<OsString>,
}

impl Drop for TempFile<'_> {
    fn drop(&mut self) {
        if let Some(name) = self.name.take() {
            let _ = rustix::fs::unlinkat(self.dir, &name, AtFlags::empty());
        }
    }
}

fn temp_name(attempt: u32) -> OsString {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    OsString::from(format!(
        ".agent-write-{}-{n}-{nanos:x}-{attempt}",
        std::process::id()
    ))
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
        let root_fd = rustix::fs::open(
            &root,
            PROBE | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Self {
            root: Arc::new(root),
            root_fd: Arc::new(root_fd),
            protected: Arc::new(Vec::new()),
            protection: Arc::new(Protection::default()),
            use_openat2: Arc::new(AtomicBool::new(cfg!(any(
                target_os = "linux",
                target_os = "android"
            )))),
        })
    }

    /// The same workspace with `paths` protected from every write and edit through
    /// the tools: files (the active config, its lock file) and folders (the agent's
    /// state). Paths may lie inside or outside the root and need not exist yet.
    pub fn with_protected<I, P>(mut self, paths: I) -> Self
    where
        I: IntoIterator<Item = P>,
        P: Into<PathBuf>,
    {
        let mut all: Vec<PathBuf> = self.protected.as_ref().clone();
        all.extend(paths.into_iter().map(Into::into));
        self.protection = Arc::new(Protection::compute(&self.root, &all));
        self.protected = Arc::new(all);
        self
    }

    /// The same workspace resolving paths without `openat2`, by the per-component
    /// walk it falls back to when the kernel lacks `openat2` (for tests of that path).
    pub fn without_openat2(self) -> Self {
        self.use_openat2.store(false, Ordering::Relaxed);
        self
    }

    /// The canonical root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The protected paths, as given.
    pub fn protected(&self) -> &[PathBuf] {
        &self.protected
    }

    /// Resolves a model path to an absolute path inside the root (see the module
    /// docs). The result may not exist yet. Operations do not trust this path: they
    /// re-resolve it beneath the root handle.
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

    /// The model path resolved and made relative to the root (empty for the root).
    fn relative(&self, path: &str) -> Result<PathBuf, WorkspaceError> {
        let resolved = self.resolve(path)?;
        resolved
            .strip_prefix(&*self.root)
            .map(Path::to_path_buf)
            .map_err(|_| WorkspaceError::Denied)
    }

    /// Opens `rel` (relative, without `..` or symlinks) beneath the root handle; any
    /// symlink on the way, even one swapped in after the check, fails with `ELOOP`.
    fn open_beneath(&self, rel: &Path, flags: OFlags) -> Result<OwnedFd, Errno> {
        let flags = with_open_flags(flags);
        let rel = if rel.as_os_str().is_empty() {
            Path::new(".")
        } else {
            rel
        };
        #[cfg(any(target_os = "linux", target_os = "android"))]
        if self.use_openat2.load(Ordering::Relaxed) {
            use rustix::fs::ResolveFlags;
            let mut attempts = 0;
            loop {
                match rustix::fs::openat2(
                    &*self.root_fd,
                    rel,
                    flags,
                    Mode::empty(),
                    ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS,
                ) {
                    // A concurrent rename made the kernel unsure: try again.
                    Err(Errno::AGAIN) if attempts < 3 => attempts += 1,
                    Err(Errno::NOSYS) => {
                        self.use_openat2.store(false, Ordering::Relaxed);
                        tracing::warn!(
                            "workspace: openat2 is unavailable; resolving paths one component at a time"
                        );
                        break;
                    }
                    other => return other,
                }
            }
        }
        self.walk_open(rel, flags)
    }

    /// The fallback of [`Self::open_beneath`]: one `openat(O_NOFOLLOW)` per
    /// component from the root handle.
    fn walk_open(&self, rel: &Path, flags: OFlags) -> Result<OwnedFd, Errno> {
        let names = components(rel)?;
        let Some((last, parents)) = names.split_last() else {
            return rustix::fs::openat(&*self.root_fd, ".", flags, Mode::empty());
        };
        let mut dir: Option<OwnedFd> = None;
        for name in parents {
            let at = dir.as_ref().map_or(self.root_fd.as_fd(), AsFd::as_fd);
            dir = Some(open_component(at, name, PROBE | OFlags::DIRECTORY)?);
        }
        let at = dir.as_ref().map_or(self.root_fd.as_fd(), AsFd::as_fd);
        open_component(at, last, flags)
    }

    /// Opens a resolved path (inside the root) for reading, beneath the root handle
    /// and without following any symlink.
    pub fn open_checked(&self, resolved: &Path) -> Result<File, WorkspaceError> {
        let rel = resolved
            .strip_prefix(&*self.root)
            .map_err(|_| WorkspaceError::Denied)?;
        let fd = self
            .open_beneath(rel, OFlags::RDONLY | OFlags::NONBLOCK)
            .map_err(errno_error)?;
        Ok(File::from(fd))
    }

    fn read_blocking(&self, path: &str, max_bytes: u64) -> Result<Vec<u8>, WorkspaceError> {
        let rel = self.relative(path)?;
        let probe = self.open_beneath(&rel, PROBE).map_err(errno_error)?;
        let seen = rustix::fs::fstat(&probe).map_err(errno_error)?;
        match file_type(&seen) {
            FileType::RegularFile => {}
            FileType::Directory => return Err(WorkspaceError::NotAFile),
            FileType::Symlink => return Err(WorkspaceError::Denied),
            _ => return Err(WorkspaceError::SpecialFile),
        }
        if u64::try_from(seen.st_size).unwrap_or(0) > max_bytes {
            return Err(WorkspaceError::TooLarge { limit: max_bytes });
        }
        let fd = self
            .open_beneath(&rel, OFlags::RDONLY | OFlags::NONBLOCK)
            .map_err(errno_error)?;
        let held = rustix::fs::fstat(&fd).map_err(errno_error)?;
        if file_type(&held) != FileType::RegularFile || identity(&held) != identity(&seen) {
            tracing::warn!("workspace: the file changed between check and open; refused");
            return Err(WorkspaceError::Denied);
        }
        let mut bytes = Vec::new();
        File::from(fd)
            .take(max_bytes.saturating_add(1))
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
        let rel = self.relative(path)?;
        let probe = self.open_beneath(&rel, PROBE).map_err(errno_error)?;
        let seen = rustix::fs::fstat(&probe).map_err(errno_error)?;
        match file_type(&seen) {
            FileType::Directory => {}
            FileType::Symlink => return Err(WorkspaceError::Denied),
            _ => return Err(WorkspaceError::NotADirectory),
        }
        let dir = rustix::fs::openat(
            &probe,
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(errno_error)?;
        let mut listing = DirListing::default();
        walk(dir, "", max_depth, max_entries, &mut listing)?;
        Ok(listing)
    }

    fn write_blocking(&self, path: &str, content: &[u8]) -> Result<bool, WorkspaceError> {
        let rel = self.relative(path)?;
        let names = components(&rel).map_err(errno_error)?;
        let Some((name, parents)) = names.split_last() else {
            return Err(WorkspaceError::NotAFile);
        };
        let mut protection = Protection::compute(&self.root, &self.protected);
        protection.merge(&self.protection);
        // Walk (and create) the parent folders on handles, from the root.
        let mut dir: OwnedFd = rustix::fs::openat(
            &*self.root_fd,
            ".",
            PROBE | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(errno_error)?;
        let mut dir_stat = rustix::fs::fstat(&dir).map_err(errno_error)?;
        protection.check_dir(&dir_stat)?;
        for component in parents {
            protection.check_entry(&dir_stat, component)?;
            let next = match open_component(dir.as_fd(), component, PROBE | OFlags::DIRECTORY) {
                Ok(fd) => fd,
                Err(Errno::NOENT) => {
                    match rustix::fs::mkdirat(&dir, *component, Mode::from_raw_mode(0o777)) {
                        Ok(()) | Err(Errno::EXIST) => {}
                        Err(e) => return Err(errno_error(e)),
                    }
                    open_component(dir.as_fd(), component, PROBE | OFlags::DIRECTORY)
                        .map_err(errno_error)?
                }
                Err(Errno::NOTDIR) => {
                    return Err(WorkspaceError::Io(
                        "a parent of the path is not a folder".to_owned(),
                    ));
                }
                Err(e) => return Err(errno_error(e)),
            };
            dir_stat = rustix::fs::fstat(&next).map_err(errno_error)?;
            protection.check_dir(&dir_stat)?;
            dir = next;
        }
        // The folder handle must be readable-writable for *at calls that create files:
        // an O_PATH handle works as the directory of openat/renameat/unlinkat.
        protection.check_entry(&dir_stat, name)?;
        let (existed, mode) = match rustix::fs::statat(&dir, *name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => match file_type(&st) {
                FileType::RegularFile => {
                    protection.check_file(&st)?;
                    (
                        true,
                        Mode::from_raw_mode(st.st_mode) & Mode::from_raw_mode(0o7777),
                    )
                }
                FileType::Directory => return Err(WorkspaceError::NotAFile),
                FileType::Symlink => return Err(WorkspaceError::Denied),
                _ => return Err(WorkspaceError::SpecialFile),
            },
            Err(Errno::NOENT) => (false, Mode::from_raw_mode(0o644)),
            Err(e) => return Err(errno_error(e)),
        };
        let mut temp = TempFile {
            dir: dir.as_fd(),
            name: None,
        };
        let mut file = None;
        for attempt in 0..TEMP_ATTEMPTS {
            let candidate = temp_name(attempt);
            match rustix::fs::openat(
                &dir,
                &candidate,
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o600),
            ) {
                Ok(fd) => {
                    temp.name = Some(candidate);
                    file = Some(File::from(fd));
                    break;
                }
                Err(Errno::EXIST) => {}
                Err(e) => return Err(errno_error(e)),
            }
        }
        let (Some(mut file), Some(temp_name)) = (file, temp.name.clone()) else {
            return Err(WorkspaceError::Io("no free temporary file name".to_owned()));
        };
        file.write_all(content).map_err(|e| io_error(&e))?;
        file.sync_all().map_err(|e| io_error(&e))?;
        rustix::fs::fchmod(&file, mode).map_err(errno_error)?;
        rustix::fs::renameat(&dir, &temp_name, &dir, *name).map_err(|e| match e {
            Errno::ISDIR | Errno::NOTEMPTY | Errno::EXIST => WorkspaceError::NotAFile,
            e => errno_error(e),
        })?;
        temp.name = None;
        Ok(existed)
    }
}

fn entry_kind(kind: FileType) -> EntryKind {
    match kind {
        FileType::Symlink => EntryKind::Symlink,
        FileType::Directory => EntryKind::Dir,
        FileType::RegularFile => EntryKind::File,
        _ => EntryKind::Other,
    }
}

/// Depth-first, name-sorted walk on directory handles that never follows symlinks:
/// entries are inspected with `fstatat(dir, name, AT_SYMLINK_NOFOLLOW)` and
/// subfolders opened with `openat(dir, name, O_NOFOLLOW | O_DIRECTORY)`.
fn walk(
    dir: OwnedFd,
    prefix: &str,
    depth: u32,
    cap: usize,
    listing: &mut DirListing,
) -> Result<(), WorkspaceError> {
    let mut reader = rustix::fs::Dir::new(dir).map_err(errno_error)?;
    let mut names: Vec<OsString> = Vec::new();
    while let Some(entry) = reader.read() {
        let Ok(entry) = entry else {
            break;
        };
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." {
            names.push(OsStr::from_bytes(name).to_os_string());
        }
    }
    names.sort();
    let dir = reader.fd().map_err(errno_error)?;
    for name in names {
        if listing.truncated {
            return Ok(());
        }
        if listing.entries.len() == cap {
            listing.truncated = true;
            return Ok(());
        }
        let Ok(stat) = rustix::fs::statat(dir, &name, AtFlags::SYMLINK_NOFOLLOW) else {
            continue;
        };
        let kind = file_type(&stat);
        let shown = name.to_string_lossy();
        let rel = if prefix.is_empty() {
            shown.into_owned()
        } else {
            format!("{prefix}/{shown}")
        };
        listing.entries.push(DirEntry {
            path: rel.clone(),
            kind: entry_kind(kind),
            size: (kind == FileType::RegularFile).then(|| u64::try_from(stat.st_size).unwrap_or(0)),
        });
        if kind == FileType::Directory && depth > 1 {
            // A folder swapped for a symlink since the stat fails here: not listed.
            if let Ok(sub) = open_component(dir, &name, OFlags::RDONLY | OFlags::DIRECTORY) {
                walk(sub, &rel, depth - 1, cap, listing)?;
            }
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
