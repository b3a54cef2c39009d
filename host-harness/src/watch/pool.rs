//! The repositories being watched, on the [`Schedule`]: the fixed ones of
//! `[[repository]]`, started once, and the discovered ones, started,
//! restarted (their object or Secret changed) and stopped as discovery's
//! rounds find them.

use std::collections::HashMap;
use std::sync::Arc;

use sha2::{Digest, Sha256};

use super::config::WatchedRepository;
use super::discover::{ClusterView, Discovery, Operator, Template, Unusable};
use super::schedule::Schedule;
use super::{Shared, WatchError, Watched, leader, load_once};
use crate::kubernetes::Kubernetes;
use crate::limits;
use crate::repo::PasswordSource;
use crate::repository_settings::{EnforcedSettings, SettingsRefused};
use crate::runtime::{Policy, PolicySource};
use crate::stop::Stop;
use crate::text::escape;
use crate::warden::Warden;

/// One running repository.
struct Running {
    /// Stops it (the process's stop, for a fixed one).
    stop: Arc<Stop>,
    /// What it was started with: a change restarts it.
    fingerprint: [u8; 32],
    /// The operator it was found through; `None` for a fixed one.
    operator: Option<Operator>,
}

/// The running repositories and the policies they share.
pub struct Pool {
    shared: Arc<Shared>,
    schedule: Arc<Schedule>,
    policies: HashMap<PolicySource, Arc<Policy>>,
    running: HashMap<String, Running>,
    /// Why each unusable object was last refused (and through which
    /// operator), so a reason is logged when it changes, not at every round.
    refused: HashMap<String, (Operator, String)>,
}

impl Pool {
    /// An empty pool, its repositories checked on `schedule`.
    pub fn new(shared: Arc<Shared>, schedule: Arc<Schedule>) -> Pool {
        Pool {
            shared,
            schedule,
            policies: HashMap::new(),
            running: HashMap::new(),
            refused: HashMap::new(),
        }
    }

    /// The warden of `repo`: its policies loaded (each source once for the
    /// whole pool), the enforced one's settings checked now.
    pub fn warden(&mut self, repo: &WatchedRepository) -> Result<Warden, WatchError> {
        let shared = self.shared.clone();
        let policies = &mut self.policies;
        let loaded = repo
            .settings
            .load_policies(shared.runtime.clone(), |_, source, shadow| {
                load_once(policies, &shared, source, &repo.name, shadow)
            })?;
        let first_seen = Some(shared.first_seen.clone());
        repo.settings
            .warden(loaded, first_seen, &repo.name, EnforcedSettings::CheckNow)
            .map_err(|SettingsRefused { shadow, error }| WatchError::Settings {
                repository: repo.name.clone(),
                shadow,
                error,
            })
    }

    /// Puts `repo` on the schedule with `warden`, due now, until `stop`.
    pub fn launch(
        &mut self,
        repo: WatchedRepository,
        warden: Warden,
        stop: Arc<Stop>,
        operator: Option<Operator>,
    ) {
        let fingerprint = fingerprint(&repo);
        self.running.insert(
            repo.name.clone(),
            Running {
                stop: stop.clone(),
                fingerprint,
                operator,
            },
        );
        let watched = Watched::new(repo, warden, &self.shared, stop);
        self.schedule.add(watched);
    }

    /// Runs discovery until the process stops: a round at once, then one
    /// every `discovery.every`. Every discovered repository is stopped at
    /// the end.
    pub fn discover(mut self, discovery: Discovery, template: Template) {
        let every = discovery.every;
        loop {
            // A standby replica reads nothing (no Secret either) until it
            // leads.
            let standby = self.shared.leader.as_ref().is_some_and(|l| !l.acts());
            if !standby {
                self.round(&discovery, &template);
            }
            if self
                .shared
                .stop
                .sleep(if standby { leader::RETRY } else { every })
            {
                break;
            }
        }
        for running in self.running.values().filter(|r| r.operator.is_some()) {
            running.stop.stop();
        }
    }

