//! The backend suite in process: the promises of [`Backend`] and of the
//! repository layer above it ([`crate::repo::Repository`]: what may be
//! removed, what a failed removal means), stated once as a table of cases
//! and run against every storage this process can make in milliseconds:
//! the in-memory backend (as a file system, and as an object store), and
//! the real local backend over a temporary directory. Each runs behind the
//! fault-injecting backend ([`FaultyBackend`]), as restic's
//! `internal/backend/test` wraps its backends, so the hostile cases (a
//! refusal, a lie, a server gone) run on every one.
//!
//! The cases decide by what a storage is like ([`Knobs`]), never by its
//! name. Adding a storage: one constructor (in `storages.rs`, an
//! implementation of [`Storage`]) and one line in [`tests`] below.
//!
//! What needs the binary or restic (exit codes, restic reading a lock
//! lockwarden wrote, `hold`, a proxy's redirect or huge answer between
//! lockwarden and a server) is the end-to-end table's, run against every
//! real storage (`tests/src/backend_suite/`); each case here names the case
//! of that table it stands beside.

mod cases;
mod storages;

use std::collections::BTreeSet;
use std::sync::Arc;

use super::{Backend, FaultyBackend, Kind};
use crate::repo::crypto::Key;
use crate::repo::location::Location;
use crate::repo::{Password, Repository};

/// What a storage is like, as the cases ask it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Knobs {
    /// `locks/` and its entries are shown as they are: links, FIFOs and
    /// directories, and `locks/` itself a directory (a file system read
    /// directly). Otherwise every entry is a regular file and `locks/` is
    /// of no kind the storage says (an object store, a REST server).
    pub shows_special_files: bool,
}

/// Something other than a regular file, planted under a lock's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Special {
    /// A directory (holding a file: not empty).
    Directory,
    /// A symbolic link to a key file.
    Link,
    /// A FIFO, which a reader would wait on.
    Fifo,
}

/// A storage under test: the backend lockwarden is given, and what the
/// suite may do behind its back.
pub(crate) trait Storage {
    /// What it is like.
    fn knobs(&self) -> Knobs;
    /// The backend over it.
    fn backend(&self) -> Arc<dyn Backend>;
    /// The repository's master key (to seal locks as restic does).
    fn key(&self) -> &Key;
    /// Stores `bytes` as `<dir of kind>/<name>`.
    fn put(&self, kind: Kind, name: &str, bytes: &[u8]);
    /// Stores `bytes` under `locks/<name>`, a name no restic file has
    /// (`/x`, `..x`, a control character); false where the storage cannot
    /// hold that name.
    fn put_odd(&self, name: &str, bytes: &[u8]) -> bool;
    /// Plants `special` as `locks/<name>` (only asked where
    /// [`Knobs::shows_special_files`]).
    fn put_special(&self, name: &str, special: Special);
    /// Removes `<dir of kind>/<name>` (the config for [`Kind::Config`]).
    fn delete(&self, kind: Kind, name: &str);
    /// Every name directly in the directory of `kind`, ids or not.
    fn names(&self, kind: Kind) -> BTreeSet<String>;
    /// Makes `locks/` stand for the directory of `other`: a link where the
    /// storage shows links, copies of its files where it does not.
    fn alias_locks(&self, other: Kind);
    /// Undoes [`Storage::alias_locks`].
    fn unalias_locks(&self, other: Kind);
}

/// The password of every repository of the suite.
const PASSWORD: &[u8] = b"suite";

/// What a case is handed: the storage, and the fault-injecting backend
/// over it that the repository reads through.
pub(crate) struct Ctx {
    storage: Box<dyn Storage>,
    faults: Arc<FaultyBackend<Arc<dyn Backend>>>,
}

impl Ctx {
    /// A case's context over `storage`, fresh.
    fn new(storage: Box<dyn Storage>) -> Ctx {
        let faults = Arc::new(FaultyBackend::new(storage.backend()));
        Ctx { storage, faults }
    }

    /// The repository, opened anew over the fault-injecting backend.
    fn open(&self) -> Result<Repository, crate::repo::RepoError> {
        let location = Location::parse("/suite/repo").expect("a path");
        Repository::with_backend(
            location,
            Box::new(self.faults.clone()),
            &Password::new(PASSWORD),
        )
    }

    /// A lock by `hostname` and `pid`, sealed and stored as restic stores
    /// it, behind the backend's back; its id.
    fn lock(&self, hostname: &str, pid: i64) -> String {
        let json = crate::repo::tests::lock_json(hostname, pid);
        let iv = crate::repo::crypto::unique_bytes();
        let (id, stored) = crate::repo::lockfile::seal(self.storage.key(), json.as_bytes(), iv);
        self.storage.put(Kind::Lock, &id, &stored);
        id
    }

    /// The names in `locks/`.
    fn lock_names(&self) -> BTreeSet<String> {
        self.storage.names(Kind::Lock)
    }
}

/// Runs every case of [`cases::CASES`] against a fresh storage from `make`
/// each ([`crate::case_table::run`]).
fn run(storage: &str, make: fn() -> Box<dyn Storage>) {
    crate::case_table::run(storage, &cases::CASES, || Ctx::new(make()));
}

/// One test per storage: the table against it.
mod tests {
    use super::{run, storages};

    #[test]
    fn memory() {
        run("memory", storages::memory_file_system);
    }

    #[test]
    fn memory_as_an_object_store() {
        run("memory-object-store", storages::memory_object_store);
    }

    #[test]
    fn local() {
        run("local", storages::local);
    }
}
