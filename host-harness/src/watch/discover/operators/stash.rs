//! Stash: each `Repository` (stash.appscode.com/v1alpha1) is one restic
//! repository, on the backend `spec.backend` names (`s3:<endpoint>/<bucket
//! and prefix>`, `azure:<container>:/<prefix>`, `gs:<bucket>:/<prefix>`),
//! with its password and the storage's keys in Secret
//! `spec.backend.storageSecretName` of its namespace, each key the name of
//! the variable restic gets (`RESTIC_PASSWORD`, `AWS_ACCESS_KEY_ID`, ...),
//! and `AWS_DEFAULT_REGION` from `s3.region`. The Secret's `CA_CERT_DATA`,
//! when there is one, is the storage's CA bundle (Stash writes it to a file
//! for restic's `--cacert`), and `s3.insecureTLS` turns verification off
//! (`--insecure-tls`). A `local` backend is a path
//! inside the backup pod, which lockwarden cannot reach. restic runs in
//! the workload's own pods (the `stash` sidecar), whose names follow no
//! pattern, or in jobs named `stash-backup-…` and `stash-restore-…`.

use std::collections::BTreeMap;

use serde_json::Value;

use super::super::Found;
use super::super::api::ClusterView;
use super::super::field::text;
use super::{Parts, Refusal, clean_join, each, pod_suffix};
use crate::kubernetes::KubeError;
use crate::text::escape;
use crate::tls::Tls;

/// The pods restic runs in for Stash.
pub(super) const HOSTS: &str = concat!("^stash-(backup|restore)-.+-", pod_suffix!());

const GROUP_VERSION: &str = "stash.appscode.com/v1alpha1";

/// The repositories of every Stash Repository.
pub fn find(view: &ClusterView<'_>) -> Result<Vec<Found>, KubeError> {
    each(
        view,
        GROUP_VERSION,
        "repositories",
        "Repository",
        |object, owner| Some(parts(view, object, &owner.namespace)),
    )
}

fn parts(view: &ClusterView<'_>, object: &Value, namespace: &str) -> Result<Parts, Refusal> {
    let backend = object
        .pointer("/spec/backend")
        .ok_or(Refusal::Unset("it has no spec.backend"))?;
    let secret = text(backend, "/storageSecretName")
        .ok_or(Refusal::Unset("its backend names no storageSecretName"))?;
    let mut variables: BTreeMap<String, String> =
        view.secret_values(namespace, secret)?.into_iter().collect();
    let password = variables
        .remove("RESTIC_PASSWORD")
        .ok_or_else(|| Refusal::Lacks {
            holder: format!("Secret {secret}"),
            what: "RESTIC_PASSWORD".into(),
        })?;
    let tls = tls(backend, namespace, secret, &mut variables)?;
    let prefix = |kind: &str| text(backend, &format!("/{kind}/prefix")).unwrap_or("");
    let location = if let Some(bucket) = text(backend, "/s3/bucket") {
        let endpoint = text(backend, "/s3/endpoint")
            .ok_or(Refusal::Unset("its s3 backend has no endpoint"))?;
        if let Some(region) = text(backend, "/s3/region") {
            variables.insert("AWS_DEFAULT_REGION".into(), region.to_owned());
        }
        format!("s3:{endpoint}/{}", s3_path(object, bucket, prefix("s3")))
    } else if let Some(container) = text(backend, "/azure/container") {
        format!("azure:{container}:/{}", clean_join("", prefix("azure")))
    } else if let Some(bucket) = text(backend, "/gcs/bucket") {
        format!("gs:{bucket}:/{}", clean_join("", prefix("gcs")))
    } else if backend.get("local").is_some() {
        return Err(Refusal::Unread(
            "its local backend is a path inside the backup pod, which lockwarden cannot reach",
        ));
    } else {
        return Err(Refusal::Unread(
            "only its s3, azure and gcs backends are read",
        ));
    };
    Ok(Parts::whole(location, password, variables, HOSTS).with_tls(tls))
}

