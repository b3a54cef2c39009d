//! KubeStash: a `Repository` (storage.kubestash.com/v1alpha1) holds one
//! restic repository per backed-up component, at
//! `<storage prefix>/<spec.path>/<component path>` on the `BackupStorage`
//! its `spec.storageRef` names. Which component paths are restic's is what
//! the Repository's Snapshots say (`status.components.<name>.driver` is
//! `Restic`; WalG, Medusa and the others are not restic). Its password is
//! `RESTIC_PASSWORD` in `spec.encryptionSecret`; the storage's keys are in
//! the Secret the BackupStorage names (`secretName`), in the
//! BackupStorage's namespace, with its `CA_CERT_DATA` (the storage's CA
//! bundle, when there is one) and an S3 storage's `insecureTLS`, as
//! KubeStash hands them to restic. A BackupStorage of another namespace is used
//! only where its `usagePolicy` allows the Repository's namespace, and an
//! encryption Secret of another namespace not at all ([`super::super::access`]). The pods restic runs in follow no documented
//! pattern, so pods are no evidence for these (unless `inventory_hosts`
//! says which they are); their locks are judged by their age.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::super::Found;
use super::super::access;
use super::super::api::ClusterView;
use super::super::field::text;
use super::{Parts, Refusal, clean_join, discovered, owner};
use crate::kubernetes::KubeError;
use crate::text::escape;
use crate::tls::Tls;

const GROUP_VERSION: &str = "storage.kubestash.com/v1alpha1";

/// The restic repositories of every KubeStash Repository.
pub fn find(view: &ClusterView<'_>) -> Result<Vec<Found>, KubeError> {
    let list = |plural: &str| view.objects(GROUP_VERSION, plural);
    let storages = list("backupstorages")?;
    let snapshots = list("snapshots")?;
    let mut found = Vec::new();
    for object in list("repositories")? {
        let Some(owner) = owner(&object, GROUP_VERSION, "Repository") else {
            continue;
        };
        let paths = restic_paths(&snapshots, &owner.namespace, &owner.name);
        if paths.is_empty() {
            tracing::debug!(
                "{}: no Snapshot of it says restic wrote a component yet: nothing to watch \
                 until its first backup",
                escape(&owner.label())
            );
            continue;
        }
        let (parts, secrets) =
            view.reading(|| parts(view, &object, &storages, &owner.namespace, &paths));
        match parts {
            Ok(parts) => found.extend(
                (parts.into_iter()).map(|p| discovered(owner.clone(), Ok(p), secrets.clone())),
            ),
            Err(why) => found.push(discovered(owner, Err(why), secrets)),
        }
    }
    Ok(found)
}

/// The component paths the Snapshots of Repository `name` in `namespace`
/// say restic wrote.
fn restic_paths(snapshots: &[Value], namespace: &str, name: &str) -> BTreeSet<String> {
    snapshots
        .iter()
        .filter(|s| {
            text(s, "/metadata/namespace") == Some(namespace)
                && text(s, "/spec/repository") == Some(name)
        })
        .filter_map(|s| s.pointer("/status/components").and_then(Value::as_object))
        .flat_map(|components| components.values())
        .filter(|c| text(c, "/driver") == Some("Restic"))
        .filter_map(|c| text(c, "/path").map(str::to_owned))
        .collect()
}

fn parts(
    view: &ClusterView<'_>,
    object: &Value,
    storages: &[Value],
    namespace: &str,
    paths: &BTreeSet<String>,
) -> Result<Vec<Parts>, Refusal> {
    let storage_name =
        text(object, "/spec/storageRef/name").ok_or(Refusal::Unset("it has no spec.storageRef"))?;
    let storage_ns = text(object, "/spec/storageRef/namespace").unwrap_or(namespace);
    let storage = storages.iter().find(|s| {
        text(s, "/metadata/namespace") == Some(storage_ns)
            && text(s, "/metadata/name") == Some(storage_name)
    });
    // One answer whether it is missing or refuses this namespace: a
    // refusal must not tell another namespace's storages apart.
    let what = format!("BackupStorage {}", crate::text::escape(storage_name));
    let granted = storage.is_some_and(|s| access::granted(s, namespace));
    view.may_name(namespace, storage_ns, &what, granted)?;
    let storage = storage.ok_or_else(|| {
        Refusal::Gone(format!(
            "BackupStorage {}/{}",
            escape(storage_ns),
            escape(storage_name)
        ))
    })?;
    let secret_ns = text(object, "/spec/encryptionSecret/namespace").unwrap_or(namespace);
    let secret = text(object, "/spec/encryptionSecret/name")
        .ok_or(Refusal::Unset("it has no spec.encryptionSecret"))?;
    let password = view.named_secret_value(namespace, secret_ns, secret, "RESTIC_PASSWORD")?;
    let (base, variables, tls) = backend(view, storage, storage_ns)?;
    let repo_path = text(object, "/spec/path").unwrap_or("");
    Ok(paths
        .iter()
        .map(|component| Parts {
            part: Some(component.clone()),
            location: base(&clean_join(repo_path, component)),
            password: password.clone(),
            variables: variables.clone(),
            hosts: None,
            tls: tls.clone(),
        })
        .collect())
}

