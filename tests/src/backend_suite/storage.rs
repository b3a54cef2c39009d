//! The storages the backend suite runs against: a real restic repository
//! on each real backend, and what the suite may do behind lockwarden's back
//! (plant files, links, FIFOs, odd keys) on each.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cloud::{Bucket, Store};
use crate::restic::{RestServer, TestRepo};
use crate::sshd::Sshd;

/// How an object goes under a raw key in one store.
type PutRaw = fn(&Storage, &str, &[u8]);

/// One storage with a fresh restic repository on it.
pub struct Storage {
    /// The backend's name in the suite's table.
    pub name: &'static str,
    /// The repository: what restic and lockwarden are given.
    pub repo: TestRepo,
    /// The repository's directory on this machine, where the backend
    /// serves one (local, SFTP, REST and rclone over a directory).
    pub dir: Option<PathBuf>,
    /// Whether the backend shows lockwarden links, FIFOs and directories
    /// in `locks/` as they are (local, SFTP); rclone (serving REST or
    /// `rclone:`) lists regular files only.
    pub shows_specials: bool,
    /// The server address that lockwarden's location and environment name,
    /// where lockwarden speaks HTTP to it: a proxy can take its place.
    pub http: Option<String>,
    /// Whether lockwarden can write a lock here (fake-gcs-server refuses the
    /// uploads of object_store's GCS client).
    pub writable: bool,
    /// Puts an object under a raw key relative to the repository, for the
    /// keys no file system holds (`locks//x`).
    put_raw: Option<PutRaw>,
    /// What must live as long as the storage (servers, buckets).
    _keep: Vec<Box<dyn std::any::Any>>,
}

impl Storage {
    fn new(name: &'static str, repo: TestRepo) -> Storage {
        Storage {
            name,
            repo,
            dir: None,
            shows_specials: false,
            http: None,
            writable: true,
            put_raw: None,
            _keep: Vec::new(),
        }
    }

    /// A directory on the local disk (a new repository there).
    pub fn local() -> Storage {
        let repo = TestRepo::init_local();
        let dir = repo.path.clone();
        Storage {
            dir: Some(dir),
            shows_specials: true,
            ..Storage::new("local", repo)
        }
    }

    /// `rclone serve restic` over a local directory.
    pub fn rest() -> Storage {
        let root = tempfile::tempdir().expect("temp dir");
        let server = RestServer::start(root.path());
        let repo = server.init_repo("repo");
        let dir = repo.path.clone();
        Storage {
            dir: Some(dir),
            http: Some(server.addr().to_owned()),
            _keep: vec![Box::new(server), Box::new(root)],
            ..Storage::new("rest", repo)
        }
    }

    /// `rclone::local:DIR`, served by lockwarden's own rclone child.
    pub fn rclone() -> Storage {
        let repo = TestRepo::init_over_rclone();
        let dir = repo.path.clone();
        Storage {
            dir: Some(dir),
            ..Storage::new("rclone", repo)
        }
    }

    /// An OpenSSH server on 127.0.0.1 serving a local directory.
    pub fn sftp() -> Storage {
        let sshd = Sshd::start();
        let repo = sshd.init_repo("repo");
        let dir = repo.path.clone();
        Storage {
            dir: Some(dir),
            shows_specials: true,
            _keep: vec![Box::new(sshd)],
            ..Storage::new("sftp", repo)
        }
    }

    /// A fresh bucket (container) of an object-store emulator.
    pub fn cloud(store: Store) -> Storage {
        let bucket = store.new_bucket();
        let repo = bucket.init_repo("repo");
        let (name, put_raw): (&'static str, Option<PutRaw>) = match store {
            Store::S3 => ("s3", Some(put_raw_s3)),
            Store::Azure => ("azure", None),
            Store::Gcs => ("gs", Some(put_raw_gcs)),
        };
        Storage {
            http: Some(bucket.addr().to_owned()),
            writable: store != Store::Gcs,
            put_raw,
            _keep: vec![Box::new(bucket)],
            ..Storage::new(name, repo)
        }
    }

    /// The bucket, for an object store.
    fn bucket(&self) -> Option<&Bucket> {
        self._keep.iter().find_map(|k| k.downcast_ref::<Bucket>())
    }

    /// Writes `bytes` at `path` (relative to the repository), behind
    /// lockwarden's back.
    pub fn write(&self, path: &str, bytes: &[u8]) {
        match (&self.dir, &self.repo.remote) {
            (Some(dir), _) => {
                let file = dir.join(path);
                std::fs::create_dir_all(file.parent().expect("a parent")).expect("mkdir");
                std::fs::write(file, bytes).expect("write");
            }
            (None, Some(remote)) => {
                let (parent, name) = path.rsplit_once('/').unwrap_or(("", path));
                remote.join(parent).write(name, bytes);
            }
            (None, None) => unreachable!("a storage is a directory or a remote"),
        }
    }

    /// The file at `path`, if it is there.
    pub fn read(&self, path: &str) -> Option<Vec<u8>> {
        let (parent, name) = path.rsplit_once('/').unwrap_or(("", path));
        if !self.files(parent).contains(name) {
            return None;
        }
        match (&self.dir, &self.repo.remote) {
            (Some(dir), _) => std::fs::read(dir.join(path)).ok(),
            (None, Some(remote)) => Some(remote.join(parent).read(name)),
            (None, None) => None,
        }
    }

    /// Removes the file at `path`.
    pub fn remove(&self, path: &str) {
        match (&self.dir, &self.repo.remote) {
            (Some(dir), _) => std::fs::remove_file(dir.join(path)).expect("remove"),
            (None, Some(remote)) => {
                let (parent, name) = path.rsplit_once('/').unwrap_or(("", path));
                remote.join(parent).remove(name);
            }
            (None, None) => {}
        }
    }

