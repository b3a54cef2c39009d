//! The five operators: which objects each defines repositories in, and how
//! it hands them to restic (one module each).

mod k8up;
mod kubestash;
mod refusal;
mod stash;
mod velero;
mod volsync;

use std::collections::BTreeMap;

use regex::Regex;
use serde::Deserialize;
use serde_json::Value;

use super::api::{ClusterView, SecretUse};
use super::field::text;
use super::{Discovered, Found, Owner, Unusable};
use crate::kubernetes::KubeError;
use crate::repo::Password;
use crate::repo::backend::scheme_of;
use crate::tls::Tls;
use refusal::Refusal;

/// A backup operator whose repositories discovery finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Operator {
    /// Velero's BackupRepository objects of type restic.
    Velero,
    /// Stash's Repository objects.
    Stash,
    /// KubeStash's Repository objects, one repository per restic component.
    #[serde(rename = "kubestash")]
    KubeStash,
    /// K8up's Schedule and Backup objects.
    #[serde(rename = "k8up")]
    K8up,
    /// VolSync's ReplicationSource and ReplicationDestination objects.
    #[serde(rename = "volsync")]
    VolSync,
}

impl Operator {
    /// Every operator, in the order they are listed.
    pub const ALL: [Operator; 5] = [
        Operator::Velero,
        Operator::Stash,
        Operator::KubeStash,
        Operator::K8up,
        Operator::VolSync,
    ];

    /// Its name in watch.toml.
    pub fn name(self) -> &'static str {
        match self {
            Operator::Velero => "velero",
            Operator::Stash => "stash",
            Operator::KubeStash => "kubestash",
            Operator::K8up => "k8up",
            Operator::VolSync => "volsync",
        }
    }

    /// The names of the pods it runs restic in, as a regex (`None`:
    /// KubeStash documents no pattern, and pods are no evidence for it).
    pub fn pods(self) -> Option<&'static str> {
        match self {
            Operator::Velero => Some(velero::HOSTS),
            Operator::Stash => Some(stash::HOSTS),
            Operator::KubeStash => None,
            Operator::K8up => Some(k8up::HOSTS),
            Operator::VolSync => Some(volsync::HOSTS),
        }
    }

    /// Its repositories now. `Err` when its objects cannot be listed.
    pub fn find(self, view: &ClusterView<'_>) -> Result<Vec<Found>, Unlisted> {
        let found = match self {
            Operator::Velero => velero::find(view),
            Operator::Stash => stash::find(view),
            Operator::KubeStash => kubestash::find(view),
            Operator::K8up => k8up::find(view),
            Operator::VolSync => volsync::find(view),
        };
        found.map_err(|error| Unlisted {
            operator: self,
            error,
        })
    }
}

/// An operator whose objects could not be listed (its repositories are
/// then left as they were): which, and the API's error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: {error}", operator.name())]
pub struct Unlisted {
    /// The operator.
    pub operator: Operator,
    /// Why its objects could not be listed.
    pub error: KubeError,
}

/// The owner an object names of itself, when it has a name and namespace.
fn owner(object: &Value, api_version: &str, kind: &str) -> Option<Owner> {
    Some(Owner {
        api_version: api_version.to_owned(),
        kind: kind.to_owned(),
        namespace: text(object, "/metadata/namespace")?.to_owned(),
        name: text(object, "/metadata/name")?.to_owned(),
        uid: text(object, "/metadata/uid").map(str::to_owned),
    })
}

/// The random suffix Kubernetes gives the pods of a Job, DaemonSet or
/// ReplicaSet (five of these characters), which the operators' pod name
/// patterns end with: a host named like an operator's pod but without it
/// (an administrator's machine called `restic-1`) is not taken for one.
macro_rules! pod_suffix {
    () => {
        "[bcdfghjklmnpqrstvwxz2456789]{5}$"
    };
}
pub(crate) use pod_suffix;

/// What one object's repository is made of, before it is checked.
struct Parts {
    /// Which of the object's repositories, when it has several.
    part: Option<String>,
    location: String,
    password: String,
    variables: BTreeMap<String, String>,
    /// The pod names restic runs in, if a pattern is known.
    hosts: Option<&'static str>,
    /// How its storage is reached over TLS, as the object says ([`tls`]).
    tls: Tls,
}

