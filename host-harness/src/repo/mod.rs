//! restic repository access: keys, encryption, lock files, backends.
//!
//! A [`Repository`] is opened once (one scrypt derivation) and then read as
//! often as needed; the master key stays in memory and is never written.
//! Which storage it lives on is a [`backend::Backend`]'s business.

pub mod backend;
pub mod crypto;
mod deadline;
pub mod keys;
pub mod location;
pub mod lockfile;
mod password;

use backend::{
    Backend, BackendError, Capabilities, Contents, EntryKind, FileInfo, Kind, Removal, Variables,
};
use crypto::Key;
pub use deadline::Deadline;
use location::Location;
pub use password::{Password, PasswordError, PasswordSource, restic_env};

use std::time::Duration;

use crate::contract::{self, Lock, UnreadableLock};
use crate::limits;
use crate::parallel::parallel_map;

/// The parts of `config` lockwarden uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Repository id (hex).
    pub id: String,
    /// Format version (1 or 2).
    pub version: u32,
}

/// Why a repository could not be opened or read. Each message names the
/// repository, the cause and what to do.
#[derive(Debug, thiserror::Error)]
pub enum RepoError {
    /// Nothing that looks like a restic repository is there.
    #[error(
        "no restic repository at {location}: {cause}; check -r/--repo or RESTIC_REPOSITORY, or create one with `restic init`"
    )]
    NoRepository {
        /// Redacted location.
        location: String,
        /// What was missing.
        cause: String,
    },
    /// No key file opens with the password.
    #[error(
        "cannot open repository {location}: wrong password ({detail}); check -p/--password-file, --password-command or RESTIC_PASSWORD"
    )]
    WrongPassword {
        /// Redacted location.
        location: String,
        /// How many key files were tried.
        detail: String,
    },
    /// Key files are there, but none can be tried with the password.
    #[error(
        "cannot open repository {location}: no usable key file ({detail}); check that it is a restic repository and that keys/ is intact"
    )]
    NoUsableKey {
        /// Redacted location.
        location: String,
        /// What was wrong with each.
        detail: String,
    },
    /// More key files than restic tries, and none of those tried opens.
    #[error(
        "cannot open repository {location}: none of the first {tried} of {total} key files opens with this password (restic, too, tries at most {tried}); check the password, or remove unused keys with `restic key remove`"
    )]
    TooManyKeys {
        /// Redacted location.
        location: String,
        /// How many were tried.
        tried: usize,
        /// How many there are.
        total: usize,
    },
    /// The server does not answer, or its TLS certificate was refused.
    #[error("{cause}{}", if *tls { "" } else { "; is the server running and the address right?" })]
    Unreachable {
        /// What failed, naming the location.
        cause: String,
        /// Whether the TLS handshake failed (the cause says why): the
        /// server is there.
        tls: bool,
    },
    /// The storage refused the credentials.
    #[error(
        "{cause}; check the storage credentials (for S3 AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, for Azure AZURE_ACCOUNT_KEY or AZURE_ACCOUNT_SAS, for GCS GOOGLE_APPLICATION_CREDENTIALS, for SFTP the ssh key) and that they may list, read and delete in the repository"
    )]
    Denied {
        /// What was refused, naming the location.
        cause: String,
    },
    /// This backend cannot remove a lock by id (see its capabilities).
    #[error(
        "cannot remove locks from {location}: lockwarden reads {backend} repositories but cannot remove a lock there by id; run `lockwarden check` to see which locks are stale, then `restic unlock` there"
    )]
    RemovalUnsupported {
        /// Redacted location.
        location: String,
        /// The backend.
        backend: &'static str,
    },
    /// `locks/` is not the repository's own directory of lock files (a link
    /// to another directory, or a server that shows another directory
    /// there): nothing in it is judged or removed.
    #[error(
        "repository {location}: {why}; lockwarden judges and removes nothing there: make locks/ the repository's own directory again (restic creates no link)"
    )]
    NotLockDirectory {
        /// Redacted location.
        location: String,
        /// What showed it.
        why: String,
    },
    /// A removal was asked for a file this run did not list as a regular
    /// lock file (nor write itself): refused before the storage is asked.
    #[error("repository {location}: lock {id} was not removed: {why}")]
    NotRemovable {
        /// Redacted location.
        location: String,
        /// The lock's short id.
        id: String,
        /// Why it may not be removed.
        why: String,
    },
    /// The job's [`Deadline`] passed before it was done: what was left is
    /// not done (a lock not read is not judged, a removal not begun is not
    /// begun).
    #[error("repository {location}: the job's time ({budget}) ran out {undone}")]
    DeadlinePassed {
        /// Redacted location.
        location: String,
        /// The time the job had (`40s`).
        budget: String,
        /// What was left undone, and what that means.
        undone: String,
    },
    /// Anything else.
    #[error("repository {location}: {cause}")]
    Other {
        /// Redacted location.
        location: String,
        /// What went wrong.
        cause: String,
    },
}