/// The path after an S3 endpoint: `bucket/prefix`, as Stash joins them;
/// but a Repository that Stash 0.8 made for a legacy `Restic` object (it
/// labels it `restic: <name>`) holds the bucket at the head of its prefix:
/// its sidecar joined bucket, prefix and workload into restic's
/// repository path and wrote that path back as the prefix.
fn s3_path(object: &Value, bucket: &str, prefix: &str) -> String {
    let legacy = object.pointer("/metadata/labels/restic").is_some();
    let path = clean_join("", prefix);
    let holds_bucket = path == bucket || path.starts_with(&format!("{bucket}/"));
    if legacy && holds_bucket {
        path
    } else {
        clean_join(bucket, prefix)
    }
}

/// The TLS setting of a Repository's `backend`, as Stash hands it to
/// restic: `--insecure-tls` when `s3.insecureTLS` is true, `--cacert` with
/// `CA_CERT_DATA` of its storage Secret `secret` in `namespace` (taken out
/// of the Secret's `variables`).
fn tls(
    backend: &Value,
    namespace: &str,
    secret: &str,
    variables: &mut BTreeMap<String, String>,
) -> Result<Tls, Refusal> {
    let insecure = (backend.pointer("/s3/insecureTLS").and_then(Value::as_bool) == Some(true))
        .then(|| "spec.backend.s3.insecureTLS".to_owned());
    let ca = variables.remove("CA_CERT_DATA").map(|pem| {
        let from = format!(
            "key CA_CERT_DATA of Secret {}/{}",
            escape(namespace),
            escape(secret)
        );
        (from, pem.into_bytes())
    });
    super::tls(ca, insecure)
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

    #[test]
    fn a_legacy_repositorys_prefix_holds_its_bucket_once() {
        use serde_json::json;
        let legacy = json!({"metadata": {"labels": {"restic": "stash-demo"}}});
        let current = json!({"metadata": {"labels": {"app": "x"}}});
        let made = "stash-qa/demo/deployment/stash-demo";
        assert_eq!(super::s3_path(&legacy, "stash-qa", made), made);
        assert_eq!(
            super::s3_path(&current, "stash-qa", made),
            "stash-qa/stash-qa/demo/deployment/stash-demo",
            "only Stash 0.8's own Repositories hold the bucket"
        );
        assert_eq!(
            super::s3_path(&legacy, "stash-qa", "demo/deployment/x"),
            "stash-qa/demo/deployment/x",
            "a legacy prefix without the bucket is joined as usual"
        );
        assert_eq!(
            super::s3_path(&legacy, "stash", "stash-qa/demo"),
            "stash/stash-qa/demo",
            "the bucket is a whole segment, not a head of one"
        );
    }
}

#[cfg(test)]
mod tls_tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use crate::tls::Tls;
    use crate::tls::tests::TEST_CA;

    #[test]
    fn the_secrets_ca_and_the_backends_insecure_tls_are_read() {
        let mut variables = BTreeMap::from([
            ("AWS_ACCESS_KEY_ID".to_owned(), "id".to_owned()),
            ("CA_CERT_DATA".to_owned(), TEST_CA.to_owned()),
        ]);
        let backend = json!({"s3": {"endpoint": "https://minio", "bucket": "b"}});
        let tls = super::tls(&backend, "app", "s3-secret", &mut variables).expect("a CA");
        assert_eq!(
            tls.mode(),
            "CA from key CA_CERT_DATA of Secret app/s3-secret"
        );
        assert!(!variables.contains_key("CA_CERT_DATA"), "not a variable");
        assert_eq!(
            super::tls(&backend, "app", "s3-secret", &mut variables),
            Ok(Tls::Default)
        );
        let insecure =
            json!({"s3": {"endpoint": "https://minio", "bucket": "b", "insecureTLS": true}});
        assert_eq!(
            super::tls(&insecure, "app", "s3-secret", &mut variables),
            Ok(Tls::Insecure {
                from: "spec.backend.s3.insecureTLS".into()
            })
        );
        variables.insert("CA_CERT_DATA".into(), "not a certificate".into());
        let why = super::tls(&backend, "app", "s3-secret", &mut variables)
            .expect_err("no CA")
            .to_string();
        assert!(
            why.starts_with("its key CA_CERT_DATA of Secret app/s3-secret holds no PEM"),
            "{why}"
        );
    }
}
