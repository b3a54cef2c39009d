//! The client as the binary's edge hands it down: made once where a command
//! starts, cloned into all that use the API, or why it could not be made.

use std::time::Duration;

use super::{KubeError, Kubernetes};

/// The one client of a process, made once where the command starts
/// (`watch`'s setup, `check` or `unlock` with pod evidence, `discover`)
/// and handed down to all that use the API (discovery, pod evidence,
/// Events, the Lease), as kube's own examples hand down their `Client`;
/// cheap to clone. When it could not be made (no configuration), each of
/// them says why at its first use of the API, as it always did; where
/// nothing configured uses the API, none is made and nothing connects.
#[derive(Clone)]
pub struct Connection(Result<Kubernetes, KubeError>);

impl Connection {
    /// A client made now when `needed` (the configuration read within
    /// `timeout`, [`Kubernetes::connect`]), else [`Connection::none`].
    pub fn when(needed: bool, timeout: Duration) -> Connection {
        if needed {
            Connection(Kubernetes::connect(timeout))
        } else {
            Connection::none()
        }
    }

    /// No client: nothing configured uses the API. Asking it for one is
    /// an error (a bug: the edge decided that nothing would).
    pub fn none() -> Connection {
        Connection(Err(KubeError::Config(
            "no client was made: nothing configured uses the Kubernetes API".into(),
        )))
    }

    /// The client, or why there is none (the same error each time).
    pub fn client(&self) -> Result<&Kubernetes, KubeError> {
        self.0.as_ref().map_err(Clone::clone)
    }
}

impl From<Kubernetes> for Connection {
    fn from(client: Kubernetes) -> Connection {
        Connection(Ok(client))
    }
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Ok(_) => f.write_str("Connection(client)"),
            Err(e) => write!(f, "Connection({e})"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_not_needed_never_connects_and_says_so() {
        // A configuration that would be read (and fail) if it were tried.
        let none = Connection::when(false, Duration::from_millis(1));
        let error = none.client().err().expect("no client");
        assert!(error.to_string().contains("nothing configured"), "{error}");
    }
}
