//! Why `watch` could not start: a policy that does not load, settings a
//! policy refuses, a metrics address that cannot be served.

use crate::error::{Classify, ErrorKind};
use crate::runtime::{LoadError, PluginError};

/// Why `watch` could not start.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// A policy named in the configuration failed to load.
    #[error("{}policy for repository `{repository}`: {error}", if *shadow { "shadow " } else { "" })]
    Policy {
        /// The repository's name.
        repository: String,
        /// True for the repository's shadow policy.
        shadow: bool,
        /// Why.
        error: LoadError,
    },
    /// A repository's settings are refused by its policy.
    #[error("repository `{repository}`: {}{error}", if *shadow { "shadow policy: " } else { "" })]
    Settings {
        /// The repository's name.
        repository: String,
        /// True for the shadow policy's settings.
        shadow: bool,
        /// The policy's refusal.
        error: PluginError,
    },
    /// The metrics address cannot be served.
    #[error("cannot serve metrics on {addr}: {cause}; is the address free?")]
    Metrics {
        /// The address.
        addr: String,
        /// Why.
        cause: String,
    },
}

impl Classify for WatchError {
    fn kind(&self) -> ErrorKind {
        match self {
            WatchError::Policy { error, .. } => error.kind(),
            WatchError::Settings { error, .. } => error.kind(),
            WatchError::Metrics { .. } => ErrorKind::Failed,
        }
    }
}
