//! The native object-store backends (`s3:`, `azure:`, `gs:`) against real
//! servers on 127.0.0.1 (moto, Azurite, fake-gcs-server), with restic
//! itself on the same buckets (directly for S3, through `rclone:` for the
//! others): the reference scenario of the local backend, parity with
//! `restic unlock`, the exit codes of each failure, secrets never shown, a
//! stalled server, and what `watch` costs per check.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use lockwarden_tests::adversary::{all_output, pair, verdict};
use lockwarden_tests::cloud::Store;
use lockwarden_tests::fault_proxy::{Fault, FaultProxy, Filter};
use lockwarden_tests::lock_writer::{Encoding, LockSpec, LockWriter, time_from_now};
use lockwarden_tests::restic::{Holder, TestRepo};
use lockwarden_tests::{Finished, finish, parity};
use serde_json::Value;

const MINUTE: i64 = 60;

/// The contract's backend name of each store.
fn backend_name(store: Store) -> &'static str {
    match store {
        Store::S3 => "s3",
        Store::Azure => "azure",
        Store::Gcs => "gs",
    }
}

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

fn check_json(store: Store, repo: &TestRepo) -> (i32, Value) {
    let out = repo.warden("check", &["--json"]);
    out.assert_no_secret(store.secrets());
    out.json()
}

/// The local backend's scenario in `store`: a killed holder's lock and a
/// 2 h old foreign lock are removed; a live `restic backup`'s lock and a
/// young foreign lock are kept; restic works afterwards.
fn the_reference_scenario(store: Store) {
    let bucket = store.new_bucket();
    let repo = bucket.init_repo("team/repo");
    let live = Holder::start(&repo);
    let dead = Holder::start(&repo).kill();
    let writer = LockWriter::new(&repo);
    let old = writer.write(LockSpec {
        time: time_from_now(-120 * MINUTE),
        hostname: "gone-host",
        pid: 9,
        exclusive: true,
        encoding: Encoding::Zstd,
    });
    let young = writer.write(LockSpec {
        time: time_from_now(-10 * MINUTE),
        hostname: "other-host",
        pid: 10,
        ..LockSpec::default()
    });

    let (code, doc) = check_json(store, &repo);
    assert_eq!(code, 3, "{store}: {doc:#}");
    assert_eq!(doc["repository"]["backend"], backend_name(store), "{store}");
    assert_eq!(
        verdict(&doc, &dead),
        pair("remove", "process-dead"),
        "{store}"
    );
    assert_eq!(verdict(&doc, &old), pair("remove", "expired"), "{store}");
    assert_eq!(
        verdict(&doc, &live.lock_id),
        pair("keep", "holder-alive"),
        "{store}"
    );
    assert_eq!(verdict(&doc, &young).0, "keep", "{store}");

    let out = repo.warden("unlock", &[]);
    out.assert_no_secret(store.secrets());
    assert_eq!(out.code, 0, "{store}: {out:?}");
    assert!(
        out.stdout.contains(&format!("removed {}", &dead[..8])),
        "{store}: {}",
        out.stdout
    );
    assert_eq!(
        repo.lock_ids(),
        BTreeSet::from([live.lock_id.clone(), young.clone()]),
        "{store}: exactly the stale locks are gone"
    );
    // What restic sees agrees.
    let listed = repo.restic(&["list", "locks", "--no-lock"]);
    assert_eq!(listed.code, 0, "{store}: {listed:?}");
    let listed: BTreeSet<String> = listed.stdout.lines().map(str::to_owned).collect();
    assert_eq!(listed, repo.lock_ids(), "{store}");

    drop(live);
    bucket.remote("team/repo").join("locks").remove(&young);
    repo.assert_usable();
}

#[test]
fn s3_removes_exactly_the_stale_locks() {
    the_reference_scenario(Store::S3);
}

#[test]
fn azure_removes_exactly_the_stale_locks() {
    the_reference_scenario(Store::Azure);
}

#[test]
fn gcs_removes_exactly_the_stale_locks() {
    the_reference_scenario(Store::Gcs);
}

/// The same forged locks in two repositories of one bucket: about locks of
/// which nothing is known, `lockwarden unlock` keeps exactly what `restic
/// unlock` keeps (by age: 30 minutes).
fn with_no_evidence_lockwarden_keeps_what_restic_unlock_keeps(store: Store) {
    let bucket = store.new_bucket();
    let (ours, theirs) = (bucket.init_repo("ours"), bucket.init_repo("theirs"));
    let our_ids = parity::write_ages(&LockWriter::new(&ours));
    let their_ids = parity::write_ages(&LockWriter::new(&theirs));
    assert_eq!(ours.warden("unlock", &[]).code, 0);
    parity::restic_unlock_keeps_the_same(&ours, &our_ids, &theirs, &their_ids);
}

#[test]
fn on_s3_lockwarden_keeps_what_restic_unlock_keeps() {
    with_no_evidence_lockwarden_keeps_what_restic_unlock_keeps(Store::S3);
}

#[test]
fn on_azure_lockwarden_keeps_what_restic_unlock_keeps() {
    with_no_evidence_lockwarden_keeps_what_restic_unlock_keeps(Store::Azure);
}

#[test]
fn on_gcs_lockwarden_keeps_what_restic_unlock_keeps() {
    with_no_evidence_lockwarden_keeps_what_restic_unlock_keeps(Store::Gcs);
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
