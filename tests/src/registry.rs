//! A real OCI registry (Debian's `docker-registry`, distribution 2.8) on
//! 127.0.0.1, optionally with htpasswd authentication, and a raw uploader for
//! artifacts lockwarden would refuse to push itself.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use sha2::{Digest, Sha256};

use crate::certs::PrivateCa;
use crate::restic::{free_port, wait_for_port};

/// The registry's user when authentication is on.
pub const REGISTRY_USER: &str = "publisher";
/// The registry's password when authentication is on.
pub const REGISTRY_PASS: &str = "registry-s3cret";

/// A running registry; stopped when dropped.
pub struct Registry {
    child: Child,
    /// `127.0.0.1:<port>`.
    pub host: String,
    /// Its storage directory.
    pub storage: PathBuf,
    /// The certificate of the CA that signed its TLS certificate, when it
    /// serves HTTPS ([`Registry::start_tls`]).
    pub ca: Option<PathBuf>,
}

impl Registry {
    /// Starts an open registry storing under `dir`.
    pub fn start(dir: &Path) -> Registry {
        Registry::launch(dir, false, false)
    }

    /// Starts an open registry serving HTTPS only, with a certificate for
    /// 127.0.0.1 signed by a CA of its own ([`Registry::ca`]).
    pub fn start_tls(dir: &Path) -> Registry {
        Registry::launch(dir, false, true)
    }

    /// Starts a registry that requires [`REGISTRY_USER`] and
    /// [`REGISTRY_PASS`].
    pub fn start_with_auth(dir: &Path) -> Registry {
        Registry::launch(dir, true, false)
    }

    fn launch(dir: &Path, auth: bool, tls: bool) -> Registry {
        let storage = dir.join("storage");
        std::fs::create_dir_all(&storage).expect("registry storage");
        let host = format!("127.0.0.1:{}", free_port());
        let mut config = format!(
            "version: 0.1\nlog:\n  level: error\n  accesslog:\n    disabled: true\nstorage:\n  \
             filesystem:\n    rootdirectory: {}\nhttp:\n  addr: {host}\n",
            storage.display()
        );
        let ca = tls.then(|| {
            let ca = PrivateCa::make_in(dir);
            config += &format!(
                "  tls:\n    certificate: {}\n    key: {}\n",
                ca.server_cert.display(),
                ca.server_key.display()
            );
            ca.path
        });
        if auth {
            let hash = bcrypt::hash(REGISTRY_PASS, 4).expect("bcrypt");
            let htpasswd = dir.join("htpasswd");
            std::fs::write(&htpasswd, format!("{REGISTRY_USER}:{hash}\n")).expect("htpasswd");
            config += &format!(
                "auth:\n  htpasswd:\n    realm: lockwarden-test\n    path: {}\n",
                htpasswd.display()
            );
        }
        let config_path = dir.join("config.yml");
        std::fs::write(&config_path, config).expect("registry config");
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start docker-registry (run `make setup`: apt-get install docker-registry)");
        wait_for_port(&host, "docker-registry");
        Registry {
            child,
            host,
            storage,
            ca,
        }
    }

    /// The file the registry keeps blob `digest` (`sha256:...`) in.
    pub fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").expect("a sha256 digest");
        self.storage
            .join("docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }

    /// `GET /v2/<repository>/manifests/<reference>` as JSON, with the digest
    /// the registry reports.
    pub fn manifest(&self, repository: &str, reference: &str) -> (serde_json::Value, String) {
        let mut response = ureq::get(format!(
            "http://{}/v2/{repository}/manifests/{reference}",
            self.host
        ))
        .header("Accept", "application/vnd.oci.image.manifest.v1+json")
        .call()
        .expect("fetch the manifest");
        let digest = response
            .headers()
            .get("Docker-Content-Digest")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let body = response.body_mut().read_to_vec().expect("manifest body");
        (
            serde_json::from_slice(&body).expect("manifest JSON"),
            digest,
        )
    }

    /// `GET /v2/<repository>/blobs/<digest>`.
    pub fn blob(&self, repository: &str, digest: &str) -> Vec<u8> {
        ureq::get(format!(
            "http://{}/v2/{repository}/blobs/{digest}",
            self.host
        ))
        .call()
        .expect("fetch the blob")
        .body_mut()
        .read_to_vec()
        .expect("blob body")
    }

    /// Uploads `artifact` by hand, whatever its media types and layer.
    /// Returns the manifest digest.
    pub fn push_raw(&self, artifact: &RawArtifact) -> String {
        let RawArtifact {
            repository,
            tag,
            config_type,
            layer_type,
            layer,
        } = *artifact;
        let config = br#"{"architecture":"wasm","os":"wasip2"}"#;
        let descriptor = |media_type: &str, bytes: &[u8]| serde_json::json!({"mediaType": media_type, "digest": digest(bytes), "size": bytes.len()});
        for blob in [&config[..], layer] {
            let started = ureq::post(format!(
                "http://{}/v2/{repository}/blobs/uploads/",
                self.host
            ))
            .send_empty()
            .expect("start an upload");
            let location = started
                .headers()
                .get("Location")
                .and_then(|v| v.to_str().ok())
                .expect("upload location")
                .to_owned();
            let separator = if location.contains('?') { '&' } else { '?' };
            let url = if location.starts_with("http") {
                location.clone()
            } else {
                format!("http://{}{location}", self.host)
            };
            ureq::put(format!("{url}{separator}digest={}", digest(blob)))
                .header("Content-Type", "application/octet-stream")
                .send(blob)
                .expect("upload a blob");
        }
        let manifest = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": descriptor(config_type, config),
            "layers": [descriptor(layer_type, layer)],
        });
        let body = serde_json::to_vec(&manifest).expect("manifest JSON");
        ureq::put(format!(
            "http://{}/v2/{repository}/manifests/{tag}",
            self.host
        ))
        .header("Content-Type", "application/vnd.oci.image.manifest.v1+json")
        .send(&body[..])
        .expect("put the manifest");
        digest(&body)
    }
}

/// An artifact for [`Registry::push_raw`]: one layer under a fixed wasm
/// config (`{"architecture":"wasm","os":"wasip2"}`), with the media types a
/// test chooses.
#[derive(Debug, Clone, Copy)]
pub struct RawArtifact<'a> {
    /// The registry repository (`lockwarden/odd`).
    pub repository: &'a str,
    /// The tag to push it under.
    pub tag: &'a str,
    /// The media type of the config.
    pub config_type: &'a str,
    /// The media type of the layer.
    pub layer_type: &'a str,
    /// The layer's bytes.
    pub layer: &'a [u8],
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `sha256:<hex>` of `bytes`.
pub fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}
