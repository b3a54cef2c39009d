//! The native SFTP backend against a real OpenSSH server and real restic
//! processes: the reference scenario of `repo.rs` with a secret in the URL
//! and a Host alias, and each way the connection can fail. Parity with
//! `restic unlock` is the backend suite's (`backend_suite.rs`).

use std::path::Path;
use std::time::{Duration, Instant};

use lockwarden_tests::adversary::{entry, file_type, ids, mkfifo, problem};
use lockwarden_tests::finish;
use lockwarden_tests::guard::finish_guarded;
use lockwarden_tests::lock_writer::{LockSpec, LockWriter, time_from_now};
use lockwarden_tests::restic::{Holder, PASSWORD, TestRepo, free_port};
use lockwarden_tests::sshd::{SSH_ALIAS, Sshd};
use serde_json::Value;

const MINUTE: i64 = 60;
/// A password in the URL: restic ignores it, lockwarden must never show it.
const SECRET: &str = "hunter2-sftp-secret";

fn rule(doc: &Value, id: &str) -> String {
    entry(doc, id)["rule"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn a_killed_holder_and_an_old_lock_are_removed_over_sftp_and_live_ones_kept() {
    let server = Sshd::start();
    eprintln!("sshd started in {:?}", server.started_in);
    let repo = server.init_repo_at("repo", |path| server.url(path, Some(SECRET)));
    let live = Holder::start(&repo);
    let dead = Holder::start(&repo).kill();
    let writer = LockWriter::new(&repo);
    let old = writer.write(LockSpec {
        time: time_from_now(-2 * 3600),
        hostname: "elsewhere",
        pid: 9,
        exclusive: true,
        ..LockSpec::default()
    });
    let young = writer.write(LockSpec {
        time: time_from_now(-5 * MINUTE),
        hostname: "elsewhere-young",
        pid: 10,
        ..LockSpec::default()
    });

    let out = repo.warden("check", &["--json"]);
    out.assert_no_secret(&[SECRET, PASSWORD]);
    let (_, doc) = out.json();
    assert_eq!(out.code, 3, "{doc:#}");
    assert_eq!(doc["repository"]["backend"], "sftp");
    assert_eq!(rule(&doc, &dead), "process-dead");
    assert_eq!(rule(&doc, &old), "expired");
    assert_eq!(rule(&doc, &live.lock_id), "holder-alive");
    assert_eq!(rule(&doc, &young), "fresh");
    let shown = doc["repository"]["location"].as_str().expect("location");
    assert!(shown.contains(":***@127.0.0.1"), "{shown}");

    let out = repo.warden("unlock", &[]);
    out.assert_no_secret(&[SECRET, PASSWORD]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout.contains(&format!("removed {}", &dead[..8])),
        "{out:?}"
    );
    assert_eq!(repo.lock_ids(), ids(&[&live.lock_id, &young]));

    // The other form, through a Host alias of the ssh configuration.
    let mut aliased = TestRepo::at(
        format!("sftp:{SSH_ALIAS}:{}", repo.path.display()),
        repo.path.clone(),
    );
    aliased.env = server.env();
    std::fs::copy(repo.password_file(), aliased.password_file()).expect("password file");
    let (code, doc) = aliased.check_json();
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(rule(&doc, &young), "fresh");

    drop(live);
    std::fs::remove_file(repo.path.join("locks").join(&young)).expect("remove young lock");
    repo.assert_usable();
}

/// A repository `restic init` made over SFTP (its calibrated key, the
/// layout restic gives it there), not one of the tests' template.
#[test]
fn a_repository_restic_init_made_over_sftp_is_cleaned() {
    let server = Sshd::start();
    let path = server.root.join("made-by-restic");
    let mut repo = TestRepo::at(server.url(&path, None), path);
    repo.env = server.env();
    repo.init();
    repo.assert_cleaned_as_restic_made_it();
}

/// Under a lock's name, a FIFO, a directory and a symlink (to a valid,
/// stale lock outside `locks/`) are reported unreadable without being
/// opened or followed, an oversized file is reported with its size, and
/// none of them is removed, while a stale lock beside them is.
#[test]
fn files_that_are_not_regular_locks_are_reported_and_left_alone() {
    let server = Sshd::start();
    let repo = server.init_repo("repo");
    let locks = repo.path.join("locks");
    let writer = LockWriter::new(&repo);
    let old = || LockSpec {
        time: time_from_now(-2 * 3600),
        ..LockSpec::default()
    };
    let stale = writer.write(old());
    let linked = writer.write(old());
    let outside = repo.dir.path().join("outside");
    std::fs::rename(locks.join(&linked), &outside).expect("move lock out");
    std::os::unix::fs::symlink(&outside, locks.join(&linked)).expect("symlink");
    let fifo = "1f".repeat(32);
    mkfifo(&locks.join(&fifo));
    let dir = "d1".repeat(32);
    std::fs::create_dir(locks.join(&dir)).expect("dir");
    let big = "0b".repeat(32);
    writer.write_named(&big, &vec![0u8; 70_000]);

    let out = finish_guarded(repo.lockwarden("check").arg("--json"));
    let (_, doc) = out.json();
    assert_eq!(out.code, 3, "{doc:#}");
    assert_eq!(rule(&doc, &stale), "expired");
    for (id, what) in [
        (&linked, "a symbolic link"),
        (&fifo, "a FIFO"),
        (&dir, "a directory"),
    ] {
        assert_eq!(rule(&doc, id), "not-a-lock-file", "{id}");
        assert_eq!(problem(&doc, id), what, "{doc:#}");
    }
    assert!(problem(&doc, &big).contains("70000"), "{doc:#}");

    let out = finish_guarded(repo.lockwarden("unlock").arg("--timeout").arg("10s"));
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(repo.lock_ids(), ids(&[&linked, &fifo, &dir, &big]));
    assert_eq!(file_type(&locks.join(&linked)), "symlink");
    assert_eq!(file_type(&locks.join(&fifo)), "fifo");
    assert_eq!(file_type(&outside), "file");
}

#[test]
fn connection_failures_exit_with_their_own_codes_and_show_no_secret() {
    let server = Sshd::start();
    let repo = server.init_repo("repo");
    let at = |location: String| {
        let mut other = TestRepo::at(location, repo.path.clone());
        other.env = server.env();
        std::fs::copy(repo.password_file(), other.password_file()).expect("password file");
        other
    };

    let nobody = at(format!(
        "sftp://{}:{SECRET}@127.0.0.1:{}//srv/none",
        server.user,
        free_port()
    ));
    let out = nobody.warden("unlock", &[]);
    out.assert_no_secret(&[SECRET, PASSWORD]);
    out.assert_exit(
        14,
        &format!("cannot reach sftp://{}:***@127.0.0.1", server.user),
    );

    let missing = at(server.url(&server.root.join("missing"), Some(SECRET)));
    let out = missing.warden("unlock", &[]);
    out.assert_no_secret(&[SECRET, PASSWORD]);
    out.assert_exit(10, "no restic repository at sftp://");

    let stranger = at(server.url(&repo.path, Some(SECRET)));
    let out = finish(
        stranger
            .lockwarden("unlock")
            .env("LOCKWARDEN_SFTP_COMMAND", server.stranger_command()),
    );
    out.assert_no_secret(&[SECRET, PASSWORD]);
    out.assert_exit(13, "Permission denied");
    assert!(out.stderr.contains(":***@127.0.0.1"), "{out:?}");

    let hostile = at(format!(
        "sftp:-oProxyCommand=touch {}:repo",
        repo.dir.path().join("pwned").display()
    ));
    let out = hostile.warden("check", &[]);
    out.assert_exit(2, "would take for an option");
    assert!(!repo.dir.path().join("pwned").exists());
    assert!(
        server.log().contains("Server listening"),
        "{}",
        server.log()
    );
}

/// A proxy in front of the real sftp-server, run as the whole transport,
/// that forwards every request until the one opening `locks/`, then goes
/// silent: the listing never ends, lockwarden gives up at its deadline,
/// removes nothing, and leaves no process behind.
#[test]
fn a_server_that_stops_answering_mid_listing_ends_within_the_timeout() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("repo");
    let local = TestRepo::at(path.display().to_string(), path.clone());
    local.init();
    let stale = LockWriter::new(&local).write(LockSpec {
        time: time_from_now(-2 * 3600),
        ..LockSpec::default()
    });
    let pid_file = dir.path().join("pids");
    let script = dir.path().join("stalling-sftp");
    std::fs::write(&script, stalling_proxy(&pid_file)).expect("script");
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let mut repo = TestRepo::at(format!("sftp://stalls.invalid/{}", path.display()), path);
    std::fs::copy(local.password_file(), repo.password_file()).expect("password file");
    repo.env = vec![(
        "LOCKWARDEN_SFTP_COMMAND".into(),
        script.display().to_string(),
    )];

    let started = Instant::now();
    let out = finish_guarded(repo.lockwarden("unlock").args(["--timeout", "3s"]));
    let took = started.elapsed();
    eprintln!("a stalled listing ended after {took:?}");
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("listing locks/"), "{out:?}");
    assert!(out.stderr.contains("no answer within 3s"), "{out:?}");
    assert!(took >= Duration::from_secs(3), "took {took:?}");
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert_eq!(repo.lock_ids(), ids(&[&stale]), "nothing removed");
    let pids = std::fs::read_to_string(&pid_file).expect("pid file");
    let pids: Vec<&str> = pids.split_whitespace().collect();
    assert_eq!(pids.len(), 3, "proxy, server, stalled: {pids:?}");
    for pid in &pids[..2] {
        assert_gone(pid);
    }
}

