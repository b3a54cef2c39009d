//! A repository in a local directory, reached only through a handle on that
//! directory: nothing outside it can be read or deleted. Inside it, no
//! symbolic link is ever followed (restic creates none): `keys/`, `locks/`,
//! `config` and each lock file are opened with `O_NOFOLLOW` one component at
//! a time, only regular files are read, and reads are bounded. A FIFO named
//! like a lock is refused without waiting for a writer.

use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::OnceLock;

use cap_std::ambient_authority;
use cap_std::fs::Dir;
use std::io::Write as _;

use rustix::fs::{
    AtFlags, FileType, Mode, OFlags, fsync, mkdirat, openat, renameat, statat, unlinkat,
};
use rustix::io::Errno;

use super::{
    Backend, BackendError, Capabilities, EntryKind, FileInfo, Kind, Removal, Scheme, Target,
    checked_listing, checked_name, checked_read_name,
};
use crate::files::{ReadError, check_regular, read_open_file};
use crate::repo::backend::location_text::LocationError;
use crate::repo::lockfile;

/// The absolute, canonical path of a local location (as given when it
/// cannot be resolved).
pub(super) fn canonical(location: &str) -> String {
    let path = location.strip_prefix("local:").unwrap_or(location);
    std::fs::canonicalize(path)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| location.to_owned())
}

/// `local:PATH`, or a path with no known scheme.
pub const SCHEME: Scheme = Scheme {
    name: "local",
    redact: crate::repo::backend::location_text::redact_userinfo,
    parse: |location| {
        let path = location.strip_prefix("local:").unwrap_or(location);
        if path.is_empty() {
            return Err(LocationError::Invalid("`local:` names no directory".into()));
        }
        Ok(path.to_owned())
    },
    open: |target: &Target<'_>| {
        let path = Path::new(target.location);
        Ok(Box::new(LocalBackend::open(path, target.shown)?))
    },
    modifies: true,
};

/// A local repository directory.
pub struct LocalBackend {
    dir: Dir,
    /// `locks/`, opened on first use and kept (while there is none, each
    /// use looks again: restic treats a missing `locks/` as no locks).
    locks: OnceLock<OwnedFd>,
    display: String,
}

impl LocalBackend {
    /// Opens the repository directory at `path` (which may itself be a
    /// symbolic link: it is the user's own name for the repository);
    /// messages name it `shown` (a mistyped URL taken for a path may hold a
    /// password).
    pub fn open(path: &Path, shown: &str) -> Result<LocalBackend, BackendError> {
        let display = shown.to_owned();
        let dir =
            Dir::open_ambient_dir(path, ambient_authority()).map_err(
                |e| match Errno::from_io_error(&e) {
                    Some(Errno::NOENT) => BackendError::NotFound(format!("directory {display}")),
                    Some(Errno::NOTDIR) => {
                        BackendError::NotFound(format!("{display} is not a directory, so it"))
                    }
                    _ => BackendError::Other(format!("cannot open directory {display}: {e}")),
                },
            )?;
        Ok(LocalBackend {
            dir,
            locks: OnceLock::new(),
            display,
        })
    }

    /// Opens the directory `name` of the repository, refusing a link.
    fn subdir(&self, name: &str) -> Result<Option<OwnedFd>, BackendError> {
        self.subdir_of(&self.dir, name)
    }

    /// Opens the directory `name` in `parent`, refusing a link.
    fn subdir_of(&self, parent: &Dir, name: &str) -> Result<Option<OwnedFd>, BackendError> {
        match statat(parent, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => match FileType::from_raw_mode(stat.st_mode) {
                FileType::Directory => {}
                FileType::Symlink => {
                    return Err(BackendError::Other(format!(
                        "{}/{name} is a symlink; lockwarden never follows one inside a \
                         repository (restic creates none), so it reads and removes nothing there: \
                         replace it by the directory it stands for",
                        self.display
                    )));
                }
                _ => {
                    return Err(BackendError::Other(format!(
                        "{}/{name} is not a directory",
                        self.display
                    )));
                }
            },
            Err(Errno::NOENT) => return Ok(None),
            Err(e) => return Err(self.error(name, e)),
        }
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        openat(parent, name, flags, Mode::empty())
            .map(Some)
            .map_err(|e| self.error(name, e))
    }

