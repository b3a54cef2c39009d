//! The default policy's rules: pure functions of the time, the settings, the
//! locks and the evidence the host supplies. First match wins; every verdict
//! names its rule.
//!
//! The rules, in order, with when each applies and what it does, are one
//! table in `docs/policy.md`: a test here checks its order against `RULES`,
//! and `tests/e2e/docs.rs` its names and actions against the built policy.
//!
//! `unknown` evidence never leads to `remove`, and neither do disagreeing
//! clocks: a lock whose own time is fresh is never removed on the storage's
//! age alone (`stored-long-ago` below).
//!
//! This crate knows no contract: its types are plain Rust, and each build of
//! the policy (the component in `plugin/`, a contract 0.1.0 build for tests)
//! converts the contract's records to them and back.

// No std: the policy component links only core and alloc (no WASI).
#![cfg_attr(not(test), no_std)]

extern crate alloc;

pub use lockwarden_duration as duration;

use alloc::collections::BTreeMap;
use alloc::{borrow::ToOwned, format, string::String, vec, vec::Vec};

use duration::{HOUR, MINUTE};

mod types;
pub use types::{
    Action, Info, Liveness, Lock, PolicyError, Question, SettingInfo, Unreadable, Verdict,
};

/// The facts a policy may not gather itself. The component serves them from
/// the host's imports; tests serve them from a table.
pub trait Facts {
    /// This machine's hostname, if the host knows it.
    fn local_hostname(&self) -> Option<String>;
    /// Answers every question, one answer each, in order.
    fn ask(&self, questions: Vec<Question>) -> Vec<Liveness>;
    /// Tells the operator about something worth a look.
    fn warn(&self, message: &str);
}

/// The policy's validated settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// A lock older than this (by its own time, since first seen, or since
    /// stored) is stale.
    pub stale_after: i64,
    /// How far apart the host's clock and another clock (a lock's writer, the
    /// storage) may be.
    pub max_clock_skew: i64,
    /// An unreadable lock file stored or first seen longer ago than this is
    /// removed.
    pub unreadable_after: i64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            stale_after: 30 * MINUTE,
            max_clock_skew: MINUTE,
            unreadable_after: HOUR,
        }
    }
}

const STALE_AFTER: &str = "stale-after";
const MAX_CLOCK_SKEW: &str = "max-clock-skew";
const UNREADABLE_AFTER: &str = "unreadable-after";
/// restic's stale age. The shortest `stale-after`: a live restic refreshes
/// its lock every 5 minutes, but may go 22.5 minutes between refreshes on a
/// slow upload (and gives up only then), so a shorter age removes live locks.
/// Also the shortest `unreadable-after`, below which the host refuses to
/// remove an unreadable file whatever a policy says.
const RESTIC_STALE_AGE: i64 = 30 * MINUTE;

impl Settings {
    /// Validates key/value settings; keys not given keep their defaults
    /// (`unreadable-after`: 1h, or `stale-after` when that is longer). An
    /// unknown key or a bad value is an error naming the key and what is
    /// accepted.
    pub fn parse(pairs: &[(String, String)]) -> Result<Settings, PolicyError> {
        let mut settings = Settings::default();
        let mut unreadable_after = None;
        for (key, value) in pairs {
            let parsed = duration::parse(value).ok_or_else(|| {
                PolicyError::InvalidSetting(format!(
                    "setting `{key}`: `{value}` is not {}",
                    duration::ACCEPTED
                ))
            });
            match key.as_str() {
                STALE_AFTER => settings.stale_after = parsed?,
                MAX_CLOCK_SKEW => settings.max_clock_skew = parsed?,
                UNREADABLE_AFTER => unreadable_after = Some(parsed?),
                _ => {
                    return Err(PolicyError::InvalidSetting(format!(
                        "unknown setting `{key}`: this policy accepts {STALE_AFTER}, \
                         {MAX_CLOCK_SKEW} and {UNREADABLE_AFTER}"
                    )));
                }
            }
        }
        if settings.stale_after < RESTIC_STALE_AGE {
            return Err(PolicyError::InvalidSetting(format!(
                "setting `{STALE_AFTER}`: must be at least 30m (restic's stale age): a live \
                 restic refreshes its lock every 5 minutes and may go 22.5 minutes between \
                 refreshes on a slow upload, so a shorter age removes live locks. Evidence \
                 removes a dead holder's lock sooner: process-dead for locks from this machine, \
                 host-gone with --hosts-command or --hosts-file (a pod inventory), unrefreshed \
                 with the first-seen store (--state-dir, always on in watch)"
            )));
        }
        settings.unreadable_after =
            unreadable_after.unwrap_or_else(|| settings.stale_after.max(HOUR));
        if settings.unreadable_after < RESTIC_STALE_AGE {
            return Err(PolicyError::InvalidSetting(format!(
                "setting `{UNREADABLE_AFTER}`: must be at least 30m (restic's stale age; the \
                 host removes no younger unreadable file)"
            )));
        }
        Ok(settings)
    }
}

