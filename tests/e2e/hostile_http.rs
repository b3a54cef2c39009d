//! The HTTP backends against hostile servers: a hostile S3-compatible server
//! of our own ([`HostileS3`]), and the fault proxy placed between lockwarden
//! and moto, Azurite, fake-gcs-server or `rclone serve restic`. Odd keys
//! never stop a listing; a listing that never ends ends within --timeout; a
//! listing page or error body of 300 MiB is refused with memory bounded; a
//! redirect is never followed, so no credential or `Referer` reaches the
//! other host; 401 and 403 exit 13 wherever they come, a missing bucket 10,
//! an unreachable server 14.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use lockwarden_tests::adversary::all_output;
use lockwarden_tests::cloud::{Bucket, GCS_PRIVATE_KEY, Store};
use lockwarden_tests::fault_proxy::{Fault, FaultProxy, Filter};
use lockwarden_tests::guard::{finish_guarded, finish_measured};
use lockwarden_tests::hostile_s3::{self, HostileS3, Mode, On, Op};
use lockwarden_tests::lock_writer::{LockSpec, LockWriter, time_from_now};
use lockwarden_tests::recorder::Recorder;
use lockwarden_tests::restic::{PASSWORD, TestRepo};
use lockwarden_tests::{Finished, lockwarden};

const HOUR: i64 = 3600;
/// The size of the hostile listing pages and error bodies.
const HUGE: u64 = 300 << 20;
/// Private writable memory a measured lockwarden may map: the engine's
/// untouched stack pool takes about 2 GiB of it (see `adversary_repo`).
const MEMORY_CAP: u64 = 4 << 30;
/// How much more memory than an honest check a refused 300 MiB answer may
/// cost: the bounded read (16 MiB) and its copies, far below the answer.
const MEMORY_HEADROOM_KIB: u64 = 128 << 10;

/// A restic repository on disk with a stale lock (2 h old, another host)
/// and a fresh one: (repository, stale id, fresh id).
fn repo_with_locks() -> (TestRepo, String, String) {
    let repo = TestRepo::init_local();
    let writer = LockWriter::for_dir(&repo.path, PASSWORD);
    let stale = writer.write(LockSpec {
        time: time_from_now(-2 * HOUR),
        hostname: "gone-host",
        pid: 7,
        ..LockSpec::default()
    });
    let fresh = writer.write(LockSpec {
        hostname: "busy-host",
        pid: 8,
        ..LockSpec::default()
    });
    (repo, stale, fresh)
}

/// `lockwarden <subcommand> -r <location> -p <password> --timeout <t>` with
/// `env` and none of the storage variables of the test's environment.
fn warden_at(
    dir: &Path,
    location: &str,
    env: &[(String, String)],
    subcommand: &str,
    extra: &[&str],
) -> Command {
    let password = dir.join("hostile-password");
    std::fs::write(&password, PASSWORD).expect("write the password file");
    let mut command = lockwarden(&dir.join("cache"));
    command
        .args([subcommand, "-r", location, "-p"])
        .arg(&password)
        .args(extra)
        .env("HOME", dir)
        .env_remove("RESTIC_REPOSITORY")
        .env_remove("RESTIC_PASSWORD");
    for (name, _) in std::env::vars() {
        if ["AWS_", "AZURE_", "AZURITE_", "GOOGLE_"]
            .iter()
            .any(|p| name.starts_with(p))
        {
            command.env_remove(name);
        }
    }
    command.envs(env.iter().map(|(k, v)| (k, v)));
    command
}

/// `lockwarden <subcommand>` against `server`, to completion.
fn against(server: &HostileS3, dir: &Path, subcommand: &str, extra: &[&str]) -> Finished {
    let out = finish_guarded(&mut warden_at(
        dir,
        &server.location(),
        &server.env(),
        subcommand,
        extra,
    ));
    out.assert_no_secret(&[hostile_s3::SECRET_KEY, hostile_s3::SESSION_TOKEN]);
    out
}

// Odd keys.

/// Keys object_store's paths refuse, each of which failed the whole
/// listing: nothing was judged, `hold` could not run.
const ODD_KEYS: [&str; 5] = [
    "locks//x",
    "locks/../x",
    "locks/./x",
    "locks/\u{1}x",
    "locks/ends-in-newline\n",
];

