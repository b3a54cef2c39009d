//! lockwarden: keeps restic repositories free of stale locks without ever
//! removing a live one.
//!
//! The decision "is this lock stale?" belongs to a policy, a WASI component
//! that implements the `lockwarden:policy` contract (`wit/`). This library
//! loads and runs policies in a sandbox ([`runtime`]), serves them the facts
//! they may not gather themselves ([`evidence`]), and reads recorded requests
//! ([`request`]).

pub mod command;
pub mod conformance;
#[cfg(test)]
mod decoders_proptest;
pub mod error;
pub mod evidence;
pub mod files;
pub mod first_seen;
pub mod limits;
pub mod oci;
mod parallel;
pub mod repo;
pub mod report;
pub mod request;
pub mod runtime;
pub mod stats;
pub mod text;
pub mod time;
pub mod warden;
pub mod watch;
mod xdg;

/// Bindings generated from `wit/`, the one contract shared with policies.
#[allow(missing_docs)]
pub mod contract {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "stale-lock-policy",
        additional_derives: [PartialEq, Eq],
    });

    pub use self::lockwarden::policy::types::{
        Action, EvaluateRequest, Liveness, Lock, PolicyError, PolicyInfo, Repository, SettingInfo,
        UnreadableLock, Verdict,
    };

    /// The contract version this host implements: the WIT package version.
    pub const VERSION: &str = lockwarden_wit::VERSION;

    impl Action {
        /// `keep` or `remove`, as the contract spells it.
        pub fn name(self) -> &'static str {
            match self {
                Action::Keep => "keep",
                Action::Remove => "remove",
            }
        }
    }

    impl self::lockwarden::policy::log::Level {
        /// `debug`, `info`, `warn` or `error`, as the contract spells it.
        pub fn name(self) -> &'static str {
            use self::lockwarden::policy::log::Level;
            match self {
                Level::Debug => "debug",
                Level::Info => "info",
                Level::Warn => "warn",
                Level::Error => "error",
            }
        }
    }

    /// A lock with this id and placeholder fields, for unit tests.
    #[cfg(test)]
    pub(crate) fn test_lock(id: &str) -> Lock {
        Lock {
            id: id.into(),
            time: 0,
            exclusive: false,
            hostname: "h".into(),
            username: "u".into(),
            pid: 1,
            uid: 0,
            gid: 0,
            first_seen: None,
        }
    }
}
