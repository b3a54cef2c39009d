//! Why an object store's answer was not taken (a redirect, a body past its
//! bound, a listing that would never end): what the connector
//! ([`super::http`]) and the listing check ([`super::listing`]) refuse.

use object_store::client::{HttpError, HttpErrorKind};

/// Why an answer was not taken, in words that hold no secret (never the
/// URL, nor a header).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// A 3xx.
    #[error("the storage answered {status} with a redirect, which lockwarden never follows")]
    Redirect {
        /// The status.
        status: u16,
    },
    /// A body past its bound.
    #[error(
        "the storage answered {status} with a body larger than {limit} bytes, more than lockwarden reads"
    )]
    TooLarge {
        /// The status the body came with.
        status: u16,
        /// The bound.
        limit: u64,
    },
    /// A listing page whose next continuation token is the one it was
    /// asked with.
    #[error(
        "the storage's listing gave back the continuation token it was sent, so it would never end"
    )]
    RepeatedToken,
}

impl Refusal {
    /// The HTTP status it came with, when one did.
    pub fn status(&self) -> Option<u16> {
        match self {
            Refusal::Redirect { status } | Refusal::TooLarge { status, .. } => Some(*status),
            Refusal::RepeatedToken => None,
        }
    }
}

impl From<Refusal> for HttpError {
    /// Never retried: the same request would be answered the same way.
    fn from(refusal: Refusal) -> HttpError {
        HttpError::new(HttpErrorKind::Decode, refusal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_say_what_happened_and_keep_the_status() {
        let redirect = Refusal::Redirect { status: 307 };
        assert!(redirect.to_string().contains("never follows"), "{redirect}");
        assert_eq!(redirect.status(), Some(307));
        let large = Refusal::TooLarge {
            status: 403,
            limit: 16,
        };
        assert!(
            large.to_string().contains("larger than 16 bytes"),
            "{large}"
        );
        assert_eq!(large.status(), Some(403));
        assert_eq!(Refusal::RepeatedToken.status(), None);
    }
}
