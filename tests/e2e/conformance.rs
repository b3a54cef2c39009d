//! The conformance suite (`tests/conformance/`, and the strict example's own
//! cases): the Rust host runs every case, and the same built component run in
//! Node.js through jco, and in Python through wasmtime-py, must answer exactly
//! as it does. The suite runs against both contract versions: the 0.1.0
//! build of the default policy skips exactly the cases that need 0.2.0's
//! facts, and passes every other.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime};

use lockwarden_tests::adversary::{doc, pair, verdict, warden};
use lockwarden_tests::lock_writer::LockWriter;
use lockwarden_tests::polyglot::{self, Polyglot};
use lockwarden_tests::restic::TestRepo;
use lockwarden_tests::{
    Finished, TESTS_DIR, finish, guests, lockwarden, node_host, shared_policy_cache,
};
use serde_json::Value;

fn default_cases() -> PathBuf {
    Path::new(TESTS_DIR).join("conformance")
}

fn strict_cases() -> PathBuf {
    Path::new(TESTS_DIR).join("../examples/policies/strict/conformance")
}

/// `lockwarden policy conformance --json` with `policy` (None: built-in).
fn rust_host(policy: Option<&Path>, cases: &Path) -> (i32, Value) {
    let mut command = lockwarden(&shared_policy_cache());
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

/// The cases that ran and failed, with their problems.
fn failures(doc: &Value) -> Vec<String> {
    cases(doc)
        .iter()
        .filter(|c| c["skipped"] != true && c["passed"] != true)
        .map(|c| format!("{}: {}", c["name"], c["problems"]))
        .collect()
}

fn cases(doc: &Value) -> &Vec<Value> {
    doc["cases"].as_array().expect("cases")
}

/// The names of the cases a host skipped.
fn skipped(doc: &Value) -> BTreeSet<String> {
    cases(doc)
        .iter()
        .filter(|c| c["skipped"] == true)
        .map(|c| c["name"].as_str().expect("a name").to_owned())
        .collect()
}

/// The names of the cases in `dir` that declare `"contract": version`.
fn cases_needing(dir: &Path, version: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for entry in std::fs::read_dir(dir).expect("cases dir") {
        let path = entry.expect("an entry").path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let case: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("a case")).expect("JSON");
        if case["contract"] == version {
            let name = path.file_stem().expect("a name").to_string_lossy();
            names.insert(name.into_owned());
        }
    }
    names
}

#[test]
fn the_default_policy_passes_the_suite() {
    let (code, doc) = rust_host(None, &default_cases());
    assert_eq!(failures(&doc), Vec::<String>::new());
    assert_eq!(code, 0);
    let count = cases(&doc).len();
    assert!(count >= 46, "the suite has {count} cases");
    assert_eq!(
        skipped(&doc),
        BTreeSet::new(),
        "a 0.2.0 policy runs every case"
    );
    assert_eq!(doc["skipped"], 0);
    assert_eq!(doc["contract"], "0.2.0");
    // The embedded policy is the one the tests built.
    let (_, again) = rust_host(Some(guests::DEFAULT.path()), &default_cases());
    assert_eq!(doc["cases"], again["cases"]);
}

#[test]
fn the_0_1_0_default_policy_passes_every_case_but_those_needing_0_2_0() {
    let (code, doc) = rust_host(Some(guests::DEFAULT_0_1.path()), &default_cases());
    assert_eq!(failures(&doc), Vec::<String>::new());
    assert_eq!(code, 0);
    assert_eq!(doc["contract"], "0.1.0");
    let needing = cases_needing(&default_cases(), "0.2.0");
    assert!(needing.len() >= 10, "{needing:?}");
    assert_eq!(skipped(&doc), needing);
    assert_eq!(doc["skipped"], needing.len());
    for case in cases(&doc).iter().filter(|c| c["skipped"] == true) {
        assert_eq!(case["needs_contract"], "0.2.0", "{case}");
    }
    assert!(cases(&doc).len() > needing.len() + 30, "the old cases ran");
    // The text report names each skipped case and counts them.
    let cache = tempfile::tempdir().expect("temp dir");
    let out = finish(
        lockwarden(cache.path())
            .args(["policy", "conformance", "--cases"])
            .arg(default_cases())
            .arg("--policy")
            .arg(guests::DEFAULT_0_1.path()),
    );
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout
            .contains("skip  33-stored-long-ago-skew-edge: needs contract 0.2.0"),
        "{}",
        out.stdout
    );
    let last = out.stdout.trim_end().lines().last().unwrap_or_default();
    assert_eq!(
        last,
        format!(
            "{} passed, 0 failed, {} skipped (they need a newer contract than the policy's 0.1.0)",
            cases(&doc).len() - needing.len(),
            needing.len()
        )
    );
}

