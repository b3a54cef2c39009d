//! Velero (1.10 to 1.18, the releases with restic repositories): each
//! `BackupRepository` of type `restic` (or none, as before 1.10) names its
//! restic repository in `spec.resticIdentifier`, exactly as Velero passes
//! it to restic. Its password is key `repository-password` of Secret
//! `velero-repo-credentials` in Velero's namespace; its storage
//! credentials come from its `BackupStorageLocation`'s `spec.credential`,
//! else from what `velero install` mounts into Velero's pods (Secret
//! `cloud-credentials`, key `cloud`): an AWS credentials file (the profile
//! `config.profile`), or for Azure a file of `NAME=value` lines holding the
//! key `config.storageAccountKeyEnvVar` names. The location's TLS is
//! what Velero hands restic: `--insecure-tls` when
//! `config.insecureSkipTLSVerify` is true, `--cacert` with the bundle of
//! `objectStorage.caCertRef` (a Secret's key in Velero's namespace) or else
//! `objectStorage.caCert`. restic runs in pods named `velero-…`,
//! `node-agent-…` and `<repository>-maintain-job-…`.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde_json::Value;

use super::super::Found;
use super::super::api::{ClusterView, ReferenceError};
use super::super::field::text;
use super::{Parts, Refusal, each, pod_suffix};
use crate::kubernetes::KubeError;
use crate::repo::backend::s3::profile_keys;
use crate::text::escape;
use crate::tls::Tls;

const GROUP_VERSION: &str = "velero.io/v1";

/// The pods restic runs in for Velero.
pub(super) const HOSTS: &str = concat!(
    "^(velero-[bcdfghjklmnpqrstvwxz2456789]{1,10}-|node-agent-(windows-)?|restic-)",
    pod_suffix!(),
    "|-maintain-job-[0-9]+-",
    pod_suffix!()
);

/// The restic repositories of every BackupRepository.
pub fn find(view: &ClusterView<'_>) -> Result<Vec<Found>, KubeError> {
    let locations = view.objects(GROUP_VERSION, "backupstoragelocations")?;
    each(
        view,
        GROUP_VERSION,
        "backuprepositories",
        "BackupRepository",
        |object, owner| {
            let kind = text(object, "/spec/repositoryType").unwrap_or("restic");
            if kind != "restic" {
                tracing::debug!(
                    "{} is a {} repository, not restic's: nothing to watch",
                    escape(&owner.label()),
                    escape(kind)
                );
            }
            (kind == "restic").then(|| parts(view, object, &owner.namespace, &locations))
        },
    )
}

/// Refuses a `resticIdentifier` on a storage discovery does not read,
/// naming its scheme, before any Secret is read for it.
fn readable(location: &str) -> Result<(), Refusal> {
    if location.starts_with("s3:") || location.starts_with("azure:") {
        return Ok(());
    }
    let scheme = location.split_once(':').map_or("", |(scheme, _)| scheme);
    Err(Refusal::Identifier {
        scheme: escape(scheme).into_owned(),
    })
}

fn parts(
    view: &ClusterView<'_>,
    object: &Value,
    namespace: &str,
    locations: &[Value],
) -> Result<Parts, Refusal> {
    let location = text(object, "/spec/resticIdentifier").ok_or(Refusal::Unset(
        "it has no spec.resticIdentifier yet (Velero has not prepared the repository)",
    ))?;
    let bsl_name = text(object, "/spec/backupStorageLocation")
        .ok_or(Refusal::Unset("it names no spec.backupStorageLocation"))?;
    let bsl = locations
        .iter()
        .find(|l| {
            text(l, "/metadata/namespace") == Some(namespace)
                && text(l, "/metadata/name") == Some(bsl_name)
        })
        .ok_or_else(|| Refusal::Gone(format!("BackupStorageLocation {bsl_name}")))?;
    readable(location)?;
    let password =
        view.secret_value(namespace, "velero-repo-credentials", "repository-password")?;
    let tls = tls(bsl, bsl_name, |secret, key| {
        view.secret_value(namespace, secret, key)
    })?;
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
    } else {
        aws_variables(bsl, &file)?
    };
    Ok(Parts::whole(location.to_owned(), password, variables, HOSTS).with_tls(tls))
}

