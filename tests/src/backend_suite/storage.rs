//! The storages the backend suite runs against: a real restic repository
//! on each real backend, and what the suite may do behind lockwarden's back
//! (plant files, links, FIFOs, odd keys) on each.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cloud::{Bucket, Store};
use crate::fault_proxy::Filter;
use crate::restic::{RestServer, TestRepo};
use crate::sshd::Sshd;

/// Where an object store's repository lies in its bucket: two levels
/// deep, as a team's repositories often are.
macro_rules! cloud_prefix {
    () => {
        "team/repo"
    };
}
pub(super) use cloud_prefix;

/// How an object goes under a raw key in one store.
type PutRaw = fn(&Storage, &str, &[u8]);

/// What a storage is like, as the cases ask it: the knobs of restic's
/// `internal/backend/test` suite. No case names a backend; a case that
/// behaves differently somewhere asks one of these.
#[derive(Debug, Clone, Copy)]
pub struct Properties {
    /// The storage shows links, FIFOs and directories in `locks/` as they
    /// are, and lockwarden judges them so (a file system it reads itself);
    /// rclone (serving REST or `rclone:`) lists regular files only.
    pub shows_special_files: bool,
    /// The server resolves the names lockwarden sends on its own side
    /// (rest-server, rclone): lockwarden cannot look at `locks/` itself
    /// right before a delete.
    pub resolves_names_on_server: bool,
    /// Lockwarden can write a lock here (fake-gcs-server refuses the
    /// uploads of object_store's GCS client).
    pub writable: bool,
    /// Lock files are deleted in one batch request (`POST ...?comp=batch`),
    /// not one `DELETE` each.
    pub batch_delete: bool,
    /// How an HTTP storage is listed.
    pub listing: Listing,
}

impl Default for Properties {
    /// A storage that shows regular files only, resolves no names of its
    /// own, is writable and deletes one file per request.
    fn default() -> Self {
        Properties {
            shows_special_files: false,
            resolves_names_on_server: false,
            writable: true,
            batch_delete: false,
            listing: Listing::DirectoryPath,
        }
    }
}

/// How an HTTP storage is listed, which says what a proxy must pick out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listing {
    /// `GET .../locks/`: the directory's own path (restic's REST protocol).
    DirectoryPath,
    /// `GET /<bucket>?prefix=.../locks/`: the bucket, the directory in the
    /// query (object stores; Azure `/<account>/<container>?...`).
    PrefixQuery,
}

impl Listing {
    /// A listing of `locks/`.
    pub fn of_locks(self) -> Filter {
        match self {
            Listing::DirectoryPath => Filter::lock_listing(),
            Listing::PrefixQuery => Filter::object_lock_listing(),
        }
    }

    /// A listing of any directory lockwarden lists (`keys/` or `locks/`).
    pub fn of_any(self) -> Filter {
        let by_path = self == Listing::DirectoryPath;
        Filter::new("a listing", move |method, path| {
            method == "GET"
                && if by_path {
                    path.ends_with("/keys/") || path.ends_with("/locks/")
                } else {
                    // The bucket itself, no repository path after it.
                    !path.contains("/repo/") && !path.ends_with("/repo")
                }
        })
    }
}

/// One storage with a fresh restic repository on it.
pub struct Storage {
    /// The repository: what restic and lockwarden are given.
    pub repo: TestRepo,
    /// The backend as lockwarden reports it (`repository.backend`).
    pub backend: &'static str,
    /// What lockwarden must never print about this storage (its
    /// credentials), beside the repository's password.
    pub secrets: &'static [&'static str],
    /// What the storage is like.
    pub properties: Properties,
    /// The repository's directory on this machine, where the backend
    /// serves one (local, SFTP, REST and rclone over a directory).
    pub dir: Option<PathBuf>,
    /// The server address that lockwarden's location and environment name,
    /// where lockwarden speaks HTTP to it: a proxy can take its place.
    pub http: Option<String>,
    /// The server address (`host:port`) the location names, where it is
    /// not spoken to over HTTP (SSH): a dead port can take its place.
    pub server: Option<String>,
    /// Puts an object under a raw key relative to the repository, for the
    /// keys no file system holds (`locks//x`).
    put_raw: Option<PutRaw>,
    /// Makes another fresh repository on the same storage.
    sibling: fn(&Storage) -> TestRepo,
    /// What must live as long as the storage (servers, buckets).
    _keep: Vec<Box<dyn std::any::Any>>,
}