/// How a path in the BackupStorage becomes a location, the storage's
/// variables, and how it is reached over TLS.
type Backend = (Box<dyn Fn(&str) -> String>, BTreeMap<String, String>, Tls);

fn backend(view: &ClusterView<'_>, storage: &Value, namespace: &str) -> Result<Backend, Refusal> {
    let provider = text(storage, "/spec/storage/provider")
        .ok_or(Refusal::Unset("its BackupStorage names no provider"))?;
    let spec = storage
        .pointer(&format!("/spec/storage/{provider}"))
        .ok_or_else(|| Refusal::Lacks {
            holder: "BackupStorage".into(),
            what: format!("{provider} settings"),
        })?;
    let mut variables = BTreeMap::new();
    let keys: &[&str] = match provider {
        "s3" => &["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"],
        "azure" => &["AZURE_ACCOUNT_KEY"],
        _ => {
            return Err(Refusal::OnScheme {
                what: "BackupStorage",
                scheme: provider.to_owned(),
            });
        }
    };
    let mut ca = None;
    if let Some(secret) = text(spec, "/secretName") {
        for key in keys {
            variables.insert(
                (*key).to_owned(),
                view.secret_value(namespace, secret, key)?,
            );
        }
        ca = view.secret_value_if_any(namespace, secret, "CA_CERT_DATA")?;
    }
    let tls = tls(spec, storage, namespace, text(spec, "/secretName"), ca)?;
    let prefix = text(spec, "/prefix").unwrap_or("").to_owned();
    if provider == "azure" {
        return azure(spec, prefix, variables, tls);
    }
    let endpoint = text(spec, "/endpoint")
        .ok_or(Refusal::Unset("its s3 storage has no endpoint"))?
        .to_owned();
    let bucket = text(spec, "/bucket")
        .ok_or(Refusal::Unset("its s3 storage has no bucket"))?
        .to_owned();
    if let Some(region) = text(spec, "/region") {
        variables.insert("AWS_DEFAULT_REGION".into(), region.to_owned());
    }
    Ok((
        Box::new(move |path| {
            format!(
                "s3:{endpoint}/{}",
                clean_join(&clean_join(&bucket, &prefix), path)
            )
        }),
        variables,
        tls,
    ))
}

/// An azure BackupStorage's location (under `prefix`) and its account.
fn azure(
    spec: &Value,
    prefix: String,
    mut variables: BTreeMap<String, String>,
    tls: Tls,
) -> Result<Backend, Refusal> {
    let container = text(spec, "/container")
        .ok_or(Refusal::Unset("its azure storage has no container"))?
        .to_owned();
    let account = text(spec, "/storageAccount")
        .ok_or(Refusal::Unset("its azure storage has no storageAccount"))?;
    variables.insert("AZURE_ACCOUNT_NAME".into(), account.to_owned());
    Ok((
        Box::new(move |path| format!("azure:{container}:/{}", clean_join(&prefix, path))),
        variables,
        tls,
    ))
}

/// The TLS setting of a BackupStorage (`storage`, in `namespace`) whose
/// provider's settings are `spec`, as KubeStash hands it to restic:
/// `--insecure-tls` when `insecureTLS` is true, `--cacert` with `ca`, key
/// `CA_CERT_DATA` of its Secret `secret`.
fn tls(
    spec: &Value,
    storage: &Value,
    namespace: &str,
    secret: Option<&str>,
    ca: Option<String>,
) -> Result<Tls, Refusal> {
    let name = text(storage, "/metadata/name").unwrap_or_default();
    let insecure = (spec.get("insecureTLS").and_then(Value::as_bool) == Some(true)).then(|| {
        format!(
            "BackupStorage {}/{}'s spec.storage.s3.insecureTLS",
            escape(namespace),
            escape(name)
        )
    });
    let ca = ca.map(|pem| {
        let from = format!(
            "key CA_CERT_DATA of Secret {}/{}",
            escape(namespace),
            escape(secret.unwrap_or_default())
        );
        (from, pem.into_bytes())
    });
    super::tls(ca, insecure)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::tls::Tls;
    use crate::tls::tests::TEST_CA;

    #[test]
    fn the_storages_ca_and_insecure_tls_are_read() {
        let storage = json!({"metadata": {"name": "minio", "namespace": "stash"}});
        let spec = json!({"endpoint": "https://minio", "bucket": "b", "secretName": "s3"});
        let tls = |spec: &serde_json::Value, ca: Option<&str>| {
            super::tls(spec, &storage, "stash", Some("s3"), ca.map(str::to_owned))
        };
        assert_eq!(tls(&spec, None), Ok(Tls::Default));
        assert_eq!(
            tls(&spec, Some(TEST_CA)).expect("a CA").mode(),
            "CA from key CA_CERT_DATA of Secret stash/s3"
        );
        let mut insecure = spec.clone();
        insecure["insecureTLS"] = json!(true);
        assert_eq!(
            tls(&insecure, Some(TEST_CA)),
            Ok(Tls::Insecure {
                from: "BackupStorage stash/minio's spec.storage.s3.insecureTLS".into()
            })
        );
        let why = tls(&spec, Some("-----BEGIN CERTIFICATE-----\n"))
            .expect_err("broken")
            .to_string();
        assert!(why.contains("CA_CERT_DATA of Secret stash/s3"), "{why}");
    }
}
