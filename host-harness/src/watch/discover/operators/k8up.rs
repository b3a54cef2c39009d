//! K8up: no object is a repository; each `Schedule` and each `Backup`,
//! `Check`, `Prune`, `Archive` or `Restore` has a `spec.backend`, and the
//! repository is the one it names (`s3:<endpoint>/<bucket>`, or
//! `azure:<container>:<path>`), with its password and keys in the Secrets
//! its `…SecretRef`s name, in the object's own namespace. An object
//! without a backend uses K8up's global settings (`BACKUP_GLOBAL…` in the
//! operator's own Deployment), which no object shows: it is reported, not
//! guessed. A backend's `tlsOptions` (`caCert`, `clientCert`, `clientKey`)
//! are paths of files mounted into the backup pod, which lockwarden cannot
//! read, and so are the `CA_CERT_FILE`, `CLIENT_CERT_FILE` and
//! `CLIENT_KEY_FILE` its `envFrom` Secrets and ConfigMaps may set: such a
//! repository is reported, not watched with the wrong roots.
//! restic runs in job pods named `backup-…`, `check-…`,
//! `prune-…`, `archive-…` and `restore-…`.

use std::collections::BTreeMap;

use serde_json::Value;

use super::super::Found;
use super::super::api::ClusterView;
use super::super::field::text;
use super::{Parts, Refusal, each, pod_suffix};
use crate::kubernetes::KubeError;

/// The pods restic runs in for K8up.
pub(super) const HOSTS: &str = concat!("^(backup|check|prune|archive|restore)-.+-", pod_suffix!());

const GROUP_VERSION: &str = "k8up.io/v1";

/// The kinds with a `spec.backend`, as (plural, kind).
const KINDS: [(&str, &str); 6] = [
    ("schedules", "Schedule"),
    ("backups", "Backup"),
    ("checks", "Check"),
    ("prunes", "Prune"),
    ("archives", "Archive"),
    ("restores", "Restore"),
];

/// The repositories of every K8up object with a backend.
pub fn find(view: &ClusterView<'_>) -> Result<Vec<Found>, KubeError> {
    let mut found = Vec::new();
    for (plural, kind) in KINDS {
        found.extend(each(view, GROUP_VERSION, plural, kind, |object, owner| {
            Some(parts(view, object, &owner.namespace))
        })?);
    }
    Ok(found)
}

fn parts(view: &ClusterView<'_>, object: &Value, namespace: &str) -> Result<Parts, Refusal> {
    let backend = object.pointer("/spec/backend").ok_or(Refusal::Unset(
        "it names no spec.backend; K8up's global settings (BACKUP_GLOBAL…) are not readable",
    ))?;
    tls_options(backend)?;
    env_from_files(view, backend, namespace)?;
    if backend.get("azure").is_none() && backend.get("s3").is_none() {
        return Err(unread_backend(backend));
    }
    let secret = |field: &str| -> Result<String, Refusal> {
        let name = text(backend, &format!("{field}/name"));
        let key = text(backend, &format!("{field}/key"));
        match (name, key) {
            (Some(name), Some(key)) => Ok(view.secret_value(namespace, name, key)?),
            _ => Err(Refusal::Lacks {
                holder: "backend".into(),
                what: field.trim_start_matches('/').to_owned(),
            }),
        }
    };
    let password = secret("/repoPasswordSecretRef")?;
    let (location, variables) = if backend.get("azure").is_some() {
        let container = text(backend, "/azure/container")
            .ok_or(Refusal::Unset("its azure backend has no container"))?;
        let path = text(backend, "/azure/path").unwrap_or("/");
        let variables = BTreeMap::from([
            (
                "AZURE_ACCOUNT_NAME".to_owned(),
                secret("/azure/accountNameSecretRef")?,
            ),
            (
                "AZURE_ACCOUNT_KEY".to_owned(),
                secret("/azure/accountKeySecretRef")?,
            ),
        ]);
        (format!("azure:{container}:{path}"), variables)
    } else if backend.get("s3").is_some() {
        let endpoint = text(backend, "/s3/endpoint")
            .ok_or(Refusal::Unset("its s3 backend has no endpoint"))?;
        let bucket =
            text(backend, "/s3/bucket").ok_or(Refusal::Unset("its s3 backend has no bucket"))?;
        let variables = BTreeMap::from([
            (
                "AWS_ACCESS_KEY_ID".to_owned(),
                secret("/s3/accessKeyIDSecretRef")?,
            ),
            (
                "AWS_SECRET_ACCESS_KEY".to_owned(),
                secret("/s3/secretAccessKeySecretRef")?,
            ),
        ]);
        (
            format!("s3:{}/{bucket}", endpoint.trim_end_matches('/')),
            variables,
        )
    } else {
        return Err(unread_backend(backend));
    };
    Ok(Parts::whole(location, password, variables, HOSTS))
}

