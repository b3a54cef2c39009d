//! `watch` notifications end to end: the real `lockwarden watch` on real
//! restic repositories, a webhook received by a real HTTP listener on
//! 127.0.0.1 (`lockwarden_tests::webhook`), and a hook command that writes
//! its stdin to a file. One test per event kind, then the delivery
//! guarantees (a hung or failing webhook never delays a check) and secrets.

use std::path::PathBuf;
use std::time::Duration;

use lockwarden_tests::guard::{Guarded, wait_until};
use lockwarden_tests::lock_writer::{LockSpec, LockWriter, time_from_now};
use lockwarden_tests::lockwarden;
use lockwarden_tests::restic::{Holder, PASSWORD, REST_PASS, RestServer, TestRepo, free_port};
use lockwarden_tests::webhook::{Answer, WebhookServer};
use serde_json::Value;

const MINUTE: i64 = 60;
/// The bearer token the tests' webhooks are given.
const TOKEN: &str = "tok-SECRET-7f3a9c";
/// How long `watch` may take to stop: a guard, not a timing assertion.
const STOP_GUARD: Duration = Duration::from_secs(10);

/// A running `watch` with a webhook, a hook command and metrics.
struct Watch {
    guarded: Guarded,
    metrics: String,
    /// The file the hook command appends each event to (one JSON a line).
    hook_file: PathBuf,
}

/// Starts `watch` on `repo` (the repository `r`) with `keys` in its
/// repository table and `notify` in the global `[notify]` table, which also
/// gets the webhook (`url`), its token and the hook command.
fn watch(repo: &TestRepo, url: &str, notify: &str, keys: &str) -> Watch {
    watch_many(
        repo,
        url,
        notify,
        &format!(
            "[[repository]]\nname = \"r\"\nrepository = \"{}\"\ninterval = \"1s\"\n{keys}\n",
            repo.location
        ),
        &[],
    )
}

/// [`watch`] with the repository tables `repositories` and extra
/// environment `env`.
fn watch_many(
    repo: &TestRepo,
    url: &str,
    notify: &str,
    repositories: &str,
    env: &[(&str, &str)],
) -> Watch {
    let dir = repo.dir.path();
    let token = dir.join("token");
    std::fs::write(&token, format!("{TOKEN}\n")).expect("write token");
    let hook_file = dir.join("hook-events.jsonl");
    let metrics = format!("127.0.0.1:{}", free_port());
    let config = dir.join("watch.toml");
    std::fs::write(
        &config,
        format!(
            "state_dir = \"{state}\"\nmetrics_addr = \"{metrics}\"\n\n[notify]\n\
             webhook = \"{url}\"\nwebhook_token_file = \"{token}\"\n\
             command = \"printf '%s\\\\n' \\\"$(cat)\\\" >> '{hook}'\"\n{notify}\n\n{repositories}",
            state = dir.join("state").display(),
            token = token.display(),
            hook = hook_file.display(),
        ),
    )
    .expect("write config");
    let guarded = Guarded::spawn(
        lockwarden(&dir.join("cache"))
            .args(["watch", "--log-format", "json", "--config"])
            .arg(&config)
            .env_remove("RESTIC_PASSWORD")
            .envs(env.iter().copied()),
    );
    Watch {
        guarded,
        metrics,
        hook_file,
    }
}

