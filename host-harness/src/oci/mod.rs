//! Policies as OCI artifacts, in the WebAssembly layout that `wkg`,
//! wasmCloud and Spin use: an OCI image manifest whose config has media type
//! `application/vnd.wasm.config.v0+json` and whose one layer is the component
//! (`application/wasm`).
//!
//! Pulling checks the manifest against a pinned digest and the layer against
//! the manifest, and keeps both in a content-addressed store, so a policy
//! pinned by digest is read from disk and never fetched again. Credentials come
//! from the Docker config file (`$DOCKER_CONFIG/config.json` or
//! `~/.docker/config.json`, credential helpers included). Plain HTTP is only
//! spoken to registries on this machine, and only when asked.
//!
//! oci-client is async; each call runs on a current-thread runtime of its
//! own, so the rest of lockwarden stays synchronous.

mod artifact;
mod reference;
mod store;

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use docker_credential::{CredentialRetrievalError, DockerCredential};
use oci_client::Client;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::{DigestError, OciDistributionError, OciEnvelope, OciErrorCode};
use oci_client::manifest::{OCI_IMAGE_MEDIA_TYPE, OciDescriptor, OciImageManifest};
use oci_client::secrets::RegistryAuth;

use artifact::{CONFIG_MEDIA_TYPE, LAYER_MEDIA_TYPE};

pub use reference::{OciReference, ReferenceError, SCHEME};
use store::BlobStore;
pub use store::sha256_digest;

/// What went wrong talking to a registry. Each message names the artifact or
/// registry, the cause, and what to do.
#[derive(Debug, thiserror::Error)]
pub enum OciError {
    /// Plain HTTP was asked for a registry that is not on this machine.
    #[error(
        "--insecure-registry is only allowed for registries on this machine (127.0.0.1, ::1, \
         localhost), not {registry}: use HTTPS"
    )]
    InsecureNotLoopback {
        /// The registry.
        registry: String,
    },
    /// The Docker config or a credential helper failed.
    #[error(
        "cannot read credentials for {registry} from the Docker config: {cause}; fix \
         $DOCKER_CONFIG/config.json or ~/.docker/config.json, or run `docker login {registry}`"
    )]
    Credentials {
        /// The registry.
        registry: String,
        /// What failed.
        cause: String,
    },
    /// No connection could be made.
    #[error("cannot reach registry {registry}: {cause}; {hint}")]
    Unreachable {
        /// The registry.
        registry: String,
        /// What failed.
        cause: String,
        /// What to check.
        hint: &'static str,
    },
    /// The registry refused the credentials (or asked for some).
    #[error(
        "registry {registry} refused access to {reference}: {cause}; log in with `docker login \
         {registry}` (lockwarden reads the Docker config file)"
    )]
    Denied {
        /// The registry.
        registry: String,
        /// The artifact.
        reference: String,
        /// What the registry said.
        cause: String,
    },
    /// No such tag, digest or repository.
    #[error("{reference} does not exist in the registry: {cause}; check the name, tag and digest")]
    NotFound {
        /// The artifact.
        reference: String,
        /// What the registry said.
        cause: String,
    },
    /// Content did not match its digest.
    #[error(
        "{what} of {reference} does not match its digest: expected {expected}, got {actual}; \
         the registry served other content than the one pinned, so nothing was run"
    )]
    DigestMismatch {
        /// Manifest or layer.
        what: &'static str,
        /// The artifact.
        reference: String,
        /// The digest asked for.
        expected: String,
        /// The digest of what arrived.
        actual: String,
    },
    /// The artifact is not in the WebAssembly layout.
    #[error(
        "{reference} is not a WebAssembly component artifact: {cause}; push policies with `lockwarden policy push` or `wkg oci push`"
    )]
    NotWasmArtifact {
        /// The artifact.
        reference: String,
        /// What is wrong with it.
        cause: String,
    },
    /// The layer (or the file to push) is not a component.
    #[error(
        "{what} is not a WebAssembly component: {cause}; a policy is a component (docs/writing-a-policy.md says how to build one)"
    )]
    NotComponent {
        /// The artifact or file.
        what: String,
        /// What it is instead.
        cause: String,
    },
    /// The reference cannot be used for this operation.
    #[error("{0}")]
    Reference(String),
    /// Any other registry failure.
    #[error("registry {registry} failed on {reference}: {cause}")]
    Registry {
        /// The registry.
        registry: String,
        /// The artifact.
        reference: String,
        /// What failed.
        cause: String,
    },
}