/// Why a `backend` with neither `s3` nor `azure` is not watched, naming
/// what it has instead.
fn unread_backend(backend: &Value) -> Refusal {
    let found: Vec<String> = ["local", "gcs", "b2", "swift", "rest"]
        .into_iter()
        .filter(|kind| backend.get(*kind).is_some())
        .map(|kind| format!("spec.backend.{kind}"))
        .collect();
    let has = match found.as_slice() {
        [] => "no backend lockwarden knows".to_owned(),
        found => found.join(", "),
    };
    Refusal::Backend { has }
}

/// Refuses a `backend` whose `tlsOptions` name files (a CA, a client
/// certificate and key): paths inside the backup pod, as a local backend's
/// path is, which lockwarden cannot read. Watched without them, its checks
/// would fail on a certificate the default roots do not know.
fn tls_options(backend: &Value) -> Result<(), Refusal> {
    let Some(options) = backend.get("tlsOptions") else {
        return Ok(());
    };
    let named: Vec<String> = ["caCert", "clientCert", "clientKey"]
        .into_iter()
        .filter(|field| text(options, &format!("/{field}")).is_some())
        .map(|field| format!("spec.backend.tlsOptions.{field}"))
        .collect();
    if named.is_empty() {
        return Ok(());
    }
    Err(Refusal::PodFiles(named))
}

/// The variables by which K8up's restic takes TLS files, as its
/// `tlsOptions` do.
const FILE_VARIABLES: [&str; 3] = ["CA_CERT_FILE", "CLIENT_CERT_FILE", "CLIENT_KEY_FILE"];

/// At most this many `envFrom` sources are looked at; a backend with more
/// is refused (the backup pod's environment could not be told).
const ENV_FROM: usize = 32;

/// Refuses a `backend` whose `envFrom` Secrets or ConfigMaps (in
/// `namespace`) set one of [`FILE_VARIABLES`] (after the source's
/// `prefix`): files inside the backup pod, as [`tls_options`] names. Only
/// the keys are read, never a value; a source marked `optional` that does
/// not exist sets nothing.
fn env_from_files(view: &ClusterView<'_>, backend: &Value, namespace: &str) -> Result<(), Refusal> {
    let sources = match backend.get("envFrom").and_then(Value::as_array) {
        Some(sources) if sources.len() > ENV_FROM => {
            return Err(Refusal::Unset(
                "its spec.backend.envFrom has more sources than discovery reads (32)",
            ));
        }
        Some(sources) => sources,
        None => return Ok(()),
    };
    let mut named = Vec::new();
    for (i, source) in sources.iter().enumerate() {
        let prefix = text(source, "/prefix").unwrap_or("");
        for (field, secret) in [("secretRef", true), ("configMapRef", false)] {
            let Some(name) = text(source, &format!("/{field}/name")) else {
                continue;
            };
            let optional =
                source.pointer(&format!("/{field}/optional")) == Some(&Value::Bool(true));
            let keys = match view.keys_of(secret, namespace, name) {
                Err(super::super::api::ReferenceError::Missing(_)) if optional => continue,
                read => read?,
            };
            named.extend(
                FILE_VARIABLES
                    .into_iter()
                    .filter(|v| keys.iter().any(|k| k.strip_prefix(prefix) == Some(*v)))
                    .map(|v| format!("spec.backend.envFrom[{i}].{field}'s {v}")),
            );
        }
    }
    match named.is_empty() {
        true => Ok(()),
        false => Err(Refusal::PodFiles(named)),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn a_backend_not_read_is_named() {
        let gcs = json!({"gcs": {"bucket": "b"}, "repoPasswordSecretRef": {"name": "p"}});
        assert_eq!(
            super::unread_backend(&gcs).to_string(),
            "it has spec.backend.gcs; discovery reads only its s3 and azure backends"
        );
        assert!(
            super::unread_backend(&json!({}))
                .to_string()
                .contains("no backend lockwarden knows")
        );
    }

    #[test]
    fn tls_options_name_files_in_the_pod_and_are_refused() {
        let backend = |options| json!({"s3": {"endpoint": "https://minio"}, "tlsOptions": options});
        assert_eq!(super::tls_options(&json!({"s3": {}})), Ok(()));
        assert_eq!(super::tls_options(&backend(json!({}))), Ok(()));
        let why = super::tls_options(&backend(json!({"caCert": "/mnt/ca/ca.crt"})))
            .expect_err("a file in the pod")
            .to_string();
        assert_eq!(
            why,
            "its spec.backend.tlsOptions.caCert names a file inside the backup pod, which \
             lockwarden cannot read"
        );
        let why = super::tls_options(&backend(json!({
            "clientCert": "/mnt/tls/tls.crt", "clientKey": "/mnt/tls/tls.key"})))
        .expect_err("files in the pod")
        .to_string();
        assert!(
            why.contains("tlsOptions.clientCert, spec.backend.tlsOptions.clientKey name files"),
            "{why}"
        );
        assert!(!why.contains("/mnt"), "{why}");
    }
}
