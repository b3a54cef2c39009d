//! `lockwarden policy info|eval` as a user runs them.

use std::path::Path;

use lockwarden_tests::{finish, guests, lockwarden};
use serde_json::{Value, json};

fn request(locks: Value, settings: Value) -> Value {
    json!({
        "now": "2026-11-30T12:00:00Z",
        "local_hostname": "vm",
        "repository": {"id": "abc", "location": "/srv/repo", "backend": "local", "version": 2},
        "settings": settings,
        "locks": locks,
        "unreadable": [{"id": "e".repeat(64), "size": 0, "problem": "empty file"}],
    })
}

fn lock(id: char, time: &str, hostname: &str) -> Value {
    json!({"id": id.to_string().repeat(64), "time": time, "exclusive": false,
           "hostname": hostname, "username": "u", "pid": 12, "uid": 0, "gid": 0,
           "first_seen": null, "process": "unknown", "host": "unknown"})
}

fn eval(dir: &Path, request: &Value, extra: &[&str]) -> lockwarden_tests::Finished {
    let file = dir.join("request.json");
    std::fs::write(&file, request.to_string()).expect("write request");
    finish(
        lockwarden(&dir.join("cache"))
            .args(["policy", "eval", "--request"])
            .arg(&file)
            .args(extra),
    )
}

fn verdicts(stdout: &str) -> Vec<(String, String)> {
    let doc: Value = serde_json::from_str(stdout).expect("eval prints JSON");
    doc["verdicts"]
        .as_array()
        .expect("verdicts array")
        .iter()
        .map(|v| {
            (
                v["action"].as_str().expect("action").to_owned(),
                v["rule"].as_str().expect("rule").to_owned(),
            )
        })
        .collect()
}

