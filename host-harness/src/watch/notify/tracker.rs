//! Which events a check gives rise to, and which were already sent: one
//! [`Tracker`] per repository, so a receiver hears of each stuck lock once,
//! not at every check.
//!
//! - `lock_removed`: each removal (a lock file is removed once).
//! - `stale_lock_kept`, `unreadable_file`: once per file id while it stays;
//!   the ids remembered are pruned at every check to those still listed.
//! - `lock_held_long`: once per holder (hostname, username, pid), since a
//!   live restic replaces its lock file (a new id) every few minutes.
//! - `checks_failing`: once when the failures in a row reach the threshold;
//!   `recovered` at the first success after it.
//!
//! What was sent is kept in memory: a restarted `watch` tells again, once.

use std::collections::{BTreeMap, BTreeSet};

use super::event::{Event, EventKind, KeptBecause, RepositoryRef};
use super::settings::NotifySettings;
use crate::contract::{Action, Lock};
use crate::limits;
use crate::runtime::Subject;
use crate::time::format_rfc3339;
use crate::warden::{Act, Report};

/// A lock holder, as the lock records it.
type Holder = (String, String, i64);

/// The notification state of one repository.
#[derive(Debug, Default)]
pub struct Tracker {
    repository: RepositoryRef,
    kept: BTreeSet<String>,
    unreadable: BTreeSet<String>,
    holders: BTreeMap<Holder, Held>,
    failures: u32,
    failing_sent: bool,
}

/// One holder of kept locks.
#[derive(Debug, Clone, Copy)]
struct Held {
    /// The earliest moment it is known to have held a lock (ns).
    since: i64,
    /// True once `lock_held_long` was sent for it.
    sent: bool,
}

impl Tracker {
    /// The state of the repository named `name`.
    pub fn new(name: &str) -> Tracker {
        Tracker {
            repository: RepositoryRef {
                name: name.to_owned(),
                ..RepositoryRef::default()
            },
            ..Tracker::default()
        }
    }

    /// The events of one successful check, whose report is `report`;
    /// `report_mode` when the repository is watched in report mode.
    pub fn after_check(
        &mut self,
        report: &Report,
        report_mode: bool,
        settings: &NotifySettings,
    ) -> Vec<Event> {
        self.repository.id = Some(report.repository.id.clone());
        self.repository.backend = Some(report.repository.backend.clone());
        let now = report.assessment.now;
        let mut events = Vec::new();
        if self.failing_sent {
            let mut event = Event::new(EventKind::Recovered, now, &self.repository);
            event.consecutive_failures = Some(self.failures);
            event.message = format!(
                "repository {} checked successfully after {} failed checks",
                self.repository.name, self.failures
            );
            events.push(event);
        }
        self.failures = 0;
        self.failing_sent = false;
        events.extend(self.stale_events(report, report_mode));
        events.extend(self.unreadable_events(report));
        events.extend(self.held_events(report, settings.held_longer_than));
        events
    }

    /// The events of one failed check, which failed with `error` at `now`.
    pub fn after_failure(
        &mut self,
        error: &str,
        now: i64,
        settings: &NotifySettings,
    ) -> Vec<Event> {
        self.failures = self.failures.saturating_add(1);
        if self.failing_sent || self.failures < settings.failing_after {
            return Vec::new();
        }
        self.failing_sent = true;
        let mut event = Event::new(EventKind::ChecksFailing, now, &self.repository);
        event.consecutive_failures = Some(self.failures);
        event.error = Some(error.to_owned());
        event.message = format!(
            "{} checks of repository {} failed in a row: {error}",
            self.failures, self.repository.name
        );
        vec![event]
    }

