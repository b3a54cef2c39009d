//! The same policy component in three hosts: wasmtime inside lockwarden,
//! Node.js through jco and Go through wazero (`hosts/go`), each timed by its
//! own bench (`lockwarden policy bench`, `tests/node-host/bench.mjs`, `go test
//! -bench`) on the same recorded requests.

use std::path::{Path, PathBuf};
use std::process::Command;

use lockwarden::stats::Summary;
use lockwarden_tests::go::{go, host_module};
use lockwarden_tests::{guests, lockwarden_bin, node_host};
use serde_json::{Value, json};

/// One request timed in every host.
pub struct HostPair {
    /// The request file, relative to the workspace.
    pub request: String,
    /// Locks and unreadable files in it.
    pub entries: u64,
    /// One evaluation in lockwarden (wasmtime).
    pub wasmtime: Summary,
    /// One evaluation in Node.js (jco).
    pub node: Summary,
    /// One evaluation in Go (wazero, compiled): the means of `go test
    /// -bench`'s runs.
    pub go: Summary,
}

/// The recorded requests, from one lock to 2,000; [`TEN_THOUSAND`] is
/// made from the last.
const REQUESTS: [&str; 3] = [
    "tests/conformance/07-process-dead-same-host.json",
    "examples/request.json",
    "tests/conformance/32-thousands-of-locks.json",
];

/// The 2,000-lock request five times over (each copy's ids its own).
const TEN_THOUSAND: &str = "target/bench/ten-thousand-locks.json";

/// Runs of `go test -bench` per request.
const GO_RUNS: usize = 10;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("bench sits in the workspace")
        .to_owned()
}

/// Runs `command` and parses its standard output as JSON.
fn json_of(command: &mut Command) -> Value {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("run {command:?}: {e}"));
    assert!(
        out.status.success(),
        "{command:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{command:?} printed no JSON: {e}"))
}

fn summary(doc: &Value) -> Summary {
    Summary::from_json(&doc["evaluation_seconds"])
        .unwrap_or_else(|| panic!("no evaluation_seconds in {doc}"))
}

/// Writes [`TEN_THOUSAND`] from the 2,000-lock request.
fn write_ten_thousand(root: &Path) {
    let file = root.join(REQUESTS[2]);
    let text = std::fs::read_to_string(&file).expect("the 2,000-lock request");
    let mut doc: Value = serde_json::from_str(&text).expect("a recorded request");
    let locks = doc["locks"].as_array().expect("locks").clone();
    let mut all = Vec::new();
    for copy in 0..5 {
        for lock in &locks {
            let mut lock = lock.clone();
            lock["id"] = json!(format!("{}-{copy}", lock["id"].as_str().expect("an id")));
            all.push(lock);
        }
    }
    doc["locks"] = json!(all);
    if let Some(o) = doc.as_object_mut() {
        o.remove("expect");
    }
    std::fs::write(root.join(TEN_THOUSAND), doc.to_string()).expect("write 10,000 locks");
}

/// Transpiles the default policy with jco, then times each host on each
/// request: 3 s each in lockwarden and Node.js, [`GO_RUNS`] runs of 1 s in
/// Go.
pub fn compare() -> Vec<HostPair> {
    let root = root();
    let component = guests::DEFAULT.path();
    let transpiled = root.join("target/bench/jco");
    node_host::transpile(component, &transpiled);
    write_ten_thousand(&root);
    let requests: Vec<String> = REQUESTS
        .iter()
        .chain([&TEN_THOUSAND])
        .map(|r| r.to_string())
        .collect();
    let mut go = go_bench(component, &root, &requests);
    let cache = tempfile::tempdir().expect("temp dir");
    requests
        .into_iter()
        .map(|request| {
            let file = root.join(&request);
            let wasmtime = json_of(
                Command::new(lockwarden_bin())
                    .args(["policy", "bench", "--json", "--measurement-time", "3s"])
                    .arg("--policy")
                    .arg(component)
                    .arg("--request")
                    .arg(&file)
                    .env("LOCKWARDEN_CACHE_DIR", cache.path()),
            );
            let node = json_of(
                node_host::node()
                    .arg(node_host::dir().join("bench.mjs"))
                    .arg(&transpiled)
                    .arg(&file)
                    .arg("3"),
            );
            let entries = wasmtime["locks"].as_u64().unwrap_or(0);
            let go = go
                .remove(&locks_of(&file))
                .unwrap_or_else(|| panic!("go test -bench timed no {request}"));
            HostPair {
                request,
                entries,
                wasmtime: summary(&wasmtime),
                node: summary(&node),
                go: Summary::of(&go),
            }
        })
        .collect()
}

/// The number of locks in the recorded request `file`.
fn locks_of(file: &Path) -> usize {
    let text = std::fs::read_to_string(file).expect("a recorded request");
    let doc: Value = serde_json::from_str(&text).expect("JSON");
    doc["locks"].as_array().map_or(0, Vec::len)
}

/// hosts/go's BenchmarkEvaluate on `requests` with `component`: each
/// request's seconds per evaluation in each of [`GO_RUNS`] runs, by its
/// number of locks (the benchmark's name).
fn go_bench(
    component: &Path,
    root: &Path,
    requests: &[String],
) -> std::collections::HashMap<usize, Vec<f64>> {
    let dir = tempfile::tempdir().expect("temp dir");
    let fixtures = dir.path().join("fixtures.json");
    let doc = json!({
        "suites": [{"name": "default", "component": component, "cases": "", "rust": ""}],
        "guests": {},
        "cache_dir": dir.path().join("cache"),
        "bench_cases": requests.iter().map(|r| root.join(r)).collect::<Vec<_>>(),
    });
    std::fs::write(&fixtures, doc.to_string()).expect("write fixtures");
    let out = go(&host_module())
        .args([
            "test",
            "-run",
            "^$",
            "-bench",
            "^BenchmarkEvaluate$",
            "-benchtime",
            "1s",
        ])
        .arg(format!("-count={GO_RUNS}"))
        .env("LOCKWARDEN_GO_HOST_FIXTURES", &fixtures)
        .output()
        .expect("run go test -bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "go test -bench failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut runs = std::collections::HashMap::<usize, Vec<f64>>::new();
    for line in stdout.lines() {
        // BenchmarkEvaluate/locks=2000-2   	      60	  19834567 ns/op
        let fields: Vec<&str> = line.split_whitespace().collect();
        let Some(name) = fields
            .first()
            .and_then(|f| f.strip_prefix("BenchmarkEvaluate/locks="))
        else {
            continue;
        };
        let locks = name.split('-').next().and_then(|n| n.parse().ok());
        let nanos = fields.get(2).and_then(|n| n.parse::<f64>().ok());
        if let (Some(locks), Some(nanos), Some(&"ns/op")) = (locks, nanos, fields.get(3)) {
            runs.entry(locks).or_default().push(nanos / 1e9);
        }
    }
    runs
}
