//! The five operators: which objects each defines repositories in, and how
//! it hands them to restic (one module each).

mod k8up;
mod kubestash;
mod stash;
mod velero;
mod volsync;

use std::collections::BTreeMap;

use regex::Regex;
use serde::Deserialize;
use serde_json::Value;

use super::api::{ClusterView, text};
use super::{Discovered, Found, Owner, Unusable};
use crate::repo::Password;
use crate::repo::backend::scheme_of;

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

    /// Its repositories now. `Err` when its objects cannot be listed.
    pub fn find(self, view: &ClusterView<'_>) -> Result<Vec<Found>, String> {
        let found = match self {
            Operator::Velero => velero::find(view),
            Operator::Stash => stash::find(view),
            Operator::KubeStash => kubestash::find(view),
            Operator::K8up => k8up::find(view),
            Operator::VolSync => volsync::find(view),
        };
        found.map_err(|e| format!("{}: {e}", self.name()))
    }
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

/// What one object's repository is made of, before it is checked.
struct Parts {
    /// Which of the object's repositories, when it has several.
    part: Option<String>,
    location: String,
    password: String,
    variables: BTreeMap<String, String>,
    /// The pod names restic runs in, if a pattern is known.
    hosts: Option<&'static str>,
}

/// The schemes a discovered repository may use: those whose backends read
/// the variables given to them (restic itself is never run for one).
const SCHEMES: [&str; 5] = ["s3", "azure", "gs", "rest", "local"];

/// `parts` made into a repository of `owner`, or why not.
fn discovered(owner: Owner, parts: Result<Parts, String>) -> Found {
    let unusable = |owner: Owner, why: String| Unusable {
        name: owner.label(),
        why,
    };
    let parts = match parts {
        Ok(parts) => parts,
        Err(why) => return Err(unusable(owner, why)),
    };
    let scheme = scheme_of(&parts.location).name;
    if !SCHEMES.contains(&scheme) {
        return Err(unusable(
            owner,
            format!("its repository is on {scheme}, which discovery does not read"),
        ));
    }
    if parts.password.is_empty() {
        return Err(unusable(owner, "its repository password is empty".into()));
    }
    let hosts = match parts.hosts.map(Regex::new).transpose() {
        Ok(hosts) => hosts,
        Err(e) => return Err(unusable(owner, e.to_string())),
    };
    Ok(Discovered {
        owner,
        part: parts.part,
        location: parts.location,
        password: Password::new(parts.password.into_bytes()),
        variables: parts.variables,
        hosts,
    })
}

/// Each object of `plural` in `group_version`, as `kind`, made into a
/// repository by `parts` (objects without a name are skipped).
fn each(
    view: &ClusterView<'_>,
    group_version: &str,
    plural: &str,
    kind: &str,
    parts: impl Fn(&Value, &Owner) -> Option<Result<Parts, String>>,
) -> Result<Vec<Found>, String> {
    let objects = view
        .objects(group_version, plural)
        .map_err(|e| e.to_string())?;
    Ok(objects
        .iter()
        .filter_map(|object| {
            let owner = owner(object, group_version, kind)?;
            let parts = parts(object, &owner)?;
            Some(discovered(owner, parts))
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