    /// One round of discovery: repositories found are started (or
    /// restarted when changed), those gone or now unusable are stopped; an
    /// operator whose objects cannot be listed keeps its repositories.
    fn round(&mut self, discovery: &Discovery, template: &Template) {
        let timeout = template.timeout.get();
        let client = match Kubernetes::shared(timeout) {
            Ok(client) => client,
            Err(e) => {
                tracing::error!("discovery: {}", escape(&e.to_string()));
                return;
            }
        };
        let view = ClusterView::new(&client, timeout, &discovery.namespaces);
        for round in discovery.round(&view) {
            let found = match round.found {
                Ok(found) => found,
                Err(e) => {
                    tracing::error!(
                        "discovery: cannot list the objects of {}; its repositories are left as they were: {}",
                        round.operator.name(),
                        escape(&e)
                    );
                    continue;
                }
            };
            let mut seen = Vec::new();
            for one in found {
                let watched = one.and_then(|d| template.watched(d));
                seen.push(self.settle(watched, round.operator));
            }
            self.retire_unseen(round.operator, &seen);
        }
    }

    /// Starts, restarts or stops one discovered repository; its name.
    fn settle(
        &mut self,
        watched: Result<WatchedRepository, Unusable>,
        operator: Operator,
    ) -> String {
        let repo = match watched {
            Ok(repo) => repo,
            Err(Unusable { name, why }) => {
                self.refuse(&name, operator, why);
                return name;
            }
        };
        let name = repo.name.clone();
        let discovered = self
            .running
            .values()
            .filter(|r| r.operator.is_some())
            .count();
        if !self.running.contains_key(&name) && discovered >= limits::DISCOVERED_REPOSITORIES {
            let why = format!(
                "{} discovered repositories are watched already, the most one watch does; \
                 give replicas their own namespaces to watch",
                limits::DISCOVERED_REPOSITORIES
            );
            self.refuse(&name, operator, why);
            return name;
        }
        match self.running.get(&name) {
            Some(running) if running.operator.is_none() => {
                self.refuse(&name, operator, "a [[repository]] has the same name".into());
                return name;
            }
            Some(running) if running.fingerprint == fingerprint(&repo) => return name,
            Some(_) => self.retire(&name, "its object or Secret changed"),
            None => {}
        }
        match self.warden(&repo) {
            Ok(warden) => {
                self.refused.remove(&name);
                tracing::info!(repository = %escape(&name), "discovered; watching it");
                let stop = Arc::new(Stop::default());
                // Dropped from the schedule when next due after it is stopped.
                self.launch(repo, warden, stop, Some(operator));
            }
            Err(e) => self.refuse(&name, operator, e.to_string()),
        }
        name
    }

    /// Logs (once per reason) why `name` is not watched, and stops it if it
    /// was.
    fn refuse(&mut self, name: &str, operator: Operator, why: String) {
        if self.running.get(name).is_some_and(|r| r.operator.is_some()) {
            self.retire(name, "it can no longer be watched");
        }
        if self.refused.get(name).map(|(_, was)| was) != Some(&why) {
            tracing::error!(repository = %escape(name), "not watched: {}", escape(&why));
            self.refused.insert(name.to_owned(), (operator, why));
        }
    }

    /// Stops the repositories of `operator` that its last round did not
    /// find (their object is gone).
    fn retire_unseen(&mut self, operator: Operator, seen: &[String]) {
        let gone: Vec<String> = self
            .running
            .iter()
            .filter(|(name, r)| r.operator == Some(operator) && !seen.contains(name))
            .map(|(name, _)| name.clone())
            .collect();
        for name in gone {
            self.retire(&name, "its object is gone");
        }
        self.refused
            .retain(|name, (of, _)| *of != operator || seen.contains(name));
    }

    fn retire(&mut self, name: &str, why: &str) {
        if let Some(running) = self.running.remove(name) {
            tracing::info!(repository = %escape(name), "no longer watched: {why}");
            running.stop.stop();
            self.schedule.drop_stopped();
        }
    }
}

/// What a repository was started with, as one digest: its name, location,
/// password, variables and evidence (the password and variables never leave
/// this function in the clear).
fn fingerprint(repo: &WatchedRepository) -> [u8; 32] {
    let mut digest = Sha256::new();
    let settings = &repo.settings;
    let mut add = |part: &[u8]| {
        digest.update((part.len() as u64).to_le_bytes());
        digest.update(part);
    };
    add(repo.name.as_bytes());
    add(settings.location.as_given().as_bytes());
    match &settings.password {
        PasswordSource::Value(password) => add(password.as_bytes()),
        other => add(format!("{other:?}").as_bytes()),
    }
    add(format!("{:?}", settings.variables).as_bytes());
    for value in settings.variables.secrets() {
        add(value.as_bytes());
    }
    if let Some((_, hosts)) = &settings.evidence.inventory {
        add(hosts.as_str().as_bytes());
    }
    digest.finalize().into()
}
