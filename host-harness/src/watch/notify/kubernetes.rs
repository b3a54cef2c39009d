//! The Kubernetes sink of a discovered repository: a core/v1 Event
//! (`k8s-openapi`'s) on the object it was found in (its BackupRepository,
//! Repository, ...), where `kubectl describe` shows it. Only what someone looking at that object
//! wants: a lock removed, a stale lock kept (once, as the tracker sends
//! it), checks failing and recovered.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Event as KubeEvent, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::event::{Event, EventKind};
use crate::kubernetes::{Connection, KubeError, is_object_name, timestamp};
use crate::watch::owner::Owner;

/// The longest message an Event carries (the API's limit, in bytes).
const MESSAGE: usize = 1024;
/// The longest name the API gives an object (a DNS subdomain).
const NAME: usize = 253;
/// The longest `reportingInstance` the API takes.
const REPORTING_INSTANCE: usize = 128;

/// Why an Event was not created (never a credential).
#[derive(Debug, thiserror::Error)]
pub enum EventError {
    /// The object's namespace is no name the API gives.
    #[error("its namespace is not a name the API gives")]
    Namespace,
    /// No Event name can be made of the object's.
    #[error("its object's name gives no Event name the API takes")]
    Name,
    /// The Event cannot be serialized.
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    /// The API refused it, or could not be reached.
    #[error(transparent)]
    Api(#[from] KubeError),
}

/// Events on one object.
pub struct KubernetesSink {
    owner: Owner,
    kubernetes: Connection,
    timeout: Duration,
}

impl KubernetesSink {
    /// Events on `owner`, posted through `kubernetes` (the client handed
    /// down), each request within `timeout`.
    pub fn new(owner: Owner, kubernetes: Connection, timeout: Duration) -> KubernetesSink {
        KubernetesSink {
            owner,
            kubernetes,
            timeout,
        }
    }

    /// Creates the Event for `event`; `None` when it is not one of this
    /// sink's kinds. The error says why (never a credential).
    pub fn deliver(&self, event: &Event) -> Option<Result<(), EventError>> {
        let (reason, kind) = match event.event {
            EventKind::LockRemoved => ("StaleLockRemoved", "Normal"),
            EventKind::StaleLockKept => ("StaleLockKept", "Warning"),
            EventKind::ChecksFailing => ("LockChecksFailing", "Warning"),
            EventKind::Recovered => ("LockChecksRecovered", "Normal"),
            _ => return None,
        };
        Some(self.create(reason, kind, event))
    }

    fn create(&self, reason: &str, kind: &str, event: &Event) -> Result<(), EventError> {
        if !is_object_name(&self.owner.namespace) {
            return Err(EventError::Namespace);
        }
        let instance = crate::evidence::hostname().unwrap_or_default();
        let body = self.body(reason, kind, event, &instance, crate::time::now())?;
        let body = serde_json::to_value(&body)?;
        let client = self.kubernetes.client()?;
        let path = format!("/api/v1/namespaces/{}/events", self.owner.namespace);
        client.send::<serde_json::Value>(self.timeout, "POST", &path, Some(&body))?;
        Ok(())
    }