/// The policy's description of itself.
pub fn info() -> Info {
    Info {
        name: "lockwarden-default".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        description: "Removes a restic lock when its holder is known to be gone (same-host \
            process dead or pid reused, host or pod gone) or when it is older than stale-after \
            (restic's 30-minute rule, by the lock's time, by when the host first saw it, or, \
            for a lock dated in the future, by when the storage stored it). Removes a lock file \
            it cannot read once it was stored or first seen longer than unreadable-after ago. \
            Keeps everything else, including every lock whose holder is unknown and every lock \
            whose own time is fresh however old the storage says it is."
            .into(),
        settings: vec![
            SettingInfo {
                name: STALE_AFTER.into(),
                default_value: "30m".into(),
                help: format!(
                    "a lock older than this is stale, as in restic; at least 30m (a live restic \
                     may go 22.5 minutes between refreshes; evidence removes a dead holder's lock \
                     sooner); {}",
                    duration::ACCEPTED
                ),
            },
            SettingInfo {
                name: MAX_CLOCK_SKEW.into(),
                default_value: "1m".into(),
                help: format!(
                    "how far a lock writer's or the storage's clock may be from this host's: a \
                     lock dated further in the future is reported as written by a skewed clock \
                     (and kept), and ages by the storage's clock must exceed their limit by this \
                     much; {}",
                    duration::ACCEPTED
                ),
            },
            SettingInfo {
                name: UNREADABLE_AFTER.into(),
                default_value: "1h (or stale-after, when longer)".into(),
                help: format!(
                    "a lock file that cannot be read is removed once the storage stored it, or \
                     this host first saw it, longer ago than this; at least 30m; {}",
                    duration::ACCEPTED
                ),
            },
        ],
    }
}

/// The verdicts on one request, in its order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdicts {
    /// One per lock.
    pub locks: Vec<Verdict>,
    /// One per unreadable file.
    pub unreadable: Vec<Verdict>,
}

/// Decides about every lock and unreadable file: one verdict each, in input
/// order. Evidence is asked for in one batch, each distinct question once;
/// with no locks there is no question, and `ask` is not called at all.
pub fn evaluate(
    now: i64,
    facts: &impl Facts,
    settings: &Settings,
    locks: &[Lock],
    unreadable: &[Unreadable],
) -> Verdicts {
    let local = facts.local_hostname();
    let asked = Questions::for_locks(local.as_deref(), locks);
    let asked_count = asked.questions.len();
    let answers = if asked_count == 0 {
        Vec::new()
    } else {
        facts.ask(asked.questions)
    };
    if answers.len() != asked_count {
        facts.warn(&format!(
            "the host gave {} answers to {asked_count} questions; missing answers count as \
             unknown",
            answers.len()
        ));
    }
    let unknown = Liveness::Unknown("the host gave no answer".into());
    let answer = |i: usize| answers.get(i).unwrap_or(&unknown);
    let verdicts = locks
        .iter()
        .zip(&asked.per_lock)
        .map(|(lock, (process, host))| {
            let evidence = Evidence {
                process: process.map(answer),
                host: answer(*host),
            };
            let verdict = decide(now, settings, lock, &evidence);
            if verdict.rule == HOLDER_ALIVE && age(now, lock.time) > settings.stale_after {
                facts.warn(&format!(
                    "lock {} is {} old but its holder {}@{} is alive and has not refreshed it",
                    short(&lock.id),
                    duration::format(age(now, lock.time)),
                    lock.username,
                    lock.hostname
                ));
            }
            verdict
        })
        .collect();
    Verdicts {
        locks: verdicts,
        unreadable: unreadable
            .iter()
            .map(|file| judge_unreadable(now, settings, file))
            .collect(),
    }
}

/// Every distinct question the locks raise, and which answers each lock's
/// evidence is.
struct Questions {
    questions: Vec<Question>,
    /// Per lock: the index of its process question (same host only) and of
    /// its host question.
    per_lock: Vec<(Option<usize>, usize)>,
}

