//! Discovery: the restic repositories the backup operators already define
//! (watch.toml's `[discover]` table), made into watched repositories at
//! every round, from the operators' objects and the Secrets they name.
//!
//! ```toml
//! [discover]
//! velero = true                 # BackupRepository (restic ones) + BackupStorageLocation
//! stash = true                  # stash.appscode.com Repository
//! kubestash = true              # storage.kubestash.com Repository + BackupStorage + Snapshot
//! k8up = true                   # k8up.io Schedule and Backup backends
//! volsync = true                # ReplicationSource and ReplicationDestination
//! namespaces = ["team-a"]       # optional: only these namespaces
//! exclude_namespaces = ["dev"]  # optional
//! single_tenant = false         # true: objects may name other namespaces' Secrets
//! max_repositories = 1000       # shared fairly between namespaces (at most 1000)
//! every = "1m"                  # how often the objects are read again
//! interval = "5m"               # each repository's check interval
//! timeout = "60s"               # per request
//! mode = "unlock"               # or "report"
//! inventory_hosts = "^backup-"  # optional: replaces the operators' pod names
//! allow_insecure_tls = false    # true: objects may turn TLS verification off
//! ```
//!
//! Each repository is named `namespace/Kind/name` after the object that
//! defines it (and `/component path` for KubeStash's). What an object does not say (a field, a Secret, a key) is an
//! error on that repository alone, never a guess; a kind that cannot be
//! listed (not installed, refused) leaves its repositories as they were.

mod access;
mod api;
mod field;
mod location;
mod operators;
mod preview;
mod settings;
mod survey;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use regex::Regex;

pub use access::Access;
pub use api::{ClusterView, SecretUse};
pub use operators::{Operator, Unlisted};
pub use preview::{Opening, OperatorSeen, Preview, Seen};
pub use settings::{DiscoverEntry, DiscoverProblem, Template};
pub use survey::{Candidate, Listed, Survey};

use crate::repo::Password;
use crate::tls::Tls;
use crate::watch::owner::Owner;

/// The namespaces discovery looks in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Namespaces {
    /// Only these, when not empty.
    pub only: Vec<String>,
    /// Never these.
    pub except: Vec<String>,
}

impl Namespaces {
    /// Whether objects in `namespace` are looked at.
    pub fn includes(&self, namespace: &str) -> bool {
        (self.only.is_empty() || self.only.iter().any(|n| n == namespace))
            && !self.except.iter().any(|n| n == namespace)
    }
}

/// A repository found in an object, with everything needed to reach it.
pub struct Discovered {
    /// The object it was found in.
    pub owner: Owner,
    /// Which of the object's repositories, when it has several (a KubeStash
    /// Repository's component path).
    pub part: Option<String>,
    /// The location, as restic's `-r`.
    pub location: String,
    /// Its password.
    pub password: Password,
    /// The storage's variables, as the operator hands them to restic.
    pub variables: BTreeMap<String, String>,
    /// How its storage is reached over TLS, as the object says: its own CA
    /// (added to the system's roots), or no verification (only where
    /// `allow_insecure_tls` allows it: [`Discovery`] refuses it otherwise).
    pub tls: Tls,
    /// The pod names its operator runs restic in: the hostnames the pod
    /// inventory speaks for (`None`: no pattern is known, and pods are no
    /// evidence).
    pub hosts: Option<Regex>,
    /// The namespaces of every object that names its location with its
    /// password, of any operator and with any storage credentials, its own
    /// among them: restic runs in each, so their pods answer for its locks
    /// ([`namers`]).
    pub namers: std::collections::BTreeSet<String>,
    /// The Secrets its password and variables were read from.
    pub secrets: Vec<SecretUse>,
}

impl Discovered {
    /// What makes two of them the same restic repository, whoever reaches
    /// it how: its location and password, as one digest.
    fn repository(&self) -> [u8; 32] {
        digest([self.location.as_bytes(), self.password.as_bytes()])
    }

    /// What makes two of them one repository: the location and every
    /// credential, as one digest (nothing secret leaves this function).
    fn identity(&self) -> [u8; 32] {
        let tls = self.tls.identity();
        let variables = (self.variables.iter()).flat_map(|(n, v)| [n.as_bytes(), v.as_bytes()]);
        let parts = [self.location.as_bytes(), self.password.as_bytes()];
        digest(parts.into_iter().chain(variables).chain([tls.as_slice()]))
    }

    /// Its name: `namespace/Kind/name`, and `/part` when it has one.
    pub fn name(&self) -> String {
        match &self.part {
            Some(part) => format!("{}/{part}", self.owner.label()),
            None => self.owner.label(),
        }
    }
}

/// Names only: the rest holds credentials.
impl std::fmt::Debug for Discovered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Discovered")
            .field("owner", &self.owner)
            .field("variables", &self.variables.keys().collect::<Vec<_>>())
            .field("tls", &self.tls)
            .finish_non_exhaustive()
    }
}

/// What one object gave: a repository, or why it gives none.
pub type Found = Result<Discovered, Unusable>;

