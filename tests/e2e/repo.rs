//! `lockwarden check` and `unlock` on real restic repositories, against real
//! restic processes, compared with `restic unlock`.

use std::path::Path;
use std::process::Command;

use lockwarden_tests::adversary::{entry, ids, problem, this_hostname};
use lockwarden_tests::lock_writer::{Encoding, LockSpec, LockWriter, time_from_now};
use lockwarden_tests::restic::{
    Holder, REST_PASS, RestServer, TestRepo, free_port, swift_through_restic,
};
use lockwarden_tests::{finish, lockwarden};
use serde_json::Value;

const MINUTE: i64 = 60;

/// (action, rule, reason) of lock `id` in a check document.
fn verdict(doc: &Value, id: &str) -> (String, String, String) {
    let entry = entry(doc, id);
    let s = |k: &str| entry[k].as_str().unwrap_or_default().to_owned();
    (s("action"), s("rule"), s("reason"))
}

/// Removes the locks a test left on purpose, so restic's exclusive commands
/// can run in [`TestRepo::assert_usable`].
fn clear_locks(repo: &TestRepo) {
    for id in repo.lock_ids() {
        std::fs::remove_file(repo.path.join("locks").join(id)).expect("remove test lock");
    }
}

#[test]
fn the_lock_writer_writes_what_restic_reads() {
    let repo = TestRepo::init_local();
    let writer = LockWriter::new(&repo);
    for encoding in [Encoding::Raw, Encoding::Zstd] {
        let id = writer.write(LockSpec {
            time: time_from_now(-60),
            hostname: "writer-host",
            pid: 4242,
            exclusive: true,
            encoding,
        });
        let out = repo.restic(&["cat", "lock", &id, "--no-lock"]);
        assert_eq!(out.code, 0, "{encoding:?}: {out:?}");
        let json: Value = serde_json::from_str(&out.stdout).expect("restic prints JSON");
        assert_eq!(json["hostname"], "writer-host", "{encoding:?}");
        assert_eq!(json["pid"], 4242);
    }
}

#[test]
fn a_killed_holder_is_removed_and_a_live_one_kept() {
    let repo = TestRepo::init_local();
    let live = Holder::start(&repo);
    let dead = Holder::start(&repo).kill();

    let (code, doc) = repo.check_json();
    assert_eq!(
        code, 3,
        "check exits 3 when something would be removed: {doc:#}"
    );
    let (action, rule, reason) = verdict(&doc, &dead);
    assert_eq!(
        (action.as_str(), rule.as_str()),
        ("remove", "process-dead"),
        "{reason}"
    );
    assert!(reason.contains("no process"), "{reason}");
    let (action, rule, reason) = verdict(&doc, &live.lock_id);
    assert_eq!(
        (action.as_str(), rule.as_str()),
        ("keep", "holder-alive"),
        "{reason}"
    );
    assert!(
        reason.contains(&format!("process {}", live.pid)),
        "{reason}"
    );
    assert_eq!(doc["repository"]["backend"], "local");
    assert_eq!(doc["summary"]["remove"], 1);

    let out = repo.warden("unlock", &[]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout.contains(&format!("removed {}", &dead[..8])),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("process-dead"), "{}", out.stdout);
    let left = repo.lock_ids();
    assert!(!left.contains(&dead), "the dead holder's lock is gone");
    assert!(left.contains(&live.lock_id), "the live holder's lock stays");

    drop(live);
    repo.assert_usable();
}

#[test]
fn locks_from_other_hosts_are_judged_by_age() {
    let repo = TestRepo::init_local();
    // Written by restic itself on "otherhost", then killed: young, kept.
    let restic_young = Holder::start_on_host(&repo, "otherhost").kill();
    let writer = LockWriter::new(&repo);
    let old = writer.write(LockSpec {
        time: time_from_now(-31 * MINUTE),
        hostname: "otherhost",
        pid: 77,
        exclusive: true,
        encoding: Encoding::Raw,
    });
    let young = writer.write(LockSpec {
        time: time_from_now(-10 * MINUTE),
        hostname: "otherhost",
        pid: 78,
        ..LockSpec::default()
    });
    let future = writer.write(LockSpec {
        time: time_from_now(120 * MINUTE),
        hostname: "skewed",
        pid: 79,
        ..LockSpec::default()
    });

    let (code, doc) = repo.check_json();
    assert_eq!(code, 3);
    let rule = |id: &str| {
        let (a, r, _) = verdict(&doc, id);
        (a, r)
    };
    assert_eq!(rule(&restic_young), ("keep".into(), "fresh".into()));
    assert_eq!(rule(&old), ("remove".into(), "expired".into()));
    assert_eq!(rule(&young), ("keep".into(), "fresh".into()));
    assert_eq!(rule(&future), ("keep".into(), "future-time".into()));
    let (_, _, reason) = verdict(&doc, &restic_young);
    assert!(
        reason.contains("otherhost"),
        "evidence detail is in the reason: {reason}"
    );

    assert_eq!(repo.warden("unlock", &[]).code, 0);
    assert_eq!(repo.lock_ids(), ids(&[&restic_young, &young, &future]));
    clear_locks(&repo);
    repo.assert_usable();
}

