//! Evidence that must not be mistaken for proof of death: an inventory that
//! is empty, stale or about other hosts, and a restic process on the lock's
//! pid that started after the lock's time. Each test guards one defect of the
//! trust fixes; its doc comment names the item of the contract.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, SystemTime};

use lockwarden_tests::adversary::{doc, pair, reason, this_hostname, verdict, warden};
use lockwarden_tests::lock_writer::{Encoding, LockSpec, LockWriter, time_from_now};
use lockwarden_tests::restic::{Holder, TestRepo};
use serde_json::{Value, json};

const MINUTE: i64 = 60;

/// Item 1: absence from a host inventory proves a host gone only when the
/// inventory was read, lists at least one host the regex covers, and was
/// taken after lockwarden saw the lock. An empty inventory (either format),
/// one listing only other hosts, or a hosts file older than the lock's
/// first sighting (or than the listing, without a state dir) proves
/// nothing: the young lock is kept (`fresh`). A complete, current inventory
/// still removes the lock of an absent pod and of a pod recreated after the
/// lock was written.
#[test]
fn an_inventory_proves_a_host_gone_only_when_complete_and_current() {
    let pods = Pods::new();
    let long_ago = time_from_now(-24 * 60 * MINUTE);

    let unproven = [
        ("an empty PodList", json!({"items": []})),
        ("an empty list", json!([])),
        ("only other hosts", json!([running("laptop", &long_ago)])),
    ];
    for (what, inventory) in unproven {
        let path = pods.file("inventory.json", &inventory);
        let command = format!("cat {}", path.display());
        let (code, report) = pods.judge("unlock", &["--hosts-command", &command]);
        assert_kept_fresh(&report, &pods.gone, what);
        assert_eq!(code, 0, "{what}: {report:#}");
        assert!(
            pods.repo.lock_ids().contains(&pods.gone),
            "{what}: nothing removed"
        );
    }

    // Complete and taken after the listing (a command runs at each check).
    let pod_started_late = lockwarden::time::format_rfc3339(
        lockwarden::time::parse_rfc3339(&pods.written).expect("time") + 60_000_000_000,
    );
    let complete = json!([
        running("velero-node-agent-running", &long_ago),
        running("velero-recreated", &pod_started_late),
    ]);
    let path = pods.file("complete.json", &complete);
    let command = format!("cat {}", path.display());
    pods.assert_both_gone(pods.judge("check", &["--hosts-command", &command]));

    // The same inventory as a file written before this run, without a state
    // dir: it predates the listing and proves nothing.
    set_mtime(&path, SystemTime::now() - Duration::from_secs(3600));
    let hosts_file = path.to_str().expect("utf-8").to_owned();
    let (_, report) = pods.judge("check", &["--hosts-file", &hosts_file]);
    assert_kept_fresh(&report, &pods.gone, "a hosts file older than the listing");
    // A pod it lists as started after the lock did not write it; but the
    // pod that did is judged by its absence, which an old file cannot
    // prove (a pod with that hostname may have been made since).
    assert_kept_fresh(&report, &pods.recreated, "a recreated pod in an old file");

    // With a state dir: older than the first sighting proves nothing ...
    let state = pods.repo.dir.path().join("state");
    let state = state.to_str().expect("utf-8");
    let with_state = ["--hosts-file", &hosts_file, "--state-dir", state];
    let (_, report) = pods.judge("check", &with_state);
    assert_kept_fresh(
        &report,
        &pods.gone,
        "a hosts file older than the first sighting",
    );
    // ... rewritten after it, it does.
    std::fs::write(&path, complete.to_string()).expect("rewrite the inventory");
    set_mtime(&path, SystemTime::now());
    pods.assert_both_gone(pods.judge("check", &with_state));
}

/// The scene of the inventory test: two young locks, two minutes old, of
/// pods the inventory regex `^velero-` covers.
struct Pods {
    repo: TestRepo,
    /// When both locks were written.
    written: String,
    /// The lock of a pod no inventory lists.
    gone: String,
    /// The lock of a pod recreated after the lock was written.
    recreated: String,
}

impl Pods {
    fn new() -> Pods {
        let repo = TestRepo::init_local();
        let writer = LockWriter::new(&repo);
        let written = time_from_now(-2 * MINUTE);
        let gone = writer.write(LockSpec {
            time: written.clone(),
            hostname: "velero-gone-7d9f",
            pid: 7,
            ..LockSpec::default()
        });
        let recreated = writer.write(LockSpec {
            time: written.clone(),
            hostname: "velero-recreated",
            pid: 8,
            ..LockSpec::default()
        });
        Pods {
            repo,
            written,
            gone,
            recreated,
        }
    }

