//! Table tests in the shape of restic's own stale-lock test: one row per case,
//! with the clock injected.

use super::*;
use crate::duration::{HOUR, SECOND};
use std::cell::RefCell;

const NOW: i64 = 1_796_040_000 * SECOND; // 2026-11-30T12:00:00Z
const LOCAL: &str = "vm";

/// Evidence served from a table, with every batch of questions recorded.
#[derive(Default)]
struct TableFacts {
    local: Option<&'static str>,
    /// The answer to every process question, unless its pid is in `dead_pids`.
    process: Option<Liveness>,
    /// Pids whose process questions are answered `dead`.
    dead_pids: Vec<i64>,
    /// The answer to every host question.
    host: Option<Liveness>,
    /// Answer only this many questions of a batch (a host breaking the
    /// contract).
    answer_at_most: Option<usize>,
    warnings: RefCell<Vec<String>>,
    batches: RefCell<Vec<Vec<Question>>>,
}

impl TableFacts {
    fn local() -> TableFacts {
        TableFacts {
            local: Some(LOCAL),
            ..TableFacts::default()
        }
    }

    /// Every question asked, over all batches.
    fn questions(&self) -> Vec<Question> {
        self.batches.borrow().concat()
    }

    fn process_questions(&self) -> usize {
        self.questions()
            .iter()
            .filter(|q| matches!(q, Question::Process { .. }))
            .count()
    }

    fn host_questions(&self) -> usize {
        self.questions()
            .iter()
            .filter(|q| matches!(q, Question::Host { .. }))
            .count()
    }
}

impl Facts for TableFacts {
    fn local_hostname(&self) -> Option<String> {
        self.local.map(str::to_owned)
    }
    fn ask(&self, questions: Vec<Question>) -> Vec<Liveness> {
        let answers = questions
            .iter()
            .map(|question| match question {
                Question::Process { pid, .. } if self.dead_pids.contains(pid) => {
                    Liveness::Dead(format!("no process {pid}"))
                }
                Question::Process { .. } => self
                    .process
                    .clone()
                    .unwrap_or(Liveness::Unknown("no answer".into())),
                Question::Host { .. } => self
                    .host
                    .clone()
                    .unwrap_or(Liveness::Unknown("no inventory".into())),
            })
            .take(self.answer_at_most.unwrap_or(usize::MAX))
            .collect();
        self.batches.borrow_mut().push(questions);
        answers
    }
    fn warn(&self, message: &str) {
        self.warnings.borrow_mut().push(message.into());
    }
}

fn lock(age: i64, hostname: &str) -> Lock {
    Lock {
        id: "0123456789abcdef".repeat(4),
        time: NOW - age,
        exclusive: false,
        hostname: hostname.into(),
        username: "root".into(),
        pid: 4242,
        first_seen: None,
        stored_at: None,
    }
}

/// A lock `age` old by its own time, stored `stored_ago` ago.
fn stored_lock(age: i64, hostname: &str, stored_ago: i64) -> Lock {
    Lock {
        stored_at: Some(NOW - stored_ago),
        ..lock(age, hostname)
    }
}

fn unreadable(stored_ago: Option<i64>, first_seen_ago: Option<i64>) -> Unreadable {
    Unreadable {
        id: "ab".repeat(32),
        size: 0,
        problem: "empty file".into(),
        stored_at: stored_ago.map(|ago| NOW - ago),
        first_seen: first_seen_ago.map(|ago| NOW - ago),
    }
}

fn alive() -> Option<Liveness> {
    Some(Liveness::Alive("signal 0 reached it".into()))
}
fn dead() -> Option<Liveness> {
    Some(Liveness::Dead("no such process".into()))
}
fn unknown() -> Option<Liveness> {
    Some(Liveness::Unknown("cannot tell".into()))
}

fn run_with(facts: &TableFacts, settings: &Settings, lock: Lock) -> Verdict {
    let mut verdicts = evaluate(NOW, facts, settings, &[lock], &[]);
    assert_eq!(verdicts.locks.len(), 1);
    assert!(verdicts.unreadable.is_empty());
    verdicts.locks.remove(0)
}

