//! New test repositories without paying `restic init` each time.
//!
//! `restic init` calibrates scrypt to take half a second on the machine that
//! runs it, tries several sizes to find it, and every later command of restic
//! and lockwarden derives the key again at that cost: about 2 s of CPU for
//! each init and half a second for each command. With hundreds of repositories
//! that was most of the end-to-end suite's time. So each test process runs the
//! real `restic init` ([`crate::restic_version::restic_program`]) once, into a template, and each
//! repository of the standard constructors ([`TestRepo::create`]) is made
//! like it, with its own random master key and config id (so no two
//! repositories are the same one or can read each other's files), and with
//! the one change restic's own tests make too
//! (`TestUseLowSecurityKDFParameters`): the key is wrapped with scrypt
//! parameters that cost a millisecond ([`CHEAP_LOG_N`]). Everything else (the
//! key and config JSON, the config's version and chunker polynomial, the
//! directory layout, the files' modes) is what that restic wrote; restic
//! reads and writes the copies as any repository. `restic init` itself stays covered: tests that build their
//! repository with [`TestRepo::init`] run it, on every storage emulator too.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use lockwarden::repo::crypto::{Key, random_bytes};
use lockwarden::repo::keys;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::restic::{PASSWORD, TestRepo};

/// scrypt's N for the copies' key: 2^10 (with r = 8, 1 MiB a lane and about
/// a millisecond), where restic calibrates to about 2^14 to 2^17. Every
/// other copy has p = 2 lanes (restic's calibration can give that), the
/// others p = 1, so both paths of lockwarden's derivation run.
pub const CHEAP_LOG_N: u8 = 10;

/// What every copy is made from.
struct Template {
    /// The template repository, kept for the life of the process.
    _dir: tempfile::TempDir,
    /// Its directories, relative (`data/00`, ..., `keys`, `locks`), and
    /// their modes, as restic's local backend made them.
    dirs: Vec<(PathBuf, u32)>,
    /// The mode restic gives the files it writes.
    file_mode: u32,
    /// The key file's JSON as restic wrote it (`created`, `username`, ...).
    key: Map<String, Value>,
    /// The config's JSON as restic wrote it.
    config: Map<String, Value>,
    /// Whether restic stored the config compressed (`0x02` + zstd).
    compressed: bool,
}

/// The template of this process, made on first use.
fn template() -> &'static Template {
    static TEMPLATE: OnceLock<Template> = OnceLock::new();
    TEMPLATE.get_or_init(make_template)
}

fn make_template() -> Template {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("repo");
    let repo = TestRepo::at(path.display().to_string(), path.clone());
    repo.init();
    let key_file = std::fs::read(only_file(&path.join("keys"))).expect("read the key file");
    let key: Map<String, Value> = serde_json::from_slice(&key_file).expect("key JSON");
    // lockwarden's own key code opens restic's calibrated key, in every test
    // process.
    let master = keys::open(&key_file, PASSWORD.as_bytes()).expect("the password opens the key");
    let stored = std::fs::read(path.join("config")).expect("read config");
    let plain = master.open(&stored).expect("the master key opens config");
    let compressed = plain.first() == Some(&2);
    let json = if compressed {
        zstd::decode_all(&plain[1..]).expect("zstd config")
    } else {
        plain
    };
    let mut dirs = Vec::new();
    collect_dirs(&path, Path::new(""), &mut dirs);
    Template {
        _dir: dir,
        dirs,
        file_mode: mode(&path.join("config")),
        key,
        config: serde_json::from_slice(&json).expect("config JSON"),
        compressed,
    }
}

/// The one file in `dir`.
fn only_file(dir: &Path) -> PathBuf {
    let mut files = std::fs::read_dir(dir).expect("read dir");
    let file = files.next().expect("one file").expect("dir entry").path();
    assert!(files.next().is_none(), "one file in {}", dir.display());
    file
}

/// The permission bits of `path`.
fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).expect("stat").permissions().mode() & 0o7777
}

/// Every directory under `root/at`, relative to `root`, parents first, with
/// its mode.
fn collect_dirs(root: &Path, at: &Path, dirs: &mut Vec<(PathBuf, u32)>) {
    let mut entries: Vec<_> = std::fs::read_dir(root.join(at))
        .expect("read dir")
        .map(|e| e.expect("dir entry"))
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| at.join(e.file_name()))
        .collect();
    entries.sort();
    for dir in entries {
        dirs.push((dir.clone(), mode(&root.join(&dir))));
        collect_dirs(root, &dir, dirs);
    }
}

