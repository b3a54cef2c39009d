//! The same policy component in two hosts: wasmtime inside lockwarden and
//! Node.js through jco, each timed by its own bench (`lockwarden policy bench`,
//! `tests/node-host/bench.mjs`) on the same recorded requests.

use std::path::{Path, PathBuf};
use std::process::Command;

use lockwarden::stats::Summary;
use lockwarden_tests::{guests, lockwarden_bin, node_host};
use serde_json::Value;

/// One request timed in both hosts.
pub struct HostPair {
    /// The request file, relative to the workspace.
    pub request: &'static str,
    /// Locks and unreadable files in it.
    pub entries: u64,
    /// One evaluation in lockwarden (wasmtime).
    pub wasmtime: Summary,
    /// One evaluation in Node.js (jco).
    pub node: Summary,
}

const REQUESTS: [&str; 2] = [
    "examples/request.json",
    "tests/conformance/32-thousands-of-locks.json",
];

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

/// Transpiles the default policy with jco, then times both hosts on each
/// request, 3 s each.
pub fn compare() -> Vec<HostPair> {
    let root = root();
    let component = guests::DEFAULT.path();
    let transpiled = root.join("target/bench/jco");
    node_host::transpile(component, &transpiled);
    let cache = tempfile::tempdir().expect("temp dir");
    REQUESTS
        .iter()
        .map(|request| {
            let file = root.join(request);
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
            HostPair {
                request,
                entries: wasmtime["locks"].as_u64().unwrap_or(0),
                wasmtime: summary(&wasmtime),
                node: summary(&node),
            }
        })
        .collect()
}
