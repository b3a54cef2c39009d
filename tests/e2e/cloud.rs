//! The native object-store backends (`s3:`, `azure:`, `gs:`) against real
//! servers on 127.0.0.1 (moto, Azurite, fake-gcs-server), with restic
//! itself on the same buckets (directly for S3, through `rclone:` for the
//! others): the exit codes of each failure, secrets never shown, a stalled
//! server, and what `watch` costs per check. The reference scenario and
//! parity with `restic unlock` are the backend suite's
//! (`backend_suite.rs`), on every storage.

use std::time::{Duration, Instant};

use lockwarden_tests::adversary::all_output;
use lockwarden_tests::cloud::Store;
use lockwarden_tests::fault_proxy::{Fault, FaultProxy, Filter};
use lockwarden_tests::lock_writer::{LockSpec, LockWriter, time_from_now};
use lockwarden_tests::restic::TestRepo;
use lockwarden_tests::{Finished, finish};

const MINUTE: i64 = 60;

/// `lockwarden <command> -r <location>` with `repo`'s password and
/// environment.
fn at(repo: &TestRepo, location: &str, command: &str, extra: &[&str]) -> Finished {
    finish(
        lockwarden_tests::lockwarden(&repo.dir.path().join("cache"))
            .args([command, "-r", location, "-p"])
            .arg(repo.password_file())
            .args(extra)
            .envs(repo.env.iter().map(|(k, v)| (k.clone(), v.clone()))),
    )
}

/// A bucket that does not exist, a repository that does not, refused
/// credentials and an endpoint nobody answers: each its own exit code and
/// message, no secret in either.
#[test]
fn each_failure_has_its_exit_code_and_no_secret() {
    let bucket = Store::S3.new_bucket();
    let repo = bucket.init_repo("repo");
    let with = |location: String| {
        let out = at(&repo, &location, "check", &[]);
        out.assert_no_secret(Store::S3.secrets());
        out
    };
    let s3 = |path: &str| format!("s3:http://{}/{path}", bucket.addr());

    let no_bucket = with(s3("no-such-bucket/repo"));
    assert_eq!(no_bucket.code, 10, "{no_bucket:?}");
    assert!(
        no_bucket
            .stderr
            .contains("bucket `no-such-bucket` does not exist"),
        "{}",
        no_bucket.stderr
    );

    let no_repo = with(s3(&format!("{}/nothing-here", bucket.name)));
    assert_eq!(no_repo.code, 10, "{no_repo:?}");
    assert!(no_repo.stderr.contains("config"), "{}", no_repo.stderr);

    let port = lockwarden_tests::restic::free_port();
    let unreachable = with(format!("s3:http://127.0.0.1:{port}/{}/repo", bucket.name));
    assert_eq!(unreachable.code, 14, "{unreachable:?}");
    assert!(
        unreachable
            .stderr
            .contains("cannot reach s3:http://127.0.0.1"),
        "{}",
        unreachable.stderr
    );

    // Azurite checks the account key's signatures (moto does not).
    let azure = Store::Azure.new_bucket();
    let azure_repo = azure.init_repo("repo");
    let wrong_key = base64_of(b"not the account key, but 64 bytes long.......................!!");
    let refused = finish(
        azure_repo
            .lockwarden("check")
            .env("AZURE_ACCOUNT_KEY", &wrong_key),
    );
    assert_eq!(refused.code, 13, "{refused:?}");
    assert!(refused.stderr.contains("refused"), "{}", refused.stderr);
    assert!(!all_output(&refused).contains(&wrong_key), "{refused:?}");
    refused.assert_no_secret(Store::Azure.secrets());
}

fn base64_of(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A server that stops answering in the middle of the lock listing: the
/// run ends within the timeout and removes nothing.
#[test]
fn a_server_that_stalls_mid_listing_ends_in_time_and_removes_nothing() {
    let bucket = Store::S3.new_bucket();
    let repo = bucket.init_repo("repo");
    let stale = LockWriter::new(&repo).write(LockSpec {
        time: time_from_now(-120 * MINUTE),
        hostname: "gone-host",
        ..LockSpec::default()
    });
    // Listings are `GET /<bucket>?list-type=2&prefix=...`; the key listing
    // at open goes through untouched the first time.
    let name = bucket.name.clone();
    let listing = Filter::new("GET /<bucket> (listing)", move |method, path| {
        method == "GET" && path.trim_end_matches('/') == format!("/{name}")
    });
    let proxy = FaultProxy::start(
        bucket.addr(),
        listing,
        Fault::Drip(Duration::from_millis(500)),
    );
    let location = format!("s3:http://{}/{}/repo", proxy.addr, bucket.name);
    let started = Instant::now();
    let out = at(&repo, &location, "unlock", &["--timeout", "3s"]);
    let took = started.elapsed();
    assert_ne!(out.code, 0, "{out:?}");
    assert!(out.stderr.contains("within"), "{}", out.stderr);
    assert!(took < Duration::from_secs(30), "bounded: {took:?}");
    assert!(repo.lock_ids().contains(&stale), "nothing removed");
    out.assert_no_secret(Store::S3.secrets());
}

/// What `watch` costs: after its first check, one listing per check while
/// nothing changes (each lock was read once, and a lock's name is the hash
/// of its contents), where `restic unlock` reads the config, the keys and
/// every lock each time.
fn watch_lists_once_per_check(store: Store) {
    let bucket = store.new_bucket();
    let repo = bucket.init_repo("repo");
    let writer = LockWriter::new(&repo);
    for n in 0..3 {
        writer.write(LockSpec {
            time: time_from_now(-5 * MINUTE),
            hostname: &format!("busy-{n}"),
            pid: 50 + n,
            ..LockSpec::default()
        });
    }
    let cost = lockwarden_tests::cloud::cost::measure(&bucket, &repo, 3);
    println!("{store}: {cost:?}");
    assert!(cost.checks >= 3, "{store}: {cost:?}");
    assert_eq!(
        cost.watch_per_check, 1.0,
        "{store}: one listing per check: {cost:?}"
    );
    assert!(
        cost.restic_unlock > 3 && cost.lockwarden_unlock > 3,
        "{store}: both read the locks each time: {cost:?}"
    );
    assert_eq!(repo.lock_ids().len(), 3, "{store}: nothing removed");
}

#[test]
fn watch_on_s3_lists_once_per_check() {
    watch_lists_once_per_check(Store::S3);
}

#[test]
fn watch_on_azure_lists_once_per_check() {
    watch_lists_once_per_check(Store::Azure);
}

#[test]
fn watch_on_gcs_lists_once_per_check() {
    watch_lists_once_per_check(Store::Gcs);
}