    /// Writes `inventory` to the file `name` beside the repository.
    fn file(&self, name: &str, inventory: &Value) -> PathBuf {
        let path = self.repo.dir.path().join(name);
        std::fs::write(&path, inventory.to_string()).expect("write inventory");
        path
    }

    /// `lockwarden <subcommand> --json --inventory-hosts ^velero- <source>`:
    /// its exit code and report.
    fn judge(&self, subcommand: &str, source: &[&str]) -> (i32, Value) {
        let mut args = vec!["--json", "--inventory-hosts", "^velero-"];
        args.extend_from_slice(source);
        let out = warden(&self.repo, subcommand, &args);
        (out.code, doc(&out))
    }

    /// A check found both pods gone: it would remove both locks.
    fn assert_both_gone(&self, (code, report): (i32, Value)) {
        assert_eq!(code, 3, "{report:#}");
        assert_eq!(verdict(&report, &self.gone), pair("remove", "host-gone"));
        assert_eq!(
            verdict(&report, &self.recreated),
            pair("remove", "host-gone")
        );
    }
}

/// A pod of a host inventory, running since `started`.
fn running(name: &str, started: &str) -> Value {
    json!({"name": name, "started": started, "state": "running"})
}

/// `id` is kept as `fresh`: the evidence `what` proved nothing.
fn assert_kept_fresh(report: &Value, id: &str, what: &str) {
    assert_eq!(
        verdict(report, id),
        pair("keep", "fresh"),
        "{what}: {}",
        reason(report, id)
    );
}

/// Dates `path` `when`.
fn set_mtime(path: &Path, when: SystemTime) {
    std::fs::File::options()
        .write(true)
        .open(path)
        .and_then(|f| f.set_modified(when))
        .expect("set mtime");
}

/// Item 2: a lock from this machine whose pid now runs a *restic* process
/// that started after the lock's time is not proof of death (the writer's
/// clock may be off, or another restic reused the pid): the answer is
/// `unknown`, so the young lock is kept, with a reason about the clock or
/// the reuse. A non-restic process (`sleep`) on the pid is still "pid
/// reused", and a pid that is gone is still dead: both locks are removed.
#[test]
fn a_restic_on_the_locks_pid_that_started_later_keeps_a_young_lock() {
    let repo = TestRepo::init_local();
    let holder = Holder::start(&repo);
    let host = this_hostname();
    let writer = LockWriter::new(&repo);
    let ten_minutes_ago = time_from_now(-10 * MINUTE);
    let on_restic = writer.write(LockSpec {
        time: ten_minutes_ago.clone(),
        hostname: &host,
        pid: i64::from(holder.pid),
        ..LockSpec::default()
    });
    let mut sleeper = Command::new("sleep")
        .arg("600")
        .spawn()
        .expect("spawn sleep");
    let on_sleep = writer.write(LockSpec {
        time: ten_minutes_ago.clone(),
        hostname: &host,
        pid: i64::from(sleeper.id()),
        ..LockSpec::default()
    });
    let mut finished = Command::new("true").spawn().expect("spawn true");
    let gone_pid = finished.id();
    finished.wait().expect("reap true");
    let on_gone = writer.write(LockSpec {
        time: ten_minutes_ago.clone(),
        hostname: &host,
        pid: i64::from(gone_pid),
        encoding: Encoding::Raw,
        ..LockSpec::default()
    });

    let out = warden(&repo, "check", &["--json"]);
    let report = doc(&out);
    assert_kept_fresh(&report, &on_restic, "a restic started after the lock");
    let why = reason(&report, &on_restic);
    assert!(
        why.contains("clock") || why.contains("reuse"),
        "says why the restic process proves nothing: {why}"
    );
    assert_eq!(verdict(&report, &on_sleep), pair("remove", "process-dead"));
    assert!(
        reason(&report, &on_sleep).contains("pid reused"),
        "{report:#}"
    );
    assert_eq!(verdict(&report, &on_gone), pair("remove", "process-dead"));

    let out = warden(&repo, "unlock", &[]);
    assert_eq!(out.code, 0, "{out:?}");
    let left = repo.lock_ids();
    assert!(left.contains(&on_restic), "the young lock stays: {out:?}");
    assert!(
        left.contains(&holder.lock_id),
        "the holder's own lock stays"
    );
    assert!(!left.contains(&on_sleep) && !left.contains(&on_gone));
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    drop(holder);
}