fn run(facts: &TableFacts, lock: Lock) -> Verdict {
    run_with(facts, &Settings::default(), lock)
}

fn judge(settings: &Settings, file: Unreadable) -> Verdict {
    let facts = TableFacts::local();
    let mut verdicts = evaluate(NOW, &facts, settings, &[], &[file]);
    assert!(verdicts.locks.is_empty());
    assert_eq!(verdicts.unreadable.len(), 1);
    verdicts.unreadable.remove(0)
}

#[test]
fn rule_table() {
    struct Row {
        age: i64,
        hostname: &'static str,
        first_seen_ago: Option<i64>,
        stored_ago: Option<i64>,
        process: Option<Liveness>,
        host: Option<Liveness>,
        rule: &'static str,
        action: Action,
    }
    let m = MINUTE;
    #[rustfmt::skip]
    let rows = [
        // age          host     first-seen  stored  process    host       rule            action
        Row { age: 0,          hostname: "other", first_seen_ago: None,         stored_ago: None,         process: None,    host: None,    rule: "fresh",        action: Action::Keep },
        Row { age: 29 * m,     hostname: "other", first_seen_ago: None,         stored_ago: None,         process: None,    host: None,    rule: "fresh",        action: Action::Keep },
        Row { age: 30 * m,     hostname: "other", first_seen_ago: None,         stored_ago: None,         process: None,    host: None,    rule: "fresh",        action: Action::Keep },
        Row { age: 30 * m + 1, hostname: "other", first_seen_ago: None,         stored_ago: None,         process: None,    host: None,    rule: "expired",      action: Action::Remove },
        Row { age: 31 * m,     hostname: "other", first_seen_ago: None,         stored_ago: None,         process: None,    host: None,    rule: "expired",      action: Action::Remove },
        Row { age: -30 * SECOND, hostname: "other", first_seen_ago: None,       stored_ago: None,         process: None,    host: None,    rule: "fresh",        action: Action::Keep },
        Row { age: -2 * HOUR,  hostname: "other", first_seen_ago: None,         stored_ago: None,         process: None,    host: None,    rule: "future-time",  action: Action::Keep },
        Row { age: -2 * HOUR,  hostname: "other", first_seen_ago: Some(31 * m), stored_ago: None,         process: None,    host: None,    rule: "unrefreshed",  action: Action::Remove },
        Row { age: 5 * m,      hostname: "other", first_seen_ago: Some(31 * m), stored_ago: None,         process: None,    host: None,    rule: "unrefreshed",  action: Action::Remove },
        Row { age: 5 * m,      hostname: "other", first_seen_ago: Some(30 * m), stored_ago: None,         process: None,    host: None,    rule: "fresh",        action: Action::Keep },
        Row { age: m,          hostname: LOCAL,   first_seen_ago: None,         stored_ago: None,         process: dead(),  host: None,    rule: "process-dead", action: Action::Remove },
        Row { age: m,          hostname: LOCAL,   first_seen_ago: None,         stored_ago: None,         process: alive(), host: None,    rule: "holder-alive", action: Action::Keep },
        Row { age: 3 * HOUR,   hostname: LOCAL,   first_seen_ago: None,         stored_ago: None,         process: alive(), host: None,    rule: "holder-alive", action: Action::Keep },
        Row { age: 3 * HOUR,   hostname: LOCAL,   first_seen_ago: None,         stored_ago: None,         process: unknown(), host: None,  rule: "expired",      action: Action::Remove },
        Row { age: m,          hostname: LOCAL,   first_seen_ago: None,         stored_ago: None,         process: unknown(), host: None,  rule: "fresh",        action: Action::Keep },
        // Process evidence counts only for locks written on this machine.
        Row { age: m,          hostname: "other", first_seen_ago: None,         stored_ago: None,         process: dead(),  host: None,    rule: "fresh",        action: Action::Keep },
        Row { age: m,          hostname: "pod-1", first_seen_ago: None,         stored_ago: None,         process: None,    host: dead(),  rule: "host-gone",    action: Action::Remove },
        Row { age: m,          hostname: "pod-1", first_seen_ago: None,         stored_ago: None,         process: None,    host: alive(), rule: "holder-alive", action: Action::Keep },
        Row { age: m,          hostname: "pod-1", first_seen_ago: None,         stored_ago: None,         process: None,    host: unknown(), rule: "fresh",      action: Action::Keep },
        // Alive beats dead: never remove a lock something says is held.
        Row { age: m,          hostname: LOCAL,   first_seen_ago: None,         stored_ago: None,         process: alive(), host: dead(),  rule: "holder-alive", action: Action::Keep },
        Row { age: m,          hostname: LOCAL,   first_seen_ago: None,         stored_ago: None,         process: dead(),  host: alive(), rule: "holder-alive", action: Action::Keep },
        // The storage's age decides only a lock dated beyond max-clock-skew in
        // the future: past stale-after plus max-clock-skew, and only then.
        Row { age: -2 * HOUR,  hostname: "other", first_seen_ago: None,         stored_ago: Some(31 * m), process: None,    host: None,    rule: "future-time",  action: Action::Keep },
        Row { age: -2 * HOUR,  hostname: "other", first_seen_ago: None,         stored_ago: Some(31 * m + 1), process: None, host: None,   rule: "stored-long-ago", action: Action::Remove },
        Row { age: -2 * HOUR,  hostname: "other", first_seen_ago: None,         stored_ago: Some(2 * HOUR), process: None,  host: None,    rule: "stored-long-ago", action: Action::Remove },
        Row { age: -2 * HOUR,  hostname: "other", first_seen_ago: None,         stored_ago: Some(-HOUR),  process: None,    host: None,    rule: "future-time",  action: Action::Keep },
        Row { age: -m,         hostname: "other", first_seen_ago: None,         stored_ago: Some(2 * HOUR), process: None,  host: None,    rule: "fresh",        action: Action::Keep },
        Row { age: -m - 1,     hostname: "other", first_seen_ago: None,         stored_ago: Some(2 * HOUR), process: None,  host: None,    rule: "stored-long-ago", action: Action::Remove },
        // Disagreeing clocks keep: a lock whose own time is fresh stays
        // however old the storage's clock says its file is (a storage clock
        // 35 minutes slow, a lock written seconds ago).
        Row { age: 5 * SECOND, hostname: "other", first_seen_ago: None,         stored_ago: Some(35 * m), process: None,    host: None,    rule: "fresh",        action: Action::Keep },
        Row { age: 29 * m,     hostname: "other", first_seen_ago: None,         stored_ago: Some(3 * HOUR), process: None,  host: None,    rule: "fresh",        action: Action::Keep },
        Row { age: m,          hostname: LOCAL,   first_seen_ago: None,         stored_ago: Some(3 * HOUR), process: unknown(), host: unknown(), rule: "fresh", action: Action::Keep },
        Row { age: m,          hostname: "other", first_seen_ago: None,         stored_ago: Some(-HOUR),  process: None,    host: None,    rule: "fresh",        action: Action::Keep },
        // Evidence about the holder, restic's rule and the host's own first
        // sighting all come before the storage's age.
        Row { age: -2 * HOUR,  hostname: LOCAL,   first_seen_ago: None,         stored_ago: Some(2 * HOUR), process: alive(), host: None,  rule: "holder-alive", action: Action::Keep },
        Row { age: -2 * HOUR,  hostname: "pod-1", first_seen_ago: None,         stored_ago: Some(2 * HOUR), process: None,  host: alive(), rule: "holder-alive", action: Action::Keep },
        Row { age: m,          hostname: LOCAL,   first_seen_ago: None,         stored_ago: Some(2 * HOUR), process: dead(), host: None,   rule: "process-dead", action: Action::Remove },
        Row { age: m,          hostname: "pod-1", first_seen_ago: None,         stored_ago: Some(2 * HOUR), process: None,  host: dead(),  rule: "host-gone",    action: Action::Remove },
        Row { age: 31 * m,     hostname: "other", first_seen_ago: None,         stored_ago: Some(2 * HOUR), process: None,  host: None,    rule: "expired",      action: Action::Remove },
        Row { age: m,          hostname: "other", first_seen_ago: Some(31 * m), stored_ago: Some(2 * HOUR), process: None,  host: None,    rule: "unrefreshed",  action: Action::Remove },
        Row { age: -2 * HOUR,  hostname: "other", first_seen_ago: Some(31 * m), stored_ago: Some(2 * HOUR), process: None,  host: None,    rule: "unrefreshed",  action: Action::Remove },
    ];
    for (n, row) in rows.into_iter().enumerate() {
        let facts = TableFacts {
            process: row.process,
            host: row.host,
            ..TableFacts::local()
        };
        let mut lock = lock(row.age, row.hostname);
        lock.first_seen = row.first_seen_ago.map(|ago| NOW - ago);
        lock.stored_at = row.stored_ago.map(|ago| NOW - ago);
        let verdict = run(&facts, lock);
        assert_eq!(
            (verdict.rule, verdict.action),
            (row.rule, row.action),
            "row {n}: reason was {:?}",
            verdict.reason
        );
    }
}