/// scrypt(PASSWORD, salt) as restic derives its user key.
fn user_key(log_n: u8, r: u64, p: u64, salt: &[u8]) -> Key {
    let r = u32::try_from(r).expect("r");
    let p = u32::try_from(p).expect("p");
    let params = scrypt::Params::new(log_n, r, p).expect("scrypt parameters");
    let mut derived = [0u8; 64];
    scrypt::scrypt(PASSWORD.as_bytes(), salt, &params, &mut derived).expect("scrypt");
    Key::from_derived(&derived)
}

/// A new random master key, as restic makes one (poly1305's `r` masked as
/// restic masks it), and its JSON as restic writes it in a key file.
fn new_master() -> (Key, Vec<u8>) {
    let encrypt: [u8; 32] = random_bytes().expect("random key");
    let k: [u8; 16] = random_bytes().expect("random key");
    let mut r: [u8; 16] = random_bytes().expect("random key");
    for i in [3, 7, 11, 15] {
        r[i] &= 0x0f;
    }
    for i in [4, 8, 12] {
        r[i] &= 0xfc;
    }
    let json = serde_json::json!({
        "mac": { "k": BASE64.encode(k), "r": BASE64.encode(r) },
        "encrypt": BASE64.encode(encrypt),
    });
    let bytes = serde_json::to_vec(&json).expect("master JSON");
    (Key::new(encrypt, k, r), bytes)
}

/// The files of a new copy, by their paths in the repository: `config`
/// with a fresh id and the key file, under a new master key wrapped with
/// scrypt N = 2^[`CHEAP_LOG_N`], r = 8, p = 1 or 2.
fn files() -> [(String, Vec<u8>); 2] {
    static COPIES: AtomicU64 = AtomicU64::new(0);
    let lanes = 1 + COPIES.fetch_add(1, Ordering::Relaxed) % 2;
    let t = template();
    let (master, master_json) = new_master();
    let salt: [u8; 64] = random_bytes().expect("random salt");
    let wrapped = user_key(CHEAP_LOG_N, 8, lanes, &salt).seal(&master_json, iv());
    let mut key = t.key.clone();
    key.insert("N".into(), (1u64 << CHEAP_LOG_N).into());
    key.insert("r".into(), 8.into());
    key.insert("p".into(), lanes.into());
    key.insert("salt".into(), BASE64.encode(salt).into());
    key.insert("data".into(), BASE64.encode(wrapped).into());
    let key = serde_json::to_vec(&key).expect("key JSON");

    let mut config = t.config.clone();
    let id: [u8; 32] = random_bytes().expect("random id");
    config.insert("id".into(), hex::encode(id).into());
    let json = serde_json::to_vec(&config).expect("config JSON");
    let plain = if t.compressed {
        let mut p = vec![2u8];
        p.extend(zstd::bulk::compress(&json, 3).expect("zstd"));
        p
    } else {
        json
    };
    [
        ("config".to_owned(), master.seal(&plain, iv())),
        (format!("keys/{}", hex::encode(Sha256::digest(&key))), key),
    ]
}

fn iv() -> [u8; 16] {
    random_bytes().expect("random IV")
}

impl TestRepo {
    /// A new repository made from this process's template (see the module):
    /// in [`TestRepo::remote`] when set (files only, as restic makes one in
    /// an object store), else at [`TestRepo::path`] on disk, with restic's
    /// directories. For the storages whose files the tests can reach
    /// directly; anything else (an rclone crypt remote, say) takes
    /// [`TestRepo::init`].
    pub fn create(&self) {
        self.password_file();
        match &self.remote {
            Some(remote) => {
                for (name, bytes) in files() {
                    remote.write(&name, &bytes);
                }
            }
            None => {
                let t = template();
                let set_mode = |path: &Path, mode: u32| {
                    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
                        .expect("chmod");
                };
                std::fs::create_dir_all(&self.path).expect("repository dir");
                for (dir, mode) in &t.dirs {
                    std::fs::create_dir_all(self.path.join(dir)).expect("repository subdir");
                    set_mode(&self.path.join(dir), *mode);
                }
                for (name, bytes) in files() {
                    let path = self.path.join(name);
                    std::fs::write(&path, bytes).expect("write repository file");
                    set_mode(&path, t.file_mode);
                }
            }
        }
    }
}
