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
//! ```toml
//! [leader]
//! lease = "lockwarden"       # the Lease's name
//! namespace = "lockwarden"   # optional: default POD_NAMESPACE
//! ```

use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{Value, json};

use crate::kubernetes::micro_time;
use crate::kubernetes::{KubeError, Kubernetes, is_object_name};
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
        self.renewed
            .lock()
            .map(|r| r.is_some_and(|at| at.elapsed() < RENEW_DEADLINE))
            .unwrap_or(false)
    }

    fn set(&self, renewed: Option<Instant>) {
        if let Ok(mut slot) = self.renewed.lock() {
            *slot = renewed;
        }
    }
}

/// The Lease as this replica last saw it, and since when, by its own clock.
struct Observed {
    record: Option<(String, String)>,
    since: Instant,
}

/// The Lease and who this replica is.
struct Election {
    path: String,
    collection: String,
    name: String,
    identity: String,
    timeout: Duration,
}

impl LeaderEntry {
    /// Starts electing: a thread that takes and renews the Lease until
    /// `stop`, then gives it up. `timeout` bounds each request.
    pub fn start(
        &self,
        timeout: Duration,
        stop: Arc<Stop>,
    ) -> Result<(Arc<Leader>, JoinHandle<()>), String> {
        let namespace = match &self.namespace {
            Some(ns) => ns.clone(),
            None => std::env::var("POD_NAMESPACE")
                .ok()
                .filter(|ns| !ns.is_empty())
                .ok_or("[leader]: give namespace, or set POD_NAMESPACE (the downward API)")?,
        };
        if !is_object_name(&namespace) || !is_object_name(&self.lease) {
            return Err(
                "[leader]: lease and namespace must be names the API gives (lower-case \
                        letters, digits, `-` and `.`)"
                    .into(),
            );
        }
        let collection = format!("/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases");
        let election = Election {
            path: format!("{collection}/{}", self.lease),
            collection,
            name: self.lease.clone(),
            identity: identity()?,
            // A renewal that cannot finish before the deadline is no use.
            timeout: timeout.min(RENEW_DEADLINE / 2),
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
fn identity() -> Result<String, String> {
    let mut bytes = [0u8; 4];
    getrandom::fill(&mut bytes).map_err(|e| format!("no random numbers: {e}"))?;
    let host = crate::evidence::hostname().unwrap_or_else(|| "lockwarden".into());
    Ok(format!("{host}_{}", hex::encode(bytes)))
}

impl Election {
    fn run(&self, leader: &Leader, stop: &Stop) {
        let mut observed = Observed {
            record: None,
            since: Instant::now(),
        };
        let mut acting = false;
        loop {
            let started = Instant::now();
            match self.round(&mut observed) {
                Ok(true) => leader.set(Some(started)),
                Ok(false) => leader.set(None),
                Err(e) => tracing::warn!("leader election: {}", escape(&e.to_string())),
            }
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

    /// One try: true when this replica holds the Lease afterwards.
    fn round(&self, observed: &mut Observed) -> Result<bool, KubeError> {
        let client = Kubernetes::shared(self.timeout)?;
        let lease: Value = match client.get(self.timeout, &self.path) {
            Err(e) if e.code() == Some(404) => return self.create(&client),
            other => other?,
        };
        let holder = lease
            .pointer("/spec/holderIdentity")
            .and_then(Value::as_str)
            .unwrap_or("");
        let version = lease
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let renewed = lease
            .pointer("/spec/renewTime")
            .and_then(Value::as_str)
            .unwrap_or("");
        let record = Some((holder.to_owned(), format!("{renewed} {version}")));
        if observed.record != record {
            observed.record = record;
            observed.since = Instant::now();
        }
        let duration = lease
            .pointer("/spec/leaseDurationSeconds")
            .and_then(Value::as_u64)
            .map_or(LEASE_DURATION, |s| Duration::from_secs(s.clamp(1, 3600)));
        let ours = holder == self.identity;
        if !ours && !holder.is_empty() && observed.since.elapsed() < duration {
            return Ok(false);
        }
        self.write(&client, lease, ours, &version)
    }

    fn create(&self, client: &Kubernetes) -> Result<bool, KubeError> {
        let now = micro_time(crate::time::now());
        let body = json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": { "name": self.name },
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": LEASE_DURATION.as_secs(),
                "acquireTime": now,
                "renewTime": now,
                "leaseTransitions": 0,
            },
        });
        match client.send::<Value>(self.timeout, "POST", &self.collection, Some(&body)) {
            Ok(_) => Ok(true),
            Err(e) if e.code() == Some(409) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Renews the Lease (`ours`) or takes it over, at `version`.
    fn write(
        &self,
        client: &Kubernetes,
        mut lease: Value,
        ours: bool,
        version: &str,
    ) -> Result<bool, KubeError> {
        let now = micro_time(crate::time::now());
        let spec = lease
            .as_object_mut()
            .map(|o| o.entry("spec").or_insert_with(|| json!({})));
        let Some(Value::Object(spec)) = spec else {
            return Ok(false);
        };
        if !ours {
            let transitions = spec
                .get("leaseTransitions")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            spec.insert("holderIdentity".into(), json!(self.identity));
            spec.insert("acquireTime".into(), json!(now));
            spec.insert(
                "leaseTransitions".into(),
                json!(transitions.saturating_add(1)),
            );
        }
        spec.insert(
            "leaseDurationSeconds".into(),
            json!(LEASE_DURATION.as_secs()),
        );
        spec.insert("renewTime".into(), json!(now));
        if let Some(meta) = lease.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("resourceVersion".into(), json!(version));
        }
        match client.send::<Value>(self.timeout, "PUT", &self.path, Some(&lease)) {
            Ok(_) => Ok(true),
            Err(e) if e.code() == Some(409) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Gives the Lease up (holder emptied), so another replica need not
    /// wait for it to expire.
    fn give_up(&self) -> Result<(), KubeError> {
        let client = Kubernetes::shared(self.timeout)?;
        let mut lease: Value = client.get(self.timeout, &self.path)?;
        if lease
            .pointer("/spec/holderIdentity")
            .and_then(Value::as_str)
            != Some(&self.identity)
        {
            return Ok(());
        }
        if let Some(spec) = lease.get_mut("spec").and_then(Value::as_object_mut) {
            spec.insert("holderIdentity".into(), json!(""));
        }
        client
            .send::<Value>(self.timeout, "PUT", &self.path, Some(&lease))
            .map(drop)
    }
}