/// A registry's failures are none of the user's kinds: exit code 1 (13
/// and 14 say the repository's storage refused or cannot be reached, not a
/// registry).
impl crate::error::Classify for OciError {
    fn kind(&self) -> crate::error::ErrorKind {
        match self {
            OciError::InsecureNotLoopback { .. }
            | OciError::Credentials { .. }
            | OciError::Unreachable { .. }
            | OciError::Denied { .. }
            | OciError::NotFound { .. }
            | OciError::DigestMismatch { .. }
            | OciError::NotWasmArtifact { .. }
            | OciError::NotComponent { .. }
            | OciError::Reference(_)
            | OciError::Registry { .. } => crate::error::ErrorKind::Failed,
        }
    }
}

/// A pulled policy.
#[derive(Debug)]
pub struct Pulled {
    /// The component.
    pub component: Vec<u8>,
    /// Where it came from, pinned to the manifest digest.
    pub reference: OciReference,
}

/// Talks to OCI registries.
#[derive(Debug, Clone)]
pub struct Registry {
    insecure: bool,
    store: Option<BlobStore>,
}

impl Registry {
    /// A client. `insecure` allows plain HTTP to loopback registries;
    /// `cache_dir` keeps pulled artifacts (`<cache_dir>/oci`).
    pub fn new(insecure: bool, cache_dir: Option<PathBuf>) -> Self {
        Registry {
            insecure,
            store: cache_dir.map(|dir| BlobStore::new(dir.join("oci"))),
        }
    }

    /// Pulls the component at `reference`. A pinned reference already in the
    /// store is served without contacting the registry.
    pub fn pull(&self, reference: &OciReference) -> Result<Pulled, OciError> {
        if let Some(pulled) = reference
            .digest
            .as_ref()
            .and_then(|d| self.stored(reference, d))
        {
            tracing::debug!("{reference}: served from the local store");
            return Ok(pulled);
        }
        let client = self.client(reference)?;
        let auth = credentials(&reference.registry)?;
        let target = reference.to_client();
        block_on(async {
            let (manifest_bytes, _) = client
                .pull_manifest_raw(&target, &auth, &[OCI_IMAGE_MEDIA_TYPE])
                .await
                .map_err(|e| classify(reference, "the manifest", e))?;
            let digest = sha256_digest(&manifest_bytes);
            if let Some(pinned) = &reference.digest {
                check_digest("the manifest", reference, pinned, &digest)?;
            }
            let layer = wasm_layer(reference, &manifest_bytes)?;
            let component = match self.store.as_ref().and_then(|s| s.get(&layer.digest)) {
                Some(bytes) => bytes,
                None => {
                    let mut bytes = Vec::new();
                    client
                        .pull_blob(&target, &layer, &mut bytes)
                        .await
                        .map_err(|e| classify(reference, "the layer", e))?;
                    bytes
                }
            };
            check_digest(
                "the layer",
                reference,
                &layer.digest,
                &sha256_digest(&component),
            )?;
            check_component(&reference.to_string(), &component)?;
            if let Some(store) = &self.store {
                let stored = store
                    .put(&digest, &manifest_bytes)
                    .and_then(|()| store.put(&layer.digest, &component));
                if let Err(e) = stored {
                    tracing::warn!("cannot keep {reference} in the local store: {e}");
                }
            }
            Ok(Pulled {
                component,
                reference: reference.pinned(&digest),
            })
        })?
    }

    /// The pinned artifact from the store, if both its manifest and its layer
    /// are there intact.
    fn stored(&self, reference: &OciReference, digest: &str) -> Option<Pulled> {
        let store = self.store.as_ref()?;
        let layer = wasm_layer(reference, &store.get(digest)?).ok()?;
        let component = store.get(&layer.digest)?;
        check_component("", &component).ok()?;
        Some(Pulled {
            component,
            reference: reference.clone(),
        })
    }

    /// Pushes `component` to `reference` (a tag) with these manifest
    /// annotations, and returns the reference pinned to the new manifest's
    /// digest.
    pub fn push(
        &self,
        component: &[u8],
        reference: &OciReference,
        annotations: BTreeMap<String, String>,
    ) -> Result<OciReference, OciError> {
        if reference.digest.is_some() || reference.tag.is_none() {
            return Err(OciError::Reference(format!(
                "push to a tag, such as oci://{}/{}:1.0; the digest is computed from what is pushed",
                reference.registry, reference.repository
            )));
        }
        check_component("the file to push", component)?;
        let (config, layer) =
            artifact::config_and_layer(component).map_err(|cause| OciError::NotComponent {
                what: "the file to push".into(),
                cause: cause.to_string(),
            })?;
        let client = self.client(reference)?;
        let auth = credentials(&reference.registry)?;
        let target = reference.to_client();
        let layers = [layer];
        let mut manifest = OciImageManifest::build(&layers, &config, Some(annotations));
        manifest.media_type = Some(artifact::MANIFEST_MEDIA_TYPE.to_owned());
        block_on(async {
            client
                .push(&target, &layers, config, &auth, Some(manifest))
                .await
                .map_err(|e| classify(reference, "the manifest", e))?;
            let digest = client
                .fetch_manifest_digest(&target, &auth)
                .await
                .map_err(|e| classify(reference, "the manifest", e))?;
            Ok(reference.pinned(&digest))
        })?
    }