impl Watch {
    /// The metrics page, or "" while it is not served.
    fn scrape(&self) -> String {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(20)))
            .build()
            .into();
        agent
            .get(&format!("http://{}/metrics", self.metrics))
            .call()
            .ok()
            .and_then(|mut r| r.body_mut().read_to_string().ok())
            .unwrap_or_default()
    }

    /// How many checks of repository `name` have run.
    fn checks(&self, name: &str) -> u64 {
        counter(
            &self.scrape(),
            &format!("lockwarden_check_duration_seconds_count{{repository=\"{name}\"}}"),
        )
    }

    /// Waits until `more` further checks of `name` ran.
    fn wait_for_checks(&self, name: &str, more: u64) {
        let from = self.checks(name);
        wait_until(&format!("{more} more checks of {name}"), || {
            self.checks(name) >= from + more
        });
    }

    /// The events the hook command received so far: its complete lines (a
    /// hook may be appending one while the test reads).
    fn hook_events(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.hook_file).unwrap_or_default();
        let complete = text.rfind('\n').map_or("", |end| &text[..end]);
        complete
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("hook got {l:?}: {e}")))
            .collect()
    }

    /// Stops it (SIGTERM) and returns its stderr.
    fn stop(self) -> String {
        self.guarded.signal("TERM");
        let out = self
            .guarded
            .wait_within(STOP_GUARD)
            .unwrap_or_else(|out| panic!("watch did not stop: {out:?}"));
        assert_eq!(out.code, 0, "{out:?}");
        out.stderr
    }
}

/// The value of the sample `series` in `metrics`, 0 when absent.
fn counter(metrics: &str, series: &str) -> u64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(series))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map_or(0, |v| v as u64)
}

/// Waits until the webhook received an event of `kind` matching `also`;
/// returns it.
fn wait_for_event(server: &WebhookServer, kind: &str, also: impl Fn(&Value) -> bool) -> Value {
    let find = || {
        server
            .events()
            .into_iter()
            .find(|e| e["event"] == kind && also(e))
    };
    wait_until(&format!("a {kind} event"), || find().is_some());
    find().expect("found")
}

fn of_kind(events: &[Value], kind: &str) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["event"] == kind)
        .cloned()
        .collect()
}

/// An old lock from a host that is not this one: judged `expired`.
fn old_lock(repo: &TestRepo, pid: i64) -> String {
    LockWriter::new(repo).write(LockSpec {
        time: time_from_now(-45 * MINUTE),
        hostname: "evicted-pod",
        pid,
        ..LockSpec::default()
    })
}

#[test]
fn lock_removed_reaches_the_webhook_with_the_token_and_the_hook_on_stdin() {
    let repo = TestRepo::init_local();
    let id = repo.id();
    let dead = Holder::start(&repo);
    let dead_pid = dead.pid;
    let dead_lock = dead.kill();
    let server = WebhookServer::start(Answer::Status(204));
    let watch = watch(
        &repo,
        &server.url("/hooks/lockwarden"),
        "",
        &repo.password_file_setting(),
    );
    let event = wait_for_event(&server, "lock_removed", |e| e["lock"]["id"] == dead_lock);
    let this_host = event["lock"]["hostname"]
        .as_str()
        .expect("hostname")
        .to_owned();
    assert_eq!(
        event,
        serde_json::json!({
            "schema": "lockwarden.event.v1",
            "id": event["id"],
            "event": "lock_removed",
            "time": event["time"],
            "repository": {"name": "r", "id": id, "backend": "local"},
            "lock": {
                "id": dead_lock, "hostname": this_host, "username": event["lock"]["username"],
                "pid": dead_pid, "exclusive": false, "time": event["lock"]["time"],
                "age_seconds": event["lock"]["age_seconds"],
            },
            "verdict": {"action": "remove", "rule": "process-dead", "reason": event["verdict"]["reason"]},
            "already_gone": false,
            "message": event["message"],
        }),
    );
    assert!(
        event["message"]
            .as_str()
            .is_some_and(|m| m.contains("removed (process-dead)")),
        "{event}"
    );
    let request = server
        .requests()
        .into_iter()
        .find(|r| r.json() == event)
        .expect("the request");
    assert_eq!(request.method, "POST");
    assert_eq!(request.path, "/hooks/lockwarden");
    assert_eq!(
        request.header("authorization"),
        Some(format!("Bearer {TOKEN}").as_str())
    );
    assert_eq!(request.header("content-type"), Some("application/json"));
    assert_eq!(request.header("idempotency-key"), event["id"].as_str());
    wait_until("the hook command got the event", || {
        watch.hook_events().contains(&event)
    });
    assert!(!repo.lock_ids().contains(&dead_lock));
    let log = watch.stop();
    let line = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|l| l["fields"]["event"] == "lock_removed")
        .unwrap_or_else(|| panic!("no structured lock_removed line in\n{log}"));
    assert_eq!(line["fields"]["lock"], dead_lock[..8]);
    assert_eq!(line["fields"]["rule"], "process-dead");
    repo.assert_usable();
}

