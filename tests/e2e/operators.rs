//! For operators: `run`, `watch` with metrics, the first-seen store, and the
//! host inventory, against real restic.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use lockwarden_tests::adversary::{pair, reason, verdict};
use lockwarden_tests::kube_emulator::KubeEmulator;
use lockwarden_tests::lock_writer::{Encoding, LockSpec, LockWriter, time_from_now};
use lockwarden_tests::metrics::scrape_until;
use lockwarden_tests::restic::{Holder, TestRepo, free_port};
use lockwarden_tests::restic_version::{restic_program, restic_version};
use lockwarden_tests::{Finished, TESTS_DIR, finish, lockwarden};
use serde_json::Value;

const MINUTE: i64 = 60;

fn run_restic_through_lockwarden(
    repo: &TestRepo,
    extra: &[&str],
    restic_args: &[&str],
) -> std::process::Command {
    let mut command = repo.lockwarden("run");
    command
        .args(extra)
        .arg("--")
        .arg(restic_program())
        .args(restic_args)
        .env("RESTIC_CACHE_DIR", repo.dir.path().join("restic-cache"));
    command
}

#[test]
fn run_gets_restic_through_a_stale_exclusive_lock() {
    let repo = TestRepo::init_local();
    let stale = LockWriter::new(&repo).write(LockSpec {
        time: time_from_now(-40 * MINUTE),
        hostname: "evicted-pod",
        pid: 1,
        exclusive: true,
        ..LockSpec::default()
    });
    let blocked = repo.restic(&["snapshots"]);
    assert_eq!(
        blocked.code,
        restic_version().locked_exit_code(),
        "restic alone is blocked: {blocked:?}"
    );

    let data = repo.dir.path().join("data");
    std::fs::create_dir_all(&data).expect("mkdir");
    std::fs::write(data.join("f"), "x").expect("write");
    let out = finish(&mut run_restic_through_lockwarden(
        &repo,
        &[],
        &["backup", data.to_str().expect("utf-8")],
    ));
    out.assert_exit(0, "removed stale lock");
    assert!(!repo.lock_ids().contains(&stale));
    let snapshots = repo.restic(&["snapshots", "--json"]);
    let list: Value = serde_json::from_str(&snapshots.stdout).expect("JSON");
    assert_eq!(list.as_array().map(Vec::len), Some(1), "the backup ran");
}

#[test]
fn run_retries_a_live_lock_until_the_deadline_then_returns_restics_code() {
    let repo = TestRepo::init_local();
    let live = Holder::start(&repo);
    let started = Instant::now();
    let out = finish(&mut run_restic_through_lockwarden(
        &repo,
        &["--retry-lock", "6s"],
        &["check"],
    ));
    let attempts = out.stderr.matches("repository is already locked").count();
    assert_eq!(
        out.code,
        restic_version().locked_exit_code(),
        "restic {}'s own code: {out:?}",
        restic_version()
    );
    assert!(
        attempts >= 2,
        "retried ({attempts} attempts): {}",
        out.stderr
    );
    assert!(
        started.elapsed() >= Duration::from_secs(5),
        "waited for the backoff"
    );
    assert!(
        repo.lock_ids().contains(&live.lock_id),
        "the live lock stays"
    );
}

/// With `--json`, restic 0.18 and later report a failure as one JSON object
/// on stderr (`{"message_type":"exit_error","code":11,...}`); `run` passes it
/// through unchanged and still sees the lock, as it does restic 0.14's plain
/// message.
#[test]
fn run_sees_the_lock_in_restics_json_errors_and_passes_them_through() {
    let repo = TestRepo::init_local();
    let live = Holder::start(&repo);
    let out = finish(&mut run_restic_through_lockwarden(
        &repo,
        &["--retry-lock", "6s"],
        &["--json", "check"],
    ));
    let version = restic_version();
    assert_eq!(
        out.code,
        version.locked_exit_code(),
        "restic {version}: {out:?}"
    );
    assert!(
        out.stderr.contains("judging again"),
        "retried: {}",
        out.stderr
    );
    let errors: Vec<Value> = out
        .stderr
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|doc| doc["message_type"] == "exit_error")
        .collect();
    if version.prints_json_errors() {
        assert!(errors.len() >= 2, "one per attempt: {}", out.stderr);
        for error in &errors {
            assert_eq!(error["code"], version.locked_exit_code(), "{error}");
            let message = error["message"].as_str().unwrap_or_default();
            assert!(message.contains("repository is already locked"), "{error}");
        }
    } else {
        assert_eq!(
            errors,
            Vec::<Value>::new(),
            "restic {version} prints no JSON error"
        );
    }
    assert!(
        repo.lock_ids().contains(&live.lock_id),
        "the live lock stays"
    );
}

