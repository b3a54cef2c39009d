//! What kind of failure an error is, for every error type of this library:
//! each error says its own [`ErrorKind`] ([`Classify`]), wrappers the kind
//! of what they wrap, and the command line's exit codes come from that kind
//! alone.

use crate::evidence::EvidenceError;
use crate::hold::HoldError;
use crate::repo::location::LocationError;
use crate::repo::{PasswordError, RepoError};
use crate::repository_settings::SettingsRefused;
use crate::runtime::{LoadError, PluginError};
use crate::warden::WardenError;
use crate::watch::WatchError;
use crate::watch::config::ConfigError;

/// The kinds of failure a user tells apart (each has an exit code).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// What was asked is wrong: a flag, a setting, a configuration.
    Usage,
    /// No restic repository is at the location.
    NoRepository,
    /// The password opens no key.
    WrongPassword,
    /// The storage refused the credentials.
    Denied,
    /// The storage cannot be reached.
    Unreachable,
    /// A lock could not be taken or kept (`hold`): restic's "cannot lock".
    Locked,
    /// Anything else.
    Failed,
}

/// An error in what the user asked for, said in a sentence.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// An error that knows its kind.
pub trait Classify {
    /// What kind of failure this is.
    fn kind(&self) -> ErrorKind;
}

impl Classify for RepoError {
    fn kind(&self) -> ErrorKind {
        match self {
            RepoError::NoRepository { .. } => ErrorKind::NoRepository,
            RepoError::WrongPassword { .. } => ErrorKind::WrongPassword,
            RepoError::Denied { .. } => ErrorKind::Denied,
            RepoError::Unreachable { .. } => ErrorKind::Unreachable,
            _ => ErrorKind::Failed,
        }
    }
}

impl Classify for PluginError {
    fn kind(&self) -> ErrorKind {
        if self.is_usage() {
            ErrorKind::Usage
        } else {
            ErrorKind::Failed
        }
    }
}

impl Classify for SettingsRefused {
    fn kind(&self) -> ErrorKind {
        self.error.kind()
    }
}

impl Classify for LoadError {
    fn kind(&self) -> ErrorKind {
        match self {
            LoadError::Plugin(p) => p.kind(),
            _ => ErrorKind::Failed,
        }
    }
}

impl Classify for WardenError {
    fn kind(&self) -> ErrorKind {
        match self {
            WardenError::Repo(e) => e.kind(),
            WardenError::Plugin(e) => e.kind(),
            WardenError::FirstSeen(_) => ErrorKind::Failed,
        }
    }
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

impl Classify for PasswordError {
    fn kind(&self) -> ErrorKind {
        match self {
            PasswordError::Empty => ErrorKind::Usage,
            _ => ErrorKind::Failed,
        }
    }
}

/// Errors that are always the user's to fix.
macro_rules! usage {
    ($($t:ty),*) => {$(
        impl Classify for $t {
            fn kind(&self) -> ErrorKind {
                ErrorKind::Usage
            }
        }
    )*};
}
usage!(UsageError, LocationError, EvidenceError, ConfigError);

/// Errors that are none of the kinds a user tells apart.
macro_rules! failed {
    ($($t:ty),*) => {$(
        impl Classify for $t {
            fn kind(&self) -> ErrorKind {
                ErrorKind::Failed
            }
        }
    )*};
}
failed!(crate::oci::OciError);

impl Classify for HoldError {
    fn kind(&self) -> ErrorKind {
        match self {
            HoldError::Locked(_) | HoldError::Lost(_) => ErrorKind::Locked,
            HoldError::Repo(e) | HoldError::NotReleased { cause: e, .. } => e.kind(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrappers_take_the_kind_of_what_they_wrap() {
        let wrong = || RepoError::WrongPassword {
            location: "/r".into(),
            detail: "1 tried".into(),
        };
        assert_eq!(WardenError::Repo(wrong()).kind(), ErrorKind::WrongPassword);
        assert_eq!(HoldError::Repo(wrong()).kind(), ErrorKind::WrongPassword);
        assert_eq!(HoldError::Lost("gone".into()).kind(), ErrorKind::Locked);
        assert_eq!(PasswordError::Empty.kind(), ErrorKind::Usage);
    }
}