    fn client(&self, reference: &OciReference) -> Result<Client, OciError> {
        let protocol = if self.insecure {
            if !reference.is_loopback() {
                return Err(OciError::InsecureNotLoopback {
                    registry: reference.registry.clone(),
                });
            }
            ClientProtocol::HttpsExcept(vec![reference.registry.clone()])
        } else {
            ClientProtocol::Https
        };
        // oci-client makes a TLS client even for plain HTTP, and panics when
        // it cannot.
        crate::tls::check_roots().map_err(|cause| OciError::Unreachable {
            registry: reference.registry.clone(),
            cause: cause.to_string(),
            hint: "lockwarden trusts the system's certificates",
        })?;
        Ok(Client::new(ClientConfig {
            protocol,
            connect_timeout: Some(Duration::from_secs(10)),
            read_timeout: Some(Duration::from_secs(60)),
            user_agent: concat!("lockwarden/", env!("CARGO_PKG_VERSION")),
            ..ClientConfig::default()
        }))
    }
}

/// Runs a future to completion on a runtime of its own.
fn block_on<F: Future>(future: F) -> Result<F::Output, OciError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| OciError::Reference(format!("cannot start the network runtime: {e}")))?;
    Ok(runtime.block_on(future))
}

/// Credentials for `registry` from the Docker config; anonymous when there is
/// no config file or no entry for it.
fn credentials(registry: &str) -> Result<RegistryAuth, OciError> {
    // docker_credential reports a missing file like an unreadable one, so
    // look first, in the same places: $DOCKER_CONFIG, else ~/.docker.
    let dir = std::env::var_os("DOCKER_CONFIG")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".docker")));
    if !dir.is_some_and(|dir| dir.join("config.json").exists()) {
        return Ok(RegistryAuth::Anonymous);
    }
    match docker_credential::get_credential(registry) {
        Ok(DockerCredential::UsernamePassword(user, password)) => {
            Ok(RegistryAuth::Basic(user, password))
        }
        Ok(DockerCredential::IdentityToken(token)) => Ok(RegistryAuth::Bearer(token)),
        Err(
            CredentialRetrievalError::ConfigNotFound
            | CredentialRetrievalError::NoCredentialConfigured,
        ) => Ok(RegistryAuth::Anonymous),
        Err(e) => Err(OciError::Credentials {
            registry: registry.to_owned(),
            cause: e.to_string(),
        }),
    }
}

fn check_digest(
    what: &'static str,
    reference: &OciReference,
    expected: &str,
    actual: &str,
) -> Result<(), OciError> {
    if expected == actual {
        Ok(())
    } else {
        Err(OciError::DigestMismatch {
            what,
            reference: reference.to_string(),
            expected: expected.to_owned(),
            actual: actual.to_owned(),
        })
    }
}

/// The one component layer of a WebAssembly artifact's manifest.
pub(crate) fn wasm_layer(
    reference: &OciReference,
    manifest: &[u8],
) -> Result<OciDescriptor, OciError> {
    let not_wasm = |cause: String| OciError::NotWasmArtifact {
        reference: reference.to_string(),
        cause,
    };
    let manifest: OciImageManifest = serde_json::from_slice(manifest)
        .map_err(|e| not_wasm(format!("its manifest is not an OCI image manifest ({e})")))?;
    if manifest.config.media_type != CONFIG_MEDIA_TYPE {
        return Err(not_wasm(format!(
            "its config has media type {}, not {CONFIG_MEDIA_TYPE}",
            manifest.config.media_type
        )));
    }
    match manifest.layers.as_slice() {
        [layer] if u64::try_from(layer.size).map_or(true, |size| size > crate::limits::POLICY) => {
            Err(not_wasm(format!(
                "its layer is {} bytes, more than the {} bytes a policy may be",
                layer.size,
                crate::limits::POLICY
            )))
        }
        [layer] if layer.media_type == LAYER_MEDIA_TYPE => Ok(layer.clone()),
        [layer] => Err(not_wasm(format!(
            "its layer has media type {}, not {LAYER_MEDIA_TYPE}",
            layer.media_type
        ))),
        layers => Err(not_wasm(format!(
            "it has {} layers, not one {LAYER_MEDIA_TYPE} layer",
            layers.len()
        ))),
    }
}