#[test]
fn run_succeeds_when_the_blocking_lock_goes_stale_while_waiting() {
    let repo = TestRepo::init_local();
    let live = Holder::start(&repo);
    let lock_id = live.lock_id.clone();
    let mut child = run_restic_through_lockwarden(&repo, &["--retry-lock", "60s"], &["check"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn lockwarden run");
    // Pass stderr on line by line, so the test sees when restic is blocked.
    let stderr = child.stderr.take().expect("stderr");
    let (lines, seen) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        let mut all = String::new();
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = lines.send(line.clone());
            all += &line;
            all.push('\n');
        }
        all
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let line = seen
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .expect("restic was never blocked");
        if line.contains("repository is already locked") {
            break;
        }
    }
    // The holder dies while lockwarden waits for it.
    live.kill();
    let status = child.wait().expect("wait");
    let out = Finished {
        code: status.code().unwrap_or(-1),
        stdout: String::new(),
        stderr: reader.join().expect("reader"),
    };
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stderr.contains("repository is already locked"),
        "it was blocked first: {}",
        out.stderr
    );
    assert!(out.stderr.contains("process-dead"), "{}", out.stderr);
    assert!(!repo.lock_ids().contains(&lock_id));
}

fn stop(mut child: Child) -> (Duration, String) {
    let pid = rustix::process::Pid::from_raw(i32::try_from(child.id()).expect("pid")).expect("pid");
    let started = Instant::now();
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("SIGTERM");
    let status = child.wait().expect("wait");
    let took = started.elapsed();
    assert!(status.success(), "watch exits cleanly: {status}");
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut stderr);
    }
    (took, stderr)
}

/// A watch configuration's `[[repository]]` table for `repo`, named `name`,
/// with the password in `password_file`, checked every 2 s.
fn repository_entry(name: &str, repo: &TestRepo, password_file: &Path) -> String {
    format!(
        "\n[[repository]]\nname = \"{name}\"\nrepository = \"{}\"\npassword_file = \"{}\"\ninterval = \"2s\"\n",
        repo.location,
        password_file.display()
    )
}

