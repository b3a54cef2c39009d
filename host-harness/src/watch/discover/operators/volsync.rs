//! VolSync: a ReplicationSource or ReplicationDestination with a `restic`
//! mover names, in `spec.restic.repository`, a Secret of its own namespace
//! that holds the repository (`RESTIC_REPOSITORY`), its password
//! (`RESTIC_PASSWORD`) and the storage's variables, which the mover passes
//! to restic as its environment. Its `spec.restic.customCA` names the
//! storage's CA bundle, key `key` of Secret `secretName` or else of
//! ConfigMap `configMapName` in its namespace, which the mover mounts for
//! restic's `--cacert` (a `RESTIC_CACERT` in the Secret is not passed to
//! restic, nor read here). Its mover pods are named
//! `volsync-src-<name>-…` and `volsync-dst-<name>-…`.

use std::collections::BTreeMap;

use serde_json::Value;

use super::super::Found;
use super::super::api::{ClusterView, ReferenceError};
use super::super::field::text;
use super::{Parts, Refusal, each, pod_suffix};
use crate::kubernetes::KubeError;
use crate::text::escape;
use crate::tls::Tls;

/// The pods restic runs in for VolSync.
pub(super) const HOSTS: &str = concat!("^volsync-(src|dst)-.+-", pod_suffix!());

const GROUP_VERSION: &str = "volsync.backube/v1alpha1";

/// The restic repositories of every ReplicationSource and
/// ReplicationDestination.
pub fn find(view: &ClusterView<'_>) -> Result<Vec<Found>, KubeError> {
    let mut found = Vec::new();
    for (plural, kind) in [
        ("replicationsources", "ReplicationSource"),
        ("replicationdestinations", "ReplicationDestination"),
    ] {
        found.extend(each(view, GROUP_VERSION, plural, kind, |object, owner| {
            let secret = text(object, "/spec/restic/repository")?;
            Some(parts(view, object, &owner.namespace, secret))
        })?);
    }
    Ok(found)
}

fn parts(
    view: &ClusterView<'_>,
    object: &Value,
    namespace: &str,
    secret: &str,
) -> Result<Parts, Refusal> {
    let mut variables: BTreeMap<String, String> =
        view.secret_values(namespace, secret)?.into_iter().collect();
    let location = variables
        .remove("RESTIC_REPOSITORY")
        .ok_or_else(|| Refusal::Lacks {
            holder: format!("Secret {secret}"),
            what: "RESTIC_REPOSITORY".into(),
        })?;
    let password = variables
        .remove("RESTIC_PASSWORD")
        .ok_or_else(|| Refusal::Lacks {
            holder: format!("Secret {secret}"),
            what: "RESTIC_PASSWORD".into(),
        })?;
    let tls = tls(
        object,
        namespace,
        |name, key| view.secret_value(namespace, name, key),
        |name, key| view.config_map_value(namespace, name, key),
    )?;
    Ok(Parts::whole(location, password, variables, HOSTS).with_tls(tls))
}

/// The TLS setting of a VolSync object, as VolSync hands it to restic: the
/// CA bundle `spec.restic.customCA` names (none without a `key`), read from
/// a Secret of its namespace (`secret(name, key)`) or else a ConfigMap
/// (`config_map(name, key)`). VolSync has no setting that turns
/// verification off.
fn tls(
    object: &Value,
    namespace: &str,
    secret: impl Fn(&str, &str) -> Result<String, ReferenceError>,
    config_map: impl Fn(&str, &str) -> Result<String, ReferenceError>,
) -> Result<Tls, Refusal> {
    let Some(custom) = object.pointer("/spec/restic/customCA") else {
        return Ok(Tls::Default);
    };
    let Some(key) = text(custom, "/key") else {
        return Ok(Tls::Default);
    };
    let from = |kind: &str, name: &str| {
        format!(
            "spec.restic.customCA (key {} of {kind} {}/{})",
            escape(key),
            escape(namespace),
            escape(name)
        )
    };
    let ca = if let Some(name) = text(custom, "/secretName") {
        (from("Secret", name), secret(name, key)?)
    } else if let Some(name) = text(custom, "/configMapName") {
        (from("ConfigMap", name), config_map(name, key)?)
    } else {
        return Ok(Tls::Default);
    };
    super::tls(Some((ca.0, ca.1.into_bytes())), None)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::super::api::{Named, ReferenceError};
    use crate::tls::Tls;
    use crate::tls::tests::TEST_CA;

    /// The TLS setting of an object whose `spec.restic.customCA` is
    /// `custom`, where Secret `ca` and ConfigMap `ca-map` hold the test CA
    /// at key `ca.crt`.
    fn tls(custom: Value) -> Result<Tls, super::Refusal> {
        let object = json!({"spec": {"restic": {"repository": "r", "customCA": custom}}});
        let read = |kind: &'static str, held: &'static str| {
            move |name: &str, key: &str| {
                if (name, key) == (held, "ca.crt") {
                    Ok(TEST_CA.to_owned())
                } else {
                    Err(ReferenceError::NoKey {
                        key: key.to_owned(),
                        object: Named {
                            word: kind,
                            namespace: "app".into(),
                            name: name.to_owned(),
                        },
                    })
                }
            }
        };
        super::tls(
            &object,
            "app",
            read("Secret", "ca"),
            read("ConfigMap", "ca-map"),
        )
    }

    #[test]
    fn a_custom_ca_is_read_from_the_secret_or_the_config_map_it_names() {
        assert_eq!(
            super::tls(
                &json!({"spec": {"restic": {}}}),
                "app",
                |_: &str, _: &str| unreachable!(),
                |_: &str, _: &str| unreachable!()
            ),
            Ok(Tls::Default)
        );
        // Without a key VolSync uses no CA.
        assert_eq!(tls(json!({"secretName": "ca"})), Ok(Tls::Default));
        assert_eq!(
            tls(json!({"secretName": "ca", "key": "ca.crt"}))
                .expect("a CA")
                .mode(),
            "CA from spec.restic.customCA (key ca.crt of Secret app/ca)"
        );
        assert_eq!(
            tls(json!({"configMapName": "ca-map", "key": "ca.crt"}))
                .expect("a CA")
                .mode(),
            "CA from spec.restic.customCA (key ca.crt of ConfigMap app/ca-map)"
        );
        // The Secret wins, as in VolSync.
        let why = tls(json!({"secretName": "gone", "configMapName": "ca-map", "key": "ca.crt"}))
            .expect_err("the Secret is read");
        assert_eq!(
            why.to_string(),
            "key ca.crt of Secret app/gone does not exist"
        );
    }
}
