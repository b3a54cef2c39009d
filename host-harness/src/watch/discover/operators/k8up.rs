//! K8up: no object is a repository; each `Schedule` and each `Backup`,
//! `Check`, `Prune`, `Archive` or `Restore` has a `spec.backend`, and the
//! repository is the one it names (`s3:<endpoint>/<bucket>`, or
//! `azure:<container>:<path>`), with its password and keys in the Secrets
//! its `…SecretRef`s name, in the object's own namespace. An object
//! without a backend uses K8up's global settings (`BACKUP_GLOBAL…` in the
//! operator's own Deployment), which no object shows: it is reported, not
//! guessed. restic runs in job pods named `backup-…`, `check-…`,
//! `prune-…`, `archive-…` and `restore-…`.

use std::collections::BTreeMap;

use serde_json::Value;

use super::super::Found;
use super::super::api::{ClusterView, text};
use super::{Parts, each, pod_suffix};

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
pub fn find(view: &ClusterView<'_>) -> Result<Vec<Found>, String> {
    let mut found = Vec::new();
    for (plural, kind) in KINDS {
        found.extend(each(view, GROUP_VERSION, plural, kind, |object, owner| {
            Some(parts(view, object, &owner.namespace))
        })?);
    }
    Ok(found)
}

fn parts(view: &ClusterView<'_>, object: &Value, namespace: &str) -> Result<Parts, String> {
    let backend = object.pointer("/spec/backend").ok_or(
        "it names no spec.backend; K8up's global settings (BACKUP_GLOBAL…) are not readable",
    )?;
    let secret = |field: &str| -> Result<String, String> {
        let name = text(backend, &format!("{field}/name"));
        let key = text(backend, &format!("{field}/key"));
        match (name, key) {
            (Some(name), Some(key)) => view.secret_value(namespace, name, key),
            _ => Err(format!(
                "its backend has no {}",
                field.trim_start_matches('/')
            )),
        }
    };
    let password = secret("/repoPasswordSecretRef")?;
    let (location, variables) = if backend.get("azure").is_some() {
        let container =
            text(backend, "/azure/container").ok_or("its azure backend has no container")?;
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
        let endpoint = text(backend, "/s3/endpoint").ok_or("its s3 backend has no endpoint")?;
        let bucket = text(backend, "/s3/bucket").ok_or("its s3 backend has no bucket")?;
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
        return Err("only its s3 and azure backends are read".into());
    };
    Ok(Parts::whole(location, password, variables, HOSTS))
}