#[test]
fn watch_cleans_one_repository_while_another_fails_and_serves_metrics() {
    let good = TestRepo::init_local();
    let stale = LockWriter::new(&good).write(LockSpec {
        time: time_from_now(-45 * MINUTE),
        hostname: "gone",
        pid: 3,
        encoding: Encoding::Raw,
        ..LockSpec::default()
    });
    let bad = TestRepo::init_local();
    let wrong = bad.dir.path().join("wrong");
    std::fs::write(&wrong, "not it").expect("write");
    let addr = format!("127.0.0.1:{}", free_port());
    let config = good.dir.path().join("watch.toml");
    let header = format!(
        "metrics_addr = \"{addr}\"\nstate_dir = \"{}\"\n",
        good.dir.path().join("state").display()
    );
    let repositories = [
        repository_entry("good", &good, &good.password_file()),
        repository_entry("bad", &bad, &wrong),
    ];
    std::fs::write(&config, header + &repositories.concat()).expect("write config");
    let child = lockwarden(&good.dir.path().join("cache"))
        .args(["watch", "--config"])
        .arg(&config)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn watch");
    let metrics = scrape_until(&addr, |m| {
        m.contains(r#"lockwarden_locks_removed_total{repository="good",rule="expired"} 1"#)
            && m.contains(r#"lockwarden_check_errors_total{repository="bad"} 2"#)
    });
    assert!(
        metrics.contains(r#"lockwarden_last_success_timestamp_seconds{repository="good"}"#),
        "{metrics}"
    );
    assert!(
        !metrics.contains(r#"lockwarden_last_success_timestamp_seconds{repository="bad"}"#),
        "{metrics}"
    );
    assert!(
        !good.lock_ids().contains(&stale),
        "the stale lock was removed"
    );
    // The good repository keeps being checked while the bad one fails.
    scrape_until(&addr, |m| {
        m.contains(r#"lockwarden_check_duration_seconds_count{repository="good"} 3"#)
    });

    let (took, stderr) = stop(child);
    assert!(
        took < Duration::from_secs(3),
        "SIGTERM stops watch promptly, took {took:?}"
    );
    assert!(stderr.contains("wrong password"), "{stderr}");
    assert!(stderr.contains("removed"), "{stderr}");
    good.assert_usable();
}

#[test]
fn first_seen_times_survive_a_restart_and_drive_the_unrefreshed_rule() {
    let repo = TestRepo::init_local();
    // Dated 2 h in the future by a skewed clock: never `expired`.
    let skewed = LockWriter::new(&repo).write(LockSpec {
        time: time_from_now(120 * MINUTE),
        hostname: "fast-clock",
        pid: 8,
        ..LockSpec::default()
    });
    let state = repo.dir.path().join("state");
    let check = |repo: &TestRepo| -> Value {
        let out = finish(
            repo.lockwarden("check")
                .arg("--json")
                .arg("--state-dir")
                .arg(&state),
        );
        out.json().1
    };
    let first = check(&repo);
    let seen = first["locks"][0]["first_seen"]
        .as_str()
        .expect("first_seen recorded")
        .to_owned();
    assert_eq!(first["locks"][0]["rule"], "future-time");
    let second = check(&repo);
    assert_eq!(
        second["locks"][0]["first_seen"],
        seen.as_str(),
        "a new process keeps the first sighting"
    );

    // Half an hour passes (the state file is moved back: both the wall-clock
    // record and the boot-time one, which no clock step can move).
    let file = std::fs::read_dir(&state)
        .expect("state dir")
        .map(|e| e.expect("entry").path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .expect("a state file");
    let text = std::fs::read_to_string(&file).expect("read");
    let mut doc: Value = serde_json::from_str(&text).expect("state JSON");
    let back = 31 * MINUTE * 1_000_000_000;
    let earlier = lockwarden::time::format_rfc3339(
        lockwarden::time::parse_rfc3339(&seen).expect("time") - back,
    );
    doc["first_seen"][skewed.as_str()] = Value::from(earlier);
    let since_boot = doc["seen_since_boot"][skewed.as_str()]
        .as_i64()
        .expect("a boot-time record");
    doc["seen_since_boot"][skewed.as_str()] = Value::from(since_boot - back);
    std::fs::write(&file, doc.to_string()).expect("write");
    let third = check(&repo);
    assert_eq!(third["locks"][0]["id"], skewed.as_str());
    assert_eq!(third["locks"][0]["action"], "remove");
    assert_eq!(third["locks"][0]["rule"], "unrefreshed");
}

fn inventory_check(repo: &TestRepo, inventory: &[&str]) -> (i32, Value, String) {
    let out = finish(
        repo.lockwarden("check")
            .arg("--json")
            .args(inventory)
            .args(["--inventory-hosts", "^velero-"]),
    );
    let (code, doc) = out.json();
    (code, doc, out.stderr)
}

/// Four young locks of hosts the fixture `kubectl get pods` inventory
/// (fixtures/kubectl-get-pods.json) knows or not.
struct Pods {
    repo: TestRepo,
    /// A pod listed as running.
    running: String,
    /// A pod not listed.
    gone: String,
    /// A pod listed as finished.
    finished: String,
    /// A host the inventory regex `^velero-` does not cover.
    outside: String,
}

impl Pods {
    fn new() -> Pods {
        let repo = TestRepo::init_local();
        let writer = LockWriter::new(&repo);
        let young = time_from_now(-2 * MINUTE);
        let lock = |hostname: &str, encoding: Encoding| {
            writer.write(LockSpec {
                time: young.clone(),
                hostname,
                pid: 7,
                encoding,
                ..LockSpec::default()
            })
        };
        let running = lock("velero-node-agent-running", Encoding::Zstd);
        let gone = lock("velero-gone-7d9f", Encoding::Zstd);
        let finished = lock("velero-backup-finished", Encoding::Raw);
        let outside = lock("laptop", Encoding::Raw);
        Pods {
            repo,
            running,
            gone,
            finished,
            outside,
        }
    }

    /// The check document `doc` judged every lock by the inventory: the
    /// running pod's and the outside host's kept, the others' hosts gone.
    fn assert_judged_by_inventory(&self, doc: &Value) {
        assert_eq!(verdict(doc, &self.running), pair("keep", "fresh"));
        assert_eq!(verdict(doc, &self.gone), pair("remove", "host-gone"));
        assert_eq!(verdict(doc, &self.finished), pair("remove", "host-gone"));
        assert_eq!(verdict(doc, &self.outside), pair("keep", "fresh"));
        let reason = reason(doc, &self.gone);
        assert!(
            reason.contains("pod velero-gone-7d9f no longer exists"),
            "{reason}"
        );
    }
}

/// The same pods served by the Kubernetes API (the emulator) and read with
/// `--hosts-kubernetes`: judged as kubectl's answer is; and when the API
/// refuses the list, no pod counts as gone.
#[test]
fn pods_read_from_the_api_judge_as_kubectls_answer_does() {
    let pods = Pods::new();
    let repo = &pods.repo;
    let fixture = Path::new(TESTS_DIR).join("fixtures/kubectl-get-pods.json");
    let kube = KubeEmulator::start(&[&fixture]);
    let kubeconfig = kube.write_kubeconfig(repo.dir.path());
    let check = || {
        let out = finish(
            repo.lockwarden("check")
                .args([
                    "--json",
                    "--hosts-kubernetes",
                    "--inventory-hosts",
                    "^velero-",
                ])
                .env("KUBECONFIG", &kubeconfig)
                .env_remove("KUBERNETES_SERVICE_HOST"),
        );
        let (code, doc) = out.json();
        (code, doc, out.stderr)
    };
    let (code, doc, _) = check();
    assert_eq!(code, 3, "{doc:#}");
    pods.assert_judged_by_inventory(&doc);
    kube.forbid("list", "pods", None, None);
    let (_, doc, stderr) = check();
    assert_eq!(verdict(&doc, &pods.gone), pair("keep", "fresh"), "{stderr}");
    assert!(stderr.contains("403"), "{stderr}");
}

#[test]
fn a_kubectl_inventory_removes_the_lock_of_a_gone_pod_and_keeps_a_running_one() {
    let pods = Pods::new();
    let repo = &pods.repo;
    let fixture = Path::new(TESTS_DIR).join("fixtures/kubectl-get-pods.json");
    let fixture = fixture.to_str().expect("utf-8");

    // A command runs after the locks are listed: its answer is younger than
    // every lock, so absence from it counts.
    let (code, doc, _) = inventory_check(repo, &["--hosts-command", &format!("cat {fixture}")]);
    assert_eq!(code, 3, "{doc:#}");
    pods.assert_judged_by_inventory(&doc);

    // A file counts by its modification time: written before lockwarden saw
    // the locks, absence from it proves nothing ...
    let state = repo.dir.path().join("state");
    let hosts = repo.dir.path().join("hosts.json");
    std::fs::copy(fixture, &hosts).expect("copy the fixture");
    let hosts = hosts.to_str().expect("utf-8");
    let file_source = [
        "--hosts-file",
        hosts,
        "--state-dir",
        state.to_str().expect("utf-8"),
    ];
    let (code, doc, _) = inventory_check(repo, &file_source);
    assert_eq!(verdict(&doc, &pods.gone), pair("keep", "fresh"), "{doc:#}");
    // The fixture's finished pod ended long before the lock was written, so
    // it did not write it: its writer is judged by absence too.
    assert_eq!(
        verdict(&doc, &pods.finished),
        pair("keep", "fresh"),
        "{doc:#}"
    );
    assert_eq!(code, 0, "{doc:#}");
    // ... rewritten after lockwarden first saw them (the state dir
    // remembers when), it does.
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::copy(fixture, hosts).expect("rewrite the inventory");
    let (code, doc, _) = inventory_check(repo, &file_source);
    assert_eq!(code, 3, "{doc:#}");
    pods.assert_judged_by_inventory(&doc);

    // A failing inventory removes nothing and says so.
    let (code, doc, stderr) = inventory_check(
        repo,
        &["--hosts-command", "kubectl-is-not-here get pods -A -o json"],
    );
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(verdict(&doc, &pods.gone), pair("keep", "fresh"));
    assert!(stderr.contains("host inventory unusable"), "{stderr}");
}