#[test]
fn process_is_asked_only_about_locks_from_this_machine() {
    let facts = TableFacts::local();
    run(&facts, lock(MINUTE, "other"));
    assert_eq!(facts.process_questions(), 0);
    assert_eq!(facts.host_questions(), 1);
    run(&facts, lock(MINUTE, LOCAL));
    assert_eq!(facts.process_questions(), 1);
    assert_eq!(facts.host_questions(), 2);

    let no_hostname = TableFacts::default();
    run(&no_hostname, lock(MINUTE, ""));
    assert_eq!(no_hostname.process_questions(), 0);
    assert_eq!(no_hostname.host_questions(), 1);
}

#[test]
fn locks_from_one_host_at_one_time_raise_one_host_question() {
    let facts = TableFacts::local();
    let mut second = lock(MINUTE, "pod-1");
    second.pid = 7;
    second.id = "fe".repeat(32);
    let verdicts = evaluate(
        NOW,
        &facts,
        &Settings::default(),
        &[lock(MINUTE, "pod-1"), second, lock(2 * MINUTE, "pod-1")],
        &[],
    );
    assert_eq!(verdicts.locks.len(), 3);
    assert_eq!(
        facts.questions(),
        [
            Question::Host {
                hostname: "pod-1".into(),
                since: NOW - MINUTE
            },
            Question::Host {
                hostname: "pod-1".into(),
                since: NOW - 2 * MINUTE
            },
        ]
    );
}

