//! What the host gives a policy: the time, evidence about lock holders, and a
//! log. Policies see none of the machine except through these.

pub mod compose;
mod fence;
pub(crate) mod incarnations;
pub(crate) mod inventory;
mod live;
pub(crate) mod nodes;
mod options;
pub(crate) mod pod_list;
pub mod pod_watch;
mod process;
#[cfg(target_os = "linux")]
mod process_linux;
mod recorded;
mod remembered;
mod shared_pods;

pub use compose::{Composed, Source, combine};
pub use inventory::ObservedInventory;
pub use inventory::{Inventory, InventorySource};
pub use live::{EvidenceConfig, Observations, OwnChildren};
pub use options::{EvidenceError, EvidenceOptions};
pub use pod_list::HostRecord;
pub use process::{LocalProcesses, Probe, ProcessTable};
#[cfg(target_os = "linux")]
pub use process_linux::{LinuxProcesses, ProcessId, hostname, pid_namespace_problem, process_tree};
pub use recorded::Recorded;
pub use remembered::Remembered;

use crate::contract::Liveness;

/// Evidence about lock holders, served to a policy through the
/// `lockwarden:policy/liveness` import.
pub trait Evidence: Send + Sync {
    /// This machine's hostname, if known.
    fn local_hostname(&self) -> Option<String>;
    /// Whether process `pid` on `hostname`, which wrote a lock at `since`
    /// (ns since the epoch), still exists.
    fn process(&self, hostname: &str, pid: i64, since: i64) -> Liveness;
    /// Whether the host `hostname`, which wrote a lock at `since`, still exists.
    fn host(&self, hostname: &str, since: i64) -> Liveness;
}
