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
use std::sync::Arc;
use std::time::Duration;

use regex::Regex;

use super::pod_list::{HostRecord, Hosts, parse};
use super::shared_pods::{self, Records};
use super::{Observations, Source};
use crate::command;
use crate::contract::Liveness;
use crate::files::read_open_file;
use crate::kubernetes::Connection;
use crate::limits;
use crate::time::{format_rfc3339, now};

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
    /// The pods the Kubernetes API lists, at each check: those of
    /// `namespace` alone when it is given (a discovered repository's),
    /// every namespace's otherwise.
    Kubernetes {
        /// The namespace whose pods answer, if one.
        namespace: Option<String>,
    },
}

/// Whether lockwarden's pod watch saw the pod named `hostname` (in
/// namespace `scope` when given) end for sure before `before` (ns since
/// the epoch) ([`super::shared_pods::sighted`]).
pub type Sighted = fn(scope: Option<&str>, hostname: &str, before: i64) -> bool;

/// One reading of the inventory, ready to answer `host` questions.
#[derive(Debug)]
pub struct Inventory {
    hosts: Regex,
    /// The one namespace whose pods answer, if scoped.
    scope: Option<String>,
    /// The hosts, or why they could not be read.
    reading: Result<Reading, String>,
    /// For a reading of the Kubernetes API: the pods lockwarden saw end
    /// before it, whose absence from it speaks even where it lists no host
    /// the regex covers ([`Inventory::host`]).
    sighted: Option<Sighted>,
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
            InventorySource::Kubernetes { namespace } => {
                let scope = namespace.as_deref();
                let records = shared_pods::read_after(kubernetes, scope, not_before, timeout);
                let inventory = Inventory::new(records, hosts, namespace.clone());
                return inventory.with_sightings(shared_pods::sighted);
            }
        };
        Inventory::new(records, hosts, scope)
    }

    /// This inventory, read from the Kubernetes API, where `sighted` says
    /// which pods lockwarden saw end before.
    fn with_sightings(self, sighted: Sighted) -> Inventory {
        Inventory {
            sighted: Some(sighted),
            ..self
        }
    }

    /// An inventory of `records` (and when they were taken) for `hosts`,
    /// of namespace `scope` alone if given: a scope whose pods could not
    /// be listed fails the reading.
    fn new(
        records: Result<(Records, i64), String>,
        hosts: Regex,
        scope: Option<String>,
    ) -> Inventory {
        let reading = records.and_then(|(records, taken_at)| {
            if let Some((namespace, why)) = scope
                .as_ref()
                .and_then(|ns| records.failed.get_key_value(ns))
            {
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
            sighted: None,
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
            scope.map(str::to_owned),
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
            Ok(reading) if !reading.covers_any && self.sighted.is_none() => Some(format!(
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

    /// ` in namespace NS` when scoped, else nothing.
    fn scope_shown(&self) -> String {
        self.scope
            .as_deref()
            .map(|ns| format!(" in namespace {}", crate::text::escape(ns)))
            .unwrap_or_default()
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
        let records: Vec<&HostRecord> = reading
            .records
            .records
            .get(hostname)
            .into_iter()
            .flatten()
            .filter(|r| in_scope(r, self.scope.as_deref()))
            .collect();
        if records.is_empty() {
            return self.absent(hostname, &shown, reading, observed);
        }
        // Several pods may answer to one hostname (spec.hostname, a name
        // kubelet shortened): gone only when every one of them says so.
        let answers: Vec<Liveness> = records
            .into_iter()
            .map(|r| judge(r, &shown, since))
            .collect();
        answers
            .iter()
            .find(|a| !matches!(a, Liveness::Dead(_)))
            .or(answers.first())
            .cloned()
            .unwrap_or_else(|| Liveness::Unknown(format!("pod {shown} has no record")))
    }
}

impl Inventory {
    /// The answer for `hostname` (`shown` escaped), which `reading` does
    /// not list, about a lock first seen at `observed`. Absence speaks only
    /// where the reading has the authority to say a pod is gone:
    ///
    /// 1. it lists some host the regex covers (in its scope): an answer
    ///    that sees none of them is what a wrong namespace or missing
    ///    permissions give; or, read from the Kubernetes API (which refuses
    ///    a listing it does not allow), lockwarden saw this very pod end
    ///    there before the reading (Succeeded, Failed, or deleted with
    ///    every container stopped: [`super::pod_watch`]);
    /// 2. it misses no namespace it could hold the pod in;
    /// 3. it began after lockwarden first saw the lock, whose writer
    ///    existed before the lock did.
    fn absent(
        &self,
        hostname: &str,
        shown: &str,
        reading: &Reading,
        observed: Option<i64>,
    ) -> Liveness {
        let seen_before = || {
            self.sighted
                .is_some_and(|seen| seen(self.scope.as_deref(), hostname, reading.taken_at))
        };
        if !reading.covers_any && !seen_before() {
            return Liveness::Unknown(format!(
                "pod {shown} is not in the inventory, but the inventory lists no host matching \
                 {}{} at all (wrong namespace or missing permissions?), and lockwarden has not \
                 seen this pod before, so its absence proves nothing",
                self.hosts.as_str(),
                self.scope_shown()
            ));
        }
        if let Some(blind) = self.blind_spots() {
            return Liveness::Unknown(format!("pod {shown} is not in the inventory, but {blind}"));
        }
        match observed {
            Some(observed) if observed < reading.taken_at => {
                Liveness::Dead(format!("pod {shown} no longer exists"))
            }
            _ => Liveness::Unknown(format!(
                "pod {shown} is not in the inventory, but the inventory was taken at {}, \
                 before lockwarden saw this lock, so its absence proves nothing",
                format_rfc3339(reading.taken_at)
            )),
        }
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
            "every container of pod {shown} that could hold the lock restarted since it was written (the earliest at {})",
            format_rfc3339(started)
        ));
    }
    Liveness::Unknown(format!(
        "pod {shown} is {}, but whether the process that wrote the lock runs is unknown",
        record.state
    ))
}

/// Whether `record` answers in an inventory scoped to `scope`.
fn in_scope(record: &HostRecord, scope: Option<&str>) -> bool {
    scope.is_none_or(|ns| record.namespace.as_deref() == Some(ns))
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
    fn new(records: Records, taken_at: i64, hosts: &Regex, scope: Option<&str>) -> Reading {
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

    #[test]
    fn a_pod_seen_before_speaks_where_no_pod_of_its_pattern_is_left() {
        let since = parse_rfc3339(LOCK).expect("time");
        let regex = Regex::new("^backup-").expect("regex");
        let taken_at = since + 10 * MINUTE;
        let seen = Some(since + MINUTE);
        // What the pod watch saw: backup-gone in namespace c, before this
        // reading; backup-late in c only after it began.
        let sighted: Sighted = |scope, hostname, before| {
            let since = parse_rfc3339(LOCK).expect("time");
            match (scope, hostname) {
                (Some("c"), "backup-gone") => since < before,
                (Some("c"), "backup-late") => since + 11 * MINUTE < before,
                _ => false,
            }
        };
        let read = |scope: &str, failed: &[&str]| {
            Inventory::from_pods(tenants(failed), regex.clone(), taken_at, Some(scope))
                .with_sightings(sighted)
        };
        let c = read("c", &[]);
        assert_eq!(c.problem(), None, "between two jobs is no problem");
        assert_eq!(kind(&c.host("backup-gone", since, seen)), "dead");
        for (host, observed, why) in [
            ("backup-other", seen, "a pod never seen there"),
            ("backup-late", seen, "seen only after the reading began"),
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
        let blind = read("c", &["c"]);
        assert_eq!(kind(&blind.host("backup-gone", since, seen)), "unknown");
        // The same reading from a file or a command has no sightings.
        let plain = Inventory::from_pods(tenants(&[]), regex.clone(), taken_at, Some("c"));
        assert!(plain.problem().is_some());
        assert_eq!(kind(&plain.host("backup-gone", since, seen)), "unknown");
    }
}
