//! The Kubernetes API: pods as evidence about lock holders
//! ([`pods`]), the backup operators' objects `watch` discovers repositories
//! from, Events on them and the leader's Lease (as `k8s-openapi`'s types,
//! written as the API server parses them).
//!
//! One client per process, configured as kubectl is: the pod's service
//! account inside a cluster, else `KUBECONFIG` or `~/.kube/config`
//! ([`Kubernetes::connect`]). The binary's edge makes it once (`watch`'s
//! setup, `check` or `unlock` with pod evidence, `discover`) and hands it
//! down as a [`Connection`] to all that use it, as kube's examples hand
//! down their `Client`; none is made where nothing configured uses the
//! API. Every call has its own deadline (the caller's timeout) and every
//! answer is bounded ([`crate::limits::KUBERNETES_RESPONSE`]); nothing
//! follows a redirect, nothing is retried behind the caller's back, and no
//! header is logged.

mod client;
mod connection;
mod deep_json;
pub mod pods;

pub use client::{Kubernetes, Listing};
pub use connection::Connection;

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
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
        let nanos = 1_764_700_000_123_456_789;
        let time = serde_json::to_value(Time(super::timestamp(nanos))).expect("a Time");
        assert_eq!(time, "2025-12-02T18:26:40Z");
        let micro = serde_json::to_value(MicroTime(super::timestamp(nanos))).expect("a MicroTime");
        assert_eq!(micro, "2025-12-02T18:26:40.123456Z");
        // A whole second still has its six digits.
        let whole = serde_json::to_value(MicroTime(super::timestamp(1_764_700_000_000_000_000)));
        assert_eq!(whole.expect("a MicroTime"), "2025-12-02T18:26:40.000000Z");
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

/// `nanos` (since the epoch) as the instant `k8s-openapi`'s `Time` (an
/// Event's timestamps: RFC 3339 in UTC, whole seconds) and `MicroTime` (a
/// Lease's: six fractional digits, the one layout the API server parses)
/// hold; the epoch if out of range.
pub fn timestamp(nanos: i64) -> k8s_openapi::jiff::Timestamp {
    k8s_openapi::jiff::Timestamp::from_nanosecond(i128::from(nanos))
        .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)
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
