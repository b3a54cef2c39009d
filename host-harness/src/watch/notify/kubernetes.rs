//! The Kubernetes sink of a discovered repository: a core/v1 Event on the
//! object it was found in (its BackupRepository, Repository, ...), where
//! `kubectl describe` shows it. Only what someone looking at that object
//! wants: a lock removed, a stale lock kept (once, as the tracker sends
//! it), checks failing and recovered.

use std::time::Duration;

use serde_json::json;

use super::event::{Event, EventKind};
use crate::kubernetes::time;
use crate::kubernetes::{Kubernetes, is_object_name};
use crate::watch::discover::Owner;

/// The longest message an Event carries here (the API's own limit for
/// events.k8s.io is 1 kB).
const MESSAGE: usize = 1024;

/// Events on one object.
pub struct KubernetesSink {
    owner: Owner,
    timeout: Duration,
}

impl KubernetesSink {
    /// Events on `owner`, each request within `timeout`.
    pub fn new(owner: Owner, timeout: Duration) -> KubernetesSink {
        KubernetesSink { owner, timeout }
    }

    /// Creates the Event for `event`; `None` when it is not one of this
    /// sink's kinds. The error says why (never a credential).
    pub fn deliver(&self, event: &Event) -> Option<Result<(), String>> {
        let (reason, kind) = match event.event {
            EventKind::LockRemoved => ("StaleLockRemoved", "Normal"),
            EventKind::StaleLockKept => ("StaleLockKept", "Warning"),
            EventKind::ChecksFailing => ("LockChecksFailing", "Warning"),
            EventKind::Recovered => ("LockChecksRecovered", "Normal"),
            _ => return None,
        };
        Some(self.create(reason, kind, &event.message))
    }

    fn create(&self, reason: &str, kind: &str, message: &str) -> Result<(), String> {
        let client = Kubernetes::shared(self.timeout).map_err(|e| e.to_string())?;
        let owner = &self.owner;
        let now = time(crate::time::now());
        let body = json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": { "generateName": format!("{}.", owner.name), "namespace": owner.namespace },
            "involvedObject": {
                "apiVersion": owner.api_version,
                "kind": owner.kind,
                "namespace": owner.namespace,
                "name": owner.name,
                "uid": owner.uid,
            },
            "reason": reason,
            "message": truncate(message),
            "type": kind,
            "source": { "component": "lockwarden" },
            "reportingComponent": "lockwarden",
            "reportingInstance": crate::evidence::hostname().unwrap_or_default(),
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        });
        if !is_object_name(&owner.namespace) {
            return Err("its namespace is not a name the API gives".into());
        }
        let path = format!("/api/v1/namespaces/{}/events", owner.namespace);
        client
            .send::<serde_json::Value>(self.timeout, "POST", &path, Some(&body))
            .map(drop)
            .map_err(|e| e.to_string())
    }
}

/// `message` cut to [`MESSAGE`] bytes at a character boundary.
fn truncate(message: &str) -> &str {
    let mut end = message.len().min(MESSAGE);
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    &message[..end]
}
