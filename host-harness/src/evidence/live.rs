//! The evidence a real check uses: the restic processes lockwarden itself
//! started, this machine's processes, and an optional host inventory,
//! combined by [`super::compose`]'s rule.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use regex::Regex;

use super::compose::{Composed, Source};
use super::{Evidence, Inventory, InventorySource, LinuxProcesses, LocalProcesses};
use super::{hostname, pid_namespace_problem};
use crate::contract::Liveness;
use crate::kubernetes::Connection;

/// Where a check's evidence comes from; [`EvidenceConfig::gather`] reads it
/// anew for each check.
#[derive(Debug, Clone)]
pub struct EvidenceConfig {
    /// Trust pids in locks from this hostname even in a container.
    pub trust_local_pids: bool,
    /// The host inventory and the hostnames it is authoritative for.
    pub inventory: Option<(InventorySource, Regex)>,
    /// How long the hosts command may run.
    pub timeout: Duration,
}

impl Default for EvidenceConfig {
    fn default() -> Self {
        EvidenceConfig {
            trust_local_pids: false,
            inventory: None,
            timeout: crate::command::DEFAULT_TIMEOUT,
        }
    }
}

/// When lockwarden first saw each lock, by its own clock, keyed by the
/// lock's (hostname, time): what the inventory compares its own time with.
pub type Observations = HashMap<(String, i64), i64>;

/// Pids of restic processes that lockwarden started and that still run
/// (`lockwarden run`); their locks are known alive.
pub type OwnChildren = Arc<Mutex<HashSet<i64>>>;

impl EvidenceConfig {
    /// Whether the inventory is the pods of the Kubernetes API: then the
    /// binary's edge makes a client ([`Connection::when`]) for
    /// [`EvidenceConfig::gather`].
    pub fn reads_kubernetes(&self) -> bool {
        matches!(
            self.inventory,
            Some((InventorySource::Kubernetes { .. }, _))
        )
    }

    /// Gathers evidence for one check, after its locks were listed: reads
    /// the inventory now (the pods through `kubernetes`, the client handed
    /// down), so that it is younger than every lock in `observed`. A failed
    /// or empty inventory is logged and answers `unknown` for every host.
    /// With no lock observed there is no holder to ask about, and the
    /// inventory is not read: a repository between backups costs no pod
    /// listing.
    pub fn gather(
        &self,
        children: Option<OwnChildren>,
        kubernetes: &Connection,
        observed: Observations,
    ) -> Arc<dyn Evidence> {
        let untrusted = if self.trust_local_pids {
            None
        } else {
            pid_namespace_problem()
        };
        let local = hostname();
        let mut sources: Vec<Box<dyn Source>> = Vec::new();
        if let Some(children) = children {
            sources.push(Box::new(Children {
                pids: children,
                hostname: local.clone(),
            }));
        }
        sources.push(Box::new(LocalProcesses::new(
            LinuxProcesses::new(),
            local.clone(),
            untrusted,
        )));
        if let Some((source, hosts)) = self.inventory.as_ref().filter(|_| !observed.is_empty()) {
            // A listing begun after every lock of this check was seen.
            let not_before = observed
                .values()
                .copied()
                .max()
                .unwrap_or_else(crate::time::now);
            let inventory =
                Inventory::read(source, kubernetes, hosts.clone(), self.timeout, not_before);
            if let Some(problem) = inventory.problem() {
                tracing::warn!(
                    "host inventory unusable, no host counts as gone: {}",
                    crate::text::escape(&problem)
                );
            }
            if let Some(blind) = inventory.blind_spots() {
                tracing::warn!("host inventory incomplete: {}", crate::text::escape(&blind));
            }
            sources.push(Box::new(inventory.observed(observed)));
        }
        Arc::new(Composed::new(local, sources))
    }
}

/// The restic processes lockwarden started: alive while they run.
struct Children {
    pids: OwnChildren,
    hostname: Option<String>,
}

impl Source for Children {
    fn process(&self, hostname: &str, pid: i64, _since: i64) -> Option<Liveness> {
        let own = self.pids.lock().ok().is_some_and(|set| set.contains(&pid));
        (own && self.hostname.as_deref() == Some(hostname)).then(|| {
            Liveness::Alive(format!(
                "process {pid} is a restic that lockwarden started and that still runs"
            ))
        })
    }

    fn host(&self, _hostname: &str, _since: i64) -> Option<Liveness> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_inventory_is_read_only_when_a_lock_was_observed() {
        let dir = tempfile::tempdir().expect("temp dir");
        let marker = dir.path().join("read");
        let command = format!("touch {}; echo '[]'", marker.display());
        let config = EvidenceConfig {
            inventory: Some((
                InventorySource::Command(command),
                Regex::new("^backup-").expect("regex"),
            )),
            ..EvidenceConfig::default()
        };
        let none = Connection::none();
        config.gather(None, &none, Observations::new());
        assert!(!marker.exists(), "read with no lock to judge");
        let one = Observations::from([(("backup-1".to_owned(), 1), 2)]);
        config.gather(None, &none, one);
        assert!(marker.exists(), "not read for a lock");
    }
}
