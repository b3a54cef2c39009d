//! restic repository access: keys, encryption, lock files, backends.
//!
//! A [`Repository`] is opened once (one scrypt derivation) and then read as
//! often as needed; the master key stays in memory and is never written.
//! Which storage it lives on is a [`backend::Backend`]'s business.

pub mod backend;
pub mod crypto;
pub mod keys;
pub mod location;
pub mod lockfile;
mod password;

use backend::{Backend, BackendError, Capabilities, Contents, FileInfo, Kind, Removal, Variables};
use crypto::Key;
use location::Location;
pub use password::{Password, PasswordError, PasswordSource};

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
    /// The server does not answer.
    #[error("{cause}; is the server running and the address right?")]
    Unreachable {
        /// What failed, naming the location.
        cause: String,
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
    /// Anything else.
    #[error("repository {location}: {cause}")]
    Other {
        /// Redacted location.
        location: String,
        /// What went wrong.
        cause: String,
    },
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
}

/// What reading one listed lock file gave.
enum Read {
    Lock(Lock),
    Unreadable(UnreadableLock),
    Vanished,
}

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
        let backend = location
            .open(password, timeout, variables)
            .map_err(|e| opening(&location.redacted(), e))?;
        Repository::with_backend(location, backend, password)
    }

    /// Opens the repository that `backend` holds (any backend, the in-memory
    /// one of unit tests too); `location` names it in messages.
    pub fn with_backend(
        location: Location,
        backend: Box<dyn Backend>,
        password: &Password,
    ) -> Result<Repository, RepoError> {
        let shown = location.redacted();
        let stored_config = backend
            .read(Kind::Config, "")
            .map_err(|e| opening(&shown, e))?;
        let (key, config) = match backend.capabilities().contents {
            Contents::Decrypted => (None, parse_config(&stored_config)),
            Contents::Encrypted => {
                let key = open_master_key(backend.as_ref(), password, &shown)?;
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
        })
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
    /// decoded becomes an [`UnreadableLock`]; a file removed between listing
    /// and reading is left out; only a failed listing is an error.
    pub fn read_locks(&self) -> Result<LockSet, RepoError> {
        let files = match self.backend.list(Kind::Lock) {
            Ok(files) => files,
            // restic, too, takes a missing locks/ for no locks.
            Err(BackendError::NotFound(_)) => Vec::new(),
            Err(e) => return Err(failed(&self.location.redacted(), e)),
        };
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
        let workers = self.capabilities().parallel_reads.max(1);
        let mut fresh = std::collections::HashMap::new();
        for (file, read) in new
            .iter()
            .zip(parallel_map(&new, workers, |file| self.read_lock(file)))
        {
            fresh.insert(file.name.as_str(), read);
        }
        // In the listing's order, each lock read now or before.
        let mut set = LockSet::default();
        for file in &files {
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
                // Not remembered: the next check tries again.
                Some(Read::Unreadable(u)) => {
                    known.remove(&file.name);
                    set.unreadable.push(u);
                }
                Some(Read::Vanished) => {
                    known.remove(&file.name);
                }
                None => set
                    .locks
                    .extend(known.get(&file.name).map(|k| k.lock.clone())),
            }
        }
        Ok(set)
    }

    /// Reads and decodes one listed lock file.
    fn read_lock(&self, file: &FileInfo) -> Read {
        let stored_at = crate::time::plausible_stored_at(file.modified);
        let unreadable = |size: u64, problem: String| {
            Read::Unreadable(UnreadableLock {
                id: file.name.clone(),
                size,
                problem: bounded_problem(problem),
                stored_at,
                first_seen: None,
            })
        };
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
            Err(e @ BackendError::TooLarge { size, .. }) => return unreadable(size, e.to_string()),
            Err(e) => return unreadable(listed, format!("cannot read: {e}")),
        };
        let decoded = match &self.key {
            Some(key) => lockfile::decode(&file.name, &bytes, key),
            None => lockfile::parse(&file.name, &bytes),
        };
        match decoded {
            Ok(lock) => Read::Lock(Lock { stored_at, ..lock }),
            Err(problem) => unreadable(bytes.len() as u64, problem),
        }
    }

    /// Deletes `locks/<id>`. An id that is already gone counts as removed.
    /// A backend that cannot remove ([`Capabilities::remove`]) is refused
    /// here, before it is asked.
    pub fn remove_lock(&self, id: &str) -> Result<Removal, RepoError> {
        self.check_removable()?;
        self.backend
            .remove(id)
            .map_err(|e| failed(&self.location.redacted(), e))
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

    /// Writes a sealed lock to `locks/<id>`. When this fails, the file may
    /// still have been stored (a timeout after the server acted).
    pub fn store_lock(&self, lock: &SealedLock) -> Result<(), RepoError> {
        self.backend
            .write_lock(&lock.id, &lock.stored)
            .map_err(|e| failed(&self.location.redacted(), e))
    }

    /// Fails with [`RepoError::RemovalUnsupported`] when this backend cannot
    /// remove a lock by id.
    pub fn check_removable(&self) -> Result<(), RepoError> {
        if self.capabilities().remove {
            Ok(())
        } else {
            Err(RepoError::RemovalUnsupported {
                location: self.location.redacted(),
                backend: self.backend.name(),
            })
        }
    }
}

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
/// most [`keys::MAX_KEYS`] (as restic), and at most
/// [`limits::SCRYPT_WORK_TOTAL`] scrypt work in all.
fn open_master_key(
    backend: &dyn Backend,
    password: &Password,
    shown: &str,
) -> Result<Key, RepoError> {
    let mut files = backend.list(Kind::Key).map_err(|e| opening(shown, e))?;
    if files.is_empty() {
        return Err(RepoError::NoRepository {
            location: shown.to_owned(),
            cause: "keys/ holds no key file".into(),
        });
    }
    files.sort_by(|a, b| a.name.cmp(&b.name));
    let total = files.len();
    files.truncate(keys::MAX_KEYS);
    let mut search = KeySearch::default();
    // Read them all first, then try the cheapest first: a planted key with
    // costly parameters cannot use up the budget before the real one.
    let mut candidates = search.read(backend, &files);
    candidates.sort_by_key(|(name, key_file)| (key_file.work(), *name));
    let mut work_left = limits::SCRYPT_WORK_TOTAL;
    for (name, key_file) in &candidates {
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
    /// Reads and parses `files`, noting the ones that fail.
    fn read<'a>(
        &mut self,
        backend: &dyn Backend,
        files: &'a [FileInfo],
    ) -> Vec<(&'a str, keys::KeyFile)> {
        let mut candidates = Vec::new();
        for file in files {
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
        candidates
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
        BackendError::Unreachable(cause) => RepoError::Unreachable { cause },
        BackendError::Denied(cause) => RepoError::Denied { cause },
        BackendError::WrongPassword => RepoError::WrongPassword {
            location: shown.to_owned(),
            detail: "restic opened no key".into(),
        },
        BackendError::TooLarge { .. } => RepoError::Other {
            location: shown.to_owned(),
            cause: format!("a file {e}"),
        },
        other => RepoError::Other {
            location: shown.to_owned(),
            cause: other.to_string(),
        },
    }
}

#[cfg(test)]
pub(crate) mod tests;
