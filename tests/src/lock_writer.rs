//! A test-only lock writer: lock files exactly as restic writes them (raw or
//! zstd, encrypted with the repository's master key, named by their SHA-256),
//! with whatever time, host and pid a scenario needs, on disk or in a cloud
//! store (through rclone). restic itself reads them
//! back (`restic cat lock`), which proves the format.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use lockwarden::repo::crypto::Key;
use lockwarden::repo::{keys, lockfile};
use sha2::{Digest, Sha256};

use crate::cloud::RemoteDir;
use crate::restic::{PASSWORD, TestRepo};

/// How the lock JSON is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// Plain JSON (repository version 1, or any version).
    Raw,
    /// `0x02` + zstd (repository version 2).
    Zstd,
}

/// One lock file for [`LockWriter::write`]: what it says and how it is
/// stored. The default is a shared lock written now by pid 1 on the host
/// `elsewhere`, zstd-compressed as restic stores it in a version 2
/// repository; a scenario names what matters to it and takes the rest with
/// `..LockSpec::default()`.
#[derive(Debug, Clone)]
pub struct LockSpec<'a> {
    /// When the lock was written or last refreshed (RFC 3339, see
    /// [`time_from_now`]).
    pub time: String,
    /// The host of the process holding it.
    pub hostname: &'a str,
    /// The process holding it.
    pub pid: i64,
    /// An exclusive lock (prune, check) rather than a shared one (backup).
    pub exclusive: bool,
    /// How the lock JSON is stored.
    pub encoding: Encoding,
}

impl Default for LockSpec<'_> {
    fn default() -> Self {
        LockSpec {
            time: time_from_now(0),
            hostname: "elsewhere",
            pid: 1,
            exclusive: false,
            encoding: Encoding::Zstd,
        }
    }
}

/// Writes lock files into one repository.
pub struct LockWriter {
    key: Key,
    locks: Locks,
}

/// Where a writer's locks go.
enum Locks {
    /// A `locks/` directory on disk.
    Dir(std::path::PathBuf),
    /// `locks/` in a cloud store, through rclone.
    Remote(RemoteDir),
}

impl LockWriter {
    /// A writer for `repo` (on disk or in a cloud store), its master key
    /// opened with the test password.
    pub fn new(repo: &TestRepo) -> LockWriter {
        match &repo.remote {
            Some(remote) => LockWriter::for_remote(remote, PASSWORD),
            None => LockWriter::for_dir(&repo.path, PASSWORD),
        }
    }

    /// A writer for the repository in the cloud-store directory `remote`.
    pub fn for_remote(remote: &RemoteDir, password: &str) -> LockWriter {
        let keys = remote.join("keys");
        let name = keys.list().into_iter().next().expect("one key file");
        let bytes = keys.read(&name);
        let key = keys::open(&bytes, password.as_bytes()).expect("password opens the key");
        LockWriter {
            key,
            locks: Locks::Remote(remote.join("locks")),
        }
    }

    /// A writer for the repository directory `path`.
    pub fn for_dir(path: &Path, password: &str) -> LockWriter {
        let key_dir = path.join("keys");
        let key_file = std::fs::read_dir(&key_dir)
            .expect("keys/")
            .next()
            .expect("one key file")
            .expect("dir entry")
            .path();
        let bytes = std::fs::read(key_file).expect("read key file");
        let key = keys::open(&bytes, password.as_bytes()).expect("password opens the key");
        LockWriter {
            key,
            locks: Locks::Dir(path.join("locks")),
        }
    }

    /// Writes `json` as a lock file and returns its id.
    pub fn write_json(&self, json: &str, encoding: Encoding) -> String {
        let plaintext = match encoding {
            Encoding::Raw => json.as_bytes().to_vec(),
            Encoding::Zstd => {
                let mut p = vec![2u8];
                p.extend(zstd::bulk::compress(json.as_bytes(), 3).expect("zstd"));
                p
            }
        };
        self.write_sealed(&plaintext)
    }

    /// Encrypts `plaintext` as restic stores a lock file (whatever it
    /// holds), writes it and returns its id.
    pub fn write_sealed(&self, plaintext: &[u8]) -> String {
        let (id, stored) = lockfile::seal(
            &self.key,
            plaintext,
            lockwarden::repo::crypto::unique_bytes(),
        );
        self.write_named(&id, &stored);
        id
    }

    /// Writes the lock `spec` describes and returns its id.
    pub fn write(&self, spec: LockSpec) -> String {
        let json = serde_json::json!({
            "time": spec.time, "exclusive": spec.exclusive, "hostname": spec.hostname,
            "username": "tester", "pid": spec.pid, "uid": 1000, "gid": 1000,
        });
        self.write_json(&json.to_string(), spec.encoding)
    }

    /// Stores `bytes` under their SHA-256, read-only as restic does.
    pub fn write_bytes(&self, bytes: &[u8]) -> String {
        let id = hex::encode(Sha256::digest(bytes));
        self.write_named(&id, bytes);
        id
    }

    /// Stores `bytes` under `id`, whatever their hash.
    pub fn write_named(&self, id: &str, bytes: &[u8]) {
        match &self.locks {
            Locks::Dir(dir) => {
                let path = dir.join(id);
                std::fs::write(&path, bytes).expect("write lock file");
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o400))
                    .expect("chmod");
            }
            Locks::Remote(remote) => remote.write(id, bytes),
        }
    }
}

/// An RFC 3339 time `seconds` from now (negative: in the past).
pub fn time_from_now(seconds: i64) -> String {
    lockwarden::time::format_rfc3339(lockwarden::time::now() + seconds * 1_000_000_000)
}
