//! Hostile or careless inputs from the command line and the environment:
//! special files where regular files belong, commands that never end,
//! oversized inputs, secrets in malformed configuration, control characters
//! in lock fields, an unsafe state directory, and restic's newer "locked"
//! exit code. Each test guards one defect of the trust fixes; its doc
//! comment names the item of the contract.

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use lockwarden_tests::adversary::{all_output, doc, mkfifo, names_limit, verdict, warden};
use lockwarden_tests::fake_rest::{FakeRest, Reply};
use lockwarden_tests::guard::{
    Guarded, HANG_GUARD, KillOnDrop, finish_all_within, finish_guarded, processes_with,
    unique_sleep, wait_until, with_memory_cap,
};
use lockwarden_tests::lock_writer::{Encoding, LockSpec, LockWriter, time_from_now};
use lockwarden_tests::restic::{TestRepo, free_port};
use lockwarden_tests::{Finished, TESTS_DIR, lockwarden};
use serde_json::json;

const MINUTE: i64 = 60;
/// Private writable memory a capped lockwarden may map (see
/// `adversary_repo::MEMORY_CAP`: the engine's untouched stack pool takes
/// about 2 GiB of it).
const MEMORY_CAP: u64 = 4 << 30;

/// A bare `lockwarden` command with the repository's private cache and no
/// repository or password from the environment.
fn bare(repo: &TestRepo) -> Command {
    let mut command = lockwarden(&repo.dir.path().join("cache"));
    command
        .env_remove("RESTIC_REPOSITORY")
        .env_remove("RESTIC_REPOSITORY_FILE")
        .env_remove("RESTIC_PASSWORD")
        .env_remove("RESTIC_PASSWORD_FILE")
        .env_remove("RESTIC_PASSWORD_COMMAND");
    command
}

/// A young lock from a host the inventory regex `^velero-` covers.
fn young_velero_lock(repo: &TestRepo) -> String {
    LockWriter::new(repo).write(LockSpec {
        time: time_from_now(-2 * MINUTE),
        hostname: "velero-gone-7d9f",
        pid: 7,
        ..LockSpec::default()
    })
}

/// Every way a file path reaches lockwarden, each given `special`; `true`
/// marks the one (the hosts file) whose failure is a warning that keeps
/// every lock rather than an error.
fn file_inputs(repo: &TestRepo, special: &Path) -> Vec<(String, Command, bool)> {
    let mut cases = Vec::new();
    let mut password = bare(repo);
    password
        .args(["check", "-r", &repo.location, "-p"])
        .arg(special);
    cases.push(("--password-file".to_owned(), password, false));
    let mut repository = bare(repo);
    repository
        .args(["check", "--repository-file"])
        .arg(special)
        .arg("-p")
        .arg(repo.password_file());
    cases.push(("--repository-file".to_owned(), repository, false));
    let mut policy = repo.lockwarden("check");
    policy.arg("--policy").arg(special);
    cases.push(("--policy".to_owned(), policy, false));
    let mut hosts = repo.lockwarden("unlock");
    hosts
        .arg("--hosts-file")
        .arg(special)
        .args(["--inventory-hosts", "^velero-"]);
    cases.push(("--hosts-file".to_owned(), hosts, true));
    let mut watch = bare(repo);
    watch.args(["watch", "--config"]).arg(special);
    cases.push(("watch --config".to_owned(), watch, false));
    let mut request = bare(repo);
    request.args(["policy", "eval", "--request"]).arg(special);
    cases.push(("policy eval --request".to_owned(), request, false));
    cases
}

fn assert_refused_at_once(label: &str, warning_only: bool, result: Result<Finished, Finished>) {
    let out = result.unwrap_or_else(|out| panic!("{label} hung instead of refusing: {out:?}"));
    assert!(
        out.stderr.contains("not a regular file"),
        "{label}: {}",
        out.stderr
    );
    if warning_only {
        assert!(matches!(out.code, 0 | 1), "{label}: {out:?}");
    } else {
        assert!(
            !matches!(out.code, 0 | 3),
            "{label}: an error, not a run: {out:?}"
        );
    }
}

