//! Evidence recorded in a request file (`policy eval`): answers looked up by
//! the question the policy asks.

use std::collections::HashMap;

use super::Evidence;
use crate::contract::Liveness;

/// Answers to `process` and `host` questions, as recorded. Keyed by hostname
/// first, so that a lookup borrows the policy's `&str` instead of allocating.
#[derive(Debug, Default, Clone)]
pub struct Recorded {
    local_hostname: Option<String>,
    process: HashMap<String, HashMap<(i64, i64), Liveness>>,
    host: HashMap<String, HashMap<i64, Liveness>>,
}

impl Recorded {
    /// Evidence with this local hostname and no answers yet.
    pub fn new(local_hostname: Option<String>) -> Self {
        Recorded {
            local_hostname,
            ..Recorded::default()
        }
    }

    /// Records the answers about the holder of a lock written by `pid` on
    /// `hostname` at `since`. Where two locks ask the same question with
    /// different answers, the one [`super::combine`] keeps wins (alive over
    /// unknown over dead).
    pub fn insert(
        &mut self,
        hostname: &str,
        pid: i64,
        since: i64,
        process: Liveness,
        host: Liveness,
    ) {
        merge(
            self.process
                .entry(hostname.to_owned())
                .or_default()
                .entry((pid, since)),
            process,
        );
        merge(
            self.host
                .entry(hostname.to_owned())
                .or_default()
                .entry(since),
            host,
        );
    }
}

/// Keeps the answer [`super::combine`] prefers of the one recorded and
/// `answer`.
fn merge<K>(slot: std::collections::hash_map::Entry<'_, K, Liveness>, answer: Liveness) {
    match slot {
        std::collections::hash_map::Entry::Occupied(mut old) => {
            let old = old.get_mut();
            if let Some(kept) = super::combine([old.clone(), answer]) {
                *old = kept;
            }
        }
        std::collections::hash_map::Entry::Vacant(slot) => {
            slot.insert(answer);
        }
    }
}

fn not_recorded() -> Liveness {
    Liveness::Unknown("no answer recorded".into())
}

impl Evidence for Recorded {
    fn local_hostname(&self) -> Option<String> {
        self.local_hostname.clone()
    }
    fn process(&self, hostname: &str, pid: i64, since: i64) -> Liveness {
        self.process
            .get(hostname)
            .and_then(|answers| answers.get(&(pid, since)))
            .cloned()
            .unwrap_or_else(not_recorded)
    }
    fn host(&self, hostname: &str, since: i64) -> Liveness {
        self.host
            .get(hostname)
            .and_then(|answers| answers.get(&since))
            .cloned()
            .unwrap_or_else(not_recorded)
    }
}
