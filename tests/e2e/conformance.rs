//! The conformance suite (`tests/conformance/`, and the strict example's own
//! cases): the Rust host runs every case, and the same built component run in
//! Node.js through jco, and in Python through wasmtime-py, must answer exactly
//! as it does.

use std::path::{Path, PathBuf};
use std::process::Command;

use lockwarden_tests::{TESTS_DIR, finish, guests, lockwarden, node_host};
use serde_json::Value;

fn default_cases() -> PathBuf {
    Path::new(TESTS_DIR).join("conformance")
}

fn strict_cases() -> PathBuf {
    Path::new(TESTS_DIR).join("../examples/policies/strict/conformance")
}

/// `lockwarden policy conformance --json` with `policy` (None: built-in).
fn rust_host(policy: Option<&Path>, cases: &Path) -> (i32, Value) {
    let cache = tempfile::tempdir().expect("temp dir");
    let mut command = lockwarden(cache.path());
    command
        .args(["policy", "conformance", "--json", "--cases"])
        .arg(cases);
    if let Some(policy) = policy {
        command.arg("--policy").arg(policy);
    }
    let out = finish(&mut command);
    let doc = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("policy conformance --json: {e}: {out:?}"));
    (out.code, doc)
}

fn failures(doc: &Value) -> Vec<String> {
    doc["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .filter(|c| c["passed"] != true)
        .map(|c| format!("{}: {}", c["name"], c["problems"]))
        .collect()
}

#[test]
fn the_default_policy_passes_the_suite() {
    let (code, doc) = rust_host(None, &default_cases());
    assert_eq!(failures(&doc), Vec::<String>::new());
    assert_eq!(code, 0);
    let cases = doc["cases"].as_array().expect("cases").len();
    assert!(cases >= 25, "the suite has {cases} cases");
    // The embedded policy is the one the tests built.
    let (_, again) = rust_host(Some(guests::DEFAULT.path()), &default_cases());
    assert_eq!(doc["cases"], again["cases"]);
}

#[test]
fn the_strict_example_passes_its_own_cases() {
    let (code, doc) = rust_host(Some(guests::STRICT.path()), &strict_cases());
    assert_eq!(failures(&doc), Vec::<String>::new());
    assert_eq!(code, 0);
    assert_eq!(doc["policy"]["name"], "lockwarden-strict-example");
}

#[test]
fn the_suite_tells_policies_apart() {
    // Each policy fails the other's cases: the expectations have teeth.
    let (code, doc) = rust_host(Some(guests::STRICT.path()), &default_cases());
    assert_eq!(code, 1);
    let failed = failures(&doc);
    assert!(
        failed.iter().any(|f| f.contains("future-time")),
        "{failed:#?}"
    );
    let (code, doc) = rust_host(None, &strict_cases());
    assert_eq!(code, 1);
    assert!(!failures(&doc).is_empty());
    // The text report ends with the counts.
    let cache = tempfile::tempdir().expect("temp dir");
    let out = finish(
        lockwarden(cache.path())
            .args(["policy", "conformance", "--cases"])
            .arg(strict_cases()),
    );
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stdout
            .contains("FAIL  01-young-exclusive-survives-dead-holder"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.trim_end().ends_with("failed"), "{}", out.stdout);
}

/// Transpiles `component` with jco and runs every case in Node.js.
fn node_run(component: &Path, cases: &Path) -> Value {
    let out_dir = tempfile::tempdir().expect("temp dir");
    let transpiled = out_dir.path().join("policy");
    node_host::transpile(component, &transpiled);
    let out = finish(
        Command::new("node")
            .arg(node_host::dir().join("run-conformance.mjs"))
            .arg(&transpiled)
            .arg(cases),
    );
    assert_eq!(out.code, 0, "node host: {out:?}");
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("node host output: {e}: {out:?}"))
}

/// Runs every case in the Python host (wasmtime-py, installed by `make
/// test` into target/python-host).
fn python_run(component: &Path, cases: &Path) -> Value {
    let root = Path::new(TESTS_DIR).join("..");
    let python = root.join("target/python-host/bin/python");
    assert!(
        python.exists(),
        "the Python host's environment is missing: run `make test` (it creates target/python-host)"
    );
    let out = finish(
        Command::new(python)
            .arg(root.join("tests/python-host/host.py"))
            .arg(component)
            .arg(cases),
    );
    assert_eq!(out.code, 0, "python host: {out:?}");
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("python host output: {e}: {out:?}"))
}

/// Another host's answers must be identical to the Rust host's, case by
/// case: verdicts (with their reasons), log lines, and refusals.
fn assert_agrees_with_rust(host: &str, other: &Value, component: &Path, cases: &Path) {
    let (_, rust) = rust_host(Some(component), cases);
    assert_eq!(rust["policy"]["name"], other["policy"]["name"]);
    let rust_cases = rust["cases"].as_array().expect("cases");
    let other_cases = other["cases"].as_array().expect("cases");
    assert_eq!(rust_cases.len(), other_cases.len());
    for (r, o) in rust_cases.iter().zip(other_cases) {
        assert_eq!(r["name"], o["name"]);
        assert!(
            r["observed"] == o["observed"],
            "case {}: the hosts disagree\nRust: {}\n{host}: {}",
            r["name"],
            r["observed"],
            o["observed"]
        );
    }
}

#[test]
fn node_runs_the_default_policy_exactly_as_rust_does() {
    let (policy, cases) = (guests::DEFAULT.path(), default_cases());
    assert_agrees_with_rust("Node.js", &node_run(policy, &cases), policy, &cases);
}

#[test]
fn node_runs_the_strict_example_exactly_as_rust_does() {
    let (policy, cases) = (guests::STRICT.path(), strict_cases());
    assert_agrees_with_rust("Node.js", &node_run(policy, &cases), policy, &cases);
}

#[test]
fn python_runs_both_policies_exactly_as_rust_does() {
    for (policy, cases) in [
        (guests::DEFAULT.path(), default_cases()),
        (guests::STRICT.path(), strict_cases()),
    ] {
        assert_agrees_with_rust("Python", &python_run(policy, &cases), policy, &cases);
    }
}

#[test]
fn policy_bench_reports_evaluation_times() {
    let cache = tempfile::tempdir().expect("temp dir");
    let request = Path::new(TESTS_DIR).join("../examples/request.json");
    let bench = |extra: &[&str]| {
        let out = finish(
            lockwarden(cache.path())
                .args(["policy", "bench", "--measurement-time", "200ms"])
                .args(extra)
                .arg("--request")
                .arg(&request),
        );
        assert_eq!(out.code, 0, "{out:?}");
        out.stdout
    };
    let doc: Value = serde_json::from_str(&bench(&["--json"])).expect("bench --json");
    assert_eq!(doc["locks"], 6);
    let evaluation = &doc["evaluation_seconds"];
    assert!(evaluation["n"].as_u64().unwrap_or(0) >= 1, "{doc:#}");
    assert!(
        evaluation["median"].as_f64().unwrap_or(0.0) > 0.0,
        "{doc:#}"
    );
    let text = bench(&[]);
    assert!(text.contains("evaluate:    mean"), "{text}");
}
