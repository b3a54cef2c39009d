//! The plugin runtime with the real default policy and with guests that
//! misbehave on purpose.

use std::sync::Arc;
use std::time::{Duration, Instant};

use lockwarden::contract::{Action, EvaluateRequest, Lock, Repository, UnreadableLock};
use lockwarden::evidence::Recorded;
use lockwarden::runtime::{ArtifactCache, Limits, PluginError, Policy, Runtime, Verdicts};
use lockwarden_tests::{Guest, guests};

const MINUTE: i64 = 60_000_000_000;
const NOW: i64 = 1_796_040_000_000_000_000; // 2026-11-30T12:00:00Z

fn runtime() -> Runtime {
    Runtime::new(Limits::default(), None).expect("engine starts")
}

fn lock(n: u8, age: i64) -> Lock {
    Lock {
        id: format!("{n:02x}").repeat(32),
        time: NOW - age,
        exclusive: false,
        hostname: "other-host".into(),
        username: "root".into(),
        pid: 100 + i64::from(n),
        uid: 0,
        gid: 0,
        first_seen: None,
        stored_at: None,
    }
}

/// `locks` and one empty lock file, stored `unreadable_age` ago.
fn request_with(locks: Vec<Lock>, unreadable_age: Option<i64>) -> EvaluateRequest {
    EvaluateRequest {
        repository: Repository {
            id: "5e1f".into(),
            location: "/srv/restic".into(),
            backend: "local".into(),
            version: 2,
        },
        locks,
        unreadable: vec![UnreadableLock {
            id: "ee".repeat(32),
            size: 0,
            problem: "empty file".into(),
            stored_at: unreadable_age.map(|age| NOW - age),
            first_seen: None,
        }],
        settings: vec![],
    }
}

fn request(locks: Vec<Lock>) -> EvaluateRequest {
    request_with(locks, None)
}

/// Each input's id with the action and rule of its verdict.
fn judge(
    rt: &Runtime,
    policy: &Policy,
    req: EvaluateRequest,
) -> Result<Vec<(String, Action, String)>, PluginError> {
    let outcome = rt.evaluate(
        policy,
        NOW,
        Arc::new(Recorded::new(Some("vm".into()))),
        &req,
    )?;
    Ok(Verdicts::pair(req, outcome.verdicts)
        .all()
        .map(|(s, v)| (s.id().to_owned(), v.action, v.rule.clone()))
        .collect())
}

fn evaluate(rt: &Runtime, policy: &Policy) -> Result<Vec<(String, Action, String)>, PluginError> {
    judge(
        rt,
        policy,
        request(vec![lock(1, 31 * MINUTE), lock(2, 29 * MINUTE)]),
    )
}

fn load_guest(rt: &Runtime, behaviour: Guest) -> Result<Policy, PluginError> {
    let path = behaviour.path();
    let bytes = std::fs::read(path).expect("read guest");
    rt.load(&path.display().to_string(), &bytes)
}

#[test]
fn default_policy_judges_by_age_when_nothing_else_is_known() {
    let rt = runtime();
    let policy = rt.load_default().expect("default policy loads");
    assert_eq!(policy.info().name, "lockwarden-default");
    assert_eq!(policy.info().contract_version, "0.2.0");
    assert_eq!(policy.contract(), "0.2.0");
    let verdicts = evaluate(&rt, &policy).expect("evaluates");
    let summary: Vec<_> = verdicts.iter().map(|(_, a, r)| (*a, r.as_str())).collect();
    assert_eq!(
        summary,
        [
            (Action::Remove, "expired"),
            (Action::Keep, "fresh"),
            (Action::Keep, "unreadable")
        ]
    );
}