impl Questions {
    /// Asks about a lock's process only when it was written on this machine
    /// (the host can only see processes on its own machine), and about every
    /// lock's host. Ordered maps, not hashes: hostnames come from lock files,
    /// and nobody can make a B-tree slow.
    fn for_locks(local: Option<&str>, locks: &[Lock]) -> Questions {
        let mut questions = Vec::new();
        let mut processes: BTreeMap<(&str, i64, i64), usize> = BTreeMap::new();
        let mut hosts: BTreeMap<(&str, i64), usize> = BTreeMap::new();
        let per_lock = locks
            .iter()
            .map(|lock| {
                let name = lock.hostname.as_str();
                let process = (local == Some(name)).then(|| {
                    *processes
                        .entry((name, lock.pid, lock.time))
                        .or_insert_with(|| {
                            questions.push(Question::Process {
                                hostname: name.to_owned(),
                                pid: lock.pid,
                                since: lock.time,
                            });
                            questions.len() - 1
                        })
                });
                let host = *hosts.entry((name, lock.time)).or_insert_with(|| {
                    questions.push(Question::Host {
                        hostname: name.to_owned(),
                        since: lock.time,
                    });
                    questions.len() - 1
                });
                (process, host)
            })
            .collect();
        Questions {
            questions,
            per_lock,
        }
    }
}

/// What the host said about one lock's holder.
#[derive(Debug, Clone, Copy)]
pub struct Evidence<'a> {
    /// Process evidence; `None` when the lock is from another host.
    pub process: Option<&'a Liveness>,
    /// Host (machine or pod) evidence.
    pub host: &'a Liveness,
}

impl Evidence<'_> {
    fn details(&self) -> String {
        match self.process {
            Some(process) => format!(
                "process: {}; host: {}",
                process.detail(),
                self.host.detail()
            ),
            None => format!("host: {}", self.host.detail()),
        }
    }
}

const HOLDER_ALIVE: &str = "holder-alive";

/// One rule: `Some((action, reason))` when it applies.
type Rule = fn(&Context) -> Option<(Action, String)>;

/// What every rule looks at.
struct Context<'a> {
    now: i64,
    settings: &'a Settings,
    lock: &'a Lock,
    evidence: &'a Evidence<'a>,
}

/// The rules in order; the first that applies decides.
const RULES: [(&str, Rule); 8] = [
    (HOLDER_ALIVE, holder_alive),
    ("process-dead", process_dead),
    ("host-gone", host_gone),
    ("expired", expired),
    ("unrefreshed", unrefreshed),
    ("stored-long-ago", stored_long_ago),
    ("future-time", future_time),
    ("fresh", fresh),
];

/// Applies the rules to one lock.
pub fn decide(now: i64, settings: &Settings, lock: &Lock, evidence: &Evidence) -> Verdict {
    let context = Context {
        now,
        settings,
        lock,
        evidence,
    };
    for (rule, apply) in RULES {
        if let Some((action, reason)) = apply(&context) {
            return Verdict {
                action,
                rule,
                reason,
            };
        }
    }
    unreachable!("the last rule, fresh, always applies")
}

fn holder_alive(c: &Context) -> Option<(Action, String)> {
    let alive = [c.evidence.process, Some(c.evidence.host)]
        .into_iter()
        .flatten()
        .find_map(|l| match l {
            Liveness::Alive(d) => Some(d),
            _ => None,
        })?;
    Some((Action::Keep, format!("holder is alive: {alive}")))
}

fn process_dead(c: &Context) -> Option<(Action, String)> {
    match c.evidence.process {
        Some(Liveness::Dead(d)) => Some((
            Action::Remove,
            format!(
                "holder process {} on {} is gone: {d}",
                c.lock.pid, c.lock.hostname
            ),
        )),
        _ => None,
    }
}

fn host_gone(c: &Context) -> Option<(Action, String)> {
    match c.evidence.host {
        Liveness::Dead(d) => Some((
            Action::Remove,
            format!("holder host {} is gone: {d}", c.lock.hostname),
        )),
        _ => None,
    }
}

fn expired(c: &Context) -> Option<(Action, String)> {
    let age = age(c.now, c.lock.time);
    (age > c.settings.stale_after).then(|| {
        (
            Action::Remove,
            format!(
                "lock is {} old, older than stale-after {} ({})",
                duration::format(age),
                duration::format(c.settings.stale_after),
                c.evidence.details()
            ),
        )
    })
}

fn unrefreshed(c: &Context) -> Option<(Action, String)> {
    let seen = age(c.now, c.lock.first_seen?);
    (seen > c.settings.stale_after).then(|| {
        (
            Action::Remove,
            format!(
                "first seen {} ago by this host's clock, longer than stale-after {}, and never \
                 refreshed ({})",
                duration::format(seen),
                duration::format(c.settings.stale_after),
                c.evidence.details()
            ),
        )
    })
}