#[test]
fn a_stale_lock_kept_in_report_mode_is_told_once() {
    let repo = TestRepo::init_local();
    let stale = old_lock(&repo, 4);
    let server = WebhookServer::start(Answer::Status(200));
    let watch = watch(
        &repo,
        &server.url("/"),
        "",
        &format!("{}\nmode = \"report\"", repo.password_file_setting()),
    );
    let event = wait_for_event(&server, "stale_lock_kept", |_| true);
    assert_eq!(event["lock"]["id"], stale);
    assert_eq!(event["lock"]["hostname"], "evicted-pod");
    assert_eq!(event["lock"]["pid"], 4);
    assert_eq!(event["kept_because"], "report_mode");
    assert_eq!(event["verdict"]["action"], "remove");
    assert_eq!(event["verdict"]["rule"], "expired");
    assert!(
        event["lock"]["age_seconds"]
            .as_i64()
            .is_some_and(|a| a >= 45 * MINUTE)
    );
    watch.wait_for_checks("r", 3);
    wait_until("the hook command got it", || {
        watch.hook_events().contains(&event)
    });
    assert_eq!(
        of_kind(&server.events(), "stale_lock_kept").len(),
        1,
        "told once"
    );
    assert_eq!(of_kind(&watch.hook_events(), "stale_lock_kept").len(), 1);
    assert!(
        repo.lock_ids().contains(&stale),
        "report mode removes nothing"
    );
    watch.stop();
}

#[test]
fn a_live_holder_held_long_and_an_unreadable_file_are_told() {
    let repo = TestRepo::init_local();
    let live = Holder::start(&repo);
    let garbage = LockWriter::new(&repo).write_bytes(b"not a lock at all");
    let server = WebhookServer::start(Answer::Status(200));
    let watch = watch(
        &repo,
        &server.url("/"),
        "held_longer_than = \"2s\"",
        &repo.password_file_setting(),
    );
    let held = wait_for_event(&server, "lock_held_long", |_| true);
    assert_eq!(held["lock"]["pid"], live.pid);
    assert_eq!(held["verdict"]["action"], "keep");
    assert_eq!(held["verdict"]["rule"], "holder-alive");
    assert!(
        held["held_seconds"].as_i64().is_some_and(|s| s >= 2),
        "{held}"
    );
    assert!(held["held_since"].is_string(), "{held}");
    let unreadable = wait_for_event(&server, "unreadable_file", |_| true);
    assert_eq!(unreadable["file"]["id"], garbage);
    assert_eq!(unreadable["file"]["size"], 17);
    assert!(unreadable["file"]["problem"].is_string(), "{unreadable}");
    assert_eq!(unreadable["verdict"]["action"], "keep");
    assert!(unreadable.get("lock").is_none(), "{unreadable}");
    watch.wait_for_checks("r", 3);
    let events = server.events();
    assert_eq!(
        of_kind(&events, "lock_held_long").len(),
        1,
        "once per holder"
    );
    assert_eq!(
        of_kind(&events, "unreadable_file").len(),
        1,
        "once per file"
    );
    assert!(of_kind(&events, "lock_removed").is_empty(), "{events:?}");
    watch.stop();
    assert_eq!(live.finish(), 0, "the live backup was never disturbed");
}

