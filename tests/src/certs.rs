//! Certificates for the test servers that speak TLS (the registry, moto's
//! S3, kube-apiserver): a CA of the test's own, which no system trusts,
//! and a server certificate for `127.0.0.1` and `localhost` it signed, all
//! P-256, made with openssl into PEM files.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// How many days the certificates are valid.
const DAYS: &str = "7";

/// A private CA and the server certificate it signed, in PEM files.
pub struct PrivateCa {
    /// The CA's certificate, PEM.
    pub pem: String,
    /// The file holding the CA's certificate (`ca.pem`).
    pub path: PathBuf,
    /// The server's certificate (`server.pem`), for `IP:127.0.0.1` and
    /// `DNS:localhost`.
    pub server_cert: PathBuf,
    /// The server's private key (`server.key`).
    pub server_key: PathBuf,
    /// The directory of its own that holds the files, when it has one
    /// ([`PrivateCa::new`]): removed when the value is dropped.
    _dir: Option<tempfile::TempDir>,
}

impl PrivateCa {
    /// A new CA and server certificate in a temporary directory of their
    /// own, which lives as long as the value.
    pub fn new() -> PrivateCa {
        let dir = tempfile::tempdir().expect("a directory for the CA");
        let mut ca = PrivateCa::make_in(dir.path());
        ca._dir = Some(dir);
        ca
    }

    /// A new CA and server certificate written into `dir` (`ca.pem`,
    /// `ca.key`, `server.pem`, `server.key`), which the caller keeps.
    pub fn make_in(dir: &Path) -> PrivateCa {
        let p256 = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            DAYS,
        ];
        openssl(
            dir,
            &[
                &["req", "-x509"][..],
                &p256,
                &["-keyout", "ca.key", "-out", "ca.pem"],
                &["-subj", "/CN=lockwarden tests private CA"],
                &["-addext", "basicConstraints=critical,CA:TRUE"],
                &["-addext", "keyUsage=critical,keyCertSign,cRLSign"],
            ]
            .concat(),
        );
        openssl(
            dir,
            &[
                &["req", "-x509", "-CA", "ca.pem", "-CAkey", "ca.key"][..],
                &p256,
                &["-keyout", "server.key", "-out", "server.pem"],
                &["-subj", "/CN=127.0.0.1"],
                &["-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                &["-addext", "basicConstraints=critical,CA:FALSE"],
                &["-addext", "keyUsage=critical,digitalSignature"],
                &["-addext", "extendedKeyUsage=serverAuth"],
            ]
            .concat(),
        );
        let path = dir.join("ca.pem");
        PrivateCa {
            pem: std::fs::read_to_string(&path).expect("the CA's certificate"),
            path,
            server_cert: dir.join("server.pem"),
            server_key: dir.join("server.key"),
            _dir: None,
        }
    }
}

impl Default for PrivateCa {
    fn default() -> PrivateCa {
        PrivateCa::new()
    }
}

/// Runs `openssl args` in `dir`; panics, with its message, when it fails.
pub fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run openssl (make setup installs it): {e}"));
    assert!(
        out.status.success(),
        "openssl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
