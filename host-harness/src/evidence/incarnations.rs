//! What lockwarden saw of each pod, by uid: a pod is its uid, not its
//! name. A pod made again under a name (a StatefulSet's, a hand-named
//! one) is another incarnation, and the end of one says nothing of the
//! locks of another. The pod watch ([`super::pod_watch`]) tells each pod's
//! fate: running, ended for sure, or vanished while it may have run; the
//! inventory asks which incarnations could have written a lock
//! ([`Incarnations::candidates`]) and judges each ([`super::inventory`]).
//!
//! What is kept is bounded per namespace and in all, the largest
//! namespace forgetting its oldest pods first, so that one tenant's churn
//! cannot push out another's pods. A forgotten pod is one never seen: its
//! absence is judged by the rule for pods lockwarden never saw.

use std::collections::{HashMap, VecDeque};

use super::pod_list::PodState;

/// At most this many pods are kept for one namespace.
pub const PER_NAMESPACE: usize = 20_000;

/// At most this many pods are kept in all.
pub const IN_ALL: usize = 200_000;

/// How far apart two clocks (the kubelet's or the API server's and the
/// lock writer's) may be for a time comparison to hold (ns).
pub const CLOCKS: i64 = 5_000_000_000;

/// What became of a pod, as far as lockwarden saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    /// It exists, as last seen.
    Running,
    /// It ended for sure at this time (ns, lockwarden's clock): Succeeded
    /// or Failed, or deleted or gone with every container stopped.
    Ended(i64),
    /// It was deleted, or a listing no longer had it, at this time while
    /// it may still have run on its node (a node cut off from the API runs
    /// on): dead only once the node is fenced.
    Vanished(i64),
}

/// One pod, as lockwarden saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incarnation {
    /// Its uid.
    pub uid: String,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// The node it was bound to, if any.
    pub node: Option<String>,
    /// When it was made (ns, the API server's clock), if known.
    pub created: Option<i64>,
    /// Its termination grace period (ns).
    pub grace: i64,
    /// What became of it.
    pub fate: Fate,
}

impl Incarnation {
    /// Whether this pod could have written a lock dated `since` (ns, the
    /// writer's clock): made before it, and not ended for sure before it.
    /// A pod that vanished may run on where its node is cut off, and
    /// write newer locks there.
    pub fn could_have_written(&self, since: i64) -> bool {
        let made_before = self
            .created
            .is_none_or(|created| created <= since.saturating_add(CLOCKS));
        let ended_before =
            matches!(self.fate, Fate::Ended(at) if at.saturating_add(CLOCKS) < since);
        made_before && !ended_before
    }
}

/// The pods seen, by uid, indexed by hostname.
#[derive(Debug, Default)]
pub struct Incarnations {
    by_uid: HashMap<String, (Incarnation, Vec<String>)>,
    by_host: HashMap<String, Vec<String>>,
    /// Each namespace's uids, oldest first.
    order: HashMap<String, VecDeque<String>>,
}

impl Incarnations {
    /// Records `pod` with `fate`. An end is final: a pod seen to end is
    /// not brought back by a late event that shows it running, and a pod
    /// that vanished and shows up again exists.
    pub fn observe(&mut self, pod: &PodState, fate: Fate) {
        if let Some((known, _)) = self.by_uid.get_mut(&pod.uid) {
            known.node = known.node.take().or_else(|| pod.node.clone());
            match (known.fate, fate) {
                (Fate::Ended(_), _) | (Fate::Vanished(_), Fate::Vanished(_)) => {}
                (_, fate) => known.fate = fate,
            }
            return;
        }
        let incarnation = Incarnation {
            uid: pod.uid.clone(),
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
            node: pod.node.clone(),
            created: pod.created,
            grace: pod.grace,
            fate,
        };
        for host in &pod.hostnames {
            let uids = self.by_host.entry(host.clone()).or_default();
            uids.push(pod.uid.clone());
        }
        let order = self.order.entry(pod.namespace.clone()).or_default();
        order.push_back(pod.uid.clone());
        self.by_uid
            .insert(pod.uid.clone(), (incarnation, pod.hostnames.clone()));
        self.bound(&pod.namespace);
    }

    /// The pods answering to `host` (in the namespaces `scope` when given) that
    /// could have written a lock dated `since`.
    pub fn candidates(&self, scope: Option<&[String]>, host: &str, since: i64) -> Vec<Incarnation> {
        (self.by_host.get(host).into_iter().flatten())
            .filter_map(|uid| self.by_uid.get(uid))
            .map(|(incarnation, _)| incarnation)
            .filter(|i| scope.is_none_or(|scope| scope.contains(&i.namespace)))
            .filter(|i| i.could_have_written(since))
            .cloned()
            .collect()
    }

