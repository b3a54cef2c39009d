//! One watched repository between its checks ([`Watched`]): what it was
//! started with, its open repository (the key derived once), its retry
//! backoff, and what one check does (judge, remove or report, within the
//! check's deadline: [`check_time`]) and records in the metrics. The
//! [`Schedule`](crate::watch::schedule::Schedule) knows it only as a job.

use std::sync::Arc;
use std::time::{Duration, Instant};

use regex::Regex;

use crate::contract::Action;
use crate::evidence::InventorySource;
use crate::first_seen::FirstSeenStore;
use crate::oci::Registry;
use crate::repo::backend::Removal;
use crate::repo::lockfile::short;
use crate::repo::{Deadline, PasswordError, Repository};
use crate::runtime::Runtime;
use crate::stop::Stop;
use crate::text::escape;
use crate::warden::{Act, Report, Warden, WardenError};
use crate::watch::leader::{self, Leader};
use crate::watch::metrics::{Metrics, Repo, RepoKind, RepoRule, RepoRulePair};
use crate::watch::notify::{Notifier, dispatch::Dispatcher};
use crate::watch::repository::{Mode, WatchedRepository};
use crate::watch::schedule::{Check, Job};

/// The first retry after a failed check waits this long, doubling.
const FIRST_RETRY: Duration = Duration::from_secs(10);

/// Everything the repository threads share.
pub struct Shared {
    /// Runs the policies.
    pub runtime: Arc<Runtime>,
    /// First-seen times.
    pub first_seen: FirstSeenStore,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Stop signal.
    pub stop: Arc<Stop>,
    /// Where OCI policies are pulled from.
    pub registry: Registry,
    /// Whether this replica may act, when replicas elect a leader.
    pub leader: Option<Arc<Leader>>,
    /// The Kubernetes client `watch`'s setup made, for discovery, pod
    /// evidence, Events and the Lease ([`crate::kubernetes::Connection`]).
    pub kubernetes: crate::kubernetes::Connection,
}

