//! The pods the Kubernetes API lists, read once for every check that can
//! use the same reading. A listing proves a pod gone only for locks seen
//! before it began ([`super::inventory`]), so a check asks for a listing
//! begun after its own locks were seen (`not_before`): a finished one that
//! began late enough serves it, so does one under way that began late
//! enough (it waits for it), and otherwise it starts one. Checks of many
//! repositories at the same moment then share one listing, not one each.
//! A failed listing is shared too, by those that waited for it: it proves
//! nothing for any of them.
//!
//! An inventory scoped to one namespace (a discovered repository's) lists
//! that namespace's pods alone, or takes a listing of every namespace begun
//! late enough: a pod's end in one namespace, which outdates the listings
//! that could still show it ([`ended`]), then costs a listing of that
//! namespace, not of the cluster, and another namespace's pods (many,
//! large, churning) cost its checks nothing.
//!
//! The nodes, the fence of a pod that vanished while it may have run
//! ([`super::nodes`]), are listed apart, at most once in [`NODES_FRESH`],
//! for every judgment that needs them ([`nodes`]).
//!
//! It also keeps what the pod watch saw of each pod, by uid ([`observe`],
//! [`super::incarnations`]), so that a later listing's silence about one
//! of them can speak ([`recall`], the inventory's absence rule).

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::incarnations::{Fate, Incarnation, Incarnations};
use super::nodes::Nodes;
use super::pod_list::{Hosts, PodState, pods};
use crate::kubernetes::Connection;
use crate::kubernetes::pods::{list_nodes, list_pods};
use crate::time::now;

/// Why a reading failed when another thread panicked while listing.
const POISONED: &str = "a pod listing panicked";

/// The pods by hostname, as the inventory reads them, and the namespaces
/// whose pods could not be listed.
pub type Records = Arc<Hosts>;

/// A listing: its records, or why there are none, and when it began.
type Listing = (Result<Records, String>, i64);

/// At most this many namespaces' latest ends are kept apart; past it they
/// are forgotten and the latest end anywhere stands for each (outdating
/// more listings than needed, never fewer).
const ENDS: usize = 10_000;

/// Two listings of one scope begin at least this far apart: under churn in
/// a namespace, the checks its pods' ends bring share a listing instead of
/// each starting one as soon as the last is done. (A second here put a
/// second on a pod's end to its lock's removal, measured: checks whose
/// locks were seen just after a listing began wait for the next.)
const GAP: Duration = Duration::from_millis(250);

/// A namespace's listing that began longer ago than this (ns) is dropped
/// when another finishes: no check waits that long for its own.
const KEPT_FOR: i64 = 600 * 1_000_000_000;

#[derive(Default)]
struct State {
    /// The listings by scope: a namespace's, or (`None`) every namespace's.
    listings: HashMap<Option<String>, Slot>,
    /// What the pod watch saw of each pod.
    incarnations: Incarnations,
    /// When a pod that may hold a lock last ended, by namespace ([`ended`]).
    ends: HashMap<String, i64>,
    /// The latest end in any namespace.
    latest_end: i64,
    /// Stands for every namespace's end once [`ENDS`] were forgotten.
    forgotten_ends: i64,
}

/// One scope's listing.
#[derive(Default)]
struct Slot {
    /// The last listing that finished.
    done: Option<Listing>,
    /// Whether a listing is under way.
    running: bool,
}

impl State {
    /// No listing of `scope` begun before this serves a check of it: the
    /// last end in the namespace (in any, for every namespace's).
    fn outdated(&self, scope: Option<&str>) -> i64 {
        match scope {
            None => self.latest_end,
            Some(ns) => (self.ends.get(ns).copied().unwrap_or(0)).max(self.forgotten_ends),
        }
    }

    /// A finished listing that serves a check of `scope` whose locks were
    /// seen at `not_before`: the scope's own (whatever its outcome), or for
    /// one namespace, a successful listing of every namespace that holds
    /// that namespace's pods (did not leave it out for the list's bounds).
    fn serving(&self, scope: Option<&str>, not_before: i64) -> Option<Listing> {
        let late =
            |slot: Option<&Slot>| (slot?.done.clone()).filter(|(_, began)| *began > not_before);
        let own = late(self.listings.get(&scope.map(str::to_owned)));
        let holds = |ns: &str, records: &Result<Records, String>| {
            records.as_ref().is_ok_and(|r| !r.failed.contains_key(ns))
        };
        own.or_else(|| {
            let ns = scope?;
            late(self.listings.get(&None)).filter(|(records, _)| holds(ns, records))
        })
    }

    /// Drops the listings of namespaces that began long before `now` and
    /// are not under way.
    fn forget_old(&mut self, now: i64) {
        (self.listings).retain(|scope, slot| {
            scope.is_none()
                || slot.running
                || slot.done.as_ref().is_some_and(|(_, b)| now - b < KEPT_FOR)
        });
    }
}

