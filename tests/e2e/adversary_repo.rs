//! Hostile repositories: a `locks/` that leads elsewhere, entries in `locks/`
//! that are not lock files, oversized files, ruinous key files, overlong lock
//! fields, and the edge cases of removal bookkeeping. Each test guards one
//! defect of the trust fixes; its doc comment names the item of the contract.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::Command;

use lockwarden_tests::adversary::{
    OLD_TIME, all_output, backup_dated, copy_repo, digits_only, doc, entry, file_type, find, ids,
    mkfifo, names_limit, pair, problem, snapshot_ids, verdict, warden, warden_at,
};
use lockwarden_tests::fake_rest::{FakeRest, Reply, V2};
use lockwarden_tests::guard::{Guarded, HANG_GUARD, finish_guarded, with_memory_cap};
use lockwarden_tests::lock_writer::{Encoding, LockSpec, LockWriter, time_from_now};
use lockwarden_tests::restic::{PASSWORD, TestRepo};
use lockwarden_tests::{Finished, guests};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

const HOUR: i64 = 3600;
/// Private writable memory a capped lockwarden may map: the engine's stack
/// pool maps about 2 GiB (untouched), so this leaves lockwarden 2 GiB of real
/// memory, far more than it needs and far less than the machine has.
const MEMORY_CAP: u64 = 4 << 30;

/// A lock from another host, two hours old: `expired` under the default
/// policy, so removed unless something is wrong.
fn stale_lock(writer: &LockWriter, pid: i64) -> String {
    writer.write(LockSpec {
        time: time_from_now(-2 * HOUR),
        hostname: "elsewhere",
        pid,
        encoding: Encoding::Raw,
        ..LockSpec::default()
    })
}

