//! lockwarden clearing 2,000 stale locks from a local repository while real
//! restic backups keep taking and releasing locks in it: it removes only the
//! stale ones, the live holder keeps its lock, and restic never notices.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use lockwarden_tests::Finished;
use lockwarden_tests::guard::{Guarded, HANG_GUARD, wait_until};
use lockwarden_tests::lock_writer::{Encoding, LockSpec, LockWriter, time_from_now};
use lockwarden_tests::restic::{Holder, TestRepo};
use serde_json::Value;

/// How many stale locks the repository starts with.
const STALE: usize = 2_000;
/// How many loops of short backups run beside the holder.
const LOOPS: usize = 3;

/// A backup still running after this long is stalled: a normal one takes a
/// second or two, and restic 0.14 retries the load of a vanished lock file
/// for about a minute.
const STALL_GUARD: Duration = Duration::from_secs(20);

/// What one backup loop did.
#[derive(Default)]
struct LoopRecord {
    /// Backups run.
    runs: usize,
    /// Backups that were running while lockwarden ran.
    overlapping: usize,
    /// Backups that restic 0.14 stalled retrying loads of lock files that
    /// had vanished, interrupted: their pids and what they printed.
    stalls: Vec<(i64, Finished)>,
    /// Every other backup that did not exit 0.
    failures: Vec<Finished>,
}

/// When lockwarden ran, for the loops to tell which backups overlapped it.
#[derive(Default)]
struct UnlockWindow {
    began: AtomicBool,
    ended: AtomicBool,
}

/// Loops of `restic backup` of a small directory, each with its own cache,
/// until stopped; stopped and joined when dropped, so that no restic
/// outlives the test.
struct BackupLoops {
    stop: Arc<AtomicBool>,
    records: Vec<Arc<Mutex<LoopRecord>>>,
    threads: Vec<JoinHandle<()>>,
}

impl BackupLoops {
    /// Starts `n` loops backing up `data` into `repo`.
    fn start(repo: &TestRepo, data: &Path, n: usize, window: &Arc<UnlockWindow>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let mut records = Vec::new();
        let mut threads = Vec::new();
        for i in 0..n {
            let record = Arc::new(Mutex::new(LoopRecord::default()));
            let mut command = repo.restic_command();
            command
                .env(
                    "RESTIC_CACHE_DIR",
                    repo.dir.path().join(format!("restic-cache-{i}")),
                )
                .args(["backup", "--quiet"])
                .arg(data);
            let (stop, window, rec) = (stop.clone(), window.clone(), record.clone());
            threads.push(std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let began_before_end = !window.ended.load(Ordering::SeqCst);
                    let outcome = backup_once(&mut command);
                    let overlapped = began_before_end && window.began.load(Ordering::SeqCst);
                    let mut rec = rec.lock().expect("loop record");
                    rec.runs += 1;
                    rec.overlapping += usize::from(overlapped);
                    match outcome {
                        Outcome::Succeeded => {}
                        Outcome::Stalled(pid, out) => rec.stalls.push((pid, out)),
                        Outcome::Failed(out) => rec.failures.push(out),
                    }
                }
            }));
            records.push(record);
        }
        BackupLoops {
            stop,
            records,
            threads,
        }
    }

    /// Whether every loop has completed at least one backup.
    fn all_ran(&self) -> bool {
        self.records
            .iter()
            .all(|r| r.lock().expect("loop record").runs >= 1)
    }

    /// Stops the loops, waits for their current backups, and returns what
    /// they did.
    fn finish(mut self) -> Vec<LoopRecord> {
        self.stop_and_join();
        self.records
            .iter()
            .map(|r| std::mem::take(&mut *r.lock().expect("loop record")))
            .collect()
    }

    fn stop_and_join(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

impl Drop for BackupLoops {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

/// How one backup ended.
enum Outcome {
    /// Exit 0.
    Succeeded,
    /// Stalled by restic 0.14 retrying the load of lock files that vanished
    /// between its listing and its reading them (a lock another process
    /// removed: lockwarden, `restic unlock` or a finishing backup alike),
    /// and interrupted; with its pid. When the stall was in restic's second
    /// look at the other locks, after it wrote its own, that lock stays
    /// behind: restic registers it for cleanup only once it is acquired.
    Stalled(i64, Finished),
    /// Anything else.
    Failed(Finished),
}

/// Runs one backup. One still running after [`STALL_GUARD`] gets SIGINT, so
/// that restic removes its own lock; it counts as stalled only if all it
/// complained about was lock files that no longer exist.
fn backup_once(command: &mut Command) -> Outcome {
    let mut run = Guarded::spawn(command);
    let pid = i64::from(run.pid());
    let deadline = Instant::now() + STALL_GUARD;
    while run.running() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let interrupted = run.running();
    if interrupted {
        // It may end on its own just now: a failed kill is fine.
        let _ = Command::new("kill")
            .args(["-INT", &run.pid().to_string()])
            .status();
    }
    let out = run.finish_within(HANG_GUARD, "restic backup");
    if !interrupted {
        return match out.code {
            0 => Outcome::Succeeded,
            _ => Outcome::Failed(out),
        };
    }
    let errors: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.contains("returned error"))
        .collect();
    let only_vanished_locks = !errors.is_empty()
        && errors
            .iter()
            .all(|l| l.starts_with("Load(<lock/") && l.contains("no such file or directory"));
    if only_vanished_locks {
        Outcome::Stalled(pid, out)
    } else {
        Outcome::Failed(out)
    }
}

/// One entry of an unlock document's `removed` list.
struct Removed {
    id: String,
    /// `removed` or `already gone`.
    result: String,
    rule: String,
    /// The holder's pid, as the lock records it.
    pid: i64,
}

/// Runs `lockwarden unlock --json`, which must succeed with no failed
/// removal, and returns its `removed` list and the document.
fn unlock_json(repo: &TestRepo) -> (Vec<Removed>, Value) {
    let out = Guarded::spawn(repo.lockwarden("unlock").arg("--json"))
        .finish_within(HANG_GUARD, "lockwarden unlock --json");
    assert_eq!(out.code, 0, "unlock succeeds: {out:?}");
    let (_, doc) = out.json();
    assert_eq!(
        doc["failed"].as_array().map(Vec::len),
        Some(0),
        "no removal failed: {}",
        doc["failed"]
    );
    let pid_of = |id: &str| {
        doc["locks"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|l| l["id"] == id)
            .and_then(|l| l["pid"].as_i64())
            .unwrap_or_else(|| panic!("removed {id} is not among the locks read"))
    };
    let removed = doc["removed"]
        .as_array()
        .expect("removed")
        .iter()
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap_or_default().to_owned();
            Removed {
                pid: pid_of(&s("id")),
                id: s("id"),
                result: s("result"),
                rule: s("rule"),
            }
        })
        .collect();
    (removed, doc)
}

