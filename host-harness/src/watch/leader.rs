//! One leader among `watch` replicas, through a `coordination.k8s.io/v1`
//! Lease (watch.toml's `[leader]`), the way client-go's leader election
//! does it: the holder renews the Lease every [`RETRY`]; another replica
//! takes it over only once it has seen the same record unchanged for the
//! lease's duration, by its own monotonic clock (so no two clocks are
//! compared); every write carries the `resourceVersion` read, so of two
//! replicas writing at once one is refused (409).
//!
//! A replica acts (removes locks) only while it holds the Lease *and* its
//! last successful renewal is younger than [`RENEW_DEADLINE`]: losing the
//! API server, or a renewal refused, stops acting at once, well before
//! another replica may take over ([`LEASE_DURATION`]). On a clean stop the
//! holder gives the Lease up, so another takes over without waiting.
//!
//! The decisions (create, renew, take over, follow: `decide`) are apart
//! from where the Lease is kept (`LeaseStore`: the API server, through
//! the client handed down, or memory in the tests); the Lease is
//! `k8s-openapi`'s, its times written with the six fractional digits the
//! API server parses.
//!
//! ```toml
//! [leader]
//! lease = "lockwarden"       # the Lease's name
//! namespace = "lockwarden"   # optional: default POD_NAMESPACE
//! ```

use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use serde::Deserialize;

use crate::error::{Classify, ErrorKind};
use crate::kubernetes::{Connection, KubeError, is_object_name, timestamp};
use crate::stop::Stop;
use crate::text::escape;

/// How long a Lease holds without renewal (client-go's default).
pub const LEASE_DURATION: Duration = Duration::from_secs(15);
/// How long after its last renewal the holder stops acting.
pub const RENEW_DEADLINE: Duration = Duration::from_secs(10);
/// How often the Lease is renewed, or tried for.
pub const RETRY: Duration = Duration::from_secs(2);

/// `[leader]` as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeaderEntry {
    lease: String,
    namespace: Option<String>,
}

/// Whether this replica may act.
pub struct Leader {
    /// When it last renewed the Lease it holds; `None` when it holds none.
    renewed: Mutex<Option<Instant>>,
}

impl Leader {
    /// True while this replica holds the Lease, renewed within
    /// [`RENEW_DEADLINE`].
    pub fn acts(&self) -> bool {
        self.acts_at(Instant::now())
    }

    /// [`Leader::acts`] at `now`.
    fn acts_at(&self, now: Instant) -> bool {
        self.renewed
            .lock()
            .map(|r| r.is_some_and(|at| now.saturating_duration_since(at) < RENEW_DEADLINE))
            .unwrap_or(false)
    }

    fn set(&self, renewed: Option<Instant>) {
        if let Ok(mut slot) = self.renewed.lock() {
            *slot = renewed;
        }
    }
}

/// Where the Lease is kept: the API server ([`ApiLease`]), or memory in
/// the tests. Each write carries the `resourceVersion` read, and a store
/// refuses one whose version is no longer current with a 409, as the API
/// server does.
trait LeaseStore {
    /// The Lease, or `None` when there is none (404).
    fn get(&self) -> Result<Option<Lease>, KubeError>;
    /// Creates `lease` (409 when one was created first).
    fn create(&self, lease: &Lease) -> Result<(), KubeError>;
    /// Replaces the Lease with `lease`, at its `resourceVersion` (409 when
    /// it changed since it was read).
    fn replace(&self, lease: &Lease) -> Result<(), KubeError>;
}

/// The Lease on the API server, through the client handed down.
struct ApiLease {
    kubernetes: Connection,
    /// The Lease's path, and its collection's (to create it).
    path: String,
    collection: String,
    timeout: Duration,
}

impl ApiLease {
    /// Sends `lease` to `path` with `method`.
    fn send(&self, method: &str, path: &str, lease: &Lease) -> Result<(), KubeError> {
        let client = self.kubernetes.client()?;
        let body = serde_json::to_value(lease).map_err(|e| KubeError::Failed {
            what: format!("{method} {}", escape(path)),
            cause: e.to_string(),
        })?;
        (client.send::<serde_json::Value>(self.timeout, method, path, Some(&body))).map(drop)
    }
}

impl LeaseStore for ApiLease {
    fn get(&self) -> Result<Option<Lease>, KubeError> {
        let client = self.kubernetes.client()?;
        match client.get::<Lease>(self.timeout, &self.path) {
            Err(e) if e.code() == Some(404) => Ok(None),
            other => other.map(Some),
        }
    }

    fn create(&self, lease: &Lease) -> Result<(), KubeError> {
        self.send("POST", &self.collection, lease)
    }

    fn replace(&self, lease: &Lease) -> Result<(), KubeError> {
        self.send("PUT", &self.path, lease)
    }
}