/// Item 5: a FIFO, a directory or a device (/dev/zero) given where a file
/// is expected (password file, repository file, policy, hosts file, watch
/// configuration, policy request) is refused at once, "not a regular file",
/// instead of blocking on the FIFO forever or reading /dev/zero until memory
/// runs out. A refused hosts file removes nothing.
#[test]
fn fifos_directories_and_devices_given_as_input_files_are_refused_at_once() {
    let repo = TestRepo::init_local();
    let lock = young_velero_lock(&repo);
    let fifo = repo.dir.path().join("a-fifo");
    mkfifo(&fifo);
    let directory = repo.dir.path().join("a-directory");
    fs::create_dir(&directory).expect("mkdir");

    for special in [&fifo, &directory] {
        let cases = file_inputs(&repo, special);
        let labels: Vec<(String, bool)> = cases.iter().map(|(l, _, w)| (l.clone(), *w)).collect();
        let commands = cases.into_iter().map(|(_, c, _)| c).collect();
        for ((label, warning), result) in labels
            .into_iter()
            .zip(finish_all_within(commands, HANG_GUARD))
        {
            assert_refused_at_once(&format!("{label} {}", special.display()), warning, result);
        }
    }
    // /dev/zero one at a time, each capped: an unguarded reader would take
    // all the memory there is.
    for (label, command, warning) in file_inputs(&repo, Path::new("/dev/zero")) {
        let result =
            Guarded::spawn(&mut with_memory_cap(&command, MEMORY_CAP)).wait_within(HANG_GUARD);
        assert_refused_at_once(&format!("{label} /dev/zero"), warning, result);
    }
    assert!(repo.lock_ids().contains(&lock), "nothing was removed");
}

/// Item 6: a password command or hosts command that never ends fails after
/// `--timeout` with "timed out", and its whole process group (here a
/// background `sleep` too) is killed. A request to a REST server that never
/// answers fails after `--timeout` too. A password command that exits but leaves a
/// background child holding its stdout does not hang lockwarden.
#[test]
fn hanging_commands_and_requests_time_out_and_their_process_groups_are_killed() {
    let repo = TestRepo::init_local();
    let lock = young_velero_lock(&repo);
    a_hanging_password_command_times_out_with_its_group(&repo);
    a_hanging_hosts_command_times_out_with_its_group(&repo, &lock);
    a_background_child_of_the_password_command_does_not_hang(&repo);
    a_rest_request_never_answered_times_out(&repo);
}

fn a_hanging_password_command_times_out_with_its_group(repo: &TestRepo) {
    let sleep = unique_sleep();
    let _cleanup = KillOnDrop(sleep.clone());
    let out = finish_guarded(
        bare(repo)
            .args(["check", "-r", &repo.location, "--timeout", "2s"])
            .args(["--password-command", &format!("{sleep} & {sleep}")]),
    );
    assert!(!matches!(out.code, 0 | 3), "{out:?}");
    assert!(out.stderr.contains("timed out"), "{}", out.stderr);
    wait_until("the password command's processes are all killed", || {
        processes_with(&sleep).is_empty()
    });
}

fn a_hanging_hosts_command_times_out_with_its_group(repo: &TestRepo, lock: &str) {
    let sleep = unique_sleep();
    let _cleanup = KillOnDrop(sleep.clone());
    let out = finish_guarded(repo.lockwarden("unlock").args([
        "--timeout",
        "2s",
        "--hosts-command",
        &format!("{sleep} & {sleep}"),
        "--inventory-hosts",
        "^velero-",
    ]));
    assert!(out.stderr.contains("timed out"), "{out:?}");
    assert!(matches!(out.code, 0 | 1), "{out:?}");
    assert!(repo.lock_ids().contains(lock), "nothing was removed");
    wait_until("the hosts command's processes are all killed", || {
        processes_with(&sleep).is_empty()
    });
}

fn a_background_child_of_the_password_command_does_not_hang(repo: &TestRepo) {
    let sleep = unique_sleep();
    let _cleanup = KillOnDrop(sleep.clone());
    let out = finish_guarded(
        bare(repo)
            .args(["check", "-r", &repo.location, "--timeout", "20s"])
            .args([
                "--password-command",
                &format!("{sleep} & cat {}", repo.password_file().display()),
            ]),
    );
    assert_eq!(
        out.code, 0,
        "the password was printed and the command exited: {out:?}"
    );
}