/// Sets the storage's modification time of the lock file `id` in `repo`.
fn set_stored_at(repo: &TestRepo, id: &str, when: SystemTime) {
    std::fs::File::open(repo.path.join("locks").join(id))
        .and_then(|f| f.set_modified(when))
        .expect("set mtime");
}

/// A 0.1.0 policy never learns when an unreadable file was stored, so it
/// keeps one the storage stored three days ago; the 0.2.0 default policy,
/// given the same file, removes it by `unreadable-old`.
#[test]
fn a_0_1_0_policy_keeps_an_unreadable_file_stored_days_ago() {
    let repo = TestRepo::init_local();
    let corrupt = LockWriter::new(&repo).write_bytes(&[0x5a; 200]);
    let three_days_ago = SystemTime::now() - Duration::from_secs(3 * 24 * 3600);
    set_stored_at(&repo, &corrupt, three_days_ago);
    let old_policy = guests::DEFAULT_0_1.path();
    let old_policy = old_policy.to_str().expect("utf-8");

    let check = warden(&repo, "check", &["--json", "--policy", old_policy]);
    assert_eq!(check.code, 0, "{check:?}");
    let report = doc(&check);
    assert_eq!(
        verdict(&report, &corrupt),
        pair("keep", "unreadable"),
        "{report:#}"
    );
    let unlock = warden(&repo, "unlock", &["--policy", old_policy]);
    assert_eq!(unlock.code, 0, "{unlock:?}");
    assert!(repo.lock_ids().contains(&corrupt), "kept: {unlock:?}");

    let check = warden(&repo, "check", &["--json"]);
    let report = doc(&check);
    assert_eq!(
        verdict(&report, &corrupt),
        pair("remove", "unreadable-old"),
        "{report:#}"
    );
    let unlock = warden(&repo, "unlock", &[]);
    assert_eq!(unlock.code, 0, "{unlock:?}");
    assert!(!repo.lock_ids().contains(&corrupt), "removed: {unlock:?}");
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
    assert!(
        out.stdout.trim_end().ends_with("0 skipped"),
        "{}",
        out.stdout
    );
}

/// Transpiles `component` with jco and runs every case in Node.js.
fn node_run(component: &Path, cases: &Path) -> Value {
    let out = node_finish(component, cases);
    assert_eq!(out.code, 0, "node host: {out:?}");
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("node host output: {e}: {out:?}"))
}

/// Transpiles `component` with jco and runs `run-conformance.mjs` on it.
fn node_finish(component: &Path, cases: &Path) -> Finished {
    let out_dir = tempfile::tempdir().expect("temp dir");
    let transpiled = out_dir.path().join("policy");
    node_host::transpile(component, &transpiled);
    finish(
        node_host::node()
            .arg(node_host::dir().join("run-conformance.mjs"))
            .arg(&transpiled)
            .arg(cases),
    )
}

/// Runs every case in the Python host (wasmtime-py, installed by `make
/// test` into target/python-host).
fn python_run(component: &Path, cases: &Path) -> Value {
    let out = python_finish(component, cases);
    assert_eq!(out.code, 0, "python host: {out:?}");
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("python host output: {e}: {out:?}"))
}

/// Runs `host.py` on `component` and `cases`.
fn python_finish(component: &Path, cases: &Path) -> Finished {
    let root = Path::new(TESTS_DIR).join("..");
    let python = root.join("target/python-host/bin/python");
    assert!(
        python.exists(),
        "the Python host's environment is missing: run `make test` (it creates target/python-host)"
    );
    finish(
        Command::new(python)
            .arg(root.join("tests/python-host/host.py"))
            .arg(component)
            .arg(cases),
    )
}

