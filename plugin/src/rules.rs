//! The default policy's rules: pure functions of the time, the settings, the
//! locks and the evidence the host supplies. First match wins; every verdict
//! names its rule.
//!
//! | rule         | when                                                  | action |
//! |--------------|-------------------------------------------------------|--------|
//! | holder-alive | process or host evidence says alive                   | keep   |
//! | process-dead | same host, and process evidence says dead             | remove |
//! | host-gone    | host evidence says dead                               | remove |
//! | expired      | now - time > stale-after (restic's rule)              | remove |
//! | unrefreshed  | now - first-seen > stale-after (host's own clock)     | remove |
//! | future-time  | time > now + max-clock-skew                           | keep   |
//! | fresh        | otherwise                                             | keep   |
//! | unreadable   | the file could not be read                            | keep   |
//!
//! `unknown` evidence never leads to `remove`.

use crate::bindings::lockwarden::policy::types::{
    Action, Liveness, Lock, PolicyError, PolicyInfo, SettingInfo, UnreadableLock, Verdict,
};
use crate::duration::{self, MINUTE};

/// The facts a policy may not gather itself. The component serves them from
/// the host's imports; tests serve them from a table.
pub trait Facts {
    /// This machine's hostname, if the host knows it.
    fn local_hostname(&self) -> Option<String>;
    /// Whether process `pid` on `hostname`, which wrote a lock at `since`, lives.
    fn process(&self, hostname: &str, pid: i64, since: i64) -> Liveness;
    /// Whether host `hostname`, which wrote a lock at `since`, still exists.
    fn host(&self, hostname: &str, since: i64) -> Liveness;
    /// Tells the operator about something worth a look.
    fn warn(&self, message: &str);
}

/// The policy's validated settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// A lock older than this (by its own time, or since first seen) is stale.
    pub stale_after: i64,
    /// How far in the future a lock's time may be before it is reported as
    /// written by a skewed clock.
    pub max_clock_skew: i64,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            stale_after: 30 * MINUTE,
            max_clock_skew: MINUTE,
        }
    }
}

const STALE_AFTER: &str = "stale-after";
const MAX_CLOCK_SKEW: &str = "max-clock-skew";

impl Settings {
    /// Validates key/value settings; keys not given keep their defaults. An
    /// unknown key or a bad value is an error naming the key and what is
    /// accepted.
    pub fn parse(pairs: &[(String, String)]) -> Result<Settings, PolicyError> {
        let mut settings = Settings::default();
        for (key, value) in pairs {
            let slot = match key.as_str() {
                STALE_AFTER => &mut settings.stale_after,
                MAX_CLOCK_SKEW => &mut settings.max_clock_skew,
                _ => {
                    return Err(PolicyError::InvalidSetting(format!(
                        "unknown setting `{key}`: this policy accepts {STALE_AFTER} and {MAX_CLOCK_SKEW}"
                    )));
                }
            };
            *slot = duration::parse(value).ok_or_else(|| {
                PolicyError::InvalidSetting(format!(
                    "setting `{key}`: `{value}` is not {}",
                    duration::ACCEPTED
                ))
            })?;
        }
        if settings.stale_after == 0 {
            return Err(PolicyError::InvalidSetting(format!(
                "setting `{STALE_AFTER}`: must be longer than 0, or every lock would be stale"
            )));
        }
        Ok(settings)
    }
}

/// The policy's description of itself.
pub fn info() -> PolicyInfo {
    PolicyInfo {
        name: "lockwarden-default".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        contract_version: crate::CONTRACT_VERSION.into(),
        description: "Removes a restic lock when its holder is known to be gone (same-host \
            process dead or pid reused, host or pod gone) or when it is older than stale-after \
            (restic's 30-minute rule, by the lock's time or by when the host first saw it). \
            Keeps everything else, including every lock whose holder is unknown and every \
            file it cannot read."
            .into(),
        settings: vec![
            SettingInfo {
                name: STALE_AFTER.into(),
                default_value: "30m".into(),
                help: format!(
                    "a lock older than this is stale, as in restic; {}",
                    duration::ACCEPTED
                ),
            },
            SettingInfo {
                name: MAX_CLOCK_SKEW.into(),
                default_value: "1m".into(),
                help: format!(
                    "a lock dated further in the future than this is reported as written by a \
                     skewed clock (and kept); {}",
                    duration::ACCEPTED
                ),
            },
        ],
    }
}

