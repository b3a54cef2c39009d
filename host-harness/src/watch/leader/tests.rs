//! The election against a Lease kept in memory, with the API server's
//! optimistic concurrency: every decision, and what is written.

use std::cell::RefCell;

use super::*;

/// A Lease in memory: a version bumped at each write, a write at any other
/// version refused (409), as the API server does. `race` is a write
/// another replica makes just before the next one of ours lands; `down`
/// makes every call fail, as an unreachable server does.
#[derive(Default)]
struct Memory {
    lease: RefCell<Option<Lease>>,
    version: RefCell<u64>,
    race: RefCell<Option<Lease>>,
    down: RefCell<bool>,
}

fn conflict() -> KubeError {
    KubeError::Refused {
        what: "PUT lease".into(),
        code: 409,
        reason: "Conflict".into(),
        message: "the object has been modified".into(),
    }
}

impl Memory {
    /// Stores `lease` as the current one, at a new version.
    fn put(&self, mut lease: Lease) {
        let mut version = self.version.borrow_mut();
        *version += 1;
        lease.metadata.resource_version = Some(version.to_string());
        *self.lease.borrow_mut() = Some(lease);
    }

    /// The current Lease's spec.
    fn spec(&self) -> LeaseSpec {
        let lease = self.lease.borrow();
        (lease.as_ref().and_then(|l| l.spec.clone())).expect("a Lease with a spec")
    }

    /// Another replica's write, if one races ours.
    fn raced(&self) {
        if let Some(theirs) = self.race.borrow_mut().take() {
            self.put(theirs);
        }
    }

    fn up(&self) -> Result<(), KubeError> {
        if *self.down.borrow() {
            return Err(KubeError::NoAnswer {
                what: "GET lease".into(),
                timeout: "5s".into(),
            });
        }
        Ok(())
    }
}

impl LeaseStore for Memory {
    fn get(&self) -> Result<Option<Lease>, KubeError> {
        self.up()?;
        Ok(self.lease.borrow().clone())
    }

    fn create(&self, lease: &Lease) -> Result<(), KubeError> {
        self.up()?;
        self.raced();
        if self.lease.borrow().is_some() {
            return Err(conflict());
        }
        self.put(lease.clone());
        Ok(())
    }

    fn replace(&self, lease: &Lease) -> Result<(), KubeError> {
        self.up()?;
        self.raced();
        let current =
            (self.lease.borrow().as_ref()).and_then(|l| l.metadata.resource_version.clone());
        if current.is_none() || lease.metadata.resource_version != current {
            return Err(conflict());
        }
        self.put(lease.clone());
        Ok(())
    }
}

const ME: &str = "lockwarden-0_aaaa";
const OTHER: &str = "lockwarden-1_bbbb";
/// Wall times (ns since the epoch) of the rounds.
const T0: i64 = 1_764_700_000_123_456_789;
const T1: i64 = T0 + 2_000_000_000;

fn election(store: Memory) -> Election<Memory> {
    Election {
        store,
        name: "lockwarden".into(),
        identity: ME.into(),
    }
}

fn leader() -> Leader {
    Leader {
        renewed: Mutex::new(None),
    }
}

/// A Lease held by `holder`, renewed at `wall`.
fn held_by(holder: &str, wall: i64) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some("lockwarden".into()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(15),
            acquire_time: Some(MicroTime(timestamp(wall))),
            renew_time: Some(MicroTime(timestamp(wall))),
            lease_transitions: Some(3),
            ..LeaseSpec::default()
        }),
    }
}

fn micro(wall: i64) -> Option<MicroTime> {
    Some(MicroTime(timestamp(wall)))
}

