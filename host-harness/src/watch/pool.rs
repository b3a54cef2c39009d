//! The repositories being watched, on the [`Schedule`]: the fixed ones of
//! `[[repository]]`, started once, and the discovered ones, started,
//! restarted (their object or Secret changed) and stopped as discovery's
//! rounds find them.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::repo::PasswordSource;
use crate::repository_settings::{EnforcedSettings, SettingsRefused};
use crate::runtime::{Policy, PolicySource};
use crate::stop::Stop;
use crate::text::escape;
use crate::warden::Warden;
use crate::watch::discover::{
    Candidate, ClusterView, Discovery, Listed, Operator, Template, Unusable,
};
use crate::watch::error::WatchError;
use crate::watch::fair_share;
use crate::watch::leader;
use crate::watch::metrics::NotWatched;
use crate::watch::notify::dispatch::Dispatcher;
use crate::watch::notify::kubernetes::KubernetesSink;
use crate::watch::owner::Owner;
use crate::watch::repository::WatchedRepository;
use crate::watch::schedule::Schedule;
use crate::watch::watched::{Shared, Watched};

/// The most Events on refused objects posted in one namespace per round.
const EVENTS_PER_NAMESPACE: usize = 10;

/// One running repository.
struct Running {
    /// Stops it (the process's stop, for a fixed one).
    stop: Arc<Stop>,
    /// What it was started with: a change restarts it.
    fingerprint: [u8; 32],
    /// The operator it was found through; `None` for a fixed one.
    operator: Option<Operator>,
    /// Its object's namespace; `None` for a fixed one.
    namespace: Option<String>,
}

/// Why an object is not watched, as last said.
struct Refusal {
    operator: Operator,
    /// Where its Event goes.
    owner: Owner,
    why: String,
    /// Whether its Event was posted.
    told: bool,
}

/// The running repositories and the policies they share.
pub struct Pool {
    shared: Arc<Shared>,
    schedule: Arc<Schedule<Box<Watched>>>,
    policies: HashMap<PolicySource, Arc<Policy>>,
    running: HashMap<String, Running>,
    /// Why each unusable object was last refused, so a reason is logged
    /// and told when it changes, not at every round.
    refused: HashMap<String, Refusal>,
    /// Sends every repository's notifications.
    dispatcher: Dispatcher,
}

impl Pool {
    /// An empty pool, its repositories checked on `schedule`.
    pub fn new(shared: Arc<Shared>, schedule: Arc<Schedule<Box<Watched>>>) -> Pool {
        Pool {
            dispatcher: Dispatcher::new(shared.metrics.clone()),
            shared,
            schedule,
            policies: HashMap::new(),
            running: HashMap::new(),
            refused: HashMap::new(),
        }
    }