/// Odd keys beside the locks (the listing takes several pages): the stale
/// lock is still judged and removed, the fresh one kept, the odd objects
/// left alone, and `hold` runs its command.
#[test]
fn odd_keys_are_passed_over_on_a_hostile_s3() {
    let (repo, stale, fresh) = repo_with_locks();
    let server = HostileS3::serving(&repo.path, Mode::Honest);
    for key in ODD_KEYS {
        server.put(key, b"not a lock");
    }
    let dir = repo.dir.path();
    let out = against(&server, dir, "unlock", &[]);
    out.assert_exit(0, "");
    assert!(
        out.stdout.contains(&format!("removed {}", &stale[..8])),
        "{out:?}"
    );
    assert_eq!(server.lock_ids(), BTreeSet::from([fresh.clone()]));
    let left: BTreeSet<String> = server.list("locks/").into_iter().collect();
    for key in ODD_KEYS {
        assert!(left.contains(key), "{key:?} was touched: {left:?}");
    }
    // One plain DELETE per lock, never DeleteObjects.
    let requests = server.requests();
    assert!(
        requests.iter().any(|r| r.starts_with(&format!(
            "DELETE /{}/{}/locks/{stale}",
            hostile_s3::BUCKET,
            hostile_s3::PREFIX
        ))),
        "{requests:#?}"
    );
    assert!(
        !requests.iter().any(|r| r.starts_with("POST")),
        "{requests:#?}"
    );
    let held = against(&server, dir, "hold", &["--", "true"]);
    held.assert_exit(0, "");
    assert_eq!(
        server.lock_ids(),
        BTreeSet::from([fresh]),
        "hold released its lock"
    );
}

/// A DeleteObjects answer naming a key that was not asked for made
/// object_store panic (lockwarden died mid-run): deletes are plain DELETEs.
#[test]
fn a_delete_answer_naming_another_key_cannot_crash_lockwarden() {
    let (repo, stale, fresh) = repo_with_locks();
    let server = HostileS3::serving(&repo.path, Mode::ForeignDeleteResult);
    let out = against(&server, repo.dir.path(), "unlock", &[]);
    out.assert_exit(0, "");
    assert_eq!(
        server.lock_ids(),
        BTreeSet::from([fresh]),
        "{stale} removed"
    );
}

/// An Azure batch answer whose part names a sub-request that was never
/// sent (`Content-ID: 90` of one) made object_store index past its list
/// and panic: it is an error of that removal, said as one.
#[test]
fn an_azure_batch_answer_out_of_range_is_an_error_not_a_crash() {
    let (bucket, repo, stale) = store_repo(Store::Azure);
    let batch = Filter::with_query("POST ?comp=batch", |method, _, query| {
        method == "POST" && query.contains("comp=batch")
    });
    // A failed sub-request (404) for the 91st blob of a batch of one.
    let answer = Fault::Rewrite(&[
        ("Content-ID: 0", "Content-ID: 90"),
        ("HTTP/1.1 202", "HTTP/1.1 404"),
    ]);
    let (out, proxy) = proxied(&bucket, &repo, batch, answer, "unlock");
    assert!(proxy.injected() > 0, "{:?}", proxy.seen());
    // Not a crash (101): an error of that one delete, whose outcome the
    // listing after it decides. Azurite did delete the blob, so it is
    // "already gone".
    assert_eq!(out.code, 0, "{out:?}");
    assert!(out.stdout.contains("already gone"), "{out:?}");
    assert!(out.stdout.contains(&stale[..8]), "{out:?}");
}

// Listings that never end.

/// A listing whose next token is always the one it was asked with: an
/// error that says so, nothing removed.
#[test]
fn a_listing_that_repeats_its_token_is_refused() {
    let (repo, stale, _) = repo_with_locks();
    let server = HostileS3::serving(&repo.path, Mode::RepeatedToken);
    let out = against(&server, repo.dir.path(), "unlock", &["--timeout", "20s"]);
    assert_ne!(out.code, 0, "{out:?}");
    assert!(out.stderr.contains("continuation token"), "{}", out.stderr);
    assert!(server.lock_ids().contains(&stale), "nothing removed");
}

/// A listing with a new token and no entry on every page: it ends at
/// --timeout, nothing removed.
#[test]
fn an_endless_listing_ends_at_the_timeout() {
    let (repo, stale, _) = repo_with_locks();
    let server = HostileS3::serving(&repo.path, Mode::EndlessListing);
    let out = against(&server, repo.dir.path(), "unlock", &["--timeout", "3s"]);
    assert_ne!(out.code, 0, "{out:?}");
    assert!(out.stderr.contains("within"), "{}", out.stderr);
    assert!(server.lock_ids().contains(&stale), "nothing removed");
}