/// A missing repository, a wrong password, refused credentials and an
/// unreachable storage each have their exit code; the rest failed.
impl crate::error::Classify for RepoError {
    fn kind(&self) -> crate::error::ErrorKind {
        use crate::error::ErrorKind;
        match self {
            RepoError::NoRepository { .. } => ErrorKind::NoRepository,
            RepoError::WrongPassword { .. } => ErrorKind::WrongPassword,
            RepoError::Denied { .. } => ErrorKind::Denied,
            RepoError::Unreachable { .. } => ErrorKind::Unreachable,
            RepoError::NoUsableKey { .. }
            | RepoError::TooManyKeys { .. }
            | RepoError::RemovalUnsupported { .. }
            | RepoError::NotLockDirectory { .. }
            | RepoError::NotRemovable { .. }
            | RepoError::DeadlinePassed { .. }
            | RepoError::Other { .. } => ErrorKind::Failed,
        }
    }
}

/// A lock file ready to be written: its id and its stored bytes.
#[derive(Debug, Clone)]
pub struct SealedLock {
    /// Its id: the SHA-256 of the stored bytes.
    pub id: String,
    stored: Vec<u8>,
}

/// The locks found in a repository.
#[derive(Debug, Default)]
pub struct LockSet {
    /// Locks that were read and decoded.
    pub locks: Vec<Lock>,
    /// Files in `locks/` that could not be, with the problem named.
    pub unreadable: Vec<UnreadableLock>,
    /// Entries in `locks/` that are no lock file at all (not a regular file,
    /// or another kind of restic file): never given to a policy, never
    /// removed.
    pub foreign: Vec<ForeignFile>,
}

/// An entry under `locks/` that is not a lock file: a directory, a link, a
/// FIFO, or another restic file (a key, a snapshot, an index) that is
/// misplaced, not corrupt. lockwarden never removes one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForeignFile {
    /// Its name.
    pub id: String,
    /// What it is, as a phrase (`a directory`, `a restic key file`).
    pub what: String,
    /// Its size in bytes, when known (0 otherwise).
    pub size: u64,
    /// When the storage last modified it, by the storage's clock.
    pub stored_at: Option<i64>,
}

/// What reading one listed lock file gave.
enum Read {
    Lock(Lock),
    Unreadable(UnreadableLock),
    Foreign(ForeignFile),
    Vanished,
    /// The storage refused the credentials or could not be reached: about
    /// the storage, not the file, so the whole read fails.
    Failed(BackendError),
    /// Not read: the job's deadline passed first.
    Late,
}

/// How many files under `locks/` that are not locks are looked for in the
/// repository's other directories: if `locks/` stood for another directory,
/// each of its files would be found there, so a few tell.
const ALIAS_SAMPLE: usize = 16;

/// The longest problem text handed to a policy: one bad file must not make
/// the request large.
const MAX_PROBLEM: usize = 300;

fn bounded_problem(problem: String) -> String {
    if problem.len() <= MAX_PROBLEM {
        return problem;
    }
    let mut end = MAX_PROBLEM;
    while !problem.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &problem[..end])
}

/// What a job whose deadline passed while opening left undone.
const OPENING: &str = "while opening the repository; nothing was judged or removed";
/// ... before listing `locks/`.
const NOT_LISTED: &str = "before locks/ was listed; nothing was judged or removed";
/// ... before looking for `locks/`'s files in the other directories.
const NOT_COMPARED: &str = "before locks/ was compared with the other directories; nothing was \
                            judged or removed";
/// ... before one removal began.
const NOT_BEGUN: &str = "before this lock's removal began; it was not removed";
/// ... before the listing that confirms a removal.
const NOT_CONFIRMED: &str = "before locks/ was listed again to confirm the removal";

/// Fails when `deadline` has passed, saying what is left `undone` at the
/// repository shown as `shown`.
fn in_time(deadline: Deadline, shown: &str, undone: &str) -> Result<(), RepoError> {
    if deadline.passed() {
        return Err(out_of_time(deadline, shown, undone));
    }
    Ok(())
}

/// The failure of a job whose `deadline` passed with `undone` left.
fn out_of_time(deadline: Deadline, shown: &str, undone: &str) -> RepoError {
    RepoError::DeadlinePassed {
        location: shown.to_owned(),
        budget: deadline
            .budget()
            .map_or_else(|| "none".to_owned(), |budget| format!("{budget:?}")),
        undone: undone.to_owned(),
    }
}

