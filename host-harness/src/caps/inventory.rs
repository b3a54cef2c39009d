//! Host inventory: which hosts (Kubernetes pods, usually) exist, for the
//! `liveness.host` question. Read from a file or a command at each check, in
//! either the PodList JSON that `kubectl get pods -A -o json` prints or a
//! plain list `[{"name", "started", "state"}]`.
//!
//! The inventory speaks only for hostnames matching `--inventory-hosts`:
//! - a matching hostname absent from the inventory is `dead`;
//! - a pod that Succeeded or Failed is `dead`;
//! - a pod started after the lock was written is `dead` (it was recreated),
//!   and so is one whose containers all started after it (restarted);
//! - a running pod started before the lock is `unknown`: the pod lives, the
//!   process that wrote the lock may not;
//! - any other hostname, or an inventory that could not be read, is
//!   `unknown`, never a reason to remove.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use regex::Regex;
use serde::Deserialize;

use crate::contract::Liveness;
use crate::time::{format_rfc3339, parse_rfc3339};

/// Where the inventory comes from.
#[derive(Debug, Clone)]
pub enum InventorySource {
    /// A JSON file, read at each check.
    File(PathBuf),
    /// A shell command printing JSON, run at each check.
    Command(String),
}

/// What the inventory says about one host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRecord {
    /// `running`, `succeeded`, `failed`, `pending` or `unknown`.
    pub state: String,
    /// When the host (pod) started, ns since the epoch.
    pub started: Option<i64>,
    /// The earliest start of its running containers, if known.
    pub containers_started: Option<i64>,
}

/// One reading of the inventory, ready to answer `host` questions.
#[derive(Debug)]
pub struct Inventory {
    hosts: Regex,
    /// The hosts, or why they could not be read.
    reading: Result<HashMap<String, HostRecord>, String>,
}

impl Inventory {
    /// Reads `source` now. A failure is kept and turns every answer into
    /// `unknown`; `problem()` reports it.
    pub fn read(source: &InventorySource, hosts: Regex) -> Inventory {
        let text = match source {
            InventorySource::File(path) => std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read hosts file {}: {e}", path.display())),
            InventorySource::Command(command) => run(command),
        };
        Inventory {
            hosts,
            reading: text.and_then(|t| parse(&t)),
        }
    }

    /// An inventory from JSON text (for tests and recorded inputs).
    pub fn from_json(text: &str, hosts: Regex) -> Inventory {
        Inventory {
            hosts,
            reading: parse(text),
        }
    }

    /// Why the inventory could not be read, if it could not.
    pub fn problem(&self) -> Option<&str> {
        self.reading.as_ref().err().map(String::as_str)
    }

    /// The answer to `liveness.host(hostname, since)`.
    pub fn host(&self, hostname: &str, since: i64) -> Liveness {
        if !self.hosts.is_match(hostname) {
            return Liveness::Unknown(format!(
                "host {hostname} is not one the inventory covers ({})",
                self.hosts.as_str()
            ));
        }
        let hosts = match &self.reading {
            Ok(hosts) => hosts,
            Err(problem) => {
                return Liveness::Unknown(format!("the host inventory failed: {problem}"));
            }
        };
        let Some(record) = hosts.get(hostname) else {
            return Liveness::Dead(format!("pod {hostname} no longer exists"));
        };
        if matches!(record.state.as_str(), "succeeded" | "failed") {
            return Liveness::Dead(format!("pod {hostname} has {}", record.state));
        }
        if let Some(started) = record.started.filter(|s| *s > since) {
            return Liveness::Dead(format!(
                "pod {hostname} started at {}, after the lock was written",
                format_rfc3339(started)
            ));
        }
        if let Some(started) = record.containers_started.filter(|s| *s > since) {
            return Liveness::Dead(format!(
                "every container of pod {hostname} restarted since the lock was written (the earliest at {})",
                format_rfc3339(started)
            ));
        }
        Liveness::Unknown(format!(
            "pod {hostname} is {}, but whether the process that wrote the lock runs is unknown",
            record.state
        ))
    }
}

fn run(command: &str) -> Result<String, String> {
    let output = Command::new("sh")
        .args(["-c", command])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run hosts command: {e}"))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(format!(
            "hosts command failed ({}): {}",
            output.status,
            stderr.lines().next().unwrap_or("").trim()
        ));
    }
    String::from_utf8(output.stdout)
        .map_err(|_| "hosts command printed something that is not UTF-8".into())
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Document {
    PodList { items: Vec<Pod> },
    Plain(Vec<PlainHost>),
}

#[derive(Deserialize)]
struct Pod {
    metadata: PodMetadata,
    #[serde(default)]
    spec: PodSpec,
    #[serde(default)]
    status: PodStatus,
}

