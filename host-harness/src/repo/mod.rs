//! restic repository access: keys, encryption, lock files, backends.
//!
//! A [`Repository`] is opened once (one scrypt derivation) and then read as
//! often as needed; the master key stays in memory and is never written.

pub mod backend;
pub mod crypto;
pub mod keys;
pub mod location;
pub mod lockfile;
mod restic_cli;

use backend::{Backend, BackendError, Kind, LocalBackend, Removal, RestBackend};
use crypto::Key;
use location::Location;
use restic_cli::{ResticCli, ResticFailure};

use std::path::PathBuf;
use std::time::Duration;

use crate::command;
use crate::contract::{self, Lock, UnreadableLock};
use crate::files::{ReadError, read_regular_file};
use crate::limits;
use crate::parallel::parallel_map;

/// How many lock files are read at once.
const READ_WORKERS: usize = 8;

/// A repository password. Never printed.
#[derive(Clone)]
pub struct Password(Vec<u8>);

impl Password {
    /// Wraps password bytes.
    pub fn new(bytes: impl Into<Vec<u8>>) -> Password {
        Password(bytes.into())
    }

    /// The password's bytes, for handing to a restic that lockwarden starts.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    fn as_str_lossy(&self) -> String {
        String::from_utf8_lossy(&self.0).into_owned()
    }
}

impl std::fmt::Debug for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Password(***)")
    }
}

/// Where a password comes from. The command line and `watch` both resolve
/// it here; which source wins when several are given is the caller's
/// (restic's order: command, then file, then `RESTIC_PASSWORD`).
#[derive(Debug, Clone)]
pub enum PasswordSource {
    /// A shell command printing it (`--password-command`).
    Command(String),
    /// A file holding it (`--password-file`).
    File(PathBuf),
    /// The value itself (from `RESTIC_PASSWORD` or a named variable).
    Value(Password),
}

/// Why no password could be had. Never contains the password.
#[derive(Debug, thiserror::Error)]
pub enum PasswordError {
    /// The file could not be read.
    #[error("cannot read password file {path}: it {cause}")]
    File {
        /// The file.
        path: String,
        /// Why.
        cause: ReadError,
    },
    /// The command failed.
    #[error("the password command {0}")]
    Command(String),
    /// The password is empty.
    #[error("the password is empty; restic refuses an empty password too")]
    Empty,
}

