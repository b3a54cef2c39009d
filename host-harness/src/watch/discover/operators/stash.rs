//! Stash: each `Repository` (stash.appscode.com/v1alpha1) is one restic
//! repository, on the backend `spec.backend` names (`s3:<endpoint>/<bucket
//! and prefix>`, `azure:<container>:/<prefix>`, `gs:<bucket>:/<prefix>`),
//! with its password and the storage's keys in Secret
//! `spec.backend.storageSecretName` of its namespace, each key the name of
//! the variable restic gets (`RESTIC_PASSWORD`, `AWS_ACCESS_KEY_ID`, ...),
//! and `AWS_DEFAULT_REGION` from `s3.region`. A `local` backend is a path
//! inside the backup pod, which lockwarden cannot reach. restic runs in
//! the workload's own pods (the `stash` sidecar), whose names follow no
//! pattern, or in jobs named `stash-backup-…` and `stash-restore-…`.

use std::collections::BTreeMap;

use serde_json::Value;

use super::super::Found;
use super::super::api::{ClusterView, text};
use super::{Parts, clean_join, each, pod_suffix};

/// The pods restic runs in for Stash.
pub(super) const HOSTS: &str = concat!("^stash-(backup|restore)-.+-", pod_suffix!());

const GROUP_VERSION: &str = "stash.appscode.com/v1alpha1";

/// The repositories of every Stash Repository.
pub fn find(view: &ClusterView<'_>) -> Result<Vec<Found>, String> {
    each(
        view,
        GROUP_VERSION,
        "repositories",
        "Repository",
        |object, owner| Some(parts(view, object, &owner.namespace)),
    )
}

fn parts(view: &ClusterView<'_>, object: &Value, namespace: &str) -> Result<Parts, String> {
    let backend = object
        .pointer("/spec/backend")
        .ok_or("it has no spec.backend")?;
    let secret =
        text(backend, "/storageSecretName").ok_or("its backend names no storageSecretName")?;
    let mut variables: BTreeMap<String, String> =
        view.secret_values(namespace, secret)?.into_iter().collect();
    let password = variables
        .remove("RESTIC_PASSWORD")
        .ok_or_else(|| format!("its Secret {secret} has no RESTIC_PASSWORD"))?;
    let prefix = |kind: &str| text(backend, &format!("/{kind}/prefix")).unwrap_or("");
    let location = if let Some(bucket) = text(backend, "/s3/bucket") {
        let endpoint = text(backend, "/s3/endpoint").ok_or("its s3 backend has no endpoint")?;
        if let Some(region) = text(backend, "/s3/region") {
            variables.insert("AWS_DEFAULT_REGION".into(), region.to_owned());
        }
        format!("s3:{endpoint}/{}", clean_join(bucket, prefix("s3")))
    } else if let Some(container) = text(backend, "/azure/container") {
        format!("azure:{container}:/{}", clean_join("", prefix("azure")))
    } else if let Some(bucket) = text(backend, "/gcs/bucket") {
        format!("gs:{bucket}:/{}", clean_join("", prefix("gcs")))
    } else if backend.get("local").is_some() {
        return Err(
            "its local backend is a path inside the backup pod, which lockwarden cannot reach"
                .into(),
        );
    } else {
        return Err("only its s3, azure and gcs backends are read".into());
    };
    Ok(Parts::whole(location, password, variables, HOSTS))
}

#[cfg(test)]
mod tests {
    #[test]
    fn paths_are_joined_as_stash_joins_them() {
        assert_eq!(
            super::super::clean_join("b", "/backup/demo/"),
            "b/backup/demo"
        );
        assert_eq!(super::super::clean_join("b", ""), "b");
        assert_eq!(super::super::clean_join("", "/x/./y/../z"), "x/z");
    }
}