#[test]
fn each_distinct_local_process_is_asked_about_once_and_answers_its_own_locks() {
    let facts = TableFacts {
        dead_pids: vec![1],
        ..TableFacts::local()
    };
    let with = |pid: i64, age: i64| Lock {
        pid,
        ..lock(age, LOCAL)
    };
    let locks = [
        with(1, MINUTE),
        with(2, MINUTE),
        with(1, MINUTE),
        with(1, 2 * MINUTE),
        with(2, MINUTE),
    ];
    let verdicts = evaluate(NOW, &facts, &Settings::default(), &locks, &[]);
    let process = |pid: i64, age: i64| Question::Process {
        hostname: LOCAL.into(),
        pid,
        since: NOW - age,
    };
    let host = |age: i64| Question::Host {
        hostname: LOCAL.into(),
        since: NOW - age,
    };
    assert_eq!(
        facts.questions(),
        [
            process(1, MINUTE),
            host(MINUTE),
            process(2, MINUTE),
            process(1, 2 * MINUTE),
            host(2 * MINUTE),
        ]
    );
    let rules: Vec<&str> = verdicts.locks.iter().map(|v| v.rule).collect();
    assert_eq!(
        rules,
        [
            "process-dead",
            "fresh",
            "process-dead",
            "process-dead",
            "fresh"
        ]
    );
    assert!(
        verdicts.locks[0].reason.contains("no process 1"),
        "{}",
        verdicts.locks[0].reason
    );
}

