//! `watch`: check many repositories periodically, the way Velero's repository
//! controller runs `restic unlock` every 5 minutes, but with the key derived
//! once per repository, a first-seen store, evidence, and metrics.
//!
//! A fixed set of workers checks each repository when it is due
//! ([`schedule`]), so checks of one repository never overlap and a failing
//! one (unreachable, wrong password) holds one worker, not the others; it is
//! retried with backoff (10 s doubling, at most its interval). A check has a
//! deadline ([`watched::check_time`]): nothing is begun after it, so a check
//! ends at most one call's timeout later, and no tenant holds more than its
//! share of the workers
//! ([`limits::TENANT_WORKERS`](crate::limits::TENANT_WORKERS)).
//!
//! Below this module and the [`pool`] of repositories: each repository's
//! state and check ([`watched`]) on the [`schedule`], which knows it only
//! as a job; its settings ([`repository`]), which the configuration
//! ([`config`]) and discovery ([`discover`]) both make; the object a
//! discovered one was found in ([`owner`]), which discovery and
//! notifications ([`notify`]) both name.

pub mod config;
pub mod discover;
mod error;
mod fair_share;
mod holders;
mod http;
pub mod leader;
pub mod metrics;
pub mod notify;
pub mod owner;
mod pool;
pub mod repository;
mod schedule;
mod watched;

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::stop::Stop;
use crate::text::escape;
use config::WatchConfig;
pub use error::WatchError;
use metrics::Metrics;
use pool::Pool;
use schedule::Schedule;
pub use watched::Shared;
use watched::Watched;

/// Loads every policy the configuration names (once each), makes every
/// fixed repository's warden (a setting either policy refuses fails now,
/// not at every interval), then starts the workers that check them, and a
/// thread for discovery when `[discover]` asks for it. Returns their handles.
pub fn start(config: WatchConfig, shared: Arc<Shared>) -> Result<Vec<JoinHandle<()>>, WatchError> {
    let (schedule, mut handles) = Schedule::<Box<Watched>>::start(
        shared.clone(),
        shared.stop.clone(),
        crate::limits::WATCH_WORKERS,
        crate::limits::TENANT_WORKERS,
    );
    if let Some(timeout) = follows_pods(&config) {
        let kubernetes = shared.kubernetes.clone();
        follow_pods(schedule.clone(), shared.stop.clone(), kubernetes, timeout);
    }
    let mut pool = Pool::new(shared.clone(), schedule);
    let mut jobs = Vec::new();
    for repo in config.repositories {
        let warden = pool.warden(&repo)?;
        jobs.push((repo, warden));
    }
    for (repo, warden) in jobs {
        pool.launch(repo, warden, shared.stop.clone(), None);
    }
    if let Some((discovery, template)) = config.discover {
        handles.push(std::thread::spawn(move || {
            pool.discover(discovery, template)
        }));
    }
    Ok(handles)
}

/// Whether some repository takes its evidence from the pods of the
/// Kubernetes API (every discovered one does), and the timeout of their
/// requests if so.
fn follows_pods(config: &WatchConfig) -> Option<Duration> {
    let from_api = |settings: &crate::repository_settings::RepositorySettings| {
        matches!(
            settings.evidence.inventory,
            Some((crate::evidence::InventorySource::Kubernetes { .. }, _))
        )
    };
    let fixed = (config.repositories.iter()).find(|r| from_api(&r.settings));
    match (&config.discover, fixed) {
        (Some((_, template)), _) => Some(template.timeout.get()),
        (None, Some(repo)) => Some(repo.settings.timeout.get()),
        (None, None) => None,
    }
}

/// Follows the pods on a thread of its own ([`crate::evidence::pod_watch`]):
/// a pod's end checks at once (after [`schedule::Schedule::hurry`]'s
/// pause) the repositories whose inventories cover it. The thread ends
/// with the process.
fn follow_pods(
    schedule: Arc<Schedule<Box<Watched>>>,
    stop: Arc<Stop>,
    kubernetes: crate::kubernetes::Connection,
    timeout: Duration,
) {
    std::thread::spawn(move || {
        let client = match kubernetes.client() {
            Ok(client) => client,
            Err(e) => {
                tracing::warn!(
                    "cannot follow the pods; locks of ended pods wait for their next check: {}",
                    escape(&e.to_string())
                );
                return;
            }
        };
        crate::evidence::pod_watch::follow(client, timeout, &stop, |pod, end| {
            let names = schedule.holders.holding(&pod.namespace, &pod.hostnames);
            if !names.is_empty() {
                crate::evidence::pod_watch::outdate_listings(&pod.namespace);
            }
            if !names.is_empty() {
                // Once a pod, whatever the repositories: a tenant's churn
                // must not make a line for each of its namespace's.
                tracing::info!(
                    "pod {}/{} ended ({end:?}): checking now {} repositories",
                    escape(&pod.namespace),
                    escape(&pod.name),
                    names.len()
                );
            }
            for name in &names {
                tracing::debug!(repository = %escape(name), "checking now: a pod ended");
            }
            schedule.hurry(&names);
        });
    });
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
