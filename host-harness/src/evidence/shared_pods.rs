//! The pods the Kubernetes API lists, read once for every check that can
//! use the same reading. A listing proves a pod gone only for locks seen
//! before it began ([`super::inventory`]), so a check asks for a listing
//! begun after its own locks were seen (`not_before`): a finished one that
//! began late enough serves it, so does one under way that began late
//! enough (it waits for it), and otherwise it starts one. Checks of many
//! repositories at the same moment then share one listing, not one each.
//! A failed listing is shared too, by those that waited for it: it proves
//! nothing for any of them.

use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::inventory::{Hosts, pods};
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

#[derive(Default)]
struct State {
    /// The last listing that finished.
    done: Option<Listing>,
    /// Whether a listing is under way.
    running: bool,
}

fn shared() -> &'static (Mutex<State>, Condvar) {
    static SHARED: std::sync::OnceLock<(Mutex<State>, Condvar)> = std::sync::OnceLock::new();
    SHARED.get_or_init(Default::default)
}

/// The pods, listed after `not_before` (ns since the epoch, this
/// host's clock): the records and when their listing began. Each request
/// within `timeout`.
pub fn read_after(not_before: i64, timeout: Duration) -> Result<(Records, i64), String> {
    let (lock, changed) = shared();
    let deadline = Instant::now() + timeout * 4;
    let mut state = lock.lock().map_err(|_| POISONED.to_owned())?;
    // The absence rule compares strictly: a listing must begin after.
    while state
        .done
        .as_ref()
        .is_none_or(|(_, began)| *began <= not_before)
    {
        if !state.running {
            return list(state, timeout);
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
fn list(mut state: MutexGuard<'_, State>, timeout: Duration) -> Result<(Records, i64), String> {
    let (lock, changed) = shared();
    let began = now();
    state.running = true;
    drop(state);
    let records = list_pods(timeout)
        .and_then(|listing| pods(listing.items, listing.failed))
        .map(Arc::new);
    let mut state = lock.lock().map_err(|_| POISONED.to_owned())?;
    state.running = false;
    state.done = Some((records.clone(), began));
    changed.notify_all();
    records.map(|r| (r, began))
}
