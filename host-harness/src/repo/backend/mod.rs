//! Byte-level access to a repository's files. Every backend implements
//! [`Backend`] in one file and registers in [`SCHEMES`]; nothing else in
//! lockwarden names a backend. Only `config`, `keys/` and `locks/` are ever
//! touched, and only `locks/<64 hex>` can be deleted.
//!
//! Adding a backend: write `foo.rs` with a `pub const SCHEME: Scheme` and
//! `impl Backend`, add `mod foo;` and `foo::SCHEME` to [`SCHEMES`] (before
//! the restic-binary entry that served `foo:` until then, if any), and test
//! it against the real storage (`tests/e2e/`).

mod azure;
mod blocking;
mod cloud;
mod faulty;
mod gs;
mod local;
mod memory;
mod rclone;
mod rest;
mod restic_cli;
mod s3;
mod sftp;

use std::time::Duration;

pub use faulty::{Fault, FaultyBackend, Operation};
pub use memory::MemoryBackend;
pub use rest::parse_listing;

use super::Password;
use super::location::LocationError;

/// Every backend lockwarden knows, by the `scheme:` that starts a location.
/// The first match wins; a location that matches none is a local path, as
/// in restic.
pub const SCHEMES: &[Scheme] = &[
    local::SCHEME,
    rest::SCHEME,
    sftp::SCHEME,
    s3::SCHEME,
    restic_cli::scheme("b2"),
    azure::SCHEME,
    gs::SCHEME,
    restic_cli::scheme("swift"),
    rclone::SCHEME,
];

/// What a location without a known scheme is.
pub const FALLBACK: &Scheme = &local::SCHEME;

/// One kind of backend: how its locations are written and how it is opened.
#[derive(Debug)]
pub struct Scheme {
    /// The backend's name, as the contract's `repository.backend` has it,
    /// and the prefix (`NAME:`) of its locations.
    pub name: &'static str,
    /// Checks a location of this scheme (the whole string, prefix included)
    /// and returns it in the form [`Scheme::open`] takes. The result may hold
    /// credentials: it is never shown (see [`super::location`]).
    pub parse: fn(&str) -> Result<String, LocationError>,
    /// What may be shown of a location [`Scheme::parse`] accepted (in
    /// messages, reports, logs, metrics), its secrets replaced by `***`.
    pub redact: fn(&str) -> String,
    /// Opens the backend at a location [`Scheme::parse`] accepted.
    pub open: fn(&Target<'_>) -> Result<Box<dyn Backend>, BackendError>,
}

/// Where a backend reads its storage's variables (`AWS_ACCESS_KEY_ID`,
/// `AZURE_ACCOUNT_KEY`, ...): the process environment, each name behind an
/// optional prefix (as restic reads `RESTIC_FROM_`-prefixed variables for a
/// second repository), so that one `watch` holds other credentials per
/// repository. With a prefix, only prefixed names are read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Variables {
    prefix: String,
}

impl Variables {
    /// Variables read as `<prefix><NAME>`.
    pub fn prefixed(prefix: &str) -> Variables {
        Variables {
            prefix: prefix.to_owned(),
        }
    }

    /// Whether names are read behind a prefix (then no default that is not
    /// the repository's own, such as `~/.aws/credentials`, applies).
    pub fn is_prefixed(&self) -> bool {
        !self.prefix.is_empty()
    }

    /// The value of `name` (behind the prefix), when set and not empty.
    pub fn get(&self, name: &str) -> Option<String> {
        std::env::var(format!("{}{name}", self.prefix))
            .ok()
            .filter(|v| !v.is_empty())
    }
}

/// What opening a backend is given.
pub struct Target<'a> {
    /// The location, as [`Scheme::parse`] returned it.
    pub location: &'a str,
    /// The location with credentials hidden, for messages.
    pub shown: &'a str,
    /// The repository password (for backends that hand it to restic).
    pub password: &'a Password,
    /// How long one request or command may take.
    pub timeout: Duration,
    /// Where the storage's variables are read.
    pub variables: &'a Variables,
}