    /// `lock_removed` for each removal, `stale_lock_kept` once for each
    /// stale file still there.
    fn stale_events(&mut self, report: &Report, report_mode: bool) -> Vec<Event> {
        let now = report.assessment.now;
        let mut events = Vec::new();
        let mut present = BTreeSet::new();
        let removals = report.removals_by_id();
        for (subject, verdict) in report.assessment.verdicts.stale() {
            let event = Event::new(EventKind::LockRemoved, now, &self.repository)
                .about(subject, verdict, now);
            let (mut event, error) = match removals.get(subject.id()).map(|r| &r.result) {
                Some(Ok(removal)) => {
                    let mut event = event;
                    event.already_gone =
                        Some(*removal == crate::repo::backend::Removal::AlreadyGone);
                    event.message = format!(
                        "{} removed ({}): {}",
                        event.subject(),
                        verdict.rule,
                        verdict.reason
                    );
                    events.push(event);
                    continue;
                }
                Some(Err(e)) => (event, Some(e.to_string())),
                None => (event, None),
            };
            present.insert(subject.id().to_owned());
            if self.kept.contains(subject.id()) || !self.room(self.kept.len()) {
                continue;
            }
            self.kept.insert(subject.id().to_owned());
            event.event = EventKind::StaleLockKept;
            let why = match (&error, report.act, report_mode) {
                (Some(_), _, _) => KeptBecause::RemovalFailed,
                (None, Act::Judge, true) => KeptBecause::ReportMode,
                (None, _, _) => KeptBecause::CannotRemove,
            };
            event.kept_because = Some(why);
            event.message = format!(
                "{} is stale ({}) but kept ({}): {}",
                event.subject(),
                verdict.rule,
                match why {
                    KeptBecause::ReportMode => "report mode",
                    KeptBecause::CannotRemove => "the backend cannot remove locks",
                    KeptBecause::RemovalFailed => "its removal failed",
                },
                verdict.reason
            );
            event.error = error;
            events.push(event);
        }
        self.kept.retain(|id| present.contains(id));
        events
    }

    /// `unreadable_file` once for each unreadable file judged to keep.
    fn unreadable_events(&mut self, report: &Report) -> Vec<Event> {
        let now = report.assessment.now;
        let mut events = Vec::new();
        let mut present = BTreeSet::new();
        for (file, verdict) in &report.assessment.verdicts.unreadable {
            if verdict.action != Action::Keep {
                continue;
            }
            present.insert(file.id.clone());
            if self.unreadable.contains(&file.id) || !self.room(self.unreadable.len()) {
                continue;
            }
            self.unreadable.insert(file.id.clone());
            let mut event = Event::new(EventKind::UnreadableFile, now, &self.repository).about(
                Subject::Unreadable(file),
                verdict,
                now,
            );
            event.message = format!(
                "{} ({} bytes) cannot be read: {}; kept ({})",
                event.subject(),
                file.size,
                file.problem,
                verdict.rule
            );
            events.push(event);
        }
        self.unreadable.retain(|id| present.contains(id));
        events
    }

    /// `lock_held_long` once for each holder of a kept lock that has held
    /// locks for longer than `threshold`. A holder's time runs from the
    /// earliest of its locks' times (when not in the future), their first
    /// sightings, and this tracker's first sighting of the holder: a live
    /// restic replaces its lock every few minutes, and each new lock is
    /// young.
    fn held_events(&mut self, report: &Report, threshold: std::time::Duration) -> Vec<Event> {
        let now = report.assessment.now;
        let threshold = i64::try_from(threshold.as_nanos()).unwrap_or(i64::MAX);
        let mut events = Vec::new();
        let mut present: BTreeMap<Holder, (Held, &Lock, &crate::contract::Verdict)> =
            BTreeMap::new();
        for (lock, verdict) in &report.assessment.verdicts.locks {
            if verdict.action != Action::Keep {
                continue;
            }
            let key = (lock.hostname.clone(), lock.username.clone(), lock.pid);
            let known = self.holders.get(&key).copied();
            let since = [
                Some(now),
                Some(lock.time).filter(|t| *t <= now),
                lock.first_seen,
                known.map(|h| h.since),
            ]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(now);
            let held = Held {
                since,
                sent: known.is_some_and(|h| h.sent),
            };
            let entry = present.entry(key).or_insert((held, lock, verdict));
            if since < entry.0.since {
                *entry = (held, lock, verdict);
            }
        }
        let mut holders = BTreeMap::new();
        for (key, (mut held, lock, verdict)) in present {
            let long = now.saturating_sub(held.since) > threshold;
            if long && !held.sent {
                held.sent = true;
                let mut event = Event::new(EventKind::LockHeldLong, now, &self.repository).about(
                    Subject::Lock(lock),
                    verdict,
                    now,
                );
                let seconds = now.saturating_sub(held.since) / 1_000_000_000;
                event.held_since = Some(format_rfc3339(held.since));
                event.held_seconds = Some(seconds);
                event.message = format!(
                    "{} has been held for {seconds}s and is kept ({}): {}",
                    event.subject(),
                    verdict.rule,
                    verdict.reason
                );
                events.push(event);
            }
            if holders.len() < limits::NOTIFIED_IDS {
                holders.insert(key, held);
            }
        }
        self.holders = holders;
        events
    }

