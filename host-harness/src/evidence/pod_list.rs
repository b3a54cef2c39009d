//! The documents a host inventory reads, as records by hostname: the
//! PodList JSON that `kubectl get pods -A -o json` prints, the pods of the
//! Kubernetes API (a list's items), or a plain list
//! `[{"name", "started", "state"}]`; and a pod as the pod watch follows it
//! ([`PodState`]). What a record says of a lock is the inventory's
//! ([`super::inventory`]); how the API's pods are listed and shared,
//! [`super::shared_pods`]'s.

use std::collections::{BTreeMap, HashMap};

use serde::Deserialize;
use serde_json::Value;

use crate::time::parse_rfc3339;

/// What the inventory says about one host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRecord {
    /// `running`, `succeeded`, `failed`, `pending` or `unknown`.
    pub state: String,
    /// When the host (pod) started, ns since the epoch.
    pub started: Option<i64>,
    /// The earliest start of the containers that could hold a lock, when
    /// each of them runs with a known start ([`Pod::containers_started`]).
    pub containers_started: Option<i64>,
    /// The pod's namespace (`None` in a plain list).
    pub namespace: Option<String>,
    /// The pod's uid (`None` in a plain list): one pod, not another of the
    /// same name.
    pub uid: Option<String>,
    /// When its last container ended, when every container status says
    /// terminated with a time (ns since the epoch, the kubelet's clock).
    pub finished: Option<i64>,
}

