//! Issue 22, item 5: an `rclone:` connection string is shown by allowlist
//! (the remote's name or type, the options' keys, the path), with the real
//! rclone and restic: no option value, whatever its key or quoting, and no
//! value given to rclone's own options, appears in any output, log line,
//! metric, textfile or JSON document.

use std::path::Path;
use std::time::Duration;

use lockwarden_tests::guard::{Guarded, wait_until};
use lockwarden_tests::lock_writer::{Encoding, LockSpec, LockWriter, time_from_now};
use lockwarden_tests::lockwarden;
use lockwarden_tests::restic::{TestRepo, free_port};

/// Every secret the tests put into a location or rclone's arguments.
const SECRETS: [&str; 6] = [
    "HDR-TOKEN-1",
    "PW-SECRET-2",
    "SIG-SECRET-3",
    "ARG-SECRET-4",
    "ARG-SECRET-5",
    "b\"c",
];

/// The options, in every hostile form: a `headers` list in single quotes, a
/// double-quoted value holding `:` and `,` and a doubled quote, a bare
/// flag, and a SAS URL whose `sig=` follows a `:`.
const OPTIONS: &str = "headers='Authorization,Bearer HDR-TOKEN-1',\
    description=\"PW-SECRET-2:a,b\"\"c\",links,\
    sas_url=\"https://h.example:443/c?sv=1&sig=SIG-SECRET-3\"";
/// How those options are shown.
const OPTIONS_SHOWN: &str = "headers=***,description=***,links,sas_url=***";

/// rclone's arguments, with secrets given as `--opt VALUE` and
/// `--opt=VALUE`, and rclone's debug output on (it echoes its arguments
/// and the remote).
const ARGS: &str = "serve restic --stdio --b2-hard-delete -vv \
    --http-headers 'Authorization,Bearer ARG-SECRET-4' --s3-secret-access-key=ARG-SECRET-5";

/// A repository on the configured remote `store` (type local), reached as
/// `rclone:store,OPTIONS:PATH` (a named remote with overrides, which rclone
/// accepts and a local remote ignores), made by restic through rclone.
fn hostile_repo(dir: &Path) -> TestRepo {
    let config = dir.join("rclone.conf");
    std::fs::write(&config, "[store]\ntype = local\n").expect("write rclone.conf");
    let path = dir.join("storage").join("repo");
    std::fs::create_dir_all(dir.join("storage")).expect("storage dir");
    let mut repo = TestRepo::at(format!("rclone:store,{OPTIONS}:{}", path.display()), path);
    repo.env = vec![
        ("RCLONE_CONFIG".into(), config.display().to_string()),
        ("LOCKWARDEN_RCLONE_ARGS".into(), ARGS.into()),
    ];
    repo.init();
    // rclone read the path where lockwarden reads it.
    assert!(
        repo.path.join("config").is_file(),
        "restic made the repository"
    );
    repo
}

/// `check --json`, `unlock --json` and `check --textfile` on a working
/// repository: the location shows only the name, the keys and the path; a
/// stale lock is still found and removed.
#[test]
fn a_hostile_connection_string_shows_only_its_name_keys_and_path() {
    let dir = tempfile::tempdir().expect("temp dir");
    let repo = hostile_repo(dir.path());
    let shown = format!("rclone:store,{OPTIONS_SHOWN}:{}", repo.path.display());
    let stale = LockWriter::new(&repo).write(LockSpec {
        time: time_from_now(-2 * 3600),
        hostname: "elsewhere",
        encoding: Encoding::Raw,
        ..LockSpec::default()
    });

    let textfiles = dir.path().join("textfiles");
    std::fs::create_dir(&textfiles).expect("textfile dir");
    let check = repo.warden(
        "check",
        &["--json", "--textfile", &textfiles.display().to_string()],
    );
    assert_eq!(check.code, 3, "{check:?}");
    check.assert_no_secret(&SECRETS);
    let (_, doc) = check.json();
    assert_eq!(doc["repository"]["location"], shown.as_str(), "{doc:#}");
    for file in std::fs::read_dir(&textfiles).expect("textfiles").flatten() {
        let text = std::fs::read_to_string(file.path()).expect("textfile");
        assert!(text.contains("lockwarden_check_success"), "{text}");
        lockwarden_tests::assert_no_secret(&text, &SECRETS, "the textfile");
    }

    let unlock = repo.warden("unlock", &["--json"]);
    assert_eq!(unlock.code, 0, "{unlock:?}");
    unlock.assert_no_secret(&SECRETS);
    assert!(unlock.stdout.contains(&shown), "{unlock:?}");
    assert!(!repo.lock_ids().contains(&stale), "{unlock:?}");
}

