//! A repository in a local directory, reached only through a cap-std handle
//! on that directory: nothing outside it can be read or deleted.

use std::io::ErrorKind;
use std::path::Path;
use std::sync::OnceLock;

use cap_std::ambient_authority;
use cap_std::fs::Dir;

use super::{FileInfo, Kind, Removal, Store, StoreError, checked_name};

/// A local repository directory.
pub struct LocalStore {
    dir: Dir,
    /// `locks/`, opened on first use, so that reading and deleting a lock
    /// resolve one path component, not two.
    locks: OnceLock<Dir>,
    display: String,
}

impl LocalStore {
    /// Opens the repository directory at `path`.
    pub fn open(path: &Path) -> Result<LocalStore, StoreError> {
        let display = path.display().to_string();
        let dir = Dir::open_ambient_dir(path, ambient_authority()).map_err(|e| match e.kind() {
            ErrorKind::NotFound => StoreError::NotFound(format!("directory {display}")),
            _ => StoreError::Other(format!("cannot open directory {display}: {e}")),
        })?;
        Ok(LocalStore {
            dir,
            locks: OnceLock::new(),
            display,
        })
    }

    /// The `locks/` directory handle.
    fn locks(&self) -> Result<&Dir, StoreError> {
        if let Some(dir) = self.locks.get() {
            return Ok(dir);
        }
        let dir = self
            .dir
            .open_dir("locks")
            .map_err(|e| self.error("locks", &e))?;
        Ok(self.locks.get_or_init(|| dir))
    }

    fn error(&self, what: &str, e: &std::io::Error) -> StoreError {
        match e.kind() {
            ErrorKind::NotFound => StoreError::NotFound(format!("{}/{what}", self.display)),
            _ => StoreError::Other(format!("{}/{what}: {e}", self.display)),
        }
    }
}

impl Store for LocalStore {
    fn read(&self, kind: Kind, name: &str) -> Result<Vec<u8>, StoreError> {
        let path = checked_name(kind, name)?;
        match kind {
            Kind::Lock => self.locks()?.read(name),
            _ => self.dir.read(&path),
        }
        .map_err(|e| self.error(&path, &e))
    }

    fn list(&self, kind: Kind) -> Result<Vec<FileInfo>, StoreError> {
        let entries = self
            .dir
            .read_dir(kind.dir())
            .map_err(|e| self.error(kind.dir(), &e))?;
        let mut files = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| self.error(kind.dir(), &e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            // restic writes nothing but ids here; anything else (editor
            // droppings, temp files) is not a lock and is not ours to judge.
            if !super::super::lockfile::is_valid_id(&name) {
                continue;
            }
            // No stat here: a read gives the size, and only a file that
            // then fails to read would need it (reported as 0).
            files.push(FileInfo { name, size: 0 });
        }
        Ok(files)
    }

    fn remove_lock(&self, id: &str) -> Result<Removal, StoreError> {
        let path = checked_name(Kind::Lock, id)?;
        match self.locks()?.remove_file(id) {
            Ok(()) => Ok(Removal::Removed),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(Removal::AlreadyGone),
            Err(e) => Err(self.error(&path, &e)),
        }
    }
}
