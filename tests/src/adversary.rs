//! What the adversarial tests (`e2e/adversary_*.rs`) share: running
//! lockwarden under a hang guard, reading its JSON report, and building the
//! hostile inputs (old snapshots, copies of repositories, FIFOs).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::Finished;
use crate::guard::finish_guarded;
use crate::restic::TestRepo;

/// A time far in the past, as `restic backup --time` takes it.
pub const OLD_TIME: &str = "2020-01-02 03:04:05";

/// `lockwarden <subcommand> -r <repo> -p <password file> <extra>`, under the
/// hang guard.
pub fn warden(repo: &TestRepo, subcommand: &str, extra: &[&str]) -> Finished {
    finish_guarded(repo.lockwarden(subcommand).args(extra))
}

/// The JSON document a `--json` run printed.
pub fn doc(out: &Finished) -> Value {
    serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("not a JSON document ({e}): {out:?}"))
}

/// The entry for `id` in a check document's `locks` or `unreadable`.
pub fn entry<'a>(doc: &'a Value, id: &str) -> &'a Value {
    find(doc, "locks", id)
        .or_else(|| find(doc, "unreadable", id))
        .unwrap_or_else(|| panic!("no entry for {id} in {doc:#}"))
}

/// The entry for `id` in the document's list `list`, if there.
pub fn find<'a>(doc: &'a Value, list: &str, id: &str) -> Option<&'a Value> {
    doc[list]
        .as_array()
        .into_iter()
        .flatten()
        .find(|e| e["id"] == id)
}

/// `(action, rule)` of `id` in a check document.
pub fn verdict(doc: &Value, id: &str) -> (String, String) {
    let e = entry(doc, id);
    let s = |k: &str| e[k].as_str().unwrap_or_default().to_owned();
    (s("action"), s("rule"))
}

/// An expected [`verdict`]: `(action, rule)`.
pub fn pair(action: &str, rule: &str) -> (String, String) {
    (action.to_owned(), rule.to_owned())
}

/// Lock ids as a set, to compare with [`TestRepo::lock_ids`].
pub fn ids(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

/// The reason given for `id`.
pub fn reason(doc: &Value, id: &str) -> String {
    entry(doc, id)["reason"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// The `problem` of unreadable entry `id`; panics if `id` is not reported
/// unreadable.
pub fn problem(doc: &Value, id: &str) -> String {
    find(doc, "unreadable", id)
        .unwrap_or_else(|| panic!("{id} is not reported unreadable: {doc:#}"))["problem"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// stdout and stderr together, for "appears nowhere" assertions.
pub fn all_output(out: &Finished) -> String {
    format!("{}\n{}", out.stdout, out.stderr)
}

/// `text` with digit group separators (`,`, `_`, thin spaces) removed, so a
/// size can be looked for however it is written.
pub fn digits_only(text: &str) -> String {
    text.replace([',', '_', '\u{2009}', '\u{202f}'], "")
}

/// True when `text` names `limit` bytes, as a number or in KiB/MiB.
pub fn names_limit(text: &str, bytes: u64) -> bool {
    let plain = digits_only(text);
    let mut spellings = vec![bytes.to_string()];
    if bytes.is_multiple_of(1 << 20) {
        spellings.push(format!("{} MiB", bytes >> 20));
        spellings.push(format!("{}MiB", bytes >> 20));
    }
    if bytes.is_multiple_of(1 << 10) {
        spellings.push(format!("{} KiB", bytes >> 10));
        spellings.push(format!("{}KiB", bytes >> 10));
    }
    spellings.iter().any(|s| plain.contains(s.as_str()))
}

/// Backs up a small directory with restic, dated `time`; returns the
/// snapshot's id (the name of its file under `snapshots/`).
pub fn backup_dated(repo: &TestRepo, time: &str) -> String {
    let data = repo.dir.path().join("snapshot-data");
    std::fs::create_dir_all(&data).expect("data dir");
    std::fs::write(data.join("precious"), b"data that must survive").expect("data file");
    let before = snapshot_ids(repo);
    let out = repo.restic(&["backup", "--time", time, data.to_str().expect("utf-8")]);
    assert_eq!(out.code, 0, "restic backup failed: {out:?}");
    let after = snapshot_ids(repo);
    after
        .difference(&before)
        .next()
        .expect("a new snapshot")
        .clone()
}

/// The full ids of the snapshots restic lists (`--no-lock`).
pub fn snapshot_ids(repo: &TestRepo) -> BTreeSet<String> {
    let out = repo.restic(&["snapshots", "--json", "--no-lock"]);
    assert_eq!(out.code, 0, "restic snapshots failed: {out:?}");
    let list: Value = serde_json::from_str(&out.stdout).expect("restic prints JSON");
    list.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["id"].as_str().map(str::to_owned))
        .collect()
}

/// A copy of `repo`'s directory at `<repo.dir>/<name>` (`cp -a`), as a
/// repository of its own sharing `repo`'s password file.
pub fn copy_repo(repo: &TestRepo, name: &str) -> PathBuf {
    let to = repo.dir.path().join(name);
    let status = Command::new("cp")
        .arg("-a")
        .arg(&repo.path)
        .arg(&to)
        .status()
        .expect("cp");
    assert!(status.success(), "cp -a failed");
    to
}

/// `lockwarden <subcommand> -r <path> -p <password file> <extra>` for a
/// repository directory that is not a [`TestRepo`] of its own.
pub fn warden_at(repo: &TestRepo, path: &Path, subcommand: &str, extra: &[&str]) -> Finished {
    let mut command = crate::lockwarden(&repo.dir.path().join("cache"));
    command
        .arg(subcommand)
        .arg("-r")
        .arg(path)
        .arg("-p")
        .arg(repo.password_file())
        .args(extra)
        .env_remove("RESTIC_REPOSITORY")
        .env_remove("RESTIC_PASSWORD")
        .env_remove("RESTIC_PASSWORD_FILE");
    finish_guarded(&mut command)
}

/// Creates a FIFO at `path` (`mkfifo`).
pub fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("run mkfifo");
    assert!(status.success(), "mkfifo {} failed", path.display());
}

/// The file type of `path` itself (not following a symlink), for "left as it
/// was" assertions: `symlink`, `fifo`, `dir`, `char-device`, `file`.
pub fn file_type(path: &Path) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    match std::fs::symlink_metadata(path).map(|m| m.file_type()) {
        Ok(t) if t.is_symlink() => "symlink",
        Ok(t) if t.is_fifo() => "fifo",
        Ok(t) if t.is_dir() => "dir",
        Ok(t) if t.is_char_device() => "char-device",
        Ok(t) if t.is_file() => "file",
        Ok(_) => "other",
        Err(_) => "missing",
    }
}

/// This machine's hostname, as restic writes it into locks.
pub fn this_hostname() -> String {
    lockwarden::evidence::hostname().expect("this machine has a hostname")
}
