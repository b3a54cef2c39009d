//! A test-only lock writer: lock files exactly as restic writes them (raw or
//! zstd, encrypted with the repository's master key, named by their SHA-256),
//! with whatever time, host and pid a scenario needs. restic itself reads them
//! back (`restic cat lock`), which proves the format.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use lockwarden::repo::crypto::Key;
use lockwarden::repo::keys;
use sha2::{Digest, Sha256};

use crate::restic::{PASSWORD, TestRepo};

/// How the lock JSON is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// Plain JSON (repository version 1, or any version).
    Raw,
    /// `0x02` + zstd (repository version 2).
    Zstd,
}

/// Writes lock files into one repository.
pub struct LockWriter {
    key: Key,
    locks: std::path::PathBuf,
}

static IV_COUNTER: AtomicU64 = AtomicU64::new(1);

impl LockWriter {
    /// A writer for `repo`, its master key opened with the test password.
    pub fn new(repo: &TestRepo) -> LockWriter {
        LockWriter::for_dir(&repo.path, PASSWORD)
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
            locks: path.join("locks"),
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
        let n = IV_COUNTER.fetch_add(1, Ordering::Relaxed);
        let seed = Sha256::digest(format!("{n}:{json}:{}", std::process::id()));
        let mut iv = [0u8; 16];
        iv.copy_from_slice(&seed[..16]);
        let stored = self.key.seal(&plaintext, iv);
        self.write_bytes(&stored)
    }

    /// Writes a lock for `hostname`/`pid` dated `time` (RFC 3339).
    pub fn write(
        &self,
        time: &str,
        hostname: &str,
        pid: i64,
        exclusive: bool,
        encoding: Encoding,
    ) -> String {
        let json = serde_json::json!({
            "time": time, "exclusive": exclusive, "hostname": hostname,
            "username": "tester", "pid": pid, "uid": 1000, "gid": 1000,
        });
        self.write_json(&json.to_string(), encoding)
    }

    /// Stores `bytes` under their SHA-256, read-only as restic does.
    pub fn write_bytes(&self, bytes: &[u8]) -> String {
        let id = hex::encode(Sha256::digest(bytes));
        self.write_named(&id, bytes);
        id
    }

    /// Stores `bytes` under `id`, whatever their hash.
    pub fn write_named(&self, id: &str, bytes: &[u8]) {
        let path = self.locks.join(id);
        std::fs::write(&path, bytes).expect("write lock file");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o400)).expect("chmod");
    }
}

/// An RFC 3339 time `seconds` from now (negative: in the past).
pub fn time_from_now(seconds: i64) -> String {
    lockwarden::time::format_rfc3339(lockwarden::time::now() + seconds * 1_000_000_000)
}
