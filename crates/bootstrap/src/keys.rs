//! The key file that the servers and workers on one run store share: the key
//! that seals what crosses a durable engine (`agent_durable::seal`) and from
//! which the approval key is derived. It is never in the store (whoever reads
//! a store row would hold it): `[store] key_file`, by default
//! `<data home>/agent/server.key`, readable by its user alone.
//!
//! The file holds one key a line (64 hex digits), the sealing one first;
//! blank lines and `#` comments are ignored. Rotating: put a new line first
//! (`agent keys rotate` does), restart every server and worker, and delete
//! the old line once no sealed run or approval under it is waiting (ten
//! minutes for a submission; a paused run waits on approvals sealed when they
//! were answered, so one hour covers the approvals' own lifetime).
//!
//! Created when missing: `0600` in a `0700` folder, written to a temporary
//! file and linked into place, so two processes starting at once agree on one
//! key. A file found readable by others is tightened, with a warning, and a
//! symlink in its place is refused.

use std::io::Write;
use std::path::{Path, PathBuf};

use agent_durable::seal::DurableKey;

use crate::config::AgentConfig;
use crate::trust::UserDirs;

/// The key file's name in the data folder.
pub const KEY_FILE: &str = "server.key";

/// The path of `config`'s key file.
pub fn key_path(config: &AgentConfig) -> Result<PathBuf, String> {
    match &config.file.store.key_file {
        Some(path) => Ok(config.workspace_root.join(path)),
        None => UserDirs::from_env()
            .agent_data_dir()
            .map(|d| d.join(KEY_FILE))
            .ok_or_else(|| {
                "no data folder for the key file (set HOME or XDG_DATA_HOME, or [store] key_file)"
                    .to_owned()
            }),
    }
}

/// The keys of `config`'s key file, made when missing.
pub fn load(config: &AgentConfig) -> Result<DurableKey, String> {
    load_from(&key_path(config)?)
}

/// The keys in `path`, made when missing (see the module docs).
pub fn load_from(path: &Path) -> Result<DurableKey, String> {
    for _ in 0..50 {
        match read_private(path) {
            Ok(text) if !text.trim().is_empty() => {
                return DurableKey::parse(&text)
                    .map_err(|e| format!("the key file {}: {e}", path.display()));
            }
            // Another process is between creating it and writing it.
            Ok(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => create(path)?,
            Err(e) => return Err(format!("cannot read the key file {}: {e}", path.display())),
        }
    }
    Err(format!("the key file {} stays empty", path.display()))
}

/// Puts a fresh key first in the key file (the old ones still open what they
/// sealed); returns the file's path.
pub fn rotate(config: &AgentConfig) -> Result<PathBuf, String> {
    let path = key_path(config)?;
    let old = match read_private(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(format!("cannot read the key file {}: {e}", path.display())),
    };
    let fresh = DurableKey::generate_line().map_err(|e| e.to_string())?;
    let text = format!(
        "# The sealing key first; older keys below still open what they sealed.\n{fresh}\n{}",
        old.lines()
            .filter(|l| !l.trim().starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n")
    );
    replace(&path, &text)?;
    Ok(path)
}

/// Writes `text` to a new file `path` only its user reads (refused when
/// `path` exists).
pub fn write_new_private(path: &Path, text: &str) -> Result<(), String> {
    let mut file =
        private_file(path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// The file's text, refusing a symlink and tightening a file others can read.
#[cfg(unix)]
fn read_private(path: &Path) -> std::io::Result<String> {
    use rustix::fs::{Mode, OFlags};
    use std::io::Read;
    use std::os::unix::fs::PermissionsExt;
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut file = std::fs::File::from(rustix::fs::open(path, flags, Mode::empty())?);
    let mode = file.metadata()?.permissions().mode() & 0o7777;
    if mode & 0o077 != 0 {
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        eprintln!(
            "agent: warning: the key file {} was readable by other accounts (mode {mode:o}); made private to you. Anyone who read it can seal runs: rotate it (agent keys rotate)",
            path.display()
        );
    }
    let mut text = String::new();
    file.read_to_string(&mut text)?;
    Ok(text)
}

#[cfg(not(unix))]
fn read_private(path: &Path) -> std::io::Result<String> {
    std::fs::read_to_string(path)
}

/// Makes the key file with one fresh key, unless another process made it
/// first.
fn create(path: &Path) -> Result<(), String> {
    let line = DurableKey::generate_line().map_err(|e| e.to_string())?;
    let text = format!(
        "# The key the servers and workers on this run store share. Keep it private.\n{line}\n"
    );
    let temporary = write_temporary(path, &text)?;
    let linked = std::fs::hard_link(&temporary, path);
    let _ = std::fs::remove_file(&temporary);
    match linked {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(format!(
            "cannot create the key file {}: {e}",
            path.display()
        )),
    }
}

/// Replaces the key file with `text` (atomically).
fn replace(path: &Path, text: &str) -> Result<(), String> {
    let temporary = write_temporary(path, text)?;
    std::fs::rename(&temporary, path).map_err(|e| {
        let _ = std::fs::remove_file(&temporary);
        format!("cannot write the key file {}: {e}", path.display())
    })
}

/// `text` in a new private file beside `path`; its path.
fn write_temporary(path: &Path, text: &str) -> Result<PathBuf, String> {
    let failed = |e: std::io::Error| format!("cannot write beside {}: {e}", path.display());
    let folder = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    create_private_folder(folder).map_err(failed)?;
    let suffix = DurableKey::generate_line().map_err(|e| e.to_string())?;
    let temporary = folder.join(format!(".{KEY_FILE}.{}", &suffix[..16]));
    let mut file = private_file(&temporary).map_err(failed)?;
    file.write_all(text.as_bytes()).map_err(failed)?;
    file.sync_all().map_err(failed)?;
    Ok(temporary)
}

#[cfg(unix)]
fn create_private_folder(folder: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    if folder.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(folder)
}

#[cfg(not(unix))]
fn create_private_folder(folder: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(folder)
}

#[cfg(unix)]
fn private_file(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

#[cfg(not(unix))]
fn private_file(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use agent_durable::seal::{Purpose, Sealed};
    use std::os::unix::fs::PermissionsExt;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).map_or(0, |m| m.permissions().mode() & 0o7777)
    }

    #[test]
    fn a_missing_key_file_is_made_private_and_read_back_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent").join(KEY_FILE);
        let first = load_from(&path).unwrap();
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(&dir.path().join("agent")), 0o700);
        let sealed = Sealed::seal(&"x", Purpose::Run, &first).unwrap();
        let again = load_from(&path).unwrap();
        assert_eq!(sealed.open::<String>(Purpose::Run, &again).unwrap(), "x");
    }

    #[test]
    fn a_loose_key_file_is_tightened_and_a_symlink_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(KEY_FILE);
        std::fs::write(&path, format!("{}\n", "ab".repeat(32))).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        load_from(&path).unwrap();
        assert_eq!(mode(&path), 0o600);
        let link = dir.path().join("link.key");
        std::os::unix::fs::symlink(&path, &link).unwrap();
        assert!(load_from(&link).is_err(), "a symlink is not followed");
    }

    #[test]
    fn processes_starting_together_agree_on_one_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(KEY_FILE);
        let keys: Vec<DurableKey> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..8)
                .map(|_| scope.spawn(|| load_from(&path).unwrap()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let sealed = Sealed::seal(&1, Purpose::Step, &keys[0]).unwrap();
        for key in &keys {
            assert_eq!(sealed.open::<i32>(Purpose::Step, key), Ok(1));
        }
    }
}