/// The kinds of file lockwarden reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// `config` (the name is ignored).
    Config,
    /// `keys/<id>`.
    Key,
    /// `locks/<id>`.
    Lock,
}

impl Kind {
    /// The directory holding files of this kind.
    pub fn dir(self) -> &'static str {
        match self {
            Kind::Config => "",
            Kind::Key => "keys",
            Kind::Lock => "locks",
        }
    }

    /// The most bytes a file of this kind may hold (`crate::limits`).
    pub fn limit(self) -> u64 {
        match self {
            Kind::Config => crate::limits::CONFIG_FILE,
            Kind::Key => crate::limits::KEY_FILE,
            Kind::Lock => crate::limits::LOCK_FILE,
        }
    }
}

/// A file from a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileInfo {
    /// The file name (an id).
    pub name: String,
    /// Its size in bytes, when the storage says without extra work.
    pub size: Option<u64>,
    /// When the storage last wrote it (ns since the epoch, the storage's
    /// clock), when the storage says.
    pub modified: Option<i64>,
}

impl FileInfo {
    /// A listed name with nothing else known.
    pub fn named(name: impl Into<String>) -> FileInfo {
        FileInfo {
            name: name.into(),
            size: None,
            modified: None,
        }
    }
}

/// What a backend can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// It deletes one lock file by id, and writes one ([`Backend::write_lock`]).
    pub remove: bool,
    /// What [`Backend::read`] returns.
    pub contents: Contents,
    /// How many reads may run at once.
    pub parallel_reads: usize,
}

impl Capabilities {
    /// A backend lockwarden speaks natively: it reads the stored bytes,
    /// removes by id, and reads 8 files at once.
    pub const NATIVE: Capabilities = Capabilities {
        remove: true,
        contents: Contents::Encrypted,
        parallel_reads: 8,
    };
}

/// What a backend's reads return.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contents {
    /// The stored bytes; lockwarden decrypts them with the master key.
    Encrypted,
    /// The plaintext (restic decrypted it); no key is needed or read.
    Decrypted,
}

/// What a delete did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removal {
    /// The file was deleted now.
    Removed,
    /// The file was already gone (its holder may have refreshed it away).
    AlreadyGone,
}

/// Why a backend operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    /// The file or directory does not exist.
    #[error("{0} does not exist")]
    NotFound(String),
    /// The storage says there is no repository (in its own words).
    #[error("{0}")]
    NoRepository(String),
    /// The storage cannot be reached.
    #[error("{0}")]
    Unreachable(String),
    /// The storage refused the credentials (or they allow too little).
    #[error("{0}")]
    Denied(String),
    /// The password opens no key (a backend that decrypts itself says so).
    #[error("wrong password")]
    WrongPassword,
    /// The file is larger than its kind allows; it was not read.
    #[error("is {size} bytes, more than the {limit} bytes a restic file of this kind can be")]
    TooLarge {
        /// Its size (at least this much when the server did not say).
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// A directory lists more files than lockwarden handles.
    #[error("{dir} holds more than {limit} files; lockwarden judges none of them")]
    TooMany {
        /// The directory.
        dir: String,
        /// The limit.
        limit: usize,
    },
    /// The backend cannot do this (see [`Capabilities`]).
    #[error("the {backend} backend cannot {operation}")]
    Unsupported {
        /// The backend's name.
        backend: &'static str,
        /// What it cannot do.
        operation: &'static str,
    },
    /// Anything else, said in full.
    #[error("{0}")]
    Other(String),
}

/// Access to one repository's storage.
pub trait Backend: Send + Sync {
    /// The backend's name ([`Scheme::name`]).
    fn name(&self) -> &'static str;
    /// What it can do.
    fn capabilities(&self) -> Capabilities;
    /// Lists the files of a kind (`Key` or `Lock`), each name a restic id,
    /// each once, at most [`crate::limits::LISTING_ENTRIES`] of them.
    fn list(&self, kind: Kind) -> Result<Vec<FileInfo>, BackendError>;
    /// Reads a whole file, at most [`Kind::limit`] bytes.
    fn read(&self, kind: Kind, name: &str) -> Result<Vec<u8>, BackendError>;
    /// Deletes `locks/<id>`; `id` must be 64 lowercase hex. Only a backend
    /// whose [`Capabilities::remove`] is true does.
    fn remove(&self, id: &str) -> Result<Removal, BackendError>;
    /// Writes a new `locks/<id>` holding `stored` (a sealed lock whose
    /// SHA-256 is `id`), so that no reader sees it half written. Only a
    /// backend whose [`Capabilities::remove`] is true does.
    fn write_lock(&self, id: &str, stored: &[u8]) -> Result<(), BackendError>;
}