/// Why one check failed; the next is tried after a backoff.
#[derive(Debug, thiserror::Error)]
enum CheckError {
    #[error(transparent)]
    Password(#[from] PasswordError),
    #[error(transparent)]
    Job(#[from] WardenError),
}

impl CheckError {
    /// The error as notifications tell it: a password command's output
    /// (which may quote a token) stays in lockwarden's own log.
    fn for_notification(&self) -> String {
        match self {
            CheckError::Password(PasswordError::Command(_)) => {
                "the password command failed (its output is in lockwarden's log)".into()
            }
            other => other.to_string(),
        }
    }
}

/// One watched repository between its checks: what it was started with,
/// its open repository (the key derived once) and its retry backoff.
pub struct Watched {
    config: WatchedRepository,
    warden: Warden,
    /// Stops this repository (the process's stop, for a fixed one).
    stop: Arc<Stop>,
    notifier: Notifier,
    repo: Option<Repository>,
    retry: Duration,
}

impl Watched {
    /// `config`, to be checked with `warden` until `stop`, its events
    /// sent through `dispatcher`, the run's one.
    pub fn new(
        config: WatchedRepository,
        warden: Warden,
        shared: &Shared,
        stop: Arc<Stop>,
        dispatcher: &Dispatcher,
    ) -> Self {
        let notifier = Notifier::start(
            &config.name,
            config.notify.clone(),
            config.owner.clone(),
            &shared.kubernetes,
            config.settings.secrets(),
            dispatcher,
        );
        tracing::info!(
            repository = %escape(&config.name),
            "watching every {}s in {:?} mode",
            config.interval.as_secs_f64(),
            config.mode
        );
        Watched {
            config,
            warden,
            stop,
            notifier,
            repo: None,
            retry: FIRST_RETRY,
        }
    }

    /// Whether this repository was stopped (by itself or with the process).
    fn is_stopped(&self) -> bool {
        self.stop.is_stopped()
    }

    /// After a check panicked (a bug): logs it, forgets the open
    /// repository (its state is in doubt) and waits an interval.
    fn after_panic(&mut self) -> Duration {
        tracing::error!(
            repository = %escape(&self.config.name),
            "a check panicked (a bug: please report it); the repository is opened again at the next check"
        );
        self.repo = None;
        self.config.interval
    }

    /// Checks the repository once (a standby replica does not); how long
    /// to wait before the next check, or `None` once it is stopped.
    pub fn check(&mut self, shared: &Shared) -> Option<Duration> {
        let config = &self.config;
        let _span = tracing::info_span!("watch", repository = %escape(&config.name)).entered();
        if self.is_stopped() || shared.stop.is_stopped() {
            tracing::info!("stopped");
            return None;
        }
        if shared.leader.as_ref().is_some_and(|l| !l.acts()) {
            // A standby replica checks nothing: the leader does.
            return Some(leader::RETRY);
        }
        let label = Repo {
            repository: config.name.clone(),
        };
        let started = Instant::now();
        let result = check_once(config, &self.warden, shared, &mut self.repo);
        shared
            .metrics
            .check_duration
            .get_or_create(&label)
            .observe(started.elapsed().as_secs_f64());
        Some(match result {
            Ok(report) => {
                self.notifier
                    .after_check(&report, config.mode == Mode::Report);
                match report.out_of_time() {
                    // What was removed is told above; the rest waits for
                    // the next check, after a backoff.
                    Some(e) => self.failed(shared, &label, &e.to_string()),
                    None => {
                        self.retry = FIRST_RETRY;
                        config.interval
                    }
                }
            }
            Err(e) => {
                self.notifier.after_failure(&e.for_notification());
                self.failed(shared, &label, &e.to_string())
            }
        })
    }

    /// After a failed check (`why`): counts and logs it; how long to wait
    /// before the next (the backoff, doubled for the one after).
    fn failed(&mut self, shared: &Shared, label: &Repo, why: &str) -> Duration {
        shared.metrics.check_errors.get_or_create(label).inc();
        let interval = self.config.interval;
        let wait = self.retry.min(interval);
        tracing::error!(
            "check failed, retrying in {}s: {}",
            wait.as_secs(),
            escape(why)
        );
        self.retry = (self.retry * 2).min(interval);
        wait
    }
}

/// How long one check of a repository whose calls each have `timeout` may
/// take: [`limits::CHECK_TIMEOUTS`](crate::limits::CHECK_TIMEOUTS) of them.
/// Nothing is begun after it (no read, no key tried, no removal); one call
/// begun before it ends within its timeout.
pub fn check_time(timeout: Duration) -> Duration {
    timeout.saturating_mul(crate::limits::CHECK_TIMEOUTS)
}

/// Opens the repository if not yet open (the key is derived once and
/// kept), within `deadline`.
fn open<'a>(
    config: &WatchedRepository,
    repo: &'a mut Option<Repository>,
    deadline: Deadline,
) -> Result<&'a Repository, CheckError> {
    if let Some(repo) = repo {
        return Ok(repo);
    }
    let settings = &config.settings;
    let opened = Repository::open_within(
        settings.location.clone(),
        &settings.password()?,
        settings.timeout.get(),
        &settings.variables,
        deadline,
    )
    .map_err(WardenError::from)?;
    tracing::info!(
        "opened {} (repository {})",
        escape(&opened.location().redacted()),
        escape(&opened.config().id)
    );
    if config.mode == Mode::Unlock && !opened.capabilities().modify {
        tracing::warn!(
            "lockwarden cannot remove locks from {} repositories; reporting stale locks only",
            opened.describe().backend
        );
    }
    Ok(repo.insert(opened))
}

/// One check: judge, remove or report, update the metrics; its report.
/// Opening, reading and removing begin nothing after the check's deadline
/// ([`check_time`]).
fn check_once(
    config: &WatchedRepository,
    warden: &Warden,
    shared: &Shared,
    repo: &mut Option<Repository>,
) -> Result<Report, CheckError> {
    let deadline = Deadline::after(check_time(config.settings.timeout.get()));
    let repo = open(config, repo, deadline)?;
    // Decided once judged, just before anything is removed: a replica that
    // lost its lease meanwhile removes nothing.
    let act = || match config.mode {
        Mode::Unlock if repo.capabilities().modify && leads(shared) => Act::Remove,
        _ => Act::Judge,
    };
    let report = warden.run_then(repo, deadline, act)?;
    warden.emit_logs(&report.assessment);
    let not_removed = log_removals(&report);
    record(&shared.metrics, &config.name, &report, not_removed);
    Ok(report)
}