#[test]
fn a_reused_pid_does_not_keep_a_lock_alive() {
    let repo = TestRepo::init_local();
    // A process that exists now but started long after the lock's time.
    let mut sleeper = Command::new("sleep")
        .arg("60")
        .spawn()
        .expect("spawn sleep");
    let writer = LockWriter::new(&repo);
    let id = writer.write(LockSpec {
        time: time_from_now(-10 * MINUTE),
        hostname: &this_hostname(),
        pid: i64::from(sleeper.id()),
        ..LockSpec::default()
    });
    let (_, doc) = repo.check_json();
    let (action, rule, reason) = verdict(&doc, &id);
    assert_eq!(
        (action.as_str(), rule.as_str()),
        ("remove", "process-dead"),
        "{reason}"
    );
    assert!(reason.contains("pid reused"), "{reason}");
    assert_eq!(repo.warden("unlock", &[]).code, 0);
    assert!(repo.lock_ids().is_empty());
    assert!(
        sleeper.try_wait().expect("poll").is_none(),
        "the sleeper was not signalled"
    );
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    repo.assert_usable();
}

/// Lock files of a repository that are not locks it can read, one of each
/// kind.
struct Unreadable {
    /// An empty file.
    empty: String,
    /// 200 bytes of noise.
    corrupt: String,
    /// A lock sealed with another repository's key.
    foreign: String,
    /// A valid lock stored under the wrong name.
    misnamed: String,
}

impl Unreadable {
    /// Writes one of each into `repo`.
    fn write(repo: &TestRepo) -> Unreadable {
        let writer = LockWriter::new(repo);
        // Empty (never under e3b0c442..., the SHA-256 of nothing, which makes
        // restic 0.14 panic).
        let empty = "0e".repeat(32);
        writer.write_named(&empty, b"");
        let corrupt = writer.write_bytes(&[0x5a; 200]);
        let stale = || LockSpec {
            time: time_from_now(-40 * MINUTE),
            hostname: "x",
            pid: 1,
            encoding: Encoding::Raw,
            ..LockSpec::default()
        };
        let other = TestRepo::init_local();
        let foreign = LockWriter::new(&other).write(stale());
        let foreign_bytes = std::fs::read(other.path.join("locks").join(&foreign)).expect("read");
        writer.write_named(&foreign, &foreign_bytes);
        let misnamed = "ab".repeat(32);
        let good = writer.write(stale());
        let good_bytes = std::fs::read(repo.path.join("locks").join(&good)).expect("read");
        std::fs::remove_file(repo.path.join("locks").join(&good)).expect("rm");
        writer.write_named(&misnamed, &good_bytes);
        Unreadable {
            empty,
            corrupt,
            foreign,
            misnamed,
        }
    }
}

