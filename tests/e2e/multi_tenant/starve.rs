//! Starve the others: one tenant fills its namespace with repositories
//! whose storage lists lock files and never answers a read. Its checks
//! hold at most its share of the workers, each for at most its deadline
//! plus one call's timeout (docs/watch.md, "A hostile tenant"), and another
//! tenant's stale lock is removed within the documented delay.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use lockwarden::limits::{CHECK_TIMEOUTS, TENANT_WORKERS, WATCH_WORKERS};
use lockwarden_tests::discovery::{pod_in, stop, watch};
use lockwarden_tests::fake_rest::{FakeRest, Reply};
use lockwarden_tests::guard::Guarded;
use lockwarden_tests::kube_emulator::KubeEmulator;
use lockwarden_tests::lock_writer::{LockSpec, LockWriter};
use lockwarden_tests::restic::{PASSWORD, TestRepo};
use serde_json::{Value, json};

use super::{TENANT_A, TENANT_B};

/// The hostile tenant's repositories: more than the workers.
const HOSTILE: usize = WATCH_WORKERS + 2;
/// Lock files each hostile repository lists: read one after another, 8 at
/// a time, each until its timeout, they would hold a worker for 100
/// timeouts.
const HOSTILE_LOCKS: usize = 800;
/// The `timeout` of every discovered repository.
const TIMEOUT: Duration = Duration::from_secs(1);
/// How often discovery looks at the objects (`every`).
const EVERY: Duration = Duration::from_secs(1);

/// A watch.toml in `dir` for VolSync's objects, each repository checked
/// every second with [`TIMEOUT`].
fn config(dir: &Path) -> PathBuf {
    let path = dir.join("watch.toml");
    let text = format!(
        "state_dir = \"{}\"\n[discover]\nvolsync = true\nevery = \"{}s\"\ninterval = \"1s\"\ntimeout = \"{}s\"\n",
        dir.join("state").display(),
        EVERY.as_secs(),
        TIMEOUT.as_secs()
    );
    std::fs::write(&path, text).expect("write config");
    path
}

/// A VolSync ReplicationSource `name` in `namespace` and its Secret naming
/// the repository at `location`.
fn volsync(namespace: &str, name: &str, location: &str) -> [Value; 2] {
    [
        json!({"apiVersion": "v1", "kind": "Secret",
               "metadata": {"name": format!("{name}-restic"), "namespace": namespace},
               "stringData": {"RESTIC_REPOSITORY": location, "RESTIC_PASSWORD": PASSWORD}}),
        json!({"apiVersion": "volsync.backube/v1alpha1", "kind": "ReplicationSource",
               "metadata": {"name": name, "namespace": namespace},
               "spec": {"sourcePVC": "data", "restic": {"repository": format!("{name}-restic")}}}),
    ]
}

/// What the hostile servers were asked.
#[derive(Default)]
struct Asked {
    /// Listings of `locks/`, by server.
    listings: Vec<AtomicUsize>,
    /// Deletes, all servers together.
    deletes: AtomicUsize,
}

/// A REST server for `repo` that lists its lock files and never answers a
/// read of one; counted in `asked` as server `index`.
fn hostile_server(repo: &TestRepo, asked: &Arc<Asked>, index: usize) -> FakeRest {
    let asked = asked.clone();
    FakeRest::start(&repo.path, move |method, path| {
        if method == "DELETE" {
            asked.deletes.fetch_add(1, Ordering::SeqCst);
        }
        match path.strip_prefix("locks/") {
            Some("") => {
                asked.listings[index].fetch_add(1, Ordering::SeqCst);
                Reply::Default
            }
            Some(_) if method == "GET" => Reply::Hang,
            _ => Reply::Default,
        }
    })
}

/// Waits until `condition` holds, at most `guard` (the delay docs/watch.md
/// promises, not a timing assertion); otherwise stops `watch` and panics
/// with its log.
fn within(watch: Guarded, guard: Duration, what: &str, condition: impl Fn() -> bool) -> Guarded {
    let deadline = Instant::now() + guard;
    while !condition() {
        if Instant::now() > deadline {
            panic!(
                "not within {guard:?}: {what}; watch's log:\n{}",
                stop(watch)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    watch
}

/// Tenant A's repositories all hang on every lock read, more of them than
/// there are workers; tenant B's one repository, found while they are
/// checked, has its gone pod's lock removed within the delay docs/watch.md
/// promises; a hostile check ends at its deadline, failed, the next of the
/// tenant's repositories takes its worker, and nothing is removed from a
/// hostile repository.
#[test]
fn a_tenant_whose_storage_never_answers_does_not_starve_another() {
    let hostile = TestRepo::init_local();
    let locks = hostile.path.join("locks");
    std::fs::create_dir_all(&locks).expect("locks/");
    for i in 0..HOSTILE_LOCKS {
        std::fs::write(locks.join(format!("{i:064x}")), b"never read").expect("a lock file");
    }
    let asked = Arc::new(Asked {
        listings: (0..HOSTILE).map(|_| AtomicUsize::new(0)).collect(),
        ..Asked::default()
    });
    let servers: Vec<FakeRest> = (0..HOSTILE)
        .map(|i| hostile_server(&hostile, &asked, i))
        .collect();
    let kube = KubeEmulator::start(&[]);
    for (i, server) in servers.iter().enumerate() {
        kube.apply(json!(volsync(
            TENANT_A,
            &format!("app-{i}"),
            &server.location
        )));
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let kubeconfig = kube.write_kubeconfig(dir.path());
    let watch = watch(dir.path(), &config(dir.path()), &kubeconfig, "lockwarden-0");
    // A check's deadline, and the longest a check holds a worker.
    let check = TIMEOUT * (CHECK_TIMEOUTS + 1);
    // docs/watch.md: behind N hostile repositories due before it, a
    // repository waits at most (ceil(N / workers) + 1) checks; then
    // discovery's round and its own check.
    let bound = check * (u32::try_from(HOSTILE.div_ceil(WATCH_WORKERS)).expect("small") + 1)
        + EVERY
        + check;
    let busy = || asked.listings.iter().any(|n| n.load(Ordering::SeqCst) > 0);
    let watch = within(watch, bound, "tenant A's repositories are checked", busy);

    let healthy = TestRepo::init_local();
    let gone = LockWriter::new(&healthy).write(LockSpec {
        hostname: "volsync-src-data-x2b8q",
        ..LockSpec::default()
    });
    let server = FakeRest::start(&healthy.path, |_, _| Reply::Default);
    let [secret, source] = volsync(TENANT_B, "data", &server.location);
    kube.apply(json!([
        secret,
        source,
        pod_in(TENANT_B, "volsync-src-data-7f9c4")
    ]));
    let removed = || !healthy.lock_ids().contains(&gone);
    let watch = within(watch, bound, "tenant B's stale lock is removed", removed);
    // A hostile check ends at its deadline, and another of the tenant's
    // repositories takes its place.
    let listed = || {
        let listed = asked.listings.iter();
        listed.filter(|n| n.load(Ordering::SeqCst) > 0).count() > TENANT_WORKERS
    };
    let watch = within(watch, bound, "a hostile check ends", listed);
    let log = stop(watch);
    assert_eq!(
        asked.deletes.load(Ordering::SeqCst),
        0,
        "a lock of a hostile repository was removed:\n{log}"
    );
    assert!(
        log.contains("lock files not read; nothing was judged or removed"),
        "no hostile check ran out of time:\n{log}"
    );
}
