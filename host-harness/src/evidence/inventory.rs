//! Host inventory: which hosts (Kubernetes pods, usually) exist, for the
//! `liveness.host` question. Read from a file, a command or the Kubernetes
//! API at each check, in either the PodList JSON that `kubectl get pods -A -o json` prints or a
//! plain list `[{"name", "started", "state"}]`.
//!
//! The inventory speaks only for hostnames matching `--inventory-hosts`:
//! - a matching hostname absent from the inventory is `dead` only when the
//!   inventory is *authoritative* for it: it was read without error, it lists
//!   at least one host matching `--inventory-hosts` (an empty list, or one that
//!   sees none of the hosts it should cover, is a wrong namespace or missing
//!   permissions far more often than proof), and it was taken after lockwarden
//!   first saw the lock (a command runs after the locks are listed; a file
//!   counts by its modification time). Otherwise absence is `unknown`;
//! - a pod that Succeeded or Failed is `dead`;
//! - a pod started after the lock was written is `dead` (it was recreated),
//!   and so is one whose containers all started after it (restarted), each
//!   with a few seconds' tolerance for clocks;
//! - a running pod started before the lock is `unknown`: the pod lives, the
//!   process that wrote the lock may not;
//! - any other hostname, or an inventory that could not be read, is
//!   `unknown`, never a reason to remove.

use std::collections::HashMap;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use regex::Regex;
use serde::Deserialize;

use super::shared_pods::{self, Records};
use super::{Observations, Source};
use crate::command;
use crate::contract::Liveness;
use crate::files::read_open_file;
use crate::limits;
use crate::time::{format_rfc3339, now, parse_rfc3339};

/// How much later than a lock's time a pod or its containers must have
/// started to count as recreated: the kubelet and the lock writer read
/// different clocks.
const START_TOLERANCE: i64 = 5_000_000_000;

/// Where the inventory comes from.
#[derive(Debug, Clone)]
pub enum InventorySource {
    /// A JSON file, read at each check.
    File(PathBuf),
    /// A shell command printing JSON, run at each check.
    Command(String),
    /// The pods the Kubernetes API lists, at each check.
    Kubernetes,
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
    reading: Result<Reading, String>,
}

#[derive(Debug)]
struct Reading {
    records: Records,
    /// When the inventory was taken (ns since the epoch, this host's clock).
    taken_at: i64,
    /// Whether it lists any host the regex covers.
    covers_any: bool,
}

impl Inventory {
    /// Reads `source` now (a command within `timeout`); the pods of the
    /// Kubernetes API from a listing begun at or after `not_before` (shared
    /// with other checks, [`super::shared_pods`]). A failure is kept and
    /// turns every answer into `unknown`; `problem()` reports it.
    pub fn read(
        source: &InventorySource,
        hosts: Regex,
        timeout: Duration,
        not_before: i64,
    ) -> Inventory {
        let records = match source {
            InventorySource::File(path) => read_file(path).and_then(parsed),
            InventorySource::Command(line) => {
                let taken_at = now();
                run(line, timeout).and_then(|text| parsed((text, taken_at)))
            }
            InventorySource::Kubernetes => shared_pods::read_after(not_before, timeout),
        };
        let reading = records.map(|(records, taken_at)| Reading::new(records, taken_at, &hosts));
        Inventory { hosts, reading }
    }

    /// An inventory from JSON text taken at `taken_at` (for tests and
    /// recorded inputs).
    pub fn from_json(text: &str, hosts: Regex, taken_at: i64) -> Inventory {
        let reading = parsed((text.to_owned(), taken_at))
            .map(|(records, taken_at)| Reading::new(records, taken_at, &hosts));
        Inventory { hosts, reading }
    }

    /// Why the inventory cannot be used, if it cannot.
    pub fn problem(&self) -> Option<String> {
        match &self.reading {
            Err(problem) => Some(problem.clone()),
            Ok(reading) if !reading.covers_any => Some(format!(
                "it lists no host matching {}; absence from it proves nothing",
                self.hosts.as_str()
            )),
            Ok(_) => None,
        }
    }