#[test]
fn unreadable_lock_files_are_reported_and_never_removed() {
    let repo = TestRepo::init_local();
    let files = Unreadable::write(&repo);

    let (code, doc) = repo.check_json();
    assert_eq!(code, 0, "nothing to remove: {doc:#}");
    let kept_unreadable = |id: &str| {
        let (action, rule, _) = verdict(&doc, id);
        assert_eq!(
            (action.as_str(), rule.as_str()),
            ("keep", "unreadable"),
            "{id}"
        );
        problem(&doc, id)
    };
    assert_eq!(kept_unreadable(&files.empty), "empty file");
    for (id, part) in [
        (&files.corrupt, "MAC check failed"),
        (&files.foreign, "MAC check failed"),
        (&files.misnamed, "does not match its name"),
    ] {
        let problem = kept_unreadable(id);
        assert!(problem.contains(part), "{problem}");
    }

    let before = repo.lock_ids();
    let out = repo.warden("unlock", &[]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(repo.lock_ids(), before, "unreadable files stay");
    let text = repo.warden("check", &[]);
    assert!(
        text.stdout
            .contains("unreadable 0e0e0e0e (0 bytes): empty file"),
        "{}",
        text.stdout
    );
}

#[test]
fn a_wrong_password_exits_12_and_touches_nothing() {
    let repo = TestRepo::init_local();
    let stale = LockWriter::new(&repo).write(LockSpec {
        time: time_from_now(-2 * 60 * MINUTE),
        hostname: "gone",
        pid: 5,
        exclusive: true,
        encoding: Encoding::Raw,
    });
    let wrong = repo.dir.path().join("wrong-password");
    std::fs::write(&wrong, "not the password").expect("write");
    let out = finish(
        lockwarden(&repo.dir.path().join("cache"))
            .args(["unlock", "-r", &repo.location, "--password-file"])
            .arg(&wrong),
    );
    out.assert_exit(12, "wrong password");
    assert!(
        out.stderr.contains(&repo.location),
        "names the repository: {}",
        out.stderr
    );
    assert!(repo.lock_ids().contains(&stale), "nothing was removed");
}

#[test]
fn a_missing_repository_exits_10() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join("pw"), "x").expect("pw");
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    for location in [dir.path().join("nothing-here"), empty] {
        let out = finish(
            lockwarden(&dir.path().join("cache"))
                .arg("check")
                .arg("-r")
                .arg(&location)
                .arg("-p")
                .arg(dir.path().join("pw")),
        );
        out.assert_exit(10, "no restic repository at");
        assert!(
            out.stderr.contains("restic init"),
            "says what to do: {}",
            out.stderr
        );
    }
    let usage = finish(
        lockwarden(&dir.path().join("cache"))
            .arg("check")
            .env_remove("RESTIC_REPOSITORY"),
    );
    usage.assert_exit(2, "no repository given");
}

#[test]
fn repository_and_password_come_from_restics_environment_variables() {
    let repo = TestRepo::init_local();
    let stale = LockWriter::new(&repo).write(LockSpec {
        time: time_from_now(-45 * MINUTE),
        hostname: "gone",
        pid: 5,
        encoding: Encoding::Raw,
        ..LockSpec::default()
    });
    let location_file = repo.dir.path().join("repository");
    std::fs::write(&location_file, format!("{}\n", repo.location)).expect("write");
    let out = finish(
        lockwarden(&repo.dir.path().join("cache"))
            .arg("check")
            .env("RESTIC_REPOSITORY_FILE", &location_file)
            .env(
                "RESTIC_PASSWORD_COMMAND",
                format!("cat {}", repo.password_file().display()),
            )
            .env_remove("RESTIC_REPOSITORY"),
    );
    assert_eq!(out.code, 3, "{out:?}");
    assert!(out.stdout.contains(&stale[..8]), "{}", out.stdout);
    let both = finish(
        lockwarden(&repo.dir.path().join("cache"))
            .args(["check", "-r", &repo.location])
            .env("RESTIC_REPOSITORY_FILE", &location_file)
            .env("RESTIC_PASSWORD", "x"),
    );
    assert_eq!(
        both.code, 2,
        "-r and a repository file conflict, as in restic: {both:?}"
    );
}

/// A repository `restic init` made over REST (its calibrated key, the
/// layout restic gives it there), not one of the tests' template.
#[test]
fn a_repository_restic_init_made_over_rest_is_cleaned() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = RestServer::start(&dir.path().join("served"));
    let repo = TestRepo::at(
        format!("rest:{}/made-by-restic", server.base),
        server.root.join("made-by-restic"),
    );
    repo.init();
    repo.assert_cleaned_as_restic_made_it();
}

#[test]
fn the_same_repository_over_rest() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = RestServer::start(&dir.path().join("served"));
    let repo = server.init_repo("repo");
    let live = Holder::start(&repo);
    let dead = Holder::start(&repo).kill();
    let writer = LockWriter::new(&repo);
    let old = writer.write(LockSpec {
        time: time_from_now(-31 * MINUTE),
        hostname: "elsewhere",
        pid: 9,
        exclusive: true,
        ..LockSpec::default()
    });

    let (code, doc) = repo.check_json();
    assert_eq!(code, 3, "{doc:#}");
    assert_eq!(doc["repository"]["backend"], "rest");
    assert_eq!(verdict(&doc, &dead).1, "process-dead");
    assert_eq!(verdict(&doc, &old).1, "expired");
    assert_eq!(verdict(&doc, &live.lock_id).1, "holder-alive");
    let shown = doc["repository"]["location"].as_str().expect("location");
    assert!(
        shown.contains(":***@") && !shown.contains(REST_PASS),
        "{shown}"
    );

    let out = repo.warden("unlock", &[]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(!out.stdout.contains(REST_PASS) && !out.stderr.contains(REST_PASS));
    assert_eq!(repo.lock_ids(), ids(&[&live.lock_id]));
    drop(live);
    repo.assert_usable();
}