/// `lockwarden unlock` succeeds and leaves exactly the locks `left`.
fn assert_unlock_leaves(repo: &TestRepo, left: &[&str]) {
    let out = warden(repo, "unlock", &[]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(repo.lock_ids(), ids(left), "{out:?}");
}

/// `lockwarden unlock` on the repository `server` serves (`repo`'s, through
/// it), under the hang guard.
fn unlock_over(repo: &TestRepo, server: &FakeRest) -> Finished {
    let mut command = lockwarden_tests::lockwarden(&repo.dir.path().join("cache"));
    command
        .args(["unlock", "-r", &server.location, "-p"])
        .arg(repo.password_file());
    finish_guarded(&mut command)
}

/// `lockwarden check` on `repo` with the password in `file`, under the hang
/// guard.
fn check_with_password_file(repo: &TestRepo, file: &Path) -> Finished {
    finish_guarded(
        lockwarden_tests::lockwarden(&repo.dir.path().join("cache"))
            .args(["check", "-r", &repo.location, "-p"])
            .arg(file),
    )
}

/// `lockwarden <subcommand>` on `repo` with at most [`MEMORY_CAP`] of
/// writable memory and under the hang guard: for repositories holding
/// endless devices or FIFOs.
fn capped(repo: &TestRepo, subcommand: &str, extra: &[&str]) -> Finished {
    let mut command = repo.lockwarden(subcommand);
    command.args(extra);
    let what = format!("lockwarden {subcommand} {extra:?}");
    Guarded::spawn(&mut with_memory_cap(&command, MEMORY_CAP)).finish_within(HANG_GUARD, &what)
}

/// Item 3: a `locks/` that is a symlink (here to `snapshots/`) is refused
/// with an error naming the symlink. Followed, it makes lockwarden judge
/// every snapshot as a lock: a 2020 snapshot is "expired" and deleted.
#[test]
fn a_symlinked_locks_directory_is_refused_and_no_snapshot_is_deleted() {
    let repo = TestRepo::init_local();
    let snapshot = backup_dated(&repo, OLD_TIME);
    let snapshot_file = repo.path.join("snapshots").join(&snapshot);
    let bytes = fs::read(&snapshot_file).expect("read the snapshot file");
    fs::remove_dir_all(repo.path.join("locks")).expect("remove locks/");
    symlink("snapshots", repo.path.join("locks")).expect("symlink locks -> snapshots");

    let unlock = warden(&repo, "unlock", &[]);
    assert_eq!(
        fs::read(&snapshot_file).ok().as_ref(),
        Some(&bytes),
        "the snapshot file was deleted or changed through the symlinked locks/: {unlock:?}"
    );
    unlock.assert_exit(1, "locks/ is a symbolic link");
    let check = warden(&repo, "check", &["--json"]);
    check.assert_exit(1, "locks/ is a symbolic link");

    fs::remove_file(repo.path.join("locks")).expect("remove the symlink");
    fs::create_dir(repo.path.join("locks")).expect("mkdir locks");
    assert!(
        snapshot_ids(&repo).contains(&snapshot),
        "restic still lists the snapshot"
    );
}

/// Item 3: entries of `locks/` named like locks that are not regular files
/// (a symlink, a FIFO, a directory, a character device) are kept by the
/// host itself (rule `not-a-lock-file`), and left exactly as they are: never
/// opened (a FIFO would hang the reader, /dev/zero would never end), never
/// read through (the symlink leads to a valid stale lock of the same name),
/// never removed. A real stale lock beside them is still removed.
#[test]
fn lock_named_entries_that_are_not_regular_files_are_kept_by_the_host() {
    let repo = TestRepo::init_local();
    let writer = LockWriter::new(&repo);
    let locks = repo.path.join("locks");
    // A valid stale lock moved into a subdirectory (whose name is no lock
    // id) and reached through a symlink carrying its own name.
    let linked = stale_lock(&writer, 11);
    let hidden = locks.join("hidden");
    fs::create_dir(&hidden).expect("mkdir");
    fs::rename(locks.join(&linked), hidden.join(&linked)).expect("move the lock");
    let target_bytes = fs::read(hidden.join(&linked)).expect("read");
    symlink(format!("hidden/{linked}"), locks.join(&linked)).expect("symlink");
    let fifo = "f1".repeat(32);
    mkfifo(&locks.join(&fifo));
    let directory = "d1".repeat(32);
    fs::create_dir(locks.join(&directory)).expect("mkdir");
    let device = "c1".repeat(32);
    let made = Command::new("mknod")
        .arg(locks.join(&device))
        .args(["c", "1", "5"])
        .status()
        .expect("run mknod");
    assert!(made.success(), "mknod (a /dev/zero twin) needs CAP_MKNOD");
    let stale = stale_lock(&writer, 12);
    let specials = [
        (&linked, "symlink", "a symbolic link"),
        (&fifo, "fifo", "a FIFO"),
        (&directory, "dir", "a directory"),
        (&device, "char-device", "a character device"),
    ];

    let out = capped(&repo, "check", &["--json"]);
    let report = doc(&out);
    for (id, kind, what) in specials {
        assert_eq!(problem(&report, id), what, "{kind} {id}");
        assert_eq!(
            verdict(&report, id),
            pair("keep", "not-a-lock-file"),
            "{kind}"
        );
    }
    assert_eq!(verdict(&report, &stale), pair("remove", "expired"));

    let out = capped(&repo, "unlock", &[]);
    assert_eq!(out.code, 0, "{out:?}");
    let left = repo.lock_ids();
    for (id, kind, _) in specials {
        assert!(left.contains(id.as_str()), "the {kind} was removed");
        assert_eq!(file_type(&locks.join(id)), kind, "the {kind} is unchanged");
    }
    assert!(!left.contains(&stale), "the real stale lock is removed");
    assert_eq!(
        fs::read(hidden.join(&linked)).ok(),
        Some(target_bytes),
        "the symlink's target is untouched"
    );
}

/// Item 3: a snapshot (or index) file copied into `locks/` under its own
/// name decrypts with the repository key and matches its hash, but is not a
/// lock: it is misplaced, not corrupt, kept by the host (rule
/// `not-a-lock-file`) and never shown to a policy; a 2020 snapshot must not
/// be judged an expired lock and deleted. A lock lacking `pid` and
/// `exclusive` is unreadable.
#[test]
fn a_snapshot_copied_into_locks_under_its_own_name_is_not_a_lock() {
    let repo = TestRepo::init_local();
    let snapshot = backup_dated(&repo, OLD_TIME);
    let locks = repo.path.join("locks");
    fs::copy(
        repo.path.join("snapshots").join(&snapshot),
        locks.join(&snapshot),
    )
    .expect("copy the snapshot into locks/");
    let index = fs::read_dir(repo.path.join("index"))
        .expect("index/")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .next()
        .expect("an index file");
    fs::copy(repo.path.join("index").join(&index), locks.join(&index)).expect("copy the index");
    let writer = LockWriter::new(&repo);
    let partial = writer.write_json(
        &json!({"time": time_from_now(-2 * HOUR), "hostname": "elsewhere", "username": "u"})
            .to_string(),
        Encoding::Raw,
    );
    let stale = stale_lock(&writer, 13);

    let out = warden(&repo, "check", &["--json"]);
    let report = doc(&out);
    for id in [&snapshot, &index] {
        let problem = problem(&report, id);
        assert!(problem.contains("misplaced"), "{id}: {problem}");
        assert_eq!(verdict(&report, id), pair("keep", "not-a-lock-file"));
    }
    assert!(
        find(&report, "unreadable", &partial).is_some(),
        "a lock without pid and exclusive is unreadable: {report:#}"
    );
    assert_eq!(verdict(&report, &stale), pair("remove", "expired"));

    // Only the real stale lock goes.
    assert_unlock_leaves(&repo, &[&snapshot, &index, &partial]);
    assert!(snapshot_ids(&repo).contains(&snapshot));
}

/// Item 4: a policy that answers `remove` for an unreadable file has failed:
/// lockwarden says so ("unreadable"), exits 1 and removes nothing at all.
#[test]
fn a_policy_judging_an_unreadable_file_stale_removes_nothing() {
    let repo = TestRepo::init_local();
    let writer = LockWriter::new(&repo);
    let corrupt = writer.write_bytes(&[0x5a; 200]);
    let empty = "0e".repeat(32);
    writer.write_named(&empty, b"");
    let lock = stale_lock(&writer, 14);
    let before = ids(&[&corrupt, &empty, &lock]);
    let policy = guests::REMOVE_UNREADABLE.path();
    let policy = policy.to_str().expect("utf-8");

    let out = warden(&repo, "unlock", &["--policy", policy]);
    assert_eq!(repo.lock_ids(), before, "nothing was removed: {out:?}");
    out.assert_exit(1, "unreadable");
    // The job says so, where it is true.
    out.assert_exit(1, "nothing was removed");
    let check = warden(&repo, "check", &["--policy", policy]);
    check.assert_exit(1, "unreadable");
}

/// Sets the modification time of lock file `id` to `seconds` ago.
fn age_lock_file(repo: &TestRepo, id: &str, seconds: u64) {
    let path = repo.path.join("locks").join(id);
    let when = std::time::SystemTime::now() - std::time::Duration::from_secs(seconds);
    fs::File::options()
        .write(true)
        .open(&path)
        .and_then(|f| f.set_modified(when))
        .unwrap_or_else(|e| panic!("cannot age {}: {e}", path.display()));
}

/// Contract 0.2.0: an empty or corrupt lock file (a crash mid-write, a full
/// disk) that the storage stored longer than `unreadable-after` ago is
/// removed by the default policy, naming its age and where it came from,
/// and restic works afterwards; a young one, and a live holder's lock, stay.
/// A REMOVE_UNREADABLE policy may remove the old ones too, and still not the
/// young one: the whole job fails instead.
#[test]
fn unreadable_lock_files_stored_long_ago_are_removed() {
    let repo = TestRepo::init_local();
    let writer = LockWriter::new(&repo);
    let holder = lockwarden_tests::restic::Holder::start(&repo);
    let live = repo.lock_ids();
    let empty = "0e".repeat(32);
    writer.write_named(&empty, b"");
    let corrupt = writer.write_bytes(&[0x5a; 200]);
    let young = writer.write_bytes(&[0x33; 120]);
    age_lock_file(&repo, &empty, 2 * 3600);
    age_lock_file(&repo, &corrupt, 90 * 60);
    age_lock_file(&repo, &young, 20 * 60);

    let out = warden(&repo, "check", &["--json"]);
    let report = doc(&out);
    assert_eq!(verdict(&report, &empty), pair("remove", "unreadable-old"));
    assert_eq!(verdict(&report, &corrupt), pair("remove", "unreadable-old"));
    assert_eq!(verdict(&report, &young), pair("keep", "unreadable"));
    let reason = find(&report, "unreadable", &empty).expect("reported")["reason"]
        .as_str()
        .expect("reason")
        .to_owned();
    assert!(
        reason.contains("stored 2h") && reason.contains("storage's clock"),
        "the reason names the age and where it came from: {reason}"
    );
    let stored_at = &find(&report, "unreadable", &empty).expect("reported")["stored_at"];
    assert!(stored_at.is_string(), "stored_at is reported: {stored_at}");

    // A policy that removes every unreadable file fails on the young one.
    let policy = guests::REMOVE_UNREADABLE.path();
    let policy = policy.to_str().expect("utf-8");
    let refused = warden(&repo, "unlock", &["--policy", policy]);
    refused.assert_exit(1, "at least 30m");
    assert_eq!(repo.lock_ids().len(), live.len() + 3, "{refused:?}");

    let mut left: Vec<String> = live.iter().cloned().collect();
    left.push(young.clone());
    let left: Vec<&str> = left.iter().map(String::as_str).collect();
    assert_unlock_leaves(&repo, &left);
    holder.finish();
    fs::remove_file(repo.path.join("locks").join(&young)).expect("rm young");
    repo.assert_usable();
}

/// Issue 22, item 4: a storage whose clock is 35 minutes behind (an NFS or
/// SFTP server) stamps a running restic's lock file 35 minutes old. The
/// lock's own time is seconds old, so the clocks disagree, and disagreeing
/// clocks keep: the real restic on another host keeps its lock under
/// `lockwarden unlock` as under `restic unlock`, and finishes its backup. The
/// storage's age still decides a lock whose own time cannot: one dated two
/// hours in the future and stored two hours ago is removed.
#[test]
fn a_slow_storage_clock_never_removes_a_running_restics_lock() {
    let repo = TestRepo::init_local();
    let holder = lockwarden_tests::restic::Holder::start_on_host(&repo, "nfs-client");
    age_lock_file(&repo, &holder.lock_id, 35 * 60);
    let future = LockWriter::new(&repo).write(LockSpec {
        time: time_from_now(2 * HOUR),
        hostname: "elsewhere",
        pid: 43,
        encoding: Encoding::Raw,
        ..LockSpec::default()
    });
    age_lock_file(&repo, &future, 2 * 3600);

    let out = warden(&repo, "check", &["--json"]);
    assert_eq!(out.code, 3, "{out:?}");
    let report = doc(&out);
    assert_eq!(verdict(&report, &holder.lock_id), pair("keep", "fresh"));
    let reason = entry(&report, &holder.lock_id)["reason"]
        .as_str()
        .expect("reason")
        .to_owned();
    assert!(
        reason.contains("stored 35m") && reason.contains("disagreeing clocks keep"),
        "{reason}"
    );
    assert_eq!(verdict(&report, &future), pair("remove", "stored-long-ago"));

    let restic = repo.restic(&["unlock"]);
    assert_eq!(restic.code, 0, "{restic:?}");
    assert!(repo.lock_ids().contains(&holder.lock_id), "{restic:?}");
    assert_unlock_leaves(&repo, &[&holder.lock_id]);
    assert_eq!(holder.finish(), 0, "the backup finished with its lock");
    repo.assert_usable();
}

/// Item 7: a lock file over 64 KiB is unreadable without being read into
/// memory; its problem says its size in bytes and the JSON report gives its
/// real size. A 1 GiB sparse file and a 70 KiB one are both kept.
#[test]
fn oversized_lock_files_are_unreadable_with_their_real_size() {
    let repo = TestRepo::init_local();
    let writer = LockWriter::new(&repo);
    let huge = "ab".repeat(32);
    let file = fs::File::create(repo.path.join("locks").join(&huge)).expect("create");
    file.set_len(1 << 30).expect("a sparse 1 GiB file");
    drop(file);
    let big_bytes: Vec<u8> = (0..70 * 1024u32).map(|i| (i * 7 % 251) as u8).collect();
    let big = writer.write_bytes(&big_bytes);

    let out = warden(&repo, "check", &["--json"]);
    let report = doc(&out);
    for (id, size) in [(&huge, 1u64 << 30), (&big, 70 * 1024)] {
        let unreadable = find(&report, "unreadable", id)
            .unwrap_or_else(|| panic!("{id} is not reported unreadable: {report:#}"));
        assert_eq!(unreadable["size"], size, "its real size: {unreadable}");
        let problem = digits_only(&problem(&report, id));
        assert!(
            problem.contains(&size.to_string()) && problem.contains("bytes"),
            "the problem says the size: {problem}"
        );
        assert_eq!(verdict(&report, id), pair("keep", "unreadable"));
    }

    assert_unlock_leaves(&repo, &[&huge, &big]);
}

/// Item 7: the repository's own files have limits too. A key file over
/// 64 KiB is not used (here the only one: "no usable key file"), a config
/// over 64 KiB is refused, and a REST listing of `locks/` over 16 MiB is
/// refused; each time nothing is removed.
#[test]
fn oversized_key_config_and_rest_listing_are_refused() {
    let repo = TestRepo::init_local();
    an_oversized_key_file_is_not_used(&repo);
    an_oversized_config_is_refused(&repo);
    an_oversized_rest_listing_is_refused(&repo);
}

/// A key file padded past 64 KiB, the only key of a copy of `repo`.
fn an_oversized_key_file_is_not_used(repo: &TestRepo) {
    let padded_key = copy_repo(repo, "padded-key");
    let stale = stale_lock(&LockWriter::for_dir(&padded_key, PASSWORD), 15);
    let (key_name, mut key) = only_key(&padded_key);
    key["padding"] = json!("k".repeat(70 * 1024));
    replace_key(&padded_key, &key_name, &key);
    let out = warden_at(repo, &padded_key, "unlock", &[]);
    assert!(
        padded_key.join("locks").join(&stale).exists(),
        "nothing removed: {out:?}"
    );
    out.assert_exit(1, "no usable key file");
}

/// A config padded past 64 KiB, sealed with the real master key, in a copy
/// of `repo`.
fn an_oversized_config_is_refused(repo: &TestRepo) {
    let padded_config = copy_repo(repo, "padded-config");
    let stale = stale_lock(&LockWriter::for_dir(&padded_config, PASSWORD), 16);
    let (_, key) = only_key(&padded_config);
    let master = lockwarden::repo::keys::open(key.to_string().as_bytes(), PASSWORD.as_bytes())
        .expect("the password opens the key");
    let config_out = repo.restic(&["cat", "config", "--no-lock"]);
    let mut config: Value = serde_json::from_str(&config_out.stdout).expect("config JSON");
    config["padding"] = json!("c".repeat(70 * 1024));
    let sealed = master.seal(config.to_string().as_bytes(), [7; 16]);
    fs::write(padded_config.join("config"), sealed).expect("write config");
    let out = warden_at(repo, &padded_config, "unlock", &[]);
    assert!(
        padded_config.join("locks").join(&stale).exists(),
        "nothing removed: {out:?}"
    );
    assert!(
        !matches!(out.code, 0 | 3),
        "an oversized config is an error: {out:?}"
    );
    assert!(out.stderr.contains("config"), "{}", out.stderr);
}

/// A REST listing of `repo`'s locks/ past 16 MiB: one real stale lock, then
/// whitespace (valid JSON all the same).
fn an_oversized_rest_listing_is_refused(repo: &TestRepo) {
    let stale = stale_lock(&LockWriter::new(repo), 17);
    let listed = stale.clone();
    let server = FakeRest::start(&repo.path, move |method, path| {
        if method == "GET" && path == "locks/" {
            let mut body = format!(r#"[{{"name": "{listed}", "size": 300}}"#).into_bytes();
            body.resize(body.len() + (17 << 20), b' ');
            body.push(b']');
            Reply::Body(V2, body)
        } else {
            Reply::Default
        }
    });
    let out = unlock_over(repo, &server);
    assert!(repo.lock_ids().contains(&stale), "nothing removed: {out:?}");
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        names_limit(&out.stderr, 16 << 20),
        "names the 16 MiB limit: {}",
        out.stderr
    );
}

/// Item 7: at most 100,000 entries in `locks/`. A directory stuffed with
/// more is an error naming the limit, and nothing is removed (not even the
/// one real stale lock among them).
#[test]
fn more_than_100000_entries_in_locks_are_refused_and_nothing_is_removed() {
    let repo = TestRepo::init_local();
    let stale = stale_lock(&LockWriter::new(&repo), 18);
    let locks = repo.path.join("locks");
    for n in 0..100_001u64 {
        fs::File::create(locks.join(format!("{n:064x}"))).expect("create an empty entry");
    }
    let out = warden(&repo, "unlock", &[]);
    assert!(
        locks.join(&stale).exists(),
        "nothing removed: {}",
        out.stderr
    );
    assert_eq!(out.code, 1, "{}", out.stderr);
    let said = digits_only(&out.stderr).replace(' ', "");
    assert!(
        said.contains("100000"),
        "names the limit of 100,000 entries: {}",
        out.stderr
    );
}

/// The only key file of the repository directory `path`: its name and JSON.
fn only_key(path: &Path) -> (String, Value) {
    let entries: Vec<_> = fs::read_dir(path.join("keys"))
        .expect("keys/")
        .filter_map(Result::ok)
        .collect();
    assert_eq!(entries.len(), 1, "one key file");
    let name = entries[0].file_name().to_string_lossy().into_owned();
    let json =
        serde_json::from_slice(&fs::read(entries[0].path()).expect("read key")).expect("JSON");
    (name, json)
}

/// Replaces key file `old` of `path` by `key`, stored under the SHA-256 of
/// its bytes as restic names key files.
fn replace_key(path: &Path, old: &str, key: &Value) -> String {
    let bytes = key.to_string().into_bytes();
    let name = hex::encode(Sha256::digest(&bytes));
    fs::remove_file(path.join("keys").join(old)).expect("remove the old key");
    fs::write(path.join("keys").join(&name), bytes).expect("write the new key");
    name
}

/// Item 8: a key file whose scrypt parameters would cost N*r*p > 2^23
/// (N=2^20, r=8, p=64: a GiB of memory, 64 times over) is unusable, named
/// "scrypt", without running scrypt; with no usable key at all lockwarden
/// exits 1 "no usable key file" (also for garbage key files). A wrong
/// password stays exit 12, and an empty password is bad usage (exit 2).
#[test]
fn ruinous_or_garbage_key_files_are_not_usable_and_an_empty_password_is_refused() {
    let repo = TestRepo::init_local();

    let ruinous = copy_repo(&repo, "ruinous-key");
    let (name, mut key) = only_key(&ruinous);
    key["N"] = json!(1_048_576);
    key["r"] = json!(8);
    key["p"] = json!(64);
    replace_key(&ruinous, &name, &key);
    let out = warden_at(&repo, &ruinous, "check", &[]);
    out.assert_exit(1, "scrypt");
    assert!(out.stderr.contains("no usable key file"), "{}", out.stderr);

    let garbage = copy_repo(&repo, "garbage-key");
    let (name, _) = only_key(&garbage);
    fs::remove_file(garbage.join("keys").join(&name)).expect("rm key");
    let junk = b"this is not a key file".to_vec();
    fs::write(
        garbage
            .join("keys")
            .join(hex::encode(Sha256::digest(&junk))),
        &junk,
    )
    .expect("write junk key");
    let out = warden_at(&repo, &garbage, "check", &[]);
    out.assert_exit(1, "no usable key file");

    let wrong = repo.dir.path().join("wrong-password");
    fs::write(&wrong, "not the password").expect("write");
    let out = check_with_password_file(&repo, &wrong);
    assert_eq!(out.code, 12, "a wrong password stays exit 12: {out:?}");

    let empty = repo.dir.path().join("empty-password");
    fs::write(&empty, "\n").expect("write");
    let out = check_with_password_file(&repo, &empty);
    out.assert_exit(2, "empty");
}

/// Item 9: a hostname or username over 255 bytes makes that lock unreadable,
/// naming the field; every other lock is judged as usual (a 255-byte
/// hostname is fine, and a stale lock beside the bad ones is removed).
#[test]
fn overlong_hostnames_and_usernames_make_only_their_lock_unreadable() {
    let repo = TestRepo::init_local();
    let writer = LockWriter::new(&repo);
    let old = time_from_now(-2 * HOUR);
    let lock = |hostname: &str, username: &str| {
        writer.write_json(
            &json!({"time": old, "exclusive": false, "hostname": hostname,
                    "username": username, "pid": 21, "uid": 0, "gid": 0})
            .to_string(),
            Encoding::Zstd,
        )
    };
    let long_host = lock(&"h".repeat(1000), "u");
    let long_user = lock("elsewhere", &"u".repeat(300));
    let limit_host = lock(&"l".repeat(255), "u");
    let stale = stale_lock(&writer, 22);

    let out = warden(&repo, "check", &["--json"]);
    let report = doc(&out);
    assert!(
        problem(&report, &long_host).contains("hostname"),
        "{report:#}"
    );
    assert!(
        problem(&report, &long_user).contains("username"),
        "{report:#}"
    );
    for id in [&long_host, &long_user] {
        assert_eq!(verdict(&report, id), pair("keep", "unreadable"));
    }
    assert_eq!(verdict(&report, &limit_host), pair("remove", "expired"));
    assert_eq!(verdict(&report, &stale), pair("remove", "expired"));

    assert_unlock_leaves(&repo, &[&long_host, &long_user]);
}

/// Item 14: when a removal fails, the text summary counts only the locks
/// actually removed (here the server refuses one of two deletions).
#[test]
fn after_a_failed_removal_the_summary_counts_only_what_was_removed() {
    let repo = TestRepo::init_local();
    let writer = LockWriter::new(&repo);
    let removable = stale_lock(&writer, 31);
    let refused = stale_lock(&writer, 32);
    let refused_path = format!("locks/{refused}");
    let server = FakeRest::start(&repo.path, move |method, path| {
        if method == "DELETE" && path == refused_path {
            Reply::Status(500)
        } else {
            Reply::Default
        }
    });
    let out = unlock_over(&repo, &server);
    assert_eq!(out.code, 1, "{out:?}");
    assert_eq!(repo.lock_ids(), ids(&[&refused]), "{out:?}");
    assert!(!repo.lock_ids().contains(&removable));
    let summary = out
        .stdout
        .lines()
        .find(|l| l.contains(" unreadable: "))
        .unwrap_or_else(|| panic!("no summary line: {}", out.stdout));
    assert!(
        summary.contains("1 removed") && !summary.contains("2 removed"),
        "{summary}"
    );
}

/// Item 14: a repository without `locks/` (restic creates it lazily on some
/// backends) simply has no locks.
#[test]
fn a_repository_without_a_locks_directory_has_no_locks() {
    let repo = TestRepo::init_local();
    fs::remove_dir_all(repo.path.join("locks")).expect("remove locks/");
    let out = warden(&repo, "check", &[]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("no locks"), "{}", out.stdout);
    let out = warden(&repo, "unlock", &["--json"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(doc(&out)["summary"]["locks"], 0);
}

/// Item 14: a repository path that is a regular file is "no repository"
/// (exit 10), like a missing directory.
#[test]
fn a_repository_path_that_is_a_regular_file_exits_10() {
    let repo = TestRepo::init_local();
    let file = repo.dir.path().join("not-a-repository");
    fs::write(&file, "just a file").expect("write");
    let out = warden_at(&repo, &file, "check", &[]);
    out.assert_exit(10, "no restic repository at");
}

/// Item 14: `policy eval` of a request that is not UTF-8 says the request is
/// invalid (exit 2), not "check the path" (the path was fine).
#[test]
fn policy_eval_of_a_non_utf8_request_does_not_blame_the_path() {
    let dir = tempfile::tempdir().expect("temp dir");
    let request = dir.path().join("request.json");
    fs::write(&request, b"{\"now\": \"\xff\xfe\"}").expect("write");
    let out = finish_guarded(
        lockwarden_tests::lockwarden(&dir.path().join("cache"))
            .args(["policy", "eval", "--request"])
            .arg(&request),
    );
    assert_eq!(out.code, 2, "{out:?}");
    assert!(!all_output(&out).contains("check the path"), "{out:?}");
}

/// Item 14: durations with fractions (`1.5h`, as Go's ParseDuration takes
/// them) are accepted as settings and mean what they say.
#[test]
fn a_fractional_stale_after_is_accepted() {
    let repo = TestRepo::init_local();
    let writer = LockWriter::new(&repo);
    let older = writer.write(LockSpec {
        time: time_from_now(-100 * 60),
        hostname: "elsewhere",
        pid: 41,
        encoding: Encoding::Raw,
        ..LockSpec::default()
    });
    let younger = writer.write(LockSpec {
        time: time_from_now(-80 * 60),
        hostname: "elsewhere",
        pid: 42,
        encoding: Encoding::Raw,
        ..LockSpec::default()
    });
    let out = warden(&repo, "check", &["--json", "--set", "stale-after=1.5h"]);
    assert_eq!(out.code, 3, "{out:?}");
    let report = doc(&out);
    assert_eq!(verdict(&report, &older), pair("remove", "expired"));
    assert_eq!(verdict(&report, &younger), pair("keep", "fresh"));
    let _ = entry(&report, &younger);
}

/// Zstd bombs: lock files of 4.4 KB that each inflate to 137 MiB, declaring
/// restic's largest window. Decoding stops 64 KiB in, so 16 of them, read 8
/// at a time, fit in half a GiB beside the engine's 2 GiB stack pool (a
/// decoder that filled its window first needed over 1 GiB), each is reported
/// unreadable, and the stale lock beside them is still judged.
#[test]
fn zstd_bombs_are_unreadable_and_cost_no_memory() {
    let repo = TestRepo::init_local();
    let writer = LockWriter::new(&repo);
    let mut bomb = vec![2u8, 0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x88];
    for i in 0..1100u32 {
        let header = u32::from(i == 1099) | (1 << 1) | ((128 * 1024) << 3);
        bomb.extend(&header.to_le_bytes()[..3]);
        bomb.push(b' ');
    }
    let bombs: Vec<String> = (0..16u8)
        .map(|i| {
            let mut one = bomb.clone();
            one.push(i); // a different file each, with bytes after the frame
            writer.write_sealed(&one)
        })
        .collect();
    let stale = stale_lock(&writer, 5);
    let mut command = repo.lockwarden("check");
    command.arg("--json");
    let out = Guarded::spawn(&mut with_memory_cap(&command, 5 << 29))
        .finish_within(HANG_GUARD, "check over zstd bombs");
    assert_eq!(out.code, 3, "{out:?}");
    let doc = doc(&out);
    for id in &bombs {
        assert!(
            problem(&doc, id).contains("more than the 65536 bytes"),
            "{doc:#}"
        );
    }
    assert_eq!(verdict(&doc, &stale).0, "remove", "{doc:#}");
}
