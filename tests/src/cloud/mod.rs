//! S3, Azure Blob and GCS servers on 127.0.0.1 for the end-to-end tests:
//! moto (S3), Azurite (Azure) and fake-gcs-server (GCS), installed by
//! `make servers` (part of `make test`).
//!
//! Each store has one server per test process, started on first use
//! ([`S3Server::shared`], [`AzureServer::shared`], [`GcsServer::shared`])
//! and killed when the process ends (see [`process`]). Each test takes a
//! fresh bucket or container of its own ([`S3Server::new_bucket`], ...) and
//! makes repositories in it ([`Bucket::init_repo`]): restic reaches S3
//! directly (`s3:`) and Azure and GCS through `rclone:` (restic 0.14 cannot
//! be pointed at their emulators), lockwarden gets the native location
//! (`s3:`, `azure:`, `gs:`), and both get the same environment.
//! [`Bucket::requests`] counts the requests the server logged for the
//! bucket.

mod azure;
pub mod cost;
mod gcs;
pub mod process;
pub mod remote;
mod s3;

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

pub use azure::{AZURE_ACCOUNT, AZURE_KEY, AZURITE_WELL_KNOWN_KEY, AzureServer};
pub use gcs::{GCS_PRIVATE_KEY, GcsServer};
pub use remote::RemoteDir;
pub use s3::{S3_ACCESS_KEY_ID, S3_SECRET_KEY, S3Server};

use crate::restic::TestRepo;
use process::ServerProcess;

/// Which store a bucket is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Store {
    /// S3 (moto).
    S3,
    /// Azure Blob Storage (Azurite).
    Azure,
    /// Google Cloud Storage (fake-gcs-server).
    Gcs,
}

impl Store {
    /// Every store.
    pub const ALL: [Store; 3] = [Store::S3, Store::Azure, Store::Gcs];

    /// A fresh bucket in this store's shared server.
    pub fn new_bucket(self) -> Bucket {
        match self {
            Store::S3 => S3Server::shared().new_bucket(),
            Store::Azure => AzureServer::shared().new_bucket(),
            Store::Gcs => GcsServer::shared().new_bucket(),
        }
    }

    /// The credentials of this store that must never appear in any output.
    pub fn secrets(self) -> &'static [&'static str] {
        match self {
            Store::S3 => &[S3_SECRET_KEY],
            Store::Azure => &[AZURE_KEY, AZURITE_WELL_KNOWN_KEY],
            Store::Gcs => &[GCS_PRIVATE_KEY],
        }
    }
}

impl std::fmt::Display for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Store::S3 => "S3 (moto)",
            Store::Azure => "Azure (Azurite)",
            Store::Gcs => "GCS (fake-gcs-server)",
        })
    }
}

/// A bucket (S3, GCS) or container (Azure) of its own for one test.
pub struct Bucket {
    /// The store it is in.
    pub store: Store,
    /// Its name: `lockwarden<pid>x<n>`, unique on this machine while the
    /// test process lives.
    pub name: String,
    server: &'static ServerProcess,
    /// The bucket through rclone, for listing and writing files.
    remote: RemoteDir,
    /// Where each repository of this bucket is, for restic and lockwarden.
    locate: fn(&Bucket, &str, &TestRepo) -> Locations,
}

/// Where a repository is and what reaches it, per store.
struct Locations {
    /// What restic's `-r` takes.
    restic: String,
    /// What lockwarden's `-r` takes.
    lockwarden: String,
    /// The environment both get (besides the rclone remote's).
    env: Vec<(String, String)>,
}

impl Bucket {
    fn new(
        store: Store,
        server: &'static ServerProcess,
        remote_env: Vec<(String, String)>,
        remote_name: &str,
        locate: fn(&Bucket, &str, &TestRepo) -> Locations,
    ) -> Bucket {
        static NEXT: AtomicUsize = AtomicUsize::new(1);
        // Letters and digits only: object_store's GCS client percent-encodes
        // even a hyphen in the bucket name, which would hide it in the log.
        let name = format!(
            "lockwarden{}x{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let remote = RemoteDir {
            path: format!("{remote_name}:{name}"),
            env: remote_env,
        };
        remote.make_bucket();
        Bucket {
            store,
            name,
            server,
            remote,
            locate,
        }
    }

