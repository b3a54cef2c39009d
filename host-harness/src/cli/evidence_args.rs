//! Where evidence about lock holders comes from: this machine's processes, a
//! host inventory ([`EvidenceOptions`], the same struct as a watched
//! repository's `evidence` table), and the first-seen store.

use std::path::PathBuf;

use clap::Args;
use lockwarden::evidence::EvidenceOptions;
use lockwarden::first_seen::FirstSeenStore;

/// Evidence options shared by `check`, `unlock`, `run` and `watch` (where a
/// repository's own `evidence` table replaces them).
#[derive(Debug, Args, Clone)]
pub struct EvidenceArgs {
    /// Processes and the host inventory.
    #[command(flatten)]
    pub options: EvidenceOptions,
    /// Remember when each lock was first seen, in this directory [watch's
    /// default: $XDG_STATE_HOME/lockwarden].
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
}

impl EvidenceArgs {
    /// The first-seen store, when `--state-dir` was given.
    pub fn first_seen(&self) -> Option<FirstSeenStore> {
        self.state_dir.clone().map(FirstSeenStore::new)
    }
}