    /// This inventory as a [`Source`], with when each lock was first seen
    /// (what its absence rule compares its own time with).
    pub fn observed(self, observed: Observations) -> ObservedInventory {
        ObservedInventory {
            inventory: self,
            observed,
        }
    }

    /// The answer to `liveness.host(hostname, since)` for a lock lockwarden
    /// first saw at `observed` (its own clock), if it knows.
    pub fn host(&self, hostname: &str, since: i64, observed: Option<i64>) -> Liveness {
        let shown = crate::text::escape(hostname);
        if !self.hosts.is_match(hostname) {
            return Liveness::Unknown(format!(
                "host {shown} is not one the inventory covers ({})",
                self.hosts.as_str()
            ));
        }
        let reading = match &self.reading {
            Ok(reading) => reading,
            Err(problem) => {
                return Liveness::Unknown(format!("the host inventory failed: {problem}"));
            }
        };
        let Some(records) = reading.records.get(hostname) else {
            if !reading.covers_any {
                return Liveness::Unknown(format!(
                    "pod {shown} is not in the inventory, but the inventory lists no host matching \
                     {} at all (wrong namespace or missing permissions?), so its absence proves nothing",
                    self.hosts.as_str()
                ));
            }
            return match observed {
                Some(observed) if observed < reading.taken_at => {
                    Liveness::Dead(format!("pod {shown} no longer exists"))
                }
                _ => Liveness::Unknown(format!(
                    "pod {shown} is not in the inventory, but the inventory was taken at {}, \
                     before lockwarden saw this lock, so its absence proves nothing",
                    format_rfc3339(reading.taken_at)
                )),
            };
        };
        // Several pods may answer to one hostname (spec.hostname, a name
        // kubelet shortened): gone only when every one of them says so.
        let answers: Vec<Liveness> = records.iter().map(|r| judge(r, &shown, since)).collect();
        answers
            .iter()
            .find(|a| !matches!(a, Liveness::Dead(_)))
            .or(answers.first())
            .cloned()
            .unwrap_or_else(|| Liveness::Unknown(format!("pod {shown} has no record")))
    }
}

/// What one pod's record says about a lock written at `since`.
fn judge(record: &HostRecord, shown: &str, since: i64) -> Liveness {
    if matches!(record.state.as_str(), "succeeded" | "failed") {
        return Liveness::Dead(format!("pod {shown} has {}", record.state));
    }
    let after = |started: i64| started > since.saturating_add(START_TOLERANCE);
    if let Some(started) = record.started.filter(|s| after(*s)) {
        return Liveness::Dead(format!(
            "pod {shown} started at {}, after the lock was written",
            format_rfc3339(started)
        ));
    }
    if let Some(started) = record.containers_started.filter(|s| after(*s)) {
        return Liveness::Dead(format!(
            "every container of pod {shown} restarted since the lock was written (the earliest at {})",
            format_rfc3339(started)
        ));
    }
    Liveness::Unknown(format!(
        "pod {shown} is {}, but whether the process that wrote the lock runs is unknown",
        record.state
    ))
}

impl Reading {
    fn new(records: Records, taken_at: i64, hosts: &Regex) -> Reading {
        let covers_any = records.keys().any(|name| hosts.is_match(name));
        Reading {
            records,
            taken_at,
            covers_any,
        }
    }
}

/// `text` taken at `taken_at`, parsed.
fn parsed((text, taken_at): (String, i64)) -> Result<(Records, i64), String> {
    Ok((Arc::new(parse(&text)?), taken_at))
}

