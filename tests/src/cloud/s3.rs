//! S3: moto's server (`moto_server`), one per test process; and one over
//! HTTPS ([`S3Server::shared_tls`]), whose certificate a CA of the test
//! process's own signs.

use std::path::Path;
use std::sync::OnceLock;

use super::process::ServerProcess;
use super::{Bucket, Locations, Store, free_addr, installed, rclone_remote_env, servers_venv};
use crate::certs::PrivateCa;
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
    /// `http://127.0.0.1:<port>` (`https://` over TLS).
    pub endpoint: String,
    /// Over TLS: the CA that signs its certificate.
    ca: Option<PrivateCa>,
}

impl S3Server {
    /// The server of this test process, started on first use.
    pub fn shared() -> &'static S3Server {
        static SERVER: OnceLock<S3Server> = OnceLock::new();
        SERVER.get_or_init(|| S3Server::start(None))
    }

    /// The HTTPS server of this test process, started on first use: its
    /// certificate, for 127.0.0.1, is signed by a CA no system trusts
    /// ([`S3Server::ca`]), which restic (`RESTIC_CACERT`) and rclone
    /// (`RCLONE_CA_CERT`) are given in its buckets' environment.
    pub fn shared_tls() -> &'static S3Server {
        static SERVER: OnceLock<S3Server> = OnceLock::new();
        SERVER.get_or_init(|| S3Server::start(Some(PrivateCa::new())))
    }

    fn start(ca: Option<PrivateCa>) -> S3Server {
        let program = installed(servers_venv().join("bin/moto_server"), "moto");
        let addr = free_addr();
        let (host, port) = addr.split_once(':').expect("host:port");
        let mut args = vec![
            "-H".to_owned(),
            host.to_owned(),
            "-p".to_owned(),
            port.to_owned(),
        ];
        let shown = |path: &Path| path.to_str().expect("a UTF-8 path").to_owned();
        if let Some(ca) = &ca {
            args.extend([
                "-c".to_owned(),
                shown(&ca.server_cert),
                "-k".to_owned(),
                shown(&ca.server_key),
            ]);
        }
        let process = ServerProcess::start("moto_server", addr.clone(), &program, &args, &[]);
        let scheme = if ca.is_some() { "https" } else { "http" };
        S3Server {
            endpoint: format!("{scheme}://{addr}"),
            process,
            ca,
        }
    }

    /// The CA that signs its certificate, when it serves HTTPS.
    pub fn ca(&self) -> Option<&PrivateCa> {
        self.ca.as_ref()
    }

    /// The server's process (its start time, its request log).
    pub fn process(&self) -> &ServerProcess {
        &self.process
    }

    /// A fresh bucket.
    pub fn new_bucket(&'static self) -> Bucket {
        let mut remote_env = rclone_remote_env(
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
        let Some(ca) = &self.ca else {
            return Bucket::new(Store::S3, &self.process, remote_env, REMOTE, locate);
        };
        let ca = ca.path.to_str().expect("a UTF-8 path").to_owned();
        remote_env.push(("RCLONE_CA_CERT".to_owned(), ca));
        Bucket::new(Store::S3, &self.process, remote_env, REMOTE, locate_tls)
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

/// [`locate`] over HTTPS: `s3:https://...`, with `RESTIC_CACERT` naming
/// the [`S3Server::shared_tls`] CA for restic (lockwarden reads no such
/// variable).
fn locate_tls(bucket: &Bucket, prefix: &str, repo: &TestRepo) -> Locations {
    let mut locations = locate(bucket, prefix, repo);
    for location in [&mut locations.restic, &mut locations.lockwarden] {
        *location = location.replacen("s3:http://", "s3:https://", 1);
    }
    let ca = S3Server::shared_tls().ca().expect("a CA");
    let path = ca.path.to_str().expect("a UTF-8 path").to_owned();
    locations.env.push(("RESTIC_CACERT".to_owned(), path));
    locations
}