/// The TLS setting of BackupStorageLocation `bsl` (named `name`), as Velero
/// hands it to restic: `--insecure-tls` when `spec.config.insecureSkipTLSVerify`
/// is true as Go reads a boolean, and `--cacert` with the bundle of
/// `spec.objectStorage.caCertRef` (a key of a Secret in its namespace, read
/// by `secret(name, key)`), else of `spec.objectStorage.caCert` (base64 in
/// the object).
fn tls(
    bsl: &Value,
    name: &str,
    secret: impl Fn(&str, &str) -> Result<String, ReferenceError>,
) -> Result<Tls, Refusal> {
    let field = |path: &str| format!("BackupStorageLocation {}'s {path}", escape(name));
    let insecure = text(bsl, "/spec/config/insecureSkipTLSVerify")
        .is_some_and(|value| matches!(value, "1" | "t" | "T" | "true" | "TRUE" | "True"))
        .then(|| field("spec.config.insecureSkipTLSVerify"));
    let reference = bsl
        .pointer("/spec/objectStorage/caCertRef")
        .filter(|r| !r.is_null());
    let ca = if let Some(reference) = reference {
        let (Some(secret_name), Some(key)) = (text(reference, "/name"), text(reference, "/key"))
        else {
            return Err(Refusal::NoReference(field("spec.objectStorage.caCertRef")));
        };
        let pem = secret(secret_name, key)?;
        let from = field(&format!(
            "spec.objectStorage.caCertRef (key {} of Secret {})",
            escape(key),
            escape(secret_name)
        ));
        Some((from, pem.into_bytes()))
    } else if let Some(encoded) = text(bsl, "/spec/objectStorage/caCert") {
        let from = field("spec.objectStorage.caCert");
        let pem = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map_err(|_| Refusal::NotBase64(from.clone()))?;
        Some((from, pem))
    } else {
        None
    };
    super::tls(ca, insecure)
}