impl Storage {
    fn new(backend: &'static str, repo: TestRepo, sibling: fn(&Storage) -> TestRepo) -> Storage {
        Storage {
            repo,
            backend,
            secrets: &[],
            sibling,
            properties: Properties::default(),
            dir: None,
            http: None,
            server: None,
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
            properties: Properties {
                shows_special_files: true,
                ..Properties::default()
            },
            ..Storage::new("local", repo, |_| TestRepo::init_local())
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
            properties: Properties {
                resolves_names_on_server: true,
                ..Properties::default()
            },
            _keep: vec![Box::new(server), Box::new(root)],
            ..Storage::new("rest", repo, |s| {
                s.kept::<RestServer>().init_repo("sibling")
            })
        }
    }

    /// `rclone::local:DIR`, served by lockwarden's own rclone child.
    pub fn rclone() -> Storage {
        let repo = TestRepo::init_over_rclone();
        let dir = repo.path.clone();
        Storage {
            dir: Some(dir),
            properties: Properties {
                resolves_names_on_server: true,
                ..Properties::default()
            },
            ..Storage::new("rclone", repo, |_| TestRepo::init_over_rclone())
        }
    }

    /// An OpenSSH server on 127.0.0.1 serving a local directory.
    pub fn sftp() -> Storage {
        let sshd = Sshd::start();
        let repo = sshd.init_repo("repo");
        let dir = repo.path.clone();
        Storage {
            dir: Some(dir),
            server: Some(format!("127.0.0.1:{}", sshd.port)),
            properties: Properties {
                shows_special_files: true,
                ..Properties::default()
            },
            _keep: vec![Box::new(sshd)],
            ..Storage::new("sftp", repo, |s| s.kept::<Sshd>().init_repo("sibling"))
        }
    }

    /// A fresh bucket (container) of an object-store emulator.
    pub fn cloud(store: Store) -> Storage {
        let bucket = store.new_bucket();
        let repo = bucket.init_repo(cloud_prefix!());
        let (backend, put_raw): (&'static str, Option<PutRaw>) = match store {
            Store::S3 => ("s3", Some(put_raw_s3)),
            Store::Azure => ("azure", None),
            Store::Gcs => ("gs", Some(put_raw_gcs)),
        };
        Storage {
            secrets: store.secrets(),
            http: Some(bucket.addr().to_owned()),
            properties: Properties {
                writable: store != Store::Gcs,
                batch_delete: store == Store::Azure,
                listing: Listing::PrefixQuery,
                ..Properties::default()
            },
            put_raw,
            _keep: vec![Box::new(bucket)],
            ..Storage::new(backend, repo, |s| s.kept::<Bucket>().init_repo("sibling"))
        }
    }

    /// What the storage keeps alive of type `T` (its server, its bucket).
    fn kept<T: 'static>(&self) -> &T {
        self._keep
            .iter()
            .find_map(|k| k.downcast_ref::<T>())
            .expect("kept by this storage")
    }

    /// Another fresh repository on the same storage (the same server or
    /// bucket where there is one).
    pub fn sibling(&self) -> TestRepo {
        (self.sibling)(self)
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
        self.lockwarden_at(self.location(), subcommand, str::to_owned)
    }

    /// What every lockwarden this storage starts carries in its
    /// environment, and passes on to what it starts (rclone, ssh): the
    /// repository's own directory, unique to it.
    fn marker(&self) -> String {
        self.repo.dir.path().display().to_string()
    }

    /// Fails if a process a lockwarden of this storage started is still
    /// running 5 s after asking ([`crate::assert_none_left`]).
    pub fn assert_no_process_left(&self) {
        crate::assert_none_left(&self.marker());
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
            .env(crate::TEST_MARKER, self.marker())
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
/// under the repository's prefix, percent-encoded as S3 wants it.
fn put_raw_s3(storage: &Storage, key: &str, bytes: &[u8]) {
    let bucket = storage.kept::<Bucket>();
    let url = format!(
        "http://{}/{}/{}/{}",
        bucket.addr(),
        bucket.name,
        cloud_prefix!(),
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
    let bucket = storage.kept::<Bucket>();
    let name = format!("{}/{key}", cloud_prefix!());
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
