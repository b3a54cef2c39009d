//! Where evidence about lock holders comes from: this machine's processes, a
//! host inventory, and the first-seen store.

use clap::Args;
use lockwarden::evidence::{EvidenceConfig, InventorySource};
use lockwarden::first_seen::FirstSeenStore;
use regex::Regex;
use std::path::PathBuf;

use super::UsageError;

/// Evidence options shared by `check`, `unlock`, `run` and `watch`.
#[derive(Debug, Args, Clone)]
pub struct EvidenceArgs {
    /// Trust that pids in locks written on this hostname are this pid
    /// namespace's, even when lockwarden runs in a container.
    #[arg(long)]
    pub trust_local_pids: bool,
    /// JSON host inventory (a Kubernetes PodList or [{"name", "started",
    /// "state"}]), read at each check.
    #[arg(long, value_name = "FILE", conflicts_with = "hosts_command")]
    pub hosts_file: Option<PathBuf>,
    /// Shell command printing the host inventory, run at each check (e.g.
    /// `kubectl get pods -A -o json`).
    #[arg(long, value_name = "COMMAND")]
    pub hosts_command: Option<String>,
    /// The hostnames the inventory is authoritative for (a regex, anchored
    /// by you: e.g. `^velero-`). Required with an inventory.
    #[arg(long, value_name = "REGEX")]
    pub inventory_hosts: Option<String>,
    /// Remember when each lock was first seen, in this directory [watch's
    /// default: $XDG_STATE_HOME/lockwarden].
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
}

impl EvidenceArgs {
    /// The evidence configuration these options describe; a wrong
    /// combination or a bad regex is a usage error. The regex is compiled
    /// once, here.
    pub fn config(&self, timeout: std::time::Duration) -> anyhow::Result<EvidenceConfig> {
        let source = match (&self.hosts_file, &self.hosts_command) {
            (Some(file), _) => Some(InventorySource::File(file.clone())),
            (None, Some(command)) => Some(InventorySource::Command(command.clone())),
            (None, None) => None,
        };
        let inventory = match (source, &self.inventory_hosts) {
            (None, None) => None,
            (Some(_), None) => {
                return Err(UsageError(
                    "--hosts-file/--hosts-command need --inventory-hosts REGEX: the hostnames the \
                     inventory is authoritative for (see the README on when a host it does not \
                     list is taken as gone)"
                        .into(),
                )
                .into());
            }
            (None, Some(_)) => {
                return Err(UsageError(
                    "--inventory-hosts needs --hosts-file or --hosts-command".into(),
                )
                .into());
            }
            (Some(source), Some(regex)) => {
                let hosts =
                    Regex::new(regex).map_err(|e| UsageError(format!("--inventory-hosts: {e}")))?;
                Some((source, hosts))
            }
        };
        Ok(EvidenceConfig {
            trust_local_pids: self.trust_local_pids,
            inventory,
            timeout,
        })
    }

    /// The first-seen store, when `--state-dir` was given.
    pub fn first_seen(&self) -> Option<FirstSeenStore> {
        self.state_dir.clone().map(FirstSeenStore::new)
    }
}