/// An open repository: its location, config, backend and master key.
pub struct Repository {
    location: Location,
    config: Config,
    backend: Box<dyn Backend>,
    /// `None` where the backend decrypts ([`Contents::Decrypted`]).
    key: Option<Key>,
    /// The locks read so far, by id. A lock file's name is the hash of its
    /// contents, so a listed id that was read before need not be read
    /// again: a repository kept open (`watch`) costs one listing per check
    /// plus one read per new lock. Ids no longer listed are forgotten, and
    /// so is a lock listed with another size or time than when it was read
    /// (other bytes under its name: not restic's doing, read again).
    read_before: std::sync::Mutex<std::collections::HashMap<String, ReadBefore>>,
    /// What may be removed: the regular files the last listing showed and
    /// that were read as locks or found unreadable, and the lock files this
    /// process wrote itself. Nothing else is ever removed.
    removable: std::sync::Mutex<Removable>,
}

/// The ids [`Repository::remove_locks`] may remove.
#[derive(Debug, Default)]
struct Removable {
    /// From the last [`Repository::read_locks`].
    listed: std::collections::HashSet<String>,
    /// Written by [`Repository::store_lock`] and not removed since.
    written: std::collections::HashSet<String>,
}

impl std::fmt::Debug for Repository {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Repository")
            .field("location", &self.location)
            .field("backend", &self.backend.name())
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Repository {
    /// Opens the repository at `location`: reads `config`, finds the key file
    /// that `password` opens (at most 20 tried, as restic does), decrypts the
    /// config. Each network request or restic run ends within `timeout`;
    /// the storage's variables (credentials) are read from `variables`.
    pub fn open(
        location: Location,
        password: &Password,
        timeout: Duration,
        variables: &Variables,
    ) -> Result<Repository, RepoError> {
        Repository::open_within(location, password, timeout, variables, Deadline::NONE)
    }

    /// [`Repository::open`], beginning no call to the storage and no key
    /// derivation after `deadline`.
    pub fn open_within(
        location: Location,
        password: &Password,
        timeout: Duration,
        variables: &Variables,
        deadline: Deadline,
    ) -> Result<Repository, RepoError> {
        let backend = location
            .open(password, timeout, variables)
            .map_err(|e| opening(&location.redacted(), e))?;
        Repository::with_backend_within(location, backend, password, deadline)
    }

    /// Opens the repository that `backend` holds (any backend, the in-memory
    /// one of unit tests too); `location` names it in messages.
    pub fn with_backend(
        location: Location,
        backend: Box<dyn Backend>,
        password: &Password,
    ) -> Result<Repository, RepoError> {
        Repository::with_backend_within(location, backend, password, Deadline::NONE)
    }

    /// [`Repository::with_backend`], beginning no call to the storage and no
    /// key derivation after `deadline`.
    pub fn with_backend_within(
        location: Location,
        backend: Box<dyn Backend>,
        password: &Password,
        deadline: Deadline,
    ) -> Result<Repository, RepoError> {
        let shown = location.redacted();
        in_time(deadline, &shown, OPENING)?;
        let stored_config = backend
            .read(Kind::Config, "")
            .map_err(|e| opening(&shown, e))?;
        let (key, config) = match backend.capabilities().contents {
            Contents::Decrypted => (None, parse_config(&stored_config)),
            Contents::Encrypted => {
                let key = open_master_key(backend.as_ref(), password, &shown, deadline)?;
                let config = key
                    .open(&stored_config)
                    .map_err(|e| format!("cannot decrypt config: {e}"))
                    .and_then(|plain| parse_config(&plain));
                (Some(key), config)
            }
        };
        let config = config.map_err(|cause| RepoError::Other {
            location: shown,
            cause,
        })?;
        Ok(Repository {
            location,
            config,
            backend,
            key,
            read_before: Default::default(),
            removable: Default::default(),
        })
    }

    /// [`in_time`] for this repository.
    fn in_time(&self, deadline: Deadline, undone: &str) -> Result<(), RepoError> {
        if deadline.passed() {
            return Err(out_of_time(deadline, &self.location.redacted(), undone));
        }
        Ok(())
    }

    /// Where the repository is.
    pub fn location(&self) -> &Location {
        &self.location
    }

    /// Its config.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// What its backend can do.
    pub fn capabilities(&self) -> Capabilities {
        self.backend.capabilities()
    }

    /// The repository as the contract describes it.
    pub fn describe(&self) -> contract::Repository {
        contract::Repository {
            id: self.config.id.clone(),
            location: self.location.redacted(),
            backend: self.backend.name().to_owned(),
            version: self.config.version,
        }
    }

    /// Lists and reads every lock, in parallel. A file that cannot be read or
    /// decoded becomes an [`UnreadableLock`]; an entry that is no lock file
    /// at all a [`ForeignFile`]; a file removed between listing and reading
    /// is left out. Fails, and leaves nothing removable, when the listing
    /// fails or when `locks/` is not the repository's own directory: a
    /// link where the storage shows links, or (where it cannot) a directory
    /// whose files that are no locks are found under `keys/`, `snapshots/`,
    /// `index/` or `data/` too.
    pub fn read_locks(&self) -> Result<LockSet, RepoError> {
        self.read_locks_within(Deadline::NONE)
    }

    /// [`Repository::read_locks`], beginning no call to the storage after
    /// `deadline`: when it passes first, the whole read fails (nothing read
    /// is judged, nothing becomes removable), and the locks read so far are
    /// kept for the next read, which then reads only the others.
    pub fn read_locks_within(&self, deadline: Deadline) -> Result<LockSet, RepoError> {
        self.removable().listed.clear();
        let (dir, files) = self.list_locks(deadline)?;
        let set = self.read_listed(&files, deadline)?;
        // Where the storage shows links, lstat said locks/ is a directory;
        // where it cannot, the names of the files that are no locks tell.
        if dir == Some(EntryKind::Unknown) {
            let suspects: Vec<&str> = set
                .unreadable
                .iter()
                .map(|u| u.id.as_str())
                .chain(set.foreign.iter().map(|f| f.id.as_str()))
                .collect();
            self.check_not_aliased(&suspects, deadline)?;
        }
        let regular: std::collections::HashSet<&str> = files
            .iter()
            .filter(|f| f.entry == EntryKind::File)
            .map(|f| f.name.as_str())
            .collect();
        self.removable().listed = set
            .locks
            .iter()
            .map(|l| l.id.as_str())
            .chain(set.unreadable.iter().map(|u| u.id.as_str()))
            .filter(|id| regular.contains(id))
            .map(str::to_owned)
            .collect();
        Ok(set)
    }

    /// The ids in `locks/` now (a listing, nothing read), after checking
    /// that `locks/` is a directory of the repository's own.
    pub fn lock_ids(&self) -> Result<std::collections::HashSet<String>, RepoError> {
        self.lock_ids_within(Deadline::NONE)
    }

    /// [`Repository::lock_ids`] within `deadline`.
    fn lock_ids_within(
        &self,
        deadline: Deadline,
    ) -> Result<std::collections::HashSet<String>, RepoError> {
        Ok(self
            .list_locks(deadline)?
            .1
            .into_iter()
            .map(|f| f.name)
            .collect())
    }

    /// What `locks/` is (none when there is none, as restic takes it) and
    /// its listing; refused when `locks/` is anything but a directory.
    fn list_locks(
        &self,
        deadline: Deadline,
    ) -> Result<(Option<EntryKind>, Vec<FileInfo>), RepoError> {
        let shown = || self.location.redacted();
        self.in_time(deadline, NOT_LISTED)?;
        let Some(dir) = self.lock_dir()? else {
            return Ok((None, Vec::new()));
        };
        self.in_time(deadline, NOT_LISTED)?;
        match self.backend.list(Kind::Lock) {
            Ok(files) => Ok((Some(dir), files)),
            // restic, too, takes a missing locks/ for no locks.
            Err(BackendError::NotFound(_)) => Ok((Some(dir), Vec::new())),
            Err(e) => Err(failed(&shown(), e)),
        }
    }

    /// What `locks/` is, looked at without following a link: none, a
    /// directory, or unknown where the storage has no directories; anything
    /// else is refused.
    fn lock_dir(&self) -> Result<Option<EntryKind>, RepoError> {
        match self.backend.dir_kind(Kind::Lock) {
            Ok(None) => Ok(None),
            Ok(Some(dir @ (EntryKind::Directory | EntryKind::Unknown))) => Ok(Some(dir)),
            Ok(Some(other)) => Err(RepoError::NotLockDirectory {
                location: self.location.redacted(),
                why: format!("locks/ is {}", other.describe()),
            }),
            Err(e) => Err(failed(&self.location.redacted(), e)),
        }
    }

    /// Reads the listed files that are new since the last read (a lock
    /// file's name is the hash of its contents), in parallel, and returns
    /// every one in the listing's order; none is begun after `deadline`.
    fn read_listed(&self, files: &[FileInfo], deadline: Deadline) -> Result<LockSet, RepoError> {
        let mut known = self
            .read_before
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let listed: std::collections::HashSet<&str> =
            files.iter().map(|f| f.name.as_str()).collect();
        known.retain(|id, _| listed.contains(id.as_str()));
        let new: Vec<&FileInfo> = files
            .iter()
            .filter(|f| !known.get(&f.name).is_some_and(|k| k.listed_as(f)))
            .collect();
        let mut fresh = self.read_new(&new, deadline);
        let mut set = LockSet::default();
        let mut late = 0;
        for file in files {
            match fresh.remove(file.name.as_str()) {
                Some(Read::Lock(lock)) => {
                    known.insert(
                        lock.id.clone(),
                        ReadBefore {
                            lock: lock.clone(),
                            size: file.size,
                            modified: file.modified,
                        },
                    );
                    set.locks.push(lock);
                }
                None => set
                    .locks
                    .extend(known.get(&file.name).map(|k| k.lock.clone())),
                // Not remembered: the next check looks again.
                Some(other) => {
                    known.remove(&file.name);
                    match other {
                        Read::Unreadable(u) => set.unreadable.push(u),
                        Read::Foreign(f) => set.foreign.push(f),
                        Read::Failed(e) => return Err(failed(&self.location.redacted(), e)),
                        Read::Late => late += 1,
                        Read::Vanished | Read::Lock(_) => {}
                    }
                }
            }
        }
        if late > 0 {
            let undone = format!(
                "with {late} of {} lock files not read; nothing was judged or removed",
                files.len()
            );
            return Err(out_of_time(deadline, &self.location.redacted(), &undone));
        }
        Ok(set)
    }

    /// Reads `new` in parallel, by name; none is begun after `deadline`
    /// (each of those is [`Read::Late`]).
    fn read_new<'f>(
        &self,
        new: &[&'f FileInfo],
        deadline: Deadline,
    ) -> std::collections::HashMap<&'f str, Read> {
        let workers = self.capabilities().parallel_reads.max(1);
        let reads = parallel_map(new, workers, |file| {
            if deadline.passed() {
                return Read::Late;
            }
            self.read_lock(file)
        });
        new.iter().map(|f| f.name.as_str()).zip(reads).collect()
    }