#[test]
fn failing_checks_are_told_once_then_the_recovery() {
    let repo = TestRepo::init_local();
    let password = repo.dir.path().join("password-for-watch");
    std::fs::write(&password, "not the password").expect("write");
    let server = WebhookServer::start(Answer::Status(200));
    let watch = watch(
        &repo,
        &server.url("/"),
        "failing_after = 2",
        &format!("password_file = \"{}\"", password.display()),
    );
    let failing = wait_for_event(&server, "checks_failing", |_| true);
    assert_eq!(failing["consecutive_failures"], 2);
    assert_eq!(failing["repository"]["name"], "r");
    let error = failing["error"].as_str().expect("an error");
    assert!(error.contains("wrong password"), "{error}");
    assert!(!error.contains(&repo.location), "no location: {error}");
    assert!(error.contains("repository `r`"), "{error}");
    watch.wait_for_checks("r", 2);
    assert_eq!(of_kind(&server.events(), "checks_failing").len(), 1);
    std::fs::write(&password, PASSWORD).expect("fix the password");
    let recovered = wait_for_event(&server, "recovered", |_| true);
    assert!(
        recovered["consecutive_failures"]
            .as_u64()
            .is_some_and(|n| n >= 2)
    );
    assert_eq!(recovered["repository"]["backend"], "local");
    watch.wait_for_checks("r", 2);
    let events = server.events();
    assert_eq!(of_kind(&events, "recovered").len(), 1);
    assert_eq!(of_kind(&events, "checks_failing").len(), 1);
    wait_until("the hook command got both", || {
        let hook = watch.hook_events();
        hook.contains(&failing) && hook.contains(&recovered)
    });
    watch.stop();
}

/// A webhook that accepts and never answers holds up no check, whatever its
/// timeout; events beyond the queue are dropped and counted.
#[test]
fn a_hung_webhook_never_delays_checks_and_a_full_queue_drops() {
    let repo = TestRepo::init_local();
    // More stale locks than the queue holds: one event each.
    for pid in 0..80 {
        old_lock(&repo, 1000 + pid);
    }
    let server = WebhookServer::start(Answer::Hang);
    let watch = watch(
        &repo,
        &server.url("/"),
        "timeout = \"1h\"\nretries = 0",
        &format!("{}\nmode = \"report\"", repo.password_file_setting()),
    );
    wait_until("the webhook is hanging on a request", || {
        !server.requests().is_empty()
    });
    // Checks go on while the only delivery is stuck for an hour.
    watch.wait_for_checks("r", 3);
    assert_eq!(server.requests().len(), 1, "still stuck on the first event");
    let metrics = watch.scrape();
    let dropped = counter(
        &metrics,
        "lockwarden_notifications_dropped_total{repository=\"r\"}",
    );
    assert!(dropped >= 80 - 64 - 1, "{metrics}");
    let log = watch.stop();
    // One line per check, however many were dropped.
    let lines = log.matches("notifications dropped").count();
    assert!((1..16).contains(&lines), "{lines} drop lines: {log}");
}