/// The default policy built against contract 0.1.0 (a test guest, built from
/// the current rules) loads and judges in this host, without the facts 0.1.0
/// does not have: a lock dated in the future and an empty file, both stored
/// two hours ago, are kept (by the lock's own time, and as unreadable), where
/// the 0.2.0 build removes both by their storage age.
#[test]
fn a_contract_0_1_policy_keeps_loading_and_judging() {
    let rt = runtime();
    let old = load_guest(&rt, guests::DEFAULT_0_1).expect("a 0.1.0 policy loads");
    assert_eq!(old.contract(), "0.1.0");
    assert_eq!(old.info().contract_version, "0.1.0");
    assert_eq!(old.info().name, "lockwarden-default");
    let current = rt.load_default().expect("default");
    let stored_long_ago = || {
        let mut future = lock(3, -60 * MINUTE);
        future.stored_at = Some(NOW - 120 * MINUTE);
        request_with(
            vec![lock(1, 31 * MINUTE), lock(2, 29 * MINUTE), future],
            Some(120 * MINUTE),
        )
    };
    let rules = |policy: &Policy| -> Vec<(Action, String)> {
        judge(&rt, policy, stored_long_ago())
            .expect("evaluates")
            .into_iter()
            .map(|(_, action, rule)| (action, rule))
            .collect()
    };
    let owned = |pairs: &[(Action, &str)]| -> Vec<(Action, String)> {
        pairs.iter().map(|(a, r)| (*a, (*r).to_owned())).collect()
    };
    assert_eq!(
        rules(&old),
        owned(&[
            (Action::Remove, "expired"),
            (Action::Keep, "fresh"),
            (Action::Keep, "future-time"),
            (Action::Keep, "unreadable"),
        ])
    );
    assert_eq!(
        rules(&current),
        owned(&[
            (Action::Remove, "expired"),
            (Action::Keep, "fresh"),
            (Action::Remove, "stored-long-ago"),
            (Action::Remove, "unreadable-old"),
        ])
    );
    // The same answers to the same questions, asked one by one (0.1.0) or in
    // one batch (0.2.0), give the same verdicts where both have the facts.
    let plain = || request(vec![lock(1, 31 * MINUTE), lock(2, 29 * MINUTE)]);
    assert_eq!(
        judge(&rt, &old, plain()).expect("0.1.0"),
        judge(&rt, &current, plain()).expect("0.2.0")
    );
}

/// Whatever a policy says, an unreadable file goes only when the host holds
/// 30 minutes of its own age evidence for it; a `remove` for a younger one
/// is an error, under either contract.
#[test]
fn removing_a_young_unreadable_file_is_refused() {
    let rt = runtime();
    let remover = load_guest(&rt, guests::REMOVE_UNREADABLE).expect("guest loads");
    for age in [None, Some(29 * MINUTE)] {
        let error =
            judge(&rt, &remover, request_with(vec![lock(1, MINUTE)], age)).expect_err("refused");
        let message = error.to_string();
        assert!(
            matches!(error, PluginError::BadVerdicts { .. }),
            "{message}"
        );
        assert!(message.contains("at least 30m"), "{message}");
    }
    let old = judge(
        &rt,
        &remover,
        request_with(vec![lock(1, MINUTE)], Some(30 * MINUTE)),
    )
    .expect("30 minutes of storage age is enough");
    assert_eq!(old[1].1, Action::Remove);
}

/// Loads `behaviour`, evaluates, and checks that the failure is the expected
/// one, arrives within 2 s, and leaves the runtime working: the default
/// policy still evaluates, and the guest fails the same way again.
fn assert_evaluation_fails(behaviour: Guest, check: impl Fn(&PluginError) -> bool) -> String {
    let rt = runtime();
    let bad = load_guest(&rt, behaviour).expect("guest loads");
    let good = rt.load_default().expect("default loads");
    for round in 0..2 {
        let started = Instant::now();
        let error = evaluate(&rt, &bad).expect_err("a misbehaving guest must fail");
        let took = started.elapsed();
        assert!(
            check(&error),
            "{behaviour} round {round}: unexpected error: {error}"
        );
        assert!(
            took < Duration::from_secs(2),
            "{behaviour}: the error took {took:?}"
        );
        assert_eq!(evaluate(&rt, &good).expect("default still works").len(), 3);
    }
    evaluate(&rt, &bad).expect_err("fails").to_string()
}

#[test]
fn a_panicking_policy_is_reported_with_its_message() {
    let message = assert_evaluation_fails(guests::PANIC, |e| matches!(e, PluginError::Trap { .. }));
    assert!(message.contains("policy misbehave crashed"), "{message}");
    assert!(
        message.contains("policy bug: index out of range"),
        "{message}"
    );
}

#[test]
fn a_looping_policy_is_stopped_at_its_deadline() {
    let message =
        assert_evaluation_fails(guests::SPIN, |e| matches!(e, PluginError::Timeout { .. }));
    assert!(
        message.contains("did not finish within 1000 ms"),
        "{message}"
    );
}

#[test]
fn a_policy_that_allocates_without_end_hits_the_memory_cap() {
    let message = assert_evaluation_fails(guests::HOG, |e| {
        matches!(e, PluginError::MemoryLimit { .. })
    });
    assert!(
        message.contains("over the limit of 67108864 bytes"),
        "{message}"
    );
}

