//! `watch`: check many repositories periodically, the way Velero's repository
//! controller runs `restic unlock` every 5 minutes, but with the key derived
//! once per repository, a first-seen store, evidence, and metrics.
//!
//! One thread per repository, so checks of one repository never overlap and a
//! failing one (unreachable, wrong password) never holds up the others; it is
//! retried with backoff (10 s doubling, at most its interval).

pub mod config;
mod http;
pub mod metrics;

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::contract::Action;
use crate::evidence::EvidenceConfig;
use crate::first_seen::FirstSeenStore;
use crate::oci::Registry;
use crate::repo::Repository;
use crate::repo::backend::Removal;
use crate::repo::location::Location;
use crate::repo::lockfile::short;
use crate::runtime::{LoadError, Policy, PolicySource, Runtime};
use crate::text::escape;
use crate::warden::{Judgement, assess, remove_stale};
use config::{Mode, RepositoryConfig, WatchConfig};
use metrics::{Metrics, Repo, RepoKind, RepoRule};

/// The first retry after a failed check waits this long, doubling.
const FIRST_RETRY: Duration = Duration::from_secs(10);

/// Why `watch` could not start.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// A policy named in the configuration failed to load.
    #[error("policy for repository `{repository}`: {error}")]
    Policy {
        /// The repository's name.
        repository: String,
        /// Why.
        error: LoadError,
    },
    /// A repository's settings are refused by its policy.
    #[error("repository `{repository}`: {error}")]
    Settings {
        /// The repository's name.
        repository: String,
        /// The policy's refusal.
        error: crate::runtime::PluginError,
    },
    /// The metrics address cannot be served.
    #[error("cannot serve metrics on {addr}: {cause}; is the address free?")]
    Metrics {
        /// The address.
        addr: String,
        /// Why.
        cause: String,
    },
}

/// A stop signal that sleeping threads notice at once.
#[derive(Default)]
pub struct Stop {
    stopped: Mutex<bool>,
    wake: Condvar,
}

impl Stop {
    /// Asks every thread to stop.
    pub fn stop(&self) {
        if let Ok(mut stopped) = self.stopped.lock() {
            *stopped = true;
        }
        self.wake.notify_all();
    }

    /// True once [`Stop::stop`] was called.
    pub fn is_stopped(&self) -> bool {
        self.stopped.lock().map(|s| *s).unwrap_or(true)
    }

    /// Sleeps for `duration` or until stopped; true when stopped.
    pub fn sleep(&self, duration: Duration) -> bool {
        let Ok(guard) = self.stopped.lock() else {
            return true;
        };
        self.wake
            .wait_timeout_while(guard, duration, |stopped| !*stopped)
            .map(|(stopped, _)| *stopped)
            .unwrap_or(true)
    }
}

/// Everything the repository threads share.
pub struct Shared {
    /// Runs the policies.
    pub runtime: Arc<Runtime>,
    /// Where evidence comes from.
    pub evidence: EvidenceConfig,
    /// First-seen times.
    pub first_seen: FirstSeenStore,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Stop signal.
    pub stop: Arc<Stop>,
    /// Where OCI policies are pulled from.
    pub registry: Registry,
}

/// Loads every policy the configuration names (once each), then starts one
/// thread per repository. Returns their handles.
pub fn start(config: WatchConfig, shared: Arc<Shared>) -> Result<Vec<JoinHandle<()>>, WatchError> {
    let mut policies: HashMap<Option<PolicySource>, Arc<Policy>> = HashMap::new();
    for repo in &config.repositories {
        if policies.contains_key(&repo.policy) {
            continue;
        }
        let source = repo.policy.clone().unwrap_or(PolicySource::Builtin);
        let policy = shared
            .runtime
            .load_from(&source, &shared.registry)
            .map_err(|error| WatchError::Policy {
                repository: repo.name.clone(),
                error,
            })?;
        policies.insert(repo.policy.clone(), Arc::new(policy));
    }
    // A setting the policy refuses fails now, not at every interval.
    for repo in &config.repositories {
        let settings: Vec<(String, String)> = repo.settings.clone().into_iter().collect();
        shared
            .runtime
            .check_settings(&policies[&repo.policy], &repo.name, &settings)
            .map_err(|error| WatchError::Settings {
                repository: repo.name.clone(),
                error,
            })?;
    }
    Ok(config
        .repositories
        .into_iter()
        .map(|repo| {
            let policy = policies[&repo.policy].clone();
            let shared = shared.clone();
            std::thread::spawn(move || watch_one(&repo, &policy, &shared))
        })
        .collect())
}

