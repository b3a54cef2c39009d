//! The S3, Azure and GCS test servers (lockwarden_tests::cloud) work for
//! what the cloud backends' tests need: restic initialises and uses a
//! repository in each, a live holder's lock and a forged lock are seen, the
//! request counter counts exactly, the servers start quickly side by side,
//! and none outlives its test process. lockwarden itself is not run here.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use lockwarden_tests::cloud::{Bucket, Store};
use lockwarden_tests::lock_writer::{LockSpec, LockWriter, time_from_now};
use lockwarden_tests::restic::{Holder, TestRepo};

/// Set in the child process of [`no_server_outlives_its_test_process`].
const CHILD_MARKER: &str = "LOCKWARDEN_SERVERS_CHILD";

/// A restic repository in `store`: a holder's lock and a forged one are seen
/// by the helpers and by restic, and the repository is usable once they are
/// gone.
fn restic_works_in(store: Store) {
    let bucket = store.new_bucket();
    // restic's own init, on every store (the other tests take the template).
    let repo = bucket.repo("repo");
    repo.init();
    assert_eq!(
        repo.lock_ids(),
        BTreeSet::new(),
        "{store}: no lock after init"
    );

    let holder = Holder::start(&repo);
    assert!(
        repo.lock_ids().contains(&holder.lock_id),
        "{store}: the holder's lock"
    );
    let dead = holder.kill();

    let forged = LockWriter::new(&repo).write(LockSpec {
        time: time_from_now(-2 * 3600),
        hostname: "gone-host",
        ..LockSpec::default()
    });
    assert_eq!(
        repo.lock_ids(),
        BTreeSet::from([dead.clone(), forged.clone()]),
        "{store}"
    );
    let listed = restic_lock_ids(&repo);
    assert_eq!(
        listed,
        BTreeSet::from([dead.clone(), forged.clone()]),
        "{store}"
    );
    let cat = repo.restic(&["cat", "lock", &forged, "--no-lock"]);
    assert_eq!(
        cat.code, 0,
        "{store}: restic reads the forged lock: {cat:?}"
    );
    assert!(cat.stdout.contains("gone-host"), "{store}: {}", cat.stdout);

    let locks = bucket.remote("repo").join("locks");
    locks.remove(&dead);
    locks.remove(&forged);
    assert_eq!(repo.lock_ids(), BTreeSet::new(), "{store}");
    repo.assert_usable();
    assert_eq!(
        repo.lock_ids(),
        BTreeSet::new(),
        "{store}: restic removed its own locks"
    );
    cat.assert_no_secret(store.secrets());
}

/// `restic list locks`.
fn restic_lock_ids(repo: &TestRepo) -> BTreeSet<String> {
    let out = repo.restic(&["list", "locks", "--no-lock"]);
    assert_eq!(out.code, 0, "restic list locks: {out:?}");
    out.stdout.lines().map(str::to_owned).collect()
}

#[test]
fn restic_works_in_s3() {
    restic_works_in(Store::S3);
}

#[test]
fn restic_works_in_azure() {
    restic_works_in(Store::Azure);
}

#[test]
fn restic_works_in_gcs() {
    restic_works_in(Store::Gcs);
}

/// One plain GET of `path` on the bucket's server, whatever it answers.
fn get(bucket: &Bucket, path: &str) {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(10)))
        .build()
        .into();
    let url = format!("http://{}{path}", bucket.addr());
    agent
        .get(&url)
        .call()
        .unwrap_or_else(|e| panic!("GET {url}: {e}"));
}