impl Parts {
    /// The one repository of an object, on `location`, whose restic runs in
    /// pods named as `hosts` says.
    fn whole(
        location: String,
        password: String,
        variables: BTreeMap<String, String>,
        hosts: &'static str,
    ) -> Parts {
        Parts {
            part: None,
            location,
            password,
            variables,
            hosts: Some(hosts),
            tls: Tls::Default,
        }
    }

    /// These parts, with the storage reached as `tls` says.
    fn with_tls(self, tls: Tls) -> Parts {
        Parts { tls, ..self }
    }
}

/// The TLS setting an object gives its repository, as its operator hands
/// it to restic: no verification where the field `insecure` names says so
/// (whether watch.toml allows it is decided after, by
/// [`super::Discovery`]), else the CA bundle `ca` (the field that gave it,
/// for messages, and its PEM), added to the system's roots, else the
/// default roots. A bundle that is too large, or holds no certificate or
/// one that does not parse, is refused with the field's name.
fn tls(ca: Option<(String, Vec<u8>)>, insecure: Option<String>) -> Result<Tls, Refusal> {
    if let Some(from) = insecure {
        return Ok(Tls::Insecure { from });
    }
    match ca {
        Some((from, pem)) => Tls::with_ca(&pem, from).map_err(|e| Refusal::Ca(e.to_string())),
        None => Ok(Tls::Default),
    }
}

/// The schemes a discovered repository may use, each with the variables
/// it must be given: static credentials, so that its backend never falls
/// back to lockwarden's own identity (instance metadata, workload identity,
/// its home directory's files). Not `local`: a path in a backup pod, which
/// in lockwarden's pod would name lockwarden's own files.
const SCHEMES: [(&str, &[&str]); 4] = [
    ("s3", &["AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"]),
    ("azure", &["AZURE_ACCOUNT_NAME"]),
    ("gs", &["GOOGLE_ACCESS_TOKEN"]),
    ("rest", &[]),
];

/// `parts` made into a repository of `owner`, read from the Secrets
/// `secrets`, or why not.
fn discovered(owner: Owner, parts: Result<Parts, Refusal>, secrets: Vec<SecretUse>) -> Found {
    let unusable = |owner: Owner, why: String| Unusable::new(owner.label(), owner, why);
    let parts = match parts {
        Ok(parts) => parts,
        Err(why) => return Err(unusable(owner, why.to_string())),
    };
    if let Some(part) = &parts.part
        && !plain_part(part)
    {
        let why = "a component path its Snapshots give is not a plain path (printable ASCII, \
                   no `.` or `..` segment, at most 253 bytes)";
        return Err(unusable(owner, why.into()));
    }
    if let Err(why) = credentials(&parts) {
        return Err(unusable(owner, why.to_string()));
    }
    if let Err(why) = super::location::check(&parts.location, &parts.variables) {
        return Err(unusable(owner, why.to_string()));
    }
    if parts.password.is_empty() {
        return Err(unusable(owner, "its repository password is empty".into()));
    }
    let hosts = match parts.hosts.map(Regex::new).transpose() {
        Ok(hosts) => hosts,
        Err(e) => return Err(unusable(owner, e.to_string())),
    };
    Ok(Discovered {
        part: parts.part,
        location: parts.location,
        password: Password::new(parts.password.into_bytes()),
        variables: parts.variables,
        tls: parts.tls,
        hosts,
        namers: [owner.namespace.clone()].into(),
        owner,
        secrets,
    })
}

/// Whether `part`, which becomes part of the repository's name (in logs,
/// metric labels and Events, some of which are not escaped), is a plain
/// path: the tenant writes it in a Snapshot's status.
fn plain_part(part: &str) -> bool {
    part.len() <= 253
        && part.bytes().all(|b| b.is_ascii_graphic())
        && part
            .split('/')
            .all(|segment| !matches!(segment, "" | "." | ".."))
}