/// A live process in a container that shares this machine's hostname (docker
/// `--hostname`, `hostNetwork` pods, `--uts=host`) has a pid that means
/// nothing in lockwarden's namespace. When that pid is free on the host, the
/// holder must not be judged dead: its young lock is kept.
#[test]
fn a_holder_in_a_nested_pid_namespace_is_not_judged_dead() {
    let repo = TestRepo::init_local();
    let pid = free_pid();
    let mut nested = sleep_in_a_nested_pid_namespace(pid);
    let id = LockWriter::new(&repo).write(LockSpec {
        time: time_from_now(-MINUTE),
        hostname: &this_hostname(),
        pid: i64::from(pid),
        ..LockSpec::default()
    });
    let out = warden(&repo, "unlock", &["--json"]);
    let _ = nested.kill();
    let _ = nested.wait();
    let report = doc(&out);
    assert_kept_fresh(&report, &id, "a holder in a nested pid namespace");
    assert!(
        reason(&report, &id).contains("container"),
        "{}",
        reason(&report, &id)
    );
    assert!(repo.lock_ids().contains(&id));
}

/// A pid free on the host (the highest below 32,000), for a nested pid
/// namespace to hand out next.
fn free_pid() -> u32 {
    (20_000..32_000)
        .rev()
        .find(|p| !Path::new(&format!("/proc/{p}")).exists())
        .expect("a free pid")
}

/// A `sleep` in a new pid namespace, where it runs as `pid`, and returns
/// once it does; killing the returned child ends the namespace.
fn sleep_in_a_nested_pid_namespace(pid: u32) -> Child {
    let script = format!(
        "echo {} > /proc/sys/kernel/ns_last_pid; sleep 120 & wait",
        pid - 1
    );
    let nested = Command::new("unshare")
        .args([
            "--pid",
            "--fork",
            "--kill-child",
            "--mount-proc",
            "sh",
            "-c",
            &script,
        ])
        .spawn()
        .expect("unshare");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !holds_in_a_nested_namespace(pid) {
        assert!(
            std::time::Instant::now() < deadline,
            "the nested process never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    nested
}

/// Whether some process is `pid` in the innermost pid namespace it is in
/// (the last `NSpid:` field of its status).
fn holds_in_a_nested_namespace(pid: u32) -> bool {
    std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .any(|e| {
            std::fs::read_to_string(e.path().join("status")).is_ok_and(|s| {
                s.lines().any(|l| {
                    l.starts_with("NSpid:") && l.split_whitespace().last() == Some(&pid.to_string())
                })
            })
        })
}

/// A hosts file dated in the future (copied with another clock's time, a
/// file server whose clock runs ahead) says nothing about when the inventory
/// was taken: absence from it proves nothing, even for a lock lockwarden saw
/// before.
#[test]
fn a_hosts_file_dated_in_the_future_proves_no_absence() {
    let repo = TestRepo::init_local();
    let id = LockWriter::new(&repo).write(LockSpec {
        time: time_from_now(-MINUTE),
        hostname: "velero-new-pod",
        pid: 7,
        ..LockSpec::default()
    });
    let hosts = repo.dir.path().join("hosts.json");
    let listed = json!([{"name": "velero-old-pod", "started": time_from_now(-60 * MINUTE), "state": "running"}]);
    std::fs::write(&hosts, listed.to_string()).expect("write hosts");
    let state = repo.dir.path().join("state");
    let args = [
        "--json",
        "--inventory-hosts",
        "^velero-",
        "--hosts-file",
        hosts.to_str().expect("utf-8"),
        "--state-dir",
        state.to_str().expect("utf-8"),
    ];
    // Seen once, then the file is dated two minutes ahead.
    let first = doc(&warden(&repo, "check", &args));
    assert_eq!(verdict(&first, &id), pair("keep", "fresh"));
    set_mtime(&hosts, SystemTime::now() + Duration::from_secs(120));
    let out = warden(&repo, "unlock", &args);
    let report = doc(&out);
    assert_kept_fresh(&report, &id, "a hosts file dated ahead");
    assert!(repo.lock_ids().contains(&id));
    assert!(out.stderr.contains("in the future"), "{}", out.stderr);
}
