//! Files attached from the command line (`agent chat --attach`, `/attach`):
//! regular files only, read with a bound.
//!
//! A repository the user runs the agent in chooses what its paths are: a
//! `README.md` that is a symlink to `~/.ssh/id_rsa`, a FIFO that blocks the
//! reader, `/dev/zero`, a `/proc` file whose size says nothing. So a path is
//! opened without following a symlink as its last component, and refused when
//! what was opened is not where the path lexically leads (a symlinked folder
//! on the way), is not a regular file, or lives on `/proc` or `/sys`. Its size
//! is checked before reading, and reading stops at the limit whatever the
//! size said.

use std::io::Read;
use std::path::{Component, Path, PathBuf};

use ai_core::message::Attachment;

/// `paths` read as attachments of at most `limit` bytes each; the error names
/// the path and why.
pub(crate) fn read_attachments(paths: &[PathBuf], limit: usize) -> Result<Vec<Attachment>, String> {
    paths
        .iter()
        .map(|path| read_attachment(path, limit))
        .collect()
}

/// One attachment (see the module docs).
pub(crate) fn read_attachment(path: &Path, limit: usize) -> Result<Attachment, String> {
    let refuse = |why: String| format!("cannot attach {}: {why}", path.display());
    let name = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let file = open_regular(path).map_err(refuse)?;
    let size = file.metadata().map_err(|e| refuse(e.to_string()))?.len();
    if size > limit as u64 {
        return Err(refuse(format!(
            "it is {size} bytes, over the limit of {limit} ([server] max_file_bytes)"
        )));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    file.take(limit as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| refuse(e.to_string()))?;
    if bytes.len() > limit {
        return Err(refuse(format!(
            "it grew past the limit of {limit} bytes while being read"
        )));
    }
    Attachment::from_bytes(&name, None, &bytes, limit).map_err(|e| refuse(e.to_string()))
}

/// Opens `path` if it is a regular file reached without a symlink and not on a
/// kernel filesystem.
#[cfg(target_os = "linux")]
fn open_regular(path: &Path) -> Result<std::fs::File, String> {
    use rustix::fs::{Mode, OFlags};
    let flags =
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY;
    let file = match rustix::fs::open(path, flags, Mode::empty()) {
        Ok(fd) => std::fs::File::from(fd),
        Err(rustix::io::Errno::LOOP) => {
            return Err("it is a symlink; attach the file it points to by its own path".into());
        }
        Err(e) => return Err(std::io::Error::from(e).to_string()),
    };
    let metadata = file.metadata().map_err(|e| e.to_string())?;
    if !metadata.is_file() {
        return Err(
            "only regular files can be attached (not a FIFO, socket, device or folder)".into(),
        );
    }
    let kind = rustix::fs::fstatfs(&file).map_err(|e| std::io::Error::from(e).to_string())?;
    // PROC_SUPER_MAGIC, SYSFS_MAGIC: their files' sizes say nothing of their
    // content, and what they hold is the process's own.
    if matches!(kind.f_type as u64, 0x9fa0 | 0x6265_6572) {
        return Err("files of /proc and /sys cannot be attached".into());
    }
    if let Some(lexical) = lexical_absolute(path)
        && let Ok(opened) = std::fs::read_link(format!("/proc/self/fd/{}", {
            use std::os::fd::AsRawFd;
            file.as_raw_fd()
        }))
        && opened != lexical
    {
        return Err(format!(
            "it is reached through a symlink (it is {}); attach that file by its own path",
            opened.display()
        ));
    }
    Ok(file)
}

#[cfg(not(target_os = "linux"))]
fn open_regular(path: &Path) -> Result<std::fs::File, String> {
    if std::fs::symlink_metadata(path)
        .map_err(|e| e.to_string())?
        .file_type()
        .is_symlink()
    {
        return Err("it is a symlink; attach the file it points to by its own path".into());
    }
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    if !file.metadata().map_err(|e| e.to_string())?.is_file() {
        return Err("only regular files can be attached".into());
    }
    Ok(file)
}

/// Where a relative `path` leads from the current folder (itself taken as
/// its canonical form) with `.` and `..` taken lexically: where it leads when
/// none of its components is a symlink. `None` for an absolute path: one the
/// user typed whole is checked only for a symlink as its last component.
fn lexical_absolute(path: &Path) -> Option<PathBuf> {
    if path.is_absolute() {
        return None;
    }
    let mut out = std::fs::canonicalize(std::env::current_dir().ok()?).ok()?;
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    Some(out)
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// `path` (absolute) relative to the current folder (`..` as needed).
    fn pathdiff(path: &Path) -> Option<PathBuf> {
        let cwd = std::fs::canonicalize(std::env::current_dir().ok()?).ok()?;
        let depth = cwd.components().count().saturating_sub(1);
        let mut out: PathBuf = std::iter::repeat_n("..", depth).collect();
        out.push(path.strip_prefix("/").ok()?);
        Some(out)
    }

    #[test]
    fn a_regular_file_is_read_and_the_limit_holds() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes.txt");
        std::fs::write(&path, "hello").unwrap();
        assert!(read_attachment(&path, 100).is_ok());
        let error = read_attachment(&path, 3).unwrap_err();
        assert!(error.contains("over the limit"), "{error}");
    }

    #[test]
    fn symlinks_fifos_devices_and_proc_files_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "PRIVATE KEY").unwrap();
        let inside = dir.path().join("repo");
        std::fs::create_dir(&inside).unwrap();
        let link = inside.join("README.md");
        std::os::unix::fs::symlink(&secret, &link).unwrap();
        let error = read_attachment(&link, 1_000).unwrap_err();
        assert!(error.contains("symlink"), "{error}");
        // A symlinked folder on the way of a relative path.
        let folder_link = inside.join("docs");
        std::os::unix::fs::symlink(dir.path(), &folder_link).unwrap();
        let relative = pathdiff(&folder_link.join("secret")).unwrap();
        let error = read_attachment(&relative, 1_000).unwrap_err();
        assert!(error.contains("symlink"), "{error}");
        let fifo = dir.path().join("pipe");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let error = read_attachment(&fifo, 1_000).unwrap_err();
        assert!(error.contains("regular"), "{error}");
        let error = read_attachment(Path::new("/dev/zero"), 1 << 30).unwrap_err();
        assert!(error.contains("regular"), "{error}");
        let error = read_attachment(Path::new("/proc/self/environ"), 1 << 20).unwrap_err();
        assert!(error.contains("/proc"), "{error}");
    }
}
