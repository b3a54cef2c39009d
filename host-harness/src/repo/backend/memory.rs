//! A repository held in memory, for fast unit tests of everything above the
//! storage (the repository reader, the warden, watch) without restic or a
//! server; the e2e tests use the real thing. It can also make a repository:
//! a config and a key file opened by a password, with cheap scrypt
//! parameters, and lock files sealed with the master key.

use std::collections::BTreeMap;
use std::sync::Mutex;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use sha2::{Digest, Sha256};

use super::{
    Backend, BackendError, Capabilities, EntryKind, FileInfo, Kind, Removal, checked_listing,
    checked_name, checked_read_name,
};
use crate::repo::crypto::{Key, unique_bytes as random_bytes};

/// Stored entries by kind and name.
type Files = BTreeMap<(Kind, String), Stored>;

/// One stored entry: its bytes, the time it was stored, and what it is (a
/// test may plant a directory or a link under a lock's name).
#[derive(Clone)]
struct Stored {
    bytes: Vec<u8>,
    modified: i64,
    entry: EntryKind,
}

/// A repository's files in memory.
pub struct MemoryBackend {
    files: Mutex<Files>,
    /// What a directory is when a test says it is not a directory.
    dirs: Mutex<BTreeMap<Kind, Option<EntryKind>>>,
    capabilities: Capabilities,
}

impl Default for MemoryBackend {
    fn default() -> Self {
        MemoryBackend {
            files: Mutex::default(),
            dirs: Mutex::default(),
            capabilities: Capabilities::NATIVE,
        }
    }
}

impl MemoryBackend {
    /// A new repository whose one key file `password` opens; returns the
    /// backend and the master key (for [`MemoryBackend::put_lock`]).
    pub fn init(password: &[u8]) -> (MemoryBackend, Key) {
        let backend = MemoryBackend::default();
        let master_json = serde_json::json!({
            "mac": {"k": BASE64.encode(random_bytes::<16>()), "r": BASE64.encode(random_bytes::<16>())},
            "encrypt": BASE64.encode(random_bytes::<32>()),
        })
        .to_string();
        let master =
            crate::repo::keys::master_key(master_json.as_bytes()).expect("a valid master key");
        let salt = random_bytes::<32>();
        let (log_n, r, p) = (10u8, 8u32, 1u32);
        let mut derived = [0u8; 64];
        let params = scrypt::Params::new(log_n, r, p).expect("valid scrypt parameters");
        scrypt::scrypt(password, &salt, &params, &mut derived).expect("64 bytes fit");
        let key_file = serde_json::json!({
            "created": "2026-01-01T00:00:00Z", "username": "test", "hostname": "memory",
            "kdf": "scrypt", "N": 1u64 << log_n, "r": r, "p": p,
            "salt": BASE64.encode(salt),
            "data": BASE64.encode(seal(&Key::from_derived(&derived), master_json.as_bytes())),
        });
        let key_id = hex::encode(Sha256::digest(key_file.to_string()));
        backend.put(Kind::Key, &key_id, key_file.to_string().into_bytes());
        let config = serde_json::json!({"version": 2, "id": hex::encode(random_bytes::<32>())});
        backend.put(
            Kind::Config,
            "",
            seal(&master, config.to_string().as_bytes()),
        );
        (backend, master)
    }

    /// The same files, with other capabilities (a backend that cannot
    /// remove, say).
    pub fn with_capabilities(mut self, capabilities: Capabilities) -> Self {
        self.capabilities = capabilities;
        self
    }

    /// Stores a file as is.
    pub fn put(&self, kind: Kind, name: &str, bytes: Vec<u8>) {
        self.put_entry(kind, name, EntryKind::File, bytes);
    }

    /// Stores an entry of any kind (a directory, a link, ...) under `name`.
    pub fn put_entry(&self, kind: Kind, name: &str, entry: EntryKind, bytes: Vec<u8>) {
        let name = if kind == Kind::Config { "" } else { name };
        let stored = Stored {
            bytes,
            modified: crate::time::now(),
            entry,
        };
        self.lock().insert((kind, name.to_owned()), stored);
    }

    /// Says that the directory of `kind` is `entry` (a link, say), or that
    /// there is none.
    pub fn set_dir_kind(&self, kind: Kind, entry: Option<EntryKind>) {
        self.dirs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(kind, entry);
    }

    /// Sets the modification time the listing reports for a stored file.
    pub fn set_modified(&self, kind: Kind, name: &str, modified: i64) {
        if let Some(file) = self.lock().get_mut(&(kind, name.to_owned())) {
            file.modified = modified;
        }
    }

