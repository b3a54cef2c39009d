//! Velero (1.10 to 1.18, the releases with restic repositories): each
//! `BackupRepository` of type `restic` (or none, as before 1.10) names its
//! restic repository in `spec.resticIdentifier`, exactly as Velero passes
//! it to restic. Its password is key `repository-password` of Secret
//! `velero-repo-credentials` in Velero's namespace; its storage
//! credentials come from its `BackupStorageLocation`'s `spec.credential`,
//! else from what `velero install` mounts into Velero's pods (Secret
//! `cloud-credentials`, key `cloud`): an AWS credentials file (the profile
//! `config.profile`), or for Azure a file of `NAME=value` lines holding the
//! key `config.storageAccountKeyEnvVar` names. restic runs in pods named
//! `velero-…`, `node-agent-…` and `<repository>-maintain-job-…`.

use std::collections::BTreeMap;

use serde_json::Value;

use super::super::Found;
use super::super::api::{ClusterView, text};
use super::{Parts, each, pod_suffix};
use crate::repo::backend::s3::profile_keys;

const GROUP_VERSION: &str = "velero.io/v1";

/// The pods restic runs in for Velero.
pub(super) const HOSTS: &str = concat!(
    "^(velero-[bcdfghjklmnpqrstvwxz2456789]{1,10}-|node-agent-(windows-)?|restic-)",
    pod_suffix!(),
    "|-maintain-job-[0-9]+-",
    pod_suffix!()
);

/// The restic repositories of every BackupRepository.
pub fn find(view: &ClusterView<'_>) -> Result<Vec<Found>, String> {
    let locations = view
        .objects(GROUP_VERSION, "backupstoragelocations")
        .map_err(|e| e.to_string())?;
    each(
        view,
        GROUP_VERSION,
        "backuprepositories",
        "BackupRepository",
        |object, owner| {
            let kind = text(object, "/spec/repositoryType").unwrap_or("restic");
            (kind == "restic").then(|| parts(view, object, &owner.namespace, &locations))
        },
    )
}

fn parts(
    view: &ClusterView<'_>,
    object: &Value,
    namespace: &str,
    locations: &[Value],
) -> Result<Parts, String> {
    let location = text(object, "/spec/resticIdentifier")
        .ok_or("it has no spec.resticIdentifier yet (Velero has not prepared the repository)")?;
    let bsl_name = text(object, "/spec/backupStorageLocation")
        .ok_or("it names no spec.backupStorageLocation")?;
    let bsl = locations
        .iter()
        .find(|l| {
            text(l, "/metadata/namespace") == Some(namespace)
                && text(l, "/metadata/name") == Some(bsl_name)
        })
        .ok_or_else(|| format!("its BackupStorageLocation {bsl_name} does not exist"))?;
    let password =
        view.secret_value(namespace, "velero-repo-credentials", "repository-password")?;
    let (secret, key) = match (
        text(bsl, "/spec/credential/name"),
        text(bsl, "/spec/credential/key"),
    ) {
        (Some(secret), Some(key)) => (secret, key),
        _ => ("cloud-credentials", "cloud"),
    };
    let file = view.secret_value(namespace, secret, key)?;
    let variables = if location.starts_with("azure:") {
        azure_variables(bsl, &file)?
    } else if location.starts_with("s3:") {
        aws_variables(bsl, &file)?
    } else {
        return Err(
            "only its S3 and Azure repositories are read (GCS credentials are a file)".into(),
        );
    };
    Ok(Parts::whole(
        location.to_owned(),
        password,
        variables,
        HOSTS,
    ))
}

/// The keys of profile `config.profile` (else `default`) of an AWS
/// credentials file, as Velero hands them to restic.
fn aws_variables(bsl: &Value, file: &str) -> Result<BTreeMap<String, String>, String> {
    let profile = text(bsl, "/spec/config/profile").unwrap_or("default");
    let (id, secret, token) = profile_keys(file, profile).ok_or_else(|| {
        format!(
            "its credentials file has no keys for profile {}",
            crate::text::escape(profile)
        )
    })?;
    let mut variables = BTreeMap::from([
        ("AWS_ACCESS_KEY_ID".to_owned(), id),
        ("AWS_SECRET_ACCESS_KEY".to_owned(), secret),
    ]);
    if let Some(token) = token {
        variables.insert("AWS_SESSION_TOKEN".into(), token);
    }
    Ok(variables)
}

/// The account (`config.storageAccount`) and its key (the credentials
/// file's `config.storageAccountKeyEnvVar` line), as Velero hands them to
/// restic. Without that setting Velero asks Azure for the key, which
/// lockwarden does not.
fn azure_variables(bsl: &Value, file: &str) -> Result<BTreeMap<String, String>, String> {
    let account = text(bsl, "/spec/config/storageAccount")
        .ok_or("its BackupStorageLocation has no config.storageAccount")?;
    let name = text(bsl, "/spec/config/storageAccountKeyEnvVar")
        .ok_or("its BackupStorageLocation has no config.storageAccountKeyEnvVar")?;
    let key = file
        .lines()
        .filter_map(|line| line.trim().split_once('='))
        .find(|(k, _)| k.trim() == name)
        .map(|(_, v)| v.trim().trim_matches('"').to_owned())
        .ok_or_else(|| format!("its credentials file has no {}", crate::text::escape(name)))?;
    Ok(BTreeMap::from([
        ("AZURE_ACCOUNT_NAME".to_owned(), account.to_owned()),
        ("AZURE_ACCOUNT_KEY".to_owned(), key),
    ]))
}
