//! Pods listed from the API, as the host inventory
//! ([`crate::evidence::InventorySource::Kubernetes`], shared by the
//! checks through `evidence/shared_pods.rs`): one namespace's pods, or
//! every namespace's, read by the rules of `kubectl get pods -A -o json`'s
//! PodList ([`crate::evidence::inventory`]). A refusal (RBAC), an error or
//! a truncated listing fails the whole reading, so that it proves no
//! absence; a namespace whose pods the list could not hold (too many, too
//! large) is named in the listing's `failed`, and fails only the
//! inventories it concerns.

use std::time::Duration;

use super::{Connection, KubeError, Listing, is_object_name};

/// Every pod of `namespace` (of every namespace if `None`) the service
/// account may list, now, and the namespaces whose pods could not be held,
/// through the client handed down (`kubernetes`); each request within
/// `timeout`. The error says why (no client, a namespace that is no name,
/// or the API's answer) and holds no credential.
pub fn list_pods(
    kubernetes: &Connection,
    namespace: Option<&str>,
    timeout: Duration,
) -> Result<Listing, KubeError> {
    let path = match namespace {
        None => "/api/v1/pods".to_owned(),
        Some(ns) if is_object_name(ns) => format!("/api/v1/namespaces/{ns}/pods"),
        Some(ns) => {
            return Err(KubeError::Failed {
                what: format!("listing the pods of namespace {}", crate::text::escape(ns)),
                cause: "that is not a namespace's name".into(),
            });
        }
    };
    kubernetes.client()?.list(timeout, &path)
}

/// Every node, now, through the client handed down, each request within
/// `timeout`: the fence of a pod that vanished while it may have run
/// ([`crate::evidence::inventory`]).
pub fn list_nodes(kubernetes: &Connection, timeout: Duration) -> Result<Listing, KubeError> {
    kubernetes.client()?.list(timeout, "/api/v1/nodes")
}
