//! What kind of failure an error is, for every error type of this library.
//!
//! The rules:
//!
//! - Every error type a command can fail with implements [`Classify`], and
//!   the command line's exit codes come from its [`ErrorKind`] alone
//!   (`src/cli/failure.rs` carries it, `src/cli/mod.rs` maps it to a code).
//! - The kind is decided where the error is made: each `impl Classify`
//!   stands beside its type's definition (here only [`UsageError`]'s).
//! - A `kind` matches every variant by name, never with `_`: a new variant
//!   does not compile until someone has said its kind, so none silently
//!   exits 1.
//! - A wrapper has the kind of what it wraps.
//! - A plain `String` error is only a message to show; anything a caller
//!   tells apart is a variant of a typed error.

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

impl Classify for UsageError {
    fn kind(&self) -> ErrorKind {
        ErrorKind::Usage
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hold::HoldError;
    use crate::repo::{PasswordError, RepoError};
    use crate::warden::WardenError;

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