    /// The `locks/` directory, if there is one.
    fn locks(&self) -> Result<Option<&OwnedFd>, BackendError> {
        if let Some(dir) = self.locks.get() {
            return Ok(Some(dir));
        }
        Ok(self
            .subdir(Kind::Lock.dir())?
            .map(|dir| self.locks.get_or_init(|| dir)))
    }

    /// Reads the regular file `name` in `dir`, within `limit`.
    fn read_in(
        &self,
        dir: impl AsFd,
        name: &str,
        shown: &str,
        limit: u64,
    ) -> Result<Vec<u8>, BackendError> {
        // Look before opening: opening a device can have effects of its own.
        // The type is checked again on the open file, against a swap.
        let kind = statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW)
            .map(|stat| FileType::from_raw_mode(stat.st_mode))
            .map_err(|e| ReadError::from(std::io::Error::from(e)));
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let read = kind
            .and_then(check_regular)
            .and_then(|()| {
                openat(&dir, name, flags, Mode::empty())
                    .map_err(|e| ReadError::from(std::io::Error::from(e)))
            })
            .and_then(|fd| read_open_file(File::from(fd), limit));
        read.map_err(|e| match e {
            ReadError::NotFound => BackendError::NotFound(format!("{}/{shown}", self.display)),
            ReadError::NotRegular(what) => BackendError::NotAFile {
                path: format!("{}/{shown}", self.display),
                entry: EntryKind::Other(what),
            },
            ReadError::TooLarge { size, limit } => BackendError::TooLarge { size, limit },
            other => BackendError::Other(format!("{}/{shown} {other}", self.display)),
        })
    }

    /// Whether the repository is shared with its group: `config` is
    /// group-readable (restic's rule for the modes of what it writes).
    fn group_shared(&self) -> bool {
        statat(&self.dir, "config", AtFlags::SYMLINK_NOFOLLOW)
            .is_ok_and(|stat| stat.st_mode & 0o040 != 0)
    }

    /// The mode of a lock file lockwarden writes: read-only, as restic's.
    fn file_mode(&self) -> Mode {
        Mode::from_raw_mode(if self.group_shared() { 0o440 } else { 0o400 })
    }

    /// The mode of a `locks/` lockwarden creates.
    fn dir_mode(&self) -> Mode {
        Mode::from_raw_mode(if self.group_shared() { 0o770 } else { 0o700 })
    }

    fn listing_error(&self, kind: Kind, e: std::io::Error) -> BackendError {
        BackendError::Other(format!("{}/{}: {e}", self.display, kind.dir()))
    }

    fn error(&self, what: &str, e: Errno) -> BackendError {
        match e {
            Errno::NOENT => BackendError::NotFound(format!("{}/{what}", self.display)),
            _ => BackendError::Other(format!("{}/{what}: {e}", self.display)),
        }
    }
}

/// What `stat` (not following a link) says of the entry `name`: its kind,
/// and for a regular file its size and modification time.
fn file_info(name: String, stat: &rustix::fs::Stat) -> FileInfo {
    let entry = EntryKind::of_mode(Some(stat.st_mode));
    let regular = entry == EntryKind::File;
    FileInfo {
        name,
        entry,
        size: regular.then(|| u64::try_from(stat.st_size).unwrap_or(0)),
        modified: regular.then(|| {
            let nanos = i128::from(stat.st_mtime) * 1_000_000_000 + i128::from(stat.st_mtime_nsec);
            i64::try_from(nanos).unwrap_or(i64::MAX)
        }),
    }
}