/// lockwarden (two runs at once, then a third) removes 2,000 stale shared
/// locks from a local repository while three loops of `restic backup` take
/// and release locks and a fourth backup holds one: it deletes only stale
/// locks, the holder keeps its lock, the backups succeed, and the
/// repository checks clean afterwards.
///
/// restic 0.14 (Debian's) retries, for about a minute per file, the load of
/// a lock file that vanished between its listing and its reading it, whoever
/// removed it (`restic unlock` in lockwarden's place does the same). Such a
/// backup is interrupted after [`STALL_GUARD`] and accepted only if that is
/// all it complained about; it may leave its own lock behind, which is then
/// the lock of a dead process: lockwarden may remove it (rule
/// `process-dead`), and a last run must.
#[test]
fn stale_locks_go_while_restic_backups_keep_locking() {
    let repo = TestRepo::init_local();
    let data = small_data(&repo);
    // The holder first, so that the lock it is given is its own.
    let holder = Holder::start(&repo);
    let stale = write_stale_locks(&repo);

    let window = Arc::new(UnlockWindow::default());
    let loops = BackupLoops::start(&repo, &data, LOOPS, &window);
    wait_until("every backup loop completed a backup", || loops.all_ran());

    // Two lockwardens at once, then a third after the first two: they race
    // each other as well as restic.
    window.began.store(true, Ordering::SeqCst);
    let mut reports: Vec<(Vec<Removed>, Value)> = std::thread::scope(|s| {
        let runs: Vec<_> = (0..2).map(|_| s.spawn(|| unlock_json(&repo))).collect();
        runs.into_iter()
            .map(|r| r.join().expect("unlock thread"))
            .collect()
    });
    let held_during = repo.lock_ids().contains(&holder.lock_id);
    reports.push(unlock_json(&repo));
    let held_after = repo.lock_ids().contains(&holder.lock_id);
    window.ended.store(true, Ordering::SeqCst);
    let records = loops.finish();
    let holder_lock = holder.lock_id.clone();
    let holder_code = holder.finish();

    let interrupted: BTreeSet<i64> = records
        .iter()
        .flat_map(|r| r.stalls.iter().map(|(pid, _)| *pid))
        .collect();
    assert_each_stale_lock_deleted_once(&reports, &stale, &interrupted);
    assert!(
        held_during && held_after,
        "the holder's lock {holder_lock} stayed"
    );
    assert!(
        repo.lock_ids().is_disjoint(&stale),
        "every stale lock is gone"
    );
    assert_backups_unharmed(&records, holder_code, &interrupted);

    // All restic processes have ended: what is left are locks of interrupted
    // backups, if any, and a last run removes exactly those.
    let (removed, doc) = unlock_json(&repo);
    for r in &removed {
        assert!(
            r.rule == "process-dead" && interrupted.contains(&r.pid),
            "the last run removed only interrupted backups' locks, not {} ({}, pid {}): {doc:#}",
            r.id,
            r.rule,
            r.pid
        );
    }
    assert!(
        repo.lock_ids().is_empty(),
        "no lock is left: {:?}",
        repo.lock_ids()
    );
    let check = repo.restic(&["check"]);
    assert_eq!(check.code, 0, "restic check passes: {check:?}");
}