    /// True while a set of `len` remembered ids may grow.
    fn room(&self, len: usize) -> bool {
        len < limits::NOTIFIED_IDS
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::{Repository, UnreadableLock, Verdict, test_lock};
    use crate::repo::RepoError;
    use crate::repo::backend::Removal;
    use crate::runtime::Verdicts;
    use crate::warden::{Assessment, RemovalResult};

    const HOUR: i64 = 3_600_000_000_000;
    const NOW: i64 = 1_796_040_000_000_000_000;

    fn verdict(action: Action, rule: &str) -> Verdict {
        Verdict {
            action,
            rule: rule.into(),
            reason: format!("because {rule}"),
        }
    }

    fn lock(id: &str, host: &str, pid: i64, age: i64) -> Lock {
        Lock {
            hostname: host.into(),
            pid,
            time: NOW - age,
            ..test_lock(id)
        }
    }

    fn report(
        now: i64,
        act: Act,
        locks: Vec<(Lock, Verdict)>,
        unreadable: Vec<(UnreadableLock, Verdict)>,
        removals: Vec<RemovalResult>,
    ) -> Report {
        Report {
            repository: Repository {
                id: "c0ffee".into(),
                location: "rest:http://user:SECRET@h/".into(),
                backend: "rest".into(),
                version: 2,
            },
            act,
            assessment: Assessment {
                now,
                verdicts: Verdicts { locks, unreadable },
                logs: Vec::new(),
                shadow: None,
            },
            removals,
        }
    }

    fn kinds(events: &[Event]) -> Vec<EventKind> {
        events.iter().map(|e| e.event).collect()
    }

    #[test]
    fn stale_and_unreadable_files_are_told_once_while_they_stay() {
        let settings = NotifySettings::default();
        let mut tracker = Tracker::new("demo");
        let stale = (
            lock("a1", "gone", 9, 2 * HOUR),
            verdict(Action::Remove, "expired"),
        );
        let file = (
            UnreadableLock {
                id: "b2".into(),
                size: 0,
                problem: "empty file".into(),
                stored_at: None,
                first_seen: None,
            },
            verdict(Action::Keep, "unreadable"),
        );
        let check = |tracker: &mut Tracker, with: bool| {
            let locks = if with { vec![stale.clone()] } else { vec![] };
            tracker.after_check(
                &report(NOW, Act::Judge, locks, vec![file.clone()], vec![]),
                true,
                &settings,
            )
        };
        let first = check(&mut tracker, true);
        assert_eq!(
            kinds(&first),
            [EventKind::StaleLockKept, EventKind::UnreadableFile]
        );
        assert_eq!(first[0].kept_because, Some(KeptBecause::ReportMode));
        assert_eq!(first[0].repository.id.as_deref(), Some("c0ffee"));
        assert!(check(&mut tracker, true).is_empty(), "told once");
        assert!(check(&mut tracker, false).is_empty());
        // Gone, then back: a new episode, told again.
        assert_eq!(
            kinds(&check(&mut tracker, true)),
            [EventKind::StaleLockKept]
        );
        let json = String::from_utf8(first[0].to_json()).expect("utf-8");
        assert!(!json.contains("SECRET"), "{json}");
    }

    #[test]
    fn removals_and_failed_removals() {
        let settings = NotifySettings::default();
        let mut tracker = Tracker::new("demo");
        let gone = lock("a1", "gone", 9, 2 * HOUR);
        let stuck = lock("a2", "gone", 10, 2 * HOUR);
        let removals = vec![
            RemovalResult {
                id: "a1".into(),
                verdict: verdict(Action::Remove, "expired"),
                result: Ok(Removal::Removed),
            },
            RemovalResult {
                id: "a2".into(),
                verdict: verdict(Action::Remove, "expired"),
                result: Err(RepoError::Other {
                    location: "/r".into(),
                    cause: "read-only".into(),
                }),
            },
        ];
        let events = tracker.after_check(
            &report(
                NOW,
                Act::Remove,
                vec![
                    (gone, verdict(Action::Remove, "expired")),
                    (stuck, verdict(Action::Remove, "expired")),
                ],
                vec![],
                removals,
            ),
            false,
            &settings,
        );
        assert_eq!(
            kinds(&events),
            [EventKind::LockRemoved, EventKind::StaleLockKept]
        );
        assert_eq!(events[0].already_gone, Some(false));
        assert_eq!(events[1].kept_because, Some(KeptBecause::RemovalFailed));
        assert!(
            events[1]
                .error
                .as_deref()
                .is_some_and(|e| e.contains("read-only"))
        );
    }

    #[test]
    fn a_holder_is_held_long_across_refreshed_locks_and_told_once() {
        let settings = NotifySettings {
            held_longer_than: std::time::Duration::from_secs(3600),
            ..NotifySettings::default()
        };
        let alive = verdict(Action::Keep, "holder-alive");
        let mut tracker = Tracker::new("demo");
        // A live holder refreshes: a new lock id, a young time, each check.
        let mut told = Vec::new();
        for step in 0..8 {
            let now = NOW + step * HOUR / 4;
            let mut l = lock(&format!("id{step}"), "vm", 42, 0);
            l.time = now - HOUR / 12;
            l.first_seen = Some(now);
            let events = tracker.after_check(
                &report(now, Act::Remove, vec![(l, alive.clone())], vec![], vec![]),
                false,
                &settings,
            );
            told.extend(events.into_iter().map(|e| (step, e)));
        }
        assert_eq!(told.len(), 1, "{told:?}");
        let (step, event) = &told[0];
        assert_eq!(*step, 4, "first past an hour: 4 * 15 min + 5 min");
        assert_eq!(event.event, EventKind::LockHeldLong);
        assert_eq!(event.held_seconds, Some(65 * 60));
        assert_eq!(
            event.verdict.as_ref().map(|v| v.rule.as_str()),
            Some("holder-alive")
        );
        // A lock already old when first seen is told at once; a future-dated
        // one is not; a removed one never.
        let mut tracker = Tracker::new("demo");
        let events = tracker.after_check(
            &report(
                NOW,
                Act::Remove,
                vec![
                    (lock("old", "vm", 1, 2 * HOUR), alive.clone()),
                    (
                        lock("future", "vm", 2, -2 * HOUR),
                        verdict(Action::Keep, "future-time"),
                    ),
                ],
                vec![],
                vec![],
            ),
            false,
            &settings,
        );
        assert_eq!(kinds(&events), [EventKind::LockHeldLong]);
        assert_eq!(events[0].lock.as_ref().map(|l| l.id.as_str()), Some("old"));
    }

    #[test]
    fn failing_is_told_at_the_threshold_and_recovery_once() {
        let settings = NotifySettings {
            failing_after: 2,
            ..NotifySettings::default()
        };
        let mut tracker = Tracker::new("demo");
        let ok = |t: &mut Tracker| {
            kinds(&t.after_check(
                &report(NOW, Act::Remove, vec![], vec![], vec![]),
                false,
                &settings,
            ))
        };
        assert!(
            tracker
                .after_failure("wrong password", NOW, &settings)
                .is_empty()
        );
        assert!(ok(&mut tracker).is_empty(), "one failure is no episode");
        assert!(
            tracker
                .after_failure("wrong password", NOW, &settings)
                .is_empty()
        );
        let failing = tracker.after_failure("wrong password", NOW, &settings);
        assert_eq!(kinds(&failing), [EventKind::ChecksFailing]);
        assert_eq!(failing[0].consecutive_failures, Some(2));
        assert_eq!(failing[0].error.as_deref(), Some("wrong password"));
        assert!(tracker.after_failure("again", NOW, &settings).is_empty());
        assert_eq!(ok(&mut tracker), [EventKind::Recovered]);
        assert!(ok(&mut tracker).is_empty());
    }
}
