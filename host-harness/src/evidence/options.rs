//! Which evidence a check gathers, as a user writes it: on the command line
//! (`--hosts-command`, ...) or in a watched repository's `evidence` table.

use crate::error::{Classify, ErrorKind};
use std::path::PathBuf;
use std::time::Duration;

use regex::Regex;
use serde::Deserialize;

use super::{EvidenceConfig, InventorySource};

/// The evidence options: one struct for the command line (`--hosts-command`,
/// ...) and a watched repository's `evidence` table (`hosts_command`, ...).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, clap::Args)]
#[serde(deny_unknown_fields)]
pub struct EvidenceOptions {
    /// Trust that pids in locks written on this hostname are this pid
    /// namespace's, even when lockwarden runs in a container.
    #[serde(default)]
    #[arg(long)]
    pub trust_local_pids: bool,
    /// JSON host inventory (a Kubernetes PodList or [{"name", "started",
    /// "state"}]), read at each check.
    #[arg(long, value_name = "FILE", conflicts_with = "hosts_command")]
    pub hosts_file: Option<PathBuf>,
    /// Shell command printing the host inventory, run at each check (e.g.
    /// `kubectl get pods -A -o json`).
    #[arg(long, value_name = "COMMAND", conflicts_with = "hosts_kubernetes")]
    pub hosts_command: Option<String>,
    /// The host inventory is every pod the Kubernetes API lists (in-cluster
    /// service account or kubeconfig), read at each check.
    #[serde(default)]
    #[arg(long, conflicts_with = "hosts_file")]
    pub hosts_kubernetes: bool,
    /// The hostnames the inventory is authoritative for (a regex, anchored
    /// by you: e.g. `^velero-`). Required with an inventory.
    #[arg(long, value_name = "REGEX")]
    pub inventory_hosts: Option<String>,
}

/// Why evidence options are refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvidenceError {
    /// Both inventory sources were given.
    #[error("hosts-file, hosts-command and hosts-kubernetes are mutually exclusive; give one")]
    TwoInventories,
    /// An inventory without the hosts it covers.
    #[error(
        "hosts-file/hosts-command/hosts-kubernetes need inventory-hosts REGEX: the hostnames the inventory is \
         authoritative for (see docs/evidence.md on when a host it does not list is taken as gone)"
    )]
    NoCoverage,
    /// Covered hosts without an inventory.
    #[error("inventory-hosts needs hosts-file, hosts-command or hosts-kubernetes")]
    NoInventory,
    /// The regex does not compile.
    #[error("inventory-hosts: {0}")]
    BadRegex(String),
}

impl EvidenceOptions {
    /// The evidence these options describe; a hosts command may run for
    /// `timeout`. The regex is compiled once, here.
    pub fn config(&self, timeout: Duration) -> Result<EvidenceConfig, EvidenceError> {
        let source = match (&self.hosts_file, &self.hosts_command, self.hosts_kubernetes) {
            (Some(file), None, false) => Some(InventorySource::File(file.clone())),
            (None, Some(command), false) => Some(InventorySource::Command(command.clone())),
            (None, None, true) => Some(InventorySource::Kubernetes { namespaces: None }),
            (None, None, false) => None,
            _ => return Err(EvidenceError::TwoInventories),
        };
        let inventory = match (source, &self.inventory_hosts) {
            (None, None) => None,
            (Some(_), None) => return Err(EvidenceError::NoCoverage),
            (None, Some(_)) => return Err(EvidenceError::NoInventory),
            (Some(source), Some(regex)) => {
                let hosts = Regex::new(regex).map_err(|e| {
                    EvidenceError::BadRegex(crate::text::escape(&e.to_string()).into_owned())
                })?;
                Some((source, hosts))
            }
        };
        Ok(EvidenceConfig {
            trust_local_pids: self.trust_local_pids,
            inventory,
            timeout,
        })
    }
}

/// Evidence options are the user's to fix.
impl Classify for EvidenceError {
    fn kind(&self) -> ErrorKind {
        match self {
            EvidenceError::TwoInventories
            | EvidenceError::NoCoverage
            | EvidenceError::NoInventory
            | EvidenceError::BadRegex(_) => ErrorKind::Usage,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_inventory_needs_its_hosts_and_one_source() {
        let timeout = Duration::from_secs(1);
        let with = |file: bool, command: bool, hosts: Option<&str>| EvidenceOptions {
            hosts_file: file.then(|| "/h.json".into()),
            hosts_command: command.then(|| "kubectl get pods -o json".into()),
            inventory_hosts: hosts.map(str::to_owned),
            ..EvidenceOptions::default()
        };
        assert!(with(false, false, None).config(timeout).is_ok());
        assert!(with(true, false, Some("^velero-")).config(timeout).is_ok());
        let refused = [
            (with(true, true, Some("^v")), EvidenceError::TwoInventories),
            (with(false, true, None), EvidenceError::NoCoverage),
            (with(false, false, Some("^v")), EvidenceError::NoInventory),
        ];
        for (options, want) in refused {
            assert_eq!(options.config(timeout).err(), Some(want));
        }
        assert!(matches!(
            with(true, false, Some("(")).config(timeout),
            Err(EvidenceError::BadRegex(_))
        ));
    }
}