/// A Python script speaking for `/usr/lib/openssh/sftp-server` (which
/// answers on our stdout directly): it passes each request on, until an
/// SSH_FXP_OPENDIR of `.../locks`, then sleeps. It writes its pid and the
/// server's to `pids`, then `stalled` when it stops.
fn stalling_proxy(pids: &Path) -> String {
    format!(
        r#"#!/usr/bin/env python3
import os, subprocess, sys, time
server = subprocess.Popen(["/usr/lib/openssh/sftp-server"], stdin=subprocess.PIPE)
with open("{pids}", "w") as f:
    f.write(f"{{os.getpid()}} {{server.pid}}\n")
src = sys.stdin.buffer
while True:
    head = src.read(4)
    if len(head) < 4:
        break
    body = src.read(int.from_bytes(head, "big"))
    if body[0] == 11 and body[9:].rstrip(b"/").endswith(b"locks"):
        with open("{pids}", "a") as f:
            f.write("stalled\n")
        time.sleep(1000)
    server.stdin.write(head + body)
    server.stdin.flush()
"#,
        pids = pids.display()
    )
}

/// A transport that never answers the handshake: unreachable (14) at the
/// deadline, and the command is killed.
#[test]
fn a_transport_that_never_answers_is_unreachable_at_the_deadline() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pid_file = dir.path().join("pid");
    let script = dir.path().join("silent");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\necho $$ > {}\nexec sleep 1000\n",
            pid_file.display()
        ),
    )
    .expect("script");
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let mut repo = TestRepo::at(
        format!("sftp://u:{SECRET}@silent.invalid//srv/repo"),
        dir.path().join("none"),
    );
    repo.env = vec![(
        "LOCKWARDEN_SFTP_COMMAND".into(),
        script.display().to_string(),
    )];
    let started = Instant::now();
    let out = finish_guarded(repo.lockwarden("check").args(["--timeout", "2s"]));
    let took = started.elapsed();
    out.assert_no_secret(&[SECRET, PASSWORD]);
    out.assert_exit(14, "cannot reach sftp://u:***@silent.invalid//srv/repo");
    assert!(took < Duration::from_secs(10), "took {took:?}");
    let pid = std::fs::read_to_string(&pid_file).expect("pid file");
    assert_gone(pid.trim());
}

/// The process `pid` no longer runs (gone, or a zombie waiting for init).
#[track_caller]
fn assert_gone(pid: &str) {
    let stat = Path::new("/proc").join(pid).join("stat");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let state = std::fs::read_to_string(&stat)
            .ok()
            .and_then(|s| s.rsplit(')').next().map(|r| r.trim().chars().next()))
            .flatten();
        if matches!(state, None | Some('Z')) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "process {pid} still runs ({state:?})"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
