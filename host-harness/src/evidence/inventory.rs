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
//!   and so is one whose containers that could hold the lock all started
//!   after it (restarted: [`super::pod_list`]), each with a few
//!   seconds' tolerance for clocks;
//! - a running pod started before the lock is `unknown`: the pod lives, the
//!   process that wrote the lock may not;
//! - any other hostname, or an inventory that could not be read, is
//!   `unknown`, never a reason to remove.
//!
//! The pods of the Kubernetes API may be *scoped* to one namespace (a
//! discovered repository's: its operator runs restic there): then only that
//! namespace's pods answer, and a namespace whose pods could not be listed
//! makes every answer `unknown`. Unscoped, a namespace that could not be
//! listed makes absence prove nothing; the pods listed still answer.

use std::collections::BTreeMap;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use regex::Regex;

use super::fence;
use super::incarnations::{CLOCKS, Fate, Incarnation};
use super::nodes::Nodes;
use super::pod_list::{HostRecord, Hosts, host_key, parse};
use super::shared_pods::{self, Records};
use super::{Observations, Source};
use crate::command;
use crate::contract::Liveness;
use crate::files::read_open_file;
use crate::kubernetes::Connection;
use crate::limits;
use crate::time::{format_rfc3339, now};

/// Where the inventory comes from.
#[derive(Debug, Clone)]
pub enum InventorySource {
    /// A JSON file, read at each check.
    File(PathBuf),
    /// A shell command printing JSON, run at each check.
    Command(String),
    /// The pods the Kubernetes API lists, at each check: those of
    /// `namespaces` alone when given (a discovered repository's: the
    /// namespaces of every object that names it), every namespace's
    /// otherwise.
    Kubernetes {
        /// The namespaces whose pods answer (sorted, at least one), if
        /// scoped.
        namespaces: Option<Vec<String>>,
    },
}

/// The pods lockwarden's pod watch saw answering to `hostname` (in
/// namespace `scope` when given) that could have written a lock dated
/// `since` ([`super::shared_pods::recall`]).
pub type Recall = fn(scope: Option<&[String]>, hostname: &str, since: i64) -> Vec<Incarnation>;

/// One reading of the inventory, ready to answer `host` questions.
#[derive(Debug)]
pub struct Inventory {
    hosts: Regex,
    /// The namespaces whose pods answer, if scoped.
    scope: Option<Vec<String>>,
    /// The hosts, or why they could not be read.
    reading: Result<Reading, String>,
    /// For a reading of the Kubernetes API: the pods lockwarden saw, whose
    /// absence from it speaks even where it lists no host the regex covers
    /// ([`Inventory::host`]).
    recall: Option<Recall>,
    /// For a reading of the Kubernetes API: the nodes, listed afresh
    /// ([`shared_pods::nodes`]) when a judgment first needs them (a
    /// running pod's lock needs none), or why they could not be.
    nodes: OnceLock<Result<Arc<Nodes>, String>>,
    /// Where and within what the nodes are read, for the API's pods.
    node_reader: Option<(Connection, Duration)>,
}

#[derive(Debug)]
struct Reading {
    records: Records,
    /// When the inventory was taken (ns since the epoch, this host's clock).
    taken_at: i64,
    /// Whether it lists any host the regex covers (in the scope).
    covers_any: bool,
}

impl Inventory {
    /// Reads `source` now (a command within `timeout`); the pods of the
    /// Kubernetes API from a listing begun at or after `not_before` (shared
    /// with other checks, [`super::shared_pods`]; one this reading starts
    /// goes through `kubernetes`, the client handed down). A failure is
    /// kept and turns every answer into `unknown`; `problem()` reports it.
    pub fn read(
        source: &InventorySource,
        kubernetes: &Connection,
        hosts: Regex,
        timeout: Duration,
        not_before: i64,
    ) -> Inventory {
        let (records, scope) = match source {
            InventorySource::File(path) => (read_file(path).and_then(parsed), None),
            InventorySource::Command(line) => {
                let taken_at = now();
                let records = run(line, timeout).and_then(|text| parsed((text, taken_at)));
                (records, None)
            }
            InventorySource::Kubernetes { namespaces } => {
                let records = match namespaces.as_deref() {
                    None => shared_pods::read_after(kubernetes, None, not_before, timeout),
                    Some(namespaces) => {
                        read_namespaces(kubernetes, namespaces, not_before, timeout)
                    }
                };
                let inventory = Inventory::new(records, hosts, namespaces.clone());
                let inventory = Inventory {
                    node_reader: Some((kubernetes.clone(), timeout)),
                    ..inventory
                };
                return inventory.with_recall(shared_pods::recall);
            }
        };
        Inventory::new(records, hosts, scope)
    }

    /// This inventory, read from the Kubernetes API, where `recall` says
    /// which pods lockwarden saw.
    fn with_recall(self, recall: Recall) -> Inventory {
        Inventory {
            recall: Some(recall),
            ..self
        }
    }

