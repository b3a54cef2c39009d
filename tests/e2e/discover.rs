//! `watch` with only a `[discover]` table, against the Kubernetes emulator
//! (tests/servers/kube_emulator.py): repositories found in the operators'
//! objects and Secrets, pod evidence from the API, Events on the owning
//! object, and one leader among two replicas.

use std::path::{Path, PathBuf};
use std::time::Duration;

use lockwarden_tests::guard::{Guarded, wait_until};
use lockwarden_tests::kube_emulator::KubeEmulator;
use lockwarden_tests::lock_writer::{LockSpec, LockWriter, time_from_now};
use lockwarden_tests::lockwarden;
use lockwarden_tests::restic::{PASSWORD, TestRepo};
use serde_json::{Value, json};

/// How long a stopped `watch` may take before the test calls it hung.
const STOP_GUARD: Duration = Duration::from_secs(10);

/// A VolSync ReplicationSource `name` in namespace `app` whose repository
/// Secret names `repo`, and a running mover pod `live` started an hour ago.
fn volsync_objects(name: &str, repo: &TestRepo, live: &str) -> Value {
    json!([
        {"apiVersion": "v1", "kind": "Secret",
         "metadata": {"name": format!("{name}-restic"), "namespace": "app"},
         "stringData": {"RESTIC_REPOSITORY": repo.location, "RESTIC_PASSWORD": PASSWORD}},
        {"apiVersion": "volsync.backube/v1alpha1", "kind": "ReplicationSource",
         "metadata": {"name": name, "namespace": "app"},
         "spec": {"sourcePVC": "data", "restic": {"repository": format!("{name}-restic")}}},
        pod(live),
    ])
}

/// A running pod `name` in namespace `app`, started an hour ago.
fn pod(name: &str) -> Value {
    let started = time_from_now(-3600);
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": "app"},
           "spec": {"containers": [{"name": "restic", "image": "restic"}]},
           "status": {"phase": "Running", "startTime": started,
                      "containerStatuses": [{"name": "restic", "state": {"running": {"startedAt": started}}}]}})
}

/// A watch.toml in `dir` with `[discover]` (VolSync only, checks every
/// second) and `extra` lines.
fn discover_config(dir: &Path, extra: &str) -> PathBuf {
    let path = dir.join("watch.toml");
    std::fs::write(
        &path,
        format!(
            "state_dir = \"{}\"\n{extra}\n[discover]\nvolsync = true\nevery = \"1s\"\ninterval = \"1s\"\ntimeout = \"10s\"\n",
            dir.join("state").display()
        ),
    )
    .expect("write config");
    path
}

/// `watch --config` with the emulator's kubeconfig and no other cluster.
fn watch(dir: &Path, config: &Path, kubeconfig: &Path, pod_name: &str) -> Guarded {
    Guarded::spawn(
        lockwarden(&dir.join("cache"))
            .args(["watch", "--config"])
            .arg(config)
            .env("KUBECONFIG", kubeconfig)
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env("POD_NAMESPACE", "lockwarden")
            .env("POD_NAME", pod_name),
    )
}

fn stop(watch: Guarded) -> String {
    watch.signal("TERM");
    let finished = watch.finish_within(STOP_GUARD, "watch after SIGTERM");
    finished.stderr
}

/// The reasons of the Events on the ReplicationSource `name`.
fn event_reasons(kube: &KubeEmulator, name: &str) -> Vec<String> {
    kube.list("/api/v1/namespaces/app/events")["items"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| {
            e["involvedObject"]["name"] == name
                && e["involvedObject"]["kind"] == "ReplicationSource"
        })
        .filter_map(|e| e["reason"].as_str().map(str::to_owned))
        .collect()
}