    /// Reads and decodes one listed lock file.
    fn read_lock(&self, file: &FileInfo) -> Read {
        let stored_at = crate::time::plausible_stored_at(file.modified);
        let foreign = |size: u64, what: String| {
            Read::Foreign(ForeignFile {
                id: file.name.clone(),
                what,
                size,
                stored_at,
            })
        };
        let unreadable = |size: u64, problem: String| {
            Read::Unreadable(UnreadableLock {
                id: file.name.clone(),
                size,
                problem: bounded_problem(problem),
                stored_at,
                first_seen: None,
            })
        };
        if let EntryKind::Directory | EntryKind::Other(_) = file.entry {
            return foreign(0, file.entry.describe().to_owned());
        }
        let listed = file.size.unwrap_or(0);
        let limit = Kind::Lock.limit();
        if listed > limit {
            let too_large = BackendError::TooLarge {
                size: listed,
                limit,
            };
            return unreadable(listed, too_large.to_string());
        }
        let bytes = match self.backend.read(Kind::Lock, &file.name) {
            Ok(bytes) => bytes,
            // Removed between listing and reading (its holder refreshed or
            // finished): simply no longer there.
            Err(BackendError::NotFound(_)) => return Read::Vanished,
            Err(BackendError::NotAFile { entry, .. }) => {
                return foreign(0, entry.describe().to_owned());
            }
            Err(e @ BackendError::TooLarge { size, .. }) => return unreadable(size, e.to_string()),
            Err(
                e @ (BackendError::Denied(_)
                | BackendError::Unreachable(_)
                | BackendError::Untrusted(_)),
            ) => {
                return Read::Failed(e);
            }
            Err(e) => return unreadable(listed, format!("cannot read: {e}")),
        };
        let decoded = match &self.key {
            Some(key) => lockfile::decode(&file.name, &bytes, key),
            None => lockfile::parse(&file.name, &bytes),
        };
        let size = bytes.len() as u64;
        match decoded {
            Ok(lock) => Read::Lock(Lock { stored_at, ..lock }),
            Err(lockfile::DecodeError::Misplaced(what)) => foreign(size, what),
            Err(lockfile::DecodeError::Unreadable(problem)) => {
                unreadable(size, problem.to_string())
            }
        }
    }