    /// This inventory, with the nodes as `nodes` says (for tests).
    #[cfg(test)]
    fn with_nodes(self, nodes: Result<Arc<Nodes>, String>) -> Inventory {
        Inventory {
            nodes: OnceLock::from(nodes),
            ..self
        }
    }

    /// The nodes, read now if not yet (`None`: an inventory that says
    /// nothing of nodes, a file's or a command's).
    fn nodes(&self) -> fence::NodesRead<'_> {
        if let Some(read) = self.nodes.get() {
            return Some(read);
        }
        let (kubernetes, timeout) = self.node_reader.as_ref()?;
        Some(
            self.nodes
                .get_or_init(|| shared_pods::nodes(kubernetes, *timeout)),
        )
    }

    /// An inventory of `records` (and when they were taken) for `hosts`,
    /// of the namespaces `scope` alone if given: a namespace of the scope
    /// whose pods could not be listed fails the reading.
    fn new(
        records: Result<(Records, i64), String>,
        hosts: Regex,
        scope: Option<Vec<String>>,
    ) -> Inventory {
        let reading = records.and_then(|(records, taken_at)| {
            let failed = |ns: &String| records.failed.get_key_value(ns);
            if let Some((namespace, why)) = scope.iter().flatten().find_map(failed) {
                return Err(format!(
                    "the pods of namespace {} could not be listed: {why}",
                    crate::text::escape(namespace)
                ));
            }
            Ok(Reading::new(records, taken_at, &hosts, scope.as_deref()))
        });
        Inventory {
            hosts,
            scope,
            reading,
            recall: None,
            nodes: OnceLock::new(),
            node_reader: None,
        }
    }

    /// An inventory of the Kubernetes API's pods, `pods` and the
    /// namespaces whose pods could not be listed, taken at `taken_at`,
    /// scoped to `scope` if given (for tests).
    #[cfg(test)]
    fn from_pods(pods: Hosts, hosts: Regex, taken_at: i64, scope: Option<&str>) -> Inventory {
        Inventory::new(
            Ok((Arc::new(pods), taken_at)),
            hosts,
            scope.map(|ns| vec![ns.to_owned()]),
        )
    }

    /// An inventory from JSON text taken at `taken_at` (for tests and
    /// recorded inputs).
    pub fn from_json(text: &str, hosts: Regex, taken_at: i64) -> Inventory {
        Inventory::new(parsed((text.to_owned(), taken_at)), hosts, None)
    }

    /// Why the inventory cannot be used, if it cannot. A reading of the
    /// API that lists no host the regex covers is no problem: that is how
    /// the pods of jobs look between two jobs, and the pods lockwarden saw
    /// before still speak ([`Inventory::host`]).
    pub fn problem(&self) -> Option<String> {
        match &self.reading {
            Err(problem) => Some(problem.clone()),
            Ok(reading) if !reading.covers_any && self.recall.is_none() => Some(format!(
                "it lists no host matching {}{}; absence from it proves nothing",
                self.hosts.as_str(),
                self.scope_shown()
            )),
            Ok(_) => None,
        }
    }

    /// The namespaces an unscoped inventory could not list, if any: absence
    /// from it proves nothing (the pods it lists still answer).
    pub fn blind_spots(&self) -> Option<String> {
        let reading = self.reading.as_ref().ok()?;
        if self.scope.is_some() || reading.records.failed.is_empty() {
            return None;
        }
        Some(format!(
            "{}; absence from it proves nothing",
            unlisted(&reading.records.failed)
        ))
    }

    /// ` in namespace NS` (` in namespaces A, B`) when scoped, else
    /// nothing.
    fn scope_shown(&self) -> String {
        let Some(scope) = &self.scope else {
            return String::new();
        };
        let shown: Vec<String> = scope
            .iter()
            .map(|ns| crate::text::escape(ns).into_owned())
            .collect();
        let noun = if shown.len() == 1 {
            "namespace"
        } else {
            "namespaces"
        };
        format!(" in {noun} {}", shown.join(", "))
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
    /// first saw at `observed` (its own clock), if it knows. Every pod that
    /// could have written the lock must be dead: each listed one that
    /// answers to the hostname by its record ([`judge`]), each the pod
    /// watch saw and the listing no longer holds by [`fence::gone`], and
    /// one never seen by the absence rule ([`Inventory::absent`]).
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
        let key = host_key(hostname);
        let listed = reading.listed(key, self.scope.as_deref());
        let (mut dead, mut replaced) = (Vec::new(), None);
        for record in &listed {
            match judge(record, &shown, since) {
                Judged::Unknown(why) => return Liveness::Unknown(why),
                Judged::Dead(why) => dead.push(why),
                Judged::Replaced(why) => replaced = Some(why),
            }
        }
        let recalled: Vec<Incarnation> = (self.recall)
            .map(|recall| recall(self.scope.as_deref(), key, since))
            .unwrap_or_default()
            .into_iter()
            .filter(|pod| !listed.iter().any(|r| r.uid.as_deref() == Some(&pod.uid)))
            .collect();
        let verdict = match (dead.first(), recalled.is_empty()) {
            (Some(why), true) => Liveness::Dead(why.clone()),
            _ => self.absent(&shown, reading, observed, &recalled, replaced),
        };
        self.confirmed(verdict, hostname, since, reading)
    }

    /// `verdict` for `hostname`'s lock dated `since`, a `dead` one kept
    /// only when no pod seen elsewhere may hold the lock
    /// ([`Inventory::elsewhere`]) and the hostname is not a node's (restic
    /// in a pod on the node's network, `hostNetwork`, writes that).
    fn confirmed(
        &self,
        verdict: Liveness,
        hostname: &str,
        since: i64,
        reading: &Reading,
    ) -> Liveness {
        if !matches!(verdict, Liveness::Dead(_)) {
            return verdict;
        }
        let shown = crate::text::escape(hostname);
        if let Err(why) = self.elsewhere(host_key(hostname), since, reading) {
            return Liveness::Unknown(format!(
                "the pods that may hold {shown} here ended, but {why}"
            ));
        }
        if let Some(Ok(nodes)) = self.nodes()
            && nodes.is_node(hostname)
        {
            return Liveness::Unknown(format!(
                "host {shown} is a node's name: restic in a pod on the node's network \
                 (hostNetwork) writes it"
            ));
        }
        verdict
    }
}