// Answers of hundreds of MiB.

/// Peak memory of `lockwarden check` against `server`, and what it printed.
fn measured_check(server: &HostileS3, dir: &Path) -> (Finished, u64) {
    let command = warden_at(dir, &server.location(), &server.env(), "check", &[]);
    finish_measured(&command, MEMORY_CAP)
}

/// A listing page and an error body of 300 MiB, chunked and with their
/// length declared: refused past 16 MiB, saying so, with memory bounded
/// (today's clients read them whole: over 300 MiB).
#[test]
fn huge_listing_pages_and_error_bodies_are_refused_with_memory_bounded() {
    let (repo, stale, _) = repo_with_locks();
    let dir = repo.dir.path();
    let (honest, baseline) = measured_check(&HostileS3::serving(&repo.path, Mode::Honest), dir);
    assert_eq!(honest.code, 3, "{honest:?}");
    for declared in [false, true] {
        let cases = [
            (
                Mode::HugeListing {
                    bytes: HUGE,
                    declared,
                },
                1,
            ),
            (
                Mode::HugeError {
                    status: 403,
                    bytes: HUGE,
                    declared,
                    on: On::LOCK_LISTING,
                },
                13,
            ),
            (
                Mode::HugeError {
                    status: 500,
                    bytes: HUGE,
                    declared,
                    on: On::GET,
                },
                1,
            ),
        ];
        for (mode, code) in cases {
            let label = format!("{mode:?}");
            let server = HostileS3::serving(&repo.path, mode);
            let (out, peak) = measured_check(&server, dir);
            eprintln!("{label}: {peak} KiB (honest: {baseline} KiB)");
            assert!(
                peak < baseline + MEMORY_HEADROOM_KIB,
                "{label}: {peak} KiB, an honest check {baseline} KiB"
            );
            out.assert_exit(code, "more than lockwarden reads");
            assert!(
                server.lock_ids().contains(&stale),
                "{label}: nothing removed"
            );
        }
    }
}

// Redirects.

/// A redirect (each status, on the first request and on the listing of
/// `locks/`) is an error that says so; the other host sees no request, so
/// neither the session token nor a `Referer`.
#[test]
fn a_hostile_s3_redirect_is_never_followed() {
    let (repo, stale, _) = repo_with_locks();
    for status in [301, 302, 303, 307, 308] {
        for on in [On::ANY, On::LOCK_LISTING] {
            let server = HostileS3::serving(&repo.path, Mode::Redirect { status, on });
            let out = against(&server, repo.dir.path(), "unlock", &[]);
            out.assert_exit(1, "never follows");
            assert!(out.stderr.contains(&status.to_string()), "{}", out.stderr);
            assert_eq!(server.redirected(), Vec::new(), "{status} {on:?}");
            assert!(server.lock_ids().contains(&stale), "nothing removed");
        }
    }
}

// Exit codes.

/// 401 and 403 on LIST and on GET exit 13, a missing bucket 10, nobody
/// listening 14; each says so without a secret.
#[test]
fn each_refusal_of_a_hostile_s3_has_its_exit_code() {
    let (repo, _, _) = repo_with_locks();
    let denied = |status, op, under| Mode::Status {
        status,
        code: if status == 401 {
            "InvalidToken"
        } else {
            "AccessDenied"
        },
        on: On { op, under },
    };
    let cases = [
        (denied(401, Op::List, ""), 13, "refused access"),
        (denied(403, Op::List, ""), 13, "refused access"),
        (denied(403, Op::List, "locks/"), 13, "refused access"),
        (denied(401, Op::Get, ""), 13, "refused access"),
        (denied(403, Op::Get, ""), 13, "refused access"),
        (
            Mode::Status {
                status: 404,
                code: "NoSuchBucket",
                on: On::ANY,
            },
            10,
            "bucket `hostile` does not exist",
        ),
        (Mode::Closed, 14, "cannot reach"),
    ];
    for (mode, code, text) in cases {
        let server = HostileS3::serving(&repo.path, mode.clone());
        let out = against(&server, repo.dir.path(), "check", &[]);
        assert_eq!(out.code, code, "{mode:?}: {out:?}");
        assert!(out.stderr.contains(text), "{mode:?}: {}", out.stderr);
    }
}