/// rclone refuses a crypt password that is not obscured and prints the
/// whole remote (inside Go's `%q`), its arguments and its debug lines:
/// lockwarden's message carries rclone's reason, with every value hidden.
#[test]
fn rclones_own_messages_show_no_secret() {
    let dir = tempfile::tempdir().expect("temp dir");
    let repo = hostile_repo(dir.path());
    let storage = dir.path().join("storage");
    let mut refused = TestRepo::at(
        format!(
            "rclone::crypt,remote='{}',{OPTIONS},password=\"PW-SECRET-2:x\":repo",
            storage.display()
        ),
        storage.join("unused"),
    );
    refused.env = repo.env.clone();
    let out = refused.warden("check", &["--json"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(out.stderr.contains("rclone exited"), "{}", out.stderr);
    assert!(out.stderr.contains("is it obscured"), "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!(
            ":crypt,remote=***,{OPTIONS_SHOWN},password=***:repo"
        )),
        "{}",
        out.stderr
    );
    out.assert_no_secret(&SECRETS);
    assert!(!out.stderr.contains(&storage.display().to_string()));
}

/// `watch`, with one working and one failing repository behind hostile
/// connection strings: its log lines (JSON) and its metrics show no secret,
/// and name the repositories by their shown form.
#[test]
fn watch_logs_and_metrics_show_no_secret() {
    let dir = tempfile::tempdir().expect("temp dir");
    let repo = hostile_repo(dir.path());
    let storage = dir.path().join("storage");
    let failing = format!(
        "rclone::crypt,remote='{}',{OPTIONS},password=\"PW-SECRET-2:x\":repo",
        storage.display()
    );
    let metrics = format!("127.0.0.1:{}", free_port());
    let entry = |name: &str, location: &str| {
        format!(
            "[[repository]]\nname = \"{name}\"\nrepository = {location}\npassword_file = {pw}\n\
             interval = \"1h\"\nmode = \"unlock\"\n",
            location = toml_string(location),
            pw = toml_string(&repo.password_file().display().to_string()),
        )
    };
    let config = dir.path().join("watch.toml");
    std::fs::write(
        &config,
        format!(
            "state_dir = {state}\nmetrics_addr = \"{metrics}\"\n\n{}\n{}",
            entry("good", &repo.location),
            entry("bad", &failing),
            state = toml_string(&dir.path().join("state").display().to_string()),
        ),
    )
    .expect("write config");
    let watch = Guarded::spawn(
        lockwarden(&dir.path().join("cache"))
            .args(["watch", "--log-format", "json", "--config"])
            .arg(&config)
            .env_remove("RESTIC_PASSWORD")
            .envs(repo.env.iter().map(|(k, v)| (k, v))),
    );
    let scrape = || {
        ureq::get(&format!("http://{metrics}/metrics"))
            .call()
            .ok()
            .and_then(|mut r| r.body_mut().read_to_string().ok())
            .unwrap_or_default()
    };
    wait_until("both repositories were checked", || {
        let page = scrape();
        ["good", "bad"].iter().all(|name| {
            page.contains(&format!(
                "lockwarden_check_duration_seconds_count{{repository=\"{name}\"}} "
            ))
        })
    });
    let page = scrape();
    lockwarden_tests::assert_no_secret(&page, &SECRETS, "the metrics");
    watch.signal("TERM");
    let out = watch.finish_within(Duration::from_secs(30), "watch after SIGTERM");
    out.assert_no_secret(&SECRETS);
    let shown = format!("rclone:store,{OPTIONS_SHOWN}:{}", repo.path.display());
    assert!(out.stderr.contains(&shown), "{}", out.stderr);
    assert!(out.stderr.contains("is it obscured"), "{}", out.stderr);
}

/// `text` as a TOML basic string.
fn toml_string(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}