impl PasswordSource {
    /// Reads the password now: a file within [`limits::PASSWORD`] bytes (a
    /// regular file only), a command within `timeout`, trimmed of surrounding
    /// whitespace as restic does.
    pub fn resolve(&self, timeout: Duration) -> Result<Password, PasswordError> {
        let bytes = match self {
            PasswordSource::File(path) => {
                read_regular_file(path, limits::PASSWORD).map_err(|cause| PasswordError::File {
                    path: path.display().to_string(),
                    cause,
                })?
            }
            PasswordSource::Command(line) => {
                let output = command::run(command::shell(line), timeout, limits::PASSWORD)
                    .map_err(|e| PasswordError::Command(e.to_string()))?;
                if !output.status.success() {
                    return Err(PasswordError::Command(format!(
                        "failed ({}): {}",
                        output.status,
                        output.stderr_line()
                    )));
                }
                output.stdout
            }
            PasswordSource::Value(password) => password.0.clone(),
        };
        let trimmed = bytes.trim_ascii();
        if trimmed.is_empty() {
            return Err(PasswordError::Empty);
        }
        Ok(Password::new(trimmed.to_vec()))
    }
}

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
    /// Removal by id is not possible on this backend.
    #[error(
        "cannot remove locks from {location}: lockwarden removes locks by id only in local and rest: repositories, and reads {backend} repositories through restic; run `lockwarden check` to see which locks are stale, then `restic unlock` there"
    )]
    RemovalUnsupported {
        /// Redacted location.
        location: String,
        /// The backend.
        backend: String,
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

enum Access {
    Native { store: Box<dyn Backend>, key: Key },
    Restic(ResticCli),
}

/// An open repository: its location, config and master key.
pub struct Repository {
    location: Location,
    config: Config,
    access: Access,
}

impl Repository {
    /// Opens the repository at `location`: reads `config`, finds the key file
    /// that `password` opens (at most 20 tried, as restic does), decrypts the
    /// config. Each network request or restic run ends within `timeout`.
    pub fn open(
        location: Location,
        password: &Password,
        timeout: Duration,
    ) -> Result<Repository, RepoError> {
        let shown = location.redacted();
        let store: Box<dyn Backend> = match &location {
            Location::Local(path) => {
                Box::new(LocalBackend::open(path).map_err(|e| no_repo_or(&shown, e))?)
            }
            Location::Rest { url, credentials } => Box::new(RestBackend::new(
                url,
                credentials.as_ref(),
                shown.clone(),
                timeout,
            )),
            Location::Restic { raw, .. } => {
                let cli = ResticCli::new(raw, password.clone(), timeout);
                let config = cli.config().map_err(|f| restic_error(&shown, f))?;
                return Ok(Repository {
                    location,
                    config,
                    access: Access::Restic(cli),
                });
            }
        };
        let sealed_config = store
            .read(Kind::Config, "")
            .map_err(|e| no_repo_or(&shown, e))?;
        let key = open_master_key(store.as_ref(), password, &shown)?;
        let config = parse_config(&key, &sealed_config).map_err(|cause| RepoError::Other {
            location: shown.clone(),
            cause,
        })?;
        Ok(Repository {
            location,
            config,
            access: Access::Native { store, key },
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

    /// The repository as the contract describes it.
    pub fn describe(&self) -> contract::Repository {
        contract::Repository {
            id: self.config.id.clone(),
            location: self.location.redacted(),
            backend: self.location.backend().to_owned(),
            version: self.config.version,
        }
    }

    /// Lists and reads every lock, in parallel. A file that cannot be read or
    /// decoded becomes an [`UnreadableLock`]; only a failed listing is an
    /// error.
    pub fn read_locks(&self) -> Result<LockSet, RepoError> {
        let shown = self.location.redacted();
        let results: Vec<Read> = match &self.access {
            Access::Native { store, key } => {
                let files = match store.list(Kind::Lock) {
                    Ok(files) => files,
                    // restic, too, takes a missing locks/ for no locks.
                    Err(BackendError::NotFound(_)) => Vec::new(),
                    Err(e) => return Err(store_error(&shown, e)),
                };
                parallel_map(&files, READ_WORKERS, |file| {
                    let unreadable = |size: u64, problem: String| {
                        Read::Unreadable(UnreadableLock {
                            id: file.name.clone(),
                            size,
                            problem: bounded_problem(problem),
                        })
                    };
                    if file.size > Kind::Lock.limit() {
                        return unreadable(
                            file.size,
                            BackendError::TooLarge {
                                size: file.size,
                                limit: Kind::Lock.limit(),
                            }
                            .to_string(),
                        );
                    }
                    match store.read(Kind::Lock, &file.name) {
                        Ok(bytes) => match lockfile::decode(&file.name, &bytes, key) {
                            Ok(lock) => Read::Lock(lock),
                            Err(problem) => unreadable(bytes.len() as u64, problem),
                        },
                        // Removed between listing and reading (its holder
                        // refreshed or finished): simply no longer there.
                        Err(BackendError::NotFound(_)) => Read::Vanished,
                        Err(e @ BackendError::TooLarge { size, .. }) => {
                            unreadable(size, e.to_string())
                        }
                        Err(e) => unreadable(file.size, format!("cannot read: {e}")),
                    }
                })
            }
            Access::Restic(cli) => {
                let ids = cli.list_locks().map_err(|f| restic_error(&shown, f))?;
                parallel_map(&ids, 4, |id| {
                    match cli
                        .read_lock(id)
                        .and_then(|json| lockfile::parse(id, &json))
                    {
                        Ok(lock) => Read::Lock(lock),
                        Err(problem) => Read::Unreadable(UnreadableLock {
                            id: id.clone(),
                            size: 0,
                            problem: bounded_problem(problem),
                        }),
                    }
                })
            }
        };
        let mut set = LockSet::default();
        for result in results {
            match result {
                Read::Lock(lock) => set.locks.push(lock),
                Read::Unreadable(u) => set.unreadable.push(u),
                Read::Vanished => {}
            }
        }
        Ok(set)
    }

    /// Deletes `locks/<id>`. An id that is already gone counts as removed.
    pub fn remove_lock(&self, id: &str) -> Result<Removal, RepoError> {
        let shown = self.location.redacted();
        match &self.access {
            Access::Native { store, .. } => {
                store.remove_lock(id).map_err(|e| store_error(&shown, e))
            }
            Access::Restic(_) => self.check_removable().map(|()| Removal::Removed),
        }
    }

    /// Fails with [`RepoError::RemovalUnsupported`] when locks cannot be
    /// removed by id on this backend.
    pub fn check_removable(&self) -> Result<(), RepoError> {
        match self.access {
            Access::Native { .. } => Ok(()),
            Access::Restic(_) => Err(RepoError::RemovalUnsupported {
                location: self.location.redacted(),
                backend: self.location.backend().to_owned(),
            }),
        }
    }
}

/// Tries the key files in name order until one opens with `password`: at
/// most [`keys::MAX_KEYS`] (as restic), and at most
/// [`limits::SCRYPT_WORK_TOTAL`] scrypt work in all.
fn open_master_key(
    store: &dyn Backend,
    password: &Password,
    shown: &str,
) -> Result<Key, RepoError> {
    let mut files = store.list(Kind::Key).map_err(|e| no_repo_or(shown, e))?;
    if files.is_empty() {
        return Err(RepoError::NoRepository {
            location: shown.to_owned(),
            cause: "keys/ holds no key file".into(),
        });
    }
    files.sort_by(|a, b| a.name.cmp(&b.name));
    let total = files.len();
    files.truncate(keys::MAX_KEYS);
    let mut problems = Vec::new();
    // Read them all first, then try the cheapest first: a planted key with
    // costly parameters cannot use up the budget before the real one.
    let mut candidates = Vec::new();
    for file in &files {
        let name = &file.name[..8];
        match store
            .read(Kind::Key, &file.name)
            .map_err(|e| e.to_string())
            .and_then(|bytes| keys::KeyFile::parse(&bytes).map_err(|e| e.to_string()))
        {
            Ok(key_file) => candidates.push((name, key_file)),
            Err(problem) => problems.push(format!("{name}: {problem}")),
        }
    }
    candidates.sort_by_key(|(name, key_file)| (key_file.work(), *name));
    let mut tried = 0usize;
    let mut work_left = limits::SCRYPT_WORK_TOTAL;
    let mut out_of_budget = false;
    for (name, key_file) in &candidates {
        if key_file.work() > work_left {
            problems.push(format!(
                "{name}: not tried, the key files before it used up the scrypt budget"
            ));
            out_of_budget = true;
            continue;
        }
        match key_file.open(&password.0) {
            Ok(key) => return Ok(key),
            Err(keys::KeyError::WrongPassword) => {
                tried += 1;
                work_left -= key_file.work();
            }
            Err(keys::KeyError::Invalid(why)) => problems.push(format!("{name}: {why}")),
        }
    }
    let unusable = problems.join("; ");
    if tried == 0 || out_of_budget {
        return Err(RepoError::NoUsableKey {
            location: shown.to_owned(),
            detail: bounded_problem(unusable),
        });
    }
    if total > files.len() {
        return Err(RepoError::TooManyKeys {
            location: shown.to_owned(),
            tried: files.len(),
            total,
        });
    }
    let mut detail = format!("no key file opened, {tried} tried");
    if !problems.is_empty() {
        detail += &format!("; unusable: {}", bounded_problem(unusable));
    }
    Err(RepoError::WrongPassword {
        location: shown.to_owned(),
        detail,
    })
}

fn parse_config(key: &Key, sealed: &[u8]) -> Result<Config, String> {
    #[derive(serde::Deserialize)]
    struct ConfigJson {
        version: u32,
        id: String,
    }
    let plain = key
        .open(sealed)
        .map_err(|e| format!("cannot decrypt config: {e}"))?;
    let json: ConfigJson =
        serde_json::from_slice(&plain).map_err(|e| format!("config is not valid: {e}"))?;
    Ok(Config {
        id: json.id,
        version: json.version,
    })
}

fn no_repo_or(shown: &str, e: BackendError) -> RepoError {
    match e {
        BackendError::NotFound(what) => RepoError::NoRepository {
            location: shown.to_owned(),
            cause: what,
        },
        other => store_error(shown, other),
    }
}

fn store_error(shown: &str, e: BackendError) -> RepoError {
    match e {
        BackendError::Unreachable(cause) => RepoError::Unreachable { cause },
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

fn restic_error(shown: &str, f: ResticFailure) -> RepoError {
    match f {
        ResticFailure::NoRepository(cause) => RepoError::NoRepository {
            location: shown.to_owned(),
            cause,
        },
        ResticFailure::WrongPassword => RepoError::WrongPassword {
            location: shown.to_owned(),
            detail: "restic opened no key".into(),
        },
        ResticFailure::Unreachable(cause) => RepoError::Unreachable { cause },
        ResticFailure::Other(cause) => RepoError::Other {
            location: shown.to_owned(),
            cause,
        },
    }
}