#[test]
fn eval_removes_a_31_minute_old_lock_from_another_host_and_keeps_a_29_minute_old_one() {
    let dir = tempfile::tempdir().expect("temp dir");
    let req = request(
        json!([
            lock('a', "2026-11-30T11:29:00Z", "other"),
            lock('b', "2026-11-30T12:31:00+01:00", "other"),
        ]),
        json!({"stale-after": "30m"}),
    );
    let out = eval(dir.path(), &req, &[]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(
        verdicts(&out.stdout),
        [
            ("remove".into(), "expired".into()),
            ("keep".into(), "fresh".into()),
            ("keep".into(), "unreadable".into())
        ]
    );
    let doc: Value = serde_json::from_str(&out.stdout).expect("JSON");
    assert_eq!(doc["policy"]["name"], "lockwarden-default");
    assert_eq!(doc["verdicts"][0]["id"], "a".repeat(64));
    assert!(
        doc["verdicts"][0]["reason"]
            .as_str()
            .expect("reason")
            .contains("31m old"),
        "{}",
        out.stdout
    );
}

#[test]
fn eval_reads_the_request_from_stdin_and_serves_recorded_liveness() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut dead = lock('c', "2026-11-30T11:59:00Z", "vm");
    dead["process"] = json!({"state": "dead", "detail": "no process 12 on vm"});
    let req = request(json!([dead]), json!({}));
    let mut child = lockwarden(&dir.path().join("cache"))
        .args(["policy", "eval", "--request", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    use std::io::Write;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(req.to_string().as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("wait");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert_eq!(
        verdicts(&stdout)[0],
        ("remove".into(), "process-dead".into())
    );
    assert!(stdout.contains("no process 12 on vm"), "{stdout}");
}

#[test]
fn invalid_json_is_a_usage_error_naming_line_and_column() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("broken.json");
    std::fs::write(
        &file,
        "{\n  \"now\": \"2026-11-30T12:00:00Z\",\n  \"locks\": [,]\n}",
    )
    .expect("write");
    let out = finish(
        lockwarden(&dir.path().join("cache"))
            .args(["policy", "eval", "--request"])
            .arg(&file),
    );
    out.assert_exit(2, "broken.json");
    assert!(out.stderr.contains("line 3 column"), "{}", out.stderr);
}

#[test]
fn bad_settings_are_usage_errors_naming_the_key() {
    let dir = tempfile::tempdir().expect("temp dir");
    for (settings, want) in [
        (json!({"stale-afer": "30m"}), "unknown setting `stale-afer`"),
        (
            json!({"stale-after": "half an hour"}),
            "setting `stale-after`",
        ),
    ] {
        let out = eval(dir.path(), &request(json!([]), settings), &[]);
        out.assert_exit(2, want);
        assert!(
            out.stdout.is_empty(),
            "no verdicts on error: {}",
            out.stdout
        );
    }
}

#[test]
fn a_misbehaving_policy_file_fails_the_command_with_a_clear_message() {
    let dir = tempfile::tempdir().expect("temp dir");
    let req = request(json!([lock('a', "2026-11-30T11:00:00Z", "x")]), json!({}));
    let spin = guests::SPIN.path();
    let out = eval(
        dir.path(),
        &req,
        &["--policy", spin.to_str().expect("utf-8 path")],
    );
    out.assert_exit(1, "did not finish within 1000 ms");
    assert!(out.stdout.is_empty());

    let missing = finish(lockwarden(&dir.path().join("cache")).args([
        "policy",
        "info",
        "--policy",
        "/nonexistent/policy.wasm",
    ]));
    assert_eq!(missing.code, 1);
    assert!(
        missing
            .stderr
            .contains("cannot read policy /nonexistent/policy.wasm"),
        "{}",
        missing.stderr
    );
}

#[test]
fn info_lists_the_settings_with_defaults() {
    let dir = tempfile::tempdir().expect("temp dir");
    let text = finish(lockwarden(&dir.path().join("cache")).args(["policy", "info"]));
    assert_eq!(text.code, 0, "{text:?}");
    for want in [
        "lockwarden-default",
        "lockwarden:policy@0.2.0",
        "stale-after",
        "max-clock-skew",
        "unreadable-after",
    ] {
        assert!(
            text.stdout.contains(want),
            "{want} missing in:\n{}",
            text.stdout
        );
    }
    let json = finish(lockwarden(&dir.path().join("cache")).args(["policy", "info", "--json"]));
    let doc: Value = serde_json::from_str(&json.stdout).expect("JSON");
    let settings: Vec<_> = doc["settings"]
        .as_array()
        .expect("settings")
        .iter()
        .map(|s| {
            (
                s["name"].as_str().expect("name"),
                s["default"].as_str().expect("default"),
            )
        })
        .collect();
    assert_eq!(
        settings,
        [
            ("stale-after", "30m"),
            ("max-clock-skew", "1m"),
            ("unreadable-after", "1h (or stale-after, when longer)")
        ]
    );
    assert_eq!(doc["contract_version"], "0.2.0");
}

/// `--version` names the commit this checkout is at, both contracts the host
/// runs and the wasmtime version `Cargo.lock` pins.
#[test]
fn version_names_commit_contracts_and_wasmtime() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = finish(lockwarden(dir.path()).arg("--version"));
    out.assert_exit(0, "");
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let head = std::process::Command::new("git")
        .arg("-C")
        .arg(&workspace)
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .expect("git runs");
    let head = String::from_utf8_lossy(&head.stdout).trim().to_owned();
    let lock = std::fs::read_to_string(workspace.join("Cargo.lock")).expect("Cargo.lock");
    let wasmtime = lock
        .split("[[package]]")
        .find(|p| p.contains("\nname = \"wasmtime\"\n"))
        .and_then(|p| p.split("version = \"").nth(1))
        .and_then(|v| v.split('"').next())
        .expect("wasmtime in Cargo.lock");
    let expected = format!(
        "lockwarden {} (commit {head})\npolicy contracts: lockwarden:policy@0.2.0, \
         lockwarden:policy@0.1.0\nwasmtime: {wasmtime}\n",
        env!("CARGO_PKG_VERSION")
    );
    assert!(!head.is_empty(), "a git checkout");
    assert_eq!(out.stdout, expected);
}
