//! What the host gives a policy: the time, evidence about lock holders, and a
//! log. Policies see none of the machine except through these.

pub(crate) mod inventory;
mod live;
mod process;
#[cfg(target_os = "linux")]
mod process_linux;
mod recorded;

pub use inventory::{HostRecord, Inventory, InventorySource};
pub use live::{EvidenceConfig, LiveEvidence, Observations, OwnChildren};
pub use process::{LocalProcesses, Probe, ProcessTable};
#[cfg(target_os = "linux")]
pub use process_linux::{LinuxProcesses, hostname, pid_namespace_problem};
pub use recorded::Recorded;

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

/// The level of a message a policy logs.
pub use crate::contract::lockwarden::policy::log::Level as LogLevel;

/// One message a policy logged during an evaluation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// How important it is.
    pub level: LogLevel,
    /// What the policy said (truncated to a sane length).
    pub message: String,
}

impl LogLine {
    /// Logs this line at its own level through `tracing`, naming the policy;
    /// control characters in the message and the name are escaped.
    pub fn emit(&self, policy: &str) {
        let policy = crate::text::escape(policy);
        let message = crate::text::escape(&self.message);
        match self.level {
            LogLevel::Debug => tracing::debug!(%policy, "{message}"),
            LogLevel::Info => tracing::info!(%policy, "{message}"),
            LogLevel::Warn => tracing::warn!(%policy, "{message}"),
            LogLevel::Error => tracing::error!(%policy, "{message}"),
        }
    }
}