/// Stopping `watch` leaves no notification command behind: neither the one
/// running (killed with its process group) nor one a sender starts while
/// the process stops.
#[test]
fn stopping_watch_leaves_no_hook_command_behind() {
    let repo = TestRepo::init_local();
    // Many events queued for a command that never ends by itself.
    for pid in 0..20 {
        old_lock(&repo, 1000 + pid);
    }
    let dir = repo.dir.path();
    // Sleeps no other process runs: commands get a clean environment, so
    // they are told apart by their arguments.
    let (first, second) = (
        format!("sleep {}1", std::process::id()),
        format!("sleep {}2", std::process::id()),
    );
    let config = dir.join("watch.toml");
    std::fs::write(
        &config,
        format!(
            "state_dir = \"{state}\"\n\n[notify]\ncommand = \"{first} & {second}\"\n\
             timeout = \"1h\"\n\n[[repository]]\nname = \"r\"\nrepository = \"{location}\"\n\
             interval = \"1s\"\nmode = \"report\"\n{password}\n",
            state = dir.join("state").display(),
            location = repo.location,
            password = repo.password_file_setting(),
        ),
    )
    .expect("write config");
    let watch = Guarded::spawn(
        lockwarden(&dir.join("cache"))
            .args(["watch", "--config"])
            .arg(&config),
    );
    wait_until("the command runs", || {
        !lockwarden_tests::live_commands(&second).is_empty()
    });
    watch.signal("TERM");
    let out = watch
        .wait_within(STOP_GUARD)
        .unwrap_or_else(|out| panic!("watch did not stop: {out:?}"));
    assert_eq!(out.code, 0, "{out:?}");
    let mut left = lockwarden_tests::live_commands(&first);
    left.extend(lockwarden_tests::live_commands(&second));
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// A webhook answering 500 is retried as configured, then counted as failed,
/// while checks go on.
#[test]
fn a_failing_webhook_is_retried_then_counted_while_checks_go_on() {
    let repo = TestRepo::init_local();
    old_lock(&repo, 5);
    let server = WebhookServer::start(Answer::Status(500));
    let watch = watch(
        &repo,
        &server.url("/"),
        "retries = 2",
        &format!("{}\nmode = \"report\"", repo.password_file_setting()),
    );
    let failed =
        "lockwarden_notifications_sent_total{repository=\"r\",sink=\"webhook\",result=\"failed\"}";
    wait_until("the delivery failed after its retries", || {
        counter(&watch.scrape(), failed) == 1
    });
    assert_eq!(server.requests().len(), 3, "one attempt and two retries");
    let metrics = watch.scrape();
    assert_eq!(
        counter(
            &metrics,
            "lockwarden_notifications_sent_total{repository=\"r\",sink=\"command\",result=\"ok\"}"
        ),
        1,
        "{metrics}"
    );
    watch.wait_for_checks("r", 2);
    assert_eq!(server.requests().len(), 3, "an event is sent at most once");
    let log = watch.stop();
    assert!(
        log.contains("answered HTTP 500 (after 3 attempts)"),
        "{log}"
    );
}

/// No password, token, storage credential, location or environment value
/// reaches a webhook, a hook or a log line.
#[test]
fn no_secret_reaches_a_webhook_a_hook_or_a_log_line() {
    let root = tempfile::tempdir().expect("temp dir");
    let rest = RestServer::start(&root.path().join("rest"));
    let good = rest.init_repo("good");
    let bad = rest.init_repo("bad");
    old_lock(&good, 6);
    LockWriter::new(&good).write_bytes(b"garbage");
    let env_secret = "ENV-SECRET-5d1e";
    let wrong_password = "WRONG-SECRET-PW-88";
    let server = WebhookServer::start(Answer::Status(200));
    let repositories = format!(
        "[[repository]]\nname = \"good\"\nrepository = \"{}\"\npassword_env = \"LW_TEST_PW\"\ninterval = \"1s\"\n\n\
         [[repository]]\nname = \"bad\"\nrepository = \"{}\"\npassword_env = \"LW_WRONG_PW\"\ninterval = \"1s\"\n",
        good.location, bad.location
    );
    let watch = watch_many(
        &good,
        &server.url("/"),
        "failing_after = 1",
        &repositories,
        &[
            ("LW_TEST_PW", PASSWORD),
            ("LW_WRONG_PW", wrong_password),
            ("LW_UNRELATED", env_secret),
        ],
    );
    wait_for_event(&server, "lock_removed", |_| true);
    wait_for_event(&server, "unreadable_file", |_| true);
    let failing = wait_for_event(&server, "checks_failing", |_| true);
    assert_eq!(failing["repository"]["name"], "bad");
    wait_until("the hook command got them", || {
        watch.hook_events().len() >= 3
    });
    let hook = std::fs::read_to_string(&watch.hook_file).expect("hook file");
    let bodies: String = server
        .requests()
        .iter()
        .map(|r| r.body.clone() + "\n")
        .collect();
    let log = watch.stop();
    let secrets = [PASSWORD, REST_PASS, TOKEN, env_secret, wrong_password];
    for (what, text) in [("webhook", &bodies), ("hook", &hook), ("log", &log)] {
        for secret in secrets {
            assert!(!text.contains(secret), "{secret} in the {what}:\n{text}");
        }
    }
    for (what, text) in [("webhook", &bodies), ("hook", &hook)] {
        assert!(
            !text.contains("rest:http"),
            "a location in the {what}:\n{text}"
        );
        assert!(
            !text.contains(rest.addr()),
            "the server in the {what}:\n{text}"
        );
    }
}

/// `watch` refuses a webhook with credentials in its URL at start (exit 2),
/// without printing them.
#[test]
fn a_webhook_with_credentials_is_refused_at_start() {
    let repo = TestRepo::init_local();
    let watch = watch(
        &repo,
        "https://user:URL-SECRET@hooks.example.com/x",
        "",
        &repo.password_file_setting(),
    );
    let out = watch
        .guarded
        .wait_within(Duration::from_secs(30))
        .unwrap_or_else(|out| panic!("watch started: {out:?}"));
    out.assert_exit(2, "must not hold credentials");
    assert!(!out.stderr.contains("URL-SECRET"), "{}", out.stderr);
}

/// The threads of process `pid` (its entries in /proc/PID/task).
fn threads_of(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|tasks| tasks.count())
        .unwrap_or(0)
}