/// A watch started with only `[discover]` finds VolSync's repository from
/// its object and Secret, removes the lock of a mover pod the API no longer
/// lists at its first check, keeps the lock of a pod that still runs,
/// creates an Event on the ReplicationSource, and never writes the
/// repository's password anywhere it logs.
#[test]
fn discovery_removes_a_gone_pods_lock_and_keeps_a_running_ones() {
    let repo = TestRepo::init_local();
    let kube = KubeEmulator::start(&[]);
    let live = "volsync-src-data-7f9c4";
    kube.apply(volsync_objects("data", &repo, live));
    let writer = LockWriter::new(&repo);
    let gone = writer.write(LockSpec {
        hostname: "volsync-src-data-x2b8q",
        ..LockSpec::default()
    });
    let kept = writer.write(LockSpec {
        hostname: live,
        time: time_from_now(-60),
        ..LockSpec::default()
    });
    let dir = repo.dir.path();
    let kubeconfig = kube.write_kubeconfig(dir);
    let watch = watch(dir, &discover_config(dir, ""), &kubeconfig, "lockwarden-0");
    wait_until("the gone pod's lock is removed", || {
        !repo.lock_ids().contains(&gone)
    });
    wait_until("an Event on the ReplicationSource", || {
        event_reasons(&kube, "data").contains(&"StaleLockRemoved".to_owned())
    });
    let log = stop(watch);
    assert!(
        repo.lock_ids().contains(&kept),
        "the running pod's lock was removed:\n{log}"
    );
    assert!(log.contains("app/ReplicationSource/data"), "{log}");
    assert!(
        !log.contains(PASSWORD),
        "the password reached the log:\n{log}"
    );
    let requests = kube.requests();
    assert!(
        requests.iter().any(|r| r.path == "/api/v1/pods"),
        "pods were not listed: {requests:?}"
    );
    assert!(
        requests.iter().all(|r| r.authorization),
        "a request without the token: {requests:?}"
    );
}

/// Two replicas share one Lease: one leads and removes, the other stands
/// by; a repository whose Secret lockwarden may not read (403) is reported
/// on its own and the other one is cleaned.
#[test]
fn two_replicas_elect_one_leader_and_a_forbidden_secret_stops_only_its_repository() {
    let repo = TestRepo::init_local();
    let other = TestRepo::init_local();
    let kube = KubeEmulator::start(&[]);
    kube.apply(volsync_objects("data", &repo, "volsync-src-data-7f9c4"));
    kube.apply(volsync_objects(
        "blocked",
        &other,
        "volsync-src-blocked-k2m7w",
    ));
    kube.forbid("get", "secrets", Some("app"), Some("blocked-restic"));
    kube.apply(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "lockwarden"}}),
    );
    let gone = LockWriter::new(&repo).write(LockSpec {
        hostname: "volsync-src-data-x2b8q",
        ..LockSpec::default()
    });
    let blocked_lock = LockWriter::new(&other).write(LockSpec {
        hostname: "volsync-src-blocked-x2b8q",
        ..LockSpec::default()
    });
    let dir = repo.dir.path();
    let kubeconfig = kube.write_kubeconfig(dir);
    let leader = "[leader]\nlease = \"lockwarden\"\n";
    let first = watch(
        dir,
        &discover_config(dir, leader),
        &kubeconfig,
        "lockwarden-0",
    );
    let second_dir = other.dir.path();
    let second = watch(
        second_dir,
        &discover_config(second_dir, leader),
        &kubeconfig,
        "lockwarden-1",
    );
    wait_until("the gone pod's lock is removed", || {
        !repo.lock_ids().contains(&gone)
    });
    let lease = kube.get("/apis/coordination.k8s.io/v1/namespaces/lockwarden/leases/lockwarden");
    assert_eq!(lease.0, 200, "{lease:?}");
    let (first, second) = (stop(first), stop(second));
    let leaders = [&first, &second]
        .iter()
        .filter(|log| log.contains("this replica leads now"))
        .count();
    assert_eq!(
        leaders, 1,
        "not exactly one leader:\n{first}\n---\n{second}"
    );
    assert!(
        other.lock_ids().contains(&blocked_lock),
        "the lock of the repository whose Secret is forbidden was removed"
    );
    let logs = format!("{first}{second}");
    assert!(
        logs.contains("may not read Secret app/blocked-restic"),
        "{logs}"
    );
    assert!(
        !logs.contains(PASSWORD),
        "the password reached the log:\n{logs}"
    );
}