    /// How many pods are kept.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.by_uid.len()
    }

    /// Forgets the oldest pods of `namespace` past [`PER_NAMESPACE`], and
    /// of the largest namespace past [`IN_ALL`].
    fn bound(&mut self, namespace: &str) {
        while self.order.get(namespace).map_or(0, VecDeque::len) > PER_NAMESPACE {
            self.forget_oldest(namespace);
        }
        while self.by_uid.len() > IN_ALL {
            let Some(largest) = (self.order.iter())
                .max_by_key(|(_, uids)| uids.len())
                .map(|(ns, _)| ns.clone())
            else {
                return;
            };
            // Down to half the bound at once: finding the largest costs a
            // pass over the namespaces.
            while self.by_uid.len() > IN_ALL / 2
                && self.order.get(&largest).is_some_and(|o| !o.is_empty())
            {
                self.forget_oldest(&largest);
            }
        }
    }

    fn forget_oldest(&mut self, namespace: &str) {
        let Some(order) = self.order.get_mut(namespace) else {
            return;
        };
        let Some(uid) = order.pop_front() else {
            return;
        };
        if order.is_empty() {
            self.order.remove(namespace);
        }
        let Some((_, hosts)) = self.by_uid.remove(&uid) else {
            return;
        };
        for host in hosts {
            if let Some(uids) = self.by_host.get_mut(&host) {
                uids.retain(|u| *u != uid);
                if uids.is_empty() {
                    self.by_host.remove(&host);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    pub(crate) fn pod(ns: &str, name: &str, uid: &str, created: i64) -> PodState {
        PodState {
            uid: uid.into(),
            namespace: ns.into(),
            name: name.into(),
            hostnames: vec![name.into()],
            node: Some("node-1".into()),
            created: Some(created),
            grace: 30 * S,
            terminal: false,
            restarts: 0,
            stopped: false,
        }
    }

    #[test]
    fn an_incarnation_speaks_only_for_the_locks_it_could_have_written() {
        let mut seen = Incarnations::default();
        seen.observe(&pod("a", "web-0", "one", 100 * S), Fate::Ended(200 * S));
        seen.observe(&pod("a", "web-0", "two", 300 * S), Fate::Vanished(400 * S));
        let uids = |since: i64| -> Vec<String> {
            (seen
                .candidates(Some(&["a".to_owned()]), "web-0", since)
                .into_iter())
            .map(|i| i.uid)
            .collect()
        };
        assert_eq!(uids(150 * S), ["one"], "before the second was made");
        assert_eq!(uids(350 * S), ["two"], "after the first ended");
        assert_eq!(uids(500 * S), ["two"], "a vanished pod may write on");
        assert_eq!(uids(50 * S), Vec::<String>::new(), "before either");
        assert!(
            seen.candidates(Some(&["b".to_owned()]), "web-0", 150 * S)
                .is_empty()
        );
        assert_eq!(seen.candidates(None, "web-0", 150 * S).len(), 1);
    }

    #[test]
    fn an_end_is_final_and_a_vanished_pod_seen_again_exists() {
        let mut seen = Incarnations::default();
        let p = pod("a", "web-0", "one", 0);
        seen.observe(&p, Fate::Ended(10 * S));
        seen.observe(&p, Fate::Running);
        assert_eq!(
            seen.candidates(Some(&["a".to_owned()]), "web-0", S)[0].fate,
            Fate::Ended(10 * S)
        );
        let q = pod("a", "web-1", "two", 0);
        seen.observe(&q, Fate::Vanished(10 * S));
        seen.observe(&q, Fate::Vanished(20 * S));
        assert_eq!(
            seen.candidates(Some(&["a".to_owned()]), "web-1", S)[0].fate,
            Fate::Vanished(10 * S)
        );
        seen.observe(&q, Fate::Running);
        assert_eq!(
            seen.candidates(Some(&["a".to_owned()]), "web-1", S)[0].fate,
            Fate::Running
        );
    }

    #[test]
    fn one_namespaces_churn_does_not_forget_another_namespaces_pods() {
        let mut seen = Incarnations::default();
        seen.observe(&pod("quiet", "backup-q", "q", 0), Fate::Running);
        for i in 0..PER_NAMESPACE + 10 {
            seen.observe(
                &pod("busy", &format!("b-{i}"), &format!("u{i}"), 0),
                Fate::Running,
            );
        }
        assert_eq!(seen.len(), PER_NAMESPACE + 1);
        assert!(
            seen.candidates(Some(&["busy".to_owned()]), "b-0", 0)
                .is_empty(),
            "oldest forgotten"
        );
        assert_eq!(
            seen.candidates(Some(&["busy".to_owned()]), &format!("b-{PER_NAMESPACE}"), 0)
                .len(),
            1
        );
        assert_eq!(
            seen.candidates(Some(&["quiet".to_owned()]), "backup-q", 0)
                .len(),
            1
        );
        assert!(seen.by_host.len() <= PER_NAMESPACE + 1);
    }
}
