//! The native `rclone:` backend against the real rclone (`rclone serve
//! restic --stdio`, as restic runs it), on `:local:` remotes and a `crypt`
//! remote over one, compared with restic on the same locations. The
//! backend suite runs its cases on `rclone:` too (`backend_suite::rclone`),
//! the reference scenario among them.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use lockwarden_tests::adversary::{all_output, ids};
use lockwarden_tests::lock_writer::{LockSpec, LockWriter, time_from_now};
use lockwarden_tests::restic::TestRepo;
use lockwarden_tests::{Finished, TEST_MARKER, assert_none_left, finish};
use serde_json::Value;

const MINUTE: i64 = 60;

/// `lockwarden <command> -r <repo> -p <password file> <extra>`, with a marker
/// in its environment that every process it starts inherits.
fn warden(repo: &TestRepo, command: &str, extra: &[&str], marker: &str) -> Finished {
    finish(
        repo.lockwarden(command)
            .args(extra)
            .env("RCLONE_CONFIG", "/dev/null")
            .env(TEST_MARKER, marker),
    )
}

fn check_json(repo: &TestRepo, marker: &str) -> (i32, Value) {
    warden(repo, "check", &["--json"], marker).json()
}

/// A marker unique to this test run, for [`lockwarden_tests::live_processes`].
fn marker(name: &str) -> String {
    format!("lockwarden-rclone-{name}-{}", std::process::id())
}

/// Writes an executable shell script.
fn script(path: &Path, body: &str) -> PathBuf {
    std::fs::write(path, format!("#!/bin/sh\n{body}")).expect("write script");
    std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    path.to_owned()
}

#[test]
fn one_check_costs_one_rclone_and_one_request_per_file() {
    let marker = marker("cost");
    let repo = TestRepo::init_over_rclone();
    let writer = LockWriter::new(&repo);
    for pid in 0..3 {
        writer.write(LockSpec {
            hostname: "elsewhere",
            pid,
            ..LockSpec::default()
        });
    }
    // rclone with its requests logged; the script lingers after rclone
    // exits unless lockwarden kills its process group.
    let log = repo.dir.path().join("rclone.log");
    let wrapper = script(
        &repo.dir.path().join("rclone-logged"),
        &format!(
            "echo START >> {log}\nrclone \"$@\" -vv 2>> {log}\nsleep 30\n",
            log = log.display()
        ),
    );
    let started = Instant::now();
    let out = finish(
        repo.lockwarden("check")
            .env("RCLONE_CONFIG", "/dev/null")
            .env("LOCKWARDEN_TEST_MARKER", &marker)
            .env("LOCKWARDEN_RCLONE_PROGRAM", &wrapper),
    );
    let ours = started.elapsed();
    assert_eq!(out.code, 0, "{out:?}");
    assert_none_left(&marker);
    let logged = std::fs::read_to_string(&log).expect("rclone log");
    let starts = logged.lines().filter(|l| *l == "START").count();
    let requests: Vec<&str> = logged
        .lines()
        .filter(|l| l.contains(": GET /") || l.contains(": DELETE /"))
        .collect();
    assert_eq!(starts, 1, "{logged}");
    // config, keys/, the key, locks/, and each lock.
    assert_eq!(requests.len(), 4 + 3, "{requests:#?}");

    let started = Instant::now();
    let restic = repo.restic(&["list", "locks", "--no-lock"]);
    let theirs = started.elapsed();
    assert_eq!(restic.code, 0, "{restic:?}");
    eprintln!(
        "lockwarden check over rclone: {ours:?} (1 rclone, {} requests); \
         restic list locks over rclone: {theirs:?}",
        requests.len()
    );
}