#[test]
fn an_unreachable_server_is_an_error_that_names_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let repo = TestRepo::at(
        format!("rest:http://user:hunter2@127.0.0.1:{}/repo", free_port()),
        dir.path().join("none"),
    );
    let out = repo.warden("unlock", &[]);
    assert_eq!(out.code, 14, "unreachable has its own exit code: {out:?}");
    assert!(
        out.stderr
            .contains("cannot reach rest:http://user:***@127.0.0.1"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("is the server running"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("hunter2"));
}

#[test]
fn other_backends_are_read_through_restic_and_unlock_refuses_there() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (repo, _log) = swift_through_restic(dir.path());
    let path = repo.path.clone();
    let stale =
        LockWriter::for_dir(Path::new(&path), lockwarden_tests::restic::PASSWORD).write(LockSpec {
            time: time_from_now(-40 * MINUTE),
            hostname: "far",
            pid: 3,
            ..LockSpec::default()
        });
    let (code, doc) = repo.check_json();
    assert_eq!(code, 3, "{doc:#}");
    assert_eq!(doc["repository"]["backend"], "swift");
    assert_eq!(verdict(&doc, &stale).1, "expired");
    let out = repo.warden("unlock", &[]);
    out.assert_exit(1, "cannot remove a lock there by id");
    assert!(repo.lock_ids().contains(&stale), "nothing removed");
    let dry = repo.warden("unlock", &["--dry-run"]);
    assert_eq!(dry.code, 0, "{dry:?}");
    assert!(
        dry.stdout
            .contains(&format!("would remove {}", &stale[..8])),
        "{}",
        dry.stdout
    );
}

/// Through restic, a lock file restic cannot read is reported unreadable,
/// not taken for gone, and however many there are, confirming that they are
/// still listed costs at most a few extra listings (one serves every read
/// that failed before it began), not one per file.
#[test]
fn unreadable_locks_read_through_restic_are_kept_with_bounded_relisting() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (repo, log) = swift_through_restic(dir.path());
    let writer = LockWriter::for_dir(&repo.path, lockwarden_tests::restic::PASSWORD);
    let damaged: Vec<String> = (0..12u8).map(|i| writer.write_bytes(&[i; 100])).collect();
    let out = finish(repo.lockwarden("check").arg("--json"));
    let (_, doc) = out.json();
    assert_eq!(out.code, 0, "{doc:#}");
    for id in &damaged {
        assert_eq!(entry(&doc, id)["action"], "keep", "{doc:#}");
    }
    let calls = std::fs::read_to_string(&log).expect("calls logged");
    let listings = calls
        .lines()
        .filter(|l| l.starts_with("list locks"))
        .count();
    // One listing to judge, then far fewer than one per damaged file.
    assert!(
        listings >= 2 && listings <= damaged.len() / 2,
        "{listings} listings for {} unreadable locks:\n{calls}",
        damaged.len()
    );
}

/// The HTTP stacks' trace output dumps request headers: whatever
/// LOCKWARDEN_LOG asks, the basic-auth credentials never reach the log.
#[test]
fn trace_logging_shows_no_credentials() {
    use base64::Engine as _;
    let root = tempfile::tempdir().expect("temp dir");
    let server = RestServer::start(root.path());
    let repo = server.init_repo("traced");
    let out = finish(repo.lockwarden("check").env("LOCKWARDEN_LOG", "trace"));
    assert_eq!(out.code, 0, "{out:?}");
    let basic = base64::engine::general_purpose::STANDARD.encode(format!(
        "{}:{REST_PASS}",
        lockwarden_tests::restic::REST_USER
    ));
    for secret in [REST_PASS, basic.as_str()] {
        assert!(
            !out.stderr.contains(secret),
            "{secret} in the trace log: {}",
            out.stderr
        );
    }
    assert!(out.stderr.contains("TRACE"), "trace logging is on");
}
