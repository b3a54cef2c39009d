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

use backend::{Kind, LocalStore, Removal, RestStore, Store, StoreError};
use crypto::Key;
use location::Location;
use restic_cli::{ResticCli, ResticFailure};

use crate::contract::{self, Lock, UnreadableLock};
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

    /// Reads a password file, as restic does (surrounding whitespace trimmed).
    pub fn from_file(path: &std::path::Path) -> Result<Password, String> {
        std::fs::read(path)
            .map(|text| Password::new(text.trim_ascii().to_vec()))
            .map_err(|e| format!("cannot read password file {}: {e}", path.display()))
    }

    /// Runs a shell command and takes its output (trimmed) as the password.
    pub fn from_command(command: &str) -> Result<Password, String> {
        let output = std::process::Command::new("sh")
            .args(["-c", command])
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::inherit())
            .output()
            .map_err(|e| format!("cannot run the password command: {e}"))?;
        if !output.status.success() {
            return Err(format!("the password command failed ({})", output.status));
        }
        Ok(Password::new(output.stdout.trim_ascii().to_vec()))
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

enum Access {
    Native { store: Box<dyn Store>, key: Key },
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
    /// config.
    pub fn open(location: Location, password: &Password) -> Result<Repository, RepoError> {
        let shown = location.redacted();
        let store: Box<dyn Store> = match &location {
            Location::Local(path) => {
                Box::new(LocalStore::open(path).map_err(|e| no_repo_or(&shown, e))?)
            }
            Location::Rest { url, credentials } => {
                Box::new(RestStore::new(url, credentials.as_ref(), shown.clone()))
            }
            Location::Restic { raw, .. } => {
                let cli = ResticCli::new(raw, password.clone());
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
        let results: Vec<Result<Lock, UnreadableLock>> = match &self.access {
            Access::Native { store, key } => {
                let files = store.list(Kind::Lock).map_err(|e| store_error(&shown, e))?;
                parallel_map(&files, READ_WORKERS, |file| {
                    let unreadable = |problem: String| UnreadableLock {
                        id: file.name.clone(),
                        size: file.size,
                        problem,
                    };
                    match store.read(Kind::Lock, &file.name) {
                        Ok(bytes) => lockfile::decode(&file.name, &bytes, key).map_err(|problem| {
                            UnreadableLock {
                                size: bytes.len() as u64,
                                ..unreadable(problem)
                            }
                        }),
                        Err(StoreError::NotFound(_)) => {
                            Err(unreadable("vanished while being read".into()))
                        }
                        Err(e) => Err(unreadable(format!("cannot read: {e}"))),
                    }
                })
            }
            Access::Restic(cli) => {
                let ids = cli.list_locks().map_err(|f| restic_error(&shown, f))?;
                parallel_map(&ids, 4, |id| {
                    cli.read_lock(id)
                        .and_then(|json| lockfile::parse(id, &json))
                        .map_err(|problem| UnreadableLock {
                            id: id.clone(),
                            size: 0,
                            problem,
                        })
                })
            }
        };
        let mut set = LockSet::default();
        for result in results {
            match result {
                Ok(lock) => set.locks.push(lock),
                // A lock removed between listing and reading (its holder
                // refreshed or finished) is simply no longer there.
                Err(u) if u.problem == "vanished while being read" => {}
                Err(u) => set.unreadable.push(u),
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

/// Tries the key files in order until one opens with `password`.
fn open_master_key(store: &dyn Store, password: &Password, shown: &str) -> Result<Key, RepoError> {
    let mut files = store.list(Kind::Key).map_err(|e| no_repo_or(shown, e))?;
    if files.is_empty() {
        return Err(RepoError::NoRepository {
            location: shown.to_owned(),
            cause: "keys/ holds no key file".into(),
        });
    }
    files.sort_by(|a, b| a.name.cmp(&b.name));
    files.truncate(keys::MAX_KEYS);
    let mut problems = Vec::new();
    for file in &files {
        let bytes = match store.read(Kind::Key, &file.name) {
            Ok(bytes) => bytes,
            Err(e) => {
                problems.push(format!("{}: {e}", &file.name[..8]));
                continue;
            }
        };
        match keys::open(&bytes, &password.0) {
            Ok(key) => return Ok(key),
            Err(keys::KeyError::WrongPassword) => {}
            Err(keys::KeyError::Invalid(why)) => {
                problems.push(format!("{}: {why}", &file.name[..8]))
            }
        }
    }
    let mut detail = format!("no key file opened, {} tried", files.len());
    if !problems.is_empty() {
        detail += &format!("; unusable: {}", problems.join("; "));
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

fn no_repo_or(shown: &str, e: StoreError) -> RepoError {
    match e {
        StoreError::NotFound(what) => RepoError::NoRepository {
            location: shown.to_owned(),
            cause: what,
        },
        other => store_error(shown, other),
    }
}

fn store_error(shown: &str, e: StoreError) -> RepoError {
    match e {
        StoreError::Unreachable(cause) => RepoError::Unreachable { cause },
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
        ResticFailure::Other(cause) => RepoError::Other {
            location: shown.to_owned(),
            cause,
        },
    }
}