impl Backend for LocalBackend {
    fn name(&self) -> &'static str {
        SCHEME.name
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::NATIVE
    }

    fn read(&self, kind: Kind, name: &str) -> Result<Vec<u8>, BackendError> {
        let shown = checked_read_name(kind, name)?;
        match kind {
            Kind::Config => self.read_in(&self.dir, "config", &shown, kind.limit()),
            Kind::Lock => match self.locks()? {
                Some(locks) => self.read_in(locks, name, &shown, kind.limit()),
                None => Err(BackendError::NotFound(format!("{}/{shown}", self.display))),
            },
            _ => match self.subdir(kind.dir())? {
                Some(dir) => self.read_in(&dir, name, &shown, kind.limit()),
                None => Err(BackendError::NotFound(format!(
                    "{}/{}",
                    self.display,
                    kind.dir()
                ))),
            },
        }
    }

    fn list(&self, kind: Kind) -> Result<Vec<FileInfo>, BackendError> {
        let dir = match kind {
            Kind::Lock => match self.locks()? {
                Some(locks) => locks.try_clone(),
                None => return Ok(Vec::new()),
            },
            _ => match self.subdir(kind.dir())? {
                Some(dir) => Ok(dir),
                None => {
                    return Err(BackendError::NotFound(format!(
                        "{}/{}",
                        self.display,
                        kind.dir()
                    )));
                }
            },
        }
        .map_err(|e| self.listing_error(kind, e))?;
        let entries = Dir::from_std_file(File::from(
            dir.try_clone().map_err(|e| self.listing_error(kind, e))?,
        ))
        .entries()
        .map_err(|e| self.listing_error(kind, e))?;
        let mut files = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| self.listing_error(kind, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            // restic writes nothing but ids here; anything else (editor
            // droppings, temp files) is passed over without being kept.
            if !lockfile::is_valid_id(&name) {
                continue;
            }
            match statat(&dir, name.as_str(), AtFlags::SYMLINK_NOFOLLOW) {
                Ok(stat) => files.push(file_info(name, &stat)),
                // Gone since the directory was read.
                Err(Errno::NOENT) => continue,
                Err(_) => files.push(FileInfo::unknown(name)),
            }
            // One more than the limit is enough for checked_listing to
            // refuse the whole listing.
            if files.len() > crate::limits::LISTING_ENTRIES {
                break;
            }
        }
        checked_listing(files, || format!("{}/{}", self.display, kind.dir()))
    }

    fn stat(&self, kind: Kind, name: &str) -> Result<Option<FileInfo>, BackendError> {
        let path = checked_name(kind, name)?;
        // Relative to the repository's directory handle, with no link
        // followed on the way (each directory on the path is opened
        // without following one).
        let mut dir = self
            .dir
            .try_clone()
            .map_err(|e| self.listing_error(kind, e))?;
        let (dirs, file) = path.rsplit_once('/').unwrap_or(("", path.as_str()));
        for part in dirs.split('/').filter(|p| !p.is_empty()) {
            match self.subdir_of(&dir, part)? {
                Some(fd) => dir = Dir::from_std_file(File::from(fd)),
                None => return Ok(None),
            }
        }
        match statat(&dir, file, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => Ok(Some(file_info(name.to_owned(), &stat))),
            Err(Errno::NOENT | Errno::NOTDIR) => Ok(None),
            Err(e) => Err(self.error(&path, e)),
        }
    }

    fn dir_kind(&self, kind: Kind) -> Result<Option<EntryKind>, BackendError> {
        match statat(&self.dir, kind.dir(), AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) => Ok(Some(EntryKind::of_mode(Some(stat.st_mode)))),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(self.error(kind.dir(), e)),
        }
    }

    fn remove(&self, id: &str) -> Result<Removal, BackendError> {
        let shown = checked_name(Kind::Lock, id)?;
        let Some(locks) = self.locks()? else {
            return Ok(Removal::AlreadyGone);
        };
        // Only a regular file is ever removed; the read checked it too, this
        // check keeps a swapped-in FIFO or link out.
        match statat(locks, id, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(stat) if FileType::from_raw_mode(stat.st_mode) == FileType::RegularFile => {}
            Ok(stat) => {
                return Err(BackendError::NotAFile {
                    path: format!("{}/{shown}", self.display),
                    entry: EntryKind::of_mode(Some(stat.st_mode)),
                });
            }
            Err(Errno::NOENT) => return Ok(Removal::AlreadyGone),
            Err(e) => return Err(self.error(&shown, e)),
        }
        match unlinkat(locks, id, AtFlags::empty()) {
            Ok(()) => Ok(Removal::Removed),
            Err(Errno::NOENT) => Ok(Removal::AlreadyGone),
            Err(e) => Err(self.error(&shown, e)),
        }
    }

    fn write_lock(&self, id: &str, stored: &[u8]) -> Result<(), BackendError> {
        let shown = checked_name(Kind::Lock, id)?;
        let locks = match self.locks()? {
            Some(locks) => locks,
            None => {
                // restic, too, creates a missing locks/ when it locks.
                match mkdirat(&self.dir, Kind::Lock.dir(), self.dir_mode()) {
                    Ok(()) | Err(Errno::EXIST) => {}
                    Err(e) => return Err(self.error(Kind::Lock.dir(), e)),
                }
                self.locks()?
                    .ok_or_else(|| BackendError::NotFound(format!("{}/locks", self.display)))?
            }
        };
        // Written under a name no reader takes for a lock, then renamed: no
        // one ever reads half a lock. Read-only, as restic stores its files.
        let suffix = crate::repo::crypto::random_bytes::<6>().map_err(BackendError::Other)?;
        let temporary = format!("{id}-tmp-{}", hex::encode(suffix));
        let write = || -> Result<(), Errno> {
            let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW;
            let fd = openat(locks, &temporary, flags | OFlags::CLOEXEC, self.file_mode())?;
            let mut file = File::from(fd);
            file.write_all(stored)
                .map_err(|e| Errno::from_io_error(&e).unwrap_or(Errno::IO))?;
            fsync(&file)?;
            renameat(locks, &temporary, locks, id)?;
            fsync(locks)
        };
        write().map_err(|e| {
            let _ = unlinkat(locks, &temporary, AtFlags::empty());
            self.error(&shown, e)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_locks_directory_made_later_is_seen_and_messages_use_the_shown_name() {
        let dir = tempfile::tempdir().expect("temp dir");
        let backend = LocalBackend::open(dir.path(), "shown-name").expect("opens");
        assert_eq!(backend.list(Kind::Lock).expect("no locks/"), Vec::new());
        std::fs::create_dir(dir.path().join("locks")).expect("mkdir");
        let id = "a".repeat(64);
        std::fs::write(dir.path().join("locks").join(&id), b"x").expect("write");
        std::fs::write(dir.path().join("locks/notes.txt"), b"x").expect("write");
        let files = backend.list(Kind::Lock).expect("listed");
        assert_eq!(files.len(), 1);
        assert_eq!(
            (files[0].name.as_str(), files[0].size),
            (id.as_str(), Some(1))
        );
        assert!(files[0].modified.is_some());

        let missing = dir.path().join("http:").join("alice:SECRET@host");
        let error = LocalBackend::open(&missing, "http://alice:***@host")
            .err()
            .expect("no such directory")
            .to_string();
        assert!(!error.contains("SECRET"), "{error}");
    }

    #[test]
    fn a_written_lock_is_read_only_and_a_new_locks_directory_follows_config() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        for (config_mode, group) in [(0o400, false), (0o440, true)] {
            let dir = tempfile::tempdir().expect("temp dir");
            let config = dir.path().join("config");
            std::fs::write(&config, b"x").expect("config");
            std::fs::set_permissions(&config, std::fs::Permissions::from_mode(config_mode))
                .expect("chmod");
            let backend = LocalBackend::open(dir.path(), "r").expect("opens");
            let id = "b".repeat(64);
            backend.write_lock(&id, b"sealed").expect("written");
            let locks = dir.path().join("locks");
            let written = std::fs::metadata(locks.join(&id)).expect("there");
            assert_eq!(written.mode() & 0o777, if group { 0o440 } else { 0o400 });
            let dir_mode = std::fs::metadata(&locks).expect("locks/").mode();
            assert_eq!(dir_mode & 0o040 != 0, group, "{dir_mode:o}");
            assert_eq!(std::fs::read(locks.join(&id)).expect("read"), b"sealed");
            // Nothing but the lock is left in locks/.
            assert_eq!(std::fs::read_dir(&locks).expect("list").count(), 1);
        }
    }

    #[test]
    fn a_lock_is_never_written_through_a_symlinked_locks_directory() {
        let dir = tempfile::tempdir().expect("temp dir");
        let elsewhere = tempfile::tempdir().expect("temp dir");
        std::os::unix::fs::symlink(elsewhere.path(), dir.path().join("locks")).expect("symlink");
        let backend = LocalBackend::open(dir.path(), "r").expect("opens");
        let refused = backend.write_lock(&"c".repeat(64), b"sealed");
        assert!(refused.is_err(), "{refused:?}");
        assert_eq!(
            std::fs::read_dir(elsewhere.path()).expect("list").count(),
            0
        );
    }
}