fn shared() -> &'static (Mutex<State>, Condvar) {
    static SHARED: std::sync::OnceLock<(Mutex<State>, Condvar)> = std::sync::OnceLock::new();
    SHARED.get_or_init(Default::default)
}

/// The pods of namespace `scope` (of every namespace if `None`), listed
/// after `not_before` (ns since the epoch, this host's clock): the records
/// and when their listing began. A listing this call starts goes through
/// `kubernetes` (the client handed down), each request within `timeout`.
pub fn read_after(
    kubernetes: &Connection,
    scope: Option<&str>,
    not_before: i64,
    timeout: Duration,
) -> Result<(Records, i64), String> {
    let (lock, changed) = shared();
    let deadline = Instant::now() + timeout * 4;
    let mut state = lock.lock().map_err(|_| POISONED.to_owned())?;
    let not_before = not_before.max(state.outdated(scope));
    // The absence rule compares strictly: a listing must begin after.
    loop {
        if let Some((records, began)) = state.serving(scope, not_before) {
            return records.map(|r| (r, began));
        }
        let key = scope.map(str::to_owned);
        let slot = state.listings.get(&key);
        let running = slot.is_some_and(|slot| slot.running);
        let last = slot
            .and_then(|slot| slot.done.as_ref())
            .map(|(_, began)| *began);
        let wait = last.map_or(Duration::ZERO, |began| gap_left(began, now()));
        if !running && wait.is_zero() {
            return list(state, kubernetes, scope, timeout);
        }
        // One under way, or one begun less than GAP ago: wait for it, or
        // for the gap (if it began too early, this check then starts its
        // own).
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err("the pod listing under way did not finish in time".into());
        }
        let wait = if running { left } else { wait.min(left) };
        state = changed
            .wait_timeout(state, wait)
            .map_err(|_| POISONED.to_owned())?
            .0;
    }
}

/// How long after `now` a listing that began at `began` (ns) leaves
/// before the next of its scope may begin ([`GAP`]).
fn gap_left(began: i64, now: i64) -> Duration {
    let gap = i64::try_from(GAP.as_nanos()).unwrap_or(i64::MAX);
    let left = began.saturating_add(gap).saturating_sub(now);
    // A listing dated ahead (the clock stepped back) waits no longer.
    Duration::from_nanos(u64::try_from(left).unwrap_or(0)).min(GAP)
}

/// Lists the pods of `scope` now, for every check waiting, and keeps the
/// listing.
fn list(
    mut state: MutexGuard<'_, State>,
    kubernetes: &Connection,
    scope: Option<&str>,
    timeout: Duration,
) -> Result<(Records, i64), String> {
    let (lock, changed) = shared();
    let began = now();
    let key = scope.map(str::to_owned);
    state.listings.entry(key.clone()).or_default().running = true;
    drop(state);
    let records = list_pods(kubernetes, scope, timeout)
        .map_err(|e| e.to_string())
        .and_then(|listing| pods(listing.items, listing.failed).map_err(|e| e.to_string()))
        .map(Arc::new);
    let mut state = lock.lock().map_err(|_| POISONED.to_owned())?;
    state.forget_old(began);
    let slot = state.listings.entry(key).or_default();
    slot.running = false;
    slot.done = Some((records.clone(), began));
    changed.notify_all();
    records.map(|r| (r, began))
}

/// A pod of `namespace` that may hold a lock ended at `at`: no listing of
/// that namespace, nor of every namespace, begun before then serves a
/// check from now on.
pub fn ended(namespace: &str, at: i64) {
    let (lock, _) = shared();
    let mut state = lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    record_end(&mut state, namespace, at);
}

fn record_end(state: &mut State, namespace: &str, at: i64) {
    state.latest_end = state.latest_end.max(at);
    let end = state.ends.entry(namespace.to_owned()).or_default();
    *end = (*end).max(at);
    if state.ends.len() > ENDS {
        state.ends.clear();
        state.forgotten_ends = state.latest_end;
    }
}

/// A node listing serves the judgments of this long after it began; then
/// the next lists the nodes anew.
pub const NODES_FRESH: Duration = Duration::from_secs(5);

/// The last node listing and when it began.
type NodesListed = Option<(Result<Arc<Nodes>, String>, Instant)>;

/// The nodes as listed at most [`NODES_FRESH`] ago (listed now through
/// `kubernetes`, each request within `timeout`, when the last is older),
/// or why they could not be. One listing at a time: the others wait for
/// it and take it.
pub fn nodes(kubernetes: &Connection, timeout: Duration) -> Result<Arc<Nodes>, String> {
    static LAST: Mutex<NodesListed> = Mutex::new(None);
    let mut last = LAST.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some((nodes, began)) = last.as_ref()
        && began.elapsed() < NODES_FRESH
    {
        return nodes.clone();
    }
    let began = Instant::now();
    let listed = read_nodes(kubernetes, timeout).map(Arc::new);
    *last = Some((listed.clone(), began));
    listed
}