/// Whether this replica may act: it leads, or there is no election.
fn leads(shared: &Shared) -> bool {
    shared.leader.as_ref().is_none_or(|l| l.acts())
}

/// Logs what became of each stale lock; returns how many are still there.
fn log_removals(report: &Report) -> i64 {
    let mut not_removed = 0;
    let removals = report.removals_by_id();
    for (subject, verdict) in report.assessment.verdicts.stale() {
        let id = short(subject.id());
        let rule = escape(&verdict.rule);
        let reason = escape(&verdict.reason);
        match removals.get(subject.id()).map(|r| &r.result) {
            None => {
                not_removed += 1;
                let why = match report.act {
                    Act::Judge => "kept: report mode, or a backend that cannot remove",
                    Act::Remove => "kept",
                };
                tracing::info!(lock = id, rule = %rule, "stale ({why}): {reason}");
            }
            Some(Ok(removal)) => {
                let gone = if *removal == Removal::AlreadyGone {
                    " (already gone)"
                } else {
                    ""
                };
                tracing::info!(lock = id, rule = %rule, "removed{gone}: {reason}");
            }
            Some(Err(e)) => {
                not_removed += 1;
                tracing::warn!(lock = id, "could not remove: {}", escape(&e.to_string()));
            }
        }
    }
    not_removed
}

/// Updates the metrics of repository `name` after a check.
fn record(m: &Metrics, name: &str, report: &Report, not_removed: i64) {
    let a = &report.assessment;
    let label = Repo {
        repository: name.to_owned(),
    };
    for (kind, count) in a.verdicts.lock_kinds() {
        m.locks
            .get_or_create(&RepoKind {
                repository: name.to_owned(),
                kind: kind.into(),
            })
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }
    let oldest = a.oldest_lock_age();
    m.oldest_lock_age
        .get_or_create(&label)
        .set(oldest as f64 / 1e9);
    m.unreadable
        .get_or_create(&label)
        .set(i64::try_from(a.verdicts.unreadable.len()).unwrap_or(i64::MAX));
    for removal in report.removals.iter().filter(|r| r.result.is_ok()) {
        m.removed
            .get_or_create(&RepoRule {
                repository: name.to_owned(),
                rule: metric_rule(&removal.verdict.rule),
            })
            .inc();
    }
    m.stale_not_removed.get_or_create(&label).set(not_removed);
    let kept = a
        .verdicts
        .all()
        .filter(|(_, v)| v.action == Action::Keep)
        .count();
    tracing::debug!("checked: {} locks, {kept} kept", a.verdicts.locks.len());
    if let Some(shadow) = &a.shadow {
        match &shadow.outcome {
            Ok(verdicts) => {
                for d in &verdicts.disagreements {
                    m.shadow_disagreements
                        .get_or_create(&RepoRulePair {
                            repository: name.to_owned(),
                            enforced_rule: metric_rule(&d.enforced.rule),
                            shadow_rule: metric_rule(&d.shadow.rule),
                        })
                        .inc();
                }
            }
            Err(_) => {
                m.shadow_errors.get_or_create(&label).inc();
            }
        }
    }
    m.last_success.get_or_create(&label).set(a.now as f64 / 1e9);
}

/// A rule id as a metric label: a policy's own word, so anything but a short
/// lowercase id is counted as `other`, and no policy can grow the label set
/// without end or put odd text into it.
fn metric_rule(rule: &str) -> String {
    let plain = !rule.is_empty()
        && rule.len() <= 64
        && rule
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if plain { rule } else { "other" }.to_owned()
}

impl Job for Box<Watched> {
    fn name(&self) -> &str {
        &self.config.name
    }

    fn tenant(&self) -> Option<&str> {
        self.config
            .owner
            .as_ref()
            .map(|owner| owner.namespace.as_str())
    }

    fn is_stopped(&self) -> bool {
        Watched::is_stopped(self)
    }

    fn is_backing_off(&self) -> bool {
        self.retry != FIRST_RETRY
    }
}

impl Check for Box<Watched> {
    type Shared = Shared;

    fn check(&mut self, shared: &Shared) -> Option<Duration> {
        Watched::check(self, shared)
    }

    fn after_panic(&mut self) -> Duration {
        Watched::after_panic(self)
    }