/// The keys of profile `config.profile` (else `default`) of an AWS
/// credentials file, as Velero hands them to restic.
fn aws_variables(bsl: &Value, file: &str) -> Result<BTreeMap<String, String>, Refusal> {
    let profile = text(bsl, "/spec/config/profile").unwrap_or("default");
    let (id, secret, token) = profile_keys(file, profile).ok_or_else(|| Refusal::Lacks {
        holder: "credentials file".into(),
        what: format!("keys for profile {}", escape(profile)),
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
fn azure_variables(bsl: &Value, file: &str) -> Result<BTreeMap<String, String>, Refusal> {
    let account = text(bsl, "/spec/config/storageAccount").ok_or(Refusal::Unset(
        "its BackupStorageLocation has no config.storageAccount",
    ))?;
    let name = text(bsl, "/spec/config/storageAccountKeyEnvVar").ok_or(Refusal::Unset(
        "its BackupStorageLocation has no config.storageAccountKeyEnvVar",
    ))?;
    let key = file
        .lines()
        .filter_map(|line| line.trim().split_once('='))
        .find(|(k, _)| k.trim() == name)
        .map(|(_, v)| v.trim().trim_matches('"').to_owned())
        .ok_or_else(|| Refusal::Lacks {
            holder: "credentials file".into(),
            what: escape(name).into_owned(),
        })?;
    Ok(BTreeMap::from([
        ("AZURE_ACCOUNT_NAME".to_owned(), account.to_owned()),
        ("AZURE_ACCOUNT_KEY".to_owned(), key),
    ]))
}

#[cfg(test)]
mod tests {
    use base64::Engine as _;
    use serde_json::{Value, json};

    use super::super::super::api::{Named, ReferenceError};

    #[test]
    fn a_repository_on_another_storage_is_refused_by_its_scheme() {
        assert_eq!(super::readable("s3:https://minio/b/restic/ns"), Ok(()));
        assert_eq!(super::readable("azure:c:/restic/ns"), Ok(()));
        let gs = super::readable("gs:bucket:/restic/ns")
            .expect_err("refused")
            .to_string();
        assert!(gs.contains("a gs: repository") && gs.contains("GCS credentials are a file"));
        let custom = super::readable("custom:x/y")
            .expect_err("refused")
            .to_string();
        assert!(
            custom.contains("a custom: repository") && !custom.contains("GCS"),
            "{custom}"
        );
    }

    use crate::tls::Tls;
    use crate::tls::tests::TEST_CA;

    fn bsl(spec: Value) -> Value {
        json!({"metadata": {"name": "default", "namespace": "velero"}, "spec": spec})
    }

    /// The TLS setting of a location with `spec`, whose Secret `ca`
    /// holds the test CA at key `ca.crt`.
    fn tls(spec: Value) -> Result<Tls, super::Refusal> {
        super::tls(&bsl(spec), "default", |secret, key| match (secret, key) {
            ("ca", "ca.crt") => Ok(TEST_CA.to_owned()),
            _ => Err(ReferenceError::NoKey {
                key: key.to_owned(),
                object: Named {
                    word: "Secret",
                    namespace: "velero".into(),
                    name: secret.to_owned(),
                },
            }),
        })
    }

    #[test]
    fn a_locations_ca_and_insecure_setting_are_read_as_velero_hands_them_to_restic() {
        let encoded = base64::engine::general_purpose::STANDARD.encode(TEST_CA);
        assert_eq!(tls(json!({})), Ok(Tls::Default));
        for no in ["false", "yes", "0", ""] {
            let spec = json!({"config": {"insecureSkipTLSVerify": no}});
            assert_eq!(tls(spec), Ok(Tls::Default), "{no}");
        }
        for yes in ["true", "1", "TRUE", "t"] {
            let spec = json!({"config": {"insecureSkipTLSVerify": yes}});
            let Ok(Tls::Insecure { from }) = tls(spec) else {
                panic!("{yes} is true")
            };
            assert_eq!(
                from,
                "BackupStorageLocation default's spec.config.insecureSkipTLSVerify"
            );
        }
        let inline = tls(json!({"objectStorage": {"bucket": "b", "caCert": encoded}}));
        assert_eq!(
            inline.expect("a CA").mode(),
            "CA from BackupStorageLocation default's spec.objectStorage.caCert"
        );
        // The reference wins, as in Velero.
        let referenced = tls(json!({"objectStorage": {
            "caCert": "bm90IGEgY2VydA==",
            "caCertRef": {"name": "ca", "key": "ca.crt"}}}));
        assert_eq!(
            referenced.expect("a CA").mode(),
            "CA from BackupStorageLocation default's spec.objectStorage.caCertRef (key ca.crt \
             of Secret ca)"
        );
        let refusals = [
            (json!({"objectStorage": {"caCert": "%%%"}}), "is not base64"),
            (
                json!({"objectStorage": {"caCert": "bm90IGEgY2VydA=="}}),
                "spec.objectStorage.caCert holds no PEM certificate",
            ),
            (
                json!({"objectStorage": {"caCertRef": {"name": "ca"}}}),
                "caCertRef names no Secret and key",
            ),
            (
                json!({"objectStorage": {"caCertRef": {"name": "gone", "key": "ca.crt"}}}),
                "Secret velero/gone does not exist",
            ),
        ];
        for (spec, why) in refusals {
            let said = tls(spec).expect_err(why).to_string();
            assert!(said.contains(why), "{said}");
        }
    }
}