    /// The names of the files (and, on a file system, of everything else)
    /// directly in `dir`.
    pub fn files(&self, dir: &str) -> BTreeSet<String> {
        match (&self.dir, &self.repo.remote) {
            (Some(root), _) => std::fs::read_dir(root.join(dir))
                .map(|entries| {
                    entries
                        .filter_map(Result::ok)
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect()
                })
                .unwrap_or_default(),
            (None, Some(remote)) => remote.join(dir).list().into_iter().collect(),
            (None, None) => BTreeSet::new(),
        }
    }

    /// Puts an object under the raw key `key` (relative to the
    /// repository); false where the suite has no way to.
    pub fn put_raw(&self, key: &str, bytes: &[u8]) -> bool {
        match self.put_raw {
            Some(put) => {
                put(self, key, bytes);
                true
            }
            None => false,
        }
    }

    /// The directory on this machine, for what only a file system holds.
    pub fn fs(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// `lockwarden <subcommand>` for this repository.
    pub fn lockwarden(&self, subcommand: &str) -> Command {
        self.repo.lockwarden(subcommand)
    }

    /// The location lockwarden is given.
    pub fn location(&self) -> &str {
        self.repo
            .lockwarden_location
            .as_ref()
            .unwrap_or(&self.repo.location)
    }

    /// `lockwarden <subcommand>` for this repository, reaching it through
    /// `proxy` (an address on 127.0.0.1) instead of its server.
    pub fn lockwarden_via(&self, proxy: &str, subcommand: &str) -> Command {
        let server = self.http.as_deref().expect("an HTTP backend");
        let proxied = self.repo.dir.path().join("proxied");
        self.lockwarden_at(&self.location().replace(server, proxy), subcommand, |v| {
            // A file that names the server (GCS: the service-account file's
            // `gcs_base_url`) gets a copy that names the proxy.
            match std::fs::read_to_string(v) {
                Ok(text) if text.contains(server) => {
                    std::fs::create_dir_all(&proxied).expect("mkdir");
                    let copy = proxied.join(Path::new(v).file_name().expect("a file name"));
                    std::fs::write(&copy, text.replace(server, proxy)).expect("write");
                    copy.display().to_string()
                }
                _ => v.replace(server, proxy),
            }
        })
    }

    /// `lockwarden <subcommand> -r <location>`, with this repository's
    /// password and variables (each passed through `vary`).
    pub fn lockwarden_at(
        &self,
        location: &str,
        subcommand: &str,
        vary: impl Fn(&str) -> String,
    ) -> Command {
        let mut command = crate::lockwarden(&self.repo.dir.path().join("cache"));
        command
            .args([subcommand, "-r", location, "-p"])
            .arg(self.repo.password_file())
            .env_remove("RESTIC_REPOSITORY")
            .env_remove("RESTIC_PASSWORD")
            .env_remove("RESTIC_PASSWORD_FILE")
            .envs(self.repo.env.iter().map(|(k, v)| (k.clone(), vary(v))));
        command
    }

    /// The repository's location for restic, and the variables restic gets,
    /// as `NAME=value` words for a shell command line.
    pub fn restic_env_words(&self) -> String {
        let mut words = vec![
            format!("RESTIC_REPOSITORY={}", shell_quote(&self.repo.location)),
            format!(
                "RESTIC_PASSWORD_FILE={}",
                shell_quote(&self.repo.password_file().display().to_string())
            ),
            format!(
                "RESTIC_CACHE_DIR={}",
                shell_quote(
                    &self
                        .repo
                        .dir
                        .path()
                        .join("restic-cache")
                        .display()
                        .to_string()
                )
            ),
        ];
        words.extend(
            self.repo
                .env
                .iter()
                .map(|(k, v)| format!("{k}={}", shell_quote(v))),
        );
        words.join(" ")
    }
}

/// `text` quoted for a POSIX shell.
pub fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

/// moto takes any request as signed: a plain path-style PUT of the key
/// under the repository's prefix (`repo/`), percent-encoded as S3 wants it.
fn put_raw_s3(storage: &Storage, key: &str, bytes: &[u8]) {
    let bucket = storage.bucket().expect("an S3 bucket");
    let url = format!(
        "http://{}/{}/repo/{}",
        bucket.addr(),
        bucket.name,
        percent_encode(key)
    );
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(std::time::Duration::from_secs(30)))
        .build()
        .into();
    let response = agent
        .put(url.as_str())
        .header(
            "Authorization",
            "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=0",
        )
        .send(bytes)
        .unwrap_or_else(|e| panic!("PUT {url}: {e}"));
    assert!(response.status().is_success(), "PUT {url}: {response:?}");
}

/// fake-gcs-server takes JSON-API media uploads without credentials.
fn put_raw_gcs(storage: &Storage, key: &str, bytes: &[u8]) {
    let bucket = storage.bucket().expect("a GCS bucket");
    let name = format!("repo/{key}");
    let url = format!(
        "http://{}/upload/storage/v1/b/{}/o?uploadType=media&name={}",
        bucket.addr(),
        bucket.name,
        percent_encode(&name)
    );
    let response = ureq::post(url.as_str())
        .send(bytes)
        .unwrap_or_else(|e| panic!("POST {url}: {e}"));
    assert!(response.status().is_success(), "POST {url}: {response:?}");
}

/// Every byte but unreserved ASCII as `%XX`; `/` kept.
fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