    /// The Event of `event` (whose message is escaped already,
    /// [`super::Notifier`]) at `now`, from `instance`, within the API's
    /// limits: its name is the object's (cut to fit) and the event's id,
    /// as client-go names Events `<object>.<unique>` (a `generateName`
    /// ending in `.` is not a name prefix the API takes); its message at
    /// most [`MESSAGE`] bytes.
    fn body(
        &self,
        reason: &str,
        kind: &str,
        event: &Event,
        instance: &str,
        now: i64,
    ) -> Result<KubeEvent, EventError> {
        let owner = &self.owner;
        let base = cut_to(&owner.name, NAME - event.id.len() - 1).trim_end_matches(['.', '-']);
        let name = format!("{base}.{}", event.id);
        if !is_object_name(&name) {
            return Err(EventError::Name);
        }
        let mut message = event.message.clone();
        crate::text::cut(&mut message, MESSAGE - '…'.len_utf8());
        let now = Some(Time(timestamp(now)));
        Ok(KubeEvent {
            metadata: ObjectMeta {
                name: Some(name),
                namespace: Some(owner.namespace.clone()),
                ..ObjectMeta::default()
            },
            involved_object: ObjectReference {
                api_version: Some(owner.api_version.clone()),
                kind: Some(owner.kind.clone()),
                namespace: Some(owner.namespace.clone()),
                name: Some(owner.name.clone()),
                uid: owner.uid.clone(),
                ..ObjectReference::default()
            },
            reason: Some(reason.to_owned()),
            message: Some(message),
            type_: Some(kind.to_owned()),
            source: Some(EventSource {
                component: Some("lockwarden".into()),
                host: None,
            }),
            reporting_component: Some("lockwarden".into()),
            reporting_instance: Some(cut_to(instance, REPORTING_INSTANCE).to_owned()),
            first_timestamp: now.clone(),
            last_timestamp: now,
            count: Some(1),
            ..KubeEvent::default()
        })
    }
}

/// `text` cut to at most `max` bytes at a character boundary.
fn cut_to(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

impl KubernetesSink {
    /// Creates a `RepositoryNotWatched` Event saying `why` the object's
    /// repository is not watched (discovery's refusal, never a secret).
    pub fn not_watched(&self, why: &str) -> Result<(), EventError> {
        let repository = super::event::RepositoryRef {
            name: self.owner.label(),
            id: None,
            backend: None,
        };
        let mut event = Event::new(EventKind::ChecksFailing, crate::time::now(), &repository);
        event.message = crate::text::escape(why).into_owned();
        self.create("RepositoryNotWatched", "Warning", &event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::watch::notify::event::RepositoryRef;

    fn sink(name: &str) -> KubernetesSink {
        KubernetesSink::new(
            Owner {
                api_version: "volsync.backube/v1alpha1".into(),
                kind: "ReplicationSource".into(),
                namespace: "tenant-a".into(),
                name: name.into(),
                uid: None,
            },
            Connection::none(),
            Duration::from_secs(1),
        )
    }

    /// The Event as it goes on the wire.
    fn json(event: KubeEvent) -> serde_json::Value {
        serde_json::to_value(event).expect("JSON")
    }

    fn event(message: &str) -> Event {
        let mut event = Event::new(EventKind::ChecksFailing, 0, &RepositoryRef::default());
        event.message = message.into();
        event
    }

    /// The name, message and reporting instance stay within what the API
    /// takes, however long the object's name, the message or the host.
    #[test]
    fn every_field_is_within_the_api_limits() {
        let long = format!("{}-{}", "a".repeat(230), "b".repeat(22));
        let message = format!("{}é", "x".repeat(1022));
        let body = sink(&long)
            .body(
                "LockChecksFailing",
                "Warning",
                &event(&message),
                &"h".repeat(300),
                0,
            )
            .map(json)
            .expect("an Event");
        let name = body["metadata"]["name"].as_str().expect("a name");
        assert!(name.len() <= NAME && is_object_name(name), "{name}");
        let message = body["message"].as_str().expect("a message");
        assert!(
            message.len() <= MESSAGE && message.ends_with('…'),
            "{message}"
        );
        assert_eq!(body["involvedObject"]["name"], long.as_str());
        let instance = body["reportingInstance"].as_str().expect("an instance");
        assert_eq!(instance.len(), REPORTING_INSTANCE);
        // Cut just after a `-`: the name still ends a label properly.
        let dashed = format!("{}-bcd", "a".repeat(219));
        let body = sink(&dashed)
            .body("LockChecksFailing", "Warning", &event("m"), "h", 0)
            .map(json)
            .expect("an Event");
        let name = body["metadata"]["name"].as_str().expect("a name");
        assert!(name.starts_with(&format!("{}.", "a".repeat(219))), "{name}");
        assert_eq!(body["message"], "m");
    }

    /// Each Event has a name of its own, made of the object's and the
    /// event's id.
    #[test]
    fn each_event_is_named_after_its_object_and_its_id() {
        let event = event("m");
        let body = sink("data")
            .body("StaleLockRemoved", "Normal", &event, "lockwarden-0", 0)
            .map(json)
            .expect("an Event");
        assert_eq!(body["metadata"]["name"], format!("data.{}", event.id));
        assert!(body["metadata"].get("generateName").is_none());
    }

    /// The Event is written as it always was (the fields the API server
    /// and `kubectl describe` read, a `Time` in whole seconds), `apiVersion`
    /// and `kind` included; an object without a uid names none.
    #[test]
    fn the_event_is_written_as_the_api_takes_it() {
        let event = event("lock removed");
        let body = sink("data")
            .body(
                "StaleLockRemoved",
                "Normal",
                &event,
                "lockwarden-0",
                1_764_700_000_123_456_789,
            )
            .map(json)
            .expect("an Event");
        let expected = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": { "name": format!("data.{}", event.id), "namespace": "tenant-a" },
            "involvedObject": {
                "apiVersion": "volsync.backube/v1alpha1",
                "kind": "ReplicationSource",
                "namespace": "tenant-a",
                "name": "data",
            },
            "reason": "StaleLockRemoved",
            "message": "lock removed",
            "type": "Normal",
            "source": { "component": "lockwarden" },
            "reportingComponent": "lockwarden",
            "reportingInstance": "lockwarden-0",
            "firstTimestamp": "2025-12-02T18:26:40Z",
            "lastTimestamp": "2025-12-02T18:26:40Z",
            "count": 1,
        });
        assert_eq!(body, expected);
    }
}