/// The nodes, listed now, or why they could not be.
fn read_nodes(kubernetes: &Connection, timeout: Duration) -> Result<Nodes, String> {
    let listed_at = now();
    let listing = list_nodes(kubernetes, timeout).map_err(|e| e.to_string())?;
    if let Some((_, why)) = listing.failed.first_key_value() {
        return Err(format!("the nodes could not be listed whole: {why}"));
    }
    Nodes::from_items(listing.items, listed_at).map_err(|e| e.to_string())
}

/// Records what became of `pod`, as the pod watch saw it.
pub fn observe(pod: &PodState, fate: Fate) {
    let (lock, _) = shared();
    let mut state = lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    state.incarnations.observe(pod, fate);
}

/// The pods the pod watch saw answering to `hostname` (in the namespaces
/// `scope`, when given) that could have written a lock dated `since`: the
/// inventory's [`super::inventory::Recall`].
pub fn recall(scope: Option<&[String]>, hostname: &str, since: i64) -> Vec<Incarnation> {
    let (lock, _) = shared();
    let state = lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    state.incarnations.candidates(scope, hostname, since)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::{Listing, Slot, State};

    /// A successful listing begun at `began` that left `namespace` out.
    fn without(began: i64, namespace: &str) -> Slot {
        let mut hosts = super::Hosts::default();
        hosts
            .failed
            .insert(namespace.to_owned(), "too many pods".into());
        Slot {
            done: Some((Ok(Arc::new(hosts)), began)),
            running: false,
        }
    }

    /// A finished listing begun at `began`: a successful one, or a failed.
    fn listing(began: i64, ok: bool) -> Slot {
        let records = if ok {
            Ok(Arc::default())
        } else {
            Err("refused".to_owned())
        };
        Slot {
            done: Some((records, began)),
            running: false,
        }
    }

    fn began(found: Option<Listing>) -> Option<i64> {
        found.map(|(_, began)| began)
    }

    #[test]
    fn a_namespace_takes_its_own_listing_or_a_later_listing_of_every_namespace() {
        let mut state = State::default();
        state.listings.insert(Some("a".into()), listing(100, true));
        state.listings.insert(None, listing(200, true));
        assert_eq!(began(state.serving(Some("a"), 150)), Some(200));
        assert_eq!(began(state.serving(Some("a"), 50)), Some(100), "its own");
        assert_eq!(began(state.serving(Some("b"), 150)), Some(200));
        assert_eq!(began(state.serving(Some("b"), 200)), None, "strictly after");
        assert_eq!(began(state.serving(None, 150)), Some(200));
        state.listings.insert(Some("a".into()), listing(50, true));
        state.listings.insert(None, listing(300, false));
        assert_eq!(
            began(state.serving(Some("a"), 150)),
            None,
            "a failed listing of every namespace does not stand for one namespace's"
        );
        assert_eq!(began(state.serving(None, 150)), Some(300), "shared failure");
        state.listings.insert(None, without(300, "a"));
        assert_eq!(
            began(state.serving(Some("a"), 150)),
            None,
            "a listing of every namespace that left this one out"
        );
        assert_eq!(began(state.serving(Some("b"), 150)), Some(300));
    }

    #[test]
    fn an_end_outdates_its_namespace_and_every_namespace_not_the_others() {
        let mut state = State::default();
        super::record_end(&mut state, "a", 100);
        super::record_end(&mut state, "b", 50);
        assert_eq!(state.outdated(Some("a")), 100);
        assert_eq!(state.outdated(Some("b")), 50);
        assert_eq!(state.outdated(Some("c")), 0, "no end there");
        assert_eq!(state.outdated(None), 100);
        for n in 0..super::ENDS {
            super::record_end(&mut state, &format!("ns-{n}"), 10);
        }
        assert!(state.ends.len() <= super::ENDS, "{}", state.ends.len());
        assert_eq!(
            state.outdated(Some("c")),
            100,
            "past the bound, the latest end stands for every namespace"
        );
    }

    #[test]
    fn old_listings_of_a_namespace_are_dropped_not_those_under_way() {
        let mut state = State::default();
        let old = -super::KEPT_FOR;
        state
            .listings
            .insert(Some("old".into()), listing(old, true));
        state.listings.insert(Some("new".into()), listing(0, true));
        state.listings.insert(None, listing(old, true));
        let running = Slot {
            done: None,
            running: true,
        };
        state.listings.insert(Some("running".into()), running);
        state.forget_old(1);
        let mut kept: Vec<Option<String>> = state.listings.keys().cloned().collect();
        kept.sort();
        assert_eq!(kept, [None, Some("new".into()), Some("running".into())]);
    }

    #[test]
    fn a_scopes_next_listing_waits_for_the_gap() {
        let second = 1_000_000_000;
        assert_eq!(super::gap_left(0, 0), super::GAP);
        assert_eq!(
            super::gap_left(0, second / 10),
            super::GAP - std::time::Duration::from_millis(100)
        );
        assert!(super::gap_left(0, 2 * second).is_zero());
        assert_eq!(
            super::gap_left(5 * second, 0),
            super::GAP,
            "clock stepped back"
        );
    }
}