/// Checks the header: `\0asm` with the component encoding, not a core module.
fn check_component(what: &str, bytes: &[u8]) -> Result<(), OciError> {
    let fail = |cause: &str| OciError::NotComponent {
        what: what.to_owned(),
        cause: cause.to_owned(),
    };
    match bytes.get(..8) {
        Some([0, b'a', b's', b'm', _, _, 0x01, 0x00]) => Ok(()),
        Some([0, b'a', b's', b'm', 0x01, 0x00, 0x00, 0x00]) => Err(fail(
            "it is a core WebAssembly module; a policy must be a component (wasm32-wasip2)",
        )),
        Some([0, b'a', b's', b'm', ..]) => Err(fail("it has an unknown WebAssembly encoding")),
        _ => Err(fail("it does not start with the WebAssembly magic number")),
    }
}

/// Turns a client error into one that says what to do; `part` is what was
/// being transferred.
fn classify(reference: &OciReference, part: &'static str, error: OciDistributionError) -> OciError {
    let registry = reference.registry.clone();
    let name = reference.to_string();
    match error {
        OciDistributionError::DigestError(DigestError::VerificationError { expected, actual }) => {
            OciError::DigestMismatch {
                what: part,
                reference: name,
                expected,
                actual,
            }
        }
        OciDistributionError::RequestError(e) if e.is_connect() || e.is_timeout() => {
            unreachable(registry, error_chain(&e))
        }
        error => {
            let (answer, cause) = match answer(&error) {
                Some(answer) => (answer, error.to_string()),
                None => (Answer::Failed, error_chain(&error)),
            };
            match answer {
                Answer::Missing => OciError::NotFound {
                    reference: name,
                    cause,
                },
                Answer::Denied => OciError::Denied {
                    registry,
                    reference: name,
                    cause,
                },
                Answer::Failed => OciError::Registry {
                    registry,
                    reference: name,
                    cause,
                },
            }
        }
    }
}

/// No connection to `registry`; the hint depends on how it failed.
fn unreachable(registry: String, cause: String) -> OciError {
    let hint = if cause.contains("InvalidContentType")
        || cause.contains("CorruptMessage")
        || cause.contains("tls")
    {
        "it may be a plain-HTTP registry: on this machine, pass --insecure-registry"
    } else {
        "check the address and that the registry is running"
    };
    OciError::Unreachable {
        registry,
        cause,
        hint,
    }
}

/// What a registry's answer says about the artifact.
enum Answer {
    /// No such tag, digest or repository.
    Missing,
    /// The credentials were refused (or none were given).
    Denied,
    /// Anything else the registry said.
    Failed,
}

/// What the registry answered, when `error` is an answer of the registry
/// at all.
fn answer(error: &OciDistributionError) -> Option<Answer> {
    match error {
        OciDistributionError::UnauthorizedError { .. }
        | OciDistributionError::AuthenticationFailure(_) => Some(Answer::Denied),
        OciDistributionError::ImageManifestNotFoundError(_) => Some(Answer::Missing),
        OciDistributionError::RegistryError { envelope, .. } => Some(envelope_answer(envelope)),
        OciDistributionError::ServerError { code: 404, .. } => Some(Answer::Missing),
        OciDistributionError::ServerError {
            code: 401 | 403, ..
        } => Some(Answer::Denied),
        _ => None,
    }
}

/// What the error codes of a registry's error envelope say; a missing
/// artifact wins over a refusal.
fn envelope_answer(envelope: &OciEnvelope) -> Answer {
    let has = |codes: &[OciErrorCode]| envelope.errors.iter().any(|e| codes.contains(&e.code));
    if has(&[
        OciErrorCode::ManifestUnknown,
        OciErrorCode::NameUnknown,
        OciErrorCode::BlobUnknown,
    ]) {
        Answer::Missing
    } else if has(&[OciErrorCode::Unauthorized, OciErrorCode::Denied]) {
        Answer::Denied
    } else {
        Answer::Failed
    }
}

