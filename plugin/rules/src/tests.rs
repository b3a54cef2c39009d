//! Table tests in the shape of restic's own stale-lock test: one row per case,
//! with the clock injected.

use super::*;
use crate::duration::{HOUR, SECOND};
use std::cell::RefCell;

const NOW: i64 = 1_796_040_000 * SECOND; // 2026-11-30T12:00:00Z
const LOCAL: &str = "vm";

/// Evidence served from a table, with the calls recorded.
#[derive(Default)]
struct TableFacts {
    local: Option<&'static str>,
    process: Option<Liveness>,
    host: Option<Liveness>,
    warnings: RefCell<Vec<String>>,
    process_calls: RefCell<u32>,
}

impl Facts for TableFacts {
    fn local_hostname(&self) -> Option<String> {
        self.local.map(str::to_owned)
    }
    fn process(&self, _: &str, _: i64, _: i64) -> Liveness {
        *self.process_calls.borrow_mut() += 1;
        self.process
            .clone()
            .unwrap_or(Liveness::Unknown("no answer".into()))
    }
    fn host(&self, _: &str, _: i64) -> Liveness {
        self.host
            .clone()
            .unwrap_or(Liveness::Unknown("no inventory".into()))
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
        uid: 0,
        gid: 0,
        first_seen: None,
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

fn run(facts: &TableFacts, lock: Lock) -> Verdict {
    let mut verdicts = evaluate(NOW, facts, &Settings::default(), &[lock], &[]);
    assert_eq!(verdicts.len(), 1);
    verdicts.remove(0)
}

#[test]
fn rule_table() {
    struct Row {
        age: i64,
        hostname: &'static str,
        first_seen_ago: Option<i64>,
        process: Option<Liveness>,
        host: Option<Liveness>,
        rule: &'static str,
        action: Action,
    }
    let m = MINUTE;
    #[rustfmt::skip]
    let rows = [
        // age          host     first-seen  process    host       rule            action
        Row { age: 0,          hostname: "other", first_seen_ago: None,         process: None,    host: None,    rule: "fresh",        action: Action::Keep },
        Row { age: 29 * m,     hostname: "other", first_seen_ago: None,         process: None,    host: None,    rule: "fresh",        action: Action::Keep },
        Row { age: 30 * m,     hostname: "other", first_seen_ago: None,         process: None,    host: None,    rule: "fresh",        action: Action::Keep },
        Row { age: 30 * m + 1, hostname: "other", first_seen_ago: None,         process: None,    host: None,    rule: "expired",      action: Action::Remove },
        Row { age: 31 * m,     hostname: "other", first_seen_ago: None,         process: None,    host: None,    rule: "expired",      action: Action::Remove },
        Row { age: -30 * SECOND, hostname: "other", first_seen_ago: None,       process: None,    host: None,    rule: "fresh",        action: Action::Keep },
        Row { age: -2 * HOUR,  hostname: "other", first_seen_ago: None,         process: None,    host: None,    rule: "future-time",  action: Action::Keep },
        Row { age: -2 * HOUR,  hostname: "other", first_seen_ago: Some(31 * m), process: None,    host: None,    rule: "unrefreshed",  action: Action::Remove },
        Row { age: 5 * m,      hostname: "other", first_seen_ago: Some(31 * m), process: None,    host: None,    rule: "unrefreshed",  action: Action::Remove },
        Row { age: 5 * m,      hostname: "other", first_seen_ago: Some(30 * m), process: None,    host: None,    rule: "fresh",        action: Action::Keep },
        Row { age: m,          hostname: LOCAL,   first_seen_ago: None,         process: dead(),  host: None,    rule: "process-dead", action: Action::Remove },
        Row { age: m,          hostname: LOCAL,   first_seen_ago: None,         process: alive(), host: None,    rule: "holder-alive", action: Action::Keep },
        Row { age: 3 * HOUR,   hostname: LOCAL,   first_seen_ago: None,         process: alive(), host: None,    rule: "holder-alive", action: Action::Keep },
        Row { age: 3 * HOUR,   hostname: LOCAL,   first_seen_ago: None,         process: unknown(), host: None,  rule: "expired",      action: Action::Remove },
        Row { age: m,          hostname: LOCAL,   first_seen_ago: None,         process: unknown(), host: None,  rule: "fresh",        action: Action::Keep },
        // Process evidence counts only for locks written on this machine.
        Row { age: m,          hostname: "other", first_seen_ago: None,         process: dead(),  host: None,    rule: "fresh",        action: Action::Keep },
        Row { age: m,          hostname: "pod-1", first_seen_ago: None,         process: None,    host: dead(),  rule: "host-gone",    action: Action::Remove },
        Row { age: m,          hostname: "pod-1", first_seen_ago: None,         process: None,    host: alive(), rule: "holder-alive", action: Action::Keep },
        Row { age: m,          hostname: "pod-1", first_seen_ago: None,         process: None,    host: unknown(), rule: "fresh",      action: Action::Keep },
        // Alive beats dead: never remove a lock something says is held.
        Row { age: m,          hostname: LOCAL,   first_seen_ago: None,         process: alive(), host: dead(),  rule: "holder-alive", action: Action::Keep },
        Row { age: m,          hostname: LOCAL,   first_seen_ago: None,         process: dead(),  host: alive(), rule: "holder-alive", action: Action::Keep },
    ];
    for (n, row) in rows.into_iter().enumerate() {
        let facts = TableFacts {
            local: Some(LOCAL),
            process: row.process,
            host: row.host,
            ..TableFacts::default()
        };
        let mut lock = lock(row.age, row.hostname);
        lock.first_seen = row.first_seen_ago.map(|ago| NOW - ago);
        let verdict = run(&facts, lock);
        assert_eq!(
            (verdict.rule.as_str(), verdict.action),
            (row.rule, row.action),
            "row {n}: reason was {:?}",
            verdict.reason
        );
    }
}

#[test]
fn process_is_asked_only_about_locks_from_this_machine() {
    let facts = TableFacts {
        local: Some(LOCAL),
        ..TableFacts::default()
    };
    run(&facts, lock(MINUTE, "other"));
    assert_eq!(*facts.process_calls.borrow(), 0);
    run(&facts, lock(MINUTE, LOCAL));
    assert_eq!(*facts.process_calls.borrow(), 1);

    let no_hostname = TableFacts::default();
    run(&no_hostname, lock(MINUTE, ""));
    assert_eq!(*no_hostname.process_calls.borrow(), 0);
}

#[test]
fn reasons_carry_the_evidence_detail() {
    let facts = TableFacts {
        local: Some(LOCAL),
        process: Some(Liveness::Dead("pid 4242 was started after the lock".into())),
        ..TableFacts::default()
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
        local: Some(LOCAL),
        process: alive(),
        ..TableFacts::default()
    };
    let verdict = run(&facts, lock(2 * HOUR, LOCAL));
    assert_eq!(verdict.action, Action::Keep);
    let warnings = facts.warnings.borrow();
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0].contains("has not refreshed"), "{}", warnings[0]);
}

