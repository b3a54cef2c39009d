//! Pods listed from the API, as the host inventory
//! ([`crate::evidence::InventorySource::Kubernetes`], shared by the
//! checks through `evidence/shared_pods.rs`): every namespace's pods, read
//! by the rules of `kubectl get pods -A -o json`'s PodList
//! ([`crate::evidence::inventory`]). A refusal (RBAC), an error or a
//! truncated listing fails the whole reading, so that it proves no absence;
//! a namespace whose pods the list could not hold (too many, too large) is
//! named in the listing's `failed`, and fails only the inventories it
//! concerns.

use std::time::Duration;

use super::{Connection, KubeError, Listing};

/// Every pod the service account may list, in every namespace, now, and
/// the namespaces whose pods could not be held, through the client handed
/// down (`kubernetes`); each request within `timeout`. The error says why
/// (no client, or the API's answer) and holds no credential.
pub fn list_pods(kubernetes: &Connection, timeout: Duration) -> Result<Listing, KubeError> {
    kubernetes.client()?.list(timeout, "/api/v1/pods")
}
