//! The evidence a real check uses: this machine's processes, an optional host
//! inventory, and the restic processes lockwarden itself started.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use regex::Regex;

use super::{Evidence, Inventory, InventorySource, LinuxProcesses, LocalProcesses, ProcessTable};
use super::{hostname, pid_namespace_problem};
use crate::contract::Liveness;

/// Where a check's evidence comes from; [`EvidenceConfig::gather`] reads it
/// anew for each check.
#[derive(Debug, Clone, Default)]
pub struct EvidenceConfig {
    /// Trust pids in locks from this hostname even in a container.
    pub trust_local_pids: bool,
    /// The host inventory and the hostnames it is authoritative for.
    pub inventory: Option<(InventorySource, Regex)>,
}

impl EvidenceConfig {
    /// Gathers evidence for one check: reads the inventory now. A failed
    /// inventory is logged and answers `unknown` for every host.
    pub fn gather(&self, children: Option<OwnChildren>) -> Arc<dyn Evidence> {
        let untrusted = if self.trust_local_pids {
            None
        } else {
            pid_namespace_problem()
        };
        let processes = LocalProcesses::new(LinuxProcesses::new(), hostname(), untrusted);
        let inventory = self.inventory.as_ref().map(|(source, hosts)| {
            let inventory = Inventory::read(source, hosts.clone());
            if let Some(problem) = inventory.problem() {
                tracing::warn!("host inventory unavailable, every host is unknown: {problem}");
            }
            inventory
        });
        Arc::new(LiveEvidence::new(processes, inventory, children))
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
        }
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
            Some(inventory) => inventory.host(hostname, since),
            None => self.processes.host(hostname, since),
        }
    }
}