/// A shared backend is a backend (tests keep a handle on the one a
/// repository uses).
impl<B: Backend + ?Sized> Backend for std::sync::Arc<B> {
    fn name(&self) -> &'static str {
        (**self).name()
    }
    fn capabilities(&self) -> Capabilities {
        (**self).capabilities()
    }
    fn list(&self, kind: Kind) -> Result<Vec<FileInfo>, BackendError> {
        (**self).list(kind)
    }
    fn read(&self, kind: Kind, name: &str) -> Result<Vec<u8>, BackendError> {
        (**self).read(kind, name)
    }
    fn remove(&self, id: &str) -> Result<Removal, BackendError> {
        (**self).remove(id)
    }
    fn write_lock(&self, id: &str, stored: &[u8]) -> Result<(), BackendError> {
        (**self).write_lock(id, stored)
    }
}

/// The scheme of `location`: the entry of [`SCHEMES`] whose `NAME:` starts
/// it, else [`FALLBACK`].
pub fn scheme_of(location: &str) -> &'static Scheme {
    SCHEMES
        .iter()
        .find(|s| {
            location
                .strip_prefix(s.name)
                .is_some_and(|rest| rest.starts_with(':'))
        })
        .unwrap_or(FALLBACK)
}

/// Refuses a name that is not a restic id, before it becomes part of a path
/// or URL; returns the file's path in the repository.
fn checked_name(kind: Kind, name: &str) -> Result<String, BackendError> {
    match kind {
        Kind::Config => Ok("config".to_owned()),
        _ if super::lockfile::is_valid_id(name) => Ok(format!("{}/{name}", kind.dir())),
        _ => Err(BackendError::Other(format!(
            "`{}` is not a restic file id (64 lowercase hex digits)",
            crate::text::escape(name)
        ))),
    }
}

/// Keeps the names of a listing that are restic ids, each once, and refuses
/// a listing longer than [`crate::limits::LISTING_ENTRIES`]: what every
/// backend's [`Backend::list`] promises.
fn checked_listing(
    files: impl IntoIterator<Item = FileInfo>,
    dir: impl FnOnce() -> String,
) -> Result<Vec<FileInfo>, BackendError> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for file in files {
        // restic writes nothing but ids here; anything else (editor
        // droppings, temp files) is not ours to judge.
        if !super::lockfile::is_valid_id(&file.name) || !seen.insert(file.name.clone()) {
            continue;
        }
        if out.len() == crate::limits::LISTING_ENTRIES {
            return Err(BackendError::TooMany {
                dir: dir(),
                limit: crate::limits::LISTING_ENTRIES,
            });
        }
        out.push(file);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemes_are_found_by_prefix_and_local_takes_the_rest() {
        assert_eq!(scheme_of("rest:http://h/r").name, "rest");
        assert_eq!(scheme_of("s3:host/bucket").name, "s3");
        assert_eq!(scheme_of("local:/srv/r").name, "local");
        assert_eq!(scheme_of("/srv/rest:x").name, "local");
        assert_eq!(scheme_of("restic:/x").name, "local");
        let names: std::collections::HashSet<_> = SCHEMES.iter().map(|s| s.name).collect();
        assert_eq!(names.len(), SCHEMES.len(), "a scheme registered twice");
    }

    #[test]
    fn listings_keep_ids_once() {
        let id = "a".repeat(64);
        let files = [
            FileInfo::named(id.clone()),
            FileInfo::named(id.clone()),
            FileInfo::named("notes.txt"),
        ];
        let kept = checked_listing(files, || "locks".into()).expect("short");
        assert_eq!(kept, vec![FileInfo::named(id)]);
    }
}
