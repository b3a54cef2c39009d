//! One watched repository's settings, as `watch` checks it: made from a
//! `[[repository]]` entry of the configuration ([`super::config`]) or from
//! an object discovery found ([`super::discover`]), with what the command
//! line gives every repository that names none of its own ([`Defaults`]).
//! Both build on this module; it knows neither.

use std::time::Duration;

use serde::Deserialize;

use crate::evidence::EvidenceConfig;
use crate::repository_settings::RepositorySettings;
use crate::runtime::PolicySource;
use crate::watch::notify::settings::NotifySettings;
use crate::watch::owner::Owner;

/// The shortest interval: a check more often than this only burns CPU (and,
/// on object storage, money).
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);

/// What the command line gives every repository that names none of its own:
/// `--policy`, `--shadow-policy` and the evidence options.
#[derive(Debug, Clone, Default)]
pub struct Defaults {
    /// The evidence of a repository without an `evidence` table, configured
    /// once; each such repository takes it with its own timeout.
    pub evidence: EvidenceConfig,
    /// The policy of a repository that names none (else the built-in one).
    pub policy: Option<PolicySource>,
    /// The shadow policy of a repository that names none.
    pub shadow_policy: Option<PolicySource>,
}

/// One watched repository, made once at load.
#[derive(Debug)]
pub struct WatchedRepository {
    /// A name for logs and metric labels; never a secret.
    pub name: String,
    /// How it is reached and judged.
    pub settings: RepositorySettings,
    /// How often to check (at least [`MIN_INTERVAL`]).
    pub interval: Duration,
    /// Unlock or report.
    pub mode: Mode,
    /// The notification settings in effect: its own `notify`, else the
    /// global `[notify]`, else none (events are only logged).
    pub notify: NotifySettings,
    /// The object it was discovered in (none for a `[[repository]]`).
    pub owner: Option<Owner>,
}

/// What `watch` does about stale locks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Remove them.
    Unlock,
    /// Only report them (logs and metrics).
    Report,
}