/// A 403 on DELETE and on PUT is a refusal too, named as one, with the
/// refusal's exit code (13) from the kind the error carries.
#[test]
fn a_refused_delete_or_write_is_a_refusal() {
    let (repo, stale, _) = repo_with_locks();
    let refused = |op| Mode::Status {
        status: 403,
        code: "AccessDenied",
        on: On { op, under: "" },
    };
    let server = HostileS3::serving(&repo.path, refused(Op::Delete));
    let out = against(&server, repo.dir.path(), "unlock", &[]);
    out.assert_exit(13, "refused access");
    assert!(server.lock_ids().contains(&stale));
    let server = HostileS3::serving(&repo.path, refused(Op::Put));
    let out = against(&server, repo.dir.path(), "hold", &["--", "true"]);
    out.assert_exit(13, "refused access");
}

// The emulators and the REST server, through the fault proxy.

/// Where lockwarden reaches `repo` of `bucket` through `proxy`: the
/// location and the environment.
fn through(bucket: &Bucket, repo: &TestRepo, proxy: &str) -> (String, Vec<(String, String)>) {
    let mut env = repo.env.clone();
    let location = repo.lockwarden_location.clone().unwrap_or_default();
    let set = |env: &mut Vec<(String, String)>, key: &str, value: String| {
        env.retain(|(k, _)| k != key);
        env.push((key.to_owned(), value));
    };
    match bucket.store {
        Store::S3 => (location.replace(bucket.addr(), proxy), env),
        Store::Azure => {
            set(
                &mut env,
                "AZURITE_BLOB_STORAGE_URL",
                format!("http://{proxy}"),
            );
            (location, env)
        }
        Store::Gcs => {
            let credentials = serde_json::json!({
                "type": "service_account",
                "client_email": "lockwarden-tests@example.invalid",
                "private_key_id": "lockwarden-tests",
                "private_key": GCS_PRIVATE_KEY,
                "gcs_base_url": format!("http://{proxy}"),
                "disable_oauth": true,
            });
            let file = repo.dir.path().join("gcs-through-proxy.json");
            std::fs::write(&file, credentials.to_string()).expect("write credentials");
            set(
                &mut env,
                "GOOGLE_APPLICATION_CREDENTIALS",
                file.display().to_string(),
            );
            (location, env)
        }
    }
}

/// A repository in `store` with a stale lock: (bucket, repository, stale id).
fn store_repo(store: Store) -> (Bucket, TestRepo, String) {
    let bucket = store.new_bucket();
    let repo = bucket.init_repo("repo");
    let stale = LockWriter::new(&repo).write(LockSpec {
        time: time_from_now(-2 * HOUR),
        hostname: "gone-host",
        ..LockSpec::default()
    });
    (bucket, repo, stale)
}

/// `lockwarden <subcommand>` on `repo` through a proxy that injects `fault`
/// into what `filter` selects.
fn proxied(
    bucket: &Bucket,
    repo: &TestRepo,
    filter: Filter,
    fault: Fault,
    subcommand: &str,
) -> (Finished, FaultProxy) {
    let proxy = FaultProxy::start(bucket.addr(), filter, fault);
    let (location, env) = through(bucket, repo, &proxy.addr);
    let out = finish_guarded(&mut warden_at(
        repo.dir.path(),
        &location,
        &env,
        subcommand,
        &[],
    ));
    out.assert_no_secret(bucket.store.secrets());
    (out, proxy)
}

/// The credentials that would leak: the S3 session token (a header) and
/// the Azure SAS (in the URL, so in a `Referer`). With each, a redirect of
/// the first request reaches nobody.
#[test]
fn no_session_token_or_sas_reaches_the_other_host() {
    let token = "S3-SESSION-TOKEN-7c1e9a";
    let sas = "sv=2022-11-02&ss=b&srt=co&sp=rl&se=2099-01-01T00:00:00Z&sig=SASSIGNATURE4d2f";
    for store in [Store::S3, Store::Azure] {
        let (bucket, mut repo, _) = store_repo(store);
        match store {
            Store::S3 => repo.env.push(("AWS_SESSION_TOKEN".into(), token.into())),
            _ => {
                repo.env.retain(|(k, _)| k != "AZURE_ACCOUNT_KEY");
                repo.env.push(("AZURE_ACCOUNT_SAS".into(), sas.into()));
            }
        }
        let other = Recorder::start();
        let (out, _proxy) = proxied(
            &bucket,
            &repo,
            Filter::all(),
            Fault::Redirect(other.addr),
            "check",
        );
        out.assert_exit(1, "never follows");
        assert!(!all_output(&out).contains("SASSIGNATURE"), "{out:?}");
        assert!(!all_output(&out).contains(token), "{out:?}");
        assert_eq!(other.requests(), Vec::new(), "{store}");
    }
}