impl Inventory {
    /// Whether no pod outside the scope that the pod watch saw answering
    /// to `key` may have written a lock dated `since`: one that may run
    /// there (running, or vanished from a node not fenced) keeps the lock
    /// whatever the scope says, since a repository can be named where
    /// lockwarden does not look (a namespace it excludes, an object it
    /// refused). A pod elsewhere never proves a lock dead.
    fn elsewhere(&self, key: &str, since: i64, reading: &Reading) -> Result<(), String> {
        let (Some(recall), Some(scope)) = (self.recall, &self.scope) else {
            return Ok(());
        };
        let nodes = self.nodes();
        for pod in recall(None, key, since) {
            if scope.contains(&pod.namespace) {
                continue;
            }
            let gone = match pod.fate {
                Fate::Running => false,
                _ => fence::gone(&pod, reading.taken_at, nodes).is_ok(),
            };
            if !gone {
                return Err(format!(
                    "pod {} of namespace {} answers to its hostname and may run",
                    crate::text::escape(&pod.name),
                    crate::text::escape(&pod.namespace)
                ));
            }
        }
        Ok(())
    }
}

/// What one listed pod's record says of a lock.
enum Judged {
    /// It wrote the lock, or could have, and its processes ended.
    Dead(String),
    /// It started after the lock: another pod wrote it.
    Replaced(String),
    /// It may hold the lock.
    Unknown(String),
}

impl Inventory {
    /// The answer for `shown`, whose writer `reading` does not list (or
    /// lists only pods started since, `replaced` says why), about a lock
    /// first seen at `observed`: absence speaks only where the reading has
    /// the authority to say a pod is gone:
    ///
    /// 1. it misses no namespace it could hold the pod in;
    /// 2. it began after lockwarden first saw the lock, whose writer
    ///    existed before the lock did;
    /// 3. each pod the pod watch saw in scope that could have written the
    ///    lock (`recalled`) is gone by [`fence::gone`]; or, where it saw
    ///    none, the reading lists some host the regex covers (in its scope:
    ///    an answer that sees none of them is what a wrong namespace or
    ///    missing permissions give) and [`fence::unseen`] holds.
    fn absent(
        &self,
        shown: &str,
        reading: &Reading,
        observed: Option<i64>,
        recalled: &[Incarnation],
        replaced: Option<String>,
    ) -> Liveness {
        if let Some(blind) = self.blind_spots() {
            return Liveness::Unknown(format!("pod {shown} is not in the inventory, but {blind}"));
        }
        if observed.is_none_or(|observed| observed >= reading.taken_at) {
            return Liveness::Unknown(format!(
                "pod {shown} is not in the inventory, but the inventory was taken at {}, \
                 before lockwarden saw this lock, so its absence proves nothing",
                format_rfc3339(reading.taken_at)
            ));
        }
        let nodes = self.nodes();
        if !recalled.is_empty() {
            let gone: Result<Vec<String>, String> = (recalled.iter())
                .map(|pod| fence::gone(pod, reading.taken_at, nodes))
                .collect();
            return match gone {
                Ok(why) => Liveness::Dead(why.join("; ")),
                Err(why) => Liveness::Unknown(why),
            };
        }
        if !reading.covers_any {
            return Liveness::Unknown(format!(
                "pod {shown} is not in the inventory, but the inventory lists no host matching \
                 {}{} at all (wrong namespace or missing permissions?), and lockwarden has not \
                 seen this pod before, so its absence proves nothing",
                self.hosts.as_str(),
                self.scope_shown()
            ));
        }
        if let Err(why) = fence::unseen(nodes) {
            return Liveness::Unknown(format!("pod {shown} is not in the inventory, but {why}"));
        }
        Liveness::Dead(match replaced {
            Some(why) => format!("{why}; the pod that wrote it no longer exists"),
            None => format!("pod {shown} no longer exists"),
        })
    }
}