/// Decides about every lock and unreadable file: one verdict each, in input
/// order (locks first).
pub fn evaluate(
    now: i64,
    facts: &impl Facts,
    settings: &Settings,
    locks: &[Lock],
    unreadable: &[UnreadableLock],
) -> Vec<Verdict> {
    let local = facts.local_hostname();
    let mut verdicts = Vec::with_capacity(locks.len() + unreadable.len());
    for lock in locks {
        let evidence = Evidence::gather(facts, local.as_deref(), lock);
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
        verdicts.push(verdict);
    }
    verdicts.extend(unreadable.iter().map(|file| Verdict {
        id: file.id.clone(),
        action: Action::Keep,
        rule: "unreadable".into(),
        reason: format!(
            "lock file cannot be read ({}); kept for a person to inspect",
            file.problem
        ),
    }));
    verdicts
}

/// What the host said about one lock's holder.
#[derive(Debug, Clone)]
pub struct Evidence {
    /// Process evidence; `None` when the lock is from another host (the host can
    /// only see processes on its own machine).
    pub process: Option<Liveness>,
    /// Host (machine or pod) evidence.
    pub host: Liveness,
}

impl Evidence {
    /// Asks the host about `lock`'s holder: its process only when the lock was
    /// written on this machine.
    pub fn gather(facts: &impl Facts, local_hostname: Option<&str>, lock: &Lock) -> Evidence {
        let same_host = local_hostname == Some(lock.hostname.as_str());
        Evidence {
            process: same_host.then(|| facts.process(&lock.hostname, lock.pid, lock.time)),
            host: facts.host(&lock.hostname, lock.time),
        }
    }

    fn details(&self) -> String {
        let mut parts = Vec::with_capacity(2);
        if let Some(process) = &self.process {
            parts.push(format!("process: {}", detail(process)));
        }
        parts.push(format!("host: {}", detail(&self.host)));
        parts.join("; ")
    }
}

fn detail(liveness: &Liveness) -> &str {
    match liveness {
        Liveness::Alive(d) | Liveness::Dead(d) | Liveness::Unknown(d) => d,
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
    evidence: &'a Evidence,
}

/// The rules in order; the first that applies decides.
const RULES: [(&str, Rule); 7] = [
    (HOLDER_ALIVE, holder_alive),
    ("process-dead", process_dead),
    ("host-gone", host_gone),
    ("expired", expired),
    ("unrefreshed", unrefreshed),
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
                id: lock.id.clone(),
                action,
                rule: rule.into(),
                reason,
            };
        }
    }
    unreachable!("the last rule, fresh, always applies")
}

fn holder_alive(c: &Context) -> Option<(Action, String)> {
    let alive = [c.evidence.process.as_ref(), Some(&c.evidence.host)]
        .into_iter()
        .flatten()
        .find_map(|l| match l {
            Liveness::Alive(d) => Some(d),
            _ => None,
        })?;
    Some((Action::Keep, format!("holder is alive: {alive}")))
}

fn process_dead(c: &Context) -> Option<(Action, String)> {
    match &c.evidence.process {
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
    match &c.evidence.host {
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

fn future_time(c: &Context) -> Option<(Action, String)> {
    let ahead = c.lock.time.saturating_sub(c.now);
    (ahead > c.settings.max_clock_skew).then(|| {
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

fn fresh(c: &Context) -> Option<(Action, String)> {
    Some((
        Action::Keep,
        format!(
            "lock is {} old, within stale-after {} ({})",
            duration::format(age(c.now, c.lock.time)),
            duration::format(c.settings.stale_after),
            c.evidence.details()
        ),
    ))
}

fn age(now: i64, time: i64) -> i64 {
    now.saturating_sub(time)
}

fn short(id: &str) -> &str {
    id.get(..8).unwrap_or(id)
}

#[cfg(test)]
mod tests;