/// An object whose repository cannot be watched, and why (never a secret).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unusable {
    /// The object's `namespace/Kind/name` ([`Owner::label`]), and `/part`.
    pub name: String,
    /// The object, where its Event goes (boxed: a `Found` stays small).
    pub owner: Box<Owner>,
    /// Why.
    pub why: String,
}

impl Unusable {
    /// Repository `name` of `owner`, not watched because of `why`.
    pub fn new(name: String, owner: Owner, why: String) -> Unusable {
        Unusable {
            name,
            owner: Box::new(owner),
            why,
        }
    }
}

/// The discovery settings, checked.
#[derive(Debug, Clone)]
pub struct Discovery {
    /// The operators looked at.
    pub operators: Vec<Operator>,
    /// Where, and what an object may name ([`Access`]).
    pub access: Access,
    /// The most repositories watched, shared fairly between namespaces.
    pub max_repositories: usize,
    /// How often.
    pub every: Duration,
    /// Replaces every operator's pod names, when given.
    pub inventory_hosts: Option<Regex>,
    /// Whether an object may have its repository reached without verifying
    /// the storage's TLS certificate (watch.toml's `allow_insecure_tls`).
    pub allow_insecure_tls: bool,
}

/// One round's result for one operator: what it found, or why its objects
/// could not be listed (its repositories are then left as they were).
pub struct Round {
    /// The operator.
    pub operator: Operator,
    /// Its repositories and unusable objects, or the listing's failure.
    pub found: Result<Vec<Found>, Unlisted>,
    /// The namespaces whose objects could not be read, and why: their
    /// repositories of this operator are left as they were.
    pub blind: BTreeMap<String, String>,
}

impl Discovery {
    /// One round: every operator's objects, read now. Objects of one
    /// operator that name the same repository with the same credentials (a
    /// K8up Schedule and the Backups it made, a VolSync source and
    /// destination) give it once, named after the first listed (K8up's
    /// Schedules come first); the same location with other credentials is
    /// another repository, so that no object can hide another's.
    fn round(&self, view: &ClusterView<'_>) -> Vec<Round> {
        let rounds: Vec<Round> = self
            .operators
            .iter()
            .map(|&operator| Round {
                operator,
                found: operator.find(view),
                blind: view.take_blind(),
            })
            .collect();
        self.settle_all(rounds)
    }

    /// Each of `rounds` with its repositories once ([`Discovery::settle`]),
    /// each knowing the namespaces of every object of any round that names
    /// its location ([`namers`]).
    fn settle_all(&self, mut rounds: Vec<Round>) -> Vec<Round> {
        let namers = namers(&rounds);
        for round in &mut rounds {
            if let Ok(found) = &mut round.found {
                *found = self.settle(std::mem::take(found));
                for d in found.iter_mut().flatten() {
                    d.namers
                        .extend(namers.get(&d.repository()).into_iter().flatten().cloned());
                }
            }
        }
        rounds
    }

    /// `found`, each repository once, with the inventory's hosts replaced
    /// when the settings say so; one whose object turns TLS verification
    /// off is refused unless `allow_insecure_tls`.
    fn settle(&self, found: Vec<Found>) -> Vec<Found> {
        let mut found: Vec<Found> = found
            .into_iter()
            .map(|f| match f {
                Ok(d) if !self.allow_insecure_tls && d.tls.is_insecure() => {
                    Err(self.insecure_refused(d))
                }
                other => other,
            })
            .collect();
        let mut seen = std::collections::HashSet::new();
        found.retain(|f| match f {
            Ok(d) => seen.insert(d.identity()),
            Err(_) => true,
        });
        for d in found.iter_mut().flatten() {
            if let Some(hosts) = &self.inventory_hosts {
                d.hosts = Some(hosts.clone());
            }
        }
        found
    }

    /// Why `found`, whose object turns TLS verification off, is not
    /// watched: which field, and which setting would allow it.
    fn insecure_refused(&self, found: Discovered) -> Unusable {
        let from = match &found.tls {
            Tls::Insecure { from } => from.as_str(),
            _ => "its object",
        };
        let why = format!(
            "its {from} turns TLS certificate verification off, which discovery does only where \
             watch.toml's [discover] says allow_insecure_tls = true (or give the storage's CA \
             instead)"
        );
        Unusable::new(found.name(), found.owner, why)
    }
}

/// `parts`, each with its length, as one SHA-256 digest.
fn digest<'a>(parts: impl IntoIterator<Item = &'a [u8]>) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    let mut digest = Sha256::new();
    for part in parts {
        digest.update((part.len() as u64).to_le_bytes());
        digest.update(part);
    }
    digest.finalize().into()
}

/// The namespaces of the objects naming each repository (its location and
/// password: who can write its locks), in every operator's objects found
/// (before duplicates are dropped or insecure ones refused: their jobs run
/// restic on the repository all the same). An object naming the location
/// with another password writes no lock there, and adds no namespace whose
/// pods could end another's locks.
fn namers(rounds: &[Round]) -> HashMap<[u8; 32], BTreeSet<String>> {
    let mut namers: HashMap<[u8; 32], BTreeSet<String>> = HashMap::new();
    let found = rounds
        .iter()
        .filter_map(|r| r.found.as_ref().ok())
        .flatten();
    for d in found.flatten() {
        let namespaces = namers.entry(d.repository()).or_default();
        namespaces.insert(d.owner.namespace.clone());
    }
    namers
}

