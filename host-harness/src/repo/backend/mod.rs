//! Byte-level access to a repository's files, for the backends lockwarden
//! reads natively. Only `config`, `keys/` and `locks/` are ever touched, and
//! only `locks/<64 hex>` can be deleted.

mod local;
mod rest;

pub use local::LocalBackend;
pub use rest::{RestBackend, parse_listing};

/// The kinds of file lockwarden reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

/// A file's name and size from a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileInfo {
    /// The file name (an id).
    pub name: String,
    /// Its size in bytes, when the listing says without extra work (REST v2
    /// does; REST v1 and the local backend give 0).
    pub size: u64,
}

/// What a delete did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removal {
    /// The file was deleted now.
    Removed,
    /// The file was already gone (its holder may have refreshed it away).
    AlreadyGone,
}

/// Why a store operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BackendError {
    /// The file or directory does not exist.
    #[error("{0} does not exist")]
    NotFound(String),
    /// The server cannot be reached.
    #[error("{0}")]
    Unreachable(String),
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
    /// Anything else, said in full.
    #[error("{0}")]
    Other(String),
}

/// Raw access to one repository.
pub trait Backend: Send + Sync {
    /// Reads a whole file.
    fn read(&self, kind: Kind, name: &str) -> Result<Vec<u8>, BackendError>;
    /// Lists the files of a kind (`Key` or `Lock`).
    fn list(&self, kind: Kind) -> Result<Vec<FileInfo>, BackendError>;
    /// Deletes `locks/<id>`; `id` must be 64 lowercase hex.
    fn remove_lock(&self, id: &str) -> Result<Removal, BackendError>;
}

/// Refuses a name that is not a restic id, before it becomes part of a path
/// or URL.
fn checked_name(kind: Kind, name: &str) -> Result<String, BackendError> {
    match kind {
        Kind::Config => Ok("config".to_owned()),
        _ if super::lockfile::is_valid_id(name) => Ok(format!("{}/{name}", kind.dir())),
        _ => Err(BackendError::Other(format!(
            "`{name}` is not a restic file id (64 lowercase hex digits)"
        ))),
    }
}