/// The hosts of one reading by hostname, and the namespaces whose pods
/// could not be listed, with why (none but from the Kubernetes API).
#[derive(Debug, Default)]
pub struct Hosts {
    /// Hostname -> the records answering to it.
    pub records: HashMap<String, Vec<HostRecord>>,
    /// Namespace -> why its pods are missing.
    pub failed: BTreeMap<String, String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Document {
    PodList { items: Vec<Pod> },
    Plain(Vec<PlainHost>),
}

#[derive(Deserialize)]
struct Pod {
    metadata: PodMetadata,
    #[serde(default)]
    spec: PodSpec,
    #[serde(default)]
    status: PodStatus,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PodMetadata {
    name: String,
    namespace: Option<String>,
    #[serde(default)]
    uid: String,
    creation_timestamp: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct PodSpec {
    hostname: Option<String>,
    subdomain: Option<String>,
    #[serde(default, rename = "setHostnameAsFQDN")]
    set_hostname_as_fqdn: Option<bool>,
    node_name: Option<String>,
    termination_grace_period_seconds: Option<i64>,
    restart_policy: Option<String>,
    #[serde(default)]
    containers: Vec<SpecContainer>,
    #[serde(default)]
    init_containers: Vec<SpecContainer>,
    #[serde(default)]
    ephemeral_containers: Vec<SpecContainer>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SpecContainer {
    #[serde(default)]
    name: String,
    /// `Always` on an init container: a native sidecar.
    restart_policy: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct PodStatus {
    phase: Option<String>,
    start_time: Option<String>,
    #[serde(default)]
    container_statuses: Vec<ContainerStatus>,
    #[serde(default)]
    init_container_statuses: Vec<ContainerStatus>,
    #[serde(default)]
    ephemeral_container_statuses: Vec<ContainerStatus>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ContainerStatus {
    #[serde(default)]
    name: String,
    #[serde(default)]
    restart_count: u64,
    #[serde(default)]
    state: ContainerState,
}

#[derive(Deserialize, Default)]
struct ContainerState {
    running: Option<Running>,
    terminated: Option<Terminated>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Terminated {
    finished_at: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Running {
    started_at: Option<String>,
}

#[derive(Deserialize)]
struct PlainHost {
    name: String,
    started: Option<String>,
    state: String,
}

/// Why an inventory or a pod of the API cannot be read as records.
#[derive(Debug, thiserror::Error)]
pub enum PodListError {
    /// The document is of neither accepted shape.
    #[error(
        "the inventory is neither a Kubernetes PodList nor a list of {{name, started, state}}: {0}"
    )]
    Document(serde_json::Error),
    /// A plain list's host has a state of none of the three.
    #[error("host {name}: state `{state}` is not running, succeeded or failed")]
    State {
        /// The host's name.
        name: String,
        /// Its state as given.
        state: String,
    },
    /// A pod of the API is not one.
    #[error("a pod: {0}")]
    Pod(serde_json::Error),
    /// A time field is no RFC 3339 time.
    #[error("{field}: {cause}")]
    Time {
        /// The field (`status.startTime`).
        field: &'static str,
        /// What is wrong with it.
        cause: crate::time::TimeError,
    },
}

fn time(field: &'static str, text: Option<&str>) -> Result<Option<i64>, PodListError> {
    text.map(parse_rfc3339)
        .transpose()
        .map_err(|cause| PodListError::Time { field, cause })
}

/// Parses either format into hostname -> record.
pub fn parse(text: &str) -> Result<HashMap<String, Vec<HostRecord>>, PodListError> {
    let document: Document = serde_json::from_str(text).map_err(PodListError::Document)?;
    let mut hosts: HashMap<String, Vec<HostRecord>> = HashMap::new();
    match document {
        Document::PodList { items } => {
            for pod in items {
                pod.add_to(&mut hosts)?;
            }
        }
        Document::Plain(list) => {
            for host in list {
                let state = host.state.to_ascii_lowercase();
                if !matches!(state.as_str(), "running" | "succeeded" | "failed") {
                    return Err(PodListError::State {
                        name: host.name,
                        state: host.state,
                    });
                }
                let record = HostRecord {
                    state,
                    started: time("started", host.started.as_deref())?,
                    containers_started: None,
                    namespace: None,
                    uid: None,
                    finished: None,
                };
                let key = host_key(&host.name).to_owned();
                hosts.entry(key).or_default().push(record);
            }
        }
    }
    Ok(hosts)
}

/// The pods of the Kubernetes API (a list's items) and the namespaces
/// whose pods could not be listed, read as [`parse`] reads a PodList.
pub fn pods(items: Vec<Value>, failed: BTreeMap<String, String>) -> Result<Hosts, PodListError> {
    let mut records = HashMap::new();
    for item in items {
        let pod: Pod = serde_json::from_value(item).map_err(PodListError::Pod)?;
        pod.add_to(&mut records)?;
    }
    Ok(Hosts { records, failed })
}

/// A pod as the pod watch follows it: who it is, where it runs, and what
/// tells that it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodState {
    /// Its uid (one pod of a name, not another of the same name).
    pub uid: String,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Every hostname restic in it could have had ([`host_key`] of each):
    /// its name, the name or `spec.hostname` cut by kubelet, and the fully
    /// qualified name under `setHostnameAsFQDN`.
    pub hostnames: Vec<String>,
    /// The node it was bound to, if any.
    pub node: Option<String>,
    /// When the API server made it (ns since the epoch, the server's
    /// clock), if it says.
    pub created: Option<i64>,
    /// How long its containers may take to stop once told to (ns): its
    /// `terminationGracePeriodSeconds`, 30 s when not given.
    pub grace: i64,
    /// Whether it Succeeded or Failed.
    pub terminal: bool,
    /// Its containers' restarts, all kinds together.
    pub restarts: u64,
    /// Whether it can run nothing any more: Succeeded or Failed, never
    /// bound to a node (so never ran) with no container said to run, or,
    /// under `restartPolicy: Never`, every container the spec runs for the
    /// pod's life has a status and each status says terminated. Only the
    /// API's last word on a pod (a deletion's object) tells this; a state
    /// the watch saw earlier may have changed since.
    /// A pod bound to a node without statuses (the kubelet never reported,
    /// or the status was lost) may run: it did not stop.
    pub stopped: bool,
}

/// The default `terminationGracePeriodSeconds`.
const DEFAULT_GRACE_SECONDS: i64 = 30;

/// `item`, a pod of the API, as the pod watch follows it. (The message is a
/// [`PodListError::Pod`]'s; the pod watch keeps it as text.)
pub fn pod_state(item: Value) -> Result<PodState, String> {
    let pod: Pod = serde_json::from_value(item).map_err(|e| PodListError::Pod(e).to_string())?;
    let status = &pod.status;
    let statuses = || {
        (status.container_statuses.iter())
            .chain(&status.init_container_statuses)
            .chain(&status.ephemeral_container_statuses)
    };
    let restarts = statuses()
        .map(|c| c.restart_count)
        .fold(0u64, u64::saturating_add);
    let terminal = matches!(status.phase.as_deref(), Some("Succeeded" | "Failed"));
    let running = |c: &ContainerStatus| c.state.running.is_some();
    // Under restartPolicy Always or OnFailure (the default is Always) a
    // terminated container may start again: only Never keeps it ended.
    let never_restarts = pod.spec.restart_policy.as_deref() == Some("Never");
    let all_terminated = never_restarts
        && statuses().next().is_some()
        && statuses().all(|c| c.state.running.is_none() && c.state.terminated.is_some())
        && pod.every_status_given();
    let node = pod.spec.node_name.clone().filter(|n| !n.is_empty());
    let grace = (pod.spec.termination_grace_period_seconds)
        .unwrap_or(DEFAULT_GRACE_SECONDS)
        .clamp(0, 365 * 24 * 3600);
    let created = time(
        "metadata.creationTimestamp",
        pod.metadata.creation_timestamp.as_deref(),
    )
    .map_err(|e| e.to_string())?;
    Ok(PodState {
        stopped: terminal || all_terminated || (node.is_none() && !statuses().any(running)),
        hostnames: pod.hostnames(),
        node,
        created,
        grace: grace * 1_000_000_000,
        terminal,
        restarts,
        uid: pod.metadata.uid.clone(),
        name: pod.metadata.name.clone(),
        namespace: pod.metadata.namespace.unwrap_or_default(),
    })
}

/// Which list of a pod's container statuses a status is in.
#[derive(Clone, Copy)]
enum Kind {
    Main,
    Init,
    Ephemeral,
}

impl Pod {
    /// Adds this pod's record to `hosts`, under every hostname restic in
    /// it could have ([`Pod::hostnames`]).
    fn add_to(&self, hosts: &mut HashMap<String, Vec<HostRecord>>) -> Result<(), PodListError> {
        let record = self.record()?;
        for name in self.hostnames() {
            hosts.entry(name).or_default().push(record.clone());
        }
        Ok(())
    }

    /// Its name, and the hostname restic saw: spec.hostname or the name,
    /// cut by kubelet to 63 bytes without a trailing - or . ; under
    /// `setHostnameAsFQDN` with a subdomain, that hostname qualified
    /// (`host.subdomain.namespace.svc`, the [`host_key`] of the name with
    /// the cluster's domain). Each as its [`host_key`], once.
    fn hostnames(&self) -> Vec<String> {
        let hostname = self.spec.hostname.as_deref().unwrap_or(&self.metadata.name);
        let short = kubelet_hostname(hostname);
        let mut names = vec![self.metadata.name.clone(), short.clone()];
        let subdomain = self.spec.subdomain.as_deref().filter(|s| !s.is_empty());
        if let (Some(true), Some(subdomain)) = (self.spec.set_hostname_as_fqdn, subdomain) {
            let namespace = self.metadata.namespace.as_deref().unwrap_or("default");
            names.push(format!("{short}.{subdomain}.{namespace}.svc"));
        }
        let mut keys: Vec<String> = Vec::new();
        for name in names {
            let key = host_key(&name).to_owned();
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        keys
    }

    /// What the inventory knows of this pod.
    fn record(&self) -> Result<HostRecord, PodListError> {
        Ok(HostRecord {
            state: self
                .status
                .phase
                .as_deref()
                .unwrap_or("unknown")
                .to_ascii_lowercase(),
            started: time("status.startTime", self.status.start_time.as_deref())?,
            containers_started: self.containers_started()?,
            namespace: self.metadata.namespace.clone(),
            uid: Some(self.metadata.uid.clone()).filter(|u| !u.is_empty()),
            finished: self.finished()?,
        })
    }

    /// When its last container ended, when every container status says
    /// terminated with a time.
    fn finished(&self) -> Result<Option<i64>, PodListError> {
        let status = &self.status;
        let statuses = (status.container_statuses.iter())
            .chain(&status.init_container_statuses)
            .chain(&status.ephemeral_container_statuses);
        let mut last: Option<i64> = None;
        for container in statuses {
            let ended = container.state.terminated.as_ref();
            let at = ended.and_then(|t| t.finished_at.as_deref());
            match time("a container's state.terminated.finishedAt", at)? {
                Some(at) => last = Some(last.map_or(at, |l| l.max(at))),
                None => return Ok(None),
            }
        }
        Ok(last)
    }

    /// The earliest start of the containers restic could run in, when
    /// every one of them runs with a known start: then a lock older than
    /// that has lost its holder (a restart kills every process of a
    /// container). Those containers are the main ones, the init containers
    /// and the ephemeral ones, save those that ended for good: an init
    /// container the spec says is not a sidecar (`restartPolicy: Always`)
    /// and an ephemeral container, once terminated, never run again in
    /// this pod (init containers run again only in a new sandbox, which
    /// restarts every container). A process in a terminated container is
    /// dead, so leaving one out is sound: if restic ran there, its holder
    /// is gone whatever the others say, and if not, the claim rests on the
    /// others. Any other container not running with a known start (a
    /// waiting one, a terminated sidecar or main container, an init
    /// container the spec does not describe, one in the spec without a
    /// status) leaves the holder's container unknown: `None`, no claim.
    fn containers_started(&self) -> Result<Option<i64>, PodListError> {
        let status = &self.status;
        let main = status.container_statuses.iter().map(|c| (Kind::Main, c));
        let init = status
            .init_container_statuses
            .iter()
            .map(|c| (Kind::Init, c));
        let ephemeral = status
            .ephemeral_container_statuses
            .iter()
            .map(|c| (Kind::Ephemeral, c));
        let (mut earliest, mut all_known) = (None::<i64>, true);
        for (kind, container) in main.chain(init).chain(ephemeral) {
            if self.ended(kind, container) {
                continue;
            }
            let started = container
                .state
                .running
                .as_ref()
                .and_then(|r| r.started_at.as_deref());
            match time("a container's state.running.startedAt", started)? {
                Some(t) => earliest = Some(earliest.map_or(t, |e| e.min(t))),
                None => all_known = false,
            }
        }
        Ok(earliest.filter(|_| all_known && self.every_status_given()))
    }

    /// Whether `container`, in the statuses of `kind`, has ended for good.
    fn ended(&self, kind: Kind, container: &ContainerStatus) -> bool {
        let terminated = container.state.terminated.is_some();
        match kind {
            Kind::Main => false,
            Kind::Ephemeral => terminated,
            Kind::Init => {
                terminated
                    && self.spec.init_containers.iter().any(|c| {
                        c.name == container.name && c.restart_policy.as_deref() != Some("Always")
                    })
            }
        }
    }

    /// Whether each container the spec says runs for the pod's life (main,
    /// sidecar) or was added to it (ephemeral) has a status.
    fn every_status_given(&self) -> bool {
        let (spec, status) = (&self.spec, &self.status);
        let has =
            |statuses: &[ContainerStatus], name: &str| statuses.iter().any(|c| c.name == name);
        let sidecars = spec
            .init_containers
            .iter()
            .filter(|c| c.restart_policy.as_deref() == Some("Always"));
        spec.containers
            .iter()
            .all(|c| has(&status.container_statuses, &c.name))
            && sidecars
                .into_iter()
                .all(|c| has(&status.init_container_statuses, &c.name))
            && spec
                .ephemeral_containers
                .iter()
                .all(|c| has(&status.ephemeral_container_statuses, &c.name))
    }
}

/// The name under which a lock's `hostname` is looked up: the hostname
/// itself, or for a fully qualified one of a pod (`host.subdomain.ns.svc.`
/// and the cluster's domain, which lockwarden does not know) its part up to
/// `.svc`, as [`Pod::hostnames`] gives it.
pub fn host_key(hostname: &str) -> &str {
    match hostname.find(".svc.") {
        Some(at) => &hostname[..at + ".svc".len()],
        None => hostname,
    }
}

/// A pod's hostname as kubelet sets it: at most 63 bytes, then without a
/// trailing `-` or `.` (`truncatePodHostnameIfNeeded`).
pub(super) fn kubelet_hostname(name: &str) -> String {
    if name.len() <= 63 {
        return name.to_owned();
    }
    let mut end = 63;
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    name[..end].trim_end_matches(['-', '.']).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_refusal_names_its_cause() {
        let state =
            parse(r#"[{"name":"vm","started":null,"state":"paused"}]"#).expect_err("no such state");
        assert!(matches!(state, PodListError::State { .. }), "{state:?}");
        assert_eq!(
            state.to_string(),
            "host vm: state `paused` is not running, succeeded or failed"
        );
        let time =
            parse(r#"[{"name":"vm","started":"noon","state":"running"}]"#).expect_err("no time");
        assert!(
            time.to_string()
                .starts_with("started: `noon` is not an RFC 3339 time: "),
            "{time}"
        );
        let document = parse("{}").expect_err("no inventory").to_string();
        assert!(
            document.starts_with(
                "the inventory is neither a Kubernetes PodList nor a list of \
                 {name, started, state}: "
            ),
            "{document}"
        );
        let pod = pods(vec![Value::from(7)], BTreeMap::new()).expect_err("no pod");
        assert!(pod.to_string().starts_with("a pod: "), "{pod}");
        let started = serde_json::json!({
            "metadata": {"name": "p", "uid": "u"},
            "status": {"startTime": "late"},
        });
        let pod = pods(vec![started], BTreeMap::new()).expect_err("no start time");
        assert!(
            pod.to_string()
                .starts_with("status.startTime: `late` is not an RFC 3339 time: "),
            "{pod}"
        );
    }

    #[test]
    fn a_pod_bound_to_a_node_without_statuses_did_not_stop() {
        let state = |spec: Value, status: Value| {
            let pod = serde_json::json!({"metadata": {"name": "p", "namespace": "a", "uid": "u"},
                                         "spec": spec, "status": status});
            pod_state(pod).expect("a pod")
        };
        let containers = serde_json::json!([{"name": "restic"}]);
        let bound = serde_json::json!({"nodeName": "n", "containers": containers});
        let terminated = serde_json::json!({"containerStatuses": [
            {"name": "restic", "state": {"terminated": {"exitCode": 1}}}]});
        let running = serde_json::json!({"containerStatuses": [
            {"name": "restic", "state": {"running": {}}}]});
        assert!(
            !state(bound.clone(), serde_json::json!({})).stopped,
            "no statuses"
        );
        let never = serde_json::json!({"nodeName": "n", "containers": containers,
                                       "restartPolicy": "Never"});
        assert!(state(never, terminated.clone()).stopped);
        assert!(
            !state(bound.clone(), terminated).stopped,
            "restartPolicy Always (the default): it may start again"
        );
        assert!(!state(bound.clone(), running).stopped);
        assert!(state(bound, serde_json::json!({"phase": "Failed"})).stopped);
        let unbound = serde_json::json!({"containers": containers});
        let never = state(unbound, serde_json::json!({}));
        assert!(never.stopped, "never bound, never ran");
        assert_eq!(never.node, None);
        assert_eq!(never.grace, 30_000_000_000);
    }

    #[test]
    fn a_pod_answers_to_every_hostname_restic_in_it_could_have() {
        let long = format!("backup-{}", "x".repeat(70));
        let pod = serde_json::json!({
            "metadata": {"name": long, "namespace": "team", "uid": "u"},
            "spec": {"hostname": "restic", "subdomain": "movers", "setHostnameAsFQDN": true}});
        let state = pod_state(pod).expect("a pod");
        assert_eq!(
            state.hostnames,
            [long.as_str(), "restic", "restic.movers.team.svc"]
        );
        assert_eq!(
            host_key("restic.movers.team.svc.cluster.local"),
            "restic.movers.team.svc"
        );
        assert_eq!(host_key("backup-x"), "backup-x");
        let plain = serde_json::json!({"metadata": {"name": long, "uid": "v"}});
        let cut = kubelet_hostname(&long);
        assert_eq!(
            pod_state(plain).expect("a pod").hostnames,
            [long.clone(), cut]
        );
    }
}
