//! One round of discovery, sorted: what `watch` acts on and `lockwarden
//! discover` prints, so the two never differ.

use std::collections::BTreeMap;

use super::{ClusterView, Discovery, Operator, Owner, SecretUse, Template, Unusable};
use crate::watch::repository::WatchedRepository;

/// A usable discovered repository, before its namespace's share is known.
pub struct Candidate {
    /// The operator whose object defines it.
    pub operator: Operator,
    /// That object.
    pub owner: Owner,
    /// How it is watched.
    pub repo: WatchedRepository,
    /// The Secrets its settings came from (names only).
    pub secrets: Vec<SecretUse>,
}

/// An operator whose objects were listed, and the namespaces whose objects
/// could not be read (with why): their repositories are left as they were.
pub type Listed = (Operator, BTreeMap<String, String>);

/// One round's findings.
#[derive(Default)]
pub struct Survey {
    /// The operators whose objects were listed.
    pub listed: Vec<Listed>,
    /// The operators whose objects could not be listed, and why.
    pub unlisted: Vec<(Operator, String)>,
    /// The repositories that can be watched, if their share allows.
    pub usable: Vec<Candidate>,
    /// The objects whose repository cannot be watched, and why.
    pub refused: Vec<(Operator, Unusable)>,
}

impl Discovery {
    /// One round through `view`, each repository made with `template`.
    pub fn survey(&self, view: &ClusterView<'_>, template: &Template) -> Survey {
        let mut survey = Survey::default();
        for round in self.round(view) {
            let found = match round.found {
                Ok(found) => found,
                Err(why) => {
                    survey.unlisted.push((round.operator, why.to_string()));
                    continue;
                }
            };
            for one in found {
                let made = one.and_then(|found| {
                    let secrets = found.secrets.clone();
                    let owner = found.owner.clone();
                    template.watched(found).map(|repo| (repo, owner, secrets))
                });
                match made {
                    Ok((repo, owner, secrets)) => survey.usable.push(Candidate {
                        operator: round.operator,
                        owner,
                        repo,
                        secrets,
                    }),
                    Err(unusable) => survey.refused.push((round.operator, unusable)),
                }
            }
            survey.listed.push((round.operator, round.blind));
        }
        survey
    }
}