#[test]
fn missing_duplicate_and_invented_verdicts_are_refused() {
    for (behaviour, want) in [
        (guests::OMIT, "1 verdicts for 2 locks"),
        (guests::DUPLICATE, "3 verdicts for 2 locks"),
        (guests::INVENT, "2 verdicts for 1 unreadable files"),
    ] {
        let message =
            assert_evaluation_fails(behaviour, |e| matches!(e, PluginError::BadVerdicts { .. }));
        assert!(message.contains(want), "{behaviour}: {message}");
    }
}

#[test]
fn an_error_result_is_reported() {
    let message =
        assert_evaluation_fails(guests::FAIL, |e| matches!(e, PluginError::Refused { .. }));
    assert!(
        message.contains("the policy gave up on purpose"),
        "{message}"
    );
}

#[test]
fn the_sandbox_grants_no_environment_or_arguments() {
    let message =
        assert_evaluation_fails(guests::SNOOP, |e| matches!(e, PluginError::Refused { .. }));
    assert!(message.contains("env vars: 0, args: 0"), "{message}");
}

#[test]
fn policies_importing_clocks_or_files_are_refused_at_load() {
    let rt = runtime();
    for (behaviour, import) in [
        (guests::WALL_CLOCK, "wasi:clocks/"),
        (guests::READ_FILE, "wasi:filesystem/"),
    ] {
        let error = load_guest(&rt, behaviour).err().expect("must be refused");
        let message = error.to_string();
        assert!(
            matches!(error, PluginError::ForbiddenImport { .. }),
            "{behaviour}: {message}"
        );
        assert!(message.contains(import), "{behaviour}: {message}");
        assert!(message.contains("lockwarden:policy/clock"), "{message}");
    }
}

#[test]
fn a_policy_of_another_contract_version_is_refused_naming_both() {
    let rt = runtime();
    let error = load_guest(&rt, guests::WRONG_CONTRACT)
        .err()
        .expect("must be refused");
    let message = error.to_string();
    assert!(
        matches!(error, PluginError::ContractMismatch { .. }),
        "{message}"
    );
    assert!(message.contains("lockwarden:policy@0.9.0"), "{message}");
    assert!(message.contains("0.2.x or 0.1.x"), "{message}");
}

#[test]
fn a_file_that_is_not_a_component_is_refused() {
    let rt = runtime();
    for bytes in [&b"not wasm at all"[..], &b"\0asm\x01\0\0\0"[..]] {
        let error = rt.load("junk.wasm", bytes).err().expect("must be refused");
        assert!(matches!(error, PluginError::Compile { .. }), "{error}");
        assert!(error.to_string().contains("junk.wasm"), "{error}");
    }
}

#[test]
fn compiled_policies_are_cached_and_a_tampered_artifact_is_not_trusted() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("temp dir");
    let cache = ArtifactCache::new(dir.path().join("cache"));
    let rt = Runtime::new(Limits::default(), Some(cache.clone())).expect("engine");
    rt.load_default().expect("first load compiles");
    let artifacts: Vec<_> = std::fs::read_dir(cache.dir())
        .expect("cache dir exists")
        .map(|e| e.expect("entry").path())
        .collect();
    assert_eq!(artifacts.len(), 1, "{artifacts:?}");
    let name = artifacts[0]
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    assert!(
        name.ends_with(".cwasm") && name.len() == 64 + 1 + 16 + 6,
        "{name}"
    );
    let mode = std::fs::metadata(cache.dir())
        .expect("meta")
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o700);

    // A world-writable artifact is not loaded: the policy is compiled again
    // and the file replaced with a trusted one.
    std::fs::set_permissions(&artifacts[0], std::fs::Permissions::from_mode(0o666)).expect("chmod");
    let policy = rt.load_default().expect("loads despite the tampered cache");
    assert_eq!(evaluate(&rt, &policy).expect("evaluates").len(), 3);
    let mode = std::fs::metadata(&artifacts[0])
        .expect("meta")
        .permissions()
        .mode();
    assert_eq!(mode & 0o022, 0, "the artifact was rewritten");

    // Garbage in the cache is not fatal either.
    std::fs::write(&artifacts[0], b"garbage").expect("write");
    std::fs::set_permissions(&artifacts[0], std::fs::Permissions::from_mode(0o600)).expect("chmod");
    rt.load_default()
        .expect("loads despite garbage in the cache");
}