#[test]
fn ask_is_called_once_per_evaluation_and_never_without_a_question() {
    let facts = TableFacts::local();
    let locks: Vec<Lock> = (0..50)
        .map(|i| Lock {
            pid: i % 7,
            ..lock(i * SECOND, if i % 2 == 0 { LOCAL } else { "other" })
        })
        .collect();
    evaluate(NOW, &facts, &Settings::default(), &locks, &[]);
    assert_eq!(facts.batches.borrow().len(), 1);
    let questions = facts.questions();
    for (i, question) in questions.iter().enumerate() {
        assert!(
            !questions[..i].contains(question),
            "asked twice: {question:?}"
        );
    }

    let nothing = TableFacts::local();
    let verdicts = evaluate(NOW, &nothing, &Settings::default(), &[], &[]);
    assert_eq!(verdicts.locks.len() + verdicts.unreadable.len(), 0);
    let only_unreadable = evaluate(
        NOW,
        &nothing,
        &Settings::default(),
        &[],
        &[unreadable(None, None)],
    );
    assert_eq!(only_unreadable.unreadable.len(), 1);
    assert!(
        nothing.batches.borrow().is_empty(),
        "asked with no question: {:?}",
        nothing.batches.borrow()
    );
    assert!(nothing.warnings.borrow().is_empty());
}

#[test]
fn missing_answers_count_as_unknown_and_are_reported() {
    let facts = TableFacts {
        process: dead(),
        answer_at_most: Some(0),
        ..TableFacts::local()
    };
    let verdict = run(&facts, lock(MINUTE, LOCAL));
    assert_eq!((verdict.rule, verdict.action), ("fresh", Action::Keep));
    assert!(
        verdict.reason.contains("the host gave no answer"),
        "{}",
        verdict.reason
    );
    let warnings = facts.warnings.borrow();
    assert_eq!(warnings.len(), 1);
    assert!(
        warnings[0].contains("0 answers to 2 questions"),
        "{}",
        warnings[0]
    );
}

#[test]
fn reasons_carry_the_evidence_detail() {
    let facts = TableFacts {
        process: Some(Liveness::Dead("pid 4242 was started after the lock".into())),
        ..TableFacts::local()
    };
    let verdict = run(&facts, lock(MINUTE, LOCAL));
    assert!(
        verdict
            .reason
            .contains("pid 4242 was started after the lock"),
        "{}",
        verdict.reason
    );
    let facts = TableFacts::default();
    let verdict = run(&facts, lock(31 * MINUTE, "other"));
    assert!(verdict.reason.contains("31m old"), "{}", verdict.reason);
    assert!(
        verdict.reason.contains("no inventory"),
        "{}",
        verdict.reason
    );
}

#[test]
fn an_old_lock_with_a_live_holder_is_kept_with_a_warning() {
    let facts = TableFacts {
        process: alive(),
        ..TableFacts::local()
    };
    let verdict = run(&facts, lock(2 * HOUR, LOCAL));
    assert_eq!(verdict.action, Action::Keep);
    let warnings = facts.warnings.borrow();
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0].contains("has not refreshed"), "{}", warnings[0]);
}

/// With every answer `unknown` and no first-seen, the policy decides exactly as
/// `restic unlock` does for locks from other hosts: stale when now - time > 30m,
/// whatever stored-at time a lock not dated in the future has.
#[test]
fn with_no_evidence_decisions_equal_restics_age_rule() {
    let restic_is_stale = |time: i64| NOW - time > 30 * MINUTE;
    let facts = TableFacts {
        process: unknown(),
        host: unknown(),
        ..TableFacts::local()
    };
    // Ages from 3 h in the future to 3 h old, in steps that are not round,
    // plus the boundary and its neighbours.
    let mut ages: Vec<i64> = (-3 * 3600..=3 * 3600)
        .step_by(7)
        .map(|s| s * SECOND + 12_345)
        .collect();
    ages.extend([30 * MINUTE - 1, 30 * MINUTE, 30 * MINUTE + 1]);
    let locks: Vec<Lock> = ages
        .iter()
        .enumerate()
        .map(|(i, age)| {
            let mut l = lock(*age, if i % 2 == 0 { LOCAL } else { "other" });
            l.id = format!("{i:064x}");
            // A stored-at time, however old, changes nothing for a lock not
            // dated in the future.
            if *age >= 0 && i % 3 == 0 {
                l.stored_at = Some(NOW - *age - 3 * HOUR);
            }
            l
        })
        .collect();
    let verdicts = evaluate(NOW, &facts, &Settings::default(), &locks, &[]);
    assert_eq!(verdicts.locks.len(), locks.len());
    for (lock, verdict) in locks.iter().zip(&verdicts.locks) {
        assert_eq!(
            verdict.action == Action::Remove,
            restic_is_stale(lock.time),
            "age {}ns: {verdict:?}",
            NOW - lock.time
        );
    }
}

