//! The Go host (hosts/go, on wazero): `go test` there runs every
//! conformance case with the components this build made, and must answer
//! exactly as lockwarden does (lockwarden's answers are handed to it), and
//! stops or refuses the misbehaving guests as lockwarden does. The paths
//! reach `go test` in the file LOCKWARDEN_GO_HOST_FIXTURES names. The
//! example that embeds it (examples/go-host) judges a real repository as
//! `lockwarden check` does.

use std::path::{Path, PathBuf};
use std::process::Command;

use lockwarden_tests::adversary::{doc, reason, verdict, warden};
use lockwarden_tests::go::{go, host_module};
use lockwarden_tests::lock_writer::{LockSpec, LockWriter, time_from_now};
use lockwarden_tests::polyglot::{self, Polyglot};
use lockwarden_tests::restic::{Holder, TestRepo};
use lockwarden_tests::restic_version::restic_program;
use lockwarden_tests::{TESTS_DIR, finish, guests, lockwarden, shared_policy_cache};
use serde_json::{Value, json};

/// `lockwarden policy conformance --json` on `cases` with `component`,
/// written to `out`.
fn rust_answers(component: &Path, cases: &Path, out: &Path) {
    let done = finish(
        lockwarden(&shared_policy_cache())
            .args(["policy", "conformance", "--json", "--cases"])
            .arg(cases)
            .arg("--policy")
            .arg(component),
    );
    assert_eq!(done.code, 0, "{done:?}");
    std::fs::write(out, &done.stdout).expect("write lockwarden's answers");
}

/// The fixtures file: each suite with lockwarden's answers, the guests.
fn fixtures(dir: &Path) -> PathBuf {
    let default_cases = Path::new(TESTS_DIR).join("conformance");
    let strict_cases = Path::new(TESTS_DIR).join("../examples/policies/strict/conformance");
    let suites: Vec<(&str, PathBuf, &PathBuf)> = vec![
        ("default", guests::DEFAULT.path().into(), &default_cases),
        ("strict", guests::STRICT.path().into(), &strict_cases),
        (
            "strict-python",
            polyglot::STRICT_PYTHON.path(),
            &strict_cases,
        ),
        ("strict-js", polyglot::STRICT_JS.path(), &strict_cases),
    ];
    let suites: Vec<Value> = suites
        .into_iter()
        .map(|(name, component, cases)| {
            let rust = dir.join(format!("{name}.json"));
            rust_answers(&component, cases, &rust);
            json!({"name": name, "component": component, "cases": cases, "rust": rust})
        })
        .collect();
    let mut guests_by_name = serde_json::Map::new();
    for guest in [
        guests::SPIN,
        guests::HOG,
        guests::PANIC,
        guests::OMIT,
        guests::DUPLICATE,
        guests::INVENT,
        guests::REMOVE_UNREADABLE,
        guests::FAIL,
        guests::SNOOP,
        guests::WALL_CLOCK,
        guests::READ_FILE,
        guests::WRONG_CONTRACT,
    ] {
        let name = guest.package().trim_start_matches("misbehave-");
        guests_by_name.insert(name.into(), json!(guest.path()));
    }
    for guest in [
        polyglot::MISBEHAVE_PYTHON,
        polyglot::MISBEHAVE_JS,
        polyglot::MISBEHAVE_PYTHON_WASI,
        polyglot::MISBEHAVE_JS_WASI,
    ] {
        guests_by_name.insert(polyglot_name(guest), json!(guest.path()));
    }
    let cache = Path::new(TESTS_DIR).join("../target/go-host-cache");
    let file = dir.join("fixtures.json");
    let doc = json!({"suites": suites, "guests": guests_by_name, "cache_dir": cache});
    std::fs::write(&file, doc.to_string()).expect("write fixtures");
    file
}

fn polyglot_name(guest: Polyglot) -> String {
    let path = guest.path();
    path.file_stem()
        .expect("a file name")
        .to_string_lossy()
        .into_owned()
}

#[test]
fn the_go_host_answers_every_case_as_lockwarden_and_stops_what_it_stops() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = fixtures(dir.path());
    let out = finish(
        go(&host_module())
            .args(["test", "-count=1", "-timeout=10m", "./..."])
            .env("LOCKWARDEN_GO_HOST_FIXTURES", &file),
    );
    assert_eq!(
        out.code, 0,
        "go test failed:\n{}\n{}",
        out.stdout, out.stderr
    );
    assert!(
        out.stdout
            .contains("ok  \tgithub.com/lockwarden/lockwarden/hosts/go\t"),
        "{}",
        out.stdout
    );
}

#[test]
fn the_go_host_is_pure_go_and_vetted() {
    let out = finish(go(&host_module()).args(["vet", "./..."]));
    assert_eq!(out.code, 0, "go vet: {out:?}");
    let out = finish(go(&host_module()).args([
        "list",
        "-deps",
        "-f",
        "{{if .CgoFiles}}{{.ImportPath}}{{end}}",
        "./...",
    ]));
    assert_eq!(
        (out.code, out.stdout.trim()),
        (0, ""),
        "packages using cgo: {out:?}"
    );
    let out = finish(
        Command::new("timeout")
            .args(["60", "gofmt", "-l"])
            .arg(host_module()),
    );
    assert_eq!(
        (out.code, out.stdout.trim()),
        (0, ""),
        "not gofmt'ed: {out:?}"
    );
}

