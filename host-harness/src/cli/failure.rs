//! A command's failure: the error chain to print, and the one
//! [`ErrorKind`] that decides the exit code, carried from where the error
//! was made. Every library error becomes a [`Failure`] through
//! [`Classify`] (so a new error type that does not say its kind does not
//! compile); anything else is given its kind where it happens.

use lockwarden::error::{Classify, ErrorKind};

/// Why a command failed.
#[derive(Debug)]
pub struct Failure {
    kind: ErrorKind,
    error: anyhow::Error,
}

/// What a command, or a step of one, returns.
pub type Outcome<T> = Result<T, Failure>;

impl Failure {
    /// A failure of `kind`.
    pub fn new(kind: ErrorKind, error: impl Into<anyhow::Error>) -> Failure {
        Failure {
            kind,
            error: error.into(),
        }
    }

    /// A failure that is none of the user's kinds: exit code 1.
    pub fn failed(error: impl Into<anyhow::Error>) -> Failure {
        Failure::new(ErrorKind::Failed, error)
    }

    /// A failure of what the user asked for: exit code 2.
    pub fn usage(message: impl Into<String>) -> Failure {
        Failure::new(ErrorKind::Usage, anyhow::Error::msg(message.into()))
    }

    /// Its kind.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The same failure, said after `context`.
    pub fn context(self, context: impl std::fmt::Display + Send + Sync + 'static) -> Failure {
        Failure {
            kind: self.kind,
            error: self.error.context(context),
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#}", self.error)
    }
}

impl<E> From<E> for Failure
where
    E: Classify + std::error::Error + Send + Sync + 'static,
{
    fn from(error: E) -> Failure {
        Failure::new(error.kind(), error)
    }
}

/// `.context(...)` that keeps the kind of a library error.
pub trait Context<T> {
    /// The error, if any, said after `context`.
    fn context(self, context: &'static str) -> Outcome<T>;
}

impl<T, E: Into<Failure>> Context<T> for Result<T, E> {
    fn context(self, context: &'static str) -> Outcome<T> {
        self.map_err(|e| e.into().context(context))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lockwarden::repo::RepoError;

    #[test]
    fn the_kind_travels_with_the_error_through_context() {
        let denied = RepoError::Denied {
            cause: "403".into(),
        };
        let failure: Failure = Err::<(), _>(denied)
            .context("opening")
            .expect_err("an error");
        assert_eq!(failure.kind(), ErrorKind::Denied);
        assert!(failure.to_string().starts_with("opening: 403"), "{failure}");
        assert_eq!(
            Failure::usage("a bad flag").kind(),
            ErrorKind::Usage,
            "usage"
        );
    }
}