#[test]
fn stored_long_ago_counts_the_skew_once_and_names_the_storage_age() {
    let facts = TableFacts::default();
    let ahead = -2 * HOUR;
    let kept = run(&facts, stored_lock(ahead, "other", 31 * MINUTE));
    assert_eq!((kept.rule, kept.action), ("future-time", Action::Keep));
    let removed = run(&facts, stored_lock(ahead, "other", 2 * HOUR + 5 * SECOND));
    assert_eq!(
        (removed.rule, removed.action),
        ("stored-long-ago", Action::Remove)
    );
    for part in [
        "dated 2h in the future",
        "stored 2h5s ago by the storage's clock",
        "stale-after 30m",
        "max-clock-skew 1m",
        "no inventory",
    ] {
        assert!(removed.reason.contains(part), "{part}: {}", removed.reason);
    }

    // A larger skew moves both boundaries with it: how far in the future a
    // lock must be dated, and how long ago it must have been stored.
    let settings = Settings {
        max_clock_skew: 10 * MINUTE,
        ..Settings::default()
    };
    let at = |age, stored_ago| run_with(&facts, &settings, stored_lock(age, "other", stored_ago));
    assert_eq!(at(ahead, 40 * MINUTE).rule, "future-time");
    assert_eq!(at(ahead, 40 * MINUTE + 1).rule, "stored-long-ago");
    assert_eq!(at(-10 * MINUTE, 3 * HOUR).rule, "fresh");
    assert_eq!(at(-10 * MINUTE - 1, 3 * HOUR).rule, "stored-long-ago");
}

/// A storage whose clock is behind (an NFS or SFTP server 35 minutes slow)
/// stamps a running restic's new lock file 35 minutes old. restic keeps that
/// lock, and so does the policy: the storage's age alone never outweighs a
/// lock's own fresh time. The reason says the clocks disagree.
#[test]
fn a_slow_storage_clock_never_removes_a_fresh_lock() {
    let facts = TableFacts::default();
    for (age, stored_ago) in [
        (5 * SECOND, 35 * MINUTE),
        (0, 31 * MINUTE + 1),
        (30 * MINUTE, 65 * MINUTE),
        (MINUTE, 48 * HOUR),
        (-MINUTE, 48 * HOUR),
    ] {
        let verdict = run(&facts, stored_lock(age, "other", stored_ago));
        assert_eq!(
            (verdict.rule, verdict.action),
            ("fresh", Action::Keep),
            "age {age}, stored {stored_ago} ago: {}",
            verdict.reason
        );
    }
    let verdict = run(&facts, stored_lock(5 * SECOND, "other", 35 * MINUTE));
    for part in [
        "lock is 5s old, within stale-after 30m",
        "the storage's clock says it was stored 35m ago",
        "disagreeing clocks keep",
    ] {
        assert!(verdict.reason.contains(part), "{part}: {}", verdict.reason);
    }
    // A file stored recently says nothing about clocks.
    let verdict = run(&facts, stored_lock(5 * SECOND, "other", 10 * SECOND));
    assert!(!verdict.reason.contains("storage"), "{}", verdict.reason);
}

