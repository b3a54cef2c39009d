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
//! It also remembers which pods lockwarden saw, in which namespace and
//! when (every listing's, and those the pod watch reports: [`saw`]), so
//! that a later listing's silence about one of them can speak
//! ([`sighted`], the inventory's absence rule).

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::pod_list::{Hosts, pods};
use crate::kubernetes::Connection;
use crate::kubernetes::pods::list_pods;
use crate::time::now;

/// Why a reading failed when another thread panicked while listing.
const POISONED: &str = "a pod listing panicked";

/// The pods by hostname, as the inventory reads them, and the namespaces
/// whose pods could not be listed (one listing of every namespace, however
/// many inventories scoped to one namespace read it).
pub type Records = Arc<Hosts>;

/// A listing: its records, or why there are none, and when it began.
type Listing = (Result<Records, String>, i64);

/// At most this many pods are remembered as seen; past it the oldest
/// sightings are forgotten (a forgotten pod's absence proves nothing, as
/// before it was seen).
const SIGHTINGS: usize = 200_000;

#[derive(Default)]
struct State {
    /// The last listing that finished.
    done: Option<Listing>,
    /// Whether a listing is under way.
    running: bool,
    /// (namespace, hostname) -> when lockwarden first saw a pod answering
    /// to it (a listing's start, or a watch event's arrival).
    seen: HashMap<(String, String), i64>,
    /// No listing begun before this serves a check ([`ended`]).
    stale_before: i64,
}

fn shared() -> &'static (Mutex<State>, Condvar) {
    static SHARED: std::sync::OnceLock<(Mutex<State>, Condvar)> = std::sync::OnceLock::new();
    SHARED.get_or_init(Default::default)
}

/// The pods, listed after `not_before` (ns since the epoch, this
/// host's clock): the records and when their listing began. A listing
/// this call starts goes through `kubernetes` (the client handed down),
/// each request within `timeout`.
pub fn read_after(
    kubernetes: &Connection,
    not_before: i64,
    timeout: Duration,
) -> Result<(Records, i64), String> {
    let (lock, changed) = shared();
    let deadline = Instant::now() + timeout * 4;
    let mut state = lock.lock().map_err(|_| POISONED.to_owned())?;
    let not_before = not_before.max(state.stale_before);
    // The absence rule compares strictly: a listing must begin after.
    while state
        .done
        .as_ref()
        .is_none_or(|(_, began)| *began <= not_before)
    {
        if !state.running {
            return list(state, kubernetes, timeout);
        }
        // One under way: wait for it (if it began too early, this check
        // then starts its own).
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err("the pod listing under way did not finish in time".into());
        }
        state = changed
            .wait_timeout(state, left)
            .map_err(|_| POISONED.to_owned())?
            .0;
    }
    let (records, began) = state.done.clone().ok_or("no pod listing")?;
    records.map(|r| (r, began))
}

/// Lists the pods now, for every check waiting, and keeps the listing.
fn list(
    mut state: MutexGuard<'_, State>,
    kubernetes: &Connection,
    timeout: Duration,
) -> Result<(Records, i64), String> {
    let (lock, changed) = shared();
    let began = now();
    state.running = true;
    drop(state);
    let records = list_pods(kubernetes, timeout)
        .map_err(|e| e.to_string())
        .and_then(|listing| pods(listing.items, listing.failed).map_err(|e| e.to_string()))
        .map(Arc::new);
    let mut state = lock.lock().map_err(|_| POISONED.to_owned())?;
    state.running = false;
    state.done = Some((records.clone(), began));
    changed.notify_all();
    records.map(|r| (r, began))
}

/// A pod that may hold a lock ended at `at`: no listing begun before then
/// serves a check from now on.
pub fn ended(at: i64) {
    let (lock, _) = shared();
    let mut state = lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    state.stale_before = state.stale_before.max(at);
}

/// Remembers that the pods (namespace, hostname) were seen to end at `at`
/// (ns since the epoch, this host's clock), as the pod watch reports them.
pub fn saw<'a>(pods: impl IntoIterator<Item = (&'a str, &'a str)>, at: i64) {
    let (lock, _) = shared();
    let mut state = lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    remember(&mut state.seen, pods, at);
}

/// Whether a pod answering to `hostname` (in namespace `scope`, when
/// given) was seen before `before`: the inventory's [`super::inventory::Sighted`].
pub fn sighted(scope: Option<&str>, hostname: &str, before: i64) -> bool {
    let (lock, _) = shared();
    let state = lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    seen_before(&state.seen, scope, hostname, before)
}

fn remember<'a>(
    seen: &mut HashMap<(String, String), i64>,
    pods: impl IntoIterator<Item = (&'a str, &'a str)>,
    at: i64,
) {
    for (namespace, hostname) in pods {
        let key = (namespace.to_owned(), hostname.to_owned());
        seen.entry(key).or_insert(at);
    }
    if seen.len() > SIGHTINGS {
        let mut times: Vec<i64> = seen.values().copied().collect();
        let cut = times.len() - SIGHTINGS / 2;
        let (_, oldest_kept, _) = times.select_nth_unstable(cut);
        let oldest_kept = *oldest_kept;
        seen.retain(|_, first| *first >= oldest_kept);
    }
}

fn seen_before(
    seen: &HashMap<(String, String), i64>,
    scope: Option<&str>,
    hostname: &str,
    before: i64,
) -> bool {
    match scope {
        Some(namespace) => seen
            .get(&(namespace.to_owned(), hostname.to_owned()))
            .is_some_and(|first| *first < before),
        None => seen
            .iter()
            .any(|((_, name), first)| name == hostname && *first < before),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    #[test]
    fn a_pod_counts_as_seen_only_before_the_reading_and_in_its_namespace() {
        let mut seen = HashMap::new();
        super::remember(&mut seen, [("team-a", "backup-x-1")], 100);
        super::remember(&mut seen, [("team-a", "backup-x-1")], 200);
        assert!(super::seen_before(&seen, Some("team-a"), "backup-x-1", 101));
        assert!(
            !super::seen_before(&seen, Some("team-a"), "backup-x-1", 100),
            "seen by the reading itself, not before it"
        );
        assert!(!super::seen_before(
            &seen,
            Some("team-b"),
            "backup-x-1",
            500
        ));
        assert!(super::seen_before(&seen, None, "backup-x-1", 500));
        assert!(!super::seen_before(&seen, None, "backup-y-1", 500));
    }

    #[test]
    fn past_the_bound_the_oldest_sightings_are_forgotten() {
        let mut seen = HashMap::new();
        let names: Vec<String> = (0..=super::SIGHTINGS).map(|i| format!("p{i}")).collect();
        for (i, name) in names.iter().enumerate() {
            super::remember(&mut seen, [("ns", name.as_str())], i as i64);
        }
        assert!(seen.len() <= super::SIGHTINGS / 2 + 1, "{}", seen.len());
        assert!(super::seen_before(
            &seen,
            Some("ns"),
            &names[super::SIGHTINGS],
            i64::MAX
        ));
        assert!(!super::seen_before(&seen, Some("ns"), "p0", i64::MAX));
    }
}
