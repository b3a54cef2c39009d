//! The nodes of the Kubernetes API, as the fence of a pod that vanished
//! while it may have run: a node that no longer exists, or that reported
//! (Ready, with a heartbeat) after the pod vanished and its grace period
//! ran out, no longer runs it ([`super::inventory`] says when each fact
//! counts).

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::Value;

use crate::time::parse_rfc3339;

/// What one node last said of itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeFact {
    /// Whether its `Ready` condition is `True`.
    pub ready: bool,
    /// Its `Ready` condition's `lastHeartbeatTime` (ns since the epoch, the
    /// kubelet's clock), if given.
    pub heartbeat: Option<i64>,
    /// Its `Ready` condition's `lastTransitionTime`: since when it is
    /// Ready (back in touch with the API), if given.
    pub ready_since: Option<i64>,
}

/// The nodes of one listing, by name, and when it was taken.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Nodes {
    by_name: HashMap<String, NodeFact>,
    /// When the listing began (ns, lockwarden's clock): no heartbeat can
    /// be later than that (beyond the clocks' tolerance) but from a clock
    /// ahead.
    pub listed_at: i64,
}

#[derive(Deserialize)]
struct Node {
    metadata: Metadata,
    #[serde(default)]
    status: Status,
}

#[derive(Deserialize)]
struct Metadata {
    name: String,
}

#[derive(Deserialize, Default)]
struct Status {
    #[serde(default)]
    conditions: Vec<Condition>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Condition {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    status: String,
    last_heartbeat_time: Option<String>,
    last_transition_time: Option<String>,
}

/// Why the nodes of a listing cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// An item is not a node.
    #[error("a node: {0}")]
    Node(serde_json::Error),
}

impl Nodes {
    /// The nodes of a list's `items`, listed at `listed_at`. A heartbeat
    /// that is no time counts as none (the node then fences nothing).
    pub fn from_items(items: Vec<Value>, listed_at: i64) -> Result<Nodes, NodeError> {
        let mut by_name = HashMap::new();
        for item in items {
            let node: Node = serde_json::from_value(item).map_err(NodeError::Node)?;
            let ready = node.status.conditions.iter().find(|c| c.kind == "Ready");
            let time = |t: Option<&String>| t.and_then(|t| parse_rfc3339(t).ok());
            let fact = NodeFact {
                ready: ready.is_some_and(|c| c.status == "True"),
                heartbeat: time(ready.and_then(|c| c.last_heartbeat_time.as_ref())),
                ready_since: time(ready.and_then(|c| c.last_transition_time.as_ref())),
            };
            by_name.insert(node.metadata.name.to_ascii_lowercase(), fact);
        }
        Ok(Nodes { by_name, listed_at })
    }

    /// What node `name` said, if it exists.
    pub fn get(&self, name: &str) -> Option<&NodeFact> {
        self.by_name.get(&name.to_ascii_lowercase())
    }

    /// Whether `hostname` may be a node's own hostname (what restic in a
    /// pod on the node's network writes): a node's name, or its first
    /// label (a node named by its FQDN), whatever the case.
    pub fn is_node(&self, hostname: &str) -> bool {
        let hostname = hostname.to_ascii_lowercase();
        let short = hostname.split('.').next().unwrap_or_default();
        (self.by_name.keys()).any(|name| *name == hostname || name.split('.').next() == Some(short))
    }

    /// A node that is not Ready, if any: a pod lockwarden never saw may
    /// have vanished from it and still run there.
    pub fn not_ready(&self) -> Option<&str> {
        let mut names: Vec<&String> = (self.by_name.iter())
            .filter(|(_, fact)| !fact.ready)
            .map(|(name, _)| name)
            .collect();
        names.sort();
        names.first().map(|name| name.as_str())
    }

    /// Sets when node `name` became Ready (for tests).
    #[cfg(test)]
    pub fn set_ready_since(&mut self, name: &str, since: i64) {
        if let Some(fact) = self.by_name.get_mut(name) {
            fact.ready_since = Some(since);
        }
    }

    /// Nodes from `(name, ready, heartbeat)`, Ready since the epoch and
    /// listed at `i64::MAX` (for tests).
    #[cfg(test)]
    pub fn of(nodes: &[(&str, bool, Option<i64>)]) -> Nodes {
        let by_name = nodes
            .iter()
            .map(|(name, ready, heartbeat)| {
                let fact = NodeFact {
                    ready: *ready,
                    heartbeat: *heartbeat,
                    ready_since: Some(0),
                };
                (name.to_string(), fact)
            })
            .collect();
        Nodes {
            by_name,
            listed_at: i64::MAX / 2,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_nodes_readiness_and_heartbeat_come_from_its_ready_condition() {
        let items = vec![
            json!({"metadata": {"name": "a"}, "status": {"conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-12-01T10:00:00Z",
                 "lastTransitionTime": "2026-12-01T09:00:00Z"}]}}),
            json!({"metadata": {"name": "b"}, "status": {"conditions": [
                {"type": "Ready", "status": "Unknown", "lastHeartbeatTime": "noon"}]}}),
            json!({"metadata": {"name": "c"}}),
        ];
        let nodes = Nodes::from_items(items, 0).expect("nodes");
        let a = nodes.get("A").expect("a");
        assert!(a.ready);
        assert_eq!(a.heartbeat, parse_rfc3339("2026-12-01T10:00:00Z").ok());
        assert_eq!(a.ready_since, parse_rfc3339("2026-12-01T09:00:00Z").ok());
        assert_eq!(
            nodes.get("b"),
            Some(&NodeFact {
                ready: false,
                heartbeat: None,
                ready_since: None,
            })
        );
        assert_eq!(nodes.not_ready(), Some("b"));
        assert_eq!(nodes.get("d"), None);
        assert!(Nodes::from_items(vec![json!(7)], 0).is_err());
        let fqdn = Nodes::of(&[("ip-10-0-0-1.ec2.internal", true, None)]);
        assert!(fqdn.is_node("IP-10-0-0-1") && fqdn.is_node("ip-10-0-0-1.ec2.internal"));
        assert!(!fqdn.is_node("backup-x"));
    }
}
