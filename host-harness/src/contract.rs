//! The contract shared with policies: bindings generated from `wit/`
//! (`lockwarden:policy@0.2.0`), whose types are also the host's own types for
//! locks, evidence and verdicts, and [`v0_1`], the contract 0.1.0 that hosts
//! still run.

#[allow(missing_docs)]
mod bindings {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "stale-lock-policy",
        additional_derives: [PartialEq, Eq],
    });
}

pub mod v0_1;

pub use bindings::lockwarden::policy::types::{
    Action, EvaluateRequest, HostQuestion, Liveness, Lock, PolicyError, PolicyInfo,
    ProcessQuestion, Question, Repository, SettingInfo, UnreadableLock, Verdict,
    Verdicts as PolicyVerdicts,
};
pub use bindings::lockwarden::policy::{clock, liveness, log, types};
pub use bindings::{StaleLockPolicy, StaleLockPolicyPre};

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

impl log::Level {
    /// `debug`, `info`, `warn` or `error`, as the contract spells it.
    pub fn name(self) -> &'static str {
        match self {
            log::Level::Debug => "debug",
            log::Level::Info => "info",
            log::Level::Warn => "warn",
            log::Level::Error => "error",
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
        stored_at: None,
    }
}

/// A request on a repository `r` with locks of these ids (as [`test_lock`]),
/// no unreadable files and no settings, for unit tests.
#[cfg(test)]
pub(crate) fn test_request(ids: &[&str]) -> EvaluateRequest {
    EvaluateRequest {
        repository: Repository {
            id: "r".into(),
            location: "/r".into(),
            backend: "local".into(),
            version: 2,
        },
        locks: ids.iter().map(|id| test_lock(id)).collect(),
        unreadable: Vec::new(),
        settings: Vec::new(),
    }
}
