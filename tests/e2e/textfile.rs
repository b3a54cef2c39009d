//! `check --textfile DIR`: node-exporter textfile metrics from the real
//! binary on real restic repositories; written atomically, on failure too,
//! never through a planted link, never with a secret.

use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};

use lockwarden_tests::guard::finish_guarded;
use lockwarden_tests::lock_writer::{LockSpec, LockWriter, time_from_now};
use lockwarden_tests::restic::{PASSWORD, REST_PASS, RestServer, TestRepo};

/// Runs `check --textfile DIR` (plus `extra`) on `repo`.
fn check(repo: &TestRepo, dir: &Path, extra: &[&str]) -> lockwarden_tests::Finished {
    finish_guarded(
        repo.lockwarden("check")
            .arg("--textfile")
            .arg(dir)
            .args(extra),
    )
}

/// The one file in `dir` (there must be exactly one, and no temporary file).
fn only_file(dir: &Path) -> PathBuf {
    let files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("list")
        .map(|e| e.expect("entry").path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let file = files[0].clone();
    let name = file.file_name().and_then(|n| n.to_str()).expect("a name");
    assert!(
        name.starts_with("lockwarden_") && name.ends_with(".prom"),
        "{name}"
    );
    file
}

fn assert_lines(text: &str, lines: &[&str]) {
    for line in lines {
        assert!(
            text.lines().any(|l| l == *line),
            "{line} missing from\n{text}"
        );
    }
}

/// The `key` label of the file `file` (`lockwarden_<key>.prom`).
fn key_of(file: &Path) -> String {
    let name = file.file_name().and_then(|n| n.to_str()).expect("a name");
    name.trim_start_matches("lockwarden_")
        .trim_end_matches(".prom")
        .to_owned()
}

#[test]
fn check_writes_the_textfile_and_replaces_it_atomically() {
    let repo = TestRepo::init_local();
    let id = repo.id();
    LockWriter::new(&repo).write(LockSpec {
        time: time_from_now(-45 * 60),
        hostname: "evicted-pod",
        exclusive: true,
        ..LockSpec::default()
    });
    LockWriter::new(&repo).write_bytes(b"garbage");
    let dir = tempfile::tempdir().expect("temp dir");
    let out = check(&repo, dir.path(), &[]);
    assert_eq!(out.code, 3, "a stale lock: {out:?}");
    let file = only_file(dir.path());
    let key = key_of(&file);
    let text = std::fs::read_to_string(&file).expect("read");
    assert_lines(
        &text,
        &[
            "# TYPE lockwarden_check_success gauge",
            &format!(r#"lockwarden_check_success{{key="{key}"}} 1"#),
            &format!(r#"lockwarden_locks{{key="{key}",repository_id="{id}",kind="exclusive"}} 1"#),
            &format!(r#"lockwarden_locks{{key="{key}",repository_id="{id}",kind="shared"}} 0"#),
            &format!(r#"lockwarden_stale_locks_not_removed{{key="{key}",repository_id="{id}"}} 1"#),
            &format!(r#"lockwarden_unreadable_locks{{key="{key}",repository_id="{id}"}} 1"#),
        ],
    );
    assert!(
        text.contains("lockwarden_last_check_timestamp_seconds "),
        "{text}"
    );

    let unlocked = repo.warden("unlock", &[]);
    assert_eq!(unlocked.code, 0, "{unlocked:?}");
    let out = check(&repo, dir.path(), &[]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(only_file(dir.path()), file, "the same file, replaced");
    let text = std::fs::read_to_string(&file).expect("read");
    assert_lines(
        &text,
        &[&format!(
            r#"lockwarden_stale_locks_not_removed{{key="{key}",repository_id="{id}"}} 0"#
        )],
    );
}

#[test]
fn a_failed_check_writes_check_success_0_to_the_same_file() {
    let repo = TestRepo::init_local();
    let dir = tempfile::tempdir().expect("temp dir");
    assert_eq!(check(&repo, dir.path(), &[]).code, 0);
    let file = only_file(dir.path());
    std::fs::write(repo.password_file(), "WRONG-SECRET-PASSWORD").expect("write");
    let out = check(&repo, dir.path(), &[]);
    assert_eq!(out.code, 12, "wrong password: {out:?}");
    assert_eq!(only_file(dir.path()), file, "the same name, success or not");
    let text = std::fs::read_to_string(&file).expect("read");
    let key = key_of(&file);
    assert_lines(
        &text,
        &[&format!(r#"lockwarden_check_success{{key="{key}"}} 0"#)],
    );
    assert!(!text.contains("repository_id"), "{text}");
    assert!(!text.contains("WRONG-SECRET"), "{text}");
}

#[test]
fn two_repositories_share_a_directory_without_repeating_a_series() {
    let (one, two) = (TestRepo::init_local(), TestRepo::init_local());
    let dir = tempfile::tempdir().expect("temp dir");
    assert_eq!(check(&one, dir.path(), &[]).code, 0);
    // The same repository named by a relative path is the same file.
    let parent = one.path.parent().expect("a parent");
    let relative = finish_guarded(
        lockwarden_tests::lockwarden(&one.dir.path().join("cache"))
            .current_dir(parent)
            .args(["check", "-r", "repo", "-p"])
            .arg(one.password_file())
            .arg("--textfile")
            .arg(dir.path()),
    );
    assert_eq!(relative.code, 0, "{relative:?}");
    assert_eq!(check(&two, dir.path(), &[]).code, 0);
    let mut series = std::collections::BTreeSet::new();
    let files: Vec<PathBuf> = std::fs::read_dir(dir.path())
        .expect("list")
        .map(|e| e.expect("entry").path())
        .collect();
    assert_eq!(files.len(), 2, "{files:?}");
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read");
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let name_and_labels = line.rsplit_once(' ').expect("a sample").0.to_owned();
            assert!(series.insert(name_and_labels), "{line} twice");
        }
    }
}

#[test]
fn a_symlink_or_a_fifo_at_the_name_is_refused_and_left_alone() {
    let repo = TestRepo::init_local();
    let dir = tempfile::tempdir().expect("temp dir");
    assert_eq!(check(&repo, dir.path(), &[]).code, 0);
    let file = only_file(dir.path());
    let victim = repo.dir.path().join("victim");
    std::fs::write(&victim, "precious").expect("write");

    std::fs::remove_file(&file).expect("remove");
    std::os::unix::fs::symlink(&victim, &file).expect("symlink");
    let out = check(&repo, dir.path(), &[]);
    out.assert_exit(1, "it is a symlink, not a regular file");
    assert_eq!(
        std::fs::read_to_string(&victim).expect("victim"),
        "precious"
    );
    assert!(
        std::fs::symlink_metadata(&file)
            .expect("still there")
            .is_symlink()
    );

    std::fs::remove_file(&file).expect("remove");
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        &file,
        rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
    )
    .expect("mkfifo");
    let out = check(&repo, dir.path(), &[]);
    out.assert_exit(1, "a special file");
    assert!(
        std::fs::symlink_metadata(&file)
            .expect("still there")
            .file_type()
            .is_fifo(),
        "left alone"
    );
    let not_a_dir = repo.dir.path().join("plain-file");
    std::fs::write(&not_a_dir, "x").expect("write");
    check(&repo, &not_a_dir, &[]).assert_exit(1, "cannot open the directory");
}

#[test]
fn the_textfile_holds_no_credential() {
    let root = tempfile::tempdir().expect("temp dir");
    let rest = RestServer::start(&root.path().join("rest"));
    let repo = rest.init_repo("creds");
    let dir = tempfile::tempdir().expect("temp dir");
    let out = check(&repo, dir.path(), &[]);
    assert_eq!(out.code, 0, "{out:?}");
    let text = std::fs::read_to_string(only_file(dir.path())).expect("read");
    assert!(text.contains("lockwarden_check_success{key="), "{text}");
    for secret in [REST_PASS, PASSWORD, "rest:", rest.addr()] {
        assert!(!text.contains(secret), "{secret} in\n{text}");
    }
}