/// What a replica does after reading the Lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// There is none: create it, held by this replica.
    Create,
    /// This replica holds it: renew it.
    Renew,
    /// Nobody holds it, or its holder left it unchanged for its duration:
    /// take it over.
    TakeOver,
    /// Another holds it and renews it: follow, and do not act.
    Follow,
}

/// What of the Lease tells that its holder is alive: any change to it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Record {
    holder: String,
    renewed: Option<MicroTime>,
    version: Option<String>,
}

/// The Lease as this replica last saw it, and since when, by its own clock.
struct Observed {
    record: Option<Record>,
    since: Instant,
}

impl Observed {
    /// Nothing seen yet, at `now`.
    fn new(now: Instant) -> Observed {
        Observed {
            record: None,
            since: now,
        }
    }
}

/// What this replica (`identity`) does next, given the Lease read
/// (`None`: there is none) at `now` by its monotonic clock, and what it saw
/// before (`observed`, updated). Another holder counts as gone only once
/// its record stayed unchanged for the Lease's duration, as this replica
/// measured it: no two clocks are compared.
fn decide(lease: Option<&Lease>, observed: &mut Observed, identity: &str, now: Instant) -> Step {
    let Some(lease) = lease else {
        return Step::Create;
    };
    let spec = lease.spec.as_ref();
    let holder = spec
        .and_then(|s| s.holder_identity.as_deref())
        .unwrap_or("");
    let record = Some(Record {
        holder: holder.to_owned(),
        renewed: spec.and_then(|s| s.renew_time.clone()),
        version: lease.metadata.resource_version.clone(),
    });
    if observed.record != record {
        observed.record = record;
        observed.since = now;
    }
    let duration = (spec.and_then(|s| s.lease_duration_seconds))
        .and_then(|s| u64::try_from(s).ok())
        .map_or(LEASE_DURATION, |s| Duration::from_secs(s.clamp(1, 3600)));
    if holder == identity {
        Step::Renew
    } else if holder.is_empty() || now.saturating_duration_since(observed.since) >= duration {
        Step::TakeOver
    } else {
        Step::Follow
    }
}

/// The Lease and who this replica is.
struct Election<S> {
    store: S,
    name: String,
    identity: String,
}

/// Why leader election cannot start.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// No namespace is given or known.
    #[error("[leader]: give namespace, or set POD_NAMESPACE (the downward API)")]
    NoNamespace,
    /// The lease or namespace is no name the API gives.
    #[error(
        "[leader]: lease and namespace must be names the API gives (lower-case letters, \
         digits, `-` and `.`)"
    )]
    NotNames,
    /// The random suffix of this replica's identity cannot be made.
    #[error("no random numbers: {0}")]
    NoRandom(getrandom::Error),
}

impl Classify for LeaderError {
    fn kind(&self) -> ErrorKind {
        match self {
            LeaderError::NoNamespace | LeaderError::NotNames => ErrorKind::Usage,
            LeaderError::NoRandom(_) => ErrorKind::Failed,
        }
    }
}

impl LeaderEntry {
    /// Starts electing: a thread that takes and renews the Lease through
    /// `kubernetes` (the client handed down) until `stop`, then gives it
    /// up. `timeout` bounds each request.
    pub fn start(
        &self,
        kubernetes: Connection,
        timeout: Duration,
        stop: Arc<Stop>,
    ) -> Result<(Arc<Leader>, JoinHandle<()>), LeaderError> {
        let namespace = match &self.namespace {
            Some(ns) => ns.clone(),
            None => std::env::var("POD_NAMESPACE")
                .ok()
                .filter(|ns| !ns.is_empty())
                .ok_or(LeaderError::NoNamespace)?,
        };
        if !is_object_name(&namespace) || !is_object_name(&self.lease) {
            return Err(LeaderError::NotNames);
        }
        let collection = format!("/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases");
        let store = ApiLease {
            kubernetes,
            path: format!("{collection}/{}", self.lease),
            collection,
            // A renewal that cannot finish before the deadline is no use.
            timeout: timeout.min(RENEW_DEADLINE / 2),
        };
        let election = Election {
            store,
            name: self.lease.clone(),
            identity: identity()?,
        };
        tracing::info!(
            "leader election: Lease {}/{} as {}",
            escape(&namespace),
            escape(&self.lease),
            escape(&election.identity)
        );
        let leader = Arc::new(Leader {
            renewed: Mutex::new(None),
        });
        let shared = leader.clone();
        let handle = std::thread::spawn(move || election.run(&shared, &stop));
        Ok((leader, handle))
    }
}

/// This replica's name in the Lease: its hostname (the pod's name) and a
/// random suffix, so that a restarted pod is a new holder.
fn identity() -> Result<String, LeaderError> {
    let mut bytes = [0u8; 4];
    getrandom::fill(&mut bytes).map_err(LeaderError::NoRandom)?;
    let host = crate::evidence::hostname().unwrap_or_else(|| "lockwarden".into());
    Ok(format!("{host}_{}", hex::encode(bytes)))
}