/// What one pod's record says about a lock written at `since`.
fn judge(record: &HostRecord, shown: &str, since: i64) -> Judged {
    let after = |started: i64| started > since.saturating_add(CLOCKS);
    if let Some(started) = record.started.filter(|s| after(*s)) {
        return Judged::Replaced(format!(
            "pod {shown} started at {}, after the lock was written",
            format_rfc3339(started)
        ));
    }
    if matches!(record.state.as_str(), "succeeded" | "failed") {
        // A pod that ended before the lock was written did not write it.
        if let Some(finished) = record.finished.filter(|f| f.saturating_add(CLOCKS) < since) {
            return Judged::Replaced(format!(
                "pod {shown} ended at {}, before the lock was written",
                format_rfc3339(finished)
            ));
        }
        return Judged::Dead(format!("pod {shown} has {}", record.state));
    }
    if let Some(started) = record.containers_started.filter(|s| after(*s)) {
        return Judged::Dead(format!(
            "every container of pod {shown} that could hold the lock restarted since it was written (the earliest at {})",
            format_rfc3339(started)
        ));
    }
    Judged::Unknown(format!(
        "pod {shown} is {}, but whether the process that wrote the lock runs is unknown",
        record.state
    ))
}

/// Whether `record` answers in an inventory scoped to `scope`.
fn in_scope(record: &HostRecord, scope: Option<&[String]>) -> bool {
    scope.is_none_or(|scope| (record.namespace.as_ref()).is_some_and(|ns| scope.contains(ns)))
}

/// The pods of each of `namespaces` (one listing each, shared as every
/// listing is), as one reading: taken when the earliest began, so that
/// rule 3 holds for each.
fn read_namespaces(
    kubernetes: &Connection,
    namespaces: &[String],
    not_before: i64,
    timeout: Duration,
) -> Result<(Records, i64), String> {
    let mut readings = Vec::with_capacity(namespaces.len());
    for namespace in namespaces {
        readings.push(shared_pods::read_after(
            kubernetes,
            Some(namespace),
            not_before,
            timeout,
        )?);
    }
    if let [(records, taken_at)] = readings.as_slice() {
        return Ok((records.clone(), *taken_at));
    }
    let mut merged = Hosts::default();
    let mut taken_at = i64::MAX;
    for ((records, began), namespace) in readings.into_iter().zip(namespaces) {
        taken_at = taken_at.min(began);
        for (host, answering) in &records.records {
            let ours = answering
                .iter()
                .filter(|r| r.namespace.as_ref() == Some(namespace));
            merged
                .records
                .entry(host.clone())
                .or_default()
                .extend(ours.cloned());
        }
        if let Some(why) = records.failed.get(namespace) {
            merged.failed.insert(namespace.clone(), why.clone());
        }
    }
    Ok((Arc::new(merged), taken_at))
}

/// `failed` as a message says it: the first few namespaces, escaped, with
/// why, and how many more.
fn unlisted(failed: &BTreeMap<String, String>) -> String {
    const SHOWN: usize = 3;
    let mut text = failed
        .iter()
        .take(SHOWN)
        .map(|(ns, why)| format!("{} ({why})", crate::text::escape(ns)))
        .collect::<Vec<_>>()
        .join(", ");
    if failed.len() > SHOWN {
        text.push_str(&format!(" and {} more", failed.len() - SHOWN));
    }
    format!("the pods of namespaces {text} could not be listed")
}

impl Reading {
    /// The pods answering to `key` (in `scope` when given), each once.
    fn listed(&self, key: &str, scope: Option<&[String]>) -> Vec<&HostRecord> {
        let mut listed: Vec<&HostRecord> = Vec::new();
        let answering = self.records.records.get(key).into_iter().flatten();
        for record in answering.filter(|r| in_scope(r, scope)) {
            let same = |r: &&HostRecord| r.uid.is_some() && r.uid == record.uid;
            if !listed.iter().any(same) {
                listed.push(record);
            }
        }
        listed
    }

    fn new(records: Records, taken_at: i64, hosts: &Regex, scope: Option<&[String]>) -> Reading {
        let covers_any = records.records.iter().any(|(name, answering)| {
            hosts.is_match(name) && answering.iter().any(|r| in_scope(r, scope))
        });
        Reading {
            records,
            taken_at,
            covers_any,
        }
    }
}

