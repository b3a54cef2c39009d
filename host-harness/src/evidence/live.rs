//! The evidence a real check uses: this machine's processes, an optional host
//! inventory, and the restic processes lockwarden itself started.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use regex::Regex;

use super::{Evidence, Inventory, InventorySource, LinuxProcesses, LocalProcesses, ProcessTable};
use super::{hostname, pid_namespace_problem};
use crate::contract::Liveness;

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

impl EvidenceConfig {
    /// Gathers evidence for one check, after its locks were listed: reads
    /// the inventory now, so that it is younger than every lock in
    /// `observed`. A failed or empty inventory is logged and answers
    /// `unknown` for every host.
    pub fn gather(
        &self,
        children: Option<OwnChildren>,
        observed: Observations,
    ) -> Arc<dyn Evidence> {
        let untrusted = if self.trust_local_pids {
            None
        } else {
            pid_namespace_problem()
        };
        let processes = LocalProcesses::new(LinuxProcesses::new(), hostname(), untrusted);
        let inventory = self.inventory.as_ref().map(|(source, hosts)| {
            let inventory = Inventory::read(source, hosts.clone(), self.timeout);
            if let Some(problem) = inventory.problem() {
                tracing::warn!(
                    "host inventory unusable, no host counts as gone: {}",
                    crate::text::escape(&problem)
                );
            }
            inventory
        });
        Arc::new(LiveEvidence::new(processes, inventory, children).observed(observed))
    }
}

/// Pids of restic processes that lockwarden started and that still run
/// (`lockwarden run`); their locks are known alive.
pub type OwnChildren = Arc<Mutex<HashSet<i64>>>;

/// Processes, inventory and own children, combined.
pub struct LiveEvidence<T> {
    processes: LocalProcesses<T>,
    inventory: Option<Inventory>,
    children: Option<OwnChildren>,
    observed: Observations,
}

impl<T: ProcessTable> LiveEvidence<T> {
    /// Evidence from `processes`, with `inventory` answering host questions
    /// when given, and `children` known alive.
    pub fn new(
        processes: LocalProcesses<T>,
        inventory: Option<Inventory>,
        children: Option<OwnChildren>,
    ) -> Self {
        LiveEvidence {
            processes,
            inventory,
            children,
            observed: Observations::new(),
        }
    }

    /// When each lock was first seen, for the inventory's absence rule.
    pub fn observed(mut self, observed: Observations) -> Self {
        self.observed = observed;
        self
    }
}

impl<T: ProcessTable> Evidence for LiveEvidence<T> {
    fn local_hostname(&self) -> Option<String> {
        self.processes.local_hostname()
    }

    fn process(&self, hostname: &str, pid: i64, since: i64) -> Liveness {
        let own = self
            .children
            .as_ref()
            .and_then(|c| c.lock().ok().map(|set| set.contains(&pid)))
            .unwrap_or(false);
        if own && self.local_hostname().as_deref() == Some(hostname) {
            return Liveness::Alive(format!(
                "process {pid} is a restic that lockwarden started and that still runs"
            ));
        }
        self.processes.process(hostname, pid, since)
    }

    fn host(&self, hostname: &str, since: i64) -> Liveness {
        match &self.inventory {
            Some(inventory) => {
                let observed = self.observed.get(&(hostname.to_owned(), since)).copied();
                inventory.host(hostname, since, observed)
            }
            None => self.processes.host(hostname, since),
        }
    }
}