/// An error and its causes on one line.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let next = cause.to_string();
        if !text.contains(&next) {
            text = format!("{text}: {next}");
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tells_components_from_modules_and_junk() {
        let component = [0, b'a', b's', b'm', 0x0d, 0x00, 0x01, 0x00, 0];
        assert!(check_component("x", &component).is_ok());
        let module = [0, b'a', b's', b'm', 0x01, 0x00, 0x00, 0x00];
        let error = check_component("x", &module)
            .expect_err("module")
            .to_string();
        assert!(error.contains("core WebAssembly module"), "{error}");
        let error = check_component("x", b"{\"json\": true}")
            .expect_err("junk")
            .to_string();
        assert!(error.contains("magic number"), "{error}");
    }

    fn envelope(codes: &[OciErrorCode]) -> OciDistributionError {
        let errors = codes
            .iter()
            .map(|code| {
                serde_json::from_value(serde_json::json!({"code": code, "message": "m"}))
                    .expect("an OCI error")
            })
            .collect();
        OciDistributionError::RegistryError {
            envelope: OciEnvelope { errors },
            url: "https://r.example/v2/p".into(),
        }
    }

    fn server(code: u16) -> OciDistributionError {
        OciDistributionError::ServerError {
            code,
            url: "https://r.example/v2/p".into(),
            message: "no".into(),
        }
    }

    #[test]
    fn registry_failures_say_what_to_do() {
        let reference = OciReference::parse("oci://r.example/p:1").expect("a reference");
        let cases: [(OciDistributionError, &str); 12] = [
            (
                DigestError::VerificationError {
                    expected: "sha256:aa".into(),
                    actual: "sha256:bb".into(),
                }
                .into(),
                "the layer of oci://r.example/p:1 does not match its digest: expected sha256:aa, got sha256:bb; the registry served other content than the one pinned, so nothing was run",
            ),
            (
                OciDistributionError::UnauthorizedError {
                    url: "https://r.example/v2/p".into(),
                },
                "registry r.example refused access to oci://r.example/p:1: Not authorized: url https://r.example/v2/p; log in with `docker login r.example` (lockwarden reads the Docker config file)",
            ),
            (
                OciDistributionError::AuthenticationFailure("bad token".into()),
                "registry r.example refused access to oci://r.example/p:1: Authentication failure: bad token; log in with `docker login r.example` (lockwarden reads the Docker config file)",
            ),
            (
                OciDistributionError::ImageManifestNotFoundError("p:1".into()),
                "oci://r.example/p:1 does not exist in the registry: Image manifest not found: p:1; check the name, tag and digest",
            ),
            (
                envelope(&[OciErrorCode::Denied, OciErrorCode::ManifestUnknown]),
                "oci://r.example/p:1 does not exist in the registry: Registry error: url https://r.example/v2/p, envelope: OCI API errors: [OCI API error: m\nOCI API error: m]; check the name, tag and digest",
            ),
            (
                envelope(&[OciErrorCode::Unauthorized]),
                "registry r.example refused access to oci://r.example/p:1: Registry error: url https://r.example/v2/p, envelope: OCI API errors: [OCI API error: m]; log in with `docker login r.example` (lockwarden reads the Docker config file)",
            ),
            (
                envelope(&[OciErrorCode::Toomanyrequests]),
                "registry r.example failed on oci://r.example/p:1: Registry error: url https://r.example/v2/p, envelope: OCI API errors: [OCI API error: m]",
            ),
            (
                server(404),
                "oci://r.example/p:1 does not exist in the registry: Server error: url https://r.example/v2/p, code: 404, message: no; check the name, tag and digest",
            ),
            (
                server(401),
                "registry r.example refused access to oci://r.example/p:1: Server error: url https://r.example/v2/p, code: 401, message: no; log in with `docker login r.example` (lockwarden reads the Docker config file)",
            ),
            (
                server(403),
                "registry r.example refused access to oci://r.example/p:1: Server error: url https://r.example/v2/p, code: 403, message: no; log in with `docker login r.example` (lockwarden reads the Docker config file)",
            ),
            (
                server(500),
                "registry r.example failed on oci://r.example/p:1: Server error: url https://r.example/v2/p, code: 500, message: no",
            ),
            (
                std::io::Error::other("disk on fire").into(),
                "registry r.example failed on oci://r.example/p:1: disk on fire",
            ),
        ];
        for (error, expected) in cases {
            assert_eq!(
                classify(&reference, "the layer", error).to_string(),
                expected
            );
        }
    }

    #[test]
    fn an_unreachable_registry_that_may_speak_plain_http_says_so() {
        let hint = |cause: &str| match unreachable("r.example".into(), cause.into()) {
            OciError::Unreachable { hint, .. } => hint,
            other => panic!("{other}"),
        };
        assert!(
            hint("received corrupt message of type InvalidContentType")
                .contains("--insecure-registry")
        );
        assert!(hint("tls handshake eof").contains("--insecure-registry"));
        assert!(hint("Connection refused (os error 111)").contains("registry is running"));
    }
}