#[cfg(test)]
mod tests {
    use super::*;

    fn discovered(name: &str, tls: Tls) -> Discovered {
        Discovered {
            owner: Owner {
                api_version: "stash.appscode.com/v1alpha1".into(),
                kind: "Repository".into(),
                namespace: "app".into(),
                name: name.into(),
                uid: None,
            },
            part: None,
            location: "s3:https://minio.storage:9000/backups/app".into(),
            password: Password::new("pw"),
            variables: BTreeMap::new(),
            tls,
            hosts: None,
            namers: [String::from("app")].into(),
            secrets: Vec::new(),
        }
    }

    fn discovery(allow_insecure_tls: bool) -> Discovery {
        Discovery {
            operators: vec![Operator::Stash],
            access: Access::default(),
            max_repositories: 10,
            every: Duration::from_secs(60),
            inventory_hosts: None,
            allow_insecure_tls,
        }
    }

    #[test]
    fn an_object_that_turns_tls_verification_off_is_refused_unless_allowed() {
        let insecure = || Tls::Insecure {
            from: "spec.backend.s3.insecureTLS".into(),
        };
        let found = || {
            vec![
                Ok(discovered("a", insecure())),
                Ok(discovered("b", Tls::Default)),
            ]
        };
        let settled = discovery(false).settle(found());
        let Err(refused) = &settled[0] else {
            panic!("an insecure object is refused")
        };
        assert_eq!(refused.name, "app/Repository/a");
        assert!(
            refused
                .why
                .starts_with("its spec.backend.s3.insecureTLS turns TLS certificate")
                && refused.why.contains("allow_insecure_tls = true"),
            "{}",
            refused.why
        );
        assert!(settled[1].is_ok());
        let allowed = discovery(true).settle(found());
        assert!(allowed.iter().all(Result::is_ok));
        assert_eq!(
            allowed[0].as_ref().map(|d| d.tls.mode()).ok().as_deref(),
            Some("insecure (spec.backend.s3.insecureTLS, allowed by allow_insecure_tls)")
        );
    }

    #[test]
    fn another_tls_setting_is_another_repository() {
        let ca = Tls::with_ca(crate::tls::tests::TEST_CA.as_bytes(), "x".into()).expect("a CA");
        let found = vec![
            Ok(discovered("a", Tls::Default)),
            Ok(discovered("b", ca.clone())),
            Ok(discovered("c", ca)),
        ];
        let settled = discovery(false).settle(found);
        let names: Vec<String> = settled.iter().flatten().map(Discovered::name).collect();
        assert_eq!(names, ["app/Repository/a", "app/Repository/b"]);
    }

    #[test]
    fn a_location_named_from_several_namespaces_takes_the_pods_of_each() {
        let in_ns = |ns: &str, name: &str, password: &str, location: &str| {
            let mut d = discovered(name, Tls::Default);
            d.owner.namespace = ns.into();
            d.namers = [ns.to_owned()].into();
            d.password = Password::new(password.to_owned());
            if !location.is_empty() {
                d.location = location.into();
            }
            Ok(d)
        };
        let stash = Round {
            operator: Operator::Stash,
            found: Ok(vec![
                in_ns("team-a", "a", "pw", ""),
                // The same repository and credentials: dropped as a
                // duplicate, its namespace kept.
                in_ns("team-b", "b", "pw", ""),
                in_ns(
                    "team-c",
                    "c",
                    "pw",
                    "s3:https://minio.storage:9000/backups/other",
                ),
            ]),
            blind: BTreeMap::new(),
        };
        let mut other_keys = in_ns("team-d", "d", "pw", "");
        if let Ok(d) = &mut other_keys {
            d.variables
                .insert("AWS_ACCESS_KEY_ID".into(), "team-d".into());
        }
        let k8up = Round {
            operator: Operator::K8up,
            // Another operator and storage keys, the same repository; and
            // the same location with another password, which writes no
            // lock there.
            found: Ok(vec![other_keys, in_ns("team-e", "e", "guess", "")]),
            blind: BTreeMap::new(),
        };
        let rounds = discovery(false).settle_all(vec![stash, k8up]);
        let namers: Vec<(String, Vec<String>)> = (rounds.iter())
            .filter_map(|r| r.found.as_ref().ok())
            .flatten()
            .flatten()
            .map(|d| (d.name(), d.namers.iter().cloned().collect()))
            .collect();
        let abd = vec!["team-a".to_owned(), "team-b".into(), "team-d".into()];
        assert_eq!(
            namers,
            [
                ("team-a/Repository/a".to_owned(), abd.clone()),
                ("team-c/Repository/c".to_owned(), vec!["team-c".to_owned()]),
                ("team-d/Repository/d".to_owned(), abd),
                ("team-e/Repository/e".to_owned(), vec!["team-e".to_owned()]),
            ]
        );
    }
}
