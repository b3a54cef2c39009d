//! Which watched repositories hold locks of which pods: after each check,
//! the hostnames of the locks it kept that its pod inventory speaks for,
//! so that a pod's end ([`crate::kubernetes::pod_watch`]) checks at once
//! the repositories it may have left a lock in, and no others.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use regex::Regex;

use crate::evidence::InventorySource;

/// The lock holders of each repository whose pods the Kubernetes API lists.
#[derive(Default)]
pub struct Holders {
    by_repository: Mutex<HashMap<String, Held>>,
}

/// One repository's holders: the namespace whose pods answer for its
/// locks (`None`: every namespace's) and their hostnames.
struct Held {
    scope: Option<String>,
    hostnames: BTreeSet<String>,
}

impl Holders {
    /// Records the hostnames of the locks repository `name`'s last check
    /// kept (`kept`), those its pod `inventory` speaks for; a repository
    /// whose pods are not the Kubernetes API's, or that holds none, is
    /// forgotten.
    pub fn record<'a>(
        &self,
        name: &str,
        inventory: Option<&(InventorySource, Regex)>,
        kept: impl Iterator<Item = &'a str>,
    ) {
        let mut held = self.lock();
        let Some((InventorySource::Kubernetes { namespace }, hosts)) = inventory else {
            held.remove(name);
            return;
        };
        let hostnames: BTreeSet<String> = kept
            .filter(|hostname| hosts.is_match(hostname))
            .map(str::to_owned)
            .collect();
        if hostnames.is_empty() {
            held.remove(name);
        } else {
            let scope = namespace.clone();
            held.insert(name.to_owned(), Held { scope, hostnames });
        }
    }

    /// Forgets `repository` (stopped).
    pub fn forget(&self, repository: &str) {
        self.lock().remove(repository);
    }

    /// The repositories that kept a lock of a pod answering to one of
    /// `hostnames` in `namespace`.
    pub fn holding(&self, namespace: &str, hostnames: &[String]) -> Vec<String> {
        let held = self.lock();
        let answers = |h: &Held| {
            h.scope.as_deref().is_none_or(|scope| scope == namespace)
                && hostnames.iter().any(|name| h.hostnames.contains(name))
        };
        (held.iter())
            .filter(|(_, h)| answers(h))
            .map(|(name, _)| name.clone())
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Held>> {
        self.by_repository
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inventory(source: InventorySource) -> Option<(InventorySource, Regex)> {
        Some((source, Regex::new("^backup-").expect("regex")))
    }

    fn scoped(namespace: &str) -> Option<(InventorySource, Regex)> {
        inventory(InventorySource::Kubernetes {
            namespace: Some(namespace.to_owned()),
        })
    }

    #[test]
    fn a_pods_end_names_the_repositories_holding_its_locks_in_its_namespace() {
        let holders = Holders::default();
        let file = inventory(InventorySource::File("/hosts.json".into()));
        holders.record(
            "a/s",
            scoped("a").as_ref(),
            ["backup-1", "laptop"].into_iter(),
        );
        holders.record("b/s", scoped("b").as_ref(), ["backup-1"].into_iter());
        holders.record("fixed", file.as_ref(), ["backup-1"].into_iter());
        let ended = |ns: &str, host: &str| holders.holding(ns, &[host.to_owned()]);
        assert_eq!(ended("a", "backup-1"), ["a/s"]);
        assert!(ended("a", "laptop").is_empty(), "not a host it speaks for");
        assert!(ended("c", "backup-1").is_empty(), "another namespace's pod");
        holders.record("a/s", scoped("a").as_ref(), std::iter::empty());
        assert!(ended("a", "backup-1").is_empty(), "its lock is gone");
        holders.forget("b/s");
        assert!(ended("b", "backup-1").is_empty(), "stopped");
        let all = inventory(InventorySource::Kubernetes { namespace: None });
        holders.record("all", all.as_ref(), ["backup-2"].into_iter());
        assert_eq!(ended("z", "backup-2"), ["all"]);
    }
}