impl<S: LeaseStore> Election<S> {
    fn run(&self, leader: &Leader, stop: &Stop) {
        let mut observed = Observed::new(Instant::now());
        let mut acting = false;
        loop {
            self.tick(leader, &mut observed, Instant::now(), crate::time::now());
            match (acting, leader.acts()) {
                (false, true) => tracing::info!("leader election: this replica leads now"),
                (true, false) => tracing::warn!(
                    "leader election: this replica no longer holds the Lease (another holds it, \
                     or it could not be renewed within {}s); not acting",
                    RENEW_DEADLINE.as_secs()
                ),
                _ => {}
            }
            acting = leader.acts();
            if stop.sleep(RETRY) {
                break;
            }
        }
        if leader.acts() {
            leader.set(None);
            if let Err(e) = self.give_up() {
                tracing::warn!(
                    "leader election: could not give up the Lease: {}",
                    escape(&e.to_string())
                );
            }
        }
    }

    /// One round begun at `now` (`wall`: ns since the epoch, for the
    /// Lease's times), told to `leader`: holding the Lease afterwards, it
    /// acts (renewed at `now`); not holding it, it stops at once; after an
    /// error it acts as before, until [`RENEW_DEADLINE`] after its last
    /// renewal.
    fn tick(&self, leader: &Leader, observed: &mut Observed, now: Instant, wall: i64) {
        match self.round(observed, now, wall) {
            Ok(true) => leader.set(Some(now)),
            Ok(false) => leader.set(None),
            Err(e) => tracing::warn!("leader election: {}", escape(&e.to_string())),
        }
    }

    /// One try: true when this replica holds the Lease afterwards. A write
    /// refused for a conflict (409: another replica wrote first) is no
    /// error: this replica follows.
    fn round(&self, observed: &mut Observed, now: Instant, wall: i64) -> Result<bool, KubeError> {
        let lease = self.store.get()?;
        let written = match (decide(lease.as_ref(), observed, &self.identity, now), lease) {
            (Step::Follow, _) => return Ok(false),
            (Step::Renew, Some(lease)) => self.store.replace(&self.renewed(lease, false, wall)),
            (Step::TakeOver, Some(lease)) => self.store.replace(&self.renewed(lease, true, wall)),
            // Only with none read ([`decide`]).
            (Step::Create | Step::Renew | Step::TakeOver, _) => {
                self.store.create(&self.created(wall))
            }
        };
        match written {
            Ok(()) => Ok(true),
            Err(e) if e.code() == Some(409) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// A new Lease, held by this replica since `wall`.
    fn created(&self, wall: i64) -> Lease {
        let now = MicroTime(timestamp(wall));
        Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(self.identity.clone()),
                lease_duration_seconds: Some(lease_seconds()),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                lease_transitions: Some(0),
                ..LeaseSpec::default()
            }),
        }
    }

    /// `lease` (as read, at its `resourceVersion`) renewed at `wall`, and
    /// taken over by this replica when `take_over`.
    fn renewed(&self, mut lease: Lease, take_over: bool, wall: i64) -> Lease {
        let now = MicroTime(timestamp(wall));
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if take_over {
            let transitions = spec.lease_transitions.unwrap_or(0);
            spec.holder_identity = Some(self.identity.clone());
            spec.acquire_time = Some(now.clone());
            spec.lease_transitions = Some(transitions.saturating_add(1));
        }
        spec.lease_duration_seconds = Some(lease_seconds());
        spec.renew_time = Some(now);
        lease
    }

    /// Gives the Lease up (holder emptied, the rest as it was), so another
    /// replica need not wait for it to expire; nothing when another holds
    /// it.
    fn give_up(&self) -> Result<(), KubeError> {
        let Some(mut lease) = self.store.get()? else {
            return Ok(());
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if spec.holder_identity.as_deref() != Some(&self.identity) {
            return Ok(());
        }
        spec.holder_identity = Some(String::new());
        self.store.replace(&lease)
    }
}

/// [`LEASE_DURATION`] as the Lease writes it.
fn lease_seconds() -> i32 {
    i32::try_from(LEASE_DURATION.as_secs()).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod error_tests {
    use super::*;

    #[test]
    fn a_lease_named_as_the_api_never_names_is_refused_as_usage() {
        let entry = LeaderEntry {
            lease: "Lockwarden".into(),
            namespace: Some("lockwarden".into()),
        };
        let stop = Arc::new(Stop::default());
        let refused = entry
            .start(Connection::none(), Duration::from_secs(1), stop)
            .err()
            .expect("refused before any request");
        assert!(matches!(refused, LeaderError::NotNames), "{refused}");
        assert_eq!(refused.kind(), ErrorKind::Usage);
        assert_eq!(
            refused.to_string(),
            "[leader]: lease and namespace must be names the API gives (lower-case letters, \
             digits, `-` and `.`)"
        );
        assert_eq!(
            LeaderError::NoNamespace.to_string(),
            "[leader]: give namespace, or set POD_NAMESPACE (the downward API)"
        );
    }
}
