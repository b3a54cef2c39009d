//! Which watched repositories' pod inventories speak for which pods: a
//! pod's end ([`crate::evidence::pod_watch`]) checks at once each
//! repository whose locks it may hold (its inventory reads the Kubernetes
//! API, in the pod's namespace when scoped, and its pattern covers the
//! pod's name), whether or not a check has seen its lock yet: a job
//! killed between two checks leaves a lock no check has seen.

use std::collections::HashMap;
use std::sync::Mutex;

use regex::Regex;

use crate::evidence::InventorySource;

/// The repositories whose pods the Kubernetes API lists.
#[derive(Default)]
pub struct Holders {
    by_repository: Mutex<HashMap<String, Covers>>,
}

/// One repository's pods: the namespaces whose pods answer for its locks
/// (`None`: every namespace's) and the hostnames its inventory covers.
struct Covers {
    scope: Option<Vec<String>>,
    hosts: Regex,
}

impl Holders {
    /// Records which pods repository `name`'s `inventory` speaks for; one
    /// whose pods are not the Kubernetes API's is forgotten.
    pub fn record(&self, name: &str, inventory: Option<&(InventorySource, Regex)>) {
        let mut by_repository = self.lock();
        match inventory {
            Some((InventorySource::Kubernetes { namespaces }, hosts)) => {
                let covers = Covers {
                    scope: namespaces.clone(),
                    hosts: hosts.clone(),
                };
                by_repository.insert(name.to_owned(), covers);
            }
            _ => {
                by_repository.remove(name);
            }
        }
    }

    /// Forgets `repository` (stopped).
    pub fn forget(&self, repository: &str) {
        self.lock().remove(repository);
    }

    /// The repositories whose locks a pod of `namespace` answering to one
    /// of `hostnames` may hold.
    pub fn holding(&self, namespace: &str, hostnames: &[String]) -> Vec<String> {
        let by_repository = self.lock();
        let covers = |c: &Covers| {
            (c.scope.as_ref()).is_none_or(|scope| scope.iter().any(|ns| ns == namespace))
                && hostnames.iter().any(|name| c.hosts.is_match(name))
        };
        (by_repository.iter())
            .filter(|(_, c)| covers(c))
            .map(|(name, _)| name.clone())
            .collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Covers>> {
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
            namespaces: Some(vec![namespace.to_owned()]),
        })
    }

    #[test]
    fn a_pods_end_names_the_repositories_whose_inventory_covers_it() {
        let holders = Holders::default();
        let file = inventory(InventorySource::File("/hosts.json".into()));
        holders.record("a/s", scoped("a").as_ref());
        holders.record("b/s", scoped("b").as_ref());
        holders.record("fixed", file.as_ref());
        let ended = |ns: &str, host: &str| holders.holding(ns, &[host.to_owned()]);
        assert_eq!(ended("a", "backup-1"), ["a/s"]);
        assert!(ended("a", "laptop").is_empty(), "not a host it covers");
        assert!(ended("c", "backup-1").is_empty(), "another namespace's pod");
        holders.forget("b/s");
        assert!(ended("b", "backup-1").is_empty(), "stopped");
        holders.record("a/s", file.as_ref());
        assert!(
            ended("a", "backup-1").is_empty(),
            "no longer the API's pods"
        );
        let all = inventory(InventorySource::Kubernetes { namespaces: None });
        holders.record("all", all.as_ref());
        assert_eq!(ended("z", "backup-2"), ["all"]);
    }
}
