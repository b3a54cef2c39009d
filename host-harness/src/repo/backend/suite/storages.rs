//! The storages the in-process suite runs against: the in-memory backend
//! (as a file system, and as an object store) and the real local backend
//! over a temporary directory, each with a fresh repository.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{Knobs, PASSWORD, Special, Storage};
use crate::repo::backend::local::LocalBackend;
use crate::repo::backend::{Backend, EntryKind, Kind, MemoryBackend, checked_name};
use crate::repo::crypto::Key;

/// A repository in memory.
struct Memory {
    backend: Arc<MemoryBackend>,
    key: Key,
    knobs: Knobs,
}

/// The in-memory backend as a file system: it shows links, FIFOs and
/// directories under `locks/`, and `locks/` itself as a directory.
pub(super) fn memory_file_system() -> Box<dyn Storage> {
    let (backend, key) = MemoryBackend::init(PASSWORD);
    Box::new(Memory {
        backend: Arc::new(backend),
        key,
        knobs: Knobs {
            shows_special_files: true,
        },
    })
}

/// The in-memory backend as an object store: regular files only, and no
/// directory it can say anything about.
pub(super) fn memory_object_store() -> Box<dyn Storage> {
    let (backend, key) = MemoryBackend::init(PASSWORD);
    backend.set_dir_kind(Kind::Lock, Some(EntryKind::Unknown));
    Box::new(Memory {
        backend: Arc::new(backend),
        key,
        knobs: Knobs {
            shows_special_files: false,
        },
    })
}

impl Storage for Memory {
    fn knobs(&self) -> Knobs {
        self.knobs
    }

    fn backend(&self) -> Arc<dyn Backend> {
        self.backend.clone()
    }

    fn key(&self) -> &Key {
        &self.key
    }

    fn put(&self, kind: Kind, name: &str, bytes: &[u8]) {
        self.backend.put(kind, name, bytes.to_vec());
    }

    fn put_odd(&self, name: &str, bytes: &[u8]) -> bool {
        self.backend.put(Kind::Lock, name, bytes.to_vec());
        true
    }

    fn put_special(&self, name: &str, special: Special) {
        let entry = match special {
            Special::Directory => EntryKind::Directory,
            Special::Link => EntryKind::Other("a symbolic link"),
            Special::Fifo => EntryKind::Other("a FIFO"),
        };
        self.backend.put_entry(Kind::Lock, name, entry, Vec::new());
    }

    fn delete(&self, kind: Kind, name: &str) {
        self.backend.delete(kind, name);
    }

    fn names(&self, kind: Kind) -> BTreeSet<String> {
        self.backend.names(kind).into_iter().collect()
    }

    fn alias_locks(&self, other: Kind) {
        if self.knobs.shows_special_files {
            let link = EntryKind::Other("a symbolic link");
            self.backend.set_dir_kind(Kind::Lock, Some(link));
            return;
        }
        for name in self.backend.names(other) {
            let bytes = self.backend.get(other, &name).expect("listed");
            self.backend.put(Kind::Lock, &name, bytes);
        }
    }

    fn unalias_locks(&self, other: Kind) {
        if self.knobs.shows_special_files {
            let dir = EntryKind::Directory;
            self.backend.set_dir_kind(Kind::Lock, Some(dir));
            return;
        }
        for name in self.backend.names(other) {
            self.backend.delete(Kind::Lock, &name);
        }
    }
}

/// A repository in a temporary directory, read by the local backend.
struct Local {
    dir: tempfile::TempDir,
    backend: Arc<dyn Backend>,
    key: Key,
}

/// The local backend over a new temporary directory holding the files of
/// a new in-memory repository (its config and key file).
pub(super) fn local() -> Box<dyn Storage> {
    let (memory, key) = MemoryBackend::init(PASSWORD);
    let dir = tempfile::tempdir().expect("temp dir");
    for sub in ["keys", "locks", "snapshots", "index", "data"] {
        std::fs::create_dir(dir.path().join(sub)).expect("mkdir");
    }
    let config = memory.get(Kind::Config, "").expect("a config");
    std::fs::write(dir.path().join("config"), config).expect("write");
    for name in memory.names(Kind::Key) {
        let bytes = memory.get(Kind::Key, &name).expect("a key file");
        std::fs::write(dir.path().join("keys").join(name), bytes).expect("write");
    }
    let backend = LocalBackend::open(dir.path(), "suite-local").expect("opens");
    Box::new(Local {
        dir,
        backend: Arc::new(backend),
        key,
    })
}

impl Local {
    /// Where `<dir of kind>/<name>` is.
    fn path(&self, kind: Kind, name: &str) -> PathBuf {
        self.dir
            .path()
            .join(checked_name(kind, name).expect("a restic id"))
    }

    /// `locks/<name>`.
    fn in_locks(&self, name: &str) -> PathBuf {
        self.dir.path().join("locks").join(name)
    }
}

impl Storage for Local {
    fn knobs(&self) -> Knobs {
        Knobs {
            shows_special_files: true,
        }
    }

    fn backend(&self) -> Arc<dyn Backend> {
        self.backend.clone()
    }

    fn key(&self) -> &Key {
        &self.key
    }

    fn put(&self, kind: Kind, name: &str, bytes: &[u8]) {
        let path = self.path(kind, name);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        std::fs::write(path, bytes).expect("write");
    }

    fn put_odd(&self, name: &str, bytes: &[u8]) -> bool {
        if name.contains('/') || name == "." || name == ".." {
            return false;
        }
        std::fs::write(self.in_locks(name), bytes).expect("write");
        true
    }

    fn put_special(&self, name: &str, special: Special) {
        let path = self.in_locks(name);
        match special {
            Special::Directory => {
                std::fs::create_dir(&path).expect("mkdir");
                std::fs::write(path.join("kept"), b"not a lock").expect("write");
            }
            Special::Link => {
                let key = self.names(Kind::Key).pop_first().expect("a key file");
                std::os::unix::fs::symlink(format!("../keys/{key}"), path).expect("symlink");
            }
            Special::Fifo => {
                rustix::fs::mkfifoat(rustix::fs::CWD, &path, rustix::fs::Mode::RUSR)
                    .expect("mkfifo");
            }
        }
    }

    fn delete(&self, kind: Kind, name: &str) {
        std::fs::remove_file(self.path(kind, name)).expect("remove");
    }

    fn names(&self, kind: Kind) -> BTreeSet<String> {
        names_in(&self.dir.path().join(kind.dir()))
    }

    fn alias_locks(&self, other: Kind) {
        let root = self.dir.path();
        std::fs::rename(root.join("locks"), root.join("locks.real")).expect("move locks/");
        std::os::unix::fs::symlink(other.dir(), root.join("locks")).expect("symlink");
    }

    fn unalias_locks(&self, _other: Kind) {
        let root = self.dir.path();
        std::fs::remove_file(root.join("locks")).expect("remove the link");
        std::fs::rename(root.join("locks.real"), root.join("locks")).expect("move back");
    }
}

/// The names of everything directly in `dir` (none when it is not there).
fn names_in(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}
