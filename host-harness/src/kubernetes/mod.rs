//! The Kubernetes API: pods as evidence about lock holders
//! ([`pods`]), the backup operators' objects `watch` discovers repositories
//! from, Events on them and the leader's Lease.
//!
//! One client per process, configured as kubectl is: the pod's service
//! account inside a cluster, else `KUBECONFIG` or `~/.kube/config`
//! ([`Kubernetes::shared`]). Every call has a deadline (the repository's
//! timeout) and every answer is bounded ([`crate::limits::KUBERNETES_RESPONSE`]);
//! nothing follows a redirect, nothing is retried behind the caller's back,
//! and no header is logged.

mod client;
mod deep_json;
pub mod pods;

pub use client::{Kubernetes, Listing};

#[cfg(test)]
mod tests {
    #[test]
    fn only_the_apis_own_names_go_into_a_path() {
        for good in ["velero", "a", "repo-1.backup", "x".repeat(253).as_str()] {
            assert!(super::is_object_name(good), "{good}");
        }
        for bad in [
            "",
            "..",
            ".",
            "a/b",
            "A",
            "-a",
            "a-",
            "a%2Fb",
            "a b",
            "é",
            "x".repeat(254).as_str(),
        ] {
            assert!(!super::is_object_name(bad), "{bad}");
        }
    }

    #[test]
    fn times_are_written_in_the_layouts_the_api_server_parses() {
        let nanos = 1_764_700_000_123_456_789;
        assert_eq!(super::time(nanos), "2025-12-02T18:26:40Z");
        assert_eq!(super::micro_time(nanos), "2025-12-02T18:26:40.123456Z");
    }
}

/// Why a call to the API failed. Never holds a credential: a Secret's data
/// is never part of an error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KubeError {
    /// No configuration was found, or it cannot be used.
    #[error("no usable Kubernetes configuration (in-cluster or kubeconfig): {0}")]
    Config(String),
    /// The API server answered with an error status.
    #[error("{what}: the API server said {code} {reason}: {message}")]
    Refused {
        /// What was asked.
        what: String,
        /// The HTTP status.
        code: u16,
        /// Its reason (`Forbidden`, `NotFound`, ...).
        reason: String,
        /// Its message.
        message: String,
    },
    /// No answer within the deadline; the request was dropped.
    #[error("{what}: no answer within {timeout} (--timeout)")]
    NoAnswer {
        /// What was asked.
        what: String,
        /// The deadline, as text.
        timeout: String,
    },
    /// Anything else (unreachable, an answer too large or not JSON).
    #[error("{what}: {cause}")]
    Failed {
        /// What was asked.
        what: String,
        /// Why.
        cause: String,
    },
}

/// Whether `name` may stand as one segment of an API path: a name the API
/// gives objects (a DNS subdomain: lower-case letters, digits, `-` and `.`,
/// starting and ending with a letter or digit, at most 253 bytes). Names
/// read from an answer or a file are checked before they go into a path,
/// so that none can climb out of it (`..`) or change it.
pub fn is_object_name(name: &str) -> bool {
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    name.len() <= 253
        && edge(name.chars().next())
        && edge(name.chars().last())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
}

/// `nanos` (since the epoch) as the API's `Time`: RFC 3339 in UTC, whole
/// seconds (an Event's timestamps).
pub fn time(nanos: i64) -> String {
    format_time(nanos, "%Y-%m-%dT%H:%M:%SZ")
}

/// `nanos` as the API's `MicroTime`: six fractional digits (a Lease's
/// times, which the API server parses with exactly that layout).
pub fn micro_time(nanos: i64) -> String {
    format_time(nanos, "%Y-%m-%dT%H:%M:%S%.6fZ")
}

fn format_time(nanos: i64, layout: &str) -> String {
    jiff::Timestamp::from_nanosecond(i128::from(nanos))
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH)
        .strftime(layout)
        .to_string()
}

impl KubeError {
    /// The HTTP status the API server answered with, if it answered.
    pub fn code(&self) -> Option<u16> {
        match self {
            KubeError::Refused { code, .. } => Some(*code),
            _ => None,
        }
    }
}