/// A directory of five small files beside `repo`, for the backups.
fn small_data(repo: &TestRepo) -> PathBuf {
    let data = repo.dir.path().join("small");
    std::fs::create_dir_all(&data).expect("data dir");
    for n in 0..5 {
        std::fs::write(data.join(format!("file-{n}")), format!("content {n}\n")).expect("write");
    }
    data
}

/// Writes [`STALE`] shared locks of a host that is gone, two hours old, half
/// of them zstd; returns their ids.
fn write_stale_locks(repo: &TestRepo) -> BTreeSet<String> {
    let writer = LockWriter::new(repo);
    let when = time_from_now(-2 * 3600);
    let stale: BTreeSet<String> = (0..STALE)
        .map(|n| {
            let encoding = if n % 2 == 0 {
                Encoding::Zstd
            } else {
                Encoding::Raw
            };
            writer.write(LockSpec {
                time: when.clone(),
                hostname: "gone-host",
                pid: 10_000 + n as i64,
                encoding,
                ..LockSpec::default()
            })
        })
        .collect();
    assert_eq!(stale.len(), STALE, "distinct lock ids");
    stale
}

/// Across the unlock `reports`, each `stale` lock was deleted exactly once,
/// and nothing else but the lock of an `interrupted` backup.
fn assert_each_stale_lock_deleted_once(
    reports: &[(Vec<Removed>, Value)],
    stale: &BTreeSet<String>,
    interrupted: &BTreeSet<i64>,
) {
    let mut deleted = Vec::new();
    for (removed, doc) in reports {
        for r in removed {
            let stale_lock = stale.contains(&r.id);
            let dead_backup = r.rule == "process-dead" && interrupted.contains(&r.pid);
            match r.result.as_str() {
                "removed" if stale_lock => deleted.push(r.id.clone()),
                "removed" => assert!(
                    dead_backup,
                    "lockwarden deleted {} ({}, pid {}), neither stale nor an interrupted backup's: {:#}",
                    r.id, r.rule, r.pid, doc["locks"]
                ),
                // A backup that ended between lockwarden's read and its
                // removal took its lock along: judged dead, found gone.
                "already gone" => assert!(
                    stale_lock || r.rule == "process-dead",
                    "{} ({}) reported already gone",
                    r.id,
                    r.rule
                ),
                other => panic!("unknown removal result {other:?} for {}", r.id),
            }
        }
    }
    assert_eq!(
        deleted.len(),
        STALE,
        "each stale lock was deleted exactly once across the runs"
    );
    assert_eq!(
        &deleted.into_iter().collect::<BTreeSet<_>>(),
        stale,
        "the deleted locks are the stale ones"
    );
}

/// Every backup of the loops (but the `interrupted` ones) and the held one
/// exited 0, and each loop had one running while lockwarden ran.
fn assert_backups_unharmed(records: &[LoopRecord], holder_code: i32, interrupted: &BTreeSet<i64>) {
    let backups: usize = records.iter().map(|r| r.runs).sum();
    let failures: Vec<&Finished> = records.iter().flat_map(|r| &r.failures).collect();
    assert!(
        failures.is_empty(),
        "every restic backup exited 0 ({backups} ran); failures: {failures:#?}"
    );
    assert_eq!(holder_code, 0, "the held backup exited 0");
    assert!(
        records.iter().all(|r| r.overlapping >= 1),
        "every loop had a backup running while lockwarden ran"
    );
    if !interrupted.is_empty() {
        eprintln!(
            "{} of {backups} backups stalled on lock files removed while restic read them, and were interrupted",
            interrupted.len()
        );
    }
}