/// Whether `parts` names a scheme discovery reads, with the static
/// credentials it needs.
fn credentials(parts: &Parts) -> Result<(), Refusal> {
    let scheme = scheme_of(&parts.location).name;
    let Some((_, needed)) = SCHEMES.iter().find(|(name, _)| *name == scheme) else {
        return Err(Refusal::OnScheme {
            what: "repository",
            scheme: scheme.to_owned(),
        });
    };
    let has = |name: &str| parts.variables.get(name).is_some_and(|v| !v.is_empty());
    let mut missing: Vec<&str> = needed.iter().copied().filter(|name| !has(name)).collect();
    if scheme == "azure" && !has("AZURE_ACCOUNT_KEY") && !has("AZURE_ACCOUNT_SAS") {
        missing.push("AZURE_ACCOUNT_KEY or AZURE_ACCOUNT_SAS");
    }
    if missing.is_empty() {
        return Ok(());
    }
    Err(Refusal::NoCredentials { scheme, missing })
}

/// Each object of `plural` in `group_version`, as `kind`, made into a
/// repository by `parts` (objects without a name are skipped). `Err` when
/// the objects cannot be listed.
fn each(
    view: &ClusterView<'_>,
    group_version: &str,
    plural: &str,
    kind: &str,
    parts: impl Fn(&Value, &Owner) -> Option<Result<Parts, Refusal>>,
) -> Result<Vec<Found>, KubeError> {
    let objects = view.objects(group_version, plural)?;
    Ok(objects
        .iter()
        .filter_map(|object| {
            let owner = owner(object, group_version, kind)?;
            let (parts, secrets) = view.reading(|| parts(object, &owner));
            Some(discovered(owner, parts?, secrets))
        })
        .collect())
}

/// `a` and `b` joined and cleaned as Go's `filepath.Join` does (Stash and
/// KubeStash build their paths so): empty and `.` parts dropped, `..` going up, no
/// leading or trailing `/`.
fn clean_join(a: &str, b: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in a.split('/').chain(b.split('/')) {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            part => parts.push(part),
        }
    }
    parts.join("/")
}

#[cfg(test)]
mod tests {
    use regex::Regex;

    #[test]
    fn a_component_path_is_plain_or_refused() {
        for good in ["dump", "deployment/app", "pvc-data_1.x"] {
            assert!(super::plain_part(good), "{good}");
        }
        let long = "x".repeat(254);
        for bad in [
            "",
            "a/../b",
            "./a",
            "a//b",
            "a\u{1b}[31m",
            "a b",
            "é",
            long.as_str(),
        ] {
            assert!(!super::plain_part(bad), "{bad:?}");
        }
    }

    #[test]
    fn pod_name_patterns_take_pods_not_machines_named_alike() {
        let cases: [(&str, &[&str], &[&str]); 4] = [
            (
                super::velero::HOSTS,
                &[
                    "node-agent-7f9c4",
                    "velero-6d4b7c9f8-x2b8q",
                    "restic-x2b8q",
                    "app-default-restic-maintain-job-1733140000000-x2b8q",
                ],
                &[
                    "velero-laptop",
                    "restic-bkp01",
                    "node-agent",
                    "node-agent-7f9c4.local",
                ],
            ),
            (
                super::volsync::HOSTS,
                &["volsync-src-data-7f9c4", "volsync-dst-db-x2b8q"],
                &["volsync-src-data-drsite", "volsync-src-x2b8q"],
            ),
            (
                super::k8up::HOSTS,
                &["backup-schedule-test-0-x2b8q", "prune-nightly-x2b8q"],
                &["backup-server", "backup-x2b8q"],
            ),
            (
                super::stash::HOSTS,
                &["stash-backup-session-0-x2b8q"],
                &["stash-backup-01"],
            ),
        ];
        for (pattern, pods, others) in cases {
            let regex = Regex::new(pattern).expect("compiles");
            for pod in pods {
                assert!(regex.is_match(pod), "{pattern} misses {pod}");
            }
            for other in others {
                assert!(!regex.is_match(other), "{pattern} takes {other}");
            }
        }
    }
}