#[derive(Deserialize)]
struct PodMetadata {
    name: String,
}

#[derive(Deserialize, Default)]
struct PodSpec {
    hostname: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct PodStatus {
    phase: Option<String>,
    start_time: Option<String>,
    #[serde(default)]
    container_statuses: Vec<ContainerStatus>,
}

#[derive(Deserialize)]
struct ContainerStatus {
    #[serde(default)]
    state: ContainerState,
}

#[derive(Deserialize, Default)]
struct ContainerState {
    running: Option<Running>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Running {
    started_at: Option<String>,
}

#[derive(Deserialize)]
struct PlainHost {
    name: String,
    started: Option<String>,
    state: String,
}

fn time(field: &str, text: Option<&str>) -> Result<Option<i64>, String> {
    text.map(parse_rfc3339)
        .transpose()
        .map_err(|e| format!("{field}: {e}"))
}

/// Parses either format into hostname -> record.
pub fn parse(text: &str) -> Result<HashMap<String, HostRecord>, String> {
    let document: Document = serde_json::from_str(text).map_err(|e| {
        format!("the inventory is neither a Kubernetes PodList nor a list of {{name, started, state}}: {e}")
    })?;
    let mut hosts = HashMap::new();
    match document {
        Document::PodList { items } => {
            for pod in items {
                let container_starts: Vec<Option<i64>> = pod
                    .status
                    .container_statuses
                    .iter()
                    .map(|c| {
                        c.state
                            .running
                            .as_ref()
                            .and_then(|r| r.started_at.as_deref())
                    })
                    .map(|t| time("containerStatuses.state.running.startedAt", t))
                    .collect::<Result<_, _>>()?;
                // Only when every container runs with a known start is "all
                // restarted" meaningful.
                let containers_started = if container_starts.is_empty() {
                    None
                } else {
                    container_starts
                        .iter()
                        .copied()
                        .collect::<Option<Vec<i64>>>()
                        .and_then(|v| v.into_iter().min())
                };
                let record = HostRecord {
                    state: pod
                        .status
                        .phase
                        .as_deref()
                        .unwrap_or("unknown")
                        .to_ascii_lowercase(),
                    started: time("status.startTime", pod.status.start_time.as_deref())?,
                    containers_started,
                };
                if let Some(h) = pod.spec.hostname.filter(|h| *h != pod.metadata.name) {
                    hosts.insert(h, record.clone());
                }
                hosts.insert(pod.metadata.name, record);
            }
        }
        Document::Plain(list) => {
            for host in list {
                let state = host.state.to_ascii_lowercase();
                if !matches!(state.as_str(), "running" | "succeeded" | "failed") {
                    return Err(format!(
                        "host {}: state `{}` is not running, succeeded or failed",
                        host.name, host.state
                    ));
                }
                let record = HostRecord {
                    state,
                    started: time("started", host.started.as_deref())?,
                    containers_started: None,
                };
                hosts.insert(host.name, record);
            }
        }
    }
    Ok(hosts)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCK: &str = "2026-11-30T12:00:00Z";

    fn kind(l: &Liveness) -> &'static str {
        match l {
            Liveness::Alive(_) => "alive",
            Liveness::Dead(_) => "dead",
            Liveness::Unknown(_) => "unknown",
        }
    }

    #[test]
    fn plain_list_semantics() {
        let inv = Inventory::from_json(
            r#"[{"name": "backup-old", "started": "2026-11-30T11:00:00Z", "state": "running"},
                {"name": "backup-new", "started": "2026-11-30T12:05:00Z", "state": "running"},
                {"name": "backup-done", "started": "2026-11-30T11:00:00Z", "state": "succeeded"}]"#,
            Regex::new("^backup-").expect("regex"),
        );
        let since = parse_rfc3339(LOCK).expect("time");
        let rows = [
            ("backup-old", "unknown"),
            ("backup-new", "dead"),
            ("backup-done", "dead"),
            ("backup-gone", "dead"),
            ("laptop", "unknown"),
        ];
        for (host, want) in rows {
            assert_eq!(kind(&inv.host(host, since)), want, "{host}");
        }
        assert!(
            matches!(inv.host("backup-gone", since), Liveness::Dead(d) if d == "pod backup-gone no longer exists")
        );
    }

    #[test]
    fn a_failed_reading_answers_unknown_for_everyone() {
        let inv = Inventory::from_json("{\"nope\": 1}", Regex::new(".*").expect("regex"));
        assert!(inv.problem().is_some());
        assert_eq!(kind(&inv.host("backup-gone", 0)), "unknown");
        let failing = Inventory::read(
            &InventorySource::Command("exit 3".into()),
            Regex::new(".*").expect("regex"),
        );
        assert!(
            failing
                .problem()
                .expect("problem")
                .contains("hosts command failed")
        );
    }
}
