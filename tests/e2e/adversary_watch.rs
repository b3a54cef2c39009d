//! `watch` under stress: a repository stuck in a password command, a
//! configuration it must refuse at start, a metrics client that never
//! reads (item 10 of the trust fixes), and more repositories than its
//! workers and its soft open-files limit.

use std::io::Write;
use std::net::{Shutdown, TcpStream};
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use lockwarden_tests::guard::{Guarded, KillOnDrop, processes_with, unique_sleep, wait_until};
use lockwarden_tests::lock_writer::{LockSpec, LockWriter, time_from_now};
use lockwarden_tests::lockwarden;
use lockwarden_tests::restic::{TestRepo, free_port};

/// How long `watch` may take to stop or to refuse its configuration before
/// the test calls it hung: generous, not a timing assertion.
const STOP_GUARD: Duration = Duration::from_secs(10);
/// How long a configuration `watch` must refuse may run before the test
/// calls it started.
const START_GUARD: Duration = Duration::from_secs(30);

/// What a test's watch configuration says beyond the state directory and
/// the repository's name and location.
#[derive(Default)]
struct Lines<'a> {
    /// Top-level lines (`metrics_addr`, ...).
    top: &'a str,
    /// Keys of the one repository (`password_*`, `interval`, `settings`, ...).
    keys: &'a str,
}

/// Writes a watch configuration for `repo` with `lines`.
fn config(repo: &TestRepo, lines: Lines) -> PathBuf {
    let Lines { top, keys } = lines;
    let path = repo.dir.path().join("watch.toml");
    std::fs::write(
        &path,
        format!(
            "state_dir = \"{state}\"\n{top}\n\n[[repository]]\nname = \"r\"\nrepository = \"{location}\"\n{keys}\n",
            state = repo.dir.path().join("state").display(),
            location = repo.location,
        ),
    )
    .expect("write config");
    path
}

fn watch(repo: &TestRepo, config: &PathBuf) -> Guarded {
    Guarded::spawn(
        lockwarden(&repo.dir.path().join("cache"))
            .args(["watch", "--config"])
            .arg(config),
    )
}

/// Item 10: SIGTERM stops `watch` promptly (about 2 s; the guard here is
/// 10 s) even while a repository's check is stuck in a password command
/// that never ends.
#[test]
fn watch_stops_on_sigterm_while_a_repository_hangs() {
    let repo = TestRepo::init_local();
    let sleep = unique_sleep();
    let _cleanup = KillOnDrop(sleep.clone());
    let path = config(
        &repo,
        Lines {
            keys: &format!("password_command = \"{sleep}\"\ninterval = \"2s\""),
            ..Lines::default()
        },
    );
    let watch = watch(&repo, &path);
    wait_until("the password command runs", || {
        !processes_with(&sleep).is_empty()
    });
    watch.signal("TERM");
    let out = watch
        .wait_within(STOP_GUARD)
        .unwrap_or_else(|out| panic!("watch did not stop on SIGTERM: {out:?}"));
    assert_eq!(out.code, 0, "a clean stop: {out:?}");
}

/// Item 10: an `interval` under one second is refused at start (exit 2),
/// instead of checking the repository in a tight loop.
#[test]
fn watch_refuses_a_sub_second_interval_at_start() {
    let repo = TestRepo::init_local();
    let path = config(
        &repo,
        Lines {
            keys: &format!("{}\ninterval = \"500ms\"", repo.password_file_setting()),
            ..Lines::default()
        },
    );
    let out = watch(&repo, &path)
        .wait_within(START_GUARD)
        .unwrap_or_else(|out| panic!("watch started with interval 500ms: {out:?}"));
    out.assert_exit(2, "interval");
}

/// Item 10: a setting the policy refuses (`stale-after = "0"`) is refused at
/// start (exit 2), not logged as a failed check forever.
#[test]
fn watch_refuses_a_setting_the_policy_rejects_at_start() {
    let repo = TestRepo::init_local();
    let path = config(
        &repo,
        Lines {
            keys: &format!(
                "{}\ninterval = \"1h\"\nsettings = {{ stale-after = \"0\" }}",
                repo.password_file_setting()
            ),
            ..Lines::default()
        },
    );
    let out = watch(&repo, &path)
        .wait_within(START_GUARD)
        .unwrap_or_else(|out| panic!("watch started with stale-after = 0: {out:?}"));
    out.assert_exit(2, "stale-after");
}

