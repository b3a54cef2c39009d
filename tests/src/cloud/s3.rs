//! S3: moto's server (`moto_server`), one per test process.

use std::sync::OnceLock;

use super::process::ServerProcess;
use super::{Bucket, Locations, Store, free_addr, installed, rclone_remote_env, servers_venv};
use crate::restic::TestRepo;

/// The access key id restic, rclone and lockwarden use (moto takes any).
pub const S3_ACCESS_KEY_ID: &str = "LOCKWARDENTESTKEYID";
/// The secret access key: distinctive, so that tests can assert it never
/// appears in any output.
pub const S3_SECRET_KEY: &str = "lockwarden-s3-secret-Xq7vT2pK9wZ4";
/// The region every client is told (moto's default).
const REGION: &str = "us-east-1";
/// The rclone remote's name.
const REMOTE: &str = "lwtests3";

/// moto's S3 server on 127.0.0.1.
pub struct S3Server {
    process: ServerProcess,
    /// `http://127.0.0.1:<port>`.
    pub endpoint: String,
}

impl S3Server {
    /// The server of this test process, started on first use.
    pub fn shared() -> &'static S3Server {
        static SERVER: OnceLock<S3Server> = OnceLock::new();
        SERVER.get_or_init(S3Server::start)
    }

    fn start() -> S3Server {
        let program = installed(servers_venv().join("bin/moto_server"), "moto");
        let addr = free_addr();
        let (host, port) = addr.split_once(':').expect("host:port");
        let args = ["-H", host, "-p", port].map(str::to_owned);
        let process = ServerProcess::start("moto_server", addr.clone(), &program, &args, &[]);
        S3Server {
            endpoint: format!("http://{addr}"),
            process,
        }
    }

    /// The server's process (its start time, its request log).
    pub fn process(&self) -> &ServerProcess {
        &self.process
    }

    /// A fresh bucket.
    pub fn new_bucket(&'static self) -> Bucket {
        let remote_env = rclone_remote_env(
            REMOTE,
            &[
                ("type", "s3"),
                ("provider", "Other"),
                ("endpoint", &self.endpoint),
                ("region", REGION),
                ("access_key_id", S3_ACCESS_KEY_ID),
                ("secret_access_key", S3_SECRET_KEY),
                ("force_path_style", "true"),
            ],
        );
        Bucket::new(Store::S3, &self.process, remote_env, REMOTE, locate)
    }
}

/// restic and lockwarden both take `s3:http://127.0.0.1:<port>/bucket/prefix`.
fn locate(bucket: &Bucket, prefix: &str, _repo: &TestRepo) -> Locations {
    let location = format!("s3:http://{}/{}/{prefix}", bucket.addr(), bucket.name);
    Locations {
        restic: location.clone(),
        lockwarden: location,
        env: [
            ("AWS_ACCESS_KEY_ID", S3_ACCESS_KEY_ID),
            ("AWS_SECRET_ACCESS_KEY", S3_SECRET_KEY),
            ("AWS_DEFAULT_REGION", REGION),
            ("AWS_REGION", REGION),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .into(),
    }
}