#[test]
fn a_secret_in_the_connection_string_never_shows() {
    let marker = marker("secret");
    let dir = tempfile::tempdir().expect("temp dir");
    let secret = "hunter2-crypt-SECRET";
    let obscured = Command::new("rclone")
        .args(["obscure", secret])
        .output()
        .expect("rclone obscure");
    let obscured = String::from_utf8(obscured.stdout).expect("utf-8");
    let obscured = obscured.trim();
    let storage = dir.path().join("storage");
    std::fs::create_dir(&storage).expect("storage dir");
    let crypt = format!(":crypt,remote={},password={obscured}:", storage.display());
    let repo = TestRepo::at(format!("rclone:{crypt}repo"), storage.join("unused"));
    repo.init();
    let names: Vec<_> = std::fs::read_dir(&storage)
        .expect("storage")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(
        !names.iter().any(|n| n == "repo"),
        "crypt encrypted the names: {names:?}"
    );

    let (code, doc) = check_json(&repo, &marker);
    assert_eq!(code, 0, "{doc:#}");
    let shown = doc["repository"]["location"].as_str().expect("location");
    assert!(shown.contains("password=***"), "{shown}");
    let out = warden(&repo, "unlock", &[], &marker);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(!all_output(&out).contains(obscured), "{out:?}");
    assert!(!doc.to_string().contains(obscured), "{doc:#}");

    // A path with no repository: exit 10, the location redacted.
    let missing = TestRepo::at(format!("rclone:{crypt}none"), storage.join("none"));
    let out = warden(&missing, "check", &[], &marker);
    assert_eq!(out.code, 10, "{out:?}");
    assert!(out.stderr.contains("password=***"), "{}", out.stderr);
    assert!(!all_output(&out).contains(obscured), "{out:?}");

    // rclone refuses a password that is not obscured and quotes the whole
    // connection string on stderr: lockwarden shows it, without the secret.
    let plain = format!(":crypt,remote={},password={secret}:", storage.display());
    let refused = TestRepo::at(format!("rclone:{plain}repo"), storage.join("x"));
    let out = warden(&refused, "check", &[], &marker);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("rclone exited"), "{}", out.stderr);
    assert!(out.stderr.contains("is it obscured"), "{}", out.stderr);
    assert!(!all_output(&out).contains(secret), "{out:?}");
    assert!(!all_output(&out).contains("hunter2"), "{out:?}");
    assert_none_left(&marker);
}

#[test]
fn an_rclone_that_never_answers_ends_within_the_timeout_and_is_killed() {
    let marker = marker("hang");
    let repo = TestRepo::init_over_rclone();
    let stale = LockWriter::new(&repo).write(LockSpec {
        time: time_from_now(-120 * MINUTE),
        ..LockSpec::default()
    });
    // Reads its stdin and never answers, with a child of its own that
    // outlives it unless its whole process group is killed.
    let mute = script(
        &repo.dir.path().join("mute-rclone"),
        "sleep 30 &\ncat > /dev/null\n",
    );
    let started = Instant::now();
    let out = finish(
        repo.lockwarden("unlock")
            .args(["--timeout", "3s"])
            .env("LOCKWARDEN_TEST_MARKER", &marker)
            .env("LOCKWARDEN_RCLONE_PROGRAM", &mute),
    );
    let took = started.elapsed();
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("no answer within 3s"), "{}", out.stderr);
    assert!(
        took >= Duration::from_secs(3) && took < Duration::from_secs(10),
        "{took:?}"
    );
    assert_eq!(repo.lock_ids(), ids(&[&stale]), "nothing removed");
    assert_none_left(&marker);
}

#[test]
fn an_unknown_remote_or_a_missing_rclone_is_a_clear_error() {
    let marker = marker("unknown");
    let dir = tempfile::tempdir().expect("temp dir");
    let repo = TestRepo::at("rclone:nosuchremote:repo".into(), dir.path().join("none"));
    let out = warden(&repo, "check", &[], &marker);
    out.assert_exit(1, "rclone:nosuchremote:repo");
    assert!(
        out.stderr.contains("didn't find section in config file"),
        "rclone's reason is shown: {}",
        out.stderr
    );

    let out = finish(
        repo.lockwarden("check")
            .env("LOCKWARDEN_TEST_MARKER", &marker)
            .env(
                "LOCKWARDEN_RCLONE_PROGRAM",
                dir.path().join("no-rclone-here"),
            ),
    );
    out.assert_exit(1, "cannot start");
    assert!(
        out.stderr.contains("LOCKWARDEN_RCLONE_PROGRAM"),
        "{}",
        out.stderr
    );

    let missing = rclone_missing_path(dir.path());
    let out = warden(&missing, "check", &[], &marker);
    out.assert_exit(10, "no restic repository at rclone::local:");
    assert_none_left(&marker);
}

/// An `rclone::local:` location where nothing is.
fn rclone_missing_path(dir: &Path) -> TestRepo {
    let path = dir.join("nothing-here");
    TestRepo::at(format!("rclone::local:{}", path.display()), path)
}
