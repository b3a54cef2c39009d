//! CustomResourceDefinitions of the kinds lockwarden lists, for the real
//! API server ([`crate::kube_apiserver`]): written here from each
//! operator's documented fields, structural as the API requires. Each
//! types the fields lockwarden reads (so a wrongly typed object is refused
//! by the server, as it would be in a cluster with the operator's own
//! CRDs) and keeps the rest as written (`x-kubernetes-preserve-unknown-fields`):
//! the operators' validation of the fields lockwarden does not read
//! (enums, patterns, required fields, defaults, conversion webhooks,
//! printer columns) is left out.

use serde_json::{Value, json};

/// A string field.
fn string() -> Value {
    json!({"type": "string"})
}

/// An object whose `properties` are typed and whose other fields are kept.
fn open(properties: Value) -> Value {
    json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": properties})
}

/// A Secret or ConfigMap reference by name (and key).
fn reference() -> Value {
    open(json!({"name": string(), "namespace": string(), "key": string()}))
}

/// The definition of `kind` (`plural`) in `group`/`version`, namespaced,
/// whose `spec` is `spec`.
fn crd(group: &str, version: &str, kind: &str, plural: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(),
                      "listKind": format!("{kind}List")},
            "versions": [{
                "name": version, "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": open(json!({
                    "spec": spec,
                    "status": open(json!({})),
                }))},
            }],
        },
    })
}

/// Every kind lockwarden lists, as a `kind: List` for
/// [`crate::kube_apiserver::KubeApiServer::admin_apply`].
pub fn all() -> Value {
    let k8up_spec = || open(json!({"backend": open(json!({}))}));
    let volsync_spec = || {
        open(json!({"restic": open(json!({
            "repository": string(),
            "customCA": open(json!({"secretName": string(), "configMapName": string(), "key": string()})),
        }))}))
    };
    let mut items = vec![
        crd(
            "velero.io",
            "v1",
            "BackupRepository",
            "backuprepositories",
            open(json!({
                "resticIdentifier": string(), "repositoryType": string(),
                "backupStorageLocation": string(), "volumeNamespace": string(),
            })),
        ),
        crd(
            "velero.io",
            "v1",
            "BackupStorageLocation",
            "backupstoragelocations",
            open(json!({
                "provider": string(),
                "objectStorage": open(json!({"bucket": string(), "prefix": string(), "caCert": string()})),
                "config": {"type": "object", "additionalProperties": string()},
                "credential": reference(),
            })),
        ),
        crd(
            "stash.appscode.com",
            "v1alpha1",
            "Repository",
            "repositories",
            open(json!({"backend": open(json!({"storageSecretName": string()}))})),
        ),
        crd(
            "storage.kubestash.com",
            "v1alpha1",
            "Repository",
            "repositories",
            open(json!({
                "storageRef": reference(), "encryptionSecret": reference(), "path": string(),
            })),
        ),
        crd(
            "storage.kubestash.com",
            "v1alpha1",
            "BackupStorage",
            "backupstorages",
            open(json!({"storage": open(json!({})), "usagePolicy": open(json!({}))})),
        ),
        crd(
            "storage.kubestash.com",
            "v1alpha1",
            "Snapshot",
            "snapshots",
            open(json!({"repository": string()})),
        ),
        crd(
            "volsync.backube",
            "v1alpha1",
            "ReplicationSource",
            "replicationsources",
            volsync_spec(),
        ),
        crd(
            "volsync.backube",
            "v1alpha1",
            "ReplicationDestination",
            "replicationdestinations",
            volsync_spec(),
        ),
    ];
    for (kind, plural) in [
        ("Schedule", "schedules"),
        ("Backup", "backups"),
        ("Check", "checks"),
        ("Prune", "prunes"),
        ("Archive", "archives"),
        ("Restore", "restores"),
    ] {
        items.push(crd("k8up.io", "v1", kind, plural, k8up_spec()));
    }
    json!({"apiVersion": "v1", "kind": "List", "items": items})
}