/// `reason` with every word that starts with a digit (an age: the two
/// hosts judge a moment apart) made `#`.
fn without_numbers(reason: &str) -> String {
    reason
        .split(' ')
        .map(|w| {
            if w.starts_with(|c: char| c.is_ascii_digit()) {
                "#"
            } else {
                w
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The example's verdict for `id`: (action, rule) and its reason.
fn go_verdict(doc: &Value, id: &str) -> ((String, String), String) {
    let found = doc["verdicts"]
        .as_array()
        .and_then(|all| all.iter().find(|v| v["id"] == id))
        .unwrap_or_else(|| panic!("no verdict for {id}: {doc:#}"));
    let s = |k: &str| found[k].as_str().unwrap_or_default().to_owned();
    ((s("action"), s("rule")), s("reason"))
}

/// examples/go-host, what a K8up-style operator would run before `restic
/// unlock`, reads a real repository through restic and answers from a pod
/// list: a real restic holder in a running pod keeps its lock, the lock of
/// a pod that is gone is stale, with exactly the verdicts (rule and reason)
/// of `lockwarden check` given the same pods and the same policy (but the
/// locks' ages: the two judge a moment apart).
#[test]
fn the_go_example_judges_a_real_repository_as_lockwarden_check_does() {
    let repo = TestRepo::init_local();
    let live = Holder::start_on_host(&repo, "k8up-backup-live");
    let gone = LockWriter::new(&repo).write(LockSpec {
        time: time_from_now(-2 * 60),
        hostname: "k8up-backup-gone",
        pid: 7,
        ..LockSpec::default()
    });
    let pods = repo.dir.path().join("pods.json");
    let list =
        json!([{"name": "k8up-backup-live", "started": time_from_now(-3600), "state": "running"}]);
    std::fs::write(&pods, list.to_string()).expect("write pods");
    let policy = guests::DEFAULT.path();
    let cat = format!("cat {}", pods.display());
    let policy_arg = policy.display().to_string();
    let report = doc(&warden(
        &repo,
        "check",
        &[
            "--json",
            "--policy",
            &policy_arg,
            "--inventory-hosts",
            "^k8up-",
            "--hosts-command",
            &cat,
        ],
    ));

    let dir = tempfile::tempdir().expect("temp dir");
    let example = Path::new(TESTS_DIR).join("../examples/go-host");
    let built = finish(
        go(&example)
            .arg("build")
            .arg("-o")
            .arg(dir.path().join("go-host"))
            .arg("."),
    );
    assert_eq!(built.code, 0, "go build: {built:?}");
    let out = finish(
        Command::new("timeout")
            .arg("300")
            .arg(dir.path().join("go-host"))
            .args(["-policy", &policy_arg, "-pods"])
            .arg(&pods)
            .args(["-r", &repo.location, "-p"])
            .arg(repo.password_file())
            .arg("-restic")
            .arg(restic_program()),
    );
    assert_eq!(out.code, 0, "{out:?}");
    let judged: Value = serde_json::from_str(&out.stdout).expect("the example prints JSON");
    assert_eq!(
        judged["verdicts"].as_array().map(Vec::len),
        Some(2),
        "{judged:#}"
    );
    for (id, want) in [
        (&live.lock_id, ("keep", "fresh")),
        (&gone, ("remove", "host-gone")),
    ] {
        let (pair, why) = go_verdict(&judged, id);
        assert_eq!(pair, verdict(&report, id), "{id}: {judged:#}\n{report:#}");
        assert_eq!(pair, (want.0.to_owned(), want.1.to_owned()), "{id}");
        assert_eq!(
            without_numbers(&why),
            without_numbers(&reason(&report, id)),
            "{id}"
        );
    }
}

/// docs/writing-a-policy.md shows examples/go-host/judge.go as it is: the
/// code block after the marker naming the file is the file.
#[test]
fn the_docs_show_the_go_example_as_it_is() {
    let root = Path::new(TESTS_DIR).join("..");
    let file = "examples/go-host/judge.go";
    let docs =
        std::fs::read_to_string(root.join("docs/writing-a-policy.md")).expect("read the docs");
    let marker = format!("<!-- {file} -->\n```go\n");
    let at = docs
        .find(&marker)
        .expect("the docs name the file before its block")
        + marker.len();
    let end = docs[at..].find("```\n").expect("the block ends");
    let source = std::fs::read_to_string(root.join(file)).expect("read the example");
    assert_eq!(
        &docs[at..at + end],
        source,
        "the docs' copy of {file} differs: copy the file"
    );
    assert!(
        source.lines().count() <= 30,
        "{file} is no longer a short example"
    );
}
