//! `lockwarden hold`: a lock written as restic writes one, honoured by the
//! real restic, refreshed, lost, released, on every backend that can remove.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use lockwarden_tests::cloud::Store;
use lockwarden_tests::lock_writer::{LockSpec, LockWriter, time_from_now};
use lockwarden_tests::restic::{Holder, RestServer, TestRepo, swift_through_restic};
use lockwarden_tests::restic_version::restic_version;
use lockwarden_tests::sshd::Sshd;
use lockwarden_tests::{Finished, finish};
use serde_json::Value;

/// Exit code of `hold` when the lock cannot be taken or kept.
const LOCKED: i32 = 11;

/// A `lockwarden hold` running a shell script that marks `started`, writes
/// its pid, and waits for `go` (then exits with the code in `go`); on
/// SIGTERM it marks `terminated` and exits 143.
struct Held {
    child: Child,
    dir: PathBuf,
}

const SCRIPT: &str = r#"trap 'touch "$D/terminated"; exit 143' TERM
echo $$ > "$D/pid"; touch "$D/started"
while [ ! -e "$D/go" ]; do sleep 0.05; done
exit "$(cat "$D/go")""#;

impl Held {
    /// Starts `lockwarden hold <extra> -- sh -c SCRIPT` on `repo`.
    fn start(repo: &TestRepo, extra: &[&str]) -> Held {
        Held::start_script(repo, extra, SCRIPT)
    }

