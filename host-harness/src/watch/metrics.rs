//! Prometheus metrics for `watch`, served at `/metrics`.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// The help texts of the gauges `watch` and `check --textfile` share.
pub mod help {
    /// `lockwarden_locks`.
    pub const LOCKS: &str = "Lock files present, by kind";
    /// `lockwarden_oldest_lock_age_seconds`.
    pub const OLDEST_LOCK_AGE: &str = "Age of the oldest lock by its own time";
    /// `lockwarden_unreadable_locks`.
    pub const UNREADABLE_LOCKS: &str = "Lock files that cannot be read";
}
/// Labels naming a repository (by its configured name, never its location).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct Repo {
    /// The configured name.
    pub repository: String,
}

/// Repository and lock kind.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RepoKind {
    /// The configured name.
    pub repository: String,
    /// `exclusive` or `shared`.
    pub kind: String,
}

/// Repository and the rule that removed a lock.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RepoRule {
    /// The configured name.
    pub repository: String,
    /// The policy rule.
    pub rule: String,
}

/// Repository and the rules of a disagreement between the enforced and the
/// shadow policy.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RepoRulePair {
    /// The configured name.
    pub repository: String,
    /// The enforced policy's rule.
    pub enforced_rule: String,
    /// The shadow policy's rule.
    pub shadow_rule: String,
}

/// Repository, notification sink and how a delivery went.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RepoSinkResult {
    /// The configured name.
    pub repository: String,
    /// `webhook` or `command`.
    pub sink: String,
    /// `ok` or `failed` (after its retries).
    pub result: String,
}

/// A discovered repository that is not watched, and its operator.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NotWatched {
    /// Its name (`namespace/Kind/name`).
    pub repository: String,
    /// `velero`, `stash`, `kubestash`, `k8up` or `volsync`.
    pub operator: String,
}

impl NotWatched {
    /// The labels of repository `name`, found through the operator named
    /// `operator`.
    pub fn of(name: &str, operator: &str) -> NotWatched {
        NotWatched {
            repository: name.to_owned(),
            operator: operator.to_owned(),
        }
    }
}

type FloatGauge = Gauge<f64, AtomicU64>;

/// Every metric `watch` exports.
pub struct Metrics {
    registry: Registry,
    /// Locks present.
    pub locks: Family<RepoKind, Gauge>,
    /// Age of the oldest lock, seconds.
    pub oldest_lock_age: Family<Repo, FloatGauge>,
    /// Locks judged stale but kept (report mode).
    pub stale_not_removed: Family<Repo, Gauge>,
    /// Locks removed, by rule.
    pub removed: Family<RepoRule, Counter>,
    /// Unreadable lock files.
    pub unreadable: Family<Repo, Gauge>,
    /// Failed checks.
    pub check_errors: Family<Repo, Counter>,
    /// Check duration, seconds.
    pub check_duration: Family<Repo, Histogram>,
    /// Unix time of the last successful check.
    pub last_success: Family<Repo, FloatGauge>,
    /// Inputs the shadow policy judged otherwise, per check, by rule pair.
    pub shadow_disagreements: Family<RepoRulePair, Counter>,
    /// Checks in which the shadow policy failed.
    pub shadow_errors: Family<Repo, Counter>,
    /// Notifications delivered or not, by sink.
    pub notifications_sent: Family<RepoSinkResult, Counter>,
    /// Notifications dropped because the queue was full.
    pub notifications_dropped: Family<Repo, Counter>,
    /// Discovered repositories refused (1 while refused; why is in the log
    /// and the object's Events).
    pub not_watched: Family<NotWatched, Gauge>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Registers every metric under the `lockwarden_` prefix.
    // Longer than 60 lines: one registration per metric, with its help text,
    // in the order /metrics lists them; split, the list would only be harder
    // to read against the output.
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("lockwarden");
        let m = Metrics {
            registry: Registry::default(),
            locks: Family::default(),
            oldest_lock_age: Family::default(),
            stale_not_removed: Family::default(),
            removed: Family::default(),
            unreadable: Family::default(),
            check_errors: Family::default(),
            check_duration: Family::new_with_constructor(|| {
                Histogram::new([0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0])
            }),
            last_success: Family::default(),
            shadow_disagreements: Family::default(),
            shadow_errors: Family::default(),
            notifications_sent: Family::default(),
            notifications_dropped: Family::default(),
            not_watched: Family::default(),
        };
        registry.register("locks", help::LOCKS, m.locks.clone());
        registry.register(
            "oldest_lock_age_seconds",
            help::OLDEST_LOCK_AGE,
            m.oldest_lock_age.clone(),
        );
        registry.register(
            "stale_locks_not_removed",
            "Locks judged stale but still there: report mode, a backend that cannot remove, or a failed removal",
            m.stale_not_removed.clone(),
        );
        registry.register(
            "locks_removed",
            "Locks removed, by the rule that judged them",
            m.removed.clone(),
        );
        registry.register(
            "unreadable_locks",
            help::UNREADABLE_LOCKS,
            m.unreadable.clone(),
        );
        registry.register("check_errors", "Checks that failed", m.check_errors.clone());
        registry.register(
            "check_duration_seconds",
            "How long one check took",
            m.check_duration.clone(),
        );
        registry.register(
            "last_success_timestamp_seconds",
            "Unix time of the last successful check",
            m.last_success.clone(),
        );
        registry.register(
            "shadow_disagreements",
            "Locks the shadow policy judged otherwise than the enforced one (action or rule), counted at every check",
            m.shadow_disagreements.clone(),
        );
        registry.register(
            "shadow_errors",
            "Checks in which the shadow policy failed (the enforced policy's verdicts stood)",
            m.shadow_errors.clone(),
        );
        registry.register(
            "notifications_sent",
            "Notifications handed to a sink, by sink and result (failed: after its retries)",
            m.notifications_sent.clone(),
        );
        registry.register(
            "notifications_dropped",
            "Notifications dropped because too many were waiting to be sent",
            m.notifications_dropped.clone(),
        );
        registry.register(
            "discovered_not_watched",
            "Repositories discovery found but does not watch (1 each; the reason is in the log and an Event on the object)",
            m.not_watched.clone(),
        );
        Metrics { registry, ..m }
    }

    /// The text exposition format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}