/// Another host's answers must be identical to the Rust host's, case by
/// case: verdicts (with their reasons), log lines, and refusals.
fn assert_agrees_with_rust(host: &str, other: &Value, component: &Path, suite: &Path) {
    let (_, rust) = rust_host(Some(component), suite);
    assert_eq!(rust["policy"]["name"], other["policy"]["name"]);
    assert_eq!(rust["contract"], other["contract"], "{host}");
    let rust_cases = cases(&rust);
    let other_cases = cases(other);
    assert_eq!(rust_cases.len(), other_cases.len());
    assert!(failures(&rust).is_empty(), "{:?}", failures(&rust));
    for (r, o) in rust_cases.iter().zip(other_cases) {
        assert_eq!(r["name"], o["name"]);
        assert_eq!(
            (&r["skipped"], &r["needs_contract"]),
            (&o["skipped"], &o["needs_contract"]),
            "case {}: {host} skips differently",
            r["name"]
        );
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
fn node_runs_the_0_1_0_default_policy_exactly_as_rust_does() {
    let (policy, cases) = (guests::DEFAULT_0_1.path(), default_cases());
    let node = node_run(policy, &cases);
    assert_eq!(node["contract"], "0.1.0");
    assert_eq!(skipped(&node), cases_needing(&cases, "0.2.0"));
    assert_agrees_with_rust("Node.js", &node, policy, &cases);
}

#[test]
fn node_runs_the_strict_example_exactly_as_rust_does() {
    let (policy, cases) = (guests::STRICT.path(), strict_cases());
    assert_agrees_with_rust("Node.js", &node_run(policy, &cases), policy, &cases);
}

#[test]
fn python_runs_every_policy_exactly_as_rust_does() {
    for (policy, cases) in [
        (guests::DEFAULT.path(), default_cases()),
        (guests::DEFAULT_0_1.path(), default_cases()),
        (guests::STRICT.path(), strict_cases()),
    ] {
        assert_agrees_with_rust("Python", &python_run(policy, &cases), policy, &cases);
    }
    let old = python_run(guests::DEFAULT_0_1.path(), &default_cases());
    assert_eq!(old["contract"], "0.1.0");
    assert_eq!(skipped(&old), cases_needing(&default_cases(), "0.2.0"));
}

/// The strict example written in another language passes the strict cases
/// in lockwarden with exactly the Rust example's answers (the same rules,
/// words and refusals), and the Node.js and Python hosts answer as
/// lockwarden does.
fn assert_strict_example_in_three_hosts(policy: Polyglot) {
    let (path, cases_dir) = (policy.path(), strict_cases());
    let (code, doc) = rust_host(Some(&path), &cases_dir);
    assert_eq!(failures(&doc), Vec::<String>::new(), "{policy}");
    assert_eq!(code, 0, "{policy}");
    let (_, rust_example) = rust_host(Some(guests::STRICT.path()), &cases_dir);
    let theirs = cases(&doc);
    assert_eq!(theirs.len(), cases(&rust_example).len());
    for (ours, theirs) in cases(&rust_example).iter().zip(theirs) {
        assert!(
            ours["observed"] == theirs["observed"],
            "case {}: {policy} answers otherwise than the Rust example\nRust: {}\n{policy}: {}",
            ours["name"],
            ours["observed"],
            theirs["observed"]
        );
    }
    assert_agrees_with_rust("Node.js", &node_run(&path, &cases_dir), &path, &cases_dir);
    assert_agrees_with_rust("Python", &python_run(&path, &cases_dir), &path, &cases_dir);
}

#[test]
fn the_strict_example_in_python_answers_as_the_rust_one_in_three_hosts() {
    assert_strict_example_in_three_hosts(polyglot::STRICT_PYTHON);
}

#[test]
fn the_strict_example_in_javascript_answers_as_the_rust_one_in_three_hosts() {
    assert_strict_example_in_three_hosts(polyglot::STRICT_JS);
}

/// A directory holding copies of the default suite's cases `names`.
fn some_cases(names: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for name in names {
        let file = format!("{name}.json");
        std::fs::copy(default_cases().join(&file), dir.path().join(&file)).expect("copy case");
    }
    dir
}

/// The Node.js and Python hosts check verdicts as the Rust host does: a
/// verdict list of the wrong length, or a `remove` for an unreadable file
/// without 30 minutes of the host's own age evidence, is an error; with that
/// evidence the same `remove` is accepted.
#[test]
fn node_and_python_refuse_the_verdicts_rust_refuses() {
    type Run = fn(&Path, &Path) -> Finished;
    let young = some_cases(&["26-unreadable-kept"]);
    let old = some_cases(&["38-unreadable-old-by-stored-at"]);
    for (host, run) in [
        ("Node.js", node_finish as Run),
        ("Python", python_finish as Run),
    ] {
        let out = run(guests::REMOVE_UNREADABLE.path(), young.path());
        assert_ne!(out.code, 0, "{host}: {out:?}");
        assert!(
            out.stderr
                .contains("`remove` for `empty-file`, an unreadable file for which the host holds no age evidence of at least 30m"),
            "{host}: {out:?}"
        );
        let out = run(guests::OMIT.path(), young.path());
        assert_ne!(out.code, 0, "{host}: {out:?}");
        assert!(
            out.stderr.contains("0 verdicts for 1 locks"),
            "{host}: {out:?}"
        );
        let out = run(guests::REMOVE_UNREADABLE.path(), old.path());
        assert_eq!(out.code, 0, "{host}: {out:?}");
        let doc: Value = serde_json::from_str(&out.stdout).expect("JSON");
        let removed = cases(&doc)[0]["observed"]["verdicts"]
            .as_array()
            .expect("verdicts")
            .iter()
            .filter(|v| v["action"] == "remove")
            .count();
        assert_eq!(removed, 3, "{host}: every file is old enough: {doc:#}");
    }
    // The Rust host agrees on both.
    let (code, doc) = rust_host(Some(guests::REMOVE_UNREADABLE.path()), young.path());
    assert_eq!(code, 1);
    assert!(
        cases(&doc)[0]["observed"]["host_error"]
            .as_str()
            .unwrap_or_default()
            .contains("no age evidence of at least 30m"),
        "{doc:#}"
    );
    let (_, doc) = rust_host(Some(guests::REMOVE_UNREADABLE.path()), old.path());
    assert!(cases(&doc)[0]["observed"]["verdicts"].is_array(), "{doc:#}");
}

/// Contract 0.1.0 promised that no unreadable file is ever removed: all
/// three hosts refuse a 0.1.0 policy's `remove` for one, even when the host
/// holds hours of age evidence that would let a 0.2.0 policy remove it.
#[test]
fn no_host_lets_a_0_1_0_policy_remove_an_unreadable_file() {
    type Run = fn(&Path, &Path) -> Finished;
    // Case 38 without its `"contract": "0.2.0"`, so that a 0.1.0 policy is
    // given it (without the storage times) rather than skipping it.
    let old = some_cases(&["38-unreadable-old-by-stored-at"]);
    let case = old.path().join("38-unreadable-old-by-stored-at.json");
    let mut doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&case).expect("case")).expect("JSON");
    doc.as_object_mut().expect("an object").remove("contract");
    std::fs::write(&case, doc.to_string()).expect("write case");
    let policy = guests::REMOVE_UNREADABLE_0_1.path();
    let want = "a contract 0.1.0 policy never removes one";
    for (host, run) in [
        ("Node.js", node_finish as Run),
        ("Python", python_finish as Run),
    ] {
        let out = run(policy, old.path());
        assert_ne!(out.code, 0, "{host}: {out:?}");
        assert!(out.stderr.contains(want), "{host}: {out:?}");
    }
    let (code, doc) = rust_host(Some(policy), old.path());
    assert_eq!(code, 1, "{doc:#}");
    assert!(
        cases(&doc)[0]["observed"]["host_error"]
            .as_str()
            .unwrap_or_default()
            .contains(want),
        "{doc:#}"
    );
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