fn a_rest_request_never_answered_times_out(repo: &TestRepo) {
    let server = FakeRest::start(&repo.path, |_, path| {
        if path == "config" {
            Reply::Hang
        } else {
            Reply::Default
        }
    });
    let out = finish_guarded(
        bare(repo)
            .args(["check", "-r", &server.location, "--timeout", "2s", "-p"])
            .arg(repo.password_file()),
    );
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr.contains("timed out") || out.stderr.contains("timeout"),
        "{}",
        out.stderr
    );
}

/// A file of `len` bytes: `head`, then spaces up to `len`.
fn padded_file(path: &Path, head: &[u8], len: usize) -> PathBuf {
    let mut bytes = head.to_vec();
    bytes.resize(len, b' ');
    fs::write(path, bytes).expect("write padded file");
    path.to_owned()
}

fn assert_names_limit(label: &str, out: &Finished, limit: u64) {
    assert!(
        !matches!(out.code, 0 | 3),
        "{label}: an oversized input is an error: {out:?}"
    );
    assert!(
        names_limit(&out.stderr, limit),
        "{label}: names the limit of {limit} bytes: {}",
        out.stderr
    );
}

/// Item 7: a password (file or command output) or a repository file over
/// 64 KiB is an error naming the limit, even when its trimmed content would
/// work.
#[test]
fn oversized_passwords_and_repository_files_are_refused_naming_the_limit() {
    let repo = TestRepo::init_local();
    let dir = repo.dir.path();
    let limit = 64 << 10;

    let password = padded_file(
        &dir.join("big-password"),
        b"correct horse battery staple",
        70 << 10,
    );
    let out = finish_guarded(
        bare(&repo)
            .args(["check", "-r", &repo.location, "-p"])
            .arg(&password),
    );
    assert_names_limit("password file", &out, limit);

    let command = format!("cat {}", password.display());
    let out = finish_guarded(
        bare(&repo)
            .args(["check", "-r", &repo.location])
            .args(["--password-command", &command]),
    );
    assert_names_limit("password command", &out, limit);

    let location = padded_file(
        &dir.join("big-repository-file"),
        format!("{}\n", repo.location).as_bytes(),
        70 << 10,
    );
    let out = finish_guarded(
        bare(&repo)
            .args(["check", "--repository-file"])
            .arg(&location)
            .arg("-p")
            .arg(repo.password_file()),
    );
    assert_names_limit("repository file", &out, limit);
}

/// Item 7: a policy component over 64 MiB, a `policy eval` request over
/// 64 MiB (valid JSON, padded) and a watch configuration over 1 MiB (valid
/// TOML, padded with a comment) are errors naming the limit; watch does not
/// start.
#[test]
fn an_oversized_policy_request_or_watch_config_is_refused_naming_the_limit() {
    let repo = TestRepo::init_local();
    let dir = repo.dir.path();

    let policy = dir.join("huge.wasm");
    fs::File::create(&policy)
        .and_then(|f| f.set_len(65 << 20))
        .expect("a sparse 65 MiB policy");
    let out = finish_guarded(repo.lockwarden("check").arg("--policy").arg(&policy));
    assert_names_limit("policy", &out, 64 << 20);

    let example = Path::new(TESTS_DIR).join("../examples/request.json");
    let request = padded_file(
        &dir.join("huge-request.json"),
        &fs::read(example).expect("examples/request.json"),
        65 << 20,
    );
    let out = finish_guarded(
        bare(&repo)
            .args(["policy", "eval", "--request"])
            .arg(&request),
    );
    assert_names_limit("policy eval request", &out, 64 << 20);

    let mut config = format!(
        "state_dir = \"{}\"\n\n[[repository]]\nname = \"big\"\nrepository = \"{}\"\n\
         password_file = \"{}\"\ninterval = \"1h\"\n#",
        dir.join("state").display(),
        repo.location,
        repo.password_file().display()
    )
    .into_bytes();
    config.resize(config.len() + (1100 << 10), b'x');
    config.push(b'\n');
    let path = dir.join("huge-watch.toml");
    fs::write(&path, config).expect("write config");
    let out = Guarded::spawn(bare(&repo).args(["watch", "--config"]).arg(&path))
        .wait_within(Duration::from_secs(30))
        .unwrap_or_else(|out| panic!("watch started with a 1.1 MiB configuration: {out:?}"));
    assert_names_limit("watch config", &out, 1 << 20);
}

