//! A SQLite store's files are its user's alone: the database holds every
//! transcript, tool arguments and file contents included.
//!
//! A folder the store creates is made `0700` and the database file `0600`
//! before SQLite opens it (SQLite gives its `-wal` and `-shm` files the
//! database file's mode). Files found looser (a store made by an earlier
//! version, or by hand) are tightened, with a warning: the store, its `-wal`
//! and `-shm` files, and the folder when it is the store's own (one it
//! created, or one the caller marks as such).

use std::path::Path;

use crate::error::StoreError;

/// The mode of the store's folder.
const FOLDER_MODE: u32 = 0o700;
/// The mode of the database and its `-wal` and `-shm` files.
const FILE_MODE: u32 = 0o600;

/// What [`make_private`] did to files it found too open, for the caller to
/// say (each entry: the path and its mode before).
pub(crate) type Tightened = Vec<(std::path::PathBuf, u32)>;

/// Creates `path`'s folder (`0700`) and the database file (`0600`) when
/// missing, and tightens what it finds looser: the database, its `-wal` and
/// `-shm` files, and the folder when `own_folder` says it is the store's.
pub(crate) fn make_private(path: &Path, own_folder: bool) -> Result<Tightened, StoreError> {
    let mut tightened = Vec::new();
    let failed = |what: &Path, e: std::io::Error| {
        StoreError::InvalidUrl(format!("cannot prepare {}: {e}", what.display()))
    };
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        let created = create_folder(parent).map_err(|e| failed(parent, e))?;
        if own_folder && !created {
            tighten(parent, FOLDER_MODE, &mut tightened).map_err(|e| failed(parent, e))?;
        }
    }
    create_file(path).map_err(|e| failed(path, e))?;
    let mut sidecars = vec![path.to_owned()];
    for suffix in ["-wal", "-shm", "-journal"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        sidecars.push(name.into());
    }
    for file in &sidecars {
        match tighten(file, FILE_MODE, &mut tightened) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(failed(file, e)),
        }
    }
    for (path, mode) in &tightened {
        tracing::warn!(
            path = %path.display(),
            mode = format!("{mode:o}"),
            "the run store's file was readable by other accounts; made private to its user"
        );
    }
    Ok(tightened)
}

/// Creates `folder` (and its missing parents) `0700`; `true` when it was
/// missing.
#[cfg(unix)]
fn create_folder(folder: &Path) -> std::io::Result<bool> {
    use std::os::unix::fs::DirBuilderExt;
    if folder.is_dir() {
        return Ok(false);
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(FOLDER_MODE)
        .create(folder)?;
    Ok(true)
}

#[cfg(not(unix))]
fn create_folder(folder: &Path) -> std::io::Result<bool> {
    if folder.is_dir() {
        return Ok(false);
    }
    std::fs::create_dir_all(folder)?;
    Ok(true)
}

/// Creates the database file `0600` when it is missing (an empty file is an
/// empty SQLite database), never following a symlink in its place.
#[cfg(unix)]
fn create_file(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(not(unix))]
fn create_file(_path: &Path) -> std::io::Result<()> {
    Ok(())
}

/// Takes group and other permissions off `path` when it has any.
#[cfg(unix)]
fn tighten(path: &Path, mode: u32, tightened: &mut Tightened) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let metadata = std::fs::metadata(path)?;
    let current = metadata.permissions().mode() & 0o7777;
    if current & 0o077 != 0 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
        tightened.push((path.to_owned(), current));
    }
    Ok(())
}

#[cfg(not(unix))]
fn tighten(_path: &Path, _mode: u32, _tightened: &mut Tightened) -> std::io::Result<()> {
    Ok(())
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).map_or(0, |m| m.permissions().mode() & 0o7777)
    }

    #[test]
    fn a_new_store_is_created_private() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("agent/store.db");
        assert!(make_private(&db, true).unwrap().is_empty());
        assert_eq!(mode(&dir.path().join("agent")), 0o700);
        assert_eq!(mode(&db), 0o600);
    }

    #[test]
    fn a_loose_store_is_tightened_and_said() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("agent");
        std::fs::create_dir(&folder).unwrap();
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o755)).unwrap();
        let db = folder.join("store.db");
        for file in [&db, &folder.join("store.db-wal")] {
            std::fs::write(file, b"").unwrap();
            std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        let tightened = make_private(&db, true).unwrap();
        assert_eq!(tightened.len(), 3, "{tightened:?}");
        assert_eq!(mode(&folder), 0o700);
        assert_eq!(mode(&db), 0o600);
        assert_eq!(mode(&folder.join("store.db-wal")), 0o600);
    }

    #[test]
    fn a_folder_the_store_does_not_own_is_left_as_it_is() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let db = dir.path().join("project.db");
        make_private(&db, false).unwrap();
        assert_eq!(mode(dir.path()), 0o755);
        assert_eq!(mode(&db), 0o600);
    }
}