/// Reads a hosts file (a regular file within [`limits::INVENTORY`]); it was
/// taken when it was last modified.
fn read_file(path: &Path) -> Result<(String, i64), String> {
    let fail =
        |e: &dyn std::fmt::Display| format!("cannot read hosts file {}: {e}", path.display());
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(i32::try_from(rustix::fs::OFlags::NONBLOCK.bits()).unwrap_or(0))
        .open(path)
        .map_err(|e| fail(&e))?;
    let modified = file
        .metadata()
        .and_then(|m| m.modified())
        .map_err(|e| fail(&e))?;
    let taken_at = jiff::Timestamp::try_from(modified)
        .ok()
        .and_then(|t| i64::try_from(t.as_nanosecond()).ok())
        .ok_or_else(|| fail(&"its modification time is out of range"))?;
    // A modification time in the future (a copy that kept another clock's
    // time, a clock ahead on a file server) says nothing about when the
    // inventory was taken: then absence from it proves nothing.
    let taken_at = if taken_at > now() {
        tracing::warn!(
            "hosts file {} is dated in the future ({}); absence from it proves nothing",
            crate::text::escape(&path.display().to_string()),
            format_rfc3339(taken_at)
        );
        i64::MIN
    } else {
        taken_at
    };
    let bytes = read_open_file(file, limits::INVENTORY).map_err(|e| fail(&format!("it {e}")))?;
    let text = String::from_utf8(bytes).map_err(|_| fail(&"it is not UTF-8"))?;
    Ok((text, taken_at))
}