    /// The server's address, `127.0.0.1:<port>`.
    pub fn addr(&self) -> &str {
        self.server.addr()
    }

    /// The server's process.
    pub fn server(&self) -> &'static ServerProcess {
        self.server
    }

    /// The directory `prefix` of this bucket through rclone.
    pub fn remote(&self, prefix: &str) -> RemoteDir {
        self.remote.join(prefix)
    }

    /// How many requests for this bucket the server has logged so far (by
    /// anyone: restic, rclone, lockwarden, the helpers here).
    pub fn requests(&self) -> usize {
        let markers = self.log_markers();
        self.server
            .requests(|line| markers.iter().any(|m| line.contains(m.as_str())))
    }

    /// How many requests for this bucket the server had answered by
    /// `moment` ([`ServerProcess::requests_by`]).
    pub fn requests_by(&self, moment: std::time::Instant) -> usize {
        let markers = self.log_markers();
        self.server.requests_by(moment, |line| {
            markers.iter().any(|m| line.contains(m.as_str()))
        })
    }

    /// What an access log line for this bucket contains: its name as a path
    /// segment.
    fn log_markers(&self) -> [String; 3] {
        [
            format!("/{}/", self.name),
            format!("/{}?", self.name),
            format!("/{} ", self.name),
        ]
    }

    /// Copies the local directory `dir` into this bucket's root, many files
    /// at once (seeding many repositories).
    pub fn upload(&self, dir: &std::path::Path) {
        self.remote.upload(dir);
    }

    /// A repository at `prefix` in this bucket, not yet initialised.
    pub fn repo(&self, prefix: &str) -> TestRepo {
        let mut repo = TestRepo::at(String::new(), PathBuf::new());
        let locations = (self.locate)(self, prefix, &repo);
        repo.location = locations.restic;
        repo.lockwarden_location = Some(locations.lockwarden);
        repo.env = self.remote.env.clone();
        repo.env.extend(locations.env);
        repo.path = repo.dir.path().join("not-on-disk");
        repo.remote = Some(self.remote(prefix));
        repo
    }

    /// A new repository at `prefix` in this bucket ([`TestRepo::create`]).
    pub fn init_repo(&self, prefix: &str) -> TestRepo {
        let repo = self.repo(prefix);
        repo.create();
        repo
    }
}

/// The variables that define the rclone remote `name` (lower case) with
/// `options` (`("type", "s3")`, ...), and `RCLONE_CONFIG=/dev/null`.
fn rclone_remote_env(name: &str, options: &[(&str, &str)]) -> Vec<(String, String)> {
    let prefix = format!("RCLONE_CONFIG_{}_", name.to_uppercase());
    std::iter::once(("RCLONE_CONFIG".to_owned(), "/dev/null".to_owned()))
        .chain(
            options
                .iter()
                .map(|(k, v)| (format!("{prefix}{}", k.to_uppercase()), (*v).to_owned())),
        )
        .collect()
}

/// Where `make servers` installed the Python packages: `LOCKWARDEN_SERVERS_ENV`
/// or `target/servers` in the workspace.
fn servers_venv() -> PathBuf {
    std::env::var_os("LOCKWARDEN_SERVERS_ENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(crate::TESTS_DIR).join("../target/servers"))
}

/// `path`, or a panic that says how to install it.
fn installed(path: PathBuf, what: &str) -> PathBuf {
    assert!(
        path.exists(),
        "{what} is not installed ({} is missing): run `make servers`",
        path.display()
    );
    path
}

/// `127.0.0.1:<a free port>`.
fn free_addr() -> String {
    format!("127.0.0.1:{}", crate::restic::free_port())
}