#[test]
fn an_unreadable_file_without_age_evidence_is_kept_and_reported() {
    for file in [
        unreadable(None, None),
        unreadable(Some(59 * MINUTE), None),
        unreadable(None, Some(59 * MINUTE)),
        unreadable(Some(-3 * HOUR), Some(-3 * HOUR)),
    ] {
        let verdict = judge(&Settings::default(), file.clone());
        assert_eq!(
            (verdict.rule, verdict.action),
            ("unreadable", Action::Keep),
            "{file:?}"
        );
        assert!(verdict.reason.contains("empty file"), "{}", verdict.reason);
        assert!(
            verdict.reason.contains("unreadable-after 1h"),
            "{}",
            verdict.reason
        );
    }
}

#[test]
fn unreadable_old_by_the_storage_honours_the_skew() {
    let settings = Settings::default();
    let kept = judge(&settings, unreadable(Some(HOUR + MINUTE), None));
    assert_eq!((kept.rule, kept.action), ("unreadable", Action::Keep));
    let removed = judge(&settings, unreadable(Some(HOUR + MINUTE + 1), None));
    assert_eq!(
        (removed.rule, removed.action),
        ("unreadable-old", Action::Remove)
    );
    let removed = judge(&settings, unreadable(Some(3 * HOUR), None));
    for part in [
        "empty file",
        "stored 3h ago by the storage's clock",
        "unreadable-after 1h",
    ] {
        assert!(removed.reason.contains(part), "{part}: {}", removed.reason);
    }
}

#[test]
fn unreadable_old_by_first_sight_has_no_skew() {
    let settings = Settings::default();
    let kept = judge(&settings, unreadable(None, Some(HOUR)));
    assert_eq!((kept.rule, kept.action), ("unreadable", Action::Keep));
    let removed = judge(&settings, unreadable(None, Some(HOUR + 1)));
    assert_eq!(
        (removed.rule, removed.action),
        ("unreadable-old", Action::Remove)
    );
    let removed = judge(&settings, unreadable(Some(MINUTE), Some(90 * MINUTE)));
    assert_eq!(removed.rule, "unreadable-old");
    for part in [
        "empty file",
        "first seen 1h30m ago by this host's clock",
        "unreadable-after 1h",
    ] {
        assert!(removed.reason.contains(part), "{part}: {}", removed.reason);
    }
}

#[test]
fn unreadable_after_follows_a_longer_stale_after() {
    let pairs = [("stale-after".to_owned(), "3h".to_owned())];
    let settings = Settings::parse(&pairs).expect("valid settings");
    assert_eq!(
        judge(&settings, unreadable(None, Some(2 * HOUR))).rule,
        "unreadable"
    );
    assert_eq!(
        judge(&settings, unreadable(None, Some(3 * HOUR + 1))).rule,
        "unreadable-old"
    );
}

#[test]
fn unreadable_files_keep_their_order_after_the_locks() {
    let facts = TableFacts::default();
    let files = [
        unreadable(None, None),
        unreadable(None, Some(2 * HOUR)),
        unreadable(Some(MINUTE), None),
    ];
    let verdicts = evaluate(
        NOW,
        &facts,
        &Settings::default(),
        &[lock(31 * MINUTE, "other")],
        &files,
    );
    assert_eq!(verdicts.locks.len(), 1);
    let rules: Vec<&str> = verdicts.unreadable.iter().map(|v| v.rule).collect();
    assert_eq!(rules, ["unreadable", "unreadable-old", "unreadable"]);
}

fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
    p.iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn invalid(p: &[(&str, &str)]) -> String {
    match Settings::parse(&pairs(p)) {
        Err(PolicyError::InvalidSetting(m)) => m,
        other => panic!("expected an invalid-setting error for {p:?}, got {other:?}"),
    }
}

#[test]
fn settings_are_validated() {
    assert_eq!(Settings::parse(&[]).ok(), Some(Settings::default()));
    let custom = Settings::parse(&pairs(&[("stale-after", "2h"), ("max-clock-skew", "90s")]))
        .expect("valid settings");
    assert_eq!(custom.stale_after, 2 * HOUR);
    assert_eq!(custom.max_clock_skew, 90 * SECOND);

    let m = invalid(&[("stale-afer", "30m")]);
    for name in [
        "`stale-afer`",
        "stale-after",
        "max-clock-skew",
        "unreadable-after",
    ] {
        assert!(m.contains(name), "{name}: {m}");
    }
    let m = invalid(&[("stale-after", "soon")]);
    assert!(m.contains("`stale-after`") && m.contains("30m"), "{m}");
    let m = invalid(&[("unreadable-after", "-1h")]);
    assert!(m.contains("`unreadable-after`") && m.contains("30m"), "{m}");
}

