//! Pods listed from the API, as the host inventory
//! ([`crate::evidence::InventorySource::Kubernetes`], shared by the
//! checks through `evidence/shared_pods.rs`): the same PodList
//! `kubectl get pods -A -o json` prints, read by the same rules
//! ([`crate::evidence::inventory`]). A refusal (RBAC), an error or a
//! truncated listing fails the whole reading, so that it proves no absence.

use std::time::Duration;

use serde_json::{Value, json};

use super::Kubernetes;

/// Every pod the service account may list, in every namespace, now, as a
/// PodList's JSON text; each request within `timeout`. The error says why
/// and holds no credential.
pub fn list_pods(timeout: Duration) -> Result<String, String> {
    let client = Kubernetes::shared(timeout).map_err(|e| e.to_string())?;
    let items = client
        .list(timeout, "/api/v1/pods")
        .map_err(|e| e.to_string())?;
    Ok(json!({ "items": Value::Array(items) }).to_string())
}