/// The loop of one repository.
fn watch_one(config: &RepositoryConfig, policy: &Policy, shared: &Shared) {
    let label = Repo {
        repository: config.name.clone(),
    };
    let interval = config.interval().unwrap_or(Duration::from_secs(300));
    let _span =
        tracing::info_span!("watch", repository = %crate::text::escape(&config.name)).entered();
    let mut repo: Option<Repository> = None;
    let mut retry = FIRST_RETRY;
    tracing::info!(
        "watching every {}s in {:?} mode",
        interval.as_secs_f64(),
        config.mode
    );
    while !shared.stop.is_stopped() {
        let started = Instant::now();
        let result = check_once(config, policy, shared, &mut repo);
        shared
            .metrics
            .check_duration
            .get_or_create(&label)
            .observe(started.elapsed().as_secs_f64());
        let wait = match result {
            Ok(()) => {
                retry = FIRST_RETRY;
                interval
            }
            Err(e) => {
                shared.metrics.check_errors.get_or_create(&label).inc();
                let wait = retry.min(interval);
                tracing::error!(
                    "check failed, retrying in {}s: {}",
                    wait.as_secs(),
                    escape(&e)
                );
                retry = (retry * 2).min(interval);
                wait
            }
        };
        if shared.stop.sleep(wait) {
            break;
        }
    }
    tracing::info!("stopped");
}

/// One check: open the repository if not yet open (the key is derived once
/// and kept), judge, remove or report, update the metrics.
fn check_once(
    config: &RepositoryConfig,
    policy: &Policy,
    shared: &Shared,
    repo: &mut Option<Repository>,
) -> Result<(), String> {
    let repo = match repo {
        Some(repo) => repo,
        None => {
            let location = Location::parse(&config.repository)?;
            let password = config.password().map_err(|e| e.to_string())?;
            let opened = Repository::open(location, &password, config.timeout()?)
                .map_err(|e| e.to_string())?;
            tracing::info!(
                "opened {} (repository {})",
                escape(&opened.location().redacted()),
                escape(&opened.config().id)
            );
            repo.insert(opened)
        }
    };
    let settings: Vec<(String, String)> = config.settings.clone().into_iter().collect();
    let judgement = Judgement {
        runtime: &shared.runtime,
        policy,
        evidence: &shared.evidence,
        children: None,
        settings: &settings,
        first_seen: Some(&shared.first_seen),
    };
    let assessment = assess(repo, judgement).map_err(|e| e.to_string())?;
    let now = assessment.now;
    for line in &assessment.logs {
        line.emit(&policy.info().name);
    }

    let m = &shared.metrics;
    let label = Repo {
        repository: config.name.clone(),
    };
    for (kind, exclusive) in [("exclusive", true), ("shared", false)] {
        let count = assessment
            .locks
            .iter()
            .filter(|(l, _)| l.exclusive == exclusive)
            .count();
        m.locks
            .get_or_create(&RepoKind {
                repository: config.name.clone(),
                kind: kind.into(),
            })
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }
    let oldest = assessment
        .locks
        .iter()
        .map(|(l, _)| now.saturating_sub(l.time))
        .max()
        .unwrap_or(0);
    m.oldest_lock_age
        .get_or_create(&label)
        .set(oldest as f64 / 1e9);
    m.unreadable
        .get_or_create(&label)
        .set(i64::try_from(assessment.unreadable.len()).unwrap_or(i64::MAX));

    let mut not_removed = 0i64;
    match config.mode {
        Mode::Report => {
            for (id, verdict) in assessment.stale() {
                not_removed += 1;
                tracing::info!(lock = short(id), rule = %escape(&verdict.rule), "stale (report mode, kept): {}", escape(&verdict.reason));
            }
        }
        Mode::Unlock => {
            for result in remove_stale(repo, &assessment) {
                match result.result {
                    Ok(removal) => {
                        m.removed
                            .get_or_create(&RepoRule {
                                repository: config.name.clone(),
                                rule: metric_rule(&result.verdict.rule),
                            })
                            .inc();
                        let gone = if removal == Removal::AlreadyGone {
                            " (already gone)"
                        } else {
                            ""
                        };
                        tracing::info!(lock = short(&result.id), rule = %escape(&result.verdict.rule), "removed{gone}: {}", escape(&result.verdict.reason));
                    }
                    Err(e) => {
                        not_removed += 1;
                        tracing::warn!(
                            lock = short(&result.id),
                            "could not remove: {}",
                            escape(&e.to_string())
                        );
                    }
                }
            }
        }
    }
    m.stale_not_removed.get_or_create(&label).set(not_removed);
    let kept = assessment
        .locks
        .iter()
        .filter(|(_, v)| v.action == Action::Keep)
        .count();
    tracing::debug!("checked: {} locks, {kept} kept", assessment.locks.len());
    m.last_success.get_or_create(&label).set(now as f64 / 1e9);
    Ok(())
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

/// Serves `GET /metrics` on `addr` until stopped.
pub fn serve_metrics(
    addr: &str,
    metrics: Arc<Metrics>,
    stop: Arc<Stop>,
) -> Result<JoinHandle<()>, WatchError> {
    let listener = std::net::TcpListener::bind(addr).map_err(|e| WatchError::Metrics {
        addr: addr.to_owned(),
        cause: e.to_string(),
    })?;
    tracing::info!("serving metrics on http://{addr}/metrics");
    Ok(http::serve(listener, metrics, stop))
}

#[cfg(test)]
mod tests {
    use super::metric_rule;

    #[test]
    fn metric_labels_take_only_plain_rule_ids() {
        assert_eq!(metric_rule("host-gone"), "host-gone");
        for odd in ["", "Host Gone", "x\ny", &"a".repeat(65), "gone\u{202e}"] {
            assert_eq!(metric_rule(odd), "other", "{odd:?}");
        }
    }
}