/// Item 7: a host inventory over 128 MiB (here printed by a command, valid
/// JSON after 129 MiB of spaces) is refused, naming the limit, and so proves
/// nothing: the young lock of an absent pod is kept.
#[test]
fn an_oversized_inventory_is_refused_and_proves_nothing() {
    let repo = TestRepo::init_local();
    let lock = young_velero_lock(&repo);
    let inventory = repo.dir.path().join("inventory.json");
    let started = time_from_now(-24 * 60 * MINUTE);
    fs::write(
        &inventory,
        json!([{"name": "velero-node-agent", "started": started, "state": "running"}]).to_string(),
    )
    .expect("write inventory");
    let command = format!(
        "head -c {} /dev/zero | tr '\\0' ' '; cat {}",
        129 << 20,
        inventory.display()
    );
    let out = finish_guarded(repo.lockwarden("unlock").args([
        "--json",
        "--hosts-command",
        &command,
        "--inventory-hosts",
        "^velero-",
    ]));
    assert!(repo.lock_ids().contains(&lock), "nothing removed: {out:?}");
    assert!(
        names_limit(&out.stderr, 128 << 20),
        "names the limit: {}",
        out.stderr
    );
    assert_eq!(verdict(&doc(&out), &lock), ("keep".into(), "fresh".into()));
}

/// Item 11: no error message repeats a secret: a TOML syntax error on the
/// password line of a watch configuration does not echo that line, and a
/// REST URL whose password holds a `/` never shows the password.
#[test]
fn secrets_never_appear_in_error_messages() {
    let repo = TestRepo::init_local();
    let dir = repo.dir.path();
    let secret = "s3cret-on-the-password-line";
    for (n, password_line) in [
        format!("password_command = \"echo {secret}"),
        format!("password_command = echo {secret}"),
        format!("password_env = '{secret}\" oops"),
    ]
    .into_iter()
    .enumerate()
    {
        let path = dir.join(format!("broken-{n}.toml"));
        fs::write(
            &path,
            format!(
                "[[repository]]\nname = \"r\"\nrepository = \"{}\"\n{password_line}\n",
                repo.location
            ),
        )
        .expect("write config");
        let out = Guarded::spawn(bare(&repo).args(["watch", "--config"]).arg(&path))
            .wait_within(Duration::from_secs(30))
            .unwrap_or_else(|out| panic!("watch started with a broken configuration: {out:?}"));
        assert_eq!(out.code, 2, "{password_line}: {out:?}");
        assert!(
            !all_output(&out).contains(secret),
            "{password_line}: the secret is echoed: {out:?}"
        );
    }

    let location = format!("rest:http://user:pa/ss@127.0.0.1:{}/repo", free_port());
    for subcommand in ["check", "unlock"] {
        let out = finish_guarded(
            bare(&repo)
                .args([subcommand, "-r", &location, "-p"])
                .arg(repo.password_file()),
        );
        assert_ne!(out.code, 0, "{out:?}");
        assert!(
            !all_output(&out).contains("pa/ss"),
            "{subcommand}: the password is shown: {out:?}"
        );
    }
}

/// Item 12: control characters in a lock's hostname or username are escaped
/// in text output and human logs (a newline becomes `\n`), so a lock cannot
/// forge lines such as "removed deadbeef ..." in `check`, `unlock` or the
/// logs of `run`.
#[test]
fn control_characters_in_lock_fields_cannot_forge_output_lines() {
    let repo = TestRepo::init_local();
    let writer = LockWriter::new(&repo);
    let hostname = "evil\nremoved deadbeef (root@backup, pid 1, expired): forged\n";
    let username = "mallory\rremoved cafebabe\u{1b}[2K";
    let lock = |age_minutes: i64| {
        writer.write_json(
            &json!({"time": time_from_now(-age_minutes * MINUTE), "exclusive": false,
                    "hostname": hostname, "username": username, "pid": 5})
            .to_string(),
            Encoding::Raw,
        )
    };
    let (stale, young) = (lock(120), lock(2));

    let check = warden(&repo, "check", &[]);
    let dry_run = warden(&repo, "unlock", &["--dry-run"]);
    let unlock = warden(&repo, "unlock", &[]);
    // Another stale lock, for `run` to remove and log.
    let stale_again = lock(121);
    let run = finish_guarded(repo.lockwarden("run").args(["--", "true"]));
    for (what, out) in [
        ("check", &check),
        ("unlock --dry-run", &dry_run),
        ("unlock", &unlock),
        ("run", &run),
    ] {
        let all = all_output(out);
        for line in all.lines() {
            let line = line.trim_start();
            assert!(
                !line.starts_with("removed deadbeef") && !line.starts_with("removed cafebabe"),
                "{what}: a forged line: {line:?}\n{all}"
            );
        }
        assert!(
            !all.contains('\r') && !all.contains('\u{1b}'),
            "{what}: raw control characters: {all:?}"
        );
    }
    assert!(
        check.stdout.contains("evil\\nremoved deadbeef"),
        "the hostname is shown escaped: {}",
        check.stdout
    );
    let left = repo.lock_ids();
    assert!(!left.contains(&stale) && !left.contains(&stale_again));
    assert!(left.contains(&young));
}

