//! The rules' own types: what a contract's records are converted to and from.

use alloc::{string::String, vec::Vec};

/// One lock the host read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lock {
    /// The lock file's name.
    pub id: String,
    /// When the holder wrote it, by the holder's clock (ns since the epoch).
    pub time: i64,
    /// An exclusive lock.
    pub exclusive: bool,
    /// The holder's hostname.
    pub hostname: String,
    /// The holder's user name.
    pub username: String,
    /// The holder's pid.
    pub pid: i64,
    /// When the host first saw it, by the host's clock.
    pub first_seen: Option<i64>,
    /// When the storage last modified it, by the storage's clock.
    pub stored_at: Option<i64>,
}

/// One lock file the host could not read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    /// The file's name.
    pub id: String,
    /// Its size in bytes.
    pub size: u64,
    /// What is wrong with it.
    pub problem: String,
    /// When the storage last modified it, by the storage's clock.
    pub stored_at: Option<i64>,
    /// When the host first saw it, by the host's clock.
    pub first_seen: Option<i64>,
}

/// Evidence about a holder, with how the host knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Liveness {
    /// The holder certainly exists.
    Alive(String),
    /// The holder certainly no longer exists.
    Dead(String),
    /// The host cannot tell.
    Unknown(String),
}

impl Liveness {
    /// How the host knows.
    pub fn detail(&self) -> &str {
        match self {
            Liveness::Alive(d) | Liveness::Dead(d) | Liveness::Unknown(d) => d,
        }
    }
}

/// A question about a lock's holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Question {
    /// Whether process `pid` on `hostname`, which wrote a lock at `since`,
    /// still holds it.
    Process {
        /// The lock's hostname.
        hostname: String,
        /// The lock's pid.
        pid: i64,
        /// The lock's time.
        since: i64,
    },
    /// Whether host `hostname`, which wrote a lock at `since`, still exists.
    Host {
        /// The lock's hostname.
        hostname: String,
        /// The lock's time.
        since: i64,
    },
}

/// What to do with a lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Leave it.
    Keep,
    /// Delete it.
    Remove,
}

/// The decision about one input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// What to do.
    pub action: Action,
    /// The rule that decided.
    pub rule: &'static str,
    /// Why, for humans.
    pub reason: String,
}

/// Why the policy could not decide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyError {
    /// A setting is unknown or invalid.
    InvalidSetting(String),
}

/// One setting the policy accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettingInfo {
    /// Its key.
    pub name: String,
    /// Its default.
    pub default_value: String,
    /// What it does and accepts.
    pub help: String,
}

/// What the policy says about itself (the contract version is the build's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Info {
    /// Its name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// What it decides and how.
    pub description: String,
    /// Its settings.
    pub settings: Vec<SettingInfo>,
}