    /// Fails when one of the first [`ALIAS_SAMPLE`] `suspects` (files under
    /// `locks/` that are no locks) is also in `keys/`, `snapshots/`,
    /// `index/` or `data/`: then `locks/` shows another directory (a link
    /// the storage follows, a bind mount), and nothing in it may be
    /// removed. A look that fails is doubt, and fails too. Where nothing
    /// can be removed anyway, nobody looks. No look begins after `deadline`.
    fn check_not_aliased(&self, suspects: &[&str], deadline: Deadline) -> Result<(), RepoError> {
        if !self.capabilities().modify || suspects.is_empty() {
            return Ok(());
        }
        let looks: Vec<(&str, Kind)> = suspects
            .iter()
            .take(ALIAS_SAMPLE)
            .flat_map(|id| Kind::OTHERS.map(|kind| (*id, kind)))
            .collect();
        let workers = self.capabilities().parallel_reads.max(1);
        let shown = || self.location.redacted();
        let found = parallel_map(&looks, workers, |(id, kind)| {
            self.in_time(deadline, NOT_COMPARED)?;
            self.backend
                .stat(*kind, id)
                .map_err(|e| failed(&shown(), e))
        });
        for ((id, kind), found) in looks.iter().zip(found) {
            match found {
                Ok(None) => {}
                Ok(Some(_)) => {
                    return Err(RepoError::NotLockDirectory {
                        location: shown(),
                        why: format!(
                            "locks/{0} is no lock, and {1}/ holds a file of that name too: \
                             locks/ shows the files of {1}/",
                            lockfile::short(id),
                            kind.dir()
                        ),
                    });
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Deletes `locks/<id>` ([`Repository::remove_locks`] for one id).
    pub fn remove_lock(&self, id: &str) -> Result<Removal, RepoError> {
        self.remove_locks(&[id])
            .pop()
            .unwrap_or(Ok(Removal::AlreadyGone))
    }

    /// Deletes each `locks/<id>`, in parallel, and says for each what
    /// happened; the one place that decides it for every backend:
    ///
    /// - only an id the last [`Repository::read_locks`] listed as a regular
    ///   file and read as a lock or found unreadable, or one this process
    ///   wrote itself, is removed; anything else is refused before the
    ///   storage is asked;
    /// - a backend that cannot remove ([`Capabilities::modify`]) is refused
    ///   here, before it is asked;
    /// - right before each delete, `locks/` is looked at again: a `locks/`
    ///   swapped for a link since the listing (the storage would follow it)
    ///   removes nothing;
    /// - when a delete fails or the storage answers that the file was
    ///   already gone, `locks/` is listed once more: an id no longer there
    ///   is [`Removal::AlreadyGone`] (whatever the delete answered), one
    ///   still there is a failure.
    pub fn remove_locks(&self, ids: &[&str]) -> Vec<Result<Removal, RepoError>> {
        self.remove_locks_within(ids, Deadline::NONE)
    }

    /// [`Repository::remove_locks`], beginning no removal (and no look at
    /// `locks/`) after `deadline`: a lock whose removal was not begun by then
    /// is not removed, and says so; one whose delete was sent is decided as
    /// usual, except that a delete that failed or was answered "not there"
    /// stays a failure when the listing that would confirm it is too late.
    pub fn remove_locks_within(
        &self,
        ids: &[&str],
        deadline: Deadline,
    ) -> Vec<Result<Removal, RepoError>> {
        if self.check_removable().is_err() {
            return ids
                .iter()
                .map(|_| Err(self.removal_unsupported()))
                .collect();
        }
        let shown = self.location.redacted();
        let mut outcomes: Vec<Result<Removal, RepoError>> =
            parallel_map(ids, REMOVE_WORKERS, |id| {
                self.permitted(id)?;
                self.in_time(deadline, NOT_BEGUN)?;
                self.lock_dir()?;
                self.in_time(deadline, NOT_BEGUN)?;
                self.backend.remove(id).map_err(|e| failed(&shown, e))
            });
        if outcomes.iter().any(needs_a_look) {
            let left = self
                .in_time(deadline, NOT_CONFIRMED)
                .and_then(|()| self.lock_ids_within(deadline));
            for (id, outcome) in ids.iter().zip(outcomes.iter_mut()) {
                if needs_a_look(outcome) {
                    let answered = std::mem::replace(outcome, Ok(Removal::Removed));
                    *outcome = self.looked_at(id, answered, &left);
                }
            }
        }
        outcomes
    }

    /// What a delete that failed, or that the storage answered with "not
    /// there", did, by the listing made after it (`left`).
    fn looked_at(
        &self,
        id: &str,
        answered: Result<Removal, RepoError>,
        left: &Result<std::collections::HashSet<String>, RepoError>,
    ) -> Result<Removal, RepoError> {
        let still = |cause: String| RepoError::Other {
            location: self.location.redacted(),
            cause,
        };
        match (left, answered) {
            (Ok(left), _) if !left.contains(id) => Ok(Removal::AlreadyGone),
            (_, Err(e)) => Err(e),
            (Ok(_), Ok(_)) => Err(still(format!(
                "the storage answered that locks/{} was already gone, but it is still listed",
                lockfile::short(id)
            ))),
            (Err(e), Ok(_)) => Err(still(format!(
                "the storage answered that locks/{} was already gone, and listing locks/ again \
                 to confirm it failed: {e}",
                lockfile::short(id)
            ))),
        }
    }

    /// Whether `id` may be removed ([`Repository::remove_locks`]).
    fn permitted(&self, id: &str) -> Result<(), RepoError> {
        let removable = self.removable();
        if removable.listed.contains(id) || removable.written.contains(id) {
            return Ok(());
        }
        Err(RepoError::NotRemovable {
            location: self.location.redacted(),
            id: lockfile::short(id).to_owned(),
            why: "this run did not list it as a regular lock file in locks/, nor write it".into(),
        })
    }

    fn removable(&self) -> std::sync::MutexGuard<'_, Removable> {
        self.removable
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `lock` sealed as restic stores a lock file (its `id` is ignored), with
    /// a random IV, ready for [`Repository::store_lock`]. Only where locks
    /// can be removed, and only where lockwarden holds the key.
    pub fn seal_lock(&self, lock: &Lock) -> Result<SealedLock, RepoError> {
        self.check_removable()?;
        let shown = || self.location.redacted();
        let Some(key) = &self.key else {
            return Err(RepoError::Other {
                location: shown(),
                cause: "lockwarden holds no key for it, so it cannot write a lock".into(),
            });
        };
        let iv = crypto::random_bytes().map_err(|cause| RepoError::Other {
            location: shown(),
            cause,
        })?;
        let (id, stored) = lockfile::seal(key, &lockfile::to_json(lock), iv);
        Ok(SealedLock { id, stored })
    }

    /// Writes a sealed lock to `locks/<id>`, which this process may then
    /// remove. When this fails, the file may still have been stored (a
    /// timeout after the server acted).
    pub fn store_lock(&self, lock: &SealedLock) -> Result<(), RepoError> {
        self.removable().written.insert(lock.id.clone());
        self.backend
            .write_lock(&lock.id, &lock.stored)
            .map_err(|e| failed(&self.location.redacted(), e))
    }

    /// Fails with [`RepoError::RemovalUnsupported`] when this backend cannot
    /// remove a lock by id.
    pub fn check_removable(&self) -> Result<(), RepoError> {
        if self.capabilities().modify {
            Ok(())
        } else {
            Err(self.removal_unsupported())
        }
    }

    fn removal_unsupported(&self) -> RepoError {
        RepoError::RemovalUnsupported {
            location: self.location.redacted(),
            backend: self.backend.name(),
        }
    }
}

/// A delete the storage was asked for and that failed (not one refused
/// before asking), or that it answered with "not there": decided by a look.
fn needs_a_look(outcome: &Result<Removal, RepoError>) -> bool {
    match outcome {
        Ok(Removal::AlreadyGone) => true,
        Ok(Removal::Removed) => false,
        Err(e) => !matches!(
            e,
            RepoError::NotRemovable { .. }
                | RepoError::NotLockDirectory { .. }
                | RepoError::RemovalUnsupported { .. }
                | RepoError::DeadlinePassed { .. }
        ),
    }
}

/// How many lock files are deleted at once.
const REMOVE_WORKERS: usize = 8;

/// A lock read before, with the size and time its listing gave then.
struct ReadBefore {
    lock: Lock,
    size: Option<u64>,
    modified: Option<i64>,
}

impl ReadBefore {
    /// Whether `file` is listed as it was when the lock was read.
    fn listed_as(&self, file: &FileInfo) -> bool {
        self.size == file.size && self.modified == file.modified
    }
}

/// Tries the key files in name order until one opens with `password`: at
/// most [`limits::KEYS`] (as restic), and at most
/// [`limits::SCRYPT_WORK_TOTAL`] scrypt work in all; no read and no
/// derivation begun after `deadline`.
fn open_master_key(
    backend: &dyn Backend,
    password: &Password,
    shown: &str,
    deadline: Deadline,
) -> Result<Key, RepoError> {
    in_time(deadline, shown, OPENING)?;
    let mut files = backend.list(Kind::Key).map_err(|e| opening(shown, e))?;
    if files.is_empty() {
        return Err(RepoError::NoRepository {
            location: shown.to_owned(),
            cause: "keys/ holds no key file".into(),
        });
    }
    files.sort_by(|a, b| a.name.cmp(&b.name));
    let total = files.len();
    files.truncate(limits::KEYS);
    let mut search = KeySearch::default();
    // Read them all first, then try the cheapest first: a planted key with
    // costly parameters cannot use up the budget before the real one.
    let mut candidates = search.read(backend, &files, deadline, shown)?;
    candidates.sort_by_key(|(name, key_file)| (key_file.work(), *name));
    let mut work_left = limits::SCRYPT_WORK_TOTAL;
    for (name, key_file) in &candidates {
        in_time(deadline, shown, OPENING)?;
        if key_file.work() > work_left {
            search.problems.push(format!(
                "{name}: not tried, the key files before it used up the scrypt budget"
            ));
            search.out_of_budget = true;
            continue;
        }
        match key_file.open(password.as_bytes()) {
            Ok(key) => return Ok(key),
            Err(keys::KeyError::WrongPassword) => {
                search.tried += 1;
                work_left -= key_file.work();
            }
            Err(keys::KeyError::Invalid(why)) => search.problems.push(format!("{name}: {why}")),
        }
    }
    Err(search.failure(shown, files.len(), total))
}

/// What trying the key files found.
#[derive(Default)]
struct KeySearch {
    /// One line per key file that could not be used.
    problems: Vec<String>,
    /// How many the password was tried on.
    tried: usize,
    /// Whether the scrypt budget ran out.
    out_of_budget: bool,
}

impl KeySearch {
    /// Reads and parses `files`, noting the ones that fail; fails when
    /// `deadline` passes first.
    fn read<'a>(
        &mut self,
        backend: &dyn Backend,
        files: &'a [FileInfo],
        deadline: Deadline,
        shown: &str,
    ) -> Result<Vec<(&'a str, keys::KeyFile)>, RepoError> {
        let mut candidates = Vec::new();
        for file in files {
            in_time(deadline, shown, OPENING)?;
            let name = lockfile::short(&file.name);
            match backend
                .read(Kind::Key, &file.name)
                .map_err(|e| e.to_string())
                .and_then(|bytes| keys::KeyFile::parse(&bytes).map_err(|e| e.to_string()))
            {
                Ok(key_file) => candidates.push((name, key_file)),
                Err(problem) => self.problems.push(format!("{name}: {problem}")),
            }
        }
        Ok(candidates)
    }

    /// Why no key opened, after `considered` of `total` key files.
    fn failure(self, shown: &str, considered: usize, total: usize) -> RepoError {
        let location = shown.to_owned();
        let unusable = bounded_problem(self.problems.join("; "));
        if self.tried == 0 || self.out_of_budget {
            return RepoError::NoUsableKey {
                location,
                detail: unusable,
            };
        }
        if total > considered {
            return RepoError::TooManyKeys {
                location,
                tried: considered,
                total,
            };
        }
        let mut detail = format!("no key file opened, {} tried", self.tried);
        if !self.problems.is_empty() {
            detail += &format!("; unusable: {unusable}");
        }
        RepoError::WrongPassword { location, detail }
    }
}

fn parse_config(plain: &[u8]) -> Result<Config, String> {
    #[derive(serde::Deserialize)]
    struct ConfigJson {
        version: u32,
        id: String,
    }
    let json: ConfigJson =
        serde_json::from_slice(plain).map_err(|e| format!("config is not valid: {e}"))?;
    Ok(Config {
        id: json.id,
        version: json.version,
    })
}

/// A backend error while opening: a missing file means no repository.
fn opening(shown: &str, e: BackendError) -> RepoError {
    match e {
        BackendError::NotFound(what) => RepoError::NoRepository {
            location: shown.to_owned(),
            cause: format!("{what} does not exist"),
        },
        BackendError::NoRepository(cause) => RepoError::NoRepository {
            location: shown.to_owned(),
            cause,
        },
        other => failed(shown, other),
    }
}

/// A backend error as a repository error.
fn failed(shown: &str, e: BackendError) -> RepoError {
    match e {
        BackendError::Unreachable(cause) => RepoError::Unreachable { cause, tls: false },
        BackendError::Untrusted(cause) => RepoError::Unreachable { cause, tls: true },
        BackendError::Denied(cause) => RepoError::Denied { cause },
        BackendError::WrongPassword => RepoError::WrongPassword {
            location: shown.to_owned(),
            detail: "restic opened no key".into(),
        },
        BackendError::TooLarge { .. } => RepoError::Other {
            location: shown.to_owned(),
            cause: format!("an answer of the storage (a file or a listing) {e}"),
        },
        other => RepoError::Other {
            location: shown.to_owned(),
            cause: other.to_string(),
        },
    }
}

#[cfg(test)]
pub(crate) mod tests;