    /// The warden of `repo`: its policies loaded (each source once for the
    /// whole pool), the enforced one's settings checked now, with the
    /// process's Kubernetes client for its pod evidence.
    pub fn warden(&mut self, repo: &WatchedRepository) -> Result<Warden, WatchError> {
        let shared = self.shared.clone();
        let policies = &mut self.policies;
        let loaded = repo
            .settings
            .load_policies(shared.runtime.clone(), |_, source, shadow| {
                load_once(policies, &shared, source, &repo.name, shadow)
            })?;
        let first_seen = Some(shared.first_seen.clone());
        let mut warden = (repo.settings)
            .warden(loaded, first_seen, &repo.name, EnforcedSettings::CheckNow)
            .map_err(|SettingsRefused { shadow, error }| WatchError::Settings {
                repository: repo.name.clone(),
                shadow,
                error,
            })?;
        warden.kubernetes = shared.kubernetes.clone();
        Ok(warden)
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
                namespace: repo.owner.as_ref().map(|o| o.namespace.clone()),
            },
        );
        let watched = Watched::new(repo, warden, &self.shared, stop, &self.dispatcher);
        self.schedule.add(Box::new(watched));
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
    /// restarted when changed), within each namespace's fair share of
    /// `max_repositories` ([`fair_share`]); those gone or
    /// now unusable are stopped. An operator whose objects cannot be listed
    /// keeps its repositories, and so does a namespace whose objects could
    /// not be read.
    fn round(&mut self, discovery: &Discovery, template: &Template) {
        let timeout = template.timeout.get();
        let client = match self.shared.kubernetes.client() {
            Ok(client) => client,
            Err(e) => {
                tracing::error!("discovery: {}", escape(&e.to_string()));
                return;
            }
        };
        let view = ClusterView::new(client, timeout, &discovery.access);
        let survey = discovery.survey(&view, template);
        for (operator, why) in &survey.unlisted {
            tracing::error!(
                "discovery: cannot list the objects of {}; its repositories are left as they were: {}",
                operator.name(),
                escape(why)
            );
        }
        for (operator, blind) in &survey.listed {
            for (namespace, why) in blind {
                tracing::error!(
                    "discovery: the {} objects of namespace {} cannot be read; its repositories are left as they were: {}",
                    operator.name(),
                    escape(namespace),
                    escape(why)
                );
            }
        }
        let mut seen = HashSet::new();
        for (operator, unusable) in survey.refused {
            seen.insert(unusable.name.clone());
            self.refuse(unusable, operator);
        }
        seen.extend(self.admit(survey.usable, &survey.listed, discovery.max_repositories));
        for (operator, blind) in &survey.listed {
            self.retire_unseen(*operator, &seen, blind);
        }
        self.tell_refusals(timeout);
    }

    /// Starts the usable repositories that fit their namespace's fair
    /// share ([`fair_share::allot`]), refuses the others; the names of
    /// all. Those already watched keep their slots first, then by name;
    /// those running that this round cannot see (their operator or
    /// namespace unreadable) keep theirs.
    fn admit(&mut self, mut usable: Vec<Candidate>, listed: &[Listed], cap: usize) -> Vec<String> {
        usable.sort_by_cached_key(|c| {
            (
                !self.running.contains_key(&c.repo.name),
                c.repo.name.clone(),
            )
        });
        let unseen = |r: &&Running| match listed.iter().find(|(op, _)| Some(*op) == r.operator) {
            None => r.operator.is_some(),
            Some((_, blind)) => r
                .namespace
                .as_ref()
                .is_some_and(|ns| blind.contains_key(ns)),
        };
        let kept: Vec<&str> = (self.running.values().filter(unseen))
            .filter_map(|r| r.namespace.as_deref())
            .collect();
        let wanted: Vec<&str> = usable.iter().map(|c| c.owner.namespace.as_str()).collect();
        let allotted = fair_share::allot(&wanted, &kept, cap);
        let mut names = Vec::new();
        for (candidate, slot) in usable.into_iter().zip(allotted) {
            let Candidate {
                operator,
                owner,
                repo,
                ..
            } = candidate;
            names.push(repo.name.clone());
            match slot {
                Ok(()) => self.settle(repo, owner, operator),
                Err(why) => self.refuse(Unusable::new(repo.name, owner, why.to_string()), operator),
            }
        }
        names
    }

    /// Starts or restarts one usable discovered repository.
    fn settle(&mut self, repo: WatchedRepository, owner: Owner, operator: Operator) {
        let name = repo.name.clone();
        match self.running.get(&name) {
            Some(running) if running.operator.is_none() => {
                let why = "a [[repository]] has the same name".to_owned();
                self.refuse(Unusable::new(name, owner, why), operator);
                return;
            }
            Some(running) if running.fingerprint == fingerprint(&repo) => return,
            Some(_) => self.retire(&name, "its object or Secret changed"),
            None => {}
        }
        match self.warden(&repo) {
            Ok(warden) => {
                self.forgive(&name);
                tracing::info!(repository = %escape(&name), "discovered; watching it");
                let stop = Arc::new(Stop::default());
                // Dropped from the schedule when next due after it is stopped.
                self.launch(repo, warden, stop, Some(operator));
            }
            Err(e) => {
                let why = e.to_string();
                self.refuse(Unusable::new(name, owner, why), operator);
            }
        }
    }

    /// Logs (once per reason) why `unusable` is not watched, counts it in
    /// the metrics and stops it if it was; its Event follows
    /// ([`Pool::tell_refusals`]).
    fn refuse(&mut self, unusable: Unusable, operator: Operator) {
        let Unusable { name, owner, why } = unusable;
        let name = name.as_str();
        if self.running.get(name).is_some_and(|r| r.operator.is_some()) {
            self.retire(name, "it can no longer be watched");
        }
        if self.refused.get(name).map(|r| &r.why) != Some(&why) {
            tracing::error!(repository = %escape(name), "not watched: {}", escape(&why));
            self.shared
                .metrics
                .not_watched
                .get_or_create(&NotWatched::of(name, operator.name()))
                .set(1);
            let refusal = Refusal {
                operator,
                owner: *owner,
                why,
                told: false,
            };
            self.refused.insert(name.to_owned(), refusal);
        }
    }

    /// `name` is watched now: no longer refused.
    fn forgive(&mut self, name: &str) {
        if let Some(refusal) = self.refused.remove(name) {
            self.shared
                .metrics
                .not_watched
                .remove(&NotWatched::of(name, refusal.operator.name()));
        }
    }

    /// Posts the Event of each refusal not yet told on its object, at most
    /// [`EVENTS_PER_NAMESPACE`] per namespace and round (a namespace with
    /// many refused objects cannot hold the round), the others at the next.
    fn tell_refusals(&mut self, timeout: std::time::Duration) {
        let mut told: HashMap<String, usize> = HashMap::new();
        for refusal in self.refused.values_mut().filter(|r| !r.told) {
            let count = told.entry(refusal.owner.namespace.clone()).or_default();
            if *count >= EVENTS_PER_NAMESPACE {
                continue;
            }
            *count += 1;
            refusal.told = true;
            let kubernetes = self.shared.kubernetes.clone();
            let sink = KubernetesSink::new(refusal.owner.clone(), kubernetes, timeout);
            if let Err(e) = sink.not_watched(&refusal.why) {
                tracing::warn!(
                    "cannot post the Event of a refused object {}: {}",
                    escape(&refusal.owner.label()),
                    escape(&e.to_string())
                );
            }
        }
    }

    /// Stops the repositories of `operator` that its last round did not
    /// find (their object is gone), but for those in the namespaces it
    /// could not read (`blind`).
    fn retire_unseen(
        &mut self,
        operator: Operator,
        seen: &HashSet<String>,
        blind: &BTreeMap<String, String>,
    ) {
        let in_blind = |ns: &Option<String>| ns.as_ref().is_some_and(|ns| blind.contains_key(ns));
        let gone: Vec<String> = self
            .running
            .iter()
            .filter(|(name, r)| {
                r.operator == Some(operator) && !seen.contains(*name) && !in_blind(&r.namespace)
            })
            .map(|(name, _)| name.clone())
            .collect();
        for name in gone {
            self.retire(&name, "its object is gone");
        }
        let forgotten: Vec<String> = self
            .refused
            .iter()
            .filter(|(name, r)| {
                r.operator == operator
                    && !seen.contains(*name)
                    && !blind.contains_key(&r.owner.namespace)
            })
            .map(|(name, _)| name.clone())
            .collect();
        for name in forgotten {
            self.forgive(&name);
        }
    }

    fn retire(&mut self, name: &str, why: &str) {
        if let Some(running) = self.running.remove(name) {
            tracing::info!(repository = %escape(name), "no longer watched: {why}");
            running.stop.stop();
            self.schedule.drop_stopped();
        }
    }
}

/// The policy from `source`, loaded once however many repositories (or
/// shadows) name it.
fn load_once(
    policies: &mut HashMap<PolicySource, Arc<Policy>>,
    shared: &Shared,
    source: &PolicySource,
    repository: &str,
    shadow: bool,
) -> Result<Arc<Policy>, WatchError> {
    if let Some(policy) = policies.get(source) {
        return Ok(policy.clone());
    }
    let policy = shared
        .runtime
        .load_from(source, &shared.registry)
        .map_err(|error| WatchError::Policy {
            repository: repository.to_owned(),
            shadow,
            error,
        })?;
    let policy = Arc::new(policy);
    policies.insert(source.clone(), policy.clone());
    Ok(policy)
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
    if let Some((source, hosts)) = &settings.evidence.inventory {
        add(hosts.as_str().as_bytes());
        // A namespace naming its location anew, or no longer, changes
        // whose pods answer for its locks.
        if let crate::evidence::InventorySource::Kubernetes {
            namespaces: Some(namespaces),
        } = source
        {
            for namespace in namespaces {
                add(namespace.as_bytes());
            }
        }
    }
    digest.finalize().into()
}