    fn inventory(&self) -> Option<&(InventorySource, Regex)> {
        self.config.settings.evidence.inventory.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evidence::EvidenceConfig;
    use crate::repo::Password;
    use crate::repo::backend::MemoryBackend;
    use crate::repo::location::Location;
    use crate::repo::tests::lock_json;
    use crate::runtime::Limits;
    use crate::warden::Shadow;

    /// One check's report and metrics, over an in-memory repository with
    /// two stale locks, one of which cannot be removed.
    #[test]
    fn a_check_counts_what_it_removed_and_what_it_could_not() {
        use crate::repo::backend::{BackendError, Fault, FaultyBackend, Operation};
        let (backend, key) = MemoryBackend::init(b"pw");
        let stuck = backend.put_lock(&key, &lock_json("elsewhere", 1));
        backend.put_lock(&key, &lock_json("elsewhere", 2));
        let faulty = FaultyBackend::new(backend).fail(
            Fault::always(Operation::Remove, BackendError::Other("read-only".into())).on(&stuck),
        );
        let location = Location::parse("/memory").expect("a path");
        let repo = Repository::with_backend(location, Box::new(faulty), &Password::new("pw"))
            .expect("opens");
        let runtime = Runtime::new(Limits::default(), None).expect("engine");
        let policy = runtime.load_default().expect("default policy");
        let warden = Warden {
            runtime: Arc::new(runtime),
            policy: Arc::new(policy),
            evidence: EvidenceConfig::default(),
            settings: Vec::new(),
            first_seen: None,
            children: None,
            kubernetes: crate::kubernetes::Connection::none(),
            shadow: None,
        };
        let report = warden.run(&repo, Act::Remove).expect("runs");
        let not_removed = log_removals(&report);
        assert_eq!(not_removed, 1);
        let metrics = Metrics::new();
        record(&metrics, "demo", &report, not_removed);
        let text = metrics.encode();
        for line in [
            r#"lockwarden_locks{repository="demo",kind="shared"} 2"#,
            r#"lockwarden_stale_locks_not_removed{repository="demo"} 1"#,
            r#"lockwarden_locks_removed_total{repository="demo",rule="expired"} 1"#,
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
    }

    #[test]
    fn shadow_disagreements_and_errors_are_counted_by_rule_pair() {
        let (backend, key) = MemoryBackend::init(b"pw");
        backend.put_lock(&key, &lock_json("elsewhere", 1));
        backend.put_lock(&key, &lock_json("elsewhere", 2));
        let location = Location::parse("/memory").expect("a path");
        let repo = Repository::with_backend(location, Box::new(backend), &Password::new("pw"))
            .expect("opens");
        let runtime = Arc::new(Runtime::new(Limits::default(), None).expect("engine"));
        let policy = Arc::new(runtime.load_default().expect("default policy"));
        let warden = |shadow_settings: &[(&str, &str)]| Warden {
            runtime: runtime.clone(),
            policy: policy.clone(),
            evidence: EvidenceConfig::default(),
            settings: Vec::new(),
            first_seen: None,
            children: None,
            kubernetes: crate::kubernetes::Connection::none(),
            shadow: Some(Shadow {
                policy: policy.clone(),
                settings: shadow_settings
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            }),
        };
        let metrics = Metrics::new();
        for _ in 0..2 {
            let report = warden(&[("stale-after", "1000h")])
                .run(&repo, Act::Judge)
                .expect("runs");
            record(&metrics, "demo", &report, 0);
        }
        let report = warden(&[("stale-after", "soon")])
            .run(&repo, Act::Judge)
            .expect("runs");
        record(&metrics, "demo", &report, 0);
        let text = metrics.encode();
        for line in [
            r#"lockwarden_shadow_disagreements_total{repository="demo",enforced_rule="expired",shadow_rule="fresh"} 4"#,
            r#"lockwarden_shadow_errors_total{repository="demo"} 1"#,
        ] {
            assert!(text.contains(line), "{line} missing from\n{text}");
        }
    }

    #[test]
    fn metric_labels_take_only_plain_rule_ids() {
        assert_eq!(metric_rule("host-gone"), "host-gone");
        for odd in ["", "Host Gone", "x\ny", &"a".repeat(65), "gone\u{202e}"] {
            assert_eq!(metric_rule(odd), "other", "{odd:?}");
        }
    }
}
