//! Policies written in Python and JavaScript, in lockwarden's own runtime:
//! the same limits stop them as stop a Rust policy, the sandbox gives them
//! nothing to reach, and the toolchains' default builds, which import WASI,
//! are refused at load.

use std::sync::Arc;

use lockwarden::contract::{Action, EvaluateRequest, Lock, Repository};
use lockwarden::evidence::Recorded;
use lockwarden::runtime::{ArtifactCache, Limits, PluginError, Policy, Runtime};
use lockwarden_tests::polyglot::{self, Polyglot};
use lockwarden_tests::shared_policy_cache;

const NOW: i64 = 1_796_040_000_000_000_000; // 2026-11-30T12:00:00Z

/// A runtime with the default limits and the tests' shared artifact cache.
fn runtime() -> Runtime {
    let cache = ArtifactCache::new(shared_policy_cache());
    Runtime::new(Limits::default(), Some(cache)).expect("engine")
}

fn load(rt: &Runtime, policy: Polyglot) -> Result<Policy, PluginError> {
    let path = policy.path();
    let bytes = std::fs::read(&path).expect("read component");
    rt.load(&path.display().to_string(), &bytes)
}

/// One fresh lock, with the guest's setting `misbehave` set to `how`.
fn request(how: &str) -> EvaluateRequest {
    EvaluateRequest {
        repository: Repository {
            id: "5e1f".into(),
            location: "/srv/restic".into(),
            backend: "local".into(),
            version: 2,
        },
        locks: vec![Lock {
            id: "ab".repeat(32),
            time: NOW,
            exclusive: false,
            hostname: "other-host".into(),
            username: "root".into(),
            pid: 7,
            uid: 0,
            gid: 0,
            first_seen: None,
            stored_at: None,
        }],
        unreadable: vec![],
        settings: vec![("misbehave".into(), how.into())],
    }
}

/// The guest's one verdict's reason, or the runtime's error.
fn misbehave(rt: &Runtime, policy: &Policy, how: &str) -> Result<String, PluginError> {
    let outcome = rt.evaluate(
        policy,
        NOW,
        Arc::new(Recorded::new(Some("vm".into()))),
        &request(how),
    )?;
    let verdict = &outcome.verdicts.locks[0];
    assert_eq!(verdict.action, Action::Keep);
    Ok(verdict.reason.clone())
}

/// Spinning meets the epoch deadline and allocating without end meets the
/// memory cap, exactly as for the Rust guests (tests/e2e/runtime.rs); the
/// same instance pre then evaluates again, and the default policy too.
#[test]
fn python_and_javascript_policies_are_stopped_by_the_same_limits() {
    for guest in [polyglot::MISBEHAVE_PYTHON, polyglot::MISBEHAVE_JS] {
        let rt = runtime();
        let policy = load(&rt, guest).expect("loads");
        assert_eq!(policy.contract(), "0.2.0");
        let spin = misbehave(&rt, &policy, "spin").expect_err("stopped");
        assert!(
            matches!(spin, PluginError::Timeout { .. }),
            "{guest}: {spin}"
        );
        assert!(spin.to_string().contains("did not finish within 1000 ms"));
        let hog = misbehave(&rt, &policy, "hog").expect_err("stopped");
        assert!(
            matches!(hog, PluginError::MemoryLimit { .. }),
            "{guest}: {hog}"
        );
        assert!(hog.to_string().contains("over the limit of 67108864 bytes"));
        assert_eq!(misbehave(&rt, &policy, "").expect("behaves"), "behaved");
    }
}

/// Built as the examples are, neither language's component imports WASI,
/// so what a policy might reach through it is not there. In Python, files,
/// the wall clock and stdout are stubs that trap: the evaluation fails and
/// nothing is removed. In JavaScript, `fetch` traps, `console.log` writes
/// nowhere and `Date.now()` reads the moment the component was built. Random
/// numbers in both come from a seed fixed when the component was built, so
/// every evaluation of a request gives the same verdicts.
#[test]
fn python_and_javascript_policies_reach_nothing_and_do_not_vary() {
    let rt = runtime();
    let python = load(&rt, polyglot::MISBEHAVE_PYTHON).expect("loads");
    let js = load(&rt, polyglot::MISBEHAVE_JS).expect("loads");
    for (policy, how) in [
        (&python, "open-file"),
        (&python, "clock"),
        (&python, "print"),
        (&js, "open-file"),
    ] {
        let error = misbehave(&rt, policy, how).expect_err(how);
        assert!(matches!(error, PluginError::Trap { .. }), "{how}: {error}");
        assert!(!error.to_string().contains("root:"), "{error}");
    }
    assert_eq!(misbehave(&rt, &js, "print").expect("no stdout"), "printed");
    for (policy, how) in [(&python, "random"), (&js, "random"), (&js, "clock")] {
        let first = misbehave(&rt, policy, how).expect(how);
        assert_eq!(first, misbehave(&rt, policy, how).expect(how), "{how}");
    }
    let built = misbehave(&rt, &js, "clock").expect("Date.now()");
    assert_ne!(
        built,
        format!("time: {}", NOW / 1_000_000),
        "not the evaluation's now"
    );
}

/// componentize-py and componentize-js by default build components that
/// import clocks, files, random numbers, sockets or http: lockwarden refuses
/// them at load, naming every such import.
#[test]
fn the_toolchains_default_builds_are_refused_at_load() {
    let rt = runtime();
    for (guest, imports) in [
        (
            polyglot::MISBEHAVE_PYTHON_WASI,
            &[
                "wasi:clocks/wall-clock",
                "wasi:filesystem/preopens",
                "wasi:random/random",
                "wasi:sockets/tcp",
            ][..],
        ),
        (
            polyglot::MISBEHAVE_JS_WASI,
            &[
                "wasi:clocks/wall-clock",
                "wasi:filesystem/preopens",
                "wasi:random/random",
                "wasi:http/outgoing-handler",
            ][..],
        ),
    ] {
        let error = load(&rt, guest).err().expect("refused");
        let message = error.to_string();
        assert!(
            matches!(error, PluginError::ForbiddenImport { .. }),
            "{guest}: {message}"
        );
        for import in imports {
            assert!(message.contains(import), "{guest}: {import}: {message}");
        }
    }
}