/// A live holder replaces its lock file every 5 minutes, so a file the
/// storage stored longer ago than stale-after (plus the skew the storage's
/// clock may have) is not being refreshed, whatever its content says.
///
/// The storage's clock decides only where the lock's own time cannot: a lock
/// dated beyond max-clock-skew in the future (its writer's clock is wrong, so
/// `expired` can never fire). A lock whose own time is fresh is kept however
/// old the storage says its file is: that is two clocks disagreeing (an NFS
/// or SFTP server whose clock is behind stamps a live holder's new file 35
/// minutes old), and disagreeing evidence keeps, as restic does. The storage's
/// age could also decide where the host measured the storage's clock against
/// its own (an HTTP `Date` header, within max-clock-skew); contract 0.2.0 has
/// no field that says so, so this rule waits for one.
fn stored_long_ago(c: &Context) -> Option<(Action, String)> {
    let ahead = future_by(c)?;
    let stored_at = c.lock.stored_at?;
    (storage_age(c.now, stored_at, c.settings) > c.settings.stale_after).then(|| {
        (
            Action::Remove,
            format!(
                "lock is dated {} in the future, and was stored {} ago by the storage's clock, \
                 longer than stale-after {} plus max-clock-skew {}: a live holder replaces its \
                 lock file every 5 minutes ({})",
                duration::format(ahead),
                duration::format(age(c.now, stored_at)),
                duration::format(c.settings.stale_after),
                duration::format(c.settings.max_clock_skew),
                c.evidence.details()
            ),
        )
    })
}

/// How far the lock is dated in the future, when that is beyond
/// max-clock-skew: its writer's clock is wrong, and its own time says nothing.
fn future_by(c: &Context) -> Option<i64> {
    let ahead = c.lock.time.saturating_sub(c.now);
    (ahead > c.settings.max_clock_skew).then_some(ahead)
}

fn future_time(c: &Context) -> Option<(Action, String)> {
    future_by(c).map(|ahead| {
        (
            Action::Keep,
            format!(
                "lock is dated {} in the future, beyond max-clock-skew {}: the holder's clock \
                 is probably wrong ({})",
                duration::format(ahead),
                duration::format(c.settings.max_clock_skew),
                c.evidence.details()
            ),
        )
    })
}

/// Keeps the lock; when the storage's clock says the file is old while the
/// lock's own time is fresh, says that the clocks disagree.
fn fresh(c: &Context) -> Option<(Action, String)> {
    let disagreeing = c
        .lock
        .stored_at
        .filter(|&at| storage_age(c.now, at, c.settings) > c.settings.stale_after)
        .map(|at| {
            format!(
                ", though the storage's clock says it was stored {} ago: disagreeing clocks \
                 keep a lock",
                duration::format(age(c.now, at))
            )
        })
        .unwrap_or_default();
    Some((
        Action::Keep,
        format!(
            "lock is {} old, within stale-after {}{disagreeing} ({})",
            duration::format(age(c.now, c.lock.time)),
            duration::format(c.settings.stale_after),
            c.evidence.details()
        ),
    ))
}

/// An unreadable file is removed once the storage stored it, or this host
/// first saw it, longer than `unreadable-after` ago; kept otherwise.
pub fn judge_unreadable(now: i64, settings: &Settings, file: &Unreadable) -> Verdict {
    let limit = settings.unreadable_after;
    let stored = file
        .stored_at
        .filter(|&at| storage_age(now, at, settings) > limit)
        .map(|at| {
            format!(
                "stored {} ago by the storage's clock",
                duration::format(age(now, at))
            )
        });
    let seen = file
        .first_seen
        .filter(|&at| age(now, at) > limit)
        .map(|at| {
            format!(
                "first seen {} ago by this host's clock",
                duration::format(age(now, at))
            )
        });
    match stored.or(seen) {
        Some(since) => Verdict {
            action: Action::Remove,
            rule: "unreadable-old",
            reason: format!(
                "lock file cannot be read ({}) and was {since}, longer than unreadable-after {}: \
                 no live holder leaves its lock file unreadable that long",
                file.problem,
                duration::format(limit)
            ),
        },
        None => Verdict {
            action: Action::Keep,
            rule: "unreadable",
            reason: format!(
                "lock file cannot be read ({}); kept until it was stored or first seen longer \
                 than unreadable-after {} ago",
                file.problem,
                duration::format(limit)
            ),
        },
    }
}

fn age(now: i64, time: i64) -> i64 {
    now.saturating_sub(time)
}

/// An age by the storage's clock, shortened by the skew that clock may have.
fn storage_age(now: i64, stored_at: i64, settings: &Settings) -> i64 {
    age(now, stored_at).saturating_sub(settings.max_clock_skew)
}

fn short(id: &str) -> &str {
    id.get(..8).unwrap_or(id)
}

#[cfg(test)]
mod tests;
