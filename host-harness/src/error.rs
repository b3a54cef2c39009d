//! What kind of failure an error is, for every error type of this library:
//! the one place the command line's exit codes come from.

use crate::evidence::EvidenceError;
use crate::repo::location::LocationError;
use crate::repo::{PasswordError, RepoError};
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
    /// Anything else; nothing was removed after it.
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
            WatchError::Evidence { .. } => ErrorKind::Usage,
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

/// The kind of `error` if it is one of this library's errors.
pub fn kind_of(error: &(dyn std::error::Error + 'static)) -> Option<ErrorKind> {
    macro_rules! try_as {
        ($($t:ty),*) => {$(
            if let Some(e) = error.downcast_ref::<$t>() {
                return Some(e.kind());
            }
        )*};
    }
    try_as!(
        RepoError,
        PluginError,
        LoadError,
        WardenError,
        WatchError,
        PasswordError,
        UsageError,
        LocationError,
        EvidenceError,
        ConfigError
    );
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrappers_take_the_kind_of_what_they_wrap() {
        let wrong = RepoError::WrongPassword {
            location: "/r".into(),
            detail: "1 tried".into(),
        };
        let wrapped = WardenError::Repo(wrong);
        assert_eq!(kind_of(&wrapped), Some(ErrorKind::WrongPassword));
        assert_eq!(kind_of(&PasswordError::Empty), Some(ErrorKind::Usage));
        assert_eq!(kind_of(&std::fmt::Error), None);
    }
}
