//! VolSync: a ReplicationSource or ReplicationDestination with a `restic`
//! mover names, in `spec.restic.repository`, a Secret of its own namespace
//! that holds the repository (`RESTIC_REPOSITORY`), its password
//! (`RESTIC_PASSWORD`) and the storage's variables, which the mover passes
//! to restic as its environment. Its mover pods are named
//! `volsync-src-<name>-…` and `volsync-dst-<name>-…`.

use std::collections::BTreeMap;

use super::super::Found;
use super::super::api::{ClusterView, text};
use super::{Parts, each, pod_suffix};

/// The pods restic runs in for VolSync.
pub(super) const HOSTS: &str = concat!("^volsync-(src|dst)-.+-", pod_suffix!());

const GROUP_VERSION: &str = "volsync.backube/v1alpha1";

/// The restic repositories of every ReplicationSource and
/// ReplicationDestination.
pub fn find(view: &ClusterView<'_>) -> Result<Vec<Found>, String> {
    let mut found = Vec::new();
    for (plural, kind) in [
        ("replicationsources", "ReplicationSource"),
        ("replicationdestinations", "ReplicationDestination"),
    ] {
        found.extend(each(view, GROUP_VERSION, plural, kind, |object, owner| {
            let secret = text(object, "/spec/restic/repository")?;
            Some(parts(view, &owner.namespace, secret))
        })?);
    }
    Ok(found)
}

fn parts(view: &ClusterView<'_>, namespace: &str, secret: &str) -> Result<Parts, String> {
    let mut variables: BTreeMap<String, String> =
        view.secret_values(namespace, secret)?.into_iter().collect();
    let location = variables
        .remove("RESTIC_REPOSITORY")
        .ok_or_else(|| format!("its Secret {secret} has no RESTIC_REPOSITORY"))?;
    let password = variables
        .remove("RESTIC_PASSWORD")
        .ok_or_else(|| format!("its Secret {secret} has no RESTIC_PASSWORD"))?;
    Ok(Parts::whole(location, password, variables, HOSTS))
}