    /// Starts `lockwarden hold <extra> -- sh -c <script>` on `repo`, with
    /// `D` set to a fresh directory for the script's marks.
    fn start_script(repo: &TestRepo, extra: &[&str], script: &str) -> Held {
        let dir = tempfile::tempdir().expect("temp dir").keep();
        let child = repo
            .lockwarden("hold")
            .args(extra)
            .args(["--", "sh", "-c", script])
            .env("D", &dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn lockwarden hold");
        Held { child, dir }
    }

    fn marked(&self, name: &str) -> bool {
        self.dir.join(name).exists()
    }

    /// Waits until the script has started (the lock is held), or panics with
    /// what lockwarden said if it ended first.
    fn wait_started(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.marked("started") {
            if let Ok(Some(_)) = self.child.try_wait() {
                panic!("hold ended before the command started: {:?}", self.output());
            }
            assert!(Instant::now() < deadline, "the command never started");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Lets the script end with `code` and returns what hold did.
    fn finish(mut self, code: i32) -> Finished {
        // Written whole, then renamed: the script reads `go` as soon as it
        // exists, and would read an empty file written in place.
        let tmp = self.dir.join("go.tmp");
        std::fs::write(&tmp, code.to_string()).expect("write go");
        std::fs::rename(&tmp, self.dir.join("go")).expect("rename go");
        self.output()
    }

    /// Waits for hold to end (at most 120 s) and collects its output.
    fn output(&mut self) -> Finished {
        let deadline = Instant::now() + Duration::from_secs(120);
        while self.child.try_wait().expect("poll").is_none() {
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let out = std::mem::replace(&mut self.child, dummy())
            .wait_with_output()
            .expect("hold's output");
        Finished::from(out)
    }

    /// The script's pid.
    fn script_pid(&self) -> i32 {
        let text = std::fs::read_to_string(self.dir.join("pid")).expect("pid file");
        text.trim().parse().expect("a pid")
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let _ = std::fs::write(self.dir.join("go"), "0");
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A finished child to swap in when the real one is taken out.
fn dummy() -> Child {
    let mut child = std::process::Command::new("true")
        .spawn()
        .expect("spawn true");
    let _ = child.wait();
    child
}

/// Waits until `ready` holds, for at most 60 s.
fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ready() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `restic cat lock ID` as JSON.
fn cat_lock(repo: &TestRepo, id: &str) -> Value {
    let out = repo.restic(&["cat", "lock", id, "--no-lock"]);
    assert_eq!(out.code, 0, "restic cat lock: {out:?}");
    serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"))
}

/// The one lock in `repo` other than `not`, and `restic cat lock` of it,
/// read before a refresh replaced it (a 1 s refresh can win the race
/// against restic's key derivation: then the next one is read).
fn current_lock(repo: &TestRepo, not: Option<&str>) -> (String, Value) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(
            Instant::now() < deadline,
            "no lock stayed long enough to read"
        );
        let ids = repo.lock_ids();
        let Some(id) = ids.iter().find(|id| Some(id.as_str()) != not) else {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        let out = repo.restic(&["cat", "lock", id, "--no-lock"]);
        if out.code == 0 {
            let lock = serde_json::from_str(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"));
            return (id.clone(), lock);
        }
        assert!(
            !repo.lock_ids().contains(id),
            "restic cat lock failed on a lock still there: {out:?}"
        );
    }
}

/// The one lock in `repo`, or a panic naming what is there.
fn only_lock(repo: &TestRepo) -> String {
    let ids = repo.lock_ids();
    assert_eq!(ids.len(), 1, "{ids:?}");
    ids.into_iter().next().unwrap_or_default()
}

/// A small directory for `restic backup`.
fn data(repo: &TestRepo) -> String {
    let data = repo.dir.path().join("data");
    std::fs::create_dir_all(&data).expect("data dir");
    std::fs::write(data.join("f"), "x").expect("data file");
    data.display().to_string()
}

/// The scenario every backend passes: an exclusive hold is a lock restic
/// reads (`restic cat lock`) and honours (`restic backup` is refused); the
/// command's exit code comes back and the lock goes with it.
fn an_exclusive_hold_blocks_restic(repo: &TestRepo) {
    let mut held = Held::start(repo, &["--exclusive"]);
    held.wait_started();
    let id = only_lock(repo);
    let lock = cat_lock(repo, &id);
    assert_eq!(lock["exclusive"], true, "{lock}");
    assert_eq!(lock["pid"], held.child.id(), "{lock}");
    let hostname = rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned();
    assert_eq!(lock["hostname"], hostname.as_str(), "{lock}");

    let backup = repo.restic(&["backup", &data(repo)]);
    assert_eq!(
        backup.code,
        restic_version().locked_exit_code(),
        "restic backed up past the hold: {backup:?}"
    );
    assert!(backup.stderr.contains("already locked"), "{backup:?}");

    let out = held.finish(3);
    assert_eq!(out.code, 3, "the command's code passes through: {out:?}");
    assert_eq!(repo.lock_ids(), BTreeSet::new(), "{out:?}");
    repo.assert_usable();
}

#[test]
fn an_exclusive_hold_blocks_restic_on_a_local_repository() {
    an_exclusive_hold_blocks_restic(&TestRepo::init_local());
}

#[test]
fn an_exclusive_hold_blocks_restic_over_rest() {
    let root = tempfile::tempdir().expect("temp dir");
    let server = RestServer::start(root.path());
    an_exclusive_hold_blocks_restic(&server.init_repo("repo"));
}

#[test]
fn an_exclusive_hold_blocks_restic_over_rclone() {
    an_exclusive_hold_blocks_restic(&TestRepo::init_over_rclone());
}

#[test]
fn an_exclusive_hold_blocks_restic_over_sftp() {
    let server = Sshd::start();
    let repo = server.init_repo_at("repo", |path| server.url(path, None));
    an_exclusive_hold_blocks_restic(&repo);
}

#[test]
fn an_exclusive_hold_blocks_restic_on_s3() {
    an_exclusive_hold_blocks_restic(&Store::S3.new_bucket().init_repo("held"));
}

#[test]
fn an_exclusive_hold_blocks_restic_on_azure() {
    an_exclusive_hold_blocks_restic(&Store::Azure.new_bucket().init_repo("held"));
}

// Not on GCS: object_store writes with the XML API's PUT, which real GCS
// serves and fake-gcs-server does not (it answers 400 "invalid uploadType").

#[test]
fn a_shared_hold_lets_backups_run_and_keeps_exclusive_commands_out() {
    let repo = TestRepo::init_local();
    let mut held = Held::start(&repo, &[]);
    held.wait_started();
    let ours = only_lock(&repo);
    assert_eq!(cat_lock(&repo, &ours)["exclusive"], false);
    // Another lockwarden keeps the hold's lock: its holder runs here.
    let (code, doc) = repo.check_json();
    assert_eq!(code, 0, "{doc:#}");
    let entry = lockwarden_tests::adversary::entry(&doc, &ours);
    assert_eq!(entry["rule"], "holder-alive", "{doc:#}");

    let backup = repo.restic(&["backup", &data(&repo)]);
    assert_eq!(
        backup.code, 0,
        "a backup runs beside a shared hold: {backup:?}"
    );
    let prune = repo.restic(&["prune"]);
    assert_eq!(
        prune.code,
        restic_version().locked_exit_code(),
        "prune ran past a shared hold: {prune:?}"
    );
    assert!(prune.stderr.contains("already locked"), "{prune:?}");

    let out = held.finish(0);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(repo.lock_ids(), BTreeSet::new());
}

#[test]
fn a_live_conflicting_lock_refuses_the_hold_and_the_command_never_runs() {
    let repo = TestRepo::init_local();
    let live = Holder::start(&repo);
    let mut held = Held::start(&repo, &["--exclusive"]);
    let out = held.output();
    assert_eq!(out.code, LOCKED, "{out:?}");
    assert!(out.stderr.contains("already locked by PID"), "{out:?}");
    assert_eq!(repo.lock_ids(), BTreeSet::from([live.lock_id.clone()]));
    // A shared hold is no conflict for a backup's shared lock.
    let mut shared = Held::start(&repo, &[]);
    shared.wait_started();
    assert_eq!(repo.lock_ids().len(), 2);
    assert_eq!(shared.finish(0).code, 0);
    assert_eq!(live.finish(), 0);
}

#[test]
fn stale_locks_are_judged_and_removed_first_as_unlock_would() {
    let repo = TestRepo::init_local();
    let dead = Holder::start(&repo).kill();
    let old = LockWriter::new(&repo).write(LockSpec {
        time: time_from_now(-3600),
        hostname: "evicted-pod",
        pid: 1,
        exclusive: true,
        ..LockSpec::default()
    });
    let mut held = Held::start(&repo, &["--exclusive"]);
    held.wait_started();
    let ids = repo.lock_ids();
    assert!(!ids.contains(&dead) && !ids.contains(&old), "{ids:?}");
    let out = held.finish(0);
    assert_eq!(out.code, 0, "{out:?}");
    for id in [&dead, &old] {
        assert!(
            out.stderr
                .contains(&format!("removed stale lock {}", &id[..8])),
            "{out:?}"
        );
    }
}

#[test]
fn retry_lock_waits_for_a_live_lock_to_go() {
    let repo = TestRepo::init_local();
    let live = Holder::start(&repo);
    let mut held = Held::start(&repo, &["--exclusive", "--retry-lock", "2m"]);
    // It says it waits, without running the command.
    let stderr = held.child.stderr.take().expect("stderr");
    let said = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut { stderr }, &mut text);
        text
    });
    std::thread::sleep(Duration::from_secs(2));
    assert!(!held.marked("started"), "ran while another held the lock");
    assert_eq!(live.finish(), 0);
    held.wait_started();
    let code = held.finish(0).code;
    let stderr = said.join().expect("stderr reader");
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("judging again"), "{stderr}");
    assert_eq!(repo.lock_ids(), BTreeSet::new());
}

#[test]
fn the_lock_is_refreshed_with_a_new_file_and_the_old_one_removed() {
    let repo = TestRepo::init_local();
    let mut held = Held::start(&repo, &["--refresh-interval", "1s"]);
    held.wait_started();
    let (first, first_lock) = current_lock(&repo, None);
    wait_for("a refresh", || {
        let ids = repo.lock_ids();
        ids.len() == 1 && !ids.contains(&first)
    });
    let (_, lock) = current_lock(&repo, Some(&first));
    assert_ne!(lock["time"], first_lock["time"], "{lock}");
    assert_eq!(lock["pid"], held.child.id(), "{lock}");
    let out = held.finish(0);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(repo.lock_ids(), BTreeSet::new());
}

#[test]
fn a_lock_removed_behind_its_back_stops_the_command_and_what_it_started() {
    let repo = TestRepo::init_local();
    // The command starts a process of its own that ignores SIGTERM.
    let script = format!("(trap '' TERM; exec sleep 300) & echo $! > \"$D/grandchild\"\n{SCRIPT}");
    let mut held = Held::start_script(&repo, &["--refresh-interval", "1s", "--exclusive"], &script);
    held.wait_started();
    let grandchild: i32 = std::fs::read_to_string(held.dir.join("grandchild"))
        .expect("grandchild pid")
        .trim()
        .parse()
        .expect("a pid");
    // Someone runs the blunt tool.
    let removed = repo.restic(&["unlock", "--remove-all"]);
    assert_eq!(removed.code, 0, "{removed:?}");
    wait_for("the command to be stopped", || held.marked("terminated"));
    let out = held.output();
    assert_eq!(out.code, LOCKED, "{out:?}");
    assert!(out.stderr.contains("the lock was lost"), "{out:?}");
    assert_eq!(repo.lock_ids(), BTreeSet::new(), "{out:?}");
    let pid = rustix::process::Pid::from_raw(grandchild).expect("a pid");
    wait_for("the grandchild to be killed", || {
        rustix::process::test_kill_process(pid).is_err()
            || std::fs::read_to_string(format!("/proc/{grandchild}/stat"))
                .is_ok_and(|stat| stat.contains(") Z "))
    });
}

#[test]
fn sigint_while_waiting_for_the_lock_runs_nothing_and_exits_130() {
    let repo = TestRepo::init_local();
    let live = Holder::start(&repo);
    let mut held = Held::start(&repo, &["--exclusive", "--retry-lock", "2m"]);
    let lock_dir = repo.path.join("locks");
    // Wait for its first attempt to have failed (it judged: read the locks).
    std::thread::sleep(Duration::from_secs(2));
    assert!(lock_dir.exists());
    let pid = rustix::process::Pid::from_raw(held.child.id() as i32).expect("a pid");
    rustix::process::kill_process(pid, rustix::process::Signal::INT).expect("SIGINT");
    let out = held.output();
    assert_eq!(out.code, 130, "{out:?}");
    assert!(!held.marked("started"), "the command ran: {out:?}");
    assert_eq!(repo.lock_ids(), BTreeSet::from([live.lock_id.clone()]));
}

#[test]
fn sigterm_reaches_the_command_and_its_code_comes_back() {
    let repo = TestRepo::init_local();
    let mut held = Held::start(&repo, &[]);
    held.wait_started();
    let pid = rustix::process::Pid::from_raw(held.child.id() as i32).expect("a pid");
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("SIGTERM");
    let out = held.output();
    assert_eq!(out.code, 143, "the script's own exit code: {out:?}");
    assert_eq!(repo.lock_ids(), BTreeSet::new(), "{out:?}");
}

#[test]
fn a_killed_hold_leaves_a_lock_that_is_stale_by_the_ordinary_rules() {
    let repo = TestRepo::init_local();
    let mut held = Held::start(&repo, &["--exclusive"]);
    held.wait_started();
    let id = only_lock(&repo);
    let script = held.script_pid();
    held.child.kill().expect("SIGKILL");
    let _ = held.child.wait();
    if let Some(pid) = rustix::process::Pid::from_raw(script) {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    }
    assert_eq!(only_lock(&repo), id, "SIGKILL left the lock");
    let (code, doc) = repo.check_json();
    assert_eq!(code, 3, "{doc:#}");
    let entry = lockwarden_tests::adversary::entry(&doc, &id);
    assert_eq!(entry["rule"], "process-dead", "{doc:#}");
    // restic's own rule agrees: same host, dead pid.
    let unlock = repo.restic(&["unlock"]);
    assert_eq!(unlock.code, 0, "{unlock:?}");
    assert_eq!(
        unlock.stdout,
        restic_version().unlock_message(1),
        "{unlock:?}"
    );
    assert_eq!(repo.lock_ids(), BTreeSet::new());
}

#[test]
fn a_backend_that_cannot_write_a_lock_is_refused_before_anything_runs() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (repo, _log) = swift_through_restic(dir.path());
    let marker = dir.path().join("ran");
    let out = finish(repo.lockwarden("hold").arg("--").arg("touch").arg(&marker));
    out.assert_exit(2, "cannot write a lock there");
    assert!(!marker.exists(), "the command ran: {out:?}");
    assert_eq!(repo.lock_ids(), BTreeSet::new());
}