/// The request counter counts every request for its own bucket exactly once
/// and none for another bucket of the same server; restic's requests are
/// counted too.
fn the_counter_counts_in(store: Store) {
    let bucket = store.new_bucket();
    let other = store.new_bucket();
    let object = match store {
        Store::Azure => format!(
            "/{}/{}/some/object",
            lockwarden_tests::cloud::AZURE_ACCOUNT,
            bucket.name
        ),
        Store::S3 | Store::Gcs => format!("/{}/some/object", bucket.name),
    };
    let before = (bucket.requests(), other.requests());
    for _ in 0..3 {
        get(&bucket, &object);
    }
    assert_eq!(
        (bucket.requests(), other.requests()),
        (before.0 + 3, before.1),
        "{store}: three requests for the bucket, none for the other"
    );

    let repo = bucket.init_repo("counted");
    let before_list = bucket.requests();
    restic_lock_ids(&repo);
    let restic_requests = bucket.requests() - before_list;
    assert!(
        restic_requests > 0,
        "{store}: restic's requests are counted"
    );
    assert_eq!(
        other.requests(),
        before.1,
        "{store}: the other bucket saw nothing"
    );
}

#[test]
fn the_counter_counts_s3_requests() {
    the_counter_counts_in(Store::S3);
}

#[test]
fn the_counter_counts_azure_requests() {
    the_counter_counts_in(Store::Azure);
}

#[test]
fn the_counter_counts_gcs_requests() {
    the_counter_counts_in(Store::Gcs);
}

/// The three servers start side by side in this process; each start time is
/// printed (`--nocapture` shows them) and is well under the helpers' limit.
#[test]
fn the_servers_start_side_by_side() {
    let begin = Instant::now();
    let starts: Vec<(Store, Duration)> = std::thread::scope(|scope| {
        let handles: Vec<_> = Store::ALL
            .map(|store| scope.spawn(move || (store, store.new_bucket().server().started_in())))
            .into();
        handles
            .into_iter()
            .map(|h| h.join().expect("start"))
            .collect()
    });
    for (store, took) in &starts {
        eprintln!("{store} started in {took:?}");
        assert!(
            *took < Duration::from_secs(20),
            "{store} took {took:?} to start"
        );
    }
    eprintln!(
        "all three ready (and a bucket in each) after {:?}",
        begin.elapsed()
    );
}

/// The child of [`no_server_outlives_its_test_process`]: starts the three
/// servers and prints their process groups. Run on its own, it only starts
/// them.
#[test]
#[ignore = "run by no_server_outlives_its_test_process in a child process"]
fn start_the_servers_and_print_their_groups() {
    let groups: Vec<String> = Store::ALL
        .map(|store| store.new_bucket().server().process_group().to_string())
        .into();
    if std::env::var_os(CHILD_MARKER).is_some() {
        println!("GROUPS {}", groups.join(" "));
    }
}

/// A test process that ends takes its servers with it: a child test process
/// starts all three and exits; a moment later no process of their groups is
/// left.
#[test]
fn no_server_outlives_its_test_process() {
    let exe = std::env::current_exe().expect("this test binary");
    let out = std::process::Command::new(exe)
        .args([
            "--exact",
            "cloud_servers::start_the_servers_and_print_their_groups",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_MARKER, "1")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run the child test process");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "child failed: {stdout}");
    let groups: Vec<i32> = stdout
        .lines()
        .find_map(|l| l.split_once("GROUPS ").map(|(_, groups)| groups))
        .expect("the child printed its servers' groups")
        .split(' ')
        .map(|g| g.parse().expect("a process group id"))
        .collect();
    assert_eq!(groups.len(), 3);
    assert!(groups.iter().all(|g| *g > 1));
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let alive = live_processes_in(&groups);
        if alive.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "left running after the test process ended: {alive:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The pids and command names of the live (not zombie) processes whose
/// process group is one of `groups`, from /proc.
fn live_processes_in(groups: &[i32]) -> Vec<String> {
    let mut alive = Vec::new();
    for entry in std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(Result::ok)
    {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid pgrp ...: comm may hold spaces, so split
        // after its closing parenthesis.
        let Some((head, rest)) = stat.rsplit_once(") ") else {
            continue;
        };
        let fields: Vec<&str> = rest.split(' ').collect();
        let (Some(state), Some(pgrp)) = (fields.first(), fields.get(2)) else {
            continue;
        };
        if *state != "Z" && pgrp.parse::<i32>().is_ok_and(|g| groups.contains(&g)) {
            alive.push(format!("{head})"));
        }
    }
    alive
}