fn run(line: &str, timeout: Duration) -> Result<String, String> {
    let output = command::run(command::shell(line), timeout, limits::INVENTORY)
        .map_err(|e| format!("the hosts command {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "hosts command failed ({}): {}",
            output.status,
            output.stderr_line()
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
pub fn parse(text: &str) -> Result<HashMap<String, Vec<HostRecord>>, String> {
    let document: Document = serde_json::from_str(text).map_err(|e| {
        format!("the inventory is neither a Kubernetes PodList nor a list of {{name, started, state}}: {e}")
    })?;
    let mut hosts: HashMap<String, Vec<HostRecord>> = HashMap::new();
    match document {
        Document::PodList { items } => {
            for pod in items {
                let record = pod.record()?;
                // The hostname restic saw: spec.hostname or the pod's name,
                // cut by kubelet to 63 bytes without a trailing - or . ;
                // the pod's own name answers too.
                let hostname = pod.spec.hostname.as_deref().unwrap_or(&pod.metadata.name);
                let mut names = vec![pod.metadata.name.clone(), kubelet_hostname(hostname)];
                names.dedup();
                for name in names {
                    hosts.entry(name).or_default().push(record.clone());
                }
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
                hosts.entry(host.name).or_default().push(record);
            }
        }
    }
    Ok(hosts)
}

impl Pod {
    /// What the inventory knows of this pod.
    fn record(&self) -> Result<HostRecord, String> {
        let container_starts: Vec<Option<i64>> = self
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
        Ok(HostRecord {
            state: self
                .status
                .phase
                .as_deref()
                .unwrap_or("unknown")
                .to_ascii_lowercase(),
            started: time("status.startTime", self.status.start_time.as_deref())?,
            containers_started,
        })
    }
}

/// A pod's hostname as kubelet sets it: at most 63 bytes, then without a
/// trailing `-` or `.` (`truncatePodHostnameIfNeeded`).
fn kubelet_hostname(name: &str) -> String {
    if name.len() <= 63 {
        return name.to_owned();
    }
    let mut end = 63;
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    name[..end].trim_end_matches(['-', '.']).to_owned()
}

/// An inventory with the first sightings of the locks it is asked about.
pub struct ObservedInventory {
    inventory: Inventory,
    observed: Observations,
}

impl Source for ObservedInventory {
    /// An inventory knows hosts, not processes.
    fn process(&self, _hostname: &str, _pid: i64, _since: i64) -> Option<Liveness> {
        None
    }

    fn host(&self, hostname: &str, since: i64) -> Option<Liveness> {
        let observed = self.observed.get(&(hostname.to_owned(), since)).copied();
        Some(self.inventory.host(hostname, since, observed))
    }
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

    const MINUTE: i64 = 60_000_000_000;

    #[test]
    fn plain_list_semantics() {
        let since = parse_rfc3339(LOCK).expect("time");
        let inv = Inventory::from_json(
            r#"[{"name": "backup-old", "started": "2026-11-30T11:00:00Z", "state": "running"},
                {"name": "backup-new", "started": "2026-11-30T12:05:00Z", "state": "running"},
                {"name": "backup-near", "started": "2026-11-30T12:00:03Z", "state": "running"},
                {"name": "backup-done", "started": "2026-11-30T11:00:00Z", "state": "succeeded"}]"#,
            Regex::new("^backup-").expect("regex"),
            since + 10 * MINUTE,
        );
        let seen = Some(since + MINUTE);
        let rows = [
            ("backup-old", seen, "unknown"),
            ("backup-new", seen, "dead"),
            ("backup-near", seen, "unknown"),
            ("backup-done", seen, "dead"),
            ("backup-gone", seen, "dead"),
            // Seen after the inventory was taken, or never seen: absence
            // proves nothing.
            ("backup-gone", Some(since + 20 * MINUTE), "unknown"),
            ("backup-gone", None, "unknown"),
            ("laptop", seen, "unknown"),
        ];
        for (host, observed, want) in rows {
            assert_eq!(kind(&inv.host(host, since, observed)), want, "{host}");
        }
        assert!(
            matches!(inv.host("backup-gone", since, seen), Liveness::Dead(d) if d == "pod backup-gone no longer exists")
        );
    }

    #[test]
    fn an_inventory_that_sees_none_of_its_hosts_proves_no_absence() {
        let since = parse_rfc3339(LOCK).expect("time");
        let regex = Regex::new("^velero-").expect("regex");
        for text in [
            r#"{"items": []}"#,
            "[]",
            r#"[{"name": "web-1", "started": "2026-11-30T11:00:00Z", "state": "running"}]"#,
        ] {
            let inv = Inventory::from_json(text, regex.clone(), since + 10 * MINUTE);
            assert!(inv.problem().is_some(), "{text}");
            let answer = inv.host("velero-abc", since, Some(since));
            assert_eq!(kind(&answer), "unknown", "{text}: {answer:?}");
        }
    }

    #[test]
    fn pods_sharing_a_hostname_or_shortened_by_kubelet_are_found() {
        let since = parse_rfc3339(LOCK).expect("time");
        let long = format!("backup-nightly-{}-x7k2p", "a".repeat(60));
        let short = kubelet_hostname(&long);
        assert_eq!(short.len(), 63);
        let pods = format!(
            r#"{{"items": [
              {{"metadata": {{"name": "{long}"}}, "status": {{"phase": "Running", "startTime": "2026-11-30T11:00:00Z"}}}},
              {{"metadata": {{"name": "backup-aaaa"}}, "spec": {{"hostname": "restic-host"}}, "status": {{"phase": "Running", "startTime": "2026-11-30T11:00:00Z"}}}},
              {{"metadata": {{"name": "backup-bbbb"}}, "spec": {{"hostname": "restic-host"}}, "status": {{"phase": "Succeeded", "startTime": "2026-11-30T11:00:00Z"}}}}
            ]}}"#
        );
        let inv =
            Inventory::from_json(&pods, Regex::new(".*").expect("regex"), since + 10 * MINUTE);
        let seen = Some(since + MINUTE);
        assert_eq!(kind(&inv.host(&short, since, seen)), "unknown");
        assert_eq!(kind(&inv.host("restic-host", since, seen)), "unknown");
        assert_eq!(kind(&inv.host("backup-bbbb", since, seen)), "dead");
    }

    #[test]
    fn a_failed_reading_answers_unknown_for_everyone() {
        let inv = Inventory::from_json("{\"nope\": 1}", Regex::new(".*").expect("regex"), 0);
        assert!(inv.problem().is_some());
        assert_eq!(kind(&inv.host("backup-gone", 0, Some(0))), "unknown");
        let failing = Inventory::read(
            &InventorySource::Command("exit 3".into()),
            Regex::new(".*").expect("regex"),
            Duration::from_secs(10),
            0,
        );
        assert!(
            failing
                .problem()
                .expect("problem")
                .contains("hosts command failed")
        );
    }
}
