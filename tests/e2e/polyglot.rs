//! Policies written in Python and JavaScript, in lockwarden's own runtime:
//! the same limits stop them as stop a Rust policy, the sandbox gives them
//! nothing to reach, and the toolchains' default builds, which import WASI,
//! are refused at load.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use lockwarden::contract::{Action, EvaluateRequest, Lock, Repository};
use lockwarden::evidence::Recorded;
use lockwarden::runtime::{ArtifactCache, Limits, PluginError, Policy, Runtime};
use lockwarden_tests::polyglot::{self, Polyglot};
use lockwarden_tests::{TESTS_DIR, finish, lockwarden, shared_policy_cache};

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

/// `lockwarden policy new --lang L DIR`, built the way its README says with
/// the toolchains `make test` installed, passes the conformance cases written
/// beside it; DIR is refused once it holds anything.
fn assert_new_policy_builds_and_passes(lang: &str, build: impl FnOnce(&Path) -> PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let new = dir.path().join("mine");
    let cache = shared_policy_cache();
    let out = finish(
        lockwarden(&cache)
            .args(["policy", "new", "--lang", lang])
            .arg(&new),
    );
    assert_eq!(out.code, 0, "{lang}: {out:?}");
    assert!(
        out.stdout.contains("lockwarden policy conformance"),
        "{out:?}"
    );
    let component = build(&new);
    let out = finish(
        lockwarden(&cache)
            .args(["policy", "conformance", "--cases"])
            .arg(new.join("conformance"))
            .arg("--policy")
            .arg(&component),
    );
    assert_eq!(out.code, 0, "{lang}: {out:?}");
    assert!(
        out.stdout.contains("10 passed, 0 failed"),
        "{lang}: {out:?}"
    );
    let again = finish(
        lockwarden(&cache)
            .args(["policy", "new", "--lang", lang])
            .arg(&new),
    );
    assert_ne!(again.code, 0, "{again:?}");
    assert!(again.stderr.contains("it is not empty"), "{again:?}");
}

/// Runs a starting point's build.sh, which writes policy.wasm beside it.
fn build_sh(dir: &Path, env: &[(&str, &Path)]) -> PathBuf {
    let mut command = Command::new(dir.join("build.sh"));
    command.current_dir(dir);
    for (name, value) in env {
        command.env(name, value);
    }
    let out = finish(&mut command);
    assert_eq!(out.code, 0, "build.sh: {out:?}");
    dir.join("policy.wasm")
}

fn workspace() -> PathBuf {
    Path::new(TESTS_DIR).join("..")
}

#[test]
fn policy_new_in_python_builds_and_passes_its_cases() {
    assert_new_policy_builds_and_passes("python", |dir| {
        let tool = workspace().join("target/policy-python/bin/componentize-py");
        build_sh(dir, &[("COMPONENTIZE_PY", &tool)])
    });
}

#[test]
fn policy_new_in_javascript_builds_and_passes_its_cases() {
    assert_new_policy_builds_and_passes("js", |dir| {
        // What `npm ci` would install: the lock it wrote is the example's.
        let example = workspace().join("examples/policies/strict-js");
        let lock = |d: &Path| std::fs::read(d.join("package-lock.json")).expect("lock");
        assert_eq!(lock(dir), lock(&example));
        std::os::unix::fs::symlink(example.join("node_modules"), dir.join("node_modules"))
            .expect("link the installed toolchain");
        build_sh(dir, &[])
    });
}

#[test]
fn policy_new_in_rust_builds_and_passes_its_cases() {
    assert_new_policy_builds_and_passes("rust", |dir| {
        // Its own target directory, kept between runs; offline: the crates
        // it needs are the workspace's, already downloaded.
        let target = workspace().join("target/policy-new-rust");
        let mut command = Command::new(std::env::var_os("CARGO").unwrap_or("cargo".into()));
        command
            .current_dir(dir)
            .args(["build", "--quiet", "--offline", "--release"])
            .args(["--target", "wasm32-wasip2", "--target-dir"])
            .arg(&target);
        for name in [
            "CARGO_TARGET_DIR",
            "CARGO_BUILD_TARGET",
            "RUSTFLAGS",
            "CARGO_ENCODED_RUSTFLAGS",
        ] {
            command.env_remove(name);
        }
        let out = finish(&mut command);
        assert_eq!(out.code, 0, "cargo build: {out:?}");
        target.join("wasm32-wasip2/release/policy.wasm")
    });
}