/// 5,000 repositories with a global webhook: every one's event reaches the
/// webhook, sent by the one dispatcher's few senders, and the process's
/// thread count stays that of the workers (it was one sender thread per
/// repository, 5,000 more).
#[test]
fn five_thousand_repositories_with_a_global_webhook_keep_the_threads_flat() {
    const REPOSITORIES: usize = 5000;
    let dir = tempfile::tempdir().expect("temp dir");
    let password = dir.path().join("password");
    std::fs::write(&password, PASSWORD).expect("write");
    let server = WebhookServer::start(Answer::Status(204));
    // Repositories that do not exist: each check fails at once, and the
    // first failure is an event (failing_after = 1).
    let repositories: String = (0..REPOSITORIES)
        .map(|i| {
            format!(
                "[[repository]]\nname = \"r{i}\"\nrepository = \"{}\"\npassword_file = \"{}\"\ninterval = \"1h\"\n\n",
                dir.path().join(format!("missing-{i}")).display(),
                password.display()
            )
        })
        .collect();
    let config = dir.path().join("watch.toml");
    std::fs::write(
        &config,
        format!(
            "state_dir = \"{}\"\n\n[notify]\nwebhook = \"{}\"\nfailing_after = 1\n\n{repositories}",
            dir.path().join("state").display(),
            server.url("/")
        ),
    )
    .expect("write config");
    let guarded = Guarded::spawn(
        lockwarden(&dir.path().join("cache"))
            .args(["watch", "--config"])
            .arg(&config)
            .env_remove("RESTIC_PASSWORD"),
    );
    let mut most = 0;
    wait_until("every repository's event at the webhook", || {
        most = most.max(threads_of(guarded.pid()));
        of_kind(&server.events(), "checks_failing").len() >= REPOSITORIES
    });
    let threads = threads_of(guarded.pid()).max(most);
    eprintln!("{REPOSITORIES} repositories, a global webhook: at most {threads} threads");
    // 32 workers, 8 senders at most, main, signals, the I/O runtime's
    // few: far below one per repository.
    assert!(threads < 100, "{threads} threads");
    let names: std::collections::BTreeSet<String> = of_kind(&server.events(), "checks_failing")
        .iter()
        .map(|e| {
            e["repository"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    assert_eq!(names.len(), REPOSITORIES, "each repository's event, once");
    assert_eq!(server.requests().len(), REPOSITORIES, "at most once each");
    guarded.signal("TERM");
    let out = guarded
        .wait_within(STOP_GUARD)
        .unwrap_or_else(|out| panic!("watch did not stop: {out:?}"));
    assert_eq!(out.code, 0, "{out:?}");
}