/// GET /metrics with a 20 s hang guard; the body, or why it failed.
fn scrape(addr: &str) -> Result<String, String> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(20)))
        .build()
        .into();
    agent
        .get(&format!("http://{addr}/metrics"))
        .call()
        .map_err(|e| e.to_string())
        .and_then(|mut r| r.body_mut().read_to_string().map_err(|e| e.to_string()))
}

/// Item 10: `/metrics` keeps answering other clients while one client sends
/// request after request and never reads the answers.
#[test]
fn metrics_answer_other_clients_while_one_client_never_reads() {
    let repo = TestRepo::init_local();
    let addr = format!("127.0.0.1:{}", free_port());
    let path = config(
        &repo,
        Lines {
            top: &format!("metrics_addr = \"{addr}\""),
            keys: &format!("{}\ninterval = \"1h\"", repo.password_file_setting()),
        },
    );
    let watch = watch(&repo, &path);
    wait_until("metrics are served", || {
        scrape(&addr).is_ok_and(|m| m.contains("lockwarden_"))
    });

    let hog = TcpStream::connect(&addr).expect("connect");
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (mut hog, stop) = (hog.try_clone().expect("clone"), stop.clone());
        std::thread::spawn(move || {
            let request = b"GET /metrics HTTP/1.1\r\nHost: hog\r\n\r\n";
            while !stop.load(Ordering::SeqCst) && hog.write_all(request).is_ok() {}
        })
    };
    // Ten scrapes over a few seconds, while the hog fills its socket; stop
    // at the first that fails.
    let mut failure = None;
    for attempt in 0..10 {
        std::thread::sleep(Duration::from_millis(300));
        match scrape(&addr) {
            Ok(m) if m.contains("lockwarden_") => {}
            other => {
                failure = Some(format!("attempt {attempt}: {other:?}"));
                break;
            }
        }
    }
    stop.store(true, Ordering::SeqCst);
    let _ = hog.shutdown(Shutdown::Both);
    let _ = writer.join();
    watch.signal("TERM");
    let out = watch.wait_within(STOP_GUARD);
    assert!(
        failure.is_none(),
        "metrics stopped answering while one client did not read: {failure:?}"
    );
    let out = out.unwrap_or_else(|out| panic!("watch did not stop on SIGTERM: {out:?}"));
    assert_eq!(out.code, 0, "{out:?}");
}

/// Repositories in one `watch`: more than its workers, and, at two
/// descriptors each, more than a soft open-files limit of 64 allows.
const MANY: usize = 100;

/// `watch` over more repositories than it has workers, started with a soft
/// limit of 64 open files (containers often start with 1,024): each
/// repository's stale lock is removed and no check fails, because `watch`
/// raises the soft limit to the hard one at start, as Go programs do.
#[test]
fn watch_serves_more_repositories_than_workers_and_its_soft_open_files_limit() {
    let repos: Vec<TestRepo> = (0..MANY).map(|_| TestRepo::init_local()).collect();
    let mut toml = format!(
        "state_dir = \"{}\"\n",
        repos[0].dir.path().join("state").display()
    );
    for (i, repo) in repos.iter().enumerate() {
        LockWriter::new(repo).write(LockSpec {
            time: time_from_now(-40 * 60),
            ..LockSpec::default()
        });
        toml += &format!(
            "\n[[repository]]\nname = \"r{i}\"\nrepository = \"{}\"\n{}\ninterval = \"1h\"\n",
            repo.location,
            repo.password_file_setting()
        );
    }
    let path = repos[0].dir.path().join("many.toml");
    std::fs::write(&path, toml).expect("write config");
    let mut command = Command::new("prlimit");
    command
        .arg("--nofile=64:")
        .arg(lockwarden_tests::lockwarden_bin())
        .args(["watch", "--config"])
        .arg(&path)
        .env("LOCKWARDEN_CACHE_DIR", repos[0].dir.path().join("cache"));
    let watch = Guarded::spawn(&mut command);
    let locks_left = || {
        repos
            .iter()
            .filter(|r| {
                std::fs::read_dir(r.path.join("locks")).is_ok_and(|mut d| d.next().is_some())
            })
            .count()
    };
    wait_until("every repository's stale lock is removed", || {
        locks_left() == 0
    });
    watch.signal("TERM");
    let out = watch
        .wait_within(STOP_GUARD)
        .unwrap_or_else(|out| panic!("watch did not stop on SIGTERM: {out:?}"));
    assert_eq!(out.code, 0, "{out:?}");
    assert!(!out.stderr.contains("check failed"), "{}", out.stderr);
}