/// restic's stale age is the shortest stale-after: a live restic on another
/// host refreshes only every 5 minutes, and may go 22.5 minutes between
/// refreshes. The refusal says how evidence removes a dead holder's lock
/// sooner.
#[test]
fn stale_after_below_restics_stale_age_is_refused() {
    for short in ["0", "0s", "90s", "5m", "22m30s", "29m59.999999999s"] {
        let m = invalid(&[("stale-after", short)]);
        for part in [
            "`stale-after`",
            "at least 30m",
            "22.5 minutes",
            "process-dead",
            "host-gone",
            "--hosts-command",
            "unrefreshed",
            "first-seen",
        ] {
            assert!(m.contains(part), "{short}: {part}: {m}");
        }
    }
    for ok in ["30m", "1800s", "0.5h", "30m0.000000001s", "2h"] {
        let parsed = Settings::parse(&pairs(&[("stale-after", ok)]));
        assert!(parsed.is_ok(), "{ok}: {parsed:?}");
    }
}

#[test]
fn unreadable_after_defaults_to_an_hour_or_a_longer_stale_after() {
    let unreadable_after = |p: &[(&str, &str)]| {
        Settings::parse(&pairs(p))
            .expect("valid settings")
            .unreadable_after
    };
    assert_eq!(Settings::default().unreadable_after, HOUR);
    assert_eq!(unreadable_after(&[]), HOUR);
    assert_eq!(unreadable_after(&[("stale-after", "45m")]), HOUR);
    assert_eq!(unreadable_after(&[("stale-after", "2h")]), 2 * HOUR);
    // An explicit value wins, in either order, down to 30m.
    assert_eq!(
        unreadable_after(&[("unreadable-after", "45m"), ("stale-after", "2h")]),
        45 * MINUTE
    );
    assert_eq!(
        unreadable_after(&[("unreadable-after", "30m")]),
        30 * MINUTE
    );

    let m = invalid(&[("unreadable-after", "29m59s")]);
    assert!(
        m.contains("`unreadable-after`") && m.contains("at least 30m"),
        "{m}"
    );
}

#[test]
fn info_lists_every_setting_parse_accepts() {
    let names: Vec<String> = info().settings.into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["stale-after", "max-clock-skew", "unreadable-after"]);
    for name in &names {
        let given = [(name.clone(), "2h".to_owned())];
        assert!(Settings::parse(&given).is_ok(), "{name}");
    }
}

#[test]
fn a_custom_stale_after_moves_the_boundary() {
    let settings = Settings {
        stale_after: 2 * HOUR,
        ..Settings::default()
    };
    let facts = TableFacts::default();
    let verdicts = evaluate(
        NOW,
        &facts,
        &settings,
        &[lock(2 * HOUR, "a"), lock(2 * HOUR + 1, "a")],
        &[],
    );
    assert_eq!(verdicts.locks[0].rule, "fresh");
    assert_eq!(verdicts.locks[1].rule, "expired");
}

/// docs/policy.md's rules table lists the rules in the order they apply:
/// the lock rules as [`RULES`] has them, then the two for unreadable files
/// (`tests/e2e/docs.rs` checks its names and actions against the built
/// policy).
#[test]
fn the_documented_rules_are_in_the_order_they_apply() {
    let doc = include_str!("../../../docs/policy.md");
    let start = doc
        .find("<!-- rules table")
        .expect("the rules table's marker");
    let end = doc.find("<!-- /rules table -->").expect("the table's end");
    let documented: Vec<&str> = doc[start..end]
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .collect();
    let mut order: Vec<&str> = RULES.iter().map(|(name, _)| *name).collect();
    order.extend(["unreadable-old", "unreadable"]);
    assert_eq!(
        documented.get(..order.len()),
        Some(&order[..]),
        "{documented:?}"
    );
}