/// With every answer `unknown` and no first-seen, the policy decides exactly as
/// `restic unlock` does for locks from other hosts: stale when now - time > 30m.
#[test]
fn with_no_evidence_decisions_equal_restics_age_rule() {
    let restic_is_stale = |time: i64| NOW - time > 30 * MINUTE;
    let facts = TableFacts {
        local: Some(LOCAL),
        process: unknown(),
        host: unknown(),
        ..TableFacts::default()
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
            l
        })
        .collect();
    let verdicts = evaluate(NOW, &facts, &Settings::default(), &locks, &[]);
    assert_eq!(verdicts.len(), locks.len());
    for (lock, verdict) in locks.iter().zip(&verdicts) {
        assert_eq!(verdict.id, lock.id);
        assert_eq!(
            verdict.action == Action::Remove,
            restic_is_stale(lock.time),
            "age {}ns: {verdict:?}",
            NOW - lock.time
        );
    }
}

#[test]
fn unreadable_files_are_kept_and_reported() {
    let facts = TableFacts::default();
    let file = UnreadableLock {
        id: "ab".repeat(32),
        size: 0,
        problem: "empty file".into(),
    };
    let verdicts = evaluate(NOW, &facts, &Settings::default(), &[], &[file]);
    assert_eq!(verdicts.len(), 1);
    assert_eq!(verdicts[0].action, Action::Keep);
    assert_eq!(verdicts[0].rule, "unreadable");
    assert!(verdicts[0].reason.contains("empty file"));
}

#[test]
fn settings_are_validated() {
    let pairs = |p: &[(&str, &str)]| -> Vec<(String, String)> {
        p.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    assert_eq!(Settings::parse(&[]).ok(), Some(Settings::default()));
    let custom = Settings::parse(&pairs(&[("stale-after", "2h"), ("max-clock-skew", "90s")]))
        .expect("valid settings");
    assert_eq!(custom.stale_after, 2 * HOUR);
    assert_eq!(custom.max_clock_skew, 90 * SECOND);

    let message = |p: &[(&str, &str)]| match Settings::parse(&pairs(p)) {
        Err(PolicyError::InvalidSetting(m)) => m,
        other => panic!("expected an invalid-setting error, got {other:?}"),
    };
    let m = message(&[("stale-afer", "30m")]);
    assert!(
        m.contains("`stale-afer`") && m.contains("stale-after"),
        "{m}"
    );
    let m = message(&[("stale-after", "soon")]);
    assert!(m.contains("`stale-after`") && m.contains("30m"), "{m}");
    let m = message(&[("stale-after", "0s")]);
    assert!(m.contains("longer than 0"), "{m}");
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
    assert_eq!(verdicts[0].rule, "fresh");
    assert_eq!(verdicts[1].rule, "expired");
}
