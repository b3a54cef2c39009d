//! What discovery would watch, said before it does (`lockwarden
//! discover`): one [`Survey`], admitted as `watch` admits it, each
//! repository shown with its location (credentials hidden), the Secrets and
//! keys its settings came from (names only), the pods that are evidence for
//! its locks, or why it is not watched; and, when asked, whether it opens.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{Candidate, ClusterView, Discovery, Owner, SecretUse, Survey, Template};
use crate::evidence::InventorySource;
use crate::kubernetes::Kubernetes;
use crate::watch::fair_share;

/// One object's repository, as discovery sees it.
#[derive(Debug, Serialize)]
pub struct Seen {
    /// The operator (`velero`, ...).
    pub operator: &'static str,
    /// The object that defines it.
    pub object: Owner,
    /// Its name in logs, metrics and Events.
    pub repository: String,
    /// Its location as restic's `-r`, credentials hidden.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// The Secrets its password and storage keys were read from.
    pub secrets: Vec<SecretUse>,
    /// The pod names whose state is evidence for its locks (none: locks go
    /// by age alone).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pods: Option<String>,
    /// The other namespaces whose objects name its location: their pods
    /// answer for its locks too.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub shared_with: Vec<String>,
    /// How its storage's TLS certificate is checked ([`crate::tls::Tls::mode`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls: Option<String>,
    /// Whether `watch` would watch it.
    pub watched: bool,
    /// Why not, when it would not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    /// With `--open`: whether it opened.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub open: Option<Opening>,
}

/// Whether a repository opened (its password and keys right).
#[derive(Debug, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Opening {
    /// It did: the repository's id.
    Opened(String),
    /// It did not: why.
    Failed(String),
}

/// One operator's objects: listed or not, and the namespaces that could
/// not be read.
#[derive(Debug, Serialize)]
pub struct OperatorSeen {
    /// Its name in watch.toml.
    pub operator: &'static str,
    /// Why its objects could not be listed, if they could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Namespace -> why its objects could not be read.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub blind: BTreeMap<String, String>,
}

/// A whole preview.
#[derive(Debug, Serialize)]
pub struct Preview {
    /// Each operator asked for.
    pub operators: Vec<OperatorSeen>,
    /// Each repository found or refused, by name.
    pub repositories: Vec<Seen>,
}

impl Preview {
    /// Whether all of it could be told: every operator listed, every
    /// namespace read, every repository asked to open opened.
    pub fn complete(&self) -> bool {
        let listed = |o: &OperatorSeen| o.error.is_none() && o.blind.is_empty();
        let opened = |r: &Seen| !matches!(r.open, Some(Opening::Failed(_)));
        self.operators.iter().all(listed) && self.repositories.iter().all(opened)
    }
}

impl Discovery {
    /// One round through `client`, as `watch` would take it; with `open`,
    /// each repository it would watch is opened too (its password and keys
    /// tried; no lock is read or judged).
    pub fn preview(&self, client: &Kubernetes, template: &Template, open: bool) -> Preview {
        let timeout = template.timeout.get();
        let view = ClusterView::new(client, timeout, &self.access);
        let Survey {
            listed,
            unlisted,
            mut usable,
            refused,
        } = self.survey(&view, template);
        let mut operators: Vec<OperatorSeen> = (listed.into_iter())
            .map(|(operator, blind)| OperatorSeen {
                operator: operator.name(),
                error: None,
                blind,
            })
            .chain(unlisted.into_iter().map(|(operator, why)| OperatorSeen {
                operator: operator.name(),
                error: Some(why),
                blind: BTreeMap::new(),
            }))
            .collect();
        operators.sort_by_key(|o| o.operator);
        usable.sort_by(|a, b| a.repo.name.cmp(&b.repo.name));
        let wanted: Vec<&str> = usable.iter().map(|c| c.owner.namespace.as_str()).collect();
        let allotted = fair_share::allot(&wanted, &[], self.max_repositories);
        let mut repositories: Vec<Seen> = (usable.into_iter().zip(allotted))
            .map(|(candidate, slot)| seen(candidate, slot.err().map(|e| e.to_string()), open))
            .collect();
        repositories.extend(refused.into_iter().map(|(operator, unusable)| Seen {
            operator: operator.name(),
            object: *unusable.owner,
            repository: unusable.name,
            location: None,
            secrets: Vec::new(),
            pods: None,
            shared_with: Vec::new(),
            tls: None,
            watched: false,
            refused: Some(unusable.why),
            open: None,
        }));
        repositories.sort_by(|a, b| a.repository.cmp(&b.repository));
        Preview {
            operators,
            repositories,
        }
    }
}

/// `candidate` as seen, not watched for `refused`; opened when `open` asks
/// and it would be watched.
fn seen(candidate: Candidate, refused: Option<String>, open: bool) -> Seen {
    let settings = &candidate.repo.settings;
    let opened = || {
        let password = settings.password().map_err(|e| e.to_string())?;
        let repository = settings.open(&password).map_err(|e| e.to_string())?;
        Ok::<_, String>(repository.config().id.clone())
    };
    let open = (open && refused.is_none()).then(|| match opened() {
        Ok(id) => Opening::Opened(id),
        Err(why) => Opening::Failed(why),
    });
    Seen {
        operator: candidate.operator.name(),
        repository: candidate.repo.name.clone(),
        location: Some(settings.location.redacted()),
        secrets: candidate.secrets,
        pods: (settings.evidence.inventory.as_ref()).map(|(_, hosts)| hosts.as_str().to_owned()),
        shared_with: match &settings.evidence.inventory {
            Some((InventorySource::Kubernetes { namespaces }, _)) => (namespaces.iter().flatten())
                .filter(|ns| **ns != candidate.owner.namespace)
                .cloned()
                .collect(),
            _ => Vec::new(),
        },
        tls: Some(settings.variables.tls().mode()),
        watched: refused.is_none(),
        refused,
        open,
        object: candidate.owner,
    }
}
