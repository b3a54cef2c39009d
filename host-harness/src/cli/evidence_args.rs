//! Where evidence about lock holders comes from: this machine's processes, a
//! host inventory, and the first-seen store.

use std::path::PathBuf;

use clap::Args;
use lockwarden::evidence::EvidenceOptions;
use lockwarden::first_seen::FirstSeenStore;

/// Evidence options shared by `check`, `unlock`, `run` and `watch` (where a
/// repository's own `evidence` table replaces them).
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
    /// These options as the library takes them (checked when a warden is
    /// configured with them).
    pub fn options(&self) -> EvidenceOptions {
        EvidenceOptions {
            trust_local_pids: self.trust_local_pids,
            hosts_file: self.hosts_file.clone(),
            hosts_command: self.hosts_command.clone(),
            inventory_hosts: self.inventory_hosts.clone(),
        }
    }

    /// The first-seen store, when `--state-dir` was given.
    pub fn first_seen(&self) -> Option<FirstSeenStore> {
        self.state_dir.clone().map(FirstSeenStore::new)
    }
}