/// `text` taken at `taken_at`, parsed.
fn parsed((text, taken_at): (String, i64)) -> Result<(Records, i64), String> {
    let records = parse(&text).map_err(|e| e.to_string())?;
    let hosts = Hosts {
        records,
        failed: BTreeMap::new(),
    };
    Ok((Arc::new(hosts), taken_at))
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
    use crate::evidence::pod_list::{kubelet_hostname, pods};
    use crate::time::parse_rfc3339;

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
            &Connection::none(),
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

    /// A running pod `name` of namespace `ns`, started an hour before the
    /// lock, with `spec` and `status` fields added.
    fn pod(
        ns: &str,
        name: &str,
        spec: serde_json::Value,
        status: serde_json::Value,
    ) -> serde_json::Value {
        let mut pod = serde_json::json!({
            "metadata": {"name": name, "namespace": ns},
            "spec": spec,
            "status": {"phase": "Running", "startTime": "2026-11-30T11:00:00Z"},
        });
        if let (Some(into), serde_json::Value::Object(fields)) =
            (pod["status"].as_object_mut(), status)
        {
            into.extend(fields);
        }
        pod
    }

    /// A container status: `name` running since `started`, or terminated.
    fn state(name: &str, started: Option<&str>) -> serde_json::Value {
        match started {
            Some(t) => serde_json::json!({"name": name, "state": {"running": {"startedAt": t}}}),
            None => serde_json::json!({"name": name, "state": {"terminated": {"exitCode": 0}}}),
        }
    }

    const BEFORE: &str = "2026-11-30T11:00:00Z";
    const AFTER: &str = "2026-11-30T12:30:00Z";

    /// What the inventory says of pod `p`, alone in it, for a lock at LOCK.
    fn verdict(p: serde_json::Value) -> Liveness {
        let since = parse_rfc3339(LOCK).expect("time");
        let text = serde_json::json!({"items": [p]}).to_string();
        let inv =
            Inventory::from_json(&text, Regex::new(".*").expect("regex"), since + 10 * MINUTE);
        inv.host("backup-x", since, Some(since + MINUTE))
    }

    #[test]
    fn a_restart_counts_only_when_every_container_that_could_hold_the_lock_restarted() {
        let sidecar = serde_json::json!({
            "containers": [{"name": "app"}],
            "initContainers": [{"name": "restic", "restartPolicy": "Always"}, {"name": "setup"}],
        });
        let with = |sidecar_started: Option<&str>, extra: serde_json::Value| {
            let mut status = serde_json::json!({
                "containerStatuses": [state("app", Some(AFTER))],
                "initContainerStatuses": [state("restic", sidecar_started), state("setup", None)],
            });
            if let (Some(into), serde_json::Value::Object(fields)) = (status.as_object_mut(), extra)
            {
                into.extend(fields);
            }
            pod("ns", "backup-x", sidecar.clone(), status)
        };
        let none = serde_json::json!({});
        let rows = [
            // restic runs in the sidecar since before the lock; only the
            // main container restarted.
            (
                "sidecar running since before",
                with(Some(BEFORE), none.clone()),
                "unknown",
            ),
            // Every container restarted, the sidecar too; the regular init
            // container ended for good.
            ("all restarted", with(Some(AFTER), none.clone()), "dead"),
            ("sidecar terminated", with(None, none.clone()), "unknown"),
            (
                "ephemeral running since before",
                with(
                    Some(AFTER),
                    serde_json::json!({"ephemeralContainerStatuses": [state("debug", Some(BEFORE))]}),
                ),
                "unknown",
            ),
            (
                "ephemeral ended",
                with(
                    Some(AFTER),
                    serde_json::json!({"ephemeralContainerStatuses": [state("debug", None)]}),
                ),
                "dead",
            ),
        ];
        for (what, p, want) in rows {
            let answer = verdict(p);
            assert_eq!(kind(&answer), want, "{what}: {answer:?}");
        }
    }

    #[test]
    fn a_container_lockwarden_cannot_place_leaves_the_restart_unknown() {
        let main = serde_json::json!({"containerStatuses": [state("app", Some(AFTER))]});
        // A terminated init container the spec does not describe may be a
        // sidecar between runs.
        let undescribed = pod(
            "ns",
            "backup-x",
            serde_json::json!({"containers": [{"name": "app"}]}),
            serde_json::json!({
                "containerStatuses": [state("app", Some(AFTER))],
                "initContainerStatuses": [state("restic", None)],
            }),
        );
        // A sidecar the spec names without a status.
        let no_status = pod(
            "ns",
            "backup-x",
            serde_json::json!({"containers": [{"name": "app"}],
                               "initContainers": [{"name": "restic", "restartPolicy": "Always"}]}),
            main.clone(),
        );
        // An ephemeral container the spec names without a status yet.
        let new_debug = pod(
            "ns",
            "backup-x",
            serde_json::json!({"containers": [{"name": "app"}],
                               "ephemeralContainers": [{"name": "debug"}]}),
            main.clone(),
        );
        for (what, p) in [
            ("undescribed", undescribed),
            ("no status", no_status),
            ("new", new_debug),
        ] {
            let answer = verdict(p);
            assert_eq!(kind(&answer), "unknown", "{what}: {answer:?}");
        }
        let alone = pod(
            "ns",
            "backup-x",
            serde_json::json!({"containers": [{"name": "app"}]}),
            main,
        );
        assert_eq!(kind(&verdict(alone)), "dead");
    }

    /// Tenant a's running pod `backup-live`, tenant b's Succeeded pod of
    /// the same name, and b's running `backup-b`; `failed` namespaces.
    fn tenants(failed: &[&str]) -> Hosts {
        let mut b_live = pod(
            "b",
            "backup-live",
            serde_json::json!({}),
            serde_json::json!({}),
        );
        b_live["status"]["phase"] = serde_json::json!("Succeeded");
        let items = vec![
            pod(
                "a",
                "backup-live",
                serde_json::json!({}),
                serde_json::json!({}),
            ),
            b_live,
            pod(
                "b",
                "backup-b",
                serde_json::json!({}),
                serde_json::json!({}),
            ),
        ];
        let failed = failed
            .iter()
            .map(|ns| (ns.to_string(), "too large".to_owned()))
            .collect();
        pods(items, failed).expect("pods")
    }

    #[test]
    fn a_scoped_inventory_answers_from_its_namespace_alone() {
        let since = parse_rfc3339(LOCK).expect("time");
        let regex = Regex::new("^backup-").expect("regex");
        let seen = Some(since + MINUTE);
        let read = |scope: Option<&str>, failed: &[&str]| {
            Inventory::from_pods(tenants(failed), regex.clone(), since + 10 * MINUTE, scope)
        };
        let a = read(Some("a"), &["c"]);
        assert_eq!(a.problem(), None);
        assert_eq!(a.blind_spots(), None, "another namespace's failure");
        // b's Succeeded pod of the same name does not answer for a.
        assert_eq!(kind(&a.host("backup-live", since, seen)), "unknown");
        assert_eq!(kind(&a.host("backup-gone", since, seen)), "dead");
        // b's running pod is not a's.
        assert_eq!(kind(&a.host("backup-b", since, seen)), "dead");
        let b = read(Some("b"), &[]);
        assert_eq!(kind(&b.host("backup-live", since, seen)), "dead");
        assert_eq!(kind(&b.host("backup-b", since, seen)), "unknown");
        // A scope of no matching pod proves no absence.
        let empty = read(Some("c"), &[]);
        assert!(empty.problem().is_some());
        assert_eq!(kind(&empty.host("backup-gone", since, seen)), "unknown");
    }

    #[test]
    fn a_namespace_not_listed_blinds_its_scope_and_the_absences_of_an_unscoped_inventory() {
        let since = parse_rfc3339(LOCK).expect("time");
        let regex = Regex::new("^backup-").expect("regex");
        let seen = Some(since + MINUTE);
        let read = |scope: Option<&str>| {
            Inventory::from_pods(tenants(&["a"]), regex.clone(), since + 10 * MINUTE, scope)
        };
        let a = read(Some("a"));
        assert!(a.problem().expect("a problem").contains("namespace a"));
        assert_eq!(kind(&a.host("backup-gone", since, seen)), "unknown");
        let b = read(Some("b"));
        assert_eq!(b.problem(), None);
        assert_eq!(kind(&b.host("backup-gone", since, seen)), "dead");
        let all = read(None);
        assert_eq!(all.problem(), None);
        assert!(
            all.blind_spots()
                .expect("blind")
                .contains("namespaces a (too large)")
        );
        let absent = all.host("backup-gone", since, seen);
        assert_eq!(kind(&absent), "unknown", "{absent:?}");
        // The pods listed still answer.
        let unscoped =
            Inventory::from_pods(tenants(&["c"]), regex.clone(), since + 10 * MINUTE, None);
        assert_eq!(kind(&unscoped.host("backup-live", since, seen)), "unknown");
        let mut gone_only = tenants(&["a"]);
        gone_only.records.retain(|name, _| name != "backup-b");
        gone_only
            .records
            .entry("backup-live".into())
            .or_default()
            .retain(|r| r.namespace.as_deref() == Some("b"));
        let inv = Inventory::from_pods(gone_only, regex, since + 10 * MINUTE, None);
        assert_eq!(kind(&inv.host("backup-live", since, seen)), "dead");
    }

    const S: i64 = 1_000_000_000;

    /// A pod the pod watch saw in namespace c: made an hour before the
    /// lock, on node-1.
    fn seen(name: &str, uid: &str, fate: Fate) -> Incarnation {
        let since = parse_rfc3339(LOCK).expect("time");
        Incarnation {
            uid: uid.into(),
            namespace: "c".into(),
            name: name.into(),
            node: Some("node-1".into()),
            created: Some(since - 60 * MINUTE),
            grace: 30 * S,
            fate,
        }
    }

    /// What the pod watch saw: backup-gone ended before the reading;
    /// backup-cut vanished while it ran, from node-1; web-0 ended, then a
    /// pod of that name made after the lock's time vanished.
    fn recall(scope: Option<&[String]>, hostname: &str, since: i64) -> Vec<Incarnation> {
        let lock = parse_rfc3339(LOCK).expect("time");
        let scope = scope.and_then(|s| s.first()).map(String::as_str);
        let pods = match (scope, hostname) {
            (Some("c"), "backup-gone") => vec![seen(hostname, "g", Fate::Ended(lock + MINUTE))],
            (Some("c"), "backup-cut") => vec![seen(hostname, "x", Fate::Vanished(lock + MINUTE))],
            (Some("c"), "backup-web-0") => {
                let later = Incarnation {
                    created: Some(lock + 3 * MINUTE),
                    ..seen(hostname, "w2", Fate::Vanished(lock + 4 * MINUTE))
                };
                vec![seen(hostname, "w1", Fate::Ended(lock + 2 * MINUTE)), later]
            }
            _ => vec![],
        };
        pods.into_iter()
            .filter(|p| p.could_have_written(since))
            .collect()
    }

    /// Tenants c's reading at LOCK + 10 minutes, with `nodes`.
    fn c_reading(nodes: Result<Nodes, String>, failed: &[&str]) -> Inventory {
        let since = parse_rfc3339(LOCK).expect("time");
        let regex = Regex::new("^backup-").expect("regex");
        Inventory::from_pods(tenants(failed), regex, since + 10 * MINUTE, Some("c"))
            .with_recall(recall)
            .with_nodes(nodes.map(Arc::new))
    }

    #[test]
    fn a_pod_seen_before_speaks_where_no_pod_of_its_pattern_is_left() {
        let since = parse_rfc3339(LOCK).expect("time");
        let taken_at = since + 10 * MINUTE;
        let seen = Some(since + MINUTE);
        let c = c_reading(Ok(Nodes::default()), &[]);
        assert_eq!(c.problem(), None, "between two jobs is no problem");
        assert_eq!(kind(&c.host("backup-gone", since, seen)), "dead");
        for (host, observed, why) in [
            ("backup-other", seen, "a pod never seen there"),
            (
                "backup-gone",
                Some(taken_at + MINUTE),
                "a lock seen after the reading",
            ),
            ("backup-gone", None, "a lock never seen"),
        ] {
            let answer = c.host(host, since, observed);
            assert_eq!(kind(&answer), "unknown", "{why}: {answer:?}");
        }
        let written_late = c.host("backup-gone", since + 5 * MINUTE, seen);
        assert_eq!(
            kind(&written_late),
            "unknown",
            "a lock dated after the pod ended is another pod's: {written_late:?}"
        );
        let blind = c_reading(Ok(Nodes::default()), &["c"]);
        assert_eq!(kind(&blind.host("backup-gone", since, seen)), "unknown");
        // The same reading from a file or a command has no pods seen.
        let regex = Regex::new("^backup-").expect("regex");
        let plain = Inventory::from_pods(tenants(&[]), regex, taken_at, Some("c"));
        assert!(plain.problem().is_some());
        assert_eq!(kind(&plain.host("backup-gone", since, seen)), "unknown");
    }

    #[test]
    fn a_pod_that_vanished_while_it_ran_is_dead_only_once_its_node_is_fenced() {
        let since = parse_rfc3339(LOCK).expect("time");
        let seen = Some(since + MINUTE);
        let vanished = since + MINUTE;
        let reported = |at: i64| Ok(Nodes::of(&[("node-1", true, Some(at))]));
        let rows = [
            ("node gone", Ok(Nodes::default()), "dead"),
            (
                "reported after the grace",
                reported(vanished + 40 * S),
                "dead",
            ),
            (
                "reported within the grace",
                reported(vanished + 20 * S),
                "unknown",
            ),
            ("not reported since", reported(vanished - S), "unknown"),
            ("nodes unreadable", Err("forbidden".into()), "unknown"),
        ];
        for (what, nodes, want) in rows {
            let answer = c_reading(nodes, &[]).host("backup-cut", since, seen);
            assert_eq!(kind(&answer), want, "{what}: {answer:?}");
        }
    }

    #[test]
    fn an_earlier_incarnations_end_says_nothing_of_a_later_ones_lock() {
        let lock = parse_rfc3339(LOCK).expect("time");
        let seen = Some(lock + 5 * MINUTE);
        let c = c_reading(Ok(Nodes::of(&[("node-1", true, Some(lock))])), &[]);
        // The first pod of the name wrote a lock and ended.
        assert_eq!(kind(&c.host("backup-web-0", lock, seen)), "dead");
        // The second, made after it ended, wrote one and was force-deleted
        // from a node that has not reported since.
        let later = c.host("backup-web-0", lock + 3 * MINUTE + S, seen);
        assert_eq!(kind(&later), "unknown", "{later:?}");
    }

    #[test]
    fn a_writer_never_seen_is_gone_only_when_every_node_is_ready() {
        let since = parse_rfc3339(LOCK).expect("time");
        let seen = Some(since + MINUTE);
        let regex = Regex::new("^backup-").expect("regex");
        let read = |nodes: Nodes| {
            Inventory::from_pods(tenants(&[]), regex.clone(), since + 10 * MINUTE, Some("b"))
                .with_nodes(Ok(Arc::new(nodes)))
        };
        let ready = read(Nodes::of(&[("n1", true, None)]));
        assert_eq!(kind(&ready.host("backup-gone", since, seen)), "dead");
        let cut = read(Nodes::of(&[("n1", true, None), ("n2", false, None)]));
        let answer = cut.host("backup-gone", since, seen);
        assert_eq!(kind(&answer), "unknown", "{answer:?}");
        assert!(format!("{answer:?}").contains("node n2 is not Ready"));
        let node_name = ready_with("backup-node-7", &regex, since);
        let answer = node_name.host("backup-node-7", since, seen);
        assert_eq!(kind(&answer), "unknown", "a node's name: {answer:?}");
    }

    /// A reading of tenant b where `node` is a node's name.
    fn ready_with(node: &str, regex: &Regex, since: i64) -> Inventory {
        Inventory::from_pods(tenants(&[]), regex.clone(), since + 10 * MINUTE, Some("b"))
            .with_nodes(Ok(Arc::new(Nodes::of(&[(node, true, None)]))))
    }

    #[test]
    fn a_pod_answers_to_its_fully_qualified_name() {
        let since = parse_rfc3339(LOCK).expect("time");
        let p = pod(
            "a",
            "backup-x",
            serde_json::json!({"hostname": "restic", "subdomain": "backups",
                               "setHostnameAsFQDN": true}),
            serde_json::json!({}),
        );
        let answer = verdict_of(p, "restic.backups.a.svc.cluster.local", since);
        assert_eq!(kind(&answer), "unknown", "the running pod: {answer:?}");
    }

    /// What the inventory says of pod `p`, alone in it, for `host`'s lock
    /// written at `since`.
    fn verdict_of(p: serde_json::Value, host: &str, since: i64) -> Liveness {
        let text = serde_json::json!({"items": [p]}).to_string();
        let inv =
            Inventory::from_json(&text, Regex::new(".*").expect("regex"), since + 10 * MINUTE);
        inv.host(host, since, Some(since + MINUTE))
    }

    /// What the pod watch saw: in namespace z (outside c), a running
    /// backup-shared; in c nothing.
    fn recall_elsewhere(scope: Option<&[String]>, hostname: &str, _: i64) -> Vec<Incarnation> {
        let z = Incarnation {
            namespace: "z".into(),
            ..seen(hostname, "z1", Fate::Running)
        };
        match (scope, hostname) {
            (None, "backup-shared" | "backup-live") => vec![z],
            _ => vec![],
        }
    }

    #[test]
    fn a_pod_seen_elsewhere_that_may_run_keeps_the_lock() {
        let since = parse_rfc3339(LOCK).expect("time");
        let seen = Some(since + MINUTE);
        let regex = Regex::new("^backup-").expect("regex");
        let b = Inventory::from_pods(tenants(&[]), regex, since + 10 * MINUTE, Some("b"))
            .with_recall(recall_elsewhere)
            .with_nodes(Ok(Arc::new(Nodes::default())));
        let answer = b.host("backup-shared", since, seen);
        assert_eq!(kind(&answer), "unknown", "{answer:?}");
        assert!(
            format!("{answer:?}").contains("of namespace z"),
            "{answer:?}"
        );
        assert_eq!(kind(&b.host("backup-gone", since, seen)), "dead");
        // b's own pod of that name Succeeded; z's may still run.
        let answer = b.host("backup-live", since, seen);
        assert_eq!(kind(&answer), "unknown", "{answer:?}");
    }

    #[test]
    fn a_finished_pod_that_could_not_have_written_the_lock_does_not_free_it() {
        let since = parse_rfc3339(LOCK).expect("time");
        let seen = Some(since + MINUTE);
        let finished = |started: &str, ended: &str| {
            let mut p = pod(
                "b",
                "backup-x",
                serde_json::json!({"containers": [{"name": "restic"}]}),
                serde_json::json!({"containerStatuses": [{"name": "restic", "state":
                    {"terminated": {"exitCode": 0, "finishedAt": ended}}}]}),
            );
            p["status"]["phase"] = serde_json::json!("Succeeded");
            p["status"]["startTime"] = serde_json::json!(started);
            let hosts = pods(vec![p], Default::default()).expect("pods");
            let regex = Regex::new("^backup-").expect("regex");
            let cut = Nodes::of(&[("n1", true, None), ("n2", false, None)]);
            Inventory::from_pods(hosts, regex, since + 10 * MINUTE, Some("b"))
                .with_nodes(Ok(Arc::new(cut)))
        };
        let writer = finished(BEFORE, "2026-11-30T12:05:00Z");
        assert_eq!(kind(&writer.host("backup-x", since, seen)), "dead");
        for (what, inv) in [
            ("started after", finished(AFTER, "2026-11-30T12:40:00Z")),
            ("ended before", finished(BEFORE, "2026-11-30T11:30:00Z")),
        ] {
            // The writer is another pod, never seen, and a node is cut off.
            let answer = inv.host("backup-x", since, seen);
            assert_eq!(kind(&answer), "unknown", "{what}: {answer:?}");
        }
    }
}