#[test]
fn the_first_replica_creates_the_lease_and_leads() {
    let election = election(Memory::default());
    let (leader, now) = (leader(), Instant::now());
    let mut observed = Observed::new(now);
    election.tick(&leader, &mut observed, now, T0);
    assert!(leader.acts_at(now));
    let spec = election.store.spec();
    assert_eq!(spec.holder_identity.as_deref(), Some(ME));
    assert_eq!(spec.lease_duration_seconds, Some(15));
    assert_eq!(
        (spec.acquire_time, spec.renew_time.clone()),
        (micro(T0), micro(T0))
    );
    assert_eq!(spec.lease_transitions, Some(0));
    // On the wire: the times with the six digits the API server parses.
    let lease = election.store.lease.borrow().clone().expect("a Lease");
    let json = serde_json::to_value(&lease).expect("JSON");
    assert_eq!(json["apiVersion"], "coordination.k8s.io/v1");
    assert_eq!(json["kind"], "Lease");
    assert_eq!(json["spec"]["renewTime"], "2025-12-02T18:26:40.123456Z");
    assert_eq!(json["spec"]["acquireTime"], "2025-12-02T18:26:40.123456Z");
}

#[test]
fn the_holder_renews_at_the_version_it_read() {
    let election = election(Memory::default());
    let (leader, now) = (leader(), Instant::now());
    let mut observed = Observed::new(now);
    election.tick(&leader, &mut observed, now, T0);
    let later = now + RETRY;
    election.tick(&leader, &mut observed, later, T1);
    assert!(leader.acts_at(later + RENEW_DEADLINE - Duration::from_millis(1)));
    let spec = election.store.spec();
    assert_eq!(spec.holder_identity.as_deref(), Some(ME));
    assert_eq!(spec.renew_time, micro(T1), "renewed");
    assert_eq!(spec.acquire_time, micro(T0), "acquired once");
    assert_eq!(spec.lease_transitions, Some(0));
    assert_eq!(*election.store.version.borrow(), 2);
}

#[test]
fn another_holder_renewing_is_followed() {
    let store = Memory::default();
    store.put(held_by(OTHER, T0));
    let election = election(store);
    let (leader, now) = (leader(), Instant::now());
    let mut observed = Observed::new(now);
    election.tick(&leader, &mut observed, now, T0);
    assert!(!leader.acts_at(now));
    // It renews just before its duration is up, by our clock: the record
    // changed, so the duration counts again from there.
    election.store.put(held_by(OTHER, T1));
    let renewed = now + LEASE_DURATION - Duration::from_secs(1);
    election.tick(&leader, &mut observed, renewed, T1);
    let after = now + LEASE_DURATION + Duration::from_secs(1);
    election.tick(&leader, &mut observed, after, T1);
    assert!(!leader.acts_at(after));
    assert_eq!(
        election.store.spec().holder_identity.as_deref(),
        Some(OTHER)
    );
    assert_eq!(*election.store.version.borrow(), 2, "nothing written");
}

#[test]
fn a_holder_silent_for_the_lease_duration_is_taken_over() {
    let store = Memory::default();
    store.put(held_by(OTHER, T0));
    let election = election(store);
    let (leader, now) = (leader(), Instant::now());
    let mut observed = Observed::new(now);
    let steps = [LEASE_DURATION - Duration::from_millis(1), LEASE_DURATION];
    let lease = election.store.get().expect("a read");
    assert_eq!(decide(lease.as_ref(), &mut observed, ME, now), Step::Follow);
    assert_eq!(
        decide(lease.as_ref(), &mut observed, ME, now + steps[0]),
        Step::Follow
    );
    assert_eq!(
        decide(lease.as_ref(), &mut observed, ME, now + steps[1]),
        Step::TakeOver
    );
    election.tick(&leader, &mut observed, now + steps[1], T1);
    assert!(leader.acts_at(now + steps[1]));
    let spec = election.store.spec();
    assert_eq!(spec.holder_identity.as_deref(), Some(ME));
    assert_eq!((spec.acquire_time, spec.renew_time), (micro(T1), micro(T1)));
    assert_eq!(spec.lease_transitions, Some(4));
}