    /// Seals lock JSON as restic stores it (raw, version 1 style) and stores
    /// it under its id, which it returns.
    pub fn put_lock(&self, key: &Key, json: &str) -> String {
        let (id, stored) = crate::repo::lockfile::seal(key, json.as_bytes(), random_bytes());
        self.put(Kind::Lock, &id, stored);
        id
    }

    /// The bytes stored under `name`, of any kind, read as the storage
    /// holds them (no limit, no check of the name).
    pub fn get(&self, kind: Kind, name: &str) -> Option<Vec<u8>> {
        let name = if kind == Kind::Config { "" } else { name };
        self.lock()
            .get(&(kind, name.to_owned()))
            .map(|stored| stored.bytes.clone())
    }

    /// Removes whatever is stored under `name`, of any kind.
    pub fn delete(&self, kind: Kind, name: &str) {
        let name = if kind == Kind::Config { "" } else { name };
        self.lock().remove(&(kind, name.to_owned()));
    }

    /// The names of the files of `kind`.
    pub fn names(&self, kind: Kind) -> Vec<String> {
        self.lock()
            .keys()
            .filter(|(k, _)| *k == kind)
            .map(|(_, name)| name.clone())
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Files> {
        self.files
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Stored {
    /// The entry as a listing or `stat` shows it.
    fn info(&self, name: &str) -> FileInfo {
        let file = self.entry == EntryKind::File;
        FileInfo {
            name: name.to_owned(),
            entry: self.entry,
            size: file.then_some(self.bytes.len() as u64),
            modified: Some(self.modified),
        }
    }
}

/// `plaintext` sealed with a fresh IV.
fn seal(key: &Key, plaintext: &[u8]) -> Vec<u8> {
    key.seal(plaintext, random_bytes())
}

impl Backend for MemoryBackend {
    fn name(&self) -> &'static str {
        "memory"
    }

    fn capabilities(&self) -> Capabilities {
        self.capabilities
    }

    fn list(&self, kind: Kind) -> Result<Vec<FileInfo>, BackendError> {
        let files = self
            .lock()
            .iter()
            .filter(|((k, _), _)| *k == kind)
            .map(|((_, name), stored)| stored.info(name))
            .collect::<Vec<_>>();
        checked_listing(files, || kind.dir().to_owned())
    }

    fn read(&self, kind: Kind, name: &str) -> Result<Vec<u8>, BackendError> {
        let path = checked_read_name(kind, name)?;
        let name = if kind == Kind::Config { "" } else { name };
        let stored = self
            .lock()
            .get(&(kind, name.to_owned()))
            .cloned()
            .ok_or_else(|| BackendError::NotFound(path.clone()))?;
        if stored.entry != EntryKind::File {
            return Err(BackendError::NotAFile {
                path,
                entry: stored.entry,
            });
        }
        if stored.bytes.len() as u64 > kind.limit() {
            return Err(BackendError::TooLarge {
                size: stored.bytes.len() as u64,
                limit: kind.limit(),
            });
        }
        Ok(stored.bytes)
    }

    fn stat(&self, kind: Kind, name: &str) -> Result<Option<FileInfo>, BackendError> {
        checked_name(kind, name)?;
        Ok(self
            .lock()
            .get(&(kind, name.to_owned()))
            .map(|stored| stored.info(name)))
    }

    fn dir_kind(&self, kind: Kind) -> Result<Option<EntryKind>, BackendError> {
        let dirs = self
            .dirs
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Ok(dirs
            .get(&kind)
            .copied()
            .unwrap_or(Some(EntryKind::Directory)))
    }

    fn remove(&self, id: &str) -> Result<Removal, BackendError> {
        let path = checked_name(Kind::Lock, id)?;
        let mut files = self.lock();
        let key = (Kind::Lock, id.to_owned());
        match files.get(&key).map(|stored| stored.entry) {
            None => Ok(Removal::AlreadyGone),
            Some(EntryKind::File) => {
                files.remove(&key);
                Ok(Removal::Removed)
            }
            Some(entry) => Err(BackendError::NotAFile { path, entry }),
        }
    }

    fn write_lock(&self, id: &str, stored: &[u8]) -> Result<(), BackendError> {
        checked_name(Kind::Lock, id)?;
        if !self.capabilities.modify {
            return Err(BackendError::Unsupported {
                backend: "memory",
                operation: "write a lock",
            });
        }
        self.put(Kind::Lock, id, stored.to_vec());
        Ok(())
    }
}