/// Item 13: a state directory that others can write to, or that another
/// user owns, is refused (exit 1) before anything is written there; and a
/// symlink planted as the store's `.lock` file is refused, not followed: its
/// target is neither created nor changed.
#[test]
fn an_unsafe_state_dir_is_refused_and_a_planted_lock_symlink_is_not_followed() {
    let repo = TestRepo::init_local();
    let dir = repo.dir.path();
    let id = repo.id();
    let check = |state: &Path| {
        warden(
            &repo,
            "check",
            &["--state-dir", state.to_str().expect("utf-8")],
        )
    };
    let make = |name: &str, mode: u32| -> PathBuf {
        let state = dir.join(name);
        fs::create_dir(&state).expect("mkdir");
        fs::set_permissions(&state, fs::Permissions::from_mode(mode)).expect("chmod");
        state
    };

    let safe = make("state-safe", 0o700);
    let out = check(&safe);
    assert_eq!(out.code, 0, "a private state dir works: {out:?}");

    for (name, mode, owner, says) in [
        ("state-world", 0o777, None, "writable by others"),
        ("state-group", 0o770, None, "writable by others"),
        ("state-foreign", 0o700, Some(65534), "owned"),
    ] {
        let state = make(name, mode);
        if let Some(uid) = owner {
            std::os::unix::fs::chown(&state, Some(uid), Some(uid)).expect("chown");
        }
        let out = check(&state);
        assert_eq!(out.code, 1, "{name}: {out:?}");
        assert!(out.stderr.contains(says), "{name}: {}", out.stderr);
        assert_eq!(
            fs::read_dir(&state).expect("read").count(),
            0,
            "{name}: nothing written there"
        );
    }

    let planted = make("state-planted", 0o700);
    let absent = dir.join("created-through-the-symlink");
    symlink(&absent, planted.join(format!("{id}.lock"))).expect("plant symlink");
    let out = check(&planted);
    assert!(!absent.exists(), "the symlink was followed: {out:?}");
    assert_eq!(out.code, 1, "{out:?}");

    let precious = dir.join("precious");
    fs::write(&precious, "precious bytes").expect("write");
    let planted = make("state-planted-2", 0o700);
    symlink(&precious, planted.join(format!("{id}.lock"))).expect("plant symlink");
    let out = check(&planted);
    assert_eq!(
        fs::read_to_string(&precious).ok().as_deref(),
        Some("precious bytes")
    );
    assert_eq!(out.code, 1, "{out:?}");
}

/// Item 15: `run` treats restic's exit code 11 (restic 0.17+: "repository is
/// locked") as a lock failure and retries, even when stderr lacks the old
/// message.
#[test]
fn run_retries_when_restic_exits_11() {
    let repo = TestRepo::init_local();
    let attempts = repo.dir.path().join("attempts");
    let script = repo.dir.path().join("restic-0.17");
    fs::write(
        &script,
        format!(
            "#!/bin/sh\necho attempt >> '{a}'\n\
             if [ \"$(wc -l < '{a}')\" -lt 2 ]; then\n\
             echo 'unable to create lock in backend: locked by someone else' >&2\n\
             exit 11\nfi\nexit 0\n",
            a = attempts.display()
        ),
    )
    .expect("write script");
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).expect("chmod");
    let out = finish_guarded(
        repo.lockwarden("run")
            .args(["--retry-lock", "60s", "--"])
            .arg(&script),
    );
    let tried = fs::read_to_string(&attempts).unwrap_or_default();
    assert_eq!(tried.lines().count(), 2, "retried once: {out:?}");
    assert_eq!(out.code, 0, "{out:?}");
}