#[test]
fn a_lease_given_up_is_taken_at_once() {
    let store = Memory::default();
    store.put(held_by("", T0));
    let election = election(store);
    let (leader, now) = (leader(), Instant::now());
    election.tick(&leader, &mut Observed::new(now), now, T1);
    assert!(leader.acts_at(now));
    assert_eq!(election.store.spec().holder_identity.as_deref(), Some(ME));
}

#[test]
fn a_take_over_refused_for_a_conflict_follows() {
    let store = Memory::default();
    store.put(held_by("", T0));
    // Another replica takes it between our read and our write.
    *store.race.borrow_mut() = Some(held_by(OTHER, T1));
    let election = election(store);
    let (leader, now) = (leader(), Instant::now());
    let mut observed = Observed::new(now);
    let round = election.round(&mut observed, now, T1);
    assert!(matches!(round, Ok(false)), "{round:?}");
    election.tick(&leader, &mut observed, now, T1);
    assert!(!leader.acts_at(now));
    assert_eq!(
        election.store.spec().holder_identity.as_deref(),
        Some(OTHER)
    );
}

#[test]
fn a_create_refused_for_a_conflict_follows() {
    let store = Memory::default();
    *store.race.borrow_mut() = Some(held_by(OTHER, T0));
    let election = election(store);
    let now = Instant::now();
    let round = election.round(&mut Observed::new(now), now, T0);
    assert!(matches!(round, Ok(false)), "{round:?}");
    assert_eq!(
        election.store.spec().holder_identity.as_deref(),
        Some(OTHER)
    );
}

#[test]
fn a_lease_lost_stops_acting_at_once() {
    let election = election(Memory::default());
    let (leader, now) = (leader(), Instant::now());
    let mut observed = Observed::new(now);
    election.tick(&leader, &mut observed, now, T0);
    assert!(leader.acts_at(now));
    // Another replica took it over (it waited its duration out on its
    // own clock while ours was stuck).
    election.store.put(held_by(OTHER, T1));
    let later = now + RETRY;
    election.tick(&leader, &mut observed, later, T1);
    assert!(
        !leader.acts_at(later),
        "stopped at the first round that sees it"
    );
    assert_eq!(
        election.store.spec().holder_identity.as_deref(),
        Some(OTHER)
    );
}

#[test]
fn a_renewal_that_fails_stops_acting_by_the_renew_deadline() {
    let election = election(Memory::default());
    let (leader, now) = (leader(), Instant::now());
    let mut observed = Observed::new(now);
    election.tick(&leader, &mut observed, now, T0);
    *election.store.down.borrow_mut() = true;
    election.tick(&leader, &mut observed, now + RETRY, T1);
    let deadline = now + RENEW_DEADLINE;
    assert!(leader.acts_at(deadline - Duration::from_millis(1)));
    assert!(
        !leader.acts_at(deadline),
        "well before another may take over"
    );
    assert!(RENEW_DEADLINE < LEASE_DURATION);
}

#[test]
fn giving_up_empties_the_holder_and_keeps_the_rest() {
    let election = election(Memory::default());
    let (leader, now) = (leader(), Instant::now());
    election.tick(&leader, &mut Observed::new(now), now, T0);
    let before = election.store.spec();
    election.give_up().expect("given up");
    let after = election.store.spec();
    assert_eq!(after.holder_identity.as_deref(), Some(""));
    assert_eq!(after.lease_duration_seconds, before.lease_duration_seconds);
    assert_eq!(after.renew_time, before.renew_time);
    assert_eq!(after.lease_transitions, before.lease_transitions);
    // Another's Lease is left alone.
    election.store.put(held_by(OTHER, T1));
    election.give_up().expect("nothing to give up");
    assert_eq!(
        election.store.spec().holder_identity.as_deref(),
        Some(OTHER)
    );
    assert_eq!(*election.store.version.borrow(), 3, "nothing written");
}
